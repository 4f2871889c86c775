"""Scale benchmark: N JobSets at once on the local control plane with KWOK.

Each JobSet: two replicated jobs (2 Jobs each, 4 Jobs in all), one shared claim and one Job-scope
claim per Job of the first replicated job. For each N it measures, in one run:
- seconds until every child Job exists, and until every JobSet is Completed;
- API requests per JobSet by verb and resource, from the API server's own
  ``apiserver_request_total`` (not self-reported), and the controller's writes per JobSet;
- writes during a steady-state window after completion (must be 0);
- controller RSS (peak) and CPU seconds; reconcile latency percentiles from its histogram.

    .venv/bin/python bench/bench_scale.py --sizes 100 500 1000 [--steady 60]
Results: bench/results/scale.json (append per size) and a table on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubernetes_asyncio import config  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from controller.jobset import api  # noqa: E402
from controller.runtime.client import JOBS, NAMESPACES, KubeClient  # noqa: E402
from localcluster import pki  # noqa: E402
from localcluster.cluster import LocalCluster  # noqa: E402
from localcluster.demo import CRD, _wait_established  # noqa: E402
from localcluster.processes import ManagedProcess, free_port, https_get  # noqa: E402

NAMESPACE = "scale"
WRITE_VERBS = {"POST", "PUT", "PATCH", "DELETE"}


def jobset(name: str) -> dict[str, Any]:
    def rjob(rname: str, mounts: list[str]) -> dict[str, Any]:
        return {
            "name": rname,
            "replicas": 2,
            "template": {
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "busybox",
                                    "volumeMounts": [
                                        {"name": m, "mountPath": f"/{m}"} for m in mounts
                                    ],
                                }
                            ],
                        }
                    }
                }
            },
        }

    template = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.KIND,
        "metadata": {"name": name},
        "spec": {
            "replicatedJobs": [rjob("init", ["shared", "ckpt"]), rjob("train", ["shared"])],
            "volumeClaimPolicies": [
                {"templates": [{"metadata": {"name": "shared"}, "spec": template}]},
                {
                    "scope": "Job",
                    "targetReplicatedJobs": ["init"],
                    "templates": [{"metadata": {"name": "ckpt"}, "spec": template}],
                },
            ],
        },
    }


def apiserver_requests(cluster: LocalCluster) -> dict[tuple[str, str], float]:
    admin = pki.ADMIN
    status, text = https_get(
        f"{cluster.server}/metrics",
        ca=cluster.pki.ca_cert,
        cert=(cluster.pki.client_cert(admin), cluster.pki.client_key(admin)),
        timeout=10,
    )
    assert status == 200, text[:200]
    counts: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(text):
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            key = (sample.labels.get("verb", ""), sample.labels.get("resource", ""))
            counts[key] = counts.get(key, 0.0) + sample.value
    return counts


def controller_metrics(port: int) -> dict[str, Any]:
    status, text = https_get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    families = {f.name: f for f in text_string_to_metric_families(text)} if status == 200 else {}
    writes = 0.0
    for sample in getattr(families.get("rest_client_requests"), "samples", []):
        if sample.name.endswith("_total") and sample.labels.get("method") in WRITE_VERBS:
            writes += sample.value
    buckets: list[tuple[float, float]] = []
    for sample in getattr(families.get("controller_runtime_reconcile_time_seconds"), "samples", []):
        if sample.name.endswith("_bucket") and sample.labels.get("controller") == "jobset":
            buckets.append((float(sample.labels["le"]), sample.value))
    return {"writes": writes, "buckets": sorted(buckets)}


def percentile(buckets: list[tuple[float, float]], q: float) -> float:
    if not buckets:
        return float("nan")
    total = buckets[-1][1]
    for bound, count in buckets:
        if count >= q * total:
            return bound
    return buckets[-1][0]


def proc_stats(pid: int) -> tuple[float, float]:
    """(RSS MiB, CPU seconds) of a process."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:"))
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return rss / 1024, (int(fields[11]) + int(fields[12])) / ticks


async def run_size(cluster: LocalCluster, n: int, steady: float, logs: Path) -> dict[str, Any]:
    port = free_port()
    controller = ManagedProcess(
        f"controller-{n}",
        [
            sys.executable,
            "-m",
            "controller",
            f"--kubeconfig={cluster.kubeconfig}",
            f"--namespaces={NAMESPACE}-{n}",
            "--leader-elect=false",
            f"--metrics-bind-address=127.0.0.1:{port}",
            "--health-probe-bind-address=0",
            "--workers=8",
            "--log-level=warning",
        ],
        logs / f"controller-{n}.log",
    )
    controller.start()
    assert controller.pid is not None
    peak_rss = 0.0
    api_client = await config.new_client_from_config(config_file=str(cluster.kubeconfig))
    async with api_client:
        client = KubeClient(api_client, qps=500, burst=500)
        ns = f"{NAMESPACE}-{n}"
        await client.create(NAMESPACES, {"metadata": {"name": ns}})
        await asyncio.sleep(3)  # the controller's caches sync
        before = apiserver_requests(cluster)
        writes_before = controller_metrics(port)["writes"]
        started = time.monotonic()
        pending = iter(range(n))

        async def creator() -> None:
            for i in pending:
                await client.create(api.JOBSETS, jobset(f"js-{i:04d}"), ns)

        await asyncio.gather(*(creator() for _ in range(16)))
        print(f"  N={n}: created {n} JobSets in {time.monotonic() - started:.1f}s", flush=True)
        children_at = completed_at = None
        while completed_at is None:
            await asyncio.sleep(1)
            peak_rss = max(peak_rss, proc_stats(controller.pid)[0])
            if children_at is None:
                jobs = (await client.list(JOBS, ns))["items"]
                if len(jobs) >= 4 * n:
                    children_at = time.monotonic() - started
                    print(f"  N={n}: all {4 * n} Jobs exist after {children_at:.1f}s", flush=True)
            listed = (await client.list(api.JOBSETS, ns))["items"]
            done = sum(1 for j in listed if (j.get("status") or {}).get("terminalState"))
            if done == n:
                completed_at = time.monotonic() - started
            elif time.monotonic() - started > 1800:
                raise RuntimeError(f"N={n}: only {done} JobSets finished in 30 min")
        print(f"  N={n}: all Completed after {completed_at:.1f}s", flush=True)
        await asyncio.sleep(5)  # trailing status writes land
        after = apiserver_requests(cluster)
        writes_done = controller_metrics(port)["writes"]
        print(f"  N={n}: steady-state window of {steady:.0f}s ...", flush=True)
        await asyncio.sleep(steady)
        writes_steady = controller_metrics(port)["writes"] - writes_done
        rss, cpu = proc_stats(controller.pid)
        metrics = controller_metrics(port)
    controller.stop()
    per_jobset: dict[str, float] = {}
    for key, value in after.items():
        delta = value - before.get(key, 0.0)
        if delta > 0 and key[1] in (
            "jobsets",
            "jobs",
            "persistentvolumeclaims",
            "services",
            "events",
        ):
            per_jobset[f"{key[0]} {key[1]}"] = round(delta / n, 2)
    return {
        "n": n,
        "children_exist_seconds": round(children_at or 0, 1),
        "all_completed_seconds": round(completed_at, 1),
        "apiserver_requests_per_jobset": dict(sorted(per_jobset.items())),
        "controller_writes_per_jobset": round((writes_done - writes_before) / n, 2),
        "steady_state_writes": writes_steady,
        "controller_peak_rss_mib": round(max(peak_rss, rss), 1),
        "controller_cpu_seconds": round(cpu, 1),
        "reconcile_p50_seconds": percentile(metrics["buckets"], 0.5),
        "reconcile_p99_seconds": percentile(metrics["buckets"], 0.99),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 500, 1000])
    parser.add_argument("--steady", type=float, default=60.0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "scale.json")
    args = parser.parse_args()
    results = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        LocalCluster(Path(tmp) / "c", profile="full") as cluster,
    ):
        cluster.kubectl("apply", "--server-side", "-f", str(CRD))
        _wait_established(cluster)
        for n in args.sizes:
            print(f"N={n}: starting", flush=True)
            results.append(asyncio.run(run_size(cluster, n, args.steady, Path(tmp))))
            print(json.dumps(results[-1], indent=2), flush=True)
    report = {
        "benchmark": "scale",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared VM)",
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
