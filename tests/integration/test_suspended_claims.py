"""Claims of a suspended JobSet (issue 18, item 3), on the real API server: a JobSet created
suspended (as Kueue's webhook creates it, to wait in a queue) makes no claim until it is resumed,
and says so; resumed, it makes its claims, then the Jobs that mount them; suspended again
(preempted), its Jobs are suspended and its claims kept, the same objects. With
``creationPolicy.whenSuspended: Create`` the claims are made while it waits.

The integration tier has no kube-controller-manager: claims stay Pending, and the test plays
pvc-protection (it lifts the finalizer the API server's admission puts on every claim).
"""

from __future__ import annotations

from typing import Any

from controller.jobset import api
from controller.jobset.volumes import status as volume_status
from controller.jobset.volumes.record import parse_record
from controller.jobset.volumes.status import (
    REASON_CLAIMS_LOST,
    REASON_CLAIMS_PENDING,
    REASON_WAITING_FOR_RESUME,
)
from controller.runtime.client import CLAIMS, EVENTS, KubeClient
from tests.helpers import Kube, wait_for
from tests.support.jobsets import (
    RunningController,
    assert_no_writes_at_steady_state,
    condition,
    get_jobset,
    jobs_of,
    jobset,
    replicated_job,
    running_controller,
    settled,
    wait_jobs,
    with_mounts,
)

Obj = dict[str, Any]
NAME = "queued"
SHARED, CKPT_0, CKPT_1 = "data-queued", "ckpt-queued-workers-0", "ckpt-queued-workers-1"


def _template(name: str) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


def queued(creation: Obj | None = None) -> Obj:
    """Two workers mounting a shared claim and one claim each, and a sidecar without volumes;
    suspended, as Kueue's webhook creates a JobSet."""
    policies: list[Obj] = [
        {"templates": [_template("data")]},
        {"templates": [_template("ckpt")], "scope": "Job"},
    ]
    if creation is not None:
        for found in policies:
            found["creationPolicy"] = creation
    return jobset(
        NAME,
        with_mounts(replicated_job("workers", 2), "data", "ckpt"),
        replicated_job("sidecar"),
        suspend=True,
        volumeClaimPolicies=policies,
    )


async def claims(client: KubeClient, namespace: str) -> dict[str, Obj]:
    return {c["metadata"]["name"]: c for c in (await client.list(CLAIMS, namespace))["items"]}


def volumes_ready(obj: Obj) -> Obj:
    return condition(obj, volume_status.VOLUMES_READY) or {}


def mounted(job: Obj) -> list[str]:
    pod = job["spec"]["template"]["spec"]
    return sorted(
        v["persistentVolumeClaim"]["claimName"]
        for v in pod.get("volumes") or []
        if "persistentVolumeClaim" in v
    )


async def events(client: KubeClient, namespace: str) -> list[tuple[str, str]]:
    listed = (await client.list(EVENTS, namespace))["items"]
    return sorted(
        (e.get("type", ""), e.get("reason", ""))
        for e in listed
        if (e.get("involvedObject") or {}).get("name") == NAME
    )


async def test_a_suspended_jobset_makes_its_claims_once_resumed_and_keeps_them(
    kube: Kube, client: KubeClient, namespace: str
) -> None:
    async with running_controller(kube, namespace) as running:
        await client.create(api.JOBSETS, queued(), namespace)
        waiting = await wait_for(
            lambda: get_jobset(client, namespace, NAME),
            lambda obj: volumes_ready(obj).get("reason") == REASON_WAITING_FOR_RESUME,
            "VolumesReady to say the claims wait for the resume",
        )
        await settled(running, client)
        # Queued: no claim, no Job that would mount one; the sidecar's Job waits suspended.
        assert await claims(client, namespace) == {}
        jobs = await jobs_of(client, namespace, NAME)
        assert [(j["metadata"]["name"], j["spec"]["suspend"]) for j in jobs] == [
            ("queued-sidecar-0", True)
        ]
        ready = volumes_ready(await get_jobset(client, namespace, NAME))
        assert ready["status"] == "False", ready
        assert ready["message"] == (
            "3 of 3 claims are created when the JobSet is resumed: data-queued, "
            "ckpt-queued-workers-0, ckpt-queued-workers-1. It is suspended; a volume claim "
            "policy with creationPolicy.whenSuspended: Create makes its claims while the JobSet "
            "waits"
        )
        counts = {
            t["name"]: (t["desired"], t["existing"])
            for t in waiting["status"]["volumes"]["templates"]
        }
        assert counts == {"data": (1, 0), "ckpt": (2, 0)}
        assert "claimUIDs" not in waiting["status"]["volumes"]
        # One Event: the suspension's. The wait for the resume is no Event of its own.
        await wait_for(
            lambda: events(client, namespace),
            lambda found: found == [("Normal", api.REASON_SUSPENDED)],
            "the Suspended Event, and no other",
        )
        await assert_no_writes_at_steady_state(running, client)

        # Admitted: resumed. The claims, then the Jobs that mount them.
        await client.patch(api.JOBSETS, NAME, {"spec": {"suspend": False}}, namespace)
        jobs = await wait_jobs(client, namespace, NAME, 3)
        made = await claims(client, namespace)
        assert sorted(made) == [CKPT_0, CKPT_1, SHARED]
        by_name = {j["metadata"]["name"]: j for j in jobs}
        assert mounted(by_name["queued-workers-0"]) == [CKPT_0, SHARED]
        assert mounted(by_name["queued-workers-1"]) == [CKPT_1, SHARED]
        assert [j["spec"]["suspend"] for j in jobs] == [False, False, False]
        recorded = await get_jobset(client, namespace, NAME)
        record = parse_record(recorded["status"]["volumes"])
        assert sorted(record.uids.values()) == sorted(
            c["metadata"]["uid"][:8] for c in made.values()
        )

        # Preempted: suspended again. Its Jobs are suspended, its claims kept: the same objects.
        await client.patch(api.JOBSETS, NAME, {"spec": {"suspend": True}}, namespace)
        await wait_for(
            lambda: jobs_of(client, namespace, NAME),
            lambda found: [j["spec"]["suspend"] for j in found] == [True, True, True],
            "every Job suspended",
        )
        await settled(running, client)
        kept = await claims(client, namespace)
        assert {n: c["metadata"]["uid"] for n, c in kept.items()} == {
            n: c["metadata"]["uid"] for n, c in made.items()
        }
        assert not any(c["metadata"].get("deletionTimestamp") for c in kept.values())
        assert len(await jobs_of(client, namespace, NAME)) == 3, "no Job deleted"

        # A claim lost while it waits is not made again, empty, when it is resumed.
        await client.delete(CLAIMS, CKPT_1, namespace)
        await client.patch(CLAIMS, CKPT_1, {"metadata": {"finalizers": None}}, namespace)
        await wait_for(
            lambda: get_jobset(client, namespace, NAME),
            lambda obj: volumes_ready(obj).get("reason") == REASON_CLAIMS_LOST,
            "VolumesReady to say the claim is lost",
        )
        await client.patch(api.JOBSETS, NAME, {"spec": {"suspend": False}}, namespace)
        await wait_for(
            lambda: jobs_of(client, namespace, NAME),
            lambda found: (
                {j["metadata"]["name"]: j["spec"]["suspend"] for j in found}
                == {"queued-sidecar-0": False, "queued-workers-0": False, "queued-workers-1": True}
            ),
            "the Jobs resumed but the one whose claim is lost",
        )
        await settled(running, client)
        assert CKPT_1 not in await claims(client, namespace)
        lost = volumes_ready(await get_jobset(client, namespace, NAME))
        assert lost["reason"] == REASON_CLAIMS_LOST, lost


async def test_creation_policy_create_makes_the_claims_while_suspended(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    await client.create(api.JOBSETS, queued({"whenSuspended": "Create"}), namespace)
    jobs = await wait_jobs(client, namespace, NAME, 3)
    assert sorted(await claims(client, namespace)) == [CKPT_0, CKPT_1, SHARED]
    by_name = {j["metadata"]["name"]: j for j in jobs}
    assert mounted(by_name["queued-workers-0"]) == [CKPT_0, SHARED]
    assert [j["spec"]["suspend"] for j in jobs] == [True, True, True]
    await settled(controller, client)
    ready = volumes_ready(await get_jobset(client, namespace, NAME))
    # No provisioner in this tier: made and waiting for a volume, not for the resume.
    assert ready["reason"] == REASON_CLAIMS_PENDING, ready
