"""invalid: the SpecInvalid condition and Warning Event, written once per generation and message."""

from __future__ import annotations

from typing import Any

import pytest

from controller.jobset import invalid
from controller.jobset.status import Event
from controller.jobset.volumes.status import waits_for_volumes
from controller.runtime.store import Obj
from tests.unit.jobset_factories import T0, at

MESSAGE = "spec.failurePolicy.rules[0]: '(unclosed' is not a valid regular expression"
NOW = at(60)
S_T0 = "2025-01-01T12:00:00Z"
S_NOW = "2025-01-01T12:01:00Z"
EVENT = Event("Warning", "InvalidSpec", MESSAGE)


def _obj(generation: int = 2, status: Any = None) -> Obj:
    obj: Obj = {
        "metadata": {"name": "js", "namespace": "default", "generation": generation},
        "spec": {},
    }
    if status is not None:
        obj["status"] = status
    return obj


def _invalid(
    message: str = MESSAGE, generation: int = 2, time: str = S_T0, status: str = "True"
) -> Obj:
    return {
        "type": "SpecInvalid",
        "status": status,
        "lastTransitionTime": time,
        "reason": "InvalidSpec",
        "message": message,
        "observedGeneration": generation,
    }


SUSPENDED: Obj = {
    "type": "Suspended",
    "status": "True",
    "lastTransitionTime": S_T0,
    "reason": "SuspendedJobs",
    "message": "jobset is suspended",
}

ROWS = [
    pytest.param(_obj(), {"conditions": [_invalid(time=S_NOW)]}, id="no-status-yet"),
    # The rest of the status is kept, the condition appended.
    pytest.param(_obj(status={"restarts": 1, "conditions": [SUSPENDED]}),
                 {"restarts": 1, "conditions": [SUSPENDED, _invalid(time=S_NOW)]},
                 id="beside-other-conditions"),
    # Already reported for this generation: nothing to write (and no repeated Event).
    pytest.param(_obj(status={"conditions": [_invalid()]}), None, id="already-reported"),
    # Edited and still invalid: observedGeneration moves, the transition time stays.
    pytest.param(_obj(generation=3, status={"conditions": [_invalid()]}),
                 {"conditions": [_invalid(generation=3)]}, id="new-generation-still-invalid"),
    pytest.param(_obj(status={"conditions": [_invalid(message="older reason")]}),
                 {"conditions": [_invalid()]}, id="new-message"),
    pytest.param(_obj(status={"conditions": [_invalid(status="False")]}),
                 {"conditions": [_invalid(time=S_NOW)]}, id="was-false-transitions"),
    # Garbage in the stored list is not written back.
    pytest.param(_obj(status={"conditions": ["junk", SUSPENDED]}),
                 {"conditions": [SUSPENDED, _invalid(time=S_NOW)]}, id="non-object-dropped"),
    pytest.param({"metadata": {"name": "js"}}, {"conditions": [_invalid(generation=0,
                 time=S_NOW)]}, id="no-generation"),
]  # fmt: skip


@pytest.mark.parametrize(("obj", "status"), ROWS)
def test_report(obj: Obj, status: Obj | None) -> None:
    report = invalid.report(obj, MESSAGE, NOW)
    if status is None:
        assert report is None
    else:
        assert report == invalid.InvalidReport(status=status, event=EVENT)


def test_the_clock_is_the_callers() -> None:
    report = invalid.report(_obj(), MESSAGE, T0)
    assert report is not None
    assert report.status["conditions"][0]["lastTransitionTime"] == S_T0


@pytest.mark.parametrize("junk", [True, 3, "x", {"a": 1}])
def test_a_status_with_fields_of_the_wrong_type_is_read_as_empty(junk: Any) -> None:
    """Anyone allowed to write the status subresource can put anything there; found by the bad
    input fuzz (``conditions: true`` made parse raise TypeError; ``restarts: true`` counted 1)."""
    from controller.jobset import model
    from tests.unit.jobset_factories import make_jobset_obj
    from tests.unit.volumes.factories import mounting, tpl

    raw = make_jobset_obj(replicated_jobs=[mounting("workers", 1, ("d",))])
    raw["spec"]["volumeClaimPolicies"] = [{"templates": [tpl("d")]}]
    raw["status"] = {
        "conditions": junk,
        "replicatedJobsStatus": junk,
        "restarts": True,
        "restartsCountTowardsMax": True,
    }
    parsed = model.parse(raw)
    assert (parsed.status.restarts, parsed.status.restarts_count_towards_max) == (0, 0)
    assert parsed.status.conditions == () and parsed.status.replicated_jobs_status == ()
    assert waits_for_volumes(raw)
    found = invalid.report(_obj(status={"conditions": junk}), MESSAGE, NOW)
    assert found is not None
    assert [c["reason"] for c in found.status["conditions"]] == ["InvalidSpec"]


@pytest.mark.parametrize(
    ("restarts", "towards", "read"),
    [(0, 1, (1, 1)), (2, 5, (5, 5)), (3, 1, (3, 1)), (None, 2, (2, 2))],
)
def test_more_restarts_towards_max_than_restarts_raise_the_total(
    restarts: int | None, towards: int, read: tuple[int, int]
) -> None:
    """An edited status with restartsCountTowardsMax above restarts (found by the bad input fuzz:
    the plan kept it) is read with restarts raised to it: maxRestarts still counts them all."""
    from controller.jobset import model
    from tests.unit.jobset_factories import make_jobset_obj

    raw = make_jobset_obj()
    raw["status"] = {"restarts": restarts, "restartsCountTowardsMax": towards}
    parsed = model.parse(raw)
    assert (parsed.status.restarts, parsed.status.restarts_count_towards_max) == read


def test_conditions_without_a_type_or_with_a_repeated_one_are_no_conditions() -> None:
    """An edited status with conditions [{}, {}] (found by the bad input fuzz: the next status
    written carried both) is read as the typed conditions, the first of each type."""
    from controller.jobset import model
    from tests.unit.jobset_factories import make_jobset_obj

    first = {"type": "Suspended", "status": "True", "reason": "a"}
    raw = make_jobset_obj()
    raw["status"] = {
        "conditions": [{}, {"type": ""}, {"type": 3}, first, {}, {**first, "reason": "b"}]
    }
    (read,) = model.parse(raw).status.conditions
    assert (read.type, read.status, read.reason) == ("Suspended", "True", "a")
