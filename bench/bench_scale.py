"""Scale benchmark: N JobSets at once on the local control plane with KWOK.

Each JobSet: two replicated jobs (2 Jobs each, 4 Jobs in all), one shared claim and one Job-scope
claim per Job of the first replicated job. With ``--pod-scope C`` (the Pod-scope variant), each
JobSet is one replicated job of 2 Indexed Jobs of C pods with a Pod-scope claim per pod (2 x C
claims), and the Pod-scope admission policy is installed first. For each N it measures, in one run:
- seconds until every child Job exists, and until every JobSet is Completed;
- API requests per JobSet by verb and resource, from the API server's own
  ``apiserver_request_total`` (not self-reported), and the controller's writes per JobSet;
- writes during a steady-state window after completion (must be 0);
- controller RSS (peak) and CPU seconds; reconcile latency percentiles from its histogram;
- status writes per JobSet by cause (the controller's ``jobset_status_writes_total``), and how late
  the status counters are: from each change of a JobSet's Jobs to the status write that carries it,
  told by watches of both (``tests/support/statuslag.py``), with the fewest counter-only writes
  each longest hold would need for the run's changes (``--lag-bound``: the bound counted against).

    .venv/bin/python bench/bench_scale.py --sizes 100 500 1000 [--steady 60] [--pod-scope 4]
        [--controller-arg=--status-progress-period=10] [--lag-bound 5] [--out FILE]
Results: bench/results/scale.json (scale-pod.json for the Pod-scope variant) and the runs on
stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

Obj = dict[str, Any]

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import progress  # noqa: E402
from kubernetes_asyncio import config  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from controller.jobset import api  # noqa: E402
from controller.runtime.client import NAMESPACES, KubeClient  # noqa: E402
from controller.runtime.manager import USER_AGENT  # noqa: E402
from localcluster import audit, jobsetapi, pki  # noqa: E402
from localcluster.cluster import LocalCluster  # noqa: E402
from localcluster.processes import ManagedProcess, free_port, https_get  # noqa: E402
from tests.support.compare import finished  # noqa: E402
from tests.support.jobsets import (  # noqa: E402
    SCALE_JOBSET_MINIMUM_WRITES,
    scale_jobset,
    scale_pod_jobset,
    scale_pod_jobset_minimum_writes,
)
from tests.support.podscope import POLICY_DIR, wait_policy_applied  # noqa: E402
from tests.support.statuslag import Trace, summary  # noqa: E402

NAMESPACE = "scale"
# The longest holds whose fewest counter-only writes each run reports (seconds).
HOLDS = (1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0)
WRITE_VERBS = {"POST", "PUT", "PATCH", "DELETE"}
RESOURCES = ("jobsets", "jobs", "persistentvolumeclaims", "services", "events", "pods")


def apiserver_metrics(cluster: LocalCluster) -> str:
    """kube-apiserver's /metrics, read as the cluster's admin."""
    admin = pki.ADMIN
    status, text = https_get(
        f"{cluster.server}/metrics",
        ca=cluster.pki.ca_cert,
        cert=(cluster.pki.client_cert(admin), cluster.pki.client_key(admin)),
        timeout=10,
    )
    assert status == 200, text[:200]
    return text


def apiserver_requests(cluster: LocalCluster) -> dict[tuple[str, str], float]:
    """The API server's own ``apiserver_request_total`` by (verb, resource), all clients."""
    counts: dict[tuple[str, str], float] = {}
    for family in text_string_to_metric_families(apiserver_metrics(cluster)):
        if family.name != "apiserver_request":
            continue
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            resource = sample.labels.get("resource", "")
            if sample.labels.get("subresource"):
                resource += "/" + sample.labels["subresource"]
            key = (sample.labels.get("verb", ""), resource)
            counts[key] = counts.get(key, 0.0) + sample.value
    return counts


def audited_writes(cluster: LocalCluster, since: str, until: str) -> Counter[str]:
    """The controller's writes as the API server's audit log records them, by verb and resource
    (with subresource), between two RFC 3339 timestamps."""
    return audit.count_writes(
        cluster.audit_log,
        USER_AGENT,
        lambda entry: since <= str(entry.get("stageTimestamp", "")) < until,
    )


def controller_metrics(port: int) -> dict[str, Any]:
    status, text = https_get(f"http://127.0.0.1:{port}/metrics", timeout=5)
    families = {f.name: f for f in text_string_to_metric_families(text)} if status == 200 else {}
    writes = 0.0
    for sample in getattr(families.get("rest_client_requests"), "samples", []):
        if sample.name.endswith("_total") and sample.labels.get("method") in WRITE_VERBS:
            writes += sample.value

    def buckets(family: str, label: str) -> list[tuple[float, float]]:
        """(upper bound, cumulative count) of the jobset series of a histogram."""
        return sorted(
            (float(sample.labels["le"]), sample.value)
            for sample in getattr(families.get(family), "samples", [])
            if sample.name.endswith("_bucket") and sample.labels.get(label) == "jobset"
        )

    throttled = sum(
        sample.value
        for sample in getattr(
            families.get("rest_client_rate_limiter_duration_seconds"), "samples", []
        )
        if sample.name.endswith("_sum")
    )
    causes = {
        sample.labels["cause"]: sample.value
        for sample in getattr(families.get("jobset_status_writes"), "samples", [])
        if sample.name.endswith("_total") and "cause" in sample.labels
    }
    return {
        "writes": writes,
        "status_writes_by_cause": causes,
        "buckets": buckets("controller_runtime_reconcile_time_seconds", "controller"),
        "queued": buckets("workqueue_queue_duration_seconds", "name"),
        "throttled_seconds": throttled,
    }


def percentile(buckets: list[tuple[float, float]], q: float) -> float:
    """Upper bound of the histogram bucket holding the q-quantile."""
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


class Sampler:
    """CPU and RSS of the controller and the control-plane processes, sampled every second."""

    WINDOW = 5  # seconds over which peak CPU use is averaged

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.samples: list[tuple[float, dict[str, tuple[float, float]]]] = []

    def sample(self) -> None:
        now = time.monotonic()
        stats = {}
        for name, pid in self.pids.items():
            try:
                stats[name] = proc_stats(pid)
            except (OSError, StopIteration):
                continue
        self.samples.append((now, stats))

    def summary(self, name: str, until: float | None = None) -> dict[str, float]:
        points = [
            (t, s[name]) for t, s in self.samples if name in s and (until is None or t <= until)
        ]
        if len(points) < 2:
            return {}
        (t0, (_, c0)), (t1, (_, c1)) = points[0], points[-1]
        peak = 0.0
        for i in range(len(points) - self.WINDOW):
            (ta, (_, ca)), (tb, (_, cb)) = points[i], points[i + self.WINDOW]
            peak = max(peak, (cb - ca) / (tb - ta))
        return {
            "cpu_seconds": round(c1 - c0, 1),
            "mean_cores": round((c1 - c0) / (t1 - t0), 3),
            "peak_cores_5s": round(peak, 3),
            "peak_rss_mib": round(max(rss for _, (rss, _) in points), 1),
        }


def _rfc3339_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def workload(pod_scope: int) -> tuple[Callable[[str], Obj], int, dict[str, int]]:
    """(the JobSet of a name, its Job count, its derived minimum writes) of a variant; pod_scope:
    completions per Job of the Pod-scope variant, 0 for the default JobSet."""
    if pod_scope:
        return (
            lambda name: scale_pod_jobset(name, pod_scope),
            2,
            scale_pod_jobset_minimum_writes(pod_scope),
        )
    return scale_jobset, 4, SCALE_JOBSET_MINIMUM_WRITES


async def run_size(
    cluster: LocalCluster,
    n: int,
    steady: float,
    logs: Path,
    qps: int,
    extra: list[str],
    pod_scope: int = 0,
    lag_bound: float = 5.0,
    keep: Path | None = None,
) -> dict[str, Any]:
    make, jobs_per_jobset, minimum = workload(pod_scope)
    port = free_port()
    ns = f"{NAMESPACE}-{n}"
    controller = ManagedProcess(
        f"controller-{n}",
        [
            sys.executable,
            "-m",
            "controller",
            f"--kubeconfig={cluster.kubeconfig}",
            f"--namespaces={ns}",
            "--leader-elect=false",
            f"--metrics-bind-address=127.0.0.1:{port}",
            # Plain HTTP, no authentication: the writes are counted from the controller's own
            # rest_client_requests_total, where each scrape's TokenReview and
            # SubjectAccessReview (POSTs) would count as writes of the steady state.
            "--metrics-secure=false",
            "--health-probe-bind-address=0",
            "--workers=8",
            f"--kube-api-qps={qps}",
            f"--kube-api-burst={2 * qps}",
            "--log-level=warning",
            *extra,
        ],
        logs / f"controller-{n}.log",
    )
    controller.start()
    assert controller.pid is not None
    sampler = Sampler({"controller": controller.pid, **cluster.pids()})
    api_client = await config.new_client_from_config(config_file=str(cluster.kubeconfig))
    async with api_client, contextlib.AsyncExitStack() as stack:
        client = KubeClient(api_client, qps=500, burst=500)
        await client.create(NAMESPACES, {"metadata": {"name": ns}})
        # Watched from before the first create (and before the baseline below).
        seen = await stack.enter_async_context(
            progress.watching(client, ns, jobs_per_jobset * n, n, finished)
        )
        trace = await stack.enter_async_context(
            progress.tracing(client, ns, Trace(clock=time.monotonic))
        )
        if pod_scope:
            await wait_policy_applied(client, ns)  # else pods would wait for a placeholder claim
        await asyncio.sleep(3)  # the controller's caches sync
        before = apiserver_requests(cluster)
        audit_from = _rfc3339_now()
        started = time.monotonic()
        sampler.sample()
        pending = iter(range(n))

        async def creator() -> None:
            for i in pending:
                await client.create(api.JOBSETS, make(f"js-{i:04d}"), ns)

        await asyncio.gather(*(creator() for _ in range(16)))
        print(f"  N={n}: created {n} JobSets in {time.monotonic() - started:.1f}s", flush=True)
        children_at = completed_at = None
        last_report = 0.0
        while completed_at is None:
            await asyncio.sleep(1)
            sampler.sample()
            elapsed = time.monotonic() - started
            if children_at is None and seen.children_at is not None:
                children_at = seen.children_at - started
                print(f"  N={n}: all {jobs_per_jobset * n} Jobs exist after "
                      f"{children_at:.1f}s", flush=True)  # fmt: skip
            done = len(seen.jobsets_done)
            if seen.completed_at is not None:
                completed_at = seen.completed_at - started
            elif elapsed > 2400:
                raise RuntimeError(f"N={n}: only {done} JobSets finished in 40 min")
            elif elapsed - last_report >= 15:
                last_report = elapsed
                rss = sampler.samples[-1][1].get("controller", (0.0, 0.0))[0]
                print(f"  N={n}: {elapsed:.0f}s, {done}/{n} finished, RSS {rss:.0f} MiB",
                      flush=True)  # fmt: skip
        print(f"  N={n}: all Completed after {completed_at:.1f}s", flush=True)
        done_at = time.monotonic()
        await asyncio.sleep(10)  # paced progress writes that were due land
        after = apiserver_requests(cluster)
        audit_done = _rfc3339_now()
        at_done = controller_metrics(port)
        writes_done = at_done["writes"]
        lag = summary(trace, HOLDS, lag_bound, since=seen.children_at)
        print(f"  N={n}: steady-state window of {steady:.0f}s ...", flush=True)
        steady_end = time.monotonic() + steady
        while time.monotonic() < steady_end:
            await asyncio.sleep(1)
            sampler.sample()
        writes_steady = controller_metrics(port)["writes"] - writes_done
        audit_steady = _rfc3339_now()
        metrics = controller_metrics(port)
    controller.stop()
    per_jobset: dict[str, float] = {}
    for key, value in after.items():
        delta = value - before.get(key, 0.0)
        if delta > 0 and key[1].split("/")[0] in RESOURCES:
            per_jobset[f"{key[0]} {key[1]}"] = round(delta / n, 2)
    if keep is not None:
        keep_files(keep, logs / f"controller-{n}.log", trace, n)
    run_writes = audited_writes(cluster, audit_from, audit_done)
    failed = audit.count_failed_writes(
        cluster.audit_log,
        USER_AGENT,
        lambda entry: audit_from <= str(entry.get("stageTimestamp", "")) < audit_steady,
    )
    steady_audited = sum(audited_writes(cluster, audit_done, audit_steady).values())
    controller_writes = {k: round(v / n, 3) for k, v in sorted(run_writes.items())}
    return {
        "n": n,
        "variant": f"pod-scope, {pod_scope} completions per Job" if pod_scope else "default",
        "controller_args": extra,
        "children_exist_seconds": round(children_at or 0, 1),
        "all_completed_seconds": round(completed_at, 1),
        "apiserver_requests_per_jobset": dict(sorted(per_jobset.items())),
        "controller_writes_per_jobset": controller_writes,
        "controller_writes_per_jobset_total": round(sum(run_writes.values()) / n, 3),
        "derived_minimum_per_jobset": minimum,
        "derived_minimum_per_jobset_total": sum(minimum.values()),
        "status_writes_per_jobset_by_cause": {
            cause: round(count / n, 3)
            for cause, count in sorted(at_done["status_writes_by_cause"].items())
        },
        "status_lag": lag,
        "failed_writes": dict(sorted(failed.items())),
        "steady_state_writes": {"audit_log": steady_audited, "controller_metrics": writes_steady},
        "steady_state_seconds": steady,
        "processes": {
            name: sampler.summary(name, until=done_at) for name in ("controller", *cluster.pids())
        },
        "controller_peak_rss_mib_incl_steady": sampler.summary("controller").get("peak_rss_mib"),
        "controller_throttled_seconds": round(metrics["throttled_seconds"], 2),
        "reconcile_seconds": {
            q: percentile(metrics["buckets"], float(q[1:]) / 100) for q in ("p50", "p90", "p99")
        },
        "queue_wait_seconds": {
            q: percentile(metrics["queued"], float(q[1:]) / 100) for q in ("p50", "p90", "p99")
        },
    }


def keep_files(keep: Path, log: Path, trace: Trace, n: int) -> None:
    """The controller's log and each JobSet's changes and status writes, for a closer look."""
    keep.mkdir(parents=True, exist_ok=True)
    shutil.copy(log, keep / log.name)
    (keep / f"trace-{n}.json").write_text(json.dumps(trace.dump()))


def describe_machine() -> str:
    cpu = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = next(
        int(line.split()[1]) // 1024 // 1024
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    return f"{cpu}, {os.cpu_count()} cores, {mem} GiB, {platform.system()} {platform.release()}"


def commit() -> str:
    """The commit of the controller measured (its working tree's), "+changes" when controller/
    differs from it."""
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "controller"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    return head + ("+changes" if dirty else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 500, 1000])
    parser.add_argument("--steady", type=float, default=60.0)
    parser.add_argument(
        "--qps", type=int, default=200, help="client QPS of the controller and the Job controller"
    )
    parser.add_argument(
        "--controller-arg",
        action="append",
        default=[],
        help="extra controller flag, e.g. --controller-arg=--status-progress-period=0",
    )
    parser.add_argument(
        "--pod-scope",
        type=int,
        default=0,
        metavar="COMPLETIONS",
        help="the Pod-scope variant: 2 Indexed Jobs of COMPLETIONS pods, a claim per pod",
    )
    parser.add_argument(
        "--lag-bound",
        type=float,
        default=5.0,
        help="seconds: count the counter changes written later than this (the longest hold)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep the controller's log and the status lag trace of each N in DIR",
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    name = "scale-pod.json" if args.pod_scope else "scale.json"
    out = args.out or ROOT / "bench" / "results" / name
    results = []
    for n in args.sizes:
        # A fresh control plane per size: no leftovers of the previous size in etcd or caches.
        with (
            tempfile.TemporaryDirectory() as tmp,
            LocalCluster(
                Path(tmp) / "c", profile="full", controller_manager_qps=args.qps
            ) as cluster,
        ):
            jobsetapi.install(cluster)
            if args.pod_scope:
                cluster.kubectl("apply", "--server-side", "-k", str(POLICY_DIR))
            print(f"N={n}: starting", flush=True)
            run = run_size(
                cluster,
                n,
                args.steady,
                Path(tmp),
                args.qps,
                args.controller_arg,
                args.pod_scope,
                args.lag_bound,
                args.keep,
            )
            results.append(asyncio.run(run))
            print(json.dumps(results[-1], indent=2), flush=True)
    report = {
        "benchmark": "scale",
        "machine": describe_machine(),
        "date": datetime.date.today().isoformat(),
        "commit": commit(),
        "client_qps": args.qps,
        "results": results,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
