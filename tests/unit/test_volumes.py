"""Volume claim policies: parsing both spellings, validation, claims, mounting, adoption, retention,
status; the three example manifests; property tests over random valid JobSets."""

from __future__ import annotations

import copy
import re
from decimal import Decimal
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.jobset import api, construct, storage, volumes
from controller.jobset.model import InvalidJobSet, JobSet, Obj, parse
from controller.jobset.storage import StorageClasses
from controller.jobset.volumes import (
    CLAIM_SCOPE_LABEL,
    CLAIM_TEMPLATE_LABEL,
    OWNER_UID_ANNOTATION,
    RETAINED_FROM_ANNOTATION,
    ClaimTemplate,
    DesiredClaim,
    Retention,
    VolumePolicy,
)
from tests.support.examples import EXAMPLES
from tests.unit.jobset_factories import make_jobset, rjob

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

# ----------------------------------------------------------------------------- helpers


def mounting(
    name: str,
    replicas: int = 1,
    mounts: tuple[str, ...] = (),
    *,
    init_mounts: tuple[str, ...] = (),
    volumes_: tuple[str, ...] = (),
) -> Obj:
    """A replicated job whose container mounts ``mounts`` (and initContainer ``init_mounts``)."""
    pod: Obj = {
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "volumeMounts": [{"name": m, "mountPath": f"/{m}"} for m in mounts],
            }
        ]
    }
    if init_mounts:
        pod["initContainers"] = [
            {
                "name": "init",
                "image": "busybox",
                "volumeMounts": [{"name": m, "mountPath": f"/{m}"} for m in init_mounts],
            }
        ]
    if volumes_:
        pod["volumes"] = [{"name": v, "emptyDir": {}} for v in volumes_]
    return rjob(name, replicas, pod_spec=pod)


def tpl(name: str, storage: str = "1Gi", **spec: Any) -> Obj:
    body: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}}
    body.update(spec)
    return {"metadata": {"name": name}, "spec": body}


def make(
    vcp: list[Obj] | None = None,
    vp: Obj | None = None,
    rjobs: list[Obj] | None = None,
    **kw: Any,
) -> JobSet:
    spec: Obj = {}
    if vcp is not None:
        spec["volumeClaimPolicies"] = vcp
    if vp is not None:
        spec["volumePolicy"] = vp
    return make_jobset(
        replicated_jobs=rjobs if rjobs is not None else [mounting("workers", 2, ("data",))],
        spec=spec,
        **kw,
    )


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch, as the API server applies it."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def claim(
    name: str,
    *,
    jobset: str | None = "js",
    uid: str | None = "uid-js",
    template: str = "data",
    scope: str = "JobSet",
    rjob_name: str | None = None,
    index: int | None = None,
    spec: Obj | None = None,
    phase: str | None = "Bound",
    refs: list[Obj] | None = None,
    annotations: Obj | None = None,
    deleting: bool = False,
) -> Obj:
    """An observed claim (as the informer holds it)."""
    labels: Obj = {CLAIM_TEMPLATE_LABEL: template, CLAIM_SCOPE_LABEL: scope}
    if jobset is not None:
        labels[api.JOBSET_NAME] = jobset
    if rjob_name is not None:
        labels[api.REPLICATED_JOB_NAME] = rjob_name
    if index is not None:
        labels[api.JOB_INDEX] = str(index)
    notes: Obj = dict(annotations or {})
    if uid is not None:
        notes[OWNER_UID_ANNOTATION] = uid
    meta: Obj = {"name": name, "namespace": "default", "labels": labels, "annotations": notes}
    if refs is not None:
        meta["ownerReferences"] = refs
    if deleting:
        meta["deletionTimestamp"] = "2025-01-01T12:00:00Z"
    obj: Obj = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": meta,
        "spec": spec
        if spec is not None
        else {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    if phase is not None:
        obj["status"] = {"phase": phase}
    return obj


def owner(uid: str = "uid-js", name: str = "js") -> Obj:
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.KIND,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def only(js: JobSet) -> DesiredClaim:
    (desired,) = volumes.desired_claims(js, volumes.policies(js))
    return desired


# ----------------------------------------------------------------------------- the examples


def load(file: str) -> Obj:
    obj: Obj = yaml.safe_load((EXAMPLES / file).read_text())
    obj["metadata"].update(namespace="ml", uid="uid-ex")
    return obj


def request_spelling(obj: Obj) -> Obj:
    """JobSet-scope volumeClaimPolicies rewritten as the original request's volumePolicy."""
    obj = copy.deepcopy(obj)
    spec = obj["spec"]
    policies = spec.pop("volumeClaimPolicies")
    keep = [p for p in policies if p.get("scope", "JobSet") != "JobSet"]
    (shared,) = [p for p in policies if p.get("scope", "JobSet") == "JobSet"]
    request: Obj = {"volumeClaimTemplates": shared["templates"]}
    if "retentionPolicy" in shared:
        request["retentionPolicy"] = shared["retentionPolicy"]
    if "targetReplicatedJobs" in shared:
        request["replicatedJobs"] = [{"name": n} for n in shared["targetReplicatedJobs"]]
    spec["volumePolicy"] = request
    if keep:  # Job scope has no spelling in volumePolicy: both spellings side by side
        spec["volumeClaimPolicies"] = keep
    return obj


def upstream_spelling(obj: Obj) -> Obj:
    obj = copy.deepcopy(obj)
    spec = obj["spec"]
    request = spec.pop("volumePolicy")
    policy: Obj = {"templates": request["volumeClaimTemplates"]}
    if "replicatedJobs" in request:
        policy["targetReplicatedJobs"] = [r["name"] for r in request["replicatedJobs"]]
    if "retentionPolicy" in request:
        policy["retentionPolicy"] = request["retentionPolicy"]
    spec["volumeClaimPolicies"] = [policy]
    return obj


EXPECTED = {
    "01-seed-volume-policy.yaml": (
        {"pretrained-model-volume-sample"},
        {"A": {"pretrained-model"}, "B": {"pretrained-model"}, "workers": set()},
    ),
    "02-upstream-shared-initializer.yaml": (
        {"initializer-trainjob-shared"},
        {"model-initializer": {"initializer"}, "node": {"initializer"}},
    ),
    "03-per-job-checkpoints-retained.yaml": (
        {"ckpt-resumable-workers-0", "ckpt-resumable-workers-1", "dataset-resumable"},
        {"workers": {"ckpt", "dataset"}},
    ),
}


def both_spellings(file: str) -> list[Obj]:
    original = load(file)
    if "volumePolicy" in original["spec"]:
        return [original, upstream_spelling(original)]
    return [original, request_spelling(original)]


@pytest.mark.parametrize("spelling", [0, 1], ids=["as-written", "other-spelling"])
@pytest.mark.parametrize("file", sorted(EXPECTED))
def test_examples_give_the_expected_claims_and_mounts(file: str, spelling: int) -> None:
    js = parse(both_spellings(file)[spelling])
    policies = volumes.policies(js)
    claims, mounts = EXPECTED[file]
    desired = volumes.desired_claims(js, policies)
    assert {c.name for c in desired} == claims
    assert len(desired) == len(claims)
    for r in js.replicated_jobs:
        for index in range(r.replicas):
            job = volumes.mount(construct.desired_job(js, r, index), js, policies, r.name, index)
            pod_volumes = job["spec"]["template"]["spec"].get("volumes", [])
            assert {v["name"] for v in pod_volumes} == mounts[r.name]
            for v in pod_volumes:
                assert v["persistentVolumeClaim"]["claimName"] in claims


def test_example_01_claim_object() -> None:
    js = parse(load("01-seed-volume-policy.yaml"))
    desired = only(js)
    assert desired.object == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "pretrained-model-volume-sample",
            "namespace": "ml",
            "labels": {
                api.JOBSET_NAME: "volume-sample",
                CLAIM_TEMPLATE_LABEL: "pretrained-model",
                CLAIM_SCOPE_LABEL: "JobSet",
            },
            "annotations": {OWNER_UID_ANNOTATION: "uid-ex"},
            "ownerReferences": [js.owner_reference()],
        },
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "my-storage-class",
            "resources": {"requests": {"storage": "1000Gi"}},
        },
    }
    assert desired.policy.targets == ("A", "B")
    assert volumes.targeted(desired.policy, js) == ("A", "B")


def test_example_03_job_scope_claims_retained_and_labelled() -> None:
    js = parse(load("03-per-job-checkpoints-retained.yaml"))
    policies = volumes.policies(js)
    assert [p.scope for p in policies] == ["Job", "JobSet"]
    assert policies[0].retention == Retention(when_deleted="Retain")
    assert policies[1].retention == Retention(when_completed="Delete")
    by_name = {c.name: c for c in volumes.desired_claims(js, policies)}
    ckpt = by_name["ckpt-resumable-workers-1"]
    assert (ckpt.replicated_job, ckpt.job_index) == ("workers", 1)
    assert "ownerReferences" not in ckpt.object["metadata"]
    assert ckpt.object["metadata"]["labels"] == {
        api.JOBSET_NAME: "resumable",
        CLAIM_TEMPLATE_LABEL: "ckpt",
        CLAIM_SCOPE_LABEL: "Job",
        api.REPLICATED_JOB_NAME: "workers",
        api.JOB_INDEX: "1",
    }
    assert by_name["dataset-resumable"].object["metadata"]["ownerReferences"] == [
        js.owner_reference()
    ]
    assert volumes.claims_for_job(js, policies, "workers", 1) == {
        "ckpt": "ckpt-resumable-workers-1",
        "dataset": "dataset-resumable",
    }


def test_example_02_template_labels_copied() -> None:
    desired = only(parse(load("02-upstream-shared-initializer.yaml")))
    assert desired.template.labels == {"content-type": "model"}
    assert desired.object["metadata"]["labels"]["content-type"] == "model"
    assert desired.policy.targets is None


# ----------------------------------------------------------------------------- parsing


def test_no_policies() -> None:
    js = make_jobset()
    assert volumes.policies(js) == ()
    assert volumes.desired_claims(js, ()) == []
    assert volumes.claims_for_job(js, (), "workers", 0) == {}


def test_defaults() -> None:
    (policy,) = volumes.policies(make([{"templates": [tpl("data")]}]))
    assert policy.scope == "JobSet"
    assert policy.targets is None
    assert policy.retention == Retention("Delete", "Retain", "Retain", "Retain")
    assert policy.where == "spec.volumeClaimPolicies[0]"
    assert policy.templates == (ClaimTemplate("data", {}, {}, tpl("data")["spec"]),)


def test_all_retention_fields_and_empty_scope() -> None:
    retention = {
        "whenDeleted": "Retain",
        "whenCompleted": "Delete",
        "whenFailed": "Delete",
        "whenScaled": "Delete",
    }
    (policy,) = volumes.policies(
        make([{"templates": [tpl("data")], "retentionPolicy": retention, "scope": ""}])
    )
    assert policy.retention == Retention("Retain", "Delete", "Delete", "Delete")
    assert policy.scope == "JobSet"


def test_request_spelling_defaults() -> None:
    (policy,) = volumes.policies(make(vp={"volumeClaimTemplates": [tpl("data")]}))
    assert (policy.scope, policy.targets, policy.where) == ("JobSet", None, "spec.volumePolicy")


def test_both_spellings_together() -> None:
    js = make(
        [{"templates": [tpl("ckpt")], "scope": "Job"}],
        {"volumeClaimTemplates": [tpl("data")], "replicatedJobs": [{"name": "workers"}]},
        rjobs=[mounting("workers", 2, ("data", "ckpt"))],
    )
    names = [c.name for c in volumes.desired_claims(js, volumes.policies(js))]
    assert names == ["ckpt-js-workers-0", "ckpt-js-workers-1", "data-js"]


def test_template_spec_is_a_copy() -> None:
    js = make([{"templates": [tpl("data")]}])
    desired = only(js)
    desired.object["spec"]["accessModes"].append("ReadWriteMany")
    assert desired.template.spec["accessModes"] == ["ReadWriteOnce"]
    assert js.raw["spec"]["volumeClaimPolicies"][0]["templates"][0]["spec"]["accessModes"] == [
        "ReadWriteOnce"
    ]


def test_init_container_mount_counts() -> None:
    js = make([{"templates": [tpl("data")]}], rjobs=[mounting("w", 1, init_mounts=("data",))])
    (policy,) = volumes.policies(js)
    assert volumes.targeted(policy, js) == ("w",)


def test_template_without_spec_and_metadata_extras() -> None:
    js = make(
        [
            {
                "templates": [
                    {
                        "metadata": {
                            "name": "data",
                            "namespace": "",
                            "labels": {"a": "1", api.JOBSET_NAME: "spoof"},
                            "annotations": {"note": "x"},
                        }
                    }
                ]
            }
        ]
    )
    desired = only(js)
    assert desired.object["spec"] == {}
    assert desired.object["metadata"]["labels"][api.JOBSET_NAME] == "js"  # ours win
    assert desired.object["metadata"]["labels"]["a"] == "1"
    assert desired.object["metadata"]["annotations"] == {
        "note": "x",
        OWNER_UID_ANNOTATION: "uid-js",
    }


LONG = "a" * 63


@pytest.mark.parametrize(
    ("vcp", "vp", "rjobs", "message"),
    [
        ({"x": 1}, None, None, "spec.volumeClaimPolicies must be a list"),
        (["x"], None, None, "spec.volumeClaimPolicies[0] must be an object"),
        ([{"templates": "x"}], None, None, "spec.volumeClaimPolicies[0].templates must be a list"),
        ([{"templates": ["x"]}], None, None, "spec.volumeClaimPolicies[0].templates[0] must be"),
        (
            [{"templates": [{"metadata": "x"}]}],
            None,
            None,
            "spec.volumeClaimPolicies[0].templates[0].metadata must be an object",
        ),
        (
            [{"templates": [{"spec": {}}]}],
            None,
            None,
            "spec.volumeClaimPolicies[0].templates[0].metadata.name is required",
        ),
        (
            [{"templates": [tpl("Data")]}],
            None,
            None,
            "templates[0].metadata.name 'Data' must be a DNS-1123 label",
        ),
        (
            [{"templates": [tpl(LONG + "b")]}],
            None,
            None,
            "must be a DNS-1123 label",
        ),
        (
            [{"templates": [{"metadata": {"name": "data", "namespace": "other"}}]}],
            None,
            None,
            "spec.volumeClaimPolicies[0].templates[0].metadata.namespace must not be set",
        ),
        (
            [{"templates": [{"metadata": {"name": "data"}, "spec": []}]}],
            None,
            None,
            "templates[0].spec must be an object",
        ),
        (
            [{"templates": [tpl("data", "ten gigs")]}],
            None,
            None,
            "templates[0].spec.resources.requests.storage: 'ten gigs' is not a valid quantity",
        ),
        (
            [{"templates": [{"metadata": {"name": "data", "labels": []}}]}],
            None,
            None,
            "templates[0].metadata.labels must be an object",
        ),
        (
            [{"templates": [{"metadata": {"name": "data", "annotations": {"a": 1}}}]}],
            None,
            None,
            "templates[0].metadata.annotations.a must be a string",
        ),
        (
            [{"templates": [tpl("data")], "retentionPolicy": "x"}],
            None,
            None,
            "spec.volumeClaimPolicies[0].retentionPolicy must be an object",
        ),
        (
            [{"templates": [tpl("data")], "retentionPolicy": {"whenDeleted": "Keep"}}],
            None,
            None,
            "retentionPolicy.whenDeleted must be Retain or Delete, got 'Keep'",
        ),
        (
            [{"templates": [tpl("data")], "retentionPolicy": {"whenScaled": "Never"}}],
            None,
            None,
            "retentionPolicy.whenScaled must be Retain or Delete",
        ),
        (
            [{"templates": [tpl("data")], "targetReplicatedJobs": "workers"}],
            None,
            None,
            "spec.volumeClaimPolicies[0].targetReplicatedJobs must be a list",
        ),
        (
            [{"templates": [tpl("data")], "targetReplicatedJobs": [3]}],
            None,
            None,
            "spec.volumeClaimPolicies[0].targetReplicatedJobs[0] must be a replicated job name",
        ),
        (
            [{"templates": [tpl("data")], "scope": "Pod"}],
            None,
            None,
            "spec.volumeClaimPolicies[0].scope: Pod scope is not supported yet",
        ),
        (
            [{"templates": [tpl("data")], "scope": "Node"}],
            None,
            None,
            "spec.volumeClaimPolicies[0].scope must be JobSet, Job or Pod, got 'Node'",
        ),
        (None, "x", None, "spec.volumePolicy must be an object"),
        (
            None,
            {"volumeClaimTemplates": [tpl("data")], "replicatedJobs": "workers"},
            None,
            "spec.volumePolicy.replicatedJobs must be a list",
        ),
        (
            None,
            {"volumeClaimTemplates": [tpl("data")], "replicatedJobs": [{}]},
            None,
            "spec.volumePolicy.replicatedJobs[0].name is required",
        ),
        (
            None,
            {"volumeClaimTemplates": [{"metadata": {}}]},
            None,
            "spec.volumePolicy.volumeClaimTemplates[0].metadata.name is required",
        ),
        (
            [{"templates": [tpl("data")]}],
            {"volumeClaimTemplates": [tpl("data")]},
            None,
            "template names must be unique across volumeClaimPolicies and volumePolicy, "
            "repeated: data",
        ),
        (
            [{"templates": [tpl("data"), tpl("data")]}],
            None,
            None,
            "repeated: data",
        ),
        (
            [{"templates": [tpl("data")], "targetReplicatedJobs": ["workers", "ghost"]}],
            None,
            None,
            "spec.volumeClaimPolicies[0].targetReplicatedJobs: 'ghost' is not a replicated job",
        ),
        (
            None,
            {"volumeClaimTemplates": [tpl("data")], "replicatedJobs": [{"name": "ghost"}]},
            None,
            "spec.volumePolicy.replicatedJobs: 'ghost' is not a replicated job",
        ),
        (
            [{"templates": [tpl("data"), tpl("unused")]}],
            None,
            None,
            "spec.volumeClaimPolicies[0].templates[1]: volume claim template 'unused' is not "
            "mounted by any replicated job it targets",
        ),
        (
            None,
            {"volumeClaimTemplates": [tpl("other")]},
            None,
            "spec.volumePolicy.volumeClaimTemplates[0]: volume claim template 'other' is not "
            "mounted",
        ),
        (
            [{"templates": [tpl("data")], "targetReplicatedJobs": []}],
            None,
            None,
            "'data' is not mounted by any replicated job it targets",
        ),
        (
            [{"templates": [tpl("data")], "targetReplicatedJobs": ["leader"]}],
            None,
            [mounting("leader", 1, ("data",)), mounting("workers", 1, ("data",))],
            "spec.replicatedJobs[1]: replicated job 'workers' mounts 'data', but "
            "spec.volumeClaimPolicies[0].targetReplicatedJobs does not include it",
        ),
        (
            None,
            {"volumeClaimTemplates": [tpl("data")], "replicatedJobs": [{"name": "leader"}]},
            [mounting("leader", 1, ("data",)), mounting("workers", 1, ("data",))],
            "spec.volumePolicy.replicatedJobs does not include it",
        ),
        (
            [{"templates": [tpl("data")]}],
            None,
            [mounting("workers", 1, ("data",), volumes_=("data",))],
            "spec.replicatedJobs[0].template.spec.template.spec.volumes: replicated job "
            "'workers' defines a volume named 'data'",
        ),
        (
            [{"templates": [tpl("data")], "scope": "Job"}],
            None,
            [mounting("W_1", 1, ("data",))],
            "claim name 'data-js-w_1-0' must be a DNS-1123 subdomain",
        ),
        (
            [{"templates": [tpl("data")], "scope": "Job"}],
            None,
            [mounting("A", 1, ("data",)), mounting("a", 1, ("data",))],
            "claim name 'data-js-a-0' of template 'data' collides",
        ),
    ],
)
def test_invalid_policies(vcp: Any, vp: Any, rjobs: list[Obj] | None, message: str) -> None:
    js = make(vcp, vp, rjobs)
    with pytest.raises(InvalidJobSet) as err:
        volumes.policies(js)
    assert message in str(err.value)


def test_untargeted_replicated_job_may_mount_its_own_volume_of_a_template_name() -> None:
    """Its pods mount the volume their template defines (an emptyDir here), so they start: the
    replicated job is not given the claim, and the JobSet is valid (issue 12, item 9)."""
    js = make(
        [{"templates": [tpl("data")], "targetReplicatedJobs": ["leader"]}],
        None,
        [mounting("leader", 1, ("data",)), mounting("workers", 2, ("data",), volumes_=("data",))],
    )
    found = volumes.policies(js)
    assert volumes.targeted(found[0], js) == ("leader",)
    assert volumes.claims_for_job(js, found, "workers", 1) == {}
    assert volumes.claims_for_job(js, found, "leader", 0) == {"data": "data-js"}


def test_claim_name_too_long() -> None:
    js = make([{"templates": [tpl(LONG)]}], rjobs=[mounting("w", 1, (LONG,))], name="j" * 190)
    with pytest.raises(InvalidJobSet, match="at most 253 characters"):
        volumes.policies(js)
    ok = make([{"templates": [tpl(LONG)]}], rjobs=[mounting("w", 1, (LONG,))], name="j" * 189)
    assert len(only(ok).name) == 253


def test_job_scope_name_length_checks_last_index() -> None:
    spec = [{"templates": [tpl("d")], "scope": "Job"}]
    # d-<jobset>-w-9 is 253 characters; index 10 makes it 254.
    name = "j" * (253 - len("d--w-9"))
    assert volumes.policies(make(spec, rjobs=[mounting("w", 10, ("d",))], name=name))
    with pytest.raises(InvalidJobSet, match=r"claim name .* must be a DNS-1123 subdomain"):
        volumes.policies(make(spec, rjobs=[mounting("w", 11, ("d",))], name=name))


# ----------------------------------------------------------------------------- names, targets


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("data", "js", "JobSet"), "data-js"),
        (("data", "js", "JobSet", "workers", 3), "data-js"),
        (("data", "js", "Job", "workers", 3), "data-js-workers-3"),
        (("model", "volume-sample", "Job", "A", 0), "model-volume-sample-a-0"),
    ],
)
def test_claim_name(args: tuple[Any, ...], expected: str) -> None:
    assert volumes.claim_name(*args) == expected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("data", "js", "Job"), "needs a replicated job and index"),
        (("data", "js", "Job", "w"), "needs a replicated job and index"),
        (("data", "js", "Pod", "w", 0), "Pod scope is not supported yet"),
    ],
)
def test_claim_name_errors(args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(InvalidJobSet, match=message):
        volumes.claim_name(*args)


def test_targeted_explicit_in_spec_order_and_implicit() -> None:
    rjobs = [mounting("a", 1, ("x",)), mounting("b", 1, ("y",)), mounting("c", 1, ("x", "y"))]
    js = make(
        [
            {"templates": [tpl("x")], "targetReplicatedJobs": ["c", "a"]},
            {"templates": [tpl("y")]},
        ],
        rjobs=rjobs,
    )
    explicit, implicit = volumes.policies(js)
    assert volumes.targeted(explicit, js) == ("a", "c")
    assert volumes.targeted(implicit, js) == ("b", "c")
    stray = VolumePolicy((), Retention(), ("ghost", "b"), "JobSet")
    assert volumes.targeted(stray, js) == ("b",)


def test_implicit_target_gets_every_template_of_the_policy() -> None:
    rjobs = [mounting("a", 1, ("x",)), mounting("b", 1, ("y",))]
    js = make([{"templates": [tpl("x"), tpl("y")], "scope": "Job"}], rjobs=rjobs)
    policies = volumes.policies(js)
    assert volumes.claims_for_job(js, policies, "a", 0) == {"x": "x-js-a-0", "y": "y-js-a-0"}
    assert len(volumes.desired_claims(js, policies)) == 4


def test_job_scope_one_claim_per_job_and_none_for_zero_replicas() -> None:
    rjobs = [mounting("a", 3, ("x",)), mounting("b", 0, ("x",))]
    js = make([{"templates": [tpl("x")], "scope": "Job"}], rjobs=rjobs)
    desired = volumes.desired_claims(js, volumes.policies(js))
    assert [(c.name, c.replicated_job, c.job_index) for c in desired] == [
        ("x-js-a-0", "a", 0),
        ("x-js-a-1", "a", 1),
        ("x-js-a-2", "a", 2),
    ]


def test_owner_reference_only_when_deleted_with_the_jobset() -> None:
    spec = {"templates": [tpl("data")], "retentionPolicy": {"whenDeleted": "Retain"}}
    assert "ownerReferences" not in only(make([spec])).object["metadata"]
    assert only(make([{"templates": [tpl("data")]}])).object["metadata"]["ownerReferences"] == [
        owner()
    ]


def test_claims_and_policies_are_frozen_values() -> None:
    # Computed twice from equal specs: distinct objects, equal as values, one element in a set
    # (hashable although templates hold dicts); a different retention is a different value.
    desired = only(make([{"templates": [tpl("data")]}]))
    again = only(make([{"templates": [tpl("data")]}]))
    assert desired is not again and desired.policy is not again.policy
    assert desired == again and hash(desired) == hash(again)
    assert {desired, again} == {desired} and {desired.policy, again.policy} == {desired.policy}
    retained = only(
        make([{"templates": [tpl("data")], "retentionPolicy": {"whenScaled": "Delete"}}])
    )
    assert retained != desired and retained.policy != desired.policy
    assert len({desired, retained}) == 2
    with pytest.raises(AttributeError):
        desired.name = "other"  # type: ignore[misc]


# ----------------------------------------------------------------------------- mounting


def test_mount_adds_volume_keeps_users_and_does_not_mutate() -> None:
    rjobs = [mounting("workers", 1, ("data", "scratch"), volumes_=("scratch",))]
    js = make([{"templates": [tpl("data")]}], rjobs=rjobs)
    policies = volumes.policies(js)
    job = construct.desired_job(js, js.replicated_jobs[0], 0)
    before = copy.deepcopy(job)
    mounted = volumes.mount(job, js, policies, "workers", 0)
    assert job == before
    assert mounted["spec"]["template"]["spec"]["volumes"] == [
        {"name": "scratch", "emptyDir": {}},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-js"}},
    ]
    assert volumes.mount(mounted, js, policies, "workers", 0) == mounted


def test_mount_replaces_a_same_named_volume_in_place() -> None:
    js = make([{"templates": [tpl("data")]}])
    job = {"spec": {"template": {"spec": {"volumes": [{"name": "data", "emptyDir": {}}, "junk"]}}}}
    mounted = volumes.mount(job, js, volumes.policies(js), "workers", 0)
    assert mounted["spec"]["template"]["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-js"}},
        "junk",
    ]


@pytest.mark.parametrize("job", [{}, {"spec": None}, {"spec": {"template": []}}])
def test_mount_partial_job(job: Obj) -> None:
    js = make([{"templates": [tpl("data")]}])
    mounted = volumes.mount(job, js, volumes.policies(js), "workers", 0)
    assert mounted["spec"]["template"]["spec"]["volumes"] == [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data-js"}}
    ]


def test_mount_untargeted_is_an_equal_copy() -> None:
    rjobs = [mounting("workers", 1, ("data",)), mounting("other", 1)]
    js = make([{"templates": [tpl("data")]}], rjobs=rjobs)
    job = construct.desired_job(js, js.replicated_jobs[1], 0)
    mounted = volumes.mount(job, js, volumes.policies(js), "other", 0)
    assert mounted == job
    assert mounted is not job


# ----------------------------------------------------------------------------- quantities


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", Decimal(0)),
        ("10", Decimal(10)),
        ("1.5", Decimal("1.5")),
        (".5", Decimal("0.5")),
        ("5.", Decimal(5)),
        ("+3", Decimal(3)),
        ("-3", Decimal(-3)),
        ("1Ki", Decimal(1024)),
        ("1Mi", Decimal(2**20)),
        ("10Gi", Decimal(10 * 2**30)),
        ("1.5Gi", Decimal(3 * 2**29)),
        ("1Ti", Decimal(2**40)),
        ("1Pi", Decimal(2**50)),
        ("1Ei", Decimal(2**60)),
        ("1k", Decimal(1000)),
        ("1M", Decimal(10**6)),
        ("1G", Decimal(10**9)),
        ("2T", Decimal(2 * 10**12)),
        ("1P", Decimal(10**15)),
        ("1E", Decimal(10**18)),
        ("250m", Decimal("0.25")),
        ("5u", Decimal("0.000005")),
        ("7n", Decimal("0.000000007")),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("1.5e-3", Decimal("0.0015")),
        ("2e+2", Decimal(200)),
        # Kubernetes accepts any int32 exponent (admission's isQuantity agrees).
        ("1e1000", Decimal("1e1000")),
    ],
)
def test_parse_quantity(text: str, value: Decimal) -> None:
    assert volumes.parse_quantity(text) == value


@pytest.mark.parametrize(
    "text",
    ["", "Gi", "1 Gi", "1gi", "1KI", "1e", "1.2.3", "--1", "1Gi ", "abc", "1e2147483648", "1Zi"],
)
def test_parse_quantity_rejects(text: str) -> None:
    with pytest.raises(InvalidJobSet, match="quantity"):
        volumes.parse_quantity(text)


def test_parse_quantity_rejects_non_strings() -> None:
    with pytest.raises(InvalidJobSet):
        volumes.parse_quantity(5)  # type: ignore[arg-type]


def test_numeric_storage_in_template_is_accepted() -> None:
    js = make([{"templates": [tpl("data", 1073741824)]}])  # type: ignore[arg-type]
    desired = only(js)
    assert volumes.compatible(claim("data-js")["spec"], desired.template.spec) == (True, "")


# ----------------------------------------------------------------------------- compatibility

BASE: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}


def spec_with(**changes: Any) -> Obj:
    result = copy.deepcopy(BASE)
    for key, value in changes.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


@pytest.mark.parametrize(
    ("existing", "template", "ok", "reason"),
    [
        (BASE, BASE, True, ""),
        (spec_with(accessModes=["ReadWriteOnce", "ReadOnlyMany"]), BASE, False, "access modes"),
        (spec_with(accessModes=["ReadWriteMany"]), BASE, False, "access modes"),
        (
            spec_with(accessModes=["ReadOnlyMany", "ReadWriteOnce"]),
            spec_with(accessModes=["ReadWriteOnce", "ReadOnlyMany"]),
            True,
            "",
        ),
        (BASE, spec_with(accessModes=None), True, ""),
        (spec_with(resources={"requests": {"storage": "20Gi"}}), BASE, True, ""),
        (spec_with(resources={"requests": {"storage": "10737418240"}}), BASE, True, ""),
        (spec_with(resources={"requests": {"storage": "5Gi"}}), BASE, False, "less than"),
        (spec_with(resources={"requests": {"storage": "10G"}}), BASE, False, "less than"),
        (spec_with(resources=None), BASE, False, "no storage request"),
        (spec_with(resources=None), spec_with(resources=None), True, ""),
        (BASE, spec_with(storageClassName="fast"), False, "storage class"),
        (spec_with(storageClassName="slow"), spec_with(storageClassName="fast"), False, "'slow'"),
        (spec_with(storageClassName="fast"), spec_with(storageClassName="fast"), True, ""),
        (spec_with(storageClassName="standard"), BASE, True, ""),  # defaulted class
        (BASE, spec_with(storageClassName=""), True, ""),
        (spec_with(volumeMode="Block"), spec_with(volumeMode="Filesystem"), False, "volume mode"),
        (BASE, spec_with(volumeMode="Filesystem"), True, ""),
        (spec_with(volumeMode="Filesystem"), BASE, True, ""),  # defaulted mode
        (BASE, spec_with(selector={"matchLabels": {"a": "b"}}), False, "selector"),
        (
            spec_with(selector={"matchLabels": {"a": "b"}, "matchExpressions": []}),
            spec_with(selector={"matchLabels": {"a": "b"}}),
            True,
            "",
        ),
        (spec_with(selector={"matchLabels": {"a": "c"}}), BASE, True, ""),
        (BASE, spec_with(dataSource={"kind": "VolumeSnapshot", "name": "s"}), False, "dataSource"),
        (
            spec_with(
                dataSource={"kind": "VolumeSnapshot", "name": "s", "apiGroup": "x"},
                dataSourceRef={"kind": "VolumeSnapshot", "name": "s", "apiGroup": "x"},
            ),
            spec_with(dataSource={"kind": "VolumeSnapshot", "name": "s", "apiGroup": "x"}),
            True,
            "",
        ),
        (
            spec_with(dataSourceRef={"kind": "VolumeSnapshot", "name": "t"}),
            spec_with(dataSourceRef={"kind": "VolumeSnapshot", "name": "s"}),
            False,
            "dataSourceRef",
        ),
        ({}, {}, True, ""),
    ],
)
def test_compatible(existing: Obj, template: Obj, ok: bool, reason: str) -> None:
    result, why = volumes.compatible(existing, template)
    assert result is ok
    assert reason in why
    assert bool(why) is not ok


def test_compatible_tolerates_garbage() -> None:
    assert volumes.compatible(None, BASE)[0] is False  # type: ignore[arg-type]
    assert volumes.compatible(spec_with(resources={"requests": {"storage": "lots"}}), BASE) == (
        False,
        "the claim has no storage request; the template asks for 10Gi",
    )


# What Retain writes on a claim it keeps: the uid of the JobSet it was retained from.
RETAINED: Obj = {RETAINED_FROM_ANNOTATION: "uid-old"}


def bug_1307_claim(js: JobSet) -> Obj:
    """A claim retained from an earlier JobSet of this name, bound by the binder."""
    spec: Obj = copy.deepcopy(BASE)
    spec.update(volumeName="pvc-0f6c7a2e", storageClassName="standard", volumeMode="Filesystem")
    return claim(
        "data-js",
        uid="uid-old",
        spec=spec,
        annotations={RETAINED_FROM_ANNOTATION: "uid-old", "pv.kubernetes.io/bind-completed": "yes"},
        refs=[],
    )


def test_bug_1307_retained_bound_claim_is_adopted() -> None:
    retain = {"whenDeleted": "Retain"}
    js = make([{"templates": [tpl("data", "10Gi")], "retentionPolicy": retain}])
    desired = only(js)
    existing = bug_1307_claim(js)
    assert volumes.classify(existing, desired, js) == "adoptable"
    assert volumes.conflict_reason(existing, desired, js) == ""
    patch = volumes.adoption_patch(existing, desired, js)
    assert patch == {
        "metadata": {
            "annotations": {OWNER_UID_ANNOTATION: "uid-js", RETAINED_FROM_ANNOTATION: None}
        }
    }
    adopted = merge_patch(existing, patch)
    assert volumes.classify(adopted, desired, js) == "owned"
    assert volumes.update_patch(adopted, desired) is None
    assert adopted["spec"]["volumeName"] == "pvc-0f6c7a2e"


@pytest.mark.parametrize(
    ("existing", "expected", "reason"),
    [
        (claim("data-js"), "owned", ""),
        (claim("data-js", spec={"accessModes": ["ReadWriteMany"]}), "owned", ""),
        (claim("data-js", uid="uid-old", annotations=RETAINED), "adoptable", ""),
        (claim("data-js", uid=None, annotations=RETAINED), "adoptable", ""),
        (
            claim("data-js", uid="uid-old", refs=[owner("uid-old")], annotations=RETAINED),
            "adoptable",
            "",
        ),
        # The name label alone (copied by a chart or an `-o yaml` round trip) proves nothing.
        (claim("data-js", uid=None), "conflict", "no proof of ownership"),
        (claim("data-js", uid="uid-old"), "conflict", "no proof of ownership"),
        (claim("data-js", uid="uid-old", refs=[owner("uid-old")]), "conflict", "no proof"),
        (claim("data-js", annotations={RETAINED_FROM_ANNOTATION: ""}), "owned", ""),
        (claim("data-js", uid=None, annotations={RETAINED_FROM_ANNOTATION: ""}), "conflict", "no"),
        (claim("data-js", jobset=None), "conflict", "lacks the label"),
        (claim("data-js", jobset="other"), "conflict", "not made for JobSet js"),
        ({"metadata": {"name": "data-js"}}, "conflict", "lacks the label"),
        ({}, "conflict", "lacks the label"),
        (
            claim(
                "data-js",
                uid="uid-old",
                refs=[{"kind": "StatefulSet", "name": "db", "uid": "u", "controller": True}],
                annotations=RETAINED,
            ),
            "conflict",
            "controlled by StatefulSet db",
        ),
        (
            claim(
                "data-js",
                uid="uid-old",
                spec={"accessModes": ["ReadWriteMany"]},
                annotations=RETAINED,
            ),
            "conflict",
            "does not match template data: access modes",
        ),
    ],
)
def test_classify(existing: Obj, expected: str, reason: str) -> None:
    js = make([{"templates": [tpl("data")]}])
    desired = only(js)
    assert volumes.classify(existing, desired, js) == expected
    message = volumes.conflict_reason(existing, desired, js)
    assert reason in message
    assert bool(message) is (expected == "conflict")


def test_adoption_patch_with_delete_policy_replaces_stale_owner() -> None:
    js = make([{"templates": [tpl("data")], "retentionPolicy": {"whenDeleted": "Delete"}}])
    desired = only(js)
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "c"}
    existing = claim("data-js", uid="uid-old", refs=[other, owner("uid-old")])
    existing["metadata"]["labels"].pop(CLAIM_SCOPE_LABEL)
    patch = volumes.adoption_patch(existing, desired, js)
    assert patch == {
        "metadata": {
            "annotations": {OWNER_UID_ANNOTATION: "uid-js", RETAINED_FROM_ANNOTATION: None},
            "labels": {CLAIM_SCOPE_LABEL: "JobSet"},
            "ownerReferences": [other, owner()],
        }
    }
    adopted = merge_patch(existing, patch)
    assert volumes.update_patch(adopted, desired) is None


def test_adoption_patch_with_retain_policy_drops_stale_owner() -> None:
    js = make([{"templates": [tpl("data")], "retentionPolicy": {"whenDeleted": "Retain"}}])
    desired = only(js)
    existing = claim("data-js", uid="uid-old", refs=[owner("uid-old")])
    patch = volumes.adoption_patch(existing, desired, js)
    assert patch["metadata"]["ownerReferences"] == []


def test_retain_patch() -> None:
    js = make([{"templates": [tpl("data")]}])
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "c"}
    existing = claim("data-js", refs=[owner(), other])
    assert volumes.retain_patch(existing, js) == {
        "metadata": {
            "annotations": {RETAINED_FROM_ANNOTATION: "uid-js"},
            "ownerReferences": [other],
        }
    }
    lone = claim("data-js", refs=[owner()])
    patch = volumes.retain_patch(lone, js)
    assert patch["metadata"]["ownerReferences"] is None
    kept = merge_patch(lone, patch)
    assert "ownerReferences" not in kept["metadata"]
    assert kept["metadata"]["labels"][api.JOBSET_NAME] == "js"


# ----------------------------------------------------------------------------- update


def observed(desired: DesiredClaim, **meta: Any) -> Obj:
    """The desired claim as the API server returns it: defaults, binder fields, extra metadata."""
    obj = copy.deepcopy(desired.object)
    obj["metadata"].update(uid="pvc-uid", resourceVersion="7", **meta)
    obj["metadata"]["labels"]["added-by-someone"] = "x"
    obj["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] = "yes"
    obj["spec"].setdefault("storageClassName", "standard")
    obj["spec"].setdefault("volumeMode", "Filesystem")
    obj["spec"]["volumeName"] = "pvc-123"
    obj["status"] = {"phase": "Bound", "capacity": {"storage": "1Gi"}}
    return obj


@pytest.mark.parametrize("when_deleted", ["Delete", "Retain"])
def test_update_patch_none_at_steady_state(when_deleted: str) -> None:
    js = make([{"templates": [tpl("data")], "retentionPolicy": {"whenDeleted": when_deleted}}])
    desired = only(js)
    assert volumes.update_patch(desired.object, desired) is None
    assert volumes.update_patch(observed(desired), desired) is None


def test_update_patch_raises_storage_never_lowers() -> None:
    desired = only(make([{"templates": [tpl("data", "2Gi")]}]))
    small = observed(desired)
    small["spec"]["resources"]["requests"]["storage"] = "1Gi"
    assert volumes.update_patch(small, desired) == {
        "spec": {"resources": {"requests": {"storage": "2Gi"}}}
    }
    big = observed(desired)
    big["spec"]["resources"]["requests"]["storage"] = "3Gi"
    assert volumes.update_patch(big, desired) is None
    same = observed(desired)
    same["spec"]["resources"]["requests"]["storage"] = "2048Mi"
    assert volumes.update_patch(same, desired) is None


def test_update_patch_metadata() -> None:
    template = tpl("data")
    template["metadata"].update(labels={"team": "ml"}, annotations={"cost": "a"})
    desired = only(make([{"templates": [template]}]))
    existing = observed(desired)
    existing["metadata"]["labels"]["team"] = "old"
    del existing["metadata"]["annotations"]["cost"]
    existing["metadata"]["ownerReferences"] = []
    assert volumes.update_patch(existing, desired) == {
        "metadata": {
            "labels": {"team": "ml"},
            "annotations": {"cost": "a"},
            "ownerReferences": [owner()],
        }
    }


def test_update_patch_removes_owner_reference_for_retain() -> None:
    desired = only(
        make([{"templates": [tpl("data")], "retentionPolicy": {"whenDeleted": "Retain"}}])
    )
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "c"}
    existing = observed(desired, ownerReferences=[owner(), other])
    assert volumes.update_patch(existing, desired) == {"metadata": {"ownerReferences": [other]}}
    lone = observed(desired, ownerReferences=[owner()])
    assert volumes.update_patch(lone, desired) == {"metadata": {"ownerReferences": None}}


def test_update_patch_tolerates_partial_claim() -> None:
    desired = only(make([{"templates": [tpl("data")]}]))
    patch = volumes.update_patch({}, desired)
    assert patch is not None
    assert patch["metadata"]["ownerReferences"] == [owner()]
    assert "spec" not in patch  # unknown current size: no expansion guess


# ----------------------------------------------------------------------------- readiness


def test_usable_and_missing_claims() -> None:
    js = make(
        [{"templates": [tpl("ckpt")], "scope": "Job"}, {"templates": [tpl("data")]}],
        rjobs=[mounting("workers", 2, ("ckpt", "data")), mounting("idle", 1)],
    )
    policies = volumes.policies(js)
    desired = volumes.desired_claims(js, policies)
    existing = [
        claim("ckpt-js-workers-0", template="ckpt", scope="Job", rjob_name="workers", index=0),
        claim("ckpt-js-workers-1", template="ckpt", deleting=True),
        claim("data-js", uid="uid-old"),
        claim("unrelated"),
    ]
    usable = volumes.usable_claims(js, desired, existing)
    assert usable == {"ckpt-js-workers-0"}
    assert volumes.missing_claims(js, policies, "workers", 0, usable) == ["data-js"]
    assert volumes.missing_claims(js, policies, "workers", 1, usable) == [
        "ckpt-js-workers-1",
        "data-js",
    ]
    assert volumes.missing_claims(js, policies, "idle", 0, set()) == []
    everything = {c.name for c in desired}
    assert volumes.missing_claims(js, policies, "workers", 1, everything) == []


# ----------------------------------------------------------------------------- retention


def retention_jobset(retention: Obj, replicas: int = 2, **kw: Any) -> JobSet:
    return make(
        [{"templates": [tpl("ckpt")], "scope": "Job", "retentionPolicy": retention}],
        rjobs=[mounting("workers", replicas, ("ckpt",))],
        **kw,
    )


def ckpt(index: int, **kw: Any) -> Obj:
    kw.setdefault("template", "ckpt")
    return claim(f"ckpt-js-workers-{index}", scope="Job", rjob_name="workers", index=index, **kw)


@pytest.mark.parametrize(
    ("retention", "deleting", "terminal", "expected"),
    [
        ({}, False, "", []),
        ({}, True, "", ["ckpt-js-workers-0", "ckpt-js-workers-1"]),
        ({"whenDeleted": "Retain"}, True, "", []),
        ({}, False, "Completed", []),
        (
            {"whenCompleted": "Delete"},
            False,
            "Completed",
            ["ckpt-js-workers-0", "ckpt-js-workers-1"],
        ),
        ({"whenCompleted": "Delete"}, False, "Failed", []),
        ({"whenFailed": "Delete"}, False, "Failed", ["ckpt-js-workers-0", "ckpt-js-workers-1"]),
        ({"whenFailed": "Delete"}, False, "Completed", []),
        (
            {"whenDeleted": "Retain", "whenCompleted": "Delete"},
            True,
            "Completed",
            ["ckpt-js-workers-0", "ckpt-js-workers-1"],
        ),
    ],
)
def test_claims_to_delete(
    retention: Obj, deleting: bool, terminal: str, expected: list[str]
) -> None:
    js = retention_jobset(retention)
    claims = [ckpt(0), ckpt(1), ckpt(1, uid="uid-other"), ckpt(0, jobset="other"), {}]
    claims[2]["metadata"]["name"] = "foreign-1"
    claims[3]["metadata"]["name"] = "foreign-2"
    result = volumes.claims_to_delete(
        js, volumes.policies(js), claims, deleting=deleting, terminal_state=terminal
    )
    assert result == expected


@pytest.mark.parametrize(
    ("when_scaled", "replicas", "expected"),
    [
        ("Delete", 1, ["ckpt-js-workers-1", "ckpt-js-workers-2"]),
        ("Delete", 0, ["ckpt-js-workers-0", "ckpt-js-workers-1", "ckpt-js-workers-2"]),
        ("Delete", 3, []),
        ("Retain", 1, []),
    ],
)
def test_claims_to_delete_when_scaled(when_scaled: str, replicas: int, expected: list[str]) -> None:
    js = retention_jobset({"whenScaled": when_scaled}, replicas)
    claims = [ckpt(0), ckpt(1), ckpt(2)]
    result = volumes.claims_to_delete(
        js, volumes.policies(js), claims, deleting=False, terminal_state=""
    )
    assert result == expected


def test_when_scaled_reads_labels_and_skips_odd_claims() -> None:
    js = retention_jobset({"whenScaled": "Delete"}, 1)
    policies = volumes.policies(js)
    gone_rjob = ckpt(0)
    gone_rjob["metadata"]["labels"][api.REPLICATED_JOB_NAME] = "removed"
    bad_index = ckpt(5)
    bad_index["metadata"]["labels"][api.JOB_INDEX] = "five"
    no_index = ckpt(6)
    del no_index["metadata"]["labels"][api.JOB_INDEX]
    terminating = ckpt(3, deleting=True)
    unknown = ckpt(4, template="other")
    claims = [gone_rjob, bad_index, no_index, terminating, unknown]
    assert volumes.claims_to_delete(js, policies, claims, deleting=False, terminal_state="") == [
        "ckpt-js-workers-0"
    ]


def test_when_scaled_ignores_jobset_scope() -> None:
    js = make([{"templates": [tpl("data")], "retentionPolicy": {"whenScaled": "Delete"}}])
    existing = [claim("data-js", rjob_name="workers", index=9, scope="JobSet")]
    policies = volumes.policies(js)
    assert volumes.claims_to_delete(js, policies, existing, deleting=False, terminal_state="") == []


def test_claims_to_retain() -> None:
    js = retention_jobset({"whenDeleted": "Retain"}, deleting=True)
    policies = volumes.policies(js)
    fresh = ckpt(0, refs=[owner()])
    unmarked = ckpt(1)
    done = ckpt(2, annotations={RETAINED_FROM_ANNOTATION: "uid-js"})
    foreign = ckpt(3, uid="uid-other")
    claims = [fresh, unmarked, done, foreign]
    assert volumes.claims_to_retain(js, policies, claims, deleting=False) == []
    todo = volumes.claims_to_retain(js, policies, claims, deleting=True)
    assert todo == ["ckpt-js-workers-0", "ckpt-js-workers-1"]
    patched = [merge_patch(c, volumes.retain_patch(c, js)) for c in claims[:2]] + claims[2:]
    assert volumes.claims_to_retain(js, policies, patched, deleting=True) == []
    assert volumes.claims_to_delete(js, policies, patched, deleting=True, terminal_state="") == []


def test_claims_to_retain_skips_delete_policies_and_deleted_claims() -> None:
    js = retention_jobset({"whenDeleted": "Delete"}, deleting=True)
    assert volumes.claims_to_retain(js, volumes.policies(js), [ckpt(0)], deleting=True) == []
    both = retention_jobset({"whenDeleted": "Retain", "whenCompleted": "Delete"}, deleting=True)
    policies = volumes.policies(both)
    assert volumes.claims_to_retain(both, policies, [ckpt(0)], deleting=True) == [
        "ckpt-js-workers-0"
    ]
    assert (
        volumes.claims_to_retain(
            both, policies, [ckpt(0)], deleting=True, terminal_state="Completed"
        )
        == []
    )
    assert volumes.claims_to_retain(both, policies, [ckpt(0, template="x")], deleting=True) == []


# ----------------------------------------------------------------------------- status


def status_jobset() -> JobSet:
    return make(
        [
            {"templates": [tpl("ckpt")], "scope": "Job"},
            {"templates": [tpl("data", storageClassName="wffc")]},
        ],
        rjobs=[mounting("workers", 4, ("ckpt", "data"))],
    )


def test_volume_status_counts() -> None:
    js = status_jobset()
    existing = [
        ckpt(0, phase="Bound"),
        ckpt(1, phase="Pending"),
        ckpt(2, phase="Lost"),
        ckpt(3, uid="uid-old", annotations=RETAINED),  # adoptable: not counted as existing yet
        ckpt(7),  # not desired
        claim("data-js", jobset="someone-else"),
    ]
    assert volumes.volume_status(js, volumes.policies(js), existing) == [
        {
            "name": "ckpt",
            "scope": "Job",
            "desired": 4,
            "existing": 3,
            "bound": 1,
            "pending": 1,
            "lost": 1,
            "conflicts": 0,
        },
        {
            "name": "data",
            "scope": "JobSet",
            "desired": 1,
            "existing": 0,
            "bound": 0,
            "pending": 0,
            "lost": 0,
            "conflicts": 1,
            "claimName": "data-js",
        },
    ]


def test_volume_status_without_policies() -> None:
    js = make_jobset()
    assert volumes.volume_status(js, (), []) == []


def bound_all(js: JobSet) -> list[Obj]:
    return [ckpt(i) for i in range(4)] + [
        claim("data-js", spec={"storageClassName": "wffc"}, phase="Bound")
    ]


@pytest.mark.parametrize(
    ("change", "ready", "reason", "fragment"),
    [
        (lambda cs: cs, True, "ClaimsBound", "all 5 claims are bound"),
        (
            lambda cs: [
                *cs[:4],
                claim("data-js", spec={"storageClassName": "wffc"}, phase="Pending"),
            ],
            True,
            "WaitingForFirstConsumer",
            "1 bind when their first pod is scheduled",
        ),
        (
            lambda cs: [
                *cs[:4],
                claim(
                    "data-js",
                    spec={"storageClassName": "wffc"},
                    phase="Pending",
                    annotations={"volume.kubernetes.io/selected-node": "n1"},
                ),
            ],
            False,
            "ClaimsPending",
            "1 of 5 claims are waiting",
        ),
        (
            lambda cs: [
                *cs[:4],
                claim("data-js", spec={"storageClassName": "slow"}, phase="Pending"),
            ],
            False,
            "ClaimsPending",
            "data-js",
        ),
        (lambda cs: [*cs[:4], claim("data-js", phase=None)], False, "ClaimsPending", "data-js"),
        (lambda cs: cs[1:], False, "ClaimsNotCreated", "1 of 5 claims are not created"),
        (
            lambda cs: [ckpt(0, deleting=True), *cs[1:]],
            False,
            "ClaimsNotCreated",
            "ckpt-js-workers-0",
        ),
        (
            lambda cs: [ckpt(0, uid="uid-old", annotations=RETAINED), *cs[1:]],
            False,
            "ClaimsNotCreated",
            "ckpt-js-workers-0",
        ),
        (lambda cs: [ckpt(0, phase="Lost"), *cs[1:]], False, "ClaimsLost", "ckpt-js-workers-0"),
        (
            lambda cs: [ckpt(0, jobset="other"), ckpt(1, phase="Lost"), *cs[2:]],
            False,
            "ClaimConflict",
            "1 of 5 claims exist but are not this JobSet's",
        ),
        (lambda cs: [], False, "ClaimsNotCreated", "5 of 5 claims"),
    ],
)
def test_volumes_ready(change: Any, ready: bool, reason: str, fragment: str) -> None:
    js = status_jobset()
    result = volumes.volumes_ready(js, volumes.policies(js), change(bound_all(js)), {"wffc"})
    assert result[:2] == (ready, reason)
    assert fragment in result[2]


@pytest.mark.parametrize(
    ("state", "when", "claims", "reason", "fragment"),
    [
        # Completed and whenCompleted: Delete deleted the Job-scope claims: released, not missing.
        ("Completed", {"whenCompleted": "Delete"}, "data", "ClaimsReleased", "4 of 5 claims"),
        # Being deleted (pvc-protection keeps them while pods use them): released too.
        ("Completed", {"whenCompleted": "Delete"}, "deleting", "ClaimsReleased", "once the JobSet"),
        ("Failed", {"whenFailed": "Delete"}, "data", "ClaimsReleased", "was Failed"),
        # Retention did not ask for it: a missing claim is missing.
        ("Failed", {"whenCompleted": "Delete"}, "data", "ClaimsNotCreated", "4 of 5"),
        ("", {"whenCompleted": "Delete"}, "data", "ClaimsNotCreated", "4 of 5"),
        # A claim missing for another reason is reported first.
        ("Completed", {"whenCompleted": "Delete"}, "none", "ClaimsNotCreated", "1 of 5"),
    ],
)
def test_volumes_ready_after_retention_released_claims(
    state: str, when: Obj, claims: str, reason: str, fragment: str
) -> None:
    js = make(
        [
            {"templates": [tpl("ckpt")], "scope": "Job", "retentionPolicy": when},
            {"templates": [tpl("data", storageClassName="wffc")]},
        ],
        rjobs=[mounting("workers", 4, ("ckpt", "data"))],
        terminal_state=state or None,
    )
    existing = {
        "data": [claim("data-js", spec={"storageClassName": "wffc"})],
        "deleting": [ckpt(i, deleting=True) for i in range(4)]
        + [claim("data-js", spec={"storageClassName": "wffc"})],
        "none": [],
    }[claims]
    ready, got, message = volumes.volumes_ready(js, volumes.policies(js), existing, {"wffc"})
    assert (ready, got) == (False, reason), message
    assert fragment in message


def test_volumes_ready_lists_a_few_names() -> None:
    js = make(
        [{"templates": [tpl("ckpt")], "scope": "Job"}], rjobs=[mounting("workers", 9, ("ckpt",))]
    )
    ready, reason, message = volumes.volumes_ready(js, volumes.policies(js), [], set())
    assert (ready, reason) == (False, "ClaimsNotCreated")
    assert message.endswith("ckpt-js-workers-4 and 4 more")


def test_volumes_ready_without_claims() -> None:
    assert volumes.volumes_ready(make_jobset(), (), [], set()) == (
        True,
        "NoVolumeClaims",
        "the JobSet needs no volume claims",
    )


# ----------------------------------------------------------------------------- properties

RJOB_NAMES = ["leader", "workers", "A", "node-x", "eval"]
TEMPLATE_NAMES = ["data", "ckpt", "model", "scratch-1", "logs", "cache"]


@st.composite
def valid_jobsets(draw: st.DrawFn) -> Obj:
    names = draw(st.lists(st.sampled_from(RJOB_NAMES), min_size=1, max_size=4, unique=True))
    replicas = {n: draw(st.integers(0, 3)) for n in names}
    templates = draw(st.lists(st.sampled_from(TEMPLATE_NAMES), max_size=6, unique=True))
    count = draw(st.integers(0, min(3, len(templates))))
    groups: list[list[str]] = [[] for _ in range(count)]
    for i, template in enumerate(templates[: max(count, 0) * 2]):
        if count:
            groups[i % count].append(template)
    mounts: dict[str, set[str]] = {n: set() for n in names}
    policies: list[Obj] = []
    request: Obj | None = None
    for group in groups:
        if not group:
            continue
        explicit = draw(st.booleans())
        targets = (
            draw(st.lists(st.sampled_from(names), min_size=1, unique=True)) if explicit else None
        )
        eligible = targets if targets is not None else names
        for template in group:
            for user in draw(st.lists(st.sampled_from(eligible), min_size=1, unique=True)):
                mounts[user].add(template)
        retention = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "whenDeleted": st.sampled_from(["Delete", "Retain"]),
                    "whenScaled": st.sampled_from(["Delete", "Retain"]),
                },
            )
        )
        scope = draw(st.sampled_from(["JobSet", "Job"]))
        if scope == "JobSet" and request is None and draw(st.booleans()):
            request = {"volumeClaimTemplates": [tpl(t) for t in group]}
            if targets is not None:
                request["replicatedJobs"] = [{"name": n} for n in targets]
            if retention:
                request["retentionPolicy"] = retention
            continue
        policy: Obj = {"templates": [tpl(t) for t in group], "scope": scope}
        if targets is not None:
            policy["targetReplicatedJobs"] = targets
        if retention:
            policy["retentionPolicy"] = retention
        policies.append(policy)
    rjobs = [
        mounting(
            n,
            replicas[n],
            (*sorted(mounts[n]), "own"),
            volumes_=("own",),
        )
        for n in names
    ]
    spec: Obj = {}
    if policies:
        spec["volumeClaimPolicies"] = policies
    if request is not None:
        spec["volumePolicy"] = request
    name = draw(st.sampled_from(["js", "train-7", "a" * 40]))
    from tests.unit.jobset_factories import make_jobset_obj

    return make_jobset_obj(name=name, replicated_jobs=rjobs, spec=spec)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_jobsets())
def test_properties_of_claims_and_mounts(obj: Obj) -> None:
    js = parse(obj)
    policies = volumes.policies(js)
    desired = volumes.desired_claims(js, policies)
    names = [c.name for c in desired]
    assert len(names) == len(set(names))
    for name in names:
        assert len(name) <= 253 and DNS_SUBDOMAIN.match(name)
    by_name = {c.name: c for c in desired}
    for claim_ in desired:
        assert volumes.update_patch(claim_.object, claim_) is None
        assert volumes.classify(claim_.object, claim_, js) == "owned"
        assert volumes.compatible(claim_.object["spec"], claim_.template.spec) == (True, "")
        has_ref = "ownerReferences" in claim_.object["metadata"]
        assert has_ref is (claim_.policy.retention.when_deleted == "Delete")
    assert volumes.usable_claims(js, desired, [c.object for c in desired]) == set(names)
    assert (
        volumes.claims_to_delete(
            js, policies, [c.object for c in desired], deleting=False, terminal_state=""
        )
        == []
    )
    mounted_claims: set[str] = set()
    for r in js.replicated_jobs:
        for index in range(r.replicas):
            job = construct.desired_job(js, r, index)
            mounted = volumes.mount(job, js, policies, r.name, index)
            assert volumes.mount(mounted, js, policies, r.name, index) == mounted
            pod_volumes = mounted["spec"]["template"]["spec"]["volumes"]
            volume_names = [v["name"] for v in pod_volumes]
            assert len(volume_names) == len(set(volume_names))
            claims = {
                v["name"]: v["persistentVolumeClaim"]["claimName"]
                for v in pod_volumes
                if "persistentVolumeClaim" in v
            }
            assert claims == volumes.claims_for_job(js, policies, r.name, index)
            mounts = {
                m["name"]
                for c in mounted["spec"]["template"]["spec"]["containers"]
                for m in c.get("volumeMounts", [])
            }
            assert mounts <= set(volume_names)  # every mount has its volume
            for claim_name in claims.values():
                assert claim_name in by_name
            mounted_claims.update(claims.values())
            assert volumes.missing_claims(js, policies, r.name, index, set(names)) == []
    # Every desired claim is mounted by some Job, unless its replicated jobs have no replicas.
    used = {
        c.name
        for c in desired
        if any(js.replicated_job(r).replicas for r in volumes.targeted(c.policy, js))  # type: ignore[union-attr]
    }
    assert mounted_claims == used


def test_policy_without_templates_is_harmless() -> None:
    js = make([{"targetReplicatedJobs": ["workers"]}])
    (policy,) = volumes.policies(js)
    assert policy.templates == ()
    assert volumes.desired_claims(js, (policy,)) == []
    assert volumes.claims_for_job(js, (policy,), "workers", 0) == {}


def test_volume_status_missing_claims() -> None:
    js = status_jobset()
    entries = volumes.volume_status(js, volumes.policies(js), [ckpt(0)])
    assert [(e["name"], e["desired"], e["existing"], e["bound"]) for e in entries] == [
        ("ckpt", 4, 1, 1),
        ("data", 1, 0, 0),
    ]


@pytest.mark.parametrize(
    ("stored", "after_this_pass", "deleted"),
    [
        pytest.param("", "", False, id="running"),
        # The pass that decides completion only records it; a leader killed before its status
        # write lands must not have deleted claims for a completion nobody stored.
        pytest.param("", api.TERMINAL_COMPLETED, False, id="completing-this-pass"),
        pytest.param(api.TERMINAL_COMPLETED, api.TERMINAL_COMPLETED, True, id="completion-stored"),
        pytest.param("", api.TERMINAL_FAILED, False, id="failing-this-pass"),
        pytest.param(api.TERMINAL_FAILED, api.TERMINAL_FAILED, True, id="failure-stored"),
    ],
)
def test_retention_deletes_only_after_the_terminal_state_is_stored(
    stored: str, after_this_pass: str, deleted: bool
) -> None:
    retention = {"whenCompleted": "Delete", "whenFailed": "Delete"}
    js = make(
        [{"templates": [tpl("data")], "retentionPolicy": retention}],
        terminal_state=stored or None,
    )
    policies = volumes.policies(js)
    claim = {**only(js).object, "status": {"phase": "Bound"}}
    vplan = storage.plan(
        js, policies, {"data-js": claim}, StorageClasses(), terminal_state=after_this_pass
    )
    assert vplan.delete == (["data-js"] if deleted else [])
