"""pacing: milestones are written at once, counters-only changes within the longest hold."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.config import parse
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
    ("stored", "desired", "held_since", "now", "longest_hold", "delay"),
    [
        # A first status of counters only is held like any counters (from the first pass that
        # found it unwritten); one that holds a milestone goes out at once.
        pytest.param({}, {"restarts": 0, "replicatedJobsStatus": [_rj("w", 1)]}, 100.0, 101.0,
                     5.0, 4.0, id="first-status-of-counters-held"),
        pytest.param({}, BASE, 100.0, 101.0, 5.0, 0.0, id="first-status-with-a-condition"),
        # Zero counters where none are stored tell nothing: written with the first news.
        pytest.param({}, {"restarts": 0, "replicatedJobsStatus": [_rj("w")]}, None, 101.0, 5.0,
                     math.inf, id="first-status-of-zero-counters-waits-for-news"),
        pytest.param(_with(replicatedJobsStatus=[]), BASE, 100.0, 101.0, 5.0, math.inf,
                     id="zero-counters-added-tell-nothing"),
        pytest.param(_with(replicatedJobsStatus=[_rj("w", 1)]), BASE, 100.0, 101.0, 5.0, 4.0,
                     id="counters-back-to-zero-are-news"),
        pytest.param({}, {"restarts": 0, "replicatedJobsStatus": [_rj("w")]}, None, 101.0, 0.0,
                     0.0, id="zero-counters-written-with-pacing-off"),
        pytest.param({}, _with(conditions=[_cond("Suspended")]), 100.0, 101.0, 5.0, 0.0,
                     id="first-status-with-a-milestone-at-once"),
        # The pass that first finds counters unwritten holds them the whole longest hold.
        pytest.param(BASE, _with(replicatedJobsStatus=[_rj("w", 1)]), None, 5.0, 5.0, 5.0,
                     id="first-pass-holds-the-longest-hold"),
        pytest.param(BASE, _with(replicatedJobsStatus=[_rj("w", 1)]), 100.0, 101.0, 0.0, 0.0,
                     id="longest-hold-0-writes-every-change"),
        pytest.param(BASE, _with(replicatedJobsStatus=[_rj("w", 1)]), 100.0, 101.0, 5.0, 4.0,
                     id="counters-held"),
        pytest.param(BASE, _with(volumes=_vol(1, 0)), 100.0, 104.0, 5.0, 1.0,
                     id="volume-counters-held"),
        pytest.param(BASE, _with(replicatedJobsStatus=[_rj("w", 1)]), 100.0, 105.0, 5.0, 0.0,
                     id="counters-due"),
        pytest.param(BASE, _with(replicatedJobsStatus=[_rj("w", 1)]), 100.0, 130.0, 5.0, 0.0,
                     id="counters-overdue"),
        # A longer hold (users who want fewer writes): the same rule.
        pytest.param(BASE, _with(replicatedJobsStatus=[_rj("w", 1)]), 100.0, 101.0, 60.0, 59.0,
                     id="longer-hold-set"),
        # A clock that went backwards (held_since after now) still holds no more than the bound.
        pytest.param(BASE, _with(replicatedJobsStatus=[_rj("w", 1)]), 200.0, 101.0, 5.0, 5.0,
                     id="never-past-the-longest-hold"),
        pytest.param(BASE, _with(conditions=[_cond("VolumesReady")]), 100.0, 101.0, 5.0, 0.0,
                     id="condition-status-flip"),
        pytest.param(BASE, _with(conditions=[_cond("VolumesReady", "False", "Lost")]), 100.0,
                     101.0, 5.0, 0.0, id="condition-reason-change"),
        pytest.param(BASE, _with(conditions=[*BASE["conditions"], _cond("Completed")],
                                 terminalState="Completed"), 100.0, 101.0, 5.0, 0.0,
                     id="terminal"),
        pytest.param(BASE, _with(restarts=1, replicatedJobsStatus=[_rj("w")]), 100.0, 101.0,
                     5.0, 0.0, id="restart"),
        pytest.param(BASE, _with(restartsCountTowardsMax=1), 100.0, 101.0, 5.0, 0.0,
                     id="restart-counting"),
        # The pass that sees the new attempt's Jobs ready ends the restart: the condition takes
        # the counters along at once.
        pytest.param(_with(conditions=[_cond("RestartingJobSet", "True", "DefaultFailurePolicy")]),
                     _with(conditions=[_cond("RestartingJobSet", "False", "JobsReady")],
                           replicatedJobsStatus=[_rj("w", 1, 1)]), 100.0, 101.0, 5.0, 0.0,
                     id="restart-ends-with-ready-counters"),
        # The API server drops zero and empty values: they are not a milestone.
        pytest.param(_with(restarts=None), _with(restarts=0,
                     replicatedJobsStatus=[_rj("w", 1)]), 100.0, 101.0, 5.0, 4.0,
                     id="omitempty-zero-is-no-change"),
        pytest.param(BASE, _with(conditions=list(reversed([_cond("A"), _cond("B")]))),
                     100.0, 101.0, 5.0, 0.0, id="new-conditions"),
    ],
)  # fmt: skip
def test_status_delay(
    stored: dict[str, Any],
    desired: dict[str, Any],
    held_since: float | None,
    now: float,
    longest_hold: float,
    delay: float,
) -> None:
    got = pacing.status_delay(_s(stored), _s(desired), held_since, now, longest_hold)
    assert got == pytest.approx(delay)


def test_the_default_longest_hold_is_5_seconds() -> None:
    """The bound the docs promise: counters at most 5 s late by default."""
    assert parse([], env={}).status_progress_period == 5.0


def test_condition_order_is_not_a_milestone() -> None:
    stored = _with(conditions=[_cond("A"), _cond("B")])
    desired = _with(conditions=[_cond("B"), _cond("A")], replicatedJobsStatus=[_rj("w", 2)])
    assert not _milestone(stored, desired)


@given(
    held_for=st.floats(min_value=-10, max_value=1e6, allow_nan=False),
    longest_hold=st.floats(min_value=0, max_value=1e4, allow_nan=False),
    active=st.integers(min_value=1, max_value=100),
    queued=st.booleans(),
)
def test_no_hold_ever_exceeds_the_longest(
    held_for: float, longest_hold: float, active: int, queued: bool
) -> None:
    """Whatever has been held for how long (a clock gone backwards included), the delay is at
    most the longest hold, and it ends exactly the longest hold after the hold began."""
    desired = _with(replicatedJobsStatus=[_rj("w", active)])
    replicas = {"w": 4} if queued else None
    now = 1000.0 + held_for
    delay = pacing.status_delay(_s(BASE), _s(desired), 1000.0, now, longest_hold, replicas)
    assert 0.0 <= delay <= longest_hold
    assert delay == 0.0 or now + delay == pytest.approx(1000.0 + longest_hold) or held_for < 0
    first = pacing.status_delay(_s(BASE), _s(desired), None, now, longest_hold, replicas)
    assert first in (0.0, longest_hold)


def test_a_milestone_is_never_held_whatever_the_hold() -> None:
    desired = _with(conditions=[_cond("A"), _cond("Completed")])
    assert pacing.status_delay(_s(BASE), _s(desired), 100.0, 101.0, 3600.0) == 0.0
    assert pacing.status_delay(_s(BASE), _s(desired), None, 101.0, 3600.0) == 0.0


@pytest.mark.parametrize(
    ("held_since", "unwritten", "now", "after"),
    [
        pytest.param(None, True, 7.0, 7.0, id="first-pass-begins-the-hold"),
        pytest.param(3.0, True, 7.0, 3.0, id="later-pass-keeps-its-beginning"),
        pytest.param(3.0, False, 7.0, None, id="nothing-unwritten-ends-it"),
        pytest.param(None, False, 7.0, None, id="nothing-unwritten-nothing-held"),
    ],
)  # fmt: skip
def test_held_from(
    held_since: float | None, unwritten: bool, now: float, after: float | None
) -> None:
    assert pacing.held_from(held_since, unwritten, now) == after


def _run(
    changes: list[float], milestones: list[float], longest_hold: float
) -> tuple[list[float], dict[float, float]]:
    """Drive a JobSet's passes as the reconciler does: a pass at every counter change and every
    milestone (child events), and one when a hold asks to come back. Returns the times of the
    counter-only writes and, per counter change, when a write carried it."""
    version, stored, held_since, back = 0, 0, None, None
    seen: list[tuple[float, int]] = []  # (time, version) of each change
    writes: list[float] = []
    carried: dict[float, float] = {}
    events = sorted([(t, "change") for t in changes] + [(t, "milestone") for t in milestones])
    while events or back is not None:
        if back is not None and (not events or back <= events[0][0]):
            now, kind, back = back, "back", None
        else:
            now, kind = events.pop(0)
        if kind == "change":
            version += 1
            seen.append((now, version))
        # The status the pass decides: counters of ``version``; a milestone when one is new.
        milestone = kind == "milestone"
        stored_status = _with(replicatedJobsStatus=[_rj("w", stored)])
        if milestone:
            desired = _with(conditions=[_cond("M", reason=str(now))],
                            replicatedJobsStatus=[_rj("w", version)])  # fmt: skip
            stored_status = _with(conditions=[_cond("M", reason="before")],
                                  replicatedJobsStatus=[_rj("w", stored)])  # fmt: skip
        else:
            desired = _with(replicatedJobsStatus=[_rj("w", version)])
        unwritten = None if desired == stored_status else _s(desired)
        timing = pacing.status_timing(
            _s(stored_status),
            unwritten,
            with_events=False,
            requeue_after=None,
            held_since=held_since,
            now=now,
            longest_hold=longest_hold,
        )
        held_since = pacing.held_from(held_since, unwritten is not None, now)
        if unwritten is not None and timing.write:
            if not milestone:
                writes.append(now)
            for at, v in seen:
                if stored < v <= version:
                    carried[at] = now
            stored, held_since = version, None  # stored: nothing held any more
        elif timing.requeue_after is not None:
            back = now + timing.requeue_after
    return writes, carried


def _fewest_writes(changes: list[float], milestones: list[float], longest_hold: float) -> int:
    """The fewest counter-only writes any rule can make that writes every change within
    ``longest_hold``, milestones carrying what came before them: changes not carried by a
    milestone within the hold, covered greedily by the latest write each allows. (A pass that
    comes back at the end of a hold goes before a change at the same moment: ends are open.)"""
    count, covered_until = 0, float("-inf")
    for at in sorted(changes):
        if at < covered_until:
            continue
        if any(at < m < at + longest_hold for m in milestones):
            continue
        count, covered_until = count + 1, at + longest_hold
    return count


@given(
    changes=st.lists(st.floats(0.0, 300.0), max_size=40).map(lambda c: sorted(set(c))),
    milestones=st.lists(st.floats(0.0, 300.0), max_size=5).map(lambda m: sorted(set(m))),
    longest_hold=st.sampled_from([1.0, 5.0, 10.0, 60.0]),
)
def test_every_change_is_written_within_the_longest_hold_with_the_fewest_writes(
    changes: list[float], milestones: list[float], longest_hold: float
) -> None:
    """Through a JobSet's whole life: no change waits longer than the longest hold, counter-only
    writes are at least the longest hold apart, and no rule with the same bound writes fewer."""
    milestones = [m for m in milestones if m not in changes]
    writes, carried = _run(changes, milestones, longest_hold)
    assert set(carried) == set(changes)
    for at, written in carried.items():
        assert at <= written <= at + longest_hold + 1e-9
    assert all(b - a >= longest_hold - 1e-9 for a, b in itertools.pairwise(writes))
    assert len(writes) == _fewest_writes(changes, milestones, longest_hold)


def test_a_busy_jobset_writes_its_counters_once_per_longest_hold() -> None:
    """Counters change every second for 10 minutes, nothing else: one counter-only write per
    longest hold (600 s / 5 s; upstream's rule would write 600), each change at most 5 s late."""
    writes, carried = _run([float(s) for s in range(1, 601)], [], 5.0)
    assert max(carried[at] - at for at in carried) == 5.0
    assert len(writes) == 600 / 5


def test_a_condition_message_alone_is_progress() -> None:
    pending = _cond("VolumesReady", "False", "ClaimsPending")
    stored = _with(conditions=[{**pending, "message": "3 of 3 claims are waiting"}])
    desired = _with(conditions=[{**pending, "message": "2 of 3 claims are waiting"}])
    assert not _milestone(stored, desired)
    assert pacing.status_delay(_s(stored), _s(desired), 100.0, 101.0, 5.0) == pytest.approx(4.0)


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
    delay = pacing.status_delay(_s(stored), _s(desired), 100.0, 101.0, 5.0, replicas=REPLICAS)
    assert delay == (0.0 if milestone else pytest.approx(4.0))


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


def test_status_timing_writes_what_kueue_reads_at_once() -> None:
    timing = pacing.status_timing(
        _s(_rjs((0, 0, 0), (2, 0, 0))),
        _s(_rjs((0, 0, 0), (0, 0, 0))),
        with_events=False,
        requeue_after=None,
        held_since=100.0,
        now=101.0,
        longest_hold=5.0,
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
