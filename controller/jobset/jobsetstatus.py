"""The JobSet's status as a value: read once from the stored object (``JobSetStatus.parse``, by
``model.parse``), built by ``decide``, compared by what writing it would change, and turned into
the API's dict (``to_dict``) only where it is written.

What a write changes is one rule, on the type (``JobSetStatus.change_from``), used both to skip a
write and to pace one (``pacing``):

- **none**: the two say the same (``same_as``): absent, null, zero and empty are one (the API
  server drops ``omitempty`` fields), conditions are compared by type and replicated job statuses
  by name, regardless of order;
- **milestone**: ``restarts``, ``restartsCountTowardsMax``, ``terminalState``, a condition's
  type, status or reason, the claims' uid record (``volumes.claimUIDs``: pods mount a claim only
  once its uid is stored), the claims let go while suspended (``volumes.suspensionReleases``: no
  snapshot of one is taken before that is stored), a Job's individual restarts (``jobRestarts``,
  ``jobRestartsCountTowardsMax``: what makes the failed Job stale, stored before it is replaced),
  and, for a JobSet a queue may manage (``replicas`` given), the facts Kueue reads off the
  counters (any Job active, every Job ready or succeeded, the replicated jobs whose Jobs all
  succeeded);
- **progress**: anything else: the counters of ``replicatedJobsStatus`` and ``volumes.templates``,
  and a condition's message alone ("2 of 3 claims are waiting ...").

Reading is lenient: anyone allowed to write the status subresource can put anything there, so a
field of the wrong type reads as absent, a condition without a type (or with the type of one
before it) is no condition, and a list entry that is no object is nothing. Fields the type does
not know are not read; the status write keeps them (the reconciler writes the stored status with
this value's fields over it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from controller.jobset import api
from controller.runtime.store import Obj

# One status write changes nothing, progress only, or a milestone. Pacing holds progress
# (``pacing``); a milestone is written at once.
StatusChange = Literal["none", "progress", "milestone"]


def _count(value: Any) -> int:
    """A non-negative status counter; 0 for anything else (a bool is not a count)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _counts(value: Any) -> tuple[int, ...]:
    """A status int array (jobRestarts...): each entry a counter, anything else nothing."""
    return tuple(_count(v) for v in value) if isinstance(value, list) else ()


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _objects(value: Any) -> Iterable[Obj]:
    """The objects of a status list; nothing of a field that is not a list."""
    return (v for v in value if isinstance(v, dict)) if isinstance(value, list) else ()


# ----------------------------------------------------------------------------- conditions


@dataclass(frozen=True, slots=True)
class Condition:
    """One of the JobSet's conditions, a ``metav1.Condition``: the one type in which they are
    built (by the decision code: type, status, reason, message), set into the status
    (``status.set_condition`` stamps ``last_transition_time`` and ``observed_generation``),
    compared and written (``to_dict``). ``observed_generation`` None: not written (the one optional
    field). ``event_type``: the type of the Event that announces a change to the condition when the
    decision code sets it (None: no Event); never written, and None in the status."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    event_type: str | None = None
    last_transition_time: str = ""
    observed_generation: int | None = None

    @property
    def is_true(self) -> bool:
        return self.status == "True"

    def announced(self, event_type: str | None) -> Condition:
        """The same condition, announced by an Event of ``event_type``."""
        return replace(self, event_type=event_type)

    def _comparable(self) -> tuple[str, str, str, str, int]:
        return (
            self.status,
            self.reason,
            self.message,
            self.last_transition_time,
            self.observed_generation or 0,
        )

    def to_dict(self) -> Obj:
        found: Obj = {
            "type": self.type,
            "status": self.status,
            "lastTransitionTime": self.last_transition_time,
            "reason": self.reason,
            "message": self.message,
        }
        if self.observed_generation is not None:
            found["observedGeneration"] = self.observed_generation
        return found


def parse_conditions(value: Any) -> tuple[Condition, ...]:
    """The status conditions, a list keyed by type: one with no type, or with the type of one
    before it (an edited status; fuzz-found), is no condition and is dropped from the next
    status written."""
    found: dict[str, Condition] = {}
    for raw in _objects(value):
        kind = raw.get("type")
        if not isinstance(kind, str) or not kind or kind in found:
            continue
        generation = raw.get("observedGeneration")
        found[kind] = Condition(
            kind,
            _text(raw.get("status")),
            _text(raw.get("reason")),
            _text(raw.get("message")),
            last_transition_time=_text(raw.get("lastTransitionTime")),
            observed_generation=_count(generation) if generation is not None else None,
        )
    return tuple(found.values())


# ----------------------------------------------------------------------------- replicated jobs


@dataclass(frozen=True, slots=True)
class ReplicatedJobStatus:
    """One ``replicatedJobsStatus`` entry: the Jobs of the current attempt by state, and the
    per-index restart arrays of the RestartJob actions (empty unless a Job restarted alone)."""

    name: str
    ready: int = 0
    succeeded: int = 0
    failed: int = 0
    active: int = 0
    suspended: int = 0
    job_restarts: tuple[int, ...] = ()
    job_restarts_count_towards_max: tuple[int, ...] = ()

    @property
    def started(self) -> int:
        """Jobs that have started: ready + succeeded + failed."""
        return self.ready + self.succeeded + self.failed

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> ReplicatedJobStatus | None:
        """The entry ``raw``; None without a name (it names no replicated job)."""
        name = raw.get("name")
        if not isinstance(name, str):
            return None
        return cls(
            name,
            _count(raw.get("ready")),
            _count(raw.get("succeeded")),
            _count(raw.get("failed")),
            _count(raw.get("active")),
            _count(raw.get("suspended")),
            _counts(raw.get(api.JOB_RESTARTS)),
            _counts(raw.get(api.JOB_RESTARTS_TOWARDS_MAX)),
        )

    def to_dict(self) -> Obj:
        found: Obj = {
            "name": self.name,
            "ready": self.ready,
            "succeeded": self.succeeded,
            "failed": self.failed,
            "active": self.active,
            "suspended": self.suspended,
        }
        if self.job_restarts:
            found[api.JOB_RESTARTS] = list(self.job_restarts)
        if self.job_restarts_count_towards_max:
            found[api.JOB_RESTARTS_TOWARDS_MAX] = list(self.job_restarts_count_towards_max)
        return found


# ----------------------------------------------------------------------------- volumes


@dataclass(frozen=True, slots=True)
class TemplateStatus:
    """One ``volumes.templates`` entry: a claim template's scope and its claims by state.
    ``claim_name``: JobSet scope only; ``restored``: with a restorePolicy only;
    ``restored_from``: the snapshot a JobSet-scope claim was restored from (None: not written);
    ``restored_from_group``: the VolumeGroupSnapshot every restored claim (Job or Pod scope) came
    from, each from its own member (None: not written)."""

    name: str
    scope: str
    desired: int = 0
    existing: int = 0
    bound: int = 0
    pending: int = 0
    lost: int = 0
    conflicts: int = 0
    claim_name: str | None = None
    restored: int | None = None
    restored_from: str | None = None
    restored_from_group: str | None = None

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> TemplateStatus | None:
        name = raw.get("name")
        if not isinstance(name, str):
            return None
        claim, source = raw.get("claimName"), raw.get("restoredFrom")
        group = raw.get("restoredFromGroup")
        return cls(
            name,
            _text(raw.get("scope")),
            _count(raw.get("desired")),
            _count(raw.get("existing")),
            _count(raw.get("bound")),
            _count(raw.get("pending")),
            _count(raw.get("lost")),
            _count(raw.get("conflicts")),
            claim if isinstance(claim, str) else None,
            _count(raw["restored"]) if raw.get("restored") is not None else None,
            source if isinstance(source, str) else None,
            group if isinstance(group, str) else None,
        )

    def _comparable(self) -> tuple[Any, ...]:
        return (
            self.name,
            self.scope,
            self.desired,
            self.existing,
            self.bound,
            self.pending,
            self.lost,
            self.conflicts,
            self.claim_name or "",
            self.restored or 0,
            self.restored_from or "",
            self.restored_from_group or "",
        )

    def to_dict(self) -> Obj:
        found: Obj = {
            "name": self.name,
            "scope": self.scope,
            "desired": self.desired,
            "existing": self.existing,
            "bound": self.bound,
            "pending": self.pending,
            "lost": self.lost,
            "conflicts": self.conflicts,
        }
        if self.claim_name is not None:
            found["claimName"] = self.claim_name
        if self.restored is not None:
            found["restored"] = self.restored
        if self.restored_from is not None:
            found["restoredFrom"] = self.restored_from
        if self.restored_from_group is not None:
            found["restoredFromGroup"] = self.restored_from_group
        return found


@dataclass(frozen=True, slots=True)
class ClaimUIDs:
    """One ``volumes.claimUIDs`` entry: the uid prefixes of a template's claims (of one replicated
    job, for Job and Pod scope). What they mean is ``volumes.record``'s; here only the fields, as
    stored: ``replicated_job`` and ``scope`` None when absent."""

    template: str
    uids: str
    replicated_job: str | None = None
    scope: str | None = None

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> ClaimUIDs | None:
        """The entry ``raw``; None for one no reading can use: a template or uids that are no
        string, a replicated job that is neither absent nor a string, a scope given as anything
        but a string (null included: present, and unknown)."""
        template, uids, rjob = raw.get("template"), raw.get("uids"), raw.get("replicatedJob")
        scope = raw.get("scope")
        if not isinstance(template, str) or not isinstance(uids, str):
            return None
        if rjob is not None and not isinstance(rjob, str):
            return None
        if "scope" in raw and not isinstance(scope, str):
            return None
        return cls(template, uids, rjob, scope)

    def _comparable(self) -> tuple[str, str, str, str]:
        return (self.template, self.uids, self.replicated_job or "", self.scope or "")

    def to_dict(self) -> Obj:
        found: Obj = {"template": self.template}
        if self.replicated_job is not None:
            found["replicatedJob"] = self.replicated_job
        if self.scope is not None:
            found["scope"] = self.scope
        found["uids"] = self.uids
        return found


@dataclass(frozen=True, slots=True)
class SuspensionRelease:
    """One ``volumes.suspensionReleases`` entry: the claims of one volume claim policy (named by
    its first template) that retention lets go because the JobSet is suspended
    (``retentionPolicy.whenSuspended: Snapshot``), by uid prefix, and when that began (RFC 3339
    with microseconds). What it means is ``volumes.suspension``'s; here only the fields."""

    template: str
    uids: tuple[str, ...]
    started: str

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> SuspensionRelease | None:
        """The entry ``raw``; None for one without a template, uids and a start, all strings."""
        template, uids, started = raw.get("template"), raw.get("uids"), raw.get("started")
        if not (isinstance(template, str) and isinstance(uids, str) and isinstance(started, str)):
            return None
        if not template or not started:
            return None
        return cls(template, tuple(u for u in uids.split(",") if u), started)

    def _comparable(self) -> tuple[str, tuple[str, ...], str]:
        return (self.template, self.uids, self.started)

    def to_dict(self) -> Obj:
        return {"template": self.template, "uids": ",".join(self.uids), "started": self.started}


@dataclass(frozen=True, slots=True)
class VolumesStatus:
    """``status.volumes``: the counts per template (progress), the uid record and the releases
    while suspended (milestones)."""

    templates: tuple[TemplateStatus, ...] = ()
    claim_uids: tuple[ClaimUIDs, ...] = ()
    suspension_releases: tuple[SuspensionRelease, ...] = ()

    @classmethod
    def parse(cls, raw: Any) -> VolumesStatus | None:
        """``status.volumes`` as stored; None when there is none (or it is no object)."""
        if not isinstance(raw, dict):
            return None
        templates = (TemplateStatus.parse(t) for t in _objects(raw.get("templates")))
        uids = (ClaimUIDs.parse(u) for u in _objects(raw.get("claimUIDs")))
        releases = (SuspensionRelease.parse(r) for r in _objects(raw.get("suspensionReleases")))
        return cls(
            tuple(t for t in templates if t is not None),
            tuple(u for u in uids if u is not None),
            tuple(r for r in releases if r is not None),
        )

    def _comparable(self) -> tuple[Any, ...]:
        return (
            tuple(t._comparable() for t in self.templates),
            self._records_comparable(),
        )

    def _records_comparable(self) -> tuple[Any, ...]:
        """The milestone part: the uid record, and the claims let go while suspended (pods
        must never mount one again once a snapshot of it may be taken: stored at once)."""
        return (
            tuple(u._comparable() for u in self.claim_uids),
            tuple(r._comparable() for r in self.suspension_releases),
        )

    def to_dict(self) -> Obj:
        found: Obj = {"templates": [t.to_dict() for t in self.templates]}
        if self.claim_uids:
            found["claimUIDs"] = [u.to_dict() for u in self.claim_uids]
        if self.suspension_releases:
            found["suspensionReleases"] = [r.to_dict() for r in self.suspension_releases]
        return found


_NO_VOLUMES = VolumesStatus()


# ----------------------------------------------------------------------------- the status


def _per_replicated_job(
    entries: Iterable[ReplicatedJobStatus], towards_max: bool
) -> dict[str, tuple[int, ...]]:
    found = {}
    for entry in entries:
        values = entry.job_restarts_count_towards_max if towards_max else entry.job_restarts
        if values:
            found[entry.name] = values
    return found


def _kueue_facts(
    entries: tuple[ReplicatedJobStatus, ...], replicas: Mapping[str, int] | None
) -> tuple[Any, ...]:
    """What Kueue reads off ``replicatedJobsStatus`` of a JobSet with these ``replicas`` (None:
    not queued, nothing): any Jobs active (``IsActive``), every Job ready or succeeded
    (``PodsReady``) and the replicated jobs whose Jobs all succeeded (``ReclaimablePods``)."""
    if replicas is None:
        return ()
    # One entry per name, later ones winning, as ``same_as`` reads them: a status stored with a
    # name twice (not by this controller) is then "none" and not a milestone, never both.
    by_name = {r.name: r for r in entries}.values()
    started = sum(r.ready + r.succeeded for r in by_name)
    succeeded = {r.name: r.succeeded for r in by_name}
    return (
        any(r.active > 0 for r in by_name),
        started == sum(replicas.values()),
        sorted(n for n, count in replicas.items() if count > 0 and succeeded.get(n, 0) >= count),
    )


@dataclass(frozen=True, slots=True)
class JobSetStatus:
    """The JobSet's status (see the module). ``volumes`` None: the status has none.

    ``job_restarts`` and ``job_restarts_towards_max``: the replicated jobs' restart arrays by
    name (only those with restarts), made with the value: read per child Job on every pass."""

    restarts: int = 0
    restarts_count_towards_max: int = 0
    terminal_state: str = ""
    conditions: tuple[Condition, ...] = ()
    replicated_jobs_status: tuple[ReplicatedJobStatus, ...] = ()
    volumes: VolumesStatus | None = None
    job_restarts: Mapping[str, tuple[int, ...]] = field(init=False, repr=False, compare=False)
    job_restarts_towards_max: Mapping[str, tuple[int, ...]] = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        entries = self.replicated_jobs_status
        object.__setattr__(self, "job_restarts", _per_replicated_job(entries, False))
        object.__setattr__(self, "job_restarts_towards_max", _per_replicated_job(entries, True))

    @classmethod
    def parse(cls, raw: Any) -> JobSetStatus:
        """The stored ``status`` (anything: see the module for what is read)."""
        obj = raw if isinstance(raw, dict) else {}
        entries = _objects(obj.get("replicatedJobsStatus"))
        replicated = (ReplicatedJobStatus.parse(r) for r in entries)
        towards = _count(obj.get("restartsCountTowardsMax"))
        return cls(
            # Restarts that count towards maxRestarts are restarts: an edited status saying more
            # of them than restarts in all keeps the count (maxRestarts still holds) and raises
            # the total.
            restarts=max(_count(obj.get("restarts")), towards),
            restarts_count_towards_max=towards,
            terminal_state=_text(obj.get("terminalState")),
            conditions=parse_conditions(obj.get("conditions")),
            replicated_jobs_status=tuple(r for r in replicated if r is not None),
            volumes=VolumesStatus.parse(obj.get("volumes")),
        )

    def to_dict(self) -> Obj:
        """The status as the API writes it: ``terminalState`` only once there is one, ``volumes``
        only when the status has them."""
        found: Obj = {
            "restarts": self.restarts,
            "restartsCountTowardsMax": self.restarts_count_towards_max,
        }
        if self.terminal_state:
            found["terminalState"] = self.terminal_state
        found["conditions"] = [c.to_dict() for c in self.conditions]
        found["replicatedJobsStatus"] = [r.to_dict() for r in self.replicated_jobs_status]
        if self.volumes is not None:
            found["volumes"] = self.volumes.to_dict()
        return found

    # ------------------------------------------------------------------------- reading

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)

    def is_true(self, kind: str) -> bool:
        found = self.condition(kind)
        return found is not None and found.is_true

    def job_restart_target(self, replicated_job: str, index: int) -> int:
        """jobRestarts[index] of ``replicated_job``: 0 when absent."""
        found = self.job_restarts.get(replicated_job, ())
        return found[index] if 0 <= index < len(found) else 0

    @property
    def total_restarts_count_towards_max(self) -> int:
        """What maxRestarts is checked against when Jobs may restart individually (upstream):
        the JobSet's counted restarts plus every Job's counted individual restarts."""
        individual = sum(sum(v) for v in self.job_restarts_towards_max.values())
        return self.restarts_count_towards_max + individual

    def with_claim_uids(self, entries: tuple[ClaimUIDs, ...]) -> JobSetStatus:
        """The same status with ``entries`` as its uid record (the counts kept)."""
        volumes = self.volumes if self.volumes is not None else _NO_VOLUMES
        return replace(self, volumes=replace(volumes, claim_uids=entries))

    # ------------------------------------------------------------------------- what changed

    def same_as(self, other: JobSetStatus) -> bool:
        """Whether the two say the same thing (the "none" of ``change_from``; see the module)."""
        # Most comparisons are of equal values: plain equality first.
        return self == other or self._comparable() == other._comparable()

    def _comparable(self) -> tuple[Any, ...]:
        volumes = self.volumes if self.volumes is not None else _NO_VOLUMES
        return (
            self.restarts,
            self.restarts_count_towards_max,
            self.terminal_state,
            {c.type: c._comparable() for c in self.conditions},
            # Canonical already (every field a count or a name): later entries win on names.
            {r.name: r for r in self.replicated_jobs_status},
            volumes._comparable(),
        )

    def _milestones(self, replicas: Mapping[str, int] | None) -> tuple[Any, ...]:
        """The milestone part (see the module). A condition is its type, status and reason: a
        message that only updates counts is progress."""
        volumes = self.volumes if self.volumes is not None else _NO_VOLUMES
        return (
            self.restarts,
            self.restarts_count_towards_max,
            self.terminal_state,
            {c.type: (c.status, c.reason) for c in self.conditions},
            volumes._records_comparable(),
            # A Job's individual restart (RestartJob) is a decision, not a count: it is what
            # makes the failed Job stale, and it must be stored before that Job is replaced.
            {
                r.name: (r.job_restarts, r.job_restarts_count_towards_max)
                for r in self.replicated_jobs_status
                if r.job_restarts or r.job_restarts_count_towards_max
            },
            _kueue_facts(self.replicated_jobs_status, replicas),
        )

    def is_milestone_from(
        self, stored: JobSetStatus, replicas: Mapping[str, int] | None = None
    ) -> bool:
        """``change_from(stored, replicas) == "milestone"``, without comparing the counters (the
        cheaper question pacing asks several times a pass)."""
        return self is not stored and self._milestones(replicas) != stored._milestones(replicas)

    def change_from(
        self, stored: JobSetStatus, replicas: Mapping[str, int] | None = None
    ) -> StatusChange:
        """What writing this status over ``stored`` changes: nothing, progress only, or a
        milestone. ``replicas``: the spec's, per replicated job, for a JobSet a queue may manage
        (``pacing.queued``): the facts Kueue reads off the counters are milestones."""
        if self.is_milestone_from(stored, replicas):
            return "milestone"
        return "none" if self.same_as(stored) else "progress"


# What a JobSet never written to has: nothing.
EMPTY = JobSetStatus()
