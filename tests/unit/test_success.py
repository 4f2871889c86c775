"""success: the success policy over replicated job counters."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.jobset import success
from controller.jobset.children import views as job_views
from controller.jobset.jobsetstatus import ReplicatedJobStatus
from controller.jobset.status import replicated_jobs_status
from tests.unit.jobset_factories import make_job, make_jobset, rjob, stored_counts

RJOBS = [rjob("driver", 1), rjob("workers", 3)]


def _js(operator: str | None = None, targets: list[str] | None = None, **kw: Any) -> Any:
    policy: dict[str, Any] | None = None
    if operator is not None or targets is not None:
        policy = {"operator": operator or "All"}
        if targets is not None:
            policy["targetReplicatedJobs"] = targets
    return make_jobset(replicated_jobs=kw.pop("replicated_jobs", RJOBS), success_policy=policy)


def _by(driver: int = 0, workers: int = 0) -> dict[str, ReplicatedJobStatus]:
    return {
        "driver": stored_counts({"succeeded": driver}),
        "workers": stored_counts({"succeeded": workers}),
    }


@pytest.mark.parametrize(
    ("operator", "targets", "statuses", "done"),
    [
        pytest.param(None, None, _by(), False, id="default-nothing"),
        pytest.param(None, None, _by(1, 2), False, id="default-all-short"),
        pytest.param(None, None, _by(1, 3), True, id="default-all-done"),
        pytest.param("All", [], _by(1, 3), True, id="all-empty-targets"),
        pytest.param("All", ["workers"], _by(0, 3), True, id="all-target-done"),
        pytest.param("All", ["workers"], _by(1, 2), False, id="all-target-short"),
        pytest.param("All", ["driver"], _by(1, 0), True, id="all-other-target"),
        pytest.param("All", ["driver", "workers"], _by(1, 2), False, id="all-two-targets-short"),
        pytest.param("Any", None, _by(), False, id="any-nothing"),
        pytest.param("Any", None, _by(0, 1), True, id="any-one"),
        pytest.param("Any", [], _by(1, 0), True, id="any-empty-targets"),
        pytest.param("Any", ["driver"], _by(0, 3), False, id="any-non-target-only"),
        pytest.param("Any", ["driver"], _by(1, 0), True, id="any-target"),
        pytest.param("All", None, {}, False, id="no-statuses"),
        pytest.param(
            "Any", None, {"workers": stored_counts({"succeeded": "1"})}, False, id="junk-counter"
        ),
        pytest.param("All", None, _by(1, 4), True, id="more-than-replicas"),
    ],
)
def test_evaluate(
    operator: str | None,
    targets: list[str] | None,
    statuses: dict[str, ReplicatedJobStatus],
    done: bool,
) -> None:
    assert success.evaluate(_js(operator, targets), statuses) is done


def test_zero_replica_targets_complete_on_any_success() -> None:
    # Upstream arithmetic: zero Jobs expected, and at least one Job succeeded somewhere.
    js = _js("All", ["idle"], replicated_jobs=[rjob("idle", 0), rjob("workers", 2)])
    assert success.jobs_needed(js) == 0
    assert not success.evaluate(js, {"workers": stored_counts({"succeeded": 0})})
    assert success.evaluate(js, {"workers": stored_counts({"succeeded": 1})})


def test_targets_and_needed() -> None:
    js = _js("All", ["workers"])
    assert success.targets(js) == ("workers",)
    assert success.jobs_needed(js) == 3
    assert success.targets(_js()) == ("driver", "workers")
    assert success.jobs_needed(_js()) == 4
    assert success.jobs_needed(_js("Any", ["workers"])) == 1


def test_from_real_jobs_ignores_other_attempts() -> None:
    js = make_jobset(replicated_jobs=RJOBS, restarts=1)
    jobs = [make_job(js, "driver", 0, complete=True)] + [
        make_job(js, "workers", i, complete=True) for i in range(3)
    ]
    by = {s.name: s for s in replicated_jobs_status(js, job_views(jobs))}
    assert success.evaluate(js, by)
    old = [make_job(js, "workers", i, complete=True, restart_attempt=0) for i in range(3)]
    by = {s.name: s for s in replicated_jobs_status(js, job_views([jobs[0], *old]))}
    assert not success.evaluate(js, by)


@given(
    replicas=st.lists(st.integers(1, 4), min_size=1, max_size=4),
    data=st.data(),
)
def test_all_implies_any(replicas: list[int], data: st.DataObject) -> None:
    names = [f"r{i}" for i in range(len(replicas))]
    rjobs = [rjob(n, r) for n, r in zip(names, replicas, strict=True)]
    targets = data.draw(st.lists(st.sampled_from(names), unique=True))
    statuses = {
        n: stored_counts({"succeeded": data.draw(st.integers(0, r))})
        for n, r in zip(names, replicas, strict=True)
    }
    all_js = _js("All", targets, replicated_jobs=rjobs)
    any_js = _js("Any", targets, replicated_jobs=rjobs)
    if success.evaluate(all_js, statuses):
        assert success.evaluate(any_js, statuses)
