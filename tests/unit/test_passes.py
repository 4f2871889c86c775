"""passes: the pure steps of a reconcile pass around ``decide`` — ``step`` leaves out the creates
the cache has not caught up with, ``settle`` decides the status write (counters held within the
longest hold, the uids of claims just created) and when to come back — and the per-JobSet
``Memory`` they take and return."""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.jobset import passes, volumes
from controller.jobset.decide import Plan
from controller.jobset.jobsetstatus import (
    ClaimUIDs,
    Condition,
    JobSetStatus,
    ReplicatedJobStatus,
)
from controller.jobset.passes import FRESH, Memory, Outcomes
from controller.jobset.status import Event
from controller.jobset.volumes import VolumePlan
from controller.jobset.volumes.lifecycle import ClaimDelete
from controller.jobset.writefailures import Failure, Write
from controller.runtime.controller import Result
from controller.runtime.store import Obj
from tests.unit.jobset_factories import make_jobset
from tests.unit.volumes.factories import make, mounting, tpl

NOW = 100.0

# -------------------------------------------------------------------------------------------- step


def _jobs(*names: str) -> list[Obj]:
    return [{"metadata": {"name": name}} for name in names]


# (creates planned, Jobs the cache shows, expected before, creates sent, expected after)
STEP_ROWS = [
    pytest.param(["a", "b"], [], {}, ["a", "b"], {}, id="nothing-expected-all-sent"),
    # Created by us at 99, not in the cache yet: posting it again would be a duplicate.
    pytest.param(["a", "b"], [], {"a": 99.0}, ["b"], {"a": 99.0}, id="expected-create-left-out"),
    pytest.param(["a", "b"], [], {"a": 99.0, "b": 99.5}, [], {"a": 99.0, "b": 99.5},
                 id="all-expected-none-sent"),
    # The cache shows it: no longer an expectation (a later delete makes it planned again).
    pytest.param(["b"], ["a"], {"a": 99.0}, ["b"], {}, id="shown-expectation-dropped"),
    # Never shown in 30 s (a lost watch event): planned again, and forgotten.
    pytest.param(["a"], [], {"a": 70.0}, ["a"], {}, id="lapsed-create-sent-again"),
    pytest.param([], [], {"a": 99.0}, [], {"a": 99.0}, id="no-creates-expectation-kept"),
    pytest.param(["c", "a", "b"], ["x"], {"a": 99.0}, ["c", "b"], {"a": 99.0},
                 id="order-kept"),
]  # fmt: skip


@pytest.mark.parametrize(("creates", "seen", "expected", "sent", "after"), STEP_ROWS)
def test_step(
    creates: list[str],
    seen: list[str],
    expected: dict[str, float],
    sent: list[str],
    after: dict[str, float],
) -> None:
    plan = Plan(create_jobs=_jobs(*creates), delete_jobs=["old"], requeue_after=7.0)
    memory = Memory(expected=dict(expected), written=5, held_since=1.0)
    before = (copy.deepcopy(plan), memory)
    stepped = passes.step(plan, seen, memory, NOW)
    assert [job["metadata"]["name"] for job in stepped.plan.create_jobs] == sent
    assert dict(stepped.memory.expected) == after
    # Everything else of the plan and of the memory is kept, and the inputs are not changed.
    assert replace(stepped.plan, create_jobs=plan.create_jobs) == plan
    assert replace(stepped.memory, expected=memory.expected) == memory
    assert (plan, memory) == before


def test_step_at_steady_state_makes_nothing_new() -> None:
    """Nothing planned, nothing expected: the same plan and memory come back (no copies)."""
    plan = Plan()
    stepped = passes.step(plan, ["a", "b"], FRESH, NOW)
    assert stepped.plan is plan and stepped.memory is FRESH


# (claim uids planned for deletion, deleted before, deletes sent, deleted after)
DELETE_ROWS = [
    pytest.param(["u1", "u2"], {}, ["u1", "u2"], {}, id="nothing-deleted-all-sent"),
    # Deleted by us at 99; the cache still shows it untouched: a second DELETE would be wasted.
    pytest.param(["u1", "u2"], {"u1": 99.0}, ["u2"], {"u1": 99.0}, id="made-delete-left-out"),
    # The cache shows it deleting or gone: no longer planned, and forgotten.
    pytest.param(["u2"], {"u1": 99.0}, ["u2"], {}, id="no-longer-planned-forgotten"),
    pytest.param([], {"u1": 99.0}, [], {}, id="nothing-planned-all-forgotten"),
    # Never shown deleting in 30 s (a lost watch event): planned again, and sent.
    pytest.param(["u1"], {"u1": 60.0}, ["u1"], {}, id="lapsed-delete-sent-again"),
]  # fmt: skip


def _deletes(*uids: str) -> list[ClaimDelete]:
    return [ClaimDelete(f"claim-{uid}", uid, "7") for uid in uids]


@pytest.mark.parametrize(("planned", "before", "sent", "after"), DELETE_ROWS)
def test_unsent_deletes(
    planned: list[str], before: dict[str, float], sent: list[str], after: dict[str, float]
) -> None:
    vplan = VolumePlan(delete=_deletes(*planned), delete_snapshots=["s"])
    memory = Memory(written=5, claims_deleted=dict(before))
    left, kept = passes.unsent_deletes(vplan, memory, NOW)
    assert [d.uid for d in left.delete] == sent
    assert dict(kept.claims_deleted) == after
    assert replace(left, delete=vplan.delete) == vplan and kept.written == 5
    # Through ``step``, the same: the plan's other writes are kept.
    stepped = passes.step(Plan(volume=vplan, delete_jobs=["old"]), [], memory, NOW)
    assert stepped.plan.volume is not None and stepped.plan.volume.delete == left.delete
    assert stepped.plan.delete_jobs == ["old"] and stepped.memory == kept


def test_a_delete_made_is_remembered_until_the_cache_moves() -> None:
    """``claim_deleted`` then a pass whose cache is stale: the delete is not sent again."""
    memory = passes.claim_deleted(FRESH, "u1", NOW)
    stale = passes.step(Plan(volume=VolumePlan(delete=_deletes("u1"))), [], memory, NOW + 1)
    assert stale.plan.volume is not None and stale.plan.volume.delete == []
    moved = passes.step(Plan(volume=VolumePlan()), [], stale.memory, NOW + 2)
    assert moved.memory == FRESH


# ------------------------------------------------------------------------------------------ settle

JOBSET = make_jobset()  # stored status: {"restarts": 0}; never suspended (no queue facts)
STORED = JOBSET.status
COUNTERS = replace(STORED, replicated_jobs_status=(ReplicatedJobStatus("workers", active=2),))
MILESTONE = replace(STORED, restarts=1)
ZEROS = replace(STORED, replicated_jobs_status=(ReplicatedJobStatus("workers"),))
REFUSED = replace(STORED, conditions=(Condition("x", "True", "Refused"),))
# A claim the plan creates (of slot ("data", "workers", 0, None)) and its uid once created.
(DATA_CLAIM,) = volumes.model(
    make([{"templates": [tpl("data")], "scope": "Job"}], rjobs=[mounting("workers", 1, ("data",))])
).desired
CREATES = VolumePlan(create=[DATA_CLAIM])
CREATED = {DATA_CLAIM.name: "abcdef01-uid"}
CLAIM_UIDS = (ClaimUIDs("data", "abcdef01", "workers"),)
EVENT = Event("Normal", "Started", "started")
FAILURE = Failure(Write.CREATE_JOB, "js-workers-0", "quota exceeded")

HOLD = 5.0  # the default longest hold (--status-progress-period)


@dataclass(frozen=True)
class Settles:
    """What ``settle`` must return: the status written (None: none), its cause, the Result, and
    when the hold of the JobSet's unwritten status began (None: nothing unwritten)."""

    status: JobSetStatus | None
    cause: str
    result: Result
    held_since: float | None


# (plan, outcomes, memory, longest hold) -> Settles
SETTLE_ROWS = [
    pytest.param(Plan(), Outcomes(), FRESH, HOLD, Settles(None, "", Result(), None),
                 id="nothing-to-write"),
    pytest.param(Plan(requeue_after=42.0), Outcomes(), FRESH, HOLD,
                 Settles(None, "", Result(requeue_after=42.0), None), id="plan-requeue-kept"),
    # Counters that were held went back to what is stored: nothing held any more.
    pytest.param(Plan(), Outcomes(), Memory(held_since=98.0), HOLD,
                 Settles(None, "", Result(), None), id="counters-back-to-stored-hold-ends"),
    # Written at once; unwritten (held_since kept) until the write is stored.
    pytest.param(Plan(status=MILESTONE), Outcomes(), Memory(held_since=97.0), HOLD,
                 Settles(MILESTONE, "milestone", Result(), 97.0),
                 id="milestone-at-once-carries-held-counters"),
    pytest.param(Plan(status=COUNTERS, events=[EVENT]), Outcomes(), FRESH, HOLD,
                 Settles(COUNTERS, "events", Result(), NOW), id="events-write-counters-at-once"),
    # The first pass that finds counters unwritten begins their hold: the whole of it.
    pytest.param(Plan(status=COUNTERS), Outcomes(), FRESH, HOLD,
                 Settles(None, "", Result(requeue_after=HOLD), NOW),
                 id="first-counters-held-the-longest-hold"),
    # A new JobSet's zero counters tell nothing: not written, and no hold begins.
    pytest.param(Plan(status=ZEROS), Outcomes(), FRESH, HOLD, Settles(None, "", Result(), None),
                 id="zero-counters-of-a-new-jobset-wait-for-news"),
    pytest.param(Plan(status=COUNTERS, requeue_after=3.0), Outcomes(), FRESH, HOLD,
                 Settles(None, "", Result(requeue_after=3.0), NOW),
                 id="counters-held-plan-back-sooner"),
    # Held since 98: back at 103, whatever changed since (the hold does not start over).
    pytest.param(Plan(status=COUNTERS), Outcomes(), Memory(held_since=98.0), HOLD,
                 Settles(None, "", Result(requeue_after=3.0), 98.0),
                 id="counters-held-back-when-the-hold-ends"),
    pytest.param(Plan(status=COUNTERS, requeue_after=60.0), Outcomes(), Memory(held_since=98.0),
                 HOLD, Settles(None, "", Result(requeue_after=3.0), 98.0),
                 id="counters-held-back-sooner-than-the-plan"),
    pytest.param(Plan(status=COUNTERS), Outcomes(), Memory(held_since=95.0), HOLD,
                 Settles(COUNTERS, "progress", Result(), 95.0), id="counters-due-written"),
    # A write refused (409, stale cache) comes back with backoff, long past the hold: at once.
    pytest.param(Plan(status=COUNTERS), Outcomes(), Memory(held_since=10.0), HOLD,
                 Settles(COUNTERS, "progress", Result(), 10.0), id="counters-overdue-written"),
    # A longer hold set by the user: the same rule.
    pytest.param(Plan(status=COUNTERS), Outcomes(), Memory(held_since=95.0), 60.0,
                 Settles(None, "", Result(requeue_after=55.0), 95.0), id="longer-hold-set"),
    pytest.param(Plan(status=COUNTERS), Outcomes(), Memory(held_since=99.0), 0.0,
                 Settles(COUNTERS, "unpaced", Result(), 99.0), id="pacing-off-every-change"),
    # Writes refused: the status decided again says why, and the key comes back with backoff.
    pytest.param(Plan(status=COUNTERS, requeue_after=42.0),
                 Outcomes(refused=[FAILURE], redecided=Plan(status=REFUSED, events=[EVENT])),
                 FRESH, HOLD, Settles(REFUSED, "events", Result(requeue=True, requeue_after=42.0),
                 NOW), id="refused-writes-redecided-requeue"),
    # Refused again (reported already, no Event): the counters held are back by the end of their
    # hold at the latest, however long the backoff has grown.
    pytest.param(Plan(status=COUNTERS),
                 Outcomes(refused=[FAILURE], redecided=Plan(status=COUNTERS)),
                 Memory(held_since=98.0), HOLD,
                 Settles(None, "", Result(requeue=True, requeue_after=3.0), 98.0),
                 id="refused-again-counters-back-by-the-end-of-the-hold"),
    # Claims created: their uids are written in this pass, and everything else the plan holds
    # rides along (the counters too: a write goes out anyway).
    pytest.param(Plan(status=MILESTONE, volume=CREATES), Outcomes(created_claims=CREATED),
                 FRESH, HOLD,
                 Settles(MILESTONE.with_claim_uids(CLAIM_UIDS), "milestone", Result(), NOW),
                 id="created-claims-recorded-with-the-status"),
    pytest.param(Plan(status=COUNTERS, volume=CREATES, requeue_after=8.0),
                 Outcomes(created_claims=CREATED), Memory(held_since=99.0), HOLD,
                 Settles(COUNTERS.with_claim_uids(CLAIM_UIDS), "milestone",
                         Result(requeue_after=8.0), 99.0),
                 id="created-claims-recorded-counters-ride-along"),
    pytest.param(Plan(volume=CREATES), Outcomes(created_claims=CREATED), FRESH, HOLD,
                 Settles(STORED.with_claim_uids(CLAIM_UIDS), "milestone", Result(), NOW),
                 id="created-claims-recorded-status-unchanged"),
]  # fmt: skip


@pytest.mark.parametrize(("plan", "outcomes", "memory", "hold", "settles"), SETTLE_ROWS)
def test_settle(
    plan: Plan, outcomes: Outcomes, memory: Memory, hold: float, settles: Settles
) -> None:
    before = copy.deepcopy(plan)
    settled = passes.settle(plan, outcomes, memory, hold, NOW, jobset=JOBSET)
    assert settled.status == settles.status
    assert settled.cause == settles.cause
    assert settled.result == settles.result
    assert settled.memory.held_since == settles.held_since
    told = outcomes.redecided or plan
    assert settled.events == told.events
    # The rest of the memory is not settle's.
    assert replace(settled.memory, held_since=None) == replace(memory, held_since=None)
    assert plan == before  # pure: the plan is not changed


def test_settle_at_steady_state_makes_nothing_new() -> None:
    """Nothing to write, nothing held: the same memory comes back."""
    memory = Memory(written=7)
    settled = passes.settle(Plan(), Outcomes(), memory, HOLD, NOW, jobset=JOBSET)
    assert settled.memory is memory and settled.status is None


@given(
    held_for=st.floats(0.0, 1e5),
    hold=st.sampled_from([0.5, 5.0, 60.0]),
    requeue_after=st.none() | st.floats(0.0, 1e4),
    suspended=st.booleans(),
    refused=st.booleans(),
)
def test_held_counters_never_wait_past_the_longest_hold(
    held_for: float, hold: float, requeue_after: float | None, suspended: bool, refused: bool
) -> None:
    """Whatever the plan's own requeue, however long the counters have been held, and with
    child writes refused pass after pass (backoff), a pass writes them or comes back no later
    than the end of their hold (a queued JobSet too)."""
    jobset = make_jobset(suspend=True) if suspended else JOBSET
    counters = replace(
        jobset.status, replicated_jobs_status=(ReplicatedJobStatus("workers", ready=1),)
    )
    held_since = NOW - held_for
    plan = Plan(status=counters, requeue_after=requeue_after)
    settled = passes.settle(
        plan,
        Outcomes(refused=[FAILURE], redecided=plan) if refused else Outcomes(),
        Memory(held_since=held_since),
        hold,
        NOW,
        jobset=jobset,
    )
    if settled.status is None:
        back = settled.result.requeue_after
        assert back is not None and 0 <= back <= hold
        assert NOW + back <= held_since + hold + 1e-9
    else:
        assert held_for >= hold or settled.cause == "milestone"


def test_a_queued_jobset_writes_what_kueue_reads_at_once() -> None:
    """Of a suspended JobSet, any Job active is a milestone (Kueue's IsActive): not held."""
    jobset = make_jobset(suspend=True)
    active = replace(STORED, replicated_jobs_status=(ReplicatedJobStatus("leader", active=1),))
    settled = passes.settle(Plan(status=active), Outcomes(), FRESH, HOLD, NOW, jobset=jobset)
    assert settled.status == active and settled.cause == "milestone"
    assert passes.queue_replicas(jobset) == {"leader": 1, "workers": 2}
    assert passes.queue_replicas(JOBSET) is None


def test_counters_through_a_pass_and_the_next() -> None:
    """Held, then due: the settle that holds begins the hold, the pass that comes back at its
    end writes them; once stored nothing is held, and the next counters get a hold of their
    own, begun by the pass that sees them."""
    first = passes.settle(Plan(status=COUNTERS), Outcomes(), FRESH, HOLD, NOW, jobset=JOBSET)
    assert first.status is None and first.memory.held_since == NOW
    back = NOW + first.result.requeue_after  # type: ignore[operator]
    more = replace(STORED, replicated_jobs_status=(ReplicatedJobStatus("workers", active=3),))
    # A change in between: still held, and back at the same moment.
    between = passes.settle(
        Plan(status=more), Outcomes(), first.memory, HOLD, NOW + 2, jobset=JOBSET
    )
    assert between.status is None
    assert NOW + 2 + between.result.requeue_after == pytest.approx(back)  # type: ignore[operator]
    second = passes.settle(Plan(status=more), Outcomes(), between.memory, HOLD, back, jobset=JOBSET)
    assert second.status == more and second.cause == "progress"
    stored = passes.status_stored(second.memory, {"metadata": {"resourceVersion": "9"}})
    assert stored == Memory(written=9, held_since=None)
    later = replace(STORED, replicated_jobs_status=(ReplicatedJobStatus("workers", active=4),))
    third = passes.settle(Plan(status=later), Outcomes(), stored, HOLD, back + 1, jobset=JOBSET)
    assert third.status is None and third.result.requeue_after == HOLD


# ------------------------------------------------------------------------------ memory


@pytest.mark.parametrize(
    ("written", "version"),
    [
        pytest.param({"metadata": {"resourceVersion": "12"}}, 12, id="numeric-remembered"),
        pytest.param({"metadata": {"resourceVersion": "x1"}}, 7, id="not-numeric-kept"),
        pytest.param({}, 7, id="none-kept"),
    ],
)
def test_remembered(written: Obj, version: int) -> None:
    memory = Memory(written=7, held_since=2.0)
    assert passes.remembered(memory, written) == Memory(written=version, held_since=2.0)


def test_job_created_expects_it_until_shown() -> None:
    memory = passes.job_created(Memory(expected={"a": 1.0}, written=3), "b", 5.0)
    assert memory == Memory(expected={"a": 1.0, "b": 5.0}, written=3)
    assert passes.observed(memory, ["a", "x"]) == Memory(expected={"b": 5.0}, written=3)
    assert passes.observed(FRESH, ["a"]) is FRESH
