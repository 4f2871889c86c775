"""The JobSet controller against a real API server; the test plays the Job controller.

As in upstream's integration tests there is no kube-controller-manager here: the test sets Job
status (ready, complete, failed) itself and checks what the JobSet controller does about it.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.jobset import api
from controller.jobset.placement import EXCLUSIVE_TOPOLOGY
from controller.runtime.client import EVENTS, SERVICES, KubeClient
from tests.helpers import Kube, wait_for
from tests.support.jobsets import (
    RunningController,
    assert_no_writes_at_steady_state,
    complete_job,
    condition,
    fail_job,
    get_jobset,
    jobs_of,
    jobset,
    ready_job,
    replicated_job,
    running_controller,
    settled,
    wait_condition,
    wait_jobs,
)


async def create(client: KubeClient, namespace: str, body: dict[str, Any]) -> None:
    await client.create(api.JOBSETS, body, namespace)


@pytest.mark.usefixtures("controller")
async def test_creates_jobs_and_service_then_completes(client: KubeClient, namespace: str) -> None:
    await create(client, namespace, jobset("js", replicated_job("a", 2), replicated_job("b", 1)))
    jobs = await wait_jobs(client, namespace, "js", 3)
    assert [j["metadata"]["name"] for j in jobs] == ["js-a-0", "js-a-1", "js-b-0"]
    service = await client.get(SERVICES, "js", namespace)
    assert service["spec"]["clusterIP"] == "None"
    for job in jobs:
        await complete_job(client, namespace, job)
    done = await wait_condition(client, namespace, "js", api.COMPLETED)
    assert done["status"]["terminalState"] == "Completed"
    assert condition(done, api.COMPLETED)["reason"] == "AllJobsCompleted"  # type: ignore[index]
    statuses = {s["name"]: s for s in done["status"]["replicatedJobsStatus"]}
    assert statuses["a"]["succeeded"] == 2 and statuses["b"]["succeeded"] == 1


async def test_success_policy_any_on_a_target(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    body = jobset(
        "any",
        replicated_job("leader", 1),
        replicated_job("workers", 3),
        successPolicy={"operator": "Any", "targetReplicatedJobs": ["workers"]},
    )
    await create(client, namespace, body)
    jobs = await wait_jobs(client, namespace, "any", 4)
    await complete_job(
        client, namespace, next(j for j in jobs if j["metadata"]["name"] == "any-leader-0")
    )
    await settled(controller, client)  # the completed leader was seen and reconciled
    assert condition(await get_jobset(client, namespace, "any"), api.COMPLETED) is None
    await complete_job(
        client, namespace, next(j for j in jobs if j["metadata"]["name"] == "any-workers-1")
    )
    await wait_condition(client, namespace, "any", api.COMPLETED)


@pytest.mark.usefixtures("controller")
async def test_counters_follow_the_jobs_deleted_after_the_jobset_finished(
    client: KubeClient, namespace: str
) -> None:
    """A finished JobSet's unfinished Jobs are deleted, and its replicatedJobsStatus counts them
    down, as upstream's does (it counts before it looks at the terminal state): the counters of
    the pass that completed it (two workers still active) do not stay for good."""
    body = jobset(
        "counted",
        replicated_job("workers", 3),
        successPolicy={"operator": "Any", "targetReplicatedJobs": ["workers"]},
    )
    await create(client, namespace, body)
    jobs = await wait_jobs(client, namespace, "counted", 3)
    for job in jobs[1:]:
        await ready_job(client, namespace, job)  # a pod each, running and ready
    await complete_job(client, namespace, jobs[0])
    await wait_condition(client, namespace, "counted", api.COMPLETED)

    def counted_down(obj: dict[str, Any]) -> bool:
        (workers,) = obj["status"]["replicatedJobsStatus"]
        return bool(workers["active"] == 0 and workers["succeeded"] == 1)

    await wait_for(
        lambda: get_jobset(client, namespace, "counted"),
        counted_down,
        "workers counted down to 0 active, 1 succeeded once the unfinished Jobs are deleted",
    )


@pytest.mark.usefixtures("controller")
async def test_no_failure_policy_fails_on_first_failed_job(
    client: KubeClient, namespace: str
) -> None:
    await create(client, namespace, jobset("fragile", replicated_job("a", 2)))
    jobs = await wait_jobs(client, namespace, "fragile", 2)
    await fail_job(client, namespace, jobs[0])
    failed = await wait_condition(client, namespace, "fragile", api.FAILED)
    assert failed["status"]["terminalState"] == "Failed"
    assert condition(failed, api.FAILED)["reason"] == "FailedJobs"  # type: ignore[index]


@pytest.mark.usefixtures("controller")
async def test_restart_recreates_jobs_with_next_attempt(client: KubeClient, namespace: str) -> None:
    body = jobset("again", replicated_job("a", 2), failurePolicy={"maxRestarts": 2})
    await create(client, namespace, body)
    first = await wait_jobs(client, namespace, "again", 2, attempt=0)
    await fail_job(client, namespace, first[1])
    second = await wait_jobs(client, namespace, "again", 2, attempt=1, gc=True)
    assert {j["metadata"]["uid"] for j in second}.isdisjoint({j["metadata"]["uid"] for j in first})
    js = await get_jobset(client, namespace, "again")
    assert js["status"]["restarts"] == 1
    assert js["status"]["restartsCountTowardsMax"] == 1
    for job in second:
        assert job["spec"]["template"]["metadata"]["labels"][api.RESTART_ATTEMPT] == "1"


@pytest.mark.usefixtures("controller")
async def test_max_restarts_exhausted_fails(client: KubeClient, namespace: str) -> None:
    await create(
        client,
        namespace,
        jobset("limited", replicated_job("a", 1), failurePolicy={"maxRestarts": 1}),
    )
    first = await wait_jobs(client, namespace, "limited", 1, attempt=0)
    await fail_job(client, namespace, first[0])
    second = await wait_jobs(client, namespace, "limited", 1, attempt=1, gc=True)
    await fail_job(client, namespace, second[0])
    failed = await wait_condition(client, namespace, "limited", api.FAILED)
    assert condition(failed, api.FAILED)["reason"] == "ReachedMaxRestarts"  # type: ignore[index]
    assert failed["status"]["restarts"] == 1


@pytest.mark.parametrize(
    ("action", "expect_failed", "expect_restarts", "expect_towards"),
    [
        ("FailJobSet", True, 0, 0),
        ("RestartJobSet", False, 1, 1),
        ("RestartJobSetAndIgnoreMaxRestarts", False, 1, 0),
    ],
)
@pytest.mark.usefixtures("controller")
async def test_failure_rule_actions(
    client: KubeClient,
    namespace: str,
    action: str,
    expect_failed: bool,
    expect_restarts: int,
    expect_towards: int,
) -> None:
    policy = {
        "maxRestarts": 3,
        "rules": [
            {"name": "other", "action": "FailJobSet", "onJobFailureReasons": ["DeadlineExceeded"]},
            {"name": "theRule", "action": action, "onJobFailureReasons": ["PodFailurePolicy"],
             "onJobFailureMessagePatterns": ["exit code 4[0-9]"]},
        ],
    }  # fmt: skip
    await create(client, namespace, jobset("ruled", replicated_job("a", 1), failurePolicy=policy))
    first = await wait_jobs(client, namespace, "ruled", 1, attempt=0)
    await fail_job(client, namespace, first[0], "PodFailurePolicy", "container main: exit code 42")
    if expect_failed:
        failed = await wait_condition(client, namespace, "ruled", api.FAILED)
        assert condition(failed, api.FAILED)["reason"] == "FailJobSetFailurePolicyAction"  # type: ignore[index]
        return
    await wait_jobs(client, namespace, "ruled", 1, attempt=1, gc=True)
    js = await get_jobset(client, namespace, "ruled")
    assert js["status"]["restarts"] == expect_restarts
    assert js["status"].get("restartsCountTowardsMax", 0) == expect_towards


@pytest.mark.usefixtures("controller")
async def test_suspend_and_resume(client: KubeClient, namespace: str) -> None:
    await create(client, namespace, jobset("sleepy", replicated_job("a", 2), suspend=True))
    jobs = await wait_jobs(client, namespace, "sleepy", 2)
    assert all(j["spec"]["suspend"] is True for j in jobs)
    await wait_condition(client, namespace, "sleepy", api.SUSPENDED)
    await client.patch(api.JOBSETS, "sleepy", {"spec": {"suspend": False}}, namespace)
    resumed = await wait_condition(client, namespace, "sleepy", api.SUSPENDED, status="False")
    assert condition(resumed, api.SUSPENDED)["reason"] == "ResumeJobs"  # type: ignore[index]

    async def suspended_flags() -> list[bool]:
        return [j["spec"]["suspend"] for j in await jobs_of(client, namespace, "sleepy")]

    await wait_for(suspended_flags, lambda flags: flags == [False, False], "child Jobs resumed")
    await client.patch(api.JOBSETS, "sleepy", {"spec": {"suspend": True}}, namespace)
    await wait_for(
        suspended_flags, lambda flags: flags == [True, True], "child Jobs suspended again"
    )


async def test_startup_in_order(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    body = jobset(
        "ordered",
        replicated_job("first", 1),
        replicated_job("second", 2),
        startupPolicy={"startupPolicyOrder": "InOrder"},
    )
    await create(client, namespace, body)
    first = await wait_jobs(client, namespace, "ordered", 1)
    await wait_condition(client, namespace, "ordered", api.STARTUP_POLICY_IN_PROGRESS)
    await settled(controller, client)
    assert len(await jobs_of(client, namespace, "ordered")) == 1
    await ready_job(client, namespace, first[0])
    second = await wait_jobs(client, namespace, "ordered", 3)
    for job in second[1:]:
        await ready_job(client, namespace, job)
    await wait_condition(client, namespace, "ordered", api.STARTUP_POLICY_COMPLETED)


@pytest.mark.parametrize("dependency", ["Ready", "Complete"])
async def test_depends_on(
    controller: RunningController, client: KubeClient, namespace: str, dependency: str
) -> None:
    body = jobset(
        "deps",
        replicated_job("init", 1),
        replicated_job("train", 2, dependsOn=[{"name": "init", "status": dependency}]),
    )
    await create(client, namespace, body)
    init = await wait_jobs(client, namespace, "deps", 1)
    await ready_job(client, namespace, init[0])
    if dependency == "Complete":
        await settled(controller, client)  # the ready init Job was seen and reconciled
        assert len(await jobs_of(client, namespace, "deps")) == 1, "Ready is not Complete"
        await complete_job(client, namespace, init[0])
    jobs = await wait_jobs(client, namespace, "deps", 3)
    assert [j["metadata"]["name"] for j in jobs] == ["deps-init-0", "deps-train-0", "deps-train-1"]


@pytest.mark.parametrize("met_last", ["data", "model"])
async def test_depends_on_two_replicated_jobs_waits_for_both(
    controller: RunningController, client: KubeClient, namespace: str, met_last: str
) -> None:
    """``train`` depends on ``data`` (Complete) and ``model`` (Ready): it is created only once
    both are met, whichever is met last (upstream: every dependsOn entry must be met)."""
    deps = [{"name": "data", "status": "Complete"}, {"name": "model", "status": "Ready"}]
    body = jobset(
        "two",
        replicated_job("data", 1),
        replicated_job("model", 2),
        replicated_job("train", 1, dependsOn=deps),
    )
    await create(client, namespace, body)
    jobs = {j["metadata"]["name"]: j for j in await wait_jobs(client, namespace, "two", 3)}
    assert sorted(jobs) == ["two-data-0", "two-model-0", "two-model-1"]

    if met_last == "data":
        # model is Ready (both Jobs ready); data runs on, so train waits.
        await ready_job(client, namespace, jobs["two-model-0"])
        await ready_job(client, namespace, jobs["two-model-1"])
    else:
        # data is Complete; one of model's two Jobs is ready, so train waits.
        await complete_job(client, namespace, jobs["two-data-0"])
        await ready_job(client, namespace, jobs["two-model-0"])
    await settled(controller, client)  # what the test changed was seen and reconciled
    assert len(await jobs_of(client, namespace, "two")) == 3, f"{met_last} is not met yet"
    if met_last == "data":
        await complete_job(client, namespace, jobs["two-data-0"])
    else:
        await ready_job(client, namespace, jobs["two-model-1"])
    after = await wait_jobs(client, namespace, "two", 4)
    assert [j["metadata"]["name"] for j in after][-1] == "two-train-0"


@pytest.mark.parametrize("replicated_jobs", ["absent", "empty"])
async def test_jobset_without_replicated_jobs(
    controller: RunningController, client: KubeClient, namespace: str, replicated_jobs: str
) -> None:
    """Accepted as upstream, and upstream's behaviour: the headless Service is created, no Job,
    and the JobSet never completes nor fails (success is decided only once a Job succeeded);
    it is not SpecInvalid, and reconciling it again writes nothing."""
    body = jobset("hollow")
    if replicated_jobs == "absent":
        del body["spec"]["replicatedJobs"]
    await create(client, namespace, body)
    service = await wait_for(
        lambda: client.get(SERVICES, "hollow", namespace), bool, "the headless Service"
    )
    assert service["spec"]["clusterIP"] == "None"
    await assert_no_writes_at_steady_state(controller, client)
    assert await jobs_of(client, namespace, "hollow") == []
    stored = await get_jobset(client, namespace, "hollow")
    status = stored.get("status") or {}
    assert "terminalState" not in status, status
    for kind in (api.COMPLETED, api.FAILED, api.SPEC_INVALID):
        assert condition(stored, kind) is None, status


@pytest.mark.usefixtures("controller")
async def test_ttl_after_finished_deletes_the_jobset(client: KubeClient, namespace: str) -> None:
    """The TTL delete is Foreground, as upstream: this tier has no garbage collector to finish
    it, so the JobSet stays marked (deletionTimestamp, finalizer foregroundDeletion).
    tests/e2e/test_jobset_e2e.py shows it gone after its Jobs."""
    await create(
        client, namespace, jobset("brief", replicated_job("a", 1), ttlSecondsAfterFinished=2)
    )
    jobs = await wait_jobs(client, namespace, "brief", 1)
    await complete_job(client, namespace, jobs[0])
    await wait_condition(client, namespace, "brief", api.COMPLETED)

    def marked(obj: dict[str, Any]) -> bool:
        meta = obj["metadata"]
        return bool(meta.get("deletionTimestamp")) and "foregroundDeletion" in (
            meta.get("finalizers") or []
        )

    await wait_for(
        lambda: get_jobset(client, namespace, "brief"),
        marked,
        "the JobSet to be deleted (Foreground) after its TTL",
        seconds=30,
    )


async def test_managed_by_another_controller_is_left_alone(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    await create(
        client, namespace, jobset("theirs", replicated_job("a", 1), managedBy="example.com/other")
    )
    await create(client, namespace, jobset("ours", replicated_job("a", 1)))
    await wait_jobs(client, namespace, "ours", 1)
    await settled(controller, client)  # both JobSets were seen and reconciled
    assert await jobs_of(client, namespace, "theirs") == []
    theirs = await get_jobset(client, namespace, "theirs")
    assert not theirs.get("status"), theirs["status"]
    assert not theirs["metadata"].get("finalizers"), theirs["metadata"]["finalizers"]


async def test_canary_serves_only_its_managed_by_value(
    kube: Kube, namespace: str, client: KubeClient
) -> None:
    """Started with --managed-by=example.com/canary (beside upstream JobSet), the controller runs
    the JobSets naming that value, and leaves upstream's: those with its reserved value and
    those without the field (which upstream takes as its own)."""
    canary = "example.com/canary"
    async with running_controller(kube, namespace, f"--managed-by={canary}") as running:
        await create(
            client,
            namespace,
            jobset("upstream-named", replicated_job("a", 1), managedBy=api.CONTROLLER_NAME),
        )
        await create(client, namespace, jobset("upstream-absent", replicated_job("a", 1)))
        await create(client, namespace, jobset("canary", replicated_job("a", 1), managedBy=canary))
        jobs = await wait_jobs(client, namespace, "canary", 1)
        await complete_job(client, namespace, jobs[0])
        done = await wait_condition(client, namespace, "canary", api.COMPLETED)
        assert done["status"]["terminalState"] == "Completed"
        await settled(running, client)  # all three JobSets were seen and reconciled
        for name in ("upstream-named", "upstream-absent"):
            assert await jobs_of(client, namespace, name) == []
            theirs = await get_jobset(client, namespace, name)
            assert not theirs.get("status"), theirs["status"]
            assert not theirs["metadata"].get("finalizers"), theirs["metadata"]["finalizers"]


@pytest.mark.usefixtures("controller")
async def test_invalid_regex_is_a_condition_and_event_not_a_crash(
    client: KubeClient, namespace: str
) -> None:
    policy = {
        "rules": [
            {"name": "bad", "action": "FailJobSet", "onJobFailureMessagePatterns": ["(unclosed"]}
        ]
    }
    await create(client, namespace, jobset("broken", replicated_job("a", 1), failurePolicy=policy))
    invalid = await wait_condition(client, namespace, "broken", api.SPEC_INVALID)
    assert "not a valid regular expression" in condition(invalid, api.SPEC_INVALID)["message"]  # type: ignore[index]
    assert await jobs_of(client, namespace, "broken") == []

    async def invalid_events() -> list[Any]:
        listed = (await client.list(EVENTS, namespace))["items"]
        return [
            e
            for e in listed
            if e["involvedObject"].get("name") == "broken"
            and e.get("reason") == api.REASON_SPEC_INVALID
        ]

    # The Warning Event follows the stored condition (one Event, not one per retry).
    events = await wait_for(invalid_events, bool, "the SpecInvalid Event")
    # A repeat would show as a series (events.k8s.io writers leave the core/v1 count unset).
    assert [(e["type"], e.get("series")) for e in events] == [("Warning", None)], events
    assert "not a valid regular expression" in events[0]["message"]
    # The controller keeps serving other JobSets.
    await create(client, namespace, jobset("fine", replicated_job("a", 1)))
    await wait_jobs(client, namespace, "fine", 1)


async def test_a_running_jobset_made_spec_invalid_is_left_alone_until_fixed(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """An exclusive-placement annotation that is no label key, added while the JobSet runs
    (upstream would run on, its API server refusing the Jobs made afterwards): SpecInvalid, and
    the controller acts on nothing of the JobSet, not even its Job's completion, until the
    annotation is fixed."""
    await create(client, namespace, jobset("frozen", replicated_job("a", 1)))
    (job,) = await wait_jobs(client, namespace, "frozen", 1)
    bad = {"metadata": {"annotations": {EXCLUSIVE_TOPOLOGY: "not a label key"}}}
    await client.patch(api.JOBSETS, "frozen", bad, namespace)
    await wait_condition(client, namespace, "frozen", api.SPEC_INVALID)
    await complete_job(client, namespace, job)
    await settled(controller, client)  # the completed Job was seen and reconciled
    held = await get_jobset(client, namespace, "frozen")
    assert condition(held, api.COMPLETED) is None, held["status"]
    assert [j["metadata"]["name"] for j in await jobs_of(client, namespace, "frozen")] == [
        "frozen-a-0"
    ]
    fixed = {"metadata": {"annotations": {EXCLUSIVE_TOPOLOGY: None}}}
    await client.patch(api.JOBSETS, "frozen", fixed, namespace)
    await wait_condition(client, namespace, "frozen", api.COMPLETED)
    await wait_condition(client, namespace, "frozen", api.SPEC_INVALID, status="False")


async def test_zero_writes_at_steady_state(kube: Kube, namespace: str, client: KubeClient) -> None:
    async with running_controller(kube, namespace) as running:
        body = jobset(
            "steady",
            replicated_job("a", 2),
            replicated_job("b", 1),
            failurePolicy={"maxRestarts": 1},
        )
        await create(client, namespace, body)
        jobs = await wait_jobs(client, namespace, "steady", 3)
        await ready_job(client, namespace, jobs[0])
        await complete_job(client, namespace, jobs[2])

        await assert_no_writes_at_steady_state(running, client)


async def test_a_service_upstream_made_is_adopted_not_created_on_every_pass(
    kube: Kube, namespace: str, client: KubeClient
) -> None:
    """Upstream JobSet's headless Service has no labels, so the controller's cache (which selects
    by the JobSet name label) never showed it: every pass of a JobSet migrated from upstream
    planned the Service again and got 409. The Service's controller reference proves it is the
    JobSet's: the controller labels it, and at steady state writes nothing. Another's Service of
    that name is reported, never taken."""
    await create(client, namespace, jobset("migrated", replicated_job("a", 1)))
    stored = await get_jobset(client, namespace, "migrated")
    owner = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "name": "migrated",
        "uid": stored["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    spec = {"clusterIP": "None", "selector": {api.JOBSET_NAME: "migrated"}}
    upstreams = {"metadata": {"name": "migrated", "ownerReferences": [owner]}, "spec": spec}
    made = await client.create(SERVICES, upstreams, namespace)
    await create(client, namespace, jobset("taken", replicated_job("a", 1)))
    await client.create(SERVICES, {"metadata": {"name": "taken"}, "spec": spec}, namespace)
    async with running_controller(kube, namespace) as running:
        await wait_jobs(client, namespace, "migrated", 1)
        labelled = await wait_for(
            lambda: client.get(SERVICES, "migrated", namespace),
            lambda svc: (svc["metadata"].get("labels") or {}).get(api.JOBSET_NAME) == "migrated",
            "upstream's Service labelled as the JobSet's",
        )
        assert labelled["metadata"]["uid"] == made["metadata"]["uid"]  # the same object
        held = await wait_condition(client, namespace, "taken", "ChildWriteFailed")
        message = str(condition(held, "ChildWriteFailed")["message"])  # type: ignore[index]
        assert "Service of this name exists and is not this JobSet's (no owner)" in message
        assert "jobset.sigs.k8s.io/jobset-name" not in str(
            (await client.get(SERVICES, "taken", namespace))["metadata"].get("labels")
        )
        await wait_jobs(client, namespace, "taken", 1)  # its Jobs are created all the same
        await client.delete(api.JOBSETS, "taken", namespace)
        await assert_no_writes_at_steady_state(running, client)


@pytest.mark.parametrize(
    ("failure_reason", "restarting_reason"),
    [
        pytest.param("PodFailurePolicy", "FailurePolicy_Rule1", id="rule"),
        pytest.param("BackoffLimitExceeded", "DefaultFailurePolicy", id="default"),
    ],
)
async def test_restarting_condition_transitions(
    controller: RunningController,
    client: KubeClient,
    namespace: str,
    failure_reason: str,
    restarting_reason: str,
) -> None:
    """Upstream's "jobset restarting condition transitions": a restart sets RestartingJobSet=True
    (named after the rule that matched, or the default reason), and the new attempt's Jobs all
    being ready sets it False (JobsReady); each transition has its Event."""
    policy = {
        "maxRestarts": 1,
        "rules": [
            {
                "name": "Rule1",
                "action": "RestartJobSet",
                "onJobFailureReasons": ["PodFailurePolicy"],
            }
        ],
    }
    await create(client, namespace, jobset("phoenix", replicated_job("a", 2), failurePolicy=policy))
    first = await wait_jobs(client, namespace, "phoenix", 2, attempt=0)
    await fail_job(client, namespace, first[0], failure_reason, "pod failed")
    restarting = await wait_condition(client, namespace, "phoenix", api.RESTARTING)
    found = condition(restarting, api.RESTARTING)
    assert found is not None
    assert (found["reason"], found["message"]) == (
        restarting_reason,
        "applying RestartJobSet failure policy action (first failed job: phoenix-a-0)",
    )
    assert condition(restarting, api.FAILED) is None

    second = await wait_jobs(client, namespace, "phoenix", 2, attempt=1, gc=True)
    await ready_job(client, namespace, second[0])
    await settled(controller, client)  # one of two Jobs ready: the restart goes on
    found = condition(await get_jobset(client, namespace, "phoenix"), api.RESTARTING)
    assert found is not None and (found["status"], found["reason"]) == ("True", restarting_reason)

    await ready_job(client, namespace, second[1])
    ready = await wait_condition(client, namespace, "phoenix", api.RESTARTING, status="False")
    found = condition(ready, api.RESTARTING)
    assert found is not None
    assert (found["reason"], found["message"]) == ("JobsReady", "all jobs are ready")
    assert ready["status"]["restarts"] == 1

    async def restarting_events() -> list[tuple[str, str]]:
        listed = (await client.list(EVENTS, namespace))["items"]
        return sorted(
            (e["type"], e["reason"])
            for e in listed
            if e["involvedObject"].get("name") == "phoenix"
            and e.get("reason") in (restarting_reason, "JobsReady")
        )

    expected = sorted([("Warning", restarting_reason), ("Normal", "JobsReady")])
    await wait_for(restarting_events, lambda got: got == expected, "the restart's two Events")
    # Written once: a pass at steady state leaves the condition (and everything else) alone.
    await assert_no_writes_at_steady_state(controller, client)
