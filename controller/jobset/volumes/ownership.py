"""Which existing claims are this JobSet's, which it may adopt, and the patches that say so (pure).

A claim is **owned** when it carries this JobSet's name label and its uid in the owner-uid
annotation (only this controller writes that). It is **adoptable** only with proof that it is
this JobSet's, or was this controller's claim of an earlier JobSet of the same name (``Proof``):

- ``controller-reference``: a ``controller: true`` ownerReference to this JobSet (kind, name and
  uid), whoever wrote it: upstream JobSet's controller sets exactly that on the claims it makes
  (``whenDeleted: Delete``), so JobSets migrated from upstream keep their claims. Adopted at once,
  even while the JobSet is suspended: the claim is the JobSet's already (the garbage collector
  deletes it with the JobSet).
- ``retained``: the retained-from-uid annotation that Retain writes.
- ``adopt-annotation``: the user named the claim and its uid in the JobSet's annotation
  ``jobset.sigs.k8s.io/adopt-claims`` (annotations.py): claims with no proof of their own
  (retained by upstream, restored from a backup, made by hand, or left behind when this
  controller's finalizer was removed by hand and retention never ran). The conflict condition
  prints the command that adopts them.

Besides the proof, an adoptable claim is controlled by no one else and its spec satisfies the
template. Anything else with the generated name is a **conflict**: never mounted, changed or
deleted. A copied name label is no proof: charts and ``-o yaml`` round trips copy labels; nor is
an ownerReference to another uid (an earlier JobSet of the same name: retained-from-uid is for
that).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any, Literal

from controller.jobset import api
from controller.jobset.model import JobSet, owner_reference
from controller.jobset.quantity import quantity
from controller.jobset.volumes.annotations import (
    ADOPT_ANNOTATION,
    ClaimEntry,
)
from controller.jobset.volumes.desired import DesiredClaim
from controller.jobset.volumes.model import (
    OWNER_UID_ANNOTATION,
    RETAINED_FROM_ANNOTATION,
    as_dict,
    as_list,
    storage_of,
)
from controller.jobset.volumes.observed import ClaimView
from controller.runtime.store import Obj

Classification = Literal["owned", "adoptable", "conflict"]
Proof = Literal["controller-reference", "retained", "adopt-annotation"]


def _is_jobset_ref(ref: Mapping[str, Any], name: str) -> bool:
    group = str(ref.get("apiVersion") or "").split("/")[0]
    return ref.get("kind") == api.KIND and group == api.GROUP and ref.get("name") == name


def _foreign_controller(claim: ClaimView, jobset: JobSet) -> Obj | None:
    """A controller ownerReference to something other than a JobSet of this name."""
    for ref in claim.owner_references:
        if ref.get("controller") is True and not _is_jobset_ref(ref, jobset.name):
            return ref
    return None


def _semantic(value: Any) -> Any:
    """Drop empty values so that ``{}``, ``[]``, ``""`` and missing compare equal."""
    if isinstance(value, dict):
        cleaned = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in cleaned.items() if v not in (None, "", [], {})}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def compatible(
    existing_spec: Obj, template_spec: Obj, expandable: Collection[str] = frozenset()
) -> tuple[bool, str]:
    """Whether an existing claim satisfies the template: only what the template sets counts.

    A claim smaller than the template fits when its storage class is one of ``expandable``
    (classes that allow volume expansion): it is expanded once it is the JobSet's and Bound.
    """
    have = as_dict(existing_spec)
    want = as_dict(template_spec)
    modes = as_list(want.get("accessModes"))
    if modes:
        have_modes = as_list(have.get("accessModes"))
        if set(map(str, modes)) != set(map(str, have_modes)):
            return False, (
                f"access modes {sorted(map(str, have_modes))} differ from the template's "
                f"{sorted(map(str, modes))}"
            )
    wanted_storage = storage_of(want)
    wanted_q = quantity(wanted_storage)
    if wanted_q is not None:
        have_storage = storage_of(have)
        have_q = quantity(have_storage)
        if have_q is None:
            return (
                False,
                f"the claim has no storage request; the template asks for {wanted_storage}",
            )
        storage_class = have.get("storageClassName")
        grows = isinstance(storage_class, str) and storage_class in expandable
        if wanted_q > have_q and not grows:
            return False, (
                f"the claim requests {have_storage} of storage, less than the template's "
                f"{wanted_storage}, and its storage class {storage_class or '(none)'} does not "
                "allow volume expansion"
            )
    if want.get("storageClassName") is not None:
        mine = want.get("storageClassName") or ""
        theirs = have.get("storageClassName") or ""
        if mine != theirs:
            return False, f"storage class {theirs!r} differs from the template's {mine!r}"
    if want.get("volumeMode"):
        mine = want["volumeMode"]
        theirs = have.get("volumeMode") or "Filesystem"
        if mine != theirs:
            return False, f"volume mode {theirs!r} differs from the template's {mine!r}"
    if _semantic(want.get("selector")) and _semantic(want.get("selector")) != _semantic(
        have.get("selector")
    ):
        return False, "the claim's selector differs from the template's"
    for key in ("dataSource", "dataSourceRef"):
        source = _semantic(want.get(key))
        if source and any(
            _semantic(as_dict(have.get(key)).get(k)) != v for k, v in as_dict(source).items()
        ):
            return False, f"the claim's {key} differs from the template's"
    return True, ""


def owned_by(claim: ClaimView, name: str, uid: str) -> bool:
    """Made for (or adopted by) the JobSet ``name`` of uid ``uid``: the label and our annotation."""
    return claim.jobset_name == name and claim.owner_uid == uid


def owned(claim: ClaimView, jobset: JobSet) -> bool:
    return owned_by(claim, jobset.name, jobset.uid)


def controlled_by(claim: ClaimView, jobset: JobSet) -> bool:
    """A ``controller: true`` ownerReference names this JobSet: kind, name and uid."""
    return any(
        ref.get("controller") is True
        and _is_jobset_ref(ref, jobset.name)
        and ref.get("uid") == jobset.uid
        for ref in claim.owner_references
    )


def proof_of(claim: ClaimView, jobset: JobSet, adopt: Collection[ClaimEntry] = ()) -> Proof | None:
    """Why ``claim`` may be this JobSet's (the strongest proof first), None without proof.
    ``adopt``: the entries of the JobSet's adopt-claims annotation that name this claim."""
    if controlled_by(claim, jobset):
        return "controller-reference"
    if claim.jobset_name == jobset.name and claim.retained_from:
        return "retained"
    if any(e.claim == claim.name and e.names(claim.uid) for e in adopt):
        return "adopt-annotation"
    return None


def _no_proof(claim: ClaimView, desired: DesiredClaim, jobset: JobSet) -> str:
    if claim.jobset_name != jobset.name:
        return (
            f"claim {desired.name} exists but was not made for JobSet {jobset.name} "
            f"(it lacks the label {api.JOBSET_NAME}={jobset.name})"
        )
    # Labels are copied by charts and `-o yaml` round trips: only what this controller or the
    # JobSet's own controller ownerReference writes proves whose claim it is.
    return (
        f"claim {desired.name} carries the label {api.JOBSET_NAME}={jobset.name} but was "
        f"neither made by this JobSet nor retained from an earlier one (no controller "
        f"ownerReference to this JobSet, no annotation {RETAINED_FROM_ANNOTATION}); a "
        f"copied label is no proof of ownership"
    )


def adoption_hint(claim: ClaimView, jobset: JobSet) -> bool:
    """Whether the conflict message offers to adopt ``claim`` by the annotation: it has no proof,
    and is neither another JobSet's (its name label) nor controlled by anything else."""
    return (
        claim.jobset_name in (None, jobset.name)
        and _foreign_controller(claim, jobset) is None
        and proof_of(claim, jobset) is None
    )


def conflict_reason(
    claim: ClaimView,
    desired: DesiredClaim,
    jobset: JobSet,
    expandable: Collection[str] = frozenset(),
    adopt: Collection[ClaimEntry] = (),
) -> str:
    """Why ``claim`` cannot be used for ``desired``; "" when it can (owned or adoptable).
    ``adopt``: the entries of the JobSet's adopt-claims annotation."""
    if owned(claim, jobset):
        return ""
    proof = proof_of(claim, jobset, adopt)
    foreign = _foreign_controller(claim, jobset)
    if proof is None and foreign is None:
        return _no_proof(claim, desired, jobset)
    asked = f" (named in {ADOPT_ANNOTATION})" if proof == "adopt-annotation" else ""
    if foreign is not None:
        return (
            f"claim {desired.name}{asked} is controlled by {foreign.get('kind')} "
            f"{foreign.get('name')}"
        )
    assert proof is not None
    ok, why = compatible(claim.spec, desired.template.spec, expandable)
    if not ok:
        origin = {
            "controller-reference": "controlled by this JobSet",
            "retained": f"retained from an earlier JobSet {jobset.name}",
            "adopt-annotation": f"named in {ADOPT_ANNOTATION}",
        }[proof]
        template = desired.template.name
        return f"claim {desired.name} ({origin}) does not match template {template}: {why}"
    return ""


def adoption_message(claim: ClaimView, jobset: JobSet, proof: Proof | None) -> str:
    """The ClaimAdopted Event's message: the claim, and the proof it was adopted on."""
    name = claim.name
    if proof == "controller-reference":
        return (
            f"adopted claim {name} (uid {claim.uid}): its controller ownerReference names this "
            "JobSet (made by upstream JobSet's controller, or an earlier version of this one)"
        )
    if proof == "adopt-annotation":
        return f"adopted claim {name} (uid {claim.uid}), as the annotation {ADOPT_ANNOTATION} asks"
    return f"adopted claim {name}, retained from an earlier JobSet {jobset.name}"


def classify(
    claim: ClaimView,
    desired: DesiredClaim,
    jobset: JobSet,
    expandable: Collection[str] = frozenset(),
    adopt: Collection[ClaimEntry] = (),
) -> Classification:
    """owned: ours already; adoptable: with a proof (``proof_of``), controlled by no one else,
    and fits; conflict: anything else."""
    if owned(claim, jobset):
        return "owned"
    reason = conflict_reason(claim, desired, jobset, expandable, adopt)
    return "conflict" if reason else "adoptable"


def _refs_with_owner(claim: ClaimView, owner: Obj, want: bool) -> list[Obj]:
    """The ownerReferences without stale JobSet ones of this name; ``owner`` iff ``want``."""
    uid = owner.get("uid")
    kept = [
        r
        for r in claim.owner_references
        if not _is_jobset_ref(r, str(owner.get("name"))) or (want and r.get("uid") == uid)
    ]
    if want and not any(r.get("uid") == uid for r in kept):
        kept.append(owner)
    return kept


def adoption_patch(claim: ClaimView, desired: DesiredClaim, jobset: JobSet) -> Obj:
    """Merge patch making a retained claim this JobSet's (labels, owner uid, ownerReference)."""
    desired_meta = desired.metadata
    labels = {
        k: v for k, v in as_dict(desired_meta.get("labels")).items() if claim.labels.get(k) != v
    }
    annotations: dict[str, Any] = {
        k: v
        for k, v in as_dict(desired_meta.get("annotations")).items()
        if claim.annotations.get(k) != v
    }
    annotations[OWNER_UID_ANNOTATION] = jobset.uid
    annotations[RETAINED_FROM_ANNOTATION] = None
    metadata: Obj = {"annotations": annotations}
    if labels:
        metadata["labels"] = labels
    want = desired.policy.retention.when_deleted == "Delete"
    refs = _refs_with_owner(claim, jobset.owner_reference(), want)
    if refs != list(claim.owner_references):
        metadata["ownerReferences"] = refs
    return {"metadata": metadata}


def retain_patch(claim: ClaimView, uid: str) -> Obj:
    """Merge patch keeping a claim after its JobSet (of ``uid``) is gone: no ownerReference to
    it (the garbage collector would delete the claim), the uid noted for a later adoption."""
    refs = [r for r in claim.owner_references if r.get("uid") != uid]
    return {
        "metadata": {
            "annotations": {RETAINED_FROM_ANNOTATION: uid},
            "ownerReferences": refs or None,
        }
    }


def retained(claim: ClaimView, uid: str) -> bool:
    """``retain_patch`` has nothing left to do."""
    return claim.retained_from == uid and not any(
        r.get("uid") == uid for r in claim.owner_references
    )


def update_patch(claim: ClaimView, desired: DesiredClaim) -> Obj | None:
    """Merge patch bringing an owned claim to the desired one; None when nothing differs.

    Storage is only ever raised; labels and annotations are added or changed, never removed;
    the ownerReference is present exactly while the policy deletes claims with the JobSet.
    """
    metadata: Obj = {}
    desired_meta = desired.metadata
    for key, current in (("labels", claim.labels), ("annotations", claim.annotations)):
        changed = {k: v for k, v in as_dict(desired_meta.get(key)).items() if current.get(k) != v}
        if changed:
            metadata[key] = changed
    owner = owner_reference(
        str(as_dict(desired_meta.get("labels")).get(api.JOBSET_NAME, "")),
        str(as_dict(desired_meta.get("annotations")).get(OWNER_UID_ANNOTATION, "")),
    )
    want = desired.policy.retention.when_deleted == "Delete"
    refs = _refs_with_owner(claim, owner, want)
    if refs != list(claim.owner_references):
        metadata["ownerReferences"] = refs or None
    patch: Obj = {}
    if metadata:
        patch["metadata"] = metadata
    wanted = storage_of(desired.template.spec)
    wanted_q = quantity(wanted)
    if wanted_q is not None and claim.storage is not None and wanted_q > claim.storage:
        patch["spec"] = {"resources": {"requests": {"storage": str(wanted)}}}
    return patch or None
