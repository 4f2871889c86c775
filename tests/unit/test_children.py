"""children: reading child Jobs, tolerant of partial objects."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.jobset import api, children, model
from controller.jobset.decide import decide
from controller.runtime.store import Obj
from tests.unit.jobset_factories import T0, condition, make_job, make_jobset, make_jobset_obj, rjob

JS = make_jobset(replicated_jobs=[rjob("w", 2, parallelism=4, completions=3)])
RJ = JS.replicated_jobs[0]


def _labels(**labels: str) -> dict[str, Any]:
    return {"metadata": {"labels": labels}}


PARTIALS = [
    pytest.param({}, id="empty"),
    pytest.param({"metadata": None, "spec": None, "status": None}, id="nulls"),
    pytest.param({"metadata": "x", "spec": [], "status": 3}, id="wrong-types"),
    pytest.param({"metadata": {"labels": None}, "status": {"conditions": None}}, id="null-fields"),
    pytest.param({"status": {"conditions": ["x", None, 3]}}, id="junk-conditions"),
]


@pytest.mark.parametrize("raw", PARTIALS)
def test_partial_jobs_never_raise(raw: dict[str, Any]) -> None:
    job = children.view(raw)
    assert job.replicated_job is None
    assert job.job_index is None
    assert job.restart_attempt is None
    assert job.job_restart_attempt == 0
    assert job.controller_uid is None
    assert job.finished is None
    assert job.failed_condition is None
    assert not job.is_complete
    assert not job.is_failed
    assert not job.suspended
    assert not job.is_active
    assert not job.deleting
    assert job.name == "" and job.uid == ""
    assert job.start_time is None
    assert job.raw is raw
    # No spec: expected pods from the replicated job, or 1.
    assert not job.is_ready(RJ)
    assert not job.is_ready()
    assert not children.is_current(JS, job)


@pytest.mark.parametrize(
    ("labels", "rjob_name", "index", "attempt"),
    [
        pytest.param(
            {
                api.REPLICATED_JOB_NAME: "w",
                api.JOB_INDEX: "3",
                api.RESTART_ATTEMPT: "2",
            },
            "w",
            3,
            2,
            id="all-present",
        ),
        pytest.param({api.REPLICATED_JOB_NAME: ""}, None, None, None, id="empty-name"),
        pytest.param({api.JOB_INDEX: "-1", api.RESTART_ATTEMPT: "x"}, None, None, None, id="bad"),
        pytest.param({api.JOB_INDEX: " 1", api.RESTART_ATTEMPT: "1.0"}, None, None, None, id="ws"),
        pytest.param({api.JOB_INDEX: "٣"}, None, None, None, id="non-ascii-digit"),
        pytest.param({api.JOB_INDEX: 3, api.REPLICATED_JOB_NAME: 1}, None, None, None, id="ints"),
        pytest.param({api.JOB_INDEX: "007"}, None, 7, None, id="leading-zeros"),
    ],
)
def test_identity_labels(
    labels: dict[str, Any], rjob_name: str | None, index: int | None, attempt: int | None
) -> None:
    job = children.view(_labels(**labels))
    assert job.replicated_job == rjob_name
    assert job.job_index == index
    assert job.restart_attempt == attempt


def _with_conditions(*conds: dict[str, Any]) -> dict[str, Any]:
    return {"status": {"conditions": list(conds)}}


@pytest.mark.parametrize(
    ("conds", "finished", "complete", "failed"),
    [
        pytest.param([], None, False, False, id="none"),
        pytest.param([condition("Complete")], "Complete", True, False, id="complete"),
        pytest.param([condition("Failed")], "Failed", False, True, id="failed"),
        pytest.param([condition("Complete", "False")], None, False, False, id="complete-false"),
        pytest.param([condition("Failed", "Unknown")], None, False, False, id="failed-unknown"),
        pytest.param([condition("SuccessCriteriaMet")], None, False, False, id="criteria-met-only"),
        pytest.param([condition("FailureTarget")], None, False, False, id="failure-target-only"),
        pytest.param(
            [condition("FailureTarget"), condition("Failed")], "Failed", False, True, id="k8s-1.31"
        ),
        pytest.param([condition("Suspended")], None, False, False, id="suspended-cond"),
        pytest.param(
            [condition("Failed"), condition("Complete")], "Failed", False, True, id="first-wins"
        ),
    ],
)
def test_finished(
    conds: list[dict[str, Any]], finished: str | None, complete: bool, failed: bool
) -> None:
    job = children.view(_with_conditions(*conds))
    assert (job.finished.type if job.finished else None) == finished
    assert job.is_finished is (finished is not None)
    assert job.is_complete is complete
    assert job.is_failed is failed


def test_failed_condition_ignores_complete_first() -> None:
    job = children.view(_with_conditions(condition("Complete"), condition("Failed", reason="X")))
    assert job.failed_condition is not None and job.failed_condition.reason == "X"


def test_a_condition_reads_as_typed_text() -> None:
    failed = condition("Failed", reason="BackoffLimitExceeded", message="m", time=T0)
    job = children.view(_with_conditions(failed))
    assert job.failed_condition == children.JobCondition(
        "Failed", "BackoffLimitExceeded", "m", failed["lastTransitionTime"]
    )
    odd = children.view(_with_conditions({"type": "Failed", "status": "True", "reason": 3}))
    assert odd.failed_condition == children.JobCondition("Failed", "", "", None)


def test_controller_uid_is_the_controller_references() -> None:
    refs = [
        {"uid": "other", "controller": False},
        "junk",
        {"uid": "mine", "controller": True},
    ]
    assert children.view({"metadata": {"ownerReferences": refs}}).controller_uid == "mine"
    assert children.view({"metadata": {"ownerReferences": refs[:2]}}).controller_uid is None


@pytest.mark.parametrize(
    ("spec", "suspended"),
    [
        pytest.param({"suspend": True}, True, id="true"),
        pytest.param({"suspend": False}, False, id="false"),
        pytest.param({}, False, id="missing"),
        pytest.param({"suspend": "true"}, False, id="string"),
    ],
)
def test_is_suspended(spec: dict[str, Any], suspended: bool) -> None:
    assert children.view({"spec": spec}).suspended is suspended


@pytest.mark.parametrize(
    ("status", "active"),
    [
        pytest.param({"active": 1}, True, id="one"),
        pytest.param({"active": 0}, False, id="zero"),
        pytest.param({}, False, id="missing"),
        pytest.param({"active": -2}, False, id="negative"),
        pytest.param({"active": True}, False, id="bool"),
        pytest.param({"active": "3"}, False, id="string"),
        pytest.param({"active": 2, "conditions": [condition("Complete")]}, False, id="finished"),
    ],
)
def test_is_active(status: dict[str, Any], active: bool) -> None:
    assert children.view({"status": status}).is_active is active


SUSPENDED_CONDITION = condition("Suspended", reason="JobSuspended")


@pytest.mark.parametrize(
    ("job", "stopped"),
    [
        pytest.param({"spec": {"suspend": True}, "status": {"conditions": [SUSPENDED_CONDITION]}},
                     True, id="suspended-as-the-job-controller-saw-it"),
        # spec.suspend set, the Job controller not there yet: its pods may still run.
        pytest.param({"spec": {"suspend": True}, "status": {"active": 0}}, False,
                     id="suspended-not-acted-on-yet"),
        pytest.param({"spec": {"suspend": True},
                      "status": {"conditions": [SUSPENDED_CONDITION], "terminating": 2}}, False,
                     id="pods-terminating"),
        pytest.param({"spec": {"suspend": True},
                      "status": {"conditions": [SUSPENDED_CONDITION], "active": 1}}, False,
                     id="pods-active"),
        pytest.param({"status": {"conditions": [condition("Complete")]}}, True, id="complete"),
        pytest.param({"status": {"conditions": [condition("Failed")], "terminating": 1}}, False,
                     id="failed-pods-terminating"),
        pytest.param({"status": {"active": 0}}, False, id="running-between-pods"),
        pytest.param({"metadata": {"deletionTimestamp": "2025-01-01T00:00:00Z"},
                      "status": {"conditions": [condition("Complete")]}}, False,
                     id="being-deleted"),
    ],
)  # fmt: skip
def test_pods_stopped(job: dict[str, Any], stopped: bool) -> None:
    """What a suspended JobSet's claims wait for before a snapshot: no pod runs, is terminating
    or will start (retentionPolicy.whenSuspended: Snapshot)."""
    assert children.view(job).pods_stopped is stopped


@pytest.mark.parametrize(
    ("spec", "status", "use_rjob", "ready"),
    [
        # RJ: parallelism 4, completions 3 -> 3 pods.
        pytest.param({}, {"ready": 3}, True, True, id="no-spec-uses-rjob"),
        pytest.param({}, {"ready": 2}, True, False, id="no-spec-rjob-short"),
        pytest.param({}, {"ready": 1}, False, True, id="no-spec-no-rjob-1"),
        pytest.param({}, {}, False, False, id="no-spec-no-pods"),
        pytest.param({"parallelism": 2}, {"ready": 2}, True, True, id="job-parallelism-wins"),
        pytest.param({"parallelism": 4, "completions": 2}, {"ready": 2}, True, True, id="min"),
        pytest.param({"parallelism": 4}, {"ready": 1, "succeeded": 3}, True, True, id="plus-succ"),
        pytest.param({"parallelism": 4}, {"ready": 3}, True, False, id="short"),
        pytest.param({"parallelism": 0}, {}, True, True, id="zero-parallelism"),
        pytest.param({"parallelism": True}, {"ready": 3}, True, True, id="bool-parallelism"),
        pytest.param(
            {"parallelism": 1},
            {"ready": 1, "conditions": [condition("Complete")]},
            True,
            False,
            id="finished-not-ready",
        ),
    ],
)
def test_is_ready(
    spec: dict[str, Any], status: dict[str, Any], use_rjob: bool, ready: bool
) -> None:
    job = children.view({"spec": spec, "status": status})
    assert job.is_ready(RJ if use_rjob else None) is ready


@pytest.mark.parametrize(
    ("meta", "deleting"),
    [
        pytest.param({"deletionTimestamp": "2025-01-01T00:00:00Z"}, True, id="set"),
        pytest.param({"deletionTimestamp": None}, False, id="null"),
        pytest.param({}, False, id="missing"),
    ],
)
def test_is_deleting(meta: dict[str, Any], deleting: bool) -> None:
    assert children.view({"metadata": meta}).deleting is deleting


def test_factory_job_reads_back() -> None:
    job = children.view(make_job(JS, "w", 1, active=2, ready=3, suspended=True))
    assert job.name == "js-w-1"
    assert job.replicated_job == "w"
    assert job.job_index == 1
    assert job.restart_attempt == 0
    assert job.is_active
    assert job.is_ready(RJ)
    assert job.suspended


@pytest.mark.parametrize(
    ("restarts", "attempt", "current"),
    [
        pytest.param(0, 0, True, id="same-0"),
        pytest.param(2, 2, True, id="same-2"),
        pytest.param(2, 1, False, id="older"),
        pytest.param(2, 0, False, id="much-older"),
        pytest.param(1, 2, True, id="newer-than-status"),
    ],
)
def test_current_and_stale(restarts: int, attempt: int, current: bool) -> None:
    js = make_jobset(restarts=restarts)
    job = children.view(make_job(js, "workers", 0, restart_attempt=attempt))
    assert children.is_current(js, job) is current
    assert (children.current_jobs(js, [job]) == [job]) is current
    assert (children.stale_jobs(js, [job]) == [job]) is not current


def test_missing_or_bad_attempt_is_stale() -> None:
    js = make_jobset()
    missing = make_job(js, "workers", 0)
    del missing["metadata"]["labels"][api.RESTART_ATTEMPT]
    bad = make_job(js, "workers", 1)
    bad["metadata"]["labels"][api.RESTART_ATTEMPT] = "one"
    jobs = children.views([missing, bad])
    assert children.current_jobs(js, jobs) == []
    assert children.stale_jobs(js, jobs) == jobs


@given(
    restarts=st.integers(0, 5),
    attempts=st.lists(st.one_of(st.none(), st.integers(0, 6)), max_size=12),
)
def test_current_and_stale_partition_the_jobs(restarts: int, attempts: list[int | None]) -> None:
    js = make_jobset(restarts=restarts)
    jobs = []
    for i, attempt in enumerate(attempts):
        job = make_job(js, "workers", i, restart_attempt=attempt or 0)
        if attempt is None:
            del job["metadata"]["labels"][api.RESTART_ATTEMPT]
        jobs.append(children.view(job))
    current = children.current_jobs(js, jobs)
    stale = children.stale_jobs(js, jobs)
    assert len(current) + len(stale) == len(jobs)
    assert all(job in jobs for job in current + stale)
    assert not [job for job in current if job in stale]


# ----------------------------------------------------------------------------- cache view


def test_job_view_keeps_what_is_read_and_drops_the_containers() -> None:
    pod = {
        "containers": [{"name": "main", "image": "busybox", "env": [{"name": "A", "value": "1"}]}],
        "initContainers": [{"name": "init", "image": "busybox"}],
        "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-js-w-0"}}],
        "nodeSelector": {"zone": "a"},
        "tolerations": [{"key": "k", "operator": "Exists"}],
        "schedulingGates": [{"name": "g"}],
    }
    job = {
        "metadata": {"name": "js-w-0", "labels": {"a": "b"}, "managedFields": [{"manager": "x"}]},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "suspend": True,
            "template": {"metadata": {"labels": {"l": "v"}}, "spec": pod},
        },
        "status": {"active": 1, "conditions": [{"type": "Complete", "status": "True"}]},
    }
    view = children.job_view(job)
    assert view is job  # in place: the informer owns the object
    assert view["metadata"] == {"name": "js-w-0", "labels": {"a": "b"}}
    assert view["spec"]["template"] == {
        "metadata": {"labels": {"l": "v"}},
        "spec": {k: v for k, v in pod.items() if k not in ("containers", "initContainers")},
    }
    assert view["status"]["active"] == 1 and view["spec"]["parallelism"] == 2


@pytest.mark.parametrize(
    "job",
    [
        {},
        {"metadata": "x", "spec": "y"},
        {"spec": {"template": None}},
        {"spec": {"template": {"spec": ["not", "a", "map"]}}},
    ],
)
def test_job_view_leaves_malformed_parts_alone(job: Obj) -> None:
    before = copy.deepcopy(job)
    assert children.job_view(job) == before


def test_service_view_keeps_only_the_metadata() -> None:
    meta = {
        "name": "js",
        "namespace": "ns",
        "uid": "u1",
        "resourceVersion": "7",
        "labels": {api.JOBSET_NAME: "js"},
        "ownerReferences": [{"kind": "JobSet", "name": "js", "uid": "j1"}],
    }
    service = {
        "metadata": {**meta, "managedFields": [{"manager": "x"}]},
        "spec": {"clusterIP": "None", "selector": {api.JOBSET_NAME: "js"}, "ports": []},
        "status": {"loadBalancer": {}},
    }
    view = children.service_view(service)
    assert view is service  # in place: the informer owns the object
    assert view == {"metadata": meta}


def test_a_service_view_is_all_the_reconciler_needs() -> None:
    # decide reads only whether the Service exists: the same plan with the view as with the
    # whole Service (no create), and a create when there is none.
    jobset = model.parse(make_jobset_obj())
    whole = {"metadata": {"name": "js", "namespace": "default"}, "spec": {"clusterIP": "None"}}
    with_view = decide(jobset, [], children.service_view(copy.deepcopy(whole)), T0)
    assert with_view.create_service is None
    assert decide(jobset, [], whole, T0).create_service is None
    assert decide(jobset, [], None, T0).create_service is not None
