"""The claim lifecycle: what each desired claim is now, and the writes that move it on (pure).

Every desired claim is in one state, each reached only with a stated justification:

- ``Missing``: no claim of the name exists and none was ever recorded: create it (not once the
  JobSet is finishing).
- ``Adoptable``: a claim of the name with a proof that it is this JobSet's (its controller
  ownerReference names it: upstream JobSet made it), or was this controller's claim of an earlier
  JobSet of this name (retained), or that the user names with its uid in the ``adopt-claims``
  annotation (ownership.py): adopt it and record its uid.
- ``Conflict``: a claim of the name that is not this JobSet's and cannot be adopted: never
  mounted, changed or deleted; the Jobs that need it wait.
- ``Pending`` / ``WaitingForFirstConsumer`` / ``Bound``: the JobSet's own claim (created or
  adopted, its uid recorded in the status). Mounted only once its uid is in the *stored* record,
  so a claim is never written to by pods before the JobSet remembers it.
- ``Deleting``: the JobSet's claim is being deleted and was never recorded (its retention deleted
  it, or it never got a uid in the record): created again once it is gone.
- ``Terminating``: a recorded claim is being deleted by someone else (pvc-protection keeps it
  while pods use it). It becomes ``Lost``.
- ``Lost``: a recorded claim is gone, its name now belongs to another object (another uid), or
  its persistent volume is lost. Its data is gone: it is **not** recreated, the Jobs that mount
  it wait, and a Warning says so, until the user accepts an empty replacement with the JobSet's
  annotation ``jobset.sigs.k8s.io/replace-lost-claims: <claim>@<uid prefix>`` (one-shot: the
  uid prefix names that loss only).
- ``Released``: the JobSet finished and ``whenCompleted``/``whenFailed`` (``Delete``, or
  ``Snapshot`` once the claim's snapshot was ready) deleted it.

A claim in one of the states the JobSet owns may also be *held*: ``retentionPolicy.whenSuspended:
Snapshot`` lets it go through a snapshot because the JobSet is suspended (``suspension.py``); it
is never mountable again, and once deleted it is ``Missing`` (its uid forgotten), made again
from that snapshot when the JobSet is resumed.

A ``Missing`` claim with a ``restorePolicy`` is created from a snapshot (``snapshots.restore``),
or not yet: it stays ``Missing`` while the snapshot it starts from is not ready (or does not
exist, unless ``whenMissing: CreateEmpty``), and the Jobs that mount it wait.

While the JobSet is suspended (queued by Kueue, say, possibly for hours), a ``Missing`` claim is
not created and an ``Adoptable`` one not adopted, unless its policy's
``creationPolicy.whenSuspended`` is ``Create``: they are ``deferred`` until the JobSet is resumed
(its Jobs, which need them, wait as well). Claims the JobSet has stay, whatever happens to the
suspension: no retention acts on it. A recorded claim that disappears while suspended is
``Lost`` (not ``Missing``), so it is not created again on resume either. A Lost claim the user
accepted to replace is replaced at once: that is an explicit request. (``whenSuspended:
Snapshot`` asks for claims to go while suspended: see above.) An adoptable claim stays
retained until the JobSet resumes: adopted, a ``whenDeleted: Delete`` JobSet deleted before it
ever ran would delete another run's data. Not so a claim whose controller ownerReference names
the JobSet (upstream's, after a migration): it is the JobSet's already, adopted at once.

Retention (``whenDeleted``, ``whenCompleted``, ``whenFailed``, ``whenScaled``) deletes only claims
the JobSet owns; ``Snapshot`` deletes one only once a ready VolumeSnapshot of it exists
(``snapshots.py``); the retention finalizer is removed last.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Final, Literal

from controller.jobset import api
from controller.jobset.jobsetstatus import ClaimUIDs, SuspensionRelease
from controller.jobset.model import JobSet
from controller.jobset.quantity import quantity
from controller.jobset.volumes import ownership, snapshots, suspension
from controller.jobset.volumes.desired import DesiredClaim, Slot, pod_indexes
from controller.jobset.volumes.model import (
    CLAIM_POD_INDEX_LABEL,
    CLAIM_SCOPE_LABEL,
    CLAIM_TEMPLATE_LABEL,
    FINALIZER,
    REPLACE_LOST_ANNOTATION,
    Keep,
    Retention,
    VolumePolicy,
    storage_of,
)
from controller.jobset.volumes.observed import ClaimView, StorageClasses
from controller.jobset.volumes.record import ClaimRecord, uid_prefix
from controller.jobset.volumes.snapshots import (
    NO_SNAPSHOTS,
    NOT_LATE,
    Overdue,
    Snapshots,
    SnapshotStep,
)
from controller.jobset.volumes.spec import VolumeModel
from controller.jobset.volumes.suspension import RUNNING, Suspension
from controller.runtime.store import Obj

REASON_CLAIM_CREATED = "ClaimCreated"
REASON_CLAIM_ADOPTED = "ClaimAdopted"
REASON_CLAIM_EXPANDED = "ClaimExpanded"
REASON_CLAIM_UPDATED = "ClaimUpdated"
REASON_CLAIM_RETAINED = "ClaimRetained"
REASON_CLAIM_DELETED = "ClaimDeleted"
REASON_CLAIM_REPLACED = "LostClaimReplaced"
REASON_CLAIM_CREATION_FAILED: Final = api.REASON_CLAIM_CREATION_FAILED
REASON_EXPANSION_NOT_SUPPORTED = "VolumeExpansionNotSupported"


class ClaimState(enum.StrEnum):
    MISSING = "Missing"
    ADOPTABLE = "Adoptable"
    CONFLICT = "Conflict"
    PENDING = "Pending"
    WAITING = "WaitingForFirstConsumer"
    BOUND = "Bound"
    DELETING = "Deleting"
    TERMINATING = "Terminating"
    LOST = "Lost"
    RELEASED = "Released"


_IN_USE = frozenset({ClaimState.PENDING, ClaimState.WAITING, ClaimState.BOUND})


@dataclass(frozen=True)
class ClaimLifecycle:
    desired: DesiredClaim
    state: ClaimState
    claim: ClaimView | None = None
    # The uid prefix the stored record has for this claim's slot (None: never recorded).
    recorded: str | None = None
    why: str = ""  # for Conflict and Lost: what happened, for messages
    # Pending: the storage class the claim names, when no such StorageClass exists.
    missing_class: str = ""
    # Missing or Adoptable, and left so until the suspended JobSet is resumed.
    deferred: bool = False
    # Adoptable: why the claim may be adopted (ownership.Proof).
    proof: ownership.Proof | None = None
    # Let go through a snapshot because the JobSet is suspended (suspension.py): never
    # mountable again.
    held: bool = False

    @property
    def name(self) -> str:
        return self.desired.name

    @property
    def mountable(self) -> bool:
        """Pods may use it: the JobSet's own claim, alive, remembered in the stored status, and
        not held for a snapshot (suspension.py)."""
        return (
            not self.held
            and self.state in _IN_USE
            and self.claim is not None
            and self.recorded == uid_prefix(self.claim.uid)
        )

    @property
    def volume_lost(self) -> bool:
        """Lost because its persistent volume is: the claim itself is still there, the same one
        (or one never recorded, e.g. by a controller version without the record)."""
        return (
            self.state is ClaimState.LOST
            and self.claim is not None
            and self.claim.phase == "Lost"
            and self.recorded in (None, uid_prefix(self.claim.uid))
        )

    @property
    def replacement_key(self) -> str:
        """The opt-in entry that accepts an empty replacement of this Lost claim."""
        return f"{self.name}@{self.recorded}"


def deferred_while_suspended(at: ClaimLifecycle) -> bool:
    """Whether ``at`` is a claim a suspended JobSet takes only once resumed: a missing one, or
    one to adopt that is not the JobSet's already (its controller ownerReference)."""
    return at.state is ClaimState.MISSING or (
        at.state is ClaimState.ADOPTABLE and at.proof != "controller-reference"
    )


def waits_for_resume(jobset: JobSet, policy: VolumePolicy) -> bool:
    """Whether the policy's claims that the JobSet lacks wait for it to be resumed: it is
    suspended and the policy does not ask for them while it is (``creationPolicy``)."""
    return jobset.suspend and policy.when_suspended == "WaitForResume"


def action(
    retention: Retention, *, deleting: bool, terminal_state: str, scaled: bool
) -> Keep | None:
    """What ``retention`` does with a claim now (None: keeps it): the JobSet is being deleted
    (whenDeleted), it reached ``terminal_state`` (whenCompleted, whenFailed), or the claim's Job
    was ``scaled`` away (whenScaled). Of several that apply, ``Snapshot`` wins over ``Delete``
    (the data a policy asked to keep is kept), and either over ``Retain``."""
    applying = []
    if deleting:
        applying.append(retention.when_deleted)
    if terminal_state == api.TERMINAL_COMPLETED:
        applying.append(retention.when_completed)
    elif terminal_state == api.TERMINAL_FAILED:
        applying.append(retention.when_failed)
    if scaled:
        applying.append(retention.when_scaled)
    if "Snapshot" in applying:
        return "Snapshot"
    return "Delete" if "Delete" in applying else None


def released_by(retention: Retention, terminal_state: str) -> bool:
    """Whether ``retention`` lets claims go (deleted, or snapshotted and then deleted) once the
    JobSet reached ``terminal_state``."""
    return (
        action(retention, deleting=False, terminal_state=terminal_state, scaled=False) is not None
    )


def _waits_for_consumer(claim: ClaimView, classes: StorageClasses) -> bool:
    return (
        claim.phase == "Pending"
        and not claim.node_selected
        and claim.storage_class is not None
        and claim.storage_class in classes.wait_for_first_consumer
    )


def state_of(
    model: VolumeModel,
    desired: DesiredClaim,
    claim: ClaimView | None,
    classes: StorageClasses,
) -> ClaimLifecycle:
    """The lifecycle state of one desired claim, from what exists and what the JobSet recorded."""
    jobset = model.jobset
    recorded = model.record.get(desired.slot)
    at = ClaimLifecycle(desired, ClaimState.MISSING, claim, recorded)
    if released_by(desired.policy.retention, jobset.status.terminal_state) and (
        claim is None or claim.terminating
    ):
        return replace(at, state=ClaimState.RELEASED)
    if claim is None:
        if recorded is not None:
            return replace(at, state=ClaimState.LOST, why="deleted")
        return at
    if recorded is not None and recorded != uid_prefix(claim.uid):
        return replace(
            at,
            state=ClaimState.LOST,
            why=f"deleted; the name now belongs to another claim (uid {uid_prefix(claim.uid)})",
        )
    adopt = model.adopt.named(desired.name)
    reason = ownership.conflict_reason(claim, desired, jobset, classes.expandable, adopt)
    if reason:
        return replace(at, state=ClaimState.CONFLICT, why=reason)
    if not ownership.owned(claim, jobset):
        return replace(
            at, state=ClaimState.ADOPTABLE, proof=ownership.proof_of(claim, jobset, adopt)
        )
    if claim.terminating:
        return replace(
            at,
            state=ClaimState.DELETING if recorded is None else ClaimState.TERMINATING,
            why="being deleted",
        )
    if claim.phase == "Lost":
        return replace(at, state=ClaimState.LOST, why="its persistent volume is lost")
    if claim.phase == "Bound":
        return replace(at, state=ClaimState.BOUND)
    if _waits_for_consumer(claim, classes):
        return replace(at, state=ClaimState.WAITING)
    if classes.missing(claim.storage_class):
        return replace(at, state=ClaimState.PENDING, missing_class=claim.storage_class or "")
    return replace(at, state=ClaimState.PENDING)


def lifecycle(
    model: VolumeModel, claims: Mapping[str, ClaimView], classes: StorageClasses
) -> list[ClaimLifecycle]:
    """The state of every desired claim, in the order of ``model.desired``."""
    return [state_of(model, d, claims.get(d.name), classes) for d in model.desired]


# ----------------------------------------------------------------------------- retention


def slot_of(claim: ClaimView) -> Slot | None:
    """Where one of our claims sits in the model, from the labels we gave it."""
    template = claim.labels.get(CLAIM_TEMPLATE_LABEL)
    if not template:
        return None
    scope = claim.labels.get(CLAIM_SCOPE_LABEL)
    if scope not in ("Job", "Pod"):
        return (template, None, None, None)
    rjob, index = claim.labels.get(api.REPLICATED_JOB_NAME), claim.labels.get(api.JOB_INDEX)
    if not rjob or index is None or not index.isdigit():
        return None
    if scope == "Job":
        return (template, rjob, int(index), None)
    pod = claim.labels.get(CLAIM_POD_INDEX_LABEL)
    if pod is None or not pod.isdigit():
        return None
    return (template, rjob, int(index), int(pod))


def _policy_of(claim: ClaimView, found: Iterable[VolumePolicy]) -> VolumePolicy | None:
    template = claim.labels.get(CLAIM_TEMPLATE_LABEL)
    return next((p for p in found if any(t.name == template for t in p.templates)), None)


def scaled_away(
    claim: ClaimView,
    policy: VolumePolicy,
    replicas: Callable[[str], int],
    pods: Callable[[str], int] | None = None,
) -> bool:
    """A Job- or Pod-scope claim of a child Job beyond its replicated job's ``replicas`` now, or
    a Pod-scope claim of a completion index beyond ``pods`` (its Jobs' completions now: an
    elastic JobSet resized down; None: no index is beyond)."""
    slot = slot_of(claim)
    if policy.scope == "JobSet" or slot is None or slot[1] is None or slot[2] is None:
        return False
    return slot_scaled_away(slot, replicas, pods)


def slot_scaled_away(
    slot: Slot, replicas: Callable[[str], int], pods: Callable[[str], int] | None = None
) -> bool:
    """The Job (Job scope) or pod (Pod scope) of ``slot`` is beyond the replicated job's size."""
    _, rjob, index, pod = slot
    if rjob is None or index is None:
        return False
    if index >= replicas(rjob):
        return True
    return pod is not None and pods is not None and pod >= pods(rjob)


def sizes_of(
    jobset: JobSet, pods_in_use: Mapping[str, int] | None = None
) -> tuple[Callable[[str], int], Callable[[str], int]]:
    """(replicas, completion indexes) of each replicated job of ``jobset``; 0 for one that is
    gone from the spec (all its claims are scaled away). ``pods_in_use``: the largest
    completions of the replicated job's existing Jobs: an index a Job still has is not scaled
    away, whatever the template says (a Job not resized yet, or never: the controller without
    the ElasticJobSet gate), so that its pods keep their claims."""
    in_use = pods_in_use or {}

    def replicas(name: str) -> int:
        rjob = jobset.replicated_job(name)
        return rjob.replicas if rjob is not None else 0

    def pods(name: str) -> int:
        rjob = jobset.replicated_job(name)
        return max(pod_indexes(rjob) if rjob is not None else 0, in_use.get(name, 0))

    return replicas, pods


def deleted_by(retention: Retention, *, deleting: bool, terminal_state: str, scaled: bool) -> bool:
    """Whether ``retention`` lets a claim go now (``action``: Delete, or Snapshot first)."""
    return (
        action(retention, deleting=deleting, terminal_state=terminal_state, scaled=scaled)
        is not None
    )


@dataclass(frozen=True)
class Release:
    """An owned claim retention lets go now, the policy that made it, and how."""

    claim: ClaimView
    policy: VolumePolicy
    action: Keep
    # A Snapshot of a case that lets the policy's claims go at once (completion, failure,
    # deletion, suspension), not only a scale-down: it may be a group snapshot.
    together: bool = False
    # A release while suspended (suspension.occasion): its snapshots and group are its own.
    occasion: str = ""


def together(retention: Retention, deleting: bool, terminal_state: str) -> bool:
    """Whether the JobSet's completion, failure or deletion snapshots the policy's claims."""
    found = action(retention, deleting=deleting, terminal_state=terminal_state, scaled=False)
    return found == "Snapshot"


def claims_to_release(
    jobset: JobSet,
    policies: Iterable[VolumePolicy],
    claims: Iterable[ClaimView],
    *,
    deleting: bool,
    terminal_state: str,
    pods_in_use: Mapping[str, int] | None = None,
) -> list[Release]:
    """Owned claims whose retention says Delete or Snapshot now (claims already being deleted
    are left out). ``pods_in_use``: see ``sizes_of``."""
    found = tuple(policies)
    replicas, pods = sizes_of(jobset, pods_in_use)
    result = []
    for claim in claims:
        if claim.terminating or not ownership.owned(claim, jobset):
            continue
        policy = _policy_of(claim, found)
        if policy is None:
            continue
        scaled = scaled_away(claim, policy, replicas, pods)
        how = action(
            policy.retention, deleting=deleting, terminal_state=terminal_state, scaled=scaled
        )
        if how is not None:
            result.append(
                Release(claim, policy, how, together(policy.retention, deleting, terminal_state))
            )
    return result


def claims_to_delete(
    jobset: JobSet,
    policies: Iterable[VolumePolicy],
    claims: Iterable[ClaimView],
    *,
    deleting: bool,
    terminal_state: str,
    pods_in_use: Mapping[str, int] | None = None,
) -> list[ClaimView]:
    """The claims of ``claims_to_release``, however they go."""
    return [
        r.claim
        for r in claims_to_release(
            jobset,
            policies,
            claims,
            deleting=deleting,
            terminal_state=terminal_state,
            pods_in_use=pods_in_use,
        )
    ]


# ----------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class ClaimPatch:
    name: str
    patch: Obj
    reason: str  # the Event reason once the patch succeeded
    message: str
    event_type: str = "Normal"


@dataclass(frozen=True)
class ClaimDelete:
    """A claim to delete, exactly as judged: the DELETE carries its uid and resourceVersion as
    preconditions, so a claim made again under the name since (no snapshot of it exists), or
    changed since (a claim seen Pending, so deleted without a snapshot, that has since bound)
    is never the one deleted: the API server answers 409 and the next pass judges it afresh."""

    name: str
    uid: str
    resource_version: str

    @classmethod
    def of(cls, claim: ClaimView) -> ClaimDelete:
        return cls(claim.name, claim.uid, claim.resource_version)


@dataclass
class VolumePlan:
    create: list[DesiredClaim] = field(default_factory=list)
    patch: list[ClaimPatch] = field(default_factory=list)
    delete: list[ClaimDelete] = field(default_factory=list)
    add_finalizer: bool = False
    remove_finalizer: bool = False
    # Every desired claim's state after this pass (claims it creates count as Pending).
    claims: list[ClaimLifecycle] = field(default_factory=list)
    mountable: set[str] = field(default_factory=set)
    conflicts: dict[str, str] = field(default_factory=dict)  # claim name -> why
    expansion_blocked: dict[str, str] = field(default_factory=dict)  # claim name -> why
    # Growth that waits for the claim to be Bound (Kubernetes resizes only Bound claims).
    expansion_deferred: dict[str, str] = field(default_factory=dict)  # claim name -> message
    # The uid record after this pass; the reconciler adds the uids of the claims it creates.
    record: ClaimRecord = field(default_factory=ClaimRecord)
    # Lost claims replaced by an empty one, as the JobSet's annotation accepted: claim → message.
    replaced: dict[str, str] = field(default_factory=dict)
    # restorePolicy: claim created in this pass → the VolumeSnapshot it starts from, and the
    # VolumeGroupSnapshot that snapshot is a member of (restored from a group).
    restore: dict[str, str] = field(default_factory=dict)
    restore_groups: dict[str, str] = field(default_factory=dict)
    # restorePolicy: claim not created yet → why (its snapshot is not ready, or missing).
    restore_waiting: dict[str, str] = field(default_factory=dict)
    # Retention Snapshot: the VolumeSnapshots to create, those to prune (historyLimit), and the
    # claims kept until theirs is ready (claim → step: take, wait or failed).
    create_snapshots: list[Obj] = field(default_factory=list)
    delete_snapshots: list[str] = field(default_factory=list)
    # snapshotPolicy.volumeGroupSnapshotClassName: the VolumeGroupSnapshots to create and prune.
    create_groups: list[Obj] = field(default_factory=list)
    delete_groups: list[str] = field(default_factory=list)
    snapshotting: dict[str, SnapshotStep] = field(default_factory=dict)
    # Of those, the waits that have lasted too long (``snapshots.overdue``; set by the caller
    # that knows the time).
    overdue: Overdue = NOT_LATE
    # retentionPolicy.whenSuspended: Snapshot: the releases after this pass (the status keeps
    # them), and the claims of a release given up (claim → the Warning Event's message).
    suspension_releases: tuple[SuspensionRelease, ...] = ()
    abandoned: dict[str, str] = field(default_factory=dict)

    @property
    def deleted(self) -> list[str]:
        """The names of the claims this pass deletes."""
        return [d.name for d in self.delete]

    @property
    def writes(self) -> int:
        return (
            len(self.create)
            + len(self.patch)
            + len(self.delete)
            + len(self.create_snapshots)
            + len(self.delete_snapshots)
            + len(self.create_groups)
            + len(self.delete_groups)
            + int(self.add_finalizer)
            + int(self.remove_finalizer)
        )

    def claim_uids_with(self, created: Mapping[str, str]) -> tuple[ClaimUIDs, ...]:
        """The uid record after this pass with the claims it created (``created``: their uids
        from the API server's answers, by claim name; the plan could not know them), as the
        status stores it."""
        prefixes = {c.slot: uid_prefix(created[c.name]) for c in self.create if c.name in created}
        return self.record.changed(prefixes).entries()


Growth = Literal["none", "expand", "unsupported", "unbound"]


def growth(claim: ClaimView, desired: DesiredClaim, classes: StorageClasses) -> Growth:
    """What becomes of a storage request the template raised above the claim's.

    ``unsupported``: the claim's class does not allow expansion (reported, never written).
    ``unbound``: the API server refuses (422) to resize a claim that is not Bound, so a PATCH
    would fail on every pass; the claim keeps its size (it is never deleted to change it) and
    grows in the first pass that sees it Bound. ``expand``: patch the request now.
    """
    wanted = quantity(storage_of(desired.template.spec))
    if wanted is None or claim.storage is None or wanted <= claim.storage:
        return "none"
    if (claim.storage_class or "") not in classes.expandable:
        return "unsupported"
    return "expand" if claim.phase == "Bound" else "unbound"


def _update(
    result: VolumePlan, claim: ClaimView, desired: DesiredClaim, classes: StorageClasses
) -> None:
    patch = ownership.update_patch(claim, desired)
    if patch is None:
        return
    name = desired.name
    wanted = storage_of(desired.template.spec)
    grows = growth(claim, desired, classes)
    if grows == "expand":
        message = f"expanding claim {name} from {claim.storage_text} to {wanted}"
        result.patch.append(ClaimPatch(name, patch, REASON_CLAIM_EXPANDED, message))
        return
    if grows == "unsupported":
        result.expansion_blocked[name] = (
            f"claim {name} cannot grow to {wanted}: its storage class "
            f"{claim.storage_class or '(none)'} does not allow volume expansion"
        )
    elif grows == "unbound":
        result.expansion_deferred[name] = (
            f"claim {name} grows from {claim.storage_text} to {wanted} once it is bound "
            "(Kubernetes resizes only Bound claims)"
        )
    trimmed = {k: v for k, v in patch.items() if k != "spec"}  # the rest of the update goes out
    if trimmed:
        message = f"updated claim {name}"
        result.patch.append(ClaimPatch(name, trimmed, REASON_CLAIM_UPDATED, message))


def _scaled_away_slots(model: VolumeModel, pods_in_use: Mapping[str, int]) -> list[Slot]:
    """Recorded slots of Jobs (Pod scope: completion indexes) scaled away under ``whenScaled:
    Delete``: their claims are deleted, not lost. Forgotten from the slot, not only with the
    delete: a status write lost after the delete (a 409) would otherwise keep the slot, and a
    later scale-up would find it Lost."""
    deleting = {
        t.name
        for p in model.policies
        if p.scope != "JobSet" and p.retention.when_scaled == "Delete"
        for t in p.templates
    }
    replicas, pods = sizes_of(model.jobset, pods_in_use)
    return [
        slot
        for slot in model.record.uids
        if slot[0] in deleting and slot_scaled_away(slot, replicas, pods)
    ]


def _grouped(released: Iterable[Release]) -> dict[tuple[str, str], list[Release]]:
    """The Snapshot releases taken as one group per policy (and release while suspended): the
    policy asks for groups, the case lets its claims go together, and every one of them is Bound
    (a group cannot take a claim without a volume; such a policy's claims go one by one)."""
    found: dict[tuple[str, str], list[Release]] = {}
    for one in released:
        if one.action == "Snapshot" and one.together and one.policy.snapshots.group_class_name:
            found.setdefault((snapshots.group_key(one.policy), one.occasion), []).append(one)
    return {k: ones for k, ones in found.items() if all(o.claim.phase == "Bound" for o in ones)}


def release(
    result: VolumePlan,
    released: Iterable[Release],
    found: Snapshots,
    jobset: str,
    namespace: str,
    jobset_uid: str = "",
) -> list[ClaimView]:
    """The claims to delete now of those retention lets go; a ``Snapshot`` one only once its
    snapshot (or its group's, and its member) is ready: until then the snapshot is created, or
    waited for, in ``result``."""
    released = list(released)
    groups = _grouped(released) if jobset_uid else {}
    steps: dict[str, SnapshotStep] = {}
    taken_together: dict[str, str] = {}  # claim → the group it is snapshotted in
    for (key, occasion), ones in groups.items():
        name = snapshots.group_name(jobset, jobset_uid, key, occasion)
        group = found.group(key, name)
        if group is None and found.served:
            result.create_groups.append(
                snapshots.group_object(ones[0].policy, jobset, jobset_uid, namespace, occasion)
            )
        claims = [o.claim for o in ones]
        taken_together.update((c.name, name) for c in claims)
        if not found.served:
            steps.update({c.name: snapshots.retention_step(c, found, occasion) for c in claims})
        else:
            steps.update(snapshots.group_steps(claims, group, found, name, occasion))
    deleted = []
    for one in released:
        claim = one.claim
        if one.action == "Delete":
            deleted.append(claim)
            continue
        step = steps.get(claim.name) or snapshots.retention_step(claim, found, one.occasion)
        # A claim the group did not take (or the API not served) is snapshotted on its own.
        alone = step.snapshot != taken_together.get(claim.name)
        if step.step == "delete":
            deleted.append(claim)
            continue
        if step.step == "take" and alone:
            result.create_snapshots.append(
                snapshots.snapshot_object(claim, one.policy, jobset, namespace, one.occasion)
            )
        result.snapshotting[claim.name] = step
    return deleted


def plan(
    model: VolumeModel,
    claims: Mapping[str, ClaimView],
    classes: StorageClasses,
    *,
    terminal_state: str,
    pods_in_use: Mapping[str, int] | None = None,
    found: Snapshots = NO_SNAPSHOTS,
    suspended: Suspension = RUNNING,
) -> VolumePlan:
    """The volume writes for this pass. ``terminal_state`` is the state after this pass (no claim
    is created for a JobSet that is finishing); deletions follow the stored terminal state.
    ``pods_in_use``: the largest completions of each replicated job's existing Jobs (an elastic
    JobSet's Pod-scope claims are scaled away only once no Job has their index). ``found``: the
    controller's VolumeSnapshots of the JobSet's claims (retention Snapshot, restorePolicy).
    ``suspended``: whether no pod of the suspended JobSet runs any more, and the time
    (retentionPolicy.whenSuspended: Snapshot, ``suspension``)."""
    jobset = model.jobset
    if not model.policies or jobset.deleting:
        # A JobSet being deleted is finalised by ``deletion.plan``, from the stored object
        # whatever its spec: deletion must not depend on parsing it.
        return VolumePlan()

    result = VolumePlan(add_finalizer=FINALIZER not in jobset.finalizers)
    finished = bool(terminal_state)
    releasing = suspension.stored(model)
    states, forget = _let_go_while_suspended(
        model, lifecycle(model, claims, classes), releasing, found
    )
    record: dict[Slot, str] = {}
    after: list[ClaimLifecycle] = []
    for at in states:
        desired, claim = at.desired, at.claim
        if (
            at.state is ClaimState.LOST
            and not at.volume_lost  # the claim is still there: delete it first, then accept
            and not finished  # a finishing JobSet needs no claims: nothing to replace them for
            and (at.name, at.recorded) in model.accepted_losses
        ):
            # The user accepted exactly this loss: forget the old claim, start an empty one.
            forget.append(desired.slot)
            result.replaced[at.name] = (
                f"replacing lost claim {at.name} (uid {at.recorded}, {at.why}) with an empty "
                f"claim, as the annotation {REPLACE_LOST_ANNOTATION} accepts"
            )
            if claim is None:
                result.create.append(desired)
                at = replace(at, state=ClaimState.PENDING, recorded=None)
            elif ownership.owned(claim, jobset) and not claim.terminating:
                record[desired.slot] = uid_prefix(claim.uid)
                at = replace(at, state=ClaimState.PENDING, recorded=None)
            after.append(at)
            continue
        if (
            deferred_while_suspended(at)
            and not finished
            and waits_for_resume(jobset, desired.policy)
        ):
            at = replace(at, deferred=True)
        elif at.state is ClaimState.MISSING and not finished:
            source = snapshots.restore(desired, found)
            if source.wait:
                result.restore_waiting[at.name] = source.wait
                at = replace(at, why=source.wait)
            else:
                result.create.append(desired)
                if source.source is not None:
                    result.restore[at.name] = source.source
                if source.group is not None:
                    result.restore_groups[at.name] = source.group
                at = replace(at, state=ClaimState.PENDING)
        elif at.state is ClaimState.CONFLICT:
            result.conflicts[at.name] = at.why
        elif at.state is ClaimState.ADOPTABLE and claim is not None:
            result.patch.append(
                ClaimPatch(
                    at.name,
                    ownership.adoption_patch(claim, desired, jobset),
                    REASON_CLAIM_ADOPTED,
                    ownership.adoption_message(claim, jobset, at.proof),
                )
            )
            record[desired.slot] = uid_prefix(claim.uid)
        elif at.state in _IN_USE and claim is not None:
            if at.recorded is None:
                record[desired.slot] = uid_prefix(claim.uid)  # ours, not yet remembered
            _update(result, claim, desired, classes)
        if at.mountable:
            result.mountable.add(at.name)
        after.append(at)

    # Retention acts on a terminal state only once it is stored, one pass later: a leader that
    # dies between deleting claims and writing the status must not have deleted them for a
    # completion (or failure) nobody recorded. Found by the chaos soak.
    released = claims_to_release(
        jobset,
        model.policies,
        claims.values(),
        deleting=False,
        terminal_state=jobset.status.terminal_state,
        pods_in_use=pods_in_use,
    )
    deleted = release(result, released, found, jobset.name, jobset.namespace, jobset.uid)
    elsewhere = {r.claim.name for r in released}
    held = _while_suspended(result, model, claims, releasing, found, elsewhere)
    if started := suspension.starting(
        model, _bound(states), releasing, suspended, finished=finished or jobset.finished
    ):
        held = replace(held, held=held.held | _held_by(started, states))
    result.suspension_releases = tuple(sorted((*held.releases, *started), key=_by_template))
    result.mountable -= held.held
    after = [replace(at, held=True) if at.name in held.held else at for at in after]
    deleted.extend(held.deleted)
    result.delete = [ClaimDelete.of(c) for c in deleted]
    result.delete_snapshots = [*snapshots.prune(model.policies, found), *held.given_up]
    result.delete_groups = [*snapshots.prune_groups(model.policies, found), *held.groups_given_up]
    forget.extend(s for s in map(slot_of, deleted) if s is not None)
    forget.extend(_scaled_away_slots(model, pods_in_use or {}))
    result.record = model.record.changed(record, forget)
    result.claims = after
    return result


# ----------------------------------------------------------------------------- suspension


def _let_go_while_suspended(
    model: VolumeModel,
    states: list[ClaimLifecycle],
    releasing: Mapping[str, SuspensionRelease],
    found: Snapshots,
) -> tuple[list[ClaimLifecycle], list[Slot]]:
    """``states`` with the recorded claims a release while suspended let go through a ready
    snapshot (gone, or being deleted) no longer Lost: ``Missing`` (made again from it) or
    ``Deleting``; and their slots, which the record forgets. The pass that deleted one may have
    lost its status write, record and all."""
    result, forget = [], []
    for at in states:
        entry = releasing.get(snapshots.group_key(at.desired.policy))
        gone = (at.state is ClaimState.LOST and at.claim is None) or (
            at.state is ClaimState.TERMINATING
        )
        if (
            entry is not None
            and gone
            and at.recorded is not None
            and suspension.released_through(entry, at.name, at.recorded, found, model.jobset)
        ):
            state = ClaimState.MISSING if at.claim is None else ClaimState.DELETING
            at = replace(at, state=state, recorded=None, why="")
            forget.append(at.desired.slot)
        result.append(at)
    return result, forget


@dataclass(frozen=True)
class _Held:
    """What the releases while suspended come to in this pass: the stored ones that go on, the
    names of the claims held, those deleted now (their snapshot is ready), and the failed
    snapshots and groups of releases given up, to delete."""

    releases: tuple[SuspensionRelease, ...] = ()
    held: frozenset[str] = frozenset()
    deleted: tuple[ClaimView, ...] = ()
    given_up: tuple[str, ...] = ()
    groups_given_up: tuple[str, ...] = ()


def _by_template(entry: SuspensionRelease) -> str:
    return entry.template


def _bound(states: Iterable[ClaimLifecycle]) -> Iterator[tuple[VolumePolicy, ClaimView]]:
    """The JobSet's own Bound claims, with their policies: what a release may start with."""
    for at in states:
        if at.state is ClaimState.BOUND and at.claim is not None:
            yield at.desired.policy, at.claim


def _while_suspended(
    result: VolumePlan,
    model: VolumeModel,
    claims: Mapping[str, ClaimView],
    releasing: Mapping[str, SuspensionRelease],
    found: Snapshots,
    elsewhere: set[str],
) -> _Held:
    """The stored releases while suspended, acted on: their Bound claims (but those another
    retention case lets go, ``elsewhere``) snapshotted, waited for, or deleted, into ``result``;
    a release with none left ends, and one given up (``suspension.abandons``) has its failed
    snapshots deleted and its claims mounted again."""
    jobset = model.jobset
    releases: list[SuspensionRelease] = []
    held: set[str] = set()
    deleted: list[ClaimView] = []
    given_up = VolumePlan()
    for policy in model.policies:
        entry = releasing.get(snapshots.group_key(policy))
        if entry is None:
            continue
        holding = [
            c
            for c in suspension.held(entry, policy, claims.values(), jobset)
            if c.phase == "Bound" and c.name not in elsewhere
        ]
        if not holding:
            continue  # each of its claims is gone: it ended
        grouped = suspension.together(policy, holding, claims.values(), jobset)
        occasion = suspension.occasion(entry)
        ones = [Release(c, policy, "Snapshot", grouped, occasion) for c in holding]
        scratch = VolumePlan()
        gone = release(scratch, ones, found, jobset.name, jobset.namespace, jobset.uid)
        if suspension.abandons(scratch.snapshotting.values(), jobset):
            _give_up(result, given_up, entry, holding, scratch, found, jobset)
            continue
        releases.append(entry)
        held.update(c.name for c in holding)
        deleted.extend(gone)
        result.create_snapshots.extend(scratch.create_snapshots)
        result.create_groups.extend(scratch.create_groups)
        result.snapshotting.update(scratch.snapshotting)
    return _Held(
        tuple(releases),
        frozenset(held),
        tuple(deleted),
        tuple(given_up.delete_snapshots),
        tuple(given_up.delete_groups),
    )


def _give_up(
    result: VolumePlan,
    given_up: VolumePlan,
    entry: SuspensionRelease,
    holding: list[ClaimView],
    scratch: VolumePlan,
    found: Snapshots,
    jobset: JobSet,
) -> None:
    """A release given up: each claim whose snapshot failed is named in a Warning Event, and
    that snapshot (or the failed group) is deleted: it is no one's checkpoint, and the claim,
    mounted again, has moved on from it. Members of a group are the snapshot controller's."""
    occasion = suspension.occasion(entry)
    group = snapshots.group_name(jobset.name, jobset.uid, entry.template, occasion)
    for claim in holding:
        step = scratch.snapshotting.get(claim.name)
        if step is None or step.step != "failed":
            continue
        result.abandoned[claim.name] = suspension.abandoned_message(claim.name, step)
        if not found.served:
            continue
        if step.snapshot == snapshots.snapshot_name(claim, occasion):
            given_up.delete_snapshots.append(step.snapshot)
        elif step.snapshot == group and group not in given_up.delete_groups:
            given_up.delete_groups.append(group)


def _held_by(started: Iterable[SuspensionRelease], states: Iterable[ClaimLifecycle]) -> set[str]:
    """The claims the releases starting in this pass hold: from now on none is mountable."""
    uids = {(e.template, u) for e in started for u in e.uids}
    return {
        at.name
        for at in states
        if at.claim is not None
        and (snapshots.group_key(at.desired.policy), uid_prefix(at.claim.uid)) in uids
    }
