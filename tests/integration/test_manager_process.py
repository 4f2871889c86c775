"""A controller process on the runtime: endpoints, metrics, structured logs, bad input."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.runtime.client import CONFIG_MAPS, KubeClient
from localcluster.processes import free_port
from tests.helpers import Kube, Progress, progress, wait_for
from tests.support.replicas import Replica, start_replica, wait_until

RUNTIME_METRICS = {
    "controller_runtime_reconcile_total",
    "controller_runtime_reconcile_errors_total",
    "controller_runtime_reconcile_time_seconds",
    "controller_runtime_max_concurrent_reconciles",
    "controller_runtime_active_workers",
    "workqueue_depth",
    "workqueue_adds_total",
    "workqueue_queue_duration_seconds",
    "workqueue_work_duration_seconds",
    "workqueue_retries_total",
    "workqueue_unfinished_work_seconds",
    "workqueue_longest_running_processor_seconds",
    "leader_election_master_status",
    "rest_client_requests_total",
}


@pytest.fixture
def replica(kube: Kube, namespace: str, tmp_path: Path) -> Iterator[Replica]:
    one = start_replica(
        kube.cluster.kubeconfig,
        namespace,
        "solo",
        tmp_path,
        lease_name=f"solo-{uuid.uuid4().hex[:6]}",
    )
    yield one
    one.process.kill()


async def test_metrics_health_and_logs(kube: Kube, namespace: str, replica: Replica) -> None:
    await wait_until(lambda: replica.get("/readyz")[0] == 200, "readiness")
    assert replica.get("/healthz") == (200, "ok")
    client = KubeClient(kube.api)
    body = {"metadata": {"name": "m", "labels": {"sample": "yes"}}, "data": {"v": "x"}}
    await client.create(CONFIG_MAPS, body, namespace)

    async def echoed() -> bool:
        obj = await client.get(CONFIG_MAPS, "m", namespace)
        return (obj["metadata"].get("annotations") or {}).get("sample.test/echo") == "x"

    await wait_for(echoed, bool, "the sample controller to echo")
    families = {f.name: f for f in text_string_to_metric_families(replica.metrics_text())}
    # prometheus_client strips _total from counter family names.
    names = {s.name for f in families.values() for s in f.samples} | set(families)
    assert names >= RUNTIME_METRICS, RUNTIME_METRICS - names

    echo_lines = [line for line in replica.log_lines() if line.get("msg") == "echoing"]
    assert echo_lines, "the reconcile's own log line"
    for line in echo_lines:
        assert line["controller"] == "sample"
        assert line["namespace"] == namespace
        assert line["configmap"] == "m"
        assert len(line["reconcileID"]) == 36
        assert line["level"] == "info"
    assert any(line.get("msg") == "caches synced" for line in replica.log_lines())

    # Nothing changes, nothing is written: the echo's own update comes back as an event and is
    # reconciled (the second reconcile of the only object) without a second PATCH.
    async def after_the_echo() -> Progress:
        return progress(text_string_to_metric_families(replica.metrics_text()), "sample")

    await wait_for(
        after_the_echo,
        lambda now: now.reconciles >= 2 and now.idle,
        "the echo's own update to be reconciled",
    )
    # Read once the queue is idle: the counters move when the PATCH's answer is back, which
    # may be after the test sees the echo.
    assert replica.sample(
        "controller_runtime_reconcile_total", controller="sample", result="success"
    )
    assert replica.sample("workqueue_adds_total", name="sample")
    assert replica.sample("rest_client_requests_total", code="200", method="PATCH") == 1.0


async def test_unreachable_api_server_is_retried_not_fatal(tmp_path: Path, kube: Kube) -> None:
    kubeconfig = tmp_path / "dead.kubeconfig"
    port = free_port()  # nothing listens there
    kubeconfig.write_text(
        kube.cluster.kubeconfig.read_text().replace(
            kube.cluster.server, f"https://127.0.0.1:{port}"
        )
    )
    replica = start_replica(kubeconfig, "default", "lonely", tmp_path, lease_name="lonely")
    try:
        await wait_until(lambda: replica.get("/healthz")[0] == 200, "liveness")
        await wait_until(
            lambda: any("retrying" in str(line.get("msg")) for line in replica.log_lines()),
            "a retry log line",
        )
        assert replica.process.running()
        status, body = replica.get("/readyz?verbose")
        assert status == 503
        assert "[-]informers-synced failed" in body
    finally:
        replica.process.kill()


def test_missing_kubeconfig_is_a_clear_error() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "controller", "--kubeconfig=/nowhere/kubeconfig"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "--kubeconfig '/nowhere/kubeconfig' does not exist" in result.stderr


def test_garbage_kubeconfig_is_a_clear_error(tmp_path: Path) -> None:
    broken = tmp_path / "kubeconfig"
    broken.write_text("this: [is not: a kubeconfig")
    result = subprocess.run(
        [sys.executable, "-m", "controller", f"--kubeconfig={broken}"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "cannot start" in result.stderr
