"""When to write a changed status: milestones at once, progress counters at a bounded pace.

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
  benchmark). A progress-only change is held back until ``period`` seconds have passed since
  this controller's last status write for the JobSet; a milestone write carries it along.

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

Counters of a JobSet that keeps moving would still cost one write per ``period`` for as long as
it lives (a large JobSet starting under load, say). So each progress-only write in a row
multiplies the next hold by ``HOLD_GROWTH``, up to ``MAX_HOLD_PERIODS`` periods, and a milestone
write starts over: counters that change all the time go out 1, 5, 21 and 85 periods after the
last milestone, then every 64 periods (a JobSet busy for 5 minutes at the default 10 s writes
its counters 3 times, not 30), and lag at most ``MAX_HOLD_PERIODS * period`` plus queue latency.
A queued JobSet's holds stop at ``QUEUED_MAX_HOLD_PERIODS``: Kueue hands back the quota of a
partly finished replicated job's succeeded pods only when it reads the counts.
A change after a quiet spell longer than the hold goes out at once. The hold is counted from this
controller's last status write for the JobSet, or, before its first one, from when it first saw
the JobSet: a new JobSet's first status, when it holds only zero counters, waits one period
and carries the counters of that period with it (its first milestone, such as a claim's uid or a
condition, goes out at once as always). ``period <= 0`` writes every change, as upstream JobSet
does. This mirrors the Job controller, which batches pod updates before writing Job status.
Pure: time is passed in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from controller.jobset import api
from controller.jobset.jobsetstatus import JobSetStatus

# Each progress-only write in a row multiplies the next hold by this many.
HOLD_GROWTH = 4
# The longest hold of progress counters, in periods (640 s at the default 10 s period).
MAX_HOLD_PERIODS = 64
# ... for a JobSet that is or was suspended (80 s at the default period).
QUEUED_MAX_HOLD_PERIODS = 8


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


def longest_hold(period: float, queued: bool) -> float:
    """The longest any counters are held, streak or backlog."""
    return period * (QUEUED_MAX_HOLD_PERIODS if queued else MAX_HOLD_PERIODS)


def progress_hold(period: float, streak: int, queued: bool = False) -> float:
    """How long counters are held after the last status write, when the ``streak`` writes
    before it were progress-only (0: the last write was a milestone, or none yet)."""
    growth: int = HOLD_GROWTH ** min(streak, 16)
    return min(period * growth, longest_hold(period, queued))


def next_streak(
    streak: int,
    stored: JobSetStatus,
    written: JobSetStatus,
    with_events: bool,
    replicas: Mapping[str, int] | None = None,
) -> int:
    """The progress-only streak after writing ``written`` over ``stored`` (a first status of
    counters only is progress too)."""
    if with_events or written.is_milestone_from(stored, replicas):
        return 0
    return streak + 1


def status_delay(
    stored: JobSetStatus,
    desired: JobSetStatus,
    last_write: float | None,
    now: float,
    period: float,
    streak: int = 0,
    replicas: Mapping[str, int] | None = None,
    floor: float = 0.0,
) -> float:
    """Seconds to hold back writing ``desired`` over ``stored``; 0.0 means write now.

    ``last_write`` is when this controller last wrote the JobSet's status, or before its first
    write when it first saw the JobSet (None: nothing to pace against, write now). ``now`` and
    ``last_write`` share one monotonic clock.
    ``streak``: progress-only writes in a row up to ``last_write`` (``next_streak``).
    ``replicas``: the spec's per replicated job (``JobSetStatus.is_milestone_from``).
    ``floor``: the shortest hold whatever the streak (``backlog_hold``), within the longest.
    """
    if period <= 0 or last_write is None:
        return 0.0
    if desired.is_milestone_from(stored, replicas):
        return 0.0
    queued = replicas is not None
    hold = min(max(progress_hold(period, streak, queued), floor), longest_hold(period, queued))
    return max(0.0, last_write + hold - now)


def backlog_hold(held: int, rate: float) -> float:
    """The shortest hold when ``held`` JobSets have counters waiting and counter-only writes
    should come at about ``rate`` per second over them all (``--status-progress-rate``; 0: no
    such floor). Upstream JobSet writes fewer counters per JobSet the busier it is, because
    child events pile up while a JobSet waits in its queue and one reconcile takes them all; this
    is that, by design: one JobSet moving gets its counters every period, a thousand moving at
    once get theirs every few minutes, and the API server sees about the same counter writes
    per second either way."""
    return held / rate if rate > 0 and held > 0 else 0.0


@dataclass(frozen=True, slots=True)
class ProgressBudget:
    """Counter-only (``progress``) status writes over all JobSets at about ``rate`` per second,
    ``burst`` at most at once (``--status-progress-rate``; 0: no budget). ``backlog_hold``
    lengthens the holds of the JobSets whose counters are held; this bounds the writes
    themselves: a JobSet whose own hold has run out writes at once and is never counted as held,
    and with a JobSet's child events gathered into one pass (``--child-event-batch-period``) most
    of them are such, so without the budget the holds stayed short while hundreds of JobSets
    moved at once. A JobSet refused a write is held (and counted) until it comes back.

    A value: ``take`` returns the budget left with its answer (``tokens``: the writes left, None
    when full; ``last``: monotonic time of the last ask)."""

    rate: float
    burst: float
    tokens: float | None = None
    last: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "burst", max(1.0, self.burst))

    def take(self, now: float) -> tuple[bool, ProgressBudget]:
        """Whether a counter-only write may go out at ``now`` (monotonic seconds), and the budget
        left once it is spent (or, refused, the tokens saved up by ``now``)."""
        if self.rate <= 0:
            return True, self
        tokens = self.burst if self.tokens is None else self.tokens
        if self.last is not None:
            tokens = min(self.burst, tokens + max(0.0, now - self.last) * self.rate)
        if tokens < 1:
            return False, replace(self, tokens=tokens, last=now)
        return True, replace(self, tokens=tokens - 1, last=now)

    def refused(self, held: int, requeue_after: float | None) -> StatusTiming:
        """The timing of a due counter write this budget refused, with ``held`` JobSets held
        besides it: held, and back after one write's time or the backlog's (``backlog_hold``),
        whichever is longer (sooner if the plan wants to be back sooner)."""
        wait = max(1 / self.rate if self.rate > 0 else 0.0, backlog_hold(held + 1, self.rate))
        return StatusTiming.held(wait, requeue_after)


@dataclass(frozen=True)
class StatusTiming:
    """``write``: write the plan's status in this pass. ``requeue_after``: when to come back (the
    plan's own time, or sooner so that held counters go out once the pace allows)."""

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
    last_write: float | None,
    now: float,
    period: float,
    streak: int = 0,
    replicas: Mapping[str, int] | None = None,
    floor: float = 0.0,
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
        else status_delay(stored, desired, last_write, now, period, streak, replicas, floor)
    )
    if hold <= 0:
        return StatusTiming(write=True, requeue_after=requeue_after)
    return StatusTiming.held(hold, requeue_after)
