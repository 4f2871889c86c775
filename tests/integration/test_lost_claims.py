"""Lost claims (issue 12, item 2): a claim the JobSet had that is deleted out of band, or replaced
by another object of the same name, is never silently replaced by an empty one.

The integration tier has no kube-controller-manager: the test plays pvc-protection (it lifts the
``kubernetes.io/pvc-protection`` finalizer the API server's admission put on every claim).
"""

from __future__ import annotations

from typing import Any

import yaml

from controller.jobset import api
from controller.jobset.volumes import lifecycle as volume_lifecycle
from controller.jobset.volumes import status as volume_status
from controller.jobset.volumes.model import REPLACE_LOST_ANNOTATION
from controller.jobset.volumes.status import (
    ANNOTATIONS_REJECTED,
    REASON_CLAIMS_LOST,
    REASON_CLAIMS_PENDING,
    REASON_CLAIMS_TERMINATING,
)
from controller.runtime.client import CLAIMS, EVENTS, JOBS, KubeClient
from tests.helpers import wait_for
from tests.support.examples import EXAMPLES
from tests.support.jobsets import (
    RunningController,
    condition,
    get_jobset,
    jobs_of,
    settled,
    wait_jobs,
)

Obj = dict[str, Any]
NAME = "resumable"
LOST = "ckpt-resumable-workers-0"


def example() -> Obj:
    loaded: Obj = yaml.safe_load((EXAMPLES / "03-per-job-checkpoints-retained.yaml").read_text())
    return loaded


def volumes_ready(obj: Obj) -> Obj:
    return condition(obj, volume_status.VOLUMES_READY) or {}


async def wait_reason(client: KubeClient, namespace: str, reason: str) -> Obj:
    return await wait_for(
        lambda: get_jobset(client, namespace, NAME),
        lambda obj: volumes_ready(obj).get("reason") == reason,
        f"VolumesReady reason {reason}",
    )


async def warnings(client: KubeClient, namespace: str, reason: str) -> list[Obj]:
    listed = (await client.list(EVENTS, namespace))["items"]
    return [e for e in listed if e.get("reason") == reason and e.get("type") == "Warning"]


async def release(client: KubeClient, namespace: str, name: str) -> None:
    """Play pvc-protection once no pod uses the claim: let the deleted claim go."""
    await client.patch(CLAIMS, name, {"metadata": {"finalizers": None}}, namespace)

    async def gone() -> bool:
        listed = (await client.list(CLAIMS, namespace))["items"]
        return not any(c["metadata"]["name"] == name for c in listed)

    await wait_for(gone, bool, f"claim {name} to be gone")


async def start(client: KubeClient, namespace: str) -> Obj:
    """The example running: both Jobs created, the claims recorded in the status."""
    await client.create(api.JOBSETS, example(), namespace)
    await wait_jobs(client, namespace, NAME, 2)
    claim = await client.get(CLAIMS, LOST, namespace)
    recorded = await get_jobset(client, namespace, NAME)
    entries = recorded["status"]["volumes"]["claimUIDs"]
    ckpt = next(e for e in entries if e["template"] == "ckpt")
    assert ckpt["uids"].split(",")[0] == claim["metadata"]["uid"][:8], entries
    return claim


async def test_a_claim_deleted_out_of_band_is_lost_not_recreated_empty(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Before: while its pods still used it the status said "not created (or adopted) yet", then
    the controller created a new, empty claim of the name and the next Job mounted it."""
    original = await start(client, namespace)
    await client.delete(CLAIMS, LOST, namespace)  # out of band: pvc-protection keeps it

    terminating = await wait_reason(client, namespace, REASON_CLAIMS_TERMINATING)
    assert volumes_ready(terminating)["status"] == "False"
    assert LOST in volumes_ready(terminating)["message"]

    await release(client, namespace, LOST)
    lost = await wait_reason(client, namespace, REASON_CLAIMS_LOST)
    message = volumes_ready(lost)["message"]
    accept = f"{LOST}@{original['metadata']['uid'][:8]}"
    assert f"{REPLACE_LOST_ANNOTATION}={accept}" in message, message
    assert f"kubectl annotate jobset {NAME} -n {namespace} --overwrite " in message, message
    await wait_for(
        lambda: warnings(client, namespace, REASON_CLAIMS_LOST),
        bool,
        "a Warning Event ClaimsLost",
    )

    # The Job that mounts it ends (its attempt restarts, say): it is not created again, while
    # the other one stays; and no claim of the lost name comes back.
    await client.delete(JOBS, f"{NAME}-workers-0", namespace, propagation="Background")
    await settled(controller, client)
    names = [j["metadata"]["name"] for j in await jobs_of(client, namespace, NAME)]
    assert names == [f"{NAME}-workers-1"], names
    listed = (await client.list(CLAIMS, namespace))["items"]
    assert LOST not in [c["metadata"]["name"] for c in listed]
    still = await get_jobset(client, namespace, NAME)
    assert volumes_ready(still)["reason"] == REASON_CLAIMS_LOST

    # An acceptance of another loss (another uid prefix) is no acceptance of this one.
    wrong = {"metadata": {"annotations": {REPLACE_LOST_ANNOTATION: f"{LOST}@00000000"}}}
    await client.patch(api.JOBSETS, NAME, wrong, namespace)
    await settled(controller, client)
    listed = (await client.list(CLAIMS, namespace))["items"]
    assert LOST not in [c["metadata"]["name"] for c in listed]
    # ... and it is not ignored silently: a condition and a Warning Event quote it and say why.
    rejected = condition(await get_jobset(client, namespace, NAME), ANNOTATIONS_REJECTED)
    assert rejected is not None and rejected["status"] == "True", rejected
    assert rejected["reason"] == "ReplaceLostClaimsRejected", rejected
    assert f'"{LOST}@00000000"' in rejected["message"], rejected["message"]
    assert f"had uid {accept.split('@')[1]}, not 00000000" in rejected["message"]
    await wait_for(
        lambda: warnings(client, namespace, "ReplaceLostClaimsRejected"),
        bool,
        "a Warning Event ReplaceLostClaimsRejected",
    )

    # The explicit opt-in: an empty claim replaces exactly that loss, and the Job starts again.
    accepted = {"metadata": {"annotations": {REPLACE_LOST_ANNOTATION: accept}}}
    await client.patch(api.JOBSETS, NAME, accepted, namespace)
    jobs = await wait_jobs(client, namespace, NAME, 2)
    replacement = await client.get(CLAIMS, LOST, namespace)
    assert replacement["metadata"]["uid"] != original["metadata"]["uid"]
    volumes_of = jobs[0]["spec"]["template"]["spec"]["volumes"]
    assert {"name": "ckpt", "persistentVolumeClaim": {"claimName": LOST}} in volumes_of
    await wait_for(
        lambda: warnings(client, namespace, volume_lifecycle.REASON_CLAIM_REPLACED),
        bool,
        "a Warning Event LostClaimReplaced",
    )
    await wait_reason(client, namespace, REASON_CLAIMS_PENDING)
    # The entry did its work: nothing is rejected any more (the annotation may stay).
    await wait_for(
        lambda: get_jobset(client, namespace, NAME),
        lambda js: (condition(js, ANNOTATIONS_REJECTED) or {}).get("status") == "False",
        f"{ANNOTATIONS_REJECTED} to turn False",
    )


async def test_a_copy_of_a_deleted_claim_is_not_the_claim(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """A claim deleted and created again from its own YAML (labels and owner annotation copied)
    is another, empty claim: Lost, never mounted. Before, the copy passed as the JobSet's own."""
    original = await start(client, namespace)
    await client.delete(CLAIMS, LOST, namespace)
    await release(client, namespace, LOST)
    meta = original["metadata"]
    copy = {
        "metadata": {
            "name": LOST,
            "labels": meta["labels"],
            "annotations": meta["annotations"],
            "ownerReferences": meta.get("ownerReferences"),
        },
        "spec": {k: v for k, v in original["spec"].items() if k != "volumeName"},
    }
    made = await client.create(CLAIMS, copy, namespace)
    # The controller may see the claim gone before the copy appears: ClaimsLost "(deleted)"
    # first, then a message naming the copy (a count-only change of the message, so paced).
    copy_uid = made["metadata"]["uid"][:8]
    await wait_for(
        lambda: get_jobset(client, namespace, NAME),
        lambda obj: (
            volumes_ready(obj).get("reason") == REASON_CLAIMS_LOST
            and copy_uid in str(volumes_ready(obj).get("message"))
        ),
        "VolumesReady ClaimsLost naming the copy's uid",
    )

    await client.delete(JOBS, f"{NAME}-workers-0", namespace, propagation="Background")
    await settled(controller, client)
    names = [j["metadata"]["name"] for j in await jobs_of(client, namespace, NAME)]
    assert names == [f"{NAME}-workers-1"], names
    kept = await client.get(CLAIMS, LOST, namespace)
    assert kept["metadata"]["uid"] == made["metadata"]["uid"]
    assert not kept["metadata"].get("deletionTimestamp")
