"""The controller's Pod-scope gate on the real API server: nothing is created for a Pod-scope
JobSet while the shipped admission policy is not installed, current and bound, and it proceeds
by itself once it is (the controller watches the policies); Job scope is never held.

The policy is cluster-wide and the API server is shared by the session's tests: ``no_policy``
removes it for the test and leaves the cluster as it found it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from controller.jobset import api
from controller.jobset.volumes import status as volume_status
from controller.jobset.volumes.admission import REASON_POLICY_MISSING
from controller.jobset.volumes.podscope import POLICY_NAME
from controller.runtime.client import (
    CLAIMS,
    MUTATING_ADMISSION_POLICIES,
    MUTATING_ADMISSION_POLICY_BINDINGS,
    ApiError,
    KubeClient,
)
from tests.helpers import Kube, wait_for
from tests.support.jobsets import (
    RunningController,
    condition,
    get_jobset,
    jobs_of,
    jobset,
    replicated_job,
    running_controller,
    settled,
    with_mounts,
)
from tests.support.podscope import (
    install_policy,
    policy_applies,
    wait_until_removed,
)
from tests.support.volumes_e2e import claim_template, events_of, template_status, wait_event

Obj = dict[str, Any]

MANIFESTS = "manifests/pod-scope"
BINDING_KIND = "MutatingAdmissionPolicyBinding"


async def _exists(client: KubeClient, resource: Any, name: str) -> bool:
    try:
        await client.get(resource, name)
    except ApiError as err:
        if err.not_found:
            return False
        raise
    return True


@pytest.fixture
async def no_policy(kube: Kube, namespace: str, client: KubeClient) -> AsyncIterator[None]:
    """The Pod-scope policy and binding absent (and no longer applied by the API server) for the
    test; afterwards absent again, or reinstalled as shipped if they were there before."""
    # No kube-controller-manager in this profile: the probe pods' ServiceAccount is made here.
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
    made: Obj = await kube.raw("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", account)
    assert made.get("kind") == "ServiceAccount", made
    before = await _exists(client, MUTATING_ADMISSION_POLICIES, POLICY_NAME) or await _exists(
        client, MUTATING_ADMISSION_POLICY_BINDINGS, POLICY_NAME
    )
    await wait_until_removed(kube, namespace)
    try:
        yield
    finally:
        await wait_until_removed(kube, namespace)
        if before:
            install_policy(kube)
            await wait_for(
                lambda: policy_applies(kube, namespace),
                bool,
                "the API server to apply the reinstalled Pod-scope policy",
            )


def pod_scope_jobset(name: str) -> Obj:
    """2 Jobs x 3 pods (Indexed), a Pod-scope template ``ckpt``: 6 claims."""
    workers = with_mounts(replicated_job("workers", 2, completions=3), "ckpt")
    workers["template"]["spec"]["completionMode"] = "Indexed"
    return jobset(
        name,
        workers,
        volumeClaimPolicies=[{"scope": "Pod", "templates": [claim_template("ckpt")]}],
    )


def job_scope_jobset(name: str) -> Obj:
    workers = with_mounts(replicated_job("workers", 2), "ckpt")
    return jobset(
        name,
        workers,
        volumeClaimPolicies=[{"scope": "Job", "templates": [claim_template("ckpt")]}],
    )


def pod_scope_claims(name: str) -> list[str]:
    return sorted(f"ckpt-{name}-workers-{j}-{p}" for j in range(2) for p in range(3))


async def claims_of(client: KubeClient, namespace: str, name: str) -> list[str]:
    listed = await client.list(CLAIMS, namespace, label_selector=f"{api.JOBSET_NAME}={name}")
    return sorted(c["metadata"]["name"] for c in listed["items"])


def volumes_ready(obj: Obj) -> Obj:
    return condition(obj, volume_status.VOLUMES_READY) or {}


async def wait_missing(client: KubeClient, namespace: str, name: str, *needles: str) -> Obj:
    """The JobSet once VolumesReady=False PodScopePolicyMissing names every one of ``needles``."""

    def says(obj: Obj) -> bool:
        ready = volumes_ready(obj)
        return (
            ready.get("status") == "False"
            and ready.get("reason") == REASON_POLICY_MISSING
            and all(n in ready.get("message", "") for n in needles)
        )

    return await wait_for(
        lambda: get_jobset(client, namespace, name),
        says,
        f"JobSet {name}: VolumesReady=False {REASON_POLICY_MISSING} naming {needles}",
    )


async def assert_nothing_created(
    running: RunningController, client: KubeClient, namespace: str, name: str
) -> None:
    """Once the controller has acted on everything so far, the JobSet has no claim and no Job."""
    await settled(running, client)
    assert await claims_of(client, namespace, name) == []
    assert await jobs_of(client, namespace, name) == []


async def assert_job_scope_unaffected(client: KubeClient, namespace: str, name: str) -> None:
    js = await get_jobset(client, namespace, name)
    assert volumes_ready(js).get("reason") != REASON_POLICY_MISSING, volumes_ready(js)
    assert await claims_of(client, namespace, name) == [f"ckpt-{name}-workers-{i}" for i in (0, 1)]
    assert len(await jobs_of(client, namespace, name)) == 2


# -------------------------------------------------------------------------------------- tests


@pytest.mark.usefixtures("no_policy")
async def test_pod_scope_waits_for_the_policy_and_its_binding(
    kube: Kube, namespace: str, client: KubeClient
) -> None:
    ns = namespace
    async with running_controller(kube, ns) as running:
        # Job scope first: it never waits for the policy.
        await client.create(api.JOBSETS, job_scope_jobset("plain"), ns)
        await wait_for(
            lambda: jobs_of(client, ns, "plain"), lambda jobs: len(jobs) == 2, "plain's 2 Jobs"
        )

        # 1. Not installed: the condition and a Warning Event say what and how; nothing made.
        await client.create(api.JOBSETS, pod_scope_jobset("first"), ns)
        held = await wait_missing(client, ns, "first", repr(POLICY_NAME), MANIFESTS)
        message = volumes_ready(held)["message"]
        assert "which is not installed" in message, message
        assert BINDING_KIND not in message, message
        event = await wait_event(
            kube, ns, "first", REASON_POLICY_MISSING, event_type="Warning", contains=POLICY_NAME
        )
        assert MANIFESTS in event.message
        await assert_nothing_created(running, client, ns, "first")
        # Said once, not on every pass; the status counts the claims it waits to create.
        warnings = [e for e in await events_of(kube, ns, "first") if e.type == "Warning"]
        assert [(e.reason, e.count) for e in warnings] == [(REASON_POLICY_MISSING, 1)], warnings
        counts = template_status(await get_jobset(client, ns, "first"), "ckpt")
        assert (counts["scope"], counts["desired"], counts["existing"]) == ("Pod", 6, 0), counts
        await assert_job_scope_unaffected(client, ns, "plain")
        generation = held["metadata"]["generation"]

        # 2. Installed: the controller sees it (no edit of the JobSet) and creates everything.
        install_policy(kube)
        await wait_for(
            lambda: claims_of(client, ns, "first"),
            lambda names: names == pod_scope_claims("first"),
            "first's 6 Pod-scope claims",
        )
        jobs = await wait_for(
            lambda: jobs_of(client, ns, "first"), lambda jobs: len(jobs) == 2, "first's 2 Jobs"
        )
        for job in jobs:
            index = job["metadata"]["labels"][api.JOB_INDEX]
            volume = job["spec"]["template"]["spec"]["volumes"][0]
            assert volume["persistentVolumeClaim"]["claimName"] == (
                f"ckpt-first-workers-{index}-POD-INDEX"
            )
        going = await wait_for(
            lambda: get_jobset(client, ns, "first"),
            lambda obj: volumes_ready(obj).get("reason") not in (None, REASON_POLICY_MISSING),
            "first's VolumesReady to stop saying the policy is missing",
        )
        assert going["metadata"]["generation"] == generation, "the JobSet was not edited"
        await assert_job_scope_unaffected(client, ns, "plain")

        # 3. Only the binding deleted: a Pod-scope JobSet created afterwards is held, and the
        # condition names the binding.
        await client.delete(MUTATING_ADMISSION_POLICY_BINDINGS, POLICY_NAME)
        await settled(running, client)  # the controller's cache has the deletion
        await client.create(api.JOBSETS, pod_scope_jobset("second"), ns)
        second = await wait_missing(client, ns, "second", BINDING_KIND, repr(POLICY_NAME))
        assert MANIFESTS in volumes_ready(second)["message"]
        await wait_event(
            kube, ns, "second", REASON_POLICY_MISSING, event_type="Warning", contains=BINDING_KIND
        )
        await assert_nothing_created(running, client, ns, "second")
        # first is told as well; what it has stays (nothing is deleted for the gate), and Job
        # scope goes on.
        await wait_missing(client, ns, "first", BINDING_KIND)
        assert await claims_of(client, ns, "first") == pod_scope_claims("first")
        held_jobs = await jobs_of(client, ns, "first")
        assert [bool(j["spec"].get("suspend")) for j in held_jobs] == [False, False]
        await assert_job_scope_unaffected(client, ns, "plain")


@pytest.mark.usefixtures("no_policy")
async def test_an_edited_policy_is_not_the_shipped_one(
    kube: Kube, namespace: str, client: KubeClient
) -> None:
    ns = namespace
    async with running_controller(kube, ns) as running:
        install_policy(kube)
        await client.create(api.JOBSETS, pod_scope_jobset("early"), ns)
        await wait_for(
            lambda: claims_of(client, ns, "early"),
            lambda names: names == pod_scope_claims("early"),
            "early's 6 Pod-scope claims while the shipped policy is installed",
        )

        # Someone edits the installed policy's mutation: the controller sees the update.
        installed = await client.get(MUTATING_ADMISSION_POLICIES, POLICY_NAME)
        expression = installed["spec"]["mutations"][0]["applyConfiguration"]["expression"]
        edited = expression.replace("+ variables.index", "+ variables.index + '-x'")
        assert edited != expression
        path = "/spec/mutations/0/applyConfiguration/expression"
        await client.patch(
            MUTATING_ADMISSION_POLICIES,
            POLICY_NAME,
            [{"op": "replace", "path": path, "value": edited}],
            patch_type="json",
        )
        differs = "differs at spec.mutations[0].applyConfiguration.expression"
        # The JobSet that has its claims is told too (nothing of it is deleted).
        await wait_missing(client, ns, "early", differs)
        await settled(running, client)

        await client.create(api.JOBSETS, job_scope_jobset("plain"), ns)
        await client.create(api.JOBSETS, pod_scope_jobset("edited"), ns)
        held = await wait_missing(client, ns, "edited", differs)
        message = volumes_ready(held)["message"]
        assert repr(POLICY_NAME) in message and "--force-conflicts" in message, message
        assert MANIFESTS in message, message
        await wait_event(
            kube, ns, "edited", REASON_POLICY_MISSING, event_type="Warning", contains=differs
        )
        await wait_for(
            lambda: jobs_of(client, ns, "plain"), lambda jobs: len(jobs) == 2, "plain's 2 Jobs"
        )
        await assert_nothing_created(running, client, ns, "edited")
        await assert_job_scope_unaffected(client, ns, "plain")
        assert await claims_of(client, ns, "early") == pod_scope_claims("early")

        # Reinstalled as the message says (the edit took the field over: --force-conflicts):
        # the held JobSet proceeds.
        install_policy(kube, force_conflicts=True)
        await wait_for(
            lambda: claims_of(client, ns, "edited"),
            lambda names: names == pod_scope_claims("edited"),
            "edited's 6 Pod-scope claims once the shipped policy is back",
        )
        await wait_for(
            lambda: jobs_of(client, ns, "edited"), lambda jobs: len(jobs) == 2, "edited's 2 Jobs"
        )
