"""The scale benchmark's lag measure (tests/support/statuslag.py): counters summed from Jobs as
the controller sums them, status writes told from watch events, each change's lag to the write
that carries it, and the fewest counter-only writes a hold allows."""

from __future__ import annotations

import math
from typing import Any

import pytest

from controller.jobset import api
from tests.support.statuslag import (
    Trace,
    Write,
    fewest_counter_writes,
    job_counts,
    lags,
    quantile,
    summary,
)

Obj = dict[str, Any]


def _job(name: str, rjob: str = "w", jobset: str = "js", **status: Any) -> Obj:
    return {
        "metadata": {
            "name": name,
            "labels": {api.JOBSET_NAME: jobset, api.REPLICATED_JOB_NAME: rjob},
        },
        "spec": {"parallelism": 1, "completions": 1},
        "status": status,
    }


READY = [{"type": "VolumesReady", "status": "True", "reason": "ClaimsBound"}]


def _jobset(conditions: list[Obj] = READY, **counts: int) -> Obj:
    rjs = [{"name": "w", **counts}] if counts else []
    return {
        "metadata": {"name": "js"},
        "status": {"conditions": conditions, "replicatedJobsStatus": rjs},
    }


COMPLETE = [{"type": "Complete", "status": "True"}]


@pytest.mark.parametrize(
    ("job", "counts"),
    [
        pytest.param(_job("a"), (0, 0, 0, 0, 0), id="created"),
        pytest.param(_job("a", active=1), (0, 0, 0, 1, 0), id="active"),
        pytest.param(_job("a", active=1, ready=1), (1, 0, 0, 1, 0), id="ready"),
        pytest.param(_job("a", succeeded=1, conditions=COMPLETE), (0, 1, 0, 0, 0), id="complete"),
        pytest.param(_job("a", conditions=[{"type": "Failed", "status": "True"}]),
                     (0, 0, 1, 0, 0), id="failed"),
    ],
)  # fmt: skip
def test_a_job_counts_as_the_controller_counts_it(job: Obj, counts: tuple[int, ...]) -> None:
    assert job_counts(job) == ("js", "a", "w", counts)


def test_a_job_without_the_labels_is_not_counted() -> None:
    assert job_counts({"metadata": {"name": "x"}, "status": {"active": 1}}) is None


def _trace(events: list[tuple[float, str, Obj]]) -> Trace:
    """A trace fed ``events`` ((time seen, "job" or "jobset", object)) in order."""
    now = [0.0]
    trace = Trace(clock=lambda: now[0])
    for at, kind, obj in events:
        now[0] = at
        (trace.on_job if kind == "job" else trace.on_jobset)(obj)
    return trace


def test_changes_and_writes_are_told_from_the_watches() -> None:
    trace = _trace([
        (0.0, "jobset", _jobset()),  # the first status: a condition, a milestone
        (1.0, "job", _job("a")),  # created: no change of the counters
        (2.0, "job", _job("a", active=1)),
        (2.5, "job", _job("b", active=1)),
        (3.0, "jobset", {**_jobset(), "metadata": {"name": "js", "finalizers": ["f"]}}),
        (7.0, "jobset", _jobset(active=2)),  # counters only
        (7.5, "jobset", _jobset(active=2)),  # the same status: no write
        (8.0, "jobset", _jobset([{"type": "Completed", "status": "True"}], active=2)),
    ])  # fmt: skip
    assert [at for at, _ in trace.changes["js"]] == [2.0, 2.5]
    writes = trace.writes["js"]
    assert [(w.at, w.milestone) for w in writes] == [(0.0, True), (7.0, False), (8.0, True)]
    assert lags(trace.changes["js"], writes) == ([5.0, 4.5], 0)


W = ("w", 0, 0, 0, 1, 0)
WW = ("w", 0, 0, 0, 2, 0)


@pytest.mark.parametrize(
    ("changes", "writes", "expected"),
    [
        # A write carries the change whose counters it shows, and the ones before it.
        pytest.param([(1.0, (W,)), (2.0, (WW,))], [Write(6.0, (WW,), False)],
                     ([5.0, 4.0], 0), id="one-write-carries-two"),
        # A write of older counters does not carry a newer change.
        pytest.param([(1.0, (W,)), (2.0, (WW,))],
                     [Write(2.1, (W,), False), Write(7.0, (WW,), False)],
                     ([1.1, 5.0], 0), id="older-write-does-not-carry"),
        pytest.param([(1.0, (W,)), (2.0, (WW,))], [Write(1.5, (W,), True)], ([0.5], 1),
                     id="last-change-never-carried"),
        # Counters back to what a write before showed: a write after the return carries it.
        pytest.param([(1.0, (W,)), (2.0, ()), (3.0, (W,))],
                     [Write(1.2, (W,), False), Write(2.5, (), True), Write(4.0, (W,), False)],
                     ([0.2, 0.5, 1.0], 0), id="counts-come-back"),
    ],
)  # fmt: skip
def test_lags(
    changes: list[tuple[float, Any]], writes: list[Write], expected: tuple[list[float], int]
) -> None:
    found, missed = lags(changes, writes)
    assert found == pytest.approx(expected[0]) and missed == expected[1]


@pytest.mark.parametrize(
    ("changes", "milestones", "hold", "count"),
    [
        pytest.param([], [], 5.0, 0, id="nothing"),
        pytest.param([1.0, 2.0, 5.9], [], 5.0, 1, id="within-one-hold"),
        pytest.param([1.0, 2.0, 6.0], [], 5.0, 2, id="the-hold-ends-before"),
        pytest.param([1.0, 2.0], [4.0], 5.0, 0, id="a-milestone-carries-them"),
        pytest.param([1.0, 2.0], [7.0], 5.0, 1, id="a-milestone-too-late"),
        pytest.param([float(s) for s in range(60)], [], 5.0, 12, id="every-second-for-a-minute"),
        pytest.param([float(s) for s in range(60)], [], 60.0, 1, id="a-longer-hold"),
    ],
)
def test_fewest_counter_writes(
    changes: list[float], milestones: list[float], hold: float, count: int
) -> None:
    assert fewest_counter_writes(changes, milestones, hold) == count


def test_quantile_is_nearest_rank() -> None:
    assert quantile([3.0, 1.0, 2.0, 4.0], 0.5) == 2.0
    assert quantile([3.0, 1.0, 2.0, 4.0], 0.99) == 4.0
    assert math.isnan(quantile([], 0.5))


def test_summary_of_a_run() -> None:
    trace = _trace([
        (0.0, "jobset", _jobset()),
        (2.0, "job", _job("a", active=1)),
        (9.0, "jobset", _jobset(active=1)),
        (10.0, "job", _job("b", active=1)),
    ])  # fmt: skip
    got = summary(trace, holds=[5.0, 30.0], bound=5.0, since=5.0)
    assert got["changes"] == 2 and got["changes_carried"] == 1 and got["changes_not_carried"] == 1
    assert got["lag_seconds"]["max"] == 7.0
    assert math.isnan(got["lag_seconds_since"]["max"])  # the change at 10 s was not carried
    assert got["changes_later_than_bound"] == 1
    assert got["changes_later_than_bound_plus_1s"] == 1
    assert got["status_writes_seen_per_jobset"] == 2.0
    assert got["counter_only_writes_seen_per_jobset"] == 1.0
    assert got["fewest_counter_writes_per_jobset_by_hold"] == {"5": 2.0, "30": 1.0}
