"""Informer: list, then watch, keep a cache, tell handlers what changed.

Semantics (those of client-go's reflector + shared informer, re-written for asyncio):
- List (paginated), then watch from the list's resourceVersion with bookmarks.
- A watch that ends normally (server timeout) resumes from the last resourceVersion seen; so does
  one that breaks (connection reset, API server restart), after a capped, jittered backoff.
- ``410 Gone`` (the resourceVersion was compacted away) means events were lost: re-list, and emit
  the true difference against the cache — adds, updates (resourceVersion changed) and the deletes
  that happened while disconnected. Unchanged objects produce no event.
- The cache never goes backwards: an event older than the cached object is dropped.
- Objects pass through a transform before they are stored (by default dropping
  ``metadata.managedFields``, which the controller never reads and which dominates memory).
- Malformed events are logged and skipped; they never stop the informer.
- An *optional* resource (one that older API servers do not serve, or that the controller may
  not be allowed to read) that answers 404 or 403 counts as synced and empty, with
  ``unavailable`` set to that status; it is listed again every ``unavailable_retry`` seconds (an
  upgraded cluster, a fixed ClusterRole) and everything else starts meanwhile.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from controller.runtime.client import ApiError, KubeClient, Resource, decode
from controller.runtime.store import Indexer, Obj, Store, object_key

log = structlog.get_logger("informer")

Transform = Callable[[Obj], Obj]


def strip_managed_fields(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    return obj


@dataclass
class EventHandler:
    on_add: Callable[[Obj], None] | None = None
    on_update: Callable[[Obj, Obj], None] | None = None
    on_delete: Callable[[Obj], None] | None = None


@dataclass
class Backoff:
    """Capped exponential backoff with jitter (client-go's reflector: 800 ms .. 30 s)."""

    initial: float = 0.8
    cap: float = 30.0
    factor: float = 2.0
    jitter: float = 1.0
    rng: random.Random | None = None
    _current: float = 0.0

    def next(self) -> float:
        self._current = (
            self.initial if self._current == 0 else min(self.cap, self._current * self.factor)
        )
        rng = self.rng or random
        return self._current * (1 + self.jitter * rng.random())

    def reset(self) -> None:
        self._current = 0.0


class _Gone(Exception):
    """The watch's resourceVersion is too old: a re-list is needed."""


def _newer_or_unknown(new_version: str, old_version: str) -> bool:
    """Is ``new_version`` not older than ``old_version``?

    resourceVersions are opaque by contract, but every real API server uses etcd revisions
    (integers); compare them when both are numeric and never regress the cache.
    """
    if new_version.isdigit() and old_version.isdigit():
        return int(new_version) >= int(old_version)
    return True


def _version(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def _well_formed(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and isinstance(obj.get("metadata"), dict)
        and isinstance(obj["metadata"].get("name"), str)
        and bool(obj["metadata"]["name"])
    )


class Informer:
    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        transform: Transform | None = strip_managed_fields,
        indexers: dict[str, Indexer] | None = None,
        resync_period: float | None = None,
        page_size: int = 500,
        backoff: Backoff | None = None,
        optional: bool = False,
        unavailable_retry: float = 60.0,
    ) -> None:
        self.client = client
        self.resource = resource
        self.namespace = namespace
        self.label_selector = label_selector
        self.transform = transform
        self.store = Store(indexers)
        self.resync_period = resync_period
        self.page_size = page_size
        self.backoff = backoff or Backoff()
        self.synced = asyncio.Event()
        self.resource_version = ""
        self.relists = 0
        self.malformed_events = 0
        self.optional = optional
        self.unavailable_retry = unavailable_retry
        # The status (404, 403) of an optional resource's last list; None once it lists.
        self.unavailable: int | None = None
        self._handlers: list[EventHandler] = []
        self._log = log.bind(resource=resource.plural, namespace=namespace or "*")

    # ------------------------------------------------------------ handlers

    def add_handler(self, handler: EventHandler) -> None:
        """Register a handler; objects already cached are replayed to it as adds."""
        self._handlers.append(handler)
        if handler.on_add:
            for obj in self.store:
                self._call(handler.on_add, obj)

    def _call(self, func: Callable[..., None], *args: Obj) -> None:
        try:
            func(*args)
        except Exception:
            self._log.exception("event handler failed")

    def _emit_add(self, obj: Obj) -> None:
        for handler in self._handlers:
            if handler.on_add:
                self._call(handler.on_add, obj)

    def _emit_update(self, old: Obj, new: Obj) -> None:
        for handler in self._handlers:
            if handler.on_update:
                self._call(handler.on_update, old, new)

    def _emit_delete(self, obj: Obj) -> None:
        for handler in self._handlers:
            if handler.on_delete:
                self._call(handler.on_delete, obj)

    def has_synced(self) -> bool:
        return self.synced.is_set()

    # ------------------------------------------------------------- applying

    def _prepare(self, obj: Obj) -> Obj:
        return self.transform(obj) if self.transform else obj

    def _upsert(self, obj: Obj) -> None:
        key = object_key(obj)
        old = self.store.get(key)
        if old is None:
            self.store.put(obj)
            self._emit_add(obj)
            return
        version, old_version = _version(obj), _version(old)
        if not _newer_or_unknown(version, old_version):
            return  # stale: never let the cache go backwards
        self.store.put(obj)
        if old_version != version:
            self._emit_update(old, obj)

    def _delete(self, obj: Obj) -> None:
        old = self.store.remove(object_key(obj))
        if old is not None:
            self._emit_delete(obj)

    def replace(self, items: list[Obj]) -> None:
        """Make the cache equal to a fresh list (a relist), emitting only real differences."""
        fresh = {object_key(o): o for o in items}
        for key in self.store.keys():  # noqa: SIM118 (a copy: the loop removes keys)
            if key not in fresh:
                gone = self.store.remove(key)
                if gone is not None:
                    self._emit_delete(gone)
        for obj in fresh.values():
            self._upsert(obj)

    # ------------------------------------------------------------------ I/O

    async def _list(self) -> None:
        items: list[Obj] = []
        token: str | None = None
        while True:
            page = await self.client.list(
                self.resource,
                self.namespace,
                label_selector=self.label_selector,
                limit=self.page_size,
                continue_token=token,
            )
            for item in page.get("items") or []:
                if not _well_formed(item):
                    self.malformed_events += 1
                    self._log.warning("skipping malformed object in list", item=str(item)[:200])
                    continue
                # List items carry no kind/apiVersion; watch events do. Make them uniform.
                item.setdefault("apiVersion", self.resource.api_version)
                item.setdefault("kind", self.resource.kind)
                items.append(self._prepare(item))
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                self.resource_version = str(page["metadata"]["resourceVersion"])
                break
        self.replace(items)
        self.relists += 1
        if self.unavailable is not None:
            self._log.info("resource is readable now")
            self.unavailable = None
        self.synced.set()

    def _mark_unavailable(self, status: int) -> None:
        if self.unavailable != status:
            self._log.warning(
                "optional resource unavailable; listing again periodically",
                status=status,
                retry_in=self.unavailable_retry,
            )
        self.unavailable = status
        self.replace([])  # what was cached is no longer known
        self.resource_version = ""
        self.synced.set()

    def handle_line(self, line: bytes) -> None:
        """Apply one line of the watch stream (a JSON watch event) to the cache: the stream
        reader calls this for each line; tests feed it recorded ones."""
        try:
            event = decode(line)
        except ValueError:
            self.malformed_events += 1
            self._log.warning(
                "skipping undecodable watch event", line=line[:200].decode(errors="replace")
            )
            return
        if not isinstance(event, dict):
            self.malformed_events += 1
            self._log.warning("skipping watch event that is not an object", raw=str(event)[:200])
            return
        kind = event.get("type")
        obj = event.get("object")
        if kind == "ERROR":
            status = obj if isinstance(obj, dict) else {}
            if status.get("code") == 410:
                raise _Gone(status.get("message", "410 Gone"))
            raise ApiError(int(status.get("code") or 500), status, "WATCH", self.resource.plural)
        if kind == "BOOKMARK":
            version = _version(obj) if isinstance(obj, dict) else ""
            if version:
                self.resource_version = version
            return
        if kind not in ("ADDED", "MODIFIED", "DELETED") or not _well_formed(obj):
            self.malformed_events += 1
            self._log.warning(
                "skipping unexpected watch event", type=str(kind), raw=str(event)[:200]
            )
            return
        assert isinstance(obj, dict)
        obj = self._prepare(obj)
        if kind == "DELETED":
            self._delete(obj)
        else:
            self._upsert(obj)
        version = _version(obj)
        if version and _newer_or_unknown(version, self.resource_version or "0"):
            self.resource_version = version

    async def _watch(self, rng: random.Random) -> None:
        timeout = int(300 * (1 + rng.random()))
        async with self.client.watch(
            self.resource,
            self.namespace,
            resource_version=self.resource_version,
            label_selector=self.label_selector,
            timeout_seconds=timeout,
        ) as lines:
            self.backoff.reset()
            async for line in lines:
                self.handle_line(line)

    async def _resync_loop(self, period: float) -> None:
        while True:
            await asyncio.sleep(period)
            self.resync()

    def resync(self) -> None:
        """Re-deliver every cached object as an update (old == new); used for periodic resync."""
        for obj in self.store:
            self._emit_update(obj, obj)

    async def run(self) -> None:
        """List and watch until cancelled. Never returns otherwise; never raises for API trouble."""
        rng = self.backoff.rng or random.Random()
        resync = (
            asyncio.create_task(self._resync_loop(self.resync_period))
            if self.resync_period
            else None
        )
        # A second run() of the same informer resumes from where the first one stopped.
        need_list = not self.resource_version
        try:
            while True:
                try:
                    if need_list:
                        await self._list()
                        need_list = False
                    await self._watch(rng)
                except _Gone as gone:
                    self._log.info("watch expired, re-listing", reason=str(gone))
                    need_list = True
                except ApiError as err:
                    if err.gone:
                        need_list = True
                        continue
                    if self.optional and err.status in (403, 404):
                        self._mark_unavailable(err.status)
                        need_list = True
                        await asyncio.sleep(self.unavailable_retry)
                        continue
                    delay = self.backoff.next()
                    self._log.warning(
                        "list/watch failed, retrying", error=str(err), retry_in=round(delay, 2)
                    )
                    await asyncio.sleep(delay)
                except Exception as err:  # connection trouble of any kind: retry, never die
                    delay = self.backoff.next()
                    self._log.warning(
                        "list/watch connection failed, retrying",
                        error=f"{type(err).__name__}: {err}",
                        retry_in=round(delay, 2),
                    )
                    await asyncio.sleep(delay)
        finally:
            if resync is not None:
                resync.cancel()
