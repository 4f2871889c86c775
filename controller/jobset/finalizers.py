"""The JSON patches (RFC 6902) that add our finalizer to a JobSet and remove it again.

Other controllers may hold finalizers on the same JobSet, so neither patch replaces the list
blindly:
- **add** appends to the list (or creates it when there is none), guarded by a ``test`` of the
  resourceVersion we read: a concurrent change to the object fails the patch with a conflict
  and the next pass reads the list again;
- **remove** removes the entry at the index where we saw it, guarded by a ``test`` that our
  finalizer is still there: another controller's finalizer removed (or added before ours) in
  the meantime shifts the index, the test fails, and the next pass looks again. No
  resourceVersion test: status writes and other changes to a JobSet that is being deleted do
  not have to stop our removal.

Pure: the JobSet's metadata in, the patch (or None: nothing to do) out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.runtime.store import Obj


def _finalizers(metadata: Mapping[str, Any]) -> list[Any]:
    value = metadata.get("finalizers")
    return list(value) if isinstance(value, list) else []


def add_patch(metadata: Mapping[str, Any], finalizer: str) -> list[Obj] | None:
    """The patch adding ``finalizer``; None when the JobSet already has it."""
    current = _finalizers(metadata)
    if finalizer in current:
        return None
    version = metadata.get("resourceVersion")
    patch: list[Obj] = [{"op": "test", "path": "/metadata/resourceVersion", "value": version}]
    if current:
        patch.append({"op": "add", "path": "/metadata/finalizers/-", "value": finalizer})
    else:
        patch.append({"op": "add", "path": "/metadata/finalizers", "value": [finalizer]})
    return patch


def remove_patch(metadata: Mapping[str, Any], finalizer: str) -> list[Obj] | None:
    """The patch removing ``finalizer``; None when the JobSet does not have it."""
    current = _finalizers(metadata)
    if finalizer not in current:
        return None
    index = current.index(finalizer)
    return [
        {"op": "test", "path": f"/metadata/finalizers/{index}", "value": finalizer},
        {"op": "remove", "path": f"/metadata/finalizers/{index}"},
    ]
