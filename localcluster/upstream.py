"""Upstream JobSet's manager, built from a local copy of its source, for ``make bench-compare``.

The Go module proxy does not serve upstream's module, so its source comes from a git repository
(a clone or a bare mirror) named by ``UPSTREAM_JOBSET_SRC``. The pinned ref's tree is exported
with ``git archive`` into the user cache, built there with ``go build`` (its dependencies come from
the module proxy), and the manager binary and the CRD are kept in a cache directory keyed by the
ref, the Go version and the build flags: a second run needs no source and no build.
"""

from __future__ import annotations

import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from localcluster.build import (
    BuildError,
    Component,
    _go,
    _go_env,
    _run_go,
    cache_root,
    go_version,
)

DEFAULT_REF = "v0.12.0"
SOURCE_ENV = "UPSTREAM_JOBSET_SRC"
# In upstream's tree: the CRD, and the package its version and commit are linked into.
CRD_PATH = "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"
VERSION_PACKAGE = "sigs.k8s.io/jobset/pkg/version"
# Upstream's User-Agent is ``jobset/<version> (<os>/<arch>) <commit>``: audit.count_writes matches
# clients by the part before the first ``/``.
USER_AGENT = "jobset"
# Upstream's client limits when neither its flags nor its config file set them (v0.12.0: the
# defaults of --kube-api-qps/--kube-api-burst and of clientConnection in its config API).
DEFAULT_QPS = 500
DEFAULT_BURST = 500
_LDFLAGS = "-s -w"


@dataclass(frozen=True)
class UpstreamBuild:
    directory: Path
    ref: str
    commit: str

    @property
    def manager(self) -> Path:
        return self.directory / "manager"

    @property
    def crd(self) -> Path:
        return self.directory / "crd.yaml"


def missing_source_message(ref: str) -> str:
    return (
        f"upstream JobSet's source is needed to build its manager ({ref}) once: set "
        f"{SOURCE_ENV} to a git clone of kubernetes-sigs/jobset (a bare mirror works) that has "
        f"{ref}, e.g.\n"
        f"    git clone --bare https://github.com/kubernetes-sigs/jobset /tmp/jobset.git\n"
        f"    make bench-compare {SOURCE_ENV}=/tmp/jobset.git\n"
        "The built manager is cached; later runs do not need the source."
    )


def cache_dir(ref: str, goversion: str) -> Path:
    digest = hashlib.sha256(f"{ref}\0{goversion}\0{_LDFLAGS}".encode()).hexdigest()[:16]
    return cache_root() / "bin" / f"jobset-upstream-{digest}"


def _git(source: Path, *args: str) -> bytes:
    try:
        done = subprocess.run(["git", "-C", str(source), *args], capture_output=True, check=True)
    except subprocess.CalledProcessError as err:
        raise BuildError(
            f"`git {' '.join(args[:2])}` in {source} failed: {err.stderr.decode().strip()}"
        ) from err
    return done.stdout


def resolve(source: Path, ref: str) -> str:
    """The commit ``ref`` names in the repository at ``source``."""
    try:
        return _git(source, "rev-parse", "--verify", f"{ref}^{{commit}}").decode().strip()
    except BuildError as err:
        raise BuildError(
            f"{source} has no commit named {ref} (set UPSTREAM_JOBSET_REF to a tag or commit it "
            f"has, or fetch the tags into it): {err}"
        ) from err


def _cached(directory: Path) -> str | None:
    """The commit a finished cache entry was built from, None if there is none."""
    files = [directory / name for name in ("manager", "crd.yaml", "commit")]
    return files[2].read_text().strip() if all(f.is_file() for f in files) else None


def export(source: Path, commit: str) -> Path:
    """The tree of ``commit`` under the cache (exported once with git archive)."""
    tree = cache_root() / "src" / f"jobset-{commit[:12]}"
    if (tree / "go.mod").is_file():
        return tree
    staging = tree.parent / f".{tree.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    archive = _git(source, "archive", "--format=tar", commit)
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
        tar.extractall(staging, filter="data")
    shutil.rmtree(tree, ignore_errors=True)
    staging.rename(tree)
    return tree


def _build_env() -> dict[str, str]:
    env = _go_env()
    # -mod=mod: upstream's go.sum may lack entries a build of the manager alone needs.
    env["GOFLAGS"] = "-mod=mod -buildvcs=false"
    return env


def ensure_upstream(
    source: Path | None = None,
    ref: str = DEFAULT_REF,
    report: Callable[[str], None] | None = None,
) -> UpstreamBuild:
    """Upstream's manager and CRD at ``ref``: from the cache, else built from ``source`` (default:
    ``$UPSTREAM_JOBSET_SRC``). A cached build is used without the source; with the source, it
    must be of the commit ``ref`` names there (a moved branch rebuilds)."""
    say = report or (lambda msg: print(msg, file=sys.stderr, flush=True))
    if source is None and os.environ.get(SOURCE_ENV):
        source = Path(os.environ[SOURCE_ENV])
    goversion = go_version()
    target = cache_dir(ref, goversion)
    built = _cached(target)
    if source is None or not source.exists():
        if built is not None:
            return UpstreamBuild(target, ref, built)
        if source is not None:
            raise BuildError(
                f"{SOURCE_ENV}={source} does not exist.\n" + missing_source_message(ref)
            )
        raise BuildError(missing_source_message(ref))
    commit = resolve(source, ref)
    if built == commit:
        return UpstreamBuild(target, ref, commit)
    say(f"upstream JobSet {ref} ({commit[:12]}): exporting the tree from {source} ...")
    tree = export(source, commit)
    component = Component(tree.name, ((".", "manager"),), root=tree.parent)
    log_path = cache_root() / "logs" / "build-jobset-upstream.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text("")
    staging = target.parent / f".{target.name}.partial-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    say(f"building upstream JobSet's manager with {goversion} (log: {log_path}) ...")
    started = time.monotonic()
    go = _go()
    ldflags = (
        f"{_LDFLAGS} -X {VERSION_PACKAGE}.GitVersion={ref} -X {VERSION_PACKAGE}.GitCommit={commit}"
    )
    retry = f"`make bench-compare {SOURCE_ENV}={source}`"
    try:
        env = _build_env()
        _run_go([go, "mod", "download"], tree, log_path, component, say, env=env, retry=retry)
        build = [go, "build", "-v", "-trimpath", f"-ldflags={ldflags}"]
        build += ["-o", str(staging / "manager"), "."]
        _run_go(build, tree, log_path, component, say, env=env, retry=retry)
        shutil.copyfile(tree / CRD_PATH, staging / "crd.yaml")
        (staging / "commit").write_text(commit + "\n")
        shutil.rmtree(target, ignore_errors=True)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    say(f"built upstream JobSet's manager in {time.monotonic() - started:.0f}s -> {target}")
    return UpstreamBuild(target, ref, commit)


def main() -> int:
    """Build (or find) the manager and print its path: ``python -m localcluster.upstream``."""
    ref = os.environ.get("UPSTREAM_JOBSET_REF", DEFAULT_REF)
    try:
        print(ensure_upstream(ref=ref).manager)
    except BuildError as err:
        print(err, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
