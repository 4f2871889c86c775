"""Event recorder: ``events.k8s.io/v1`` Events, repeats kept as one Event with a ``series``.

The same semantics as client-go's ``tools/events`` broadcaster, which upstream JobSet uses
through controller-runtime's ``GetEventRecorder``:

- The first occurrence creates an Event (``eventTime`` with microseconds, ``reportingController``,
  ``reportingInstance``, ``action``, ``regarding``, ``note``). Its deprecated core/v1 fields
  (``count``, ``firstTimestamp``, ``source``) stay unset: the API server refuses them here.
- The first repeat patches that Event's ``series`` to ``{count: 2, lastObservedTime}``. Later
  repeats only count in memory: the count is written when the series ends (no repeat for
  6 minutes) and, for a series that goes on, every 30 minutes (which also keeps the Event from
  expiring under the API server's event TTL). So a hot loop costs two writes, not one per repeat.
- A series whose Event is gone (expired, deleted) is created again, with its series.
- A singleton forgotten after 6 minutes: the next occurrence is a new Event.

Repeats are "isomorphic" Events: same regarding object (including its resourceVersion), type,
reason, action and reporter. Unlike client-go the note is part of the key, so that distinct
messages (one ``ClaimCreated`` per claim) stay distinct Events instead of folding into the
first one's note.

Recording never blocks a reconcile and never fails it: observations become writes in a bounded
buffer that a background task sends, several at a time (the writes of one Event in order). When
the buffer is full the oldest pending write is dropped and counted: Events are best-effort in
Kubernetes too. On shutdown counts not yet written are written.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import re
import socket
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
from prometheus_client import CollectorRegistry, Counter

from controller.runtime.client import EVENTS_V1, ApiError, KubeClient, WriteRefused

log = structlog.get_logger("events")

NORMAL = "Normal"
WARNING = "Warning"
# What upstream JobSet passes as the action of every Event it records.
RECONCILING = "Reconciling"

# The API server's limits on Events written through events.k8s.io (bytes, as Go counts them).
NOTE_LIMIT = 1024
REASON_LIMIT = 128
ACTION_LIMIT = 128
INSTANCE_LIMIT = 128

FINISH_AFTER = datetime.timedelta(minutes=6)  # client-go's finishTime
REFRESH_EVERY = datetime.timedelta(minutes=30)  # client-go's refreshTime
HOUSEKEEPING_EVERY = 60.0  # seconds between looks at ended and long-running series

_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def truncate_utf8(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, on a character boundary, marked with ``...``
    when cut (the API server refuses a longer note, and the Event would be lost)."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    return raw[: limit - 3].decode(errors="ignore") + "..."


def micro_time(at: datetime.datetime) -> str:
    """A ``metav1.MicroTime``: RFC 3339 in UTC with six fractional digits."""
    return at.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_name(regarding_name: str, unix_nanos: int) -> str:
    """``<object>.<nanoseconds in hex>`` as client-go names Events; a random name when that is not
    a valid object name (a long or odd object name would make the create fail)."""
    name = f"{regarding_name}.{unix_nanos:x}"
    if len(name) <= 253 and _DNS_SUBDOMAIN.fullmatch(name):
        return name
    return str(uuid.uuid4())


def reference(obj: dict[str, Any]) -> dict[str, str]:
    """The ``regarding`` ObjectReference of ``obj``: only the fields it has."""
    meta = obj.get("metadata") or {}
    ref = {
        "apiVersion": obj.get("apiVersion", ""),
        "kind": obj.get("kind", ""),
        "namespace": meta.get("namespace", ""),
        "name": meta.get("name", ""),
        "uid": meta.get("uid", ""),
        "resourceVersion": meta.get("resourceVersion", ""),
    }
    return {k: str(v) for k, v in ref.items() if v}


@dataclass(frozen=True)
class Key:
    """What makes two Events the same Event (client-go's eventKey, plus the note)."""

    regarding: tuple[tuple[str, str], ...]
    type: str
    reason: str
    action: str
    controller: str
    instance: str
    note: str


def key_of(body: dict[str, Any]) -> Key:
    return Key(
        tuple(sorted(body["regarding"].items())),
        body["type"],
        body["reason"],
        body["action"],
        body["reportingController"],
        body["reportingInstance"],
        body["note"],
    )


@dataclass(frozen=True)
class Write:
    """One request to make: create ``body`` (no series), or set the series of the Event named in
    ``body`` to ``count`` (creating it with that series if it is gone)."""

    key: Key
    body: dict[str, Any]
    count: int = 1
    last_observed: datetime.datetime | None = None

    @property
    def series(self) -> dict[str, Any] | None:
        if self.last_observed is None:
            return None
        return {"count": self.count, "lastObservedTime": micro_time(self.last_observed)}


@dataclass
class _Entry:
    body: dict[str, Any]
    first: datetime.datetime
    written_at: datetime.datetime
    count: int = 1
    last_observed: datetime.datetime | None = None
    written_count: int = 1

    def write(self, key: Key, now: datetime.datetime) -> Write:
        self.written_count, self.written_at = self.count, now
        return Write(key, self.body, self.count, self.last_observed)


class Correlator:
    """Which writes the observed Events need, and when (pure: the caller passes the time).

    Remembers up to ``capacity`` Events (least recently observed forgotten first; a forgotten
    series gets its count written)."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[Key, _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def observe(self, body: dict[str, Any], now: datetime.datetime) -> list[Write]:
        key = key_of(body)
        entry = self._entries.get(key)
        if entry is None:
            self._entries[key] = _Entry(body, now, now)
            return [Write(key, body), *self._evict(now)]
        self._entries.move_to_end(key)
        entry.count += 1
        entry.last_observed = now
        if entry.count == 2:  # the first repeat is written at once, later ones at the end
            return [entry.write(key, now)]
        return []

    def _evict(self, now: datetime.datetime) -> list[Write]:
        writes = []
        while len(self._entries) > self.capacity:
            key, entry = self._entries.popitem(last=False)
            if entry.count != entry.written_count:
                writes.append(entry.write(key, now))
        return writes

    def due(self, now: datetime.datetime) -> list[Write]:
        """Writes that time calls for: the final count of series that ended (then forgotten), a
        refresh of series going on for 30 minutes since their last write; singletons of more than
        6 minutes are forgotten."""
        writes = []
        for key, entry in list(self._entries.items()):
            if entry.last_observed is None:
                if now - entry.first >= FINISH_AFTER:
                    del self._entries[key]
            elif now - entry.last_observed >= FINISH_AFTER:
                del self._entries[key]
                if entry.count != entry.written_count:
                    writes.append(entry.write(key, now))
            elif now - entry.written_at >= REFRESH_EVERY:
                writes.append(entry.write(key, now))
        return writes

    def unwritten(self, now: datetime.datetime) -> list[Write]:
        """The counts of series not written yet (on shutdown: a successor does not know them)."""
        return [
            entry.write(key, now)
            for key, entry in self._entries.items()
            if entry.count != entry.written_count
        ]


class EventRecorder:
    def __init__(
        self,
        client: KubeClient,
        component: str,
        *,
        instance: str | None = None,
        registry: CollectorRegistry | None = None,
        buffer_size: int = 1000,
        cache_size: int = 4096,
        writers: int = 8,
        wall_clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
    ) -> None:
        """``component`` is the reportingController (a qualified name); ``instance`` the
        reportingInstance (default: ``<component>-<hostname>``, as client-go)."""
        self.client = client
        self.component = component
        self.instance = truncate_utf8(
            instance or f"{component}-{socket.gethostname()}", INSTANCE_LIMIT
        )
        self._wall = wall_clock
        self._pending: deque[Write] = deque(maxlen=buffer_size)
        self._correlator = Correlator(cache_size)
        self._last_nanos = 0
        self._writers = writers
        self._wakeup = asyncio.Event()
        self._dropped = Counter(
            "events_dropped_total",
            "Events not written because the recorder's buffer was full or the write failed.",
            registry=registry,
        )

    def event(
        self,
        obj: dict[str, Any],
        event_type: str,
        reason: str,
        message: str,
        *,
        action: str = RECONCILING,
    ) -> None:
        """Record an event about ``obj`` (non-blocking)."""
        if event_type not in (NORMAL, WARNING):
            self._dropped.inc()  # the API server would refuse it
            log.warning("event of an unknown type not recorded", type=event_type, reason=reason)
            return
        now = self._wall()
        regarding = reference(obj)
        body = {
            "apiVersion": EVENTS_V1.api_version,
            "kind": "Event",
            "metadata": {
                "name": event_name(regarding.get("name", ""), self._nanos()),
                "namespace": regarding.get("namespace") or "default",
            },
            "eventTime": micro_time(now),
            "reportingController": self.component,
            "reportingInstance": self.instance,
            "action": truncate_utf8(action, ACTION_LIMIT),
            "reason": truncate_utf8(reason, REASON_LIMIT),
            "regarding": regarding,
            "note": truncate_utf8(message, NOTE_LIMIT),
            "type": event_type,
        }
        self._enqueue(self._correlator.observe(body, now))

    def _nanos(self) -> int:
        # Names of Events recorded within the same clock tick must still differ.
        self._last_nanos = max(time.time_ns(), self._last_nanos + 1)
        return self._last_nanos

    def _enqueue(self, writes: list[Write]) -> None:
        for write in writes:
            if len(self._pending) == self._pending.maxlen:
                self._dropped.inc()
            self._pending.append(write)
        if writes:
            self._wakeup.set()

    async def _write(self, write: Write) -> None:
        namespace = write.body["metadata"]["namespace"]
        series = write.series
        if series is not None:
            try:
                await self.client.patch(
                    EVENTS_V1,
                    write.body["metadata"]["name"],
                    {"series": series},
                    namespace,
                    patch_type="strategic",
                )
                return
            except ApiError as err:
                if not err.not_found:
                    raise
        try:
            await self.client.create(EVENTS_V1, {**write.body, "series": series}, namespace)
        except ApiError as err:
            # Created meanwhile by an earlier write of this Event that had failed: patch it.
            if series is None or not err.already_exists:
                raise
            await self.client.patch(
                EVENTS_V1, write.body["metadata"]["name"], {"series": series}, namespace,
                patch_type="strategic",
            )  # fmt: skip

    async def flush(self) -> None:
        """Write out everything pending: up to ``writers`` requests at once (one writer fell
        behind when a thousand JobSets started together and the buffer dropped events), and
        the writes of one Event in order (its create before its series)."""
        limit = asyncio.Semaphore(self._writers)

        async def write_in_order(writes: list[Write]) -> None:
            async with limit:
                for write in writes:
                    try:
                        await self._write(write)
                    except (ApiError, WriteRefused, OSError) as err:
                        self._dropped.inc()
                        log.warning(
                            "could not record event", reason=write.key.reason, error=str(err)
                        )

        while self._pending:
            by_key: dict[Key, list[Write]] = {}
            while self._pending:
                write = self._pending.popleft()
                by_key.setdefault(write.key, []).append(write)
            await asyncio.gather(*(write_in_order(writes) for writes in by_key.values()))

    async def housekeeping(self) -> None:
        """Write the counts that time calls for (ended series, 30-minute refreshes)."""
        self._enqueue(self._correlator.due(self._wall()))
        await self.flush()

    async def close(self) -> None:
        """Write what is pending and the counts of series not written yet (on shutdown)."""
        self._enqueue(self._correlator.unwritten(self._wall()))
        await self.flush()

    async def run(self, housekeeping_every: float = HOUSEKEEPING_EVERY) -> None:
        """Write events as they come, and look at series every minute (busy or not), until
        cancelled (pending writes are sent first)."""
        loop = asyncio.get_running_loop()
        next_look = loop.time() + housekeeping_every
        try:
            while True:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), max(0.0, next_look - loop.time()))
                self._wakeup.clear()
                if loop.time() >= next_look:
                    next_look = loop.time() + housekeeping_every
                    await self.housekeeping()
                else:
                    await self.flush()
        finally:
            if self._pending:
                await asyncio.shield(self.flush())
