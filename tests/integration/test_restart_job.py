"""The RestartJob feature gate (upstream alpha) beyond upstream's scenarios: admission by the
default and the alpha CRD, a controller whose gate is off, the restart budget shared by Job and
JobSet restarts, and the claims of a restarted Job (this tier plays the Job controller and the
garbage collector, as the upstream ports do)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.jobset import api
from controller.runtime.client import CLAIMS, EVENTS, JOBS, ApiError, KubeClient
from tests.helpers import Kube, wait_for
from tests.support.crd import ALPHA_CRD_FILE, install_crd
from tests.support.jobsets import (
    RunningController,
    assert_no_writes_at_steady_state,
    collect_garbage,
    condition,
    fail_job,
    get_jobset,
    jobs_of,
    jobset,
    replicated_job,
    running_controller,
    settled,
    wait_condition,
    wait_jobs,
    with_mounts,
)

Obj = dict[str, Any]

CLAIM_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


def restart_job_set(name: str, action: str = api.RESTART_JOB, max_restarts: int = 1) -> Obj:
    """Two workers, each with its own Job-scope claim ``ckpt``; any failure restarts the Job."""
    return jobset(
        name,
        with_mounts(replicated_job("workers", 2), "ckpt"),
        failurePolicy={"maxRestarts": max_restarts, "rules": [{"action": action}]},
        volumeClaimPolicies=[
            {"scope": "Job", "templates": [{"metadata": {"name": "ckpt"}, "spec": CLAIM_SPEC}]}
        ],
    )


async def events_of(client: KubeClient, namespace: str, name: str, reason: str) -> list[Obj]:
    listed = (await client.list(EVENTS, namespace))["items"]
    return [
        e
        for e in listed
        if (e.get("involvedObject") or {}).get("name") == name and e.get("reason") == reason
    ]


def claim_of(job: Obj) -> str:
    volumes = job["spec"]["template"]["spec"]["volumes"]
    return str(
        next(v for v in volumes if v["name"] == "ckpt")["persistentVolumeClaim"]["claimName"]
    )


async def replaced(client: KubeClient, namespace: str, name: str, old: Obj) -> Obj:
    """Play the garbage collector until ``old``'s name holds a new Job; that Job."""

    async def look() -> Obj | None:
        await collect_garbage(client, namespace, name)
        try:
            job = await client.get(JOBS, old["metadata"]["name"], namespace)
        except ApiError as err:
            if err.not_found:
                return None
            raise
        return None if job["metadata"]["uid"] == old["metadata"]["uid"] else job

    found = await wait_for(look, lambda job: job is not None, f"{old['metadata']['name']} again")
    assert found is not None
    return found


async def test_default_crd_refuses_restart_job_and_alpha_crd_bounds_replicas(
    kube: Kube, namespace: str, client: KubeClient
) -> None:
    """Gate off (default CRD): both actions refused with upstream's message. Alpha CRD: accepted,
    but not with a replicated job of more than 1024 replicas (upstream's limit)."""
    for action in api.RESTART_JOB_ACTIONS:
        with pytest.raises(ApiError) as refused:
            await client.create(api.JOBSETS, restart_job_set("gated", action), namespace)
        assert api.MESSAGE_RESTART_JOB_GATED in str(refused.value)
    await install_crd(kube, ALPHA_CRD_FILE)
    try:
        await client.create(api.JOBSETS, restart_job_set("accepted"), namespace)
        big = jobset(
            "big",
            replicated_job("workers", 1025),
            failurePolicy={"rules": [{"action": api.RESTART_JOB_IGNORE_MAX}]},
        )
        with pytest.raises(ApiError) as refused:
            await client.create(api.JOBSETS, big, namespace)
        assert api.MESSAGE_RESTART_JOB_REPLICAS in str(refused.value)
        big["spec"]["replicatedJobs"][0]["replicas"] = 1024
        big["spec"]["failurePolicy"]["rules"][0]["action"] = api.RESTART_JOBSET
        big["metadata"]["name"] = "big-restart-jobset"
        await client.create(api.JOBSETS, big, namespace)  # the bound is for RestartJob only
    finally:
        await install_crd(kube)


async def test_gate_off_in_controller_is_a_condition_not_a_restart(
    kube: Kube, namespace: str, alpha_crd: KubeClient
) -> None:
    """The alpha CRD admits a RestartJob policy, but the controller runs without the gate: the
    JobSet gets SpecInvalid and one Warning Event naming the gate, nothing is created, and it is
    neither failed nor restarted; turning the gate on lets the same JobSet run."""
    client = alpha_crd
    await client.create(api.JOBSETS, restart_job_set("nogate"), namespace)
    async with running_controller(kube, namespace) as running:
        invalid = await wait_condition(client, namespace, "nogate", api.SPEC_INVALID)
        message = condition(invalid, api.SPEC_INVALID)["message"]  # type: ignore[index]
        # The parser runs the rules of the CRD made for the controller's gates (all off).
        assert api.MESSAGE_RESTART_JOB_GATED in message, message
        events = await wait_for(
            lambda: events_of(client, namespace, "nogate", api.REASON_SPEC_INVALID),
            bool,
            "the SpecInvalid Event",
        )
        assert [(e["type"], e["message"]) for e in events] == [("Warning", message)]
        await assert_no_writes_at_steady_state(running, client)
        stored = await get_jobset(client, namespace, "nogate")
        assert await jobs_of(client, namespace, "nogate") == []
        assert not stored["status"].get("terminalState")
        assert not stored["status"].get("restarts")
    async with running_controller(kube, namespace, "--feature-gates=RestartJob=true"):
        await wait_jobs(client, namespace, "nogate", 2)
        await wait_condition(client, namespace, "nogate", api.SPEC_INVALID, status="False")


async def test_restarted_job_keeps_its_job_scope_claim(
    restart_job_controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """RestartJob replaces the failed Job only; its Job-scope claim is the same object (same
    uid) and the new Job mounts it; the other Job and its claim are untouched."""
    await client.create(api.JOBSETS, restart_job_set("keep"), namespace)
    jobs = await wait_jobs(client, namespace, "keep", 2)
    claims = {
        c["metadata"]["name"]: c["metadata"]["uid"]
        for c in (await client.list(CLAIMS, namespace))["items"]
    }
    assert sorted(claims) == ["ckpt-keep-workers-0", "ckpt-keep-workers-1"]
    await fail_job(client, namespace, jobs[1])
    new = await replaced(client, namespace, "keep", jobs[1])
    assert new["metadata"]["labels"][api.JOB_RESTART_ATTEMPT] == "1"
    assert claim_of(new) == claim_of(jobs[1]) == "ckpt-keep-workers-1"
    after = {
        c["metadata"]["name"]: (c["metadata"]["uid"], c["metadata"].get("deletionTimestamp"))
        for c in (await client.list(CLAIMS, namespace))["items"]
    }
    assert after == {name: (uid, None) for name, uid in claims.items()}
    untouched = await client.get(JOBS, jobs[0]["metadata"]["name"], namespace)
    assert untouched["metadata"]["uid"] == jobs[0]["metadata"]["uid"]
    stored = await get_jobset(client, namespace, "keep")
    workers = stored["status"]["replicatedJobsStatus"][0]
    assert (workers[api.JOB_RESTARTS], workers[api.JOB_RESTARTS_TOWARDS_MAX]) == ([0, 1], [0, 1])
    await assert_no_writes_at_steady_state(restart_job_controller, client)


async def test_job_restarts_use_up_max_restarts(
    restart_job_controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """maxRestarts 1: the first failure restarts the Job; the recreated Job failing fails the
    JobSet with ReachedMaxRestarts (Job restarts count towards the same budget)."""
    await client.create(api.JOBSETS, restart_job_set("budget"), namespace)
    jobs = await wait_jobs(client, namespace, "budget", 2)
    await fail_job(client, namespace, jobs[0])
    new = await replaced(client, namespace, "budget", jobs[0])
    await settled(restart_job_controller, client)
    await fail_job(client, namespace, new)
    failed = await wait_condition(client, namespace, "budget", api.FAILED)
    found = condition(failed, api.FAILED)
    assert found is not None
    assert found["reason"] == api.REASON_REACHED_MAX_RESTARTS
    assert found["message"] == (
        f"{api.MESSAGE_REACHED_MAX_RESTARTS} (first failed job: {new['metadata']['name']})"
    )
    assert (failed["status"]["restarts"], failed["status"]["terminalState"]) == (0, "Failed")
