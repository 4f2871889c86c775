"""The stateful promise with real bytes: containers on the real node write and read claims.

Each test runs the controller as its own process against the ``node`` profile (containerd, runc
and a kubelet), and proves a claim about data from what the containers printed (``kubectl
logs``) and what is on disk.

The claims are the real node's CSI storage (issue 37): storage class ``csi-immediate`` (our CSI
driver through the external-provisioner; ``csi-wffc``, WaitForFirstConsumer, for the shared
model of the first proof, which binds once A's pod is scheduled). A volume is a directory in the
driver's state directory on this host, ``<state>/node/csi/volumes/<PV spec.csi.volumeHandle>``
(``directory_of``), which also holds the driver's ``.csi-capacity`` file (``csi.CAPACITY_FILE``).

What stays on the hostPath test provisioner (``localcluster/provisioner.py``), and why:
``test_the_provisioner_keeps_a_retain_volume_and_removes_a_delete_one``, whose point is that
provisioner itself (its reclaim of a Delete and a Retain volume on this host: the storage the
KWOK profiles' proofs rest on). ``test_pod_zero_is_reachable_by_its_hostname_from_another_pod``
has no volume. ``directory_of`` reads a hostPath PV too.
"""

from __future__ import annotations

import functools
import secrets
from pathlib import Path
from typing import Any

from controller.jobset import api
from controller.runtime.client import CLAIMS, PODS, KubeClient
from localcluster import csi
from localcluster.cluster import LocalCluster
from tests.helpers import Kube, current, wait_for
from tests.support.jobsets import condition, jobs_of, jobset, settled_process, wait_condition
from tests.support.volumes_e2e import (
    VOLUMES,
    ControllerProcesses,
    claim_template,
    find,
    pod_claims,
    pods_of,
    wait_claim_phase,
    wait_exists,
    wait_gone,
)

Obj = dict[str, Any]
# Real containers: pulls, sandboxes and the restart of a JobSet take seconds each.
SECONDS = 180
# The storage class of the claims of the data proofs: our CSI driver's, Immediate binding.
CLASS = csi.IMMEDIATE_CLASS


def shell_job(
    name: str,
    script: str,
    *,
    replicas: int = 1,
    pods: int = 1,
    mounts: dict[str, str] | None = None,
    **extra: Any,
) -> Obj:
    """A replicated job whose pods run ``sh -c script`` in busybox (the untagged name, so pull
    policy Always, from the node's local registry), with the claims ``mounts`` (template name →
    mount path) mounted."""
    container: Obj = {
        "name": "main",
        "image": "busybox",
        "command": ["sh", "-c", script],
        "env": [
            {
                "name": "ATTEMPT",
                "valueFrom": {
                    "fieldRef": {"fieldPath": f"metadata.labels['{api.RESTART_ATTEMPT}']"}
                },
            }
        ],
        "volumeMounts": [{"name": n, "mountPath": p} for n, p in (mounts or {}).items()],
    }
    rjob: Obj = {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "completionMode": "Indexed",
                "completions": pods,
                "parallelism": pods,
                "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
            }
        },
    }
    rjob.update(extra)
    return rjob


def policy(template: str, scope: str = "JobSet", **retention: str) -> Obj:
    found: Obj = {"scope": scope, "templates": [claim_template(template, "1Gi", CLASS)]}
    if retention:
        found["retentionPolicy"] = retention
    return found


async def log_of(kube: Kube, namespace: str, pod: str) -> str:
    text: str = await kube.core.read_namespaced_pod_log(pod, namespace)
    return text.strip()


async def pod_logs(
    kube: Kube, client: KubeClient, namespace: str, name: str, rjob: str
) -> dict[str, str]:
    """Pod name → log of the JobSet's pods of ``rjob`` that succeeded."""
    pods = await pods_of(client, namespace, name, f"{api.REPLICATED_JOB_NAME}={rjob}")
    return {
        p["metadata"]["name"]: await log_of(kube, namespace, p["metadata"]["name"])
        for p in pods
        if (p.get("status") or {}).get("phase") == "Succeeded"
    }


async def directory_of(
    cluster: LocalCluster, client: KubeClient, namespace: str, claim: str
) -> Path:
    """The host directory of a bound claim's volume: for our CSI driver's, the directory its
    PV's ``spec.csi.volumeHandle`` names in the driver's state directory (the driver's
    ``volumes/<id>``); for the test provisioner's, its hostPath."""
    bound = await wait_claim_phase(client, namespace, claim, seconds=SECONDS)
    volume = await client.get(VOLUMES, bound["spec"]["volumeName"], None)
    source = volume["spec"].get("csi")
    if source is None:
        return Path(volume["spec"]["hostPath"]["path"])
    assert source["driver"] == csi.DRIVER_NAME, source
    assert cluster.csi is not None, "the cluster runs no CSI stack"
    directory = cluster.csi.state_dir / "volumes" / str(source["volumeHandle"])
    assert directory.is_dir(), f"claim {claim}: no directory {directory} for its CSI volume"
    return directory


def size_of(path: Path) -> int:
    return path.stat().st_size if path.exists() else 0


async def lose(client: KubeClient, namespace: str, name: str, claim: str) -> None:
    """Delete the JobSet's claim out of band; wait until it is gone and the JobSet says so."""
    await client.delete(CLAIMS, claim, namespace)
    await wait_gone(client, CLAIMS, claim, namespace, seconds=SECONDS)
    await wait_for(
        lambda: client.get(api.JOBSETS, name, namespace),
        lambda js: (condition(js, "VolumesReady") or {}).get("reason") == "ClaimsLost",
        f"JobSet {name}: VolumesReady reason ClaimsLost",
        seconds=SECONDS,
    )


async def completed(client: KubeClient, namespace: str, name: str) -> Obj:
    return await wait_condition(client, namespace, name, "Completed", seconds=SECONDS)


# ------------------------------------------------------------------------------------ proofs


async def test_b_reads_the_model_that_a_downloaded(
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    node_controller: ControllerProcesses,
) -> None:
    """The original request's story: A writes the model into the shared claim; B's 2 Jobs x 2
    pods start only once A completed (dependsOn) and every one of them reads what A wrote; the
    workers get no volume. The claim's class is WaitForFirstConsumer (``csi-wffc``): it binds
    once A's pod is scheduled, on the node that pod landed on."""
    model = f"model-weights-{secrets.token_hex(8)}"
    body = jobset(
        "volume-sample",
        shell_job(
            "A",
            f"echo {model} > /model/weights && echo downloaded",
            mounts={"pretrained-model": "/model"},
        ),
        shell_job(
            "B",
            "cat /model/weights",
            replicas=2,
            pods=2,
            mounts={"pretrained-model": "/model"},
            dependsOn=[{"name": "A", "status": "Complete"}],
        ),
        shell_job("workers", "ls / > /dev/null"),
        volumePolicy={
            "replicatedJobs": [{"name": "A"}, {"name": "B"}],
            "volumeClaimTemplates": [claim_template("pretrained-model", "1Gi", csi.WFFC_CLASS)],
        },
    )
    await node_client.create(api.JOBSETS, body, node_namespace)
    claim = "pretrained-model-volume-sample"
    directory = await directory_of(node_kube.cluster, node_client, node_namespace, claim)
    await completed(node_client, node_namespace, "volume-sample")

    readers = await pod_logs(node_kube, node_client, node_namespace, "volume-sample", "B")
    assert len(readers) == 4, f"B's 2 Jobs x 2 pods should have succeeded: {readers}"
    assert set(readers.values()) == {model}, f"every B pod reads what A wrote: {readers}"
    assert (directory / "weights").read_text().strip() == model

    jobs = {
        j["metadata"]["name"]: j
        for j in await jobs_of(node_client, node_namespace, "volume-sample")
    }
    a_done = jobs["volume-sample-a-0"]["status"]["completionTime"]
    for b in ("volume-sample-b-0", "volume-sample-b-1"):
        # RFC 3339 UTC timestamps of one format: string order is time order.
        assert jobs[b]["metadata"]["creationTimestamp"] >= a_done, (b, a_done)
        assert set(pod_claims(jobs[b]["spec"]["template"]["spec"]).values()) == {claim}
    assert pod_claims(jobs["volume-sample-workers-0"]["spec"]["template"]["spec"]) == {}
    # WaitForFirstConsumer: the scheduler chose the node for the volume, the one A's pod ran on.
    [a_pod] = await pods_of(
        node_client, node_namespace, "volume-sample", f"{api.REPLICATED_JOB_NAME}=A"
    )
    bound = await node_client.get(CLAIMS, claim, node_namespace)
    selected = bound["metadata"]["annotations"].get("volume.kubernetes.io/selected-node")
    assert selected == a_pod["spec"]["nodeName"], (selected, a_pod["spec"].get("nodeName"))
    node_controller.assert_clean()


async def test_a_checkpoint_survives_a_restart_of_the_jobset(
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    node_controller: ControllerProcesses,
) -> None:
    """Attempt 0 writes its step counter to its Job's claim and fails; the JobSet restarts
    (failurePolicy), and attempt 1's pod reads the counter and continues from it."""
    script = (
        "step=$(cat /ckpt/step 2>/dev/null || echo 0); "
        'echo "attempt $ATTEMPT resumes at step $step"; '
        "step=$((step + 100)); echo $step > /ckpt/step; "
        'if [ "$ATTEMPT" = 0 ]; then echo "attempt 0 fails after step $step"; exit 1; fi; '
        'echo "attempt $ATTEMPT done at step $step"'
    )
    body = jobset(
        "resumable",
        shell_job("trainer", script, mounts={"ckpt": "/ckpt"}),
        failurePolicy={"maxRestarts": 1},
        volumeClaimPolicies=[policy("ckpt", scope="Job")],
    )
    await node_client.create(api.JOBSETS, body, node_namespace)
    claim = "ckpt-resumable-trainer-0"
    directory = await directory_of(node_kube.cluster, node_client, node_namespace, claim)
    uid = (await node_client.get(CLAIMS, claim, node_namespace))["metadata"]["uid"]
    finished = await completed(node_client, node_namespace, "resumable")
    assert finished["status"].get("restarts") == 1, finished["status"]

    logs = await pod_logs(node_kube, node_client, node_namespace, "resumable", "trainer")
    assert list(logs.values()) == ["attempt 1 resumes at step 100\nattempt 1 done at step 200"], (
        logs
    )
    assert (directory / "step").read_text().strip() == "200"
    # The same claim across the restart, never a new (empty) one.
    assert (await node_client.get(CLAIMS, claim, node_namespace))["metadata"]["uid"] == uid
    node_controller.assert_clean()


READ_OR_WRITE = (
    'if [ -f /data/file ]; then echo "found: $(cat /data/file)"; '
    'else echo "{token}" > /data/file; echo "wrote {token}"; fi'
)


async def test_a_retained_claim_keeps_its_data_for_the_jobset_applied_again(
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    node_controller: ControllerProcesses,
) -> None:
    """whenDeleted: Retain; the JobSet is deleted and the very same manifest applied again: the
    new pods are handed the retained claim and see the old data."""
    token = secrets.token_hex(8)
    body = jobset(
        "keeper",
        shell_job("trainer", READ_OR_WRITE.format(token=token), mounts={"data": "/data"}),
        volumeClaimPolicies=[policy("data", whenDeleted="Retain")],
    )
    await node_client.create(api.JOBSETS, body, node_namespace)
    await completed(node_client, node_namespace, "keeper")
    first = await pod_logs(node_kube, node_client, node_namespace, "keeper", "trainer")
    assert list(first.values()) == [f"wrote {token}"]
    uid = (await node_client.get(CLAIMS, "data-keeper", node_namespace))["metadata"]["uid"]

    await node_client.delete(api.JOBSETS, "keeper", node_namespace)
    await wait_gone(node_client, api.JOBSETS, "keeper", node_namespace, seconds=SECONDS)
    await wait_for(
        lambda: pods_of(node_client, node_namespace, "keeper"),
        lambda pods: not pods,
        "the first run's pods to be gone",
        seconds=SECONDS,
    )
    kept = await node_client.get(CLAIMS, "data-keeper", node_namespace)
    assert kept["metadata"]["uid"] == uid

    await node_client.create(api.JOBSETS, body, node_namespace)
    await completed(node_client, node_namespace, "keeper")
    second = await pod_logs(node_kube, node_client, node_namespace, "keeper", "trainer")
    assert list(second.values()) == [f"found: {token}"], second
    assert (await node_client.get(CLAIMS, "data-keeper", node_namespace))["metadata"]["uid"] == uid
    node_controller.assert_clean()


async def test_release_deletes_the_claims_and_their_directories(
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    node_controller: ControllerProcesses,
) -> None:
    """whenCompleted: Delete: once the JobSet completed its claims are deleted, and the CSI
    driver removes their directories from the host (reclaim policy Delete).

    Each pod writes 1 MiB, then waits for a ``go`` file the test puts next to it once it saw
    the bytes on disk: the data was there, in the claim's directory, before the release."""
    script = (
        "head -c 1048576 /dev/zero > /scratch/blob && "
        "while [ ! -f /scratch/go ]; do sleep 0.2; done; echo released"
    )
    body = jobset(
        "scratch",
        shell_job("trainer", script, replicas=2, mounts={"scratch": "/scratch"}),
        volumeClaimPolicies=[policy("scratch", scope="Job", whenCompleted="Delete")],
    )
    await node_client.create(api.JOBSETS, body, node_namespace)
    claims = ["scratch-scratch-trainer-0", "scratch-scratch-trainer-1"]
    directories = [
        await directory_of(node_kube.cluster, node_client, node_namespace, c) for c in claims
    ]
    volumes = [
        (await node_client.get(CLAIMS, c, node_namespace))["spec"]["volumeName"] for c in claims
    ]
    for directory in directories:
        blob = directory / "blob"
        await wait_for(
            current(functools.partial(size_of, blob)),
            lambda size: size == 1048576,
            f"1 MiB written by a pod into {blob}",
            seconds=SECONDS,
        )
        (directory / "go").write_text("")
    await completed(node_client, node_namespace, "scratch")

    for claim, volume in zip(claims, volumes, strict=True):
        await wait_gone(node_client, CLAIMS, claim, node_namespace, seconds=SECONDS)
        await wait_gone(node_client, VOLUMES, volume, None, seconds=SECONDS)
    # The external-provisioner deletes the PV only once the driver's DeleteVolume (record, then
    # directory) succeeded.
    assert [d for d in directories if d.exists()] == []
    node_controller.assert_clean()


async def test_a_foreign_claim_at_the_generated_name_is_never_mounted(
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    node_controller: ControllerProcesses,
) -> None:
    """Someone else's claim already has the name the JobSet would give its claim (even with the
    JobSet's name label copied onto it): the JobSet reports the conflict, no pod of it ever
    mounts that claim, and the foreign data stays as it was."""
    foreign = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data-intruded", "labels": {api.JOBSET_NAME: "intruded"}},
        "spec": claim_template("data", "1Gi", CLASS)["spec"],
    }
    await node_client.create(CLAIMS, foreign, node_namespace)
    directory = await directory_of(node_kube.cluster, node_client, node_namespace, "data-intruded")
    (directory / "file").write_text("someone else's data\n")

    token = secrets.token_hex(8)
    body = jobset(
        "intruded",
        shell_job("trainer", READ_OR_WRITE.format(token=token), mounts={"data": "/data"}),
        volumeClaimPolicies=[policy("data")],
    )
    await node_client.create(api.JOBSETS, body, node_namespace)
    conflicted = await wait_condition(
        node_client, node_namespace, "intruded", "VolumeClaimConflict", seconds=SECONDS
    )
    await settled_process(node_controller.replicas[-1], node_client, node_namespace)
    assert await jobs_of(node_client, node_namespace, "intruded") == [], conflicted["status"]
    mounted = [
        p["metadata"]["name"]
        for p in (await node_client.list(PODS, node_namespace))["items"]
        if "data-intruded" in pod_claims(p["spec"]).values()
    ]
    assert mounted == []

    # Once the JobSet is deleted, the foreign claim and its data are untouched.
    await node_client.delete(api.JOBSETS, "intruded", node_namespace)
    await wait_gone(node_client, api.JOBSETS, "intruded", node_namespace, seconds=SECONDS)
    await settled_process(node_controller.replicas[-1], node_client, node_namespace)
    assert await find(node_client, CLAIMS, "data-intruded", node_namespace) is not None
    assert (directory / "file").read_text() == "someone else's data\n"
    node_controller.assert_clean()


async def test_a_lost_claim_is_not_silently_replaced_by_an_empty_one(
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    node_controller: ControllerProcesses,
) -> None:
    """A recorded claim is deleted out of band (its data with it): the JobSet says ClaimsLost,
    runs nothing (its suspended Job stays suspended) and creates no claim at that name, even
    when resumed; only the explicit opt-in
    annotation, naming the lost claim's uid, gives it a new, empty claim, and its pod sees an
    empty volume, never someone's old data."""
    token = secrets.token_hex(8)
    body = jobset(
        "losing",
        shell_job("trainer", READ_OR_WRITE.format(token=token), mounts={"data": "/data"}),
        suspend=True,
        # Made while suspended, so that it can be lost before any pod uses it.
        volumeClaimPolicies=[{**policy("data"), "creationPolicy": {"whenSuspended": "Create"}}],
    )
    await node_client.create(api.JOBSETS, body, node_namespace)
    claim = "data-losing"
    directory = await directory_of(node_kube.cluster, node_client, node_namespace, claim)
    (directory / "file").write_text("checkpoint of step 1000\n")
    recorded = await wait_for(
        lambda: node_client.get(api.JOBSETS, "losing", node_namespace),
        lambda js: bool(((js.get("status") or {}).get("volumes") or {}).get("claimUIDs")),
        "the claim's uid recorded in the JobSet's status",
        seconds=SECONDS,
    )
    uid = (await node_client.get(CLAIMS, claim, node_namespace))["metadata"]["uid"]
    assert uid[:8] in str(recorded["status"]["volumes"]["claimUIDs"])
    # Its Job comes in the pass after the uid is stored (gathered with that write's echo).
    await wait_for(
        lambda: jobs_of(node_client, node_namespace, "losing"),
        lambda jobs: (
            [(j["metadata"]["name"], j["spec"]["suspend"]) for j in jobs]
            == [("losing-trainer-0", True)]
        ),
        "its Job, created suspended",
        seconds=SECONDS,
    )

    await lose(node_client, node_namespace, "losing", claim)
    await node_client.patch(api.JOBSETS, "losing", {"spec": {"suspend": False}}, node_namespace)
    await settled_process(node_controller.replicas[-1], node_client, node_namespace)
    assert await find(node_client, CLAIMS, claim, node_namespace) is None
    # Its Job, created suspended before the loss, stays suspended: no pod waits for a claim
    # of that name (it would mount whatever claim appeared there).
    jobs = await jobs_of(node_client, node_namespace, "losing")
    assert [(j["metadata"]["name"], j["spec"]["suspend"]) for j in jobs] == [
        ("losing-trainer-0", True)
    ]
    assert await pods_of(node_client, node_namespace, "losing") == []
    lost = await node_client.get(api.JOBSETS, "losing", node_namespace)
    assert (condition(lost, "VolumesReady") or {}).get("reason") == "ClaimsLost"

    # The opt-in: a new, empty claim in its place, and the pod sees an empty volume.
    opt_in = {"jobset.sigs.k8s.io/replace-lost-claims": f"{claim}@{uid[:8]}"}
    await node_client.patch(
        api.JOBSETS, "losing", {"metadata": {"annotations": opt_in}}, node_namespace
    )
    replaced = await wait_exists(node_client, CLAIMS, claim, node_namespace, seconds=SECONDS)
    assert replaced["metadata"]["uid"] != uid
    await completed(node_client, node_namespace, "losing")
    logs = await pod_logs(node_kube, node_client, node_namespace, "losing", "trainer")
    assert list(logs.values()) == [f"wrote {token}"], logs
    node_controller.assert_clean()


async def test_a_claim_lost_under_a_running_job_is_never_replaced_by_an_impostor(
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    node_controller: ControllerProcesses,
) -> None:
    """A running Job whose claim is lost: its pods would wait for a claim of that name and
    mount whatever appears there. Kubernetes keeps a claim while a scheduled pod uses it, so the
    loss happens when the Job's pods are not scheduled: a retry pod between two attempts, or, as
    here to make it deterministic, a pod held by a scheduling gate. Once the claim is gone
    (ClaimsLost) the Job is suspended, so when another claim appears at the name (here with
    someone else's data), no pod of the JobSet ever mounts it."""
    trainer = shell_job("trainer", READ_OR_WRITE.format(token="mine"), mounts={"data": "/data"})
    pod_spec = trainer["template"]["spec"]["template"]["spec"]
    pod_spec["schedulingGates"] = [{"name": "tests.stateful-jobset/hold"}]
    body = jobset("robbed", trainer, volumeClaimPolicies=[policy("data")])
    await node_client.create(api.JOBSETS, body, node_namespace)
    claim = "data-robbed"
    await wait_for(
        lambda: node_client.get(api.JOBSETS, "robbed", node_namespace),
        lambda js: bool(((js.get("status") or {}).get("volumes") or {}).get("claimUIDs")),
        "the claim's uid recorded in the JobSet's status",
        seconds=SECONDS,
    )
    await wait_for(
        lambda: pods_of(node_client, node_namespace, "robbed"),
        lambda pods: len(pods) == 1,
        "the Job's (gated) pod",
        seconds=SECONDS,
    )
    await lose(node_client, node_namespace, "robbed", claim)
    await settled_process(node_controller.replicas[-1], node_client, node_namespace)
    jobs = await jobs_of(node_client, node_namespace, "robbed")
    assert [(j["metadata"]["name"], j["spec"].get("suspend")) for j in jobs] == [
        ("robbed-trainer-0", True)
    ]
    await wait_for(
        lambda: pods_of(node_client, node_namespace, "robbed"),
        lambda pods: not pods,
        "the suspended Job's pod to be gone",
        seconds=SECONDS,
    )

    impostor = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim, "labels": {api.JOBSET_NAME: "robbed"}},
        "spec": claim_template("data", "1Gi", CLASS)["spec"],
    }
    await node_client.create(CLAIMS, impostor, node_namespace)
    other = await directory_of(node_kube.cluster, node_client, node_namespace, claim)
    (other / "file").write_text("someone else's data\n")
    await settled_process(node_controller.replicas[-1], node_client, node_namespace)
    assert await pods_of(node_client, node_namespace, "robbed") == []
    still = await node_client.get(api.JOBSETS, "robbed", node_namespace)
    assert (condition(still, "VolumesReady") or {}).get("reason") == "ClaimsLost"
    assert [
        j["spec"].get("suspend") for j in await jobs_of(node_client, node_namespace, "robbed")
    ] == [True]
    assert (other / "file").read_text() == "someone else's data\n"
    node_controller.assert_clean()


async def test_pod_zero_is_reachable_by_its_hostname_from_another_pod(
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    node_controller: ControllerProcesses,
) -> None:
    """Distributed training finds its peers by name: pod 0 of replicated job ``leader`` serves
    a file; a pod of ``worker`` fetches it by ``<jobset>-leader-0-0.<subdomain>`` through the
    JobSet's headless Service and the cluster DNS."""
    token = secrets.token_hex(8)
    serve = f"echo {token} > /tmp/index.html && httpd -f -p 8080 -h /tmp"
    # No "-T": Debian busybox-static 1.35 wget segfaults with a timeout option. The loop waits
    # for the name to be published (the leader's endpoint) and for httpd to listen.
    fetch = (
        "for i in $(seq 1 120); do "
        "wget -qO- http://peers-leader-0-0.peers:8080/index.html && exit 0; sleep 1; done; exit 1"
    )
    body = jobset(
        "peers",
        shell_job("leader", serve),
        shell_job("worker", fetch),
        successPolicy={"operator": "All", "targetReplicatedJobs": ["worker"]},
    )
    await node_client.create(api.JOBSETS, body, node_namespace)
    await completed(node_client, node_namespace, "peers")
    logs = await pod_logs(node_kube, node_client, node_namespace, "peers", "worker")
    assert [line.splitlines()[-1] for line in logs.values()] == [token], logs
    jobs = await jobs_of(node_client, node_namespace, "peers")
    assert {j["metadata"]["name"] for j in jobs} >= {"peers-worker-0"}
    node_controller.assert_clean()


async def test_the_provisioner_keeps_a_retain_volume_and_removes_a_delete_one(
    node_kube: Kube, node_client: KubeClient, node_namespace: str
) -> None:
    """The test provisioner's volumes are directories on this host: a pod's bytes land there;
    deleting the claim removes the directory for reclaim policy Delete (``standard``) and keeps
    it, with the bytes, for Retain (``retain``). No JobSet: this is the storage under the proofs
    above."""
    directories = {}
    for storage_class in ("standard", "retain"):
        name = f"bytes-{storage_class}"
        claim = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": name},
            "spec": claim_template("data", "1Gi", storage_class)["spec"],
        }
        await node_client.create(CLAIMS, claim, node_namespace)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox",
                        "command": ["sh", "-c", f"echo {storage_class} > /data/file"],
                        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                    }
                ],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": name}}],
            },
        }
        await node_client.create(PODS, pod, node_namespace)
        directories[storage_class] = await directory_of(
            node_kube.cluster, node_client, node_namespace, name
        )
        await wait_for(
            functools.partial(node_client.get, PODS, name, node_namespace),
            lambda found: (found.get("status") or {}).get("phase") == "Succeeded",
            f"pod {name} to succeed",
            seconds=SECONDS,
        )
        assert (directories[storage_class] / "file").read_text() == f"{storage_class}\n"
        volume = (await node_client.get(CLAIMS, name, node_namespace))["spec"]["volumeName"]
        await node_client.delete(PODS, name, node_namespace)
        await node_client.delete(CLAIMS, name, node_namespace)
        await wait_gone(node_client, CLAIMS, name, node_namespace, seconds=SECONDS)
        if storage_class == "standard":
            await wait_gone(node_client, VOLUMES, volume, None, seconds=SECONDS)
            assert not directories[storage_class].exists()
        else:
            released = await wait_for(
                functools.partial(node_client.get, VOLUMES, volume, None),
                lambda found: (found.get("status") or {}).get("phase") == "Released",
                f"volume {volume} Released",
                seconds=SECONDS,
            )
            assert released["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
            assert (directories[storage_class] / "file").read_text() == "retain\n"
            await node_client.delete(VOLUMES, volume, None)  # the test's own clean-up
