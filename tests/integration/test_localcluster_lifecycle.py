"""The launcher never leaves a process behind: on stop, on Ctrl-C, when killed, on bad input."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from localcluster.cluster import LocalCluster
from localcluster.processes import LaunchError, pid_alive


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


def _launch(state_dir: Path) -> tuple[subprocess.Popen[bytes], list[int]]:
    launcher = subprocess.Popen(
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
    )
    state = state_dir / "cluster.json"
    deadline = time.monotonic() + 120
    while not state.exists():
        assert launcher.poll() is None, "the launcher exited before the cluster was ready"
        assert time.monotonic() < deadline, "the launcher did not get ready within 120s"
        time.sleep(0.2)
    pids = list(json.loads(state.read_text())["pids"].values())
    assert pids and all(pid_alive(pid) for pid in pids)
    return launcher, pids


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM])
def test_launcher_stops_children_on_signal(tmp_path: Path, how: signal.Signals) -> None:
    launcher, pids = _launch(tmp_path / "c")
    launcher.send_signal(how)
    assert launcher.wait(timeout=60) == 0
    assert _wait_dead(pids, timeout=1) == []


def test_killed_launcher_takes_children_with_it(tmp_path: Path) -> None:
    launcher, pids = _launch(tmp_path / "c")
    os.kill(launcher.pid, signal.SIGKILL)
    launcher.wait(timeout=10)
    # PR_SET_PDEATHSIG: the kernel kills the children when their parent dies.
    assert _wait_dead(pids, timeout=10) == []


def test_port_in_use_is_a_clear_error_and_starts_nothing(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cluster = LocalCluster(tmp_path / "c", profile="apiserver", apiserver_port=port)
        with pytest.raises(LaunchError) as raised:
            cluster.start()
    assert f"port {port} on 127.0.0.1" in str(raised.value)
    assert "already in use" in str(raised.value)
    assert cluster.processes == []
