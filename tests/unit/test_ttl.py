"""ttl: deleting finished JobSets after ttlSecondsAfterFinished."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.jobset import api, ttl
from tests.unit.jobset_factories import T0, at, condition, make_jobset

COMPLETED = [condition(api.COMPLETED, time=T0)]
FAILED = [condition(api.FAILED, time=T0)]


@pytest.mark.parametrize(
    ("overrides", "finished", "now", "expected"),
    [
        pytest.param({}, T0, at(10), ttl.NOTHING, id="no-ttl"),
        pytest.param({"ttl": 60}, None, at(10), ttl.NOTHING, id="no-finish-time"),
        pytest.param({"ttl": 60, "conditions": []}, T0, at(10), ttl.NOTHING, id="not-finished"),
        pytest.param(
            {"ttl": 60, "conditions": COMPLETED, "deleting": True},
            T0,
            at(100),
            ttl.NOTHING,
            id="already-deleting",
        ),
        pytest.param(
            {"ttl": 60, "conditions": COMPLETED},
            T0,
            at(10),
            ttl.TTLDecision(requeue_after=50.0),
            id="completed-wait",
        ),
        pytest.param(
            {"ttl": 60, "conditions": FAILED},
            T0,
            at(59.5),
            ttl.TTLDecision(requeue_after=0.5),
            id="failed-wait-fraction",
        ),
        pytest.param(
            {"ttl": 60, "conditions": COMPLETED},
            T0,
            at(60),
            ttl.TTLDecision(delete_now=True),
            id="exactly-expired",
        ),
        pytest.param(
            {"ttl": 60, "conditions": COMPLETED},
            T0,
            at(3600),
            ttl.TTLDecision(delete_now=True),
            id="long-expired",
        ),
        pytest.param(
            {"ttl": 0, "conditions": COMPLETED},
            T0,
            T0,
            ttl.TTLDecision(delete_now=True),
            id="zero-ttl",
        ),
        pytest.param(
            {"ttl": 60, "conditions": COMPLETED},
            T0,
            at(-30),
            ttl.TTLDecision(requeue_after=90.0),
            id="clock-skew-future-finish",
        ),
        pytest.param(
            {"ttl": 60, "terminal_state": "Completed"},
            T0,
            at(61),
            ttl.TTLDecision(delete_now=True),
            id="terminal-state-only",
        ),
        pytest.param(
            {"ttl": 60, "conditions": COMPLETED},
            datetime.datetime(2025, 1, 1, 12),
            datetime.datetime(2025, 1, 1, 12, 0, 30),
            ttl.TTLDecision(requeue_after=30.0),
            id="naive-times-are-utc",
        ),
    ],
)
def test_ttl_decision(
    overrides: dict[str, Any],
    finished: datetime.datetime | None,
    now: datetime.datetime,
    expected: ttl.TTLDecision,
) -> None:
    js = make_jobset(**overrides)
    assert ttl.ttl_decision(js, finished, now) == expected


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        pytest.param([], None, id="none"),
        pytest.param(COMPLETED, T0, id="completed"),
        pytest.param(FAILED, T0, id="failed"),
        pytest.param([condition(api.COMPLETED, "False")], None, id="completed-false"),
        pytest.param([condition(api.SUSPENDED, time=at(5))], None, id="other-condition"),
        pytest.param(
            [condition(api.SUSPENDED, time=at(5)), condition(api.FAILED, time=at(9))],
            at(9),
            id="after-others",
        ),
        pytest.param(
            [{"type": api.COMPLETED, "status": "True"}], None, id="missing-transition-time"
        ),
        pytest.param(
            [{"type": api.FAILED, "status": "True", "lastTransitionTime": "soon"}],
            None,
            id="garbage-time",
        ),
    ],
)
def test_finished_at(conditions: list[dict[str, Any]], expected: datetime.datetime | None) -> None:
    assert ttl.finished_at(make_jobset(conditions=conditions)) == expected


@given(seconds=st.integers(0, 10_000), elapsed=st.floats(-100, 20_000, allow_nan=False))
def test_delete_or_requeue_exactly_one(seconds: int, elapsed: float) -> None:
    js = make_jobset(ttl=seconds, conditions=COMPLETED)
    d = ttl.ttl_decision(js, T0, at(elapsed))
    assert d.delete_now != (d.requeue_after is not None)
    if d.requeue_after is not None:
        assert d.requeue_after > 0
        assert abs(elapsed + d.requeue_after - seconds) < 1e-3
