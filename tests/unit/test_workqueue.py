"""WorkQueue: client-go workqueue semantics, delayed and rate-limited adds, metrics."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Protocol, cast

import prometheus_client
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from prometheus_client import CollectorRegistry

from controller.runtime.clock import FakeClock, SystemClock, Timer
from controller.runtime.ratelimit import ItemExponentialFailureRateLimiter
from controller.runtime.workqueue import (
    LATENCY_BUCKETS,
    NoopWorkqueueMetrics,
    ShutDown,
    WorkQueue,
    WorkqueueMetrics,
)

pytestmark = pytest.mark.unit


async def settle() -> None:
    """Let woken tasks run (a woken getter needs a few loop iterations)."""
    for _ in range(20):
        await asyncio.sleep(0)


def fake_queue(
    clock: FakeClock | None = None, *, base: float = 1.0, cap: float = 8.0
) -> tuple[WorkQueue[str], FakeClock]:
    clock = clock if clock is not None else FakeClock()
    limiter = ItemExponentialFailureRateLimiter[str](base_delay=base, max_delay=cap)
    return WorkQueue[str]("test", rate_limiter=limiter, clock=clock), clock


async def drain_ready(queue: WorkQueue[str]) -> list[str]:
    """Get and finish every key that is ready right now."""
    keys = []
    while len(queue):
        key = await queue.get()
        queue.done(key)
        keys.append(key)
    return keys


# ------------------------------------------------------------------- basic queue


async def test_fifo_and_each_key_held_once() -> None:
    queue, _ = fake_queue()
    for key in ["a", "b", "a", "c", "b", "a"]:
        queue.add(key)
    assert len(queue) == 3
    assert [await queue.get() for _ in range(3)] == ["a", "b", "c"]
    assert len(queue) == 0


async def test_key_being_processed_is_not_handed_out_again_until_done() -> None:
    queue, _ = fake_queue()
    queue.add("a")
    assert await queue.get() == "a"
    queue.add("a")
    queue.add("a")
    assert len(queue) == 0  # dirty, but parked until done()
    waiter = asyncio.create_task(queue.get())
    await settle()
    assert not waiter.done()

    queue.done("a")
    await settle()
    assert waiter.result() == "a"
    queue.done("a")
    assert len(queue) == 0  # the two re-adds produced exactly one more round


async def test_done_without_readd_does_not_requeue() -> None:
    queue, _ = fake_queue()
    queue.add("a")
    key = await queue.get()
    queue.done(key)
    assert len(queue) == 0
    queue.add("a")
    assert len(queue) == 1


async def test_done_for_key_not_processing_raises() -> None:
    queue, _ = fake_queue()
    queue.add("a")
    with pytest.raises(ValueError, match="not processing"):
        queue.done("a")
    assert len(queue) == 1
    with pytest.raises(ValueError):
        queue.done("never-added")


async def test_get_waits_for_add_and_getters_are_served_in_order() -> None:
    queue, _ = fake_queue()
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    await settle()
    assert not any(g.done() for g in getters)
    queue.add("x")
    queue.add("y")
    await settle()
    assert getters[0].result() == "x"
    assert getters[1].result() == "y"
    assert not getters[2].done()
    queue.add("z")
    await settle()
    assert getters[2].result() == "z"


async def test_cancelled_waiting_get_is_removed() -> None:
    queue, _ = fake_queue()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await settle()
    first.cancel()
    await settle()
    assert first.cancelled()
    queue.add("x")
    await settle()
    assert second.result() == "x"


async def test_get_cancelled_after_being_woken_passes_the_key_on() -> None:
    queue, _ = fake_queue()
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await settle()
    queue.add("x")  # wakes `first` ...
    first.cancel()  # ... which is cancelled before it runs
    await settle()
    assert first.cancelled()
    assert second.result() == "x"


async def test_get_cancelled_after_being_woken_leaves_key_queued() -> None:
    queue, _ = fake_queue()
    only = asyncio.create_task(queue.get())
    await settle()
    queue.add("x")
    only.cancel()
    await settle()
    assert only.cancelled()
    assert len(queue) == 1
    assert await queue.get() == "x"


async def test_get_cancelled_via_wait_for_timeout_loses_nothing() -> None:
    queue, _ = fake_queue()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(queue.get(), timeout=0.01)
    queue.add("x")
    assert await asyncio.wait_for(queue.get(), timeout=5) == "x"


# ---------------------------------------------------------------------- shutdown


async def test_shut_down_wakes_getters_with_shutdown() -> None:
    queue, _ = fake_queue()
    getters = [asyncio.create_task(queue.get()) for _ in range(2)]
    await settle()
    queue.shut_down()
    await settle()
    for getter in getters:
        assert isinstance(getter.exception(), ShutDown)
    assert queue.is_shutting_down
    with pytest.raises(ShutDown):
        await queue.get()


async def test_shut_down_hands_out_queued_keys_then_raises_and_ignores_adds() -> None:
    queue, _ = fake_queue()
    queue.add("a")
    queue.add("b")
    queue.shut_down()
    queue.add("c")
    queue.add_after("d", 0)
    queue.add_rate_limited("e")
    assert len(queue) == 2
    assert await queue.get() == "a"
    assert await queue.get() == "b"
    with pytest.raises(ShutDown):
        await queue.get()
    assert queue.num_requeues("e") == 0
    queue.shut_down()  # idempotent


async def test_key_readded_before_shutdown_is_still_handed_out_after_done() -> None:
    queue, _ = fake_queue()
    queue.add("a")
    key = await queue.get()
    queue.add("a")
    queue.shut_down()
    queue.done(key)
    assert await queue.get() == "a"
    queue.done("a")
    with pytest.raises(ShutDown):
        await queue.get()


async def test_shut_down_with_drain_waits_for_processing() -> None:
    queue, _ = fake_queue()
    queue.add("a")
    queue.add("b")
    a = await queue.get()
    drain = asyncio.create_task(queue.shut_down_with_drain())
    await settle()
    assert not drain.done()
    assert queue.is_shutting_down
    # Queued keys are still handed out while draining and are waited for as well.
    b = await queue.get()
    queue.done(a)
    await settle()
    assert not drain.done()
    queue.done(b)
    await settle()
    assert drain.result() is True


async def test_shut_down_with_drain_returns_immediately_when_idle() -> None:
    queue, _ = fake_queue()
    assert await queue.shut_down_with_drain(timeout=0) is True


async def test_shut_down_with_drain_times_out() -> None:
    queue, _ = fake_queue()
    queue.add("a")
    await queue.get()
    assert await queue.shut_down_with_drain(timeout=0.01) is False
    queue.done("a")  # still allowed after the drain gave up


async def test_shut_down_cuts_a_drain_short() -> None:
    queue, _ = fake_queue()
    queue.add("a")
    await queue.get()
    drain = asyncio.create_task(queue.shut_down_with_drain())
    await settle()
    queue.shut_down()
    await settle()
    assert drain.result() is False


# ------------------------------------------------------------------ delayed adds


async def test_add_after_becomes_ready_exactly_at_deadline() -> None:
    queue, clock = fake_queue()
    queue.add_after("a", 1.0)
    assert len(queue) == 0
    clock.advance(0.999)
    assert len(queue) == 0
    clock.advance(0.001)
    assert len(queue) == 1
    assert await queue.get() == "a"


@pytest.mark.parametrize("delay", [0.0, -1.0])
async def test_add_after_non_positive_delay_adds_immediately(delay: float) -> None:
    queue, clock = fake_queue()
    queue.add_after("a", delay)
    assert len(queue) == 1
    assert clock.pending_timers == 0


@pytest.mark.parametrize(
    ("first", "second", "ready_at"),
    [
        (5.0, 1.0, 1.0),  # an earlier deadline replaces a later one
        (1.0, 5.0, 1.0),  # a later deadline is ignored
        (2.0, 2.0, 2.0),
    ],
)
async def test_add_after_earliest_deadline_wins(
    first: float, second: float, ready_at: float
) -> None:
    queue, clock = fake_queue()
    queue.add_after("a", first)
    queue.add_after("a", second)
    clock.advance(ready_at - 0.001)
    assert len(queue) == 0
    clock.advance(0.001)
    assert await drain_ready(queue) == ["a"]
    clock.advance(10.0)  # the superseded deadline adds nothing
    assert len(queue) == 0
    assert clock.pending_timers == 0


async def test_add_after_orders_by_deadline_then_by_call_order() -> None:
    queue, clock = fake_queue()
    queue.add_after("late", 3.0)
    queue.add_after("tie-1", 2.0)
    queue.add_after("early", 1.0)
    queue.add_after("tie-2", 2.0)
    clock.advance(5.0)
    assert await drain_ready(queue) == ["early", "tie-1", "tie-2", "late"]


def test_add_after_rejects_nan_delay() -> None:
    queue, clock = fake_queue()
    with pytest.raises(ValueError, match="NaN"):
        queue.add_after("a", float("nan"))
    assert clock.pending_timers == 0


async def test_add_after_wakes_a_waiting_getter() -> None:
    queue, clock = fake_queue()
    getter = asyncio.create_task(queue.get())
    queue.add_after("a", 1.0)
    await settle()
    assert not getter.done()
    clock.advance(1.0)
    await settle()
    assert getter.result() == "a"


async def test_delayed_lists_the_keys_waiting_for_their_add() -> None:
    queue, clock = fake_queue()
    queue.add_after("a", 1.0)
    queue.add_after("b", 2.0)
    queue.add("c")
    assert sorted(queue.delayed()) == ["a", "b"]
    clock.advance(1.0)
    await settle()
    assert queue.delayed() == ["b"]
    assert await drain_ready(queue) == ["c", "a"]


async def test_delayed_key_already_queued_is_not_duplicated() -> None:
    queue, clock = fake_queue()
    queue.add_after("a", 1.0)
    queue.add("a")
    clock.advance(1.0)
    assert len(queue) == 1
    # client-go keeps the delayed add when the key is added directly in between.
    assert await drain_ready(queue) == ["a"]
    queue.add_after("a", 1.0)
    queue.add("a")
    assert await drain_ready(queue) == ["a"]
    clock.advance(1.0)
    assert await drain_ready(queue) == ["a"]


async def test_cancel_after_drops_the_delayed_add_only() -> None:
    queue, clock = fake_queue()
    queue.add_after("a", 1.0)
    queue.add_after("b", 2.0)
    queue.add_batched("c", 0.5)
    queue.add("d")
    queue.cancel_after("a")
    queue.cancel_after("c")  # batched: stays
    queue.cancel_after("d")  # queued: stays
    queue.cancel_after("e")  # unknown: nothing
    assert queue.delayed() == ["b"]
    clock.advance(2.0)
    assert sorted(await drain_ready(queue)) == ["b", "c", "d"]
    assert clock.pending_timers == 0


async def test_cancel_after_of_the_earliest_rearms_the_timer_later() -> None:
    queue, clock = fake_queue()
    queue.add_after("a", 1.0)
    queue.add_after("b", 5.0)
    queue.cancel_after("a")
    clock.advance(1.0)
    assert len(queue) == 0
    assert clock.pending_timers == 1
    queue.add_after("a", 1.0)  # a new delayed add after the cancel counts
    clock.advance(1.0)
    assert await drain_ready(queue) == ["a"]
    clock.advance(3.0)
    assert await drain_ready(queue) == ["b"]


async def test_many_superseding_deadlines_keep_one_timer() -> None:
    queue, clock = fake_queue()
    for i in range(500):
        queue.add_after(f"k{i % 5}", 1000.0 - i)  # every call moves a deadline earlier
    assert clock.pending_timers == 1
    clock.advance(1000.0)
    assert sorted(await drain_ready(queue)) == ["k0", "k1", "k2", "k3", "k4"]
    assert clock.pending_timers == 0


async def test_shut_down_drops_delayed_adds_and_cancels_timer() -> None:
    queue, clock = fake_queue()
    queue.add_after("a", 1.0)
    queue.add_after("b", 2.0)
    assert clock.pending_timers == 1
    queue.shut_down()
    assert clock.pending_timers == 0
    clock.advance(10.0)
    assert len(queue) == 0
    with pytest.raises(ShutDown):
        await queue.get()


# ----------------------------------------------------------------- batched adds


async def test_batched_adds_within_a_period_make_one_pass_at_the_first_ones_deadline() -> None:
    queue, clock = fake_queue()
    queue.add_batched("a", 0.25)
    clock.advance(0.2)
    queue.add_batched("a", 0.25)  # within the batch: does not move it later
    queue.add_batched("b", 0.25)
    assert len(queue) == 0
    assert queue.batched() == ["a", "b"] and queue.delayed() == []
    clock.advance(0.05)
    assert queue.batched() == ["b"]
    assert await drain_ready(queue) == ["a"]
    clock.advance(0.2)
    assert await drain_ready(queue) == ["b"]
    clock.advance(10.0)
    assert len(queue) == 0
    assert clock.pending_timers == 0


async def test_batched_add_of_a_queued_key_needs_no_timer() -> None:
    queue, clock = fake_queue()
    queue.add("a")
    queue.add_batched("a", 0.25)
    assert clock.pending_timers == 0
    assert await drain_ready(queue) == ["a"]
    clock.advance(1.0)
    assert len(queue) == 0


async def test_a_key_handed_out_drops_its_batch() -> None:
    # The pass reads the caches after it got the key: whatever the batch was for is in them.
    queue, clock = fake_queue()
    queue.add_batched("a", 0.25)
    queue.add("a")  # another cause queues it at once
    assert await queue.get() == "a"
    queue.done("a")
    assert clock.pending_timers == 0
    clock.advance(1.0)
    assert len(queue) == 0


async def test_a_batched_add_while_processing_makes_one_more_pass() -> None:
    # The pass running may have read the caches before the event: another one must follow.
    queue, clock = fake_queue()
    queue.add("a")
    assert await queue.get() == "a"
    queue.add_batched("a", 0.25)
    queue.done("a")
    assert len(queue) == 0
    clock.advance(0.25)
    assert await drain_ready(queue) == ["a"]


async def test_a_batched_add_leaves_a_later_delayed_add_waiting() -> None:
    queue, clock = fake_queue()
    queue.add_after("a", 10.0)
    queue.add_batched("a", 0.25)
    clock.advance(0.25)
    assert await drain_ready(queue) == ["a"]
    assert queue.delayed() == ["a"]
    clock.advance(9.75)
    assert await drain_ready(queue) == ["a"]


@pytest.mark.parametrize("period", [0.0, -1.0])
async def test_batched_add_with_no_period_adds_at_once(period: float) -> None:
    queue, clock = fake_queue()
    queue.add_batched("a", period)
    assert len(queue) == 1
    assert clock.pending_timers == 0


def test_batched_add_rejects_a_nan_period() -> None:
    queue, _ = fake_queue()
    with pytest.raises(ValueError, match="NaN period"):
        queue.add_batched("a", float("nan"))


async def test_shut_down_cancels_batches() -> None:
    queue, clock = fake_queue()
    queue.add_batched("a", 0.25)
    queue.shut_down()
    assert clock.pending_timers == 0
    queue.add_batched("b", 0.25)
    assert clock.pending_timers == 0
    clock.advance(1.0)
    with pytest.raises(ShutDown):
        await queue.get()


BATCH_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from("ab")),
        st.tuples(st.just("batched"), st.sampled_from("ab")),
        st.tuples(st.just("get"), st.just("")),
        st.tuples(st.just("done"), st.just("")),
        st.tuples(st.just("advance"), st.sampled_from(["0.1", "0.25", "1"])),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(ops=BATCH_OPS)
def test_every_batched_add_is_followed_by_a_pass_that_starts_after_it(
    ops: list[tuple[str, str]],
) -> None:
    """Whatever the order of adds, batched adds, passes and time: a key that received a batched
    add is handed out again at or after it, and after at most one period once nothing holds it."""

    async def run() -> None:
        queue, clock = fake_queue()
        unseen: dict[str, float] = {}  # key -> time of its oldest add no pass has started since
        held: list[str] = []

        async def get_ready() -> None:
            if len(queue):
                key = await queue.get()
                assert key not in held, "handed out while being processed"
                held.append(key)
                unseen.pop(key, None)

        for op, arg in ops:
            if op in ("add", "batched"):
                (queue.add if op == "add" else lambda k: queue.add_batched(k, 0.25))(arg)
                unseen.setdefault(arg, clock.monotonic())
            elif op == "get":
                await get_ready()
            elif op == "done" and held:
                queue.done(held.pop(0))
            elif op == "advance":
                clock.advance(float(arg))
            for key, since in unseen.items():
                # Nothing holds it back but the period: queued by now, or still in its batch.
                if key not in held and clock.monotonic() >= since + 0.25:
                    assert key in queue.ready(), f"{key} waits past its batch"
        while held:
            queue.done(held.pop(0))
        clock.advance(0.25)
        while len(queue):
            await get_ready()
            queue.done(held.pop(0))
        assert not unseen, f"never handed out after their adds: {sorted(unseen)}"

    asyncio.run(run())


class LoopTimer(Protocol):
    """A timer handle of the running loop (asyncio's or uvloop's ``TimerHandle``)."""

    def cancel(self) -> None: ...
    def cancelled(self) -> bool: ...


class RecordingSystemClock(SystemClock):
    def __init__(self) -> None:
        self.handles: list[LoopTimer] = []

    def call_at(self, deadline: float, callback: Callable[[], None]) -> Timer:
        handle = super().call_at(deadline, callback)
        assert type(handle).__name__ == "TimerHandle", handle  # the loop's own timer
        self.handles.append(cast(LoopTimer, handle))
        return handle


async def test_system_clock_delayed_add_never_fires_early() -> None:
    clock = RecordingSystemClock()
    queue = WorkQueue[str]("real", clock=clock)
    deadline = time.monotonic() + 0.02
    queue.add_after("a", 0.02)
    assert await asyncio.wait_for(queue.get(), timeout=5) == "a"
    assert time.monotonic() >= deadline


async def test_system_clock_shut_down_cancels_loop_timers_and_leaves_no_tasks() -> None:
    clock = RecordingSystemClock()
    queue = WorkQueue[str]("real", clock=clock)
    queue.add_after("a", 60.0)
    queue.add_after("b", 30.0)  # re-arms the timer earlier
    assert len(clock.handles) == 2
    assert clock.handles[0].cancelled()
    assert not clock.handles[1].cancelled()
    queue.shut_down()
    assert all(handle.cancelled() for handle in clock.handles)
    assert asyncio.all_tasks() == {asyncio.current_task()}


# ------------------------------------------------------------------- rate limits


async def test_add_rate_limited_backs_off_and_forget_resets() -> None:
    queue, clock = fake_queue(base=1.0, cap=8.0)
    expected_delays = [1.0, 2.0, 4.0, 8.0, 8.0]
    for n, delay in enumerate(expected_delays, start=1):
        queue.add_rate_limited("a")
        assert queue.num_requeues("a") == n
        clock.advance(delay - 0.001)
        assert len(queue) == 0
        clock.advance(0.001)
        assert await drain_ready(queue) == ["a"]
    queue.forget("a")
    assert queue.num_requeues("a") == 0
    queue.add_rate_limited("a")
    clock.advance(1.0)
    assert await drain_ready(queue) == ["a"]


async def test_default_rate_limiter_starts_at_5ms() -> None:
    clock = FakeClock()
    queue = WorkQueue[str]("default", clock=clock)
    queue.add_rate_limited("a")
    clock.advance(0.004)
    assert len(queue) == 0
    clock.advance(0.001)
    assert len(queue) == 1
    assert queue.num_requeues("a") == 1


# ----------------------------------------------------------------------- metrics


def sample(registry: CollectorRegistry, metric: str, queue: str = "q") -> float | None:
    return registry.get_sample_value(metric, {"name": queue})


async def test_metrics_follow_client_go() -> None:
    registry = CollectorRegistry()
    clock = FakeClock()
    queue = WorkQueue[str]("q", metrics=WorkqueueMetrics(registry), clock=clock)

    queue.add("a")
    queue.add("b")
    queue.add("a")
    assert sample(registry, "workqueue_depth") == 2
    assert sample(registry, "workqueue_adds_total") == 2

    clock.advance(0.5)
    a = await queue.get()
    assert sample(registry, "workqueue_depth") == 1
    assert sample(registry, "workqueue_queue_duration_seconds_count") == 1
    assert sample(registry, "workqueue_queue_duration_seconds_sum") == pytest.approx(0.5)
    assert sample(registry, "workqueue_longest_running_processor_seconds") == 0

    clock.advance(2.0)
    b = await queue.get()
    clock.advance(1.0)
    # Computed at scrape time: a has run 3 s, b 1 s.
    assert sample(registry, "workqueue_unfinished_work_seconds") == pytest.approx(4.0)
    assert sample(registry, "workqueue_longest_running_processor_seconds") == pytest.approx(3.0)

    queue.done(a)
    assert sample(registry, "workqueue_work_duration_seconds_count") == 1
    assert sample(registry, "workqueue_work_duration_seconds_sum") == pytest.approx(3.0)
    assert sample(registry, "workqueue_unfinished_work_seconds") == pytest.approx(1.0)
    queue.done(b)
    assert sample(registry, "workqueue_unfinished_work_seconds") == 0
    assert sample(registry, "workqueue_longest_running_processor_seconds") == 0

    queue.add_after("c", 1.0)
    queue.add_rate_limited("d")
    assert sample(registry, "workqueue_retries_total") == 2
    assert sample(registry, "workqueue_depth") == 0


async def test_metrics_key_readded_while_processing_counts_as_depth() -> None:
    registry = CollectorRegistry()
    clock = FakeClock()
    queue = WorkQueue[str]("q", metrics=WorkqueueMetrics(registry), clock=clock)
    queue.add("a")
    await queue.get()
    clock.advance(1.0)
    queue.add("a")
    assert sample(registry, "workqueue_depth") == 1
    assert sample(registry, "workqueue_adds_total") == 2
    clock.advance(1.0)
    queue.done("a")
    await queue.get()
    # The queue duration runs from the re-add, across the wait for done().
    assert sample(registry, "workqueue_queue_duration_seconds_sum") == pytest.approx(1.0)
    assert sample(registry, "workqueue_depth") == 0


async def test_queues_share_one_registry_with_separate_series() -> None:
    registry = CollectorRegistry()
    metrics = WorkqueueMetrics(registry)
    clock = FakeClock()
    jobs = WorkQueue[str]("jobs", metrics=metrics, clock=clock)
    pvcs = WorkQueue[str]("pvcs", metrics=metrics, clock=clock)
    jobs.add("a")
    pvcs.add("a")
    pvcs.add("b")
    assert sample(registry, "workqueue_depth", "jobs") == 1
    assert sample(registry, "workqueue_depth", "pvcs") == 2
    await pvcs.get()
    clock.advance(2.0)
    assert sample(registry, "workqueue_longest_running_processor_seconds", "jobs") == 0
    assert sample(registry, "workqueue_longest_running_processor_seconds", "pvcs") == 2.0


def test_metrics_families_register_once_per_registry() -> None:
    registry = CollectorRegistry()
    WorkqueueMetrics(registry)
    with pytest.raises(ValueError, match="Duplicated"):
        WorkqueueMetrics(registry)


def test_duration_histograms_use_client_go_buckets() -> None:
    registry = CollectorRegistry()
    WorkQueue[str]("q", metrics=WorkqueueMetrics(registry), clock=FakeClock())
    assert pytest.approx([1e-8 * 10**i for i in range(10)]) == LATENCY_BUCKETS
    for family in registry.collect():
        if family.type != "histogram":
            continue
        bounds = [float(s.labels["le"]) for s in family.samples if s.name.endswith("_bucket")]
        assert bounds == [*LATENCY_BUCKETS, float("inf")]


async def test_without_provider_nothing_is_registered_anywhere() -> None:
    queue = WorkQueue[str]("unregistered-queue", clock=FakeClock())
    queue.add("a")
    await queue.get()
    queue.done("a")
    global_registry = prometheus_client.REGISTRY
    assert (
        global_registry.get_sample_value("workqueue_depth", {"name": "unregistered-queue"}) is None
    )
    explicit = WorkQueue[str]("noop", metrics=NoopWorkqueueMetrics(), clock=FakeClock())
    explicit.add("a")
    assert len(explicit) == 1


# ---------------------------------------------------- property-based state machine

KEYS = st.sampled_from(["a", "b", "c", "d"])
DELAYS = st.sampled_from([-1.0, 0.0, 0.001, 0.005, 0.25, 1.0, 2.5])
ADVANCES = st.sampled_from([0.0, 0.001, 0.004, 0.25, 0.5, 1.0, 3.0])
BACKOFF_BASE, BACKOFF_CAP = 0.25, 2.0


class WorkQueueMachine(RuleBasedStateMachine):
    """Drives a WorkQueue and a plain reference model with the same operations.

    Each rule applies an operation to both, lets the event loop run, then serves
    the model's waiting getters and checks the real getters got exactly the same
    keys (or ShutDown). Keys handed out and not yet done are tracked independently
    of the model to check that no key is ever processed twice at once.
    """

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.clock = FakeClock()
        limiter = ItemExponentialFailureRateLimiter[str](BACKOFF_BASE, BACKOFF_CAP)
        self.queue = WorkQueue[str]("prop", rate_limiter=limiter, clock=self.clock)
        # Reference model.
        self.model_queue: list[str] = []
        self.model_dirty: set[str] = set()
        self.model_processing: set[str] = set()
        self.model_waiting: dict[str, tuple[float, int]] = {}
        self.model_seq = 0
        self.model_failures: dict[str, int] = {}
        self.model_shut_down = False
        # Real getters still waiting, oldest first, and keys the real queue handed out.
        self.getters: list[asyncio.Task[str]] = []
        self.held: set[str] = set()

    def teardown(self) -> None:
        for getter in self.getters:
            getter.cancel()
        if self.getters:
            self.loop.run_until_complete(asyncio.wait(self.getters))
        self.queue.shut_down()
        self.loop.close()

    # -------------------------------------------------------------- model helpers

    def model_add(self, key: str) -> None:
        if self.model_shut_down or key in self.model_dirty:
            return
        self.model_dirty.add(key)
        if key not in self.model_processing:
            self.model_queue.append(key)

    def model_add_after(self, key: str, delay: float) -> None:
        if self.model_shut_down:
            return
        if delay <= 0:
            self.model_add(key)
            return
        deadline = self.clock.monotonic() + delay
        pending = self.model_waiting.get(key)
        if pending is None or deadline < pending[0]:
            self.model_waiting[key] = (deadline, self.model_seq)
            self.model_seq += 1

    def settle_and_check(self) -> None:
        async def spin() -> None:
            for _ in range(20):
                await asyncio.sleep(0)

        self.loop.run_until_complete(spin())
        still_waiting = []
        for getter in self.getters:
            if self.model_queue:
                key = self.model_queue.pop(0)
                self.model_dirty.discard(key)
                self.model_processing.add(key)
                assert getter.done() and not getter.cancelled()
                got = getter.result()
                assert got == key
                assert got not in self.held, f"{got!r} handed out while being processed"
                self.held.add(got)
            elif self.model_shut_down:
                assert getter.done() and not getter.cancelled()
                assert isinstance(getter.exception(), ShutDown)
            else:
                assert not getter.done()
                still_waiting.append(getter)
        self.getters = still_waiting

    # --------------------------------------------------------------------- rules

    @initialize()
    def start(self) -> None:
        self.settle_and_check()

    @rule(key=KEYS)
    def add(self, key: str) -> None:
        self.queue.add(key)
        self.model_add(key)
        self.settle_and_check()

    @rule()
    def get(self) -> None:
        self.getters.append(self.loop.create_task(self.queue.get()))
        self.settle_and_check()

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def done(self, data: st.DataObject) -> None:
        key = data.draw(st.sampled_from(sorted(self.held)))
        self.held.remove(key)
        self.queue.done(key)
        self.model_processing.remove(key)
        if key in self.model_dirty:
            self.model_queue.append(key)
        self.settle_and_check()

    @rule(key=KEYS)
    def done_for_key_not_held(self, key: str) -> None:
        if key in self.held:
            return
        try:
            self.queue.done(key)
        except ValueError:
            pass
        else:
            raise AssertionError("done() accepted a key that is not being processed")

    @rule(key=KEYS, delay=DELAYS)
    def add_after(self, key: str, delay: float) -> None:
        self.queue.add_after(key, delay)
        self.model_add_after(key, delay)
        self.settle_and_check()

    @rule(key=KEYS)
    def cancel_after(self, key: str) -> None:
        self.queue.cancel_after(key)
        self.model_waiting.pop(key, None)
        self.settle_and_check()

    @rule(key=KEYS)
    def add_rate_limited(self, key: str) -> None:
        self.queue.add_rate_limited(key)
        if not self.model_shut_down:
            failures = self.model_failures.get(key, 0)
            self.model_failures[key] = failures + 1
            self.model_add_after(key, min(BACKOFF_BASE * 2**failures, BACKOFF_CAP))
        self.settle_and_check()

    @rule(key=KEYS)
    def forget(self, key: str) -> None:
        self.queue.forget(key)
        self.model_failures.pop(key, None)

    @rule(seconds=ADVANCES)
    def advance(self, seconds: float) -> None:
        self.clock.advance(seconds)
        now = self.clock.monotonic()
        due = sorted((at, seq, key) for key, (at, seq) in self.model_waiting.items() if at <= now)
        for _, _, key in due:
            del self.model_waiting[key]
            self.model_add(key)
        self.settle_and_check()

    @precondition(lambda self: bool(self.getters))
    @rule(data=st.data())
    def cancel_waiting_get(self, data: st.DataObject) -> None:
        getter = data.draw(st.sampled_from(self.getters))
        getter.cancel()
        self.getters.remove(getter)
        self.settle_and_check()
        assert getter.cancelled()

    @precondition(lambda self: bool(self.getters))
    @rule(key=KEYS)
    def add_then_cancel_the_woken_get(self, key: str) -> None:
        # Cancel the getter an add() just woke, before it runs: the key must not be lost.
        first = self.getters.pop(0)
        self.queue.add(key)
        first.cancel()
        self.model_add(key)
        self.settle_and_check()
        assert first.cancelled()

    @rule()
    def shut_down(self) -> None:
        self.queue.shut_down()
        self.model_shut_down = True
        self.model_waiting.clear()
        self.settle_and_check()

    # ---------------------------------------------------------------- invariants

    @invariant()
    def matches_model(self) -> None:
        assert len(self.queue) == len(self.model_queue)
        assert self.held == self.model_processing
        assert self.queue.is_shutting_down == self.model_shut_down
        for key in ["a", "b", "c", "d"]:
            assert self.queue.num_requeues(key) == self.model_failures.get(key, 0)
        # One timer while delayed adds are pending, none otherwise (also after shutdown).
        assert self.clock.pending_timers == (1 if self.model_waiting else 0)


WorkQueueMachine.TestCase.settings = settings(
    max_examples=150, stateful_step_count=40, deadline=None
)
TestWorkQueueStateMachine = WorkQueueMachine.TestCase
