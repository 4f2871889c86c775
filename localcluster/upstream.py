"""Upstream JobSet's manager, built from the Go module proxy, for ``make bench-compare``,
``make bench-validation`` and the tests that run it beside this controller
(``localcluster/upstreamjobset.py`` runs it against a local cluster).

The wrapper module ``gomod/jobset`` pins ``sigs.k8s.io/jobset`` (its main package is the module's
root); ``build.UPSTREAM_JOBSET`` builds it like the other components (cached in the user cache,
keyed by go.mod, go.sum, the Go version and the build flags, progress on the terminal), with its
version and commit linked in as upstream's own build does. The proxy refuses the module's version
list but serves an exact version, which is all the wrapper needs: no clone, no local source.
The CRD, the webhook manifests and the RBAC are the module's own files, in the module cache
(``UpstreamBuild.source``).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from localcluster import build
from localcluster.build import BuildError

MODULE = build.JOBSET_MODULE
# The version gomod/jobset/go.mod pins: the only one this builds (a bump changes go.mod, go.sum
# and build.UPSTREAM_JOBSET_COMMIT together).
DEFAULT_REF = build.required_versions(build.UPSTREAM_JOBSET)[MODULE]
# In upstream's module: the CRD, its webhooks (not registered by the launcher) and its RBAC.
CRD_PATH = "config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml"
WEBHOOKS_PATH = "config/components/webhook/manifests.yaml"
RBAC_PATH = "config/components/rbac"
# Upstream's User-Agent is ``jobset/<version> (<os>/<arch>) <commit>``: audit.count_writes matches
# clients by the part before the first ``/``.
USER_AGENT = "jobset"
# Upstream's client limits when neither its flags nor its config file set them (v0.12.0: the
# defaults of --kube-api-qps/--kube-api-burst and of clientConnection in its config API).
DEFAULT_QPS = 500
DEFAULT_BURST = 500


@dataclass(frozen=True)
class UpstreamBuild:
    """The built manager (``directory``, a cache entry) and the release's module (``source``)."""

    directory: Path
    source: Path
    ref: str
    commit: str

    @property
    def manager(self) -> Path:
        return self.directory / "manager"

    @property
    def crd(self) -> Path:
        return self.source / CRD_PATH

    @property
    def webhooks(self) -> Path:
        return self.source / WEBHOOKS_PATH

    @property
    def rbac(self) -> Path:
        return self.source / RBAC_PATH


@functools.cache
def module_dir() -> Path:
    """The pinned release's source in the module cache (downloaded again if the cache was
    cleaned). The commit the proxy recorded for the version must be the one linked in. Asked
    once per process (each asking runs ``go mod download``)."""
    found = build.module_download(build.UPSTREAM_JOBSET, MODULE)
    recorded = (found.get("Origin") or {}).get("Hash")
    if recorded and recorded != build.UPSTREAM_JOBSET_COMMIT:
        raise BuildError(
            f"the module proxy says {MODULE}@{DEFAULT_REF} is commit {recorded}, and "
            f"localcluster/build.py links in {build.UPSTREAM_JOBSET_COMMIT}: set "
            "UPSTREAM_JOBSET_COMMIT to the version's commit"
        )
    return Path(found["Dir"])


def ensure_upstream(report: Callable[[str], None] | None = None) -> UpstreamBuild:
    """Upstream's manager (built from the module proxy unless cached) and its module's files."""
    say = report or (lambda msg: print(msg, file=sys.stderr, flush=True))
    manager = build.ensure_upstream_jobset(say)
    source = module_dir()
    if not (source / CRD_PATH).is_file():
        raise BuildError(f"{source} has no {CRD_PATH}: is it {MODULE}@{DEFAULT_REF}?")
    return UpstreamBuild(manager.parent, source, DEFAULT_REF, build.UPSTREAM_JOBSET_COMMIT)


def main() -> int:
    """Build (or find) the manager and print its path: ``python -m localcluster.upstream``."""
    try:
        print(ensure_upstream().manager)
    except BuildError as err:
        print(err, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
