"""JobSets under Kueue (issue 18): queued, admitted, over quota, preempted and re-admitted, resized.

A cluster of the ``kueue`` profile of its own (``kueue_cluster``): Kueue's manager built from the
Go module proxy with its JobSet integration, its webhooks called by this API server, the JobSet
CRD of this repository. The controller runs as its own process for the test's namespace, as in
the other end-to-end tests; the scheduler places the pods on KWOK nodes (8 ``nvidia.com/gpu``
each). Every test gets a ClusterQueue of its own (8 GPUs, lower priorities preempted) and a
LocalQueue in its namespace, so the quota is exactly what the test says.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controller.jobset import api
from controller.jobset.volumes import status as volume_status
from controller.jobset.volumes.status import REASON_WAITING_FOR_RESUME
from controller.runtime.client import CLAIMS, PODS, KubeClient
from localcluster import csi, kueue
from localcluster.cluster import LocalCluster
from localcluster.jobsetapi import FILES as JOBSET_API
from tests.helpers import Kube, wait_for
from tests.support.crd import install_crd, install_other_crds
from tests.support.jobsets import condition, get_jobset, jobs_of, jobset, replicated_job
from tests.support.kueue import (
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    MUTATING_HOOKS,
    PRIORITY_CLASSES,
    VALIDATING_HOOKS,
    holds,
    queued,
    wait_waiting,
    wait_workload,
    workload_of,
)
from tests.support.podscope import policy_in_effect
from tests.support.snapshots import set_snapshot_status, snapshots_of
from tests.support.volumes_e2e import (
    RUN_DURATION,
    ControllerProcesses,
    claim_template,
    controller_processes,
    find,
    job_claims,
    mounting,
    phase,
    pod_claims,
    pods_of,
    wait_event,
    wait_jobset,
)

Obj = dict[str, Any]

QUOTA_GPUS = 8
# Longer than any test: such pods stay Running until the test (or Kueue) acts.
FOREVER = "1h"
INDEX = "batch.kubernetes.io/job-completion-index"


# ----------------------------------------------------------------------------- fixtures


@pytest.fixture
async def kclient(kueue_kube: Kube) -> AsyncIterator[KubeClient]:
    """An API client on the Kueue cluster (the profile installed the JobSet CRD; this makes sure
    it is the committed one)."""
    await install_crd(kueue_kube)
    yield KubeClient(kueue_kube.api)


@pytest.fixture
async def kcontroller(
    kueue_kube: Kube, kueue_namespace: str, kclient: KubeClient, tmp_path: Path
) -> AsyncIterator[ControllerProcesses]:
    async with controller_processes(kueue_kube, kueue_namespace, kclient, tmp_path) as processes:
        yield processes


@dataclass(frozen=True)
class Queue:
    """The test's LocalQueue (in its namespace) and ClusterQueue."""

    local: str
    cluster: str


@pytest.fixture
async def queue(kclient: KubeClient, kueue_namespace: str) -> AsyncIterator[Queue]:
    cq = f"cq-{uuid.uuid4().hex[:8]}"
    body = kueue.cluster_queue(cq, gpus=QUOTA_GPUS, cpu=32, memory_gi=256)
    await kclient.create(CLUSTER_QUEUES, body)
    await kclient.create(
        LOCAL_QUEUES, kueue.local_queue("lq", kueue_namespace, cq), kueue_namespace
    )
    await wait_for(
        lambda: kclient.get(CLUSTER_QUEUES, cq),
        lambda obj: (condition(obj, "Active") or {}).get("status") == "True",
        f"ClusterQueue {cq} to be Active",
    )
    yield Queue("lq", cq)
    # Kueue's finalizer keeps it until its workloads are gone (the namespace's deletion).
    await kclient.delete(CLUSTER_QUEUES, cq)


@pytest.fixture
async def priorities(kclient: KubeClient) -> AsyncIterator[tuple[str, str]]:
    """Two WorkloadPriorityClasses (low 100, high 1000), cluster-scoped, removed afterwards."""
    suffix = uuid.uuid4().hex[:6]
    names = (f"low-{suffix}", f"high-{suffix}")
    for name, value in zip(names, (100, 1000), strict=True):
        body = {"apiVersion": kueue.API, "kind": "WorkloadPriorityClass"}
        await kclient.create(PRIORITY_CLASSES, {**body, "metadata": {"name": name}, "value": value})
    yield names
    for name in names:
        await kclient.delete(PRIORITY_CLASSES, name)


# ----------------------------------------------------------------------------- helpers


def gpu_workers(name: str, replicas: int, pods: int, gpus: int, run: str = "1s") -> Obj:
    """An Indexed replicated job of ``replicas`` Jobs x ``pods`` pods, each asking ``gpus``."""
    rjob = replicated_job(name, replicas, completions=pods)
    rjob["template"]["spec"]["completionMode"] = "Indexed"
    pod = rjob["template"]["spec"]["template"]
    pod["metadata"]["annotations"][RUN_DURATION] = run
    amounts = {"cpu": "1", "memory": "1Gi", kueue.GPU: str(gpus)}
    pod["spec"]["containers"][0]["resources"] = {"requests": amounts, "limits": amounts}
    return rjob


def suspended(js: Obj) -> bool:
    return bool(js["spec"].get("suspend"))


async def running_pods(client: KubeClient, namespace: str, name: str) -> list[Obj]:
    return [p for p in await pods_of(client, namespace, name) if phase(p) == "Running"]


async def wait_running(client: KubeClient, namespace: str, name: str, count: int) -> list[Obj]:
    return await wait_for(
        lambda: running_pods(client, namespace, name),
        lambda pods: len(pods) == count,
        f"{count} running pods of JobSet {name}",
        seconds=90,
    )


async def live_pods(client: KubeClient, namespace: str, name: str) -> list[Obj]:
    return [
        p for p in await pods_of(client, namespace, name) if phase(p) not in ("Succeeded", "Failed")
    ]


async def finish_pods(client: KubeClient, namespace: str, name: str) -> None:
    """Make every running pod of the JobSet succeed now (its KWOK run would last an hour): the
    status a kubelet would write when the container exits 0."""
    for pod in await running_pods(client, namespace, name):
        now = pod["status"]["startTime"]
        statuses = [
            {
                "name": c["name"],
                "image": c["image"],
                "ready": False,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": 0,
                        "reason": "Completed",
                        "startedAt": now,
                        "finishedAt": now,
                    }
                },
            }
            for c in pod["spec"]["containers"]
        ]
        await client.patch(
            PODS,
            pod["metadata"]["name"],
            {"status": {"phase": "Succeeded", "containerStatuses": statuses}},
            namespace,
            subresource="status",
        )


async def claims_of(client: KubeClient, namespace: str, name: str) -> dict[str, Obj]:
    listed = await client.list(CLAIMS, namespace, label_selector=f"{api.JOBSET_NAME}={name}")
    return {c["metadata"]["name"]: c for c in listed["items"]}


def uids(claims: dict[str, Obj]) -> dict[str, str]:
    return {n: c["metadata"]["uid"] for n, c in claims.items()}


# ----------------------------------------------------------------------------- a. admission


async def test_queued_jobset_stays_suspended_until_admitted_then_completes(
    kcontroller: ControllerProcesses, kclient: KubeClient, kueue_namespace: str, queue: Queue
) -> None:
    """The ClusterQueue is held (``stopPolicy: Hold``): the JobSet, created without
    ``suspend``, is suspended by Kueue's webhook and waits, with no pod, no claim (VolumesReady
    False, WaitingForResume) and so no Job mounting one. Released,
    Kueue admits it: unsuspended, its Jobs' pod templates carry the flavor's node labels as
    nodeSelector, it completes, and the Workload says Admitted then Finished."""
    ns, name = kueue_namespace, "queued"
    await kclient.patch(CLUSTER_QUEUES, queue.cluster, {"spec": {"stopPolicy": "Hold"}})
    await wait_for(
        lambda: kclient.get(CLUSTER_QUEUES, queue.cluster),
        lambda obj: holds(obj, "Active", "False"),
        f"ClusterQueue {queue.cluster} to be held (Active=False)",
    )
    workers = mounting(gpu_workers("workers", 2, 2, 1), "data")
    # No resources: Kueue's admission patch (upstream's Go types) adds `resources: {}` to it,
    # which the CRD's rule for suspended JobSets must accept.
    pod_spec = workers["template"]["spec"]["template"]["spec"]
    pod_spec["initContainers"] = [{"name": "init", "image": "busybox"}]
    policies = [{"templates": [claim_template("data", storage_class="standard")]}]
    body = queued(jobset(name, workers, volumeClaimPolicies=policies), queue.local)
    created = await kclient.create(api.JOBSETS, body, ns)
    assert created["spec"]["suspend"] is True, "Kueue's webhook suspends a queued JobSet"

    waiting = await wait_waiting(kclient, ns, name, "Inadmissible")
    assert not holds(waiting, "Admitted")
    assert "inactive" in (condition(waiting, "QuotaReserved") or {}).get("message", "")
    js = await wait_jobset(kclient, ns, name, api.SUSPENDED)
    assert suspended(js)
    # Queued since creation: no claim (nor Job mounting one) until admitted (docs/volumes.md,
    # "Suspended JobSets and Kueue").
    waiting_js = await wait_for(
        lambda: get_jobset(kclient, ns, name),
        lambda obj: (
            (condition(obj, volume_status.VOLUMES_READY) or {}).get("reason")
            == REASON_WAITING_FOR_RESUME
        ),
        f"VolumesReady=False ({REASON_WAITING_FOR_RESUME}) on the queued {name}",
    )
    assert (condition(waiting_js, volume_status.VOLUMES_READY) or {}).get("status") == "False"
    assert await claims_of(kclient, ns, name) == {}
    assert await jobs_of(kclient, ns, name) == []
    assert await live_pods(kclient, ns, name) == []

    await kclient.patch(CLUSTER_QUEUES, queue.cluster, {"spec": {"stopPolicy": "None"}})
    admitted = await wait_workload(kclient, ns, name, "Admitted")
    assert admitted["status"]["admission"]["clusterQueue"] == queue.cluster
    done = await wait_jobset(kclient, ns, name, api.COMPLETED)
    assert not suspended(done)
    template = done["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert template.get("nodeSelector") == kueue.FLAVOR_NODE_LABELS
    jobs = await jobs_of(kclient, ns, name)
    assert len(jobs) == 2
    for job in jobs:
        pod_spec = job["spec"]["template"]["spec"]
        assert pod_spec.get("nodeSelector") == kueue.FLAVOR_NODE_LABELS, job["metadata"]["name"]
        assert job_claims(job) == {"data": f"data-{name}"}
    for pod in await pods_of(kclient, ns, name):
        assert phase(pod) == "Succeeded", pod["metadata"]["name"]
    finished = await wait_workload(kclient, ns, name, "Finished")
    assert (condition(finished, "Finished") or {}).get("reason") == "Succeeded"
    kcontroller.assert_clean()


async def test_a_jobset_templated_by_helm_with_empty_lists_is_admitted_and_completes(
    kcontroller: ControllerProcesses, kclient: KubeClient, kueue_namespace: str, queue: Queue
) -> None:
    """Helm templates write empty lists (``env: []``), false and empty values and quantities as
    typed by hand. Kueue's admission patch is built from upstream's Go types, which leave those
    out, add ``resources: {}`` and write quantities canonically: the same pod template to
    upstream's semantic comparison, and to this CRD's rules, which compare the same way. The
    JobSet is admitted (the patch is stored: its empty lists are gone), runs and completes; no
    KueueIncompatible condition (it was the old release's way of saying it would not be)."""
    ns, name = kueue_namespace, "helm"
    workers = gpu_workers("workers", 1, 2, 1)
    pod_spec = workers["template"]["spec"]["template"]["spec"]
    pod_spec.update(hostNetwork=False, imagePullSecrets=[], tolerations=[])
    pod_spec["initContainers"] = [{"name": "init", "image": "busybox", "args": [], "env": []}]
    main = pod_spec["containers"][0]
    main.update(env=[], args=[], envFrom=[], volumeMounts=[], workingDir="", stdin=False)
    main["resources"]["requests"]["memory"] = main["resources"]["limits"]["memory"] = "1024Mi"
    created = await kclient.create(api.JOBSETS, queued(jobset(name, workers), queue.local), ns)
    assert created["spec"]["suspend"] is True
    await wait_workload(kclient, ns, name, "Admitted")
    done = await wait_jobset(kclient, ns, name, api.COMPLETED)
    assert not suspended(done)
    # Kueue's patch was stored: its Go types left the empty lists and zero values out.
    stored = done["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert "env" not in stored["containers"][0] and "hostNetwork" not in stored, stored
    assert stored.get("nodeSelector") == kueue.FLAVOR_NODE_LABELS
    assert condition(done, "KueueIncompatible") is None
    await wait_workload(kclient, ns, name, "Finished")
    kcontroller.assert_clean()


# ----------------------------------------------------------------------------- b. quota


async def test_two_jobsets_over_quota_one_waits_until_the_first_finishes(
    kcontroller: ControllerProcesses, kclient: KubeClient, kueue_namespace: str, queue: Queue
) -> None:
    """6 + 6 GPUs against a quota of 8: the first runs, the second waits suspended with a
    pending Workload; when the first's pods succeed it completes, and the second is admitted
    and runs to completion."""
    ns = kueue_namespace
    first = queued(jobset("first", gpu_workers("workers", 1, 2, 3, run=FOREVER)), queue.local)
    await kclient.create(api.JOBSETS, first, ns)
    await wait_workload(kclient, ns, "first", "Admitted")
    await wait_running(kclient, ns, "first", 2)

    second = queued(jobset("second", gpu_workers("workers", 1, 2, 3)), queue.local)
    await kclient.create(api.JOBSETS, second, ns)
    pending = await wait_waiting(kclient, ns, "second", "Pending")
    assert "insufficient" in (condition(pending, "QuotaReserved") or {}).get("message", "").lower()
    assert suspended(await get_jobset(kclient, ns, "second"))
    assert await live_pods(kclient, ns, "second") == []
    assert len(await running_pods(kclient, ns, "first")) == 2

    await finish_pods(kclient, ns, "first")
    await wait_jobset(kclient, ns, "first", api.COMPLETED)
    await wait_workload(kclient, ns, "first", "Finished")
    await wait_workload(kclient, ns, "second", "Admitted")
    done = await wait_jobset(kclient, ns, "second", api.COMPLETED)
    assert not suspended(done)
    await wait_workload(kclient, ns, "second", "Finished")
    kcontroller.assert_clean()


# ----------------------------------------------------------------------------- c. preemption


async def test_preemption_keeps_job_and_pod_scope_claims_and_readmission_mounts_them(
    kcontroller: ControllerProcesses,
    kclient: KubeClient,
    kueue_kube: Kube,
    kueue_namespace: str,
    queue: Queue,
    priorities: tuple[str, str],
) -> None:
    """A low-priority JobSet (2 Jobs x 2 pods, 1 GPU each) with a Job-scope and a Pod-scope
    claim runs; a high-priority one asking 6 GPUs preempts it. The preempted JobSet is suspended
    and its pods go, its 6 claims stay (same uids, not being deleted: suspension is no retention
    trigger); once the high one completed it is admitted again and its pods mount the same
    claims."""
    ns, low, high = kueue_namespace, "train", "urgent"
    workers = gpu_workers("workers", 2, 2, 1, run=FOREVER)
    workers = mounting(mounting(workers, "ckpt", "/ckpt"), "rank", "/rank")
    policies = [
        {"scope": "Job", "templates": [claim_template("ckpt", storage_class="standard")]},
        {"scope": "Pod", "templates": [claim_template("rank", storage_class="wffc")]},
    ]
    expected = {f"ckpt-{low}-workers-{j}" for j in range(2)} | {
        f"rank-{low}-workers-{j}-{p}" for j in range(2) for p in range(2)
    }
    async with policy_in_effect(kueue_kube, ns):
        body = jobset(low, workers, volumeClaimPolicies=policies)
        await kclient.create(api.JOBSETS, queued(body, queue.local, priorities[0]), ns)
        await wait_workload(kclient, ns, low, "Admitted")
        before_pods = await wait_running(kclient, ns, low, 4)
        claims = await wait_for(
            lambda: claims_of(kclient, ns, low),
            lambda found: (
                set(found) == expected and all(phase(c) == "Bound" for c in found.values())
            ),
            f"the 6 claims of {low} to be Bound",
        )
        before = uids(claims)
        mounted_before = {p["metadata"]["name"]: pod_claims(p["spec"]) for p in before_pods}
        jobs_before = {
            j["metadata"]["name"]: job_claims(j) for j in await jobs_of(kclient, ns, low)
        }

        urgent = jobset(high, gpu_workers("workers", 1, 2, 3))
        await kclient.create(api.JOBSETS, queued(urgent, queue.local, priorities[1]), ns)
        evicted = await wait_workload(kclient, ns, low, "Evicted")
        assert (condition(evicted, "Evicted") or {}).get("reason") == "Preempted"
        preempted = await wait_jobset(kclient, ns, low, api.SUSPENDED)
        assert suspended(preempted)
        await wait_for(
            lambda: live_pods(kclient, ns, low),
            lambda pods: pods == [],
            f"the pods of the preempted {low} to be gone",
            seconds=90,
        )
        kept = await claims_of(kclient, ns, low)
        assert uids(kept) == before, "preemption must not delete or replace a claim"
        for claim in kept.values():
            assert not claim["metadata"].get("deletionTimestamp"), claim["metadata"]["name"]

        await wait_jobset(kclient, ns, high, api.COMPLETED)
        readmitted = await wait_workload(kclient, ns, low, "Admitted")
        assert not holds(readmitted, "Evicted")
        after_pods = await wait_running(kclient, ns, low, 4)
        assert not suspended(await get_jobset(kclient, ns, low))
        jobs_after = {j["metadata"]["name"]: job_claims(j) for j in await jobs_of(kclient, ns, low)}
        assert jobs_after == jobs_before
        by_rank = {
            (p["metadata"]["labels"][api.JOB_INDEX], p["metadata"]["annotations"][INDEX]): p
            for p in after_pods
        }
        for pod_name, mounted in mounted_before.items():
            old = next(p for p in before_pods if p["metadata"]["name"] == pod_name)
            rank = (old["metadata"]["labels"][api.JOB_INDEX], old["metadata"]["annotations"][INDEX])
            assert pod_claims(by_rank[rank]["spec"]) == mounted, rank
        assert uids(await claims_of(kclient, ns, low)) == before
    kcontroller.assert_clean()


@pytest.fixture
async def kueue_snapshots(kueue_kube: Kube) -> None:
    """The VolumeSnapshot CRDs on the Kueue cluster (no snapshot controller: the test plays
    it), installed before the controller starts (ask for this fixture first)."""
    await install_other_crds(kueue_kube, csi.snapshot_crds())


async def test_preemption_snapshots_only_the_claims_whensuspended_asks_to_free(
    kueue_snapshots: None,
    kcontroller: ControllerProcesses,
    kclient: KubeClient,
    kueue_namespace: str,
    queue: Queue,
    priorities: tuple[str, str],
) -> None:
    """Under Kueue, preemption is no retention case: the claim whose policy snapshots on
    completion and failure is kept as it is, no snapshot taken. The claim whose policy
    says whenSuspended: Snapshot is freed while the JobSet waits in the queue: once its pods
    are gone it is snapshotted, deleted only once the snapshot is ready (the test plays the
    snapshot controller), and made again from that snapshot when Kueue admits the JobSet again,
    before its Jobs resume."""
    ns, low, high = kueue_namespace, "freed", "urgent-2"
    workers = mounting(mounting(gpu_workers("workers", 2, 1, 1, run=FOREVER), "kept", "/kept"),
                       "scratch", "/scratch")  # fmt: skip
    # (Not whenDeleted: with no snapshot controller the namespace's deletion would wait.)
    every_end = {"whenCompleted": "Snapshot", "whenFailed": "Snapshot"}
    policies = [
        {"templates": [claim_template("kept", storage_class="standard")],
         "retentionPolicy": every_end},
        {"templates": [claim_template("scratch", storage_class="standard")],
         "retentionPolicy": {"whenSuspended": "Snapshot"},
         "restorePolicy": {"source": "NewestSnapshot", "whenMissing": "CreateEmpty"}},
    ]  # fmt: skip
    kept, scratch = f"kept-{low}", f"scratch-{low}"
    body = jobset(low, workers, volumeClaimPolicies=policies)
    await kclient.create(api.JOBSETS, queued(body, queue.local, priorities[0]), ns)
    await wait_workload(kclient, ns, low, "Admitted")
    await wait_running(kclient, ns, low, 2)
    before = await wait_for(
        lambda: claims_of(kclient, ns, low),
        lambda found: (
            set(found) == {kept, scratch} and all(phase(c) == "Bound" for c in found.values())
        ),
        f"the claims of {low} to be Bound",
    )

    urgent = jobset(high, gpu_workers("workers", 1, 2, 4))
    await kclient.create(api.JOBSETS, queued(urgent, queue.local, priorities[1]), ns)
    await wait_workload(kclient, ns, low, "Evicted")
    await wait_jobset(kclient, ns, low, api.SUSPENDED)
    (taken,) = await wait_for(
        lambda: snapshots_of(kclient, ns, scratch),
        lambda found: len(found) == 1,
        f"the snapshot of {scratch}, once the preempted pods are gone",
        seconds=90,
    )
    assert await live_pods(kclient, ns, low) == [], "snapshotted while a pod could still write"
    assert (await get_jobset(kclient, ns, low))["status"]["volumes"]["suspensionReleases"]
    # Kept until the snapshot is ready; then deleted.
    still = await kclient.get(CLAIMS, scratch, ns)
    assert not still["metadata"].get("deletionTimestamp")
    await set_snapshot_status(kclient, ns, taken["metadata"]["name"], {"readyToUse": True})
    await wait_for(
        lambda: claims_of(kclient, ns, low),
        lambda found: (
            scratch not in found or bool(found[scratch]["metadata"].get("deletionTimestamp"))
        ),
        f"{scratch} deleted once its snapshot is ready",
    )
    # The other policy's claim: no snapshot, the same claim.
    assert await snapshots_of(kclient, ns, kept) == []
    now = await claims_of(kclient, ns, low)
    assert now[kept]["metadata"]["uid"] == before[kept]["metadata"]["uid"]
    assert not now[kept]["metadata"].get("deletionTimestamp")

    await wait_jobset(kclient, ns, high, api.COMPLETED)
    await wait_workload(kclient, ns, low, "Admitted")
    made = await wait_for(
        lambda: claims_of(kclient, ns, low),
        lambda found: (
            scratch in found
            and found[scratch]["metadata"]["uid"] != before[scratch]["metadata"]["uid"]
        ),
        f"{scratch} made again on readmission",
        seconds=90,
    )
    assert made[scratch]["spec"]["dataSourceRef"]["name"] == taken["metadata"]["name"]
    await wait_running(kclient, ns, low, 2)
    assert await snapshots_of(kclient, ns, kept) == []
    assert (await claims_of(kclient, ns, low))[kept]["metadata"]["uid"] == before[kept]["metadata"][
        "uid"
    ]
    kcontroller.assert_clean()


# ----------------------------------------------------------------------------- d. resize


async def test_raising_replicas_of_an_admitted_jobset_makes_kueue_stop_and_readmit_it(
    kcontroller: ControllerProcesses,
    kclient: KubeClient,
    kueue_kube: Kube,
    kueue_namespace: str,
    queue: Queue,
) -> None:
    """Raising ``replicas`` of a running, admitted JobSet is accepted (by this CRD's rules and
    Kueue's webhook). Kueue then finds its Workload no longer matches the JobSet: it deletes the
    Workload, stops the JobSet (suspends it: its running pod goes, Event ``Stopped``, "No
    matching Workload"), makes a new Workload of the new size and admits that when the quota
    allows: the JobSet runs again with both Jobs, its first pod replaced (docs/kueue.md)."""
    ns, name = kueue_namespace, "resized"
    body = queued(jobset(name, gpu_workers("workers", 1, 1, 1, run=FOREVER)), queue.local)
    await kclient.create(api.JOBSETS, body, ns)
    first = await wait_workload(kclient, ns, name, "Admitted")
    [pod] = await wait_running(kclient, ns, name, 1)
    assert [p["count"] for p in first["spec"]["podSets"]] == [1]

    patch = [{"op": "replace", "path": "/spec/replicatedJobs/0/replicas", "value": 2}]
    await kclient.patch(api.JOBSETS, name, patch, ns, patch_type="json")
    stopped = await wait_event(
        kueue_kube, ns, name, "Stopped", contains="No matching Workload", seconds=90
    )
    assert stopped.type == "Normal"
    second = await wait_for(
        lambda: workload_of(kclient, ns, name),
        lambda wl: (
            wl is not None
            and [p["count"] for p in wl["spec"]["podSets"]] == [2]
            and holds(wl, "Admitted")
        ),
        f"a Workload of 2 pods for JobSet {name}, admitted",
        seconds=90,
    )
    assert second is not None
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    pods = await wait_running(kclient, ns, name, 2)
    assert pod["metadata"]["uid"] not in {p["metadata"]["uid"] for p in pods}
    assert not suspended(await get_jobset(kclient, ns, name))
    jobs = [j["metadata"]["name"] for j in await jobs_of(kclient, ns, name)]
    assert jobs == [f"{name}-workers-0", f"{name}-workers-1"]
    kcontroller.assert_clean()


# ----------------------------------------------------------------------------- teardown


async def test_stopping_kueue_removes_its_webhooks_first(
    kueue_cluster: LocalCluster, kclient: KubeClient, kueue_namespace: str
) -> None:
    """Kueue stopped (as the cluster's teardown does first): its webhook configurations are
    gone, so a JobSet write does not hit a webhook nobody answers (failurePolicy Fail): a queued
    JobSet is created and updated, and nothing suspends it. Kueue is started again after."""
    ns, name = kueue_namespace, "unqueued"
    manager = kueue_cluster.kueue
    assert manager is not None and manager.process is not None
    try:
        manager.stop()
        for resource, config in (
            (MUTATING_HOOKS, kueue.MUTATING),
            (VALIDATING_HOOKS, kueue.VALIDATING),
        ):
            assert await find(kclient, resource, config, None) is None, config
        body = queued(jobset(name, gpu_workers("workers", 1, 1, 1)), "lq")
        created = await kclient.create(api.JOBSETS, body, ns)
        assert not created["spec"].get("suspend"), "no Kueue webhook suspended it"
        patched = await kclient.patch(
            api.JOBSETS, name, {"metadata": {"labels": {"team": "a"}}}, ns
        )
        assert patched["metadata"]["labels"]["team"] == "a"
    finally:
        manager.start(JOBSET_API)
    for resource, config in (
        (MUTATING_HOOKS, kueue.MUTATING),
        (VALIDATING_HOOKS, kueue.VALIDATING),
    ):
        assert await find(kclient, resource, config, None) is not None, config
