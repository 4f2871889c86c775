"""Event-loop time of one reconcile's planning at admission's limits, and the loop's stall while
hostile failure-message patterns are matched (issue 11, part 2).

The unit tests (``tests/unit/test_reconcile_cost.py``, ``test_messagepatterns.py``) prove by
counting that these paths do no per-Job copying, no quadratic search and no matching on the event
loop; this script measures what that costs in wall time on this machine. Scenarios (the same
JobSets as the tests, built by the tests' own helpers):

* ``decide-create-2000-jobs-74kb``: decide for 2,000 Jobs of a 74 KB pod template, none existing.
* ``decide-steady-2000-jobs-74kb``: the same JobSet with every Job existing.
* ``build-and-mount-2000-jobs-74kb``: build and mount a claim into each of those 2,000 Jobs.
* ``refuse-160000-claims``: the volume-policy parser refusing 16 Job-scope templates x 10,000 Jobs.
* ``desired-claims-10000``: listing 10,000 desired claims (their objects not built).
* ``validate-50-policies-800-templates``: the policies of 50 x 16 templates, 32 replicated jobs
  of 16 containers x 64 mounts.
* ``validate-50-policies-800-templates-100-rjobs``: the same with 100 replicated jobs (today's
  bound).
* ``decide-3200-jobs-800-shared-claims-pending``: decide for the 32-job JobSet with 100 replicas
  each; ``decide-10000-jobs-...``: the 100-job one, 10,000 Jobs (the child-Job bound).
* ``mount-800-claims-x100``: mounting 800 claims into 100 pods.
* ``re2-<pattern>``: the issue's backtracking patterns on 86,000-100,000 characters.
* ``failure-evaluate-backtracking``: a failure policy with ``(a+)+$`` and ``(\\w*\\s?)*X``.

Each runs once to warm up, then ``--repeats`` times; reported: median, min and max seconds.

Stall: 500 failed Jobs with distinct messages, a failure policy of two patterns built to defeat
RE2's DFA; a 5 ms heartbeat task records the largest gap between its beats while the messages
are matched (a) inline on the loop (``failure.evaluate``, the hazard) and (b) as the reconciler
does, in a daemon thread (``failure.match_messages_in_thread``).

Run: ``.venv/bin/python bench/bench_reconcile_cost.py [--repeats R] [--out PATH]``
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the scenarios are built by the unit tests' own helpers

from controller.jobset import api, construct, failure, messagepatterns, volumes  # noqa: E402
from controller.jobset.children import views as job_views  # noqa: E402
from controller.jobset.decide import decide  # noqa: E402
from controller.jobset.model import InvalidJobSet, JobSet  # noqa: E402
from controller.jobset.volumes import desired as volume_desired  # noqa: E402
from controller.jobset.volumes import spec as volume_spec  # noqa: E402
from controller.jobset.volumes.desired import desired_claims  # noqa: E402
from controller.jobset.volumes.model import VolumePolicy  # noqa: E402
from tests.unit.jobset_factories import at, make_job, make_jobset, rjob  # noqa: E402
from tests.unit.test_messagepatterns import BACKOFF_MESSAGE, _hostile_jobs  # noqa: E402
from tests.unit.test_reconcile_cost import _big_pod, _job_scope, _many_policies  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "reconcile-cost.json"
NOW = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
HEARTBEAT = 0.005  # seconds

Scenario = Callable[[], object]


def _claim_policy(name: str) -> dict[str, Any]:
    template = {
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    return {"volumeClaimPolicies": [{"templates": [template]}]}


def _decide_pending(js: JobSet, policies: tuple[VolumePolicy, ...]) -> Scenario:
    return lambda: decide(js, [], None, NOW, model=volumes.VolumeModel(js, policies))


def _searcher(compiled: messagepatterns.Pattern, message: str) -> Scenario:
    return lambda: compiled.search(message)


def scenarios(runs: int) -> dict[str, Scenario]:
    """Each scenario's inputs are built here, outside what is timed (``runs``: calls to come)."""
    result: dict[str, Scenario] = {}

    big = make_jobset(replicated_jobs=[rjob("workers", 2000, pod_spec=_big_pod())])
    existing = decide(big, [], None, NOW).create_jobs
    result["decide-create-2000-jobs-74kb"] = lambda: decide(big, [], None, NOW)
    observed = job_views(existing)  # the informer's views (children.job_view)
    result["decide-steady-2000-jobs-74kb"] = lambda: decide(big, observed, None, NOW)

    mounts = [{"name": "data", "mountPath": "/data"}]
    claimed = make_jobset(
        replicated_jobs=[rjob("workers", 2000, pod_spec=_big_pod(volumeMounts=mounts))],
        spec=_claim_policy("data"),
    )
    claimed_policies = volume_spec.policies(claimed)
    workers = claimed.replicated_jobs[0]
    result["build-and-mount-2000-jobs-74kb"] = lambda: [
        volume_desired.mount(
            construct.desired_job(claimed, workers, i), claimed, claimed_policies, workers.name, i
        )
        for i in range(2000)
    ]

    too_many = _job_scope(api.MAX_CHILD_JOBS, 16)

    def refuse() -> None:
        try:
            volume_spec.policies(too_many)
        except InvalidJobSet:
            return
        raise AssertionError("160,000 claims were accepted")

    result["refuse-160000-claims"] = refuse

    expressions = [{"key": f"k{i}", "operator": "In", "values": ["a", "b"]} for i in range(10)]
    many_claims = _job_scope(1000, 10, selector={"matchExpressions": expressions})
    many_claims_policies = volume_spec.policies(many_claims)
    result["desired-claims-10000"] = lambda: desired_claims(many_claims, many_claims_policies)

    # A fresh parsed JobSet for each run (the mount names are cached on one), parsed beforehand.
    fresh = iter([_many_policies(1) for _ in range(runs)])
    result["validate-50-policies-800-templates"] = lambda: volume_spec.policies(next(fresh))

    wide = iter([_many_policies(1, replicated_jobs=100) for _ in range(runs)])
    result["validate-50-policies-800-templates-100-rjobs"] = lambda: volume_spec.policies(
        next(wide)
    )

    for rjobs in (32, 100):
        shared = _many_policies(100, replicated_jobs=rjobs)
        # A fresh model per run (it caches the desired claims), of the policies parsed beforehand.
        result[f"decide-{rjobs * 100}-jobs-800-shared-claims-pending"] = _decide_pending(
            shared, volume_spec.policies(shared)
        )

    one = _many_policies(1)
    one_policies = volume_spec.policies(one)
    first = one.replicated_jobs[0]
    pod_job = construct.desired_job(one, first, 0)
    result["mount-800-claims-x100"] = lambda: [
        volume_desired.mount(pod_job, one, one_policies, first.name, 0) for _ in range(100)
    ]

    for label, pattern, message in [
        ("word-space-star", r"(\w*\s?)*X", BACKOFF_MESSAGE * 2000),
        ("nested-plus", r"(a+)+$", "a" * 100_000 + "!"),
        ("alternation", r"(a|aa)+$", "a" * 100_000 + "!"),
        ("two-plus", r"(x+x+)+y", "x" * 100_000),
    ]:
        result[f"re2-{label}-{len(message)}-chars"] = _searcher(
            messagepatterns.compile(pattern), message
        )

    backtracking = make_jobset(
        replicated_jobs=[rjob("workers", 2)],
        failure_policy={
            "maxRestarts": 3,
            "rules": [
                {
                    "action": api.FAIL_JOBSET,
                    "onJobFailureMessagePatterns": [r"(a+)+$", r"(\w*\s?)*X"],
                }
            ],
        },
    )
    failed = [
        make_job(
            backtracking, "workers", 0, failed=("BackoffLimitExceeded", BACKOFF_MESSAGE, at(0))
        ),
        make_job(backtracking, "workers", 1, failed=("PodFailurePolicy", "a" * 26 + "!", at(1))),
    ]
    result["failure-evaluate-backtracking"] = lambda: failure.evaluate(
        backtracking, job_views(failed)
    )
    return result


def time_once(scenario: Scenario) -> float:
    started = time.perf_counter()
    scenario()
    return time.perf_counter() - started


async def largest_gap_while(work: Awaitable[object]) -> tuple[float, float]:
    """(largest gap between 5 ms heartbeats, duration of ``work``) with ``work`` on this loop."""
    gaps: list[float] = []
    done = asyncio.Event()

    async def heartbeat() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(HEARTBEAT)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0.02)
    started = time.perf_counter()
    await work
    duration = time.perf_counter() - started
    done.set()
    await beat
    return max(gaps), duration


async def stall(jobs: int) -> dict[str, dict[str, float]]:
    js, failed = _hostile_jobs(jobs)

    async def inline() -> object:
        return failure.evaluate(js, failed)

    gap, duration = await largest_gap_while(inline())
    result = {"inline": {"largest_gap_s": gap, "matching_s": duration}}
    gap, duration = await largest_gap_while(failure.match_messages_in_thread(js, failed))
    result["in_thread"] = {"largest_gap_s": gap, "matching_s": duration}
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description="reconcile planning cost benchmark")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--stall-jobs", type=int, default=500)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()

    print("building the scenarios' JobSets ...", file=sys.stderr, flush=True)
    results: dict[str, dict[str, Any]] = {}
    for name, scenario in scenarios(args.repeats + 1).items():
        print(f"[{name}] warm-up ...", file=sys.stderr, flush=True)
        time_once(scenario)
        runs = []
        for run in range(1, args.repeats + 1):
            runs.append(time_once(scenario))
            print(
                f"[{name}] run {run}/{args.repeats}: {runs[-1] * 1000:.2f} ms",
                file=sys.stderr,
                flush=True,
            )
        results[name] = {
            "seconds": runs,
            "median_s": statistics.median(runs),
            "min_s": min(runs),
            "max_s": max(runs),
        }

    stalls = []
    for run in range(1, args.repeats + 1):
        stalls.append(asyncio.run(stall(args.stall_jobs)))
        gaps = {way: stalls[-1][way]["largest_gap_s"] for way in ("inline", "in_thread")}
        print(
            f"[stall] run {run}/{args.repeats}: largest gap inline {gaps['inline']:.3f} s, "
            f"in a thread {gaps['in_thread']:.3f} s",
            file=sys.stderr,
            flush=True,
        )
    stall_summary = {
        way: {
            key: statistics.median(s[way][key] for s in stalls)
            for key in ("largest_gap_s", "matching_s")
        }
        for way in ("inline", "in_thread")
    }

    report = {
        "benchmark": "reconcile-cost",
        "repeats": args.repeats,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "note": "shared VM; other work was running",
        "unit": "seconds of event-loop time per call; stall: largest gap between 5 ms heartbeats",
        "scenarios": results,
        "stall": {"jobs": args.stall_jobs, "runs": stalls, "median": stall_summary},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)

    print(f"\nReconcile planning cost, {args.repeats} runs, Python {platform.python_version()}\n")
    print("| scenario | median ms | min ms | max ms |")
    print("|---|---:|---:|---:|")
    for name, r in results.items():
        ms = [r[key] * 1000 for key in ("median_s", "min_s", "max_s")]
        print(f"| {name} | {ms[0]:.2f} | {ms[1]:.2f} | {ms[2]:.2f} |")
    print(f"\nEvent-loop stall, {args.stall_jobs} hostile messages (medians)\n")
    print("| matched | largest heartbeat gap s | matching s |")
    print("|---|---:|---:|")
    for way, s in stall_summary.items():
        print(f"| {way} | {s['largest_gap_s']:.3f} | {s['matching_s']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
