"""A checkpoint survives a Kueue preemption, with real bytes (issue 18).

The test runs on the real node of this folder, with Kueue (and Kubeflow Trainer; ``conftest.py``):
Kueue's webhooks act on every JobSet write of that API server, so no test of the tier's shared
node sees them. A low-priority JobSet's pod
writes a checkpoint into its Job-scope claim and keeps running; a high-priority JobSet takes the
quota, so Kueue preempts the first (suspended, its pod killed); when the high one completed, the
first is admitted again and its new pod reads the checkpoint back from the same claim.

The claim is the real node's CSI storage (``csi-immediate``, our CSI driver, which this node
profile runs too); the checkpoint is also read on this host, in the volume's directory in the
driver's state directory.
"""

from __future__ import annotations

import secrets
import sys
from pathlib import Path
from typing import Any

import pytest

from controller.jobset import api
from controller.runtime.client import CLAIMS, PODS, KubeClient
from localcluster import csi, kueue
from tests.helpers import Kube, create_namespace, wait_for
from tests.node.test_data import directory_of
from tests.support.jobsets import jobset
from tests.support.kueue import (
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    PRIORITY_CLASSES,
    holds,
    queued,
    wait_workload,
    workload_of,
)
from tests.support.volumes_e2e import (
    claim_template,
    controller_processes,
    phase,
    pods_of,
    wait_claim_phase,
    wait_jobset,
)

Obj = dict[str, Any]
pytestmark = [pytest.mark.own_node, pytest.mark.timeout(900)]
SECONDS = 240


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cpu_job(name: str, script: str, mounts: dict[str, str] | None = None) -> Obj:
    """One Job of one busybox pod running ``script``, asking 1 cpu (what the queue counts)."""
    container: Obj = {
        "name": "main",
        "image": "busybox",
        "command": ["sh", "-c", script],
        "resources": {"requests": {"cpu": "1", "memory": "64Mi"}},
    }
    if mounts:
        # Never an empty list: Kueue's admission patch drops it, which this CRD counts as a
        # change of the suspended template and refuses (docs/kueue.md, "Supported and not").
        container["volumeMounts"] = [{"name": n, "mountPath": p} for n, p in mounts.items()]
    return {
        "name": name,
        "replicas": 1,
        "template": {
            "spec": {
                "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
            }
        },
    }


async def log_of(kube: Kube, namespace: str, pod: str) -> str:
    text: str = await kube.core.read_namespaced_pod_log(pod, namespace)
    return text.strip()


async def test_a_checkpoint_written_before_preemption_is_read_after_readmission(
    queued_kube: Kube, tmp_path: Path
) -> None:
    kube, cluster = queued_kube, queued_kube.cluster
    client = KubeClient(kube.api)
    ns = await create_namespace(kube, wait_for_service_account=True)
    cq, low, high = "cq-node", "train", "urgent"
    # One pod at a time: 1.5 cpu of quota, each pod asks 1.
    body = kueue.cluster_queue(cq, gpus=0, cpu=1, memory_gi=4)
    body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "1500m"
    await client.create(CLUSTER_QUEUES, body)
    await client.create(LOCAL_QUEUES, kueue.local_queue("lq", ns, cq), ns)
    for name, value in (("low", 100), ("high", 1000)):
        priority = {"apiVersion": kueue.API, "kind": "WorkloadPriorityClass", "value": value}
        await client.create(PRIORITY_CLASSES, {**priority, "metadata": {"name": name}})

    token = secrets.token_hex(8)
    # First run: no checkpoint yet, write one, keep running (until preempted). Second run: read
    # it back and finish.
    script = (
        'if [ -f /ckpt/step ]; then echo "resumed from: $(cat /ckpt/step)"; exit 0; fi; '
        f'echo "{token} by $HOSTNAME" > /ckpt/step && sync && echo "checkpoint written"; '
        "sleep 3600"
    )
    policies = [
        {"scope": "Job", "templates": [claim_template("ckpt", "1Gi", csi.IMMEDIATE_CLASS)]},
    ]
    async with controller_processes(kube, ns, client, tmp_path) as processes:
        trainer = jobset(
            low, cpu_job("workers", script, {"ckpt": "/ckpt"}), volumeClaimPolicies=policies
        )
        await client.create(api.JOBSETS, queued(trainer, "lq", "low"), ns)
        await wait_workload(client, ns, low, "Admitted")

        async def written() -> dict[str, str]:
            running = [p for p in await pods_of(client, ns, low) if phase(p) == "Running"]
            return {
                p["metadata"]["name"]: await log_of(kube, ns, p["metadata"]["name"])
                for p in running
            }

        logs = await wait_for(
            written,
            lambda found: any("checkpoint written" in text for text in found.values()),
            f"the pod of {low} to write its checkpoint",
            seconds=SECONDS,
        )
        [first_pod] = [name for name, text in logs.items() if "checkpoint written" in text]
        first = await client.get(PODS, first_pod, ns)
        claim_name = f"ckpt-{low}-workers-0"
        claim = await wait_claim_phase(client, ns, claim_name, seconds=SECONDS)
        _progress(f"{first_pod} wrote its checkpoint into {claim_name}")

        urgent = jobset(high, cpu_job("workers", "echo urgent"))
        await client.create(api.JOBSETS, queued(urgent, "lq", "high"), ns)
        await wait_workload(client, ns, low, "Evicted")
        await wait_jobset(client, ns, high, api.COMPLETED, seconds=SECONDS)
        _progress(f"{low} preempted, {high} completed")
        await wait_for(
            lambda: workload_of(client, ns, low),
            lambda wl: holds(wl, "Admitted") and not holds(wl, "Evicted"),
            f"{low} to be admitted again",
            seconds=SECONDS,
        )
        await wait_jobset(client, ns, low, api.COMPLETED, seconds=SECONDS)
        pods = {p["metadata"]["name"]: p for p in await pods_of(client, ns, low)}
        resumed = [
            await log_of(kube, ns, name)
            for name, pod in pods.items()
            if name != first_pod and phase(pod) == "Succeeded"
        ]
        # The first pod's hostname (the JobSet's pod DNS name, <jobset>-<rjob>-<job>-<index>):
        # the new pod has the same one, so the pod name says which pod wrote the checkpoint.
        first_host = first["spec"].get("hostname") or first_pod
        assert resumed == [f"resumed from: {token} by {first_host}"], resumed
        assert first_pod not in pods or phase(pods[first_pod]) != "Running"
        kept = await client.get(CLAIMS, claim_name, ns)
        assert kept["metadata"]["uid"] == claim["metadata"]["uid"]
        # The bytes are in the CSI volume's directory on this host.
        directory = await directory_of(cluster, client, ns, claim_name)
        assert (directory / "step").read_text() == f"{token} by {first_host}\n"
        processes.assert_clean()
    _progress(f"re-admitted {low} read the checkpoint back; cluster {cluster.state_dir}")
