"""Fixtures of the integration tier shared by the JobSet controller tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from controller.runtime.client import KubeClient
from tests.helpers import Kube
from tests.support.crd import alpha_crd_installed, install_crd
from tests.support.jobsets import RunningController, running_controller


@pytest.fixture
async def client(kube: Kube) -> AsyncIterator[KubeClient]:
    """An API client on a cluster that has the JobSet CRD."""
    await install_crd(kube)
    yield KubeClient(kube.api)


@pytest.fixture
async def controller(
    kube: Kube, namespace: str, client: KubeClient
) -> AsyncIterator[RunningController]:
    """The JobSet controller, in this event loop, watching the test's namespace."""
    async with running_controller(kube, namespace) as running:
        yield running


@pytest.fixture
async def alpha_crd(kube: Kube, client: KubeClient) -> AsyncIterator[KubeClient]:
    """``client`` on the alpha-features CRD (every feature gate on) for this test; the session's
    API server gets the default CRD back afterwards, so later tests never see it."""
    async with alpha_crd_installed(kube):
        yield client


@pytest.fixture
async def restart_job_controller(
    kube: Kube, namespace: str, alpha_crd: KubeClient
) -> AsyncIterator[RunningController]:
    """The JobSet controller with the RestartJob feature gate on, over the alpha CRD."""
    async with running_controller(kube, namespace, "--feature-gates=RestartJob=true") as running:
        yield running
