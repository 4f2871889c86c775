"""SpecInvalid: what to write for a JobSet the controller cannot act on.

The API server's schema and CEL rules admit a few specs that ``parse`` (or the volume policies)
refuse: a failure-policy pattern that is not a valid regular expression, policies that cannot be
acted on. Such a JobSet gets no child, and instead:
- a ``SpecInvalid`` condition, status True, reason ``InvalidSpec``, the parser's message, and
  ``observedGeneration`` the generation that was refused (the rest of the status is kept);
- a Warning Event with the same reason and message.

Nothing is written when the stored condition already says exactly that for this generation:
the reconcile of an unchanged invalid JobSet writes nothing, and an edit that is still invalid
(a new generation or a new message) is reported again.

Pure: the cached object, the message and the wall-clock time in; the status and Event out.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.jobset import api
from controller.jobset.jobsetstatus import parse_conditions
from controller.jobset.status import Event, set_condition
from controller.runtime.store import Obj


@dataclass(frozen=True)
class InvalidReport:
    """``status``: the complete new status (status subresource). ``event``: the Warning Event."""

    status: Obj
    event: Event


def report(obj: Mapping[str, Any], message: str, now: datetime.datetime) -> InvalidReport | None:
    """The status and Event reporting ``message`` for ``obj``; None when already reported."""
    stored = obj.get("status") or {}
    # The conditions as a valid JobSet's are read (``jobsetstatus.parse_conditions``): what is no
    # condition is not written back.
    conditions = parse_conditions(stored.get("conditions"))
    generation = (obj.get("metadata") or {}).get("generation") or 0
    updated = set_condition(
        conditions, api.SPEC_INVALID, "True", api.REASON_SPEC_INVALID, message,
        now, int(generation),
    )  # fmt: skip
    if updated is conditions:
        return None
    return InvalidReport(
        status={**stored, "conditions": [c.to_dict() for c in updated]},
        event=Event("Warning", api.REASON_SPEC_INVALID, message),
    )
