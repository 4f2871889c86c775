"""KueueIncompatible (controller/jobset/kueue.py): set by earlier builds on a queued JobSet
whose pod templates held empty lists; the rules now accept Kueue's patch of such a JobSet, so the
condition is never set anew and a stored True is turned False once."""

from __future__ import annotations

from typing import Any

from controller.jobset import kueue, model
from controller.jobset.decide import decide
from controller.runtime.store import Obj
from tests.unit.jobset_factories import T0, make_jobset_obj, rjob

QUEUED = {"kueue.x-k8s.io/queue-name": "user-queue"}
EMPTY_LISTS = {"containers": [{"name": "m", "image": "b", "env": [], "volumeMounts": []}]}
STORED = {
    "type": kueue.CONDITION,
    "status": "True",
    "reason": "EmptyListsInPodTemplate",
    "message": "Kueue cannot admit this JobSet: ...",
    "lastTransitionTime": "2026-01-01T00:00:00Z",
}


def _jobset(pod_spec: Obj, conditions: list[Obj] | None = None) -> Any:
    raw = make_jobset_obj(
        replicated_jobs=[rjob("r", pod_spec=pod_spec)], suspend=True, conditions=conditions
    )
    raw["metadata"]["labels"] = dict(QUEUED)
    return model.parse(raw)


def _conditions(plan: Any) -> dict[str, Obj]:
    written = plan.status.to_dict() if plan.status is not None else {}
    return {c["type"]: c for c in written.get("conditions", [])}


def test_a_queued_jobset_with_empty_lists_gets_no_condition() -> None:
    plan = decide(_jobset(EMPTY_LISTS), [], None, T0)
    assert kueue.CONDITION not in _conditions(plan)
    assert not [e for e in plan.events if e.reason == "EmptyListsInPodTemplate"]


def test_a_condition_an_older_release_stored_is_cleared_once() -> None:
    plan = decide(_jobset(EMPTY_LISTS, conditions=[STORED]), [], None, T0)
    found = _conditions(plan)[kueue.CONDITION]
    assert (found["status"], found["reason"]) == ("False", kueue.REASON_COMPATIBLE)
    assert found["message"] == kueue.MESSAGE_COMPATIBLE
    # Stored False: the next pass leaves it as it is.
    again = decide(_jobset(EMPTY_LISTS, conditions=[found]), [], None, T0)
    assert again.status is None or _conditions(again)[kueue.CONDITION] == found
