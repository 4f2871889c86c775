"""passes: the pure steps of a reconcile pass around ``decide`` — ``step`` leaves out the creates
the cache has not caught up with, ``settle`` decides the status write (counters held, the budget
of counter writes, the uids of claims just created) and when to come back — and the per-JobSet
``Memory`` they take and return."""

from __future__ import annotations

import copy
from dataclasses import dataclass, replace

import pytest

from controller.jobset import pacing, passes, volumes
from controller.jobset.decide import Plan
from controller.jobset.jobsetstatus import (
    ClaimUIDs,
    Condition,
    JobSetStatus,
    ReplicatedJobStatus,
)
from controller.jobset.passes import FRESH, Memory, Outcomes, Pace
from controller.jobset.status import Event
from controller.jobset.volumes import VolumePlan
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
    memory = Memory(expected=dict(expected), written=5, status_written_at=1.0, streak=2)
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


# ------------------------------------------------------------------------------------------ settle

JOBSET = make_jobset()  # stored status: {"restarts": 0}; never suspended (no queue facts)
STORED = JOBSET.status
COUNTERS = replace(STORED, replicated_jobs_status=(ReplicatedJobStatus("workers", active=2),))
MILESTONE = replace(STORED, restarts=1)
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

PERIOD, RATE = 10.0, 1.0
PACE = Pace.start(PERIOD, RATE)
SPENT = replace(PACE, budget=pacing.ProgressBudget(RATE, PERIOD * RATE, tokens=0.0, last=NOW))


@dataclass(frozen=True)
class Settles:
    """What ``settle`` must return: the status written (None: none), its cause, the Result,
    whether the JobSet's counters are held, the JobSets held over all, the streak once written,
    and the writes the budget has left (None: full)."""

    status: JobSetStatus | None
    cause: str
    result: Result
    held: bool
    held_count: int
    streak: int = 0
    tokens: float | None = None


# (plan, outcomes, memory, pace) -> Settles
SETTLE_ROWS = [
    pytest.param(Plan(), Outcomes(), FRESH, PACE,
                 Settles(None, "", Result(), held=False, held_count=0), id="nothing-to-write"),
    pytest.param(Plan(requeue_after=42.0), Outcomes(), FRESH, PACE,
                 Settles(None, "", Result(requeue_after=42.0), held=False, held_count=0),
                 id="plan-requeue-kept"),
    pytest.param(Plan(status=MILESTONE), Outcomes(), Memory(status_written_at=99.0, streak=3),
                 PACE, Settles(MILESTONE, "milestone", Result(), held=False, held_count=0),
                 id="milestone-written-at-once-streak-starts-over"),
    pytest.param(Plan(status=COUNTERS, events=[EVENT]), Outcomes(), Memory(status_written_at=99.0),
                 PACE, Settles(COUNTERS, "events", Result(), held=False, held_count=0),
                 id="events-write-counters-at-once"),
    # The first settle of a JobSet paces from now: its first counters wait a period.
    pytest.param(Plan(status=COUNTERS), Outcomes(), FRESH, PACE,
                 Settles(None, "", Result(requeue_after=10.0), held=True, held_count=1),
                 id="first-counters-held-a-period"),
    pytest.param(Plan(status=COUNTERS, requeue_after=3.0), Outcomes(),
                 Memory(status_written_at=95.0), PACE,
                 Settles(None, "", Result(requeue_after=3.0), held=True, held_count=1),
                 id="counters-held-plan-back-sooner"),
    pytest.param(Plan(status=COUNTERS), Outcomes(), Memory(status_written_at=95.0),
                 PACE, Settles(None, "", Result(requeue_after=5.0), held=True, held_count=1),
                 id="counters-held-back-when-due"),
    # Streak 1: the hold is 4 periods (pacing.progress_hold).
    pytest.param(Plan(status=COUNTERS), Outcomes(), Memory(status_written_at=80.0, streak=1),
                 PACE, Settles(None, "", Result(requeue_after=20.0), held=True, held_count=1),
                 id="streak-lengthens-hold"),
    pytest.param(Plan(status=COUNTERS), Outcomes(), Memory(status_written_at=80.0, streak=1),
                 replace(PACE, held=5),
                 Settles(None, "", Result(requeue_after=20.0), held=True, held_count=6),
                 id="held-counted-over-all-jobsets"),
    # Held before: still held, counted once.
    pytest.param(Plan(status=COUNTERS), Outcomes(), Memory(status_written_at=95.0, held=True),
                 replace(PACE, held=1),
                 Settles(None, "", Result(requeue_after=5.0), held=True, held_count=1),
                 id="held-again-counted-once"),
    # 30 JobSets held at 1 write/s: no hold shorter than 30 s (pacing.backlog_hold).
    pytest.param(Plan(status=COUNTERS), Outcomes(), Memory(status_written_at=80.0),
                 replace(PACE, held=30),
                 Settles(None, "", Result(requeue_after=10.0), held=True, held_count=31),
                 id="backlog-lengthens-hold"),
    pytest.param(Plan(status=COUNTERS), Outcomes(), Memory(status_written_at=80.0), PACE,
                 Settles(COUNTERS, "progress", Result(), held=False, held_count=0, streak=1,
                         tokens=PERIOD * RATE - 1), id="counters-due-written-budget-spent"),
    pytest.param(Plan(status=COUNTERS), Outcomes(), Memory(status_written_at=80.0, held=True),
                 replace(PACE, held=4),
                 Settles(COUNTERS, "progress", Result(), held=False, held_count=3, streak=1,
                         tokens=PERIOD * RATE - 1), id="held-counters-go-out-released"),
    # Due, but the counter writes over all JobSets are spent: held, back after one write's time.
    pytest.param(Plan(status=COUNTERS), Outcomes(), Memory(status_written_at=80.0), SPENT,
                 Settles(None, "", Result(requeue_after=1.0), held=True, held_count=1,
                         tokens=0.0), id="budget-refuses-counters"),
    pytest.param(Plan(status=COUNTERS), Outcomes(), Memory(status_written_at=80.0),
                 replace(SPENT, held=9),
                 Settles(None, "", Result(requeue_after=10.0), held=True, held_count=10,
                         tokens=0.0), id="budget-refuses-behind-the-backlog"),
    # The budget is for counters alone: a milestone always goes out, and spends none.
    pytest.param(Plan(status=MILESTONE), Outcomes(), Memory(status_written_at=99.0), SPENT,
                 Settles(MILESTONE, "milestone", Result(), held=False, held_count=0, tokens=0.0),
                 id="budget-never-holds-a-milestone"),
    pytest.param(Plan(status=COUNTERS), Outcomes(), Memory(status_written_at=99.0),
                 replace(SPENT, period=0.0),
                 Settles(COUNTERS, "unpaced", Result(), held=False, held_count=0, streak=1,
                         tokens=0.0), id="pacing-off-every-change-written"),
    # Writes refused: the status decided again says why, and the key comes back with backoff.
    pytest.param(Plan(status=COUNTERS, requeue_after=42.0),
                 Outcomes(refused=[FAILURE], redecided=Plan(status=REFUSED, events=[EVENT])),
                 Memory(status_written_at=99.0), PACE,
                 Settles(REFUSED, "events", Result(requeue=True), held=False, held_count=0),
                 id="refused-writes-redecided-requeue"),
    # Claims created: their uids are written in this pass, counters held or not.
    pytest.param(Plan(status=MILESTONE, volume=CREATES),
                 Outcomes(created_claims=CREATED), Memory(status_written_at=99.0),
                 PACE,
                 Settles(MILESTONE.with_claim_uids(CLAIM_UIDS), "milestone",
                         Result(), held=False, held_count=0),
                 id="created-claims-recorded-with-the-status"),
    pytest.param(Plan(status=COUNTERS, volume=CREATES),
                 Outcomes(created_claims=CREATED), Memory(status_written_at=99.0),
                 PACE,
                 Settles(STORED.with_claim_uids(CLAIM_UIDS), "milestone",
                         Result(requeue_after=9.0), held=True, held_count=1),
                 id="created-claims-recorded-counters-held"),
    pytest.param(Plan(volume=CREATES), Outcomes(created_claims=CREATED),
                 Memory(status_written_at=99.0), PACE,
                 Settles(STORED.with_claim_uids(CLAIM_UIDS), "milestone",
                         Result(), held=False, held_count=0),
                 id="created-claims-recorded-status-unchanged"),
]  # fmt: skip


@pytest.mark.parametrize(("plan", "outcomes", "memory", "pace", "settles"), SETTLE_ROWS)
def test_settle(
    plan: Plan, outcomes: Outcomes, memory: Memory, pace: Pace, settles: Settles
) -> None:
    before = copy.deepcopy(plan)
    settled = passes.settle(plan, outcomes, memory, pace, NOW, jobset=JOBSET)
    assert settled.status == settles.status
    assert settled.cause == settles.cause
    assert settled.result == settles.result
    assert settled.memory.held is settles.held
    assert settled.pace.held == settles.held_count
    assert settled.pace.budget.tokens == settles.tokens
    if settled.status is not None:
        assert settled.streak == settles.streak
    told = outcomes.redecided or plan
    assert settled.events == told.events
    # Counters are paced from our last status write, or from the first settle: kept until the
    # status is stored (``status_stored``); the rest of the memory is not settle's.
    assert settled.memory.status_written_at == (memory.status_written_at or NOW)
    assert replace(settled.memory, status_written_at=None, held=False) == replace(
        memory, status_written_at=None, held=False
    )
    assert plan == before  # pure: the plan is not changed


def test_settle_at_steady_state_makes_nothing_new() -> None:
    """Nothing to write, nothing held: the same memory and pace come back."""
    memory = Memory(status_written_at=50.0)
    settled = passes.settle(Plan(), Outcomes(), memory, PACE, NOW, jobset=JOBSET)
    assert settled.memory is memory and settled.pace is PACE


def test_a_queued_jobset_writes_what_kueue_reads_at_once() -> None:
    """Of a suspended JobSet, any Job active is a milestone (Kueue's IsActive): not held."""
    jobset = make_jobset(suspend=True)
    active = replace(STORED, replicated_jobs_status=(ReplicatedJobStatus("leader", active=1),))
    settled = passes.settle(
        Plan(status=active), Outcomes(), Memory(status_written_at=99.0), PACE, NOW, jobset=jobset
    )
    assert settled.status == active and settled.cause == "milestone"
    assert passes.queue_replicas(jobset) == {"leader": 1, "workers": 2}
    assert passes.queue_replicas(JOBSET) is None


def test_counters_through_a_pass_and_the_next() -> None:
    """Held, then due: the settle that holds counts the JobSet; the one that writes them releases
    it; once stored, the next counters are held longer (the streak)."""
    first = passes.settle(Plan(status=COUNTERS), Outcomes(), FRESH, PACE, NOW, jobset=JOBSET)
    assert first.status is None and first.pace.held == 1
    back = NOW + first.result.requeue_after  # type: ignore[operator]
    second = passes.settle(
        Plan(status=COUNTERS), Outcomes(), first.memory, first.pace, back, jobset=JOBSET
    )
    assert second.status == COUNTERS and second.pace.held == 0
    stored = passes.status_stored(
        second.memory, {"metadata": {"resourceVersion": "9"}}, second.streak, back + 0.1
    )
    assert stored == Memory(written=9, status_written_at=back + 0.1, streak=1)
    more = replace(STORED, replicated_jobs_status=(ReplicatedJobStatus("workers", active=3),))
    third = passes.settle(
        Plan(status=more), Outcomes(), stored, second.pace, back + 11, jobset=JOBSET
    )
    assert third.status is None
    assert third.result.requeue_after == pytest.approx(4 * PERIOD - 10.9)


# ------------------------------------------------------------------------------ memory, pace


@pytest.mark.parametrize(
    ("written", "version"),
    [
        pytest.param({"metadata": {"resourceVersion": "12"}}, 12, id="numeric-remembered"),
        pytest.param({"metadata": {"resourceVersion": "x1"}}, 7, id="not-numeric-kept"),
        pytest.param({}, 7, id="none-kept"),
    ],
)
def test_remembered(written: Obj, version: int) -> None:
    memory = Memory(written=7, streak=2)
    assert passes.remembered(memory, written) == Memory(written=version, streak=2)


def test_job_created_expects_it_until_shown() -> None:
    memory = passes.job_created(Memory(expected={"a": 1.0}, written=3), "b", 5.0)
    assert memory == Memory(expected={"a": 1.0, "b": 5.0}, written=3)
    assert passes.observed(memory, ["a", "x"]) == Memory(expected={"b": 5.0}, written=3)
    assert passes.observed(FRESH, ["a"]) is FRESH


@pytest.mark.parametrize(
    ("held", "count"),
    [pytest.param(True, 2, id="held-uncounted"), pytest.param(False, 3, id="not")],
)
def test_a_forgotten_jobset_is_no_longer_counted_held(held: bool, count: int) -> None:
    pace = replace(PACE, held=3)
    assert pace.without(Memory(held=held)).held == count


def test_the_budget_starts_full_with_a_periods_worth() -> None:
    budget = Pace.start(PERIOD, RATE).budget
    assert (budget.rate, budget.burst, budget.tokens) == (RATE, PERIOD * RATE, None)
    assert Pace.start(0.0, 0.0).budget.take(NOW) == (True, Pace.start(0.0, 0.0).budget)
