"""Leader failover time: two controller replicas, the leader is killed (-9) or stopped (SIGTERM).

Uses the default lease timings (15 s lease, 10 s renew deadline, 2 s retry) unless told otherwise,
on its own etcd + kube-apiserver. Failover time = from the signal until the Lease names the
standby (polled every 50 ms). Repeats each mode and prints the median, min and max.

    .venv/bin/python bench/bench_failover.py [--rounds 5] [--out bench/results/failover.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


async def lease_holder(client: Any, namespace: str, name: str) -> str:
    from controller.runtime.client import LEASES, ApiError

    try:
        lease = await client.get(LEASES, name, namespace)
    except ApiError:
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def one_round(kubeconfig: Path, logs: Path, mode: str, lease: dict[str, str]) -> float:
    from kubernetes_asyncio import config

    from controller.runtime.client import KubeClient
    from tests.support.replicas import start_replica

    name = f"bench-{uuid.uuid4().hex[:6]}"
    api = await config.new_client_from_config(config_file=str(kubeconfig))
    async with api:
        client = KubeClient(api)
        replicas = {
            identity: start_replica(
                kubeconfig, "default", identity, logs, lease_name=name, extra=lease
            )
            for identity in ("a", "b")
        }
        try:
            leader = ""
            while leader not in replicas:
                leader = await lease_holder(client, "default", name)
                await asyncio.sleep(0.05)
            standby = "b" if leader == "a" else "a"
            while replicas[standby].get("/readyz")[0] != 200:
                await asyncio.sleep(0.05)
            pid = replicas[leader].process.pid
            assert pid is not None
            started = time.monotonic()
            os.kill(pid, signal.SIGKILL if mode == "kill-9" else signal.SIGTERM)
            while await lease_holder(client, "default", name) != standby:
                await asyncio.sleep(0.05)
            return time.monotonic() - started
        finally:
            for replica in replicas.values():
                replica.process.kill()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lease-duration", default="15")
    parser.add_argument("--renew-deadline", default="10")
    parser.add_argument("--retry-period", default="2")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "failover.json")
    args = parser.parse_args()
    lease = {
        "--lease-duration": args.lease_duration,
        "--renew-deadline": args.renew_deadline,
        "--retry-period": args.retry_period,
    }
    from localcluster.cluster import LocalCluster

    results: dict[str, list[float]] = {"kill-9": [], "sigterm": []}
    with (
        tempfile.TemporaryDirectory() as tmp,
        LocalCluster(Path(tmp) / "c", profile="apiserver") as cluster,
    ):
        for mode in results:
            for n in range(args.rounds):
                took = asyncio.run(one_round(cluster.kubeconfig, Path(tmp), mode, lease))
                results[mode].append(round(took, 2))
                print(
                    f"  {mode} round {n + 1}/{args.rounds}: standby leads after {took:.2f}s",
                    flush=True,
                )
    report = {
        "benchmark": "leader failover",
        "lease": lease,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "seconds": results,
        "median": {m: statistics.median(v) for m, v in results.items()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print("\n| how the leader stops | median (s) | min | max | rounds |")
    print("|---|---|---|---|---|")
    for mode, values in results.items():
        print(
            f"| {mode} | {statistics.median(values):.2f} | {min(values):.2f} | "
            f"{max(values):.2f} | {len(values)} |"
        )
    print(f"\nwritten to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
