"""containerd pulls the unchanged names ``docker.io/library/busybox:latest`` and
``registry.k8s.io/pause:3.10`` from the local registry through the certs.d ``hosts.toml`` that
``localcluster.registry`` writes, and runs them with runc.
Also: ``images.write_archive()`` imports with ``ctr images import``, no registry needed.

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

from localcluster import build, images, processes, registry


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


class Containerd:
    """A private containerd: own root, state and socket under a temporary directory."""

    def __init__(self, directory: Path) -> None:
        containerd, ctr = shutil.which("containerd"), shutil.which("ctr")
        assert containerd and ctr, "apt-get install containerd runc (Debian) for this test"
        self.ctr = ctr
        self.address = directory / "containerd.sock"
        config = directory / "containerd.toml"
        config.write_text(
            "version = 2\n"
            f'root = "{directory / "root"}"\nstate = "{directory / "state"}"\n'
            'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
            f'[grpc]\n  address = "{self.address}"\n'
            f'[ttrpc]\n  address = "{self.address}.ttrpc"\n'
        )
        self.daemon = processes.ManagedProcess(
            "containerd", [containerd, "--config", str(config)], directory / "containerd.log"
        )

    def start(self) -> None:
        self.daemon.start()
        deadline = time.monotonic() + 30
        while not self.address.exists() and time.monotonic() < deadline:
            assert self.daemon.running(), self.daemon.log_tail()
            time.sleep(0.1)

    def run(self, *args: str) -> str:
        done = subprocess.run(
            [self.ctr, "--address", str(self.address), *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, f"ctr {' '.join(args)}: {done.stderr}"
        return done.stdout

    def stop(self) -> None:
        self.daemon.stop()
        assert _shims_of(self.address) == []


BUSYBOX_SAYS = ("sh", "-c", "echo hello from busybox; id -u")


def test_containerd_pulls_docker_io_names_from_the_mirror_and_runs_them(tmp_path: Path) -> None:
    binary = build.ensure_node_binaries(("registry",))["registry"] / "registry"
    served = registry.start(binary, tmp_path, report=lambda _: None)
    runtime = Containerd(tmp_path)
    try:
        registry.publish(served.url)
        certs = tmp_path / "certs.d"
        registry.write_containerd_hosts(certs, served.url)
        runtime.start()
        for ref in ("docker.io/library/busybox:latest", "registry.k8s.io/pause:3.10"):
            runtime.run("images", "pull", "--snapshotter", "native", "--hosts-dir", str(certs), ref)
        out = runtime.run(
            "run",
            "--rm",
            "--snapshotter",
            "native",
            "docker.io/library/busybox:latest",
            "bb",
            *BUSYBOX_SAYS,
        )
        assert out.split() == ["hello", "from", "busybox", "0"]
        # pause runs as 65535 and exits 0 on SIGTERM.
        runtime.run("run", "-d", "--snapshotter", "native", "registry.k8s.io/pause:3.10", "p")
        assert "RUNNING" in runtime.run("task", "ls")
        runtime.run("task", "kill", "-s", "SIGTERM", "p")
        deadline = time.monotonic() + 10
        while "STOPPED" not in runtime.run("task", "ls") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert "STOPPED" in runtime.run("task", "ls")
        runtime.run("task", "delete", "p")
        runtime.run("containers", "delete", "p")
    finally:
        runtime.stop()
        served.stop()


def test_the_archive_imports_without_a_registry(tmp_path: Path) -> None:
    archive = images.write_archive(
        tmp_path / "images.tar",
        {
            "docker.io/library/busybox:latest": images.busybox_image(),
            "registry.k8s.io/pause:3.10": images.pause_image(images.build_pause()),
        },
    )
    runtime = Containerd(tmp_path)
    runtime.start()
    try:
        runtime.run("images", "import", "--snapshotter", "native", str(archive))
        listed = runtime.run("images", "ls", "-q").split()
        assert sorted(listed) == ["docker.io/library/busybox:latest", "registry.k8s.io/pause:3.10"]
        out = runtime.run(
            "run",
            "--rm",
            "--snapshotter",
            "native",
            "docker.io/library/busybox:latest",
            "bb",
            *BUSYBOX_SAYS,
        )
        assert out.split() == ["hello", "from", "busybox", "0"]
    finally:
        runtime.stop()
