"""What the controller does with a pass's result: controller-runtime's semantics, except that a
pass that succeeds drops the delayed add earlier passes of its key asked for (its own answer
stands); a failed pass leaves it (the earlier deadline wins, as in client-go)."""

from __future__ import annotations

from collections import deque

import pytest
from prometheus_client import CollectorRegistry

from controller.runtime.clock import FakeClock
from controller.runtime.controller import Controller, ControllerMetrics, Result
from controller.runtime.ratelimit import ItemExponentialFailureRateLimiter
from controller.runtime.workqueue import WorkQueue

pytestmark = pytest.mark.unit

KEY = "ns/train"


class Script:
    """A reconcile that answers each pass with the next scripted result (or raises it)."""

    def __init__(self, *answers: Result | Exception) -> None:
        self.answers = deque(answers)
        self.passes = 0

    async def __call__(self, key: str) -> Result:
        self.passes += 1
        answer = self.answers.popleft()
        if isinstance(answer, Exception):
            raise answer
        return answer


def _setup(script: Script) -> tuple[Controller, WorkQueue[str], FakeClock]:
    clock = FakeClock()
    limiter = ItemExponentialFailureRateLimiter[str](base_delay=1.0, max_delay=64.0)
    queue = WorkQueue[str]("results", rate_limiter=limiter, clock=clock)
    controller = Controller(
        "results", queue, script, metrics=ControllerMetrics(CollectorRegistry()), object_label="x"
    )
    return controller, queue, clock


async def _pass(controller: Controller, queue: WorkQueue[str]) -> None:
    """One pass of the queued key, as a worker runs it."""
    key = await queue.get()
    try:
        await controller.process(key)
    finally:
        queue.done(key)


async def test_a_later_pass_asking_for_nothing_drops_the_earlier_timer() -> None:
    """Pass 1 holds something for 10 s; pass 2 (an event) wrote it: no pass at 10 s."""
    script = Script(Result(requeue_after=10.0), Result())
    controller, queue, clock = _setup(script)
    queue.add(KEY)
    await _pass(controller, queue)
    assert queue.delayed() == [KEY]
    clock.advance(2.0)
    queue.add(KEY)  # an event
    await _pass(controller, queue)
    assert queue.delayed() == []
    clock.advance(60.0)
    assert len(queue) == 0
    assert script.passes == 2


async def test_a_later_pass_sets_its_own_time_even_when_later() -> None:
    script = Script(Result(requeue_after=3.0), Result(requeue_after=30.0), Result())
    controller, queue, clock = _setup(script)
    queue.add(KEY)
    await _pass(controller, queue)
    clock.advance(1.0)
    queue.add(KEY)
    await _pass(controller, queue)  # at 1 s, asks for 31 s
    clock.advance(10.0)
    assert len(queue) == 0  # nothing at 3 s
    clock.advance(20.0)
    assert len(queue) == 1
    await _pass(controller, queue)
    assert script.passes == 3


async def test_a_failed_pass_keeps_the_earlier_timer() -> None:
    """An error backs off (here 1 s, then 2 s ...): an earlier, sooner timer still fires, and a
    later one is not replaced by the backoff alone."""
    script = Script(Result(requeue_after=0.5), RuntimeError("api away"), Result())
    controller, queue, clock = _setup(script)
    queue.add(KEY)
    await _pass(controller, queue)
    queue.add(KEY)  # an event before the 0.5 s are up
    await _pass(controller, queue)  # fails: backoff 1 s, the 0.5 s timer stays
    clock.advance(0.5)
    assert len(queue) == 1
    await _pass(controller, queue)
    assert script.passes == 3


async def test_a_pass_refused_with_requeue_keeps_the_earlier_timer() -> None:
    script = Script(Result(requeue_after=0.5), Result(requeue=True), Result())
    controller, queue, clock = _setup(script)
    queue.add(KEY)
    await _pass(controller, queue)
    queue.add(KEY)
    await _pass(controller, queue)
    clock.advance(0.5)
    assert len(queue) == 1


async def test_a_refused_pass_with_a_time_comes_back_by_then_at_the_latest() -> None:
    """Backoff grown to 8 s after three failures; a pass refused again that holds counters for
    2 s comes back after 2 s, not 16 s, and its failures are kept (the next backoff is 16 s)."""
    script = Script(
        RuntimeError("quota"),
        RuntimeError("quota"),
        RuntimeError("quota"),
        Result(requeue=True, requeue_after=2.0),
        Result(requeue=True),
    )
    controller, queue, clock = _setup(script)
    queue.add(KEY)
    for backoff in (1.0, 2.0, 4.0):
        await _pass(controller, queue)
        clock.advance(backoff)
    await _pass(controller, queue)  # backoff 8 s, but back after 2 s
    clock.advance(2.0)
    assert len(queue) == 1
    await _pass(controller, queue)
    assert queue.num_requeues(KEY) == 5


async def test_a_success_drops_a_pending_backoff() -> None:
    """A pass that failed left a retry in 1 s; an event's pass succeeds first: no retry."""
    script = Script(RuntimeError("conflict"), Result())
    controller, queue, clock = _setup(script)
    queue.add(KEY)
    await _pass(controller, queue)
    assert queue.delayed() == [KEY]
    queue.add(KEY)
    await _pass(controller, queue)
    clock.advance(10.0)
    assert len(queue) == 0
    assert queue.num_requeues(KEY) == 0


async def test_events_during_a_pass_still_make_the_next_pass() -> None:
    """Dropping timers never drops a queued or batched add."""
    script = Script(Result(requeue_after=10.0), Result(), Result())
    controller, queue, clock = _setup(script)
    queue.add(KEY)
    await _pass(controller, queue)
    queue.add(KEY)  # an event
    key = await queue.get()
    queue.add_batched(KEY, 0.25)  # an event while the pass runs
    await controller.process(key)
    queue.done(key)
    assert queue.batched() == [KEY] and queue.delayed() == []
    clock.advance(0.25)
    assert len(queue) == 1
    await _pass(controller, queue)
    assert script.passes == 3
