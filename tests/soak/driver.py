"""The driver: creates JobSets at a steady rate and does to each what its scenario says.

Every API call is retried while the API server is unreachable or overloaded (it is restarted once
during the soak); a call that fails for any other reason is reported as a violation, because the
driver only ever asks for things the API accepts.

The driver also plays the snapshot controller (the ``full`` profile runs none): every
VolumeSnapshot the controller takes of a JobSet's claim (retention Snapshot) is made readyToUse
after a random delay, as its status subresource, and a few (the ``FAIL_EVERY``-th, at most once per
claim) get a ``status.error`` instead; for those the driver checks, some seconds later, that the
claim is still there, then deletes the failed snapshot, as an operator would to have it taken
again. What it did is in ``snapshots`` (``model.SnapshotRecord``), for the invariants.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import aiohttp

from controller.jobset import api
from controller.jobset.volumes.model import SNAPSHOT_OF_UID_ANNOTATION
from controller.runtime.client import CLAIMS, PODS, VOLUME_SNAPSHOTS, ApiError, KubeClient
from tests.soak.model import (
    JobSetRecord,
    Loss,
    Obj,
    OptIn,
    Scale,
    SnapshotRecord,
    labels,
    meta,
    name_of,
)
from tests.soak.scenarios import EXIT_CODE, Planned

T = TypeVar("T")
RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})
CALL_TIMEOUT = 20.0
RETRY_FOR = 180.0
TERMINAL_WAIT = 240.0
REPLACE_LOST = "jobset.sigs.k8s.io/replace-lost-claims"
OWNER_UID = "jobset.sigs.k8s.io/jobset-uid"
RETAINED_FROM = "jobset.sigs.k8s.io/retained-from-uid"
# Playing the snapshot controller: a snapshot is marked this many seconds after the driver saw
# it; the 2nd, 8th, 14th... (FAIL_EVERY) fails instead, and its claim must still be there
# FAILED_HOLD seconds later.
READY_DELAY = (1.0, 6.0)
FAIL_EVERY = 6
FAILED_HOLD = (5.0, 8.0)
SNAPSHOT_POLL = 1.0
FAILURE_MESSAGE = "soak: the driver fails this snapshot on purpose"


def starting(err: ApiError) -> bool:
    """An answer of an API server still starting (after its restart), not about the request: a
    404 that names no object (a custom resource before the CRDs are loaded again,
    kubernetes/kubernetes#115241), or the 403 of an admission plugin whose informers have not
    synced yet ("not yet ready to handle request")."""
    details = err.body.get("details")
    if err.status == 404:
        return not (isinstance(details, dict) and details.get("name"))
    return err.status == 403 and "not yet ready to handle request" in err.message


class DriverError(Exception):
    """The driver could not do what its scenario says (a non-retriable answer or a timeout)."""


@dataclass
class Driver:
    client: KubeClient
    namespace: str
    records: dict[str, JobSetRecord]
    rng: random.Random
    retries: int = 0
    errors: list[str] = field(default_factory=list)
    # The controller's VolumeSnapshots, by uid, and the driver's task marking each.
    snapshots: dict[str, SnapshotRecord] = field(default_factory=dict)
    snapshot_tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict)
    failed_claims: set[str] = field(default_factory=set)  # uids of claims whose snapshot failed

    async def call(
        self, make: Callable[[], Awaitable[T]], what: str, *, accept: tuple[int, ...] = ()
    ) -> T | None:
        """``make()``, retried while the API server is away; None when it answers ``accept``."""
        deadline = time.monotonic() + RETRY_FOR
        while True:
            try:
                return await asyncio.wait_for(make(), CALL_TIMEOUT)
            except ApiError as err:
                if starting(err):
                    problem = str(err)  # still away, though it answers
                elif err.status in accept:
                    return None
                elif err.status not in RETRIED_STATUSES:
                    raise DriverError(f"{what}: {err}") from err
                else:
                    problem = str(err)
            except (aiohttp.ClientError, OSError, TimeoutError) as err:
                problem = f"{type(err).__name__}: {err}"
            if time.monotonic() > deadline:
                raise DriverError(f"{what}: still failing after {RETRY_FOR:.0f}s: {problem}")
            self.retries += 1
            await asyncio.sleep(1.0)

    # ----------------------------------------------------------------- steps

    async def create(self, planned: Planned) -> None:
        record = planned.record
        manifest = planned.manifest
        created = await self.call(
            lambda: self.client.create(api.JOBSETS, manifest, self.namespace),
            f"create JobSet {record.name}",
            accept=(409,),  # a lost response to an earlier attempt
        )
        if created is None:
            created = await self.call(
                lambda: self.client.get(api.JOBSETS, record.name, self.namespace),
                f"get JobSet {record.name}",
            )
        record.uid = str(((created or {}).get("metadata") or {}).get("uid") or "")
        record.notes.append(f"created {time.time():.3f}")

    async def delete(self, record: JobSetRecord) -> None:
        if record.delete_requested_at is None:
            record.delete_requested_at = time.time()
        await self.call(
            lambda: self.client.delete(api.JOBSETS, record.name, self.namespace),
            f"delete JobSet {record.name}",
            accept=(404,),
        )
        record.notes.append(f"deleted {time.time():.3f}")

    async def patch(self, record: JobSetRecord, patch: object, what: str, json: bool) -> None:
        await self.call(
            lambda: self.client.patch(
                api.JOBSETS,
                record.name,
                patch,
                self.namespace,
                patch_type="json" if json else "merge",
            ),
            f"{what} JobSet {record.name}",
        )
        record.notes.append(f"{what} {time.time():.3f}")

    async def suspend(self, record: JobSetRecord, value: bool) -> None:
        await self.patch(
            record, {"spec": {"suspend": value}}, "suspend" if value else "resume", json=False
        )

    async def scale(self, record: JobSetRecord, rjob: str, replicas: int) -> None:
        position = list(record.replicated_jobs).index(rjob)
        record.scales.append(Scale(time.time(), rjob, replicas))
        path = f"/spec/replicatedJobs/{position}/replicas"
        patch = [{"op": "replace", "path": path, "value": replicas}]
        await self.patch(record, patch, f"scale {rjob} to {replicas}", json=True)

    async def running_pod(self, record: JobSetRecord, rjob: str, seconds: float = 120) -> Obj:
        selector = f"{api.JOBSET_NAME}={record.name},{api.REPLICATED_JOB_NAME}={rjob}"
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            listed = await self.call(
                lambda: self.client.list(PODS, self.namespace, label_selector=selector),
                f"list pods of {record.name}",
            )
            for pod in (listed or {}).get("items") or []:
                status = pod.get("status") or {}
                if status.get("phase") == "Running" and not pod["metadata"].get(
                    "deletionTimestamp"
                ):
                    return dict(pod)
            await asyncio.sleep(1.0)
        raise DriverError(f"no Running pod of {record.name}/{rjob} within {seconds:.0f}s")

    async def fail_pod(self, record: JobSetRecord, pod: Obj) -> None:
        name = name_of(pod)
        await self.call(
            lambda: self.client.patch(
                PODS, name, {"metadata": {"annotations": {EXIT_CODE: "42"}}}, self.namespace
            ),
            f"fail pod {name}",
        )
        record.notes.append(f"failed pod {name} {time.time():.3f}")

    async def terminal(self, record: JobSetRecord) -> None:
        """Wait until the monitor saw the JobSet Completed or Failed."""
        deadline = time.monotonic() + TERMINAL_WAIT
        while not record.terminal:
            if time.monotonic() > deadline:
                raise DriverError(f"{record.describe()} not terminal after {TERMINAL_WAIT:.0f}s")
            await asyncio.sleep(0.5)

    async def get_jobset(self, record: JobSetRecord) -> Obj | None:
        return await self.call(
            lambda: self.client.get(api.JOBSETS, record.name, self.namespace),
            f"get JobSet {record.name}",
            accept=(404,),
        )

    async def until(
        self, record: JobSetRecord, holds: Callable[[Obj | None], bool], what: str
    ) -> Obj | None:
        """Poll the JobSet (None: gone) until ``holds``."""
        deadline = time.monotonic() + TERMINAL_WAIT
        while True:
            jobset = await self.get_jobset(record)
            if holds(jobset):
                return jobset
            if time.monotonic() > deadline:
                status = (jobset or {}).get("status")
                raise DriverError(
                    f"{record.describe()}: not {what} after {TERMINAL_WAIT:.0f}s (status {status})"
                )
            await asyncio.sleep(0.5)

    async def get_claim(self, name: str) -> Obj | None:
        return await self.call(
            lambda: self.client.get(CLAIMS, name, self.namespace),
            f"get claim {name}",
            accept=(404,),
        )

    async def create_claim(self, record: JobSetRecord, claim: Obj) -> str:
        """The driver's own claim (an impostor); its uid."""
        name = name_of(claim)
        created = await self.call(
            lambda: self.client.create(CLAIMS, claim, self.namespace),
            f"create claim {name}",
            accept=(409,),  # a lost response to an earlier attempt
        )
        created = created or await self.get_claim(name)
        uid = str(meta(created or {}).get("uid") or "")
        record.impostors[uid] = name
        record.notes.append(f"created impostor claim {name} {time.time():.3f}")
        return uid

    async def delete_claim(self, record: JobSetRecord, name: str, uid: str) -> None:
        """Delete that claim object (uid precondition), out of band."""
        await self.call(
            lambda: self.client.delete(CLAIMS, name, self.namespace, precondition_uid=uid),
            f"delete claim {name}",
            accept=(404, 409),  # gone already (a lost response), or another object by now
        )
        record.notes.append(f"deleted claim {name} {time.time():.3f}")

    async def recorded_claim(self, record: JobSetRecord, name: str) -> str:
        """Wait until claim ``name`` exists and the JobSet recorded it as its own; its uid."""
        deadline = time.monotonic() + TERMINAL_WAIT
        while True:
            claim = await self.get_claim(name)
            uid = str(meta(claim or {}).get("uid") or "")
            jobset = await self.get_jobset(record)
            volumes = ((jobset or {}).get("status") or {}).get("volumes") or {}
            prefixes = {
                p for entry in volumes.get("claimUIDs") or [] for p in _uid_prefixes(entry["uids"])
            }
            if uid and uid[:8] in prefixes:
                return uid
            if time.monotonic() > deadline:
                raise DriverError(f"claim {name} not recorded by {record.describe()} (uid {uid})")
            await asyncio.sleep(0.5)

    async def pause(self, low: float, high: float) -> None:
        await asyncio.sleep(self.rng.uniform(low, high))  # the scenario's random think time

    # ------------------------------------------------------------- scenarios

    async def run(self, planned: Planned) -> None:
        record = planned.record
        try:
            if planned.impostor is not None:
                await self._impostor(planned, planned.impostor)
            elif planned.lose:
                await self._lose_claim(planned)
            else:
                await self.create(planned)
                await self._scenario(record)
        except DriverError as err:
            self.errors.append(f"driver: scenario {record.scenario} of {record.name}: {err}")

    async def _scenario(self, record: JobSetRecord) -> None:
        scenario = record.scenario
        if scenario == "delete-running":
            await self.running_pod(record, "workers")
            await self.pause(1, 5)
            await self.delete(record)
        elif scenario == "restart":
            pod = await self.running_pod(record, "workers")
            await self.fail_pod(record, pod)
            await self.terminal(record)
        elif scenario == "suspend-resume":
            await self.pause(3, 6)
            await self.suspend(record, False)
            await self.terminal(record)
        elif scenario == "scale-down":
            await self.running_pod(record, "workers")
            await self.scale(record, "workers", 1)
            await self.terminal(record)
        elif scenario == "suspend-running":
            await self.running_pod(record, "workers")
            await self.suspend(record, True)
            await self.pause(3, 6)
            await self.suspend(record, False)
            await self.terminal(record)
        elif scenario in ("delete-finished", "fail-deleted"):
            await self.terminal(record)
            await self.pause(0.5, 3)
            await self.delete(record)
        else:  # complete, fail
            await self.terminal(record)

    async def _impostor(self, planned: Planned, impostor: Obj) -> None:
        record, name = planned.record, name_of(impostor)
        uid = await self.create_claim(record, impostor)
        await self.create(planned)

        def conflicted(jobset: Obj | None) -> bool:
            return _condition(jobset, "VolumeClaimConflict").get("status") == "True"

        await self.until(record, conflicted, f"in conflict over {name}")
        await self.pause(1, 3)
        if not planned.first_variant:  # the impostor goes; the JobSet proceeds
            await self.delete_claim(record, name, uid)
            await self.terminal(record)
            return
        await self.delete(record)
        await self.until(record, lambda js: js is None, "gone")
        await self.pause(2, 4)  # time for a garbage collector that should have nothing to do
        claim = await self.get_claim(name)
        found = meta(claim or {})
        annotations = found.get("annotations") or {}
        if (
            found.get("uid") != uid
            or found.get("deletionTimestamp")
            or found.get("ownerReferences")
            or OWNER_UID in annotations
            or RETAINED_FROM in annotations
        ):
            raise DriverError(
                f"the impostor claim {name} (uid {uid}) was deleted, replaced or taken over: "
                f"now {found or 'gone'}"
            )
        await self.delete_claim(record, name, uid)

    async def _lose_claim(self, planned: Planned) -> None:
        record, name = planned.record, planned.lose
        await self.create(planned)  # suspended: no pod uses the claim, so it goes at once
        uid = await self.recorded_claim(record, name)
        record.losses.append(Loss(time.time(), name, uid))
        await self.delete_claim(record, name, uid)
        await self.until(
            record, lambda js: _condition(js, "VolumesReady").get("reason") == "ClaimsLost", "Lost"
        )
        await self.suspend(record, False)  # the Jobs that mount it must wait
        await self.pause(2, 4)
        if not planned.first_variant:
            await self.delete(record)
            return
        value = f"{name}@{uid[:8]}"
        record.opt_ins.append(OptIn(time.time(), name, uid[:8]))
        patch = {"metadata": {"annotations": {REPLACE_LOST: value}}}
        await self.patch(record, patch, f"accept the loss of {value}", json=False)
        await self.terminal(record)

    # ------------------------------------------------------- the snapshot controller

    async def play_snapshot_controller(self, stop: asyncio.Event) -> None:
        """List the namespace's VolumeSnapshots every ``SNAPSHOT_POLL`` seconds until ``stop``;
        mark each new one of the controller's (``_settle_snapshot``)."""
        while not stop.is_set():
            try:
                listed = await asyncio.wait_for(
                    self.client.list(VOLUME_SNAPSHOTS, self.namespace), CALL_TIMEOUT
                )
            except (ApiError, aiohttp.ClientError, OSError, TimeoutError):
                listed = {}  # the API server is away
            for item in listed.get("items") or []:
                self._found_snapshot(item)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SNAPSHOT_POLL)

    def _found_snapshot(self, item: Obj) -> None:
        found = meta(item)
        uid = str(found.get("uid") or "")
        jobset = str(labels(item).get(api.JOBSET_NAME) or "")
        if not uid or uid in self.snapshots or jobset not in self.records:
            return
        source = ((item.get("spec") or {}).get("source") or {}).get("persistentVolumeClaimName")
        claim_uid = str((found.get("annotations") or {}).get(SNAPSHOT_OF_UID_ANNOTATION) or "")
        record = SnapshotRecord(
            name=name_of(item),
            uid=uid,
            jobset=jobset,
            source_claim=str(source or ""),
            claim_uid=claim_uid,
            seen_at=time.time(),
        )
        self.snapshots[uid] = record
        fail = len(self.snapshots) % FAIL_EVERY == 2 and claim_uid not in self.failed_claims
        if fail:
            self.failed_claims.add(claim_uid)
        self.snapshot_tasks[uid] = asyncio.create_task(self._settle_snapshot(record, fail))

    async def _settle_snapshot(self, record: SnapshotRecord, fail: bool) -> None:
        try:
            await self.pause(*READY_DELAY)
            now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            status: Obj = {"readyToUse": True, "creationTime": now}
            if fail:
                status = {"readyToUse": False, "error": {"message": FAILURE_MESSAGE, "time": now}}
            # The uid makes the patch conditional: never another object of that name.
            body = {"metadata": {"uid": record.uid}, "status": status}
            record.marked_at = time.time()
            patched = await self.call(
                lambda: self.client.patch(
                    VOLUME_SNAPSHOTS, record.name, body, self.namespace, subresource="status"
                ),
                f"mark VolumeSnapshot {record.name} {'failed' if fail else 'ready'}",
                accept=(404, 409),  # deleted meanwhile (pruned), or another object by now
            )
            if patched is None:
                record.outcome = "gone"
                return
            record.answered_at = time.time()
            record.outcome = "failed" if fail else "ready"
            if fail:
                await self._failed_keeps_claim(record)
        except DriverError as err:
            self.errors.append(f"driver: snapshot controller: {err}")

    async def _failed_keeps_claim(self, record: SnapshotRecord) -> None:
        """The claim of a failed snapshot is kept; then the snapshot goes, to be taken again."""
        await self.pause(*FAILED_HOLD)
        claim = meta(await self.get_claim(record.source_claim) or {})
        jobset = self.records[record.jobset]
        lost = any(loss.uid == record.claim_uid for loss in jobset.losses)
        if not lost:
            if claim.get("uid") != record.claim_uid or claim.get("deletionTimestamp"):
                state = "gone" if not claim else f"uid {claim.get('uid')}"
                if claim.get("deletionTimestamp"):
                    state += f", being deleted since {claim['deletionTimestamp']}"
                raise DriverError(
                    f"{record.describe()} failed, but its claim was not kept: {state}; "
                    f"{jobset.describe()}"
                )
            record.kept_checked = True
        await self.call(
            lambda: self.client.delete(
                VOLUME_SNAPSHOTS, record.name, self.namespace, precondition_uid=record.uid
            ),
            f"delete the failed VolumeSnapshot {record.name}",
            accept=(404, 409),
        )
        record.deleted_at = time.time()


def _uid_prefixes(record: str) -> list[str]:
    """The uid prefixes of one ``status.volumes.claimUIDs`` entry: comma-separated, and for Pod
    scope one group per Job, separated by semicolons."""
    return [p for group in record.split(";") for p in group.split(",") if p]


def _condition(jobset: Obj | None, kind: str) -> Obj:
    for found in ((jobset or {}).get("status") or {}).get("conditions") or []:
        if found.get("type") == kind:
            return dict(found)
    return {}
