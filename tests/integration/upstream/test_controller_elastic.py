"""Ports of upstream JobSet's controller scenarios for ElasticJobSet (its alpha gate), and this
project's own checks of it: the gate off in the controller only, and Pod-scope claims following
completions.

"Gate on" is the CRD generated with every alpha gate on (``alpha_crd_installed``) and the
controller started with ``--feature-gates=ElasticJobSet=true``. As upstream's integration suite,
there is no kube-controller-manager: no pod runs, Jobs are resized by the API server's own
validation (elastic Indexed Jobs) and deleted claims stay Terminating (nothing removes
pvc-protection's finalizer).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from controller.jobset import api, elastic
from controller.runtime.client import CLAIMS, ApiError, KubeClient
from tests.helpers import Kube, wait_for
from tests.integration.upstream.conftest import UPSTREAM_STATUS_WRITES
from tests.integration.upstream.scenarios import scenario
from tests.support.crd import alpha_crd_installed
from tests.support.jobsets import (
    Obj,
    RunningController,
    assert_no_writes_at_steady_state,
    condition,
    get_jobset,
    jobs_of,
    jobset,
    replicated_job,
    running_controller,
    settled,
    wait_condition,
    wait_jobs,
    with_mounts,
)
from tests.support.podscope import policy_in_effect
from tests.support.volumes_e2e import claim_template, events_of

ELASTIC_ON = "--feature-gates=ElasticJobSet=true"


def elastic_jobset(name: str, size: int = 2, replicas: int = 1, **spec: Any) -> Obj:
    """Upstream's JobSet of these scenarios: replicated job "workers", Indexed, parallelism and
    completions ``size``, success policy All."""
    workers = replicated_job("workers", replicas, completions=size)
    workers["template"]["spec"]["completionMode"] = "Indexed"
    spec.setdefault("successPolicy", {"operator": "All", "targetReplicatedJobs": []})
    return jobset(name, workers, **spec)


async def resize(client: KubeClient, namespace: str, name: str, size: int, **extra: Any) -> Obj:
    """Set the first replicated job's parallelism and completions to ``size`` (and ``extra``
    fields of the replicated job, e.g. replicas). A merge patch of the whole list, not an update:
    the controller writes the JobSet meanwhile (finalizer, status), and an update would race it
    (409)."""
    rjobs = (await get_jobset(client, namespace, name))["spec"]["replicatedJobs"]
    rjobs[0]["template"]["spec"]["parallelism"] = size
    rjobs[0]["template"]["spec"]["completions"] = size
    rjobs[0].update(extra)
    patch = {"spec": {"replicatedJobs": rjobs}}
    result: Obj = await client.patch(api.JOBSETS, name, patch, namespace)
    return result


def sizes(job: Obj) -> tuple[int, int]:
    return job["spec"]["parallelism"], job["spec"]["completions"]


async def wait_sizes(
    client: KubeClient, namespace: str, name: str, wanted: list[tuple[int, int]]
) -> list[Obj]:
    """The JobSet's Jobs once their (parallelism, completions), by name, are ``wanted``."""

    async def listed() -> list[Obj]:
        return sorted(await jobs_of(client, namespace, name), key=lambda j: j["metadata"]["name"])

    return await wait_for(
        listed, lambda jobs: [sizes(j) for j in jobs] == wanted, f"{name}'s Jobs sized {wanted}"
    )


@asynccontextmanager
async def elastic_controller(kube: Kube, namespace: str) -> AsyncIterator[RunningController]:
    """The alpha CRD and the controller with ElasticJobSet on, for the ``async with`` body."""
    async with (
        alpha_crd_installed(kube),
        running_controller(kube, namespace, ELASTIC_ON, UPSTREAM_STATUS_WRITES) as r,
    ):
        yield r


# ---------------------------------------------------------------------------- upstream's


@scenario("dynamic horizontal pod scaling propagates parallelism and completions to child jobs")
async def test_elastic_resize_propagates(kube: Kube, client: KubeClient, namespace: str) -> None:
    """With the gate, raising parallelism and completions from 2 to 4 resizes the running Job
    in place (same Job, same uid)."""
    async with elastic_controller(kube, namespace) as running:
        await client.create(api.JOBSETS, elastic_jobset("elastic-js"), namespace)
        [before] = await wait_sizes(client, namespace, "elastic-js", [(2, 2)])
        await resize(client, namespace, "elastic-js", 4)
        [after] = await wait_sizes(client, namespace, "elastic-js", [(4, 4)])
        assert after["metadata"]["uid"] == before["metadata"]["uid"]
        await assert_no_writes_at_steady_state(running, client)


@scenario("rejects updates to parallelism and completions")
async def test_elastic_resize_rejected_gate_off(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Without the gate (default CRD and controller), the update is refused; the Job stays."""
    await client.create(api.JOBSETS, elastic_jobset("elastic-js-disabled"), namespace)
    await wait_sizes(client, namespace, "elastic-js-disabled", [(2, 2)])
    with pytest.raises(ApiError) as refused:
        await resize(client, namespace, "elastic-js-disabled", 4)
    assert refused.value.status == 422, refused.value
    assert "spec.replicatedJobs is immutable" in refused.value.message
    await settled(controller, client)
    await wait_sizes(client, namespace, "elastic-js-disabled", [(2, 2)])


# ---------------------------------------------------------------------------- ours


async def test_elastic_new_jobs_get_the_new_sizes(
    kube: Kube, client: KubeClient, namespace: str
) -> None:
    """Resized, then replicas raised: the running Job is patched, the new one is created with
    the new sizes; then a resize down patches both."""
    async with elastic_controller(kube, namespace) as running:
        await client.create(api.JOBSETS, elastic_jobset("grow"), namespace)
        await wait_sizes(client, namespace, "grow", [(2, 2)])
        await resize(client, namespace, "grow", 3, replicas=2)
        await wait_sizes(client, namespace, "grow", [(3, 3), (3, 3)])
        await resize(client, namespace, "grow", 1)
        await wait_sizes(client, namespace, "grow", [(1, 1), (1, 1)])
        await assert_no_writes_at_steady_state(running, client)


async def test_elastic_gate_off_in_controller_is_reported(
    kube: Kube, client: KubeClient, namespace: str
) -> None:
    """The alpha CRD admits a resize but the controller runs without the gate: the Jobs keep
    their sizes, a condition and one Warning Event say why, and nothing loops."""
    async with (
        alpha_crd_installed(kube),
        running_controller(kube, namespace, UPSTREAM_STATUS_WRITES) as running,
    ):
        await client.create(api.JOBSETS, elastic_jobset("no-gate"), namespace)
        await wait_sizes(client, namespace, "no-gate", [(2, 2)])
        await resize(client, namespace, "no-gate", 4)
        js = await wait_condition(client, namespace, "no-gate", elastic.CONDITION)
        found = condition(js, elastic.CONDITION) or {}
        assert (found.get("status"), found.get("reason")) == ("True", elastic.REASON_GATE_OFF)
        assert "workers" in found["message"] and "ElasticJobSet" in found["message"]
        await assert_no_writes_at_steady_state(running, client)
        await wait_sizes(client, namespace, "no-gate", [(2, 2)])
        warned = await events_of(kube, namespace, "no-gate")
        assert [(e.type, e.count) for e in warned if e.reason == elastic.REASON_GATE_OFF] == [
            ("Warning", 1)
        ], warned

        # Back to the Jobs' sizes: the condition turns False.
        await resize(client, namespace, "no-gate", 2)
        js = await wait_condition(client, namespace, "no-gate", elastic.CONDITION, "False")
        assert (condition(js, elastic.CONDITION) or {}).get("reason") == elastic.REASON_IN_SYNC


# ---------------------------------------------------------------------------- Pod scope


def pod_scope_jobset(name: str, when_scaled: str) -> Obj:
    """1 Job of 2 pods (Indexed, parallelism == completions), a Pod-scope template ``ckpt``."""
    body = elastic_jobset(name)
    with_mounts(body["spec"]["replicatedJobs"][0], "ckpt")
    policy = {
        "scope": "Pod",
        "templates": [claim_template("ckpt")],
        "retentionPolicy": {"whenScaled": when_scaled},
    }
    body["spec"]["volumeClaimPolicies"] = [policy]
    return body


async def claims(client: KubeClient, namespace: str, name: str) -> dict[str, Obj]:
    listed = await client.list(CLAIMS, namespace, label_selector=f"{api.JOBSET_NAME}={name}")
    return {c["metadata"]["name"]: c for c in listed["items"]}


def live(found: dict[str, Obj]) -> list[str]:
    return sorted(n for n, c in found.items() if not c["metadata"].get("deletionTimestamp"))


async def wait_live_claims(
    client: KubeClient, namespace: str, name: str, wanted: list[str]
) -> dict[str, Obj]:
    return await wait_for(
        lambda: claims(client, namespace, name),
        lambda found: live(found) == wanted,
        f"{name}'s live claims to be {wanted}",
    )


def pod_claims(name: str, pods: range) -> list[str]:
    return [f"ckpt-{name}-workers-0-{p}" for p in pods]


@asynccontextmanager
async def pod_scope_ready(kube: Kube, namespace: str) -> AsyncIterator[None]:
    """The Pod-scope admission policy in effect (its probe pods need the ServiceAccount, which
    no kube-controller-manager makes here)."""
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
    made: Obj = await kube.raw("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", account)
    assert made.get("kind") == "ServiceAccount", made
    async with policy_in_effect(kube, namespace):
        yield


async def test_elastic_pod_scope_when_scaled_delete(
    kube: Kube, client: KubeClient, namespace: str
) -> None:
    """Pod scope, whenScaled Delete: resized 2 → 3, the claim of index 2 is made and the Job
    resized; resized 3 → 1, the Job is resized and the claims of indexes 1 and 2 deleted."""
    name = "ckpt-delete"
    async with pod_scope_ready(kube, namespace), elastic_controller(kube, namespace) as running:
        await client.create(api.JOBSETS, pod_scope_jobset(name, "Delete"), namespace)
        await wait_jobs(client, namespace, name, 1)
        await wait_live_claims(client, namespace, name, pod_claims(name, range(2)))

        await resize(client, namespace, name, 3)
        found = await wait_live_claims(client, namespace, name, pod_claims(name, range(3)))
        await wait_sizes(client, namespace, name, [(3, 3)])
        await assert_no_writes_at_steady_state(running, client)

        await resize(client, namespace, name, 1)
        await wait_sizes(client, namespace, name, [(1, 1)])
        after = await wait_live_claims(client, namespace, name, pod_claims(name, range(1)))
        # Deleted (Terminating: pvc-protection's finalizer stays, no kube-controller-manager).
        assert sorted(after) == pod_claims(name, range(3))
        kept = pod_claims(name, range(1))[0]
        assert after[kept]["metadata"]["uid"] == found[kept]["metadata"]["uid"]
        await assert_no_writes_at_steady_state(running, client)


async def test_elastic_pod_scope_when_scaled_retain(
    kube: Kube, client: KubeClient, namespace: str
) -> None:
    """Pod scope, whenScaled Retain (the default): resized 2 → 1, the claim of index 1 stays;
    resized back to 2, the Job mounts that same claim again (same uid)."""
    name = "ckpt-retain"
    async with pod_scope_ready(kube, namespace), elastic_controller(kube, namespace) as running:
        await client.create(api.JOBSETS, pod_scope_jobset(name, "Retain"), namespace)
        await wait_jobs(client, namespace, name, 1)
        before = await wait_live_claims(client, namespace, name, pod_claims(name, range(2)))

        await resize(client, namespace, name, 1)
        await wait_sizes(client, namespace, name, [(1, 1)])
        await assert_no_writes_at_steady_state(running, client)
        assert live(await claims(client, namespace, name)) == pod_claims(name, range(2))

        await resize(client, namespace, name, 2)
        await wait_sizes(client, namespace, name, [(2, 2)])
        after = await claims(client, namespace, name)
        assert live(after) == pod_claims(name, range(2))
        for claim in pod_claims(name, range(2)):
            assert after[claim]["metadata"]["uid"] == before[claim]["metadata"]["uid"]
        await assert_no_writes_at_steady_state(running, client)
