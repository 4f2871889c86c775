"""Per-rank checkpoints of Kubeflow Trainer's TrainJobs, declared only through Trainer's own
objects, kept as one group snapshot and resumed rank by rank, with real bytes (issue 48).

The runtime is the repository's ``manifests/examples/trainer/runtime-checkpoints.yaml``: its
``spec.template.metadata`` carries the volume policy annotations (``<template>.volumes.jobset.
sigs.k8s.io/<field>``: Pod scope on the trainer nodes, whenCompleted Snapshot with a group
snapshot class, restore from the newest snapshot), the claim template is upstream's
``volumeClaimPolicies``; Trainer (v2.3.0, built from the Go module proxy) turns each TrainJob into
a JobSet and copies the annotations, a TrainJob's ``runtimePatches`` over the runtime's. The
storage is the real node's CSI stack (our driver, the external-provisioner, -snapshotter and the
snapshot-controller), the Pod-scope admission policy gives each trainer node its claim.

The proofs rest on the bytes on this host: each member snapshot's copy in the driver's state
directory (what a rank saved, what a resumed rank found). And on the objects: the second run's
claims name the first run's members as their data source.
"""

from __future__ import annotations

import secrets
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.api import volumekeys
from controller.jobset import api
from controller.jobset.volumes.podscope import pod_claim_name
from controller.runtime.client import (
    CLAIMS,
    EVENTS,
    VOLUME_GROUP_SNAPSHOTS,
    VOLUME_SNAPSHOTS,
    KubeClient,
)
from localcluster import csi, kueue, trainer
from localcluster.cluster import LocalCluster
from tests.helpers import Kube, create_namespace, wait_for
from tests.node.queued.test_trainer import TRAINJOBS, create_trainjob, wait_trainjob
from tests.node.queued.test_trainer import trainjob as trainjob_on_llm
from tests.node.test_data import directory_of
from tests.node.test_snapshot_checkpoints import copy_on_host, restored_from
from tests.support.jobsets import condition, get_jobset
from tests.support.kueue import CLUSTER_QUEUES, LOCAL_QUEUES, PRIORITY_CLASSES
from tests.support.podscope import policy_in_effect
from tests.support.volumes_e2e import controller_processes, pods_of, wait_exists

Obj = dict[str, Any]
pytestmark = [pytest.mark.own_node, pytest.mark.timeout(900)]
SECONDS = 240
EXAMPLES = Path(__file__).resolve().parents[3] / "manifests/examples/trainer"
KEY = f"checkpoint{volumekeys.MARK}"
RANKS = (0, 1)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def example(name: str) -> Obj:
    loaded: Obj = yaml.safe_load((EXAMPLES / name).read_text())
    return loaded


def runtime(name: str) -> Obj:
    """The repository's checkpointing runtime under a name of this test's own, its claims on the
    real node's CSI storage (the default class is the test provisioner's, which cannot
    snapshot), its group snapshot class the local profile's."""
    body = example("runtime-checkpoints.yaml")
    body["metadata"]["name"] = name
    [policy] = body["spec"]["template"]["spec"]["volumeClaimPolicies"]
    policy["templates"][0]["spec"]["storageClassName"] = csi.WFFC_CLASS
    annotations = body["spec"]["template"]["metadata"]["annotations"]
    assert annotations[f"{KEY}snapshotPolicy.volumeGroupSnapshotClassName"] == (
        csi.GROUP_SNAPSHOT_CLASS
    )
    return body


async def with_runtime(kube: Kube) -> tuple[KubeClient, str, str]:
    """A client, a namespace of the test's own, and the checkpointing runtime under a name of
    its own (``runtime``), applied."""
    client = KubeClient(kube.api)
    namespace = await create_namespace(kube, wait_for_service_account=True)
    name = f"checkpoints-{secrets.token_hex(3)}"
    kube.cluster.kubectl(
        "apply", "--server-side", "-f", "-", input_text=yaml.safe_dump(runtime(name))
    )
    return client, namespace, name


def trainjob(
    name: str,
    runtime_name: str,
    annotations: dict[str, str] | None = None,
    command: str | None = None,
) -> Obj:
    """A TrainJob of two trainer nodes on the runtime; ``annotations``: its runtimePatches';
    ``command``: the trainer nodes' script instead of the runtime's."""
    body = example("trainjob-checkpoints.yaml")
    body["metadata"]["name"] = name
    body["spec"]["runtimeRef"]["name"] = runtime_name
    if command is not None:
        body["spec"]["trainer"]["command"] = ["sh", "-c", command]
    if annotations:
        body["spec"]["runtimePatches"] = [
            {
                "manager": "example.com/test",
                "trainingRuntimeSpec": {"template": {"metadata": {"annotations": annotations}}},
            }
        ]
    return body


async def ready_group_of(client: KubeClient, namespace: str, jobset: str) -> Obj:
    """The JobSet's one VolumeGroupSnapshot, once readyToUse."""
    listed = await wait_for(
        lambda: client.list(
            VOLUME_GROUP_SNAPSHOTS, namespace, label_selector=f"{api.JOBSET_NAME}={jobset}"
        ),
        lambda found: (
            len(found["items"]) == 1
            and (found["items"][0].get("status") or {}).get("readyToUse") is True
        ),
        f"one VolumeGroupSnapshot of JobSet {jobset}'s claims, readyToUse",
        seconds=SECONDS,
    )
    group: Obj = listed["items"][0]
    return group


async def members_of(client: KubeClient, namespace: str, group: Obj) -> dict[str, Obj]:
    """The group's member snapshots (the snapshot controller's), by the claim each was taken of,
    once each is ready."""
    uid = group["metadata"]["uid"]

    def members(found: Obj) -> dict[str, Obj]:
        return {
            m["spec"]["source"]["persistentVolumeClaimName"]: m
            for m in found["items"]
            if any(o.get("uid") == uid for o in m["metadata"].get("ownerReferences") or [])
            and (m.get("status") or {}).get("readyToUse") is True
        }

    listed = await wait_for(
        lambda: client.list(VOLUME_SNAPSHOTS, namespace),
        lambda found: len(members(found)) == len(RANKS),
        f"the ready members of {group['metadata']['name']}",
        seconds=SECONDS,
    )
    return members(listed)


async def on_host(cluster: LocalCluster, client: KubeClient, member: Obj) -> dict[str, str]:
    """The files of a member snapshot's copy on this host."""
    copy = await copy_on_host(cluster, client, member)
    return {p.name: p.read_text().strip() for p in sorted(copy.iterdir()) if p.is_file()}


async def test_every_rank_resumes_from_its_own_rank_of_the_previous_trainjobs_group_snapshot(
    queued_kube: Kube, tmp_path: Path
) -> None:
    kube, cluster = queued_kube, queued_kube.cluster
    client, ns, runtime_name = await with_runtime(queued_kube)
    first, second = "pretrain", "resume"
    async with (
        controller_processes(kube, ns, client, tmp_path) as processes,
        policy_in_effect(kube, ns),
    ):
        await create_trainjob(client, ns, trainjob(first, runtime_name))
        js = await wait_for(
            lambda: get_jobset(client, ns, first), lambda _: True, "Trainer's JobSet", SECONDS
        )
        # Declared only through Trainer's objects: the runtime's annotations are the JobSet's.
        assert js["metadata"]["annotations"][f"{KEY}scope"] == "Pod"
        # The spec has only what Trainer carries, and the CRD's defaults (JobSet scope).
        assert js["spec"]["volumeClaimPolicies"][0]["scope"] == "JobSet"
        await wait_trainjob(client, ns, first, "Complete")
        group = await ready_group_of(client, ns, first)
        members = await members_of(client, ns, group)
        claims = {r: pod_claim_name("checkpoint", first, "node", 0, r) for r in RANKS}
        assert sorted(members) == sorted(claims.values())
        saved = {r: await on_host(cluster, client, members[claims[r]]) for r in RANKS}
        for r in RANKS:
            assert saved[r]["rank"] == str(r), saved
            assert saved[r]["step"].startswith(f"step 100 of rank {r} "), saved
            assert "resumed" not in saved[r], saved  # the first run started empty
        assert saved[0]["step"] != saved[1]["step"]
        # Retention: each rank's claim deleted once the group held it.
        await wait_for(
            lambda: client.list(CLAIMS, ns),
            lambda found: (
                not {c["metadata"]["name"] for c in found["items"]} & set(claims.values())
            ),
            "the first run's claims deleted",
            seconds=SECONDS,
        )
        _progress(f"TrainJob {first}: both ranks saved, kept as group {group['metadata']['name']}")

        # The second TrainJob names the first in its runtimePatches only.
        await create_trainjob(
            client, ns, trainjob(second, runtime_name, {f"{KEY}restorePolicy.fromJobSet": first})
        )
        again = {r: pod_claim_name("checkpoint", second, "node", 0, r) for r in RANKS}
        for r in RANKS:
            claim = await wait_exists(client, CLAIMS, again[r], ns, seconds=SECONDS)
            assert restored_from(claim) == members[claims[r]]["metadata"]["name"], claim["spec"]
        await wait_trainjob(client, ns, second, "Complete")
        resumed_group = await ready_group_of(client, ns, second)
        resumed = await members_of(client, ns, resumed_group)
        for r in RANKS:
            found = await on_host(cluster, client, resumed[again[r]])
            # This rank found exactly what the same rank saved in the first run.
            assert found["rank"] == str(r), found
            assert found["step"] == saved[r]["step"], found
            assert found["resumed"] == f"resumed {saved[r]['step']}", found
        processes.assert_clean()
    _progress(f"TrainJob {second}: each rank resumed from its own rank's snapshot")


async def test_wrong_storage_metadata_starts_no_pod_and_names_the_key(
    queued_kube: Kube, tmp_path: Path
) -> None:
    """A value the field refuses: the admission policy refuses Trainer's JobSet, in the rule's
    words, which Trainer reports on the TrainJob. A combination only the controller can judge
    (a restore from a VolumeSnapshot the policy does not name): the JobSet waits, SpecInvalid,
    naming the keys. No pod starts for either."""
    kube = queued_kube
    client, ns, runtime_name = await with_runtime(queued_kube)
    async with controller_processes(kube, ns, client, tmp_path) as processes:
        bad_value = {f"{KEY}restorePolicy.whenMissing": "Maybe"}
        await create_trainjob(client, ns, trainjob("bad-value", runtime_name, bad_value))
        words = (
            "metadata.annotations: invalid volume policy annotation: "
            f"{KEY}restorePolicy.whenMissing: must be Wait or CreateEmpty, got 'Maybe'"
        )
        await wait_for(
            lambda: client.list(
                EVENTS,
                ns,
                field_selector="involvedObject.kind=TrainJob,involvedObject.name=bad-value",
            ),
            lambda found: any(
                e.get("reason") == "TrainJobResourcesCreationFailed"
                and words in (e.get("message") or e.get("note") or "")
                for e in found["items"]
            ),
            "Trainer's Event with the rule's words",
            seconds=SECONDS,
        )
        assert (await client.list(api.JOBSETS, ns))["items"] == []

        combination = {f"{KEY}restorePolicy.source": "VolumeSnapshot"}
        await create_trainjob(client, ns, trainjob("bad-combination", runtime_name, combination))
        js = await wait_for(
            lambda: get_jobset(client, ns, "bad-combination"),
            lambda found: (condition(found, api.SPEC_INVALID) or {}).get("status") == "True",
            "the JobSet SpecInvalid",
            seconds=SECONDS,
        )
        managers = {(f["manager"], f["operation"]) for f in js["metadata"]["managedFields"]}
        assert (trainer.FIELD_MANAGER, "Apply") in managers, managers
        invalid = condition(js, api.SPEC_INVALID) or {}
        assert invalid["message"] == (
            "spec: restorePolicy.volumeSnapshotName is required when restorePolicy.source is "
            "VolumeSnapshot, and must be left out otherwise (as completed by the annotations "
            f"{KEY}*)"
        ), invalid
        assert await pods_of(client, ns, "bad-combination") == []
        assert await pods_of(client, ns, "bad-value") == []
        tj = await client.get(TRAINJOBS, "bad-combination", ns)
        assert not any(
            c.get("status") == "True" for c in (tj.get("status") or {}).get("conditions") or []
        ), tj.get("status")
        processes.assert_clean()


def held(gate: str) -> str:
    """The runtime's checkpointing script, then a wait until the file ``gate`` is in the rank's
    claim (the test puts it there, on this host). A shell as PID 1 ignores SIGTERM unless it
    traps it: a preempted node would take the whole grace period to go."""
    return (
        "trap 'exit 143' TERM; set -e; "
        'if [ -f /checkpoint/step ]; then echo "resumed $(cat /checkpoint/step)" '
        '> /checkpoint/resumed; else echo "step 100 of rank $PET_NODE_RANK '
        "$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \\n')\" > /checkpoint/step; fi; "
        'echo "$PET_NODE_RANK" > /checkpoint/rank && sync; '
        f"while [ ! -f /checkpoint/{gate} ]; do sleep 1; done"
    )


async def saved_step(cluster: LocalCluster, client: KubeClient, namespace: str, name: str) -> str:
    """What the rank of claim ``name`` saved, read in the claim's directory on this host once
    the rank wrote it."""
    await wait_exists(client, CLAIMS, name, namespace, seconds=SECONDS)
    directory: Path = await wait_for(
        lambda: directory_of(cluster, client, namespace, name),
        lambda found: (found / "rank").exists(),
        f"the rank of claim {name} to save its checkpoint",
        seconds=SECONDS,
    )
    return (directory / "step").read_text().strip()


async def restored(client: KubeClient, namespace: str, name: str, source: str) -> Obj:
    """The claim ``name`` once it exists made from the snapshot ``source``."""
    found: Obj = await wait_for(
        lambda: client.get(CLAIMS, name, namespace),
        lambda claim: restored_from(claim) == source,
        f"claim {name} made again from {source}",
        seconds=SECONDS,
    )
    return found


async def open_gates(
    cluster: LocalCluster, client: KubeClient, namespace: str, claims: dict[int, str], gate: str
) -> None:
    for name in claims.values():
        claim = await wait_exists(client, CLAIMS, name, namespace, seconds=SECONDS)
        assert claim["status"].get("phase") == "Bound", claim.get("status")
        directory = await directory_of(cluster, client, namespace, name)
        (directory / gate).write_text("go\n")


async def test_a_trainjob_preempted_under_kueue_keeps_its_ranks_as_snapshots_and_resumes(
    queued_kube: Kube, tmp_path: Path
) -> None:
    """whenSuspended: Snapshot, declared by the TrainJob's runtimePatches: Kueue preempts the
    TrainJob while its ranks hold checkpoints; the controller keeps both ranks as one group
    snapshot and frees the claims; admitted again, each rank's claim comes back from its member
    and the rank finds what it saved."""
    kube, cluster = queued_kube, queued_kube.cluster
    client, ns, runtime_name = await with_runtime(queued_kube)
    cq, low, high = "cq-checkpoints", "train", "urgent"
    # Two nodes of 50m each; the urgent one (the LLM runtime) asks 200m at once: not both.
    body = kueue.cluster_queue(cq, gpus=0, cpu=1, memory_gi=4)
    body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "250m"
    await client.create(CLUSTER_QUEUES, body)
    await client.create(LOCAL_QUEUES, kueue.local_queue("lq", ns, cq), ns)
    for priority, value in (("ckpt-low", 100), ("ckpt-high", 1000)):
        klass = {"apiVersion": kueue.API, "kind": "WorkloadPriorityClass", "value": value}
        await client.create(PRIORITY_CLASSES, {**klass, "metadata": {"name": priority}})
    gate = f"go-{secrets.token_hex(4)}"
    claims = {r: pod_claim_name("checkpoint", low, "node", 0, r) for r in RANKS}

    def labelled(tj: Obj, priority: str) -> Obj:
        tj["metadata"]["labels"] = {kueue.QUEUE_LABEL: "lq", kueue.PRIORITY_LABEL: priority}
        return tj

    async with (
        controller_processes(kube, ns, client, tmp_path) as processes,
        policy_in_effect(kube, ns),
    ):
        on_suspend = {f"{KEY}retentionPolicy.whenSuspended": "Snapshot"}
        tj = trainjob(low, runtime_name, on_suspend, command=held(gate))
        await create_trainjob(client, ns, labelled(tj, "ckpt-low"))
        # Both ranks saved their step (on this host) and wait for the gate.
        steps: dict[int, str] = {}
        for r, name in claims.items():
            steps[r] = await saved_step(cluster, client, ns, name)
        assert steps[0] != steps[1]
        _progress(f"TrainJob {low}: both ranks saved")

        await create_trainjob(client, ns, labelled(trainjob_on_llm(high), "ckpt-high"))
        group = await ready_group_of(client, ns, low)
        members = await members_of(client, ns, group)
        assert sorted(members) == sorted(claims.values())
        for r in RANKS:
            kept = await on_host(cluster, client, members[claims[r]])
            assert kept["step"] == steps[r], kept
        await wait_trainjob(client, ns, high, "Complete")
        _progress(f"{low} preempted and kept as {group['metadata']['name']}; {high} completed")

        # Admitted again: each rank's claim from its member; the rank finds its own step.
        for r in RANKS:
            claim = await restored(client, ns, claims[r], members[claims[r]]["metadata"]["name"])
            assert claim["metadata"]["uid"] not in {m["metadata"]["uid"] for m in members.values()}
        await open_gates(cluster, client, ns, claims, gate)
        await wait_trainjob(client, ns, low, "Complete")
        done = await wait_for(
            lambda: client.list(
                VOLUME_GROUP_SNAPSHOTS, ns, label_selector=f"{api.JOBSET_NAME}={low}"
            ),
            lambda found: (
                len(found["items"]) == 2
                and all((g.get("status") or {}).get("readyToUse") for g in found["items"])
            ),
            f"the completion's group snapshot of {low}",
            seconds=SECONDS,
        )
        [last] = [g for g in done["items"] if g["metadata"]["uid"] != group["metadata"]["uid"]]
        resumed = await members_of(client, ns, last)
        for r in RANKS:
            found = await on_host(cluster, client, resumed[claims[r]])
            assert found["resumed"] == f"resumed {steps[r]}", found
        processes.assert_clean()
