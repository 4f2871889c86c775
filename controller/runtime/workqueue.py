"""An asyncio work queue with the semantics of client-go's rate-limiting workqueue.

This mirrors ``k8s.io/client-go/util/workqueue`` (``Typed``, ``TypedDelayingInterface``
and ``TypedRateLimitingInterface`` in one class) for a single event loop:

* **Held once.** A key is stored at most once however often it is added (the
  *dirty* set). Adding a key that is already waiting is a no-op.
* **Never processed concurrently.** :meth:`WorkQueue.get` moves a key into the
  *processing* set; until :meth:`WorkQueue.done` is called for it, no other
  caller receives it.
* **Re-added while processing.** Such a key is marked dirty but only queued
  again when :meth:`WorkQueue.done` is called, so the change is not lost and
  the key is processed once more, afterwards.
* **FIFO.** Keys are handed out in the order they became queued; waiting
  getters are served in the order they started waiting.
* **Delayed adds.** :meth:`WorkQueue.add_after` adds a key once a delay has
  passed; if the key is already waiting, the earlier deadline wins. Delays
  ``<= 0`` add immediately. :meth:`WorkQueue.add_rate_limited` uses the rate
  limiter's delay; :meth:`WorkQueue.forget` resets the key's backoff.
* **Cancelled delayed adds.** :meth:`WorkQueue.cancel_after` drops a key's
  pending delayed add (not in client-go's queue; see ``controller.runtime.controller``).
* **Batched adds.** :meth:`WorkQueue.add_batched` adds a key within a period,
  together with every other batched add of it in that time (Kubernetes' Job
  controller batches pod events this way). Not in client-go's queue: a batch is
  dropped when its key is handed out, since that pass reads what the batched
  events changed.
* **Shutdown.** After :meth:`WorkQueue.shut_down` adds are ignored, pending
  delayed adds are dropped, and :meth:`WorkQueue.get` keeps handing out the
  keys still queued, then raises :class:`ShutDown`.
  :meth:`WorkQueue.shut_down_with_drain` additionally waits (up to a timeout)
  until no key is being processed.

Deviation from client-go: :meth:`WorkQueue.done` for a key that is not being
processed raises ``ValueError`` instead of silently corrupting the queue.

Everything runs on one event loop without threads or locks. A :meth:`WorkQueue.get`
cancelled while waiting loses no key: a wake-up it received is passed on to the
next waiting getter. Delayed adds use one heap and at most one timer from the
injected :class:`~controller.runtime.clock.TimerClock`; shutdown cancels it, and
no background task exists.

Metrics use client-go's names (``workqueue_depth``, ``workqueue_adds_total``, ...),
labelled by queue name. :class:`WorkqueueMetrics` registers the metric families once
per ``CollectorRegistry``; every queue takes the labelled children for its name.
Without a provider the queue records nothing (:class:`NoopWorkqueueMetrics`).
``workqueue_unfinished_work_seconds`` and
``workqueue_longest_running_processor_seconds`` are computed when scraped rather
than by a periodic task (client-go updates them every 500 ms): values are exact,
and there is no task to start, stop, or wake the loop while idle.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
from collections import deque
from collections.abc import Hashable
from contextlib import suppress
from typing import Generic, Protocol, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from controller.runtime.clock import Clock, SystemClock, Timer, TimerClock
from controller.runtime.ratelimit import RateLimiter, default_controller_rate_limiter

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)

# client-go: ExponentialBuckets(10e-9, 10, 10), i.e. 10 ns .. 10 s.
LATENCY_BUCKETS: tuple[float, ...] = (
    1e-8,
    1e-7,
    1e-6,
    1e-5,
    1e-4,
    1e-3,
    1e-2,
    1e-1,
    1.0,
    10.0,
)

# Rebuild the delay heap once stale entries (superseded deadlines) dominate it.
_HEAP_COMPACT_MIN = 64


class ShutDown(Exception):
    """Raised by :meth:`WorkQueue.get` once the queue is shut down and empty."""


# --------------------------------------------------------------------------- metrics


class QueueMetrics(Protocol[K_contra]):
    """Per-queue metric recorder (client-go ``queueMetrics``)."""

    def add(self, key: K_contra) -> None:
        """A key became dirty."""
        ...

    def get(self, key: K_contra) -> None:
        """A key was handed to a worker."""
        ...

    def done(self, key: K_contra) -> None:
        """A worker finished a key."""
        ...

    def retry(self) -> None:
        """A delayed or rate-limited add was requested."""
        ...


class WorkqueueMetricsProvider(Protocol):
    """Creates the recorder for one named queue."""

    def for_queue(self, name: str, clock: Clock) -> QueueMetrics[Hashable]: ...


class _NoopQueueMetrics:
    def add(self, key: object) -> None:
        return None

    def get(self, key: object) -> None:
        return None

    def done(self, key: object) -> None:
        return None

    def retry(self) -> None:
        return None


class NoopWorkqueueMetrics:
    """Records nothing and registers nothing."""

    def for_queue(self, name: str, clock: Clock) -> QueueMetrics[Hashable]:
        return _NoopQueueMetrics()


class WorkqueueMetrics:
    """The workqueue metric families of one registry, shared by all queues.

    Create one per ``CollectorRegistry`` (creating a second for the same registry
    fails with prometheus_client's duplicate-timeseries ``ValueError``) and pass it
    to every :class:`WorkQueue`. Queue names should be unique per provider: queues
    sharing a name share their series.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ("name",)
        self.depth = Gauge(
            "workqueue_depth",
            "Current depth of workqueue.",
            labels,
            registry=registry,
        )
        self.adds = Counter(
            "workqueue_adds_total",
            "Total number of adds handled by workqueue.",
            labels,
            registry=registry,
        )
        self.queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested.",
            labels,
            registry=registry,
            buckets=LATENCY_BUCKETS,
        )
        self.work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            labels,
            registry=registry,
            buckets=LATENCY_BUCKETS,
        )
        self.unfinished_work = Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and has not been "
            "observed by work_duration. Large values indicate stuck workers.",
            labels,
            registry=registry,
        )
        self.longest_running_processor = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds the longest running processor for workqueue has been running.",
            labels,
            registry=registry,
        )
        self.retries = Counter(
            "workqueue_retries_total",
            "Total number of retries handled by workqueue.",
            labels,
            registry=registry,
        )

    def for_queue(self, name: str, clock: Clock) -> QueueMetrics[Hashable]:
        return _PrometheusQueueMetrics(self, name, clock)


class _PrometheusQueueMetrics(Generic[K]):
    def __init__(self, families: WorkqueueMetrics, name: str, clock: Clock) -> None:
        self._clock = clock
        self._depth = families.depth.labels(name=name)
        self._adds = families.adds.labels(name=name)
        self._queue_duration = families.queue_duration.labels(name=name)
        self._work_duration = families.work_duration.labels(name=name)
        self._retries = families.retries.labels(name=name)
        # When each dirty key was first added, and when each processing key started.
        self._added_at: dict[K, float] = {}
        self._started_at: dict[K, float] = {}
        families.unfinished_work.labels(name=name).set_function(self._unfinished_seconds)
        families.longest_running_processor.labels(name=name).set_function(
            self._longest_running_seconds
        )

    def add(self, key: K) -> None:
        self._adds.inc()
        self._depth.inc()
        self._added_at.setdefault(key, self._clock.monotonic())

    def get(self, key: K) -> None:
        now = self._clock.monotonic()
        self._depth.dec()
        added_at = self._added_at.pop(key, None)
        if added_at is not None:
            self._queue_duration.observe(now - added_at)
        self._started_at[key] = now

    def done(self, key: K) -> None:
        started_at = self._started_at.pop(key, None)
        if started_at is not None:
            self._work_duration.observe(self._clock.monotonic() - started_at)

    def retry(self) -> None:
        self._retries.inc()

    # Scrapes may run on another thread (prometheus_client's HTTP server), so these
    # read only an atomic snapshot of the start times, never iterate the live dict.
    def _unfinished_seconds(self) -> float:
        started = tuple(self._started_at.values())
        now = self._clock.monotonic()
        return sum(now - t for t in started)

    def _longest_running_seconds(self) -> float:
        started = tuple(self._started_at.values())
        if not started:
            return 0.0
        return self._clock.monotonic() - min(started)


# ----------------------------------------------------------------------------- queue


class WorkQueue(Generic[K]):
    """A deduplicating, delaying, rate-limited FIFO of keys for controller workers.

    Typical worker loop::

        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            try:
                await reconcile(key)
            except Exception:
                queue.add_rate_limited(key)
            else:
                queue.forget(key)
            finally:
                queue.done(key)
    """

    def __init__(
        self,
        name: str,
        *,
        rate_limiter: RateLimiter[K] | None = None,
        metrics: WorkqueueMetricsProvider | None = None,
        clock: TimerClock | None = None,
    ) -> None:
        self._name = name
        self._clock: TimerClock = clock if clock is not None else SystemClock()
        self._rate_limiter: RateLimiter[K] = (
            rate_limiter
            if rate_limiter is not None
            else default_controller_rate_limiter(self._clock)
        )
        provider = metrics if metrics is not None else NoopWorkqueueMetrics()
        self._metrics: QueueMetrics[K] = provider.for_queue(name, self._clock)

        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._getters: deque[asyncio.Future[None]] = deque()
        self._shutting_down = False
        self._draining = False
        self._drain_waiters: list[asyncio.Future[None]] = []

        # Delayed adds: key -> (deadline, seq) of its live heap entry. Superseded heap
        # entries stay in the heap and are skipped when popped (seq no longer matches).
        self._waiting: dict[K, tuple[float, int]] = {}
        self._waiting_heap: list[tuple[float, int, K]] = []
        self._seq = itertools.count()
        self._timer: Timer | None = None
        self._timer_deadline = 0.0
        # Batched adds: key -> the timer that adds it (add_batched).
        self._batched: dict[K, Timer] = {}

    @property
    def name(self) -> str:
        return self._name

    @property
    def is_shutting_down(self) -> bool:
        return self._shutting_down

    def __len__(self) -> int:
        """Keys queued and ready to be handed out (not processing, not delayed)."""
        return len(self._queue)

    def ready(self) -> list[K]:
        """Keys queued and ready to be handed out, in order (``len`` counts them)."""
        return list(self._queue)

    def delayed(self) -> list[K]:
        """Keys waiting for a delayed add (``add_after``: requeue-after or backoff)."""
        return list(self._waiting)

    def batched(self) -> list[K]:
        """Keys waiting for the end of a batch (``add_batched``): work that is not queued yet."""
        return list(self._batched)

    # ----------------------------------------------------------------- basic queue

    def add(self, key: K) -> None:
        """Mark ``key`` as needing processing; no-op if already pending or shut down."""
        if self._shutting_down or key in self._dirty:
            return
        self._metrics.add(key)
        self._dirty.add(key)
        if key in self._processing:
            return  # queued again by done()
        self._queue.append(key)
        self._wake_getter()

    async def get(self) -> K:
        """Wait for a key and mark it as processing; the caller must call :meth:`done`.

        Raises :class:`ShutDown` once the queue is shut down and nothing is queued.
        """
        while not self._queue:
            if self._shutting_down:
                raise ShutDown
            getter = asyncio.get_running_loop().create_future()
            self._getters.append(getter)
            try:
                await getter
            except BaseException:
                getter.cancel()  # no-op if it was already woken
                with suppress(ValueError):
                    self._getters.remove(getter)
                # Woken for a key but leaving without it: pass the wake-up on.
                if self._queue and not getter.cancelled():
                    self._wake_getter()
                raise
        key = self._queue.popleft()
        batch = self._batched.pop(key, None)
        if batch is not None:
            batch.cancel()  # this pass reads what the batched adds were for
        self._metrics.get(key)
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: K) -> None:
        """Finish processing ``key``; if it was re-added meanwhile, queue it again."""
        if key not in self._processing:
            raise ValueError(f"workqueue {self._name!r}: done({key!r}) for a key not processing")
        self._metrics.done(key)
        self._processing.remove(key)
        if key in self._dirty:
            self._queue.append(key)
            self._wake_getter()
        if not self._processing:
            self._wake_drain_waiters()

    def shut_down(self) -> None:
        """Ignore further adds, drop delayed adds, and wake all waiting getters.

        Also ends a concurrent :meth:`shut_down_with_drain` early (as in client-go).
        """
        self._draining = False
        self._begin_shutdown()
        self._wake_drain_waiters()

    # A timeout parameter rather than the caller's asyncio.timeout: the shutdown must
    # happen regardless, and only the drain wait is bounded (reported as False).
    async def shut_down_with_drain(self, timeout: float | None = None) -> bool:  # noqa: ASYNC109
        """Shut down, then wait until no key is being processed.

        Returns ``True`` if nothing is processing on return, ``False`` if ``timeout``
        seconds passed first (or :meth:`shut_down` cut the wait short). Queued keys
        are still handed out by :meth:`get` meanwhile; this waits on the processing
        set only, like client-go.
        """
        self._draining = True
        self._begin_shutdown()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                while self._processing and self._draining:
                    waiter = loop.create_future()
                    self._drain_waiters.append(waiter)
                    try:
                        await waiter
                    finally:
                        with suppress(ValueError):
                            self._drain_waiters.remove(waiter)
        except TimeoutError:
            return False
        return not self._processing

    # --------------------------------------------------------------- delayed adds

    def add_after(self, key: K, delay: float) -> None:
        """Add ``key`` once ``delay`` seconds have passed; an earlier pending deadline wins."""
        if math.isnan(delay):
            raise ValueError(f"workqueue {self._name!r}: add_after({key!r}) with a NaN delay")
        if self._shutting_down:
            return
        self._metrics.retry()
        if delay <= 0:
            self.add(key)
            return
        deadline = self._clock.monotonic() + delay
        pending = self._waiting.get(key)
        if pending is not None and pending[0] <= deadline:
            return
        seq = next(self._seq)
        self._waiting[key] = (deadline, seq)
        heapq.heappush(self._waiting_heap, (deadline, seq, key))
        if len(self._waiting_heap) > max(_HEAP_COMPACT_MIN, 2 * len(self._waiting)):
            self._compact_heap()
        self._arm_timer()

    def cancel_after(self, key: K) -> None:
        """Drop the pending delayed add of ``key`` (``add_after``, ``add_rate_limited``), if any;
        a queued or batched add of it stays. Not in client-go's queue: a controller whose pass
        answers with its own next time (or none) drops what earlier passes asked for."""
        if self._waiting.pop(key, None) is not None:
            self._arm_timer()

    def add_batched(self, key: K, period: float) -> None:
        """Add ``key`` once ``period`` seconds have passed since the first of the batched adds
        it has received since it was last handed out: many events within a period cost one
        pass. A key already queued needs nothing more (that pass reads the change); a key
        handed out meanwhile drops its batch (the pass reads what the batch was for). ``period
        <= 0`` adds at once."""
        if math.isnan(period):
            raise ValueError(f"workqueue {self._name!r}: add_batched({key!r}) with a NaN period")
        if period <= 0:
            self.add(key)
            return
        if self._shutting_down or key in self._batched:
            return
        if key in self._dirty:
            return  # queued: the pass still to come reads the change
        self._batched[key] = self._clock.call_at(
            self._clock.monotonic() + period, lambda: self._flush_batch(key)
        )

    def _flush_batch(self, key: K) -> None:
        if self._batched.pop(key, None) is not None:
            self.add(key)

    # ----------------------------------------------------------------- rate limits

    def add_rate_limited(self, key: K) -> None:
        """Add ``key`` after the delay the rate limiter assigns to its next retry."""
        if self._shutting_down:
            return
        self.add_after(key, self._rate_limiter.when(key))

    def forget(self, key: K) -> None:
        """Reset the rate limiter's retry history for ``key`` (it was processed fine)."""
        self._rate_limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        """How often ``key`` was rate-limited since it was last forgotten."""
        return self._rate_limiter.num_requeues(key)

    # -------------------------------------------------------------------- internals

    def _wake_getter(self) -> None:
        while self._getters:
            getter = self._getters.popleft()
            if not getter.done():
                getter.set_result(None)
                return

    def _wake_drain_waiters(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _begin_shutdown(self) -> None:
        self._shutting_down = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._waiting.clear()
        self._waiting_heap.clear()
        batched, self._batched = self._batched, {}
        for timer in batched.values():
            timer.cancel()
        getters, self._getters = self._getters, deque()
        for getter in getters:
            if not getter.done():
                getter.set_result(None)

    def _is_live(self, deadline: float, seq: int, key: K) -> bool:
        return self._waiting.get(key) == (deadline, seq)

    def _compact_heap(self) -> None:
        self._waiting_heap = [entry for entry in self._waiting_heap if self._is_live(*entry)]
        heapq.heapify(self._waiting_heap)

    def _arm_timer(self) -> None:
        """Make sure a timer fires no later than the earliest live deadline."""
        heap = self._waiting_heap
        while heap and not self._is_live(*heap[0]):
            heapq.heappop(heap)
        if not heap:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            return
        deadline = heap[0][0]
        if self._timer is not None:
            if self._timer_deadline <= deadline:
                return
            self._timer.cancel()
        self._timer = self._clock.call_at(deadline, self._on_timer)
        self._timer_deadline = deadline

    def _on_timer(self) -> None:
        self._timer = None
        now = self._clock.monotonic()
        heap = self._waiting_heap
        # Ties fire in add_after order (seq), keeping FIFO among equal deadlines.
        while heap and heap[0][0] <= now:
            deadline, seq, key = heapq.heappop(heap)
            if self._is_live(deadline, seq, key):
                del self._waiting[key]
                self.add(key)
        self._arm_timer()
