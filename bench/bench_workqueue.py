"""Throughput of controller.runtime.workqueue.WorkQueue on one event loop (one core).

Variants, each over N distinct keys (default 100,000):

* ``add-all-then-drain``: add every key, then get + done every key.
* ``add-all-then-drain+metrics``: the same with Prometheus metrics recorded.
* ``interleaved``: for each key: add, get, done.
* ``4-workers``: four worker tasks wait in get() while a producer adds keys in
  batches of 100, yielding to the loop between batches (exercises the wake-up path).

Each variant runs once to warm up, then ``--repeats`` times. Reported: keys/s (one
add + one get + one done per key) and ops/s (adds + gets, i.e. 2 per key), median
and min/max over the runs. Progress goes to stderr, a Markdown table to stdout,
and the raw numbers as JSON to ``--out``.

Run: ``.venv/bin/python bench/bench_workqueue.py [--keys N] [--repeats R] [--out PATH]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from prometheus_client import CollectorRegistry

from controller.runtime.workqueue import ShutDown, WorkQueue, WorkqueueMetrics

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "workqueue.json"
WORKERS = 4
PRODUCER_BATCH = 100

Variant = Callable[[list[str]], Awaitable[None]]


async def add_all_then_drain(keys: list[str]) -> None:
    queue = WorkQueue[str]("bench")
    await _add_all_then_drain(queue, keys)


async def add_all_then_drain_with_metrics(keys: list[str]) -> None:
    queue = WorkQueue[str]("bench", metrics=WorkqueueMetrics(CollectorRegistry()))
    await _add_all_then_drain(queue, keys)


async def _add_all_then_drain(queue: WorkQueue[str], keys: list[str]) -> None:
    for key in keys:
        queue.add(key)
    for _ in range(len(keys)):
        queue.done(await queue.get())
    assert len(queue) == 0


async def interleaved(keys: list[str]) -> None:
    queue = WorkQueue[str]("bench")
    for key in keys:
        queue.add(key)
        queue.done(await queue.get())
    assert len(queue) == 0


async def workers(keys: list[str]) -> None:
    queue = WorkQueue[str]("bench")
    processed = 0

    async def worker() -> None:
        nonlocal processed
        while True:
            try:
                key = await queue.get()
            except ShutDown:
                return
            queue.done(key)
            processed += 1

    tasks = [asyncio.create_task(worker()) for _ in range(WORKERS)]
    for start in range(0, len(keys), PRODUCER_BATCH):
        for key in keys[start : start + PRODUCER_BATCH]:
            queue.add(key)
        await asyncio.sleep(0)
    await queue.shut_down_with_drain()
    await asyncio.gather(*tasks)
    assert processed == len(keys)


VARIANTS: dict[str, Variant] = {
    "add-all-then-drain": add_all_then_drain,
    "add-all-then-drain+metrics": add_all_then_drain_with_metrics,
    "interleaved": interleaved,
    f"{WORKERS}-workers": workers,
}


@dataclass
class VariantResult:
    keys_per_second: list[float]
    median_keys_per_second: float
    min_keys_per_second: float
    max_keys_per_second: float
    median_ops_per_second: float


def time_once(variant: Variant, keys: list[str]) -> float:
    """Seconds for one run, on a fresh event loop."""

    async def timed() -> float:
        start = time.perf_counter()
        await variant(keys)
        return time.perf_counter() - start

    return asyncio.run(timed())


def main() -> int:
    parser = argparse.ArgumentParser(description="WorkQueue throughput benchmark")
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    keys = [f"namespace-{i % 100}/jobset-{i}" for i in range(args.keys)]
    results: dict[str, VariantResult] = {}
    for name, variant in VARIANTS.items():
        print(f"[{name}] warm-up ...", file=sys.stderr, flush=True)
        time_once(variant, keys)
        rates = []
        for run in range(1, args.repeats + 1):
            rate = len(keys) / time_once(variant, keys)
            rates.append(rate)
            print(
                f"[{name}] run {run}/{args.repeats}: {rate:,.0f} keys/s",
                file=sys.stderr,
                flush=True,
            )
        median = statistics.median(rates)
        results[name] = VariantResult(
            keys_per_second=rates,
            median_keys_per_second=median,
            min_keys_per_second=min(rates),
            max_keys_per_second=max(rates),
            median_ops_per_second=2 * median,
        )

    report = {
        "benchmark": "workqueue",
        "keys": args.keys,
        "repeats": args.repeats,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "unit": "keys/s; one key = add + get + done; ops/s counts adds + gets",
        "variants": {name: asdict(result) for name, result in results.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)

    print(
        f"\nWorkQueue throughput, {args.keys:,} distinct keys, {args.repeats} runs, "
        f"Python {platform.python_version()}, one event loop\n"
    )
    print("| variant | median keys/s | min keys/s | max keys/s | median ops/s (add+get) |")
    print("|---|---:|---:|---:|---:|")
    for name, result in results.items():
        print(
            f"| {name} | {result.median_keys_per_second:,.0f} | "
            f"{result.min_keys_per_second:,.0f} | {result.max_keys_per_second:,.0f} | "
            f"{result.median_ops_per_second:,.0f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
