"""The pure part of a reconcile pass, around ``decide``: what this process remembers of each
JobSet (``Memory``), and the two steps of a pass that read and renew it.

A pass of the reconciler (``reconciler.JobSetReconciler.reconcile``):

1. reads the caches and ``decide``s a plan;
2. ``step``: the plan, the Job names the cache shows, the memory and ``now`` → the plan to
   perform (without the creates the cache has not caught up with, ``expectations``) and the
   new memory;
3. performs the child writes, in ``WRITE_ORDER``;
4. ``settle``: the plan, the outcomes of those writes, the memory, the longest hold of
   counters and ``now`` → the status to write now or none (``pacing``: counters held; the uids
   of the claims just created), the Events, the ``Result`` (when to come back) and the new
   memory;
5. performs the JobSet's own writes (status, then the TTL delete) and keeps what it was given.

Nothing here is in the cluster: a new process starts with ``Memory()`` for every JobSet (as
upstream's controller starts with empty expectations), and the caches tell it the rest.

Pure: values in, new values out; the clock is read by the reconciler and passed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from controller.jobset import expectations, pacing, preflight
from controller.jobset.decide import Plan
from controller.jobset.jobsetstatus import JobSetStatus
from controller.jobset.model import JobSet
from controller.jobset.status import Event
from controller.jobset.volumes import VolumePlan
from controller.jobset.writefailures import Failure
from controller.runtime.controller import Result
from controller.runtime.store import Obj

# The writes of a pass, in the order the reconciler makes them (the writes of one kind all at
# once, up to MAX_PARALLELISM in flight). A pass makes the kinds its plan has, in this order.
WRITE_ORDER: tuple[str, ...] = (
    # Before any claim exists, so that retention runs whatever happens next; refused, no claim
    # is written in the pass.
    "add finalizer",
    "create claims",
    "patch claims",
    # Retention Snapshot: a claim is deleted in a later pass than its snapshot is taken.
    "create snapshots",
    "delete snapshots",
    "delete claims",
    "create service",
    "create jobs",
    "delete jobs",
    # Of suspended Jobs whose pod template changes on resume: before the patch that changes it.
    "clear startTime",
    "patch jobs",
    # The JobSet's own, last: the status says what the writes before it did, or were refused.
    "write status",
    # ttlSecondsAfterFinished: the JobSet goes once its final status is stored.
    "delete jobset",
)

# An empty mapping, shared (read-only).
_NOTHING: Mapping[Any, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Memory:
    """What this process remembers of one JobSet between its passes.

    ``expected``: the Jobs we created that the cache has not shown yet, by name, with the
    monotonic time of the create (``expectations``).
    ``written``: the resourceVersion of our last write of the JobSet: a cache older than that is
    stale (``preflight``); None before our first write.
    ``held_since``: monotonic time of the first pass that found its status unwritten (counters
    held, or a write that has not been stored yet); None when what is stored is what the last
    pass decided. Counters are held from it (``pacing``).
    ``claims_deleted``: the claims we deleted that the cache still shows untouched, by uid, with
    the monotonic time of the delete (``expectations``: not deleted again until then).
    """

    expected: Mapping[str, float] = field(default_factory=lambda: _NOTHING)
    written: int | None = None
    held_since: float | None = None
    claims_deleted: Mapping[str, float] = field(default_factory=lambda: _NOTHING)


# What this process remembers of a JobSet it has not reconciled yet: nothing.
FRESH = Memory()


# --------------------------------------------------------------------------- memory, as writes go


def remembered(memory: Memory, written: Obj) -> Memory:
    """``memory`` after our write of the JobSet whose answer is ``written``: until the cache
    shows that version (or a newer one), the cache is stale."""
    version = preflight.remember(memory.written, written)
    return memory if version == memory.written else replace(memory, written=version)


def job_created(memory: Memory, name: str, at: float) -> Memory:
    """``memory`` after creating the Job ``name`` at ``at``: not created again until the cache
    shows it, or the expectation lapses."""
    return replace(memory, expected=expectations.expect(memory.expected, (name,), at))


def claim_deleted(memory: Memory, uid: str, at: float) -> Memory:
    """``memory`` after deleting the claim of uid ``uid`` at ``at``: not deleted again until the
    cache shows it deleting or gone, or the expectation lapses."""
    deleted = expectations.expect(memory.claims_deleted, (uid,), at)
    return replace(memory, claims_deleted=deleted)


def observed(memory: Memory, seen: Iterable[str]) -> Memory:
    """``memory`` once the cache shows the Jobs ``seen``: those are no longer expected."""
    if not memory.expected:
        return memory
    return replace(memory, expected=expectations.observe(memory.expected, seen))


def status_stored(memory: Memory, written: Obj) -> Memory:
    """``memory`` after the status write answered by ``written``: everything the pass decided is
    stored, so nothing is held any more."""
    return replace(remembered(memory, written), held_since=None)


# ----------------------------------------------------------------------------------------- step


@dataclass(frozen=True, slots=True)
class Step:
    """The plan to perform and the memory to keep while it is performed."""

    plan: Plan
    memory: Memory


def step(plan: Plan, seen: Iterable[str], memory: Memory, now: float) -> Step:
    """The plan ``decide`` made, with the Job names the cache shows (``seen``), ``memory`` and
    ``now``: the plan without the creates still expected (created by us, not shown yet, not
    lapsed) and without the claim deletes already made (``unsent_deletes``), and the memory
    without the expectations shown or lapsed."""
    if memory.expected:
        expected = expectations.live(expectations.observe(memory.expected, seen), now)
        memory = replace(memory, expected=expected)
    if plan.create_jobs and memory.expected:
        creates = expectations.creates_to_send(plan.create_jobs, memory.expected, now)
        if len(creates) != len(plan.create_jobs):
            plan = replace(plan, create_jobs=creates)
    if plan.volume is not None or memory.claims_deleted:
        volume, memory = unsent_deletes(plan.volume or VolumePlan(), memory, now)
        if plan.volume is not None and volume is not plan.volume:
            plan = replace(plan, volume=volume)
    return Step(plan, memory)


def unsent_deletes(vplan: VolumePlan, memory: Memory, now: float) -> tuple[VolumePlan, Memory]:
    """The claim deletes of ``vplan`` not made already, and the memory of those made.

    A pass that runs before the claim informer shows our own delete (the pass our status write
    starts, say) finds the claim untouched and plans its delete again: a second DELETE, refused
    with 409 by its resourceVersion precondition at best. A delete we made is left out while
    ``vplan`` still plans it (the cache shows the claim untouched), until it lapses
    (``EXPECTATION_TTL``); a claim the cache shows deleting or gone is no longer planned, and its
    expectation goes."""
    if not memory.claims_deleted:
        return vplan, memory
    planned = {claim.uid for claim in vplan.delete}
    made = {uid: at for uid, at in memory.claims_deleted.items() if uid in planned}
    made = expectations.live(made, now)
    if made != memory.claims_deleted:
        memory = replace(memory, claims_deleted=made)
    if made:
        vplan = replace(vplan, delete=[claim for claim in vplan.delete if claim.uid not in made])
    return vplan, memory


# --------------------------------------------------------------------------------------- settle


@dataclass(frozen=True, slots=True)
class Outcomes:
    """What the child writes of a pass came to: the uids of the claims created (by claim name),
    the writes the API server refused, and, when some were, the plan decided again knowing them
    (its status and Events say what was refused)."""

    created_claims: Mapping[str, str] = field(default_factory=lambda: _NOTHING)
    refused: Sequence[Failure] = ()
    redecided: Plan | None = None


@dataclass(frozen=True, slots=True)
class Settled:
    """What the rest of the pass does, and what to keep.

    ``status``: the complete status to write now; None: none (unchanged, or counters held).
    ``events``: recorded once that status is stored, or at once when there is none.
    ``cause``: why the status is written (``pacing.write_cause``, a metric label); "" without.
    ``result``: when the key comes back.
    ``memory``: to keep now, before the JobSet's writes (``status_stored`` once it is written).
    """

    status: JobSetStatus | None
    events: Sequence[Event]
    cause: str
    result: Result
    memory: Memory


def settle(
    plan: Plan,
    outcomes: Outcomes,
    memory: Memory,
    longest_hold: float,
    now: float,
    *,
    jobset: JobSet,
) -> Settled:
    """After the child writes of ``plan`` (see ``Outcomes``), for the ``jobset`` the plan was
    decided from: its status write, its Events, when to come back, and the memory to keep.

    A status of counters only is held (``pacing.status_timing``) from the first pass that found
    it unwritten until ``longest_hold`` has passed (``--status-progress-period``); it then goes
    out when the key comes back, or sooner with a milestone. Claims created in the pass are
    recorded in the status written, with everything else the plan would write: their pods mount
    them only once the record is stored. Writes refused bring the key back with backoff.
    """
    told = outcomes.redecided if outcomes.redecided is not None else plan
    status, events = told.status, told.events
    stored = jobset.status
    # None: nothing is stored yet (a write is then the first).
    previous = stored if jobset.raw.get("status") else None
    replicas = queue_replicas(jobset)
    timing = pacing.status_timing(
        stored,
        status,
        with_events=bool(events),
        requeue_after=plan.requeue_after,
        held_since=memory.held_since,
        now=now,
        longest_hold=longest_hold,
        replicas=replicas,
    )
    if outcomes.created_claims and plan.volume is not None:
        # A milestone, written now: whatever else the plan holds rides along.
        base = status if status is not None else stored
        status = base.with_claim_uids(plan.volume.claim_uids_with(outcomes.created_claims))
        timing = pacing.StatusTiming(write=True, requeue_after=plan.requeue_after)
    if not timing.write:
        status = None  # counters only: they ride on the next milestone or go out when due
    cause = ""
    if status is not None:
        cause = pacing.write_cause(
            previous, status, with_events=bool(events), paced=longest_hold > 0, replicas=replicas
        )
    # Unwritten until the write is stored (``status_stored``): a write refused goes out at once
    # when the key comes back, its hold having begun here or before. Zero counters of a new
    # JobSet begin no hold (``pacing.tells``).
    unwritten = status is not None or (
        told.status is not None and pacing.tells(stored, told.status)
    )
    held_since = pacing.held_from(memory.held_since, unwritten, now)
    if held_since != memory.held_since:
        memory = replace(memory, held_since=held_since)
    # Writes refused: back with backoff (the status says why), and by the end of a hold (or the
    # plan's own time) at the latest, however long the backoff has grown.
    result = Result(requeue=bool(outcomes.refused), requeue_after=timing.requeue_after)
    return Settled(status, events, cause, result, memory)


def queue_replicas(jobset: JobSet) -> dict[str, int] | None:
    """For status pacing: the spec's replicas per replicated job of a JobSet a queue may manage
    (``pacing.queued``), whose facts Kueue reads are milestones; None for another."""
    if not pacing.queued(jobset.suspend, jobset.status):
        return None
    return {r.name: r.replicas for r in jobset.replicated_jobs}
