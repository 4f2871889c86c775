"""Informer memory: RSS per 10,000 cached Jobs, with the Job cache's transform (``job_view``: no
managedFields, no containers), with only managedFields dropped (the informer's default), and with
none.

Starts its own etcd + kube-apiserver (the `apiserver` profile: no Job controller, so the Jobs stay
as created), creates N suspended Jobs with a realistic pod template, then for each variant runs a
fresh Python process that lists+watches them into an informer and reports its RSS growth.

    .venv/bin/python bench/bench_informer.py [--jobs 10000] [--out bench/results/informer.json]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def rss_kib() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def job(i: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"bench-{i:05d}",
            "labels": {"jobset.sigs.k8s.io/jobset-name": f"js-{i // 4}", "bench": "informer"},
            "annotations": {"jobset.sigs.k8s.io/job-index": str(i % 4)},
        },
        "spec": {
            "suspend": True,
            "completionMode": "Indexed",
            "completions": 4,
            "parallelism": 4,
            "template": {
                "metadata": {"labels": {"jobset.sigs.k8s.io/jobset-name": f"js-{i // 4}"}},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "trainer",
                            "image": "registry.example/trainer:1.0",
                            "command": ["python", "train.py", "--epochs=10"],
                            "env": [{"name": "RANK", "value": str(i)}],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                            "volumeMounts": [{"name": "ckpt", "mountPath": "/ckpt"}],
                        }
                    ],
                    "volumes": [
                        {"name": "ckpt", "persistentVolumeClaim": {"claimName": f"ckpt-{i}"}}
                    ],
                },
            },
        },
    }


async def create_jobs(kubeconfig: Path, namespace: str, count: int) -> None:
    from kubernetes_asyncio import config

    from controller.runtime.client import JOBS, NAMESPACES, KubeClient

    api = await config.new_client_from_config(config_file=str(kubeconfig))
    async with api:
        client = KubeClient(api, qps=2000, burst=2000)
        await client.create(NAMESPACES, {"metadata": {"name": namespace}})
        started = time.monotonic()
        pending = iter(range(count))
        done = 0

        async def worker() -> None:
            nonlocal done
            for i in pending:
                await client.create(JOBS, job(i), namespace)
                done += 1
                if done % 1000 == 0:
                    rate = done / (time.monotonic() - started)
                    print(f"  created {done}/{count} Jobs ({rate:.0f}/s)", flush=True)

        await asyncio.gather(*(worker() for _ in range(16)))


VARIANTS = {
    "job-view": "children.job_view (the Job cache's)",
    "with": "strip managedFields (the default)",
    "without": "none",
}


async def measure(kubeconfig: Path, namespace: str, variant: str) -> dict[str, Any]:
    from kubernetes_asyncio import config

    from controller.jobset.children import job_view
    from controller.runtime.client import JOBS, KubeClient
    from controller.runtime.informer import Informer, strip_managed_fields

    api = await config.new_client_from_config(config_file=str(kubeconfig))
    async with api:
        client = KubeClient(api, qps=1000, burst=1000)
        await client.list(JOBS, namespace, limit=1)  # warm the connection and imports
        gc.collect()
        before = rss_kib()
        transforms = {"job-view": job_view, "with": strip_managed_fields, "without": None}
        informer = Informer(client, JOBS, namespace=namespace, transform=transforms[variant])
        task = asyncio.create_task(informer.run())
        started = time.monotonic()
        await informer.synced.wait()
        sync_seconds = time.monotonic() - started
        gc.collect()
        after = rss_kib()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return {
            "transform": VARIANTS[variant],
            "objects": len(informer.store),
            "rss_before_mib": round(before / 1024, 1),
            "rss_after_mib": round(after / 1024, 1),
            "rss_growth_mib": round((after - before) / 1024, 1),
            "initial_list_seconds": round(sync_seconds, 2),
        }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "informer.json")
    parser.add_argument("--measure", choices=sorted(VARIANTS), help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--namespace", default="bench", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.measure:
        result = asyncio.run(measure(args.kubeconfig, args.namespace, args.measure))
        print(json.dumps(result))
        return 0

    from localcluster.cluster import LocalCluster

    with (
        tempfile.TemporaryDirectory() as tmp,
        LocalCluster(Path(tmp), profile="apiserver") as cluster,
    ):
        print(f"creating {args.jobs} Jobs ...", flush=True)
        asyncio.run(create_jobs(cluster.kubeconfig, "bench", args.jobs))
        results = []
        for variant in [*VARIANTS, *VARIANTS]:
            print(f"measuring an informer, transform: {VARIANTS[variant]} ...", flush=True)
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    f"--measure={variant}",
                    f"--kubeconfig={cluster.kubeconfig}",
                ],
                capture_output=True,
                text=True,
                check=True,
                cwd=ROOT,
            )
            results.append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"  {results[-1]}", flush=True)
    report = {
        "benchmark": "informer RSS",
        "jobs": args.jobs,
        "machine": f"{platform.processor() or platform.machine()}, {_cores()} cores",
        "python": platform.python_version(),
        "runs": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print("\n| transform | objects | RSS growth (MiB) | per 10,000 Jobs (MiB) | initial list (s) |")
    print("|---|---|---|---|---|")
    for r in results:
        per = r["rss_growth_mib"] * 10_000 / max(1, r["objects"])
        print(
            f"| {r['transform']} | {r['objects']} | "
            f"{r['rss_growth_mib']} | {per:.1f} | {r['initial_list_seconds']} |"
        )
    print(f"\nwritten to {args.out}")
    return 0


def _cores() -> int:
    import os

    return os.cpu_count() or 0


if __name__ == "__main__":
    sys.exit(main())
