"""jobsetstatus: the JobSet's status as a value — read leniently, written as the API's dict (the
same keys, in the same order, as the controller always wrote), and one rule of what a write
changes (nothing, progress, a milestone)."""

from __future__ import annotations

import json
from dataclasses import FrozenInstanceError, replace
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from controller.jobset import api
from controller.jobset.jobsetstatus import (
    EMPTY,
    ClaimUIDs,
    Condition,
    JobSetStatus,
    ReplicatedJobStatus,
    SuspensionRelease,
    TemplateStatus,
    VolumesStatus,
    parse_conditions,
)

S_T0 = "2025-01-01T12:00:00Z"
S_NOW = "2025-01-01T12:01:00Z"


def _c(kind: str, status: str = "True", reason: str = "R", message: str = "m", **kw: Any) -> Any:
    return {
        "type": kind,
        "status": status,
        "lastTransitionTime": kw.pop("time", S_T0),
        "reason": reason,
        "message": message,
        **kw,
    }


def _counts(name: str, **kw: Any) -> dict[str, Any]:
    base = {"name": name, "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
    return {**base, **kw}


def _same(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    return JobSetStatus.parse(a).same_as(JobSetStatus.parse(b))


def _change(
    stored: dict[str, Any], desired: dict[str, Any], replicas: dict[str, int] | None = None
) -> str:
    return JobSetStatus.parse(desired).change_from(JobSetStatus.parse(stored), replicas)


# ----------------------------------------------------------------------------- saying the same


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        pytest.param({}, {}, True, id="empty"),
        pytest.param(None, {}, True, id="none-vs-empty"),
        pytest.param({"restarts": 0}, {}, True, id="zero-vs-missing"),
        pytest.param({"terminalState": ""}, {}, True, id="empty-string-vs-missing"),
        pytest.param({"conditions": []}, {"conditions": None}, True, id="empty-list-vs-null"),
        pytest.param({"restarts": 1}, {"restarts": 0}, False, id="restarts-differ"),
        pytest.param({"terminalState": "Failed"}, {}, False, id="terminal-state"),
        pytest.param(
            {"conditions": [_c("A"), _c("B")]},
            {"conditions": [_c("B"), _c("A")]},
            True,
            id="conditions-any-order",
        ),
        pytest.param(
            {"conditions": [_c("A")]},
            {"conditions": [_c("A", time=S_NOW)]},
            False,
            id="condition-time-differs",
        ),
        pytest.param(
            {"conditions": [_c("A", observedGeneration=0)]},
            {"conditions": [_c("A")]},
            True,
            id="condition-zero-generation",
        ),
        pytest.param(
            {"conditions": [_c("A", observedGeneration=2)]},
            {"conditions": [_c("A", observedGeneration=3)]},
            False,
            id="condition-generation-differs",
        ),
        pytest.param(
            {"conditions": [_c("A", message="")]},
            {"conditions": [{k: v for k, v in _c("A").items() if k != "message"}]},
            True,
            id="condition-empty-message-vs-missing",
        ),
        pytest.param(
            {"replicatedJobsStatus": [_counts("a"), _counts("b", ready=1)]},
            {"replicatedJobsStatus": [{"name": "b", "ready": 1}, {"name": "a"}]},
            True,
            id="rjob-status-any-order-zeros",
        ),
        pytest.param(
            {"replicatedJobsStatus": [_counts("a", ready=1)]},
            {"replicatedJobsStatus": [_counts("a")]},
            False,
            id="rjob-status-differs",
        ),
        pytest.param(
            {"replicatedJobsStatus": [_counts("a")]},
            {"replicatedJobsStatus": [_counts("a"), _counts("b")]},
            False,
            id="rjob-status-extra-entry",
        ),
        pytest.param(
            {"replicatedJobsStatus": [_counts("a", jobRestarts=[0, 0])]},
            {"replicatedJobsStatus": [_counts("a")]},
            False,
            id="job-restarts-of-zeros-are-a-value",
        ),
        pytest.param(
            {"replicatedJobsStatus": [_counts("a", jobRestarts=[])]},
            {"replicatedJobsStatus": [_counts("a")]},
            True,
            id="empty-job-restarts-vs-missing",
        ),
        pytest.param(
            {"conditions": "junk"}, {"conditions": "junk"}, True, id="junk-conditions-equal"
        ),
        pytest.param(
            {"conditions": ["x", _c("A")]},
            {"conditions": [_c("A"), "x"]},
            True,
            id="junk-entries-kept",
        ),
        # A bool is no count, and a field the status does not have is not read: the API
        # server prunes it (the status write keeps whatever is stored besides the value).
        pytest.param({"restarts": True}, {}, True, id="bool-is-no-count"),
        pytest.param({"flag": False}, {}, True, id="unknown-field-not-read"),
        pytest.param(
            {"volumes": {"templates": []}}, {}, True, id="volumes-without-anything-vs-none"
        ),
        pytest.param(
            {"volumes": {"templates": [{"name": "d", "scope": "JobSet", "bound": 0}]}},
            {"volumes": {"templates": [{"name": "d", "scope": "JobSet"}]}},
            True,
            id="template-zeros-vs-missing",
        ),
        pytest.param(
            {"volumes": {"templates": [{"name": "d", "restored": 0, "claimName": ""}]}},
            {"volumes": {"templates": [{"name": "d"}]}},
            True,
            id="template-optional-empty-vs-missing",
        ),
        pytest.param(
            {"volumes": {"templates": [{"name": "d"}, {"name": "e"}]}},
            {"volumes": {"templates": [{"name": "e"}, {"name": "d"}]}},
            False,
            id="templates-in-order",
        ),
        pytest.param(
            {"volumes": {"claimUIDs": [{"template": "d", "uids": "a"}]}},
            {"volumes": {"claimUIDs": [{"template": "d", "uids": "b"}]}},
            False,
            id="claim-uids-differ",
        ),
    ],
)
def test_same_as(a: dict[str, Any] | None, b: dict[str, Any] | None, equal: bool) -> None:
    assert _same(a, b) is equal
    assert _same(b, a) is equal
    assert (_change(a or {}, b or {}) == "none") is equal


def test_round_trip_status_is_equal() -> None:
    conditions = [_c("Suspended", observedGeneration=1), _c("A")]
    replicated = [_counts("leader", ready=1, active=1), _counts("workers", succeeded=1)]
    ours = {"restarts": 1, "conditions": conditions, "replicatedJobsStatus": replicated}
    stored = {
        "restarts": 1,
        "conditions": list(reversed(conditions)),
        "replicatedJobsStatus": list(reversed(replicated)),
    }
    assert _same(ours, stored)


# ----------------------------------------------------------------------------- what changed

_READY = {"type": "VolumesReady", "status": "False", "reason": "ClaimsPending", "message": "1 of 2"}
_RJ = {"name": "w", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}
_UIDS = {"template": "data", "uids": "abcdef01"}
_STARTED = "2026-12-05T10:00:00.000001Z"
_RELEASE = {"template": "data", "uids": "3f9c1a27,77ae0c42", "started": _STARTED}


@pytest.mark.parametrize(
    ("stored", "desired", "expected"),
    [
        pytest.param({}, {}, "none", id="nothing"),
        pytest.param({"restarts": 0}, {}, "none", id="zero-is-absent"),
        pytest.param(
            {"conditions": [_READY, {"type": "Suspended", "status": "False"}]},
            {"conditions": [{"type": "Suspended", "status": "False"}, _READY]},
            "none",
            id="conditions-reordered",
        ),
        pytest.param(
            {"replicatedJobsStatus": [_RJ]},
            {"replicatedJobsStatus": [{**_RJ, "ready": 2}]},
            "progress",
            id="counter",
        ),
        pytest.param(
            {"conditions": [_READY]},
            {"conditions": [{**_READY, "message": "2 of 2"}]},
            "progress",
            id="message-only",
        ),
        pytest.param(
            {"conditions": [{**_READY, "lastTransitionTime": S_T0}]},
            {"conditions": [{**_READY, "lastTransitionTime": S_NOW}]},
            "progress",
            id="transition-time-only",
        ),
        pytest.param(
            {"conditions": [{**_READY, "observedGeneration": 1}]},
            {"conditions": [{**_READY, "observedGeneration": 2}]},
            "progress",
            id="observed-generation-only",
        ),
        pytest.param(
            {"conditions": [_READY]},
            {"conditions": [{**_READY, "status": "True", "reason": "ClaimsBound"}]},
            "milestone",
            id="condition-status",
        ),
        pytest.param(
            {"conditions": [_READY]},
            {"conditions": [{**_READY, "reason": "ClaimsLost"}]},
            "milestone",
            id="condition-reason",
        ),
        pytest.param({}, {"conditions": [_READY]}, "milestone", id="condition-added"),
        pytest.param({"restarts": 1}, {"restarts": 2}, "milestone", id="restart"),
        pytest.param(
            {"restartsCountTowardsMax": 1},
            {"restarts": 2, "restartsCountTowardsMax": 2},
            "milestone",
            id="restart-counting",
        ),
        pytest.param({}, {"terminalState": "Completed"}, "milestone", id="terminal-state"),
        pytest.param(
            {"volumes": {"claimUIDs": []}},
            {"volumes": {"claimUIDs": [_UIDS]}},
            "milestone",
            id="claim-uid-recorded",
        ),
        pytest.param(
            {"volumes": {"claimUIDs": [_UIDS]}},
            {"volumes": {"templates": []}},
            "milestone",
            id="claim-uid-forgotten",
        ),
        pytest.param(
            {"volumes": {"templates": [{"name": "d", "scope": "JobSet", "pending": 1}]}},
            {"volumes": {"templates": [{"name": "d", "scope": "JobSet", "bound": 1}]}},
            "progress",
            id="claim-counters",
        ),
        # No snapshot of a claim let go while suspended is taken before that is stored.
        pytest.param(
            {"volumes": {"templates": []}},
            {"volumes": {"templates": [], "suspensionReleases": [_RELEASE]}},
            "milestone",
            id="suspension-release-started",
        ),
        pytest.param(
            {"volumes": {"templates": [], "suspensionReleases": [_RELEASE]}},
            {"volumes": {"templates": []}},
            "milestone",
            id="suspension-release-ended",
        ),
        pytest.param(
            {"replicatedJobsStatus": [_RJ]},
            {"replicatedJobsStatus": [{**_RJ, "jobRestarts": [0, 1]}]},
            "milestone",
            id="job-restart",
        ),
        pytest.param(
            {"replicatedJobsStatus": [{**_RJ, "jobRestarts": [0, 1]}]},
            {
                "replicatedJobsStatus": [
                    {**_RJ, "jobRestarts": [0, 1], "jobRestartsCountTowardsMax": [0, 1]}
                ]
            },
            "milestone",
            id="job-restart-counting",
        ),
        pytest.param(
            {"replicatedJobsStatus": [{**_RJ, "jobRestarts": [0, 1]}]},
            {"replicatedJobsStatus": [{**_RJ, "ready": 0, "jobRestarts": [0, 1]}]},
            "progress",
            id="counters-beside-job-restarts",
        ),
    ],
)
def test_change(stored: dict[str, Any], desired: dict[str, Any], expected: str) -> None:
    assert _change(stored, desired) == expected
    stored_value, desired_value = JobSetStatus.parse(stored), JobSetStatus.parse(desired)
    assert desired_value.is_milestone_from(stored_value) is (expected == "milestone")


def test_change_counts_what_kueue_reads_as_milestones_of_a_queued_jobset() -> None:
    stored = {"replicatedJobsStatus": [{**_RJ, "ready": 1, "active": 1}]}
    all_ready = {"replicatedJobsStatus": [{**_RJ, "ready": 2, "active": 1}]}
    assert _change(stored, all_ready) == "progress"
    assert _change(stored, all_ready, {"w": 2}) == "milestone"  # PodsReady for Kueue
    none_active = {"replicatedJobsStatus": [{**_RJ, "ready": 0, "active": 0}]}
    assert _change(stored, none_active) == "progress"
    assert _change(stored, none_active, {"w": 2}) == "milestone"  # IsActive for Kueue
    done = {"replicatedJobsStatus": [{**_RJ, "ready": 0, "active": 0, "succeeded": 2}]}
    assert _change(none_active, done, {"w": 3}) == "progress"  # not all of w
    assert _change(none_active, done, {"w": 2}) == "milestone"  # ReclaimablePods


def test_a_value_is_never_a_milestone_over_itself() -> None:
    value = JobSetStatus.parse({"restarts": 2, "conditions": [_READY]})
    assert not value.is_milestone_from(value, {"w": 1})
    assert value.change_from(value) == "none"


_fields = st.fixed_dictionaries(
    {},
    optional={
        "restarts": st.integers(0, 2),
        "terminalState": st.sampled_from(["", "Completed"]),
        "conditions": st.lists(
            st.builds(
                _c,
                st.sampled_from(["A", "B"]),
                st.sampled_from(["True", "False"]),
                st.sampled_from(["R1", "R2"]),
                st.sampled_from(["m1", "m2"]),
            ),
            max_size=3,
        ),
        "replicatedJobsStatus": st.lists(
            st.builds(_counts, st.sampled_from(["a", "b"]), ready=st.integers(0, 2)), max_size=2
        ),
    },
)


@given(stored=_fields, desired=_fields, queued=st.booleans())
# Found by this test (1 seed in about 35): a replicated job named twice counted twice for
# Kueue's facts, once for the comparison.
@example(
    stored={"replicatedJobsStatus": [_counts("b", ready=1)]},
    desired={"replicatedJobsStatus": [_counts("b", ready=2), _counts("b", ready=1)]},
    queued=True,
)
def test_the_three_answers_are_one_rule(
    stored: dict[str, Any], desired: dict[str, Any], queued: bool
) -> None:
    """ "none" exactly when the two say the same, and a milestone is never "none"."""
    replicas = {"a": 2, "b": 1} if queued else None
    before, after = JobSetStatus.parse(stored), JobSetStatus.parse(desired)
    change = after.change_from(before, replicas)
    assert (change == "none") is after.same_as(before)
    assert (change == "milestone") is after.is_milestone_from(before, replicas)
    assert after.same_as(before) is before.same_as(after)


# ----------------------------------------------------------------------------- the API's dict

# A status as the controller writes it: every key it writes, in its order.
WRITTEN: dict[str, Any] = {
    "restarts": 2,
    "restartsCountTowardsMax": 1,
    "terminalState": "Failed",
    "conditions": [
        {
            "type": "Failed",
            "status": "True",
            "lastTransitionTime": S_T0,
            "reason": "FailedJobs",
            "message": "jobset failed",
            "observedGeneration": 3,
        },
        {
            "type": "Suspended",
            "status": "False",
            "lastTransitionTime": S_T0,
            "reason": "ResumeJobs",
            "message": "resumed",
        },
    ],
    "replicatedJobsStatus": [
        {"name": "leader", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0},
        {
            "name": "workers",
            "ready": 0,
            "succeeded": 1,
            "failed": 1,
            "active": 0,
            "suspended": 0,
            "jobRestarts": [0, 2],
            "jobRestartsCountTowardsMax": [0, 1],
        },
    ],
    "volumes": {
        "templates": [
            {"name": "model", "scope": "JobSet", "desired": 1, "existing": 1, "bound": 1,
             "pending": 0, "lost": 0, "conflicts": 0, "claimName": "model-js", "restored": 1,
             "restoredFrom": "snap-1"},
            {"name": "ckpt", "scope": "Pod", "desired": 4, "existing": 3, "bound": 2,
             "pending": 1, "lost": 0, "conflicts": 1},
        ],
        "claimUIDs": [
            {"template": "ckpt", "replicatedJob": "workers", "scope": "Pod", "uids": "a,b;c"},
            {"template": "data", "replicatedJob": "workers", "uids": "d,,e"},
            {"template": "model", "uids": "f"},
        ],
    },
}  # fmt: skip


def test_what_is_written_reads_back_byte_for_byte() -> None:
    value = JobSetStatus.parse(WRITTEN)
    assert json.dumps(value.to_dict()) == json.dumps(WRITTEN)
    assert JobSetStatus.parse(value.to_dict()) == value


@pytest.mark.parametrize(
    ("value", "written"),
    [
        pytest.param(
            EMPTY,
            {"restarts": 0, "restartsCountTowardsMax": 0, "conditions": [],
             "replicatedJobsStatus": []},
            id="empty-no-terminal-state-no-volumes",
        ),
        pytest.param(
            JobSetStatus(conditions=(Condition("A", "True"),)),
            {"restarts": 0, "restartsCountTowardsMax": 0,
             "conditions": [{"type": "A", "status": "True", "lastTransitionTime": "",
                             "reason": "", "message": ""}],
             "replicatedJobsStatus": []},
            id="condition-without-generation",
        ),
        pytest.param(
            JobSetStatus(replicated_jobs_status=(ReplicatedJobStatus("w", ready=1),)),
            {"restarts": 0, "restartsCountTowardsMax": 0, "conditions": [],
             "replicatedJobsStatus": [{"name": "w", "ready": 1, "succeeded": 0, "failed": 0,
                                       "active": 0, "suspended": 0}]},
            id="no-job-restarts-not-written",
        ),
        pytest.param(
            JobSetStatus(volumes=VolumesStatus()),
            {"restarts": 0, "restartsCountTowardsMax": 0, "conditions": [],
             "replicatedJobsStatus": [], "volumes": {"templates": []}},
            id="volumes-without-record",
        ),
        pytest.param(
            JobSetStatus(volumes=VolumesStatus((TemplateStatus("d", "Job", desired=2),))),
            {"restarts": 0, "restartsCountTowardsMax": 0, "conditions": [],
             "replicatedJobsStatus": [],
             "volumes": {"templates": [{"name": "d", "scope": "Job", "desired": 2, "existing": 0,
                                        "bound": 0, "pending": 0, "lost": 0, "conflicts": 0}]}},
            id="template-without-optional-fields",
        ),
        pytest.param(
            JobSetStatus(volumes=VolumesStatus((TemplateStatus("d", "Job", restored=0),))),
            {"restarts": 0, "restartsCountTowardsMax": 0, "conditions": [],
             "replicatedJobsStatus": [],
             "volumes": {"templates": [{"name": "d", "scope": "Job", "desired": 0, "existing": 0,
                                        "bound": 0, "pending": 0, "lost": 0, "conflicts": 0,
                                        "restored": 0}]}},
            id="restored-zero-is-written",
        ),
    ],
)  # fmt: skip
def test_to_dict(value: JobSetStatus, written: dict[str, Any]) -> None:
    assert json.dumps(value.to_dict()) == json.dumps(written)
    assert JobSetStatus.parse(written) == value


# ----------------------------------------------------------------------------- reading


def test_fields_of_the_wrong_type_read_as_absent() -> None:
    value = JobSetStatus.parse(
        {
            "restarts": True,
            "restartsCountTowardsMax": -1,
            "terminalState": 3,
            "conditions": [{"type": "A", "status": 1, "reason": None, "observedGeneration": "x"}],
            "replicatedJobsStatus": [
                {"name": "w", "ready": "1", "failed": 2.0, "jobRestarts": [1, "x", True, -1]},
                {"ready": 1},
                {"name": 3},
                "junk",
            ],
            "volumes": "junk",
        }
    )
    assert value == JobSetStatus(
        conditions=(Condition("A", "", observed_generation=0),),
        replicated_jobs_status=(ReplicatedJobStatus("w", job_restarts=(1, 0, 0, 0)),),
    )
    assert JobSetStatus.parse("junk") == JobSetStatus.parse(None) == EMPTY


def test_conditions_are_keyed_by_type_the_first_of_each() -> None:
    first = {"type": "Suspended", "status": "True", "reason": "a"}
    found = parse_conditions([{}, {"type": ""}, {"type": 3}, first, {**first, "reason": "b"}])
    assert found == (Condition("Suspended", "True", "a"),)
    assert parse_conditions("junk") == parse_conditions(None) == ()


@pytest.mark.parametrize(
    ("raw", "read"),
    [
        pytest.param({"template": "d", "uids": "a"}, ClaimUIDs("d", "a"), id="jobset-scope"),
        pytest.param({"template": "d", "uids": "a", "replicatedJob": None}, ClaimUIDs("d", "a"),
                     id="null-replicated-job-is-absent"),
        pytest.param({"template": "d", "uids": "a,b", "replicatedJob": "w", "scope": "Pod"},
                     ClaimUIDs("d", "a,b", "w", "Pod"), id="pod-scope"),
        pytest.param({"template": "d", "uids": "a", "scope": "Other"},
                     ClaimUIDs("d", "a", None, "Other"), id="unknown-scope-kept-as-read"),
        pytest.param({"template": 1, "uids": "a"}, None, id="template-no-string"),
        pytest.param({"template": "d"}, None, id="no-uids"),
        pytest.param({"template": "d", "uids": "a", "replicatedJob": 3}, None,
                     id="replicated-job-no-string"),
        # Present and no string: a scope no reading knows (``volumes.record`` skips it).
        pytest.param({"template": "d", "uids": "a", "scope": None}, None, id="null-scope"),
    ],
)  # fmt: skip
def test_claim_uid_entries(raw: dict[str, Any], read: ClaimUIDs | None) -> None:
    assert ClaimUIDs.parse(raw) == read
    if read is not None:
        assert read.to_dict() == {k: v for k, v in raw.items() if v is not None}


def test_the_restart_arrays_are_indexed_with_the_value() -> None:
    value = JobSetStatus(
        restarts_count_towards_max=1,
        replicated_jobs_status=(
            ReplicatedJobStatus("a", job_restarts=(0, 2), job_restarts_count_towards_max=(0, 1)),
            ReplicatedJobStatus("b"),
        ),
    )
    assert value.job_restarts == {"a": (0, 2)}
    assert value.job_restarts_towards_max == {"a": (0, 1)}
    assert (value.job_restart_target("a", 1), value.job_restart_target("a", 5)) == (2, 0)
    assert value.job_restart_target("b", 0) == 0
    assert value.total_restarts_count_towards_max == 2
    # A new value (replace) is indexed anew.
    bumped = replace(value, replicated_jobs_status=(ReplicatedJobStatus("b", job_restarts=(1,)),))
    assert bumped.job_restarts == {"b": (1,)} and bumped.job_restarts_towards_max == {}


def test_conditions_are_looked_up_by_type() -> None:
    value = JobSetStatus.parse({"conditions": [_c(api.COMPLETED), _c(api.SUSPENDED, "False")]})
    assert value.is_true(api.COMPLETED) and not value.is_true(api.SUSPENDED)
    assert not value.is_true(api.FAILED) and value.condition(api.FAILED) is None
    assert value.condition(api.SUSPENDED) == Condition(
        api.SUSPENDED, "False", "R", "m", last_transition_time=S_T0
    )


def test_with_claim_uids_keeps_the_rest() -> None:
    entries = (ClaimUIDs("d", "abc"),)
    value = JobSetStatus.parse(WRITTEN)
    assert value.volumes is not None
    recorded = value.with_claim_uids(entries)
    assert recorded == replace(value, volumes=replace(value.volumes, claim_uids=entries))
    # Without volumes yet: the record alone.
    assert EMPTY.with_claim_uids(entries).volumes == VolumesStatus((), entries)
    assert EMPTY.with_claim_uids(entries).is_milestone_from(EMPTY)


def test_the_value_is_frozen() -> None:
    value = JobSetStatus.parse(WRITTEN)
    with pytest.raises(FrozenInstanceError):
        value.restarts = 3  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        value.conditions[0].reason = "mutated"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("raw", "read"),
    [
        pytest.param(_RELEASE, SuspensionRelease("data", ("3f9c1a27", "77ae0c42"), _STARTED),
                     id="read"),
        pytest.param({**_RELEASE, "uids": ""}, SuspensionRelease("data", (), _STARTED),
                     id="no-uids"),
        pytest.param({**_RELEASE, "template": ""}, None, id="no-template"),
        pytest.param({**_RELEASE, "started": 3}, None, id="start-no-string"),
        pytest.param({"template": "data", "uids": "3f9c1a27"}, None, id="no-start"),
    ],
)  # fmt: skip
def test_suspension_release_entries(raw: dict[str, Any], read: SuspensionRelease | None) -> None:
    assert SuspensionRelease.parse(raw) == read
    if read is not None and read.uids:
        assert read.to_dict() == raw
    status = JobSetStatus.parse({"volumes": {"templates": [], "suspensionReleases": [raw, 7]}})
    assert status.volumes is not None
    assert status.volumes.suspension_releases == (() if read is None else (read,))
