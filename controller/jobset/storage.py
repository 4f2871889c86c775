"""The volume part of a reconcile: which claims to create, adopt, update, retain or delete (pure).

``volumes.py`` knows the rules (names, compatibility, retention); this module applies them to one
observed state and returns the writes, in the order volumes.md requires:
- claims are created (or adopted) before any Job that mounts them — Jobs wait for ``usable``;
- a conflicting claim is never written; Jobs that would mount it are not created;
- retention runs on completion, failure, scale-down and deletion; the finalizer goes last.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.jobset import volumes
from controller.jobset.model import JobSet
from controller.jobset.volumes import DesiredClaim, VolumePolicy

Obj = dict[str, Any]

REASON_CLAIM_CREATED = "ClaimCreated"
REASON_CLAIM_ADOPTED = "ClaimAdopted"
REASON_CLAIM_EXPANDED = "ClaimExpanded"
REASON_CLAIM_UPDATED = "ClaimUpdated"
REASON_CLAIM_RETAINED = "ClaimRetained"
REASON_CLAIM_DELETED = "ClaimDeleted"
REASON_CLAIM_CONFLICT = "ClaimConflict"
REASON_CLAIM_CREATION_FAILED = "ClaimCreationFailed"
REASON_EXPANSION_NOT_SUPPORTED = "VolumeExpansionNotSupported"

VOLUMES_READY = "VolumesReady"
VOLUME_CLAIM_CONFLICT = "VolumeClaimConflict"


@dataclass(frozen=True)
class ClaimPatch:
    name: str
    patch: Obj
    reason: str  # the Event reason once the patch succeeded
    message: str


@dataclass
class VolumePlan:
    create: list[Obj] = field(default_factory=list)
    patch: list[ClaimPatch] = field(default_factory=list)
    delete: list[str] = field(default_factory=list)
    add_finalizer: bool = False
    remove_finalizer: bool = False
    usable: set[str] = field(default_factory=set)
    conflicts: dict[str, str] = field(default_factory=dict)  # claim name -> why
    expansion_blocked: dict[str, str] = field(default_factory=dict)  # claim name -> why
    status: list[Obj] = field(default_factory=list)
    ready: tuple[bool, str, str] = (True, "", "")

    @property
    def writes(self) -> int:
        return (
            len(self.create)
            + len(self.patch)
            + len(self.delete)
            + int(self.add_finalizer)
            + int(self.remove_finalizer)
        )


@dataclass(frozen=True)
class StorageClasses:
    """What the controller needs to know of StorageClasses (from its cache)."""

    wait_for_first_consumer: frozenset[str] = frozenset()
    expandable: frozenset[str] = frozenset()


def _storage(obj: Obj) -> str | None:
    value = (((obj.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")
    return str(value) if value is not None else None


def _grows(existing: Obj, desired: DesiredClaim) -> bool:
    want, have = _storage(desired.object), _storage(existing)
    if want is None or have is None:
        return False
    try:
        return volumes.parse_quantity(want) > volumes.parse_quantity(have)
    except ValueError:
        return False


def _without_storage_growth(patch: Obj) -> Obj | None:
    """The same claim patch minus the storage request (for classes that cannot expand)."""
    trimmed = {k: v for k, v in patch.items() if k != "spec"}
    return trimmed or None


def plan(
    jobset: JobSet,
    policies: tuple[VolumePolicy, ...],
    claims: Mapping[str, Obj],
    classes: StorageClasses,
    *,
    terminal_state: str,
) -> VolumePlan:
    """The volume writes for this pass. ``terminal_state`` is the state after this pass (no claim
    is created for a JobSet that is finishing); deletions follow the stored terminal state."""
    result = VolumePlan()
    if not policies:
        if jobset.deleting and volumes.FINALIZER in jobset.finalizers:
            result.remove_finalizer = True  # policies cannot go away, but never block deletion
        return result
    existing = list(claims.values())

    if jobset.deleting:
        if volumes.FINALIZER not in jobset.finalizers:
            return result
        result.delete = volumes.claims_to_delete(
            jobset, policies, existing, deleting=True, terminal_state=terminal_state
        )
        for name in volumes.claims_to_retain(
            jobset, policies, existing, deleting=True, terminal_state=terminal_state
        ):
            result.patch.append(
                ClaimPatch(
                    name,
                    volumes.retain_patch(claims[name], jobset),
                    REASON_CLAIM_RETAINED,
                    f"retained claim {name} (whenDeleted: Retain); a JobSet named "
                    f"{jobset.name} can adopt it",
                )
            )
        # Deletes accepted (pvc-protection may keep a claim until its pods are gone) and
        # retention recorded: the finalizer can go. Otherwise the next pass checks again.
        result.remove_finalizer = not result.delete and not result.patch
        return result

    if volumes.FINALIZER not in jobset.finalizers:
        result.add_finalizer = True
    desired = volumes.desired_claims(jobset, policies)
    finished = bool(terminal_state)
    for claim in desired:
        found = claims.get(claim.name)
        if found is None:
            if not finished:
                result.create.append(claim.object)
            continue
        if (found.get("metadata") or {}).get("deletionTimestamp"):
            continue
        kind = volumes.classify(found, claim, jobset)
        if kind == "conflict":
            result.conflicts[claim.name] = volumes.conflict_reason(found, claim, jobset)
        elif kind == "adoptable":
            result.patch.append(
                ClaimPatch(
                    claim.name,
                    volumes.adoption_patch(found, claim, jobset),
                    REASON_CLAIM_ADOPTED,
                    f"adopted claim {claim.name}, retained from an earlier JobSet {jobset.name}",
                )
            )
        else:
            _update(result, found, claim, classes)

    # Retention acts on a terminal state only once it is stored, one pass later: a leader that
    # dies between deleting claims and writing the status must not have deleted them for a
    # completion (or failure) nobody recorded. Found by the chaos soak.
    result.delete = volumes.claims_to_delete(
        jobset, policies, existing, deleting=False, terminal_state=jobset.status.terminal_state
    )
    result.usable = volumes.usable_claims(jobset, desired, existing)
    # The status describes the claims as they are after this pass: the ones it creates exist
    # (Pending), so the first status a JobSet gets does not say they are missing.
    after = existing + [{**obj, "status": {"phase": "Pending"}} for obj in result.create]
    result.status = volumes.volume_status(jobset, policies, after)
    result.ready = volumes.volumes_ready(
        jobset, policies, after, set(classes.wait_for_first_consumer)
    )
    return result


def _update(result: VolumePlan, found: Obj, claim: DesiredClaim, classes: StorageClasses) -> None:
    patch = volumes.update_patch(found, claim)
    if patch is None:
        return
    name = claim.name
    storage_class = str((found.get("spec") or {}).get("storageClassName") or "")
    if _grows(found, claim):
        if storage_class not in classes.expandable:
            result.expansion_blocked[name] = (
                f"claim {name} cannot grow to {_storage(claim.object)}: its storage class "
                f"{storage_class or '(none)'} does not allow volume expansion"
            )
            trimmed = _without_storage_growth(patch)
            if trimmed is not None:
                result.patch.append(
                    ClaimPatch(name, trimmed, REASON_CLAIM_UPDATED, f"updated claim {name}")
                )
            return
        result.patch.append(
            ClaimPatch(
                name,
                patch,
                REASON_CLAIM_EXPANDED,
                f"expanding claim {name} from {_storage(found)} to {_storage(claim.object)}",
            )
        )
        return
    result.patch.append(ClaimPatch(name, patch, REASON_CLAIM_UPDATED, f"updated claim {name}"))
