"""Rate limiters deciding how long a work item waits before it is retried.

These mirror client-go's ``k8s.io/client-go/util/workqueue`` rate limiters:

* :class:`ItemExponentialFailureRateLimiter` - per-item exponential backoff:
  ``base * 2**failures``, capped at ``max_delay``; :meth:`forget` resets an item.
* :class:`BucketRateLimiter` - one token bucket shared by all items, with the
  reservation semantics of ``golang.org/x/time/rate``: every :meth:`when` call
  takes a token immediately and returns how long until that token exists; the
  bucket may go negative, so callers arriving faster than ``qps`` are spaced
  ``1/qps`` apart after the initial ``burst``.
* :class:`MaxOfRateLimiter` - the longest delay of its children.
* :func:`default_controller_rate_limiter` - client-go's
  ``DefaultTypedControllerRateLimiter``: max of exponential (5 ms .. 1000 s) and
  bucket (10 qps, burst 100).

All delays are seconds as ``float``. Everything runs on one event loop, so there is
no locking.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

from controller.runtime.clock import Clock, SystemClock

K = TypeVar("K", bound=Hashable)
K_contra = TypeVar("K_contra", bound=Hashable, contravariant=True)

# 2.0 ** 1024 overflows a float; beyond that the delay is capped anyway.
_MAX_FLOAT_EXPONENT = 1023


class RateLimiter(Protocol[K_contra]):
    """Decides retry delays for items (client-go ``TypedRateLimiter``)."""

    def when(self, item: K_contra) -> float:
        """Record a retry of ``item`` and return how many seconds to wait first."""
        ...

    def forget(self, item: K_contra) -> None:
        """Stop tracking ``item`` (it succeeded); its backoff starts over."""
        ...

    def num_requeues(self, item: K_contra) -> int:
        """How many times ``item`` has been retried since it was last forgotten."""
        ...


class ItemExponentialFailureRateLimiter(Generic[K]):
    """Per-item exponential backoff: ``base_delay * 2**n`` for the n-th retry, capped."""

    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0) -> None:
        if base_delay <= 0:
            raise ValueError(f"base_delay must be > 0, got {base_delay}")
        if max_delay < base_delay:
            raise ValueError(f"max_delay ({max_delay}) must be >= base_delay ({base_delay})")
        self._base_delay = base_delay
        self._max_delay = max_delay
        self._failures: dict[K, int] = {}

    def when(self, item: K) -> float:
        exponent = self._failures.get(item, 0)
        self._failures[item] = exponent + 1
        if exponent > _MAX_FLOAT_EXPONENT:
            return self._max_delay
        return min(self._base_delay * 2.0**exponent, self._max_delay)

    def forget(self, item: K) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: K) -> int:
        return self._failures.get(item, 0)


class BucketRateLimiter:
    """Token bucket shared by all items; refills at ``qps`` tokens/s up to ``burst``.

    Like ``rate.Limiter.Reserve().Delay()``: each :meth:`when` consumes a token right
    away, possibly driving the balance negative, and returns the time until the
    balance would have covered it. Items are not tracked, so :meth:`forget` does
    nothing and :meth:`num_requeues` is always 0.
    """

    def __init__(self, qps: float = 10.0, burst: int = 100, clock: Clock | None = None) -> None:
        if qps <= 0:
            raise ValueError(f"qps must be > 0, got {qps}")
        if burst < 1:
            # A zero burst can never grant a token (x/time/rate reports an infinite delay).
            raise ValueError(f"burst must be >= 1, got {burst}")
        self._qps = qps
        self._burst = burst
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._tokens = float(burst)
        self._last = self._clock.monotonic()

    @property
    def qps(self) -> float:
        return self._qps

    @property
    def burst(self) -> int:
        return self._burst

    def when(self, item: object) -> float:
        now = self._clock.monotonic()
        # A clock that went backwards adds nothing (same guard as x/time/rate).
        elapsed = max(0.0, now - self._last)
        tokens = min(float(self._burst), self._tokens + elapsed * self._qps)
        tokens -= 1.0
        self._tokens = tokens
        self._last = now
        if tokens >= 0:
            return 0.0
        return -tokens / self._qps

    def forget(self, item: object) -> None:
        return None

    def num_requeues(self, item: object) -> int:
        return 0


class MaxOfRateLimiter(Generic[K]):
    """The longest delay any child asks for; every child sees every call."""

    def __init__(self, *limiters: RateLimiter[K]) -> None:
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self._limiters = limiters

    def when(self, item: K) -> float:
        # Every child must see the call: each one records the retry.
        delays = [limiter.when(item) for limiter in self._limiters]
        return max(delays)

    def forget(self, item: K) -> None:
        for limiter in self._limiters:
            limiter.forget(item)

    def num_requeues(self, item: K) -> int:
        return max(limiter.num_requeues(item) for limiter in self._limiters)


def default_controller_rate_limiter(clock: Clock | None = None) -> RateLimiter[Hashable]:
    """client-go's default: max of per-item backoff (5 ms .. 1000 s) and 10 qps / 100 burst.

    The per-item part dominates for a single failing item; the bucket only matters
    when many items are retried at once (the first 100 retries pass immediately,
    after that 10 per second overall).
    """
    return MaxOfRateLimiter[Hashable](
        ItemExponentialFailureRateLimiter[Hashable](base_delay=0.005, max_delay=1000.0),
        BucketRateLimiter(qps=10.0, burst=100, clock=clock),
    )
