"""Writes the API server refused, and Job names held by others: what the status says (pure).

A pass performs every write it can and collects the refusals (a quota, a template Kubernetes
rejects, a webhook); the status written at the end of the pass reports each one, naming the
object and the API server's own message (which names the quota, the invalid field). One refused
write does not stop the others: only the Jobs that need a missing claim wait.

- the JobSet's retention finalizer (added before any claim exists): ``VolumesReady=False`` with
  reason ``RetentionFinalizerFailed``, and no claim write in that pass;
- claims: ``VolumesReady=False`` with reason ``PVCCreationFailed`` (a create), the patch's
  Event reason + ``Failed`` (``ClaimAdoptedFailed``, ``ClaimExpandedFailed``, ...) or
  ``ClaimDeletionFailed`` (retention);
- Jobs: ``JobCreationFailed=True``, reason ``JobCreationFailed`` (refused) or ``JobConflict``
  (a Job that is not this JobSet's has the name: orphaned by ``--cascade=orphan``, another
  owner's, or an earlier JobSet's still being deleted); never taken over;
- other child writes (the headless Service, Job suspend/resume and deletes):
  ``ChildWriteFailed=True``.

Each change of these conditions is announced by one Warning Event; a retry that fails the same
way changes nothing, so it writes nothing.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from controller.jobset import api
from controller.jobset.api import REASON_CLAIM_CREATION_FAILED, REASON_CLAIMS_MISSING, VOLUMES_READY
from controller.jobset.jobsetstatus import Condition
from controller.runtime.client import ApiError

JOB_CREATION_FAILED = "JobCreationFailed"
CHILD_WRITE_FAILED = "ChildWriteFailed"

REASON_JOB_CONFLICT = "JobConflict"
REASON_JOBS_CREATED = "JobsCreated"
REASON_JOB_UPDATE_FAILED = "JobUpdateFailed"
REASON_JOB_DELETION_FAILED = "JobDeletionFailed"
REASON_CLAIM_DELETION_FAILED = "ClaimDeletionFailed"
REASON_RETENTION_FINALIZER_FAILED = "RetentionFinalizerFailed"
REASON_NO_FAILED_WRITES = "NoFailedWrites"

_SHOWN = 3  # failures spelled out in one message before "and N more"


class Write(enum.StrEnum):
    ADD_FINALIZER = "add the retention finalizer"
    CREATE_CLAIM = "create claim"
    PATCH_CLAIM = "update claim"
    DELETE_CLAIM = "delete claim"
    CREATE_SNAPSHOT = "create VolumeSnapshot"
    DELETE_SNAPSHOT = "delete VolumeSnapshot"
    CREATE_JOB = "create Job"
    HELD_JOB = "Job name held"  # not a write: the name belongs to a Job that is not ours
    UPDATE_JOB = "update Job"
    DELETE_JOB = "delete Job"
    CREATE_SERVICE = "create Service"


_CLAIMS = frozenset(
    {
        Write.ADD_FINALIZER,
        Write.CREATE_CLAIM,
        Write.PATCH_CLAIM,
        Write.DELETE_CLAIM,
        Write.CREATE_SNAPSHOT,
        Write.DELETE_SNAPSHOT,
    }
)
_JOB_CREATES = frozenset({Write.CREATE_JOB, Write.HELD_JOB})


@dataclass(frozen=True)
class Failure:
    write: Write
    name: str  # the object
    message: str  # the API server's message; for HELD_JOB, who has the Job
    reason: str = ""  # the condition/Event reason (derived from ``write`` when empty)

    @property
    def text(self) -> str:
        if self.write is Write.HELD_JOB:
            return f"Job {self.name} exists and is not this JobSet's ({self.message})"
        if self.write is Write.ADD_FINALIZER:
            return f"could not add the finalizer {self.name} to the JobSet: {self.message}"
        return f"could not {self.write.value} {self.name}: {self.message}"


def finalizer_refused(finalizer: str, message: str, claims: Iterable[str]) -> list[Failure]:
    """The retention finalizer was refused: no claim may exist without it (deleting the JobSet
    could then skip its retention), so none of ``claims`` is created in this pass either."""
    waiting = "waits for the JobSet's retention finalizer"
    return [Failure(Write.ADD_FINALIZER, finalizer, message)] + [
        Failure(Write.CREATE_CLAIM, name, waiting) for name in claims
    ]


def refused(err: ApiError) -> bool:
    """An answer that will not change by retrying alone (a quota, validation, admission, RBAC),
    as opposed to a stale cache (409), throttling (429) or a server error: those are retried
    without being reported."""
    return 400 <= err.status < 500 and err.status not in (404, 408, 409, 429)


# ----------------------------------------------------------------------------- Job names


def owner_of(job: Mapping[str, object]) -> str:
    """Who has a Job, for a message: its controller (or first) owner, or "no owner"."""
    meta = job.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, Mapping) else None
    listed = [r for r in refs if isinstance(r, Mapping)] if isinstance(refs, list) else []
    ref = next((r for r in listed if r.get("controller")), listed[0] if listed else None)
    text = "no owner" if ref is None else f"owned by {ref.get('kind')} {ref.get('name')}"
    if ref is not None and ref.get("uid"):
        text += f" (uid {ref.get('uid')})"
    if isinstance(meta, Mapping) and meta.get("deletionTimestamp"):
        text += ", being deleted"
    return text


def held_jobs(wanted: Iterable[str], others: Mapping[str, Mapping[str, object]]) -> list[Failure]:
    """The Jobs this pass would create whose name belongs to a Job that is not the JobSet's."""
    return [Failure(Write.HELD_JOB, n, owner_of(others[n])) for n in wanted if n in others]


# ----------------------------------------------------------------------------- conditions


def _message(failures: Sequence[Failure]) -> str:
    # The refused finalizer first: it is why the claims after it were not created.
    ordered = sorted(failures, key=lambda f: (f.write is not Write.ADD_FINALIZER, f.name, f.write))
    text = "; ".join(f.text for f in ordered[:_SHOWN])
    more = len(ordered) - _SHOWN
    return text if more <= 0 else f"{text}; and {more} more"


def _claim_reason(failure: Failure) -> str:
    if failure.reason:
        return failure.reason
    if failure.write is Write.ADD_FINALIZER:
        return REASON_RETENTION_FINALIZER_FAILED
    if failure.write is Write.CREATE_CLAIM:
        return REASON_CLAIM_CREATION_FAILED
    if failure.write is Write.CREATE_SNAPSHOT:
        return "SnapshotCreationFailed"
    if failure.write is Write.DELETE_SNAPSHOT:
        return "SnapshotDeletionFailed"
    return REASON_CLAIM_DELETION_FAILED if failure.write is Write.DELETE_CLAIM else "ClaimFailed"


def failed_claim_creates(failures: Iterable[Failure]) -> frozenset[str]:
    """Claims this pass meant to create and could not: they do not exist."""
    return frozenset(f.name for f in failures if f.write is Write.CREATE_CLAIM)


def volumes_ready(decided: Condition, failures: Sequence[Failure]) -> Condition:
    """VolumesReady once the claim writes that failed are known: their reason wins (a create's
    first, so a quota refusal keeps ``PVCCreationFailed``); what the lifecycle said besides
    follows, unless it only repeats that the claims are not created."""
    claims = [f for f in failures if f.write in _CLAIMS]
    if not claims or decided.type != VOLUMES_READY:
        return decided
    order = (
        Write.ADD_FINALIZER,
        Write.CREATE_CLAIM,
        Write.PATCH_CLAIM,
        Write.CREATE_SNAPSHOT,
        Write.DELETE_SNAPSHOT,
        Write.DELETE_CLAIM,
    )
    first = min(claims, key=lambda f: (order.index(f.write), f.name))
    message = _message(claims)
    if decided.status == "False" and decided.reason != REASON_CLAIMS_MISSING:
        message += f". Besides: {decided.message}"
    return Condition(VOLUMES_READY, "False", _claim_reason(first), message, "Warning")


def job_creation(failures: Sequence[Failure]) -> Condition:
    """JobCreationFailed: True while a Job the JobSet needs cannot be created."""
    jobs = [f for f in failures if f.write in _JOB_CREATES]
    if not jobs:
        return Condition(
            JOB_CREATION_FAILED, "False", REASON_JOBS_CREATED, "no Job creation is failing", None
        )
    held = all(f.write is Write.HELD_JOB for f in jobs)
    reason = REASON_JOB_CONFLICT if held else api.REASON_JOB_CREATION_FAILED
    return Condition(JOB_CREATION_FAILED, "True", reason, _message(jobs), "Warning")


_CHILD_REASONS = {
    Write.CREATE_SERVICE: api.REASON_SERVICE_CREATION_FAILED,
    Write.UPDATE_JOB: REASON_JOB_UPDATE_FAILED,
    Write.DELETE_JOB: REASON_JOB_DELETION_FAILED,
}


def child_writes(failures: Sequence[Failure]) -> Condition:
    """ChildWriteFailed: True while a write to the Service or an existing Job is refused."""
    others = [f for f in failures if f.write in _CHILD_REASONS]
    if not others:
        return Condition(
            CHILD_WRITE_FAILED, "False", REASON_NO_FAILED_WRITES, "no write is failing", None
        )
    first = min(others, key=lambda f: (f.name, f.write))
    return Condition(
        CHILD_WRITE_FAILED, "True", _CHILD_REASONS[first.write], _message(others), "Warning"
    )


def event_reason(failure: Failure) -> str:
    """The Warning Event reason of one failure, when no status can carry it (a JobSet being
    deleted)."""
    if failure.write in _CLAIMS:
        return _claim_reason(failure)
    if failure.write in _JOB_CREATES:
        return job_creation([failure]).reason
    return _CHILD_REASONS[failure.write]
