"""suspend: suspending and resuming child Jobs, and the Suspended condition."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.jobset import api, suspend
from controller.jobset.children import view as job_view
from controller.jobset.children import views as job_views
from controller.jobset.jobsetstatus import Condition
from controller.jobset.status import replicated_jobs_status
from controller.runtime.store import Obj
from tests.unit.jobset_factories import T0, make_job, make_jobset, rjob

SUSPEND = {"spec": {"suspend": True}}
RESUME = {"spec": {"suspend": False}}
FAIL = ("BackoffLimitExceeded", "", T0)
TWO = [rjob("leader"), rjob("workers", 2)]


def _names(patches: list[tuple[str, Obj]]) -> list[str]:
    return [name for name, _ in patches]


# ----------------------------------------------------------------------------- suspending


def test_suspend_running_jobs() -> None:
    js = make_jobset(replicated_jobs=TWO, suspend=True)
    jobs = [
        make_job(js, "leader", 0, active=1),
        make_job(js, "workers", 0),  # no pods yet: still unfinished, still suspended
        make_job(js, "workers", 1, suspended=True),  # already
    ]
    d = suspend.plan(js, job_views(jobs))
    assert d.patches == (("js-leader-0", SUSPEND), ("js-workers-0", SUSPEND))
    assert d.clear_start_time == ()
    assert d.condition == suspend.SUSPENDED
    assert d.condition == Condition(api.SUSPENDED, "True", "SuspendedJobs", "jobset is suspended")


@pytest.mark.parametrize(
    "job_kw",
    [
        pytest.param({"complete": True}, id="complete"),
        pytest.param({"failed": FAIL}, id="failed"),
        pytest.param({"deleting": True, "active": 1}, id="deleting"),
        pytest.param({"restart_attempt": 0, "active": 1}, id="old-attempt"),
        pytest.param({"suspended": True}, id="already-suspended"),
    ],
)
def test_suspend_leaves_alone(job_kw: dict[str, Any]) -> None:
    js = make_jobset(replicated_jobs=TWO, suspend=True, restarts=1)
    assert suspend.suspend_patches(js, job_views([make_job(js, "workers", 0, **job_kw)])) == []


def test_suspend_steady_state_no_writes() -> None:
    js = make_jobset(replicated_jobs=TWO, suspend=True)
    jobs = [make_job(js, "leader", 0, suspended=True), make_job(js, "workers", 0, suspended=True)]
    assert suspend.suspend_patches(js, job_views(jobs)) == []
    assert suspend.plan(js, job_views(jobs)).condition == suspend.SUSPENDED


# ----------------------------------------------------------------------------- resuming


def test_resume_suspended_jobs() -> None:
    js = make_jobset(replicated_jobs=TWO)
    jobs = [
        make_job(js, "leader", 0, suspended=True),
        make_job(js, "workers", 0, suspended=True),
        make_job(js, "workers", 1, active=1),
    ]
    d = suspend.plan(js, job_views(jobs))
    assert d.patches == (("js-leader-0", RESUME), ("js-workers-0", RESUME))
    assert d.condition == suspend.RESUMED
    assert d.condition == Condition(api.SUSPENDED, "False", "ResumeJobs", "jobset is resumed")


def test_resume_steady_state_no_writes() -> None:
    js = make_jobset(replicated_jobs=TWO)
    jobs = [make_job(js, "leader", 0, active=1), make_job(js, "workers", 0)]
    d = suspend.plan(js, job_views(jobs))
    assert d.patches == ()
    assert d.condition == suspend.RESUMED  # a no-op for set_condition when never suspended


@pytest.mark.parametrize(
    "job_kw",
    [
        pytest.param({"suspended": True, "complete": True}, id="finished"),
        pytest.param({"suspended": True, "deleting": True}, id="deleting"),
        pytest.param({"suspended": True, "restart_attempt": 0}, id="old-attempt"),
    ],
)
def test_resume_leaves_alone(job_kw: dict[str, Any]) -> None:
    js = make_jobset(replicated_jobs=TWO, restarts=1)
    assert suspend.suspend_patches(js, job_views([make_job(js, "workers", 0, **job_kw)])) == []


def test_resume_job_without_replicated_job_label_left_alone() -> None:
    js = make_jobset(replicated_jobs=TWO)
    job = make_job(js, "workers", 0, suspended=True)
    del job["metadata"]["labels"][api.REPLICATED_JOB_NAME]
    assert suspend.suspend_patches(js, job_views([job])) == []


TEMPLATED = [
    rjob(
        "workers",
        1,
        pod_labels={"queue": "gpu", "team": "ml"},
        pod_annotations={"kueue/flavor": "a100"},
        pod_spec={
            "nodeSelector": {"pool": "gpu"},
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
            "schedulingGates": [{"name": "kueue"}],
        },
    )
]


def _job_with_template(template: Obj, **kw: Any) -> tuple[Any, Obj]:
    js = make_jobset(replicated_jobs=TEMPLATED)
    job = make_job(js, "workers", 0, suspended=True, **kw)
    job["spec"]["template"] = template
    return js, job


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        pytest.param(
            {"spec": {"containers": []}},
            {
                "metadata": {
                    "labels": {"queue": "gpu", "team": "ml"},
                    "annotations": {"kueue/flavor": "a100"},
                },
                "spec": {
                    "nodeSelector": {"pool": "gpu"},
                    "tolerations": [{"key": "gpu", "operator": "Exists"}],
                    "schedulingGates": [{"name": "kueue"}],
                },
            },
            id="bare-job-template-gets-all",
        ),
        pytest.param(
            {
                "metadata": {
                    "labels": {"queue": "cpu", "team": "ml", api.JOBSET_NAME: "js"},
                    "annotations": {"kueue/flavor": "a100", "other": "x"},
                },
                "spec": {
                    "nodeSelector": {"pool": "gpu", "zone": "b"},
                    "tolerations": [
                        {"key": "spot", "operator": "Exists"},
                        {"key": "gpu", "operator": "Exists"},
                    ],
                    "schedulingGates": [{"name": "kueue"}],
                },
            },
            {"metadata": {"labels": {"queue": "gpu"}}},
            id="only-differences-template-wins",
        ),
        pytest.param(
            {
                "metadata": {"labels": {"queue": "gpu", "team": "ml"}},
                "spec": {
                    "nodeSelector": {"pool": "gpu"},
                    "tolerations": [{"key": "spot", "operator": "Exists"}],
                    "schedulingGates": [{"name": "other"}],
                },
            },
            {
                "metadata": {"annotations": {"kueue/flavor": "a100"}},
                "spec": {
                    "tolerations": [
                        {"key": "spot", "operator": "Exists"},
                        {"key": "gpu", "operator": "Exists"},
                    ],
                    "schedulingGates": [{"name": "other"}, {"name": "kueue"}],
                },
            },
            id="lists-union-keep-job-entries-first",
        ),
        pytest.param(
            {
                "metadata": {
                    "labels": {"queue": "gpu", "team": "ml"},
                    "annotations": {"kueue/flavor": "a100"},
                },
                "spec": {
                    "nodeSelector": {"pool": "gpu"},
                    "tolerations": [{"key": "gpu", "operator": "Exists"}],
                    "schedulingGates": [{"name": "kueue"}],
                },
            },
            {},
            id="already-in-sync",
        ),
        pytest.param(
            {"metadata": None, "spec": {"nodeSelector": None, "tolerations": "junk"}},
            {
                "metadata": {
                    "labels": {"queue": "gpu", "team": "ml"},
                    "annotations": {"kueue/flavor": "a100"},
                },
                "spec": {
                    "nodeSelector": {"pool": "gpu"},
                    "tolerations": [{"key": "gpu", "operator": "Exists"}],
                    "schedulingGates": [{"name": "kueue"}],
                },
            },
            id="junk-job-fields",
        ),
    ],
)
def test_template_patch(template: Obj, expected: Obj) -> None:
    js, job = _job_with_template(template)
    assert suspend.template_patch(job_view(job), js.replicated_jobs[0]) == expected
    spec: Obj = {"suspend": False}
    if expected:
        spec["template"] = expected
    assert suspend.suspend_patches(js, job_views([job])) == [("js-workers-0", {"spec": spec})]


def test_template_patch_needs_start_time_cleared() -> None:
    js, job = _job_with_template({"spec": {}}, start_time=T0)
    d = suspend.plan(js, job_views([job]))
    assert d.clear_start_time == ("js-workers-0",)
    in_sync = copy.deepcopy(job)
    in_sync["spec"]["template"] = copy.deepcopy(js.replicated_jobs[0].template["spec"]["template"])
    assert suspend.plan(js, job_views([in_sync])).clear_start_time == ()
    js2, no_start = _job_with_template({"spec": {}})
    assert suspend.plan(js2, job_views([no_start])).clear_start_time == ()


def test_template_not_touched_when_suspending() -> None:
    js = make_jobset(replicated_jobs=TEMPLATED, suspend=True)
    job = make_job(js, "workers", 0, active=1)
    job["spec"]["template"] = {"spec": {}}
    assert suspend.suspend_patches(js, job_views([job])) == [("js-workers-0", SUSPEND)]


def test_partial_job_does_not_raise() -> None:
    js = make_jobset(replicated_jobs=TEMPLATED)
    job: Obj = {
        "metadata": {
            "name": "js-workers-0",
            "labels": {api.REPLICATED_JOB_NAME: "workers", api.RESTART_ATTEMPT: "0"},
        },
        "spec": {"suspend": True},
    }
    [(name, patch)] = suspend.suspend_patches(js, job_views([job]))
    assert name == "js-workers-0"
    assert patch["spec"]["suspend"] is False
    assert "template" in patch["spec"]


# ----------------------------------------------------------------------------- resume ordering

THREE = [rjob("a", 1), rjob("b", 2), rjob("c", 1)]


def _three(**kw: Any) -> Any:
    return make_jobset(replicated_jobs=THREE, **kw)


@pytest.mark.parametrize(
    ("state", "patched", "resumed"),
    [
        pytest.param(
            {
                "a": [{"suspended": True}],
                "b": [{"suspended": True}] * 2,
                "c": [{"suspended": True}],
            },
            ["js-a-0"],
            False,
            id="first-group-first",
        ),
        pytest.param(
            {"a": [{"active": 1}], "b": [{"suspended": True}] * 2, "c": [{"suspended": True}]},
            [],
            False,
            id="wait-for-a-ready",
        ),
        pytest.param(
            {"a": [{"ready": 1}], "b": [{"suspended": True}] * 2, "c": [{"suspended": True}]},
            ["js-b-0", "js-b-1"],
            False,
            id="a-ready-resume-b",
        ),
        pytest.param(
            {
                "a": [{"complete": True}],
                "b": [{"ready": 1}, {"failed": FAIL}],
                "c": [{"suspended": True}],
            },
            ["js-c-0"],
            False,
            id="succeeded-and-failed-count-as-started",
        ),
        pytest.param(
            {"a": [{"ready": 1}], "b": [{"ready": 1}] * 2, "c": [{"ready": 1}]},
            [],
            True,
            id="all-started-resumed",
        ),
    ],
)
def test_resume_in_order(
    state: dict[str, list[dict[str, Any]]], patched: list[str], resumed: bool
) -> None:
    js = _three(startup_in_order=True)
    jobs = [make_job(js, rj, i, **kw) for rj, kws in state.items() for i, kw in enumerate(kws)]
    d = suspend.plan(js, job_views(jobs))
    assert [name for name, _ in d.patches] == patched
    assert all(p == RESUME for _, p in d.patches)
    assert (d.condition == suspend.RESUMED) is resumed
    assert d.condition in (None, suspend.RESUMED)


def test_resume_depends_on_waits_for_dependency() -> None:
    js = make_jobset(
        replicated_jobs=[rjob("init"), rjob("train", 2, depends_on=[("init", "Complete")])]
    )
    waiting = [
        make_job(js, "init", 0, suspended=True),
        make_job(js, "train", 0, suspended=True),
    ]
    d = suspend.plan(js, job_views(waiting))
    assert _names(list(d.patches)) == ["js-init-0"]
    assert d.condition == suspend.RESUMED  # upstream: no order to walk, resumed at once
    done = [make_job(js, "init", 0, complete=True), make_job(js, "train", 0, suspended=True)]
    assert _names(suspend.suspend_patches(js, job_views(done))) == ["js-train-0"]


@given(
    flags=st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=1, max_size=6),
    js_suspended=st.booleans(),
    in_order=st.booleans(),
)
def test_applying_patches_converges(
    flags: list[tuple[bool, bool, bool]], js_suspended: bool, in_order: bool
) -> None:
    """Applying the patches and planning again yields no patch for the same Jobs."""
    js = make_jobset(replicated_jobs=TEMPLATED, suspend=js_suspended, startup_in_order=in_order)
    jobs = [
        make_job(js, "workers", i, suspended=s, active=int(a), complete=c)
        for i, (s, a, c) in enumerate(flags)
    ]
    first = dict(suspend.suspend_patches(js, job_views(jobs)))
    applied = []
    for job in jobs:
        job = copy.deepcopy(job)
        patch = first.get(job["metadata"]["name"])
        if patch:
            _merge(job, patch)
        applied.append(job)
    second = dict(suspend.suspend_patches(js, job_views(applied)))
    assert not set(first) & set(second)
    for job in applied:
        if not job["status"].get("conditions") and job["metadata"]["name"] in first:
            assert job["spec"]["suspend"] is js_suspended


def _merge(target: Obj, patch: Obj) -> None:
    """RFC 7386 JSON merge patch, in place."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict):
            if not isinstance(target.get(key), dict):
                target[key] = {}
            _merge(target[key], value)
        else:
            target[key] = value


# ----------------------------------------------------------------------------- counts given


@pytest.mark.parametrize("in_order", [False, True])
@pytest.mark.parametrize(
    "leader_kw",
    [
        pytest.param({"suspended": True}, id="leader-suspended"),
        pytest.param({"active": 1, "ready": 1}, id="leader-ready"),
        pytest.param({"complete": True}, id="leader-complete"),
    ],
)
def test_plan_with_the_counts_given_equals_plan_counting_itself(
    leader_kw: dict[str, Any], in_order: bool
) -> None:
    """decide passes the replicated-job counts it made already; the decision is the same."""
    # InOrder or dependsOn: admission (and the parser) refuse the two together.
    depends_on = None if in_order else [("leader", "Ready")]
    js = make_jobset(
        replicated_jobs=[rjob("leader"), rjob("workers", 2, depends_on=depends_on)],
        startup_in_order=in_order,
    )
    jobs = [
        make_job(js, "leader", 0, **leader_kw),
        make_job(js, "workers", 0, suspended=True),
        make_job(js, "workers", 1, suspended=True),
    ]
    counted = replicated_jobs_status(js, job_views(jobs))
    assert suspend.plan(js, job_views(jobs), counted) == suspend.plan(js, job_views(jobs))


def test_stopped_asks_every_job() -> None:
    """Every Job of the JobSet, of every attempt: a pod of any may still write to a claim."""
    done = {"spec": {"suspend": True}, "status": {"conditions": [
        {"type": "Suspended", "status": "True", "reason": "JobSuspended"}]}}  # fmt: skip
    going = {"spec": {"suspend": True}, "status": {"terminating": 1}}
    assert suspend.stopped(job_views([done, done]))
    assert not suspend.stopped(job_views([done, going]))
    assert suspend.stopped([])  # no Job: no pod
