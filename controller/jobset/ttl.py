"""TTL after finished: when a finished JobSet is due for deletion.

Upstream semantics: with ``ttlSecondsAfterFinished`` set, a JobSet is deleted once that many
seconds have passed since it finished (the ``lastTransitionTime`` of its True ``Completed`` or
``Failed`` condition); until then the reconcile is requeued for the time left. Zero means delete
as soon as it finishes. No TTL, not finished, no finish time, or already being deleted: nothing.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from controller.jobset import api
from controller.jobset.model import JobSet
from controller.jobset.status import parse_time


@dataclass(frozen=True)
class TTLDecision:
    """``delete_now``: delete the JobSet. ``requeue_after``: seconds until it expires, if later."""

    delete_now: bool = False
    requeue_after: float | None = None


NOTHING = TTLDecision()


def finished_at(jobset: JobSet) -> datetime.datetime | None:
    """When the JobSet finished: its first True Completed/Failed condition's transition time."""
    for condition in jobset.status.conditions:
        if condition.type in (api.COMPLETED, api.FAILED) and condition.is_true:
            return parse_time(condition.last_transition_time)
    return None


def ttl_decision(
    jobset: JobSet, finished_at: datetime.datetime | None, now: datetime.datetime
) -> TTLDecision:
    """Delete now, requeue after the time left, or nothing."""
    ttl = jobset.ttl_seconds_after_finished
    if ttl is None or finished_at is None or not jobset.finished or jobset.deleting:
        return NOTHING
    if finished_at.tzinfo is None:
        finished_at = finished_at.replace(tzinfo=datetime.UTC)
    if now.tzinfo is None:
        now = now.replace(tzinfo=datetime.UTC)
    remaining = (finished_at + datetime.timedelta(seconds=ttl) - now).total_seconds()
    if remaining <= 0:
        return TTLDecision(delete_now=True)
    return TTLDecision(requeue_after=remaining)
