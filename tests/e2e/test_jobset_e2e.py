"""JobSets end to end: the controller as its own process, pods really run on KWOK nodes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from controller.jobset import api
from controller.runtime.client import PODS, KubeClient
from tests.helpers import Kube, current, wait_for
from tests.support.jobsets import (
    condition,
    get_jobset,
    jobset,
    replicated_job,
    wait_condition,
    wait_jobs,
    with_pod_annotations,
)
from tests.support.replicas import Replica, start_replica


@pytest.fixture
def controller_process(
    full_kube: Kube, full_namespace: str, client: KubeClient, tmp_path: Path
) -> Iterator[Replica]:
    replica = start_replica(
        full_kube.cluster.kubeconfig,
        full_namespace,
        "jobset-controller",
        tmp_path,
        lease_name=f"jobset-{uuid.uuid4().hex[:6]}",
        module="controller",
    )
    yield replica
    replica.process.kill()


async def test_jobset_runs_to_completion(
    client: KubeClient, full_namespace: str, controller_process: Replica
) -> None:
    ns = full_namespace
    body = jobset("e2e", replicated_job("driver", 1), replicated_job("workers", 2, completions=2))
    await client.create(api.JOBSETS, body, ns)
    done = await wait_condition(client, ns, "e2e", api.COMPLETED, seconds=120)
    assert done["status"]["terminalState"] == "Completed"
    pods = (await client.list(PODS, ns, label_selector=f"{api.JOBSET_NAME}=e2e"))["items"]
    assert len(pods) == 5
    assert {p["status"]["phase"] for p in pods} == {"Succeeded"}
    for pod in pods:
        assert pod["spec"]["nodeName"].startswith("kwok-node-")
        assert pod["spec"]["subdomain"] == "e2e"
        # The Job controller gives Indexed pods the hostname <job>-<index>.
        index = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        job = pod["metadata"]["labels"]["job-name"]
        assert pod["spec"]["hostname"] == f"{job}-{index}"
    metrics = controller_process

    def samples() -> tuple[float | None, ...]:
        # Upstream's labels: jobset_name and namespace, on every per-JobSet series.
        return (
            metrics.sample("jobset_completed_total", jobset_name="e2e", namespace=ns),
            metrics.sample("jobset_terminal_state", jobset_name="e2e", namespace=ns,
                           state="Completed"),
            metrics.sample("jobset_restarts", jobset_name="e2e", namespace=ns),
        )  # fmt: skip

    # Polled: the counter moves once the controller has the answer to its status write, the
    # gauges follow its cache; the test's read of the status may come first.
    await wait_for(
        current(samples), lambda found: found == (1.0, 1.0, 0.0), "the completion in /metrics"
    )


@pytest.mark.usefixtures("controller_process")
async def test_failed_pod_restarts_the_jobset_with_the_next_attempt(
    client: KubeClient, full_namespace: str
) -> None:
    ns = full_namespace
    workers = with_pod_annotations(
        replicated_job("workers", 2), **{"localcluster.test/run-duration": "6s"}
    )
    await client.create(api.JOBSETS, jobset("flaky", workers, failurePolicy={"maxRestarts": 2}), ns)
    first = await wait_jobs(client, ns, "flaky", 2, attempt=0, seconds=60)

    async def running_pods() -> list[dict[str, Any]]:
        listed = await client.list(
            PODS, ns, label_selector=f"{api.JOBSET_NAME}=flaky,{api.RESTART_ATTEMPT}=0"
        )
        return [p for p in listed["items"] if (p.get("status") or {}).get("phase") == "Running"]

    pods = await wait_for(running_pods, lambda found: len(found) == 2, "two running pods")
    # Make one pod exit with code 42 (KWOK's fail stage picks up the annotation).
    await client.patch(
        PODS,
        pods[0]["metadata"]["name"],
        {"metadata": {"annotations": {"localcluster.test/exit-code": "42"}}},
        ns,
    )
    second = await wait_jobs(client, ns, "flaky", 2, attempt=1, seconds=90)
    assert {j["metadata"]["uid"] for j in second}.isdisjoint({j["metadata"]["uid"] for j in first})
    for job in second:
        labels = job["spec"]["template"]["metadata"]["labels"]
        assert labels[api.RESTART_ATTEMPT] == "1"
    done = await wait_condition(client, ns, "flaky", api.COMPLETED, seconds=120)
    assert done["status"]["restarts"] == 1


@pytest.mark.usefixtures("controller_process")
async def test_exhausting_max_restarts_fails_the_jobset(
    client: KubeClient, full_namespace: str
) -> None:
    ns = full_namespace
    always_fails = with_pod_annotations(
        replicated_job("a", 1), **{"localcluster.test/exit-code": "3"}
    )
    await client.create(
        api.JOBSETS, jobset("doomed", always_fails, failurePolicy={"maxRestarts": 1}), ns
    )
    failed = await wait_condition(client, ns, "doomed", api.FAILED, seconds=120)
    assert condition(failed, api.FAILED)["reason"] == "ReachedMaxRestarts"  # type: ignore[index]
    assert failed["status"]["restarts"] == 1
    assert failed["status"]["terminalState"] == "Failed"
    final = await get_jobset(client, ns, "doomed")
    assert final["status"]["restarts"] == 1
