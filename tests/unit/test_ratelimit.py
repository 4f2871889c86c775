"""Rate limiters: exponential backoff, token bucket, max-of, and client-go's default."""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.runtime.clock import FakeClock
from controller.runtime.ratelimit import (
    BucketRateLimiter,
    ItemExponentialFailureRateLimiter,
    MaxOfRateLimiter,
    RateLimiter,
    default_controller_rate_limiter,
)

pytestmark = pytest.mark.unit


# ------------------------------------------------------------ exponential backoff


def test_exponential_defaults_double_from_5ms() -> None:
    limiter = ItemExponentialFailureRateLimiter[str]()
    delays = [limiter.when("a") for _ in range(5)]
    assert delays == pytest.approx([0.005, 0.010, 0.020, 0.040, 0.080])
    assert limiter.num_requeues("a") == 5


def test_exponential_default_cap_is_1000_seconds() -> None:
    limiter = ItemExponentialFailureRateLimiter[str]()
    delays = [limiter.when("a") for _ in range(30)]
    # 0.005 * 2**17 = 655.36 is the last uncapped delay.
    assert delays[17] == pytest.approx(655.36)
    assert delays[18:] == [1000.0] * 12


@pytest.mark.parametrize(
    ("base", "cap", "expected"),
    [
        (1.0, 10.0, [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]),
        (0.5, 0.5, [0.5, 0.5, 0.5]),
        (0.001, 0.004, [0.001, 0.002, 0.004, 0.004]),
        (3.0, 100.0, [3.0, 6.0, 12.0, 24.0, 48.0, 96.0, 100.0]),
    ],
)
def test_exponential_table(base: float, cap: float, expected: list[float]) -> None:
    limiter = ItemExponentialFailureRateLimiter[str](base_delay=base, max_delay=cap)
    assert [limiter.when("x") for _ in expected] == pytest.approx(expected)


def test_exponential_counts_are_per_item_and_forget_resets() -> None:
    limiter = ItemExponentialFailureRateLimiter[str]()
    limiter.when("a")
    limiter.when("a")
    assert limiter.when("b") == pytest.approx(0.005)
    assert limiter.num_requeues("a") == 2
    assert limiter.num_requeues("b") == 1

    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    assert limiter.when("a") == pytest.approx(0.005)
    assert limiter.num_requeues("b") == 1
    limiter.forget("never-seen")  # no error


def test_exponential_huge_failure_count_stays_capped() -> None:
    limiter = ItemExponentialFailureRateLimiter[str](base_delay=0.005, max_delay=1000.0)
    delays = [limiter.when("a") for _ in range(3000)]
    assert delays[-1] == 1000.0
    assert all(math.isfinite(d) for d in delays)
    assert limiter.num_requeues("a") == 3000


@pytest.mark.parametrize(("base", "cap"), [(0.0, 1.0), (-1.0, 1.0), (2.0, 1.0)])
def test_exponential_rejects_bad_parameters(base: float, cap: float) -> None:
    with pytest.raises(ValueError):
        ItemExponentialFailureRateLimiter[str](base_delay=base, max_delay=cap)


@settings(max_examples=200, deadline=None)
@given(
    ops=st.lists(
        st.tuples(st.sampled_from(["when", "forget"]), st.sampled_from(["a", "b", "c"])),
        max_size=80,
    )
)
def test_exponential_matches_model(ops: list[tuple[str, str]]) -> None:
    base, cap = 0.005, 1.0
    limiter = ItemExponentialFailureRateLimiter[str](base_delay=base, max_delay=cap)
    failures: dict[str, int] = {}
    for op, item in ops:
        if op == "when":
            n = failures.get(item, 0)
            assert limiter.when(item) == pytest.approx(min(base * 2**n, cap))
            failures[item] = n + 1
        else:
            limiter.forget(item)
            failures.pop(item, None)
        for other in "abc":
            assert limiter.num_requeues(other) == failures.get(other, 0)


# ------------------------------------------------------------------- token bucket


def test_bucket_defaults() -> None:
    limiter = BucketRateLimiter(clock=FakeClock())
    assert (limiter.qps, limiter.burst) == (10.0, 100)


def test_bucket_burst_is_immediate_then_spaced_by_one_over_qps() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=10, burst=100, clock=clock)
    assert [limiter.when(i) for i in range(100)] == [0.0] * 100
    # The bucket goes negative: each further reservation waits one more token.
    delays = [limiter.when(i) for i in range(5)]
    assert delays == pytest.approx([0.1, 0.2, 0.3, 0.4, 0.5])


def test_bucket_refills_with_time_up_to_burst() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=2, burst=3, clock=clock)
    assert [limiter.when("x") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.when("x") == pytest.approx(0.5)  # balance -1
    clock.advance(1.0)  # +2 tokens -> balance 1
    assert limiter.when("x") == 0.0
    assert limiter.when("x") == pytest.approx(0.5)
    clock.advance(3600.0)  # refill is capped at burst
    assert [limiter.when("x") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.when("x") == pytest.approx(0.5)


def test_bucket_caller_waiting_each_delay_gets_steady_rate() -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=4, burst=1, clock=clock)
    granted_at = []
    for _ in range(10):
        delay = limiter.when("x")
        clock.advance(delay)
        granted_at.append(clock.monotonic())
    gaps = [b - a for a, b in itertools.pairwise(granted_at)]
    assert granted_at[0] == 0.0
    assert gaps == pytest.approx([0.25] * 9)


def test_bucket_ignores_items() -> None:
    limiter = BucketRateLimiter(clock=FakeClock())
    limiter.when("a")
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0


@pytest.mark.parametrize(("qps", "burst"), [(0.0, 1), (-1.0, 1), (1.0, 0)])
def test_bucket_rejects_bad_parameters(qps: float, burst: int) -> None:
    with pytest.raises(ValueError):
        BucketRateLimiter(qps=qps, burst=burst, clock=FakeClock())


@settings(max_examples=200, deadline=None)
@given(
    qps=st.sampled_from([0.5, 1.0, 10.0, 100.0]),
    burst=st.integers(min_value=1, max_value=20),
    steps=st.lists(
        st.tuples(
            st.floats(min_value=0.0, max_value=3.0, allow_nan=False),
            st.integers(min_value=0, max_value=10),
        ),
        max_size=40,
    ),
)
def test_bucket_reservation_properties(
    qps: float, burst: int, steps: list[tuple[float, int]]
) -> None:
    clock = FakeClock()
    limiter = BucketRateLimiter(qps=qps, burst=burst, clock=clock)
    calls: list[tuple[float, float]] = []  # (called at, delay)
    for advance, count in steps:
        clock.advance(advance)
        for _ in range(count):
            calls.append((clock.monotonic(), limiter.when("x")))
    eps = 1e-6
    act_times = [called_at + delay for called_at, delay in calls]
    for k, (called_at, delay) in enumerate(calls):
        assert delay >= 0.0
        # Token bucket bound: by time t at most burst + qps * t tokens were granted.
        assert k + 1 <= burst + qps * act_times[k] + eps
        if k == 0:
            continue
        _, prev_delay = calls[k - 1]
        # Reservations are granted in call order.
        assert act_times[k] >= act_times[k - 1] - eps
        if delay > 0 and prev_delay > 0:
            # Back-to-back waiting reservations are exactly one token (1/qps) apart.
            assert act_times[k] - act_times[k - 1] == pytest.approx(1.0 / qps, abs=eps)
        if called_at >= act_times[k - 1] + 1.0 / qps + eps:
            # A whole token has accrued since the last grant: no waiting.
            assert delay == 0.0


# ------------------------------------------------------------------------- max-of


class _FixedLimiter:
    def __init__(self, delay: float, requeues: int) -> None:
        self.delay = delay
        self.requeues = requeues
        self.calls: list[str] = []

    def when(self, item: str) -> float:
        self.calls.append(f"when:{item}")
        return self.delay

    def forget(self, item: str) -> None:
        self.calls.append(f"forget:{item}")

    def num_requeues(self, item: str) -> int:
        return self.requeues


def test_max_of_takes_longest_delay_and_calls_every_child() -> None:
    children = [_FixedLimiter(0.1, 1), _FixedLimiter(3.0, 0), _FixedLimiter(0.5, 7)]
    limiter = MaxOfRateLimiter[str](*children)
    assert limiter.when("a") == 3.0
    assert limiter.num_requeues("a") == 7
    limiter.forget("a")
    for child in children:
        assert child.calls == ["when:a", "forget:a"]


def test_max_of_requires_a_child() -> None:
    with pytest.raises(ValueError):
        MaxOfRateLimiter[str]()


def test_max_of_backoff_and_bucket() -> None:
    clock = FakeClock()
    limiter = MaxOfRateLimiter[str](
        ItemExponentialFailureRateLimiter[str](base_delay=1.0, max_delay=60.0),
        BucketRateLimiter(qps=1, burst=1, clock=clock),
    )
    assert limiter.when("a") == 1.0  # backoff 1, bucket 0
    assert limiter.when("b") == 1.0  # backoff 1, bucket 1
    assert limiter.when("c") == 2.0  # backoff 1, bucket 2
    assert limiter.when("a") == 3.0  # backoff 2, bucket 3
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0


# ------------------------------------------------------------ client-go's default


def test_default_controller_rate_limiter() -> None:
    clock = FakeClock()
    limiter: RateLimiter[Hashable] = default_controller_rate_limiter(clock)
    # A single failing item backs off exponentially; the bucket does not interfere.
    assert [limiter.when("a") for _ in range(4)] == pytest.approx([0.005, 0.01, 0.02, 0.04])
    assert limiter.num_requeues("a") == 4
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0
    # 96 more distinct items exhaust the 100-token burst (4 were used by "a") ...
    assert all(limiter.when(i) == pytest.approx(0.005) for i in range(96))
    # ... after which the bucket's 10 qps spacing dominates the 5 ms first backoff.
    assert limiter.when("late-1") == pytest.approx(0.1)
    assert limiter.when("late-2") == pytest.approx(0.2)
    clock.advance(10.0)  # refill 100 tokens
    assert limiter.when("late-3") == pytest.approx(0.005)
