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

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

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

    def __init__(self, directory: Path, cri: str = "") -> None:
        containerd, ctr = shutil.which("containerd"), shutil.which("ctr")
        assert containerd and ctr, "apt-get install containerd runc (Debian) for this test"
        self.ctr = ctr
        self.address = directory / "containerd.sock"
        config = directory / "containerd.toml"
        config.write_text(
            "version = 2\n"
            f'root = "{directory / "root"}"\nstate = "{directory / "state"}"\n'
            + ("" if cri else 'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n')
            + f'[grpc]\n  address = "{self.address}"\n'
            f'[ttrpc]\n  address = "{self.address}.ttrpc"\n' + cri
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


@pytest.mark.parametrize("server", ["distribution", "miniregistry"])
def test_the_cri_resolves_unqualified_busybox_and_the_sandbox_image_at_the_mirror(
    tmp_path: Path, server: str
) -> None:
    """The CRI plugin (what the kubelet talks to) with ``registry.config_path``: the lines that
    docs/development.md gives for containerd 1.6/1.7."""
    built = build.ensure_node_binaries(("registry", "crictl"))
    if server == "distribution":
        served = registry.start(built["registry"] / "registry", tmp_path, report=lambda _: None)
    else:
        served = registry.start_mini(tmp_path, report=lambda _: None)
    certs = tmp_path / "certs.d"
    (tmp_path / "cni").mkdir()
    cri = (
        '[plugins."io.containerd.grpc.v1.cri"]\n'
        f'  sandbox_image = "{registry.SANDBOX_IMAGE}"\n'
        '[plugins."io.containerd.grpc.v1.cri".containerd]\n  snapshotter = "native"\n'
        f'[plugins."io.containerd.grpc.v1.cri".cni]\n  conf_dir = "{tmp_path / "cni"}"\n'
        f'[plugins."io.containerd.grpc.v1.cri".registry]\n  config_path = "{certs}"\n'
    )
    runtime = Containerd(tmp_path, cri)
    try:
        pushed = registry.publish(served.url) if server == "distribution" else None
        pushed = pushed or registry.node_images()
        registry.write_containerd_hosts(certs, served.url)
        runtime.start()
        endpoint = f"unix://{runtime.address}"

        def crictl(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [
                    str(built["crictl"] / "crictl"),
                    "--runtime-endpoint",
                    endpoint,
                    "--image-endpoint",
                    endpoint,
                    "--timeout",
                    "60s",
                    *args,
                ],
                capture_output=True,
                text=True,
                timeout=90,
            )

        # Twice, as imagePullPolicy: Always pulls (resolves the tag) on every start.
        for name in ("busybox", "busybox", registry.SANDBOX_IMAGE):
            done = crictl("pull", name)
            assert done.returncode == 0, done.stderr
        listed = json.loads(crictl("images", "-o", "json").stdout)["images"]
        by_tag = {tag: image["id"] for image in listed for tag in image["repoTags"]}
        assert by_tag == {
            "docker.io/library/busybox:latest": pushed[registry.BUSYBOX].config.digest,
            registry.SANDBOX_IMAGE: pushed[registry.PAUSE].config.digest,
        }
        # A name the local registry does not have fails here, it never goes to the internet.
        missing = crictl("pull", "alpine")
        assert missing.returncode != 0
        assert "docker.io/library/alpine:latest: not found" in missing.stderr
    finally:
        runtime.stop()
        served.stop()
