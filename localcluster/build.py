"""Build the control-plane binaries from the Go module proxy, once, cached by version.

Each component is a small wrapper module under ``gomod/`` whose go.mod/go.sum pin exactly what is
built. The cache key of a component is a hash of its go.mod, go.sum, the Go version and the build
flags, so a second build with the same inputs is instant and a version bump rebuilds.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

GOMOD_DIR = Path(__file__).parent / "gomod"
_LDFLAGS = "-s -w"


class BuildError(RuntimeError):
    """A build step failed; the message says which and how to fix it."""


@dataclass(frozen=True)
class Component:
    name: str
    # (import path of a main package, output binary name)
    targets: tuple[tuple[str, str], ...]
    root: Path = GOMOD_DIR
    # The wrapper module's directory under ``root`` when it is not ``name`` (another build of
    # the same module), and linker flags beyond _LDFLAGS (part of the cache key when set).
    module: str = ""
    extra_ldflags: str = ""
    # A module of this repository (not a wrapper of a released module): its own Go sources are
    # part of the cache key, so an edit rebuilds it.
    local_source: bool = False

    @property
    def module_dir(self) -> Path:
        return self.root / (self.module or self.name)

    @property
    def ldflags(self) -> str:
        return f"{_LDFLAGS} {self.extra_ldflags}" if self.extra_ldflags else _LDFLAGS

    @property
    def binaries(self) -> tuple[str, ...]:
        return tuple(binary for _, binary in self.targets)


COMPONENTS: tuple[Component, ...] = (
    Component("etcd", (("go.etcd.io/etcd/server/v3", "etcd"),)),
    Component(
        "kubernetes",
        (
            ("k8s.io/kubernetes/cmd/kube-apiserver", "kube-apiserver"),
            ("k8s.io/kubernetes/cmd/kube-controller-manager", "kube-controller-manager"),
            ("k8s.io/kubernetes/cmd/kube-scheduler", "kube-scheduler"),
            ("k8s.io/kubernetes/cmd/kubectl", "kubectl"),
        ),
    ),
    Component("kwok", (("sigs.k8s.io/kwok/cmd/kwok", "kwok"),)),
)

# Built only on demand for the real node (issue 13, ``ensure_node_binaries``), never by
# ensure_binaries: the KWOK tiers and CI do not need them and should not pay for their cold build.
# containerd 2.x because kubelet v1.37 no longer supports containerd 1.x (Debian has 1.6). The
# kubelet has a wrapper module of its own (gomod/kubelet): it needs modules the control plane does
# not, and adding them to gomod/kubernetes would change the control plane's cache key.
_CONTAINERD = "github.com/containerd/containerd/v2/cmd"
NODE_COMPONENTS: tuple[Component, ...] = (
    Component("coredns", (("github.com/coredns/coredns", "coredns"),)),
    Component(
        "containerd",
        (
            (f"{_CONTAINERD}/containerd", "containerd"),
            (f"{_CONTAINERD}/containerd-shim-runc-v2", "containerd-shim-runc-v2"),
            (f"{_CONTAINERD}/ctr", "ctr"),
        ),
    ),
    Component("kubelet", (("k8s.io/kubernetes/cmd/kubelet", "kubelet"),)),
)

# helm, for the chart's tests (lint, template, install/upgrade/uninstall) and `make helm`: built
# on demand like the node's components, never by ensure_binaries, whose cache keys stay as they are.
HELM = Component("helm", (("helm.sh/helm/v4/cmd/helm", "helm"),))


# The project's own reader of upstream JobSet's Go types (localcluster/gofields): which JSON
# values they decode as absent, for the immutability rules' semantic comparison
# (controller/api/gofields.py, which `make crd` writes). Built on demand (``ensure_gofields``).
GOFIELDS_SOURCE = Path(__file__).parent / "gofields"
GOFIELDS = Component(
    "gofields",
    (("stateful-jobset/localcluster/gofields", "gofields"),),
    root=GOFIELDS_SOURCE.parent,
    module=GOFIELDS_SOURCE.name,
    local_source=True,
)


# The oldest Kubernetes release the project claims to support (docs/operations.md, "Supported
# Kubernetes versions"): only its kube-apiserver, for the apiserver-only profile's min-version
# test. Built on demand (``ensure_min_apiserver``), never by ensure_binaries, and from a wrapper
# module of its own so that its cache key is independent of the control plane's.
MIN_KUBERNETES = Component(
    "kubernetes-min", (("k8s.io/kubernetes/cmd/kube-apiserver", "kube-apiserver"),)
)


def _pinned(module_dir: Path, module: str) -> str:
    """The version of ``module`` a wrapper's go.mod requires (one-line or block form)."""
    for raw in (module_dir / "go.mod").read_text().splitlines():
        parts = raw.split("//")[0].removeprefix("require ").split()
        if len(parts) == 2 and parts[0] == module:
            return parts[1]
    raise BuildError(f"{module_dir / 'go.mod'} does not require {module}")


# Kueue's manager (issue 18), for the local cluster's `kueue` profile and the Kueue end-to-end
# tests: built on demand (``ensure_kueue``), never by ensure_binaries. Kueue's module requires
# sigs.k8s.io/jobset (upstream's Go API types); the module proxy serves that release, so the
# wrapper needs no replace and no local source.
_KUEUE_VERSION = _pinned(GOMOD_DIR / "kueue", "sigs.k8s.io/kueue")
KUEUE = Component(
    "kueue",
    (("sigs.k8s.io/kueue/cmd/kueue", "kueue"),),
    # Its version (logs, User-Agent) as Kueue's own build links it in; else "v0.0.0-main".
    extra_ldflags=f"-X sigs.k8s.io/kueue/pkg/version.GitVersion={_KUEUE_VERSION}",
)


# Kubeflow Trainer's controller manager (issue 38), for the local cluster's `trainer` profile and
# the node tier's Trainer tests: built on demand (``ensure_trainer``), never by ensure_binaries.
# Its module requires upstream JobSet's Go API (sigs.k8s.io/jobset) and needs no replace; it links
# in no version of its own.
TRAINER_MODULE = "github.com/kubeflow/trainer/v2"
TRAINER = Component(
    "trainer",
    ((f"{TRAINER_MODULE}/cmd/trainer-controller-manager", "trainer-controller-manager"),),
)


# Upstream JobSet's manager, for `make bench-compare`, `make bench-validation` and the tests that
# run it beside this controller (localcluster/upstream.py, localcluster/upstreamjobset.py): built
# on demand (``ensure_upstream_jobset``), never by ensure_binaries. The proxy refuses the module's
# version list (``go list -m -versions``) but serves an exact version, which is all a wrapper
# module needs. Its main package is the module's root. Its version and commit are linked in as
# upstream's own build does (its Makefile's LD_FLAGS); the commit is the tag's, as the proxy's
# ``.info`` for the version records it (Origin.Hash): a version bump must update both.
JOBSET_MODULE = "sigs.k8s.io/jobset"
_UPSTREAM_JOBSET_VERSION = _pinned(GOMOD_DIR / "jobset", JOBSET_MODULE)
UPSTREAM_JOBSET_COMMIT = "09e9a3bb4b64dbe75b5b0119d3623903f0434643"
UPSTREAM_JOBSET = Component(
    "jobset-upstream",
    ((JOBSET_MODULE, "manager"),),
    module="jobset",
    extra_ldflags=(
        f"-X {JOBSET_MODULE}/pkg/version.GitVersion={_UPSTREAM_JOBSET_VERSION} "
        f"-X {JOBSET_MODULE}/pkg/version.GitCommit={UPSTREAM_JOBSET_COMMIT}"
    ),
)


# The real node's CSI stack (issue 37): the Kubernetes CSI sidecars and snapshot-controller from
# the Go module proxy, each from a wrapper module of its own (the releases pin different k8s.io
# versions, which one module could not hold), and the project's own CSI driver
# (localcluster/csidriver, a module of this repository). Built on demand (``ensure_csi``, `make
# csi`), never by ensure_binaries. Each release's version is linked in as its own build does
# (``-X main.version``), so the sidecars log it at start.
_CSI_SIDECARS = "github.com/kubernetes-csi"
_SNAPSHOTTER = f"{_CSI_SIDECARS}/external-snapshotter/v8"
CSI_SOURCE = Path(__file__).parent / "csidriver"
CSI_DRIVER_MODULE = "stateful-jobset/localcluster/csidriver"


def _sidecar(name: str, module: str, commands: tuple[str, ...]) -> Component:
    version = _pinned(GOMOD_DIR / name, module)
    return Component(
        name,
        tuple((f"{module}/cmd/{command}", command) for command in commands),
        extra_ldflags=f"-X main.version={version}",
    )


CSI_COMPONENTS: tuple[Component, ...] = (
    _sidecar("csi-provisioner", f"{_CSI_SIDECARS}/external-provisioner/v5", ("csi-provisioner",)),
    _sidecar("csi-resizer", f"{_CSI_SIDECARS}/external-resizer", ("csi-resizer",)),
    _sidecar("csi-snapshotter", _SNAPSHOTTER, ("csi-snapshotter", "snapshot-controller")),
    Component(
        "csi-driver",
        ((CSI_DRIVER_MODULE, "sjs-csi-driver"),),
        root=CSI_SOURCE.parent,
        module=CSI_SOURCE.name,
        local_source=True,
    ),
)


def _versioned_apiserver() -> Component:
    """kube-apiserver of gomod/kubernetes with its release linked in as its version.

    The control plane's binaries report ``v0.0.0-master+$Format:%H$`` (no version is linked in:
    changing that would change their cache key and rebuild them everywhere). Kueue refuses to
    start when the server's version does not parse, so the ``kueue`` profile runs this build:
    the same sources, whose compiled packages Go's build cache already has from the control
    plane's build, so building it is mostly a link.
    """
    release = _pinned(GOMOD_DIR / "kubernetes", "k8s.io/kubernetes")
    major, minor = release.removeprefix("v").split(".")[:2]
    package = "k8s.io/component-base/version"
    flags = " ".join(
        f"-X {package}.{name}={value}"
        for name, value in (("gitVersion", release), ("gitMajor", major), ("gitMinor", minor))
    )
    return Component(
        "kube-apiserver-versioned",
        (("k8s.io/kubernetes/cmd/kube-apiserver", "kube-apiserver"),),
        module="kubernetes",
        extra_ldflags=flags,
    )


VERSIONED_APISERVER = _versioned_apiserver()


def cache_root() -> Path:
    """Where built binaries live: outside the work tree, so clones and CI runs share them."""
    explicit = os.environ.get("STATEFUL_JOBSET_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".cache"
    return base / "stateful-jobset"


def _go() -> str:
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "Go toolchain not found on PATH. Install Go >= 1.26 (the version the wrapper modules "
            "in localcluster/gomod/ declare) and make sure `go version` works, then retry."
        )
    return go


def _go_env() -> dict[str, str]:
    env = dict(os.environ)
    # Never let `go` download another toolchain: only the module proxy is reachable here, and a
    # silent toolchain switch would hide which Go built the binaries.
    env["GOTOOLCHAIN"] = "local"
    env.setdefault("CGO_ENABLED", "0")
    env["GOFLAGS"] = "-mod=readonly -buildvcs=false"
    return env


def go_version() -> str:
    try:
        out = subprocess.run(
            [_go(), "env", "GOVERSION"],
            capture_output=True,
            text=True,
            check=True,
            env=_go_env(),
        )
    except subprocess.CalledProcessError as err:
        raise BuildError(f"`go env GOVERSION` failed: {err.stderr.strip()}") from err
    return out.stdout.strip()


def module_download(component: Component, module: str) -> dict[str, Any]:
    """``go mod download -json`` of the version of ``module`` that a wrapper pins: where its
    source is in the module cache (``Dir``, downloaded again if the cache was cleaned) and, when
    the proxy recorded it, the commit it was made from (``Origin.Hash``)."""
    version = _pinned(component.module_dir, module)
    try:
        done = subprocess.run(
            [_go(), "mod", "download", "-json", f"{module}@{version}"],
            cwd=component.module_dir,
            env=_go_env(),
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
    except subprocess.CalledProcessError as err:
        raise BuildError(
            f"`go mod download {module}@{version}` failed: {(err.stdout + err.stderr).strip()}"
        ) from err
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def required_versions(component: Component) -> dict[str, str]:
    """The module versions a wrapper pins (its direct requirements), for the record."""
    versions: dict[str, str] = {}
    in_block = False
    for raw in (component.module_dir / "go.mod").read_text().splitlines():
        line = raw.split("//")[0].strip()
        if line.startswith("require ("):
            in_block = True
            continue
        if in_block and line == ")":
            in_block = False
            continue
        parts = line.removeprefix("require ").split()
        if (in_block or raw.startswith("require ")) and len(parts) == 2 and "indirect" not in raw:
            versions[parts[0]] = parts[1]
    return versions


def cache_key(component: Component, goversion: str) -> str:
    digest = hashlib.sha256()
    for name in ("go.mod", "go.sum"):
        digest.update((component.module_dir / name).read_bytes())
    digest.update(goversion.encode())
    digest.update(_LDFLAGS.encode())
    digest.update(repr(component.targets).encode())
    if component.extra_ldflags:
        digest.update(component.extra_ldflags.encode())
    if component.local_source:
        # Its Go sources, not its tests (an edited test builds the same binary).
        sources = component.module_dir.rglob("*.go")
        for source in sorted(s for s in sources if not s.name.endswith("_test.go")):
            digest.update(str(source.relative_to(component.module_dir)).encode())
            digest.update(source.read_bytes())
    return digest.hexdigest()[:16]


def component_dir(component: Component, goversion: str) -> Path:
    return cache_root() / "bin" / f"{component.name}-{cache_key(component, goversion)}"


def _is_built(directory: Path, component: Component) -> bool:
    return all((directory / b).is_file() for b in component.binaries)


def _run_go(
    args: list[str],
    cwd: Path,
    log_path: Path,
    component: Component,
    report: Callable[[str], None],
    *,
    env: dict[str, str] | None = None,
    retry: str = "`make binaries`",
) -> None:
    """Run one go command, writing its output to a log and reporting progress periodically;
    ``env`` replaces the wrappers' environment, ``retry`` is what the error tells to run again."""
    started = time.monotonic()
    compiled = 0
    last_report = started
    with log_path.open("a") as log:
        log.write(f"$ {' '.join(args)}\n")
        log.flush()
        proc = subprocess.Popen(
            args,
            cwd=cwd,
            env=env if env is not None else _go_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert proc.stdout is not None
        stop = threading.Event()

        def heartbeat() -> None:
            # A slow link step prints nothing: keep the terminal alive regardless.
            while not stop.wait(30):
                report(
                    f"  {component.name}: still building, {compiled} packages compiled, "
                    f"{time.monotonic() - started:.0f}s"
                )

        ticker = threading.Thread(target=heartbeat, daemon=True)
        ticker.start()
        try:
            for line in proc.stdout:
                log.write(line)
                compiled += 1
                now = time.monotonic()
                if now - last_report >= 15:
                    last_report = now
                    report(
                        f"  {component.name}: {compiled} packages compiled, "
                        f"{now - started:.0f}s (last: {line.strip()[:70]})"
                    )
            code = proc.wait()
        finally:
            stop.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    if code != 0:
        tail = log_path.read_text().splitlines()[-25:]
        raise BuildError(
            f"building {component.name} failed (`{' '.join(args[:3])} ...` exited {code}).\n"
            + "\n".join(f"    {t}" for t in tail)
            + f"\nFull log: {log_path}\n"
            "Fix: check that the Go module proxy is reachable (GOPROXY) and that `go version` "
            f"is at least the one in {component.module_dir / 'go.mod'}; then run "
            f"{retry} again."
        )


def _publish(staging: Path, target: Path, component: Component) -> None:
    """Move a finished build into the cache: atomically, so a half-written entry is never
    mistaken for a finished one. Another process (a test run, a helper's `make`) may have built
    and published the same component meanwhile; its entry is as good as ours, so ours is
    dropped (by the caller) instead of failing with "Directory not empty"."""
    try:
        staging.rename(target)
    except OSError:
        if not _is_built(target, component):
            raise


def build_component(component: Component, goversion: str, report: Callable[[str], None]) -> Path:
    target = component_dir(component, goversion)
    if _is_built(target, component):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.parent / f".{target.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    log_path = cache_root() / "logs" / f"build-{component.name}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text("")
    report(f"building {component.name} ({', '.join(component.binaries)}) with {goversion} ...")
    started = time.monotonic()
    go = _go()
    try:
        _run_go([go, "mod", "download"], component.module_dir, log_path, component, report)
        for package, binary in component.targets:
            _run_go(
                [
                    go,
                    "build",
                    "-v",
                    "-trimpath",
                    f"-ldflags={component.ldflags}",
                    "-o",
                    str(staging / binary),
                    package,
                ],
                component.module_dir,
                log_path,
                component,
                report,
            )
        _publish(staging, target, component)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    report(f"built {component.name} in {time.monotonic() - started:.0f}s -> {target}")
    return target


@dataclass(frozen=True)
class Binaries:
    directories: dict[str, Path]

    def path(self, binary: str) -> Path:
        for component in COMPONENTS:
            if binary in component.binaries:
                return self.directories[component.name] / binary
        raise KeyError(binary)


def ensure_binaries(report: Callable[[str], None] | None = None) -> Binaries:
    """Build whatever is missing from the cache and return where every binary is."""
    say = report or (lambda msg: print(msg, file=sys.stderr, flush=True))
    goversion = go_version()
    directories = {c.name: build_component(c, goversion, say) for c in COMPONENTS}
    return Binaries(directories)


def ensure_node_binaries(
    names: tuple[str, ...] | None = None, report: Callable[[str], None] | None = None
) -> dict[str, Path]:
    """Build (or find cached) the real-node components; returns component name -> directory."""
    say = report or (lambda msg: print(msg, file=sys.stderr, flush=True))
    goversion = go_version()
    wanted = [c for c in NODE_COMPONENTS if names is None or c.name in names]
    return {c.name: build_component(c, goversion, say) for c in wanted}


def ensure_csi(report: Callable[[str], None] | None = None) -> dict[str, Path]:
    """Build (or find cached) the CSI sidecars, snapshot-controller and the project's CSI driver;
    returns binary name -> path."""
    say = report or (lambda msg: print(msg, file=sys.stderr, flush=True))
    goversion = go_version()
    paths: dict[str, Path] = {}
    for component in CSI_COMPONENTS:
        directory = build_component(component, goversion, say)
        paths.update({binary: directory / binary for binary in component.binaries})
    return paths


def ensure_helm(report: Callable[[str], None] | None = None) -> Path:
    """Build (or find cached) helm; returns the binary's path."""
    say = report or (lambda msg: print(msg, file=sys.stderr, flush=True))
    return build_component(HELM, go_version(), say) / "helm"


def ensure_kueue(report: Callable[[str], None] | None = None) -> Path:
    """Build (or find cached) Kueue's manager; returns the binary's path."""
    say = report or (lambda msg: print(msg, file=sys.stderr, flush=True))
    return build_component(KUEUE, go_version(), say) / "kueue"


def ensure_trainer(report: Callable[[str], None] | None = None) -> Path:
    """Build (or find cached) Kubeflow Trainer's controller manager; returns the binary's path."""
    say = report or (lambda msg: print(msg, file=sys.stderr, flush=True))
    return build_component(TRAINER, go_version(), say) / "trainer-controller-manager"


def ensure_gofields(report: Callable[[str], None] | None = None) -> Path:
    """Build (or find cached) the Go types reader (``GOFIELDS``); returns the binary's path."""
    say = report or (lambda msg: print(msg, file=sys.stderr, flush=True))
    return build_component(GOFIELDS, go_version(), say) / "gofields"


def ensure_upstream_jobset(report: Callable[[str], None] | None = None) -> Path:
    """Build (or find cached) upstream JobSet's manager; returns the binary's path."""
    say = report or (lambda msg: print(msg, file=sys.stderr, flush=True))
    return build_component(UPSTREAM_JOBSET, go_version(), say) / "manager"


def ensure_versioned_apiserver(report: Callable[[str], None] | None = None) -> Path:
    """Build (or find cached) the kube-apiserver that reports its release as its version."""
    say = report or (lambda msg: print(msg, file=sys.stderr, flush=True))
    return build_component(VERSIONED_APISERVER, go_version(), say) / "kube-apiserver"


def ensure_min_apiserver(report: Callable[[str], None] | None = None) -> Path:
    """Build (or find cached) the oldest supported kube-apiserver; returns the binary's path."""
    say = report or (lambda msg: print(msg, file=sys.stderr, flush=True))
    return build_component(MIN_KUBERNETES, go_version(), say) / "kube-apiserver"


def describe() -> list[str]:
    """Human-readable list of pinned versions (for docs and `localcluster versions`)."""
    lines = [f"go: {go_version()}"]
    for component in COMPONENTS:
        for module, version in required_versions(component).items():
            lines.append(f"{component.name}: {module} {version}")
    return lines
