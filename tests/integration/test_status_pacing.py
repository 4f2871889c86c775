"""Status pacing against a real API server: milestones go out at once, counters within the
longest hold (``--status-progress-period``).

The test plays the Job controller (as in test_jobset_controller.py). With a longest hold far
longer than the test, a counters-only change is never written on its own: it waits for the next
milestone, which carries it. With 0 every change is written, as upstream does. At the default,
counters that keep changing are written while they change, never held for minutes.
"""

from __future__ import annotations

import asyncio
import datetime
import itertools
from typing import Any

import pytest

from controller.jobset import api
from controller.runtime.client import JOBS, KubeClient
from localcluster import audit
from tests.helpers import Kube, wait_for
from tests.support.jobsets import (
    complete_job,
    condition,
    get_jobset,
    jobs_of,
    jobset,
    ready_job,
    replicated_job,
    running_controller,
    settled,
    wait_condition,
    wait_jobs,
    writes,
)


def _counts(obj: dict[str, Any]) -> dict[str, int]:
    statuses = (obj.get("status") or {}).get("replicatedJobsStatus") or [{}]
    return {k: int(statuses[0].get(k) or 0) for k in ("active", "ready", "succeeded")}


async def test_counters_ride_on_the_next_milestone(
    kube: Kube, client: KubeClient, namespace: str
) -> None:
    """With a period far longer than the test, counters are never written on their own, not even
    a new JobSet's first status of zero counters: the Completed milestone carries them all."""
    async with running_controller(kube, namespace, "--status-progress-period=3600") as running:
        await client.create(api.JOBSETS, jobset("paced", replicated_job("w", 2)), namespace)
        jobs = await wait_jobs(client, namespace, "paced", 2)
        await settled(running, client)
        assert not (await get_jobset(client, namespace, "paced")).get("status")
        before = writes(running.manager)
        for job in jobs:
            await ready_job(client, namespace, job)
        await settled(running, client)  # the ready Jobs were seen and reconciled
        assert writes(running.manager) == before, "a counters-only change was written"
        held = await get_jobset(client, namespace, "paced")
        assert not held.get("status")
        for job in jobs:
            await complete_job(client, namespace, job)
        done = await wait_condition(client, namespace, "paced", api.COMPLETED)
        # The milestone write carries the counters along.
        assert _counts(done)["succeeded"] == 2
        assert done["status"]["terminalState"] == "Completed"


async def test_period_zero_writes_every_change(
    kube: Kube, client: KubeClient, namespace: str
) -> None:
    async with running_controller(kube, namespace, "--status-progress-period=0"):
        await client.create(api.JOBSETS, jobset("eager", replicated_job("w", 2)), namespace)
        jobs = await wait_jobs(client, namespace, "eager", 2)
        await ready_job(client, namespace, jobs[0])
        seen = await wait_for(
            lambda: get_jobset(client, namespace, "eager"),
            lambda obj: _counts(obj)["ready"] == 1,
            "the ready count to be written",
        )
        assert _counts(seen)["active"] == 1


async def test_paced_counters_go_out_within_the_period(
    kube: Kube, client: KubeClient, namespace: str
) -> None:
    async with running_controller(kube, namespace, "--status-progress-period=2"):
        await client.create(api.JOBSETS, jobset("soon", replicated_job("w", 1)), namespace)
        (job,) = await wait_jobs(client, namespace, "soon", 1)
        await ready_job(client, namespace, job)
        # No milestone follows: the counters go out on their own once the period is over.
        seen = await wait_for(
            lambda: get_jobset(client, namespace, "soon"),
            lambda obj: _counts(obj)["ready"] == 1,
            "the paced ready count to be written",
        )
        assert _counts(seen)["active"] == 1


async def test_counters_that_keep_changing_are_written_together_once_per_hold(
    kube: Kube, client: KubeClient, namespace: str
) -> None:
    """A change of counters begins a hold of the longest hold (2 s here); every change within it
    goes out in the one write that ends it: one Job becomes ready every 0.4 s for 8 s, and the
    status writes that carry only counters are spaced at least the hold apart, each carrying
    several changes (lower bounds only: a slow machine spaces them further). The JobSet's zero
    counters, before the first Job is ready, are not written on their own."""
    jobs_count, hold = 20, 2.0
    async with running_controller(kube, namespace, f"--status-progress-period={hold}"):
        await client.create(api.JOBSETS, jobset("busy", replicated_job("w", jobs_count)), namespace)
        jobs = await wait_jobs(client, namespace, "busy", jobs_count)
        for job in jobs:
            await ready_job(client, namespace, job)
            await asyncio.sleep(0.4)  # the pace of the changes the controller sees
        await wait_for(
            lambda: get_jobset(client, namespace, "busy"),
            lambda obj: _counts(obj)["ready"] == jobs_count,
            "the last ready count to be written",
        )
    times = [
        datetime.datetime.fromisoformat(entry["requestReceivedTimestamp"])
        for entry in audit.entries(kube.cluster.audit_log, namespace)
        if entry.get("verb") == "update"
        and entry.get("objectRef", {}).get("namespace") == namespace
        and entry.get("objectRef", {}).get("name") == "busy"
        and entry.get("objectRef", {}).get("subresource") == "status"
    ]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    assert len(gaps) >= 1, f"status writes at {times}"
    for k, gap in enumerate(gaps):
        assert gap >= hold - 0.25, f"gap {k} was {gap:.2f}s; all gaps {gaps}"
    # 20 changes: written one by one, that would be 20 status writes.
    assert len(times) <= jobs_count // 2, times


async def test_counters_that_keep_changing_are_not_held_for_minutes_by_default(
    kube: Kube, client: KubeClient, namespace: str
) -> None:
    """At the default settings, a client polling the counters of JobSets whose Jobs become
    ready one after another sees each count before the next Job is ready, for several JobSets at
    once, however many counter-only writes in a row that takes. (The pace before held a JobSet's
    counters four times longer after each counter-only write, 10 s, 40 s, 160 s ... up to 640 s,
    and spread counter writes over all JobSets at 1 per second: the third count here came
    minutes late.) Each wait is the helper's usual patience; the bound itself is measured by the
    scale benchmark."""
    names, jobs_count = [f"polled-{i}" for i in range(4)], 5
    async with running_controller(kube, namespace):
        for name in names:
            await client.create(
                api.JOBSETS, jobset(name, replicated_job("w", jobs_count)), namespace
            )
        jobs = {name: await wait_jobs(client, namespace, name, jobs_count) for name in names}
        for ready in range(1, jobs_count + 1):
            for name in names:
                await ready_job(client, namespace, jobs[name][ready - 1])
            for name in names:
                seen = await wait_for(
                    lambda name=name: get_jobset(client, namespace, name),  # type: ignore[misc]
                    lambda obj, ready=ready: _counts(obj)["ready"] == ready,  # type: ignore[misc]
                    f"{name}'s status to show {ready} of {jobs_count} Jobs ready",
                )
                assert _counts(seen)["active"] == ready


async def test_counters_go_out_within_the_hold_while_a_job_create_is_refused_again_and_again(
    kube: Kube, client: KubeClient, namespace: str
) -> None:
    """A Job the API server refuses (a 422 on every create) backs the JobSet's passes off
    exponentially: once 15 refusals in a row have grown the backoff past a minute, the other
    Job becomes ready, and the JobSet's status shows it within the helper's usual patience: the
    pass that holds the count comes back at the end of the hold, not after the backoff (which
    alone brought the key back before, 80 s later)."""
    bad = replicated_job("bad")
    # The CRD admits any restartPolicy; the Job API refuses "Always" with a 422.
    bad["template"]["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    async with running_controller(kube, namespace) as running:
        await client.create(api.JOBSETS, jobset("refused", replicated_job("ok"), bad), namespace)
        await wait_condition(client, namespace, "refused", "JobCreationFailed")
        (job,) = await wait_jobs(client, namespace, "refused", 1)
        (queue,) = [c.queue for c in running.manager.controllers if c.name == "jobset"]

        async def refusals() -> int:
            return queue.num_requeues(f"{namespace}/refused")

        # The k-th refusal in a row comes back after 5 ms x 2^(k-1): after the 15th, 82 s later
        # (an event's pass meanwhile, refused too, keeps that earlier deadline).
        await wait_for(refusals, lambda n: n >= 15, "15 refused passes in a row", seconds=180)
        await ready_job(client, namespace, job)
        seen = await wait_for(
            lambda: get_jobset(client, namespace, "refused"),
            lambda obj: _counts(obj)["ready"] == 1,
            "the ready count to be written while the bad Job is still refused",
        )
        assert (condition(seen, "JobCreationFailed") or {}).get("status") == "True"


@pytest.mark.parametrize(
    "flags",
    [
        pytest.param((), id="default-pace"),
        pytest.param(("--status-progress-period=3600",), id="hour"),
    ],
)
async def test_suspension_shows_0_active_as_soon_as_the_jobs_are_gone(
    kube: Kube, client: KubeClient, namespace: str, flags: tuple[str, ...]
) -> None:
    """Kueue frees a preempted JobSet's quota once its status shows no active Job (IsActive):
    the total of ``active`` reaching 0 is a milestone, written in the reconcile that sees it
    whatever the pace (with an hour, a counters-only change would never be written on its own;
    ``settled`` does not wait for a paced requeue). The JobSet goes the way Kueue takes it:
    created suspended, resumed (admitted), suspended again (preempted)."""
    async with running_controller(kube, namespace, *flags) as running:
        body = jobset("preempted", replicated_job("w", 2), suspend=True)
        await client.create(api.JOBSETS, body, namespace)
        await wait_condition(client, namespace, "preempted", api.SUSPENDED)
        await client.patch(api.JOBSETS, "preempted", {"spec": {"suspend": False}}, namespace)
        jobs = await wait_for(
            lambda: jobs_of(client, namespace, "preempted"),
            lambda found: [j["spec"].get("suspend") for j in found] == [False, False],
            "both Jobs resumed",
        )
        for job in jobs:
            await ready_job(client, namespace, job)
        await wait_for(
            lambda: get_jobset(client, namespace, "preempted"),
            lambda obj: _counts(obj)["active"] == 2,
            "both Jobs active in the status (all ready: PodsReady, a milestone)",
        )
        # Kueue preempts it: suspended. The controller suspends the Jobs.
        await client.patch(api.JOBSETS, "preempted", {"spec": {"suspend": True}}, namespace)
        suspended = await wait_for(
            lambda: jobs_of(client, namespace, "preempted"),
            lambda found: all(j["spec"].get("suspend") for j in found),
            "the Jobs suspended",
        )
        await settled(running, client)
        # The Job controller's part: the pods are gone, the Jobs report nothing active.
        for job in suspended:
            await client.patch(
                JOBS,
                job["metadata"]["name"],
                {"status": {"active": 0, "ready": 0}},
                namespace,
                subresource="status",
            )
        await settled(running, client)
        stored = await get_jobset(client, namespace, "preempted")
        assert _counts(stored) == {"active": 0, "ready": 0, "succeeded": 0}, stored["status"]
        assert (condition(stored, api.SUSPENDED) or {}).get("status") == "True"
