"""Building the JobSet's status: per-replicated-job counters and ``metav1.Condition``
bookkeeping, on the typed value of ``jobsetstatus`` (which also says what a write changes).

All functions return new values and never mutate their input. ``set_condition`` returns its
input itself when nothing changed, so ``decide`` can write status, and emit the condition's
Event, only when something did.

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
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from controller.jobset import api, children
from controller.jobset.children import ChildJob
from controller.jobset.jobsetstatus import Condition, ReplicatedJobStatus
from controller.jobset.model import JobSet

TRUE = "True"
FALSE = "False"

# Condition types of which at most one may be True; setting one True flips the others to False.
EXCLUSIVE_CONDITIONS: tuple[frozenset[str], ...] = (
    frozenset({api.STARTUP_POLICY_IN_PROGRESS, api.STARTUP_POLICY_COMPLETED}),
)


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


def replicated_jobs_status(
    jobset: JobSet, jobs: Iterable[ChildJob]
) -> tuple[ReplicatedJobStatus, ...]:
    """One entry per replicated job, spec order: its Jobs ready, succeeded, failed, active and
    suspended.

    ``jobs`` may be all observed children: Jobs of older attempts, Jobs being deleted and Jobs
    whose replicated-job label names no replicated job are left out.
    """
    # [ready, succeeded, failed, active, suspended] per replicated job
    by_name = {rjob.name: [0, 0, 0, 0, 0] for rjob in jobset.replicated_jobs}
    for job in children.current_jobs(jobset, jobs):
        if job.deleting:
            continue
        name = job.replicated_job
        counts = by_name.get(name) if name is not None else None
        if counts is None:
            continue
        if job.is_complete:
            counts[1] += 1
        elif job.is_failed:
            counts[2] += 1
        else:
            if job.is_ready(jobset.replicated_job(name or "")):
                counts[0] += 1
            if job.is_active:
                counts[3] += 1
            if job.suspended:
                counts[4] += 1
    return tuple(
        ReplicatedJobStatus(name, ready, succeeded, failed, active, suspended)
        for name, (ready, succeeded, failed, active, suspended) in by_name.items()
    )


def finished_counts(
    stored: Iterable[ReplicatedJobStatus], counted: Iterable[ReplicatedJobStatus]
) -> tuple[ReplicatedJobStatus, ...]:
    """The counters of a finished JobSet: ``counted`` (its Jobs now), with ``succeeded`` and
    ``failed`` never below what is ``stored``.

    The unfinished Jobs that a finished JobSet deletes are counted down as they go, as upstream
    does. Its finished Jobs are the record of how it ended: retention deletes them to free their
    claims (pvc-protection keeps a claim while a pod names it), and a Failed JobSet must not then
    say that none of its Jobs failed.
    """
    before = {entry.name: entry for entry in stored}
    return tuple(
        replace(
            entry,
            succeeded=max(entry.succeeded, before[entry.name].succeeded),
            failed=max(entry.failed, before[entry.name].failed),
        )
        if entry.name in before
        else entry
        for entry in counted
    )


# ----------------------------------------------------------------------------- conditions


def _exclusive_with(kind: str) -> frozenset[str]:
    others: set[str] = set()
    for group in EXCLUSIVE_CONDITIONS:
        if kind in group:
            others |= group - {kind}
    return frozenset(others)


def set_condition(
    conditions: tuple[Condition, ...],
    type: str,
    status: str,
    reason: str,
    message: str,
    now: datetime.datetime,
    observed_generation: int | None = None,
    *,
    add_when_false: bool = False,
) -> tuple[Condition, ...]:
    """Conditions with ``type`` set to the given status, reason and message.

    - Same status as before: ``lastTransitionTime`` is kept; reason, message and
      ``observedGeneration`` are brought up to date.
    - Status changed: the condition is replaced and ``lastTransitionTime`` becomes ``now``.
    - Absent: appended when the status is True (or ``add_when_false``); otherwise nothing.
    - A True condition flips its exclusive partners (``EXCLUSIVE_CONDITIONS``) that are True to
      False, with ``lastTransitionTime`` ``now``.

    ``observed_generation`` None leaves the field as it is (and out of new conditions).
    Order is preserved; when nothing changed the result is ``conditions`` itself.
    """
    stamp = format_time(now)
    partners = _exclusive_with(type) if status == TRUE else frozenset()
    result: list[Condition] = []
    found = changed = False
    for current in conditions:
        if current.type == type:
            found = True
            generation = (
                current.observed_generation if observed_generation is None else observed_generation
            )
            if current.status != status:
                current = replace(
                    current,
                    status=status,
                    last_transition_time=stamp,
                    reason=reason,
                    message=message,
                    observed_generation=generation,
                )
                changed = True
            elif (current.reason, current.message, current.observed_generation) != (
                reason,
                message,
                generation,
            ):
                current = replace(
                    current, reason=reason, message=message, observed_generation=generation
                )
                changed = True
        elif current.type in partners and current.status == TRUE:
            current = replace(current, status=FALSE, last_transition_time=stamp)
            changed = True
        result.append(current)
    if not found and (status == TRUE or add_when_false):
        result.append(
            Condition(
                type,
                status,
                reason,
                message,
                last_transition_time=stamp,
                observed_generation=observed_generation,
            )
        )
        changed = True
    return tuple(result) if changed else conditions


def remove_condition(conditions: tuple[Condition, ...], type: str) -> tuple[Condition, ...]:
    """Conditions without any of type ``type``."""
    return tuple(c for c in conditions if c.type != type)
