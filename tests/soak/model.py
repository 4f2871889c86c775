"""Plain data the soak's invariants look at: what the driver did, and the API server's audit log.

Times are seconds since the epoch (``time.time()`` and the audit log's ``stageTimestamp`` share the
machine's clock).
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field
from typing import Any

Obj = dict[str, Any]

RETAIN = "Retain"
DELETE = "Delete"
SNAPSHOT = "Snapshot"  # delete only once a ready VolumeSnapshot of the claim exists
COMPLETED = "Completed"
FAILED = "Failed"
# Who wrote, by the audit log's user agent (the driver and the controller share one user).
DRIVER_AGENT = "soak-driver"
CONTROLLER_AGENT = "stateful-jobset/"  # followed by the replica's identity


def by_controller(entry: AuditEntry) -> bool:
    return entry.user_agent.startswith(CONTROLLER_AGENT)


def stamp(moment: float | None) -> str:
    """A time for a report: UTC with milliseconds."""
    if moment is None:
        return "never"
    when = datetime.datetime.fromtimestamp(moment, datetime.UTC)
    return when.strftime("%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def parse_time(text: str) -> float:
    """An RFC 3339 time from the API (``2026-11-29T23:58:44.179700Z`` or without fraction)."""
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True)
class Retention:
    when_deleted: str = DELETE
    when_completed: str = RETAIN
    when_failed: str = RETAIN
    when_scaled: str = RETAIN

    def describe(self) -> str:
        return (
            f"whenDeleted={self.when_deleted} whenCompleted={self.when_completed} "
            f"whenFailed={self.when_failed} whenScaled={self.when_scaled}"
        )


@dataclass(frozen=True)
class PlannedClaim:
    """A claim a JobSet of the driver asks for (at its largest ``replicas``)."""

    name: str
    template: str
    scope: str  # JobSet | Job | Pod
    retention: Retention
    replicated_job: str | None = None  # None: every Job mounts it (JobSet scope)
    job_index: int | None = None
    pod_index: int | None = None  # Pod scope: the completion index whose pods mount it

    def mounted_by(self, replicated_job: str, job_index: int) -> bool:
        """Whether the pods of that Job mount this claim (some of them, for Pod scope)."""
        if self.replicated_job is None:
            return True
        return self.replicated_job == replicated_job and self.job_index == job_index


@dataclass(frozen=True)
class Scale:
    at: float  # when the driver first sent the change (a lower bound of when it took effect)
    replicated_job: str
    replicas: int


@dataclass(frozen=True)
class Loss:
    """A claim of the JobSet that the driver deleted out of band (its data is lost)."""

    at: float  # the driver's first attempt
    claim: str
    uid: str


@dataclass(frozen=True)
class OptIn:
    """The driver accepted an empty replacement of a lost claim (replace-lost-claims)."""

    at: float  # the driver's first attempt to set the annotation (a lower bound)
    claim: str
    uid_prefix: str


@dataclass
class JobSetRecord:
    """One JobSet the driver created, and what happened to it as far as anyone saw."""

    name: str
    scenario: str
    replicated_jobs: dict[str, int]  # name -> replicas at creation
    claims: tuple[PlannedClaim, ...]
    created_at: float
    uid: str = ""
    scales: list[Scale] = field(default_factory=list)
    delete_requested_at: float | None = None  # the driver's first attempt
    deleted_at: float | None = None  # the API server's (audit log) time of the successful delete
    terminal: str = ""  # Completed | Failed, as last observed
    terminal_at: float | None = None  # the condition's lastTransitionTime
    restarts: int = 0  # the highest status.restarts observed
    gone: bool = False  # observed absent after the driver deleted it
    # Claims the driver made at names the JobSet wants (a copied name label, no proof): uid → name.
    impostors: dict[str, str] = field(default_factory=dict)
    losses: list[Loss] = field(default_factory=list)
    opt_ins: list[OptIn] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the driver did, for reports

    def claim(self, name: str) -> PlannedClaim | None:
        return next((c for c in self.claims if c.name == name), None)

    def job_of(self, job: str) -> tuple[str, int] | None:
        """(replicated job, index) of one of this JobSet's Job names; None if it is not one."""
        for rjob, replicas in self.replicated_jobs.items():
            for scale in self.scales:
                if scale.replicated_job == rjob:
                    replicas = max(replicas, scale.replicas)
            for i in range(replicas):
                if job == f"{self.name}-{rjob.lower()}-{i}":
                    return rjob, i
        return None

    def job_names(self) -> set[str]:
        return {
            f"{self.name}-{rjob.lower()}-{i}"
            for rjob, replicas in self.replicated_jobs.items()
            for i in range(replicas)
        }

    @property
    def deletion_time(self) -> float | None:
        return self.deleted_at if self.deleted_at is not None else self.delete_requested_at

    def replicas(self, rjob: str) -> int:
        current = self.replicated_jobs.get(rjob, 0)
        for scale in self.scales:
            if scale.replicated_job == rjob:
                current = scale.replicas
        return current

    def fate(self) -> str:
        parts = [self.terminal or "not terminal"]
        if self.terminal_at is not None:
            parts[0] += f" at {stamp(self.terminal_at)}"
        parts += [
            f"scaled {s.replicated_job} to {s.replicas} at {stamp(s.at)}" for s in self.scales
        ]
        if self.deletion_time is not None:
            parts.append(f"deleted at {stamp(self.deletion_time)}")
        return ", ".join(parts)

    def describe(self) -> str:
        return f"JobSet {self.name} (scenario {self.scenario}; {self.fate()})"


@dataclass(frozen=True)
class AuditEntry:
    """One write the API server answered (audit stage ResponseComplete)."""

    time: float  # stageTimestamp: the answer (the write happened before)
    received: float  # requestReceivedTimestamp (the write happened after)
    verb: str
    resource: str
    namespace: str
    name: str
    subresource: str
    code: int
    user_agent: str
    audit_id: str

    @property
    def ok(self) -> bool:
        return 200 <= self.code < 300

    def describe(self) -> str:
        what = f"{self.resource}/{self.name}" + (f"/{self.subresource}" if self.subresource else "")
        return (
            f"{self.verb} {what} by {self.user_agent or '?'} at {stamp(self.time)} -> {self.code} "
            f"(auditID {self.audit_id})"
        )


AUDITED = frozenset({"jobs", "persistentvolumeclaims", "jobsets", "volumesnapshots"})


def parse_audit_line(raw: str, namespace: str) -> AuditEntry | None:
    """An audit log line about our namespace's Jobs, claims, JobSets or VolumeSnapshots; None for
    anything else."""
    try:
        entry = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(entry, dict) or entry.get("stage") != "ResponseComplete":
        return None
    ref = entry.get("objectRef") or {}
    if ref.get("namespace") != namespace or ref.get("resource") not in AUDITED:
        return None
    try:
        moment = parse_time(str(entry.get("stageTimestamp")))
        received = parse_time(str(entry.get("requestReceivedTimestamp")))
    except ValueError:
        return None
    return AuditEntry(
        time=moment,
        received=received,
        verb=str(entry.get("verb", "")),
        resource=str(ref.get("resource")),
        namespace=namespace,
        name=str(ref.get("name") or ""),
        subresource=str(ref.get("subresource") or ""),
        code=int((entry.get("responseStatus") or {}).get("code") or 0),
        user_agent=str(entry.get("userAgent") or ""),
        audit_id=str(entry.get("auditID") or ""),
    )


# ----------------------------------------------------------------------------- snapshots


@dataclass
class SnapshotRecord:
    """A VolumeSnapshot the controller took of a JobSet's claim, as the driver (playing the
    snapshot controller: the ``full`` profile has none) found it and what it made of it."""

    name: str
    uid: str
    jobset: str  # its jobset-name label
    source_claim: str  # spec.source.persistentVolumeClaimName
    claim_uid: str  # the controller's snapshot-of-claim-uid annotation
    seen_at: float  # the driver's first listing that had it
    outcome: str = ""  # "" (not yet) | ready | failed
    marked_at: float | None = None  # the driver's first attempt at the status patch
    answered_at: float | None = None  # when that patch was answered
    kept_checked: bool = False  # failed: the driver saw the claim kept afterwards
    deleted_at: float | None = None  # failed: the driver deleted it afterwards (a retry)

    def describe(self) -> str:
        state = self.outcome or "pending"
        if self.marked_at is not None:
            state += f" (marked {stamp(self.marked_at)})"
        if self.deleted_at is not None:
            state += f", deleted by the driver at {stamp(self.deleted_at)}"
        return (
            f"VolumeSnapshot {self.name} (uid {self.uid[:8]}) of claim {self.source_claim} "
            f"uid {self.claim_uid[:8]}: {state}"
        )


@dataclass(frozen=True)
class Sighting:
    """A claim object in one of the monitor's listings: the listing began at ``began`` and was
    answered at ``at`` (the object existed at some moment in between), its phase then."""

    began: float
    at: float
    bound: bool


@dataclass
class ClaimObject:
    """One claim object (uid) as the monitor's listings saw it: the first listing that had it,
    the first that had it Bound and the latest."""

    name: str
    uid: str
    first: Sighting
    last: Sighting
    first_bound: Sighting | None = None

    @classmethod
    def seen(cls, name: str, uid: str, sighting: Sighting) -> ClaimObject:
        found = cls(name, uid, sighting, sighting)
        found.see(sighting)
        return found

    def see(self, sighting: Sighting) -> None:
        self.last = sighting
        if sighting.bound and self.first_bound is None:
            self.first_bound = sighting

    @property
    def sightings(self) -> list[Sighting]:
        middle = [self.first_bound] if self.first_bound is not None else []
        return [self.first, *middle, self.last]


# ----------------------------------------------------------------------------- live objects


def meta(obj: Obj) -> Obj:
    found = obj.get("metadata")
    return found if isinstance(found, dict) else {}


def name_of(obj: Obj) -> str:
    return str(meta(obj).get("name") or "")


def labels(obj: Obj) -> Obj:
    found = meta(obj).get("labels")
    return found if isinstance(found, dict) else {}


def terminating(obj: Obj) -> bool:
    return bool(meta(obj).get("deletionTimestamp"))


def terminal_state(jobset: Obj) -> tuple[str, float | None]:
    """(Completed | Failed | "", the condition's lastTransitionTime) of a live JobSet."""
    status = jobset.get("status") or {}
    state = str(status.get("terminalState") or "")
    for condition in status.get("conditions") or []:
        kind = condition.get("type")
        if kind in (COMPLETED, FAILED) and condition.get("status") == "True":
            text = condition.get("lastTransitionTime")
            return (state or str(kind)), (parse_time(text) if isinstance(text, str) else None)
    return state, None
