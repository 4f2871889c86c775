"""What the JobSet's status says about its claims: counts, the uid record, conditions (pure).

Everything here is read off the lifecycle (lifecycle.py): the status reports each desired claim's
state, so it can say no more and no less than the controller knows.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from controller.jobset import api
from controller.jobset.jobsetstatus import Condition, TemplateStatus, VolumesStatus
from controller.jobset.volumes import ownership, suspension
from controller.jobset.volumes.annotations import ADOPT_ANNOTATION, adopt_command, entry_for
from controller.jobset.volumes.lifecycle import ClaimLifecycle, ClaimState, VolumePlan, released_by
from controller.jobset.volumes.model import REPLACE_LOST_ANNOTATION, as_dict, as_list, listing
from controller.jobset.volumes.rejections import rejections
from controller.jobset.volumes.spec import VolumeModel
from controller.runtime.store import Obj

VOLUMES_READY: Final = api.VOLUMES_READY
VOLUME_CLAIM_CONFLICT = "VolumeClaimConflict"
# Retention Snapshot: whether the snapshots the claims wait for are ready (written only for a
# JobSet with a Snapshot retention policy).
VOLUME_SNAPSHOTS_READY = "VolumeSnapshotsReady"
EXPANSION_BLOCKED = "VolumeExpansionBlocked"
# Entries of the adopt-claims or replace-lost-claims annotations that were not accepted.
ANNOTATIONS_REJECTED = "VolumeAnnotationsRejected"
# Volume policy annotations (controller.api.volumekeys) that set a field the spec sets to another
# value: the annotation counts (jobset.volumes.metadata).
POLICY_OVERRIDDEN = "VolumePolicyOverridden"
REASON_ANNOTATION_OVERRIDES_SPEC = "AnnotationOverridesSpec"
REASON_NO_OVERRIDE = "NoOverride"

# VolumesReady reasons.
REASON_NO_VOLUMES = "NoVolumeClaims"
REASON_CLAIMS_BOUND = "ClaimsBound"
REASON_WAITING_FOR_FIRST_CONSUMER = "WaitingForFirstConsumer"
REASON_CLAIM_CONFLICT = "ClaimConflict"
REASON_CLAIMS_MISSING: Final = api.REASON_CLAIMS_MISSING
REASON_CLAIMS_LOST = "ClaimsLost"
# A claim the JobSet had is being deleted by someone else: it will be Lost.
REASON_CLAIMS_TERMINATING = "ClaimsTerminating"
# The JobSet finished and its retention (whenCompleted/whenFailed: Delete) released the claims.
REASON_CLAIMS_RELEASED = "ClaimsReleased"
REASON_CLAIMS_PENDING = "ClaimsPending"
# restorePolicy: claims not created until the snapshot they start from is ready (or exists).
REASON_WAITING_FOR_SNAPSHOT = "WaitingForSnapshot"
# The JobSet is suspended: its missing claims are created (adopted) once it is resumed.
REASON_WAITING_FOR_RESUME = "WaitingForResume"
# Pending claims whose storageClassName names no StorageClass: nothing will provision them.
REASON_STORAGE_CLASS_NOT_FOUND = "StorageClassNotFound"
# Other conditions' reasons.
REASON_NO_CONFLICT = "NoConflict"
REASON_NO_EXPANSION_PENDING = "NoExpansionPending"
REASON_EXPANSION_NOT_SUPPORTED = "VolumeExpansionNotSupported"
# A raised storage request waits for the claim to be Bound (then it is expanded).
REASON_CLAIM_NOT_BOUND = "ClaimNotBound"
# VolumeAnnotationsRejected reasons: which annotation has entries that were not accepted.
REASON_ADOPT_CLAIMS_REJECTED = "AdoptClaimsRejected"
REASON_REPLACE_LOST_CLAIMS_REJECTED = "ReplaceLostClaimsRejected"
REASON_ANNOTATIONS_ACCEPTED = "VolumeAnnotationsAccepted"
# VolumeSnapshotsReady reasons.
REASON_NO_SNAPSHOT_PENDING = "NoSnapshotPending"
REASON_SNAPSHOTS_PENDING = "SnapshotsPending"
REASON_SNAPSHOT_FAILED = "SnapshotFailed"
REASON_SNAPSHOT_NOT_READY = "SnapshotNotReady"

# Lost claims listed in the command that accepts their replacement; beyond it the message says
# where to find the rest (status.volumes.claimUIDs).
_COMMAND_LIMIT = 20


_OURS = frozenset(
    {
        ClaimState.PENDING,
        ClaimState.WAITING,
        ClaimState.BOUND,
        ClaimState.DELETING,
        ClaimState.TERMINATING,
    }
)


def template_counts(model: VolumeModel, claims: Iterable[ClaimLifecycle]) -> list[TemplateStatus]:
    """Per template: scope and counts of claims desired / existing (the JobSet's) / Bound /
    Pending / Lost / in conflict. ``claimName`` is given for JobSet scope only."""
    policies = {t.name: p for p in model.policies for t in p.templates}
    # desired, existing, bound, pending, lost, conflicts, restored, per template
    counts = {name: [0] * 7 for name in policies}
    restored_from: dict[str, str] = {}
    # Per template: the groups its restored claims came from (None: not from a group).
    groups: dict[str, set[str | None]] = {}
    for at in claims:
        name = at.desired.template.name
        entry = counts[name]
        entry[0] += 1
        state = at.state
        if state is ClaimState.CONFLICT:
            entry[5] += 1
        elif state is ClaimState.LOST:
            entry[4] += 1
            # A claim whose volume is lost still exists, and is still the JobSet's.
            entry[1] += int(at.volume_lost)
        elif state in _OURS:
            entry[1] += 1
            claim = at.claim
            source = claim.restored_from if claim is not None else None
            policy = policies[name]
            if claim is not None and source and policy.restore is not None:
                entry[6] += 1
                if policy.scope == "JobSet":
                    restored_from[name] = source
                else:
                    groups.setdefault(name, set()).add(claim.restored_from_group)
            if state is ClaimState.BOUND:
                entry[2] += 1
            elif state in (ClaimState.PENDING, ClaimState.WAITING):
                entry[3] += 1
    result = []
    for name, policy in policies.items():
        desired, existing, bound, pending, lost, conflicts, restored = counts[name]
        result.append(
            TemplateStatus(
                name,
                policy.scope,
                desired,
                existing,
                bound,
                pending,
                lost,
                conflicts,
                model.slot_name((name, None, None, None)) if policy.scope == "JobSet" else None,
                restored if policy.restore is not None else None,
                restored_from.get(name),
                _one_group(groups.get(name, set())),
            )
        )
    return result


def _one_group(groups: set[str | None]) -> str | None:
    """The VolumeGroupSnapshot every restored claim of a template came from, when they all
    came from the same one (each from its own member)."""
    return next(iter(groups)) if len(groups) == 1 else None


def volumes_status(model: VolumeModel, vplan: VolumePlan) -> VolumesStatus:
    """``status.volumes``: the counts per template, the uid record and the releases while
    suspended."""
    return VolumesStatus(
        tuple(template_counts(model, vplan.claims)),
        vplan.record.entries(),
        vplan.suspension_releases,
    )


def _by_state(claims: Iterable[ClaimLifecycle]) -> dict[ClaimState, list[ClaimLifecycle]]:
    found: dict[ClaimState, list[ClaimLifecycle]] = {}
    for at in claims:
        found.setdefault(at.state, []).append(at)
    return found


def _lost_message(lost: list[ClaimLifecycle], total: int, jobset: str, namespace: str) -> str:
    described = [f"{at.name} ({at.why})" for at in lost]
    text = (
        f"{len(lost)} of {total} claims this JobSet had are lost, with their data: "
        f"{listing(described)}. The Jobs that mount them wait; they are not replaced by empty "
        "claims unless you accept it"
    )
    replaceable = [at for at in lost if not at.volume_lost]
    if not replaceable:
        return text + " (a claim whose volume is lost must be deleted first)"
    value = ",".join(at.replacement_key for at in replaceable[:_COMMAND_LIMIT])
    more = len(replaceable) - _COMMAND_LIMIT
    text += (
        f": kubectl annotate jobset {jobset} -n {namespace} --overwrite "
        f"{REPLACE_LOST_ANNOTATION}={value}"
    )
    if more > 0:
        text += (
            f" (and {more} more, as <claim>@<uid prefix>; the prefixes are in "
            "status.volumes.claimUIDs)"
        )
    return text


def _no_class_message(claims: list[ClaimLifecycle], total: int) -> str:
    by_class: dict[str, list[str]] = {}
    for at in claims:
        by_class.setdefault(at.missing_class, []).append(at.name)
    described = "; ".join(
        f"{cls} (claims {listing(names)})" for cls, names in sorted(by_class.items())
    )
    noun = "class does" if len(by_class) == 1 else "classes do"
    return (
        f"{len(claims)} of {total} claims stay Pending: the storage {noun} not exist: "
        f"{described}; they are provisioned once it is created"
    )


_TAKEN = (ClaimState.MISSING, ClaimState.ADOPTABLE)


def _resume_message(missing: list[str], total: int, restored: bool) -> str:
    """``restored``: some of them were let go through a snapshot while suspended."""
    text = (
        f"{len(missing)} of {total} claims are created when the JobSet is resumed: "
        f"{listing(missing)}. It is suspended; a volume claim policy with "
        "creationPolicy.whenSuspended: Create makes its claims while the JobSet waits"
    )
    if restored:
        text += (
            "; those retentionPolicy.whenSuspended: Snapshot let go start from their newest "
            "snapshot"
        )
    return text


def _held_message(held: list[str], total: int) -> str:
    return (
        f"{len(held)} of {total} claims are let go through a snapshot as the JobSet was "
        f"suspended (retentionPolicy.whenSuspended: Snapshot): {listing(held)}. Each is deleted "
        "once its snapshot is ready (VolumeSnapshotsReady) and made again from it when the "
        "JobSet is resumed; the Jobs that mount them wait until then"
    )


def volumes_ready(model: VolumeModel, claims: list[ClaimLifecycle]) -> Condition:
    """The VolumesReady condition.

    Ready when every desired claim is this JobSet's and Bound, or Pending only because its
    WaitForFirstConsumer storage class binds once a pod is scheduled. A Pending claim whose
    storage class does not exist is said so: it would wait forever, not for a provisioner.
    """
    total = len(claims)
    if not total:
        return Condition(
            VOLUMES_READY, "True", REASON_NO_VOLUMES, "the JobSet needs no volume claims", None
        )
    by = _by_state(claims)

    def names(*states: ClaimState) -> list[str]:
        return [at.name for s in states for at in by.get(s, [])]

    def not_ready(reason: str, message: str, event_type: str | None = None) -> Condition:
        return Condition(VOLUMES_READY, "False", reason, message, event_type)

    if conflicts := names(ClaimState.CONFLICT):
        return not_ready(
            REASON_CLAIM_CONFLICT,
            f"{len(conflicts)} of {total} claims exist but are not this JobSet's and cannot be "
            f"adopted: {listing(conflicts)}",
        )
    if lost := by.get(ClaimState.LOST):
        return not_ready(
            REASON_CLAIMS_LOST,
            _lost_message(lost, total, model.jobset.name, model.jobset.namespace),
            "Warning",
        )
    if terminating := names(ClaimState.TERMINATING):
        return not_ready(
            REASON_CLAIMS_TERMINATING,
            f"{len(terminating)} of {total} claims this JobSet had are being deleted, not by "
            f"this controller: {listing(terminating)}. Kubernetes keeps each until the pods "
            "using it stop; then it is lost, and not replaced by an empty claim",
            "Warning",
        )
    if held := [at.name for at in claims if at.held]:
        return not_ready(REASON_WAITING_FOR_SNAPSHOT, _held_message(held, total))
    missing = names(ClaimState.MISSING, ClaimState.ADOPTABLE, ClaimState.DELETING)
    restoring = [at for at in by.get(ClaimState.MISSING, []) if at.why]
    if (released := names(ClaimState.RELEASED)) and not missing:
        return not_ready(
            REASON_CLAIMS_RELEASED,
            f"{len(released)} of {total} claims were released by the retention policy once "
            f"the JobSet was {model.jobset.status.terminal_state}: {listing(released)}",
        )
    taken = [at for state in _TAKEN for at in by.get(state, [])]
    if missing and not by.get(ClaimState.DELETING) and all(at.deferred for at in taken):
        restored = any(suspension.snapshots_on_suspend(at.desired.policy) for at in taken)
        return not_ready(REASON_WAITING_FOR_RESUME, _resume_message(missing, total, restored))
    if restoring and len(restoring) == len(missing):
        first = restoring[0].why
        more = (
            f" ({len(restoring) - 1} more claims wait for a snapshot)" if len(restoring) > 1 else ""
        )
        return not_ready(
            REASON_WAITING_FOR_SNAPSHOT,
            f"{len(restoring)} of {total} claims wait for the snapshot they start from: "
            f"{first}{more}",
        )
    if missing:
        return not_ready(
            REASON_CLAIMS_MISSING,
            f"{len(missing)} of {total} claims are not created (or adopted) yet: "
            f"{listing(missing)}",
        )
    if no_class := [at for at in by.get(ClaimState.PENDING, []) if at.missing_class]:
        return not_ready(
            REASON_STORAGE_CLASS_NOT_FOUND, _no_class_message(no_class, total), "Warning"
        )
    if pending := names(ClaimState.PENDING):
        return not_ready(
            REASON_CLAIMS_PENDING,
            f"{len(pending)} of {total} claims are waiting for a volume to be provisioned or "
            f"bound: {listing(pending)}",
        )
    if waiting := names(ClaimState.WAITING):
        return Condition(
            VOLUMES_READY,
            "True",
            REASON_WAITING_FOR_FIRST_CONSUMER,
            f"all {total} claims exist; {len(waiting)} bind when their first pod is scheduled "
            f"(WaitForFirstConsumer): {listing(waiting)}",
            None,
        )
    return Condition(
        VOLUMES_READY, "True", REASON_CLAIMS_BOUND, f"all {total} claims are bound", None
    )


def conditions(model: VolumeModel, vplan: VolumePlan) -> list[Condition]:
    """The volume conditions of the JobSet after this pass; () for a JobSet without volumes."""
    if not model.policies:
        return []
    result = [volumes_ready(model, vplan.claims)]
    if vplan.conflicts:
        text = "; ".join(f"{name}: {why}" for name, why in sorted(vplan.conflicts.items()))
        text += _adopt_hint(model, vplan.claims)
        result.append(
            Condition(VOLUME_CLAIM_CONFLICT, "True", REASON_CLAIM_CONFLICT, text, "Warning")
        )
    else:
        result.append(
            Condition(
                VOLUME_CLAIM_CONFLICT, "False", REASON_NO_CONFLICT, "no conflicting claims", None
            )
        )
    if vplan.expansion_blocked or vplan.expansion_deferred:
        # A class that cannot expand is the news (a Warning); growth that waits for binding
        # happens by itself.
        why = {**vplan.expansion_deferred, **vplan.expansion_blocked}
        text = "; ".join(message for _, message in sorted(why.items()))
        if vplan.expansion_blocked:
            reason, event_type = REASON_EXPANSION_NOT_SUPPORTED, "Warning"
        else:
            reason, event_type = REASON_CLAIM_NOT_BOUND, "Normal"
        result.append(Condition(EXPANSION_BLOCKED, "True", reason, text, event_type))
    else:
        result.append(
            Condition(
                EXPANSION_BLOCKED,
                "False",
                REASON_NO_EXPANSION_PENDING,
                "no blocked expansion",
                None,
            )
        )
    result.append(_annotations_rejected(model, vplan))
    result.append(_policy_overridden(model))
    if any(p.retention.snapshots for p in model.policies):
        result.append(snapshots_ready(vplan))
    return result


def snapshots_ready(vplan: VolumePlan) -> Condition:
    """VolumeSnapshotsReady: the claims retention keeps until their snapshot is ready. A failed
    snapshot is a Warning: the claim stays (and costs) until it is dealt with; so is one not
    ready long after it was asked for, with no error said (``VolumePlan.overdue``)."""
    failed = {n: s for n, s in vplan.snapshotting.items() if s.step == "failed"}
    if failed:
        text = "; ".join(
            f"claim {name}: snapshot {s.snapshot} failed: {s.why}"
            for name, s in sorted(failed.items())
        )
        return Condition(
            VOLUME_SNAPSHOTS_READY,
            "False",
            REASON_SNAPSHOT_FAILED,
            f"{len(failed)} claims are kept because their snapshot failed ({text}); delete the "
            "failed VolumeSnapshot to have it taken again",
            "Warning",
        )
    if vplan.overdue.claims:
        waiting = [f"{name} ({s.snapshot})" for name, s in sorted(vplan.overdue.claims.items())]
        return Condition(
            VOLUME_SNAPSHOTS_READY,
            "False",
            REASON_SNAPSHOT_NOT_READY,
            f"{len(waiting)} claims are kept: their snapshot is not ready long after it was "
            f"asked for, and reports no error: {listing(waiting)}. The claims go once it is "
            "ready; if it never becomes ready, check that the snapshot controller and the CSI "
            "driver's csi-snapshotter run (kubectl describe volumesnapshot <name>, and its "
            "VolumeSnapshotContent)",
            "Warning",
        )
    if vplan.snapshotting:
        waiting = [f"{name} ({s.snapshot})" for name, s in sorted(vplan.snapshotting.items())]
        return Condition(
            VOLUME_SNAPSHOTS_READY,
            "False",
            REASON_SNAPSHOTS_PENDING,
            f"{len(waiting)} claims are deleted once their snapshot is ready: {listing(waiting)}",
            None,
        )
    return Condition(
        VOLUME_SNAPSHOTS_READY,
        "True",
        REASON_NO_SNAPSHOT_PENDING,
        "no claim waits for a snapshot",
        None,
    )


def _adopt_hint(model: VolumeModel, claims: Iterable[ClaimLifecycle]) -> str:
    """The one command that adopts every conflicting claim without proof (keeping the entries the
    annotation has), for the user to run if they hold this JobSet's data; "" when none."""
    jobset = model.jobset
    unproven = [
        at.claim
        for at in claims
        if at.state is ClaimState.CONFLICT
        and at.claim is not None
        and ownership.adoption_hint(at.claim, jobset)
    ]
    if not unproven:
        return ""
    offered = [entry_for(c.name, c.uid) for c in unproven]
    named = {c.name for c in unproven}
    kept = [str(e) for e in model.adopt.entries if e.claim not in named]
    command = adopt_command(jobset.namespace, jobset.name, [*kept, *offered])
    return f". To adopt the claims without proof that hold this JobSet's data: {command}"


def _annotations_rejected(model: VolumeModel, vplan: VolumePlan) -> Condition:
    rejected = rejections(model, vplan.claims)
    if not rejected:
        return Condition(
            ANNOTATIONS_REJECTED,
            "False",
            REASON_ANNOTATIONS_ACCEPTED,
            "no rejected entries in the JobSet's volume annotations",
            None,
        )
    if len(rejected) > 1:
        reason = ANNOTATIONS_REJECTED
    elif ADOPT_ANNOTATION in rejected:
        reason = REASON_ADOPT_CLAIMS_REJECTED
    else:
        reason = REASON_REPLACE_LOST_CLAIMS_REJECTED
    text = "; ".join(f"{key}: {'; '.join(found)}" for key, found in sorted(rejected.items()))
    return Condition(
        ANNOTATIONS_REJECTED, "True", reason, f"entries not accepted: {text}", "Warning"
    )


def _policy_overridden(model: VolumeModel) -> Condition:
    """VolumePolicyOverridden: which annotations set a field the spec sets otherwise (written
    False only once it was True: a JobSet without overrides never shows it)."""
    overrides = [o for p in model.policies for o in p.overrides]
    if overrides:
        text = "; ".join(overrides) + " (the annotation counts: docs/volumes.md)"
        return Condition(
            POLICY_OVERRIDDEN, "True", REASON_ANNOTATION_OVERRIDES_SPEC, text, "Warning"
        )
    return Condition(
        POLICY_OVERRIDDEN,
        "False",
        REASON_NO_OVERRIDE,
        "no volume policy annotation sets a field the spec sets to another value",
        None,
    )


def waits_for_volumes(jobset: Obj) -> bool:
    """Whether a JobSet, as stored, may be waiting for claims that the cluster refused (a quota)
    or cannot provision (a missing storage class): it asks for claims, has not finished, and its
    VolumesReady is not True, or not written yet (a refused pass may end before its status)."""
    spec, status = as_dict(jobset.get("spec")), as_dict(jobset.get("status"))
    if not (spec.get("volumeClaimPolicies") or spec.get("volumePolicy")):
        return False
    if status.get("terminalState"):
        return False
    for found in as_list(status.get("conditions")):
        if isinstance(found, dict) and found.get("type") == VOLUMES_READY:
            # A suspended JobSet's claims wait for it to be resumed, not for the cluster.
            return (
                found.get("status") != "True" and found.get("reason") != REASON_WAITING_FOR_RESUME
            )
    return True


def released_claims(model: VolumeModel) -> set[str]:
    """Claims whose retention says Delete for the terminal state the JobSet reached."""
    state = model.jobset.status.terminal_state
    return {c.name for c in model.desired if released_by(c.policy.retention, state)}
