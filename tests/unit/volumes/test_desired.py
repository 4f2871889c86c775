"""desired: which replicated jobs a policy targets, the claims a JobSet needs (names, objects,
slots), each Job's claims (``JobClaims``) and the pod volumes that mount them."""

from __future__ import annotations

import copy

import pytest

from controller.jobset import api, construct, volumes
from controller.jobset.volumes import desired as volume_desired
from controller.jobset.volumes import spec as volume_spec
from controller.jobset.volumes.desired import (
    JobClaims,
    claims_for_job,
    desired_claims,
    mounted_names,
    pod_indexes,
    targeted,
)
from controller.jobset.volumes.model import (
    CLAIM_POD_INDEX_LABEL,
    CLAIM_SCOPE_LABEL,
    CLAIM_TEMPLATE_LABEL,
    POD_SCOPE_LABEL,
    Retention,
    VolumePolicy,
)
from controller.runtime.store import Obj
from tests.unit.volumes.factories import make, mounting, only, owner, tpl

# ----------------------------------------------------------------------------- targets


def test_targeted_explicit_in_spec_order_and_implicit() -> None:
    rjobs = [mounting("a", 1, ("x",)), mounting("b", 1, ("y",)), mounting("c", 1, ("x", "y"))]
    js = make(
        [
            {"templates": [tpl("x")], "targetReplicatedJobs": ["c", "a"]},
            {"templates": [tpl("y")]},
        ],
        rjobs=rjobs,
    )
    explicit, implicit = volume_spec.policies(js)
    assert targeted(explicit, js) == ("a", "c")
    assert targeted(implicit, js) == ("b", "c")
    stray = VolumePolicy((), Retention(), ("ghost", "b"), "JobSet")
    assert targeted(stray, js) == ("b",)


def test_mounted_names_include_init_containers() -> None:
    js = make(
        [{"templates": [tpl("data")]}],
        rjobs=[mounting("workers", 1, ("data", "logs"), init_mounts=("seed",))],
    )
    assert mounted_names(js.replicated_jobs[0]) == {"data", "logs", "seed"}


# ----------------------------------------------------------------------------- desired claims


def test_implicit_target_gets_every_template_of_the_policy() -> None:
    rjobs = [mounting("a", 1, ("x",)), mounting("b", 1, ("y",))]
    js = make([{"templates": [tpl("x"), tpl("y")], "scope": "Job"}], rjobs=rjobs)
    model = volumes.model(js)
    assert model.job_claims.for_job("a", 0) == {"x": "x-js-a-0", "y": "y-js-a-0"}
    assert len(model.desired) == 4


def test_job_scope_one_claim_per_job_and_none_for_zero_replicas() -> None:
    rjobs = [mounting("a", 3, ("x",)), mounting("b", 0, ("x",))]
    js = make([{"templates": [tpl("x")], "scope": "Job"}], rjobs=rjobs)
    desired = volumes.model(js).desired
    assert [(c.name, c.replicated_job, c.job_index, c.slot) for c in desired] == [
        ("x-js-a-0", "a", 0, ("x", "a", 0, None)),
        ("x-js-a-1", "a", 1, ("x", "a", 1, None)),
        ("x-js-a-2", "a", 2, ("x", "a", 2, None)),
    ]


def test_desired_claims_of_the_model_and_of_the_function_agree() -> None:
    js = make(
        [{"templates": [tpl("ckpt")], "scope": "Job"}, {"templates": [tpl("data")]}],
        rjobs=[mounting("workers", 2, ("ckpt", "data"))],
    )
    model = volumes.model(js)
    assert desired_claims(js, model.policies) == model.desired
    assert [c.name for c in model.desired] == ["ckpt-js-workers-0", "ckpt-js-workers-1", "data-js"]


def test_owner_reference_only_when_deleted_with_the_jobset() -> None:
    spec = {"templates": [tpl("data")], "retentionPolicy": {"whenDeleted": "Retain"}}
    assert "ownerReferences" not in only(make([spec])).object["metadata"]
    assert only(make([{"templates": [tpl("data")]}])).object["metadata"]["ownerReferences"] == [
        owner()
    ]


def test_the_object_is_built_once_and_is_the_claims_own() -> None:
    desired = only(make([{"templates": [tpl("data")]}]))
    assert desired.object is desired.object
    assert desired.object["metadata"] == desired.metadata
    assert desired.object["metadata"] is not desired.metadata
    assert desired.object["spec"] is not desired.template.spec


# ----------------------------------------------------------------------------- each Job's claims


@pytest.mark.parametrize(
    ("rjob_name", "index", "expected"),
    [
        pytest.param("workers", 0, {"ckpt": "ckpt-js-workers-0", "data": "data-js"}, id="w0"),
        pytest.param("workers", 1, {"ckpt": "ckpt-js-workers-1", "data": "data-js"}, id="w1"),
        # Only the JobSet-scope template targets the leader: the shared part alone.
        pytest.param("leader", 0, {"data": "data-js"}, id="leader"),
        pytest.param("idle", 0, {}, id="mounts-nothing"),
        pytest.param("ghost", 0, {}, id="not-a-replicated-job"),
    ],
)
def test_job_claims(rjob_name: str, index: int, expected: dict[str, str]) -> None:
    js = make(
        [
            {"templates": [tpl("ckpt")], "scope": "Job", "targetReplicatedJobs": ["workers"]},
            {"templates": [tpl("data")]},
        ],
        rjobs=[
            mounting("leader", 1, ("data",)),
            mounting("workers", 2, ("ckpt", "data")),
            mounting("idle", 1),
        ],
    )
    model = volumes.model(js)
    claims = JobClaims(js, model.policies)
    assert claims.for_job(rjob_name, index) == expected
    assert claims.for_job(rjob_name, index) == expected  # worked out once, the same again
    assert list(claims.for_job(rjob_name, index)) == list(expected)  # in policy order
    assert claims_for_job(js, model.policies, rjob_name, index) == expected
    assert model.job_claims.for_job(rjob_name, index) == expected


# ----------------------------------------------------------------------------- mounting


def test_mount_adds_volume_keeps_users_and_does_not_mutate() -> None:
    rjobs = [mounting("workers", 1, ("data", "scratch"), volumes_=("scratch",))]
    js = make([{"templates": [tpl("data")]}], rjobs=rjobs)
    policies = volume_spec.policies(js)
    job = construct.desired_job(js, js.replicated_jobs[0], 0)
    before = copy.deepcopy(job)
    mounted = volume_desired.mount(job, js, policies, "workers", 0)
    assert job == before
    assert mounted["spec"]["template"]["spec"]["volumes"] == [
        {"name": "scratch", "emptyDir": {}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-js"}},
    ]
    assert volume_desired.mount(mounted, js, policies, "workers", 0) == mounted


def test_mount_the_claims_given() -> None:
    js = make([{"templates": [tpl("data")]}])
    job = construct.desired_job(js, js.replicated_jobs[0], 1)
    wanted = {"data": "elsewhere"}
    mounted = volume_desired.mount(job, js, volume_spec.policies(js), "workers", 1, wanted)
    assert mounted["spec"]["template"]["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "elsewhere"}}
    ]


def test_mount_replaces_a_same_named_volume_in_place() -> None:
    js = make([{"templates": [tpl("data")]}])
    job = {"spec": {"template": {"spec": {"volumes": [{"name": "data", "emptyDir": {}}, "junk"]}}}}
    mounted = volume_desired.mount(job, js, volume_spec.policies(js), "workers", 0)
    assert mounted["spec"]["template"]["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-js"}},
        "junk",
    ]


@pytest.mark.parametrize("job", [{}, {"spec": None}, {"spec": {"template": []}}])
def test_mount_partial_job(job: Obj) -> None:
    js = make([{"templates": [tpl("data")]}])
    mounted = volume_desired.mount(job, js, volume_spec.policies(js), "workers", 0)
    assert mounted["spec"]["template"]["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-js"}}
    ]


def test_mount_untargeted_is_an_equal_copy() -> None:
    rjobs = [mounting("workers", 1, ("data",)), mounting("other", 1)]
    js = make([{"templates": [tpl("data")]}], rjobs=rjobs)
    job = construct.desired_job(js, js.replicated_jobs[1], 0)
    mounted = volume_desired.mount(job, js, volume_spec.policies(js), "other", 0)
    assert mounted == job
    assert mounted is not job


# ----------------------------------------------------------------------------- Pod scope

POD = {"templates": [tpl("ckpt")], "scope": "Pod"}


def indexed(
    name: str,
    replicas: int,
    completions: int | None = None,
    parallelism: int | None = None,
    mounts: tuple[str, ...] = ("ckpt",),
) -> Obj:
    """A replicated job mounting ``mounts``, with these completions and parallelism."""
    entry = mounting(name, replicas, mounts)
    spec = entry["template"]["spec"]
    if completions is not None:
        spec["completions"] = completions
    if parallelism is not None:
        spec["parallelism"] = parallelism
    return entry


def pod_model(vcp: list[Obj], rjobs: list[Obj]) -> volumes.VolumeModel:
    """The model of js, Pod scope accepted (as once the controller checks the policy)."""
    return volumes.model(make(vcp, rjobs=rjobs))


@pytest.mark.parametrize(
    ("completions", "parallelism", "expected"),
    [
        pytest.param(None, None, 1, id="neither-kubernetes-defaults-to-1"),
        pytest.param(3, None, 3, id="completions"),
        # Fewer pods at once than completion indexes: every index still needs its claim.
        pytest.param(3, 1, 3, id="parallelism-below-completions"),
        pytest.param(2, 5, 2, id="parallelism-above-completions"),
        pytest.param(0, None, 0, id="no-completions"),
    ],
)
def test_pod_indexes(completions: int | None, parallelism: int | None, expected: int) -> None:
    js = make([POD], rjobs=[indexed("workers", 1, completions, parallelism)])
    assert pod_indexes(js.replicated_jobs[0]) == expected


def test_pod_scope_one_claim_per_completion_index_of_every_job() -> None:
    model = pod_model([POD], [indexed("workers", 2, completions=3, parallelism=1)])
    assert [(c.name, c.slot) for c in model.desired] == [
        (f"ckpt-js-workers-{j}-{p}", ("ckpt", "workers", j, p)) for j in range(2) for p in range(3)
    ]
    last = model.desired[-1]
    assert (last.replicated_job, last.job_index, last.pod_index) == ("workers", 1, 2)
    assert last.metadata["labels"] == {
        api.JOBSET_NAME: "js",
        CLAIM_TEMPLATE_LABEL: "ckpt",
        CLAIM_SCOPE_LABEL: "Pod",
        api.REPLICATED_JOB_NAME: "workers",
        api.JOB_INDEX: "1",
        CLAIM_POD_INDEX_LABEL: "2",
    }
    assert [model.slot_name(c.slot) for c in model.desired] == [c.name for c in model.desired]


@pytest.mark.parametrize(
    ("vcp", "mounted", "needed"),
    [
        pytest.param(
            [POD, {"templates": [tpl("data")]}],
            {"ckpt": "ckpt-js-workers-1-POD-INDEX", "data": "data-js"},
            ["ckpt-js-workers-1-0", "ckpt-js-workers-1-1", "ckpt-js-workers-1-2", "data-js"],
            id="pod-and-jobset-scope",
        ),
        pytest.param(
            [{"templates": [tpl("data")]}, {**POD, "templates": [tpl("ckpt"), tpl("logs")]}],
            {"data": "data-js", "ckpt": "ckpt-js-workers-1-POD-INDEX",
             "logs": "logs-js-workers-1-POD-INDEX"},
            ["data-js", "ckpt-js-workers-1-0", "ckpt-js-workers-1-1", "ckpt-js-workers-1-2",
             "logs-js-workers-1-0", "logs-js-workers-1-1", "logs-js-workers-1-2"],
            id="policy-order",
        ),
        pytest.param(
            [{**POD, "scope": "Job"}],
            {"ckpt": "ckpt-js-workers-1"},
            ["ckpt-js-workers-1"],
            id="job-scope-needs-what-it-mounts",
        ),
    ],
)  # fmt: skip
def test_job_claims_mounted_and_needed(
    vcp: list[Obj], mounted: dict[str, str], needed: list[str]
) -> None:
    """A Job's template mounts one placeholder per Pod-scope template; it needs the claim of
    each of its completion indexes (3 here, one pod at a time)."""
    rjobs = [indexed("workers", 2, completions=3, parallelism=1, mounts=("ckpt", "data", "logs"))]
    model = pod_model(vcp, rjobs)
    assert model.job_claims.for_job("workers", 1) == mounted
    assert list(model.job_claims.for_job("workers", 1)) == list(mounted)
    assert model.job_claims.needed("workers", 1) == needed
    assert model.job_claims.needed("ghost", 0) == []
    # Every claim a Job needs is a desired claim.
    assert set(needed) <= {c.name for c in model.desired}


def test_mount_pod_scope_placeholder_and_label() -> None:
    """The placeholder, and the label that selects the pods for the admission policy resolving
    it; the template's own labels are kept, the Job given is not changed."""
    model = pod_model([POD], [indexed("workers", 2, completions=3)])
    js = model.jobset
    job = construct.desired_job(js, js.replicated_jobs[0], 1)
    job["spec"]["template"]["metadata"] = {"labels": {"team": "a"}}
    before = copy.deepcopy(job)
    mounted = volume_desired.mount(job, js, model.policies, "workers", 1)
    assert job == before
    template = mounted["spec"]["template"]
    assert template["spec"]["volumes"] == [
        {"name": "ckpt", "persistentVolumeClaim": {"claimName": "ckpt-js-workers-1-POD-INDEX"}}
    ]
    assert template["metadata"]["labels"] == {"team": "a", POD_SCOPE_LABEL: "true"}
    assert volume_desired.mount(mounted, js, model.policies, "workers", 1) == mounted


def test_mount_without_a_placeholder_adds_no_label() -> None:
    js = make([{"templates": [tpl("data")]}])
    job = construct.desired_job(js, js.replicated_jobs[0], 0)
    mounted = volume_desired.mount(job, js, volume_spec.policies(js), "workers", 0)
    labels = (mounted["spec"]["template"].get("metadata") or {}).get("labels") or {}
    assert POD_SCOPE_LABEL not in labels
