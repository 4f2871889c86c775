"""How far a benchmark's workload got: all Jobs created, all JobSets done, told by watches.

The benchmarks used to list the namespace's Jobs and JobSets every second. At N = 1,000 that is
4,000 Jobs or 1,000 JobSets serialised by the API server per list, on the machine whose CPU the
compared rows share, and a second or two of resolution on the times measured (a list took that
long under load). Watches send each change once: the API server's cost grows with the changes,
not with the namespace's size times the run's length, and a time is taken when the change
arrives. The controller's own informer does the listing and watching; the objects are reduced to
what is counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable

from controller.jobset import api
from controller.runtime.client import JOBS, KubeClient
from controller.runtime.informer import EventHandler, Informer
from controller.runtime.store import Obj
from tests.support.compare import Progress, reduced
from tests.support.statuslag import Trace


@contextlib.asynccontextmanager
async def watching(
    client: KubeClient,
    namespace: str,
    jobs_wanted: int,
    jobsets_wanted: int,
    done: Callable[[Obj], bool],
) -> AsyncIterator[Progress]:
    """Watch ``namespace`` until the block ends (the Jobs only until all exist: every Job's
    status changes a few times, and only its existence is counted)."""
    progress = Progress(jobs_wanted, jobsets_wanted, done, clock=time.monotonic)
    jobs = Informer(client, JOBS, namespace=namespace, transform=reduced)
    jobsets = Informer(client, api.JOBSETS, namespace=namespace, transform=reduced)
    jobs.add_handler(EventHandler(on_add=progress.on_job))
    jobsets.add_handler(
        EventHandler(on_add=progress.on_jobset, on_update=lambda _, new: progress.on_jobset(new))
    )
    tasks = [asyncio.create_task(jobsets.run())]
    job_task = asyncio.create_task(jobs.run())

    async def stop_jobs_when_all_exist() -> None:
        await progress.all_jobs.wait()
        job_task.cancel()

    tasks += [job_task, asyncio.create_task(stop_jobs_when_all_exist())]
    try:
        await asyncio.gather(jobs.synced.wait(), jobsets.synced.wait())
        yield progress
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _job_for_lag(obj: Obj) -> Obj:
    """What the lag measure reads of a Job (``statuslag.job_counts``): its labels, pod counts,
    suspension and status."""
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    return {
        "metadata": {k: meta.get(k) for k in ("name", "namespace", "resourceVersion", "labels")},
        "spec": {k: spec.get(k) for k in ("parallelism", "completions", "suspend")},
        "status": obj.get("status") or {},
    }


@contextlib.asynccontextmanager
async def tracing(client: KubeClient, namespace: str, trace: Trace) -> AsyncIterator[Trace]:
    """Feed ``trace`` every change of the namespace's Jobs and JobSets until the block ends
    (the status lag: ``tests/support/statuslag.py``)."""
    jobs = Informer(client, JOBS, namespace=namespace, transform=_job_for_lag)
    jobsets = Informer(client, api.JOBSETS, namespace=namespace, transform=reduced)
    jobs.add_handler(EventHandler(on_add=trace.on_job, on_update=lambda _, new: trace.on_job(new)))
    jobsets.add_handler(
        EventHandler(on_add=trace.on_jobset, on_update=lambda _, new: trace.on_jobset(new))
    )
    tasks = [asyncio.create_task(jobs.run()), asyncio.create_task(jobsets.run())]
    try:
        await asyncio.gather(jobs.synced.wait(), jobsets.synced.wait())
        yield trace
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
