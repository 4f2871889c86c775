"""A controller process on the runtime: endpoints, metrics, structured logs, bad input, and
upstream JobSet's manager command lines (its chart's, its kustomize manifests'), as it passes
them, starting this controller."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from controller import configfile, kubeversion
from controller.runtime.client import CONFIG_MAPS, KubeClient
from localcluster.processes import free_port
from localcluster.upstream import module_dir
from tests.helpers import Kube, Progress, progress, wait_for
from tests.support import upstreamcli
from tests.support.helm import Helm, Obj, parse, values_file
from tests.support.replicas import Replica, start_replica, wait_holder, wait_until
from tests.support.securemetrics import reader_token

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


def test_a_bad_environment_variable_is_named(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "controller"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "STATEFUL_JOBSET_WORKERS": "many"},
    )
    assert result.returncode == 2
    assert "STATEFUL_JOBSET_WORKERS (--workers): invalid value 'many'" in result.stderr


# ------------------------------------------------- upstream JobSet's command line, as it passes it


def _upstream_chart(tmp_path: Path, values: dict[str, Any] | None = None) -> tuple[Obj, str]:
    """Upstream v0.12.0's own chart, rendered: its controller container and its Configuration
    file (the ConfigMap's controller_manager_config.yaml)."""
    helm = Helm(tmp_path / "helm-home")
    args = ["template", "jobset", str(module_dir() / "charts" / "jobset"), "-n", "jobset-system"]
    if values is not None:
        args += ["--values", str(values_file(tmp_path, values))]
    objects = parse(helm.run(*args).stdout)
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (config_map,) = [o for o in objects if o["kind"] == "ConfigMap"]
    return container, str(config_map["data"]["controller_manager_config.yaml"])


def _verified_scrape(port: int, token: str, context: ssl.SSLContext) -> tuple[int, str]:
    request = urllib.request.Request(f"https://127.0.0.1:{port}/metrics")
    request.add_header("Authorization", f"Bearer {token}")
    with urllib.request.urlopen(request, timeout=15, context=context) as response:
        return int(response.status), response.read().decode()


def _same_settings(text: str, expected: str) -> None:
    assert configfile.parse(text) == configfile.parse(expected)


async def _server_minor(kube: Kube) -> str:
    found = kubeversion.server_version(await kube.raw("GET", "/version"))
    assert found.minor is not None
    return f"{found.minor[0]}.{found.minor[1]}"


def _lines(replica: Replica, msg: str) -> list[dict[str, Any]]:
    return [line for line in replica.log_lines() if line.get("msg") == msg]


async def test_upstreams_chart_command_line_and_configuration_run_the_controller(
    kube: Kube, client: KubeClient, namespace: str, tmp_path: Path
) -> None:
    """Upstream's chart's args (--zap-log-level=2, --config with its ConfigMap's file) start this
    controller: the file's leader election is on (the Lease is taken), its client limits apply,
    its webhook certificate settings are reported as ignored, the log is at debug level, the API
    server's version is checked, and /metrics is HTTPS with token review, as upstream's."""
    container, config = _upstream_chart(tmp_path)
    assert tuple(container["args"]) == upstreamcli.CHART_ARGS
    _same_settings(config, upstreamcli.CHART_CONFIG)
    path = tmp_path / "controller_manager_config.yaml"
    path.write_text(config)
    lease = f"upstream-chart-{uuid.uuid4().hex[:6]}"
    replica = start_replica(
        kube.cluster.kubeconfig,
        namespace,
        "upstream-chart",
        tmp_path,
        lease_name=lease,
        module="controller",
        args=tuple(
            a.replace("/controller_manager_config.yaml", str(path)) for a in container["args"]
        ),
    )
    try:
        await wait_until(lambda: replica.get("/readyz")[0] == 200, "readiness")
        assert await wait_holder(client, namespace, lease, {"upstream-chart"}) == "upstream-chart"
        (read,) = _lines(replica, "read the configuration file")
        assert read["file"] == str(path)
        (ignored,) = _lines(replica, "ignored in the configuration file")
        assert ignored["field"] == "internalCertManagement"
        (starting,) = _lines(replica, "starting")
        assert starting["leader_elect"] is True
        (version,) = _lines(replica, "API server version")
        assert (version["version"], version["minimum"]) == (await _server_minor(kube), "1.35")
        # --zap-log-level=2 (a debug verbosity): debug here, libraries' lines included.
        assert starting["log_level"] == "debug"
        assert "DEBUG kubernetes_asyncio" in replica.process.log_path.read_text()
        assert replica.sample("leader_election_master_status", name=lease) == 1.0
        assert not [line for line in replica.log_lines() if line["level"] == "error"]
    finally:
        replica.process.kill()


async def test_upstreams_chart_with_cert_manager_serves_its_metrics_certificate(
    kube: Kube, client: KubeClient, namespace: str, tmp_path: Path
) -> None:
    """With certManager.enable, upstream's chart mounts the metrics certificate where
    controller-runtime looks for it ($TMPDIR/k8s-metrics-server/serving-certs, no flag): this
    controller serves it from there (here: the API server's serving certificate, which the
    cluster's CA verifies). The same file turns leader election off and lowers the limits."""
    container, config = _upstream_chart(tmp_path, upstreamcli.CHART_CERT_MANAGER_VALUES)
    assert tuple(container["args"]) == upstreamcli.CHART_ARGS
    _same_settings(config, upstreamcli.CHART_CONFIG_CERT_MANAGER)
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert "/tmp/k8s-metrics-server/serving-certs" in mounts
    temp = tmp_path / "tmp"
    folder = temp / "k8s-metrics-server" / "serving-certs"
    folder.mkdir(parents=True)
    shutil.copy(kube.cluster.pki.serving_cert, folder / "tls.crt")
    shutil.copy(kube.cluster.pki.serving_key, folder / "tls.key")
    path = tmp_path / "controller_manager_config.yaml"
    path.write_text(config)
    lease = f"upstream-cm-{uuid.uuid4().hex[:6]}"
    replica = start_replica(
        kube.cluster.kubeconfig,
        namespace,
        "upstream-cert-manager",
        tmp_path,
        lease_name=lease,
        module="controller",
        env={"TMPDIR": str(temp)},
        args=tuple(
            a.replace("/controller_manager_config.yaml", str(path)) for a in container["args"]
        ),
    )
    try:
        await wait_until(lambda: replica.get("/readyz")[0] == 200, "readiness")
        (starting,) = _lines(replica, "starting")
        assert starting["leader_elect"] is False
        verify = ssl.create_default_context(cafile=str(kube.cluster.pki.ca_cert))
        token = reader_token(kube.cluster.kubeconfig)
        status, body = _verified_scrape(replica.metrics_port, token, verify)
        assert status == 200, body
        assert "rest_client_requests_total" in body
        (serving,) = [line for line in replica.log_lines() if line.get("endpoint") == "metrics"]
        assert serving["certificate"] == str(folder / "tls.crt")
    finally:
        replica.process.kill()


async def test_upstreams_kustomize_command_lines_run_the_controller(
    kube: Kube, client: KubeClient, namespace: str, tmp_path: Path
) -> None:
    """The kustomize base's bare --leader-elect, and the release manifests' args with its own
    Configuration file, read from upstream's sources."""
    source = module_dir() / "config"
    base = yaml.safe_load_all((source / "components" / "manager" / "manager.yaml").read_text())
    (deployment,) = [d for d in base if d and d.get("kind") == "Deployment"]
    (base_container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert tuple(base_container["args"]) == upstreamcli.KUSTOMIZE_BASE_ARGS
    patch = yaml.safe_load((source / "default" / "manager_config_patch.yaml").read_text())
    (patched,) = patch["spec"]["template"]["spec"]["containers"]
    assert tuple(patched["args"]) == upstreamcli.KUSTOMIZE_DEFAULT_ARGS
    config = (source / "components" / "manager" / "controller_manager_config.yaml").read_text()
    assert config == upstreamcli.KUSTOMIZE_CONFIG
    path = tmp_path / "controller_manager_config.yaml"
    path.write_text(config)
    for identity, args in (
        ("kustomize-base", upstreamcli.KUSTOMIZE_BASE_ARGS),
        (
            "kustomize-release",
            tuple(a.replace("/controller_manager_config.yaml", str(path)) for a in patched["args"]),
        ),
    ):
        lease = f"{identity}-{uuid.uuid4().hex[:6]}"
        replica = start_replica(
            kube.cluster.kubeconfig,
            namespace,
            identity,
            tmp_path,
            lease_name=lease,
            module="controller",
            args=args,
        )
        try:
            assert await wait_holder(client, namespace, lease, {identity}) == identity
            await wait_until(lambda r=replica: r.get("/readyz")[0] == 200, "readiness")
        finally:
            replica.process.kill()
