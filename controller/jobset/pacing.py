"""When to write a changed status: milestones at once, progress counters within the longest hold.

A JobSet's status carries two kinds of facts:

- **Milestones**: conditions (type, status, reason), ``terminalState``, ``restarts``,
  ``restartsCountTowardsMax``. Users, tools (Kueue, pipelines) and our own policies act on
  them; a change is written in the same reconcile that sees it. So is the uid record of the
  claims the JobSet had (``volumes.claimUIDs``): pods mount a claim only once it is stored, and a
  claim its retention deleted must be forgotten in the pass that deletes it.
- **Progress**: ``replicatedJobsStatus`` (active/ready/succeeded/... per replicated job),
  ``volumes`` (claims desired/existing/Bound/Pending per template) and condition messages that
  list counts. They move whenever any child Job or claim moves: writing each change costs one
  status write per child transition (about 14 per JobSet of 4 Jobs and 3 claims in the scale
  benchmark).

For a JobSet that is or was suspended (``queued``), three facts read off the counters are
milestones too, because Kueue acts on them (its JobSet integration, ``pkg/controller/jobs/jobset``,
reads nothing else of the status but the Completed and Failed conditions). Kueue manages only
JobSets created suspended (its webhook suspends them, and admits one by resuming it), so a JobSet
never suspended keeps the fewest status writes; one that was has a ``Suspended`` condition for
the rest of its life:

- whether any replicated job has ``active`` Jobs (Kueue's ``IsActive``): after Kueue suspends
  a JobSet (preemption, eviction) it frees the quota only once this is false, and it waits for
  it before it creates a Workload for a suspended JobSet;
- whether ``ready + succeeded`` over every replicated job reaches the ``replicas`` summed
  (``PodsReady``: ``waitForPodsReady`` times out and evicts a workload whose pods are not
  ready in time, and counts a recovery after a failure);
- which replicated jobs have all their Jobs succeeded (``ReclaimablePods`` hands the quota of
  succeeded pods back; partial counts stay progress, a replicated job done is a milestone).

They need the spec's ``replicas`` per replicated job: ``replicas`` is passed for a queued JobSet
and None otherwise (no such facts).

**The longest hold** (``--status-progress-period``) bounds how late counters are: a change of
counters alone is held from the first pass that finds it unwritten (``held_since``) until the
longest hold has passed, and then written with every change that came after it; a milestone
written sooner carries them all. So no counter reaches the API server later than the longest
hold after the reconcile that saw it (the child event batch and the queue come before that),
whatever the load, and a JobSet whose children keep changing writes its counters once per
longest hold.

No rule bounded by the same hold makes fewer writes, for the same changes and milestones: each
counter-only write closes a span of exactly the longest hold, from a change that nothing written
since carries, in which no other status write went out; those spans do not overlap, and any
rule with that bound needs a write inside each of them. (The rule before this one held
counters from the JobSet's last status write, growing fourfold with each counter-only write up
to 64 periods, and spread counter writes over all JobSets at a fixed rate: fewer writes, but
counters up to minutes late.) The hold starts when the controller first sees the JobSet's
counters differ from what is stored. Zero counters where none are stored tell nothing (absent
counters read as zero): a new JobSet's first status of zero counters waits for the first count
that is not, or for a milestone (its first one, such as a claim's uid or a condition, goes out at
once as always), and begins no hold. A longest hold of 0 or less writes every change, as
upstream JobSet does. This mirrors the Job controller, which batches pod updates before writing
Job status.
Pure: time is passed in.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from controller.jobset import api
from controller.jobset.jobsetstatus import JobSetStatus, ReplicatedJobStatus


def queued(suspend: bool, stored: JobSetStatus) -> bool:
    """Whether a JobSet is, or was, suspended: ``suspend`` (its spec) or a ``Suspended``
    condition, True or False, in its ``stored`` status (upstream keeps it once set)."""
    return suspend or stored.condition(api.SUSPENDED) is not None


def write_cause(
    stored: JobSetStatus | None,
    written: JobSetStatus,
    *,
    with_events: bool,
    paced: bool,
    replicas: Mapping[str, int] | None = None,
) -> str:
    """Why a status write went out (the ``cause`` label of ``jobset_status_writes_total``):
    ``first`` (nothing stored yet), ``events`` (with transitions announced), ``milestone``,
    ``unpaced`` (progress with pacing off: ``--status-progress-period=0``) or ``progress``
    (counters whose hold ran out). ``stored`` None: the JobSet has no status yet."""
    if stored is None:
        return "first"
    if with_events:
        return "events"
    if written.is_milestone_from(stored, replicas):
        return "milestone"
    return "progress" if paced else "unpaced"


def held_from(held_since: float | None, unwritten: bool, now: float) -> float | None:
    """When the hold of a JobSet's unwritten status began, after a pass at ``now`` that found
    its status ``unwritten`` (or not): ``held_since`` if the hold had begun, else ``now``; None
    when nothing is unwritten."""
    if not unwritten:
        return None
    return now if held_since is None else held_since


def _counting(status: JobSetStatus) -> JobSetStatus:
    """``status`` without its replicated jobs whose counters are all zero (and that record no
    restart of their own)."""
    kept = tuple(r for r in status.replicated_jobs_status if r != ReplicatedJobStatus(r.name))
    if len(kept) == len(status.replicated_jobs_status):
        return status
    return replace(status, replicated_jobs_status=kept)


def tells(stored: JobSetStatus, desired: JobSetStatus) -> bool:
    """Whether writing ``desired`` over ``stored`` tells a reader anything: not when all it
    adds is zero counters of replicated jobs the stored status has no counters for (a new
    JobSet whose Jobs have not started: absent counters read as zero)."""
    return not _counting(desired).same_as(_counting(stored))


def status_delay(
    stored: JobSetStatus,
    desired: JobSetStatus,
    held_since: float | None,
    now: float,
    longest_hold: float,
    replicas: Mapping[str, int] | None = None,
) -> float:
    """Seconds to hold back writing ``desired`` over ``stored``; 0.0 means write now, and the
    result is never more than ``longest_hold``, but for a status that ``tells`` nothing yet
    (``math.inf``: written with the first change or milestone that does).

    ``held_since``: when a pass of this process first found the JobSet's status unwritten, on a
    monotonic clock shared with ``now`` (``held_from``); None: this pass is the first.
    ``replicas``: the spec's per replicated job (``JobSetStatus.is_milestone_from``).
    """
    if longest_hold <= 0:
        return 0.0
    if desired.is_milestone_from(stored, replicas):
        return 0.0
    if not tells(stored, desired):
        return math.inf
    if held_since is None:
        return longest_hold  # this pass begins the hold
    return min(longest_hold, max(0.0, held_since + longest_hold - now))


@dataclass(frozen=True)
class StatusTiming:
    """``write``: write the plan's status in this pass. ``requeue_after``: when to come back (the
    plan's own time, or sooner so that held counters go out when their hold ends)."""

    write: bool
    requeue_after: float | None

    @classmethod
    def held(cls, hold: float, requeue_after: float | None) -> StatusTiming:
        """Not written now; back after ``hold``, or sooner if the plan wants to be."""
        return cls(
            write=False, requeue_after=hold if requeue_after is None else min(requeue_after, hold)
        )


def status_timing(
    stored: JobSetStatus,
    desired: JobSetStatus | None,
    *,
    with_events: bool,
    requeue_after: float | None,
    held_since: float | None,
    now: float,
    longest_hold: float,
    replicas: Mapping[str, int] | None = None,
) -> StatusTiming:
    """Whether the plan's ``desired`` status (None: unchanged) goes out now.

    A plan with Events always writes its status at once: the Events announce transitions that
    the status records. Otherwise ``status_delay`` decides; a held status rides on the next
    milestone or goes out when the reconcile comes back at the end of the hold.
    """
    if desired is None:
        return StatusTiming(write=False, requeue_after=requeue_after)
    hold = (
        0.0
        if with_events
        else status_delay(stored, desired, held_since, now, longest_hold, replicas)
    )
    if hold <= 0:
        return StatusTiming(write=True, requeue_after=requeue_after)
    if math.isinf(hold):
        return StatusTiming(write=False, requeue_after=requeue_after)  # nothing to tell yet
    return StatusTiming.held(hold, requeue_after)
