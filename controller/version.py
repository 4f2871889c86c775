"""What build this is: the version, the git commit it was built from, the Python running it.

The version is ``controller.__version__``. The commit is found, in this order:

1. the package is the ``controller/`` folder at the top of a git checkout (running from a clone,
   or an editable install): ``git rev-parse HEAD``, with ``-dirty`` when tracked files differ;
2. the file ``controller/COMMIT``, written by an image build (the Dockerfile's ``GIT_COMMIT``
   build argument; any other build writes the same file before it installs the package);
3. otherwise ``unknown``.

Git comes first so that a stale ``COMMIT`` left in a checkout never hides the real one; an
installed package (an image, a wheel) has no ``.git`` beside it and reads the file. Found once per
process.
"""

from __future__ import annotations

import functools
import platform
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry, Info

from controller import __version__

PACKAGE = Path(__file__).resolve().parent
COMMIT_FILE = PACKAGE / "COMMIT"
UNKNOWN = "unknown"
# A full or abbreviated object name, optionally marked dirty: anything else in the file is ignored
# rather than exported as a label value.
_COMMIT = re.compile(r"[0-9a-f]{7,64}(-dirty)?")


@dataclass(frozen=True)
class BuildInfo:
    version: str
    commit: str
    python_version: str

    def describe(self) -> str:
        """One line for ``--version``."""
        return (
            f"stateful-jobset {self.version} (commit {self.commit}, Python {self.python_version})"
        )


def valid_commit(text: str) -> str | None:
    """``text`` stripped, if it names a commit; None otherwise."""
    value = text.strip()
    return value if _COMMIT.fullmatch(value) else None


def _git(checkout: Path, *args: str) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            ["git", "-C", str(checkout), *args],
            capture_output=True, text=True, timeout=10, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None


def git_commit(checkout: Path) -> str | None:
    """HEAD of the checkout at ``checkout`` (``-dirty`` if tracked files changed), or None when it
    is not the top of a git work tree (``.git`` is a folder, or a file in a worktree)."""
    if not (checkout / ".git").exists():
        return None
    head = _git(checkout, "rev-parse", "HEAD")
    if head is None or head.returncode != 0:
        return None
    commit = valid_commit(head.stdout)
    if commit is None:
        return None
    changed = _git(checkout, "diff", "--quiet", "HEAD", "--")
    return f"{commit}-dirty" if changed is not None and changed.returncode == 1 else commit


def file_commit(path: Path) -> str | None:
    try:
        return valid_commit(path.read_text())
    except OSError:
        return None


def find_commit(package: Path = PACKAGE) -> str:
    return git_commit(package.parent) or file_commit(package / COMMIT_FILE.name) or UNKNOWN


@functools.cache
def build_info() -> BuildInfo:
    return BuildInfo(__version__, find_commit(), platform.python_version())


def register_build_info(registry: CollectorRegistry) -> None:
    """``stateful_jobset_build_info{version, commit, python_version} 1``: the ``*_build_info``
    pattern of Kubernetes' components (a constant 1, the build in the labels), so a query can join
    any series with the build of the replica that exported it, e.g. during a rolling upgrade."""
    build = build_info()
    Info(
        "stateful_jobset_build",
        "The build of the running controller: version, git commit, Python version",
        registry=registry,
    ).info(
        {
            "version": build.version,
            "commit": build.commit,
            "python_version": build.python_version,
        }
    )
