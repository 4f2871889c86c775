"""Reconcile workers: take keys from the work queue, reconcile them, decide what happens next.

controller-runtime's semantics:
- an exception (or ``Result(error=...)``) → requeue with the item's rate limit (backoff); the
  worker logs it with its traceback and carries on;
- ``Result(requeue_after=s)`` → forget the failures, come back after ``s`` seconds;
- ``Result(requeue=True)`` → requeue with rate limit; with ``requeue_after=s`` too (not in
  controller-runtime, where ``requeue_after`` wins), come back after the backoff or after ``s``,
  whichever is sooner, the failures kept;
- otherwise → forget (reset the backoff).
One deviation: a pass that succeeds (``requeue_after`` or nothing) drops the delayed add earlier
passes of its key asked for (``WorkQueue.cancel_after``) before its own answer is applied; in
controller-runtime the earliest deadline wins and a superseded one still runs a pass. The
reconciler is level-triggered with the time passed in: each pass computes every time it must come
back (a hold running out, a TTL expiring), so a timer an earlier pass set from older state only
costs a pass that finds nothing to do (a JobSet's held counters already written by a later
pass: 85 of 912 passes at b, N = 100). A failed pass keeps them: its backoff may be longer.
Every reconcile gets a reconcile ID, bound into the structured log context together with the
controller's name and the object's namespace/name.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import structlog
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from controller.runtime.client import ApiError
from controller.runtime.store import split_key
from controller.runtime.workqueue import ShutDown, WorkQueue

log = structlog.get_logger("controller")


@dataclass(frozen=True)
class Result:
    requeue: bool = False
    requeue_after: float | None = None


Reconcile = Callable[[str], Awaitable[Result]]

# controller-runtime's buckets for reconcile time.
_RECONCILE_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
    0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30,
    40, 50, 60,
)  # fmt: skip


class ControllerMetrics:
    """controller-runtime's reconcile metrics, created once per registry."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.total = Counter(
            "controller_runtime_reconcile_total",
            "Total number of reconciliations per controller",
            ["controller", "result"],
            registry=registry,
        )
        self.errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller",
            ["controller"],
            registry=registry,
        )
        self.time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            buckets=_RECONCILE_BUCKETS,
            registry=registry,
        )
        self.max_concurrent = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            ["controller"],
            registry=registry,
        )
        self.active = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            ["controller"],
            registry=registry,
        )


class Controller:
    def __init__(
        self,
        name: str,
        queue: WorkQueue[str],
        reconcile: Reconcile,
        *,
        workers: int = 4,
        metrics: ControllerMetrics | None = None,
        object_label: str = "name",
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.name = name
        self.queue = queue
        self.reconcile = reconcile
        self.workers = workers
        self.metrics = metrics or ControllerMetrics(None)
        self.object_label = object_label
        self.metrics.max_concurrent.labels(controller=name).set(workers)
        # The labelled series this controller writes, looked up once: ``labels()`` takes a lock
        # and builds a key on every call, and a reconcile would make four such calls.
        self._totals = {
            result: self.metrics.total.labels(controller=name, result=result)
            for result in ("success", "error", "requeue", "requeue_after")
        }
        self._errors = self.metrics.errors.labels(controller=name)
        self._active = self.metrics.active.labels(controller=name)
        self._time = self.metrics.time.labels(controller=name)

    async def process(self, key: str) -> None:
        """Reconcile one key now and account for the result (metrics, requeue, backoff), as a
        worker does with each key it takes off the queue (and then marks done)."""
        namespace, name = split_key(key)
        # Bound for this reconcile and reset from the tokens afterwards: the worker's context is
        # its own task's, and resetting restores exactly what was there (structlog's
        # ``bound_contextvars`` would copy the whole context to find that out, twice a pass).
        tokens = structlog.contextvars.bind_contextvars(
            controller=self.name,
            namespace=namespace or "",
            reconcileID=str(uuid.uuid4()),
            **{self.object_label: name},
        )
        try:
            await self._reconcile(key)
        finally:
            structlog.contextvars.reset_contextvars(**tokens)

    async def _reconcile(self, key: str) -> None:
        active = self._active
        started = time.monotonic()
        active.inc()
        try:
            result = await self.reconcile(key)
        except asyncio.CancelledError:
            raise
        except ApiError as err:
            # An answer from the API server (quota, conflict, validation): no traceback.
            log.warning("reconcile failed; will retry with backoff", error=str(err))
            self._errors.inc()
            self._totals["error"].inc()
            self.queue.add_rate_limited(key)
            return
        except Exception:
            log.exception("reconcile failed; will retry with backoff")
            self._errors.inc()
            self._totals["error"].inc()
            self.queue.add_rate_limited(key)
            return
        finally:
            active.dec()
            self._time.observe(time.monotonic() - started)
        if not result.requeue:
            self.queue.cancel_after(key)  # this pass's answer supersedes the earlier ones'
        if result.requeue:
            self.queue.add_rate_limited(key)
            if result.requeue_after and result.requeue_after > 0:
                # Back by then at the latest (a hold ending), whatever the backoff says.
                self.queue.add_after(key, result.requeue_after)
            outcome = "requeue"
        elif result.requeue_after and result.requeue_after > 0:
            self.queue.forget(key)
            self.queue.add_after(key, result.requeue_after)
            outcome = "requeue_after"
        else:
            self.queue.forget(key)
            outcome = "success"
        self._totals[outcome].inc()

    async def _worker(self) -> None:
        while True:
            try:
                key = await self.queue.get()
            except ShutDown:
                return
            try:
                await self.process(key)
            finally:
                self.queue.done(key)

    async def run(self) -> None:
        """Run the workers until the queue shuts down or this task is cancelled."""
        log.info("starting workers", controller=self.name, workers=self.workers)
        async with asyncio.TaskGroup() as group:
            for i in range(self.workers):
                group.create_task(self._worker(), name=f"{self.name}-worker-{i}")
