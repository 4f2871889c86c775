"""Fixtures of the real-node tier: the JobSet CRD and the controller as its own process."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controller.runtime.client import KubeClient
from tests.helpers import Kube
from tests.support.crd import install_crd
from tests.support.volumes_e2e import ControllerProcesses, controller_processes


@pytest.fixture
async def node_client(node_kube: Kube) -> AsyncIterator[KubeClient]:
    """An API client on the control plane with the real node, which has the JobSet CRD."""
    await install_crd(node_kube)
    yield KubeClient(node_kube.api)


@pytest.fixture
async def node_controller(
    node_kube: Kube, node_namespace: str, node_client: KubeClient, tmp_path: Path
) -> AsyncIterator[ControllerProcesses]:
    """The controller for the test's namespace, as its own process."""
    async with controller_processes(node_kube, node_namespace, node_client, tmp_path) as running:
        yield running
