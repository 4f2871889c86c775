"""Status pacing against a real API server: milestones go out at once, counters are paced.

The test plays the Job controller (as in test_jobset_controller.py). With a pacing period far
longer than the test, a counters-only change is never written on its own: it waits for the next
milestone, which carries it. With period 0 every change is written, as upstream does.
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


async def test_counters_that_keep_changing_are_written_ever_less_often(
    kube: Kube, client: KubeClient, namespace: str
) -> None:
    """Each progress-only write in a row lengthens the next hold fourfold (1, 4, 16 s at period
    1): one Job becomes ready every 0.4 s for 8 s, and the status writes that carry only counters
    are spaced at least that far apart (lower bounds only: a slow machine spaces them further)."""
    jobs_count = 20
    async with running_controller(kube, namespace, "--status-progress-period=1"):
        await client.create(api.JOBSETS, jobset("busy", replicated_job("w", jobs_count)), namespace)
        jobs = await wait_jobs(client, namespace, "busy", jobs_count)
        await wait_for(
            lambda: get_jobset(client, namespace, "busy"),
            lambda obj: bool(obj.get("status")),
            "the first status write",
        )
        for job in jobs:
            await ready_job(client, namespace, job)
            await asyncio.sleep(0.4)  # the pace of the changes the controller sees
        await wait_for(
            lambda: get_jobset(client, namespace, "busy"),
            lambda obj: _counts(obj)["ready"] == jobs_count,
            "the last ready count to be written",
            seconds=60,
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
    assert len(gaps) >= 2, f"status writes at {times}"
    for k, gap in enumerate(gaps):
        # The first status (zero counters, 1 s after creation) is the first of the streak: the
        # holds after it are 4 s, then 16 s ...
        assert gap >= min(4 ** (k + 1), 64) - 0.25, f"gap {k} was {gap:.2f}s; all gaps {gaps}"
    # At a fixed 1 s pace the 8 s of changes would have cost about 8 counter writes.
    assert len(gaps) <= 3, gaps


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


async def test_many_jobsets_moving_at_once_hold_their_counters_longer(
    kube: Kube, client: KubeClient, namespace: str
) -> None:
    """``--status-progress-rate``: with 4 JobSets' counters held and 0.2 counter writes per
    second over them all, each hold is at least 4 / 0.2 = 20 s, not the 1 s period: none of
    them writes its first status (zero counters, then ready ones) for several seconds after it
    was created, and all do once the hold is over. The API server's audit log says when each
    create and status write arrived (lower bound only: a slow machine makes the holds longer)."""
    names = [f"crowd-{i}" for i in range(4)]
    async with running_controller(
        kube, namespace, "--status-progress-period=1", "--status-progress-rate=0.2"
    ) as running:
        for name in names:
            await client.create(api.JOBSETS, jobset(name, replicated_job("w", 1)), namespace)
        for name in names:
            (job,) = await wait_jobs(client, namespace, name, 1)
            await ready_job(client, namespace, job)
        await settled(running, client)  # the ready Jobs were seen and reconciled (and held)
        for name in names:
            seen = await wait_for(
                lambda name=name: get_jobset(client, namespace, name),  # type: ignore[misc]
                lambda obj: _counts(obj)["ready"] == 1,
                f"{name}'s held counters to be written",
                seconds=90,
            )
            assert _counts(seen)["active"] == 1
    for name in names:
        created = _received(kube, namespace, name, "create", "")
        written = _received(kube, namespace, name, "update", "status")
        assert created and written, f"{name}: create at {created}, status writes at {written}"
        # Past the 1 s period (and its fourfold successor) that would have let it out alone.
        held = (written[0] - created[0]).total_seconds()
        assert held >= 6.0, f"{name}: first status write {held:.2f}s after its create"


def _received(
    kube: Kube, namespace: str, name: str, verb: str, subresource: str
) -> list[datetime.datetime]:
    """When the API server received each ``verb`` request on the JobSet (its audit log)."""
    return [
        datetime.datetime.fromisoformat(entry["requestReceivedTimestamp"])
        for entry in audit.entries(kube.cluster.audit_log, namespace)
        if entry.get("verb") == verb
        and entry.get("objectRef", {}).get("resource") == "jobsets"
        and entry.get("objectRef", {}).get("namespace") == namespace
        and entry.get("objectRef", {}).get("name") == name
        and entry.get("objectRef", {}).get("subresource", "") == subresource
    ]
