"""The reconciler parses a JobSet (and builds its volume model) once per cached object
(``jobset.parses.Parses``): a pass
caused by a child's event reuses the parse of the object it already read; a new object (any watch
event of the JobSet) is parsed afresh, unless it only changes the status of the one before (the
echo of a status write), and decides exactly as a fresh parse would."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from controller.jobset import parses as parsesmod
from controller.jobset import volumes
from controller.jobset.children import views as job_views
from controller.jobset.decide import decide
from controller.jobset.model import InvalidJobSet, parse, with_new_status
from controller.jobset.parses import KEPT, Parses
from controller.jobset.volumes import spec as specmod
from tests.support.counting import CallCounter
from tests.unit.jobset_factories import at, make_job
from tests.unit.volumes.factories import make_obj, tpl

KEY = "default/js"


def _kept() -> Parses:
    return Parses()


def _obj(version: str) -> dict[str, Any]:
    obj = make_obj([{"templates": [tpl("data")], "scope": "Job"}])
    obj["metadata"]["resourceVersion"] = version
    return obj


def test_the_same_object_is_parsed_once() -> None:
    kept, obj = _kept(), _obj("1")
    jobset = kept.parse(KEY, obj)
    model = kept.model(KEY, jobset)
    assert kept.parse(KEY, obj) is jobset
    assert kept.model(KEY, jobset) is model


def test_a_new_object_is_parsed_again_even_if_equal() -> None:
    kept, obj = _kept(), _obj("1")
    first = kept.parse(KEY, obj)
    first_model = kept.model(KEY, first)
    again = copy.deepcopy(obj)  # the cache replaces objects: equal content, a new object
    second = kept.parse(KEY, again)
    assert second is not first and second.raw is again
    assert kept.model(KEY, second) is not first_model


def test_forgetting_a_deleted_jobset_drops_its_parse() -> None:
    kept, obj = _kept(), _obj("1")
    kept.model(KEY, kept.parse(KEY, obj))
    kept.forget(KEY)
    parsed, models = kept.kept_keys()
    assert KEY not in parsed and KEY not in models


def test_an_invalid_jobset_raises_every_time_and_is_not_kept() -> None:
    kept, obj = _kept(), _obj("1")
    obj["spec"]["replicatedJobs"] = "not a list"
    for _ in range(2):
        with pytest.raises(InvalidJobSet):
            kept.parse(KEY, obj)
    assert KEY not in kept.kept_keys()[0]


@pytest.mark.parametrize("passes", [1, 3])
def test_decisions_from_a_reused_parse_equal_those_of_a_fresh_one(passes: int) -> None:
    kept, obj = _kept(), _obj("1")
    jobs = [make_job(parse(obj), "workers", 0)]
    for _ in range(passes):
        jobset = kept.parse(KEY, obj)
        model = kept.model(KEY, jobset)
        reused = decide(jobset, job_views(jobs), None, at(10), model=model)
    fresh_jobset = parse(copy.deepcopy(obj))
    fresh = decide(fresh_jobset, job_views(jobs), None, at(10), model=volumes.model(fresh_jobset))
    assert reused.create_jobs == fresh.create_jobs
    assert reused.status == fresh.status
    assert reused.volume == fresh.volume
    assert reused.writes == fresh.writes > 0


def test_only_the_jobsets_reconciled_last_are_kept() -> None:
    kept = _kept()
    objs = {f"default/js-{i}": _obj(str(i)) for i in range(KEPT + 2)}
    keys = list(objs)
    for key in keys:
        kept.model(key, kept.parse(key, objs[key]))
        if key == keys[KEPT - 1]:
            kept.parse(keys[0], objs[keys[0]])  # used again: kept
    parsed, models = kept.kept_keys()
    assert len(parsed) == len(models) == KEPT
    assert keys[0] in parsed
    assert keys[1] not in parsed and keys[1] not in models
    assert keys[2] not in parsed
    first = kept.parse(keys[1], objs[keys[1]])  # parsed again, as any new object
    assert first.raw is objs[keys[1]]


# ----------------------------------------------------------------------------- status-only echoes


def _echo(obj: dict[str, Any], version: int, **status: Any) -> dict[str, Any]:
    """The object as a status write returns it: new status, new resourceVersion."""
    new = copy.deepcopy(obj)
    new["metadata"]["resourceVersion"] = str(version)
    new["status"] = {**(obj.get("status") or {}), **status}
    return new


def test_a_status_echo_is_not_parsed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """Most new JobSet objects a reconciler sees are the echoes of its own status writes: spec
    and metadata unchanged. Those are not parsed again and their volume models keep the policies
    read the first time (counted: one parse, one policies read for ten versions), and they
    decide exactly as fresh parses."""
    parse_calls = CallCounter(monkeypatch, parsesmod, "parse")
    reads = CallCounter(monkeypatch, specmod, "policies")
    kept, obj = _kept(), _obj("1")
    jobs = [make_job(parse(obj), "workers", 0)]
    for version in range(2, 12):
        jobset = kept.parse(KEY, obj)
        model = kept.model(KEY, jobset)
        reused = decide(jobset, job_views(jobs), None, at(10), model=model)
        fresh_jobset = parse(copy.deepcopy(obj))
        assert jobset == fresh_jobset
        fresh_model = volumes.model(fresh_jobset)
        fresh = decide(fresh_jobset, job_views(jobs), None, at(10), model=fresh_model)
        assert (reused.status, reused.volume, reused.create_jobs) == (
            fresh.status,
            fresh.volume,
            fresh.create_jobs,
        )
        assert (model.record, model.policies) == (fresh_model.record, fresh_model.policies)
        written = reused.status.to_dict() if reused.status is not None else {}
        obj = _echo(obj, version, **{**written, "restarts": version % 3})
    assert parse_calls.count == 1
    assert reads.count == 1 + 10  # ours once; the ten fresh models of the comparison


@pytest.mark.parametrize(
    "change",
    [
        lambda o: o["spec"]["replicatedJobs"][0].update(replicas=7),
        lambda o: o["metadata"].update(generation=2),
        lambda o: o["metadata"].setdefault("labels", {}).update(team="a"),
        lambda o: o["metadata"].update(finalizers=["x/y"]),
        lambda o: o["metadata"].update(deletionTimestamp="2026-01-01T00:00:00Z"),
        lambda o: o.update(extra={}),
    ],
)
def test_any_other_change_is_parsed_again(
    monkeypatch: pytest.MonkeyPatch, change: Callable[[dict[str, Any]], None]
) -> None:
    """Anything but the status and the resourceVersion changed: parsed (and policies read)
    again, even when a status-only echo was parsed before without its model being asked for."""
    kept, obj = _kept(), _obj("1")
    kept.model(KEY, kept.parse(KEY, obj))
    echo = _echo(obj, 2, restarts=1)
    assert kept.parse(KEY, echo).status.restarts == 1  # no model for it
    changed = _echo(echo, 3)
    change(changed)
    parse_calls = CallCounter(monkeypatch, parsesmod, "parse")
    reads = CallCounter(monkeypatch, specmod, "policies")
    jobset = kept.parse(KEY, changed)
    model = kept.model(KEY, jobset)
    assert (parse_calls.count, reads.count) == (1, 1)
    assert jobset == parse(changed)
    assert with_new_status(parse(echo), changed) is None
    assert model.policies == volumes.model(parse(changed)).policies
