"""pacing: milestones are written at once, counters-only changes at most once per period."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.jobset import pacing
from controller.jobset.jobsetstatus import JobSetStatus


def _s(status: dict[str, Any]) -> JobSetStatus:
    """The typed status of a stored (or desired) ``status`` object."""
    return JobSetStatus.parse(status)


def _milestone(
    stored: dict[str, Any], desired: dict[str, Any], replicas: dict[str, int] | None = None
) -> bool:
    return _s(desired).is_milestone_from(_s(stored), replicas)


def _cond(kind: str, status: str = "True", reason: str = "R") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": "m"}


def _rj(name: str, active: int = 0, ready: int = 0, succeeded: int = 0) -> dict[str, Any]:
    return {"name": name, "active": active, "ready": ready, "succeeded": succeeded}


def _vol(bound: int, pending: int) -> dict[str, Any]:
    return {"templates": [{"name": "data", "scope": "JobSet", "bound": bound, "pending": pending}]}


BASE: dict[str, Any] = {
    "restarts": 0,
    "conditions": [_cond("VolumesReady", "False", "ClaimsPending")],
    "replicatedJobsStatus": [_rj("w")],
    "volumes": _vol(0, 1),
}


def _with(**changes: Any) -> dict[str, Any]:
    return {**BASE, **changes}


@pytest.mark.parametrize(
    ("stored", "desired", "last_write", "now", "period", "delay"),
    [
        # A first status of counters only is held like any counters (from when the JobSet was
        # first seen); one that holds a milestone goes out at once.
        pytest.param({}, {"restarts": 0, "replicatedJobsStatus": [_rj("w", 1)]}, 100.0, 101.0,
                     10.0, 9.0, id="first-status-of-counters-held"),
        pytest.param({}, BASE, 100.0, 101.0, 10.0, 0.0, id="first-status-with-a-condition"),
        pytest.param({}, _with(conditions=[_cond("Suspended")]), 100.0, 101.0, 10.0, 0.0,
                     id="first-status-with-a-milestone-at-once"),
        pytest.param(BASE, _with(replicatedJobsStatus=[_rj("w", 1)]), None, 5.0, 10.0, 0.0,
                     id="no-write-since-start"),
        pytest.param(BASE, _with(replicatedJobsStatus=[_rj("w", 1)]), 100.0, 101.0, 0.0, 0.0,
                     id="period-0-writes-every-change"),
        pytest.param(BASE, _with(replicatedJobsStatus=[_rj("w", 1)]), 100.0, 101.0, 10.0, 9.0,
                     id="counters-held"),
        pytest.param(BASE, _with(volumes=_vol(1, 0)), 100.0, 104.0, 10.0, 6.0,
                     id="volume-counters-held"),
        pytest.param(BASE, _with(replicatedJobsStatus=[_rj("w", 1)]), 100.0, 110.0, 10.0, 0.0,
                     id="counters-due"),
        pytest.param(BASE, _with(replicatedJobsStatus=[_rj("w", 1)]), 100.0, 130.0, 10.0, 0.0,
                     id="counters-overdue"),
        pytest.param(BASE, _with(conditions=[_cond("VolumesReady")]), 100.0, 101.0, 10.0, 0.0,
                     id="condition-status-flip"),
        pytest.param(BASE, _with(conditions=[_cond("VolumesReady", "False", "Lost")]), 100.0,
                     101.0, 10.0, 0.0, id="condition-reason-change"),
        pytest.param(BASE, _with(conditions=[*BASE["conditions"], _cond("Completed")],
                                 terminalState="Completed"), 100.0, 101.0, 10.0, 0.0,
                     id="terminal"),
        pytest.param(BASE, _with(restarts=1, replicatedJobsStatus=[_rj("w")]), 100.0, 101.0,
                     10.0, 0.0, id="restart"),
        pytest.param(BASE, _with(restartsCountTowardsMax=1), 100.0, 101.0, 10.0, 0.0,
                     id="restart-counting"),
        # The pass that sees the new attempt's Jobs ready ends the restart: the condition takes
        # the counters along at once.
        pytest.param(_with(conditions=[_cond("RestartingJobSet", "True", "DefaultFailurePolicy")]),
                     _with(conditions=[_cond("RestartingJobSet", "False", "JobsReady")],
                           replicatedJobsStatus=[_rj("w", 1, 1)]), 100.0, 101.0, 10.0, 0.0,
                     id="restart-ends-with-ready-counters"),
        # The API server drops zero and empty values: they are not a milestone.
        pytest.param(_with(restarts=None), _with(restarts=0,
                     replicatedJobsStatus=[_rj("w", 1)]), 100.0, 101.0, 10.0, 9.0,
                     id="omitempty-zero-is-no-change"),
        pytest.param(BASE, _with(conditions=list(reversed([_cond("A"), _cond("B")]))),
                     100.0, 101.0, 10.0, 0.0, id="new-conditions"),
    ],
)  # fmt: skip
def test_status_delay(
    stored: dict[str, Any],
    desired: dict[str, Any],
    last_write: float | None,
    now: float,
    period: float,
    delay: float,
) -> None:
    assert pacing.status_delay(_s(stored), _s(desired), last_write, now, period) == pytest.approx(
        delay
    )


def test_condition_order_is_not_a_milestone() -> None:
    stored = _with(conditions=[_cond("A"), _cond("B")])
    desired = _with(conditions=[_cond("B"), _cond("A")], replicatedJobsStatus=[_rj("w", 2)])
    assert not _milestone(stored, desired)


@given(
    elapsed=st.floats(min_value=0, max_value=1e6, allow_nan=False),
    period=st.floats(min_value=0, max_value=1e4, allow_nan=False),
    active=st.integers(min_value=0, max_value=100),
    streak=st.integers(min_value=0, max_value=1000),
)
def test_counters_never_wait_longer_than_the_longest_hold(
    elapsed: float, period: float, active: int, streak: int
) -> None:
    desired = _with(replicatedJobsStatus=[_rj("w", active)])
    hold = pacing.progress_hold(period, streak)
    assert hold <= pacing.MAX_HOLD_PERIODS * period
    delay = pacing.status_delay(_s(BASE), _s(desired), 1000.0, 1000.0 + elapsed, period, streak)
    assert 0.0 <= delay <= hold + 1e-9 * (1000.0 + elapsed + hold)
    assert delay == 0.0 or elapsed + delay == pytest.approx(hold)


@pytest.mark.parametrize(
    ("streak", "hold"), [(0, 10.0), (1, 40.0), (2, 160.0), (3, 640.0), (4, 640.0), (60, 640.0)]
)
def test_progress_only_writes_in_a_row_lengthen_the_hold(streak: int, hold: float) -> None:
    assert pacing.progress_hold(10.0, streak) == hold
    desired = _with(replicatedJobsStatus=[_rj("w", 2)])
    assert pacing.status_delay(_s(BASE), _s(desired), 100.0, 101.0, 10.0, streak) == hold - 1.0


def test_a_milestone_is_never_held_whatever_the_streak() -> None:
    desired = _with(conditions=[_cond("A"), _cond("Completed")])
    assert pacing.status_delay(_s(BASE), _s(desired), 100.0, 101.0, 10.0, streak=9) == 0.0


@pytest.mark.parametrize(
    ("stored", "written", "with_events", "after"),
    [
        pytest.param(BASE, _with(replicatedJobsStatus=[_rj("w", 2)]), False, 3,
                     id="progress-only-lengthens"),
        pytest.param(BASE, _with(replicatedJobsStatus=[_rj("w", 2)]), True, 0,
                     id="with-events-starts-over"),
        pytest.param(BASE, _with(conditions=[_cond("A"), _cond("Completed")]), False, 0,
                     id="milestone-starts-over"),
        pytest.param({}, {"replicatedJobsStatus": [_rj("w", 2)]}, False, 3,
                     id="first-status-of-counters-is-progress"),
        pytest.param({}, _with(conditions=[_cond("Suspended")]), False, 0,
                     id="first-status-with-a-milestone-starts-over"),
    ],
)  # fmt: skip
def test_next_streak(
    stored: dict[str, Any], written: dict[str, Any], with_events: bool, after: int
) -> None:
    assert pacing.next_streak(2, _s(stored), _s(written), with_events) == after


def test_a_busy_jobset_writes_progress_ever_less_often() -> None:
    """Counters change every second for 10 minutes: writes at 10, 50, 210 s (holds of 1, 4 and
    16 periods), then 640 s later (the longest hold): after the 10-minute run."""
    period, last_write, streak, writes, stored = 10.0, 0.0, 0, 0, BASE
    for second in range(1, 601):
        desired = _with(replicatedJobsStatus=[_rj("w", second)])
        if (
            pacing.status_delay(_s(stored), _s(desired), last_write, float(second), period, streak)
            == 0
        ):
            streak = pacing.next_streak(streak, _s(stored), _s(desired), False)
            stored, last_write, writes = desired, float(second), writes + 1
    assert writes == 3  # 60 at a fixed 10 s pace


def test_a_queued_jobset_holds_counters_for_8_periods_at_most() -> None:
    """Kueue reclaims the quota of a partly finished replicated job's pods when it reads them."""
    assert pacing.progress_hold(10.0, 5, queued=True) == 80.0
    assert pacing.progress_hold(10.0, 1, queued=True) == 40.0
    stored = _with(replicatedJobsStatus=[_rj("w", 2)])
    desired = _with(replicatedJobsStatus=[_rj("w", 2, 1)])  # partial: what Kueue reads is same
    assert (
        pacing.status_delay(_s(stored), _s(desired), 100.0, 101.0, 10.0, 5, replicas={"w": 4})
        == 79.0
    )
    assert pacing.status_delay(_s(stored), _s(desired), 100.0, 101.0, 10.0, 5) == 639.0


def test_a_condition_message_alone_is_progress() -> None:
    pending = _cond("VolumesReady", "False", "ClaimsPending")
    stored = _with(conditions=[{**pending, "message": "3 of 3 claims are waiting"}])
    desired = _with(conditions=[{**pending, "message": "2 of 3 claims are waiting"}])
    assert not _milestone(stored, desired)
    assert pacing.status_delay(_s(stored), _s(desired), 100.0, 101.0, 10.0) == pytest.approx(9.0)


# ----------------------------------------------------------------------------- what Kueue reads

# Two replicated jobs: "init" (1 Job) and "w" (2 Jobs), as the spec says.
REPLICAS = {"init": 1, "w": 2}


def _rjs(init: tuple[int, int, int], w: tuple[int, int, int]) -> dict[str, Any]:
    """A status whose counters are (active, ready, succeeded) of init and of w."""
    return _with(replicatedJobsStatus=[_rj("init", *init), _rj("w", *w)])


@pytest.mark.parametrize(
    ("stored", "desired", "milestone"),
    [
        # IsActive: Kueue frees a suspended JobSet's quota once no Job is active any more.
        pytest.param(_rjs((1, 0, 0), (2, 1, 0)), _rjs((0, 0, 0), (1, 0, 0)), False,
                     id="active-goes-down-not-to-0-progress"),
        pytest.param(_rjs((0, 0, 0), (1, 0, 0)), _rjs((0, 0, 0), (0, 0, 0)), True,
                     id="total-active-reaches-0"),
        pytest.param(_rjs((0, 0, 0), (0, 0, 0)), _rjs((0, 0, 0), (1, 0, 0)), True,
                     id="first-active-job"),
        # PodsReady: ready + succeeded over every replicated job == replicas summed (3).
        pytest.param(_rjs((1, 1, 0), (2, 1, 0)), _rjs((1, 1, 0), (2, 2, 0)), True,
                     id="all-ready"),
        pytest.param(_rjs((1, 0, 0), (2, 1, 0)), _rjs((1, 1, 0), (2, 1, 0)), False,
                     id="more-ready-not-all-progress"),
        pytest.param(_rjs((0, 0, 1), (2, 2, 0)), _rjs((0, 0, 1), (2, 1, 0)), True,
                     id="a-ready-job-no-longer-ready"),
        pytest.param(_rjs((1, 1, 0), (2, 2, 0)), _rjs((0, 0, 1), (2, 2, 0)), True,
                     id="ready-to-succeeded-keeps-podsready-but-init-done"),
        # ReclaimablePods: a replicated job whose Jobs all succeeded; partial counts are progress.
        pytest.param(_rjs((0, 0, 0), (2, 2, 0)), _rjs((0, 0, 0), (1, 1, 1)), False,
                     id="one-of-two-succeeded-progress"),
        pytest.param(_rjs((0, 0, 0), (1, 1, 1)), _rjs((0, 0, 1), (1, 1, 1)), True,
                     id="init-all-succeeded"),
    ],
)  # fmt: skip
def test_what_kueue_reads_is_a_milestone(
    stored: dict[str, Any], desired: dict[str, Any], milestone: bool
) -> None:
    assert _milestone(stored, desired, REPLICAS) is milestone
    delay = pacing.status_delay(_s(stored), _s(desired), 100.0, 101.0, 10.0, replicas=REPLICAS)
    assert delay == (0.0 if milestone else pytest.approx(9.0))


def test_a_jobset_never_suspended_keeps_them_paced() -> None:
    """No queue manages a JobSet that was never suspended (replicas None): counters only."""
    assert not _milestone(_rjs((0, 0, 0), (1, 0, 0)), _rjs((0, 0, 0), (0, 0, 0)))
    assert not _milestone(_rjs((1, 1, 0), (2, 1, 0)), _rjs((1, 1, 0), (2, 2, 0)))


_SUSPENDED = _cond("Suspended", "True", "SuspendedJobs")
_RESUMED = _cond("Suspended", "False", "ResumeJobs")


@pytest.mark.parametrize(
    ("suspend", "stored", "expected"),
    [
        pytest.param(True, {}, True, id="created-suspended-no-status-yet"),
        pytest.param(False, {"conditions": [_SUSPENDED]}, True, id="resumed-this-pass"),
        pytest.param(False, {"conditions": [_cond("A"), _RESUMED]}, True, id="was-suspended"),
        pytest.param(False, BASE, False, id="never-suspended"),
        pytest.param(False, {}, False, id="new-not-suspended"),
        pytest.param(False, {"conditions": "junk"}, False, id="odd-conditions"),
    ],
)  # fmt: skip
def test_queued(suspend: bool, stored: dict[str, Any], expected: bool) -> None:
    assert pacing.queued(suspend, _s(stored)) is expected


def test_a_replicated_job_of_0_replicas_is_no_news() -> None:
    """Elastic JobSets may scale a replicated job to 0: it has no Jobs to succeed."""
    replicas = {"init": 0, "w": 2}
    assert not _milestone(_rjs((0, 0, 0), (2, 1, 0)), _rjs((0, 0, 0), (2, 0, 1)), replicas)


def test_the_streak_starts_over_on_what_kueue_reads() -> None:
    stored, written = _rjs((0, 0, 0), (1, 0, 0)), _rjs((0, 0, 0), (0, 0, 0))
    assert pacing.next_streak(3, _s(stored), _s(written), False, REPLICAS) == 0
    counters = _rjs((0, 0, 0), (2, 1, 0))
    assert pacing.next_streak(3, _s(_rjs((0, 0, 0), (2, 0, 0))), _s(counters), False, REPLICAS) == 4


def test_status_timing_writes_what_kueue_reads_at_once() -> None:
    timing = pacing.status_timing(
        _s(_rjs((0, 0, 0), (2, 0, 0))),
        _s(_rjs((0, 0, 0), (0, 0, 0))),
        with_events=False,
        requeue_after=None,
        last_write=100.0,
        now=101.0,
        period=10.0,
        streak=5,
        replicas=REPLICAS,
    )
    assert timing == pacing.StatusTiming(write=True, requeue_after=None)


@pytest.mark.parametrize(
    ("stored", "written", "with_events", "paced", "cause"),
    [
        # None: nothing stored yet.
        (None, BASE, False, True, "first"),
        (None, BASE, True, False, "first"),
        (BASE, _with(restarts=1), True, True, "events"),
        (BASE, _with(restarts=1), False, True, "milestone"),
        (BASE, _with(volumes=_vol(1, 0)), False, True, "progress"),
        (BASE, _with(volumes=_vol(1, 0)), False, False, "unpaced"),
    ],
)
def test_write_cause(
    stored: dict[str, Any] | None,
    written: dict[str, Any],
    with_events: bool,
    paced: bool,
    cause: str,
) -> None:
    previous = None if stored is None else _s(stored)
    assert pacing.write_cause(previous, _s(written), with_events=with_events, paced=paced) == cause


@pytest.mark.parametrize(
    ("held", "rate", "floor"),
    [(0, 2.0, 0.0), (1, 2.0, 0.5), (1000, 2.0, 500.0), (1000, 0.0, 0.0), (30, 3.0, 10.0)],
)
def test_backlog_hold(held: int, rate: float, floor: float) -> None:
    assert pacing.backlog_hold(held, rate) == floor


@pytest.mark.parametrize(
    ("streak", "floor", "replicas", "delay"),
    [
        pytest.param(0, 0.0, None, 9.0, id="no-backlog-one-period"),
        pytest.param(0, 5.0, None, 9.0, id="floor-below-the-hold"),
        pytest.param(0, 300.0, None, 299.0, id="busy-controller-holds-longer"),
        pytest.param(2, 300.0, None, 299.0, id="floor-above-the-streak-hold"),
        pytest.param(0, 5000.0, None, 639.0, id="never-past-64-periods"),
        pytest.param(0, 5000.0, {"w": 4}, 79.0, id="queued-never-past-8-periods"),
    ],
)
def test_a_backlog_lengthens_the_hold_within_the_longest(
    streak: int, floor: float, replicas: dict[str, int] | None, delay: float
) -> None:
    stored = _with(replicatedJobsStatus=[_rj("w", 2)])
    desired = _with(replicatedJobsStatus=[_rj("w", 2, 1)])
    got = pacing.status_delay(_s(stored), _s(desired), 100.0, 101.0, 10.0, streak, replicas, floor)
    assert got == pytest.approx(delay)


def test_a_milestone_is_never_held_by_a_backlog() -> None:
    desired = _with(conditions=[_cond("A"), _cond("Completed")])
    assert pacing.status_delay(_s(BASE), _s(desired), 100.0, 101.0, 10.0, floor=600.0) == 0.0


@pytest.mark.parametrize(
    ("rate", "burst", "asks", "allowed"),
    [
        # A period's worth at once, then one per 1 / rate.
        (
            1.0,
            3.0,
            [0.0, 0.0, 0.0, 0.0, 0.5, 1.0, 1.0],
            [True, True, True, False, False, True, False],
        ),
        (0.5, 0.0, [0.0, 0.0, 1.0, 2.0], [True, False, False, True]),  # burst at least one
        (0.0, 0.0, [0.0] * 5, [True] * 5),  # no budget
        (2.0, 1.0, [0.0, 10.0, 10.0, 10.0], [True, True, False, False]),  # saves up to the burst
    ],
)
def test_progress_budget(rate: float, burst: float, asks: list[float], allowed: list[bool]) -> None:
    budget = pacing.ProgressBudget(rate, burst)
    answers = []
    for now in asks:
        answer, budget = budget.take(now)
        answers.append(answer)
    assert answers == allowed


@pytest.mark.parametrize(
    ("rate", "held", "requeue_after", "back_after"),
    [
        (1.0, 0, None, 1.0),  # alone: one write's time
        (0.5, 0, None, 2.0),
        (1.0, 9, None, 10.0),  # behind 9 others held: the backlog's time (10 / rate)
        (1.0, 9, 3.0, 3.0),  # the plan's own time when sooner (a TTL, a requeue)
    ],
)
def test_a_refused_counter_write_is_held_and_comes_back_later(
    rate: float, held: int, requeue_after: float | None, back_after: float
) -> None:
    timing = pacing.ProgressBudget(rate, 1.0).refused(held, requeue_after)
    assert timing == pacing.StatusTiming(write=False, requeue_after=back_after)


@given(
    rate=st.floats(0.1, 10.0),
    asks=st.lists(st.floats(0.0, 100.0), min_size=1, max_size=200).map(sorted),
)
def test_progress_budget_never_allows_more_than_rate_and_burst(
    rate: float, asks: list[float]
) -> None:
    """Over any run, the writes allowed are at most the burst plus rate x the time elapsed."""
    burst = 5.0
    budget = pacing.ProgressBudget(rate, burst)
    allowed = 0
    for now in asks:
        answer, budget = budget.take(now)
        allowed += answer
    assert allowed <= burst + rate * (asks[-1] - asks[0]) + 1e-9
