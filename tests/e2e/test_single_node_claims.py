"""Pods that share a ReadWriteOnce claim are kept on one node (issue 38), end to end: kube-scheduler
places them on KWOK nodes from the pod affinity the controller wrote (volumes/singlenode.py).

Each test adds three KWOK nodes of its own (a label and a taint the JobSet's pods select and
tolerate), so the session's other pods and nodes play no part, and removes them at the end. Pods
stay Running while the test looks (KWOK's run-duration). The same JobSet with a ReadWriteMany
claim, which any number of nodes may mount, is the control: the scheduler spreads its pods.
"""

from __future__ import annotations

import uuid
from typing import Any

from controller.jobset import api
from controller.jobset.volumes.model import SELECTED_NODE_ANNOTATION, SINGLE_NODE_LABEL
from controller.runtime.client import CLAIMS, KubeClient
from tests.e2e.test_exclusive_placement import (
    RUNNING,
    _delete_and_wait,
    _node,
    _pods,
    _unschedulable,
    kwok_nodes,
)
from tests.helpers import Kube, wait_for
from tests.support.jobsets import jobset, replicated_job, with_mounts, with_pod_annotations
from tests.support.podscope import policy_in_effect
from tests.support.volumes_e2e import ControllerProcesses, claim_template

Obj = dict[str, Any]
SECONDS = 120


def _on_nodes(suffix: str) -> tuple[list[Obj], Obj]:
    """Three nodes of this test's own, and the pod spec that puts pods on them only."""
    key = f"example.com/colocation-{suffix}"
    taint = {"key": key, "value": "true", "effect": "NoSchedule"}
    nodes = [_node(f"colo-{suffix}-{i}", {key: "yes"}, [taint]) for i in range(3)]
    pod_spec = {
        "tolerations": [{"key": key, "operator": "Exists", "effect": "NoSchedule"}],
        "nodeSelector": {key: "yes"},
    }
    return nodes, pod_spec


def _sharing(name: str, pod_spec: Obj, modes: list[str], storage_class: str) -> Obj:
    """An initializer (1 pod) and workers (2 Jobs x 2 pods) that all mount one JobSet-scope
    claim and run at once."""
    rjobs = []
    for rjob in (replicated_job("init"), replicated_job("workers", 2, completions=2)):
        with_mounts(with_pod_annotations(rjob, **RUNNING), "data")
        rjob["template"]["spec"]["template"]["spec"].update(pod_spec)
        rjobs.append(rjob)
    template = claim_template("data", "1Gi", storage_class)
    template["spec"]["accessModes"] = modes
    return jobset(name, *rjobs, volumeClaimPolicies=[{"templates": [template]}])


async def _placed(client: KubeClient, namespace: str, name: str, count: int) -> list[Obj]:
    pods: list[Obj] = await wait_for(
        lambda: _pods(client, namespace, name),
        lambda ps: len(ps) == count and all(p["spec"].get("nodeName") for p in ps),
        f"{count} pods of {name} scheduled",
        seconds=SECONDS,
    )
    return pods


async def test_pods_sharing_a_read_write_once_claim_run_on_one_node_and_read_write_many_spread(
    full_kube: Kube, full_namespace: str, client: KubeClient, controller: ControllerProcesses
) -> None:
    ns, suffix = full_namespace, uuid.uuid4().hex[:6]
    nodes, pod_spec = _on_nodes(suffix)
    # "standard": the test provisioner's Immediate class, whose volumes have no node affinity:
    # nothing but the controller's affinity keeps these pods together.
    once = _sharing("once", pod_spec, ["ReadWriteOnce"], "standard")
    many = _sharing("many", pod_spec, ["ReadWriteMany"], "standard")
    async with kwok_nodes(client, nodes):
        await client.create(api.JOBSETS, once, ns)
        await client.create(api.JOBSETS, many, ns)
        together = await _placed(client, ns, "once", 5)
        spread = await _placed(client, ns, "many", 5)
        assert len({p["spec"]["nodeName"] for p in together}) == 1, [
            (p["metadata"]["name"], p["spec"]["nodeName"]) for p in together
        ]
        assert {p["metadata"]["labels"][SINGLE_NODE_LABEL] for p in together} == {"data-once"}
        assert len({p["spec"]["nodeName"] for p in spread}) > 1
        assert not any(SINGLE_NODE_LABEL in p["metadata"]["labels"] for p in spread)
        for name in ("once", "many"):
            await _delete_and_wait(client, ns, name)


async def test_jobs_created_after_a_wait_for_first_consumer_claim_was_placed_prefer_its_node(
    full_kube: Kube, full_namespace: str, client: KubeClient, controller: ControllerProcesses
) -> None:
    """The workers start once the initializer is Ready (dependsOn), after the scheduler placed
    it and chose the claim's node: their pods prefer that node, and run there with it."""
    ns, suffix = full_namespace, uuid.uuid4().hex[:6]
    nodes, pod_spec = _on_nodes(suffix)
    body = _sharing("later", pod_spec, ["ReadWriteOnce"], "wffc")
    body["spec"]["replicatedJobs"][1]["dependsOn"] = [{"name": "init", "status": "Ready"}]
    async with kwok_nodes(client, nodes):
        await client.create(api.JOBSETS, body, ns)
        pods = await _placed(client, ns, "later", 5)
        claim = await client.get(CLAIMS, "data-later", ns)
        node = claim["metadata"]["annotations"][SELECTED_NODE_ANNOTATION]
        assert {p["spec"]["nodeName"] for p in pods} == {node}
        workers = [p for p in pods if p["metadata"]["labels"][api.REPLICATED_JOB_NAME] == "workers"]
        assert len(workers) == 4
        for pod in workers:
            [preferred] = pod["spec"]["affinity"]["nodeAffinity"][
                "preferredDuringSchedulingIgnoredDuringExecution"
            ]
            assert preferred["preference"]["matchExpressions"][0]["values"] == [node]
        await _delete_and_wait(client, ns, "later")


async def test_read_write_once_pod_claims_one_per_pod_run_and_a_shared_one_is_named(
    full_kube: Kube, full_namespace: str, client: KubeClient, controller: ControllerProcesses
) -> None:
    """ReadWriteOncePod as the access mode says: Pod-scope claims (one per pod) let every pod
    run, with no risk reported; one JobSet-scope claim mounted by two pods at once is named by
    MultiAttachRisk (ReadWriteOncePodShared, a Warning Event) and the scheduler runs one pod of
    the two, the other waiting for the claim."""
    ns, suffix = full_namespace, uuid.uuid4().hex[:6]
    nodes, pod_spec = _on_nodes(suffix)
    ranks = replicated_job("ranks", 1, completions=2)
    ranks["template"]["spec"]["completionMode"] = "Indexed"
    with_mounts(with_pod_annotations(ranks, **RUNNING), "own")
    ranks["template"]["spec"]["template"]["spec"].update(pod_spec)
    own = claim_template("own", "1Gi", "standard")
    own["spec"]["accessModes"] = ["ReadWriteOncePod"]
    per_pod = jobset("per-pod", ranks, volumeClaimPolicies=[{"scope": "Pod", "templates": [own]}])
    pair = replicated_job("pair", 1, completions=2)
    with_mounts(with_pod_annotations(pair, **RUNNING), "one")
    pair["template"]["spec"]["template"]["spec"].update(pod_spec)
    one = claim_template("one", "1Gi", "standard")
    one["spec"]["accessModes"] = ["ReadWriteOncePod"]
    shared = jobset("shared-once", pair, volumeClaimPolicies=[{"templates": [one]}])
    async with kwok_nodes(client, nodes), policy_in_effect(full_kube, ns):
        await client.create(api.JOBSETS, per_pod, ns)
        await client.create(api.JOBSETS, shared, ns)
        running = await wait_for(
            lambda: _pods(client, ns, "per-pod"),
            lambda ps: len(ps) == 2 and all(p["status"].get("phase") == "Running" for p in ps),
            "both pods of per-pod running, each with its own claim",
            seconds=SECONDS,
        )
        claims = {
            v["persistentVolumeClaim"]["claimName"]
            for p in running
            for v in p["spec"]["volumes"]
            if v.get("name") == "own"
        }
        assert claims == {"own-per-pod-ranks-0-0", "own-per-pod-ranks-0-1"}
        quiet = await client.get(api.JOBSETS, "per-pod", ns)
        assert not any(
            c["type"] == "MultiAttachRisk" for c in quiet["status"].get("conditions", [])
        )
        named = await wait_for(
            lambda: client.get(api.JOBSETS, "shared-once", ns),
            lambda js: any(
                c["type"] == "MultiAttachRisk" and c["status"] == "True"
                for c in js.get("status", {}).get("conditions", [])
            ),
            "MultiAttachRisk on shared-once",
            seconds=SECONDS,
        )
        risk = next(c for c in named["status"]["conditions"] if c["type"] == "MultiAttachRisk")
        assert risk["reason"] == "ReadWriteOncePodShared" and "one-shared-once" in risk["message"]
        pods = await wait_for(
            lambda: _pods(client, ns, "shared-once"),
            lambda ps: (
                len(ps) == 2
                and sum(1 for p in ps if p["status"].get("phase") == "Running") == 1
                and any(_unschedulable(p) for p in ps)
            ),
            "one pod of shared-once running and the other waiting for the claim",
            seconds=SECONDS,
        )
        assert len(pods) == 2
        for name in ("per-pod", "shared-once"):
            await _delete_and_wait(client, ns, name)
