"""The port's controller writes every status change, as upstream does
(``--status-progress-period=0``): the scenarios wait for counters upstream writes at once, and
this controller's pacing of them (its own extension, tested in test_status_pacing.py) would only
make each scenario wait for the next paced write."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from controller.runtime.client import KubeClient
from tests.helpers import Kube
from tests.support.jobsets import RunningController, running_controller

UPSTREAM_STATUS_WRITES = "--status-progress-period=0"


@pytest.fixture
async def controller(
    kube: Kube, namespace: str, client: KubeClient
) -> AsyncIterator[RunningController]:
    """The JobSet controller, in this event loop, watching the test's namespace, writing every
    status change."""
    async with running_controller(kube, namespace, UPSTREAM_STATUS_WRITES) as running:
        yield running


@pytest.fixture
async def restart_job_controller(
    kube: Kube, namespace: str, alpha_crd: KubeClient
) -> AsyncIterator[RunningController]:
    """The controller with the RestartJob feature gate on, over the alpha CRD, writing every
    status change."""
    async with running_controller(
        kube, namespace, "--feature-gates=RestartJob=true", UPSTREAM_STATUS_WRITES
    ) as running:
        yield running
