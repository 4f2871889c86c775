"""Ports of upstream JobSet's controller scenarios on a JobSet's life: suspend and resume, the
headless Service, volume claim policies, replicatedJobsStatus, deleting active Jobs once the
JobSet finished, generateName, startup policy, coordinator, dependsOn, another controller's
JobSets, TTL and an invalid Job template.

As upstream's integration suite, there is no kube-controller-manager: the test plays the Job
controller (and the garbage collector) by writing Job status and removing finalizers.
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from controller.jobset import api
from controller.runtime.client import CLAIMS, EVENTS, JOBS, SERVICES, ApiError, KubeClient
from tests.helpers import current, wait_for
from tests.integration.upstream.scenarios import scenario
from tests.support.jobsets import (
    Obj,
    RunningController,
    collect_garbage,
    complete_job,
    condition,
    fail_job,
    get_jobset,
    jobs_of,
    jobset,
    mark_suspended,
    ready_job,
    reconciles,
    replicated_job,
    settled,
    wait_condition,
    wait_jobs,
)

# Upstream's usual JobSet (its tests' ``testJobSet``): "test-js", success policy All over every
# replicated job, DNS hostnames, replicated-job-a with 1 Job and replicated-job-b with 3 Indexed
# Jobs.
NAME = "test-js"
RJOB_A = "replicated-job-a"
RJOB_B = "replicated-job-b"
COUNTERS = ("ready", "succeeded", "failed", "active", "suspended")
Counts = dict[str, dict[str, int]]


def upstream_jobset(name: str = NAME, **spec: Any) -> Obj:
    indexed = replicated_job(RJOB_B, 3)
    indexed["template"]["spec"]["completionMode"] = "Indexed"
    spec.setdefault("successPolicy", {"operator": "All", "targetReplicatedJobs": []})
    return jobset(
        name,
        replicated_job(RJOB_A, 1),
        indexed,
        network={"enableDNSHostnames": True},
        **spec,
    )


def depends_on_jobset(*rjobs: Obj, **spec: Any) -> Obj:
    """Upstream's "depends-on" JobSet: the replicated jobs given, success policy All."""
    return jobset(
        "depends-on", *rjobs, successPolicy={"operator": "All", "targetReplicatedJobs": []}, **spec
    )


def needs(*deps: tuple[str, str]) -> list[Obj]:
    return [{"name": name, "status": status} for name, status in deps]


def row(**counts: int) -> dict[str, int]:
    """One replicated job's status counters; those not given are 0."""
    return {c: counts.get(c, 0) for c in COUNTERS}


def counts_of(js: Obj) -> Counts:
    statuses = (js.get("status") or {}).get("replicatedJobsStatus") or []
    return {s["name"]: {c: int(s.get(c) or 0) for c in COUNTERS} for s in statuses}


async def wait_counts(client: KubeClient, namespace: str, name: str, expected: Counts) -> Obj:
    """Wait until ``status.replicatedJobsStatus`` has exactly these counters."""
    return await wait_for(
        lambda: get_jobset(client, namespace, name),
        lambda js: counts_of(js) == expected,
        f"replicatedJobsStatus of {name} to be {expected}",
    )


def counts_from_jobs(jobs: list[Obj]) -> Counts:
    """What upstream derives from the Jobs to check replicatedJobsStatus: per replicated job, the
    finished Jobs by outcome, unfinished Jobs whose pods are all ready or succeeded, and the
    suspended ones (``active`` is not compared)."""
    out: Counts = {}
    for job in jobs:
        counts = out.setdefault(
            job["metadata"]["labels"][api.REPLICATED_JOB_NAME],
            {"ready": 0, "succeeded": 0, "failed": 0, "suspended": 0},
        )
        finished = {
            c["type"]
            for c in (job.get("status") or {}).get("conditions") or []
            if c["type"] in ("Complete", "Failed") and c["status"] == "True"
        }
        if "Complete" in finished:
            counts["succeeded"] += 1
            continue
        if "Failed" in finished:
            counts["failed"] += 1
            continue
        spec, status = job["spec"], job.get("status") or {}
        pods = min(int(spec.get("parallelism") or 1), int(spec.get("completions") or 1))
        if int(status.get("succeeded") or 0) + int(status.get("ready") or 0) >= pods:
            counts["ready"] += 1
        if spec.get("suspend"):
            counts["suspended"] += 1
    return out


def without_active(counts: Counts) -> Counts:
    return {name: {k: v for k, v in c.items() if k != "active"} for name, c in counts.items()}


async def wait_suspended(
    client: KubeClient, namespace: str, name: str, count: int, suspended: bool
) -> list[Obj]:
    """Wait until the JobSet has ``count`` Jobs and each has ``spec.suspend`` == ``suspended``."""
    return await wait_for(
        lambda: jobs_of(client, namespace, name),
        lambda jobs: (
            len(jobs) == count and all(bool(j["spec"].get("suspend")) is suspended for j in jobs)
        ),
        f"{count} Jobs of {name} with suspend={suspended}",
    )


def of(jobs: list[Obj], rjob: str) -> list[Obj]:
    return [j for j in jobs if j["metadata"]["labels"][api.REPLICATED_JOB_NAME] == rjob]


async def ready_all(client: KubeClient, namespace: str, jobs: list[Obj]) -> None:
    for job in jobs:
        await ready_job(client, namespace, job)


async def complete_all(client: KubeClient, namespace: str, jobs: list[Obj]) -> None:
    for job in jobs:
        await complete_job(client, namespace, job)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def active_job(client: KubeClient, namespace: str, job: Obj) -> None:
    """All of a Job's pods running, none ready yet."""
    pods = int(job["spec"].get("parallelism") or 1)
    fresh = await client.get(JOBS, job["metadata"]["name"], namespace)
    started = (fresh.get("status") or {}).get("startTime") or _now()
    status = {"startTime": started, "active": pods, "ready": 0}
    await client.patch(
        JOBS, job["metadata"]["name"], {"status": status}, namespace, subresource="status"
    )


def unfinished(job: Obj) -> bool:
    """Upstream's "active Job": not being deleted and neither Complete nor Failed."""
    if job["metadata"].get("deletionTimestamp"):
        return False
    return not any(
        c["type"] in ("Complete", "Failed") and c["status"] == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


async def create(client: KubeClient, namespace: str, body: Obj) -> Obj:
    return await client.create(api.JOBSETS, body, namespace)


async def set_suspend(client: KubeClient, namespace: str, name: str, suspend: bool) -> None:
    await client.patch(api.JOBSETS, name, {"spec": {"suspend": suspend}}, namespace)


# --- suspend and resume ---------------------------------------------------------------------


@scenario("jobset created in suspended state")
@pytest.mark.usefixtures("controller")
async def test_created_suspended(client: KubeClient, namespace: str) -> None:
    """All Jobs are created suspended, Suspended=True, and replicatedJobsStatus counts them
    suspended."""
    await create(client, namespace, upstream_jobset(suspend=True))
    await wait_suspended(client, namespace, NAME, 4, True)
    await wait_condition(client, namespace, NAME, api.SUSPENDED)
    await wait_counts(client, namespace, NAME, {RJOB_A: row(suspended=1), RJOB_B: row(suspended=3)})


@scenario("resume a suspended jobset")
@pytest.mark.usefixtures("controller")
async def test_resume_suspended(client: KubeClient, namespace: str) -> None:
    """Pod template edits (labels, annotations, nodeSelector, tolerations) made while suspended
    reach the Jobs on resume; Suspended=False; completing every Job completes the JobSet."""
    await create(client, namespace, upstream_jobset(suspend=True))
    jobs = await wait_suspended(client, namespace, NAME, 4, True)
    await wait_condition(client, namespace, NAME, api.SUSPENDED)
    for job in jobs:
        await mark_suspended(client, namespace, job)

    stored = await get_jobset(client, namespace, NAME)
    toleration = {"key": "key", "operator": "Exists"}
    for rjob in stored["spec"]["replicatedJobs"]:
        pod = rjob["template"]["spec"]["template"]
        pod["metadata"] = {"labels": {"label": "value"}, "annotations": {"annotation": "value"}}
        pod["spec"]["nodeSelector"] = {"node-selector-test-a": "node-selector-test-a"}
        pod["spec"]["tolerations"] = [toleration]
    await client.replace(api.JOBSETS, stored, namespace)
    await wait_counts(client, namespace, NAME, {RJOB_A: row(suspended=1), RJOB_B: row(suspended=3)})

    await set_suspend(client, namespace, NAME, False)
    resumed = await wait_suspended(client, namespace, NAME, 4, False)
    await wait_condition(client, namespace, NAME, api.SUSPENDED, status="False")
    for job in resumed:
        pod = job["spec"]["template"]
        assert pod["metadata"]["labels"]["label"] == "value", job["metadata"]["name"]
        assert pod["metadata"]["annotations"]["annotation"] == "value", job["metadata"]["name"]
        assert pod["spec"]["nodeSelector"]["node-selector-test-a"] == "node-selector-test-a"
        assert toleration in pod["spec"]["tolerations"], job["metadata"]["name"]

    await complete_all(client, namespace, resumed)
    await wait_condition(client, namespace, NAME, api.COMPLETED)
    await wait_counts(client, namespace, NAME, {RJOB_A: row(succeeded=1), RJOB_B: row(succeeded=3)})


@scenario("suspend a running jobset")
@pytest.mark.usefixtures("controller")
async def test_suspend_running(client: KubeClient, namespace: str) -> None:
    """Setting suspend on a running JobSet suspends all its Jobs and sets Suspended=True."""
    await create(client, namespace, upstream_jobset(suspend=False))
    await wait_suspended(client, namespace, NAME, 4, False)
    await set_suspend(client, namespace, NAME, True)
    await wait_suspended(client, namespace, NAME, 4, True)
    await wait_condition(client, namespace, NAME, api.SUSPENDED)


# --- the headless Service -------------------------------------------------------------------


@scenario("service deleted")
@pytest.mark.usefixtures("controller")
async def test_service_deleted(client: KubeClient, namespace: str) -> None:
    """The one headless Service of a JobSet with DNS hostnames is created again when deleted."""

    async def services() -> list[Obj]:
        return list((await client.list(SERVICES, namespace))["items"])

    await create(client, namespace, upstream_jobset())
    first = await wait_for(services, lambda s: len(s) == 1, "one headless Service")
    assert first[0]["metadata"]["name"] == NAME
    await client.delete(SERVICES, NAME, namespace)
    again = await wait_for(
        services,
        lambda s: len(s) == 1 and s[0]["metadata"]["uid"] != first[0]["metadata"]["uid"],
        "the headless Service created again",
    )
    assert again[0]["metadata"]["name"] == NAME


@scenario(
    "jobset using generateName with enableDNSHostnames should have headless service name set to the jobset name"  # noqa: E501 (upstream's name, verbatim)
)
@pytest.mark.usefixtures("controller")
async def test_generate_name_service(client: KubeClient, namespace: str) -> None:
    """A JobSet named by generateName gets its headless Service under the generated name."""
    body = upstream_jobset()
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "name-prefix"
    created = await create(client, namespace, body)
    name = created["metadata"]["name"]
    assert name.startswith("name-prefix") and name != "name-prefix"
    service = await wait_for(
        lambda: client.get(SERVICES, name, namespace), bool, f"the headless Service {name}"
    )
    assert service["spec"]["clusterIP"] == "None"


# --- volume claim policies ------------------------------------------------------------------


def _claim_template(name: str) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}},
    }


def volume_jobset(name: str, policies: list[tuple[str, str]], **spec: Any) -> Obj:
    """Upstream's "volume-test": one replicated job "worker" (1 Job) mounting each template of
    ``policies`` ((template, whenDeleted) pairs, one policy each) at /data, /data-retain ..."""
    worker = replicated_job("worker", 1)
    container = worker["template"]["spec"]["template"]["spec"]["containers"][0]
    container["volumeMounts"] = [
        {"name": template, "mountPath": "/data" + template.removeprefix("test-volume")}
        for template, _ in policies
    ]
    return jobset(
        name,
        worker,
        successPolicy={"operator": "All"},
        volumeClaimPolicies=[
            {"templates": [_claim_template(t)], "retentionPolicy": {"whenDeleted": when}}
            for t, when in policies
        ],
        **spec,
    )


async def claim_names(client: KubeClient, namespace: str) -> list[str]:
    return sorted(c["metadata"]["name"] for c in (await client.list(CLAIMS, namespace))["items"])


async def collect_owned_claims(client: KubeClient, namespace: str) -> None:
    """Play the garbage collector as upstream's test does: delete every claim with an
    ownerReference, after removing its finalizers (pvc-protection has no controller here)."""
    for claim in (await client.list(CLAIMS, namespace))["items"]:
        if not claim["metadata"].get("ownerReferences"):
            continue
        name = claim["metadata"]["name"]
        try:
            await client.patch(CLAIMS, name, {"metadata": {"finalizers": None}}, namespace)
            await client.delete(CLAIMS, name, namespace)
        except ApiError as err:
            if err.status != 404:
                raise


@scenario("jobset with VolumeClaimPolicies should create two PVC with Delete and Retain policies")
@pytest.mark.usefixtures("controller")
async def test_volume_claim_policies_delete_and_retain(client: KubeClient, namespace: str) -> None:
    """Two claims are created; after the JobSet completes and is deleted only the Retain one is
    left; a second JobSet with a Retain policy of that template runs to completion."""
    body = volume_jobset(
        "volume-test",
        [("test-volume", "Delete"), ("test-volume-retain", "Retain")],
        network={"enableDNSHostnames": True},
    )
    await create(client, namespace, body)
    await wait_for(
        lambda: claim_names(client, namespace),
        lambda names: names == ["test-volume-retain-volume-test", "test-volume-volume-test"],
        "the two claims",
    )
    jobs = await wait_jobs(client, namespace, "volume-test", 1)
    await complete_all(client, namespace, jobs)
    await wait_condition(client, namespace, "volume-test", api.COMPLETED)

    await client.delete(api.JOBSETS, "volume-test", namespace)

    async def claims_left() -> list[str]:
        await collect_owned_claims(client, namespace)
        return await claim_names(client, namespace)

    await wait_for(
        claims_left,
        lambda names: names == ["test-volume-retain-volume-test"],
        "only the retained claim",
    )

    second = volume_jobset("volume-test-2", [("test-volume-retain", "Retain")])
    await create(client, namespace, second)
    jobs = await wait_jobs(client, namespace, "volume-test-2", 1)
    await complete_all(client, namespace, jobs)
    await wait_condition(client, namespace, "volume-test-2", api.COMPLETED)


@scenario("suspended jobset with VolumeClaimPolicies should create PVCs")
@pytest.mark.usefixtures("controller")
async def test_suspended_volume_claim_policies(client: KubeClient, namespace: str) -> None:
    """A suspended JobSet creates its claims all the same.

    Differs from upstream: by default a suspended JobSet's claims are created once it is resumed
    (a JobSet queued by Kueue costs no storage while it waits); ``creationPolicy.whenSuspended:
    Create`` asks for upstream's behaviour, which this port checks."""
    body = volume_jobset(
        "volume-test",
        [("test-volume", "Delete")],
        suspend=True,
        network={"enableDNSHostnames": True},
    )
    body["spec"]["volumeClaimPolicies"][0]["creationPolicy"] = {"whenSuspended": "Create"}
    await create(client, namespace, body)
    await wait_for(
        lambda: claim_names(client, namespace),
        lambda names: names == ["test-volume-volume-test"],
        "the claim of the suspended JobSet",
    )


# --- replicatedJobsStatus -------------------------------------------------------------------


@scenario("update replicatedJobsStatuses after all jobs succeed")
@pytest.mark.usefixtures("controller")
async def test_replicated_jobs_status_after_success(client: KubeClient, namespace: str) -> None:
    """Once every Job succeeded, replicatedJobsStatus agrees with the Jobs."""
    await create(client, namespace, upstream_jobset())
    jobs = await wait_jobs(client, namespace, NAME, 4)
    await complete_all(client, namespace, jobs)
    await wait_condition(client, namespace, NAME, api.COMPLETED)
    expected = counts_from_jobs(await jobs_of(client, namespace, NAME))
    assert expected == {
        RJOB_A: {"ready": 0, "succeeded": 1, "failed": 0, "suspended": 0},
        RJOB_B: {"ready": 0, "succeeded": 3, "failed": 0, "suspended": 0},
    }
    await wait_for(
        lambda: get_jobset(client, namespace, NAME),
        lambda js: without_active(counts_of(js)) == expected,
        "replicatedJobsStatus to agree with the Jobs",
    )


@scenario("jobset replicatedJobsStatuses should create and update")
@pytest.mark.usefixtures("controller")
async def test_replicated_jobs_status_created_and_updated(
    client: KubeClient, namespace: str
) -> None:
    """With every Job ready, replicatedJobsStatus agrees with the Jobs."""
    await create(client, namespace, upstream_jobset(suspend=False))
    jobs = await wait_suspended(client, namespace, NAME, 4, False)
    await ready_all(client, namespace, jobs)

    async def both() -> tuple[Counts, Counts]:
        expected = counts_from_jobs(await jobs_of(client, namespace, NAME))
        return expected, without_active(counts_of(await get_jobset(client, namespace, NAME)))

    expected, _ = await wait_for(
        both, lambda pair: pair[0] == pair[1], "replicatedJobsStatus to agree with the Jobs"
    )
    assert expected == {
        RJOB_A: {"ready": 1, "succeeded": 0, "failed": 0, "suspended": 0},
        RJOB_B: {"ready": 3, "succeeded": 0, "failed": 0, "suspended": 0},
    }


# --- active Jobs deleted once the JobSet finished -------------------------------------------


async def wait_only_finished_left(client: KubeClient, namespace: str, finished: int) -> None:
    """Play the garbage collector for the Jobs deleted in the foreground, then wait until only
    ``finished`` Jobs are left and none is active."""

    async def observe() -> list[Obj]:
        await collect_garbage(client, namespace, NAME)
        return await jobs_of(client, namespace, NAME)

    left = await wait_for(
        observe,
        lambda jobs: len(jobs) == finished and not any(unfinished(j) for j in jobs),
        f"only {finished} finished Jobs left",
    )
    assert len(left) == finished


@scenario("active jobs are deleted after jobset succeeds")
@pytest.mark.usefixtures("controller")
async def test_active_jobs_deleted_after_success(client: KubeClient, namespace: str) -> None:
    """Success policy Any: one Job completing completes the JobSet, and its 3 active Jobs are
    deleted (the completed one stays)."""
    await create(
        client,
        namespace,
        upstream_jobset(successPolicy={"operator": "Any", "targetReplicatedJobs": []}),
    )
    jobs = await wait_jobs(client, namespace, NAME, 4)
    await complete_job(client, namespace, jobs[1])
    await wait_condition(client, namespace, NAME, api.COMPLETED)
    await wait_only_finished_left(client, namespace, 1)
    left = await jobs_of(client, namespace, NAME)
    assert [j["metadata"]["name"] for j in left] == [jobs[1]["metadata"]["name"]]


@scenario("active jobs are deleted after jobset fails")
@pytest.mark.usefixtures("controller")
async def test_active_jobs_deleted_after_failure(client: KubeClient, namespace: str) -> None:
    """One Job failing (no failure policy) fails the JobSet, and its 3 active Jobs are deleted
    (the failed one stays)."""
    await create(client, namespace, upstream_jobset())
    jobs = await wait_jobs(client, namespace, NAME, 4)
    await fail_job(client, namespace, jobs[0])
    await wait_condition(client, namespace, NAME, api.FAILED)
    await wait_only_finished_left(client, namespace, 1)
    left = await jobs_of(client, namespace, NAME)
    assert [j["metadata"]["name"] for j in left] == [jobs[0]["metadata"]["name"]]


# --- startup policy -------------------------------------------------------------------------


async def create_suspended_in(client: KubeClient, namespace: str, order: str) -> None:
    """Upstream's test-js, suspended, with startup policy ``order``: all four Jobs, suspended."""
    body = upstream_jobset(suspend=True, startupPolicy={"startupPolicyOrder": order})
    await create(client, namespace, body)
    await wait_counts(client, namespace, NAME, {RJOB_A: row(suspended=1), RJOB_B: row(suspended=3)})


@scenario("startupPolicy with InOrder; suspend should keep jobs suspended")
@pytest.mark.usefixtures("controller")
async def test_in_order_suspended(client: KubeClient, namespace: str) -> None:
    """A suspended InOrder JobSet has all its Jobs, suspended."""
    await create_suspended_in(client, namespace, "InOrder")
    await wait_suspended(client, namespace, NAME, 4, True)


@scenario("startupPolicy with AnyOrder; suspend should keep jobs suspended")
@pytest.mark.usefixtures("controller")
async def test_any_order_suspended(client: KubeClient, namespace: str) -> None:
    """A suspended AnyOrder JobSet has all its Jobs, suspended."""
    await create_suspended_in(client, namespace, "AnyOrder")
    await wait_suspended(client, namespace, NAME, 4, True)


@scenario("startupPolicy with AnyOrder; resume suspended JobSet")
@pytest.mark.usefixtures("controller")
async def test_any_order_resume(client: KubeClient, namespace: str) -> None:
    """Resuming an AnyOrder JobSet resumes all its Jobs at once."""
    await create_suspended_in(client, namespace, "AnyOrder")
    await set_suspend(client, namespace, NAME, False)
    await wait_suspended(client, namespace, NAME, 4, False)
    await wait_counts(client, namespace, NAME, {RJOB_A: row(), RJOB_B: row()})


@scenario("startupPolicy with InOrder; resume suspended JobSet")
@pytest.mark.usefixtures("controller")
async def test_in_order_resume(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Resuming an InOrder JobSet resumes replicated-job-a only; once it is ready,
    replicated-job-b is resumed, and once that is ready the startup policy has completed."""
    await create_suspended_in(client, namespace, "InOrder")
    await set_suspend(client, namespace, NAME, False)
    await wait_counts(client, namespace, NAME, {RJOB_A: row(), RJOB_B: row(suspended=3)})
    await settled(controller, client)
    jobs = await jobs_of(client, namespace, NAME)
    assert all(j["spec"]["suspend"] for j in of(jobs, RJOB_B)), "b waits for a to be ready"

    await ready_all(client, namespace, of(jobs, RJOB_A))
    await wait_counts(client, namespace, NAME, {RJOB_A: row(ready=1, active=1), RJOB_B: row()})
    await wait_condition(client, namespace, NAME, api.STARTUP_POLICY_IN_PROGRESS)

    await ready_all(client, namespace, of(await jobs_of(client, namespace, NAME), RJOB_B))
    await wait_counts(
        client,
        namespace,
        NAME,
        {RJOB_A: row(ready=1, active=1), RJOB_B: row(ready=3, active=3)},
    )
    await wait_condition(client, namespace, NAME, api.STARTUP_POLICY_COMPLETED)


@scenario("startupPolicy InOrder; replicated-job-a not ready then replicated-job-b should not run")
async def test_in_order_waits_for_ready(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """InOrder: only replicated-job-a's Job exists until it is ready; replicated-job-b's Jobs
    running but not ready keep the startup policy in progress; all ready completes it."""
    body = upstream_jobset(startupPolicy={"startupPolicyOrder": "InOrder"})
    await create(client, namespace, body)
    first = await wait_jobs(client, namespace, NAME, 1)
    await wait_condition(client, namespace, NAME, api.STARTUP_POLICY_IN_PROGRESS)
    await settled(controller, client)
    assert len(await jobs_of(client, namespace, NAME)) == 1, "b waits for a to be ready"

    await ready_all(client, namespace, first)
    await wait_counts(client, namespace, NAME, {RJOB_A: row(ready=1, active=1), RJOB_B: row()})

    jobs = await wait_jobs(client, namespace, NAME, 4)
    for job in of(jobs, RJOB_B):
        await active_job(client, namespace, job)
    await wait_counts(
        client, namespace, NAME, {RJOB_A: row(ready=1, active=1), RJOB_B: row(active=3)}
    )
    await settled(controller, client)
    stored = await get_jobset(client, namespace, NAME)
    assert condition(stored, api.STARTUP_POLICY_IN_PROGRESS)["status"] == "True"  # type: ignore[index]
    assert condition(stored, api.STARTUP_POLICY_COMPLETED) is None

    await ready_all(client, namespace, of(jobs, RJOB_B))
    await wait_counts(
        client,
        namespace,
        NAME,
        {RJOB_A: row(ready=1, active=1), RJOB_B: row(ready=3, active=3)},
    )
    await wait_condition(client, namespace, NAME, api.STARTUP_POLICY_COMPLETED)


@scenario(
    "startupPolicy with InOrder; success policy restart; replicated-job-a ready than replicated-job-b should run"  # noqa: E501 (upstream's name, verbatim)
)
async def test_in_order_after_restart(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """InOrder with maxRestarts 1: the startup runs in order; a failed Job restarts the JobSet,
    and the new attempt starts in order again (replicated-job-a first), every Job at attempt 1."""
    body = upstream_jobset(
        failurePolicy={"maxRestarts": 1}, startupPolicy={"startupPolicyOrder": "InOrder"}
    )
    await create(client, namespace, body)
    first = await wait_jobs(client, namespace, NAME, 1)
    await wait_counts(client, namespace, NAME, {RJOB_A: row(), RJOB_B: row()})
    await wait_condition(client, namespace, NAME, api.STARTUP_POLICY_IN_PROGRESS)

    await ready_all(client, namespace, first)
    await wait_counts(client, namespace, NAME, {RJOB_A: row(ready=1, active=1), RJOB_B: row()})
    jobs = await wait_jobs(client, namespace, NAME, 4)
    await ready_all(client, namespace, of(jobs, RJOB_B))
    all_ready = {RJOB_A: row(ready=1, active=1), RJOB_B: row(ready=3, active=3)}
    await wait_counts(client, namespace, NAME, all_ready)
    await wait_condition(client, namespace, NAME, api.STARTUP_POLICY_COMPLETED)

    await complete_job(client, namespace, jobs[0])
    await fail_job(client, namespace, jobs[1])
    again = await wait_jobs(client, namespace, NAME, 1, attempt=1, gc=True)
    assert again[0]["metadata"]["labels"][api.REPLICATED_JOB_NAME] == RJOB_A
    await ready_all(client, namespace, again)
    await wait_counts(client, namespace, NAME, {RJOB_A: row(ready=1, active=1), RJOB_B: row()})
    await wait_condition(client, namespace, NAME, api.STARTUP_POLICY_IN_PROGRESS)

    jobs = await wait_jobs(client, namespace, NAME, 4, attempt=1, gc=True)
    await ready_all(client, namespace, of(jobs, RJOB_B))
    await wait_counts(client, namespace, NAME, all_ready)
    await wait_condition(client, namespace, NAME, api.STARTUP_POLICY_COMPLETED)
    await collect_garbage(client, namespace, NAME)
    left = await wait_jobs(client, namespace, NAME, 4, gc=True)
    assert all(j["metadata"]["labels"][api.RESTART_ATTEMPT] == "1" for j in left)


# --- coordinator ----------------------------------------------------------------------------


@scenario("jobset with coordinator set should have annotation and label set on all jobs")
@pytest.mark.usefixtures("controller")
async def test_coordinator_label_and_annotation(client: KubeClient, namespace: str) -> None:
    """Every Job carries the coordinator pod's DNS name as label and annotation."""
    coordinator = {"replicatedJob": RJOB_A, "jobIndex": 0, "podIndex": 0}
    await create(client, namespace, upstream_jobset(coordinator=coordinator))
    jobs = await wait_jobs(client, namespace, NAME, 4)
    endpoint = f"{NAME}-{RJOB_A}-0-0.{NAME}"
    for job in jobs:
        assert job["metadata"]["labels"][api.COORDINATOR] == endpoint, job["metadata"]["name"]
        assert job["metadata"]["annotations"][api.COORDINATOR] == endpoint, job["metadata"]["name"]


# --- dependsOn ------------------------------------------------------------------------------

DEPENDS = "depends-on"


@scenario("DependsOn: rjob-b depends on ready status of rjob-a")
async def test_depends_on_ready(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """rjob-b's 3 Jobs are created once rjob-a's Job is ready."""
    body = depends_on_jobset(
        replicated_job("rjob-a", 1),
        replicated_job("rjob-b", 3, dependsOn=needs(("rjob-a", "Ready"))),
    )
    await create(client, namespace, body)
    first = await wait_jobs(client, namespace, DEPENDS, 1)
    await settled(controller, client)
    assert len(await jobs_of(client, namespace, DEPENDS)) == 1, "rjob-b waits for rjob-a"
    await ready_all(client, namespace, first)
    await wait_counts(
        client, namespace, DEPENDS, {"rjob-a": row(ready=1, active=1), "rjob-b": row()}
    )
    jobs = await wait_jobs(client, namespace, DEPENDS, 4)
    await ready_all(client, namespace, of(jobs, "rjob-b"))
    await wait_counts(
        client,
        namespace,
        DEPENDS,
        {"rjob-a": row(ready=1, active=1), "rjob-b": row(ready=3, active=3)},
    )


@scenario(
    "DependsOn: rjob-b depends on complete status of rjob-a, and rjob-c depends on ready status of rjob-b"  # noqa: E501 (upstream's name, verbatim)
)
async def test_depends_on_chain(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """A chain: rjob-b waits for rjob-a to complete, rjob-c for rjob-b to be ready."""
    body = depends_on_jobset(
        replicated_job("rjob-a", 1),
        replicated_job("rjob-b", 1, dependsOn=needs(("rjob-a", "Complete"))),
        replicated_job("rjob-c", 3, dependsOn=needs(("rjob-b", "Ready"))),
    )
    await create(client, namespace, body)
    first = await wait_jobs(client, namespace, DEPENDS, 1)
    await ready_all(client, namespace, first)
    await settled(controller, client)
    assert len(await jobs_of(client, namespace, DEPENDS)) == 1, "Ready is not Complete"
    await complete_all(client, namespace, first)
    await wait_counts(
        client,
        namespace,
        DEPENDS,
        {"rjob-a": row(succeeded=1), "rjob-b": row(), "rjob-c": row()},
    )
    jobs = await wait_jobs(client, namespace, DEPENDS, 2)
    await settled(controller, client)
    assert len(await jobs_of(client, namespace, DEPENDS)) == 2, "rjob-c waits for rjob-b"
    await ready_all(client, namespace, of(jobs, "rjob-b"))
    jobs = await wait_jobs(client, namespace, DEPENDS, 5)
    await wait_counts(
        client,
        namespace,
        DEPENDS,
        {"rjob-a": row(succeeded=1), "rjob-b": row(ready=1, active=1), "rjob-c": row()},
    )
    await complete_all(client, namespace, [j for j in jobs if unfinished(j)])
    await wait_counts(
        client,
        namespace,
        DEPENDS,
        {"rjob-a": row(succeeded=1), "rjob-b": row(succeeded=1), "rjob-c": row(succeeded=3)},
    )


@scenario("DependsOn: rjob-c depends on complete status of rjob-a and rjob-b")
async def test_depends_on_two_complete(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """rjob-c is created once both rjob-a and rjob-b completed."""
    body = depends_on_jobset(
        replicated_job("rjob-a", 1),
        replicated_job("rjob-b", 1),
        replicated_job(
            "rjob-c", 3, dependsOn=needs(("rjob-a", "Complete"), ("rjob-b", "Complete"))
        ),
    )
    await create(client, namespace, body)
    jobs = await wait_jobs(client, namespace, DEPENDS, 2)
    await complete_job(client, namespace, jobs[0])
    await settled(controller, client)
    assert len(await jobs_of(client, namespace, DEPENDS)) == 2, "rjob-b is not complete yet"
    await complete_job(client, namespace, jobs[1])
    both_done = {"rjob-a": row(succeeded=1), "rjob-b": row(succeeded=1), "rjob-c": row()}
    await wait_counts(client, namespace, DEPENDS, both_done)
    jobs = await wait_jobs(client, namespace, DEPENDS, 5)
    await complete_all(client, namespace, of(jobs, "rjob-c"))
    await wait_counts(
        client,
        namespace,
        DEPENDS,
        {"rjob-a": row(succeeded=1), "rjob-b": row(succeeded=1), "rjob-c": row(succeeded=3)},
    )


@scenario("DependsOn: rjob-c depends on ready status of rjob-a and complete status of rjob-b")
async def test_depends_on_ready_and_complete(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """rjob-c is created once rjob-a is ready and rjob-b completed."""
    body = depends_on_jobset(
        replicated_job("rjob-a", 1),
        replicated_job("rjob-b", 1),
        replicated_job("rjob-c", 3, dependsOn=needs(("rjob-a", "Ready"), ("rjob-b", "Complete"))),
    )
    await create(client, namespace, body)
    jobs = await wait_jobs(client, namespace, DEPENDS, 2)
    await ready_all(client, namespace, of(jobs, "rjob-a"))
    await complete_job(client, namespace, jobs[1])
    met = {"rjob-a": row(ready=1, active=1), "rjob-b": row(succeeded=1), "rjob-c": row()}
    await wait_counts(client, namespace, DEPENDS, met)
    jobs = await wait_jobs(client, namespace, DEPENDS, 5)
    await complete_all(client, namespace, [j for j in jobs if unfinished(j)])
    await wait_counts(
        client,
        namespace,
        DEPENDS,
        {"rjob-a": row(succeeded=1), "rjob-b": row(succeeded=1), "rjob-c": row(succeeded=3)},
    )


@scenario("DependsOn: resume suspended JobSet when rjob-b depends on ready status of rjob-a")
async def test_depends_on_resume(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Suspended, only rjob-a's Job exists (suspended); resumed, rjob-a runs, and once it is
    ready rjob-b's Jobs are created, not suspended."""
    body = depends_on_jobset(
        replicated_job("rjob-a", 1),
        replicated_job("rjob-b", 3, dependsOn=needs(("rjob-a", "Ready"))),
        suspend=True,
    )
    await create(client, namespace, body)
    await wait_counts(client, namespace, DEPENDS, {"rjob-a": row(suspended=1), "rjob-b": row()})
    await wait_suspended(client, namespace, DEPENDS, 1, True)
    await set_suspend(client, namespace, DEPENDS, False)
    await wait_counts(client, namespace, DEPENDS, {"rjob-a": row(), "rjob-b": row()})
    first = await wait_suspended(client, namespace, DEPENDS, 1, False)
    await settled(controller, client)
    assert len(await jobs_of(client, namespace, DEPENDS)) == 1, "rjob-b waits for rjob-a"
    await ready_all(client, namespace, first)
    jobs = await wait_suspended(client, namespace, DEPENDS, 4, False)
    await wait_counts(
        client, namespace, DEPENDS, {"rjob-a": row(ready=1, active=1), "rjob-b": row()}
    )
    await ready_all(client, namespace, of(jobs, "rjob-b"))
    await wait_counts(
        client,
        namespace,
        DEPENDS,
        {"rjob-a": row(ready=1, active=1), "rjob-b": row(ready=3, active=3)},
    )


# --- a JobSet managed by another controller -------------------------------------------------


# Upstream's controller suite runs without its webhook and names "other-controller", which its
# webhook (as our admission) refuses: not a domain-prefixed path. Any such path serves here.
OTHER = "example.com/other-controller"


def other_controllers(**spec: Any) -> Obj:
    """Upstream's JobSet for this group: its usual one, named by generateName, managed by
    another controller."""
    body = upstream_jobset(managedBy=OTHER, **spec)
    del body["metadata"]["name"]
    body["metadata"]["generateName"] = "name-prefix"
    return body


async def no_jobs_in(client: KubeClient, namespace: str) -> list[Obj]:
    return list((await client.list(JOBS, namespace))["items"])


@scenario("Should not create any jobs for it, while suspended")
async def test_other_controller_suspended_no_jobs(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """No Job is created for a JobSet another controller manages (here created suspended, as the
    name says; upstream's is not suspended, which the next port covers)."""
    created = await create(client, namespace, other_controllers(suspend=True))
    await settled(controller, client)  # the JobSet was seen and reconciled
    assert await no_jobs_in(client, namespace) == []
    stored = await get_jobset(client, namespace, created["metadata"]["name"])
    assert not stored.get("status"), stored["status"]


@scenario("Should not create any jobs for it, when unsuspended")
async def test_other_controller_unsuspended_no_jobs(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Setting suspend false on a JobSet another controller manages creates no Job either."""
    created = await create(client, namespace, other_controllers(suspend=True))
    name = created["metadata"]["name"]
    await settled(controller, client)
    await set_suspend(client, namespace, name, False)
    await settled(controller, client)  # the update was seen and reconciled
    assert await no_jobs_in(client, namespace) == []
    stored = await get_jobset(client, namespace, name)
    assert not stored.get("status"), stored["status"]


@scenario("Updates to its status are preserved")
async def test_other_controller_status_preserved(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """A status written by the managing controller is left exactly as written."""
    created = await create(client, namespace, other_controllers())
    name = created["metadata"]["name"]
    await settled(controller, client)
    stored = await get_jobset(client, namespace, name)
    want = {
        "conditions": [
            {
                "type": api.FAILED,
                "status": "False",
                "reason": "ByTest",
                "message": "",
                "lastTransitionTime": _now(),
            }
        ],
        "restarts": 1,
        "replicatedJobsStatus": [
            {
                "name": RJOB_A,
                "ready": 2,
                "succeeded": 3,
                "failed": 4,
                "active": 5,
                "suspended": 6,
            }
        ],
    }
    stored["status"] = want
    written = await client.replace(api.JOBSETS, stored, namespace, subresource="status")
    assert written["status"] == want
    await settled(controller, client)  # the status update was seen and reconciled
    assert (await get_jobset(client, namespace, name))["status"] == want


# --- TTL ------------------------------------------------------------------------------------


@scenario("JobSet controller should delete it after configured ttl duration passes")
@pytest.mark.usefixtures("controller")
async def test_ttl_deletes_finished_jobset(client: KubeClient, namespace: str) -> None:
    """A failed JobSet with ttlSecondsAfterFinished 2 has its active Jobs deleted, then is
    deleted itself; a completed JobSet without a TTL is not."""
    await create(client, namespace, upstream_jobset("ttl", ttlSecondsAfterFinished=2))
    await create(client, namespace, upstream_jobset("no-ttl"))
    ttl_jobs = await wait_jobs(client, namespace, "ttl", 4)
    kept_jobs = await wait_jobs(client, namespace, "no-ttl", 4)
    await fail_job(client, namespace, ttl_jobs[0])
    await complete_all(client, namespace, kept_jobs)
    await wait_condition(client, namespace, "ttl", api.FAILED)
    await wait_condition(client, namespace, "no-ttl", api.COMPLETED)

    await wait_for(
        lambda: jobs_of(client, namespace, "ttl"),
        lambda jobs: sum(bool(j["metadata"].get("deletionTimestamp")) for j in jobs) == 3,
        "the 3 active Jobs of ttl to be deleted",
    )
    await wait_for(
        lambda: get_jobset(client, namespace, "ttl"),
        lambda js: bool(js["metadata"].get("deletionTimestamp")),
        "ttl to be deleted after its TTL",
    )
    kept = await get_jobset(client, namespace, "no-ttl")
    assert not kept["metadata"].get("deletionTimestamp")


# --- an invalid Job template ----------------------------------------------------------------


@scenario("should emit a warning event")
async def test_invalid_job_template_warning_event(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """A Job template the API server refuses (a container without image): a Warning Event
    JobCreationFailed about the JobSet, quoting the API server.
    Differs from upstream: upstream emits the Event again on every retry (one Event whose series
    count grows); here the JobSet gets the condition JobCreationFailed=True and one Event when it
    changes, and retries refused the same way write nothing (no status, no Event), because a
    controller at steady state writes nothing (docs/performance.md)."""
    body = jobset("invalid-jobset", replicated_job(RJOB_A, 1))
    body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0][
        "image"
    ] = ""
    await create(client, namespace, body)

    async def creation_failed() -> list[Obj]:
        listed = (await client.list(EVENTS, namespace))["items"]
        return [
            e
            for e in listed
            if e["involvedObject"].get("kind") == api.KIND
            and e["involvedObject"].get("name") == "invalid-jobset"
            and e.get("reason") == api.REASON_JOB_CREATION_FAILED
        ]

    events = await wait_for(creation_failed, bool, "the JobCreationFailed Event")
    assert [e["type"] for e in events] == ["Warning"], events
    assert "image" in events[0]["message"], events[0]["message"]
    failed = await wait_condition(client, namespace, "invalid-jobset", "JobCreationFailed")
    found = condition(failed, "JobCreationFailed")
    assert found is not None and found["reason"] == api.REASON_JOB_CREATION_FAILED

    # Let the controller retry the create a few times (it backs off from 5 ms), then look again.
    before = reconciles(controller.manager)
    await wait_for(
        current(lambda: reconciles(controller.manager)),
        lambda n: n >= before + 3,
        "three more reconciles of the refused create",
    )
    await settled(controller, client)
    again = await creation_failed()
    assert len(again) == 1, again
    assert (again[0].get("count") or 1) == 1 and not again[0].get("series"), again[0]
    assert await jobs_of(client, namespace, "invalid-jobset") == []
