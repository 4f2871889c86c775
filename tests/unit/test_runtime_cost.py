"""What the runtime spends on every reconcile and every request, proved by counting (no timing).

A profile of the comparison benchmark (bench/HISTORY.md, "CPU cuts, second round") found
bookkeeping around each reconcile and each API request among the controller's costs: looking up
labelled metric series (``labels()`` takes a lock and builds a key on every call), copying the
whole context twice a pass to bind the log context (structlog's ``bound_contextvars``), and
rebuilding each module-level logger on every log call. These tests pin each of those to once,
and prove that watch events are decoded by orjson, with ``json`` only for what orjson refuses.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from prometheus_client import CollectorRegistry
from prometheus_client.metrics import MetricWrapperBase

from controller.runtime import informer as informermod
from controller.runtime import logs
from controller.runtime.client import JOBS, ClientMetrics, KubeClient
from controller.runtime.controller import Controller, ControllerMetrics, Result
from controller.runtime.informer import EventHandler, Informer
from controller.runtime.workqueue import WorkQueue
from tests.support.counting import CallCounter

PASSES = 50


async def test_a_reconcile_looks_up_no_metric_series_and_copies_no_context(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The series are looked up when the controller is made; each pass only increments them.
    The log context is bound from tokens and reset from them: structlog's context copy
    (``get_contextvars``) is never made. The reconcile still sees its context, and whatever was
    bound before is there again afterwards."""
    registry = CollectorRegistry()
    seen: list[dict[str, Any]] = []

    async def reconcile(key: str) -> Result:
        seen.append(dict(structlog.contextvars.get_contextvars()))
        return Result(requeue_after=60.0) if key.endswith("0") else Result()

    queue: WorkQueue[str] = WorkQueue("cost")
    controller = Controller(
        "cost", queue, reconcile, metrics=ControllerMetrics(registry), object_label="thing"
    )
    labels = CallCounter(monkeypatch, MetricWrapperBase, "labels")
    copies = CallCounter(monkeypatch, structlog.contextvars, "get_contextvars")
    structlog.contextvars.bind_contextvars(controller="outer")
    try:
        for i in range(PASSES):
            await controller.process(f"ns/js-{i}")
        after = dict(structlog.contextvars.get_contextvars())
    finally:
        structlog.contextvars.unbind_contextvars("controller")
        queue.shut_down()
    assert labels.count == 0
    assert copies.count == PASSES + 1  # the test's own reads inside the reconcile, and after
    assert [s["thing"] for s in seen] == [f"js-{i}" for i in range(PASSES)]
    assert {s["controller"] for s in seen} == {"cost"}
    assert {s["namespace"] for s in seen} == {"ns"}
    assert len({s["reconcileID"] for s in seen}) == PASSES
    assert after == {"controller": "outer"}  # restored, and nothing of the passes left behind
    total = registry.get_sample_value
    assert total("controller_runtime_reconcile_total", {"controller": "cost", "result": "success"})
    assert total(
        "controller_runtime_reconcile_time_seconds_count", {"controller": "cost"}
    ) == float(PASSES)


def test_a_request_looks_up_each_series_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each (code, method) series of the client's request counter, and each verb's rate-limiter
    histogram, is looked up the first time it is used, then reused."""
    registry = CollectorRegistry()
    metrics = ClientMetrics(registry)
    labels = CallCounter(monkeypatch, MetricWrapperBase, "labels")
    for _ in range(PASSES):
        for method, code in (("GET", "200"), ("PUT", "200"), ("PUT", "409")):
            metrics.wait(method).observe(0.0)
            metrics.request(code, method).inc()
    assert labels.count == 3 + 2  # three (code, method) pairs, two verbs
    value = registry.get_sample_value
    assert value("rest_client_requests_total", {"code": "409", "method": "PUT"}) == PASSES
    assert value("rest_client_rate_limiter_duration_seconds_count", {"verb": "PUT"}) == 2 * PASSES


@pytest.fixture
def configured_logs() -> Iterator[io.StringIO]:
    """``logs.configure`` writing to a buffer; structlog's defaults again afterwards."""
    out = io.StringIO()
    logs.configure("info")
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(out))
    try:
        yield out
    finally:
        structlog.reset_defaults()


def test_a_logger_is_built_once(
    monkeypatch: pytest.MonkeyPatch, configured_logs: io.StringIO
) -> None:
    """A module-level logger (a lazy proxy) is built on its first call, not on every call: a
    filtered debug line costs a level check, an info line its rendering."""
    log = structlog.get_logger("cost")
    builds = CallCounter(monkeypatch, structlog.BoundLoggerBase, "__init__")
    for i in range(PASSES):
        log.debug("filtered", i=i)
        log.info("kept", i=i)
    assert builds.count == 1
    lines = configured_logs.getvalue().splitlines()
    assert len(lines) == PASSES
    first = json.loads(lines[0])
    assert first["msg"] == "kept" and first["level"] == "info" and first["i"] == 0


def _job_event(i: int, version: int = 100, **status: Any) -> bytes:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"js-{i}-w-0",
            "namespace": "ns",
            "resourceVersion": str(version + i),
            "labels": {"jobset.sigs.k8s.io/jobset-name": f"js-{i}"},
            "managedFields": [{"manager": "kube-controller-manager", "fieldsV1": {"f:status": {}}}],
        },
        "spec": {"parallelism": 1, "completions": 1, "template": {"spec": {"containers": []}}},
        "status": {"active": 1, "startTime": "2026-12-01T10:26:21Z", **status},
    }
    return json.dumps({"type": "MODIFIED", "object": job}).encode()


def test_watch_events_are_decoded_without_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every watch event the API server can send is decoded by orjson: ``json.loads`` is never
    called, and the cache holds what ``json`` would have decoded. An event orjson refuses and
    ``json`` reads (a lone surrogate escape, which the API server never writes) is still read:
    by ``json``, once."""
    informer = Informer(KubeClient.__new__(KubeClient), JOBS, namespace="ns")
    lines = [_job_event(i, ready=1, uncountedTerminatedPods={}) for i in range(PASSES)]
    expected = [json.loads(line)["object"] for line in lines]
    surrogate = _job_event(0, message="X").replace(b'"X"', b'"\\ud800"')
    loads = CallCounter(monkeypatch, json, "loads")
    for line in lines:
        informer.handle_line(line)
    assert loads.count == 0
    assert len(informer.store) == PASSES
    for obj in expected:
        obj["metadata"].pop("managedFields")
        assert informer.store.get(f"ns/{obj['metadata']['name']}") == obj
    informer.handle_line(surrogate)
    assert loads.count == 1
    stored = informer.store.get("ns/js-0-w-0")
    assert stored is not None and stored["status"]["message"] == "\ud800"
    assert informer.malformed_events == 0


def test_an_update_event_reads_each_resource_version_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """An update reads the new and the cached object's resourceVersion once each (to refuse an
    older one and to tell a change from a resync), and the watch's own bookmark once more: 3
    reads per event (5 before, ~1.5% of the CPU samples at N=300)."""
    informer = Informer(KubeClient.__new__(KubeClient), JOBS, namespace="ns")
    updates: list[str] = []
    informer.add_handler(
        EventHandler(on_update=lambda old, new: updates.append(new["metadata"]["name"]))
    )
    for i in range(PASSES):
        informer.handle_line(_job_event(i))
    versions = CallCounter(monkeypatch, informermod, "_version")
    for i in range(PASSES):
        informer.handle_line(_job_event(i, 900, ready=1))
    assert len(updates) == PASSES
    assert versions.count == 3 * PASSES
    stale = _job_event(0, 100, ready=0)  # resourceVersion 100 < 900: dropped, no event
    informer.handle_line(stale)
    assert len(updates) == PASSES
    assert informer.store.get("ns/js-0-w-0")["status"]["ready"] == 1  # type: ignore[index]
