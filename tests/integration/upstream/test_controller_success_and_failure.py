"""Ports of upstream JobSet's controller scenarios on creation, success and failure policies and
restart strategies (upstream's test/integration/controller/jobset_controller_test.go).

Every scenario starts from upstream's JobSet of that file, ``test-js``: ``replicated-job-a`` (1
Job) and ``replicated-job-b`` (3 Indexed Jobs), success policy All over every replicated job,
DNS hostnames on. As upstream, nothing runs the Jobs: the test writes their status (ready,
complete, failed) and plays the garbage collector by removing the ``foregroundDeletion``
finalizer of Jobs the controller deleted. Where upstream checks that the JobSet stays active for
a while, these tests wait until the controller has processed everything (``settled``) and then
check that it is neither failed, completed nor suspended.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controller.jobset import api
from controller.runtime.client import EVENTS, JOBS, SERVICES, ApiError, KubeClient
from tests.helpers import wait_for
from tests.integration.upstream.scenarios import scenario
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
    settled,
    wait_condition,
    wait_jobs,
)

Obj = dict[str, Any]

NAME = "test-js"
A = "replicated-job-a"
B = "replicated-job-b"
JOBS_PER_ATTEMPT = 4  # 1 of replicated-job-a, 3 of replicated-job-b
FOREGROUND = "foregroundDeletion"

# Job failure reasons of the Job controller (batch/v1) that upstream's rules name.
POD_FAILURE_POLICY = "PodFailurePolicy"
BACKOFF_LIMIT_EXCEEDED = "BackoffLimitExceeded"
FAILED_INDEXES = "FailedIndexes"
MAX_FAILED_INDEXES_EXCEEDED = "MaxFailedIndexesExceeded"


def upstream_jobset(**spec: Any) -> Obj:
    """Upstream's ``test-js``; ``spec`` adds or overrides JobSet spec fields."""
    pod = {
        "spec": {
            "restartPolicy": "Never",
            "containers": [{"name": "test-container", "image": "busybox:latest"}],
        }
    }
    a = {"name": A, "replicas": 1, "template": {"spec": {"template": pod}}}
    b = {
        "name": B,
        "replicas": 3,
        "template": {"spec": {"completionMode": "Indexed", "template": pod}},
    }
    fields: Obj = {
        "successPolicy": {"operator": "All", "targetReplicatedJobs": []},
        "network": {"enableDNSHostnames": True},
        **spec,
    }
    return jobset(NAME, a, b, **fields)


async def create(client: KubeClient, namespace: str, **spec: Any) -> list[Obj]:
    """Create ``test-js`` and return its Jobs once all four exist (sorted by name)."""
    await client.create(api.JOBSETS, upstream_jobset(**spec), namespace)
    return await attempt_jobs(client, namespace, 0)


async def attempt_jobs(client: KubeClient, namespace: str, attempt: int) -> list[Obj]:
    """The four Jobs of restart attempt ``attempt``, once they all exist."""
    return await wait_jobs(client, namespace, NAME, JOBS_PER_ATTEMPT, attempt=attempt)


def of(jobs: list[Obj], rjob: str) -> list[Obj]:
    return [j for j in jobs if j["metadata"]["labels"].get(api.REPLICATED_JOB_NAME) == rjob]


async def fail(
    client: KubeClient, namespace: str, job: Obj, reason: str = "", message: str = ""
) -> None:
    """Fail a Job as upstream's helper does: no reason and no message unless given."""
    await fail_job(client, namespace, job, reason, message)


async def assert_active(running: RunningController, client: KubeClient, namespace: str) -> Obj:
    """Upstream's "JobSet active": once the controller has processed everything so far, the
    JobSet is neither failed, completed nor suspended."""
    await settled(running, client)
    stored = await get_jobset(client, namespace, NAME)
    for kind in (api.FAILED, api.COMPLETED, api.SUSPENDED):
        found = condition(stored, kind)
        assert found is None or found["status"] != "True", (kind, stored.get("status"))
    assert not (stored.get("status") or {}).get("terminalState"), stored["status"]
    return stored


async def wait_finished(client: KubeClient, namespace: str, kind: str) -> Obj:
    """Upstream's "JobSet completed" / "JobSet failed": the condition True and terminalState."""
    done = await wait_condition(client, namespace, NAME, kind)
    assert done["status"]["terminalState"] == kind
    return done


async def wait_restarts(client: KubeClient, namespace: str, restarts: int, towards: int) -> Obj:
    """``status.restarts`` and ``status.restartsCountTowardsMax`` reach these values."""

    def counts(js: Obj) -> tuple[int, int]:
        status = js.get("status") or {}
        return int(status.get("restarts") or 0), int(status.get("restartsCountTowardsMax") or 0)

    return await wait_for(
        lambda: get_jobset(client, namespace, NAME),
        lambda js: counts(js) == (restarts, towards),
        f"restarts={restarts} and restartsCountTowardsMax={towards}",
    )


def replicated_status(js: Obj, name: str) -> Obj:
    found = [s for s in js["status"]["replicatedJobsStatus"] if s["name"] == name]
    assert len(found) == 1, js["status"]["replicatedJobsStatus"]
    return dict(found[0])


def counts(**values: int) -> dict[str, int]:
    """A replicated job's counters as upstream compares them (those not given are 0)."""
    keys = ("ready", "succeeded", "failed", "active", "suspended")
    return {k: values.get(k, 0) for k in keys}


async def wait_replicated_status(
    client: KubeClient, namespace: str, expected: dict[str, dict[str, int]]
) -> Obj:
    """``status.replicatedJobsStatus`` holds exactly these counters, one entry per name."""

    def observed(js: Obj) -> dict[str, dict[str, int]]:
        statuses = (js.get("status") or {}).get("replicatedJobsStatus") or []
        return {
            s["name"]: {k: int(s.get(k) or 0) for k in counts()} for s in statuses if "name" in s
        }

    return await wait_for(
        lambda: get_jobset(client, namespace, NAME),
        lambda js: observed(js) == expected,
        f"replicatedJobsStatus {expected}",
    )


async def jobs_by_attempt(client: KubeClient, namespace: str) -> dict[int, int]:
    """How many of the JobSet's Jobs exist per restart attempt, those being deleted included."""
    result: dict[int, int] = {}
    for job in await jobs_of(client, namespace, NAME):
        attempt = int(job["metadata"]["labels"][api.RESTART_ATTEMPT])
        result[attempt] = result.get(attempt, 0) + 1
    return result


async def wait_by_attempt(client: KubeClient, namespace: str, expected: dict[int, int]) -> None:
    await wait_for(
        lambda: jobs_by_attempt(client, namespace),
        lambda found: found == expected,
        f"Jobs per restart attempt {expected}",
    )


def _marked(job: Obj) -> bool:
    meta = job["metadata"]
    return bool(meta.get("deletionTimestamp")) and FOREGROUND in (meta.get("finalizers") or [])


async def remove_foreground_finalizers(client: KubeClient, namespace: str, count: int) -> None:
    """Play the garbage collector for ``count`` Jobs the controller deleted (Foreground): wait
    until that many carry the finalizer, then remove it from the first ``count`` by name, which
    lets the API server remove them."""
    marked = await wait_for(
        lambda: jobs_of(client, namespace, NAME),
        lambda jobs: sum(map(_marked, jobs)) >= count,
        f"{count} Jobs deleted in the foreground",
    )
    for job in [j for j in marked if _marked(j)][:count]:
        finalizers = [f for f in job["metadata"]["finalizers"] if f != FOREGROUND]
        patch = {"metadata": {"finalizers": finalizers or None}}
        await client.patch(JOBS, job["metadata"]["name"], patch, namespace)


async def update_jobset(client: KubeClient, namespace: str, change: Callable[[Obj], None]) -> Obj:
    """Read, change and write the JobSet back (a full update, as upstream's client does),
    again on a conflict with the controller's status writes."""

    async def attempt() -> Obj | None:
        stored = await get_jobset(client, namespace, NAME)
        change(stored)
        try:
            return await client.replace(api.JOBSETS, stored, namespace)
        except ApiError as err:
            if err.conflict:
                return None
            raise

    updated = await wait_for(attempt, lambda result: result is not None, "the JobSet update")
    assert updated is not None
    return updated


def failure_policy(max_restarts: int = 1, *rules: Obj, **extra: Any) -> Obj:
    return {"maxRestarts": max_restarts, "rules": list(rules), **extra}


def rule(action: str, reasons: list[str], **extra: Any) -> Obj:
    return {"action": action, "onJobFailureReasons": reasons, **extra}


# ----------------------------------------------------------------------------- basics


@scenario("setting suspend is allowed")
async def test_setting_suspend_is_allowed(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: a created JobSet accepts an update that sets spec.suspend to true."""
    await create(client, namespace)

    def suspend(js: Obj) -> None:
        js["spec"]["suspend"] = True

    updated = await update_jobset(client, namespace, suspend)
    assert updated["spec"]["suspend"] is True
    await wait_condition(client, namespace, NAME, api.SUSPENDED)


@scenario("jobset should successfully create jobs")
async def test_creates_jobs(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: the JobSet's Jobs are created, one per replica of each replicated job."""
    jobs = await create(client, namespace)
    assert [j["metadata"]["name"] for j in jobs] == [
        f"{NAME}-{A}-0",
        f"{NAME}-{B}-0",
        f"{NAME}-{B}-1",
        f"{NAME}-{B}-2",
    ]
    await settled(controller, client)
    assert len(await jobs_of(client, namespace, NAME)) == JOBS_PER_ATTEMPT


@scenario("jobset should succeed after all jobs succeed")
async def test_succeeds_after_all_jobs_succeed(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: all Jobs complete; the JobSet completes and replicatedJobsStatus counts 1 and 3
    succeeded Jobs."""
    for job in await create(client, namespace):
        await complete_job(client, namespace, job)
    await wait_finished(client, namespace, api.COMPLETED)
    await wait_replicated_status(
        client, namespace, {A: counts(succeeded=1), B: counts(succeeded=3)}
    )


@scenario("jobset should ignore jobs with same owner name but different owner UID")
async def test_ignores_jobs_of_another_owner_uid(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: a Job whose owner reference names the JobSet with another UID (and carries its
    name label) is not counted; completing the real Jobs completes the JobSet."""
    jobs = await create(client, namespace)
    dummy = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "dummy-job",
            "ownerReferences": [
                {
                    "apiVersion": api.API_VERSION,
                    "kind": api.KIND,
                    "name": NAME,
                    "uid": "12345678-1234-1234-1234-123456789abc",
                    "controller": True,
                }
            ],
            "labels": {
                api.JOBSET_NAME: NAME,
                api.REPLICATED_JOB_NAME: "non-existent-replicated-job",
            },
        },
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "test", "image": "bash:latest"}],
                }
            }
        },
    }
    await client.create(JOBS, dummy, namespace)
    for job in jobs:
        await complete_job(client, namespace, job)
    await wait_finished(client, namespace, api.COMPLETED)
    await wait_replicated_status(
        client, namespace, {A: counts(succeeded=1), B: counts(succeeded=3)}
    )
    # Not its own: left alone, although a finished JobSet deletes its unfinished Jobs.
    await settled(controller, client)
    kept = await client.get(JOBS, "dummy-job", namespace)
    assert not kept["metadata"].get("deletionTimestamp"), kept["metadata"]


@scenario("jobset should not succeed if any job is not completed")
async def test_not_complete_while_a_job_runs(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: three of four Jobs complete, the last is ready; the JobSet stays active, with 2
    succeeded, 1 ready and 1 active Job in replicated-job-b.
    Differs from upstream: the counters arrive up to --status-progress-period (the longest hold,
    5 s) late, as progress-only status changes are paced (docs/api.md); upstream writes each
    change."""
    jobs = await create(client, namespace)
    for job in jobs[:-1]:
        await complete_job(client, namespace, job)
    await ready_job(client, namespace, jobs[-1])
    await wait_replicated_status(
        client,
        namespace,
        {A: counts(succeeded=1), B: counts(succeeded=2, ready=1, active=1)},
    )
    await assert_active(controller, client, namespace)


# ----------------------------------------------------------------------------- success policy


@scenario("success policy 'all' with empty replicated jobs list")
async def test_success_all_empty_targets(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: All over every replicated job: replicated-job-a's Jobs done is not enough;
    replicated-job-b's too completes the JobSet."""
    jobs = await create(
        client, namespace, successPolicy={"operator": "All", "targetReplicatedJobs": []}
    )
    for job in of(jobs, A):
        await complete_job(client, namespace, job)
    await assert_active(controller, client, namespace)
    for job in of(jobs, B):
        await complete_job(client, namespace, job)
    await wait_finished(client, namespace, api.COMPLETED)


@scenario("success policy 'all' with replicated jobs specified")
async def test_success_all_with_target(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: All targeting replicated-job-b: the other replicated job done, then one of
    b's three, leave the JobSet active; the remaining two complete it."""
    jobs = await create(
        client, namespace, successPolicy={"operator": "All", "targetReplicatedJobs": [B]}
    )
    for job in of(jobs, A):
        await complete_job(client, namespace, job)
    await assert_active(controller, client, namespace)
    targets = of(jobs, B)
    await complete_job(client, namespace, targets[0])
    await assert_active(controller, client, namespace)
    for job in targets[1:]:
        await complete_job(client, namespace, job)
    await wait_finished(client, namespace, api.COMPLETED)


@scenario("success policy 'any' with replicated job specified")
async def test_success_any_with_target(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: Any targeting replicated-job-b: one of its three Jobs completing completes the
    JobSet."""
    jobs = await create(
        client, namespace, successPolicy={"operator": "Any", "targetReplicatedJobs": [B]}
    )
    await complete_job(client, namespace, of(jobs, B)[0])
    await wait_finished(client, namespace, api.COMPLETED)


@scenario("success policy 'any' without replicated job specified")
async def test_success_any_without_target(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: Any over every replicated job: one Job (the second listed) completing completes
    the JobSet."""
    jobs = await create(
        client, namespace, successPolicy={"operator": "Any", "targetReplicatedJobs": []}
    )
    await complete_job(client, namespace, jobs[1])
    await wait_finished(client, namespace, api.COMPLETED)


# ----------------------------------------------------------------------------- first run


@scenario("[failure policy] jobset with no failure policy should fail if any jobs fail")
async def test_no_failure_policy_fails(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: without a failure policy, one failed Job fails the JobSet."""
    jobs = await create(client, namespace)
    await fail(client, namespace, jobs[0])
    failed = await wait_finished(client, namespace, api.FAILED)
    assert condition(failed, api.FAILED)["reason"] == api.REASON_FAILED_JOBS  # type: ignore[index]


async def assert_one_headless_service(client: KubeClient, namespace: str) -> None:
    """Upstream's check: one Service in the namespace, the JobSet's headless one."""
    services = await wait_for(
        lambda: client.list(SERVICES, namespace),
        lambda listed: len(listed["items"]) >= 1,
        "the headless Service",
    )
    assert [s["metadata"]["name"] for s in services["items"]] == [NAME]
    assert services["items"][0]["spec"]["clusterIP"] == "None"


@scenario(
    "jobset with DNS hostnames enabled should created 1 headless service per job and succeed when all jobs succeed"  # noqa: E501 (upstream's name, verbatim)
)
async def test_dns_hostnames_one_headless_service(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: with DNS hostnames on, one headless Service exists for the JobSet; all Jobs
    completing completes it."""
    jobs = await create(client, namespace)
    await assert_one_headless_service(client, namespace)
    for job in jobs:
        await complete_job(client, namespace, job)
    await wait_finished(client, namespace, api.COMPLETED)
    await settled(controller, client)
    assert len((await client.list(SERVICES, namespace))["items"]) == 1


@scenario("succeeds from first run")
async def test_succeeds_from_first_run(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: the headless Service exists; all Jobs completing on the first attempt completes
    the JobSet."""
    jobs = await create(client, namespace)
    await assert_one_headless_service(client, namespace)
    for job in jobs:
        await complete_job(client, namespace, job)
    done = await wait_finished(client, namespace, api.COMPLETED)
    assert done["status"].get("restarts", 0) == 0


@scenario("fails from first run, no restarts")
async def test_fails_from_first_run(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: the headless Service exists; without a failure policy the first failed Job
    fails the JobSet, no restart."""
    jobs = await create(client, namespace)
    await assert_one_headless_service(client, namespace)
    await fail(client, namespace, jobs[0])
    failed = await wait_finished(client, namespace, api.FAILED)
    assert failed["status"].get("restarts", 0) == 0


@scenario("jobset fails after reaching max restarts")
async def test_fails_after_max_restarts(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: maxRestarts 1: a first failure restarts the JobSet (it stays active), a
    failure of the second attempt fails it."""
    jobs = await create(client, namespace, failurePolicy={"maxRestarts": 1})
    await fail(client, namespace, jobs[0])
    await wait_restarts(client, namespace, 1, 1)
    await assert_active(controller, client, namespace)
    await remove_foreground_finalizers(client, namespace, JOBS_PER_ATTEMPT)
    second = await attempt_jobs(client, namespace, 1)
    await fail(client, namespace, second[1])
    failed = await wait_finished(client, namespace, api.FAILED)
    assert condition(failed, api.FAILED)["reason"] == api.REASON_REACHED_MAX_RESTARTS  # type: ignore[index]
    assert failed["status"]["restarts"] == 1


# ----------------------------------------------------------------------------- FailJobSet rules


async def fails_at_once(client: KubeClient, namespace: str, policy: Obj, message: str) -> None:
    """The first Job fails (reason PodFailurePolicy, ``message``): the JobSet fails with the
    FailJobSet action's reason, no restart."""
    jobs = await create(client, namespace, failurePolicy=policy)
    await fail(client, namespace, jobs[0], POD_FAILURE_POLICY, message)
    failed = await wait_finished(client, namespace, api.FAILED)
    assert condition(failed, api.FAILED)["reason"] == api.REASON_FAIL_ACTION  # type: ignore[index]
    await wait_restarts(client, namespace, 0, 0)


async def restarts_instead(
    running: RunningController, client: KubeClient, namespace: str, policy: Obj, message: str
) -> None:
    """The first Job fails (reason PodFailurePolicy, ``message``); the rule does not apply, so
    the default action restarts the JobSet once (counting towards maxRestarts) and it stays
    active; the old Jobs gone, the next attempt's four Jobs are created."""
    jobs = await create(client, namespace, failurePolicy=policy)
    await fail(client, namespace, jobs[0], POD_FAILURE_POLICY, message)
    await wait_restarts(client, namespace, 1, 1)
    await assert_active(running, client, namespace)
    await remove_foreground_finalizers(client, namespace, JOBS_PER_ATTEMPT)
    await attempt_jobs(client, namespace, 1)


@scenario("[failure policy] jobset fails immediately with FailJobSet failure policy action.")
async def test_fail_jobset_action(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: a FailJobSet rule for any reason fails the JobSet on the first failed Job;
    restarts and restartsCountTowardsMax stay 0."""
    policy = failure_policy(1, rule(api.FAIL_JOBSET, []))
    await fails_at_once(client, namespace, policy, "")


@scenario(
    "[failure policy] jobset does not fail immediately with FailJobSet failure policy action as the failure reason is not matched."  # noqa: E501 (upstream's name, verbatim)
)
async def test_fail_jobset_reason_not_matched(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: a FailJobSet rule for BackoffLimitExceeded does not apply to a PodFailurePolicy
    failure: the JobSet restarts (1 restart, counted) and stays active."""
    policy = failure_policy(1, rule(api.FAIL_JOBSET, [BACKOFF_LIMIT_EXCEEDED]))
    await restarts_instead(controller, client, namespace, policy, "")


@scenario(
    "[failure policy] jobset does not fail immediately with FailJobSet failure policy action as the failure message is not matched."  # noqa: E501 (upstream's name, verbatim)
)
async def test_fail_jobset_message_not_matched(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: a FailJobSet rule with the pattern "some message" does not apply to the message
    "some critical error with a message": the JobSet restarts (1, counted)."""
    policy = failure_policy(
        1, rule(api.FAIL_JOBSET, [], onJobFailureMessagePatterns=["some message"])
    )
    await restarts_instead(
        controller, client, namespace, policy, "some critical error with a message"
    )


@scenario(
    "[failure policy] jobset does not fail immediately with FailJobSet failure policy action as the failure message is not matched, even if reason is matched."  # noqa: E501 (upstream's name, verbatim)
)
async def test_fail_jobset_reason_matched_message_not(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: the rule's reason (PodFailurePolicy) matches but its pattern "some message" does
    not match "some critical error with a message": the JobSet restarts (1, counted)."""
    policy = failure_policy(
        1,
        rule(api.FAIL_JOBSET, [POD_FAILURE_POLICY], onJobFailureMessagePatterns=["some message"]),
    )
    await restarts_instead(
        controller, client, namespace, policy, "some critical error with a message"
    )


@scenario(
    "[failure policy] jobset fails immediately with FailJobSet failure policy action as the failure reason and message are matched."  # noqa: E501 (upstream's name, verbatim)
)
async def test_fail_jobset_reason_and_message_matched(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: reason PodFailurePolicy and message "some message" both match the FailJobSet
    rule: the JobSet fails, no restart."""
    policy = failure_policy(
        1,
        rule(api.FAIL_JOBSET, [POD_FAILURE_POLICY], onJobFailureMessagePatterns=["some message"]),
    )
    await fails_at_once(client, namespace, policy, "some message")


@scenario(
    "[failure policy] jobset fails immediately with FailJobSet failure policy action as the failure reason and message are matched, even if message string is not exactly equal to pattern string."  # noqa: E501 (upstream's name, verbatim)
)
async def test_fail_jobset_pattern_found_inside_message(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: the pattern "some message" is found inside "this is some message with critical
    error" (a search, not a full match): the JobSet fails, no restart."""
    policy = failure_policy(
        1,
        rule(api.FAIL_JOBSET, [POD_FAILURE_POLICY], onJobFailureMessagePatterns=["some message"]),
    )
    await fails_at_once(client, namespace, policy, "this is some message with critical error")


# ----------------------------------------------------------------------------- restart actions


@scenario(
    "[failure policy] jobset restarts with RestartJobSet failure policy action (without RestartJob feature gate)."  # noqa: E501 (upstream's name, verbatim)
)
async def test_restart_jobset_action(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: a RestartJobSet rule for PodFailurePolicy (before a catch-all FailJobSet)
    restarts the JobSet: 1 restart, counted; no per-Job restart counters on replicated-job-a."""
    policy = failure_policy(
        1, rule(api.RESTART_JOBSET, [POD_FAILURE_POLICY]), rule(api.FAIL_JOBSET, [])
    )
    jobs = await create(client, namespace, failurePolicy=policy)
    await fail(client, namespace, jobs[0], POD_FAILURE_POLICY)
    restarted = await wait_restarts(client, namespace, 1, 1)
    stored = await assert_active(controller, client, namespace)
    assert stored["status"]["restarts"] == 1
    for js in (restarted, stored):
        a_status = replicated_status(js, A)
        assert "jobRestarts" not in a_status, a_status
        assert "jobRestartsCountTowardsMax" not in a_status, a_status


@scenario("jobset restarting condition transitions")
async def test_restarting_condition_transitions(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: a restart by rule Rule1 sets RestartingJobSet=True (reason FailurePolicy_Rule1)
    while the JobSet stays active; the new attempt's Jobs all ready set it False (JobsReady)."""
    policy = failure_policy(1, rule(api.RESTART_JOBSET, [POD_FAILURE_POLICY], name="Rule1"))
    jobs = await create(client, namespace, failurePolicy=policy)
    await fail(client, namespace, jobs[0], POD_FAILURE_POLICY)
    restarting = await wait_condition(client, namespace, NAME, api.RESTARTING)
    assert condition(restarting, api.RESTARTING)["reason"] == "FailurePolicy_Rule1"  # type: ignore[index]
    await assert_active(controller, client, namespace)
    await remove_foreground_finalizers(client, namespace, JOBS_PER_ATTEMPT)
    for job in await attempt_jobs(client, namespace, 1):
        await ready_job(client, namespace, job)
    ready = await wait_condition(client, namespace, NAME, api.RESTARTING, status="False")
    assert condition(ready, api.RESTARTING)["reason"] == api.REASON_JOBS_READY  # type: ignore[index]


@scenario("[failure policy] jobs are restarted individually with Recreate strategy.")
async def test_recreate_strategy(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: restartStrategy Recreate: after a restart each old Job is replaced as soon as it
    is gone: three gone, three recreated while the fourth is still being deleted."""
    policy = failure_policy(1, restartStrategy="Recreate")
    jobs = await create(client, namespace, failurePolicy=policy)
    await fail(client, namespace, jobs[0], POD_FAILURE_POLICY)
    await wait_restarts(client, namespace, 1, 1)
    await assert_active(controller, client, namespace)
    await remove_foreground_finalizers(client, namespace, JOBS_PER_ATTEMPT - 1)
    await wait_by_attempt(client, namespace, {0: 1, 1: JOBS_PER_ATTEMPT - 1})
    await remove_foreground_finalizers(client, namespace, 1)
    await wait_by_attempt(client, namespace, {1: JOBS_PER_ATTEMPT})


@scenario(
    "[failure policy] jobs are recreated after all Jobs are deleted with BlockingRecreate strategy."
)
async def test_blocking_recreate_strategy(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: restartStrategy BlockingRecreate: no Job of the new attempt is created while
    one old Job is still being deleted; once it is gone all four are."""
    policy = failure_policy(1, restartStrategy="BlockingRecreate")
    jobs = await create(client, namespace, failurePolicy=policy)
    await fail(client, namespace, jobs[0], POD_FAILURE_POLICY)
    await wait_restarts(client, namespace, 1, 1)
    await assert_active(controller, client, namespace)
    await remove_foreground_finalizers(client, namespace, JOBS_PER_ATTEMPT - 1)
    await wait_by_attempt(client, namespace, {0: 1})
    await settled(controller, client)  # the three deletions were seen and reconciled
    assert await jobs_by_attempt(client, namespace) == {0: 1}
    await remove_foreground_finalizers(client, namespace, 1)
    await wait_by_attempt(client, namespace, {1: JOBS_PER_ATTEMPT})


@scenario(
    "[failure policy] jobset restarts with RestartJobSetAndIgnoreMaxRestarts failure policy action (without RestartJob feature gate)."  # noqa: E501 (upstream's name, verbatim)
)
async def test_restart_ignoring_max_restarts(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: RestartJobSetAndIgnoreMaxRestarts with maxRestarts 1: three failures in a row
    restart the JobSet three times, none counted towards the maximum; no per-Job counters."""
    policy = failure_policy(
        1,
        rule(api.RESTART_JOBSET_IGNORE_MAX, [POD_FAILURE_POLICY]),
        rule(api.FAIL_JOBSET, []),
    )
    jobs = await create(client, namespace, failurePolicy=policy)
    for restart in (1, 2, 3):
        await fail(client, namespace, jobs[0], POD_FAILURE_POLICY)
        await wait_restarts(client, namespace, restart, 0)
        stored = await assert_active(controller, client, namespace)
        await remove_foreground_finalizers(client, namespace, JOBS_PER_ATTEMPT)
        jobs = await attempt_jobs(client, namespace, restart)
    a_status = replicated_status(stored, A)
    assert "jobRestarts" not in a_status, a_status
    assert "jobRestartsCountTowardsMax" not in a_status, a_status


# ----------------------------------------------------------------------------- rule targets, order


@scenario(
    "[failure policy] job fails and the parent replicated job is contained in TargetReplicatedJobs."
)
async def test_rule_target_contains_parent(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: a FailJobSet rule for FailedIndexes targeting replicated-job-b applies to a Job
    of replicated-job-b failing so: the JobSet fails, no restart."""
    policy = failure_policy(1, rule(api.FAIL_JOBSET, [FAILED_INDEXES], targetReplicatedJobs=[B]))
    jobs = await create(client, namespace, failurePolicy=policy)
    await fail(client, namespace, of(jobs, B)[0], FAILED_INDEXES)
    await wait_finished(client, namespace, api.FAILED)
    await wait_restarts(client, namespace, 0, 0)


@scenario(
    "[failure policy] job fails and the parent replicated job is not contained in TargetReplicatedJobs."  # noqa: E501 (upstream's name, verbatim)
)
async def test_rule_target_lacks_parent(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: a FailJobSet rule targeting replicated-job-a does not apply to a Job of
    replicated-job-b: the default action restarts the JobSet (1, counted)."""
    policy = failure_policy(
        1, rule(api.FAIL_JOBSET, [BACKOFF_LIMIT_EXCEEDED], targetReplicatedJobs=[A])
    )
    jobs = await create(client, namespace, failurePolicy=policy)
    await fail(client, namespace, of(jobs, B)[0], BACKOFF_LIMIT_EXCEEDED)
    await wait_restarts(client, namespace, 1, 1)
    await assert_active(controller, client, namespace)
    await remove_foreground_finalizers(client, namespace, JOBS_PER_ATTEMPT)
    await attempt_jobs(client, namespace, 1)


@scenario("[failure policy] failure policy rules order verification test 1")
async def test_rules_order_fail_first(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: FailJobSet then RestartJobSet, both matching: the first rule wins, the JobSet
    fails without a restart."""
    same = {"targetReplicatedJobs": [A]}
    policy = failure_policy(
        1,
        rule(api.FAIL_JOBSET, [MAX_FAILED_INDEXES_EXCEEDED], **same),
        rule(api.RESTART_JOBSET, [MAX_FAILED_INDEXES_EXCEEDED], **same),
    )
    jobs = await create(client, namespace, failurePolicy=policy)
    await fail(client, namespace, of(jobs, A)[0], MAX_FAILED_INDEXES_EXCEEDED)
    await wait_finished(client, namespace, api.FAILED)
    await wait_restarts(client, namespace, 0, 0)


@scenario("[failure policy] failure policy rules order verification test 2")
async def test_rules_order_restart_first(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: RestartJobSet then FailJobSet, both matching: the first rule wins, the JobSet
    restarts (1, counted) and stays active."""
    same = {"targetReplicatedJobs": [A]}
    policy = failure_policy(
        1,
        rule(api.RESTART_JOBSET, [MAX_FAILED_INDEXES_EXCEEDED], **same),
        rule(api.FAIL_JOBSET, [MAX_FAILED_INDEXES_EXCEEDED], **same),
    )
    jobs = await create(client, namespace, failurePolicy=policy)
    await fail(client, namespace, of(jobs, A)[0], MAX_FAILED_INDEXES_EXCEEDED)
    await wait_restarts(client, namespace, 1, 1)
    await assert_active(controller, client, namespace)
    await remove_foreground_finalizers(client, namespace, JOBS_PER_ATTEMPT)
    await attempt_jobs(client, namespace, 1)


@scenario("[failure policy] failure policy rules order verification test 3")
async def test_rules_order_ignore_max_then_catch_all(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: RestartJobSetAndIgnoreMaxRestarts for replicated-job-a's
    MaxFailedIndexesExceeded, then a catch-all FailJobSet: three such failures restart three
    times (none counted); a failure in replicated-job-b then fails the JobSet (still 3, 0)."""
    policy = failure_policy(
        1,
        rule(
            api.RESTART_JOBSET_IGNORE_MAX, [MAX_FAILED_INDEXES_EXCEEDED], targetReplicatedJobs=[A]
        ),
        rule(api.FAIL_JOBSET, [], targetReplicatedJobs=[]),
    )
    jobs = await create(client, namespace, failurePolicy=policy)
    for restart in (1, 2, 3):
        await fail(client, namespace, of(jobs, A)[0], MAX_FAILED_INDEXES_EXCEEDED)
        await wait_restarts(client, namespace, restart, 0)
        await assert_active(controller, client, namespace)
        await remove_foreground_finalizers(client, namespace, JOBS_PER_ATTEMPT)
        jobs = await attempt_jobs(client, namespace, restart)
    await fail(client, namespace, of(jobs, B)[0])
    failed = await wait_finished(client, namespace, api.FAILED)
    assert condition(failed, api.FAILED)["reason"] == api.REASON_FAIL_ACTION  # type: ignore[index]
    await wait_restarts(client, namespace, 3, 0)


@scenario("job succeeds after one failure")
async def test_succeeds_after_one_failure(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: maxRestarts 1: one Job completes and another fails on the first attempt (a
    restart: every Job of it is deleted, the completed one too); all Jobs of the second attempt
    completing completes the JobSet."""
    jobs = await create(client, namespace, failurePolicy={"maxRestarts": 1})
    await complete_job(client, namespace, jobs[0])
    await fail(client, namespace, jobs[1])
    await remove_foreground_finalizers(client, namespace, JOBS_PER_ATTEMPT)
    for job in await attempt_jobs(client, namespace, 1):
        await complete_job(client, namespace, job)
    done = await wait_finished(client, namespace, api.COMPLETED)
    assert (done["status"]["restarts"], done["status"]["restartsCountTowardsMax"]) == (1, 1)


# ----------------------------------------------------------------------------- RestartJob gate
# Upstream turns its RestartJob gate on for these; here the controller runs with
# --feature-gates=RestartJob=true over the alpha-features CRD (``restart_job_controller``).


def job_restarts(js: Obj, name: str) -> tuple[list[int] | None, list[int] | None]:
    """``jobRestarts`` and ``jobRestartsCountTowardsMax`` of a replicated job (None: absent)."""
    found = replicated_status(js, name)
    return found.get(api.JOB_RESTARTS), found.get(api.JOB_RESTARTS_TOWARDS_MAX)


async def wait_job_restarts(
    client: KubeClient, namespace: str, expected: tuple[list[int] | None, list[int] | None]
) -> Obj:
    """replicated-job-a's per-Job restart arrays reach ``expected``."""
    return await wait_for(
        lambda: get_jobset(client, namespace, NAME),
        lambda js: (
            bool(js.get("status", {}).get("replicatedJobsStatus"))
            and job_restarts(js, A) == expected
        ),
        f"{A} jobRestarts, jobRestartsCountTowardsMax = {expected}",
    )


async def events_with_reason(client: KubeClient, namespace: str, reason: str) -> list[Obj]:
    listed = (await client.list(EVENTS, namespace))["items"]
    return [
        e
        for e in listed
        if (e.get("involvedObject") or {}).get("name") == NAME and e.get("reason") == reason
    ]


async def assert_only_job_recreated(
    running: RunningController, client: KubeClient, namespace: str, jobs: list[Obj], attempt: int
) -> None:
    """The failed first Job (replicated-job-a-0) alone is deleted and recreated under its name
    with ``job-restart-attempt`` ``attempt``; the three other Jobs are the same objects."""
    await remove_foreground_finalizers(client, namespace, 1)
    first = jobs[0]["metadata"]

    async def recreated() -> list[Obj]:
        return [j for j in await jobs_of(client, namespace, NAME) if not _marked(j)]

    now = await wait_for(
        recreated,
        lambda found: (
            len(found) == JOBS_PER_ATTEMPT and found[0]["metadata"]["uid"] != first["uid"]
        ),
        f"{first['name']} recreated",
    )
    assert [j["metadata"]["name"] for j in now] == [j["metadata"]["name"] for j in jobs]
    assert [j["metadata"]["uid"] for j in now[1:]] == [j["metadata"]["uid"] for j in jobs[1:]]
    meta = now[0]["metadata"]
    for where in (meta["labels"], meta["annotations"]):
        assert where[api.JOB_RESTART_ATTEMPT] == str(attempt)
        assert where[api.RESTART_ATTEMPT] == "0"
    pod = now[0]["spec"]["template"]["metadata"]
    assert pod["labels"][api.JOB_RESTART_ATTEMPT] == str(attempt)
    for job in now[1:]:
        assert job["metadata"]["labels"][api.JOB_RESTART_ATTEMPT] == "0"
    await assert_no_writes_at_steady_state(running, client)


@scenario(
    "[failure policy] jobset restarts with RestartJobSet failure policy action (with RestartJob feature gate)."  # noqa: E501 (upstream's name, verbatim)
)
async def test_restart_jobset_action_with_gate(
    restart_job_controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: with the gate on, a RestartJobSet rule still restarts the whole JobSet: 1
    restart, counted; no per-Job restart counters."""
    policy = failure_policy(
        1, rule(api.RESTART_JOBSET, [POD_FAILURE_POLICY]), rule(api.FAIL_JOBSET, [])
    )
    jobs = await create(client, namespace, failurePolicy=policy)
    await fail(client, namespace, jobs[0], POD_FAILURE_POLICY)
    await wait_restarts(client, namespace, 1, 1)
    stored = await assert_active(restart_job_controller, client, namespace)
    assert job_restarts(stored, A) == (None, None)
    # The new attempt's Jobs carry their (unchanged) individual attempt.
    await remove_foreground_finalizers(client, namespace, JOBS_PER_ATTEMPT)
    for job in await attempt_jobs(client, namespace, 1):
        assert job["metadata"]["labels"][api.JOB_RESTART_ATTEMPT] == "0"


@scenario("[failure policy] jobset restarts with RestartJob failure policy action.")
async def test_restart_job_action(
    restart_job_controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: a RestartJob rule restarts only the failed Job: the JobSet's restarts stay 0,
    replicated-job-a's jobRestarts and jobRestartsCountTowardsMax become [1]."""
    policy = failure_policy(
        1, rule(api.RESTART_JOB, [POD_FAILURE_POLICY]), rule(api.FAIL_JOBSET, [])
    )
    jobs = await create(client, namespace, failurePolicy=policy)
    await fail(client, namespace, jobs[0], POD_FAILURE_POLICY)
    await wait_job_restarts(client, namespace, ([1], [1]))
    stored = await assert_active(restart_job_controller, client, namespace)
    assert (stored["status"]["restarts"], stored["status"].get("restartsCountTowardsMax", 0)) == (
        0,
        0,
    )
    # As upstream: a Job restart is an Event, not a RestartingJobSet condition.
    assert condition(stored, api.RESTARTING) is None
    events = await events_with_reason(client, namespace, api.REASON_RESTART_JOB_ACTION)
    assert [(e["type"], e["message"]) for e in events] == [
        (
            "Warning",
            f"applying RestartJob failure policy action (first failed job: {NAME}-{A}-0)",
        )
    ]
    await assert_only_job_recreated(restart_job_controller, client, namespace, jobs, 1)


@scenario(
    "[failure policy] jobset restarts with RestartJobAndIgnoreMaxRestarts failure policy action."
)
async def test_restart_job_ignoring_max_restarts(
    restart_job_controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: RestartJobAndIgnoreMaxRestarts restarts only the failed Job without counting:
    restarts stay 0, jobRestarts becomes [1], jobRestartsCountTowardsMax stays absent."""
    policy = failure_policy(
        1, rule(api.RESTART_JOB_IGNORE_MAX, [POD_FAILURE_POLICY]), rule(api.FAIL_JOBSET, [])
    )
    jobs = await create(client, namespace, failurePolicy=policy)
    await fail(client, namespace, jobs[0], POD_FAILURE_POLICY)
    await wait_job_restarts(client, namespace, ([1], None))
    stored = await assert_active(restart_job_controller, client, namespace)
    assert stored["status"]["restarts"] == 0
    events = await events_with_reason(client, namespace, api.REASON_RESTART_JOB_IGNORE_MAX_ACTION)
    assert len(events) == 1, events
    await assert_only_job_recreated(restart_job_controller, client, namespace, jobs, 1)


@scenario(
    "[failure policy] jobset restarts with RestartJobSetAndIgnoreMaxRestarts failure policy action (with RestartJob feature gate)."  # noqa: E501 (upstream's name, verbatim)
)
async def test_restart_ignoring_max_restarts_with_gate(
    restart_job_controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Upstream: with the gate on, RestartJobSetAndIgnoreMaxRestarts with maxRestarts 1 still
    restarts the whole JobSet three times, none counted; no per-Job counters."""
    policy = failure_policy(
        1,
        rule(api.RESTART_JOBSET_IGNORE_MAX, [POD_FAILURE_POLICY]),
        rule(api.FAIL_JOBSET, []),
    )
    jobs = await create(client, namespace, failurePolicy=policy)
    for restart in (1, 2, 3):
        await fail(client, namespace, jobs[0], POD_FAILURE_POLICY)
        await wait_restarts(client, namespace, restart, 0)
        stored = await assert_active(restart_job_controller, client, namespace)
        await remove_foreground_finalizers(client, namespace, JOBS_PER_ATTEMPT)
        jobs = await attempt_jobs(client, namespace, restart)
    assert job_restarts(stored, A) == (None, None)
