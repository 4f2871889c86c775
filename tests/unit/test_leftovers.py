"""The check that tests stop what they start: a new child is found, killed and named."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support import leftovers


def test_a_new_child_is_found_killed_and_named(tmp_path: Path) -> None:
    before = leftovers.children()
    argv = [sys.executable, "-c", "import time; time.sleep(60)", str(tmp_path)]
    command = " ".join(argv)
    child = subprocess.Popen(argv)
    try:
        deadline = time.monotonic() + 10
        while leftovers.children().get(child.pid) != command:  # until it has exec'd
            assert time.monotonic() < deadline, leftovers.children()
            time.sleep(0.01)
        assert leftovers.mentioning(str(tmp_path)) == {child.pid: command}
        assert leftovers.kill_new(before) == [f"pid {child.pid}: {command}"]
        assert child.wait(timeout=10) == -signal.SIGKILL
        assert child.pid not in leftovers.children()
    finally:
        child.kill()
        child.wait()


def test_known_children_and_zombies_are_left_alone() -> None:
    known = subprocess.Popen(["sleep", "60"])
    zombie = subprocess.Popen(["true"])  # exits at once; not waited for, it stays a zombie
    try:
        stat = Path(f"/proc/{zombie.pid}/stat")
        deadline = time.monotonic() + 10
        while stat.read_text().rpartition(")")[2].split()[0] != "Z":
            assert time.monotonic() < deadline, "true did not exit within 10 s"
            time.sleep(0.01)
        assert zombie.pid not in leftovers.children()
        assert leftovers.kill_new({known.pid}) == []
        assert known.poll() is None
    finally:
        for child in (known, zombie):
            child.kill()
            child.wait()
