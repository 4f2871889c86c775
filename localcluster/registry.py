"""A local OCI registry on 127.0.0.1 serving the node's images as a docker.io mirror.

The registry is the distribution project's ``registry`` command, built from the Go module proxy
(``gomod/registry``), with filesystem storage under the state directory. ``publish`` pushes the
locally built ``busybox`` and ``pause`` images (``localcluster.images``) under the names that
unchanged manifests use (``docker.io/library/busybox:latest``, ``registry.k8s.io/pause:3.10``),
and ``hosts_toml`` writes containerd's mirror configuration that sends docker.io and
registry.k8s.io pulls there, so even ``imagePullPolicy: Always`` pulls from this machine.

``python -m localcluster.registry [STATE_DIR]`` builds what is missing, starts the registry,
publishes, checks a pull of every image and prints the containerd configuration, then stops.
"""

from __future__ import annotations

import os
import secrets
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from localcluster import build, images, processes

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


def config_yaml(root: Path, port: int) -> str:
    """The registry's configuration: filesystem storage under ``root``, loopback only."""
    return (
        "version: 0.1\n"
        "log:\n  level: info\n  accesslog:\n    disabled: true\n"
        f"storage:\n  filesystem:\n    rootdirectory: {root}\n"
        "  delete:\n    enabled: true\n"
        f"http:\n  addr: 127.0.0.1:{port}\n  secret: {secrets.token_hex(16)}\n"
    )


def start(
    binary: Path, state: Path, port: int = 0, report: Callable[[str], None] = print
) -> Registry:
    port = port or processes.free_port()
    processes.ensure_port_free(port, "the image registry")
    root = state / "registry" / "storage"
    root.mkdir(parents=True, exist_ok=True)
    config = state / "registry" / "config.yml"
    config.write_text(config_yaml(root, port))
    process = processes.ManagedProcess(
        "registry", [str(binary), "serve", str(config)], state / "logs" / "registry.log"
    )
    return _serve(process, port, root, report)


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


def start_mini(state: Path, port: int = 0, report: Callable[[str], None] = print) -> Registry:
    """The experiment: ``localcluster.miniregistry`` (Python, read-only, no build) serving the
    node's images from an OCI layout under ``state``. Same interface as :func:`start` plus
    :func:`publish` together."""
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


def publish(registry_url: str) -> dict[tuple[str, str], images.Image]:
    """Push the node's images; returns them by (repository, tag)."""
    built = node_images()
    for (repository, tag), image in built.items():
        images.push(registry_url, repository, tag, image)
    return built


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
    directory = build.ensure_node_binaries(("registry",))["registry"]
    print(f"registry binary ready in {time.monotonic() - started:.1f}s: {directory}")
    started = time.monotonic()
    registry = start(directory / "registry", state)
    try:
        print(f"registry serving on {registry.url} in {time.monotonic() - started:.2f}s")
        started = time.monotonic()
        built = publish(registry.url)
        print(f"pushed {len(built)} images in {time.monotonic() - started:.2f}s")
        for (repository, tag), image in built.items():
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
