"""The reconciler parses a JobSet (and builds its volume model) once per cached object: a pass
caused by a child's event reuses the parse of the object it already read; a new object (any watch
event of the JobSet) is parsed afresh, unless it only changes the status of the one before (the
echo of a status write), and decides exactly as a fresh parse would."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, cast

import pytest

from controller.jobset import reconciler as reconcilermod
from controller.jobset import volumes
from controller.jobset.children import views as job_views
from controller.jobset.decide import decide
from controller.jobset.model import InvalidJobSet, parse, with_new_status
from controller.jobset.reconciler import PARSED_KEPT, JobSetReconciler
from controller.jobset.volumes import spec as specmod
from controller.runtime.manager import Cache
from tests.support.counting import CallCounter
from tests.unit.jobset_factories import at, make_job
from tests.unit.volumes.factories import make_obj, tpl

KEY = "default/js"


def _reconciler() -> JobSetReconciler:
    # _parse and _model read no cache and write nothing: no client or informer is involved
    # (the Jobs' cache is one without informers: the reconciler registers a handler on it).
    none = cast(Any, None)
    return JobSetReconciler(none, none, none, Cache({}), none)


def _obj(version: str) -> dict[str, Any]:
    obj = make_obj([{"templates": [tpl("data")], "scope": "Job"}])
    obj["metadata"]["resourceVersion"] = version
    return obj


def test_the_same_object_is_parsed_once() -> None:
    reconciler, obj = _reconciler(), _obj("1")
    jobset = reconciler._parse(KEY, obj)
    model = reconciler._model(KEY, jobset)
    assert reconciler._parse(KEY, obj) is jobset
    assert reconciler._model(KEY, jobset) is model


def test_a_new_object_is_parsed_again_even_if_equal() -> None:
    reconciler, obj = _reconciler(), _obj("1")
    first = reconciler._parse(KEY, obj)
    first_model = reconciler._model(KEY, first)
    again = copy.deepcopy(obj)  # the cache replaces objects: equal content, a new object
    second = reconciler._parse(KEY, again)
    assert second is not first and second.raw is again
    assert reconciler._model(KEY, second) is not first_model


def test_forgetting_a_deleted_jobset_drops_its_parse() -> None:
    reconciler, obj = _reconciler(), _obj("1")
    reconciler._model(KEY, reconciler._parse(KEY, obj))
    reconciler._forget(KEY)
    parsed, models = reconciler.kept_parses()
    assert KEY not in parsed and KEY not in models


def test_an_invalid_jobset_raises_every_time_and_is_not_kept() -> None:
    reconciler, obj = _reconciler(), _obj("1")
    obj["spec"]["replicatedJobs"] = "not a list"
    for _ in range(2):
        with pytest.raises(InvalidJobSet):
            reconciler._parse(KEY, obj)
    assert KEY not in reconciler.kept_parses()[0]


@pytest.mark.parametrize("passes", [1, 3])
def test_decisions_from_a_reused_parse_equal_those_of_a_fresh_one(passes: int) -> None:
    reconciler, obj = _reconciler(), _obj("1")
    jobs = [make_job(parse(obj), "workers", 0)]
    for _ in range(passes):
        jobset = reconciler._parse(KEY, obj)
        model = reconciler._model(KEY, jobset)
        reused = decide(jobset, job_views(jobs), None, at(10), model=model)
    fresh_jobset = parse(copy.deepcopy(obj))
    fresh = decide(fresh_jobset, job_views(jobs), None, at(10), model=volumes.model(fresh_jobset))
    assert reused.create_jobs == fresh.create_jobs
    assert reused.status == fresh.status
    assert reused.volume == fresh.volume
    assert reused.writes == fresh.writes > 0


def test_only_the_jobsets_reconciled_last_are_kept() -> None:
    reconciler = _reconciler()
    objs = {f"default/js-{i}": _obj(str(i)) for i in range(PARSED_KEPT + 2)}
    keys = list(objs)
    for key in keys:
        reconciler._model(key, reconciler._parse(key, objs[key]))
        if key == keys[PARSED_KEPT - 1]:
            reconciler._parse(keys[0], objs[keys[0]])  # used again: kept
    parsed, models = reconciler.kept_parses()
    assert len(parsed) == len(models) == PARSED_KEPT
    assert keys[0] in parsed
    assert keys[1] not in parsed and keys[1] not in models
    assert keys[2] not in parsed
    first = reconciler._parse(keys[1], objs[keys[1]])  # parsed again, as any new object
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
    parses = CallCounter(monkeypatch, reconcilermod, "parse")
    reads = CallCounter(monkeypatch, specmod, "policies")
    reconciler, obj = _reconciler(), _obj("1")
    jobs = [make_job(parse(obj), "workers", 0)]
    for version in range(2, 12):
        jobset = reconciler._parse(KEY, obj)
        model = reconciler._model(KEY, jobset)
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
        obj = _echo(obj, version, **{**(reused.status or {}), "restarts": version % 3})
    assert parses.count == 1
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
    reconciler, obj = _reconciler(), _obj("1")
    reconciler._model(KEY, reconciler._parse(KEY, obj))
    echo = _echo(obj, 2, restarts=1)
    assert reconciler._parse(KEY, echo).status.restarts == 1  # no _model for it
    changed = _echo(echo, 3)
    change(changed)
    parses = CallCounter(monkeypatch, reconcilermod, "parse")
    reads = CallCounter(monkeypatch, specmod, "policies")
    jobset = reconciler._parse(KEY, changed)
    model = reconciler._model(KEY, jobset)
    assert (parses.count, reads.count) == (1, 1)
    assert jobset == parse(changed)
    assert with_new_status(parse(echo), changed) is None
    assert model.policies == volumes.model(parse(changed)).policies
