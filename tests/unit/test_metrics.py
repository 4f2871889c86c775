"""What /metrics serves: upstream's labels, no ``*_created`` series, the standard collectors,
HTTPS with certificate reload, and the caches of the metrics authorizer.

The controller's real wiring (Manager + the JobSet setup) is built without a cluster: nothing
here talks to an API server; the informer caches are filled by hand.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from kubernetes_asyncio.client import ApiClient, Configuration
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from controller import config as configmod
from controller.config import Config
from controller.jobset import api
from controller.jobset.metrics import JOBSET_LABELS, JobSetMetrics
from controller.jobset.reconciler import JobSetReconciler
from controller.jobset.setup import setup
from controller.runtime.httpserver import OperatorServer, TlsFiles, exposition
from controller.runtime.manager import Manager
from controller.runtime.metricsauth import _TtlCache, bearer_token
from tests.support.certs import common_name, write_self_signed

# A series (or its HELP/TYPE lines) named <something>_created.
CREATED = re.compile(r"^(# (HELP|TYPE) )?[a-zA-Z_:][a-zA-Z0-9_:]*_created[ {]", re.MULTILINE)


@pytest.fixture
async def wired() -> AsyncIterator[tuple[Manager[Config], JobSetReconciler]]:
    config = configmod.parse(["--leader-elect=false"], env={})
    async with ApiClient(Configuration()) as api_client:
        manager = Manager(config, api_client)
        yield manager, setup(manager)


def _jobset(namespace: str, name: str, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.KIND,
        "metadata": {"namespace": namespace, "name": name, "resourceVersion": "1"},
        "status": status,
    }


def _fill(reconciler: JobSetReconciler, *objs: dict[str, Any]) -> None:
    for informer in reconciler.jobsets.informers.values():
        for obj in objs:
            informer.store.put(obj)


def _samples(text: str) -> list[Sample]:
    return [s for family in text_string_to_metric_families(text) for s in family.samples]


def _scrape(manager: Manager[Config]) -> str:
    return exposition(manager.registry).decode()


async def test_completed_and_failed_carry_upstreams_labels(
    wired: tuple[Manager[Config], JobSetReconciler],
) -> None:
    manager, reconciler = wired
    reconciler.metrics.jobset_completed("team-a", "train")
    reconciler.metrics.jobset_failed("team-b", "eval")
    samples = {s.name: s for s in _samples(_scrape(manager))}
    assert samples["jobset_completed_total"].labels == {
        "jobset_name": "train",
        "namespace": "team-a",
    }
    assert samples["jobset_completed_total"].value == 1.0
    assert samples["jobset_failed_total"].labels == {"jobset_name": "eval", "namespace": "team-b"}


async def test_every_per_jobset_series_has_the_same_two_labels(
    wired: tuple[Manager[Config], JobSetReconciler],
) -> None:
    manager, reconciler = wired
    _fill(
        reconciler,
        _jobset("team-a", "train", restarts=2, terminalState="Completed"),
        _jobset("team-b", "eval", restarts=0),
    )
    reconciler.metrics.jobset_completed("team-a", "train")
    reconciler.metrics.jobset_failed("team-b", "eval")
    samples = [s for s in _samples(_scrape(manager)) if s.name.startswith("jobset_")]
    per_jobset = {s.name for s in samples if set(s.labels) - {"phase"}}
    assert per_jobset == {
        "jobset_completed_total",
        "jobset_failed_total",
        "jobset_restarts",
        "jobset_terminal_state",
    }
    for sample in samples:
        if sample.name in per_jobset:
            assert set(sample.labels) - {"state"} == set(JOBSET_LABELS), sample
    restarts = {
        (s.labels["namespace"], s.labels["jobset_name"]): s.value
        for s in samples
        if s.name == "jobset_restarts"
    }
    assert restarts == {("team-a", "train"): 2.0, ("team-b", "eval"): 0.0}
    terminal = [s.labels for s in samples if s.name == "jobset_terminal_state"]
    assert terminal == [{"jobset_name": "train", "namespace": "team-a", "state": "Completed"}]


async def test_no_created_series_but_process_and_python_ones(
    wired: tuple[Manager[Config], JobSetReconciler],
) -> None:
    manager, reconciler = wired
    # Counters, histograms (the work queue's) and a labelled counter all have observations.
    reconciler.metrics.jobset_completed("ns", "a")
    reconciler.metrics.claims_created.inc()
    queue = manager.controllers[0].queue
    queue.add("ns/a")
    key = await queue.get()
    queue.done(key)
    text = _scrape(manager)
    names = {s.name for s in _samples(text)}
    assert "workqueue_queue_duration_seconds_count" in names
    assert "jobset_volume_claims_created_total" in names
    assert not CREATED.search(text)
    assert not {n for n in names if n.endswith("_created")}
    for wanted in (
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_start_time_seconds",
        "process_open_fds",
        "python_info",
        "python_gc_objects_collected_total",
    ):
        assert wanted in names, wanted


async def test_the_metrics_endpoint_serves_the_same_text(
    wired: tuple[Manager[Config], JobSetReconciler],
) -> None:
    manager, reconciler = wired
    reconciler.metrics.jobset_completed("ns", "a")
    server = OperatorServer(manager.registry, metrics_address=("127.0.0.1", 0), health_address=None)
    async with server, aiohttp.ClientSession() as session:
        host, port = server.bound["metrics"]
        async with session.get(f"http://{host}:{port}/metrics") as response:
            assert response.status == 200
            text = await response.text()
    names = {s.name for s in _samples(text)}
    assert "jobset_completed_total" in names
    assert "jobset_completed_created" not in names
    assert "process_cpu_seconds_total" in names


def test_a_counter_without_the_exposition_filter_would_have_created() -> None:
    # The filter is what removes them: prometheus_client itself still makes them.
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    JobSetMetrics(registry).jobset_completed("ns", "a")
    assert CREATED.search(generate_latest(registry).decode())
    assert not CREATED.search(exposition(registry).decode())


# ------------------------------------------------------------------------------------- HTTPS


async def _peer_common_name(port: int, cafile: Path) -> str:
    context = ssl.create_default_context(cafile=str(cafile))
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    try:
        ssl_object = writer.get_extra_info("ssl_object")
        der = ssl_object.getpeercert(binary_form=True)
        assert der is not None
        return common_name(der)
    finally:
        writer.close()
        await writer.wait_closed()


async def test_https_metrics_plain_health_and_certificate_reload(tmp_path: Path) -> None:
    from prometheus_client import CollectorRegistry

    live, first, second = tmp_path / "live", tmp_path / "first", tmp_path / "second"
    write_self_signed(first, "first")
    write_self_signed(second, "second")
    shutil.copytree(first, live)
    trust = tmp_path / "trust.pem"
    trust.write_bytes((first / "tls.crt").read_bytes() + (second / "tls.crt").read_bytes())
    server = OperatorServer(
        CollectorRegistry(),
        metrics_address=("127.0.0.1", 0),
        health_address=("127.0.0.1", 0),
        tls=TlsFiles(live / "tls.crt", live / "tls.key"),
        cert_poll_interval=3600,  # reloads are triggered by hand below
    )
    async with server, aiohttp.ClientSession() as session:
        assert server.certificate is not None
        metrics_port = server.bound["metrics"][1]
        health_port = server.bound["health"][1]
        verify = ssl.create_default_context(cafile=str(trust))
        async with session.get(f"https://127.0.0.1:{metrics_port}/metrics", ssl=verify) as response:
            assert response.status == 200
        async with session.get(f"http://127.0.0.1:{health_port}/healthz") as response:
            assert (response.status, await response.text()) == (200, "ok")
        with pytest.raises(aiohttp.ClientError):  # no plain-HTTP answer on the HTTPS port
            async with session.get(f"http://127.0.0.1:{metrics_port}/metrics") as response:
                await response.read()
        assert await _peer_common_name(metrics_port, trust) == "first"

        # A half-copied pair (the new certificate, the old key) does not load: keep serving.
        shutil.copy(second / "tls.crt", live / "tls.crt")
        assert server.certificate.reload_if_changed() is False
        assert await _peer_common_name(metrics_port, trust) == "first"
        # The whole new pair loads; new connections get it.
        shutil.copy(second / "tls.key", live / "tls.key")
        assert server.certificate.reload_if_changed() is True
        assert await _peer_common_name(metrics_port, trust) == "second"
        assert server.certificate.reload_if_changed() is False  # unchanged: nothing to do


async def test_the_watch_reloads_by_itself(tmp_path: Path) -> None:
    from prometheus_client import CollectorRegistry

    live, second = tmp_path / "live", tmp_path / "second"
    write_self_signed(live, "first")
    write_self_signed(second, "second")
    server = OperatorServer(
        CollectorRegistry(),
        metrics_address=("127.0.0.1", 0),
        health_address=None,
        tls=TlsFiles(live / "tls.crt", live / "tls.key"),
        cert_poll_interval=0.05,
    )
    async with server:
        assert server.certificate is not None
        # Replace the folder the way the kubelet updates a mounted Secret: new files, renamed in.
        staged = tmp_path / "staged"
        shutil.copytree(second, staged)
        for name in ("tls.crt", "tls.key"):
            (staged / name).replace(live / name)
        for _ in range(200):
            if server.certificate.loads == 2:
                break
            await asyncio.sleep(0.05)
        assert server.certificate.loads == 2
        trust = second / "tls.crt"
        assert await _peer_common_name(server.bound["metrics"][1], trust) == "second"


def test_https_metrics_cannot_share_the_health_address(tmp_path: Path) -> None:
    from prometheus_client import CollectorRegistry

    write_self_signed(tmp_path, "x")
    with pytest.raises(ValueError, match="health probes stay plain"):
        OperatorServer(
            CollectorRegistry(),
            metrics_address=("127.0.0.1", 8080),
            health_address=("127.0.0.1", 8080),
            tls=TlsFiles(tmp_path / "tls.crt", tmp_path / "tls.key"),
        )


# ------------------------------------------------------------------------ authorizer pieces


@pytest.mark.parametrize(
    ("header", "token"),
    [
        (None, None),
        ("", None),
        ("Bearer", None),
        ("Bearer ", None),
        ("Basic dXNlcjpwYXNz", None),
        ("Bearer abc.def", "abc.def"),
        ("bearer   abc ", "abc"),
    ],
)
def test_bearer_token(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


def test_ttl_cache_expires_entries_and_stays_bounded() -> None:
    now = [0.0]
    cache = _TtlCache(lambda: now[0], max_entries=3)
    cache.put("a", 1, ttl=10)
    cache.put("b", 2, ttl=100)
    now[0] = 9.9
    assert (cache.get("a"), cache.get("b")) == (1, 2)
    now[0] = 10.0
    assert cache.get("a") is None
    for key in ("c", "d", "e"):
        cache.put(key, key, ttl=100)
    assert len(cache) == 3
    assert cache.get("b") is None  # the oldest went first
    assert [cache.get(k) for k in ("c", "d", "e")] == ["c", "d", "e"]


async def test_jobsets_another_controller_manages_are_counted_not_reported(
    wired: tuple[Manager[Config], JobSetReconciler],
) -> None:
    manager, reconciler = wired
    theirs = {**_jobset("team-a", "upstream-run", restarts=3), "spec": {"managedBy": "x.io/up"}}
    also = {**_jobset("team-b", "other", terminalState="Failed"), "spec": {"managedBy": "x.io/up"}}
    kueue = {**_jobset("team-b", "queued"), "spec": {"managedBy": "kueue.x-k8s.io/multikueue"}}
    _fill(reconciler, _jobset("team-a", "ours", restarts=1), theirs, also, kueue)
    samples = _samples(_scrape(manager))
    reported = {s.labels["jobset_name"] for s in samples if "jobset_name" in s.labels}
    assert reported == {"ours"}
    elsewhere = {
        s.labels["managed_by"]: s.value
        for s in samples
        if s.name == "stateful_jobset_jobsets_managed_elsewhere"
    }
    assert elsewhere == {"x.io/up": 2.0, "kueue.x-k8s.io/multikueue": 1.0}
