"""Processes a test left running: found among this process's children, killed, named.

Every test that starts a process must stop it, also when the test fails; ``tests/conftest.py``
checks this after each test of the tiers that start processes. Killing a leftover child with
SIGKILL takes its own children along when they were started with ``PR_SET_PDEATHSIG`` (as every
``ManagedProcess`` is), so etcd and kube-apiserver of a forgotten launcher go too.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Collection, Iterable, Iterator
from pathlib import Path


def _live() -> Iterator[tuple[int, int, str]]:
    """(pid, parent pid, command line) of every live process; a zombie is not live."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        # "pid (comm) state ppid ...": comm may contain spaces and parentheses.
        state, ppid = stat.rpartition(")")[2].split()[:2]
        if state != "Z":
            command = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
            yield int(entry.name), int(ppid), command


def children(parent: int | None = None) -> dict[int, str]:
    """Live children of ``parent`` (this process by default) and their command lines."""
    parent = os.getpid() if parent is None else parent
    return {pid: command for pid, ppid, command in _live() if ppid == parent}


def mentioning(text: str) -> dict[int, str]:
    """Live processes whose command line contains ``text`` (a state directory, say)."""
    return {pid: command for pid, _, command in _live() if text in command}


def kill(pids: Iterable[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def kill_new(known: Collection[int]) -> list[str]:
    """SIGKILL every live child not in ``known``; describe each one killed."""
    new = {pid: command for pid, command in children().items() if pid not in known}
    kill(new)
    return [f"pid {pid}: {command[:300]}" for pid, command in sorted(new.items())]
