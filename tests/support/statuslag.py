"""How late a JobSet's status counters are: from a change of its Jobs to the status write that
carries it, told by watches of both (the scale benchmark, bench/bench_scale.py, feeds a
``Trace``; tests/unit/test_status_lag.py checks these pure parts).

A JobSet's expected counters are summed from its Jobs as the controller sums them
(``children.view``: ready, succeeded, failed, active, suspended per replicated job); each time
that sum changes is a **change**. A **status write** is a watch event of the JobSet whose status
differs from the one seen before; it carries the newest change whose sum equals its counters.
A change's lag is the time from when it was seen to the first write that carries it or a later
change. Both watches run in one process and one event loop, so their delivery delays mostly
cancel out; what remains is the controller's batch, queue and hold, and its write's round trip.

``fewest_counter_writes`` answers the question that picks the longest hold: given the changes and
the milestone writes of a run, how many counter-only writes would any rule make that writes every
change within ``hold`` (the rule the controller follows makes exactly that many; see
controller/jobset/pacing.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.jobset import api, children
from controller.jobset.jobsetstatus import EMPTY, JobSetStatus

Obj = dict[str, Any]
# (replicated job, ready, succeeded, failed, active, suspended), sorted, all-zero entries left out.
Counts = tuple[tuple[str, int, int, int, int, int], ...]


def job_counts(job: Obj) -> tuple[str, str, str, tuple[int, int, int, int, int]] | None:
    """(JobSet, Job, replicated job, its contribution to the counters) of a child Job; None
    for a Job without the JobSet's labels. Ready, succeeded ... as ``status.replicated_jobs_status``
    counts a Job (its own spec tells how many pods make it ready)."""
    view = children.view(job)
    jobset = view.labels.get(api.JOBSET_NAME)
    if not isinstance(jobset, str) or view.replicated_job is None:
        return None
    if view.is_complete:
        counts = (0, 1, 0, 0, 0)
    elif view.is_failed:
        counts = (0, 0, 1, 0, 0)
    else:
        counts = (int(view.is_ready()), 0, 0, int(view.is_active), int(view.suspended))
    return jobset, view.name, view.replicated_job, counts


def summed(jobs: Iterable[tuple[str, tuple[int, int, int, int, int]]]) -> Counts:
    """The counters of a JobSet whose Jobs contribute ``jobs`` ((replicated job, counts) each)."""
    sums: dict[str, list[int]] = {}
    for rjob, counts in jobs:
        total = sums.setdefault(rjob, [0, 0, 0, 0, 0])
        for k, value in enumerate(counts):
            total[k] += value
    return tuple((name, t[0], t[1], t[2], t[3], t[4]) for name, t in sorted(sums.items()) if any(t))


def status_counts(status: JobSetStatus) -> Counts:
    """The counters a JobSet's status shows, in ``summed``'s form."""
    return tuple(
        sorted(
            (r.name, r.ready, r.succeeded, r.failed, r.active, r.suspended)
            for r in status.replicated_jobs_status
            if (r.ready, r.succeeded, r.failed, r.active, r.suspended) != (0, 0, 0, 0, 0)
        )
    )


@dataclass(frozen=True)
class Write:
    """A status write as a watch saw it: when, the counters it shows, and whether it carried a
    milestone (a write the controller makes at once, whatever the hold)."""

    at: float
    counts: Counts
    milestone: bool


@dataclass
class Trace:
    """The changes of each JobSet's expected counters and its status writes, as watches of its
    Jobs and of it deliver them (``clock``: when each is seen)."""

    clock: Callable[[], float]
    jobs: dict[str, dict[str, tuple[str, tuple[int, int, int, int, int]]]] = field(
        default_factory=dict
    )
    changes: dict[str, list[tuple[float, Counts]]] = field(default_factory=dict)
    writes: dict[str, list[Write]] = field(default_factory=dict)
    statuses: dict[str, JobSetStatus] = field(default_factory=dict)

    def on_job(self, job: Obj) -> None:
        found = job_counts(job)
        if found is None:
            return
        jobset, name, rjob, counts = found
        jobs = self.jobs.setdefault(jobset, {})
        if jobs.get(name) == (rjob, counts):
            return
        jobs[name] = (rjob, counts)
        now = summed(jobs.values())
        seen = self.changes.setdefault(jobset, [])
        if (seen[-1][1] if seen else ()) != now:
            seen.append((self.clock(), now))

    def on_jobset(self, jobset: Obj) -> None:
        name = str((jobset.get("metadata") or {}).get("name"))
        status = JobSetStatus.parse(jobset.get("status") or {})
        before = self.statuses.get(name, EMPTY)
        if status.same_as(before):
            return  # not a status write (metadata, or the same status again)
        self.statuses[name] = status
        write = Write(self.clock(), status_counts(status), status.is_milestone_from(before))
        self.writes.setdefault(name, []).append(write)

    def dump(self) -> dict[str, Any]:
        """Every JobSet's changes and writes, as JSON (``--keep`` of the scale benchmark)."""
        return {
            name: {
                "changes": changes,
                "writes": [(w.at, w.counts, w.milestone) for w in self.writes.get(name, [])],
            }
            for name, changes in self.changes.items()
        }


def lags(changes: list[tuple[float, Counts]], writes: list[Write]) -> tuple[list[float], int]:
    """The lag of each change that a write carried, and how many no write carried (the run ended
    first). A write carries the newest change at or before it whose counters it shows, and every
    change before that one."""
    # When each write's counters were last the expected ones (None: never; the zero counters
    # of a JobSet without Jobs are the state before any change).
    carried: list[float | None] = []
    for write in writes:
        newest: float | None = -math.inf if write.counts == () else None
        for at, counts in changes:
            if at > write.at:
                break
            if counts == write.counts:
                newest = at
        carried.append(newest)
    found, uncarried = [], 0
    for at, _ in changes:
        lag = next(
            (
                write.at - at
                for write, newest in zip(writes, carried, strict=True)
                if write.at >= at and newest is not None and newest >= at
            ),
            None,
        )
        if lag is None:
            uncarried += 1
        else:
            found.append(lag)
    return found, uncarried


def fewest_counter_writes(
    changes: Iterable[float], milestones: Iterable[float], hold: float
) -> int:
    """The fewest counter-only writes that write every change (times) within ``hold``, the
    milestone writes (times) carrying the changes before them: a change no milestone carries
    within the hold, and no write made for an earlier change, needs a write, made as late as the
    hold allows. (Greedy, and no rule with the bound does better: the spans of those writes do
    not overlap, and each needs a write.)"""
    marks = sorted(milestones)
    count, covered_until = 0, -math.inf
    for at in sorted(changes):
        if at < covered_until:
            continue
        if any(at <= m < at + hold for m in marks):
            continue
        count, covered_until = count + 1, at + hold
    return count


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank); NaN when there are none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def _quantiles(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(quantile(values, 0.5), 3),
        "p90": round(quantile(values, 0.9), 3),
        "p99": round(quantile(values, 0.99), 3),
        "max": round(max(values, default=math.nan), 3),
        "mean": round(sum(values) / len(values), 3) if values else math.nan,
    }


def summary(
    trace: Trace, holds: Iterable[float], bound: float | None, since: float | None = None
) -> dict[str, Any]:
    """The figures of a run: the changes seen, the lag distribution over all JobSets (and over
    the changes seen from ``since`` on: once the controller's first passes of every JobSet are
    done, its queue is short), how many changes waited longer than ``bound`` (the longest hold
    of the run), the status writes seen, and the fewest counter-only writes per JobSet each hold
    of ``holds`` would need for the same changes and milestones."""
    every: list[float] = []
    later: list[float] = []
    uncarried = 0
    for name, changes in trace.changes.items():
        found, missed = lags(changes, trace.writes.get(name, []))
        every += found
        uncarried += missed
        if since is not None:
            # The lags are of the first changes: a write that carries one carries those before.
            times = [at for at, _ in changes]
            later += [lag for at, lag in zip(times, found, strict=False) if at >= since]
    n = max(1, len(trace.statuses))
    writes: Mapping[str, list[Write]] = trace.writes
    milestone_writes = sum(w.milestone for ws in writes.values() for w in ws)
    all_writes = sum(len(ws) for ws in writes.values())
    fewest = {
        f"{hold:g}": round(
            sum(
                fewest_counter_writes(
                    (at for at, _ in trace.changes.get(name, [])),
                    (w.at for w in ws if w.milestone),
                    hold,
                )
                for name, ws in writes.items()
            )
            / n,
            3,
        )
        for hold in holds
    }
    return {
        "jobsets": len(trace.statuses),
        "changes": sum(len(c) for c in trace.changes.values()),
        "changes_carried": len(every),
        "changes_not_carried": uncarried,
        "lag_seconds": _quantiles(every),
        "lag_seconds_since": None if since is None else _quantiles(later),
        "bound_seconds": bound,
        "changes_later_than_bound": None if bound is None else sum(lag > bound for lag in every),
        "changes_later_than_bound_plus_1s": (
            None if bound is None else sum(lag > bound + 1 for lag in every)
        ),
        "status_writes_seen_per_jobset": round(all_writes / n, 3),
        "counter_only_writes_seen_per_jobset": round((all_writes - milestone_writes) / n, 3),
        "fewest_counter_writes_per_jobset_by_hold": fewest,
    }
