"""failure: the failure policy's decision."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller import features
from controller.jobset import api, children, construct, failure, model
from controller.jobset.children import view as job_view
from controller.jobset.children import views as job_views
from controller.jobset.jobsetstatus import ReplicatedJobStatus
from controller.jobset.model import FailurePolicyRule, InvalidJobSet
from tests.unit.jobset_factories import (
    T0,
    at,
    make_job,
    make_jobset,
    make_jobset_obj,
    rjob,
    stored_counts,
)

RJOBS = [rjob("leader"), rjob("workers", 3)]
BACKOFF = "BackoffLimitExceeded"
POD_POLICY = "PodFailurePolicy"
DEADLINE = "DeadlineExceeded"


def _entries(statuses: list[dict[str, Any]]) -> tuple[ReplicatedJobStatus, ...]:
    """``replicatedJobsStatus`` entries as the status reads them (absent counters are 0)."""
    return tuple(stored_counts(s, s["name"]) for s in statuses)


def _js(policy: dict[str, Any] | None = None, **kw: Any) -> Any:
    """A JobSet with this failure policy, parsed as a controller with the RestartJob gate on
    (the alpha gates) does: the RestartJob actions are admitted."""
    return make_jobset(features.ALPHA, replicated_jobs=RJOBS, failure_policy=policy, **kw)


def _rule(action: str, name: str | None = None, **kw: list[str]) -> dict[str, Any]:
    rule: dict[str, Any] = {"action": action}
    if name:
        rule["name"] = name
    keys = {
        "reasons": "onJobFailureReasons",
        "patterns": "onJobFailureMessagePatterns",
        "targets": "targetReplicatedJobs",
    }
    for short, value in kw.items():
        rule[keys[short]] = value
    return rule


def _failed(js: Any, rj: str, i: int, reason: str, message: str, seconds: float) -> Any:
    return make_job(js, rj, i, failed=(reason, message, at(seconds)))


def test_no_failed_job_no_decision() -> None:
    js = _js()
    jobs = [make_job(js, "leader", 0, active=1), make_job(js, "workers", 0, complete=True)]
    assert failure.evaluate(js, job_views(jobs)) is None
    assert failure.evaluate(js, []) is None


def test_failed_job_of_old_attempt_ignored() -> None:
    js = _js(restarts=1)
    old = make_job(js, "workers", 0, failed=(BACKOFF, "", T0), restart_attempt=0)
    assert failure.evaluate(js, job_views([old])) is None


def test_failure_target_alone_is_not_failed() -> None:
    js = _js()
    job = make_job(js, "workers", 0)
    job["status"]["conditions"] = [{"type": "FailureTarget", "status": "True", "reason": BACKOFF}]
    assert failure.evaluate(js, job_views([job])) is None


def test_no_policy_fails_with_first_failed_job() -> None:
    js = _js()
    jobs = [
        _failed(js, "workers", 2, BACKOFF, "x", 5),
        _failed(js, "workers", 1, BACKOFF, "x", 3),
        _failed(js, "leader", 0, BACKOFF, "x", 9),
    ]
    d = failure.evaluate(js, job_views(jobs))
    assert d == failure.FailureDecision(
        action=api.FAIL_JOBSET,
        failed_job="js-workers-1",
        rule=None,
        fails_jobset=True,
        condition_reason=api.REASON_FAILED_JOBS,
        condition_message="jobset failed due to one or more job failures "
        "(first failed job: js-workers-1)",
        event_type="Warning",
        event_reason=api.REASON_FAILED_JOBS,
        event_message="jobset failed due to one or more job failures "
        "(first failed job: js-workers-1)",
        new_restarts=0,
        new_restarts_count_towards_max=0,
    )


# Each case: policy, failed jobs as (rjob, index, reason, message, seconds), status counters,
# and the expected (action, failed job, rule, fails, condition/event reason, restarts, towards).
CASES = [
    pytest.param(
        {"maxRestarts": 0},
        [("workers", 0, BACKOFF, "", 0)],
        (0, 0),
        (api.RESTART_JOBSET, "js-workers-0", None, True, api.REASON_REACHED_MAX_RESTARTS, 0, 0),
        id="max-restarts-0-default-action-fails",
    ),
    pytest.param(
        {"maxRestarts": 2},
        [("workers", 0, BACKOFF, "", 0)],
        (0, 0),
        (api.RESTART_JOBSET, "js-workers-0", None, False, api.REASON_RESTART_ACTION, 1, 1),
        id="default-restart",
    ),
    pytest.param(
        {"maxRestarts": 2},
        [("workers", 0, BACKOFF, "", 0)],
        (5, 1),
        (api.RESTART_JOBSET, "js-workers-0", None, False, api.REASON_RESTART_ACTION, 6, 2),
        id="restart-counts-from-towards-max-not-restarts",
    ),
    pytest.param(
        {"maxRestarts": 2},
        [("workers", 0, BACKOFF, "", 0)],
        (2, 2),
        (api.RESTART_JOBSET, "js-workers-0", None, True, api.REASON_REACHED_MAX_RESTARTS, 2, 2),
        id="reached-max",
    ),
    pytest.param(
        {"maxRestarts": 2},
        [("workers", 0, BACKOFF, "", 0)],
        (7, 3),
        (api.RESTART_JOBSET, "js-workers-0", None, True, api.REASON_REACHED_MAX_RESTARTS, 7, 3),
        id="beyond-max",
    ),
    pytest.param(
        {"maxRestarts": 1, "rules": [_rule(api.FAIL_JOBSET, "fatal")]},
        [("workers", 1, BACKOFF, "", 0)],
        (0, 0),
        (api.FAIL_JOBSET, "js-workers-1", "fatal", True, api.REASON_FAIL_ACTION, 0, 0),
        id="fail-rule-matches-any",
    ),
    pytest.param(
        {"rules": [_rule(api.RESTART_JOBSET_IGNORE_MAX, "evicted")]},
        [("workers", 1, BACKOFF, "", 0)],
        (3, 0),
        (
            api.RESTART_JOBSET_IGNORE_MAX,
            "js-workers-1",
            "evicted",
            False,
            api.REASON_RESTART_IGNORE_MAX_ACTION,
            4,
            0,
        ),
        id="ignore-max-with-max-0",
    ),
    pytest.param(
        {"maxRestarts": 1, "rules": [_rule(api.RESTART_JOBSET, "r")]},
        [("workers", 1, BACKOFF, "", 0)],
        (1, 1),
        (api.RESTART_JOBSET, "js-workers-1", "r", True, api.REASON_REACHED_MAX_RESTARTS, 1, 1),
        id="explicit-restart-rule-reaches-max",
    ),
    pytest.param(
        {"maxRestarts": 3, "rules": [_rule(api.FAIL_JOBSET, "fatal", reasons=[DEADLINE])]},
        [("workers", 1, BACKOFF, "", 0)],
        (0, 0),
        (api.RESTART_JOBSET, "js-workers-1", None, False, api.REASON_RESTART_ACTION, 1, 1),
        id="reason-mismatch-falls-to-default",
    ),
    pytest.param(
        {"maxRestarts": 3, "rules": [_rule(api.FAIL_JOBSET, "fatal", reasons=[DEADLINE, BACKOFF])]},
        [("workers", 1, BACKOFF, "", 0)],
        (0, 0),
        (api.FAIL_JOBSET, "js-workers-1", "fatal", True, api.REASON_FAIL_ACTION, 0, 0),
        id="reason-in-list",
    ),
    pytest.param(
        {"maxRestarts": 3, "rules": [_rule(api.FAIL_JOBSET, "lead", targets=["leader"])]},
        [("workers", 1, BACKOFF, "", 0)],
        (0, 0),
        (api.RESTART_JOBSET, "js-workers-1", None, False, api.REASON_RESTART_ACTION, 1, 1),
        id="target-mismatch",
    ),
    pytest.param(
        {"maxRestarts": 3, "rules": [_rule(api.FAIL_JOBSET, "lead", targets=["leader"])]},
        [("workers", 1, BACKOFF, "", 0), ("leader", 0, BACKOFF, "", 10)],
        (0, 0),
        (api.FAIL_JOBSET, "js-leader-0", "lead", True, api.REASON_FAIL_ACTION, 0, 0),
        id="rule-picks-later-failure-it-targets",
    ),
    pytest.param(
        {
            "maxRestarts": 3,
            "rules": [
                _rule(
                    api.FAIL_JOBSET, "exit42", reasons=[POD_POLICY], patterns=["rule at index 1$"]
                )
            ],
        },
        [("workers", 1, POD_POLICY, "Container main failed; matching FailJob rule at index 1", 0)],
        (0, 0),
        (api.FAIL_JOBSET, "js-workers-1", "exit42", True, api.REASON_FAIL_ACTION, 0, 0),
        id="pattern-matches",
    ),
    pytest.param(
        {
            "maxRestarts": 3,
            "rules": [_rule(api.FAIL_JOBSET, "exit42", patterns=["rule at index 1$"])],
        },
        [("workers", 1, POD_POLICY, "matching FailJob rule at index 0", 0)],
        (0, 0),
        (api.RESTART_JOBSET, "js-workers-1", None, False, api.REASON_RESTART_ACTION, 1, 1),
        id="pattern-mismatch",
    ),
    pytest.param(
        {"maxRestarts": 3, "rules": [_rule(api.FAIL_JOBSET, "p", patterns=["^nope", "disk"])]},
        [("workers", 1, POD_POLICY, "node ran out of disk space", 0)],
        (0, 0),
        (api.FAIL_JOBSET, "js-workers-1", "p", True, api.REASON_FAIL_ACTION, 0, 0),
        id="pattern-search-any-of",
    ),
    pytest.param(
        {"maxRestarts": 3, "rules": [_rule(api.FAIL_JOBSET, "p", patterns=["^$"])]},
        [("workers", 1, POD_POLICY, "", 0)],
        (0, 0),
        (api.FAIL_JOBSET, "js-workers-1", "p", True, api.REASON_FAIL_ACTION, 0, 0),
        id="pattern-on-empty-message",
    ),
    pytest.param(
        {
            "maxRestarts": 3,
            "rules": [_rule(api.FAIL_JOBSET, "p", reasons=[BACKOFF], patterns=["disk"])],
        },
        [("workers", 1, POD_POLICY, "disk", 0)],
        (0, 0),
        (api.RESTART_JOBSET, "js-workers-1", None, False, api.REASON_RESTART_ACTION, 1, 1),
        id="pattern-ok-reason-not",
    ),
    pytest.param(
        {
            "maxRestarts": 3,
            "rules": [
                _rule(api.RESTART_JOBSET_IGNORE_MAX, "first", reasons=[DEADLINE]),
                _rule(api.FAIL_JOBSET, "second", reasons=[BACKOFF]),
                _rule(api.RESTART_JOBSET, "third"),
            ],
        },
        [("workers", 1, BACKOFF, "", 0), ("workers", 2, DEADLINE, "", 50)],
        (0, 0),
        (
            api.RESTART_JOBSET_IGNORE_MAX,
            "js-workers-2",
            "first",
            False,
            api.REASON_RESTART_IGNORE_MAX_ACTION,
            1,
            0,
        ),
        id="first-rule-wins-over-earlier-failure",
    ),
    pytest.param(
        {
            "maxRestarts": 3,
            "rules": [
                _rule(api.FAIL_JOBSET, "second", reasons=[BACKOFF]),
                _rule(api.RESTART_JOBSET, "third"),
            ],
        },
        [("workers", 2, BACKOFF, "", 9), ("workers", 1, BACKOFF, "", 4)],
        (0, 0),
        (api.FAIL_JOBSET, "js-workers-1", "second", True, api.REASON_FAIL_ACTION, 0, 0),
        id="earliest-among-matching",
    ),
    pytest.param(
        {"maxRestarts": 3, "rules": [_rule(api.FAIL_JOBSET, "f")]},
        [("workers", 2, BACKOFF, "", 4), ("workers", 1, BACKOFF, "", 4)],
        (0, 0),
        (api.FAIL_JOBSET, "js-workers-1", "f", True, api.REASON_FAIL_ACTION, 0, 0),
        id="tie-broken-by-name",
    ),
    pytest.param(
        {"maxRestarts": 3, "rules": []},
        [("workers", 2, BACKOFF, "", 4), ("leader", 0, BACKOFF, "", 4)],
        (0, 0),
        (api.RESTART_JOBSET, "js-leader-0", None, False, api.REASON_RESTART_ACTION, 1, 1),
        id="tie-default-action",
    ),
]


@pytest.mark.parametrize(("policy", "failed", "counts", "expected"), CASES)
def test_policy(
    policy: dict[str, Any],
    failed: list[tuple[str, int, str, str, float]],
    counts: tuple[int, int],
    expected: tuple[str, str, str | None, bool, str, int, int],
) -> None:
    restarts, towards = counts
    js = _js(policy, restarts=restarts, restarts_count_towards_max=towards)
    jobs = [_failed(js, rj, i, reason, msg, t) for rj, i, reason, msg, t in failed]
    jobs.append(make_job(js, "leader", 5, active=1))  # a healthy one never matters
    d = failure.evaluate(js, job_views(jobs))
    assert d is not None
    _action, job, rule_name, fails, reason, _restarts, _towards = expected
    got = (
        d.action,
        d.failed_job,
        d.rule,
        d.fails_jobset,
        d.event_reason,
        d.new_restarts,
        d.new_restarts_count_towards_max,
    )
    assert got == expected
    assert d.event_type == "Warning"
    suffix = f" (first failed job: {job})"
    assert d.event_message.endswith(suffix)
    # Failing: the Failed condition; restarting: RestartingJobSet=True, named after the rule
    # that matched (the default reason when none did). Either way with the Event's message.
    kind, condition_reason = (
        (api.FAILED, reason)
        if fails
        else (api.RESTARTING, f"FailurePolicy_{rule_name}" if rule_name else "DefaultFailurePolicy")
    )
    got_condition = (d.condition_type, d.condition_reason, d.condition_message)
    assert got_condition == (kind, condition_reason, d.event_message)


@pytest.mark.parametrize(
    ("reason", "message"),
    [
        pytest.param(api.REASON_FAIL_ACTION, api.MESSAGE_FAIL_ACTION, id="fail"),
        pytest.param(api.REASON_REACHED_MAX_RESTARTS, api.MESSAGE_REACHED_MAX_RESTARTS, id="max"),
    ],
)
def test_fail_messages(reason: str, message: str) -> None:
    policy = (
        {"rules": [_rule(api.FAIL_JOBSET, "f")]}
        if reason == api.REASON_FAIL_ACTION
        else {"maxRestarts": 0}
    )
    js = _js(policy)
    d = failure.evaluate(js, job_views([_failed(js, "workers", 0, BACKOFF, "", 0)]))
    assert d is not None
    assert d.condition_message == f"{message} (first failed job: js-workers-0)"


def test_restart_messages() -> None:
    js = _js({"maxRestarts": 1})
    d = failure.evaluate(js, job_views([_failed(js, "workers", 0, BACKOFF, "", 0)]))
    assert d is not None
    assert d.event_message == (
        "applying RestartJobSet failure policy action (first failed job: js-workers-0)"
    )


def test_rule_name_defaulted_by_model() -> None:
    js = _js({"rules": [_rule(api.FAIL_JOBSET)]})
    d = failure.evaluate(js, job_views([_failed(js, "workers", 0, BACKOFF, "", 0)]))
    assert d is not None
    assert d.rule == "failurePolicyRule0"


def test_job_without_replicated_job_label_never_matches_a_rule() -> None:
    js = _js({"maxRestarts": 2, "rules": [_rule(api.FAIL_JOBSET, "all")]})
    job = _failed(js, "workers", 0, BACKOFF, "", 0)
    del job["metadata"]["labels"][api.REPLICATED_JOB_NAME]
    d = failure.evaluate(js, job_views([job]))
    assert d is not None
    assert (d.action, d.rule, d.fails_jobset) == (api.RESTART_JOBSET, None, False)


def test_missing_failure_time_counts_as_earliest() -> None:
    js = _js()
    timeless = _failed(js, "workers", 2, BACKOFF, "", 0)
    for cond in timeless["status"]["conditions"]:
        del cond["lastTransitionTime"]
    d = failure.evaluate(js, job_views([_failed(js, "workers", 1, BACKOFF, "", 0), timeless]))
    assert d is not None
    assert d.failed_job == "js-workers-2"


def test_partial_failed_condition() -> None:
    js = _js({"maxRestarts": 1, "rules": [_rule(api.FAIL_JOBSET, "r", reasons=[BACKOFF])]})
    job = make_job(js, "workers", 0)
    job["status"] = {"conditions": [{"type": "Failed", "status": "True"}]}
    d = failure.evaluate(js, job_views([job]))
    assert d is not None
    assert (d.action, d.rule) == (api.RESTART_JOBSET, None)


@pytest.mark.parametrize(
    ("rule", "condition", "applies"),
    [
        pytest.param(FailurePolicyRule("r", api.FAIL_JOBSET), None, False, id="not-failed"),
        pytest.param(
            FailurePolicyRule("r", api.FAIL_JOBSET, on_job_failure_message_patterns=("(",)),
            {"reason": "X", "message": "("},
            False,
            id="invalid-pattern-never-matches",
        ),
        pytest.param(
            FailurePolicyRule("r", api.FAIL_JOBSET, on_job_failure_reasons=("X",)),
            {"reason": 5, "message": None},
            False,
            id="non-string-reason",
        ),
        pytest.param(
            FailurePolicyRule("r", api.FAIL_JOBSET),
            {"reason": 5, "message": None},
            True,
            id="empty-rule-any-failure",
        ),
    ],
)
def test_rule_applies(rule: FailurePolicyRule, condition: Any, applies: bool) -> None:
    js = _js()
    job = make_job(js, "workers", 0)
    if condition is not None:
        job["status"] = {"conditions": [{"type": "Failed", "status": "True", **condition}]}
    assert failure.rule_applies(rule, job_view(job)) is applies


_failures = st.lists(
    st.tuples(
        st.sampled_from(["leader", "workers"]),
        st.sampled_from([BACKOFF, DEADLINE, POD_POLICY]),
        st.sampled_from(["", "disk full", "rule at index 1"]),
        st.integers(0, 5),
    ),
    min_size=1,
    max_size=6,
)


@given(failures=_failures, perm=st.randoms(use_true_random=False))
def test_decision_independent_of_job_order(
    failures: list[tuple[str, str, str, int]], perm: Any
) -> None:
    js = _js(
        {
            "maxRestarts": 2,
            "rules": [
                _rule(api.FAIL_JOBSET, "disk", patterns=["disk"], targets=["workers"]),
                _rule(api.RESTART_JOBSET_IGNORE_MAX, "deadline", reasons=[DEADLINE]),
            ],
        },
        restarts_count_towards_max=1,
    )
    jobs = [
        _failed(js, rj, i, reason, message, t)
        for i, (rj, reason, message, t) in enumerate(failures)
    ]
    shuffled = list(jobs)
    perm.shuffle(shuffled)
    assert failure.evaluate(js, job_views(jobs)) == failure.evaluate(js, job_views(shuffled))


def _counts(leader: dict[str, int], workers: dict[str, int]) -> list[dict[str, Any]]:
    zero = {"ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
    return [{"name": "leader", **zero, **leader}, {"name": "workers", **zero, **workers}]


# RJOBS wants 1 leader + 3 workers. Each row: replicatedJobsStatus of the current attempt,
# whether the JobSet is suspended, and whether RestartingJobSet turns False (JobsReady).
@pytest.mark.parametrize(
    ("statuses", "suspended", "ends"),
    [
        pytest.param(_counts({"ready": 1}, {"ready": 3}), False, True, id="all-ready"),
        pytest.param(
            _counts({"succeeded": 1}, {"ready": 2, "succeeded": 1}), False, True,
            id="ready-or-succeeded",
        ),
        pytest.param(_counts({"ready": 1}, {"ready": 2, "active": 3}), False, False,
                     id="one-not-ready"),
        pytest.param(_counts({"ready": 1}, {"ready": 2, "failed": 1}), False, False,
                     id="one-failed"),
        pytest.param(_counts({}, {}), False, False, id="new-attempt-not-created-yet"),
        pytest.param(_counts({"ready": 1}, {"ready": 3}), True, False, id="suspended"),
        pytest.param(_counts({"ready": 1}, {}), False, False, id="a-replicated-job-missing"),
    ],
)  # fmt: skip
def test_restart_ended(statuses: list[dict[str, Any]], suspended: bool, ends: bool) -> None:
    js = _js({"maxRestarts": 1}, suspend=suspended or None)
    expected = failure.RESTART_ENDED_JOBS_READY if ends else None
    assert failure.restart_ended(js, _entries(statuses)) == expected


def test_restart_ended_conditions() -> None:
    """Upstream's reasons and messages for RestartingJobSet=False."""
    assert [(c.type, c.status, c.reason, c.message) for c in (
        failure.RESTART_ENDED_JOBS_READY,
        failure.RESTART_ENDED_FAILED,
        failure.RESTART_ENDED_COMPLETED,
        failure.RESTART_ENDED_SUSPENDED,
    )] == [
        ("RestartingJobSet", "False", "JobsReady", "all jobs are ready"),
        ("RestartingJobSet", "False", "JobSetFailed", "jobset failed"),
        ("RestartingJobSet", "False", "JobSetCompleted", "jobset completed successfully"),
        ("RestartingJobSet", "False", "JobSetSuspended", "jobset is suspended"),
    ]  # fmt: skip


# ----------------------------------------------------------------------------- RestartJob


def _js_restarts(
    policy: dict[str, Any],
    job_restarts: dict[str, tuple[list[int], list[int]]] | None = None,
    **kw: Any,
) -> Any:
    """``_js`` with status jobRestarts / jobRestartsCountTowardsMax per replicated job."""
    obj = make_jobset_obj(replicated_jobs=RJOBS, failure_policy=policy, **kw)
    obj["status"]["replicatedJobsStatus"] = [
        {"name": name, api.JOB_RESTARTS: restarts, api.JOB_RESTARTS_TOWARDS_MAX: towards}
        for name, (restarts, towards) in (job_restarts or {}).items()
    ]
    return model.parse(obj, features.ALPHA)


# Each case: policy, stored (restartsCountTowardsMax, {rjob: (jobRestarts, towards)}), and the
# expected (event reason, fails, job restart (rjob, index, counts) or None).
RESTART_JOB_CASES = [
    pytest.param(
        {"maxRestarts": 1, "rules": [_rule(api.RESTART_JOB)]},
        (0, {}),
        (api.REASON_RESTART_JOB_ACTION, False, ("workers", 1, True)),
        id="restart-job-counts",
    ),
    pytest.param(
        {"maxRestarts": 0, "rules": [_rule(api.RESTART_JOB_IGNORE_MAX)]},
        (0, {}),
        (api.REASON_RESTART_JOB_IGNORE_MAX_ACTION, False, ("workers", 1, False)),
        id="ignore-max-restarts-despite-max-0",
    ),
    pytest.param(
        {"maxRestarts": 0, "rules": [_rule(api.RESTART_JOB)]},
        (0, {}),
        (api.REASON_REACHED_MAX_RESTARTS, True, None),
        id="restart-job-max-0-fails",
    ),
    pytest.param(
        {"maxRestarts": 3, "rules": [_rule(api.RESTART_JOB)]},
        (1, {"workers": ([1, 0, 1], [1, 0, 0]), "leader": ([1], [1])}),
        (api.REASON_REACHED_MAX_RESTARTS, True, None),
        id="max-counts-jobset-and-every-job",
    ),
    pytest.param(
        {"maxRestarts": 3, "rules": [_rule(api.RESTART_JOB)]},
        (1, {"workers": ([5, 0, 1], [0, 0, 1])}),
        (api.REASON_RESTART_JOB_ACTION, False, ("workers", 1, True)),
        id="uncounted-job-restarts-do-not-count",
    ),
    pytest.param(
        {"maxRestarts": 2, "rules": [_rule(api.FAIL_JOBSET, reasons=[DEADLINE])]},
        (0, {"workers": ([2, 0, 0], [2, 0, 0])}),
        (api.REASON_REACHED_MAX_RESTARTS, True, None),
        id="restart-jobset-counts-job-restarts-too",
    ),
]


@pytest.mark.parametrize(("policy", "stored", "expected"), RESTART_JOB_CASES)
def test_restart_job(
    policy: dict[str, Any],
    stored: tuple[int, dict[str, tuple[list[int], list[int]]]],
    expected: tuple[str, bool, tuple[str, int, bool] | None],
) -> None:
    towards, arrays = stored
    js = _js_restarts(policy, arrays, restarts=towards, restarts_count_towards_max=towards)
    d = failure.evaluate(js, job_views([_failed(js, "workers", 1, BACKOFF, "", 0)]))
    assert d is not None
    reason, fails, restart = expected
    assert (d.event_reason, d.fails_jobset) == (reason, fails)
    got = d.job_restart
    assert (None if got is None else (got.replicated_job, got.index, got.counts)) == restart
    assert d.event_message.endswith(" (first failed job: js-workers-1)")
    if restart is not None:
        # Only the Job restarts: the JobSet's counters stay.
        assert (d.new_restarts, d.new_restarts_count_towards_max) == (towards, towards)


def test_restart_job_messages() -> None:
    for action, message in (
        (api.RESTART_JOB, "applying RestartJob failure policy action"),
        (
            api.RESTART_JOB_IGNORE_MAX,
            "applying RestartJobAndIgnoreMaxRestarts failure policy action",
        ),
    ):
        js = _js({"maxRestarts": 1, "rules": [_rule(action)]})
        d = failure.evaluate(js, job_views([_failed(js, "leader", 0, BACKOFF, "", 0)]))
        assert d is not None
        assert d.event_message == f"{message} (first failed job: js-leader-0)"


# (statuses, restart, expected statuses): arrays start as one 0 per replica, grow if needed.
BUMP_CASES = [
    pytest.param(
        [{"name": "leader"}, {"name": "workers"}],
        failure.JobRestart("workers", 2, True),
        [
            {"name": "leader"},
            {"name": "workers", "jobRestarts": [0, 0, 1], "jobRestartsCountTowardsMax": [0, 0, 1]},
        ],
        id="first-counted",
    ),
    pytest.param(
        [{"name": "workers", "jobRestarts": [0, 0, 1], "jobRestartsCountTowardsMax": [0, 0, 1]}],
        failure.JobRestart("workers", 2, False),
        [{"name": "workers", "jobRestarts": [0, 0, 2], "jobRestartsCountTowardsMax": [0, 0, 1]}],
        id="ignore-max-bumps-only-job-restarts",
    ),
    pytest.param(
        [{"name": "workers", "jobRestarts": [1]}],
        failure.JobRestart("workers", 0, False),
        [{"name": "workers", "jobRestarts": [2, 0, 0]}],
        id="short-array-grows-to-replicas",
    ),
]


@pytest.mark.parametrize(("statuses", "restart", "expected"), BUMP_CASES)
def test_bump_job_restarts(
    statuses: list[dict[str, Any]], restart: failure.JobRestart, expected: list[dict[str, Any]]
) -> None:
    assert failure.bump_job_restarts(_js(), _entries(statuses), restart) == _entries(expected)


def test_carry_job_restarts_keeps_history() -> None:
    policy = {"rules": [_rule(api.RESTART_JOB)]}
    js = _js_restarts(policy, {"workers": ([0, 2, 0], [0, 1, 0])})
    fresh = _entries([{"name": "leader", "ready": 1}, {"name": "workers", "ready": 3}])
    assert failure.carry_job_restarts(js, fresh) == _entries([
        {"name": "leader", "ready": 1},
        {"name": "workers", "ready": 3, "jobRestarts": [0, 2, 0],
         "jobRestartsCountTowardsMax": [0, 1, 0]},
    ])  # fmt: skip
    assert failure.carry_job_restarts(_js(), fresh) == fresh  # nothing stored: as counted


@pytest.mark.parametrize(
    ("action", "gates", "replicas", "refusal"),
    [
        pytest.param(api.RESTART_JOBSET, features.DEFAULT, 3, None, id="no-restart-job-action"),
        pytest.param(api.RESTART_JOB, features.ALPHA, 3, None, id="gate-on"),
        pytest.param(
            api.RESTART_JOB, features.DEFAULT, 3, api.MESSAGE_RESTART_JOB_GATED, id="gate-off"
        ),
        pytest.param(
            api.RESTART_JOB_IGNORE_MAX,
            features.DEFAULT,
            3,
            api.MESSAGE_RESTART_JOB_GATED,
            id="gate-off-2",
        ),
        pytest.param(
            api.RESTART_JOB, features.ALPHA, 1025, api.MESSAGE_RESTART_JOB_REPLICAS, id="1025"
        ),
        pytest.param(api.RESTART_JOB, features.ALPHA, 1024, None, id="1024"),
    ],
)
def test_the_parser_refuses_restart_job_as_the_crd_of_its_gates(
    action: str, gates: features.FeatureGates, replicas: int, refusal: str | None
) -> None:
    """The controller's parser runs the rules of the CRD made for its gates: with RestartJob
    off, the actions are refused (restart-job-gated), with it on, more than 1024 replicas are
    (restart-job-replicas); in the rules' own words, finished or not."""
    for terminal in (None, api.TERMINAL_FAILED):
        obj = make_jobset_obj(
            replicated_jobs=[rjob("leader"), rjob("workers", replicas)],
            failure_policy={"rules": [_rule(api.FAIL_JOBSET), _rule(action)]},
            terminal_state=terminal,
        )
        if refusal is None:
            assert model.parse(obj, gates).failure_policy is not None
            continue
        with pytest.raises(InvalidJobSet) as refused:
            model.parse(obj, gates)
        assert refusal in str(refused.value)


@pytest.mark.parametrize(
    ("label", "target", "current"),
    [
        pytest.param(None, 0, True, id="no-label-no-restart"),
        pytest.param(None, 1, False, id="no-label-restarted-since"),
        pytest.param("1", 1, True, id="recreated"),
        pytest.param("0", 1, False, id="older"),
        pytest.param("2", 1, True, id="cache-behind-status"),
    ],
)
def test_individually_restarted_job_is_stale(label: str | None, target: int, current: bool) -> None:
    js = _js_restarts({"rules": [_rule(api.RESTART_JOB)]}, {"workers": ([0, target, 0], [])})
    job = make_job(js, "workers", 1)
    other = make_job(js, "workers", 0)
    if label is not None:
        job["metadata"]["labels"][api.JOB_RESTART_ATTEMPT] = label
    assert children.is_current(js, job_view(job)) is current
    assert children.is_current(js, job_view(other))  # index 0 never restarted


def test_job_restart_attempt_label_only_with_gate() -> None:
    js = _js_restarts({"rules": [_rule(api.RESTART_JOB)]}, {"workers": ([0, 3, 0], [0, 3, 0])})
    workers = js.replicated_job("workers")
    assert workers is not None
    on = construct.desired_job(js, workers, 1, restart_job=True)
    off = construct.desired_job(js, workers, 1)
    for where in ("labels", "annotations"):
        assert on["metadata"][where][api.JOB_RESTART_ATTEMPT] == "3"
        assert api.JOB_RESTART_ATTEMPT not in off["metadata"][where]
    pod = on["spec"]["template"]["metadata"]
    assert pod["labels"][api.JOB_RESTART_ATTEMPT] == pod["annotations"][api.JOB_RESTART_ATTEMPT]
    first = construct.desired_job(js, workers, 0, restart_job=True)
    assert first["metadata"]["labels"][api.JOB_RESTART_ATTEMPT] == "0"
