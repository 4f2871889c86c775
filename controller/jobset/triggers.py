"""Which JobSet events are acted on at once and which are gathered with its child events.

A change a user (or Kueue) makes to a JobSet, to its spec or its metadata (a label, a finalizer,
the deletion), is reconciled at once. A change of its status alone is gathered, like a child
event, into the batch period (``--child-event-batch-period``): nearly every such event is the echo
of this controller's own status write, and a pass for it alone finds nothing to do unless the
JobSet's Jobs or claims moved meanwhile; when their events come within the period, the echo and
they cost one pass instead of two (few do, as measured in bench/HISTORY.md, "The event loop
(uvloop)").
Nothing is dropped: the batched pass runs all the same, at most one period later.

Pure: two versions of the cached object in, a verdict out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.runtime.store import stable_metadata


def status_only(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """``new`` differs from ``old`` in its status (or not at all): the same spec, the same
    metadata but the resourceVersion (the generation, which every spec change bumps, included)."""
    return stable_metadata(old) == stable_metadata(new) and old.get("spec") == new.get("spec")
