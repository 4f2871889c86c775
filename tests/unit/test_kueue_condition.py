"""The KueueIncompatible condition (controller/jobset/kueue.py): a queued JobSet whose pod
templates hold empty lists, which Kueue's admission patch would leave out and the CRD refuses."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.jobset import kueue, model
from controller.jobset.decide import decide
from controller.runtime.store import Obj
from tests.unit.jobset_factories import T0, make_jobset_obj, rjob

QUEUED = {kueue.QUEUE_NAME_LABEL: "user-queue"}
BASE = "spec.replicatedJobs[{}].template.spec.template.spec"


def _jobset(labels: dict[str, str], *pod_specs: Obj, conditions: list[Obj] | None = None) -> Any:
    replicated = [rjob(f"r{i}", pod_spec=spec) for i, spec in enumerate(pod_specs)]
    raw = make_jobset_obj(replicated_jobs=replicated, suspend=True, conditions=conditions)
    raw["metadata"]["labels"] = dict(labels)
    return model.parse(raw)


@dataclass(frozen=True)
class Case:
    name: str
    labels: dict[str, str]
    pod_specs: tuple[Obj, ...]
    paths: list[str] = field(default_factory=list)


CASES = [
    Case(
        "no empty list",
        QUEUED,
        ({"containers": [{"name": "m", "image": "b", "env": [{"name": "A", "value": "1"}]}]},),
    ),
    Case(
        "a container's env",
        QUEUED,
        ({"containers": [{"name": "m", "image": "b", "env": []}]},),
        [BASE.format(0) + ".containers[0].env"],
    ),
    Case(
        "nested, in the second replicated job",
        QUEUED,
        (
            {},
            {
                "containers": [{"name": "m", "image": "b"}],
                "volumes": [{"name": "v", "projected": {"sources": []}}],
            },
        ),
        [BASE.format(1) + ".volumes[0].projected.sources"],
    ),
    Case("fields Kueue may change anyway", QUEUED, ({"tolerations": [], "schedulingGates": []},)),
    Case("not queued: Kueue never patches it", {}, ({"imagePullSecrets": []},)),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_empty_lists_kueue_would_drop(case: Case) -> None:
    jobset = _jobset(case.labels, *case.pod_specs)
    message = kueue.incompatibility(jobset)
    if not case.paths:
        assert message is None
        return
    assert message is not None
    for path in case.paths:
        assert path in message
    assert "create it again" in message


def test_many_places_are_counted_beyond_the_first_five() -> None:
    spec = {"containers": [{"name": f"c{i}", "image": "b", "args": []} for i in range(7)]}
    message = kueue.incompatibility(_jobset(QUEUED, spec))
    assert message is not None
    assert "containers[4].args" in message
    assert "containers[5].args" not in message
    assert "and 2 more" in message


def _conditions(plan: Any) -> dict[str, Obj]:
    written = plan.status.to_dict() if plan.status is not None else {}
    return {c["type"]: c for c in written.get("conditions", [])}


def test_decide_sets_the_condition_with_a_warning_event_once() -> None:
    spec = {"containers": [{"name": "m", "image": "b", "volumeMounts": []}]}
    plan = decide(_jobset(QUEUED, spec), [], None, T0)
    found = _conditions(plan)[kueue.CONDITION]
    assert (found["status"], found["reason"]) == ("True", kueue.REASON_EMPTY_LISTS)
    warnings = [e for e in plan.events if e.reason == kueue.REASON_EMPTY_LISTS]
    assert [e.type for e in warnings] == ["Warning"]
    # Stored: the next pass announces nothing again.
    again = decide(_jobset(QUEUED, spec, conditions=[found]), [], None, T0)
    assert not [e for e in again.events if e.reason == kueue.REASON_EMPTY_LISTS]


def test_decide_adds_no_condition_to_a_compatible_jobset() -> None:
    plan = decide(_jobset(QUEUED, {}), [], None, T0)
    assert kueue.CONDITION not in _conditions(plan)
    assert not [e for e in plan.events if e.reason in (kueue.REASON_EMPTY_LISTS,)]
