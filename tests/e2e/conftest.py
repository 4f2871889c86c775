"""Fixtures of the end-to-end tier."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controller.runtime.client import KubeClient
from tests.helpers import Kube
from tests.support.crd import install_crd
from tests.support.incluster import installed
from tests.support.volumes_e2e import ControllerProcesses, controller_processes

__all__ = ["client", "controller", "installed"]


@pytest.fixture
async def client(full_kube: Kube) -> AsyncIterator[KubeClient]:
    """An API client on the full control plane, which has the JobSet CRD."""
    await install_crd(full_kube)
    yield KubeClient(full_kube.api)


@pytest.fixture
async def controller(
    full_kube: Kube, full_namespace: str, client: KubeClient, tmp_path: Path
) -> AsyncIterator[ControllerProcesses]:
    """The controller for the test's namespace, as its own process (``start`` adds a replica)."""
    async with controller_processes(full_kube, full_namespace, client, tmp_path) as processes:
        yield processes
