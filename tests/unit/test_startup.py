"""startup: InOrder startup policy and dependsOn gating."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.jobset import api, startup
from controller.jobset.children import views as job_views
from controller.jobset.jobsetstatus import Condition, ReplicatedJobStatus
from controller.jobset.model import DependsOn, InvalidJobSet
from tests.unit.jobset_factories import make_job, make_jobset, rjob, stored_counts

IN_PROGRESS = Condition(
    api.STARTUP_POLICY_IN_PROGRESS,
    "True",
    api.REASON_IN_ORDER_IN_PROGRESS,
    api.MESSAGE_IN_ORDER_IN_PROGRESS,
)
COMPLETED = Condition(
    api.STARTUP_POLICY_COMPLETED,
    "True",
    api.REASON_IN_ORDER_COMPLETED,
    api.MESSAGE_IN_ORDER_COMPLETED,
)

THREE = [rjob("a", 1), rjob("b", 2), rjob("c", 1)]


def _s(ready: int = 0, succeeded: int = 0, failed: int = 0) -> ReplicatedJobStatus:
    return stored_counts({"ready": ready, "succeeded": succeeded, "failed": failed})


def test_no_policy_all_allowed() -> None:
    js = make_jobset(replicated_jobs=THREE)
    d = startup.allowed_replicated_jobs(js, {})
    assert d == startup.StartupDecision(("a", "b", "c"), (), None)


@pytest.mark.parametrize(
    ("statuses", "allowed", "condition"),
    [
        pytest.param({}, ("a",), IN_PROGRESS, id="nothing-started"),
        pytest.param({"a": _s(ready=1)}, ("a", "b"), IN_PROGRESS, id="a-ready"),
        pytest.param({"a": _s(succeeded=1)}, ("a", "b"), IN_PROGRESS, id="a-succeeded"),
        pytest.param({"a": _s(failed=1)}, ("a", "b"), IN_PROGRESS, id="a-failed-counts-started"),
        pytest.param(
            {"a": _s(ready=1), "b": _s(ready=1)}, ("a", "b"), IN_PROGRESS, id="b-half-ready"
        ),
        pytest.param(
            {"a": _s(ready=1), "b": _s(ready=1, succeeded=1)},
            ("a", "b", "c"),
            IN_PROGRESS,
            id="b-started",
        ),
        pytest.param(
            {"a": _s(ready=1), "b": _s(ready=2), "c": _s(ready=1)},
            ("a", "b", "c"),
            COMPLETED,
            id="all-started",
        ),
        pytest.param(
            {"a": _s(), "b": _s(ready=2), "c": _s(ready=1)},
            ("a",),
            IN_PROGRESS,
            id="regression-blocks-later-creation",
        ),
        # Upstream compares with ==: more Jobs counted than replicas (while replicas is lowered)
        # would block b there.
        pytest.param({"a": _s(ready=2)}, ("a", "b"), IN_PROGRESS, id="a-counted-over-replicas"),
        pytest.param(
            {"a": stored_counts({"ready": "1"})},
            ("a",),
            IN_PROGRESS,
            id="junk-counter",
        ),
    ],
)
def test_in_order(
    statuses: dict[str, ReplicatedJobStatus],
    allowed: tuple[str, ...],
    condition: Condition,
) -> None:
    js = make_jobset(replicated_jobs=THREE, startup_in_order=True)
    d = startup.allowed_replicated_jobs(js, statuses)
    assert d.allowed == allowed
    assert d.waiting == tuple(n for n in ("a", "b", "c") if n not in allowed)
    assert d.in_order_condition == condition


def test_in_order_suspended_allows_all_and_reports_nothing() -> None:
    js = make_jobset(replicated_jobs=THREE, startup_in_order=True, suspend=True)
    d = startup.allowed_replicated_jobs(js, {})
    assert d == startup.StartupDecision(("a", "b", "c"), (), None)


def test_in_order_zero_replicas_is_started() -> None:
    js = make_jobset(replicated_jobs=[rjob("a", 0), rjob("b")], startup_in_order=True)
    d = startup.allowed_replicated_jobs(js, {})
    assert d.allowed == ("a", "b")
    assert d.in_order_condition == IN_PROGRESS


def test_existing_jobs_stay_allowed_after_regression() -> None:
    js = make_jobset(replicated_jobs=THREE, startup_in_order=True)
    jobs = [make_job(js, "c", 0, active=1)]
    d = startup.allowed_replicated_jobs(js, {"a": _s()}, job_views(jobs))
    assert d.allowed == ("a", "c")
    assert d.waiting == ("b",)
    # Jobs of an older attempt do not count.
    js1 = make_jobset(replicated_jobs=THREE, startup_in_order=True, restarts=1)
    old = [make_job(js1, "c", 0, active=1, restart_attempt=0)]
    assert startup.allowed_replicated_jobs(js1, {}, job_views(old)).allowed == ("a",)


DEP = [
    rjob("init", 2),
    rjob("ready-dep", 1, depends_on=[("init", "Ready")]),
    rjob("done-dep", 1, depends_on=[("init", "Complete")]),
    rjob("free", 1),
]


@pytest.mark.parametrize(
    ("init", "allowed"),
    [
        pytest.param(_s(), ("init", "free"), id="nothing"),
        pytest.param(_s(ready=1), ("init", "free"), id="half-ready"),
        pytest.param(_s(ready=2), ("init", "ready-dep", "free"), id="ready"),
        pytest.param(_s(ready=1, succeeded=1), ("init", "ready-dep", "free"), id="ready-mixed"),
        pytest.param(_s(ready=1, failed=1), ("init", "ready-dep", "free"), id="failed-counts"),
        pytest.param(_s(succeeded=1), ("init", "free"), id="half-complete"),
        pytest.param(_s(succeeded=2), ("init", "ready-dep", "done-dep", "free"), id="complete"),
        pytest.param(_s(succeeded=3), ("init", "ready-dep", "done-dep", "free"), id="over"),
    ],
)
def test_depends_on(init: ReplicatedJobStatus, allowed: tuple[str, ...]) -> None:
    js = make_jobset(replicated_jobs=DEP)
    d = startup.allowed_replicated_jobs(js, {"init": init})
    assert d.allowed == allowed
    assert d.in_order_condition is None


def test_depends_on_holds_while_suspended() -> None:
    js = make_jobset(replicated_jobs=DEP, suspend=True)
    assert startup.allowed_replicated_jobs(js, {}).allowed == ("init", "free")


def test_depends_on_missing_status_or_unknown_name() -> None:
    unknown = [rjob("a"), rjob("b", depends_on=[("ghost", "Ready")])]
    with pytest.raises(InvalidJobSet, match=r"listed before this one: b depends on ghost$"):
        make_jobset(replicated_jobs=unknown)  # depends-on-earlier, as admission refuses it
    # Built without the parser, such a JobSet still never starts what depends on no one.
    js = make_jobset(replicated_jobs=[rjob("a"), rjob("b", depends_on=[("a", "Ready")])])
    b = replace(js.replicated_jobs[1], depends_on=(DependsOn("ghost", "Ready"),))
    unchecked = replace(js, replicated_jobs=(js.replicated_jobs[0], b))
    assert startup.allowed_replicated_jobs(unchecked, {"ghost": _s(ready=9)}).allowed == ("a",)
    assert startup.allowed_replicated_jobs(js, {}).allowed == ("a",)


def test_depends_on_every_dependency() -> None:
    js = make_jobset(
        replicated_jobs=[
            rjob("x"),
            rjob("y"),
            rjob("z", depends_on=[("x", "Ready"), ("y", "Complete")]),
        ]
    )
    assert startup.allowed_replicated_jobs(js, {"x": _s(ready=1)}).allowed == ("x", "y")
    both = {"x": _s(ready=1), "y": _s(succeeded=1)}
    assert startup.allowed_replicated_jobs(js, both).allowed == ("x", "y", "z")


# "last" depends on five earlier replicated jobs (upstream's maximum), with both statuses.
FIVE = [
    rjob("r1", 2),
    rjob("r2"),
    rjob("c1", 2),
    rjob("c2"),
    rjob("c3"),
    rjob(
        "last",
        depends_on=[
            ("r1", "Ready"),
            ("r2", "Ready"),
            ("c1", "Complete"),
            ("c2", "Complete"),
            ("c3", "Complete"),
        ],
    ),
]
FIVE_MET = {
    "r1": _s(ready=1, failed=1),
    "r2": _s(succeeded=1),
    "c1": _s(succeeded=2),
    "c2": _s(succeeded=1),
    "c3": _s(succeeded=1),
}


@pytest.mark.parametrize(
    ("changes", "met"),
    [
        pytest.param({}, True, id="all-five-met"),
        pytest.param({"r1": _s(ready=1)}, False, id="one-ready-dep-short"),
        pytest.param({"r2": None}, False, id="ready-dep-without-status"),
        pytest.param({"c1": _s(succeeded=1, ready=1)}, False, id="complete-dep-ready-not-done"),
        pytest.param({"c3": _s(failed=1)}, False, id="last-complete-dep-failed"),
        pytest.param({"c2": _s(), "c3": _s()}, False, id="two-short"),
        pytest.param({"r1": _s(succeeded=2)}, True, id="ready-dep-met-by-completion"),
    ],
)
def test_depends_on_all_of_five(changes: dict[str, ReplicatedJobStatus | None], met: bool) -> None:
    """Every entry must be met (upstream: each entry is checked, the first unmet one blocks)."""
    js = make_jobset(replicated_jobs=FIVE)
    statuses = {k: v for k, v in (FIVE_MET | changes).items() if v is not None}
    d = startup.allowed_replicated_jobs(js, statuses)
    deps = ("r1", "r2", "c1", "c2", "c3")
    assert d.allowed == ((*deps, "last") if met else deps)
    assert d.waiting == (() if met else ("last",))


def test_no_replicated_jobs() -> None:
    """Upstream accepts a JobSet without replicated jobs: nothing to create; InOrder is complete."""
    assert startup.allowed_replicated_jobs(make_jobset(replicated_jobs=[]), {}) == (
        startup.StartupDecision((), (), None)
    )
    in_order = make_jobset(replicated_jobs=[], startup_in_order=True)
    assert startup.allowed_replicated_jobs(in_order, {}).in_order_condition == COMPLETED


def test_depends_on_regression_keeps_existing() -> None:
    js = make_jobset(replicated_jobs=DEP)
    jobs = [make_job(js, "done-dep", 0, active=1)]
    d = startup.allowed_replicated_jobs(js, {"init": _s()}, job_views(jobs))
    assert d.allowed == ("init", "done-dep", "free")
    assert d.waiting == ("ready-dep",)


def test_in_order_with_depends_on_skips_unmet_like_upstream() -> None:
    # Mutually exclusive at admission and in the parser (startup-policy-or-depends-on); if they
    # meet (a JobSet built without the parser), an unmet dependency is skipped, not blocking.
    rjobs = [rjob("a"), rjob("b", depends_on=[("a", "Complete")]), rjob("c")]
    with pytest.raises(InvalidJobSet, match="startupPolicy InOrder and dependsOn cannot be"):
        make_jobset(replicated_jobs=rjobs, startup_in_order=True)
    js = replace(make_jobset(replicated_jobs=rjobs), startup_in_order=True)
    d = startup.allowed_replicated_jobs(js, {"a": _s(ready=1)})
    assert d.allowed == ("a", "c")
    assert d.in_order_condition == IN_PROGRESS
    d = startup.allowed_replicated_jobs(js, {"a": _s(ready=1), "c": _s(ready=1)})
    assert d.in_order_condition == COMPLETED


def test_helpers() -> None:
    js = make_jobset(replicated_jobs=THREE)
    b = js.replicated_jobs[1]
    assert startup.started_count(None) == 0
    assert startup.started_count(_s(1, 2, 3)) == 6
    assert startup.all_started(b, _s(ready=2))
    assert not startup.all_started(b, None)
    assert startup.dependencies_met(js, b, {})


@given(
    ready=st.lists(st.integers(0, 3), min_size=3, max_size=3),
    in_order=st.booleans(),
)
def test_allowed_is_a_spec_order_prefix_partition(ready: list[int], in_order: bool) -> None:
    js = make_jobset(
        replicated_jobs=[rjob("a", 2), rjob("b", 2), rjob("c", 2)], startup_in_order=in_order
    )
    statuses = {n: _s(ready=r) for n, r in zip("abc", ready, strict=True)}
    d = startup.allowed_replicated_jobs(js, statuses)
    assert sorted(d.allowed + d.waiting) == ["a", "b", "c"]
    assert d.allowed == ("a", "b", "c")[: len(d.allowed)]  # InOrder without jobs: a prefix
    assert d.allowed  # the first replicated job is always allowed
    if in_order:
        expected = COMPLETED if all(r >= 2 for r in ready) else IN_PROGRESS
        assert d.in_order_condition == expected
