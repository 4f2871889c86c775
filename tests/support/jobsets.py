"""Helpers for JobSet tests: manifests, an in-process controller, driving Job status by hand."""

from __future__ import annotations

import asyncio
import copy
import datetime
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from controller import config as configmod
from controller.config import Config
from controller.jobset import api
from controller.jobset.reconciler import JobSetReconciler
from controller.jobset.setup import CONTROLLER, setup
from controller.runtime.client import JOBS, ApiError, KubeClient
from controller.runtime.manager import Manager, api_client_for
from controller.runtime.store import object_key
from tests.helpers import Kube, progress, wait_for
from tests.support.replicas import Replica

Obj = dict[str, Any]


def pod_template(**annotations: str) -> Obj:
    return {
        "metadata": {"annotations": dict(annotations)},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox"}]},
    }


def replicated_job(name: str, replicas: int = 1, completions: int = 1, **extra: Any) -> Obj:
    rjob: Obj = {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "completions": completions,
                "parallelism": completions,
                "backoffLimit": 0,
                "template": pod_template(),
            }
        },
    }
    rjob.update(extra)
    return rjob


def with_pod_annotations(rjob: Obj, **annotations: str) -> Obj:
    """Add annotations to a replicated job's pod template (e.g. KWOK's run-duration)."""
    pod = rjob["template"]["spec"]["template"]
    pod.setdefault("metadata", {}).setdefault("annotations", {}).update(annotations)
    return rjob


def jobset(name: str, *rjobs: Obj, **spec: Any) -> Obj:
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.KIND,
        "metadata": {"name": name},
        "spec": {"replicatedJobs": [copy.deepcopy(r) for r in rjobs], **spec},
    }


def with_mounts(rjob: Obj, *claims: str) -> Obj:
    """Mount the volumes named ``claims`` (claim templates) at /<name> in the main container."""
    container = rjob["template"]["spec"]["template"]["spec"]["containers"][0]
    container["volumeMounts"] = [{"name": c, "mountPath": f"/{c}"} for c in claims]
    return rjob


_CLAIM_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


def scale_jobset(name: str) -> Obj:
    """The JobSet of the scale benchmark and the write-budget test: two replicated jobs of 2 Jobs,
    a JobSet-scope claim mounted by all, a Job-scope claim per Job of the first (3 claims)."""
    return jobset(
        name,
        with_mounts(replicated_job("init", 2), "shared", "ckpt"),
        with_mounts(replicated_job("train", 2), "shared"),
        volumeClaimPolicies=[
            {"templates": [{"metadata": {"name": "shared"}, "spec": _CLAIM_SPEC}]},
            {
                "scope": "Job",
                "targetReplicatedJobs": ["init"],
                "templates": [{"metadata": {"name": "ckpt"}, "spec": _CLAIM_SPEC}],
            },
        ],
    )


# The fewest writes a ``scale_jobset`` run to completion needs (derived in docs/performance.md),
# as ``<verb> <resource>[/<subresource>]`` of the audit log.
SCALE_JOBSET_MINIMUM_WRITES = {
    "create jobs": 4,  # 2 replicated jobs x 2 replicas
    "create persistentvolumeclaims": 3,  # 1 JobSet-scope + 2 Job-scope (init's 2 Jobs)
    "create services": 1,  # the headless Service for pod DNS
    "patch jobsets": 1,  # the retention finalizer, added once
    # One per condition state a client must see: VolumesReady=False (ClaimsPending),
    # VolumesReady=True (ClaimsBound), Completed=True.
    "update jobsets/status": 3,
    "create events": 4,  # ClaimCreated x 3 and AllJobsCompleted
}


def scale_pod_jobset(name: str, completions: int) -> Obj:
    """The Pod-scope JobSet of the scale benchmark: one replicated job of 2 Indexed Jobs of
    ``completions`` pods each (all running at once), a Pod-scope claim per pod (2 x completions)."""
    workers = with_mounts(replicated_job("workers", 2, completions), "rank")
    workers["template"]["spec"]["completionMode"] = "Indexed"
    return jobset(
        name,
        workers,
        volumeClaimPolicies=[
            {"scope": "Pod", "templates": [{"metadata": {"name": "rank"}, "spec": _CLAIM_SPEC}]}
        ],
    )


def scale_pod_jobset_minimum_writes(completions: int) -> dict[str, int]:
    """The fewest writes a ``scale_pod_jobset`` run to completion needs (docs/performance.md),
    derived as ``SCALE_JOBSET_MINIMUM_WRITES``: one claim and one ClaimCreated Event per Job x
    completion index, the rest as for the other JobSet."""
    claims = 2 * completions
    return {
        "create jobs": 2,
        "create persistentvolumeclaims": claims,
        "create services": 1,
        "patch jobsets": 1,
        "update jobsets/status": 3,  # VolumesReady False (ClaimsPending), True, Completed
        "create events": claims + 1,  # ClaimCreated per claim, AllJobsCompleted
    }


@dataclass
class RunningController:
    manager: Manager[Config]
    reconciler: JobSetReconciler


@asynccontextmanager
async def running_controller(
    kube: Kube, namespace: str, *args: str
) -> AsyncIterator[RunningController]:
    """The JobSet controller in this event loop, watching one namespace, no leader election;
    ``args`` are extra command-line flags."""
    config = configmod.parse(
        [
            f"--kubeconfig={kube.cluster.kubeconfig}",
            f"--namespaces={namespace}",
            "--leader-elect=false",
            "--metrics-bind-address=0",
            "--health-probe-bind-address=0",
            "--shutdown-timeout=5",
            *args,
        ],
        env={},
    )
    api_client = await api_client_for(config)
    async with api_client:
        manager = Manager(config, api_client)
        reconciler = setup(manager)
        stop = asyncio.Event()
        task = asyncio.create_task(manager.run(stop))
        try:
            await asyncio.wait_for(
                asyncio.gather(
                    *(i.synced.wait() for c in manager.caches for i in c.informers.values())
                ),
                30,
            )
            yield RunningController(manager, reconciler)
        finally:
            stop.set()
            await asyncio.wait_for(task, 30)


async def get_jobset(client: KubeClient, namespace: str, name: str) -> Obj:
    return await client.get(api.JOBSETS, name, namespace)


async def jobs_of(client: KubeClient, namespace: str, name: str) -> list[Obj]:
    listed = await client.list(JOBS, namespace, label_selector=f"{api.JOBSET_NAME}={name}")
    return sorted(listed["items"], key=lambda j: j["metadata"]["name"])


def condition(obj: Obj, kind: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


async def wait_condition(
    client: KubeClient,
    namespace: str,
    name: str,
    kind: str,
    status: str = "True",
    seconds: float = 60,
) -> Obj:
    async def observe() -> Obj:
        return await get_jobset(client, namespace, name)

    def holds(obj: Obj) -> bool:
        found = condition(obj, kind)
        return found is not None and found.get("status") == status

    return await wait_for(
        observe, holds, f"JobSet {name} condition {kind}={status}", seconds=seconds
    )


async def collect_garbage(client: KubeClient, namespace: str, name: str) -> None:
    """Play the garbage collector (absent from the integration tier): finish foreground deletes."""
    for job in await jobs_of(client, namespace, name):
        meta = job["metadata"]
        if meta.get("deletionTimestamp") and "foregroundDeletion" in (meta.get("finalizers") or []):
            await client.patch(JOBS, meta["name"], {"metadata": {"finalizers": None}}, namespace)


async def wait_jobs(
    client: KubeClient,
    namespace: str,
    name: str,
    count: int,
    attempt: int | None = None,
    seconds: float = 60,
    gc: bool = False,
) -> list[Obj]:
    async def observe() -> list[Obj]:
        if gc:
            await collect_garbage(client, namespace, name)
        jobs = await jobs_of(client, namespace, name)
        return [
            j
            for j in jobs
            if not j["metadata"].get("deletionTimestamp")
            and (
                attempt is None or j["metadata"]["labels"].get(api.RESTART_ATTEMPT) == str(attempt)
            )
        ]

    what = f"{count} Jobs of JobSet {name}" + (
        f" at restart attempt {attempt}" if attempt is not None else ""
    )
    return await wait_for(observe, lambda jobs: len(jobs) == count, what, seconds=seconds)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def complete_job(client: KubeClient, namespace: str, job: Obj) -> None:
    """Mark a Job succeeded the way the Job controller would (status validation is strict)."""
    completions = int(job["spec"].get("completions") or 1)
    now = _now()
    fresh = await client.get(JOBS, job["metadata"]["name"], namespace)
    status = {
        "startTime": (fresh.get("status") or {}).get("startTime") or now,
        "active": 0,
        "ready": 0,
        "completionTime": now,
        "succeeded": completions,
        "completedIndexes": f"0-{completions - 1}" if completions > 1 else "0",
        "conditions": [
            {
                "type": "SuccessCriteriaMet",
                "status": "True",
                "reason": "CompletionsReached",
                "message": "Reached expected number of succeeded pods",
                "lastProbeTime": now,
                "lastTransitionTime": now,
            },
            {
                "type": "Complete",
                "status": "True",
                "reason": "CompletionsReached",
                "message": "Reached expected number of succeeded pods",
                "lastProbeTime": now,
                "lastTransitionTime": now,
            },
        ],
    }
    await client.patch(
        JOBS, job["metadata"]["name"], {"status": status}, namespace, subresource="status"
    )


async def fail_job(
    client: KubeClient,
    namespace: str,
    job: Obj,
    reason: str = "BackoffLimitExceeded",
    message: str = "Job has reached the specified backoff limit",
) -> None:
    now = _now()
    fresh = await client.get(JOBS, job["metadata"]["name"], namespace)
    status = {
        "startTime": (fresh.get("status") or {}).get("startTime") or now,
        "active": 0,
        "ready": 0,
        "failed": 1,
        "conditions": [
            {
                "type": "FailureTarget",
                "status": "True",
                "reason": reason,
                "message": message,
                "lastProbeTime": now,
                "lastTransitionTime": now,
            },
            {
                "type": "Failed",
                "status": "True",
                "reason": reason,
                "message": message,
                "lastProbeTime": now,
                "lastTransitionTime": now,
            },
        ],
    }
    await client.patch(
        JOBS, job["metadata"]["name"], {"status": status}, namespace, subresource="status"
    )


async def mark_suspended(client: KubeClient, namespace: str, job: Obj, **counters: int) -> None:
    """The Job controller's Suspended condition on a suspended Job (upstream's tests set it by
    hand too: Kubernetes lets a suspended Job's scheduling directives change once it has it), and
    ``counters`` (e.g. no pod ``active`` or ``terminating`` once it deleted them)."""
    now = _now()
    condition = {
        "type": "Suspended",
        "status": "True",
        "reason": "JobSuspended",
        "message": "Job suspended",
        "lastProbeTime": now,
        "lastTransitionTime": now,
    }
    status = {"conditions": [condition], **counters}
    await client.patch(
        JOBS, job["metadata"]["name"], {"status": status}, namespace, subresource="status"
    )


async def ready_job(client: KubeClient, namespace: str, job: Obj) -> None:
    """Report all of a Job's pods as ready (what the startup policies wait for)."""
    pods = int(job["spec"].get("parallelism") or 1)
    # A running Job's startTime is immutable: keep the one it has (e.g. reported active before).
    fresh = await client.get(JOBS, job["metadata"]["name"], namespace)
    started = (fresh.get("status") or {}).get("startTime") or _now()
    status = {"startTime": started, "active": pods, "ready": pods}
    await client.patch(
        JOBS, job["metadata"]["name"], {"status": status}, namespace, subresource="status"
    )


def writes(manager: Manager[Config]) -> float:
    """Mutating API requests made by this controller so far (from its own client metrics)."""
    return progress(manager.registry.collect(), CONTROLLER).writes


def reconciles(manager: Manager[Config]) -> float:
    return progress(manager.registry.collect(), CONTROLLER).reconciles


def scheduled(running: RunningController) -> list[str]:
    """Keys waiting for a delayed add (requeue-after or backoff) in the controller's queues."""
    return sorted(key for c in running.manager.controllers for key in c.queue.delayed())


def batched(running: RunningController) -> list[str]:
    """Keys whose children's events wait for the end of their batch (not queued yet)."""
    return sorted(key for c in running.manager.controllers for key in c.queue.batched())


async def settled(
    running: RunningController, client: KubeClient, *, quiet: bool = False, seconds: float = 60
) -> None:
    """Wait until the in-process controller has processed everything that happened so far.

    Settled means, at one instant: each of its caches holds exactly what the API server listed
    just before (the same objects at the same resourceVersions), its work queue is idle (nothing
    queued, nothing being reconciled, no child event waiting for its batch) and it made no write
    since before those lists. Informer handlers enqueue (or batch) as they update the cache, so
    every event up to the lists was delivered, queued and reconciled, and what those reconciles
    wrote is already in the API server. A negative assertion after this ("no Job was created")
    is about what the controller decided, not about how long the test waited. Delayed requeues
    (status pacing, TTL) are not waited for, unless ``quiet``: then nothing may be scheduled
    either, so nothing will happen until something changes (a reconcile loop always has its
    next pass queued, running or scheduled).
    """

    async def unsettled() -> str:
        """Why the controller is not settled yet; "" once it is."""
        before = writes(running.manager)
        listed = []
        for cache in running.manager.caches:
            for informer in cache.informers.values():
                try:
                    page = await client.list(
                        informer.resource,
                        informer.namespace,
                        label_selector=informer.label_selector,
                    )
                except ApiError as err:
                    # An optional resource this API server does not serve (the VolumeSnapshot
                    # CRDs not installed): its informer holds nothing, and says so.
                    if err.status in (403, 404) and informer.unavailable == err.status:
                        continue
                    raise
                versions = {object_key(o): o["metadata"]["resourceVersion"] for o in page["items"]}
                listed.append((informer, versions))
        # No await from here on: everything below is one instant of the controller.
        for informer, versions in listed:
            cached = {object_key(o): o["metadata"]["resourceVersion"] for o in informer.store}
            if cached != versions:
                behind = sorted(k for k in versions if cached.get(k) != versions[k])
                extra = sorted(set(cached) - set(versions))
                return f"{informer.resource.plural} cache differs: {behind + extra}"
        now = progress(running.manager.registry.collect(), CONTROLLER)
        if not now.idle:
            return "the work queue is busy"
        if batched(running):
            return f"events batched for {batched(running)}"
        if now.writes != before:
            return f"it wrote {now.writes - before:.0f} times meanwhile"
        if quiet and scheduled(running):
            return f"reconciles scheduled for {scheduled(running)}"
        return ""

    await wait_for(unsettled, lambda why: not why, "the controller to settle", seconds=seconds)


def _marker(name: str) -> Obj:
    """A JobSet our controller must leave alone: ``managedBy`` another controller, whose name is
    the marker's own (so the process's count of JobSets managed elsewhere names it)."""
    body = jobset(name, replicated_job("marker", 1), managedBy=f"example.com/{name}")
    body["metadata"]["labels"] = {"tests.stateful-jobset/marker": "true"}
    return body


async def settled_process(
    replica: Replica, client: KubeClient, namespace: str, seconds: float = 60
) -> None:
    """Wait until a JobSet controller running as a process has processed what happened so far.

    A process's caches cannot be compared with the API server, so this writes a marker JobSet
    (managed by another controller: ours only caches it) and waits until one scrape of the
    process's metrics shows the marker in its JobSet cache
    (``stateful_jobset_jobsets_managed_elsewhere`` is computed from that cache at scrape time,
    per managedBy value, and the marker's is its own) and an idle work queue, with no reconcile
    since the previous such scrape. JobSet events reach the controller in order, so every JobSet
    event before the marker was delivered and reconciled. Events of children (Jobs, claims) are
    not ordered with the marker; what the controller does about them before they arrive is not
    covered. The marker is deleted again.
    """
    name = f"settle-{uuid.uuid4().hex[:8]}"
    await client.create(api.JOBSETS, _marker(name), namespace)
    last: list[float] = []

    async def unsettled() -> str:
        families = list(text_string_to_metric_families(replica.metrics_text()))
        seen = any(
            s.labels.get("managed_by") == f"example.com/{name}"
            for f in families
            if f.name == "stateful_jobset_jobsets_managed_elsewhere"
            for s in f.samples
        )
        now = progress(families, CONTROLLER)
        previous, last[:] = last[:], [now.reconciles]
        if not seen:
            return f"the marker JobSet {name} is not in its cache"
        if not now.idle:
            return "the work queue is busy"
        if previous != [now.reconciles]:
            return "it reconciled since the last look"
        return ""

    try:
        await wait_for(
            unsettled, lambda why: not why, f"{replica.identity} to settle", seconds=seconds
        )
    finally:
        await client.delete(api.JOBSETS, name, namespace)


async def assert_no_writes_at_steady_state(running: RunningController, client: KubeClient) -> None:
    """Let the controller settle, force a resync of every cache, and check that reconciling
    everything again writes nothing."""
    await settled(running, client)
    before = writes(running.manager)
    reconciles_before = reconciles(running.manager)
    for cache in running.manager.caches:
        cache.resync()
    await settled(running, client)
    assert reconciles(running.manager) > reconciles_before, "the resync was not reconciled"
    assert writes(running.manager) == before, "a reconcile at steady state wrote something"
