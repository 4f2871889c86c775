"""Ports of upstream JobSet's webhook scenarios for ElasticJobSet (its alpha feature gate):
changing parallelism and completions of a running JobSet's replicated job.

Upstream's webhook reads the gate; here admission is the CRD, so "gate on" means the CRD
generated with every alpha gate on (``alpha_crd_installed``) and "gate off" the default one. No
controller runs: admission alone is checked.
"""

from __future__ import annotations

from typing import Any

from controller.jobset import api
from controller.runtime.client import KubeClient
from tests.helpers import Kube
from tests.integration.upstream.scenarios import scenario
from tests.integration.upstream.test_webhook import (
    IMMUTABLE_WHILE_RUNNING,
    create,
    refused,
    rjob,
    update,
)
from tests.support.crd import alpha_crd_installed
from tests.support.jobsets import jobset

Obj = dict[str, Any]


def sized(name: str, mode: str = "Indexed") -> Obj:
    """Upstream's JobSet of these scenarios: one replicated job "rjob", parallelism and
    completions 2, the given completion mode."""
    return jobset(name, rjob("rjob", completionMode=mode, parallelism=2, completions=2))


def resize(js: Obj, parallelism: int, completions: int) -> Obj:
    spec = js["spec"]["replicatedJobs"][0]["template"]["spec"]
    spec["parallelism"], spec["completions"] = parallelism, completions
    return js


@scenario("validate updating parallelism and completions is ALLOWED when ElasticJobSet is enabled")
async def test_elastic_resize_allowed(kube: Kube, client: KubeClient, namespace: str) -> None:
    """With the gate, an Indexed replicated job goes from 2 to 4 (parallelism == completions)."""
    async with alpha_crd_installed(kube):
        stored = await create(client, namespace, sized("elastic-js-webhook-enabled"))
        updated = await update(client, namespace, resize(stored, 4, 4))
    spec = updated["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert (spec["parallelism"], spec["completions"]) == (4, 4)


@scenario("validate updating parallelism and completions FAILS when values are not equal")
async def test_elastic_resize_unequal(kube: Kube, client: KubeClient, namespace: str) -> None:
    """With the gate, parallelism 4 and completions 5 are refused: they must be equal."""
    async with alpha_crd_installed(kube):
        stored = await create(client, namespace, sized("elastic-js-webhook-unequal"))
        message = await refused(update(client, namespace, resize(stored, 4, 5)))
    assert "completions must equal parallelism" in message
    assert "rjob" in message


@scenario("validate updating parallelism and completions FAILS for NonIndexed jobs")
async def test_elastic_resize_non_indexed(kube: Kube, client: KubeClient, namespace: str) -> None:
    """With the gate, a NonIndexed replicated job's sizes stay immutable."""
    async with alpha_crd_installed(kube):
        stored = await create(
            client, namespace, sized("elastic-js-webhook-nonindexed", "NonIndexed")
        )
        message = await refused(update(client, namespace, resize(stored, 4, 4)))
    assert IMMUTABLE_WHILE_RUNNING in message


@scenario("validate updating parallelism and completions FAILS when scaling to < 1")
async def test_elastic_resize_to_zero(kube: Kube, client: KubeClient, namespace: str) -> None:
    """With the gate, resizing to 0 is refused: parallelism (and completions) must be >= 1."""
    async with alpha_crd_installed(kube):
        stored = await create(client, namespace, sized("elastic-js-webhook-zero"))
        message = await refused(update(client, namespace, resize(stored, 0, 0)))
    assert "parallelism must be >= 1" in message
    assert "completions must be >= 1" in message


@scenario("validate updating parallelism and completions FAILS when ElasticJobSet is disabled")
async def test_elastic_resize_gate_off(client: KubeClient, namespace: str) -> None:
    """Without the gate (the default CRD), parallelism and completions are immutable."""
    stored = await create(client, namespace, sized("elastic-js-webhook-disabled"))
    message = await refused(update(client, namespace, resize(stored, 4, 4)))
    assert IMMUTABLE_WHILE_RUNNING in message


async def test_elastic_resize_refused_once_finished(
    kube: Kube, client: KubeClient, namespace: str
) -> None:
    """With the gate, a Completed JobSet is not resized (upstream refuses it too)."""
    async with alpha_crd_installed(kube):
        stored = await create(client, namespace, sized("elastic-js-finished"))
        finished = {"status": {"terminalState": "Completed"}}
        stored = await client.patch(
            api.JOBSETS, "elastic-js-finished", finished, namespace, subresource="status"
        )
        message = await refused(update(client, namespace, resize(stored, 4, 4)))
    assert "cannot change once the JobSet is Completed or Failed" in message
