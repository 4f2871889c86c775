"""Secure metrics with a certificate from a Secret, scraped by a real Prometheus (Debian's
server, on loopback).

The controller runs as in a pod (the manifests' ServiceAccount and RBAC, no kubeconfig) with the
flag of the secure-metrics component (the Secret's certificate). Prometheus scrapes it over HTTPS,
verifying the certificate, twice: with the token of a ServiceAccount bound to the shipped
metrics-reader ClusterRole (the target is up) and with one of a ServiceAccount without it (the
target is down, 403). The API server's audit log shows the reviews were made by the controller's
ServiceAccount. (HTTPS with the self-signed certificate, the default, is scraped by
test_ha_prometheus.py.)
"""

from __future__ import annotations

import asyncio
import shutil
import time
import uuid
from pathlib import Path

import yaml

from controller.runtime.client import ApiError, KubeClient, Resource
from controller.runtime.metricsauth import SUBJECT_ACCESS_REVIEWS
from localcluster import audit
from localcluster.processes import ManagedProcess, free_port
from tests.helpers import Kube, wait_for
from tests.support.incluster import mint_token, service_account_dir, start_in_cluster
from tests.support.prometheus import query, secure_job, start_prometheus
from tests.support.replicas import Replica, wait_until
from tests.support.securemetrics import READER_ROLE, controller_flags

SERVICE_ACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
CLUSTER_ROLES = Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False
)


def _by_job(port: int, expression: str) -> dict[str, float]:
    return {r["metric"].get("job", ""): float(r["value"][1]) for r in query(port, expression)}


async def test_prometheus_scrapes_secure_metrics_with_a_reader_token(
    full_kube: Kube, full_namespace: str, installed: tuple[str, str], tmp_path: Path
) -> None:
    admin = KubeClient(full_kube.api)
    system_namespace, account = installed
    # The shipped reader role, and a scraper account bound to it; another one is not.
    reader = yaml.safe_load(READER_ROLE.read_text())
    try:
        await admin.create(CLUSTER_ROLES, reader)
    except ApiError as err:
        if not err.already_exists:
            raise
    binding = f"metrics-reader-{uuid.uuid4().hex[:8]}"
    for name in ("prometheus", "nobody"):
        await admin.create(SERVICE_ACCOUNTS, {"metadata": {"name": name}}, full_namespace)
    await admin.create(
        CLUSTER_ROLE_BINDINGS,
        {
            "metadata": {"name": binding},
            "roleRef": {
                "apiGroup": CLUSTER_ROLES.group,
                "kind": "ClusterRole",
                "name": reader["metadata"]["name"],
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": "prometheus", "namespace": full_namespace}
            ],
        },
    )
    scraper = f"system:serviceaccount:{full_namespace}:prometheus"

    async def scraper_may_read() -> bool:
        review = {
            "apiVersion": SUBJECT_ACCESS_REVIEWS.api_version,
            "kind": SUBJECT_ACCESS_REVIEWS.kind,
            "spec": {
                "user": scraper,
                "groups": ["system:serviceaccounts"],
                "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
            },
        }
        answer = await admin.create(SUBJECT_ACCESS_REVIEWS, review)
        return bool(answer["status"].get("allowed"))

    await wait_for(scraper_may_read, bool, "the reader binding to take effect", seconds=30)
    tokens = tmp_path / "tokens"
    tokens.mkdir()
    for name in ("prometheus", "nobody"):
        (tokens / name).write_text(await mint_token(full_kube, full_namespace, name))

    # The controller, in-cluster, with the component's flag; the Secret stands in as the API
    # server's serving certificate (valid for 127.0.0.1, signed by the cluster CA).
    folder = service_account_dir(
        tmp_path,
        full_kube,
        system_namespace,
        await mint_token(full_kube, system_namespace, account),
    )
    certs = tmp_path / "metrics-tls"
    certs.mkdir()
    shutil.copy(full_kube.cluster.pki.serving_cert, certs / "tls.crt")
    shutil.copy(full_kube.cluster.pki.serving_key, certs / "tls.key")
    ca = full_kube.cluster.pki.ca_cert
    replica: Replica | None = None
    prom: ManagedProcess | None = None
    prom_port = free_port()
    try:
        replica = start_in_cluster(
            full_kube,
            folder,
            full_namespace,
            "secure-metrics",
            tmp_path,
            f"--leader-election-id=secure-{uuid.uuid4().hex[:6]}",
            *controller_flags(tmp_path / "overlay", certs),
        )
        ready = replica
        await wait_until(lambda: ready.get("/readyz")[0] == 200, "readiness (plain HTTP)")
        prom = start_prometheus(
            prom_port,
            tmp_path,
            [
                secure_job(name, [f"127.0.0.1:{replica.metrics_port}"], tokens / name, ca_file=ca)
                for name in ("prometheus", "nobody")
            ],
        )
        deadline = time.monotonic() + 60
        up: dict[str, float] = {}
        while time.monotonic() < deadline:
            up = _by_job(prom_port, "up")
            if up == {"prometheus": 1.0, "nobody": 0.0}:
                break
            await asyncio.sleep(1)
        assert up == {"prometheus": 1.0, "nobody": 0.0}, up
        for expression in (
            "process_start_time_seconds",
            "python_info",
            "leader_election_master_status",
            "controller_runtime_max_concurrent_reconciles",
        ):
            assert set(_by_job(prom_port, expression)) == {"prometheus"}, expression
        assert not query(prom_port, '{__name__=~".+_created"}')
        user = f"system:serviceaccount:{system_namespace}:{account}"
        reviews = {
            audit.write_key(e)
            for e in audit.entries(full_kube.cluster.audit_log, user)
            if e.get("user", {}).get("username") == user
            and (e.get("responseStatus") or {}).get("code") == 201
        }
        assert {"create tokenreviews", "create subjectaccessreviews"} <= reviews, reviews
        assert not [line for line in replica.log_lines() if line.get("level") == "error"]
    finally:
        if prom is not None:
            prom.kill()
        if replica is not None:
            replica.process.kill()
        await admin.delete(CLUSTER_ROLE_BINDINGS, binding)
