"""HA and observability, proven: two in-cluster replicas scraped by a real Prometheus server.

Both replicas run exactly as in pods (service-account token, no kubeconfig, the manifests'
RBAC). JobSets keep being reconciled while the leader is killed; no JobSet gets a duplicate
child; Prometheus (Debian's server, on loopback) scrapes both replicas over HTTPS with a reader's
bearer token, as upstream's ServiceMonitor has it, and its query API finds the runtime,
leader-election and JobSet/volume series.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import yaml

from controller.jobset import api
from controller.runtime.client import JOBS, LEASES, KubeClient
from localcluster.processes import ManagedProcess, free_port
from tests.helpers import Kube, wait_for
from tests.support.incluster import ROOT, mint_token, service_account_dir, start_in_cluster
from tests.support.jobsets import wait_condition
from tests.support.prometheus import query, secure_job, start_prometheus
from tests.support.replicas import Replica
from tests.support.securemetrics import reader_token

LEASE_NAME = "stateful-jobset-controller"


def _replica(kube: Kube, folder: Path, identity: str, tmp: Path, namespace: str) -> Replica:
    short_lease = ("--lease-duration=6", "--renew-deadline=4", "--retry-period=0.8")
    return start_in_cluster(kube, folder, namespace, identity, tmp, *short_lease)


async def test_ha_failover_and_prometheus_scraping(
    full_kube: Kube,
    full_namespace: str,
    installed: tuple[str, str],
    tmp_path: Path,
) -> None:
    system_namespace, account = installed
    token = await mint_token(full_kube, system_namespace, account)
    folder = service_account_dir(tmp_path, full_kube, system_namespace, token)
    replicas: dict[str, Replica] = {}
    prom: ManagedProcess | None = None
    admin = KubeClient(full_kube.api)
    try:
        for name in ("replica-a", "replica-b"):
            replicas[name] = _replica(full_kube, folder, name, tmp_path, full_namespace)
        prom_port = free_port()
        targets = [f"127.0.0.1:{r.metrics_port}" for r in replicas.values()]
        # As upstream's ServiceMonitor: HTTPS (the replicas' self-signed certificates, not
        # verified) with the token of a ServiceAccount bound to the metrics-reader role.
        scraper_token = tmp_path / "scraper-token"
        scraper_token.write_text(reader_token(full_kube.cluster.kubeconfig))
        prom = start_prometheus(
            prom_port, tmp_path, [secure_job("stateful-jobset", targets, scraper_token)]
        )

        async def holder() -> str:
            lease = await admin.get(LEASES, LEASE_NAME, system_namespace)
            return str((lease.get("spec") or {}).get("holderIdentity") or "")

        leader = await wait_for(holder, lambda h: h in replicas, "a leader", seconds=60)
        seed = yaml.safe_load(
            (ROOT / "manifests" / "examples" / "seed-volume-policy.yaml").read_text()
        )
        names = []
        for i in range(3):
            body = json.loads(json.dumps(seed))
            body["metadata"]["name"] = f"ha-{i}"
            names.append(body["metadata"]["name"])
            await admin.create(api.JOBSETS, body, full_namespace)
        await asyncio.sleep(1.0)  # the leader is creating their Jobs and claims meanwhile
        replicas[leader].process.kill()  # in the middle of the work
        standby = next(n for n in replicas if n != leader)
        await wait_for(holder, lambda h: h == standby, "the standby to take over", seconds=60)
        for i in range(3, 5):
            body = json.loads(json.dumps(seed))
            body["metadata"]["name"] = f"ha-{i}"
            names.append(body["metadata"]["name"])
            await admin.create(api.JOBSETS, body, full_namespace)
        for name in names:
            await wait_condition(admin, full_namespace, name, api.COMPLETED, seconds=180)
        jobs = (await admin.list(JOBS, full_namespace))["items"]
        job_names = [j["metadata"]["name"] for j in jobs]
        # Names are unique in a namespace: the count says all are there, the audit log below
        # that none was created twice.
        assert len(job_names) == 4 * len(names), sorted(job_names)
        for job in jobs:
            assert len(job["metadata"]["ownerReferences"]) == 1
        # No duplicate writes: every Job and claim was created by one request of ours, across
        # both replicas and the failover (from the API server's own audit log). A create in
        # flight when the leader was killed may have stored its object and still be answered
        # with an error (504: its client was gone); then no other create of it succeeded (the
        # standby found it, its own create answered 409).
        answers: dict[str, list[int]] = {}
        for raw in full_kube.cluster.audit_log.read_text().splitlines():
            entry = json.loads(raw)
            ref = entry.get("objectRef") or {}
            if (
                entry.get("verb") == "create"
                and entry.get("stage") == "ResponseComplete"
                and ref.get("namespace") == full_namespace
                and ref.get("resource") in ("jobs", "persistentvolumeclaims")
                and str(entry.get("userAgent", "")).startswith("stateful-jobset/")
            ):
                key = f"{ref['resource']}/{ref.get('name')}"
                code = (entry.get("responseStatus") or {}).get("code")
                answers.setdefault(key, []).append(code if isinstance(code, int) else 0)
        assert len(answers) == 5 * len(names), sorted(answers)
        for key, codes in answers.items():
            assert codes.count(201) <= 1, (key, codes)  # never created twice
            lost = [c for c in codes if c >= 500]
            # Created by a request answered 201, or by the one lost at the kill.
            assert codes.count(201) == 1 or len(lost) == 1, (key, codes)
        assert sum(1 for codes in answers.values() if 201 not in codes) <= 1, answers

        # Prometheus scrapes the survivor (the killed replica's target is down).
        def series(expression: str) -> list[dict[str, Any]]:
            return query(prom_port, expression)

        deadline = time.monotonic() + 60
        wanted = {
            "reconciles": 'controller_runtime_reconcile_total{controller="jobset"}',
            "depth": 'workqueue_depth{name="jobset"}',
            "leader": "sum(leader_election_master_status)",
            "completed": "jobset_completed_total",
            "claims": "jobset_volume_claims_created_total",
            "phases": 'jobset_volume_claims{phase="Bound"}',
        }
        found: dict[str, list[dict[str, Any]]] = {}
        while time.monotonic() < deadline:
            found = {key: series(expression) for key, expression in wanted.items()}
            if all(found.values()):
                break
            await asyncio.sleep(1)
        missing = [key for key, result in found.items() if not result]
        assert not missing, f"Prometheus has no series for {missing}"
        assert float(found["leader"][0]["value"][1]) == 1.0
        up = series('up{job="stateful-jobset"}')
        assert sorted(float(r["value"][1]) for r in up) == [0.0, 1.0]
    finally:
        if prom is not None:
            prom.kill()
        for replica in replicas.values():
            replica.process.kill()
