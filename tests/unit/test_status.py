"""status: replicated job counters and condition bookkeeping (what a status write changes is
``test_jobsetstatus.py``'s)."""

from __future__ import annotations

import datetime
from dataclasses import FrozenInstanceError
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.jobset import api
from controller.jobset.children import views as job_views
from controller.jobset.jobsetstatus import Condition, JobSetStatus, ReplicatedJobStatus
from controller.jobset.status import (
    finished_counts,
    format_time,
    parse_time,
    remove_condition,
    replicated_jobs_status,
    set_condition,
)
from tests.unit.jobset_factories import T0, at, make_job, make_jobset, rjob

JS = make_jobset(replicated_jobs=[rjob("leader"), rjob("workers", 3, parallelism=2)], restarts=1)


def _counts(
    name: str,
    ready: int = 0,
    succeeded: int = 0,
    failed: int = 0,
    active: int = 0,
    suspended: int = 0,
) -> ReplicatedJobStatus:
    return ReplicatedJobStatus(name, ready, succeeded, failed, active, suspended)


FAIL = ("BackoffLimitExceeded", "boom", T0)


@pytest.mark.parametrize(
    ("jobs", "expected"),
    [
        pytest.param([], [_counts("leader"), _counts("workers")], id="no-jobs"),
        pytest.param(
            [make_job(JS, "leader", 0, active=1, ready=1)],
            [_counts("leader", ready=1, active=1), _counts("workers")],
            id="ready-active",
        ),
        pytest.param(
            [make_job(JS, "workers", 0, active=2, ready=1)],
            [_counts("leader"), _counts("workers", active=1)],
            id="active-not-ready",
        ),
        pytest.param(
            [make_job(JS, "workers", 0, active=1, ready=1, succeeded=1)],
            [_counts("leader"), _counts("workers", ready=1, active=1)],
            id="ready-counts-succeeded-pods",
        ),
        pytest.param(
            [make_job(JS, "workers", 0, complete=True, succeeded=2)],
            [_counts("leader"), _counts("workers", succeeded=1)],
            id="complete",
        ),
        pytest.param(
            [make_job(JS, "workers", 1, failed=FAIL, active=1, ready=2)],
            [_counts("leader"), _counts("workers", failed=1)],
            id="failed-not-ready-or-active",
        ),
        pytest.param(
            [make_job(JS, "workers", 2, suspended=True)],
            [_counts("leader"), _counts("workers", suspended=1)],
            id="suspended",
        ),
        pytest.param(
            [make_job(JS, "workers", 2, suspended=True, complete=True)],
            [_counts("leader"), _counts("workers", succeeded=1)],
            id="suspended-but-finished",
        ),
        pytest.param(
            [make_job(JS, "leader", 0, active=1, ready=1, restart_attempt=0)],
            [_counts("leader"), _counts("workers")],
            id="old-attempt-ignored",
        ),
        pytest.param(
            [make_job(JS, "leader", 0, active=1, ready=1, deleting=True)],
            [_counts("leader"), _counts("workers")],
            id="deleting-ignored",
        ),
        pytest.param(
            [make_job(JS, "ghost", 0, active=1)],
            [_counts("leader"), _counts("workers")],
            id="unknown-rjob-ignored",
        ),
        pytest.param(
            [{"metadata": {"labels": {api.RESTART_ATTEMPT: "1"}}}, {}],
            [_counts("leader"), _counts("workers")],
            id="partial-jobs",
        ),
        pytest.param(
            [
                {
                    "metadata": {
                        "labels": {api.RESTART_ATTEMPT: "1", api.REPLICATED_JOB_NAME: "workers"}
                    }
                }
            ],
            [_counts("leader"), _counts("workers")],
            id="no-spec-no-status",
        ),
        pytest.param(
            [
                {
                    "metadata": {
                        "labels": {api.RESTART_ATTEMPT: "1", api.REPLICATED_JOB_NAME: "workers"}
                    },
                    "status": {"ready": 2},
                }
            ],
            [_counts("leader"), _counts("workers", ready=1)],
            id="no-spec-uses-rjob-pods",
        ),
    ],
)
def test_replicated_jobs_status(
    jobs: list[dict[str, Any]], expected: list[ReplicatedJobStatus]
) -> None:
    assert replicated_jobs_status(JS, job_views(jobs)) == tuple(expected)


def test_replicated_jobs_status_spec_order_and_mixture() -> None:
    js = make_jobset(replicated_jobs=[rjob("c"), rjob("a", 4), rjob("b")])
    jobs = [
        make_job(js, "a", 0, complete=True),
        make_job(js, "a", 1, complete=True),
        make_job(js, "a", 2, failed=FAIL),
        make_job(js, "a", 3, active=1, ready=1),
        make_job(js, "b", 0, suspended=True),
    ]
    assert replicated_jobs_status(js, job_views(jobs)) == (
        _counts("c"),
        _counts("a", succeeded=2, failed=1, ready=1, active=1),
        _counts("b", suspended=1),
    )


def test_stored_counters_are_read_by_name_and_junk_counts_nothing() -> None:
    """What the policies read of a stored entry: its counters by name (an entry without a name
    is none), a counter that is no count (a bool, a string) is 0."""
    stored = JobSetStatus.parse(
        {"replicatedJobsStatus": [{"name": "a", "ready": 2}, {"ready": 1}, {"name": 3}]}
    ).replicated_jobs_status
    assert stored == (_counts("a", ready=2),)
    assert (stored[0].ready, stored[0].failed) == (2, 0)
    (junk,) = JobSetStatus.parse(
        {"replicatedJobsStatus": [{"name": "a", "ready": True, "failed": "1"}]}
    ).replicated_jobs_status
    assert (junk.ready, junk.failed) == (0, 0)


# ----------------------------------------------------------------------------- time


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("2025-01-01T12:00:00Z", T0, id="z"),
        pytest.param("2025-01-01T13:00:00+01:00", T0, id="offset"),
        pytest.param("2025-01-01T12:00:00.5Z", at(0.5), id="fraction"),
        pytest.param("2025-01-01T12:00:00", T0, id="naive-is-utc"),
        pytest.param(T0, T0, id="datetime"),
        pytest.param("", None, id="empty"),
        pytest.param("yesterday", None, id="garbage"),
        pytest.param(None, None, id="none"),
        pytest.param(5, None, id="int"),
    ],
)
def test_parse_time(value: Any, expected: datetime.datetime | None) -> None:
    assert parse_time(value) == expected


def test_format_time() -> None:
    assert format_time(at(0.9)) == "2025-01-01T12:00:00Z"
    assert format_time(datetime.datetime(2025, 1, 1, 12)) == "2025-01-01T12:00:00Z"
    plus_two = datetime.timezone(datetime.timedelta(hours=2))
    assert format_time(datetime.datetime(2025, 1, 1, 14, tzinfo=plus_two)) == "2025-01-01T12:00:00Z"


def test_format_time_remembers_no_wrong_answer() -> None:
    """Remembered answers (an lru_cache) never stand for another instant: the same wall time
    naive (UTC) and in another zone, asked in turn and again, keep their own answers."""
    plus_two = datetime.timezone(datetime.timedelta(hours=2))
    naive, zoned = (
        datetime.datetime(2025, 3, 1, 14),
        datetime.datetime(2025, 3, 1, 14, tzinfo=plus_two),
    )
    for _ in range(2):
        assert format_time(naive) == "2025-03-01T14:00:00Z"
        assert format_time(zoned) == "2025-03-01T12:00:00Z"
        assert format_time(naive.replace(tzinfo=datetime.UTC)) == "2025-03-01T14:00:00Z"


# ----------------------------------------------------------------------------- conditions

NOW = at(60)
S_T0 = "2025-01-01T12:00:00Z"
S_NOW = "2025-01-01T12:01:00Z"


def _c(
    kind: str,
    status: str = "True",
    reason: str = "R",
    message: str = "m",
    *,
    time: str = S_T0,
    observedGeneration: int | None = None,
) -> Condition:
    return Condition(
        kind,
        status,
        reason,
        message,
        last_transition_time=time,
        observed_generation=observedGeneration,
    )


@pytest.mark.parametrize(
    ("before", "args", "gen", "after"),
    [
        pytest.param(
            [],
            ("Failed", "True", "R", "m"),
            None,
            [_c("Failed", time=S_NOW)],
            id="add-true",
        ),
        pytest.param([], ("Suspended", "False", "R", "m"), None, [], id="absent-false-noop"),
        pytest.param(
            [_c("Suspended")],
            ("Suspended", "True", "R", "m"),
            None,
            [_c("Suspended")],
            id="unchanged",
        ),
        pytest.param(
            [_c("Suspended")],
            ("Suspended", "True", "R2", "m2"),
            None,
            [_c("Suspended", reason="R2", message="m2")],
            id="same-status-new-reason-keeps-time",
        ),
        pytest.param(
            [_c("Suspended")],
            ("Suspended", "False", "ResumeJobs", "resumed"),
            None,
            [_c("Suspended", "False", "ResumeJobs", "resumed", time=S_NOW)],
            id="status-flip",
        ),
        pytest.param(
            [_c("A"), _c("Suspended"), _c("B")],
            ("Suspended", "False", "R", "m"),
            None,
            [_c("A"), _c("Suspended", "False", time=S_NOW), _c("B")],
            id="order-kept",
        ),
        pytest.param(
            [],
            ("Failed", "True", "R", "m"),
            3,
            [_c("Failed", time=S_NOW, observedGeneration=3)],
            id="add-with-generation",
        ),
        pytest.param(
            [_c("Failed", observedGeneration=2)],
            ("Failed", "True", "R", "m"),
            3,
            [_c("Failed", observedGeneration=3)],
            id="generation-updated-time-kept",
        ),
        pytest.param(
            [_c("Failed", observedGeneration=2)],
            ("Failed", "True", "R", "m"),
            None,
            [_c("Failed", observedGeneration=2)],
            id="generation-none-leaves-it",
        ),
        pytest.param(
            [_c("Failed", observedGeneration=2)],
            ("Failed", "False", "R", "m"),
            None,
            [_c("Failed", "False", time=S_NOW, observedGeneration=2)],
            id="flip-without-generation-keeps-it",
        ),
        pytest.param(
            [_c(api.STARTUP_POLICY_IN_PROGRESS, reason="InProg", message="ip")],
            (api.STARTUP_POLICY_COMPLETED, "True", "Done", "done"),
            None,
            [
                _c(api.STARTUP_POLICY_IN_PROGRESS, "False", "InProg", "ip", time=S_NOW),
                _c(api.STARTUP_POLICY_COMPLETED, "True", "Done", "done", time=S_NOW),
            ],
            id="completed-flips-in-progress",
        ),
        pytest.param(
            [
                _c(api.STARTUP_POLICY_IN_PROGRESS, "False"),
                _c(api.STARTUP_POLICY_COMPLETED),
            ],
            (api.STARTUP_POLICY_IN_PROGRESS, "True", "R", "m"),
            None,
            [
                _c(api.STARTUP_POLICY_IN_PROGRESS, time=S_NOW),
                _c(api.STARTUP_POLICY_COMPLETED, "False", time=S_NOW),
            ],
            id="in-progress-again-flips-completed",
        ),
        pytest.param(
            [_c(api.STARTUP_POLICY_IN_PROGRESS, "False")],
            (api.STARTUP_POLICY_COMPLETED, "True", "R", "m"),
            None,
            [
                _c(api.STARTUP_POLICY_IN_PROGRESS, "False"),
                _c(api.STARTUP_POLICY_COMPLETED, time=S_NOW),
            ],
            id="partner-already-false",
        ),
        pytest.param(
            [_c(api.STARTUP_POLICY_IN_PROGRESS)],
            (api.STARTUP_POLICY_COMPLETED, "False", "R", "m"),
            None,
            [_c(api.STARTUP_POLICY_IN_PROGRESS)],
            id="false-does-not-flip-partner",
        ),
        pytest.param(
            [_c(api.STARTUP_POLICY_IN_PROGRESS)],
            (api.COMPLETED, "True", "R", "m"),
            None,
            [_c(api.STARTUP_POLICY_IN_PROGRESS), _c(api.COMPLETED, time=S_NOW)],
            id="jobset-completed-leaves-startup-alone",
        ),
    ],
)
def test_set_condition(
    before: list[Condition],
    args: tuple[str, str, str, str],
    gen: int | None,
    after: list[Condition],
) -> None:
    stored = tuple(before)
    result = set_condition(stored, *args, NOW, gen)
    assert result == tuple(after)
    assert stored == tuple(before)  # input untouched
    # Nothing changed: the input itself comes back (decide tells a change by identity).
    assert (result is stored) is (tuple(after) == stored)


def test_set_condition_add_when_false() -> None:
    result = set_condition((), "SpecInvalid", "False", "Valid", "ok", NOW, add_when_false=True)
    assert result == (_c("SpecInvalid", "False", "Valid", "ok", time=S_NOW),)


def test_set_condition_takes_a_conditions_fields() -> None:
    spec = Condition("Suspended", "True", "SuspendedJobs", "jobset is suspended")
    result = set_condition((), spec.type, spec.status, spec.reason, spec.message, NOW)
    assert JobSetStatus(conditions=result).condition("Suspended") == _c(
        "Suspended", "True", "SuspendedJobs", "jobset is suspended", time=S_NOW
    )


@pytest.mark.parametrize("kind", [[], {}, None, 3])
def test_a_stored_condition_of_unreadable_type_is_no_condition(kind: object) -> None:
    """A stored condition whose type is no string (bad input) is not read, so setting another
    over the stored ones works; it used to crash the reconcile (TypeError: unhashable type,
    found by the bad-input fuzz)."""
    odd = {"type": kind, "status": "True", "reason": "R", "message": "m"}
    stored = JobSetStatus.parse({"conditions": [odd, {**odd, "type": "A"}]}).conditions
    assert stored == (Condition("A", "True", "R", "m"),)
    for status in ("True", "False"):
        result = set_condition(stored, "Suspended", status, "R", "m", NOW)
        assert result[0] == stored[0]


def test_set_condition_returns_new_values() -> None:
    before = (_c("A"),)
    result = set_condition(before, "A", "True", "R2", "m", NOW)
    assert result[0].reason == "R2" and before[0].reason == "R"
    with pytest.raises(FrozenInstanceError):
        result[0].reason = "mutated"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("before", "kind", "after"),
    [
        pytest.param([_c("A"), _c("B")], "A", [_c("B")], id="present"),
        pytest.param([_c("A")], "B", [_c("A")], id="absent"),
        pytest.param([], "A", [], id="empty"),
        pytest.param([_c("A"), _c("A")], "A", [], id="duplicates"),
    ],
)
def test_remove_condition(before: list[Condition], kind: str, after: list[Condition]) -> None:
    assert remove_condition(tuple(before), kind) == tuple(after)


_kinds = st.sampled_from(
    ["Failed", "Suspended", api.STARTUP_POLICY_IN_PROGRESS, api.STARTUP_POLICY_COMPLETED]
)
_calls = st.tuples(
    _kinds,
    st.sampled_from(["True", "False"]),
    st.sampled_from(["R1", "R2"]),
    st.sampled_from(["m1", "m2"]),
    st.one_of(st.none(), st.integers(1, 3)),
)


@given(calls=st.lists(_calls, max_size=8), last=_calls)
def test_set_condition_is_idempotent(
    calls: list[tuple[str, str, str, str, int | None]],
    last: tuple[str, str, str, str, int | None],
) -> None:
    conditions: tuple[Condition, ...] = ()
    for i, (kind, value, reason, message, gen) in enumerate(calls):
        conditions = set_condition(conditions, kind, value, reason, message, at(i), gen)
    kind, value, reason, message, gen = last
    once = set_condition(conditions, kind, value, reason, message, at(100), gen)
    twice = set_condition(once, kind, value, reason, message, at(200), gen)
    assert twice == once
    # At most one condition per type, and never both startup conditions True.
    assert twice is once
    kinds = [c.type for c in once]
    assert len(kinds) == len(set(kinds))
    true_startup = [
        c
        for c in once
        if c.type in (api.STARTUP_POLICY_IN_PROGRESS, api.STARTUP_POLICY_COMPLETED) and c.is_true
    ]
    assert len(true_startup) <= 1


# (stored, counted now, written): a finished JobSet's counters (name, succeeded, failed, active)
FINISHED_ROWS = [
    # Retention deleted the finished Jobs to free their claims: the outcome stays.
    pytest.param([("w", 0, 1, 0)], [("w", 0, 0, 0)], [("w", 0, 1, 0)], id="failed-job-released"),
    pytest.param([("w", 2, 0, 0)], [("w", 1, 0, 0)], [("w", 2, 0, 0)], id="succeeded-kept"),
    # The unfinished Jobs it deletes are counted down as they go (as upstream).
    pytest.param([("w", 1, 0, 2)], [("w", 1, 0, 0)], [("w", 1, 0, 0)], id="active-counted-down"),
    # A Job that finishes after the JobSet did is counted up.
    pytest.param([("w", 1, 0, 1)], [("w", 1, 1, 0)], [("w", 1, 1, 0)], id="counted-up"),
    # Nothing stored yet for a replicated job: what is counted.
    pytest.param([], [("w", 0, 1, 0)], [("w", 0, 1, 0)], id="nothing-stored"),
]  # fmt: skip


def _finished(rows: list[tuple[str, int, int, int]]) -> list[ReplicatedJobStatus]:
    return [ReplicatedJobStatus(n, succeeded=s, failed=f, active=a) for n, s, f, a in rows]


@pytest.mark.parametrize(("stored", "counted", "written"), FINISHED_ROWS)
def test_finished_counts(
    stored: list[tuple[str, int, int, int]],
    counted: list[tuple[str, int, int, int]],
    written: list[tuple[str, int, int, int]],
) -> None:
    assert list(finished_counts(_finished(stored), _finished(counted))) == _finished(written)
