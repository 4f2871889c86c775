"""pacing.status_timing: the status hold of a reconcile — write the plan's status now, or hold
counters back and come back when their hold ends (``status_delay`` is tabled in test_pacing)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.jobset import pacing
from controller.jobset.jobsetstatus import JobSetStatus
from controller.jobset.pacing import StatusTiming

_PENDING = {"type": "VolumesReady", "status": "False", "reason": "ClaimsPending", "message": "m"}
_BOUND = {"type": "VolumesReady", "status": "True", "reason": "ClaimsBound", "message": "m"}
STORED: dict[str, Any] = {
    "restarts": 0,
    "conditions": [_PENDING],
    "replicatedJobsStatus": [{"name": "w", "active": 0}],
}
COUNTERS: dict[str, Any] = {**STORED, "replicatedJobsStatus": [{"name": "w", "active": 2}]}
MILESTONE: dict[str, Any] = {**COUNTERS, "conditions": [_BOUND]}

# (stored, desired, with_events, requeue_after, held_since, now, longest_hold) -> StatusTiming
ROWS = [
    pytest.param(STORED, None, False, None, 100.0, 101.0, 5.0, StatusTiming(False, None),
                 id="no-status-change"),
    pytest.param(STORED, None, False, 42.0, 100.0, 101.0, 5.0, StatusTiming(False, 42.0),
                 id="no-status-change-keeps-plan-requeue"),
    pytest.param(STORED, COUNTERS, False, None, 100.0, 101.0, 5.0, StatusTiming(False, 4.0),
                 id="counters-held-come-back-when-due"),
    pytest.param(STORED, COUNTERS, False, 3.0, 100.0, 101.0, 5.0, StatusTiming(False, 3.0),
                 id="counters-held-plan-requeue-sooner"),
    pytest.param(STORED, COUNTERS, False, 60.0, 100.0, 101.0, 5.0, StatusTiming(False, 4.0),
                 id="counters-held-hold-sooner-than-ttl"),
    pytest.param(STORED, COUNTERS, False, None, 100.0, 105.0, 5.0, StatusTiming(True, None),
                 id="counters-due"),
    pytest.param(STORED, COUNTERS, False, 7.0, 100.0, 160.0, 5.0, StatusTiming(True, 7.0),
                 id="counters-overdue-plan-requeue-kept"),
    # An Event announces a transition the status records: never one without the other.
    pytest.param(STORED, COUNTERS, True, None, 100.0, 101.0, 5.0, StatusTiming(True, None),
                 id="events-write-at-once"),
    pytest.param(STORED, MILESTONE, False, None, 100.0, 101.0, 5.0, StatusTiming(True, None),
                 id="milestone-at-once"),
    pytest.param(STORED, MILESTONE, False, None, None, 101.0, 5.0, StatusTiming(True, None),
                 id="milestone-at-once-first-pass"),
    # The first pass that finds the counters unwritten begins their hold: the whole of it.
    pytest.param(STORED, COUNTERS, False, None, None, 101.0, 5.0, StatusTiming(False, 5.0),
                 id="first-pass-holds-the-longest-hold"),
    pytest.param(STORED, COUNTERS, False, 2.0, None, 101.0, 5.0, StatusTiming(False, 2.0),
                 id="first-pass-plan-requeue-sooner"),
    pytest.param(STORED, COUNTERS, False, None, 100.0, 101.0, 0.0, StatusTiming(True, None),
                 id="pacing-off"),
    pytest.param({}, {"replicatedJobsStatus": [{"name": "w", "active": 2}]}, False, None, 100.0,
                 101.0, 5.0, StatusTiming(False, 4.0), id="first-status-of-counters-held"),
    pytest.param({}, MILESTONE, False, None, 100.0, 101.0, 5.0, StatusTiming(True, None),
                 id="first-status-with-a-milestone"),
    # Zero counters where none are stored tell nothing: no write, no hold, the plan's own time.
    pytest.param({}, {"replicatedJobsStatus": [{"name": "w"}]}, False, None, None, 101.0, 5.0,
                 StatusTiming(False, None), id="first-status-of-zero-counters-not-held"),
    pytest.param({}, {"replicatedJobsStatus": [{"name": "w"}]}, False, 30.0, None, 101.0, 5.0,
                 StatusTiming(False, 30.0), id="zero-counters-keep-the-plan-requeue"),
    pytest.param({}, {"replicatedJobsStatus": [{"name": "w"}]}, True, None, None, 101.0, 5.0,
                 StatusTiming(True, None), id="zero-counters-with-events-written"),
]  # fmt: skip


@pytest.mark.parametrize(
    (
        "stored",
        "desired",
        "with_events",
        "requeue_after",
        "held_since",
        "now",
        "longest_hold",
        "timing",
    ),
    ROWS,
)
def test_status_timing(
    stored: dict[str, Any],
    desired: dict[str, Any] | None,
    with_events: bool,
    requeue_after: float | None,
    held_since: float | None,
    now: float,
    longest_hold: float,
    timing: StatusTiming,
) -> None:
    got = pacing.status_timing(
        JobSetStatus.parse(stored),
        None if desired is None else JobSetStatus.parse(desired),
        with_events=with_events,
        requeue_after=requeue_after,
        held_since=held_since,
        now=now,
        longest_hold=longest_hold,
    )
    assert got.write is timing.write
    assert got.requeue_after == pytest.approx(timing.requeue_after)
