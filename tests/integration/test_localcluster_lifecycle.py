"""The launcher never leaves a process behind: on stop, on Ctrl-C, when killed, on bad input."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from localcluster.cluster import LocalCluster
from localcluster.processes import LaunchError, die_with_parent, pid_alive
from tests.support import leftovers


def _wait_dead(pids: list[int], timeout: float = 30.0) -> list[int]:
    deadline = time.monotonic() + timeout
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if pid_alive(pid)]
        time.sleep(0.1)
    return alive


def test_stop_leaves_no_process(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "c", profile="apiserver")
    with cluster:
        pids = list(cluster.pids().values())
        assert len(pids) == 2
        assert all(pid_alive(pid) for pid in pids)
    assert _wait_dead(pids, timeout=1) == []


@dataclass
class Launched:
    process: subprocess.Popen[bytes]
    state_dir: Path
    pids: list[int] = field(default_factory=list)

    def stop_for_good(self) -> None:
        """Whatever the test did: kill the launcher, then anything still running for it."""
        if self.process.poll() is None:
            self.process.kill()  # its children die with it (PR_SET_PDEATHSIG)
        self.process.wait()
        _wait_dead(self.pids, timeout=10)
        leftovers.kill(leftovers.mentioning(str(self.state_dir)))


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Callable[..., Launched]]:
    """``python -m localcluster run`` in the background; stopped for good after the test."""
    started: list[Launched] = []

    def start(*, ignoring: signal.Signals | None = None) -> Launched:
        def before_exec() -> None:
            die_with_parent()  # if this test process dies, so does the launcher
            if ignoring is not None:
                # As a background job (`make test &` in a script) starts it: the shell sets
                # SIGINT and SIGQUIT to ignored, and the program inherits that.
                signal.signal(ignoring, signal.SIG_IGN)

        state_dir = tmp_path / f"c{len(started)}"
        launched = Launched(
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "localcluster",
                    "run",
                    "--profile=apiserver",
                    f"--state-dir={state_dir}",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                preexec_fn=before_exec,
            ),
            state_dir,
        )
        started.append(launched)
        state = state_dir / "cluster.json"
        deadline = time.monotonic() + 120
        while not state.exists():
            assert launched.process.poll() is None, "the launcher exited before it was ready"
            assert time.monotonic() < deadline, "the launcher did not get ready within 120s"
            time.sleep(0.2)
        launched.pids = list(json.loads(state.read_text())["pids"].values())
        assert launched.pids and all(pid_alive(pid) for pid in launched.pids)
        return launched

    try:
        yield start
    finally:
        for launched in started:
            launched.stop_for_good()


@pytest.mark.parametrize("inherited", ["default", "ignored"])
@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_launcher_stops_children_on_signal(
    launch: Callable[..., Launched], how: signal.Signals, inherited: str
) -> None:
    """Also when the launcher inherited the signal as ignored (started from a background job)."""
    launched = launch(ignoring=how if inherited == "ignored" else None)
    launched.process.send_signal(how)
    try:
        code = launched.process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the launcher ignored {how.name} for 30 s", pytrace=False)
    assert code == 0
    assert _wait_dead(launched.pids, timeout=1) == []


def test_interrupted_up_stops_the_launcher_it_started(tmp_path: Path) -> None:
    """``up`` starts the launcher in a session of its own: Ctrl-C on ``up`` must stop it too."""
    state_dir = tmp_path / "c"
    up = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "localcluster",
            "up",
            "--profile=apiserver",
            f"--state-dir={state_dir}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=die_with_parent,
    )
    try:
        pid_file = state_dir / "launcher.pid"
        deadline = time.monotonic() + 60
        while not pid_file.exists() or not pid_file.read_text().strip():
            assert up.poll() is None, "up exited before the launcher started"
            assert time.monotonic() < deadline, "no launcher within 60s"
            time.sleep(0.05)
        launcher = int(pid_file.read_text())
        up.send_signal(signal.SIGINT)
        assert up.wait(timeout=60) == 130
        assert _wait_dead([launcher], timeout=30) == []
        assert leftovers.mentioning(str(state_dir)) == {}
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
        leftovers.kill(leftovers.mentioning(str(state_dir)))


def test_killed_launcher_takes_children_with_it(launch: Callable[..., Launched]) -> None:
    launched = launch()
    os.kill(launched.process.pid, signal.SIGKILL)
    launched.process.wait(timeout=10)
    # PR_SET_PDEATHSIG: the kernel kills the children when their parent dies.
    assert _wait_dead(launched.pids, timeout=10) == []


def test_port_in_use_is_a_clear_error_and_starts_nothing(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cluster = LocalCluster(tmp_path / "c", profile="apiserver", apiserver_port=port)
        try:
            with pytest.raises(LaunchError) as raised:
                cluster.start()
        finally:
            cluster.stop()  # nothing to stop, unless the start wrongly succeeded
    assert f"port {port} on 127.0.0.1" in str(raised.value)
    assert "already in use" in str(raised.value)
    assert cluster.processes == []
