"""The API server's Kubernetes version, checked at start against the oldest this controller
supports.

Below 1.35 the JobSet CRD does not install (its validation rules use CEL functions a 1.34 API
server does not offer new CRDs: docs/operations.md, "Supported Kubernetes versions"), and a
controller started there would only retry lists of a resource that cannot exist. It refuses to
start instead, naming the server's version and the minimum.

The version compared is the one the server behaves as: its emulation version when it reports one
(a 1.36 binary emulating 1.34 offers 1.34's features), else ``major``/``minor``, else the
``gitVersion``. A server that reports none of them (a build without version stamping says
``v0.0.0-master``) is not refused: the start is logged with a warning.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MINIMUM = (1, 35)
_NUMBER = re.compile(r"(\d+)")
_GIT_VERSION = re.compile(r"v?(\d+)\.(\d+)")


@dataclass(frozen=True)
class ServerVersion:
    git_version: str  # as reported, e.g. v1.35.4 or v1.35.4-gke.100
    minor: tuple[int, int] | None  # (major, minor) it behaves as; None: cannot tell

    def describe(self) -> str:
        if self.minor is None:
            return self.git_version or "unknown"
        major, minor = self.minor
        stamped = _GIT_VERSION.match(self.git_version)
        if stamped and (int(stamped.group(1)), int(stamped.group(2))) == self.minor:
            return self.git_version
        return f"{self.git_version or 'unknown'} (as {major}.{minor})"


def _number(text: Any) -> int | None:
    """Kubernetes' ``major``/``minor`` strings; providers add a "+" ("27+")."""
    found = _NUMBER.match(str(text or ""))
    return int(found.group(1)) if found else None


def server_version(info: Mapping[str, Any]) -> ServerVersion:
    """The answer of ``GET /version`` read as a version."""
    git_version = str(info.get("gitVersion") or "")
    for major_key, minor_key in (("emulationMajor", "emulationMinor"), ("major", "minor")):
        major, minor = _number(info.get(major_key)), _number(info.get(minor_key))
        if major is not None and minor is not None and major > 0:
            return ServerVersion(git_version, (major, minor))
    stamped = _GIT_VERSION.match(git_version)
    if stamped and int(stamped.group(1)) > 0:
        return ServerVersion(git_version, (int(stamped.group(1)), int(stamped.group(2))))
    return ServerVersion(git_version, None)


def refusal(version: ServerVersion, minimum: tuple[int, int] = MINIMUM) -> str | None:
    """Why this controller cannot run on ``version``; None if it can (or the version is
    unknown)."""
    if version.minor is None or version.minor >= minimum:
        return None
    return (
        f"the API server runs Kubernetes {version.describe()}; this controller needs "
        f"{minimum[0]}.{minimum[1]} or later (the JobSet CRD's validation rules use CEL features "
        f'that older API servers do not offer; see "Supported Kubernetes versions" in '
        f"docs/operations.md)"
    )
