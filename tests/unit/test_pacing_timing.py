"""pacing.status_timing: the status hold of a reconcile — write the plan's status now, or hold
counters back and come back when the pace allows (``status_delay`` is tabled in test_pacing)."""

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

# (stored, desired, with_events, requeue_after, last_write, now, period) -> StatusTiming
ROWS = [
    pytest.param(STORED, None, False, None, 100.0, 101.0, 10.0, StatusTiming(False, None),
                 id="no-status-change"),
    pytest.param(STORED, None, False, 42.0, 100.0, 101.0, 10.0, StatusTiming(False, 42.0),
                 id="no-status-change-keeps-plan-requeue"),
    pytest.param(STORED, COUNTERS, False, None, 100.0, 101.0, 10.0, StatusTiming(False, 9.0),
                 id="counters-held-come-back-when-due"),
    pytest.param(STORED, COUNTERS, False, 3.0, 100.0, 101.0, 10.0, StatusTiming(False, 3.0),
                 id="counters-held-plan-requeue-sooner"),
    pytest.param(STORED, COUNTERS, False, 60.0, 100.0, 101.0, 10.0, StatusTiming(False, 9.0),
                 id="counters-held-hold-sooner-than-ttl"),
    pytest.param(STORED, COUNTERS, False, None, 100.0, 110.0, 10.0, StatusTiming(True, None),
                 id="counters-due"),
    # An Event announces a transition the status records: never one without the other.
    pytest.param(STORED, COUNTERS, True, None, 100.0, 101.0, 10.0, StatusTiming(True, None),
                 id="events-write-at-once"),
    pytest.param(STORED, MILESTONE, False, None, 100.0, 101.0, 10.0, StatusTiming(True, None),
                 id="milestone-at-once"),
    pytest.param(STORED, COUNTERS, False, 5.0, None, 101.0, 10.0, StatusTiming(True, 5.0),
                 id="no-write-since-start"),
    pytest.param(STORED, COUNTERS, False, None, 100.0, 101.0, 0.0, StatusTiming(True, None),
                 id="pacing-off"),
    pytest.param({}, {"replicatedJobsStatus": [{"name": "w", "active": 2}]}, False, None, 100.0,
                 101.0, 10.0, StatusTiming(False, 9.0), id="first-status-of-counters-held"),
    pytest.param({}, MILESTONE, False, None, 100.0, 101.0, 10.0, StatusTiming(True, None),
                 id="first-status-with-a-milestone"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("stored", "desired", "with_events", "requeue_after", "last_write", "now", "period", "timing"),
    ROWS,
)
def test_status_timing(
    stored: dict[str, Any],
    desired: dict[str, Any] | None,
    with_events: bool,
    requeue_after: float | None,
    last_write: float | None,
    now: float,
    period: float,
    timing: StatusTiming,
) -> None:
    got = pacing.status_timing(
        JobSetStatus.parse(stored),
        None if desired is None else JobSetStatus.parse(desired),
        with_events=with_events,
        requeue_after=requeue_after,
        last_write=last_write,
        now=now,
        period=period,
    )
    assert got.write is timing.write
    assert got.requeue_after == pytest.approx(timing.requeue_after)
