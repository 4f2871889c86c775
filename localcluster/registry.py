"""The local image registry on 127.0.0.1 that serves the node's images as a docker.io mirror.

``localcluster.miniregistry`` (Python, read-only, the pull half of the OCI distribution API; no
build) serves an OCI image layout under the state directory with the locally built ``busybox``
and ``pause`` images (``localcluster.images``) under the names that unchanged manifests use
(``docker.io/library/busybox:latest``, ``registry.k8s.io/pause:3.10``). ``hosts_toml`` writes
containerd's mirror configuration that sends docker.io and registry.k8s.io pulls there, so even
``imagePullPolicy: Always`` pulls from this machine.

The distribution project's registry was tried first (``docs/development.md``): a 14-minute cold
build, mostly its cloud storage drivers, for a node that only pulls.

``python -m localcluster.registry [STATE_DIR]`` starts it, checks a pull of every image and prints
the containerd configuration, then stops.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from localcluster import images, processes

# Repository and tag inside the registry -> the reference a manifest or the kubelet names.
BUSYBOX = ("library/busybox", "latest")
PAUSE = ("pause", "3.10")
MIRRORED = ("docker.io", "registry.k8s.io")
# What containerd's CRI runs as each pod's sandbox (its ``sandbox_image`` / ``pinned_images``).
SANDBOX_IMAGE = f"registry.k8s.io/{PAUSE[0]}:{PAUSE[1]}"
# The full references that manifests and containerd use.
REFERENCES = {BUSYBOX: f"docker.io/{BUSYBOX[0]}:{BUSYBOX[1]}", PAUSE: SANDBOX_IMAGE}


@dataclass
class Registry:
    process: processes.ManagedProcess
    port: int
    root: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.stop()


def _serve(
    process: processes.ManagedProcess, port: int, root: Path, report: Callable[[str], None]
) -> Registry:
    """Start ``process`` and wait until it answers the registry API on ``port``."""
    process.start()
    try:
        processes.wait_ready(
            process,
            lambda: processes.https_get(f"http://127.0.0.1:{port}/v2/"),
            timeout=30,
            report=report,
        )
    except BaseException:
        process.stop()
        raise
    return Registry(process, port, root)


def start(state: Path, port: int = 0, report: Callable[[str], None] = print) -> Registry:
    """``localcluster.miniregistry`` serving the node's images from an OCI layout under
    ``state``."""
    port = port or processes.free_port()
    processes.ensure_port_free(port, "the image registry")
    layout = state / "registry" / "layout"
    images.write_layout(layout, {REFERENCES[key]: image for key, image in node_images().items()})
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))
    process = processes.ManagedProcess(
        "miniregistry",
        [sys.executable, "-m", "localcluster.miniregistry", str(layout), str(port)],
        state / "logs" / "miniregistry.log",
        env=env,
    )
    return _serve(process, port, layout, report)


def node_images() -> dict[tuple[str, str], images.Image]:
    return {
        BUSYBOX: images.busybox_image(),
        PAUSE: images.pause_image(images.build_pause()),
    }


def hosts_toml(registry_url: str, upstream: str) -> str:
    """containerd's ``certs.d/<upstream>/hosts.toml``: pull from the local registry only.

    With ``config_path`` set to the certs.d directory in containerd's CRI registry section,
    containerd resolves ``<upstream>/...`` at ``registry_url`` first. ``server`` is set to the same
    local URL so that a name missing locally fails here instead of trying the internet (which
    this machine cannot reach anyway).
    """
    return (
        f'server = "{registry_url}"\n\n'
        f'[host."{registry_url}"]\n'
        '  capabilities = ["pull", "resolve"]\n'
    )


def write_containerd_hosts(certs_d: Path, registry_url: str) -> list[Path]:
    written = []
    for upstream in MIRRORED:
        path = certs_d / upstream / "hosts.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(hosts_toml(registry_url, upstream))
        written.append(path)
    return written


def main(argv: list[str]) -> int:
    processes.stop_on_signals()
    state = Path(argv[0]) if argv else Path(tempfile.mkdtemp(prefix="localcluster-registry-"))
    started = time.monotonic()
    registry = start(state)
    try:
        print(f"registry serving on {registry.url} in {time.monotonic() - started:.2f}s")
        for (repository, tag), image in node_images().items():
            manifest = images.verify_pull(registry.url, repository, tag)
            size = sum(layer["size"] for layer in manifest["layers"])
            print(f"  pulled {repository}:{tag} {image.manifest.digest} ({size} bytes of layers)")
        for path in write_containerd_hosts(state / "certs.d", registry.url):
            print(f"--- {path}\n{path.read_text()}")
    finally:
        registry.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
