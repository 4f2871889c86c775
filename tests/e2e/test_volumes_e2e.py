"""Volume claim policies end to end: the controller as its own process on the whole control plane.

Pods really run on KWOK nodes, claims really bind (kube-controller-manager's PV binder and the
test provisioner), pvc-protection and garbage collection really collect. Every test gets a fresh
namespace and its own controller process watching it (leader election on, a unique lease).
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from controller.jobset import api, volumes
from controller.jobset.volumes import lifecycle as volume_lifecycle
from controller.jobset.volumes import status as volume_status
from controller.jobset.volumes.lifecycle import (
    REASON_CLAIM_ADOPTED,
    REASON_CLAIM_CREATED,
    REASON_CLAIM_DELETED,
    REASON_CLAIM_EXPANDED,
    REASON_CLAIM_RETAINED,
)
from controller.jobset.volumes.model import (
    CLAIM_SCOPE_LABEL,
    CLAIM_TEMPLATE_LABEL,
    OWNER_UID_ANNOTATION,
    RETAINED_FROM_ANNOTATION,
    SELECTED_NODE_ANNOTATION,
)
from controller.jobset.volumes.status import (
    EXPANSION_BLOCKED,
    REASON_CLAIM_CONFLICT,
    REASON_CLAIMS_BOUND,
    REASON_CLAIMS_RELEASED,
    REASON_EXPANSION_NOT_SUPPORTED,
    REASON_WAITING_FOR_FIRST_CONSUMER,
    VOLUME_CLAIM_CONFLICT,
)
from controller.runtime.client import CLAIMS, JOBS, PODS, KubeClient
from tests.helpers import Kube, wait_for
from tests.support.jobsets import (
    condition,
    get_jobset,
    jobs_of,
    jobset,
    replicated_job,
    settled_process,
    with_pod_annotations,
)
from tests.support.volumes_e2e import (
    EXIT_CODE,
    QUOTAS,
    RUN_DURATION,
    VOLUMES,
    ControllerProcesses,
    capacity,
    claim_template,
    example,
    find,
    growing_jobset,
    job_claims,
    mounting,
    phase,
    pod_claims,
    pods_of,
    quantity,
    raise_storage,
    template_status,
    wait_claim_phase,
    wait_event,
    wait_exists,
    wait_gone,
    wait_jobset,
    wait_live_jobs,
    wait_running_pods,
)

Obj = dict[str, Any]


# ----------------------------------------------------------------------------- 1. example 01


async def test_seed_example_claim_binds_is_mounted_and_jobset_completes(
    controller: ControllerProcesses, client: KubeClient, full_kube: Kube, full_namespace: str
) -> None:
    ns = full_namespace
    body = example("01-seed-volume-policy.yaml")
    body["spec"]["volumePolicy"]["volumeClaimTemplates"][0]["spec"]["storageClassName"] = "standard"
    await client.create(api.JOBSETS, body, ns)
    name, claim_name = "volume-sample", "pretrained-model-volume-sample"

    created = await wait_exists(client, CLAIMS, claim_name, ns)
    js = await get_jobset(client, ns, name)
    assert created["spec"]["accessModes"] == ["ReadWriteMany"]
    assert created["spec"]["storageClassName"] == "standard"
    assert created["spec"]["resources"]["requests"]["storage"] == "1000Gi"
    labels = created["metadata"]["labels"]
    assert labels[api.JOBSET_NAME] == name
    assert labels[CLAIM_TEMPLATE_LABEL] == "pretrained-model"
    assert labels[CLAIM_SCOPE_LABEL] == "JobSet"
    refs = created["metadata"]["ownerReferences"]
    assert [(r["kind"], r["name"], r["uid"], r.get("controller")) for r in refs] == [
        (api.KIND, name, js["metadata"]["uid"], True)
    ]
    assert volumes.FINALIZER in js["metadata"]["finalizers"]

    done = await wait_jobset(client, ns, name, api.COMPLETED)
    assert done["status"]["terminalState"] == "Completed"
    bound = await wait_claim_phase(client, ns, claim_name)
    assert bound["spec"]["volumeName"], "a Bound claim names its volume"

    jobs = {j["metadata"]["name"]: j for j in await jobs_of(client, ns, name)}
    assert sorted(jobs) == [
        "volume-sample-a-0",
        "volume-sample-b-0",
        "volume-sample-b-1",
        "volume-sample-workers-0",
    ]
    for job_name in ("volume-sample-a-0", "volume-sample-b-0", "volume-sample-b-1"):
        assert job_claims(jobs[job_name]) == {"pretrained-model": claim_name}, job_name
    assert job_claims(jobs["volume-sample-workers-0"]) == {}

    pods = await pods_of(client, ns, name)
    assert len(pods) == 6  # A: 1, B: 2 Jobs x 2 pods, workers: 1
    for pod in pods:
        assert phase(pod) == "Succeeded", pod["metadata"]["name"]
        assert pod["spec"]["nodeName"].startswith("kwok-node-"), pod["metadata"]["name"]
        rjob = pod["metadata"]["labels"][api.REPLICATED_JOB_NAME]
        wanted = {} if rjob == "workers" else {"pretrained-model": claim_name}
        assert pod_claims(pod["spec"]) == wanted, pod["metadata"]["name"]

    ready = await wait_for(
        lambda: get_jobset(client, ns, name),
        lambda obj: (
            template_status(obj, "pretrained-model").get("bound") == 1
            and (condition(obj, volume_status.VOLUMES_READY) or {}).get("status") == "True"
        ),
        "status.volumes to report the claim Bound and VolumesReady=True",
    )
    entry = template_status(ready, "pretrained-model")
    assert entry["claimName"] == claim_name
    assert entry["scope"] == "JobSet"
    assert (entry["desired"], entry["existing"], entry["bound"]) == (1, 1, 1)
    assert (entry["pending"], entry["lost"], entry["conflicts"]) == (0, 0, 0)
    ready_condition = condition(ready, volume_status.VOLUMES_READY)
    assert ready_condition is not None
    assert ready_condition["reason"] == REASON_CLAIMS_BOUND
    await wait_event(full_kube, ns, name, REASON_CLAIM_CREATED, contains=claim_name, seconds=10)
    controller.assert_clean()


# ----------------------------------------------------------------------------- 2. WFFC


async def test_wait_for_first_consumer_claim_binds_once_a_pod_is_scheduled(
    controller: ControllerProcesses, client: KubeClient, full_kube: Kube, full_namespace: str
) -> None:
    ns = full_namespace
    name, claim_name = "trainjob-shared", "initializer-trainjob-shared"
    body = example("02-upstream-shared-initializer.yaml")
    body["spec"]["volumeClaimPolicies"][0]["templates"][0]["spec"]["storageClassName"] = "wffc"
    # Suspended first: the claim exists (made while suspended, as the policy asks) but no pod
    # can be scheduled, so it must stay Pending.
    body["spec"]["suspend"] = True
    body["spec"]["volumeClaimPolicies"][0]["creationPolicy"] = {"whenSuspended": "Create"}
    await client.create(api.JOBSETS, body, ns)

    waiting = await wait_for(
        lambda: get_jobset(client, ns, name),
        lambda obj: (
            (condition(obj, volume_status.VOLUMES_READY) or {}).get("reason")
            == REASON_WAITING_FOR_FIRST_CONSUMER
        ),
        "VolumesReady to say the claim waits for its first consumer",
    )
    assert (condition(waiting, volume_status.VOLUMES_READY) or {}).get("status") == "True"
    await settled_process(controller.replicas[-1], client, ns)
    claim = await client.get(CLAIMS, claim_name, ns)
    assert phase(claim) == "Pending", claim.get("status")
    assert SELECTED_NODE_ANNOTATION not in (claim["metadata"].get("annotations") or {})
    assert not claim["spec"].get("volumeName")
    assert await pods_of(client, ns, name) == []

    await client.patch(api.JOBSETS, name, {"spec": {"suspend": False}}, ns)
    bound = await wait_claim_phase(client, ns, claim_name)
    node = bound["metadata"]["annotations"][SELECTED_NODE_ANNOTATION]
    # The scheduler binds the pod once its volume is bound (PreBind waits for the binding).
    initializer = await wait_for(
        lambda: pods_of(client, ns, name, f"{api.REPLICATED_JOB_NAME}=model-initializer"),
        lambda pods: len(pods) == 1 and bool(pods[0]["spec"].get("nodeName")),
        "the initializer pod to be bound to a node",
    )
    assert [p["spec"]["nodeName"] for p in initializer] == [node], (
        "the claim binds where its first consumer was scheduled"
    )
    volume = await client.get(VOLUMES, bound["spec"]["volumeName"])
    terms = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == [node]

    done = await wait_jobset(client, ns, name, api.COMPLETED)
    assert done["status"]["terminalState"] == "Completed"
    pods = await pods_of(client, ns, name)
    assert len(pods) == 3  # the initializer and two trainer pods (after it completed)
    for pod in pods:
        assert phase(pod) == "Succeeded", pod["metadata"]["name"]
        assert pod["spec"]["nodeName"] == node, "the volume's node affinity places every user"
        assert pod_claims(pod["spec"]) == {"initializer": claim_name}
    # dependsOn Complete: the trainers' Job was created only after the initializer completed.
    jobs = {j["metadata"]["name"]: j for j in await jobs_of(client, ns, name)}
    initializer_done = jobs["trainjob-shared-model-initializer-0"]["status"]["completionTime"]
    assert jobs["trainjob-shared-node-0"]["metadata"]["creationTimestamp"] >= initializer_done
    controller.assert_clean()


# ----------------------------------------------------------------------------- 3. retain/adopt


async def test_job_scope_retained_claims_are_adopted_by_a_reapplied_jobset(
    controller: ControllerProcesses, client: KubeClient, full_kube: Kube, full_namespace: str
) -> None:
    ns = full_namespace
    name = "resumable"
    ckpt = ["ckpt-resumable-workers-0", "ckpt-resumable-workers-1"]
    body = example("03-per-job-checkpoints-retained.yaml")
    # Pods run for a few seconds, so that every claim is observably Bound while they run.
    pod = body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod.setdefault("metadata", {})["annotations"] = {RUN_DURATION: "3s"}
    await client.create(api.JOBSETS, copy.deepcopy(body), ns)

    await wait_running_pods(client, ns, name, 4)
    for job in await jobs_of(client, ns, name):
        index = job["metadata"]["labels"][api.JOB_INDEX]
        assert job_claims(job) == {
            "ckpt": f"ckpt-resumable-workers-{index}",
            "dataset": "dataset-resumable",
        }
    claims = {}
    for claim_name in [*ckpt, "dataset-resumable"]:
        claims[claim_name] = await wait_claim_phase(client, ns, claim_name)
    first = await wait_jobset(client, ns, name, api.COMPLETED)
    first_uid = first["metadata"]["uid"]

    # whenCompleted: Delete releases the dataset claim (the finished Jobs that mounted it go
    # too, or pvc-protection would keep it); the JobSet object stays.
    await wait_gone(client, CLAIMS, "dataset-resumable", ns)
    await wait_event(full_kube, ns, name, REASON_CLAIM_DELETED, contains="dataset")

    def volumes_ready(obj: Obj) -> Obj:
        found: list[Obj] = (obj.get("status") or {}).get("conditions") or []
        return next((c for c in found if c.get("type") == "VolumesReady"), {})

    # The status says what happened: released by retention, not "not created yet".
    released = await wait_for(
        lambda: get_jobset(client, ns, name),
        lambda obj: volumes_ready(obj).get("reason") == REASON_CLAIMS_RELEASED,
        "VolumesReady to report the released claim",
    )
    assert volumes_ready(released)["status"] == "False"
    assert "dataset-resumable" in volumes_ready(released)["message"]
    still = await get_jobset(client, ns, name)
    assert still["metadata"]["uid"] == first_uid
    assert not still["metadata"].get("deletionTimestamp")
    for claim_name in ckpt:
        assert phase(await client.get(CLAIMS, claim_name, ns)) == "Bound"

    # whenDeleted: Retain: the checkpoints survive the JobSet.
    await client.delete(api.JOBSETS, name, ns)
    await wait_gone(client, api.JOBSETS, name, ns)
    for claim_name in ckpt:
        kept = await client.get(CLAIMS, claim_name, ns)
        meta = kept["metadata"]
        assert not meta.get("deletionTimestamp"), claim_name
        assert not meta.get("ownerReferences"), claim_name
        assert meta["annotations"][RETAINED_FROM_ANNOTATION] == first_uid
        assert meta["labels"][api.JOBSET_NAME] == name
        assert meta["uid"] == claims[claim_name]["metadata"]["uid"]
        assert phase(kept) == "Bound"
    await wait_event(full_kube, ns, name, REASON_CLAIM_RETAINED, contains=ckpt[0])
    await wait_for(
        lambda: jobs_of(client, ns, name), lambda jobs: not jobs, "the old Jobs to be gone"
    )

    # Re-applying the unchanged manifest adopts them (upstream's issue 1307).
    await client.create(api.JOBSETS, copy.deepcopy(body), ns)
    second_uid = (await get_jobset(client, ns, name))["metadata"]["uid"]
    assert second_uid != first_uid

    async def annotations() -> list[Obj]:
        return [(await client.get(CLAIMS, c, ns))["metadata"]["annotations"] for c in ckpt]

    await wait_for(
        annotations,
        lambda found: all(a.get(OWNER_UID_ANNOTATION) == second_uid for a in found),
        "the retained claims to be adopted by the new JobSet",
    )
    await wait_event(full_kube, ns, name, REASON_CLAIM_ADOPTED, contains=ckpt[0])
    jobs = await wait_live_jobs(client, ns, name, 2)
    for job in jobs:
        assert job["metadata"]["ownerReferences"][0]["uid"] == second_uid
        index = job["metadata"]["labels"][api.JOB_INDEX]
        assert job_claims(job)["ckpt"] == f"ckpt-resumable-workers-{index}"
    second = await wait_jobset(client, ns, name, api.COMPLETED)
    assert second["metadata"]["uid"] == second_uid
    for claim_name in ckpt:
        adopted = await client.get(CLAIMS, claim_name, ns)
        assert adopted["metadata"]["uid"] == claims[claim_name]["metadata"]["uid"], (
            "the same claim, not a new one"
        )
        assert RETAINED_FROM_ANNOTATION not in adopted["metadata"]["annotations"]
        assert phase(adopted) == "Bound"
    # The second run released its dataset claim again on completion.
    await wait_gone(client, CLAIMS, "dataset-resumable", ns)
    controller.assert_clean()


# ----------------------------------------------------------------------------- 4. deletion


async def test_deleting_the_jobset_deletes_its_claims(
    controller: ControllerProcesses, client: KubeClient, full_kube: Kube, full_namespace: str
) -> None:
    ns = full_namespace
    name, claim_name = "trainjob-shared", "initializer-trainjob-shared"
    await client.create(api.JOBSETS, example("02-upstream-shared-initializer.yaml"), ns)
    done = await wait_jobset(client, ns, name, api.COMPLETED)
    assert volumes.FINALIZER in done["metadata"]["finalizers"]
    claim = await wait_claim_phase(client, ns, claim_name)
    volume_name = claim["spec"]["volumeName"]

    await client.delete(api.JOBSETS, name, ns)
    await wait_gone(client, api.JOBSETS, name, ns)  # only once the finalizer was removed
    await wait_gone(client, CLAIMS, claim_name, ns)
    await wait_event(full_kube, ns, name, REASON_CLAIM_DELETED, contains=claim_name)
    await wait_for(
        lambda: jobs_of(client, ns, name), lambda jobs: not jobs, "the Jobs to be collected"
    )
    # The released volume goes too (reclaim policy Delete, done by the test provisioner).
    await wait_gone(client, VOLUMES, volume_name, None)
    controller.assert_clean()


async def test_deletion_converges_after_the_controller_is_killed(
    controller: ControllerProcesses, client: KubeClient, full_namespace: str
) -> None:
    ns = full_namespace
    name, claim_name = "trainjob-shared", "initializer-trainjob-shared"
    body = example("02-upstream-shared-initializer.yaml")
    # The trainer pods keep running (and using the claim) while the JobSet is deleted.
    with_pod_annotations(body["spec"]["replicatedJobs"][1], **{RUN_DURATION: "60s"})
    await client.create(api.JOBSETS, body, ns)
    await wait_running_pods(client, ns, name, 2, f"{api.REPLICATED_JOB_NAME}=node")
    await wait_claim_phase(client, ns, claim_name)

    await client.delete(api.JOBSETS, name, ns)
    controller.kill()  # kill -9 right after the delete request
    await asyncio.sleep(1)  # no replica runs for a while
    controller.start()  # a new replica: it takes the lease over once the old one expired

    await wait_gone(client, api.JOBSETS, name, ns)
    await wait_gone(client, CLAIMS, claim_name, ns)
    await wait_for(
        lambda: jobs_of(client, ns, name), lambda jobs: not jobs, "the Jobs to be collected"
    )
    await wait_for(lambda: pods_of(client, ns, name), lambda pods: not pods, "the pods to go")
    # Whichever replica got to it (usually the restarted one), retention ran to its end.
    finished = [
        r.identity
        for r in controller.replicas
        if any(
            line.get("msg") == "volume retention done; finalizer removed" for line in r.log_lines()
        )
    ]
    assert finished, "no replica logged the end of volume retention"
    controller.assert_clean()


# ----------------------------------------------------------------------------- 5. whenFailed


async def test_failed_jobset_deletes_claims_with_when_failed_delete(
    controller: ControllerProcesses, client: KubeClient, full_kube: Kube, full_namespace: str
) -> None:
    ns = full_namespace
    name, claim_name = "doomed", "scratch-doomed"
    trainer = mounting(
        with_pod_annotations(replicated_job("trainer", 1), **{EXIT_CODE: "3"}), "scratch"
    )
    body = jobset(
        name,
        trainer,
        volumeClaimPolicies=[
            {"templates": [claim_template("scratch")], "retentionPolicy": {"whenFailed": "Delete"}}
        ],
    )
    await client.create(api.JOBSETS, body, ns)
    await wait_claim_phase(client, ns, claim_name)

    jobs = await wait_live_jobs(client, ns, name, 1)
    assert job_claims(jobs[0]) == {"scratch": claim_name}
    failed = await wait_jobset(client, ns, name, api.FAILED)
    assert failed["status"]["terminalState"] == "Failed"
    await wait_for(
        lambda: find(client, CLAIMS, claim_name, ns),
        lambda claim: claim is None or bool(claim["metadata"].get("deletionTimestamp")),
        f"the controller to delete claim {claim_name} (whenFailed: Delete)",
    )
    await wait_event(full_kube, ns, name, REASON_CLAIM_DELETED, contains=claim_name)
    still = await get_jobset(client, ns, name)
    assert not still["metadata"].get("deletionTimestamp"), "the JobSet object stays"
    # Storage is released only when the claim is really gone: pvc-protection keeps a deleted
    # claim while any scheduled pod names it, finished or not, so the controller also deletes
    # the finished Jobs that mounted it. The JobSet and its status stay.
    await wait_for(
        lambda: find(client, CLAIMS, claim_name, ns),
        lambda claim: claim is None,
        f"claim {claim_name} to be removed while the Failed JobSet stays",
        seconds=60,
    )
    # The Jobs go too, but not necessarily before the claim: the garbage collector ends their
    # Foreground deletion and pvc-protection releases the claim, each on its own queue.
    await wait_for(
        lambda: jobs_of(client, ns, name), lambda jobs: jobs == [], "the released Jobs to be gone"
    )
    final = await get_jobset(client, ns, name)
    assert final["status"]["terminalState"] == "Failed"
    assert final["status"]["replicatedJobsStatus"][0]["failed"] == 1
    controller.assert_clean()


# ----------------------------------------------------------------------------- 6. restarts


async def test_restarted_jobs_mount_the_same_job_scope_claims(
    controller: ControllerProcesses, client: KubeClient, full_namespace: str
) -> None:
    ns = full_namespace
    name = "flaky"
    workers = mounting(
        with_pod_annotations(replicated_job("workers", 2), **{RUN_DURATION: "5s"}), "ckpt"
    )
    body = jobset(
        name,
        workers,
        failurePolicy={"maxRestarts": 2},
        volumeClaimPolicies=[{"scope": "Job", "templates": [claim_template("ckpt")]}],
    )
    await client.create(api.JOBSETS, body, ns)
    first = await wait_live_jobs(client, ns, name, 2, attempt=0)
    first_claims = {j["metadata"]["name"]: job_claims(j) for j in first}
    assert first_claims == {
        "flaky-workers-0": {"ckpt": "ckpt-flaky-workers-0"},
        "flaky-workers-1": {"ckpt": "ckpt-flaky-workers-1"},
    }
    pods = await wait_running_pods(client, ns, name, 2, f"{api.RESTART_ATTEMPT}=0")
    uids = {}
    for claim_name in ("ckpt-flaky-workers-0", "ckpt-flaky-workers-1"):
        uids[claim_name] = (await wait_claim_phase(client, ns, claim_name))["metadata"]["uid"]

    # One pod of attempt 0 fails (KWOK's fail stage picks the annotation up).
    await client.patch(
        PODS, pods[0]["metadata"]["name"], {"metadata": {"annotations": {EXIT_CODE: "42"}}}, ns
    )
    second = await wait_live_jobs(client, ns, name, 2, attempt=1)
    assert {j["metadata"]["uid"] for j in second}.isdisjoint(j["metadata"]["uid"] for j in first)
    assert {j["metadata"]["name"]: job_claims(j) for j in second} == first_claims
    for claim_name, uid in uids.items():
        assert (await client.get(CLAIMS, claim_name, ns))["metadata"]["uid"] == uid, (
            f"{claim_name} was recreated by the restart"
        )
    done = await wait_jobset(client, ns, name, api.COMPLETED)
    assert done["status"]["restarts"] == 1
    for pod in await pods_of(client, ns, name, f"{api.RESTART_ATTEMPT}=1"):
        assert phase(pod) == "Succeeded"
        index = pod["metadata"]["labels"][api.JOB_INDEX]
        assert pod_claims(pod["spec"]) == {"ckpt": f"ckpt-flaky-workers-{index}"}
    for claim_name, uid in uids.items():
        claim = await client.get(CLAIMS, claim_name, ns)
        assert claim["metadata"]["uid"] == uid
        assert phase(claim) == "Bound"
    controller.assert_clean()


# ----------------------------------------------------------------------------- 7. expansion


async def test_raising_the_storage_request_expands_the_claim(
    controller: ControllerProcesses, client: KubeClient, full_kube: Kube, full_namespace: str
) -> None:
    ns = full_namespace
    name, claim_name = "grow", "data-grow"
    await client.create(api.JOBSETS, growing_jobset(name, "expandable"), ns)
    bound = await wait_claim_phase(client, ns, claim_name)
    assert capacity(bound) == quantity("1Gi")
    await wait_running_pods(client, ns, name, 1)

    await raise_storage(client, ns, name, "2Gi")
    expanded = await wait_for(
        lambda: find(client, CLAIMS, claim_name, ns),
        lambda claim: capacity(claim) == quantity("2Gi"),
        f"claim {claim_name} to report a capacity of 2Gi",
    )
    assert expanded is not None
    assert quantity(expanded["spec"]["resources"]["requests"]["storage"]) == quantity("2Gi")
    volume = await client.get(VOLUMES, expanded["spec"]["volumeName"])
    assert quantity(volume["spec"]["capacity"]["storage"]) == quantity("2Gi")
    await wait_event(full_kube, ns, name, REASON_CLAIM_EXPANDED, contains=claim_name)

    done = await wait_jobset(client, ns, name, api.COMPLETED)
    blocked = condition(done, EXPANSION_BLOCKED)
    assert blocked is None or blocked["status"] == "False", blocked
    assert done["status"].get("restarts", 0) == 0
    controller.assert_clean()


async def test_raising_the_storage_request_on_a_fixed_class_is_reported(
    controller: ControllerProcesses, client: KubeClient, full_kube: Kube, full_namespace: str
) -> None:
    ns = full_namespace
    name, claim_name = "stuck", "data-stuck"
    await client.create(api.JOBSETS, growing_jobset(name, "fixed"), ns)
    await wait_claim_phase(client, ns, claim_name)
    pods = await wait_running_pods(client, ns, name, 1)

    await raise_storage(client, ns, name, "2Gi")
    blocked = await wait_jobset(client, ns, name, EXPANSION_BLOCKED)
    message = (condition(blocked, EXPANSION_BLOCKED) or {}).get("message", "")
    assert claim_name in message and "fixed" in message, message
    assert (condition(blocked, EXPANSION_BLOCKED) or {}).get(
        "reason"
    ) == REASON_EXPANSION_NOT_SUPPORTED
    await wait_event(
        full_kube,
        ns,
        name,
        REASON_EXPANSION_NOT_SUPPORTED,
        event_type="Warning",
        contains=claim_name,
    )

    done = await wait_jobset(client, ns, name, api.COMPLETED)
    assert done["status"].get("restarts", 0) == 0
    claim = await client.get(CLAIMS, claim_name, ns)
    assert quantity(claim["spec"]["resources"]["requests"]["storage"]) == quantity("1Gi")
    assert capacity(claim) == quantity("1Gi")
    assert phase(claim) == "Bound"
    after = await pods_of(client, ns, name)
    assert [p["metadata"]["uid"] for p in after] == [pods[0]["metadata"]["uid"]], (
        "the pod ran on undisturbed"
    )
    assert phase(after[0]) == "Succeeded"
    controller.assert_clean()


# ----------------------------------------------------------------------------- 8. quota


async def _set_quota(kube: KubeClient, namespace: str, claims: str, *, create: bool) -> None:
    body = {"metadata": {"name": "claims"}, "spec": {"hard": {"persistentvolumeclaims": claims}}}
    if create:
        await kube.create(QUOTAS, body, namespace)
    else:
        await kube.patch(QUOTAS, "claims", body, namespace)
    # Admission enforces the quota's status (computed by kube-controller-manager), not its spec.
    await wait_for(
        lambda: kube.get(QUOTAS, "claims", namespace),
        lambda quota: (
            ((quota.get("status") or {}).get("hard") or {}).get("persistentvolumeclaims") == claims
        ),
        f"the quota to be in force with persistentvolumeclaims={claims}",
    )


async def test_claim_creation_refused_by_quota_recovers_when_raised(
    controller: ControllerProcesses, client: KubeClient, full_kube: Kube, full_namespace: str
) -> None:
    ns = full_namespace
    name, claim_name = "trainjob-shared", "initializer-trainjob-shared"
    await _set_quota(client, ns, "0", create=True)
    await client.create(api.JOBSETS, example("02-upstream-shared-initializer.yaml"), ns)

    failed = await wait_event(
        full_kube,
        ns,
        name,
        volume_lifecycle.REASON_CLAIM_CREATION_FAILED,
        event_type="Warning",
        contains="exceeded quota",
    )
    assert claim_name in failed.message
    assert await find(client, CLAIMS, claim_name, ns) is None
    assert await jobs_of(client, ns, name) == [], "no Job may start without its claim"

    await _set_quota(client, ns, "10", create=False)
    await wait_claim_phase(client, ns, claim_name)
    done = await wait_jobset(client, ns, name, api.COMPLETED)
    assert done["status"]["terminalState"] == "Completed"
    await wait_event(full_kube, ns, name, REASON_CLAIM_CREATED, contains=claim_name)
    controller.assert_clean("exceeded quota")


# ----------------------------------------------------------------------------- 9. conflict


async def test_foreign_claim_is_a_conflict_until_it_is_deleted(
    controller: ControllerProcesses, client: KubeClient, full_kube: Kube, full_namespace: str
) -> None:
    ns = full_namespace
    name, claim_name = "trainjob-shared", "initializer-trainjob-shared"
    foreign_body = {
        "metadata": {"name": claim_name, "labels": {"owner": "someone-else"}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    # Made by someone else (another field manager than the controller's "stateful-jobset").
    await KubeClient(full_kube.api, field_manager="someone-else").create(CLAIMS, foreign_body, ns)
    foreign = await wait_claim_phase(client, ns, claim_name)

    await client.create(api.JOBSETS, example("02-upstream-shared-initializer.yaml"), ns)
    conflicted = await wait_jobset(client, ns, name, VOLUME_CLAIM_CONFLICT)
    message = (condition(conflicted, VOLUME_CLAIM_CONFLICT) or {}).get("message", "")
    assert claim_name in message, message
    ready = condition(conflicted, volume_status.VOLUMES_READY) or {}
    assert ready.get("status") != "True", ready
    await wait_event(
        full_kube,
        ns,
        name,
        REASON_CLAIM_CONFLICT,
        event_type="Warning",
        contains=claim_name,
    )
    await settled_process(controller.replicas[-1], client, ns)
    assert await jobs_of(client, ns, name) == [], "no Job may mount a foreign claim"
    assert await pods_of(client, ns, name) == []
    untouched = await client.get(CLAIMS, claim_name, ns)
    for key in ("uid", "labels", "annotations", "ownerReferences", "finalizers"):
        assert untouched["metadata"].get(key) == foreign["metadata"].get(key), key
    assert untouched["spec"] == foreign["spec"]
    managers = {m.get("manager") for m in untouched["metadata"].get("managedFields") or []}
    assert "stateful-jobset" not in managers, managers

    await client.delete(CLAIMS, claim_name, ns)
    await wait_for(
        lambda: find(client, CLAIMS, claim_name, ns),
        lambda claim: (
            claim is not None
            and claim["metadata"]["uid"] != foreign["metadata"]["uid"]
            and (claim["metadata"].get("labels") or {}).get(api.JOBSET_NAME) == name
        ),
        "the JobSet's own claim to replace the foreign one",
    )
    done = await wait_jobset(client, ns, name, api.COMPLETED)
    cleared = condition(done, VOLUME_CLAIM_CONFLICT) or {}
    assert cleared.get("status") == "False", cleared
    for job in await jobs_of(client, ns, name):
        assert job_claims(job) == {"initializer": claim_name}
    mine = await wait_claim_phase(client, ns, claim_name)
    assert mine["metadata"]["uid"] != foreign["metadata"]["uid"]
    controller.assert_clean()


# ------------------------------------------------------------ ttlSecondsAfterFinished


RETAIN, DELETE = "Retain", "Delete"
HOLD = "jobset.test/hold"  # a test finalizer: keeps the Job, so the foreground phase is seen


async def test_ttl_deletes_foreground_after_the_jobs_and_retention_runs(
    controller: ControllerProcesses, client: KubeClient, full_namespace: str
) -> None:
    """As upstream, the TTL delete is Foreground: the JobSet is marked (deletionTimestamp,
    foregroundDeletion) while the garbage collector deletes its Jobs, and goes only after them.
    Retention still runs: whenDeleted Retain keeps its claim, Delete deletes its own."""
    ns = full_namespace
    name = "expiring"
    trainer = mounting(mounting(replicated_job("trainer", 1), "keep", "/keep"), "scratch")
    body = jobset(
        name,
        trainer,
        ttlSecondsAfterFinished=2,
        volumeClaimPolicies=[
            {"templates": [claim_template("keep")], "retentionPolicy": {"whenDeleted": "Retain"}},
            {
                "templates": [claim_template("scratch")],
                "retentionPolicy": {"whenDeleted": "Delete"},
            },
        ],
    )
    await client.create(api.JOBSETS, body, ns)
    jobs = await wait_live_jobs(client, ns, name, 1)
    job = jobs[0]["metadata"]["name"]
    await client.patch(JOBS, job, {"metadata": {"finalizers": [HOLD]}}, ns)
    await wait_jobset(client, ns, name, api.COMPLETED)

    def marked(obj: Obj | None) -> bool:
        meta = (obj or {}).get("metadata") or {}
        return bool(meta.get("deletionTimestamp")) and "foregroundDeletion" in (
            meta.get("finalizers") or []
        )

    await wait_for(lambda: find(client, api.JOBSETS, name, ns), marked, "the TTL's delete")
    # The garbage collector deletes the held Job (Foreground too: it finishes once the pods are
    # gone, leaving only our finalizer); the JobSet waits for it.
    await wait_for(
        lambda: find(client, JOBS, job, ns),
        lambda obj: (
            bool((obj or {}).get("metadata", {}).get("deletionTimestamp"))
            and (obj or {}).get("metadata", {}).get("finalizers") == [HOLD]
        ),
        f"the garbage collector to delete Job {job} (all but our finalizer)",
    )
    assert marked(await find(client, api.JOBSETS, name, ns))
    # No finalizer can be added to an object being deleted: [HOLD] is the whole list.
    await client.patch(JOBS, job, {"metadata": {"finalizers": None}}, ns)
    await wait_gone(client, JOBS, job, ns)
    await wait_gone(client, api.JOBSETS, name, ns)
    await wait_for(
        lambda: find(client, CLAIMS, f"scratch-{name}", ns),
        lambda claim: claim is None or bool(claim["metadata"].get("deletionTimestamp")),
        "claim scratch (whenDeleted: Delete) to be deleted",
    )
    kept = await find(client, CLAIMS, f"keep-{name}", ns)
    assert kept is not None and not kept["metadata"].get("deletionTimestamp"), kept
    assert not kept["metadata"].get("ownerReferences"), kept
