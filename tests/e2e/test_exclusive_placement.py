"""Exclusive placement end to end: kube-scheduler places the pods of a JobSet's Jobs on KWOK nodes
with topology labels, from the constraints the controller wrote into each Job's pod template.

Each test adds its own KWOK nodes (KWOK manages every node labelled localcluster.test/kwok-node)
with a topology label key of its own, so the session's other nodes and pods are in no domain of
it, and removes them at the end.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from controller.jobset import api, placement
from controller.jobset.placement import EXCLUSIVE_TOPOLOGY, NODE_SELECTOR_STRATEGY
from controller.runtime.client import PODS, ApiError, KubeClient, Resource
from localcluster.cluster import NODE_LABEL
from tests.helpers import Kube, wait_for
from tests.support.jobsets import jobset, replicated_job, with_pod_annotations
from tests.support.volumes_e2e import ControllerProcesses

NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
Obj = dict[str, Any]
# Pods stay Running while the test looks at where they are (KWOK ends them after this).
RUNNING = {"localcluster.test/run-duration": "600s"}


def _node(name: str, labels: dict[str, str], taints: list[Obj]) -> Obj:
    capacity = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {NODE_LABEL: "true", "kubernetes.io/hostname": name, **labels},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"taints": taints},
        "status": {"capacity": capacity, "allocatable": capacity},
    }


def _ready(node: Obj) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


@asynccontextmanager
async def kwok_nodes(client: KubeClient, nodes: list[Obj]) -> AsyncIterator[None]:
    """``nodes`` created and Ready (KWOK's node stage); deleted at the end."""
    try:
        for node in nodes:
            await client.create(NODES, node, None)
        names = {node["metadata"]["name"] for node in nodes}

        async def ours() -> list[Obj]:
            listed: list[Obj] = (await client.list(NODES, None))["items"]
            return [n for n in listed if n["metadata"]["name"] in names]

        await wait_for(
            ours, lambda found: len(found) == len(names) and all(map(_ready, found)), "nodes Ready"
        )
        yield
    finally:
        for node in nodes:
            try:
                await client.delete(NODES, node["metadata"]["name"], None)
            except ApiError as err:
                if not err.not_found:  # a node that was never created is fine
                    raise


async def _pods(client: KubeClient, namespace: str, name: str) -> list[Obj]:
    listed = await client.list(PODS, namespace, label_selector=f"{api.JOBSET_NAME}={name}")
    pods: list[Obj] = listed["items"]
    return pods


async def _delete_and_wait(client: KubeClient, namespace: str, name: str) -> None:
    """The JobSet deleted and its pods gone, before their nodes are removed."""
    await client.delete(api.JOBSETS, name, namespace)
    await wait_for(lambda: _pods(client, namespace, name), lambda ps: not ps, f"{name}'s pods gone")


def _unschedulable(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(
        c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions
    )


def _by_job(pods: list[Obj], where: Callable[[Obj], str]) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for pod in pods:
        found.setdefault(pod["metadata"]["labels"]["job-name"], set()).add(where(pod))
    return found


async def test_each_job_gets_a_domain_of_its_own(
    full_kube: Kube, full_namespace: str, client: KubeClient, controller: ControllerProcesses
) -> None:
    """3 racks x 2 nodes; 4 Jobs x 2 pods: three Jobs take one rack each, both pods of a Job in
    its rack, and the fourth Job cannot be placed (every rack has another Job's pods)."""
    ns, suffix = full_namespace, uuid.uuid4().hex[:6]
    rack = f"example.com/rack-{suffix}"
    taint = {"key": f"example.com/exclusive-{suffix}", "value": "true", "effect": "NoSchedule"}
    nodes = [
        _node(f"excl-{suffix}-r{r}-{i}", {rack: f"r{r}"}, [taint])
        for r in range(3)
        for i in range(2)
    ]
    rack_of = {n["metadata"]["name"]: n["metadata"]["labels"][rack] for n in nodes}
    # Only this test's nodes: the rack label must exist, and their taint is tolerated.
    pod_spec = {
        "tolerations": [{"key": taint["key"], "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": rack, "operator": "Exists"}]}
                    ]
                }
            }
        },
    }
    leader = with_pod_annotations(replicated_job("leader", 1, completions=2), **RUNNING)
    workers = with_pod_annotations(replicated_job("workers", 3, completions=2), **RUNNING)
    for rjob in (leader, workers):
        rjob["template"]["spec"]["template"]["spec"].update(pod_spec)
    body = jobset("racks", leader, workers)
    body["metadata"]["annotations"] = {EXCLUSIVE_TOPOLOGY: rack}

    async with kwok_nodes(client, nodes):
        await client.create(api.JOBSETS, body, ns)

        def placed(pods: list[Obj]) -> bool:
            return len(pods) == 8 and sum(1 for p in pods if p["spec"].get("nodeName")) == 6

        pods = await wait_for(
            lambda: _pods(client, ns, "racks"), placed, "6 of 8 pods scheduled", seconds=120
        )
        scheduled = [p for p in pods if p["spec"].get("nodeName")]
        racks = _by_job(scheduled, lambda p: rack_of[p["spec"]["nodeName"]])
        assert len(racks) == 3, racks
        assert all(len(r) == 1 for r in racks.values()), racks  # a Job in one rack
        assert len(set().union(*racks.values())) == 3, racks  # no two Jobs share a rack
        # The fourth Job: both its pods refused by the scheduler, none placed.
        waiting = await wait_for(
            lambda: _pods(client, ns, "racks"),
            lambda ps: sum(1 for p in ps if _unschedulable(p)) == 2,
            "the fourth Job's two pods Unschedulable",
        )
        stuck = [p for p in waiting if not p["spec"].get("nodeName")]
        assert len(stuck) == 2 and all(_unschedulable(p) for p in stuck), stuck
        assert len({p["metadata"]["labels"]["job-name"] for p in stuck}) == 1
        assert not {p["metadata"]["labels"]["job-name"] for p in stuck} & set(racks)
        await _delete_and_wait(client, ns, "racks")


async def test_node_selector_strategy_uses_nodes_labelled_per_job(
    full_kube: Kube, full_namespace: str, client: KubeClient, controller: ControllerProcesses
) -> None:
    """As upstream's hack/label_nodes script prepares them: each pool's nodes labelled with one
    Job's <namespace>_<job name> and tainted no-schedule; each Job's pods land on its pool."""
    ns, suffix = full_namespace, uuid.uuid4().hex[:6]
    pool = f"example.com/pool-{suffix}"
    taint = {"key": placement.NO_SCHEDULE_TAINT, "value": "true", "effect": "NoSchedule"}
    jobs = [f"pools-workers-{j}" for j in range(2)]
    nodes = [
        _node(
            f"excl-{suffix}-p{j}-{i}",
            {pool: f"p{j}", placement.NAMESPACED_JOB: placement.namespaced_job(ns, job)},
            [taint],
        )
        for j, job in enumerate(jobs)
        for i in range(2)
    ]
    pool_of = {n["metadata"]["name"]: n["metadata"]["labels"][pool] for n in nodes}
    workers = with_pod_annotations(replicated_job("workers", 2, completions=2), **RUNNING)
    body = jobset("pools", workers)
    body["metadata"]["annotations"] = {EXCLUSIVE_TOPOLOGY: pool, NODE_SELECTOR_STRATEGY: "true"}

    async with kwok_nodes(client, nodes):
        await client.create(api.JOBSETS, body, ns)
        pods = await wait_for(
            lambda: _pods(client, ns, "pools"),
            lambda ps: len(ps) == 4 and all(p["spec"].get("nodeName") for p in ps),
            "4 pods scheduled",
            seconds=120,
        )
        assert _by_job(pods, lambda p: pool_of[p["spec"]["nodeName"]]) == {
            jobs[0]: {"p0"},
            jobs[1]: {"p1"},
        }
        await _delete_and_wait(client, ns, "pools")
