"""Side by side: upstream JobSet's manager and this controller, the same workload, one at a time.

For each variant and N, each row runs against a FRESH local control plane (full profile:
scheduler, controller-manager, KWOK nodes, the test provisioner), started once the garbage
collector watches JobSets (``wait_garbage_collector_watches_jobsets``, about 30 s per row):
- ``upstream``: upstream JobSet's manager (built once from the Go module proxy, see
  localcluster/upstream.py; run by localcluster/upstreamjobset.py) with its defaults, its CRD, no
  webhooks registered with the API server (admission is not compared: the workload spells out
  what upstream's defaulting webhook would set, so that both controllers get the same object);
- ``ours``: this controller with its defaults;
- ``ours-qps500``: this controller with upstream's client limits passed as flags (qps 500, burst
  500); since those are its defaults too, not run unless asked for (``--rows``).

Workload: N JobSets of 2 replicated jobs x 2 Jobs of one tiny pod each (KWOK completes them).
Variant ``a``: no volumes; variant ``b``: one JobSet-scope claim mounted by every pod, spelled as
upstream's ``volumeClaimPolicies``.

Figures per run: the controller's writes per JobSet by verb and resource and its failed writes
(audit log, by User-Agent), seconds until every child Job exists and until every JobSet is
Completed, the controller's CPU seconds and peak RSS (/proc), API requests per JobSet of every
client, reads included (the API server's apiserver_request_total), and the controller's writes
in a steady-state window after completion (must be 0), and each control-plane process's CPU seconds
until all are Completed (the cluster's own work, which the time figures measure), and
kube-controller-manager's work queues (adds, retries, seconds of work per JobSet; with
``--kcm-profile DIR`` its CPU profile too: bench/controller_manager.py). The table gives ours /
upstream per figure.

    .venv/bin/python bench/bench_compare.py --sizes 100 500 1000 [--variants a b] [--steady 60]
    .venv/bin/python bench/bench_compare.py --sizes 500 1000 --variants a --repeat 3
    .venv/bin/python bench/bench_compare.py --table   # the table of bench/results/compare.json
Results: bench/results/compare.json.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import signal
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

import controller_manager  # noqa: E402
import progress  # noqa: E402
from bench_scale import (  # noqa: E402
    apiserver_requests,
    controller_metrics,
    describe_machine,
    percentile,
)
from kubernetes_asyncio import config  # noqa: E402

from controller.jobset import api  # noqa: E402
from controller.runtime.client import JOBS, NAMESPACES, KubeClient  # noqa: E402
from controller.runtime.manager import USER_AGENT  # noqa: E402
from localcluster import audit, jobsetapi, upstream, upstreamjobset  # noqa: E402
from localcluster.build import BuildError  # noqa: E402
from localcluster.cluster import LocalCluster  # noqa: E402
from localcluster.processes import ManagedProcess, free_port, https_get  # noqa: E402
from tests.support.compare import (  # noqa: E402
    FIGURES,
    JOBS_PER_JOBSET,
    ROWS,
    VARIANTS,
    Row,
    compare_jobset,
    completed,
    markdown_table,
    queue_work_delta,
    request_deltas,
    spread_table,
)

NAMESPACE = "compare"
READ_VERBS = {"GET", "LIST", "WATCH"}


def _in_window(entry: audit.Entry, since: str, until: str) -> bool:
    return since <= str(entry.get("stageTimestamp", "")) < until


def writes_in_window(audit_log: Path, user_agent: str, since: str, until: str) -> Counter[str]:
    """A client's writes by ``<verb> <resource>[/<subresource>]`` between two RFC 3339 times,
    refused ones included (each request the API server received)."""
    return audit.count_writes(audit_log, user_agent, lambda e: _in_window(e, since, until))


def failed_writes(audit_log: Path, user_agent: str, since: str, until: str) -> Counter[str]:
    """A client's writes answered with a code >= 400, by ``<verb> <resource> <code>``."""
    return audit.count_failed_writes(audit_log, user_agent, lambda e: _in_window(e, since, until))


# ----------------------------------------------------------------- measuring


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cluster_cpu_seconds(cluster: LocalCluster) -> dict[str, float]:
    """CPU seconds so far of each control-plane process (API server, etcd, controller-manager,
    scheduler, KWOK, provisioner)."""
    return {name: proc_cpu_seconds(pid) for name, pid in cluster.pids().items()}


def proc_status_kib(pid: int, field: str) -> int:
    """A ``kB`` field of /proc/<pid>/status, e.g. VmHWM (peak RSS)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _rfc3339_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def our_process(
    cluster: LocalCluster, row: Row, logs: Path, extra: list[str] | None = None
) -> ManagedProcess:
    argv = [
        sys.executable,
        "-m",
        "controller",
        f"--kubeconfig={cluster.kubeconfig}",
        "--leader-elect=false",
        f"--metrics-bind-address=127.0.0.1:{free_port()}",
        # Plain HTTP, no authentication: the scrape's TokenReview and SubjectAccessReview would
        # be counted among the run's writes (the audit log's, compared with upstream's).
        "--metrics-secure=false",
        f"--health-probe-bind-address=127.0.0.1:{free_port()}",
    ]
    if row.name == "ours-qps500":
        argv += [
            f"--kube-api-qps={upstream.DEFAULT_QPS}",
            f"--kube-api-burst={upstream.DEFAULT_BURST}",
        ]
    return ManagedProcess(row.name, [*argv, *(extra or [])], logs / f"{row.name}.log")


def wait_healthy(process: ManagedProcess, probe: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if not process.running():
            raise RuntimeError(f"{what} exited:\n{process.log_tail(30)}")
        if probe():
            return
        time.sleep(0.5)
    raise RuntimeError(f"{what} did not become ready in 120s:\n{process.log_tail(30)}")


def wait_garbage_collector_watches_jobsets(cluster: LocalCluster, timeout: float = 120) -> float:
    """Seconds until kube-controller-manager's garbage collector watches JobSets.

    The garbage collector starts watching a new resource (the freshly installed CRD) only at its
    next discovery sync (every 30 s). Until then each JobSet a dependent names stays a "virtual"
    owner that it verifies with GETs, again and again (12 per JobSet measured, no controller
    running); a controller that creates its Jobs sooner paid more of that, although no
    long-lived cluster has a CRD this new. So before a row starts, every 3 s a probe: a JobSet
    (no controller runs yet) that owns a ConfigMap, deleted with Foreground propagation. Only
    a garbage collector that watches JobSets sees the deletion and removes the
    `foregroundDeletion` finalizer (a dependent whose owner is merely looked up would not do:
    that works as soon as discovery knows the resource). Once one probe is gone the rest go too
    (the new watch lists them). Both rows wait the same way.
    """
    began = time.monotonic()
    namespace = "gc-probe"
    cluster.kubectl("create", "namespace", namespace)
    probes = 0
    while True:
        name = f"probe-{probes}"
        probe = compare_jobset(name, shared_claim=False)
        probe |= {"apiVersion": api.API_VERSION, "kind": api.KIND}
        probe["metadata"] = {"name": name, "namespace": namespace}
        created = json.loads(
            cluster.kubectl("create", "-o", "json", "-f", "-", input_text=json.dumps(probe))
        )
        owner = {"apiVersion": api.API_VERSION, "kind": api.KIND, "name": name,
                 "uid": created["metadata"]["uid"]}  # fmt: skip
        owned = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": [owner]},
        }
        cluster.kubectl("create", "-f", "-", input_text=json.dumps(owned))
        cluster.kubectl(
            "delete", "jobset", name, "-n", namespace, "--cascade=foreground", "--wait=false"
        )
        probes += 1
        time.sleep(3)
        left = cluster.kubectl("get", "jobsets", "-n", namespace, "-o", "name").split()
        if len(left) < probes:
            break
        if time.monotonic() - began > timeout:
            raise RuntimeError(f"the garbage collector did not watch JobSets in {timeout}s")
    settled = time.monotonic() - began
    while cluster.kubectl("get", "jobsets", "-n", namespace, "-o", "name").strip():
        if time.monotonic() - began > timeout:
            raise RuntimeError(f"probe JobSets left after {timeout}s")
        time.sleep(1)
    return settled


def log_errors(path: Path, limit: int = 20) -> list[str]:
    """Lines of a controller's log that report an error (the first ``limit``)."""
    found = []
    for line in path.read_text(errors="replace").splitlines():
        lowered = line.lower()
        if "error" in lowered or "panic" in lowered or "warn" in lowered:
            found.append(line[:400])
            if len(found) >= limit:
                break
    return found


async def run_row(
    cluster: LocalCluster,
    controller: ManagedProcess,
    user_agent: str,
    n: int,
    shared_claim: bool,
    steady: float,
    metrics_port: int | None = None,
    kcm_profile: tuple[Path, int] | None = None,
) -> Obj:
    """``kcm_profile``: (file, seconds) of a controller-manager CPU profile from the first
    JobSet's creation on."""
    assert controller.pid is not None
    pid = controller.pid
    api_client = await config.new_client_from_config(config_file=str(cluster.kubeconfig))
    async with api_client, contextlib.AsyncExitStack() as stack:
        client = KubeClient(api_client, qps=500, burst=500)
        await client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
        # Watched from before the first create (and before the baseline below).
        seen = await stack.enter_async_context(
            progress.watching(client, NAMESPACE, JOBS_PER_JOBSET * n, n, completed)
        )
        await asyncio.sleep(3)  # the controller's caches sync
        load_before = load_average()
        before = apiserver_requests(cluster)
        audit_from = _rfc3339_now()
        cpu_start = proc_cpu_seconds(pid)
        cluster_cpu_start = cluster_cpu_seconds(cluster)
        kcm_queues_start = controller_manager.queue_work(cluster)
        profiling = (
            controller_manager.start_profile(cluster, kcm_profile[1], kcm_profile[0])
            if kcm_profile is not None
            else None
        )
        pending = iter(range(n))

        async def creator() -> None:
            for i in pending:
                await client.create(
                    api.JOBSETS, compare_jobset(f"js-{i:04d}", shared_claim), NAMESPACE
                )

        started = time.monotonic()
        await asyncio.gather(*(creator() for _ in range(16)))
        print(f"    created {n} JobSets in {time.monotonic() - started:.1f}s", flush=True)
        children_at = completed_at = None
        last_report = 0.0
        while completed_at is None:
            await asyncio.sleep(0.5)
            if not controller.running():
                raise RuntimeError(f"the controller exited:\n{controller.log_tail(30)}")
            elapsed = time.monotonic() - started
            if children_at is None and seen.children_at is not None:
                children_at = seen.children_at - started
                print(f"    all {JOBS_PER_JOBSET * n} Jobs exist after {children_at:.1f}s",
                      flush=True)  # fmt: skip
            if seen.completed_at is not None:
                completed_at = seen.completed_at - started
            elif elapsed > 2400:
                raise RuntimeError(
                    f"N={n}: only {len(seen.jobsets_done)} JobSets Completed in 40 min"
                )
            elif elapsed - last_report >= 15:
                last_report = elapsed
                print(f"    {elapsed:.0f}s: {len(seen.jobsets_done)}/{n} Completed", flush=True)
        print(f"    all Completed after {completed_at:.1f}s", flush=True)
        # Until all Completed: the time figure is the cluster's work, shared with the controller.
        cluster_cpu = {
            name: round(seconds - cluster_cpu_start.get(name, 0.0), 1)
            for name, seconds in cluster_cpu_seconds(cluster).items()
        }
        kcm_queues = queue_work_delta(kcm_queues_start, controller_manager.queue_work(cluster), n)
        await asyncio.sleep(10)  # writes that were due land (ours paces progress writes)
        cpu_seconds = proc_cpu_seconds(pid) - cpu_start
        after = apiserver_requests(cluster)
        ours = our_metrics(metrics_port, n) if metrics_port is not None else {}
        lags = lifecycle_lags(
            (await client.list(api.JOBSETS, NAMESPACE))["items"],
            (await client.list(JOBS, NAMESPACE))["items"],
        )
        audit_done = _rfc3339_now()
        load_run = load_average()
        print(f"    steady-state window of {steady:.0f}s ...", flush=True)
        await asyncio.sleep(steady)
        audit_steady = _rfc3339_now()
        peak_rss_kib = proc_status_kib(pid, "VmHWM")
        cpu_total = proc_cpu_seconds(pid)
    if profiling is not None:
        profiling.join()
    writes = writes_in_window(cluster.audit_log, user_agent, audit_from, audit_done)
    failed = failed_writes(cluster.audit_log, user_agent, audit_from, audit_steady)
    steady_writes = writes_in_window(cluster.audit_log, user_agent, audit_done, audit_steady)
    per_jobset = request_deltas(before, after, n)
    reads = sum(v for k, v in per_jobset.items() if k.split()[0] in READ_VERBS)
    return {
        "n": n,
        "writes_per_jobset": round(sum(writes.values()) / n, 3),
        "writes_per_jobset_by_kind": {k: round(v / n, 3) for k, v in sorted(writes.items())},
        "failed_writes": sum(failed.values()),
        "failed_writes_by_kind": dict(sorted(failed.items())),
        "children_exist_seconds": round(children_at or 0.0, 1),
        "all_completed_seconds": round(completed_at, 1),
        "controller_cpu_seconds": round(cpu_seconds, 1),
        "controller_cpu_seconds_incl_startup_and_steady": round(cpu_total, 1),
        "controller_peak_rss_mib": round(peak_rss_kib / 1024, 1),
        "cluster_cpu_seconds_until_completed": cluster_cpu,
        "controller_manager_queues_per_jobset_until_completed": kcm_queues,
        "apiserver_requests_per_jobset": round(sum(per_jobset.values()), 2),
        "apiserver_reads_per_jobset": round(reads, 2),
        "apiserver_requests_per_jobset_by_kind": per_jobset,
        "steady_state_writes": sum(steady_writes.values()),
        "steady_state_writes_by_kind": dict(sorted(steady_writes.items())),
        "steady_state_seconds": steady,
        "load_average_before": load_before,
        "load_average_after": load_run,
        **lags,
        **ours,
    }


def _time(value: object) -> datetime.datetime | None:
    if not isinstance(value, str) or not value:
        return None
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))


def _condition_time(obj: Obj, kind: str) -> datetime.datetime | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") == "True":
            return _time(c.get("lastTransitionTime"))
    return None


def lifecycle_lags(jobsets: list[Obj], jobs: list[Obj]) -> Obj:
    """Where each JobSet's time to Completed went, from the stored objects' own timestamps
    (second precision): ``start`` from the JobSet's creation to its first Job's; ``run`` from
    there to its last Job's Complete condition (the Job controller, scheduler, nodes); ``notice``
    from that to the JobSet's Completed condition (the JobSet controller's latency); ``total``
    from creation to Completed (what a user waits). p50, p90 and max over the JobSets, in
    seconds; and the median total on its own (a figure of the table)."""
    by_jobset: dict[str, list[Obj]] = {}
    for job in jobs:
        parent = ((job.get("metadata") or {}).get("labels") or {}).get(api.JOBSET_NAME)
        by_jobset.setdefault(str(parent), []).append(job)
    spans: dict[str, list[float]] = {"start": [], "run": [], "notice": [], "total": []}
    for js in jobsets:
        mine = by_jobset.get(js["metadata"]["name"], [])
        created = _time(js["metadata"].get("creationTimestamp"))
        completed = _condition_time(js, "Completed")
        first = min((t for j in mine if (t := _time(j["metadata"].get("creationTimestamp")))),
                    default=None)  # fmt: skip
        done = [_condition_time(j, "Complete") for j in mine]
        if None in (created, completed, first) or not done or None in done:
            continue
        last = max(t for t in done if t is not None)
        assert created is not None and completed is not None and first is not None
        spans["start"].append((first - created).total_seconds())
        spans["run"].append((last - first).total_seconds())
        spans["notice"].append((completed - last).total_seconds())
        spans["total"].append((completed - created).total_seconds())

    def quantiles(values: list[float]) -> Obj:
        ordered = sorted(values)
        if not ordered:
            return {}
        at = [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in (0.5, 0.9)]
        return {"p50": at[0], "p90": at[1], "max": ordered[-1], "n": len(ordered)}

    lags: Obj = {f"lag_{name}_seconds": quantiles(values) for name, values in spans.items()}
    lags["median_completed_seconds"] = lags["lag_total_seconds"].get("p50", 0.0)
    return lags


def our_metrics(port: int, n: int) -> Obj:
    """This controller's own account of the run (its /metrics; upstream's needs a token):
    reconciles per JobSet, reconcile time and queue wait percentiles (bucket upper bounds), time
    spent in its client rate limiter."""
    found = controller_metrics(port)
    reconciles = found["buckets"][-1][1] if found["buckets"] else 0.0
    return {
        "controller_reconciles_per_jobset": round(reconciles / n, 2),
        "controller_reconcile_seconds": {
            q: percentile(found["buckets"], float(q[1:]) / 100) for q in ("p50", "p90", "p99")
        },
        "controller_queue_wait_seconds": {
            q: percentile(found["queued"], float(q[1:]) / 100) for q in ("p50", "p90", "p99")
        },
        "controller_throttled_seconds": round(found["throttled_seconds"], 2),
        "controller_status_writes_per_jobset_by_cause": {
            cause: round(count / n, 3)
            for cause, count in sorted(found["status_writes_by_cause"].items())
        },
    }


# py-spy from the venv of this interpreter (not a dependency: ``pip install py-spy``).
PY_SPY = Path(sys.executable).parent / "py-spy"


def start_py_spy(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling ``pid`` (100 Hz, collapsed stacks, idle threads left out) into ``out``
    until stopped (``stop_py_spy``)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = [str(PY_SPY), "record", "--pid", str(pid), "--rate", "100", "--format", "raw"]
    return subprocess.Popen([*argv, "--output", str(out)], stdout=subprocess.DEVNULL)


def stop_py_spy(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()


def run_one(
    row: Row,
    variant: str,
    n: int,
    steady: float,
    kcm_qps: int,
    build: upstream.UpstreamBuild | None,
    py_spy: Path | None = None,
    ours_args: list[str] | None = None,
    kcm_profile: tuple[Path, int] | None = None,
) -> Obj:
    """One row on a fresh control plane; ``py_spy``: a directory for a profile of our rows
    (the profiler's sampling costs the controller some CPU: not for the figures);
    ``kcm_profile``: (directory, seconds) for a controller-manager CPU profile of every row."""
    with (
        tempfile.TemporaryDirectory() as tmp,
        LocalCluster(Path(tmp) / "c", profile="full", controller_manager_qps=kcm_qps) as cluster,
    ):
        work = Path(tmp)
        logs = work / "logs"
        theirs = None
        if row.name == "upstream":
            assert build is not None
            upstreamjobset.install_crd(cluster, build)
            # Configured now, started (and waited for) once the garbage collector watches JobSets.
            theirs = upstreamjobset.UpstreamManager(cluster, build, work / "upstream")
            controller = theirs.process
            user_agent = upstream.USER_AGENT
        else:
            jobsetapi.install(cluster)
            controller = our_process(cluster, row, logs, ours_args)
            user_agent = USER_AGENT
        gc_settle = wait_garbage_collector_watches_jobsets(cluster)
        print(f"    the garbage collector watches JobSets after {gc_settle:.0f}s", flush=True)
        profiler = None
        try:
            if theirs is not None:
                theirs.start()
            else:
                controller.start()
                probe_port = _port(controller.argv, "health-probe")
                wait_healthy(
                    controller,
                    lambda: https_get(f"http://127.0.0.1:{probe_port}/readyz", timeout=2)[0] == 200,
                    row.name,
                )
            metrics_port = None if row.name == "upstream" else _port(controller.argv, "metrics")
            if py_spy is not None and row.name != "upstream":
                assert controller.pid is not None
                profiler = start_py_spy(controller.pid, py_spy / f"{row.name}-{variant}-{n}.txt")
            kcm = (
                (kcm_profile[0] / f"kcm-{row.name}-{variant}-{n}.pb.gz", kcm_profile[1])
                if kcm_profile is not None
                else None
            )
            result = asyncio.run(
                run_row(
                    cluster,
                    controller,
                    user_agent,
                    n,
                    variant == "b",
                    steady,
                    metrics_port,
                    kcm,
                )
            )
        finally:
            if profiler is not None:
                stop_py_spy(profiler)
            controller.stop()
        result["row"] = row.name
        result["variant"] = variant
        result["garbage_collector_settle_seconds"] = round(gc_settle, 1)
        result["controller_argv"] = [Path(controller.argv[0]).name, *controller.argv[1:]]
        result["controller_log_errors"] = log_errors(controller.log_path)
        return result


def _port(argv: list[str], flag: str) -> int | None:
    for arg in argv:
        if arg.startswith(f"--{flag}-bind-address="):
            return int(arg.rsplit(":", 1)[1])
    return None


def our_commit() -> str:
    """The commit our rows run, and whether the tree differs from it. Each of our rows starts the
    controller from this working tree: an edit made while the benchmark runs is measured (or
    crashes it), so run it from a clean checkout (e.g. a detached ``git worktree``)."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    if git("status", "--porcelain", "--", "controller"):
        print(
            "warning: controller/ has uncommitted changes; they are what our rows run, and an "
            "edit made during the run changes it (run from a clean checkout)",
            file=sys.stderr,
            flush=True,
        )
        return f"{commit} (controller/ modified)"
    return commit


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 500, 1000])
    parser.add_argument("--variants", nargs="+", choices=sorted(VARIANTS), default=["a", "b"])
    parser.add_argument(
        "--rows", nargs="+", choices=[r.name for r in ROWS], default=["upstream", "ours"]
    )
    parser.add_argument("--steady", type=float, default=60.0)
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run every (variant, N) this many times (the table then gives each run's ratios and"
        " their median)",
    )
    parser.add_argument(
        "--kcm-qps", type=int, default=200, help="client QPS of kube-controller-manager (all rows)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "compare.json")
    parser.add_argument("--table", action="store_true", help="print the table of --out and stop")
    parser.add_argument(
        "--ours-args",
        nargs="*",
        default=[],
        help="more flags for our rows (experiments, e.g. --ours-args=--workers=16); recorded in"
        " each run's controller_argv",
    )
    parser.add_argument(
        "--py-spy",
        type=Path,
        default=None,
        help="a directory: profile our rows with py-spy (see bench/profile_summary.py)",
    )
    parser.add_argument(
        "--kcm-profile",
        type=Path,
        default=None,
        help="a directory: a CPU profile of kube-controller-manager in every row, from the first"
        " JobSet's creation on (go tool pprof -top FILE)",
    )
    parser.add_argument("--kcm-profile-seconds", type=int, default=60)
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep --out's runs of other (variant, N, row) combinations",
    )
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.py_spy is not None and not PY_SPY.exists():
        # Before any control plane starts, not at the first row's profile.
        parser.error(f"--py-spy: {PY_SPY} is missing: .venv/bin/pip install py-spy")
    if args.table:
        kept_runs = json.loads(args.out.read_text())["results"]
        print(markdown_table(kept_runs), end="")
        print(spread_table(kept_runs), end="")
        return 0
    build = None
    if "upstream" in args.rows:
        try:
            build = upstream.ensure_upstream()
        except BuildError as err:
            print(err, file=sys.stderr)
            return 2
        print(f"upstream JobSet {build.ref} ({build.commit[:12]}): {build.manager}", flush=True)
    ours = our_commit()
    print(f"this controller: {ours}", flush=True)
    results: list[Obj] = []
    previous: Obj = {"results": [], "upstream": None}
    if args.merge and args.out.exists():
        previous = json.loads(args.out.read_text())
    kept: list[Obj] = previous["results"]
    built = {"ref": build.ref, "commit": build.commit} if build else previous["upstream"]

    def write_report() -> list[Obj]:
        """All results so far (and those of --merge not run again), written after every row: a
        long run stopped part way keeps what it measured."""
        done = {(r["variant"], r["n"], r["row"]) for r in results}
        merged = [r for r in kept if (r["variant"], r["n"], r["row"]) not in done] + results
        report = {
            "benchmark": "compare",
            "machine": describe_machine(),
            "date": datetime.date.today().isoformat(),
            "upstream": built,
            "ours": ours,
            "kcm_qps": args.kcm_qps,
            "rows": {r.name: r.description for r in ROWS},
            "variants": VARIANTS,
            "results": merged,
        }
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n")
        return merged

    pairs = [(variant, n) for variant in args.variants for n in args.sizes]
    rows = [r for r in ROWS if r.name in args.rows]
    for repeat in range(args.repeat):
        for position, (variant, n) in enumerate(pairs):
            # Alternating which row goes first, from one (variant, N) to the next and from one
            # repetition to the next: a row that starts right after another one's teardown
            # starts on a busier machine (the load average shows it).
            order = rows if (position + repeat) % 2 == 0 else rows[::-1]
            for row in order:
                run_no = f", run {repeat + 1}/{args.repeat}" if args.repeat > 1 else ""
                print(f"variant {variant}, N={n}{run_no}, {row.name}: starting "
                      f"(load {load_average()})", flush=True)  # fmt: skip
                result = run_one(
                    row,
                    variant,
                    n,
                    args.steady,
                    args.kcm_qps,
                    build,
                    args.py_spy,
                    args.ours_args,
                    (args.kcm_profile, args.kcm_profile_seconds) if args.kcm_profile else None,
                )
                result["repeat"] = repeat
                results.append(result)
                write_report()
                summary = {k: result[k] for k, _ in FIGURES}
                print(f"  {json.dumps(summary)}", flush=True)
                if result["controller_log_errors"]:
                    print(f"  log errors: {result['controller_log_errors'][:3]}", flush=True)
    results = write_report()
    print(markdown_table(results), end="")
    print(spread_table(results), end="")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
