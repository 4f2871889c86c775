"""deletion: retention for a JobSet being deleted, read from the stored object whatever its spec.

Each row: the stored JobSet js being deleted (its policies, finalizers, terminal state, replicas)
and the claims labelled with its name; out: the claims deleted, the claims kept (the Event's type
and a phrase of its message) and whether the retention finalizer goes.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.jobset.volumes import (
    FINALIZER,
    VolumePlan,
    deletion,
)
from controller.jobset.volumes.model import CLAIM_TEMPLATE_LABEL, RETAINED_FROM_ANNOTATION
from controller.jobset.volumes.observed import views
from controller.jobset.volumes.ownership import retain_patch
from controller.runtime.store import Obj
from tests.unit.volumes.factories import (
    ckpt,
    claim,
    make_obj,
    merge_patch,
    mounting,
    owner,
    pod_ckpt,
    tpl,
)

ORPHANED = (FINALIZER, deletion.ORPHAN_FINALIZER)
RETAIN = {"whenDeleted": "Retain"}
KEPT = {RETAINED_FROM_ANNOTATION: "uid-js"}  # what retain_patch leaves (and no ownerReference)
UNREADABLE = "spec.volumeClaimPolicies[1].scope must be JobSet, Job or Pod, got 'Node'"


def policy(*templates: str, scope: str = "JobSet", **retention: str) -> Obj:
    entry: Obj = {"templates": [tpl(t) for t in templates], "scope": scope}
    if retention:
        entry["retentionPolicy"] = retention
    return entry


def going(
    *policies: Obj,
    finalizers: tuple[str, ...] = (FINALIZER,),
    terminal: str | None = None,
    replicas: Any = 2,
    spec: Obj | None = None,
) -> Obj:
    """js being deleted, as stored: its policies (``spec`` replaces the whole spec), workers
    with ``replicas`` (not necessarily a number: deletion reads what it can)."""
    obj = make_obj(
        list(policies), rjobs=[mounting("workers")], deleting=True, terminal_state=terminal
    )
    obj["spec"]["replicatedJobs"][0]["replicas"] = replicas
    if spec is not None:
        obj["spec"] = spec
    obj["metadata"]["finalizers"] = list(finalizers)
    return obj


def data(**kw: Any) -> Obj:
    """``data-js`` as this controller made it (owner reference included unless ``refs``)."""
    kw.setdefault("refs", [owner()])
    return claim("data-js", **kw)


CASES = [
    # --- the policy that made the claim is readable: it decides
    pytest.param(going(policy("data")), [data()], {"delete": ["data-js"]},
                 id="whenDeleted-Delete-deletes"),
    pytest.param(going(policy("ckpt", scope="Job")),
                 [ckpt(0, refs=[owner()]), ckpt(1, refs=[owner()])],
                 {"delete": ["ckpt-js-workers-0", "ckpt-js-workers-1"]}, id="delete-then-wait"),
    # Deletes accepted (pvc-protection may keep a claim while pods use it): the finalizer goes.
    pytest.param(going(policy("data")), [data(deleting=True)], {"done": True},
                 id="deletes-accepted-finalizer-goes"),
    pytest.param(going(policy("data", **RETAIN)), [data()],
                 {"keep": {"data-js": ("Normal", "whenDeleted: Retain")}},
                 id="whenDeleted-Retain-keeps"),
    pytest.param(going(policy("data", **RETAIN)), [data(refs=None)],
                 {"keep": {"data-js": ("Normal", "whenDeleted: Retain")}},
                 id="whenDeleted-Retain-records-the-uid"),
    pytest.param(going(policy("data", **RETAIN)), [data(refs=None, annotations=KEPT)],
                 {"done": True}, id="kept-already-finalizer-goes"),
    pytest.param(going(policy("data", **RETAIN, whenCompleted="Delete"), terminal="Completed"),
                 [data()], {"delete": ["data-js"]}, id="whenCompleted-Delete-still-deletes"),
    pytest.param(going(policy("ckpt", scope="Job", **RETAIN, whenScaled="Delete"), replicas=1),
                 [ckpt(0, refs=[owner()]), ckpt(1, refs=[owner()])],
                 {"delete": ["ckpt-js-workers-1"],
                  "keep": {"ckpt-js-workers-0": ("Normal", "whenDeleted: Retain")}},
                 id="whenScaled-Delete-deletes-scaled-away-only"),
    # Pod scope: read whatever the controller's refusal of it (retention must not depend on
    # it), per claim as Job scope.
    pytest.param(going(policy("ckpt", scope="Pod")),
                 [pod_ckpt(0, 0, refs=[owner()]), pod_ckpt(1, 2, refs=[owner()])],
                 {"delete": ["ckpt-js-workers-0-0", "ckpt-js-workers-1-2"]},
                 id="pod-scope-whenDeleted-Delete-deletes"),
    pytest.param(going(policy("ckpt", scope="Pod", **RETAIN, whenScaled="Delete"), replicas=1),
                 [pod_ckpt(0, 1, refs=[owner()]), pod_ckpt(1, 0, refs=[owner()]),
                  pod_ckpt(1, 1, refs=[owner()])],
                 {"delete": ["ckpt-js-workers-1-0", "ckpt-js-workers-1-1"],
                  "keep": {"ckpt-js-workers-0-1": ("Normal", "whenDeleted: Retain")}},
                 id="pod-scope-whenScaled-Delete-deletes-scaled-away-only"),
    pytest.param(going(policy("ckpt", scope="Job", **RETAIN, whenScaled="Delete"),
                       replicas="many"),
                 [ckpt(1, refs=[owner()])],
                 {"keep": {"ckpt-js-workers-1": ("Normal", "whenDeleted: Retain")}},
                 id="unreadable-replicas-nothing-scaled-away"),
    pytest.param(going(spec={"replicatedJobs": "?", "volumeClaimPolicies": [
                     policy("ckpt", scope="Job", **RETAIN, whenScaled="Delete")]}),
                 [ckpt(1, refs=[owner()])],
                 {"keep": {"ckpt-js-workers-1": ("Normal", "whenDeleted: Retain")}},
                 id="unreadable-replicated-jobs-nothing-scaled-away"),
    # --- the JobSet is invalid, but this claim's policy entry is readable on its own
    pytest.param(going(policy("data"), policy("other", scope="Node")), [data()],
                 {"delete": ["data-js"]}, id="other-entry-unreadable-this-one-decides"),
    # --- orphan propagation: the Jobs and their pods stay, so do the claims
    pytest.param(going(policy("data"), finalizers=ORPHANED), [data()],
                 {"keep": {"data-js": ("Normal", "propagationPolicy Orphan")}},
                 id="orphan-keeps-whenDeleted-Delete-claims"),
    pytest.param(going(policy("data"), finalizers=ORPHANED), [data(refs=None, annotations=KEPT)],
                 {"done": True}, id="orphan-kept-already-finalizer-goes"),
    pytest.param(going(policy("data", whenCompleted="Delete"), finalizers=ORPHANED,
                       terminal="Completed"),
                 [data()], {"delete": ["data-js"]}, id="orphan-whenCompleted-Delete-stands"),
    # --- nothing justifies a delete: kept, with a Warning saying why
    pytest.param(going(policy("data"), policy("ckpt", scope="Node")), [ckpt(0, refs=[owner()])],
                 {"keep": {"ckpt-js-workers-0": ("Warning", UNREADABLE)}},
                 id="its-policy-entry-unreadable-kept"),
    pytest.param(going(policy("data")), [data(template="gone")],
                 {"keep": {"data-js": ("Warning", "no readable volume claim policy has its "
                                                  "template 'gone'")}},
                 id="template-not-in-spec-kept"),
    pytest.param(going(policy("data")), [data(template="")],
                 {"keep": {"data-js": ("Warning", f"no {CLAIM_TEMPLATE_LABEL} label")}},
                 id="no-template-label-kept"),
    pytest.param(going(policy("data"), policy("data", **RETAIN)), [data()],
                 {"keep": {"data-js": ("Warning", "template 'data'")}},
                 id="template-in-two-policies-kept"),
    pytest.param(going(spec={"volumeClaimPolicies": {"templates": []}}), [data()],
                 {"keep": {"data-js": ("Warning", "spec.volumeClaimPolicies must be a list")}},
                 id="policies-not-a-list-kept"),
    pytest.param(going(policy("data")), [data(template="gone", refs=None, annotations=KEPT)],
                 {"done": True}, id="unreadable-kept-already-finalizer-goes"),
    # --- never touched: claims it does not own (a copied label, another JobSet's, an earlier
    # JobSet's of the same name), JobSets without our finalizer
    pytest.param(going(policy("data")),
                 [data(owner_uid=None), ckpt(1, jobset="other"), ckpt(2, owner_uid="uid-old")],
                 {"done": True}, id="not-ours-untouched"),
    pytest.param(going(policy("data"), finalizers=()), [data()], {}, id="retention-ran-already"),
    pytest.param(going(), [], {"done": True}, id="no-policies-finalizer-goes"),
]  # fmt: skip


def _summary(plan: VolumePlan) -> Obj:
    out: Obj = {}
    if plan.deleted:
        out["delete"] = sorted(plan.deleted)
    for change in plan.patch:
        out.setdefault("keep", {})[change.name] = (change.event_type, change.message)
    if plan.remove_finalizer:
        out["done"] = True
    return out


@pytest.mark.parametrize(("obj", "claims", "expected"), CASES)
def test_deletion_plan(obj: Obj, claims: list[Obj], expected: Obj) -> None:
    got = _summary(deletion.plan(obj, views(claims).values()))
    kept, wanted = got.pop("keep", {}), dict(expected)
    wanted_kept = wanted.pop("keep", {})
    assert got == wanted
    assert sorted(kept) == sorted(wanted_kept)
    for name, (event_type, phrase) in wanted_kept.items():
        assert kept[name][0] == event_type, kept[name]
        assert phrase in kept[name][1], kept[name]
        assert f"retained claim {name}" in kept[name][1], kept[name]
        assert "a JobSet named js can adopt it" in kept[name][1], kept[name]


def test_kept_claims_get_the_retain_patch_then_nothing_is_left() -> None:
    """Kept the way whenDeleted: Retain keeps a claim (ownerReference gone, uid recorded); once
    patched, the next pass has nothing left to do and the finalizer goes."""
    obj = going(policy("data"))
    found = data(template="gone")
    first = deletion.plan(obj, views([found]).values())
    (view,) = views([found]).values()
    assert [c.patch for c in first.patch] == [retain_patch(view, "uid-js")]
    kept = merge_patch(found, first.patch[0].patch)
    assert "ownerReferences" not in kept["metadata"]
    assert _summary(deletion.plan(obj, views([kept]).values())) == {"done": True}


def test_deletion_plan_reads_any_stored_object() -> None:
    """Whatever else the stored object holds, planning does not raise (deletion never waits) and
    keeps what it cannot read."""
    meta = {"name": "js", "uid": "uid-js", "finalizers": [FINALIZER]}
    for spec, status in (([], "x"), ({"volumePolicy": 3}, None), (None, {"terminalState": 1})):
        obj: Obj = {"metadata": meta, "spec": spec, "status": status}
        plan = deletion.plan(obj, views([data()]).values())
        assert (plan.deleted, [c.name for c in plan.patch]) == ([], ["data-js"])


def live(*policies: Obj) -> Obj:
    """js finished and alive, with the retention finalizer: what the TTL deletes."""
    obj = make_obj(list(policies), rjobs=[mounting("workers")], terminal_state="Completed")
    obj["metadata"]["finalizers"] = [FINALIZER]
    return obj


@pytest.mark.parametrize(
    ("obj", "found", "held"),
    [
        # The live reconcile keeps the ownerReference only where the policy deletes the claim.
        pytest.param(live(policy("data")), data(), [], id="whenDeleted-Delete-may-go"),
        pytest.param(live(policy("data", **RETAIN)), data(refs=None), [], id="retain-unowned"),
        # Not yet released: the garbage collector would take it with a Foreground delete.
        pytest.param(live(policy("data", **RETAIN)), data(), ["data-js"], id="retain-owned"),
        pytest.param(live(policy("data")), data(template="gone"), ["data-js"], id="unreadable"),
        pytest.param(
            {**live(policy("data", **RETAIN)), "metadata": {"name": "js", "uid": "uid-js"}},
            data(),
            [],
            id="no-finalizer-no-retention",
        ),
    ],
)
def test_kept_but_owned_holds_a_foreground_delete(obj: Obj, found: Obj, held: list[str]) -> None:
    assert deletion.kept_but_owned(obj, views([found]).values()) == held
