"""Running blocking work off the event loop without holding up the process's exit.

``asyncio.to_thread`` uses the loop's default executor, whose threads the interpreter joins at
exit: a long computation would keep a stopping replica alive past its shutdown timeout. Work that
a tenant's input can make long (RE2 matching of failure-message patterns) runs in a daemon
thread instead; if the awaiting task is cancelled the result is dropped.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


async def run_in_daemon_thread(fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``fn(*args, **kwargs)`` in a new daemon thread; its result or exception, awaited."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def deliver(outcome: tuple[T] | BaseException) -> None:
        if future.done():  # the awaiting task was cancelled
            return
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome[0])

    def run() -> None:
        outcome: tuple[T] | BaseException
        try:
            outcome = (fn(*args, **kwargs),)
        except BaseException as err:  # handed to the awaiting task
            outcome = err
        # A closed loop (the process is stopping) has nobody waiting any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(deliver, outcome)

    name = f"offloop-{getattr(fn, '__name__', 'work')}"
    threading.Thread(target=run, name=name, daemon=True).start()
    return await future
