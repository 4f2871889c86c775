"""volumes.deletion: retention for a JobSet being deleted, from the stored object whatever its spec.

Each row: the stored JobSet (its policies, finalizers, terminal state, replicas) and the claims
labelled with its name; out: the claims deleted, the claims kept (with the Event's type and a
phrase of its message) and whether the finalizer goes.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.jobset import api
from controller.jobset.volumes import (
    CLAIM_SCOPE_LABEL,
    CLAIM_TEMPLATE_LABEL,
    FINALIZER,
    OWNER_UID_ANNOTATION,
    RETAINED_FROM_ANNOTATION,
    ClaimView,
    VolumePlan,
    deletion,
    retain_patch,
)

Obj = dict[str, Any]
SPEC: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
UID = "uid-js"


def policy(*templates: str, scope: str = "JobSet", **retention: str) -> Obj:
    entry: Obj = {"templates": [{"metadata": {"name": t}, "spec": SPEC} for t in templates]}
    if scope != "JobSet":
        entry["scope"] = scope
    if retention:
        entry["retentionPolicy"] = retention
    return entry


def jobset(
    *policies: Obj,
    finalizers: tuple[str, ...] = (FINALIZER,),
    terminal: str = "",
    replicas: Any = 2,
    spec: Obj | None = None,
) -> Obj:
    """A stored JobSet ``js`` being deleted; ``spec`` replaces the whole spec when given."""
    body: Obj = {
        "replicatedJobs": [{"name": "workers", "replicas": replicas}],
        "volumeClaimPolicies": list(policies),
    }
    return {
        "metadata": {
            "name": "js",
            "namespace": "default",
            "uid": UID,
            "deletionTimestamp": "2025-01-01T12:00:00Z",
            "finalizers": list(finalizers),
        },
        "spec": copy.deepcopy(spec) if spec is not None else body,
        "status": {"terminalState": terminal} if terminal else {},
    }


def claim(
    template: str | None,
    index: int | None = None,
    *,
    uid: str = UID,
    ref: bool = True,
    retained: bool = False,
    terminating: bool = False,
) -> ClaimView:
    """Claim of ``template`` as this controller made it for JobSet js (Job scope with ``index``);
    ``retained``: already kept (retained-from-uid, no ownerReference)."""
    name = f"{template}-js" if index is None else f"{template}-js-workers-{index}"
    labels = {api.JOBSET_NAME: "js", CLAIM_SCOPE_LABEL: "JobSet" if index is None else "Job"}
    if template is not None:
        labels[CLAIM_TEMPLATE_LABEL] = template
    else:
        name = "unlabelled-js"
    if index is not None:
        labels[api.REPLICATED_JOB_NAME] = "workers"
        labels[api.JOB_INDEX] = str(index)
    annotations = {OWNER_UID_ANNOTATION: uid}
    if retained:
        annotations[RETAINED_FROM_ANNOTATION] = UID
    meta: Obj = {"name": name, "uid": f"c-{name}", "labels": labels, "annotations": annotations}
    if ref and not retained:
        meta["ownerReferences"] = [
            {"apiVersion": api.API_VERSION, "kind": api.KIND, "name": "js", "uid": UID,
             "controller": True, "blockOwnerDeletion": True}
        ]  # fmt: skip
    if terminating:
        meta["deletionTimestamp"] = "2025-01-01T12:00:00Z"
    return ClaimView.of({"metadata": meta, "spec": SPEC, "status": {"phase": "Bound"}})


RETAIN = {"whenDeleted": "Retain"}
ORPHANED = (FINALIZER, deletion.ORPHAN_FINALIZER)
POD_SCOPE = "spec.volumeClaimPolicies[1].scope: Pod scope is not supported yet"

CASES = [
    # --- the policy is readable: it decides
    pytest.param(jobset(policy("data")), [claim("data")],
                 {"delete": ["data-js"]}, id="whenDeleted-Delete-deletes"),
    pytest.param(jobset(policy("data")), [claim("data", terminating=True)],
                 {"done": True}, id="deletes-accepted-finalizer-goes"),
    pytest.param(jobset(policy("data", **RETAIN)), [claim("data")],
                 {"keep": {"data-js": ("Normal", "whenDeleted: Retain")}},
                 id="whenDeleted-Retain-keeps"),
    pytest.param(jobset(policy("data", **RETAIN)), [claim("data", retained=True)],
                 {"done": True}, id="kept-already-finalizer-goes"),
    pytest.param(jobset(policy("data", **RETAIN, whenCompleted="Delete"), terminal="Completed"),
                 [claim("data")], {"delete": ["data-js"]}, id="whenCompleted-Delete-still-deletes"),
    pytest.param(jobset(policy("ckpt", scope="Job", **RETAIN, whenScaled="Delete"), replicas=1),
                 [claim("ckpt", 0), claim("ckpt", 1)],
                 {"delete": ["ckpt-js-workers-1"],
                  "keep": {"ckpt-js-workers-0": ("Normal", "whenDeleted: Retain")}},
                 id="whenScaled-Delete-deletes-scaled-away-only"),
    pytest.param(jobset(policy("ckpt", scope="Job", **RETAIN, whenScaled="Delete"),
                        replicas="many"),
                 [claim("ckpt", 1)],
                 {"keep": {"ckpt-js-workers-1": ("Normal", "whenDeleted: Retain")}},
                 id="unreadable-replicas-nothing-scaled-away"),
    pytest.param(jobset(spec={"replicatedJobs": "?", "volumeClaimPolicies": [
                        policy("ckpt", scope="Job", **RETAIN, whenScaled="Delete")]}),
                 [claim("ckpt", 1)],
                 {"keep": {"ckpt-js-workers-1": ("Normal", "whenDeleted: Retain")}},
                 id="unreadable-replicated-jobs-nothing-scaled-away"),
    # --- the JobSet is invalid, but this claim's policy entry is readable on its own
    pytest.param(jobset(policy("data"), policy("other", scope="Pod")), [claim("data")],
                 {"delete": ["data-js"]}, id="other-entry-unreadable-this-one-decides"),
    # --- orphan propagation: the Jobs and their pods stay, so do the claims
    pytest.param(jobset(policy("data"), finalizers=ORPHANED), [claim("data")],
                 {"keep": {"data-js": ("Normal", "propagationPolicy Orphan")}},
                 id="orphan-keeps-whenDeleted-Delete-claims"),
    pytest.param(jobset(policy("data"), finalizers=ORPHANED), [claim("data", retained=True)],
                 {"done": True}, id="orphan-kept-already-finalizer-goes"),
    pytest.param(jobset(policy("data", whenCompleted="Delete"), finalizers=ORPHANED,
                        terminal="Completed"),
                 [claim("data")], {"delete": ["data-js"]}, id="orphan-whenCompleted-Delete-stands"),
    # --- nothing justifies a delete: kept, with a Warning saying why
    pytest.param(jobset(policy("data"), policy("ckpt", scope="Pod")), [claim("ckpt")],
                 {"keep": {"ckpt-js": ("Warning", POD_SCOPE)}},
                 id="its-policy-entry-unreadable-kept"),
    pytest.param(jobset(policy("data")), [claim("gone")],
                 {"keep": {"gone-js": ("Warning", "no readable volume claim policy has its "
                                                  "template 'gone'")}},
                 id="template-not-in-spec-kept"),
    pytest.param(jobset(policy("data")), [claim(None)],
                 {"keep": {"unlabelled-js": ("Warning", f"no {CLAIM_TEMPLATE_LABEL} label")}},
                 id="no-template-label-kept"),
    pytest.param(jobset(policy("data"), policy("data", **RETAIN)), [claim("data")],
                 {"keep": {"data-js": ("Warning", "template 'data'")}},
                 id="template-in-two-policies-kept"),
    pytest.param(jobset(spec={"volumeClaimPolicies": {"templates": []}}), [claim("data")],
                 {"keep": {"data-js": ("Warning", "spec.volumeClaimPolicies must be a list")}},
                 id="policies-not-a-list-kept"),
    pytest.param(jobset(policy("data")), [claim("gone", retained=True)],
                 {"done": True}, id="unreadable-kept-already-finalizer-goes"),
    # --- never touched: claims it does not own, JobSets without our finalizer
    pytest.param(jobset(policy("data")), [claim("data", uid="uid-earlier")],
                 {"done": True}, id="claim-of-another-jobset-instance-ignored"),
    pytest.param(jobset(policy("data"), finalizers=()), [claim("data")],
                 {}, id="without-our-finalizer-nothing"),
    pytest.param(jobset(), [], {"done": True}, id="no-policies-finalizer-goes"),
]  # fmt: skip


def _summary(plan: VolumePlan) -> Obj:
    out: Obj = {}
    if plan.delete:
        out["delete"] = sorted(plan.delete)
    for change in plan.patch:
        out.setdefault("keep", {})[change.name] = (change.event_type, change.message)
    if plan.remove_finalizer:
        out["done"] = True
    return out


@pytest.mark.parametrize(("obj", "claims", "expected"), CASES)
def test_deletion_plan(obj: Obj, claims: list[ClaimView], expected: Obj) -> None:
    got = _summary(deletion.plan(obj, claims))
    kept = got.pop("keep", {})
    wanted = dict(expected)
    wanted_kept = wanted.pop("keep", {})
    assert got == wanted
    assert sorted(kept) == sorted(wanted_kept)
    for name, (event_type, phrase) in wanted_kept.items():
        assert kept[name][0] == event_type, kept[name]
        assert phrase in kept[name][1], kept[name]
        assert name in kept[name][1] and "can adopt it" in kept[name][1], kept[name]


def test_kept_claims_get_the_retain_patch() -> None:
    """Kept the way whenDeleted: Retain keeps a claim: ownerReference gone, uid recorded."""
    found = claim("gone")
    plan = deletion.plan(jobset(policy("data")), [found])
    assert [c.patch for c in plan.patch] == [retain_patch(found, UID)]
    assert retain_patch(found, UID) == {
        "metadata": {"annotations": {RETAINED_FROM_ANNOTATION: UID}, "ownerReferences": None}
    }


def test_deletion_plan_reads_any_stored_object() -> None:
    """Whatever else the stored object holds, planning does not raise (deletion never waits) and
    keeps what it cannot read."""
    meta = {"name": "js", "uid": UID, "finalizers": [FINALIZER]}
    for spec, status in (([], "x"), ({"volumePolicy": 3}, None), (None, {"terminalState": 1})):
        plan = deletion.plan({"metadata": meta, "spec": spec, "status": status}, [claim("data")])
        assert (plan.delete, [c.name for c in plan.patch]) == ([], ["data-js"])
