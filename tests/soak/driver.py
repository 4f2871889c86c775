"""The driver: creates JobSets at a steady rate and does to each what its scenario says.

Every API call is retried while the API server is unreachable or overloaded (it is restarted once
during the soak); a call that fails for any other reason is reported as a violation, because the
driver only ever asks for things the API accepts.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

import aiohttp

from controller.jobset import api
from controller.runtime.client import PODS, ApiError, KubeClient
from tests.soak.model import JobSetRecord, Obj, Scale, name_of
from tests.soak.scenarios import EXIT_CODE, Planned, pod_scope_manifest

T = TypeVar("T")
RETRIED_STATUSES = frozenset({429, 500, 502, 503, 504})
CALL_TIMEOUT = 20.0
RETRY_FOR = 180.0
TERMINAL_WAIT = 240.0


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

    async def call(
        self, make: Callable[[], Awaitable[T]], what: str, *, accept: tuple[int, ...] = ()
    ) -> T | None:
        """``make()``, retried while the API server is away; None when it answers ``accept``."""
        deadline = time.monotonic() + RETRY_FOR
        while True:
            try:
                return await asyncio.wait_for(make(), CALL_TIMEOUT)
            except ApiError as err:
                if err.status in accept:
                    return None
                if err.status not in RETRIED_STATUSES:
                    raise DriverError(f"{what}: {err}") from err
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

    async def pause(self, low: float, high: float) -> None:
        await asyncio.sleep(self.rng.uniform(low, high))

    # ------------------------------------------------------------- scenarios

    async def run(self, planned: Planned) -> None:
        record = planned.record
        try:
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

    async def pod_scope_rejected(self) -> str | None:
        """Admission must reject Pod scope ("not supported yet"); a violation message if not."""
        name = "soak-pod-scope"
        try:
            await self.call(
                lambda: self.client.create(api.JOBSETS, pod_scope_manifest(name), self.namespace),
                "create the Pod-scope JobSet",
            )
        except DriverError as err:
            cause = err.__cause__
            if isinstance(cause, ApiError) and cause.status == 422:
                if "not supported yet" in cause.message:
                    return None
                return f"Pod scope was rejected, but not as unsupported: {cause.message}"
            raise
        await self.call(
            lambda: self.client.delete(api.JOBSETS, name, self.namespace), f"delete {name}"
        )
        return "a JobSet with a Pod-scope volume claim policy was admitted (expected a rejection)"
