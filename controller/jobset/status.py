"""The JobSet's status: per-replicated-job counters and ``metav1.Condition`` bookkeeping.

All functions return new lists and dicts and never mutate their input. ``set_condition`` returns
a list equal (==) to its input when nothing changed, so the reconciler can write status, and
emit the condition's Event, only when ``new != old``.

Upstream facts mirrored here:
- ``replicatedJobsStatus`` counts only Jobs of the current restart attempt; ``ready``,
  ``active`` and ``suspended`` count unfinished Jobs, ``succeeded`` / ``failed`` finished ones;
  upstream documents ``active`` as excluding Jobs marked for deletion, and we leave Jobs being
  deleted out of every counter (they are on their way out).
- A condition that is absent is only added when its status is True: setting ``Suspended=False``
  on a JobSet that was never suspended is a no-op (no condition, no Event).
- ``StartupPolicyInProgress`` and ``StartupPolicyCompleted`` are mutually exclusive: when one
  becomes True, the other, if True, flips to False (keeping its reason and message, as upstream).
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from controller.jobset import api, children
from controller.jobset.children import ChildJob
from controller.jobset.model import JobSet
from controller.runtime.store import Obj

TRUE = "True"
FALSE = "False"

_COUNTERS = ("ready", "succeeded", "failed", "active", "suspended")

# Condition types of which at most one may be True; setting one True flips the others to False.
EXCLUSIVE_CONDITIONS: tuple[frozenset[str], ...] = (
    frozenset({api.STARTUP_POLICY_IN_PROGRESS, api.STARTUP_POLICY_COMPLETED}),
)


@dataclass(frozen=True)
class Condition:
    """A condition the controller sets (``set_condition`` writes it into the status), and the
    type of the Event that announces a change to it (None: no Event). The one shape of a
    condition in the decision code; the raw dicts live only in the status objects."""

    type: str
    status: str
    reason: str
    message: str
    event_type: str | None = None

    def announced(self, event_type: str | None) -> Condition:
        """The same condition, announced by an Event of ``event_type``."""
        return replace(self, event_type=event_type)


# ----------------------------------------------------------------------------- time


@dataclass(frozen=True)
class Event:
    """An Event to record about the JobSet once the status of the pass is stored."""

    type: str  # Normal | Warning
    reason: str
    message: str


@functools.lru_cache(maxsize=64)
def format_time(moment: datetime.datetime) -> str:
    """RFC 3339 in UTC with second precision, as ``metav1.Time`` serialises.

    Remembered for the last few moments: a pass stamps every condition it sets with the same
    ``now`` (datetimes are immutable; equal ones are the same instant, or both naive)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: Any) -> datetime.datetime | None:
    """An RFC 3339 timestamp as an aware UTC datetime; None when missing or unreadable."""
    if isinstance(value, datetime.datetime):
        moment = value
    elif isinstance(value, str) and value:
        try:
            moment = datetime.datetime.fromisoformat(value)
        except ValueError:
            return None
    else:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return moment.astimezone(datetime.UTC)


# ----------------------------------------------------------------------------- replicated jobs


def _empty_counts(name: str) -> Obj:
    return {"name": name, **{counter: 0 for counter in _COUNTERS}}


def replicated_jobs_status(jobset: JobSet, jobs: Iterable[ChildJob]) -> list[Obj]:
    """One ``{name, ready, succeeded, failed, active, suspended}`` per replicated job, spec order.

    ``jobs`` may be all observed children: Jobs of older attempts, Jobs being deleted and Jobs
    whose replicated-job label names no replicated job are left out.
    """
    by_name = {rjob.name: _empty_counts(rjob.name) for rjob in jobset.replicated_jobs}
    for job in children.current_jobs(jobset, jobs):
        if job.deleting:
            continue
        name = job.replicated_job
        counts = by_name.get(name) if name is not None else None
        if counts is None:
            continue
        if job.is_complete:
            counts["succeeded"] += 1
        elif job.is_failed:
            counts["failed"] += 1
        else:
            if job.is_ready(jobset.replicated_job(counts["name"])):
                counts["ready"] += 1
            if job.is_active:
                counts["active"] += 1
            if job.suspended:
                counts["suspended"] += 1
    return [by_name[rjob.name] for rjob in jobset.replicated_jobs]


def status_by_name(statuses: Iterable[Mapping[str, Any]]) -> dict[str, Obj]:
    """Index replicated job statuses by name (later entries win on duplicates)."""
    return {str(s.get("name")): dict(s) for s in statuses if isinstance(s.get("name"), str)}


def counter(status: Mapping[str, Any] | None, key: str) -> int:
    """A counter of one replicated job status; 0 when the status or the counter is missing."""
    if status is None:
        return 0
    value = status.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return value


# ----------------------------------------------------------------------------- conditions


def find_condition(conditions: Iterable[Mapping[str, Any]], kind: str) -> Obj | None:
    return next((dict(c) for c in conditions if c.get("type") == kind), None)


def _exclusive_with(kind: str) -> frozenset[str]:
    others: set[str] = set()
    for group in EXCLUSIVE_CONDITIONS:
        if kind in group:
            others |= group - {kind}
    return frozenset(others)


def set_condition(
    conditions: Sequence[Mapping[str, Any]],
    type: str,
    status: str,
    reason: str,
    message: str,
    now: datetime.datetime,
    observed_generation: int | None = None,
    *,
    add_when_false: bool = False,
) -> list[Obj]:
    """Conditions with ``type`` set to the given status, reason and message.

    - Same status as before: ``lastTransitionTime`` is kept; reason, message and
      ``observedGeneration`` are brought up to date.
    - Status changed: the condition is replaced and ``lastTransitionTime`` becomes ``now``.
    - Absent: appended when the status is True (or ``add_when_false``); otherwise nothing.
    - A True condition flips its exclusive partners (``EXCLUSIVE_CONDITIONS``) that are True to
      False, with ``lastTransitionTime`` ``now``.

    ``observed_generation`` None leaves the field as it is (and out of new conditions).
    Order is preserved; the result equals the input when nothing changed.
    """
    stamp = format_time(now)
    partners = _exclusive_with(type) if status == TRUE else frozenset()
    result: list[Obj] = []
    found = False
    for existing in conditions:
        current = dict(existing)
        kind = current.get("type")
        if kind == type:
            found = True
            if current.get("status") != status:
                current = {
                    **current,
                    "type": type,
                    "status": status,
                    "lastTransitionTime": stamp,
                }
            current["reason"] = reason
            current["message"] = message
            if observed_generation is not None:
                current["observedGeneration"] = observed_generation
        elif isinstance(kind, str) and kind in partners and current.get("status") == TRUE:
            current["status"] = FALSE
            current["lastTransitionTime"] = stamp
        result.append(current)
    if not found and (status == TRUE or add_when_false):
        new: Obj = {
            "type": type,
            "status": status,
            "lastTransitionTime": stamp,
            "reason": reason,
            "message": message,
        }
        if observed_generation is not None:
            new["observedGeneration"] = observed_generation
        result.append(new)
    return result


def remove_condition(conditions: Sequence[Mapping[str, Any]], type: str) -> list[Obj]:
    """Conditions without any of type ``type``."""
    return [dict(c) for c in conditions if c.get("type") != type]


# ----------------------------------------------------------------------------- equality


def _is_empty(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, bool):
        return False
    if isinstance(value, int | float):
        return value == 0
    if isinstance(value, str | list | dict):
        return len(value) == 0
    return False


def _normalise(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items() if not _is_empty(v)}
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    return value


def _keyed(items: Any, key: str) -> Any:
    if not isinstance(items, list):
        return _normalise(items)
    keyed: dict[Any, Any] = {}
    loose: list[Any] = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get(key), str):
            keyed[item[key]] = _normalise(item)
        else:
            loose.append(_normalise(item))
    return (keyed, loose)


def _comparable(status: Mapping[str, Any] | None) -> dict[str, Any]:
    result: dict[str, Any] = _normalise(dict(status or {}))
    if "conditions" in result:
        result["conditions"] = _keyed(result["conditions"], "type")
    if "replicatedJobsStatus" in result:
        result["replicatedJobsStatus"] = _keyed(result["replicatedJobsStatus"], "name")
    return result


def status_equal(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two JobSet status objects say the same thing.

    Absent, null, zero and empty values are the same (the API server drops ``omitempty`` fields),
    conditions are compared by type and replicated job statuses by name, regardless of order.
    """
    return _comparable(a) == _comparable(b)


# ----------------------------------------------------------------------------- what changed

# One status write changes nothing, progress only, or a milestone. Pacing holds progress
# (``pacing``); a milestone is written at once.
StatusChange = Literal["none", "progress", "milestone"]
# Fields that are progress: counts of Jobs and claims.
PROGRESS_FIELDS = frozenset({"replicatedJobsStatus", "volumes"})


def _count(entry: Mapping[str, Any], key: str) -> int:
    value = entry.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _kueue_facts(
    replicated: Iterable[Mapping[str, Any]], replicas: Mapping[str, int] | None
) -> dict[str, Any]:
    """What Kueue reads off ``replicatedJobsStatus`` of a JobSet with these ``replicas`` (None:
    not queued, nothing): any Jobs active (``IsActive``), every Job ready or succeeded
    (``PodsReady``) and the replicated jobs whose Jobs all succeeded (``ReclaimablePods``)."""
    if replicas is None:
        return {}
    entries = [r for r in replicated if isinstance(r, Mapping)]
    facts: dict[str, Any] = {"active": any(_count(r, "active") > 0 for r in entries)}
    started = sum(_count(r, "ready") + _count(r, "succeeded") for r in entries)
    facts["podsReady"] = started == sum(replicas.values())
    succeeded = {str(r.get("name")): _count(r, "succeeded") for r in entries}
    facts["succeeded"] = sorted(
        name for name, count in replicas.items() if count > 0 and succeeded.get(name, 0) >= count
    )
    return facts


def _milestones(
    status: Mapping[str, Any], replicas: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """The milestone part of a status. A condition is its type, status and reason: a message
    that only updates counts ("2 of 3 claims are waiting ...") is progress."""
    result = {k: v for k, v in status.items() if k not in PROGRESS_FIELDS}
    volumes = status.get("volumes")
    result["volumes.claimUIDs"] = volumes.get("claimUIDs") if isinstance(volumes, Mapping) else None
    # A Job's individual restart (RestartJob) is a decision, not a count: it is what makes the
    # failed Job stale, and it must be stored before that Job is replaced.
    replicated = status.get("replicatedJobsStatus")
    entries = replicated if isinstance(replicated, list) else []
    result["replicatedJobsStatus.jobRestarts"] = {
        str(r.get("name")): [r.get("jobRestarts"), r.get("jobRestartsCountTowardsMax")]
        for r in entries
        if isinstance(r, Mapping) and (r.get("jobRestarts") or r.get("jobRestartsCountTowardsMax"))
    }
    result["replicatedJobsStatus.kueue"] = _kueue_facts(entries, replicas)
    conditions = result.get("conditions")
    if isinstance(conditions, list):
        result["conditions"] = [
            {k: c.get(k) for k in ("type", "status", "reason")} if isinstance(c, dict) else c
            for c in conditions
        ]
    return result


def change(
    stored: Mapping[str, Any] | None,
    desired: Mapping[str, Any] | None,
    replicas: Mapping[str, int] | None = None,
) -> StatusChange:
    """What writing ``desired`` over ``stored`` changes: nothing (``status_equal``), progress
    only (counters, a condition message that only updates counts), or a milestone (anything
    else). ``replicas``: the spec's, per replicated job, for a JobSet a queue may manage
    (``pacing.queued``): the facts Kueue reads off the counters are milestones."""
    if is_milestone(stored or {}, desired or {}, replicas):
        return "milestone"
    return "none" if stored == desired or status_equal(stored, desired) else "progress"


def is_milestone(
    stored: Mapping[str, Any], desired: Mapping[str, Any], replicas: Mapping[str, int] | None
) -> bool:
    """``change(...) == "milestone"``, without comparing the counters (the cheaper question
    pacing asks several times a pass)."""
    return not status_equal(_milestones(stored, replicas), _milestones(desired, replicas))
