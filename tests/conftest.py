"""Shared test wiring: tiers by folder, the local control plane fixtures, per-tier counts.

Tiers: tests/unit (no cluster), tests/integration (etcd + kube-apiserver), tests/e2e (the whole
local control plane with KWOK). A test that needs a control plane and cannot get one fails; it is
never skipped (CI=true or not), so a green run always means the real thing ran.

Randomness: one seed per run, from ``STATEFUL_JOBSET_TEST_SEED`` or drawn afresh, printed in the
header and in the report of every failed randomised test. Hypothesis uses it (as
``--hypothesis-seed``, unless that is given) and the ``rng`` fixture derives each test's
``random.Random`` from it and the test's id, so the same seed repeats the same choices.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections import Counter
from collections.abc import AsyncIterator, Callable, Generator, Iterator
from pathlib import Path

import pluggy
import pytest
import uvloop
from hypothesis import settings
from kubernetes_asyncio import client, config

from localcluster.build import BuildError, ensure_min_apiserver
from localcluster.cluster import LocalCluster, Profile
from localcluster.processes import LaunchError
from tests.helpers import Kube, create_namespace
from tests.support import leftovers

# No per-example deadline for property tests: on a shared 2-core machine an example's duration
# says how busy the machine is, not whether the code is right (timing goes to the benchmarks).
settings.register_profile("stateful-jobset", deadline=None)
settings.load_profile("stateful-jobset")

TIERS = ("unit", "integration", "e2e", "node")
SEED_VARIABLE = "STATEFUL_JOBSET_TEST_SEED"
_SEED = pytest.StashKey[int]()


def _seed_from_environment() -> int:
    raw = os.environ.get(SEED_VARIABLE, "").strip()
    if not raw:
        return random.SystemRandom().randrange(2**32)
    try:
        return int(raw)
    except ValueError:
        raise pytest.UsageError(f"{SEED_VARIABLE}={raw!r} is not an integer") from None


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    seed = _seed_from_environment()
    config.stash[_SEED] = seed
    # Before hypothesis' own pytest_configure reads its option (tryfirst).
    if config.getoption("hypothesis_seed", None) is None:
        config.option.hypothesis_seed = str(seed)


def pytest_report_header(config: pytest.Config) -> str:
    seed = config.stash[_SEED]
    hypothesis = config.getoption("hypothesis_seed", None)
    also = "" if hypothesis == str(seed) else f"; hypothesis: --hypothesis-seed={hypothesis}"
    return f"random seed: {seed} ({SEED_VARIABLE}={seed} repeats this run's choices{also})"


def _randomised(item: pytest.Item) -> bool:
    return "rng" in getattr(item, "fixturenames", ()) or (
        item.get_closest_marker("hypothesis") is not None
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
    outcome = yield
    report = outcome.get_result()
    if report.failed and _randomised(item):
        seed = item.config.stash[_SEED]
        report.sections.append(
            ("random seed", f"{SEED_VARIABLE}={seed} pytest '{item.nodeid}' repeats its choices")
        )


def pytest_asyncio_loop_factories(
    config: pytest.Config, item: pytest.Item
) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
    """Every async test runs on uvloop, the loop the controller runs on (``--event-loop``)."""
    return {"uvloop": uvloop.new_event_loop}


@pytest.fixture
def seed(request: pytest.FixtureRequest) -> int:
    """This run's seed (print it in assertion messages of randomised tests)."""
    return request.config.stash[_SEED]


@pytest.fixture
def rng(request: pytest.FixtureRequest, seed: int) -> random.Random:
    """A ``random.Random`` for this test: the same for the same seed and test id."""
    return random.Random(f"{seed}/{request.node.nodeid}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        tier = _tier_of(Path(str(item.fspath)))
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))
    _own_real_nodes_first(items)


def _uses(item: pytest.Item, fixture: str) -> bool:
    return fixture in getattr(item, "fixturenames", ())


def _own_node(item: pytest.Item) -> bool:
    return item.get_closest_marker("own_node") is not None or _uses(item, "no_session_node")


def _own_real_nodes_first(items: list[pytest.Item]) -> None:
    """Tests that start a real node of their own (marker ``own_node`` or fixture
    ``no_session_node``) run before the first test that uses the session's: one real node per
    host (``node.HOST_LOCK``), and the session's stays up to the end, so such a test would wait
    for it forever. The order is otherwise unchanged."""
    first = next((i for i, item in enumerate(items) if _uses(item, "node_cluster")), None)
    if first is None:
        return
    own = [item for item in items[first:] if _own_node(item)]
    rest = [item for item in items[first:] if not _own_node(item)]
    items[first:] = own + rest


def _tier_of(path: Path) -> str:
    """The folder right under ``tests/``: the tier."""
    parts = path.parts
    for i, part in enumerate(parts[:-1]):
        if part == "tests" and parts[i + 1] in TIERS:
            return parts[i + 1]
    return "other"


def _tier(report: pytest.TestReport) -> str:
    return _tier_of(Path(report.fspath))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    counts: dict[str, Counter[str]] = {t: Counter() for t in TIERS}
    for outcome in ("passed", "failed", "error", "skipped"):
        for report in terminalreporter.stats.get(outcome, []):
            # Errors at teardown count too (a test that left a process running, say).
            if getattr(report, "when", "call") != "collect" and hasattr(report, "fspath"):
                if outcome == "passed" and report.when != "call":
                    continue
                counts.setdefault(_tier(report), Counter())[outcome] += 1
    terminalreporter.section("tiers")
    for tier, counter in counts.items():
        terminalreporter.write_line(
            f"{tier}: {counter['passed']} passed, {counter['failed'] + counter['error']} failed, "
            f"{counter['skipped']} skipped"
        )


# The session's control planes: their processes (kube-apiserver restarted by a test, too) outlive
# any one test on purpose.
_SESSION_CLUSTERS: list[LocalCluster] = []


@pytest.fixture(autouse=True)
def _stops_what_it_starts(request: pytest.FixtureRequest) -> Iterator[None]:
    """A test (its fixtures included) stops every process it starts, also when it fails.

    After each integration and e2e test, a child process of this one that was not there before
    and is not part of a session control plane is killed, and the test errors naming it. A
    ``ManagedProcess``'s own children go with it (PR_SET_PDEATHSIG). Unit tests are not checked:
    what they start ends within the call (a Go build, a short subprocess).
    """
    if request.node.get_closest_marker("unit") is not None:
        yield
        return
    before = leftovers.children()
    yield
    known = set(before) | {pid for c in _SESSION_CLUSTERS for pid in c.pids().values()}
    killed = leftovers.kill_new(known)
    if killed:
        pytest.fail(
            "left running by this test, killed now:\n  " + "\n  ".join(killed), pytrace=False
        )


def _start(
    tmp_path_factory: pytest.TempPathFactory, profile: Profile, *, oldest: bool = False
) -> LocalCluster:
    cluster = LocalCluster(tmp_path_factory.mktemp(f"cluster-{profile}"), profile=profile)
    _SESSION_CLUSTERS.append(cluster)
    try:
        if oldest:
            cluster.kube_apiserver = ensure_min_apiserver(cluster.report)
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
def oldest_apiserver_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """etcd + the kube-apiserver of the oldest Kubernetes release the project claims to support
    (localcluster/gomod/kubernetes-min; docs/operations.md, "Supported Kubernetes versions")."""
    cluster = _start(tmp_path_factory, "apiserver", oldest=True)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def full_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The whole control plane: scheduler, controllers, KWOK nodes, the test provisioner."""
    cluster = _start(tmp_path_factory, "full")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def kueue_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The whole control plane plus Kueue (JobSet integration, webhooks, a ClusterQueue), for
    the Kueue tests only: its webhooks act on every JobSet write of its API server, so no other
    test shares it."""
    cluster = _start(tmp_path_factory, "kueue")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def node_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """The control plane with one real node (containerd, runc, kubelet, a local image registry,
    CoreDNS) instead of KWOK's: containers run, volumes are directories on this host. A host
    that cannot run containers fails this tier with what it lacks (never a skip)."""
    cluster = _start(tmp_path_factory, "node")
    yield cluster
    cluster.stop()


@pytest.fixture
def no_session_node() -> None:
    """For a test that starts a real node of its own: the session's node holds the host-wide
    lock until the session ends, so the test's node would wait for it forever."""
    running = [c for c in _SESSION_CLUSTERS if c.profile == "node" and c.node is not None]
    if running:
        pytest.fail(
            f"the session's real node ({running[0].state_dir}) is up: this test's own node "
            "would wait for it until the session ends (run it before the node_cluster tests)",
            pytrace=False,
        )


async def _kube(cluster: LocalCluster) -> AsyncIterator[Kube]:
    api = await config.new_client_from_config(config_file=str(cluster.kubeconfig))
    async with api:
        yield Kube(api, cluster)


@pytest.fixture
async def kube(apiserver_cluster: LocalCluster) -> AsyncIterator[Kube]:
    async for k in _kube(apiserver_cluster):
        yield k


@pytest.fixture
async def oldest_kube(oldest_apiserver_cluster: LocalCluster) -> AsyncIterator[Kube]:
    async for k in _kube(oldest_apiserver_cluster):
        yield k


@pytest.fixture
async def full_kube(full_cluster: LocalCluster) -> AsyncIterator[Kube]:
    async for k in _kube(full_cluster):
        yield k


@pytest.fixture
async def kueue_kube(kueue_cluster: LocalCluster) -> AsyncIterator[Kube]:
    async for k in _kube(kueue_cluster):
        yield k


@pytest.fixture
async def node_kube(node_cluster: LocalCluster) -> AsyncIterator[Kube]:
    async for k in _kube(node_cluster):
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


@pytest.fixture
async def kueue_namespace(kueue_kube: Kube) -> AsyncIterator[str]:
    name = await create_namespace(kueue_kube, wait_for_service_account=True)
    yield name
    await client.CoreV1Api(kueue_kube.api).delete_namespace(name)


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture
async def node_namespace(node_kube: Kube) -> AsyncIterator[str]:
    name = await create_namespace(node_kube, wait_for_service_account=True)
    yield name
    await client.CoreV1Api(node_kube.api).delete_namespace(name)
