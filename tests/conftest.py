"""Shared test wiring: tiers by folder, the local control plane fixtures, per-tier counts.

Tiers: tests/unit (no cluster), tests/integration (etcd + kube-apiserver), tests/e2e (the whole
local control plane with KWOK). A test that needs a control plane and cannot get one fails; it is
never skipped (CI=true or not), so a green run always means the real thing ran.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client, config

from localcluster.build import BuildError
from localcluster.cluster import LocalCluster, Profile
from localcluster.processes import LaunchError
from tests.helpers import Kube, create_namespace

TIERS = ("unit", "integration", "e2e")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).parts
        for tier in TIERS:
            if tier in parts:
                item.add_marker(getattr(pytest.mark, tier))


def _tier(report: pytest.TestReport) -> str:
    parts = Path(report.fspath).parts
    return next((t for t in TIERS if t in parts), "other")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    counts: dict[str, Counter[str]] = {t: Counter() for t in TIERS}
    for outcome in ("passed", "failed", "error", "skipped"):
        for report in terminalreporter.stats.get(outcome, []):
            if getattr(report, "when", "call") in ("call", "setup") and hasattr(report, "fspath"):
                if outcome == "passed" and report.when != "call":
                    continue
                counts.setdefault(_tier(report), Counter())[outcome] += 1
    terminalreporter.section("tiers")
    for tier, counter in counts.items():
        terminalreporter.write_line(
            f"{tier}: {counter['passed']} passed, {counter['failed'] + counter['error']} failed, "
            f"{counter['skipped']} skipped"
        )


def _start(tmp_path_factory: pytest.TempPathFactory, profile: Profile) -> LocalCluster:
    cluster = LocalCluster(tmp_path_factory.mktemp(f"cluster-{profile}"), profile=profile)
    try:
        cluster.start()
    except (BuildError, LaunchError) as err:
        # Not a skip: without the control plane this tier proves nothing.
        pytest.fail(f"the local control plane ({profile}) could not start: {err}", pytrace=False)
    return cluster


@pytest.fixture(scope="session")
def apiserver_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """etcd + kube-apiserver only: object status is driven by the test itself."""
    cluster = _start(tmp_path_factory, "apiserver")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def full_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The whole control plane: scheduler, controllers, KWOK nodes, the test provisioner."""
    cluster = _start(tmp_path_factory, "full")
    yield cluster
    cluster.stop()


async def _kube(cluster: LocalCluster) -> AsyncIterator[Kube]:
    api = await config.new_client_from_config(config_file=str(cluster.kubeconfig))
    async with api:
        yield Kube(api, cluster)


@pytest.fixture
async def kube(apiserver_cluster: LocalCluster) -> AsyncIterator[Kube]:
    async for k in _kube(apiserver_cluster):
        yield k


@pytest.fixture
async def full_kube(full_cluster: LocalCluster) -> AsyncIterator[Kube]:
    async for k in _kube(full_cluster):
        yield k


@pytest.fixture
async def namespace(kube: Kube) -> AsyncIterator[str]:
    name = await create_namespace(kube, wait_for_service_account=False)
    yield name
    await client.CoreV1Api(kube.api).delete_namespace(name)


@pytest.fixture
async def full_namespace(full_kube: Kube) -> AsyncIterator[str]:
    name = await create_namespace(full_kube, wait_for_service_account=True)
    yield name
    await client.CoreV1Api(full_kube.api).delete_namespace(name)


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")
