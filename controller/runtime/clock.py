"""Injectable time sources.

Rate limiters only read time (:class:`Clock`); the work queue also schedules
delayed adds (:class:`TimerClock`). Production code uses :class:`SystemClock`,
which reads ``time.monotonic`` and schedules on the running asyncio loop.
Tests use :class:`FakeClock`, whose time only moves when :meth:`FakeClock.advance`
is called and which fires due timers synchronously from there, in the spirit of
``k8s.io/utils/clock/testing.FakeClock.Step``.

All times are seconds as ``float`` on a monotonic scale with an arbitrary origin.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class Clock(Protocol):
    """Reads a monotonic time in seconds."""

    def monotonic(self) -> float: ...


class Timer(Protocol):
    """A scheduled callback that can be cancelled (``asyncio.TimerHandle`` fits)."""

    def cancel(self) -> None: ...


class TimerClock(Clock, Protocol):
    """A clock that can also run a callback once its time reaches a deadline."""

    def call_at(self, deadline: float, callback: Callable[[], None]) -> Timer:
        """Run ``callback`` once ``monotonic() >= deadline`` (it may run late, never early)."""
        ...


class SystemClock:
    """Real time: ``time.monotonic`` and timers on the running event loop."""

    def monotonic(self) -> float:
        return time.monotonic()

    def call_at(self, deadline: float, callback: Callable[[], None]) -> Timer:
        # Convert to a relative delay so this works whatever clock the loop uses
        # (the default loop uses time.monotonic, uvloop its own). The loop may fire a
        # hair early relative to time.monotonic; callers re-check the time.
        loop = asyncio.get_running_loop()
        return loop.call_later(max(0.0, deadline - time.monotonic()), callback)


@dataclass(order=True)
class _FakeTimer:
    deadline: float
    seq: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class FakeClock:
    """Manually advanced time for tests.

    Timers never fire on their own: :meth:`advance` moves time forward and then
    runs every non-cancelled timer whose deadline has been reached, earliest first
    (ties in scheduling order), including timers scheduled by those callbacks.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._now = start
        self._timers: list[_FakeTimer] = []
        self._seq = itertools.count()

    def monotonic(self) -> float:
        return self._now

    def call_at(self, deadline: float, callback: Callable[[], None]) -> Timer:
        timer = _FakeTimer(deadline, next(self._seq), callback)
        heapq.heappush(self._timers, timer)
        return timer

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` (>= 0) and fire due timers."""
        if seconds < 0:
            raise ValueError(f"cannot move a monotonic clock backwards ({seconds} s)")
        self._now += seconds
        while self._timers and self._timers[0].deadline <= self._now:
            timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                timer.callback()

    @property
    def pending_timers(self) -> int:
        """Number of scheduled, not yet fired, not cancelled timers."""
        return sum(1 for timer in self._timers if not timer.cancelled)
