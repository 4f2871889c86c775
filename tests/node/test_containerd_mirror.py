"""containerd pulls the unchanged names ``docker.io/library/busybox:latest`` and
``registry.k8s.io/pause:3.10`` from the local registry through the certs.d ``hosts.toml`` that
``localcluster.registry`` writes, and runs them with runc.

A private containerd (Debian's, 1.6) with its own root, state and socket under the test's
temporary directory and the CRI plugin disabled: this proves the images and the mirror
configuration, not the node's containerd (issue 13 picks that separately). Not collected by
``make test`` yet (tests/node is outside pyproject's testpaths).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from localcluster import build, processes, registry


def _shims_of(address: Path) -> list[int]:
    """Live processes whose command line names our containerd's socket (shims included)."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if str(address) in cmdline and processes.pid_alive(int(proc.name)):
            pids.append(int(proc.name))
    return pids


def test_containerd_pulls_docker_io_names_from_the_mirror_and_runs_them(tmp_path: Path) -> None:
    containerd, ctr = shutil.which("containerd"), shutil.which("ctr")
    assert containerd and ctr, "apt-get install containerd runc (Debian) for this test"
    binary = build.ensure_node_binaries(("registry",))["registry"] / "registry"
    served = registry.start(binary, tmp_path, report=lambda _: None)
    daemon: processes.ManagedProcess | None = None
    address = tmp_path / "containerd.sock"
    try:
        registry.publish(served.url)
        certs = tmp_path / "certs.d"
        registry.write_containerd_hosts(certs, served.url)
        config = tmp_path / "containerd.toml"
        config.write_text(
            "version = 2\n"
            f'root = "{tmp_path / "root"}"\nstate = "{tmp_path / "state"}"\n'
            'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
            f'[grpc]\n  address = "{address}"\n'
            f'[ttrpc]\n  address = "{address}.ttrpc"\n'
        )
        daemon = processes.ManagedProcess(
            "containerd", [containerd, "--config", str(config)], tmp_path / "containerd.log"
        )
        daemon.start()
        deadline = time.monotonic() + 30
        while not address.exists() and time.monotonic() < deadline:
            assert daemon.running(), daemon.log_tail()
            time.sleep(0.1)

        def run_ctr(*args: str) -> str:
            done = subprocess.run(
                [ctr, "--address", str(address), *args], capture_output=True, text=True, timeout=60
            )
            assert done.returncode == 0, f"ctr {' '.join(args)}: {done.stderr}"
            return done.stdout

        for ref in ("docker.io/library/busybox:latest", "registry.k8s.io/pause:3.10"):
            run_ctr("images", "pull", "--snapshotter", "native", "--hosts-dir", str(certs), ref)
        out = run_ctr(
            "run",
            "--rm",
            "--snapshotter",
            "native",
            "docker.io/library/busybox:latest",
            "bb",
            "sh",
            "-c",
            "echo hello from busybox; id -u",
        )
        assert out.split() == ["hello", "from", "busybox", "0"]
        # pause runs as 65535 and exits 0 on SIGTERM.
        run_ctr("run", "-d", "--snapshotter", "native", "registry.k8s.io/pause:3.10", "p")
        assert "RUNNING" in run_ctr("task", "ls")
        run_ctr("task", "kill", "-s", "SIGTERM", "p")
        deadline = time.monotonic() + 10
        while "STOPPED" not in run_ctr("task", "ls") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "STOPPED" in run_ctr("task", "ls")
        run_ctr("task", "delete", "p")
        run_ctr("containers", "delete", "p")
    finally:
        if daemon is not None:
            daemon.stop()
        served.stop()
    assert _shims_of(address) == []
