"""Event recorder: core/v1 Events (what ``kubectl describe`` shows), with aggregation of repeats.

Recording never blocks a reconcile and never fails it: events go into a bounded buffer that a
background task writes out, several at a time. A repeat of the same (object, type, reason,
message) patches the existing Event's ``count`` and ``lastTimestamp`` instead of creating another
object, like client-go's EventCorrelator. When the buffer is full the oldest pending event is
dropped (and counted): events are best-effort by design in Kubernetes too.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, Counter

from controller.runtime.client import EVENTS, ApiError, KubeClient, WriteRefused

log = structlog.get_logger("events")

NORMAL = "Normal"
WARNING = "Warning"


@dataclass(frozen=True)
class _Key:
    uid: str
    type: str
    reason: str
    message: str


@dataclass
class _Pending:
    key: _Key
    involved: dict[str, Any]
    namespace: str
    at: datetime.datetime


@dataclass
class _Seen:
    name: str
    count: int


def _timestamp(at: datetime.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    def __init__(
        self,
        client: KubeClient,
        component: str,
        *,
        registry: CollectorRegistry | None = None,
        buffer_size: int = 1000,
        cache_size: int = 4096,
        writers: int = 8,
        wall_clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        self.client = client
        self.component = component
        self._wall = wall_clock
        self._pending: deque[_Pending] = deque(maxlen=buffer_size)
        self._seen: OrderedDict[_Key, _Seen] = OrderedDict()
        self._cache_size = cache_size
        self._writers = writers
        self._wakeup = asyncio.Event()
        self._dropped = Counter(
            "events_dropped_total",
            "Events not written because the recorder's buffer was full or the write failed.",
            registry=registry,
        )

    def event(self, obj: dict[str, Any], event_type: str, reason: str, message: str) -> None:
        """Record an event about ``obj`` (non-blocking)."""
        meta = obj.get("metadata") or {}
        involved = {
            "apiVersion": obj.get("apiVersion", ""),
            "kind": obj.get("kind", ""),
            "name": meta.get("name", ""),
            "namespace": meta.get("namespace", ""),
            "uid": meta.get("uid", ""),
            "resourceVersion": meta.get("resourceVersion", ""),
        }
        key = _Key(str(involved["uid"]), event_type, reason, message[:1024])
        if len(self._pending) == self._pending.maxlen:
            self._dropped.inc()
        self._pending.append(
            _Pending(key, involved, str(involved["namespace"] or "default"), self._wall())
        )
        self._wakeup.set()

    async def _write(self, item: _Pending) -> None:
        seen = self._seen.get(item.key)
        now = _timestamp(item.at)
        if seen is not None:
            try:
                await self.client.patch(
                    EVENTS,
                    seen.name,
                    {"count": seen.count + 1, "lastTimestamp": now},
                    item.namespace,
                )
                seen.count += 1
                self._seen.move_to_end(item.key)
                return
            except ApiError as err:
                if not err.not_found:
                    raise
                del self._seen[item.key]  # expired or deleted: start a new one
        name = f"{item.involved['name']}.{time.time_ns():x}"
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": item.namespace},
            "involvedObject": item.involved,
            "reason": item.key.reason,
            "message": item.key.message,
            "type": item.key.type,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": self.component},
            "reportingComponent": self.component,
            "reportingInstance": self.client.field_manager,
        }
        await self.client.create(EVENTS, body, item.namespace)
        self._seen[item.key] = _Seen(name, 1)
        while len(self._seen) > self._cache_size:
            self._seen.popitem(last=False)

    async def flush(self) -> None:
        """Write out everything pending: up to ``writers`` requests at once (one writer fell
        behind when a thousand JobSets started together and the buffer dropped events), and
        the repeats of one event in order, so that they aggregate into one Event."""
        limit = asyncio.Semaphore(self._writers)

        async def write_in_order(items: list[_Pending]) -> None:
            async with limit:
                for item in items:
                    try:
                        await self._write(item)
                    except (ApiError, WriteRefused, OSError) as err:
                        self._dropped.inc()
                        log.warning(
                            "could not record event", reason=item.key.reason, error=str(err)
                        )

        while self._pending:
            by_key: dict[_Key, list[_Pending]] = {}
            while self._pending:
                item = self._pending.popleft()
                by_key.setdefault(item.key, []).append(item)
            await asyncio.gather(*(write_in_order(items) for items in by_key.values()))

    async def run(self) -> None:
        """Write events as they come, until cancelled (pending ones are flushed first)."""
        try:
            while True:
                await self._wakeup.wait()
                self._wakeup.clear()
                await self.flush()
        finally:
            if self._pending:
                await asyncio.shield(self.flush())
