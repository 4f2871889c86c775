"""The parser runs the API server's checks of a create (``model.parse`` with
``controller.api.validation``): what the CRD and the admission policy refuse, the parser refuses,
in the API server's words, and ``decide`` never plans from a spec admission would refuse.

Issue 48's drift: replicated jobs ``Worker`` and ``worker`` parsed (the parser compared names
with their case), and ``decide`` planned two creates of ``js-worker-0``, while the rule's
predicate (replicated-job-names-unique) refuses them."""

from __future__ import annotations

from typing import Any

import pytest

from controller import features
from controller.jobset import api
from controller.jobset.decide import decide
from controller.jobset.model import InvalidJobSet, parse
from tests.unit.jobset_factories import T0, make_jobset_obj, rjob
from tests.unit.volumes.factories import mounting, tpl

Obj = dict[str, Any]
UNIQUE = (
    "spec.replicatedJobs: replicatedJob names must be unique, also when compared without case "
    "(child Job names use the lower-case form): "
)


def _with(spec: Obj, replicated_jobs: list[Obj] | None = None) -> Obj:
    return make_jobset_obj(replicated_jobs=replicated_jobs, spec=spec)


REFUSED: list[tuple[str, Obj, str]] = [
    (
        "names-equal-without-case",
        _with({}, [rjob("Worker"), rjob("worker")]),
        UNIQUE + "Worker",
    ),
    ("names-equal", _with({}, [rjob("worker"), rjob("worker")]), 'Duplicate value: {"name":'),
    (
        "success-target-unknown",
        _with({"successPolicy": {"operator": "All", "targetReplicatedJobs": ["ghost"]}}),
        "spec.successPolicy.targetReplicatedJobs: successPolicy.targetReplicatedJobs must name "
        "replicated jobs of this JobSet: ghost",
    ),
    (
        "child-jobs-bounded",
        _with({}, [rjob("a", 6000), rjob("b", 6000)]),
        "the replicas of all replicated jobs must add up to at most 10000 child Jobs",
    ),
    (
        "depends-on-first",
        _with({}, [rjob("a", depends_on=[("b", "Ready")]), rjob("b")]),
        "the first replicated job cannot have dependsOn: nothing starts before it: a",
    ),
    (
        "coordinator-job-index",
        _with({"coordinator": {"replicatedJob": "leader", "jobIndex": 3}}),
        "coordinator.jobIndex must be less than the replicas of the coordinator's replicated job",
    ),
    (
        "managed-by-format",
        _with({"managedBy": "nope"}),
        "spec.managedBy: spec.managedBy must be a domain-prefixed path (e.g. example.com/name) of "
        "at most 63 characters: nope",
    ),
    (
        "template-names-unique",
        _with(
            {
                "volumeClaimPolicies": [{"templates": [tpl("data")]}],
                "volumePolicy": {"volumeClaimTemplates": [tpl("data")]},
            },
            [mounting("workers", 1, ("data",))],
        ),
        "spec: volume claim template names must be unique across volumeClaimPolicies and "
        "volumePolicy: data",
    ),
    (
        "restart-job-gated",
        _with({"failurePolicy": {"rules": [{"action": api.RESTART_JOB}]}}),
        api.MESSAGE_RESTART_JOB_GATED,
    ),
    (
        "metadata-name-required",
        {**_with({}), "metadata": {"namespace": "default", "uid": "u"}},
        "metadata.name: Required value: name or generateName is required",
    ),
]


@pytest.mark.parametrize(("obj", "message"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_the_parser_refuses_what_the_api_server_refuses(obj: Obj, message: str) -> None:
    with pytest.raises(InvalidJobSet) as refused:
        parse(obj)
    assert message in str(refused.value)


def test_the_status_is_not_judged() -> None:
    """A create drops the status: what the controller (or anyone) wrote there does not make
    the spec invalid."""
    obj = _with({})
    obj["status"] = {"restarts": "many", "conditions": True}
    assert parse(obj).status.restarts == 0


def test_the_controllers_gates_choose_the_rules() -> None:
    obj = _with({"failurePolicy": {"rules": [{"action": api.RESTART_JOB}]}})
    assert parse(obj, features.ALPHA).failure_policy is not None
    with pytest.raises(InvalidJobSet):
        parse(obj, features.DEFAULT)


@pytest.mark.parametrize(
    "names",
    [("Worker", "worker"), ("a", "A", "b"), ("Leader", "workers"), ("x-1", "X-1"), ("w", "v")],
)
def test_decide_never_plans_two_creates_of_one_job_name(names: tuple[str, ...]) -> None:
    """Either the parser refuses the JobSet, or every Job it plans has a name of its own."""
    obj = _with({}, [rjob(n, 2) for n in names])
    try:
        jobset = parse(obj)
    except InvalidJobSet as refused:
        assert str(refused).startswith(UNIQUE)
        assert len({n.lower() for n in names}) < len(names)
        return
    created = [j["metadata"]["name"] for j in decide(jobset, [], None, T0).create_jobs]
    assert len(created) == len(set(created)) == 2 * len(names)
