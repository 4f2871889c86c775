"""Kubeflow Trainer v2 drives TrainJobs through this controller on the real node (issue 38).

Trainer's own manager (v2.3.0, built from the Go module proxy; ``localcluster/trainer.py``)
turns each TrainJob into a JobSet by server-side apply; this controller runs that JobSet: it
makes the shared claim of the runtime's ``volumeClaimPolicies``, mounts it, runs the Jobs, and
reports the status Trainer copies into the TrainJob. The runtime is the repository's own
(``manifests/examples/trainer/runtime.yaml``: the shape of Trainer's LLM fine-tuning runtimes,
busybox in place of the initializer and trainer images), its claim on the real node's CSI
storage (``csi-wffc``: bound on the node where its first consumer runs).

The tests run on the real node of this folder, with Trainer and Kueue (``conftest.py``). Kueue's
integrations act only on TrainJobs and JobSets with a queue label (``manageJobsWithoutQueueName:
false``), so the tests without a label see Trainer and this controller alone.
"""

from __future__ import annotations

import secrets
import sys
from pathlib import Path
from typing import Any

import pytest

from controller.jobset import api
from controller.jobset.volumes.model import SINGLE_NODE_LABEL
from controller.runtime.client import CLAIMS, ApiError, KubeClient, Resource
from localcluster import kueue, trainer
from tests.helpers import Kube, create_namespace, wait_for
from tests.node.queued import CSI_RUNTIME
from tests.node.test_data import directory_of
from tests.support.jobsets import condition, get_jobset
from tests.support.kueue import CLUSTER_QUEUES, LOCAL_QUEUES, PRIORITY_CLASSES, WORKLOADS, holds
from tests.support.volumes_e2e import controller_processes, phase, pods_of

Obj = dict[str, Any]
pytestmark = [pytest.mark.own_node, pytest.mark.timeout(900)]
SECONDS = 240
TRAINJOBS = Resource(trainer.GROUP, "v1alpha1", "trainjobs", "TrainJob")
RUNTIMES = Resource(
    trainer.GROUP, "v1alpha1", "clustertrainingruntimes", "ClusterTrainingRuntime", namespaced=False
)
RUNTIME = CSI_RUNTIME
DATASET = "hf://tatsu-lab/alpaca"
MODEL = "hf://meta-llama/Llama-3.2-1B-Instruct"
# What each trainer node of the runtime prints, having read what the initializers wrote.
READ = "read: dataset from " + DATASET + ", model from " + MODEL


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def trainjob(name: str, *, nodes: int = 2, command: str | None = None, **spec: Any) -> Obj:
    """A TrainJob on the runtime; ``command``: the trainer nodes' script instead of the
    runtime's (Trainer puts it in the ``node`` container)."""
    node: Obj = {"numNodes": nodes}
    if command is not None:
        node["command"] = ["sh", "-c", command]
    return {
        "apiVersion": trainer.API,
        "kind": "TrainJob",
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": RUNTIME},
            "initializer": {"dataset": {"storageUri": DATASET}, "model": {"storageUri": MODEL}},
            "trainer": node,
            **spec,
        },
    }


def held(gate: str) -> str:
    """The runtime's trainer script, run once the file ``gate`` is in the claim (the test puts
    it there, in the volume's directory on this host): until then the nodes run and wait. A
    shell as PID 1 ignores SIGTERM unless it traps it: a suspended node would take the whole
    grace period (30 s) to go."""
    return (
        f"trap 'exit 143' TERM; while [ ! -f /workspace/{gate} ]; do sleep 1; done; set -e; "
        "dataset=$(cat /workspace/dataset/source); model=$(cat /workspace/model/source); "
        'echo "rank $PET_NODE_RANK of $PET_NNODES read: $dataset, $model"; '
        'echo "rank $PET_NODE_RANK done" > /workspace/output-$PET_NODE_RANK && sync'
    )


async def create_trainjob(client: KubeClient, namespace: str, body: Obj) -> Obj:
    """Create a TrainJob. Trainer's validating webhook reads the runtime from its cache, and
    refuses a TrainJob whose runtime it has not seen yet: that refusal is retried, any other is
    not."""
    created: Obj = {}

    async def attempt() -> bool:
        try:
            created.update(await client.create(TRAINJOBS, body, namespace))
        except ApiError as err:
            if "must be created before the TrainJob" not in str(err):
                raise
            return False
        return True

    await wait_for(attempt, bool, f"TrainJob {body['metadata']['name']} to be admitted", 60)
    return created


async def wait_trainjob(client: KubeClient, namespace: str, name: str, kind: str) -> Obj:
    found: Obj = await wait_for(
        lambda: client.get(TRAINJOBS, name, namespace),
        lambda tj: holds(tj, kind),
        f"TrainJob {name}: condition {kind}=True",
        seconds=SECONDS,
    )
    return found


def must(obj: Obj, kind: str) -> Obj:
    """The condition ``kind`` of ``obj``, which must have it."""
    found = condition(obj, kind)
    assert found is not None, f"{obj['kind']} {obj['metadata']['name']} has no {kind} condition"
    return found


def jobs_status(trainjob_obj: Obj) -> dict[str, Obj]:
    return {s["name"]: s for s in trainjob_obj.get("status", {}).get("jobsStatus") or []}


async def logs(kube: Kube, client: KubeClient, namespace: str, name: str, rjob: str) -> list[str]:
    """The logs of the Succeeded pods of replicated job ``rjob`` of JobSet ``name``."""
    found = []
    for pod in await pods_of(client, namespace, name, f"{api.REPLICATED_JOB_NAME}={rjob}"):
        if phase(pod) == "Succeeded":
            text: str = await kube.core.read_namespaced_pod_log(pod["metadata"]["name"], namespace)
            found.append(text.strip())
    return sorted(found)


async def test_a_trainjob_runs_here_and_every_trainer_node_reads_the_initializers_data(
    queued_kube: Kube, tmp_path: Path
) -> None:
    kube, cluster = queued_kube, queued_kube.cluster
    client = KubeClient(kube.api)
    ns = await create_namespace(kube, wait_for_service_account=True)
    name = "fine-tune"
    async with controller_processes(kube, ns, client, tmp_path) as processes:
        created = await create_trainjob(client, ns, trainjob(name))
        done = await wait_trainjob(client, ns, name, "Complete")
        js = await get_jobset(client, ns, name)
        # Trainer's JobSet: owned by the TrainJob, applied by Trainer's field manager.
        [owner] = js["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"], owner.get("controller")) == (
            "TrainJob",
            created["metadata"]["uid"],
            True,
        )
        managers = {(f["manager"], f["operation"]) for f in js["metadata"]["managedFields"]}
        assert (trainer.FIELD_MANAGER, "Apply") in managers, managers
        assert holds(js, api.COMPLETED)
        # Trainer copies the JobSet's Completed condition and its counters.
        assert must(done, "Complete")["reason"] == must(js, api.COMPLETED)["reason"]
        statuses = jobs_status(done)
        assert {n: statuses[n].get("succeeded") for n in statuses} == {
            "dataset-initializer": 1,
            "model-initializer": 1,
            "node": 1,
        }
        # The initializers wrote once into the shared claim; both trainer nodes read it.
        assert await logs(kube, client, ns, name, "node") == [
            f"rank 0 of 2 {READ}",
            f"rank 1 of 2 {READ}",
        ]
        claim = await client.get(CLAIMS, f"initializer-{name}", ns)
        directory = await directory_of(cluster, client, ns, claim["metadata"]["name"])
        assert (directory / "dataset/source").read_text() == f"dataset from {DATASET}\n"
        assert (directory / "model/source").read_text() == f"model from {MODEL}\n"
        assert sorted(p.name for p in (directory / "output").iterdir()) == ["rank-0", "rank-1"]
        # WaitForFirstConsumer: the claim was bound on the node its first pod ran on.
        node = cluster.node
        assert node is not None
        assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node.name
        # The two initializers share the ReadWriteOnce claim at once, but its storage (the
        # node's CSI driver, attachRequired: false) attaches nothing, so several nodes could
        # mount it: no pod is kept on one node by the controller (volumes/singlenode.py), and
        # MultiAttachRisk says why.
        pods = await pods_of(client, ns, name)
        assert len(pods) == 4
        for pod in pods:
            assert SINGLE_NODE_LABEL not in pod["metadata"]["labels"]
            assert "podAffinity" not in (pod["spec"].get("affinity") or {})
            assert pod["spec"]["nodeName"] == node.name
        risk = condition(js, "MultiAttachRisk") or {}
        assert (risk.get("status"), risk.get("reason")) == ("False", "AttachNotRequired"), risk
        assert "has attachRequired: false" in risk["message"]
        processes.assert_clean()
    _progress(f"TrainJob {name} completed; both nodes read the initializers' data")


async def test_a_failing_trainer_node_fails_the_trainjob(queued_kube: Kube, tmp_path: Path) -> None:
    kube = queued_kube
    client = KubeClient(kube.api)
    ns = await create_namespace(kube, wait_for_service_account=True)
    name = "fails"
    async with controller_processes(kube, ns, client, tmp_path) as processes:
        await create_trainjob(client, ns, trainjob(name, nodes=1, command="echo no; exit 3"))
        failed = await wait_trainjob(client, ns, name, "Failed")
        js = await get_jobset(client, ns, name)
        assert holds(js, api.FAILED)
        assert must(failed, "Failed")["reason"] == must(js, api.FAILED)["reason"]
        assert not holds(failed, "Complete")
        assert jobs_status(failed)["node"].get("failed") == 1
        processes.assert_clean()


async def test_a_trainjob_suspended_while_running_resumes_with_the_same_claim(
    queued_kube: Kube, tmp_path: Path
) -> None:
    kube, cluster = queued_kube, queued_kube.cluster
    client = KubeClient(kube.api)
    ns = await create_namespace(kube, wait_for_service_account=True)
    name = "pausable"
    gate = f"go-{secrets.token_hex(4)}"
    async with controller_processes(kube, ns, client, tmp_path) as processes:
        await create_trainjob(client, ns, trainjob(name, command=held(gate)))
        # Running: the initializers succeeded, both trainer nodes run (and wait for the gate).
        running = await wait_for(
            lambda: client.get(TRAINJOBS, name, ns),
            lambda tj: (
                jobs_status(tj).get("node", {}).get("active") == 1
                and jobs_status(tj).get("model-initializer", {}).get("succeeded") == 1
                and jobs_status(tj).get("dataset-initializer", {}).get("succeeded") == 1
            ),
            f"TrainJob {name}: initializers succeeded, the node Job active",
            seconds=SECONDS,
        )
        assert not holds(running, "Complete")
        claim = await client.get(CLAIMS, f"initializer-{name}", ns)

        await client.patch(TRAINJOBS, name, {"spec": {"suspend": True}}, ns)
        suspended = await wait_trainjob(client, ns, name, "Suspended")
        js = await get_jobset(client, ns, name)
        assert js["spec"]["suspend"] is True
        await wait_for(
            lambda: pods_of(client, ns, name, f"{api.REPLICATED_JOB_NAME}=node"),
            lambda pods: not [p for p in pods if phase(p) in ("Pending", "Running")],
            f"the trainer pods of {name} to go",
            seconds=SECONDS,
        )
        assert must(suspended, "Suspended")["reason"] == "Suspended"
        assert (
            jobs_status(
                await wait_for(
                    lambda: client.get(TRAINJOBS, name, ns),
                    lambda tj: jobs_status(tj).get("node", {}).get("active") == 0,
                    f"TrainJob {name}: no node Job active",
                    seconds=SECONDS,
                )
            )["node"].get("suspended")
            == 1
        )

        await client.patch(TRAINJOBS, name, {"spec": {"suspend": False}}, ns)
        await wait_for(
            lambda: client.get(TRAINJOBS, name, ns),
            lambda tj: jobs_status(tj).get("node", {}).get("active") == 1,
            f"TrainJob {name}: the node Job active again",
            seconds=SECONDS,
        )
        directory = await directory_of(cluster, client, ns, claim["metadata"]["name"])
        (directory / gate).write_text("go\n")
        await wait_trainjob(client, ns, name, "Complete")
        # The same claim throughout, and the data the initializers wrote before the suspension.
        kept = await client.get(CLAIMS, claim["metadata"]["name"], ns)
        assert kept["metadata"]["uid"] == claim["metadata"]["uid"]
        assert await logs(kube, client, ns, name, "node") == [
            f"rank 0 of 2 {READ}",
            f"rank 1 of 2 {READ}",
        ]
        assert must(await client.get(TRAINJOBS, name, ns), "Suspended")["status"] == "False"
        processes.assert_clean()


async def workload_of_trainjob(client: KubeClient, namespace: str, name: str) -> Obj | None:
    """The Workload Kueue made for TrainJob ``name`` (owned by it), or None."""
    uid = (await client.get(TRAINJOBS, name, namespace))["metadata"]["uid"]
    for wl in (await client.list(WORKLOADS, namespace))["items"]:
        if any(r.get("uid") == uid for r in wl["metadata"].get("ownerReferences") or []):
            return dict(wl)
    return None


async def wait_trainjob_workload(
    client: KubeClient, namespace: str, name: str, kind: str, status: str = "True"
) -> Obj:
    found = await wait_for(
        lambda: workload_of_trainjob(client, namespace, name),
        lambda wl: holds(wl, kind, status),
        f"the Workload of TrainJob {name} to have {kind}={status}",
        seconds=SECONDS,
    )
    assert found is not None
    return found


async def test_under_kueue_a_trainjob_is_queued_admitted_preempted_and_resumed_keeping_its_claim(
    queued_kube: Kube, tmp_path: Path
) -> None:
    kube, cluster = queued_kube, queued_kube.cluster
    client = KubeClient(kube.api)
    ns = await create_namespace(kube, wait_for_service_account=True)
    cq, low, high = "cq-trainer", "train", "urgent"
    # One TrainJob at a time: each asks 4 x 50m cpu (two initializers, two nodes) at once, and
    # a running one whose initializers succeeded still 100m (Kueue reclaims finished pods).
    body = kueue.cluster_queue(cq, gpus=0, cpu=1, memory_gi=4)
    body["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] = "250m"
    await client.create(CLUSTER_QUEUES, body)
    await client.create(LOCAL_QUEUES, kueue.local_queue("lq", ns, cq), ns)
    for priority, value in (("tj-low", 100), ("tj-high", 1000)):
        klass = {"apiVersion": kueue.API, "kind": "WorkloadPriorityClass", "value": value}
        await client.create(PRIORITY_CLASSES, {**klass, "metadata": {"name": priority}})
    gate = f"go-{secrets.token_hex(4)}"

    def labelled(tj: Obj, priority: str) -> Obj:
        tj["metadata"]["labels"] = {kueue.QUEUE_LABEL: "lq", kueue.PRIORITY_LABEL: priority}
        return tj

    async with controller_processes(kube, ns, client, tmp_path) as processes:
        # Queued: Kueue's webhook suspends the TrainJob at creation; Trainer's JobSet is
        # created suspended and gets no running pod before admission.
        created = await create_trainjob(
            client, ns, labelled(trainjob(low, command=held(gate)), "tj-low")
        )
        assert created["spec"].get("suspend") is True, created["spec"]
        await wait_trainjob_workload(client, ns, low, "Admitted")
        _progress(f"TrainJob {low} admitted")
        await wait_for(
            lambda: client.get(TRAINJOBS, low, ns),
            lambda tj: jobs_status(tj).get("node", {}).get("active") == 1,
            f"TrainJob {low}: the node Job active",
            seconds=SECONDS,
        )
        claim = await client.get(CLAIMS, f"initializer-{low}", ns)
        js = await get_jobset(client, ns, low)
        assert js["metadata"]["labels"][kueue.QUEUE_LABEL] == "lq"

        # Preempted by a higher priority TrainJob: suspended, its pods gone, its claim kept.
        await create_trainjob(client, ns, labelled(trainjob(high), "tj-high"))
        await wait_trainjob_workload(client, ns, low, "Evicted")
        # Kueue suspends the TrainJob, Trainer its JobSet, this controller its Jobs; Kueue
        # admits the other only once no Job of this one is active (Trainer's jobsStatus).
        await wait_for(
            lambda: get_jobset(client, ns, low),
            lambda js: js["spec"].get("suspend") is True,
            f"JobSet {low} to be suspended",
            seconds=SECONDS,
        )
        await wait_trainjob(client, ns, high, "Complete")
        _progress(f"{low} preempted, {high} completed")
        assert (await client.get(CLAIMS, claim["metadata"]["name"], ns))["metadata"][
            "uid"
        ] == claim["metadata"]["uid"]

        # Admitted again: the node Jobs run once more, on the same claim; the gate lets them end.
        await wait_for(
            lambda: workload_of_trainjob(client, ns, low),
            lambda wl: holds(wl, "Admitted") and not holds(wl, "Evicted"),
            f"TrainJob {low} to be admitted again",
            seconds=SECONDS,
        )
        await wait_for(
            lambda: client.get(TRAINJOBS, low, ns),
            lambda tj: jobs_status(tj).get("node", {}).get("active") == 1,
            f"TrainJob {low}: the node Job active again",
            seconds=SECONDS,
        )
        directory = await directory_of(cluster, client, ns, claim["metadata"]["name"])
        (directory / gate).write_text("go\n")
        await wait_trainjob(client, ns, low, "Complete")
        kept = await client.get(CLAIMS, claim["metadata"]["name"], ns)
        assert kept["metadata"]["uid"] == claim["metadata"]["uid"]
        assert await logs(kube, client, ns, low, "node") == [
            f"rank 0 of 2 {READ}",
            f"rank 1 of 2 {READ}",
        ]
        # The preemption killed the first pods before the gate opened: no pod ran to its end
        # twice, and none wrote into the claim before.
        assert sorted(p.name for p in directory.glob("output-*")) == ["output-0", "output-1"]
        pods = await pods_of(client, ns, low, f"{api.REPLICATED_JOB_NAME}=node")
        assert all(phase(p) != "Running" for p in pods), [phase(p) for p in pods]
        processes.assert_clean()
