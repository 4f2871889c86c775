"""The side-by-side benchmark's workload and its ratio table (bench/bench_compare.py), pure
functions that the unit tier checks without a cluster (tests/unit/test_bench_compare.py)."""

from __future__ import annotations

import asyncio
import copy
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from controller.jobset import api

Obj = dict[str, Any]

RESOURCES = ("jobsets", "jobs", "persistentvolumeclaims", "services", "events", "pods")
CLAIM = "shared"
_CLAIM_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
VARIANTS = {"a": "no volumes", "b": "one shared claim (volumeClaimPolicies)"}


@dataclass(frozen=True)
class Row:
    name: str
    description: str


ROWS = (
    Row("upstream", "upstream JobSet, its defaults (qps 500, burst 500)"),
    Row("ours", "this controller, its defaults (4 workers, qps 500, burst 500: upstream's)"),
    Row("ours-qps500", "this controller, --kube-api-qps=500 --kube-api-burst=500"),
)
# (key in a run's result, label in the table); lower is better for each.
FIGURES = (
    ("writes_per_jobset", "writes per JobSet"),
    ("failed_writes", "failed writes (all)"),
    ("children_exist_seconds", "s until all Jobs exist"),
    ("all_completed_seconds", "s until all Completed"),
    ("median_completed_seconds", "s to Completed, median JobSet"),
    ("controller_cpu_seconds", "controller CPU s"),
    ("controller_peak_rss_mib", "controller peak RSS MiB"),
    ("apiserver_requests_per_jobset", "API requests per JobSet (all clients)"),
    ("steady_state_writes", "steady-state writes"),
)


def compare_jobset(name: str, shared_claim: bool) -> Obj:
    """One JobSet of the workload, every field upstream's defaulting webhook would set spelled
    out (no webhook runs for upstream here): success and startup policies, Indexed Jobs, the
    headless Service's network settings, the claim's retention."""

    def rjob(rname: str) -> Obj:
        container: Obj = {"name": "main", "image": "busybox"}
        if shared_claim:
            container["volumeMounts"] = [{"name": CLAIM, "mountPath": f"/{CLAIM}"}]
        return {
            "name": rname,
            "replicas": 2,
            "template": {
                "spec": {
                    "completionMode": "Indexed",
                    "completions": 1,
                    "parallelism": 1,
                    "backoffLimit": 0,
                    "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
                }
            },
        }

    spec: Obj = {
        "replicatedJobs": [rjob("leader"), rjob("workers")],
        "successPolicy": {"operator": "All"},
        "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
        "network": {"enableDNSHostnames": True, "publishNotReadyAddresses": True},
    }
    if shared_claim:
        spec["volumeClaimPolicies"] = [
            {
                "templates": [{"metadata": {"name": CLAIM}, "spec": copy.deepcopy(_CLAIM_SPEC)}],
                "retentionPolicy": {"whenDeleted": "Delete"},
            }
        ]
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.KIND,
        "metadata": {"name": name},
        "spec": spec,
    }


JOBS_PER_JOBSET = 4


def request_deltas(
    before: dict[tuple[str, str], float], after: dict[tuple[str, str], float], n: int
) -> dict[str, float]:
    """API requests per JobSet by ``<VERB> <resource>``, only the workload's resources."""
    per_jobset: dict[str, float] = {}
    for key, value in sorted(after.items()):
        delta = value - before.get(key, 0.0)
        if delta > 0 and key[1].split("/")[0] in RESOURCES:
            per_jobset[f"{key[0]} {key[1]}"] = round(delta / n, 2)
    return per_jobset


def ratio(ours: float, theirs: float) -> float | None:
    """ours / upstream; None when upstream's figure is 0 (the table then shows both values)."""
    if theirs == 0:
        return None
    return ours / theirs


def _figure(run: Obj, key: str) -> float:
    value = run[key]
    if isinstance(value, dict):
        return float(sum(value.values()))
    return float(value)


def repeat_of(run: Obj) -> int:
    """Which repetition of its (variant, N) a run was (0 for files written before repeats)."""
    return int(run.get("repeat", 0))


def ratio_rows(results: Iterable[Obj]) -> list[Obj]:
    """Per (variant, N, repetition), per figure: every row's value and, for each of our rows,
    ours/upstream (a row is compared only with upstream's row of the same repetition)."""
    groups: dict[tuple[str, int, int], dict[str, Obj]] = {}
    for run in results:
        groups.setdefault((run["variant"], run["n"], repeat_of(run)), {})[run["row"]] = run
    table = []
    for (variant, n, repeat), runs in sorted(groups.items()):
        for key, label in FIGURES:
            line: Obj = {
                "variant": variant,
                "n": n,
                "repeat": repeat,
                "figure": label,
                "values": {},
                "ratios": {},
            }
            # A figure added after a results file was written is absent from its runs: "-".
            measured = {name: run for name, run in runs.items() if key in run}
            for row in ROWS:
                if row.name in measured:
                    line["values"][row.name] = _figure(measured[row.name], key)
            if "upstream" in measured:
                theirs = _figure(measured["upstream"], key)
                for row in ROWS[1:]:
                    if row.name in measured:
                        line["ratios"][row.name] = ratio(_figure(measured[row.name], key), theirs)
            table.append(line)
    return table


def _number(value: float) -> str:
    if value == int(value) and abs(value) < 1e6:
        return str(int(value))
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def _ratio_text(value: float | None, ours: float) -> str:
    if value is None:
        return "= (0)" if ours == 0 else "n/a (upstream 0)"
    return f"{value:.2f}"


def markdown_table(results: Iterable[Obj]) -> str:
    """The ratio table, one block per (variant, N): figure | the rows run (upstream, ours, ...) |
    each of our rows over upstream. A ratio below 1 means this controller did better. Only the
    rows that ran are columns."""
    runs = list(results)
    shown = [r for r in ROWS if any(run["row"] == r.name for run in runs)]
    ours = [r for r in shown if r.name != "upstream"]
    repeated = any(repeat_of(run) > 0 for run in runs)
    lines: list[str] = []
    current: tuple[str, int, int] | None = None
    for line in ratio_rows(runs):
        if (line["variant"], line["n"], line["repeat"]) != current:
            current = (line["variant"], line["n"], line["repeat"])
            if lines:
                lines.append("")
            run_no = f", run {line['repeat'] + 1}" if repeated else ""
            lines.append(
                f"Variant {line['variant']} ({VARIANTS[line['variant']]}), N={line['n']}{run_no}"
            )
            lines.append("")
            heads = [r.name for r in shown] + [f"{r.name} / upstream" for r in ours]
            lines.append("| figure | " + " | ".join(heads) + " |")
            lines.append("|---|" + "---:|" * len(heads))
        values = line["values"]
        cells = [_number(values[r.name]) if r.name in values else "-" for r in shown]
        ratios = [
            _ratio_text(line["ratios"][r.name], values[r.name]) if r.name in line["ratios"] else "-"
            for r in ours
        ]
        lines.append(f"| {line['figure']} | " + " | ".join(cells + ratios) + " |")
    return "\n".join(lines) + "\n"


def spread_table(results: Iterable[Obj], row: str = "ours") -> str:
    """With repeated runs: per figure and (variant, N), the ratio ``row`` / upstream of each
    repetition, in run order, and their median ("-": upstream's figure was 0); empty when no
    (variant, N) ran more than once.
    One run's ratio carries the machine's run-to-run spread; the median of several does less."""
    per: dict[tuple[str, int], dict[str, list[float | None]]] = {}
    for line in ratio_rows(results):
        if row in line["ratios"]:
            figures = per.setdefault((line["variant"], line["n"]), {})
            figures.setdefault(line["figure"], []).append(line["ratios"][row])
    repeated = {k: v for k, v in per.items() if len(next(iter(v.values()))) > 1}
    if not repeated:
        return ""
    lines = [
        f"{row} / upstream per repetition (median last)",
        "",
        "| figure | variant, N | ratios | median |",
        "|---|---|---|---:|",
    ]
    for _, label in FIGURES:
        for (variant, n), figures in sorted(repeated.items()):
            ratios = figures.get(label, [])
            if not ratios:
                continue  # a figure these runs did not record
            known = sorted(r for r in ratios if r is not None)
            cells = ", ".join("-" if r is None else f"{r:.2f}" for r in ratios)
            median = f"{statistics.median(known):.2f}" if known else "-"
            lines.append(f"| {label} | {variant}, {n} | {cells} | {median} |")
    return "\n".join(lines) + "\n"


# A work queue's counters (kube-controller-manager's /metrics): queue name -> figure -> value.
QueueWork = dict[str, dict[str, float]]
# workqueue metric family (as the parser names it, without _total) -> (sample suffix, our name)
_QUEUE_FAMILIES = {
    "workqueue_adds": ("_total", "adds"),
    "workqueue_retries": ("_total", "retries"),
    "workqueue_work_duration_seconds": ("_sum", "work_seconds"),
}


def parse_queue_work(metrics_text: str) -> QueueWork:
    """Per work queue: items added, retries, and seconds its workers spent on items (wall
    time, rate-limiter waits included), from a component's Prometheus text."""
    found: QueueWork = {}
    for family in text_string_to_metric_families(metrics_text):
        wanted = _QUEUE_FAMILIES.get(family.name)
        if wanted is None:
            continue
        suffix, short = wanted
        for sample in family.samples:
            if sample.name == family.name + suffix:
                queue = found.setdefault(sample.labels.get("name", ""), {})
                queue[short] = queue.get(short, 0.0) + sample.value
    return found


def queue_work_delta(before: QueueWork, after: QueueWork, n: int) -> QueueWork:
    """``after - before`` per queue and figure, per JobSet (``n``); queues that did nothing are
    left out."""
    delta: QueueWork = {}
    for queue, figures in sorted(after.items()):
        was = before.get(queue, {})
        per = {k: round((v - was.get(k, 0.0)) / n, 4) for k, v in sorted(figures.items())}
        if any(per.values()):
            delta[queue] = per
    return delta


def reduced(obj: Obj) -> Obj:
    """What the counting needs of an object: its identity, version and status."""
    meta = obj.get("metadata") or {}
    return {
        "metadata": {k: meta.get(k) for k in ("name", "namespace", "resourceVersion")},
        "status": obj.get("status") or {},
    }


def completed(jobset: Obj) -> bool:
    """The JobSet has ``Completed=True``."""
    conditions = (jobset.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Completed" and c.get("status") == "True" for c in conditions)


def finished(jobset: Obj) -> bool:
    """The JobSet has a ``terminalState`` (Completed or Failed)."""
    return bool((jobset.get("status") or {}).get("terminalState"))


@dataclass
class Progress:
    """How far a benchmark's workload got (bench/progress.py feeds it from watches): the Jobs
    seen, the JobSets ``done``, and the ``clock`` times at which the Jobs reached
    ``jobs_wanted`` and the JobSets ``jobsets_wanted`` (None until then)."""

    jobs_wanted: int
    jobsets_wanted: int
    done: Callable[[Obj], bool]
    clock: Callable[[], float]
    jobs_seen: set[str] = field(default_factory=set)
    jobsets_done: set[str] = field(default_factory=set)
    children_at: float | None = None
    completed_at: float | None = None
    # Set once all Jobs exist (their watch can stop).
    all_jobs: asyncio.Event = field(default_factory=asyncio.Event)

    def on_job(self, job: Obj) -> None:
        self.jobs_seen.add(str(job["metadata"]["name"]))
        if self.children_at is None and len(self.jobs_seen) >= self.jobs_wanted:
            self.children_at = self.clock()
            self.all_jobs.set()

    def on_jobset(self, jobset: Obj) -> None:
        if self.done(jobset):
            self.jobsets_done.add(str(jobset["metadata"]["name"]))
            if self.completed_at is None and len(self.jobsets_done) >= self.jobsets_wanted:
                self.completed_at = self.clock()
