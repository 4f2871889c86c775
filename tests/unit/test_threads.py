"""run_in_daemon_thread: blocking work off the event loop, in a thread that never holds up exit."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from controller.runtime.threads import run_in_daemon_thread


async def test_result_and_thread() -> None:
    def work(x: int, *, y: int) -> tuple[int, bool, bool]:
        current = threading.current_thread()
        return x + y, current.daemon, current is threading.main_thread()

    assert await run_in_daemon_thread(work, 1, y=2) == (3, True, False)


async def test_exception_reaches_the_caller() -> None:
    def fail() -> None:
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        await run_in_daemon_thread(fail)


async def test_loop_keeps_running_and_cancel_drops_the_result() -> None:
    started = threading.Event()
    release = threading.Event()

    def block() -> str:
        started.set()
        release.wait(5)
        return "late"

    task = asyncio.create_task(run_in_daemon_thread(block))
    while not started.is_set():
        await asyncio.sleep(0.001)
    ticks = 0
    deadline = time.monotonic() + 0.05
    while time.monotonic() < deadline:  # the loop is free while the thread blocks
        await asyncio.sleep(0.001)
        ticks += 1
    assert ticks > 5
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    await asyncio.sleep(0.05)  # the thread delivers to a cancelled future: ignored, no error
