"""Retention when the JobSet is deleted, read from the stored object whatever its spec (pure).

Deletion must never wait on a spec the controller cannot act on: a JobSet that became
``SpecInvalid`` (say, ``replicas`` raised past ``MAX_CLAIMS``) is finalised all the same. So this
reads only what retention needs, each part on its own: the JobSet's name, uid, finalizers and
stored terminal state, each policy entry that parses (``spec.readable_policies``) and the
replicated jobs' ``replicas``. Each claim needs its own justification:

- only claims the JobSet **owns** are touched (its name label and its uid in our annotation);
- a claim is **deleted** only when the policy that made it (found by the claim's template label)
  is readable and says Delete: ``whenDeleted``, ``whenCompleted``/``whenFailed`` for the stored
  terminal state, or ``whenScaled`` for a Job beyond ``replicas``; or says Snapshot, and a ready
  VolumeSnapshot of the claim exists (the snapshot is taken first, and waited for: the JobSet
  stays until it is ready, or for good while it fails);
- it is **kept** otherwise, the way ``whenDeleted: Retain`` keeps one (``retain_patch``: our
  ownerReference removed, else the garbage collector deletes it with the JobSet; the JobSet's uid
  recorded, so a JobSet of the same name can adopt it): when the policy says Retain, when the
  JobSet is deleted with ``propagationPolicy: Orphan`` (its Jobs and their pods stay, so their
  claims must too: as if ``whenDeleted: Retain``), and when no readable policy has the claim's
  template (a Warning: nothing justifies deleting it).

The retention finalizer goes once nothing is left to delete or keep.
"""

from __future__ import annotations

import collections
import datetime
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from controller.jobset.volumes import ownership, snapshots
from controller.jobset.volumes.lifecycle import (
    REASON_CLAIM_RETAINED,
    ClaimDelete,
    ClaimPatch,
    Release,
    VolumePlan,
    action,
    release,
    scaled_away,
    together,
)
from controller.jobset.volumes.model import (
    CLAIM_TEMPLATE_LABEL,
    FINALIZER,
    VolumePolicy,
    as_dict,
    as_list,
)
from controller.jobset.volumes.observed import ClaimView
from controller.jobset.volumes.snapshots import NO_SNAPSHOTS, Snapshots
from controller.jobset.volumes.spec import readable_policies
from controller.runtime.store import Obj

# The finalizer the API server puts on an object deleted with propagationPolicy Orphan (the
# garbage collector removes it once the dependents' ownerReferences are gone).
ORPHAN_FINALIZER = "orphan"


@dataclass(frozen=True)
class Deleted:
    """What retention needs of a JobSet being deleted, each part read on its own."""

    name: str
    namespace: str
    uid: str
    finalizers: tuple[str, ...]
    terminal_state: str
    # Template name → the readable policy that has it (a name in two policies is in neither).
    policies: Mapping[str, VolumePolicy]
    # Why each unreadable policy entry is (for messages).
    problems: tuple[str, ...]
    # Child Jobs per replicated job; an unreadable or unknown one counts as unbounded: nothing
    # is scaled away that the spec does not show to be.
    replicas: Mapping[str, int]

    @property
    def orphaning(self) -> bool:
        return ORPHAN_FINALIZER in self.finalizers

    def replicas_of(self, rjob: str) -> int:
        return self.replicas.get(rjob, sys.maxsize)


def _strings(value: Any) -> tuple[str, ...]:
    return tuple(v for v in as_list(value) if isinstance(v, str))


def _replicas(spec: Obj) -> dict[str, int]:
    result = {}
    for rjob in as_list(spec.get("replicatedJobs")):
        name = as_dict(rjob).get("name")
        count = as_dict(rjob).get("replicas", 1)
        if isinstance(name, str):
            readable = isinstance(count, int) and not isinstance(count, bool)
            result[name] = count if readable else sys.maxsize
    return result


def read(obj: Obj) -> Deleted:
    """The parts of a stored JobSet that retention needs; never raises."""
    meta, spec = as_dict(obj.get("metadata")), as_dict(obj.get("spec"))
    found, problems = readable_policies(spec, meta.get("annotations"))
    names = collections.Counter(t.name for p in found for t in p.templates)
    by_template = {t.name: p for p in found for t in p.templates if names[t.name] == 1}
    state = as_dict(obj.get("status")).get("terminalState")
    return Deleted(
        name=str(meta.get("name") or ""),
        namespace=str(meta.get("namespace") or ""),
        uid=str(meta.get("uid") or ""),
        finalizers=_strings(meta.get("finalizers")),
        terminal_state=state if isinstance(state, str) else "",
        policies=by_template,
        problems=tuple(problems),
        replicas=_replicas(spec),
    )


def _unreadable(claim: ClaimView, jobset: Deleted) -> str:
    template = claim.labels.get(CLAIM_TEMPLATE_LABEL)
    why = (
        f"no readable volume claim policy has its template {template!r}"
        if template
        else f"it has no {CLAIM_TEMPLATE_LABEL} label to find its volume claim policy by"
    )
    if jobset.problems:
        why += f" ({'; '.join(jobset.problems)})"
    return why


def _keep(claim: ClaimView, jobset: Deleted, why: str, event_type: str = "Normal") -> ClaimPatch:
    return ClaimPatch(
        claim.name,
        ownership.retain_patch(claim, jobset.uid),
        REASON_CLAIM_RETAINED,
        f"retained claim {claim.name} ({why}); a JobSet named {jobset.name} can adopt it",
        event_type,
    )


def _one(claim: ClaimView, jobset: Deleted) -> Release | ClaimPatch | None:
    """For one owned claim: how retention lets it go, the patch that keeps it, or None (done)."""
    policy = jobset.policies.get(claim.labels.get(CLAIM_TEMPLATE_LABEL) or "")
    if policy is None:
        if ownership.retained(claim, jobset.uid):
            return None
        return _keep(claim, jobset, _unreadable(claim, jobset), "Warning")
    retention = policy.retention
    why = "whenDeleted: Retain"
    if jobset.orphaning:
        # Its Jobs and their pods outlive the JobSet: so must the claims they mount.
        retention = replace(retention, when_deleted="Retain")
        why = "the JobSet was deleted with propagationPolicy Orphan: its Jobs and pods stay"
    # By Job index only: the Jobs are not read here, and one may still have a completion index
    # that the template (an elastic JobSet resized down) no longer has; its claim follows
    # whenDeleted.
    scaled = scaled_away(claim, policy, jobset.replicas_of)
    how = action(retention, deleting=True, terminal_state=jobset.terminal_state, scaled=scaled)
    if how is not None:
        both = together(retention, True, jobset.terminal_state)
        return None if claim.terminating else Release(claim, policy, how, both)
    if retention.when_deleted != "Retain" or ownership.retained(claim, jobset.uid):
        return None
    return _keep(claim, jobset, why)


def plan(
    obj: Obj,
    claims: Iterable[ClaimView],
    found: Snapshots = NO_SNAPSHOTS,
    now: datetime.datetime | None = None,
    warn_after: datetime.timedelta | None = None,
) -> VolumePlan:
    """The claim writes for a JobSet being deleted, and whether its finalizer can go.

    ``claims``: the claims labelled with the JobSet's name (those it does not own are ignored);
    ``found``: the controller's VolumeSnapshots of them (retention Snapshot); ``now`` and
    ``warn_after``: which waits for them are overdue (``VolumePlan.overdue``).
    """
    result = VolumePlan()
    jobset = read(obj)
    if FINALIZER not in jobset.finalizers:
        return result
    released = []
    for claim in claims:
        if not ownership.owned_by(claim, jobset.name, jobset.uid):
            continue
        todo = _one(claim, jobset)
        if isinstance(todo, Release):
            released.append(todo)
        elif todo is not None:
            result.patch.append(todo)
    deleted = release(result, released, found, jobset.name, jobset.namespace, jobset.uid)
    result.delete = [ClaimDelete.of(c) for c in deleted]
    if now is not None:
        result.overdue = snapshots.overdue(result.snapshotting, now, warn_after)
    # Deletes accepted (pvc-protection may keep a claim until its pods are gone), snapshots
    # ready and retention recorded: the finalizer can go. Otherwise the next pass checks again.
    result.remove_finalizer = not result.delete and not result.patch and not result.snapshotting
    return result


def kept_but_owned(obj: Obj, claims: Iterable[ClaimView]) -> list[str]:
    """Claims retention would keep that still carry the JobSet's ownerReference.

    A Foreground delete (the TTL's, as upstream) makes the garbage collector delete every
    dependent at once, before the retention finalizer runs: such a claim would be lost. The
    live reconcile keeps the ownerReference exactly on claims the policy deletes with the
    JobSet, so this is empty unless that has not happened yet; the TTL delete waits until it is.
    """
    jobset = read(obj)
    if FINALIZER not in jobset.finalizers:
        return []
    return [
        claim.name
        for claim in claims
        if ownership.owned_by(claim, jobset.name, jobset.uid)
        and any(r.get("uid") == jobset.uid for r in claim.owner_references)
        and _kept(_one(claim, jobset))
    ]


def _kept(todo: Release | ClaimPatch | None) -> bool:
    """Retention keeps the claim, or keeps it until a snapshot of it is ready."""
    return isinstance(todo, ClaimPatch) or (isinstance(todo, Release) and todo.action == "Snapshot")
