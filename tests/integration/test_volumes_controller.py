"""Volume claim policies against a real API server (no binding here: that is the e2e tier)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from controller.jobset import api, volumes
from controller.jobset.volumes.model import OWNER_UID_ANNOTATION, RETAINED_FROM_ANNOTATION
from controller.runtime.client import CLAIMS, JOBS, KubeClient
from tests.helpers import Kube, wait_for
from tests.support.examples import EXAMPLES
from tests.support.jobsets import (
    RunningController,
    assert_no_writes_at_steady_state,
    complete_job,
    condition,
    get_jobset,
    jobs_of,
    running_controller,
    settled,
    wait_condition,
    wait_jobs,
)

Obj = dict[str, Any]


def example(name: str) -> Obj:
    loaded: Obj = yaml.safe_load((EXAMPLES / name).read_text())
    return loaded


async def claim_names(client: KubeClient, namespace: str) -> list[str]:
    listed = await client.list(CLAIMS, namespace)
    return sorted(c["metadata"]["name"] for c in listed["items"])


def pod_volumes(job: Obj) -> dict[str, str]:
    spec = job["spec"]["template"]["spec"]
    return {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in spec.get("volumes") or []}


@pytest.mark.usefixtures("controller")
async def test_seed_example_claim_and_mounts(client: KubeClient, namespace: str) -> None:
    await client.create(api.JOBSETS, example("01-seed-volume-policy.yaml"), namespace)
    # B depends on A's completion, and in this tier only the test completes Jobs.
    first = await wait_jobs(client, namespace, "volume-sample", 2)
    by_name = {j["metadata"]["name"]: j for j in first}
    assert sorted(by_name) == ["volume-sample-a-0", "volume-sample-workers-0"]
    await complete_job(client, namespace, by_name["volume-sample-a-0"])
    jobs = await wait_jobs(client, namespace, "volume-sample", 4)
    claim = await client.get(CLAIMS, "pretrained-model-volume-sample", namespace)
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    assert claim["spec"]["storageClassName"] == "my-storage-class"
    assert claim["spec"]["resources"]["requests"]["storage"] == "1000Gi"
    assert claim["metadata"]["labels"][api.JOBSET_NAME] == "volume-sample"
    js = await get_jobset(client, namespace, "volume-sample")
    assert claim["metadata"]["ownerReferences"][0]["uid"] == js["metadata"]["uid"]
    assert volumes.FINALIZER in js["metadata"]["finalizers"]
    by_name = {j["metadata"]["name"]: j for j in jobs}
    for name in ("volume-sample-a-0", "volume-sample-b-0", "volume-sample-b-1"):
        assert pod_volumes(by_name[name]) == {"pretrained-model": "pretrained-model-volume-sample"}
    assert pod_volumes(by_name["volume-sample-workers-0"]) == {}
    await wait_for(
        lambda: get_jobset(client, namespace, "volume-sample"),
        lambda obj: (obj.get("status") or {}).get("volumes") is not None,
        "volume status",
    )


@pytest.mark.usefixtures("controller")
async def test_retain_then_adopt_on_reapply(client: KubeClient, namespace: str) -> None:
    body = example("03-per-job-checkpoints-retained.yaml")
    await client.create(api.JOBSETS, body, namespace)
    await wait_jobs(client, namespace, "resumable", 2)
    assert await claim_names(client, namespace) == [
        "ckpt-resumable-workers-0",
        "ckpt-resumable-workers-1",
        "dataset-resumable",
    ]
    first_uid = (await get_jobset(client, namespace, "resumable"))["metadata"]["uid"]
    await client.delete(api.JOBSETS, "resumable", namespace)

    async def gone() -> bool:
        listed = await client.list(api.JOBSETS, namespace)
        return not listed["items"]

    await wait_for(gone, bool, "the JobSet to be deleted (finalizer removed)")
    remaining = {c["metadata"]["name"]: c for c in (await client.list(CLAIMS, namespace))["items"]}
    live = {n: c for n, c in remaining.items() if not c["metadata"].get("deletionTimestamp")}
    assert sorted(live) == ["ckpt-resumable-workers-0", "ckpt-resumable-workers-1"]
    for claim in live.values():
        assert not claim["metadata"].get("ownerReferences")
        assert claim["metadata"]["annotations"][RETAINED_FROM_ANNOTATION] == first_uid

    # Play kube-controller-manager (absent here): pvc-protection lets the deleted claim go, and
    # the garbage collector deletes the old JobSet's Jobs.
    for name, claim in remaining.items():
        if claim["metadata"].get("deletionTimestamp"):
            await client.patch(CLAIMS, name, {"metadata": {"finalizers": None}}, namespace)
    for job in await jobs_of(client, namespace, "resumable"):
        await client.delete(JOBS, job["metadata"]["name"], namespace, propagation="Background")
    await wait_for(
        lambda: jobs_of(client, namespace, "resumable"), lambda j: not j, "old Jobs gone"
    )

    # Re-applying the unchanged manifest adopts the retained claims (upstream bug 1307).
    await client.create(api.JOBSETS, body, namespace)
    second = await get_jobset(client, namespace, "resumable")

    async def adopted() -> bool:
        claim = await client.get(CLAIMS, "ckpt-resumable-workers-0", namespace)
        return bool(
            claim["metadata"]["annotations"].get(OWNER_UID_ANNOTATION) == second["metadata"]["uid"]
        )

    await wait_for(adopted, bool, "the retained claim to be adopted")
    jobs = await wait_jobs(client, namespace, "resumable", 2)
    assert all(
        j["metadata"]["ownerReferences"][0]["uid"] == second["metadata"]["uid"] for j in jobs
    )
    assert pod_volumes(jobs[0])["ckpt"] == "ckpt-resumable-workers-0"
    assert pod_volumes(jobs[1])["ckpt"] == "ckpt-resumable-workers-1"


async def test_foreign_claim_is_a_conflict_until_removed(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    foreign = {
        "metadata": {"name": "initializer-trainjob-shared", "labels": {"owner": "someone-else"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    await client.create(CLAIMS, foreign, namespace)
    await client.create(api.JOBSETS, example("02-upstream-shared-initializer.yaml"), namespace)
    conflicted = await wait_condition(client, namespace, "trainjob-shared", "VolumeClaimConflict")
    message = condition(conflicted, "VolumeClaimConflict")["message"]  # type: ignore[index]
    assert "initializer-trainjob-shared" in message
    await settled(controller, client)  # the conflict and what followed it were reconciled
    assert await jobs_of(client, namespace, "trainjob-shared") == []
    untouched = await client.get(CLAIMS, "initializer-trainjob-shared", namespace)
    assert untouched["metadata"]["labels"] == {"owner": "someone-else"}
    assert not untouched["metadata"].get("ownerReferences")
    await client.delete(CLAIMS, "initializer-trainjob-shared", namespace)
    # Without kube-controller-manager the pvc-protection finalizer must be lifted by hand.
    await client.patch(
        CLAIMS, "initializer-trainjob-shared", {"metadata": {"finalizers": None}}, namespace
    )
    await wait_jobs(client, namespace, "trainjob-shared", 1)
    claim = await client.get(CLAIMS, "initializer-trainjob-shared", namespace)
    assert claim["metadata"]["labels"][api.JOBSET_NAME] == "trainjob-shared"


async def test_copied_name_label_is_no_proof_of_ownership(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """A claim with the generated name and the JobSet's name label, but that this controller
    never made or retained (the label copied by a chart or an ``-o yaml`` round trip), is a
    conflict: never mounted, changed or deleted, also when the JobSet (whenDeleted: Delete) goes.
    It used to be adopted ("retained from an earlier JobSet") and then deleted with the JobSet."""
    name, claim_name = "trainjob-shared", "initializer-trainjob-shared"
    copied = {
        "metadata": {"name": claim_name, "labels": {api.JOBSET_NAME: name}},
        # Everything the template asks for: only the proof of ownership is missing.
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "5Gi"}}},
    }
    await client.create(CLAIMS, copied, namespace)
    await client.create(api.JOBSETS, example("02-upstream-shared-initializer.yaml"), namespace)
    conflicted = await wait_condition(client, namespace, name, "VolumeClaimConflict")
    message = condition(conflicted, "VolumeClaimConflict")["message"]  # type: ignore[index]
    assert claim_name in message and RETAINED_FROM_ANNOTATION in message, message
    await settled(controller, client)
    assert await jobs_of(client, namespace, name) == []
    untouched = await client.get(CLAIMS, claim_name, namespace)
    assert untouched["metadata"]["labels"] == {api.JOBSET_NAME: name}
    assert not untouched["metadata"].get("ownerReferences")
    assert OWNER_UID_ANNOTATION not in (untouched["metadata"].get("annotations") or {})

    await client.delete(api.JOBSETS, name, namespace)

    async def jobset_gone() -> bool:
        listed = (await client.list(api.JOBSETS, namespace))["items"]
        return not any(j["metadata"]["name"] == name for j in listed)

    await wait_for(jobset_gone, bool, "the JobSet to be deleted (its finalizer removed)")
    kept = await client.get(CLAIMS, claim_name, namespace)
    assert not kept["metadata"].get("deletionTimestamp"), "a claim it never owned was deleted"
    assert kept["metadata"]["uid"] == untouched["metadata"]["uid"]


async def test_zero_writes_at_steady_state_with_volumes(
    kube: Kube, namespace: str, client: KubeClient
) -> None:
    async with running_controller(kube, namespace) as running:
        await client.create(api.JOBSETS, example("03-per-job-checkpoints-retained.yaml"), namespace)
        await wait_jobs(client, namespace, "resumable", 2)
        await assert_no_writes_at_steady_state(running, client)


@pytest.mark.usefixtures("controller")
async def test_scale_down_with_when_scaled_delete(client: KubeClient, namespace: str) -> None:
    body = example("03-per-job-checkpoints-retained.yaml")
    body["spec"]["replicatedJobs"][0]["replicas"] = 3
    body["spec"]["volumeClaimPolicies"][0]["retentionPolicy"]["whenScaled"] = "Delete"
    await client.create(api.JOBSETS, body, namespace)
    await wait_jobs(client, namespace, "resumable", 3)
    ckpts = [f"ckpt-resumable-workers-{i}" for i in range(3)]
    assert await claim_names(client, namespace) == [*ckpts, "dataset-resumable"]

    js = await get_jobset(client, namespace, "resumable")
    rjobs = js["spec"]["replicatedJobs"]
    rjobs[0]["replicas"] = 1
    await client.patch(api.JOBSETS, "resumable", {"spec": {"replicatedJobs": rjobs}}, namespace)

    async def live() -> list[str]:
        listed = (await client.list(CLAIMS, namespace))["items"]
        return sorted(
            c["metadata"]["name"] for c in listed if not c["metadata"].get("deletionTimestamp")
        )

    await wait_for(
        live, lambda names: names == [ckpts[0], "dataset-resumable"], "scaled-away claims deleted"
    )
    await wait_jobs(client, namespace, "resumable", 1)
