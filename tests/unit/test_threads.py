"""run_in_daemon_thread: blocking work off the event loop, in a thread that never holds up exit."""

from __future__ import annotations

import asyncio
import threading

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
    loop = asyncio.get_running_loop()
    errors: list[dict[str, object]] = []  # what the loop reports: a failed callback lands here
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _, context: errors.append(context))
    try:
        await _block_then_cancel(loop)
    finally:
        loop.set_exception_handler(previous)
    assert errors == []


async def _block_then_cancel(loop: asyncio.AbstractEventLoop) -> None:
    entered: asyncio.Future[threading.Thread] = loop.create_future()
    release = threading.Event()

    def block() -> str:
        loop.call_soon_threadsafe(entered.set_result, threading.current_thread())
        # Only a coroutine on the loop sets it: returning True proves the loop ran meanwhile.
        return "late" if release.wait(60) else "the loop never ran"

    task = asyncio.create_task(run_in_daemon_thread(block))
    thread = await entered  # the thread is blocked in block() and the loop still runs this
    release.set()
    assert await task == "late"

    # Cancelled while the thread blocks: the caller gets CancelledError, the late result is
    # delivered to a cancelled future and dropped without an error on the loop.
    entered = loop.create_future()
    release.clear()
    task = asyncio.create_task(run_in_daemon_thread(block))
    thread = await entered
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    release.set()
    # When join returns, the thread has queued its delivery; asyncio.to_thread resumes this
    # coroutine through the same ready queue, after that delivery ran.
    await asyncio.to_thread(thread.join)
    await asyncio.sleep(0)
    assert not thread.is_alive()
