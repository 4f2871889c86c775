"""Before deciding: is the cached JobSet ours to reconcile, and is the cache fresh enough?

- **managedBy**: a JobSet whose ``spec.managedBy`` names another controller (e.g. Kueue's
  MultiKueue, or upstream JobSet running beside a canary of this one) is left entirely to that
  controller: no child, no status, no Event from us. Which value is ours is a flag
  (``--managed-by``); a JobSet without the field belongs to upstream's reserved value, as in
  upstream, so only a controller serving that value takes it.
- **The stale-cache guard**: after we write a JobSet (its status, the finalizer) the informer may
  still hold the version before that write. Deciding from it would recompute, and rewrite, what
  we just wrote: a 409 at best (optimistic concurrency), a repeated Event or a repeated
  transition otherwise. So the reconciler remembers the resourceVersion of its last write of each
  JobSet and comes back shortly while the cache is older than that. resourceVersions are
  compared as numbers only when both are numeric, as they are on every real API server; anything
  else is never called stale.

Pure: objects and remembered versions in, answers out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.jobset import api

# How soon to look again when the cache is older than our last write (the informer is usually
# a few milliseconds behind).
STALE_REQUEUE_AFTER = 0.2


def manager_of(obj: Mapping[str, Any]) -> str:
    """The controller a JobSet names in ``spec.managedBy``; absent or empty (or, which the CRD
    rejects, not a string) means upstream's reserved value, the default controller."""
    spec = obj.get("spec")
    managed_by = spec.get("managedBy") if isinstance(spec, Mapping) else None
    return managed_by if isinstance(managed_by, str) and managed_by else api.CONTROLLER_NAME


def managed_elsewhere(obj: Mapping[str, Any], serves: str) -> bool:
    """The JobSet belongs to a controller other than this one, which serves the managedBy value
    ``serves`` (``--managed-by``)."""
    return manager_of(obj) != serves


def resource_version(obj: Mapping[str, Any]) -> int | None:
    """The object's resourceVersion as a number; None when absent or not a decimal number."""
    meta = obj.get("metadata")
    version = str(meta.get("resourceVersion", "")) if isinstance(meta, Mapping) else ""
    return int(version) if version.isdecimal() else None


def is_stale(cached: Mapping[str, Any], last_written: int | None) -> bool:
    """The cached JobSet is older than our last write of it (``last_written``, a
    resourceVersion; None when we have not written it since we started)."""
    version = resource_version(cached)
    return last_written is not None and version is not None and version < last_written


def remember(last_written: int | None, written: Mapping[str, Any]) -> int | None:
    """The resourceVersion to remember after writing ``written`` (the API server's answer):
    its own when numeric, otherwise the one remembered before."""
    version = resource_version(written)
    return last_written if version is None else version
