"""Checkpoints kept as VolumeSnapshots, with real bytes (issue 37): retention ``Snapshot`` and
``restorePolicy`` through the real node's CSI stack.

The controller runs as its own process; the snapshot-controller and the csi-snapshotter make the
snapshots it asks for (our driver copies the volume's directory), the external-provisioner makes
the restored claims from them (``dataSourceRef``), and busybox pods write and read the bytes.
What each proof rests on: the pods' logs (``kubectl logs``), the snapshot copies on this host
(the driver's state directory), and the order in which the API server stored the writes.

**Logs.** Once a run completes, retention releases its claim and the controller deletes the
finished Jobs that mount it (pvc-protection would keep the claim for their pods), so the pods and
their logs go within about a second of the last pod's exit. The pods whose logs prove something
and run last are *held*: after their command they wait for a file in an ``emptyDir`` of their own
(``gate``), which the test writes on this host (in the kubelet's pod directory) once it has read
their logs.

**Order.** "The claim is deleted only once its snapshot is readyToUse" is read from a watch on
claims and VolumeSnapshots opened before the JobSet is created: the event in which the snapshot
first says ``readyToUse: true`` and the event in which the claim first carries a
``deletionTimestamp``. Their resourceVersions are etcd revisions of this control plane's one
etcd, a single counter over every write, so the smaller one was stored first. The audit log
says who deleted the claim (the controller, once).
"""

from __future__ import annotations

import functools
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from kubernetes_asyncio.client.exceptions import ApiException

from controller.jobset import api
from controller.jobset.volumes.model import SNAPSHOT_CLAIM_LABEL
from controller.jobset.volumes.podscope import COMPLETION_INDEX_ANNOTATION, pod_claim_name
from controller.runtime.client import (
    CLAIMS,
    VOLUME_GROUP_SNAPSHOTS,
    VOLUME_SNAPSHOTS,
    KubeClient,
    Resource,
)
from controller.runtime.manager import USER_AGENT
from localcluster import audit, csi
from localcluster.cluster import LocalCluster
from tests.helpers import Kube, current, wait_for
from tests.node.test_data import SECONDS, completed, directory_of, log_of, pod_logs, shell_job
from tests.support.jobsets import condition, jobset, settled_process
from tests.support.podscope import policy_in_effect
from tests.support.recording import first_revision, watch_events
from tests.support.volumes_e2e import (
    ControllerProcesses,
    claim_template,
    example,
    phase,
    pods_of,
    template_status,
    wait_event,
    wait_exists,
    wait_gone,
)

Obj = dict[str, Any]
SNAPSHOT_CONTENTS = Resource(
    "snapshot.storage.k8s.io",
    "v1",
    "volumesnapshotcontents",
    "VolumeSnapshotContent",
    namespaced=False,
)
# Resume from the checkpoint when the claim holds one; else save one with a random token (drawn
# in the pod: the test learns it from the log, so only the volume can carry it to the next run).
RANK_SCRIPT = (
    'if [ -f /ckpt/rank ]; then echo "found $(cat /ckpt/rank)"; '
    "else echo \"rank $(hostname) $(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \\n')\" "
    '> /ckpt/rank; echo "wrote $(cat /ckpt/rank)"; fi'
)


# ------------------------------------------------------------------------------- helpers


def held(rjob: Obj) -> Obj:
    """``rjob`` with its pods held after their command, until ``read_held`` opens their gate."""
    spec = rjob["template"]["spec"]["template"]["spec"]
    container = spec["containers"][0]
    script = container["command"][-1].rstrip("\n")
    container["command"] = ["sh", "-c", f"{script}\nwhile [ ! -f /gate/open ]; do sleep 0.2; done"]
    container.setdefault("volumeMounts", []).append({"name": "gate", "mountPath": "/gate"})
    spec.setdefault("volumes", []).append({"name": "gate", "emptyDir": {}})
    # sh as PID 1 ignores SIGTERM: a held pod that is deleted goes at once, not after 30 s.
    spec["terminationGracePeriodSeconds"] = 1
    return rjob


async def printed(
    kube: Kube, client: KubeClient, namespace: str, name: str, rjob: str, count: int
) -> list[tuple[Obj, str]]:
    """(pod, log) of the ``count`` running pods of ``rjob`` (not being deleted), once each has
    printed."""

    async def observe() -> list[tuple[Obj, str]]:
        found = []
        selector = f"{api.REPLICATED_JOB_NAME}={rjob}"
        for pod in await pods_of(client, namespace, name, selector):
            if phase(pod) != "Running" or pod["metadata"].get("deletionTimestamp"):
                continue
            try:
                log = await log_of(kube, namespace, pod["metadata"]["name"])
            except ApiException:
                continue
            if log:
                found.append((pod, log))
        return found

    return await wait_for(
        observe,
        lambda found: len(found) == count,
        f"{count} pods of {name}/{rjob} running, having printed",
        seconds=SECONDS,
    )


def open_gate(cluster: LocalCluster, pod: Obj) -> None:
    """Let a held pod finish: the file it waits for, in its emptyDir's directory on this host."""
    assert cluster.node is not None
    volumes = cluster.node.kubelet_root / "pods" / pod["metadata"]["uid"] / "volumes"
    (volumes / "kubernetes.io~empty-dir" / "gate" / "open").write_text("")


def by_rank(logs: list[tuple[Obj, str]]) -> dict[str, str]:
    """Job index → log."""
    return {pod["metadata"]["labels"][api.JOB_INDEX]: log for pod, log in logs}


async def read_held(
    kube: Kube,
    client: KubeClient,
    cluster: LocalCluster,
    namespace: str,
    name: str,
    rjob: str,
    count: int,
) -> dict[str, str]:
    """Job index → log of the ``count`` held pods of ``rjob``, once each has printed; then their
    gates are opened."""
    logs = await printed(kube, client, namespace, name, rjob, count)
    for pod, _ in logs:
        open_gate(cluster, pod)
    return by_rank(logs)


@asynccontextmanager
async def recording(client: KubeClient, namespace: str) -> AsyncIterator[list[Obj]]:
    """Every watch event of the namespace's claims and VolumeSnapshots from now on."""
    async with watch_events(client, namespace, (CLAIMS, VOLUME_SNAPSHOTS)) as seen:
        yield seen


async def claim_deleted(seen: list[Obj], client: KubeClient, namespace: str, claim: str) -> None:
    """Wait until the claim is gone and its DELETED event is in the record."""
    await wait_gone(client, CLAIMS, claim, namespace, seconds=SECONDS)
    await wait_for(
        current(lambda: [e for e in seen if e["type"] == "DELETED"]),
        lambda deleted: any(e["object"]["metadata"]["name"] == claim for e in deleted),
        f"the DELETED event of claim {claim} in the test's watch",
        seconds=SECONDS,
    )


def assert_ready_before_deleted(
    seen: list[Obj], cluster: LocalCluster, namespace: str, claim: Obj, snapshot: Obj
) -> None:
    """The snapshot was stored readyToUse before the claim was stored with a
    deletionTimestamp, and the one DELETE of the claim was the controller's."""
    name, uid = claim["metadata"]["name"], claim["metadata"]["uid"]
    ready = first_revision(
        seen,
        "VolumeSnapshot",
        snapshot["metadata"]["name"],
        lambda s: (s.get("status") or {}).get("readyToUse") is True,
    )
    deleting = first_revision(
        seen,
        "PersistentVolumeClaim",
        name,
        lambda c: c["metadata"]["uid"] == uid and bool(c["metadata"].get("deletionTimestamp")),
    )
    assert ready is not None and deleting is not None, (ready, deleting, name)
    assert ready < deleting, f"claim {name} deleted (revision {deleting}) before ready ({ready})"
    # The objects' own timestamps agree (RFC 3339 UTC of one format: string order is time order).
    (gone,) = [
        e["object"]
        for e in seen
        if e["type"] == "DELETED" and e["object"]["metadata"]["uid"] == uid
    ]
    assert snapshot["status"]["creationTime"] <= gone["metadata"]["deletionTimestamp"]
    writes = [
        (
            str(e.get("verb")),
            str(e.get("userAgent", "")).split(" ")[0],
            int((e.get("responseStatus") or {}).get("code") or 0),
        )
        for e in audit.entries(cluster.audit_log, name)
        if e.get("verb") in ("delete", "update", "patch")
        and (e.get("objectRef") or {}).get("resource") == "persistentvolumeclaims"
        and (e.get("objectRef") or {}).get("namespace") == namespace
        and (e.get("objectRef") or {}).get("name") == name
    ]
    deletes = [(agent, code) for verb, agent, code in writes if verb == "delete"]
    # One DELETE went through, the controller's. Another may have been refused by its
    # preconditions: the snapshot controller takes its finalizer off the claim as the snapshot
    # becomes ready, so a delete judged on the version before is answered 409 and judged again.
    done = [agent for agent, code in deletes if code < 300]
    refused = [code for _, code in deletes if code >= 300]
    assert len(done) == 1 and done[0].startswith(USER_AGENT + "/"), writes
    assert set(refused) <= {409}, writes


async def snapshots_of(client: KubeClient, namespace: str, claim: str) -> list[Obj]:
    listed = await client.list(
        VOLUME_SNAPSHOTS, namespace, label_selector=f"{SNAPSHOT_CLAIM_LABEL}={claim}"
    )
    items: list[Obj] = listed["items"]
    return items


async def ready_snapshot_of(client: KubeClient, namespace: str, claim: Obj) -> Obj:
    """The controller's snapshot of exactly this claim object, once readyToUse."""
    name = claim["metadata"]["name"]
    wanted = f"{name}-{claim['metadata']['uid'].replace('-', '')[:8]}"
    found = await wait_for(
        lambda: snapshots_of(client, namespace, name),
        lambda snaps: any(
            s["metadata"]["name"] == wanted and (s.get("status") or {}).get("readyToUse") is True
            for s in snaps
        ),
        f"VolumeSnapshot {wanted} of claim {name} readyToUse",
        seconds=SECONDS,
    )
    return next(s for s in found if s["metadata"]["name"] == wanted)


async def copy_on_host(cluster: LocalCluster, client: KubeClient, snapshot: Obj) -> Path:
    """The snapshot's copy in the driver's state directory on this host."""
    content = await client.get(
        SNAPSHOT_CONTENTS, snapshot["status"]["boundVolumeSnapshotContentName"], None
    )
    assert content["spec"]["driver"] == csi.DRIVER_NAME, content["spec"]
    assert cluster.csi is not None
    handle = str(content["status"]["snapshotHandle"])
    return cluster.csi.state_dir / "snapshots" / handle


async def delete_and_wait(client: KubeClient, namespace: str, name: str) -> None:
    """Delete the JobSet and wait until it and its pods are gone (the next run's Jobs and pods
    have the same names)."""
    await client.delete(api.JOBSETS, name, namespace)
    await wait_gone(client, api.JOBSETS, name, namespace, seconds=SECONDS)
    await wait_for(
        lambda: pods_of(client, namespace, name),
        lambda pods: not pods,
        f"the pods of JobSet {name}'s first run to be gone",
        seconds=SECONDS,
    )


def restored_from(claim: Obj) -> str | None:
    ref = claim["spec"].get("dataSourceRef") or {}
    if ref.get("kind") != "VolumeSnapshot" or ref.get("apiGroup") != "snapshot.storage.k8s.io":
        return None
    return str(ref["name"])


def checkpointing(name: str, *, scope: str, pods: int = 1, replicas: int = 1, **policy: Any) -> Obj:
    """JobSet ``name``: ``trainer`` (held) runs RANK_SCRIPT with its ``ckpt`` claim
    (csi-immediate, ``scope``) restored from the newest snapshot (empty the first time);
    ``policy``: its retentionPolicy and snapshotPolicy."""
    trainer = shell_job(
        "trainer", RANK_SCRIPT, replicas=replicas, pods=pods, mounts={"ckpt": "/ckpt"}
    )
    return jobset(
        name,
        held(trainer),
        volumeClaimPolicies=[
            {
                "scope": scope,
                "templates": [claim_template("ckpt", "1Mi", csi.IMMEDIATE_CLASS)],
                "restorePolicy": {"source": "NewestSnapshot", "whenMissing": "CreateEmpty"},
                **policy,
            }
        ],
    )


# ------------------------------------------------------------------------------- proofs


async def test_a_rerun_reads_the_checkpoint_of_the_run_before_from_its_snapshot(
    node_cluster: LocalCluster,
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    node_controller: ControllerProcesses,
) -> None:
    """manifests/examples/snapshot-checkpoints.yaml, applied twice. Run 1: the claim starts
    empty (no snapshot yet: whenMissing CreateEmpty), A saves a checkpoint with a random token,
    B prints it; the JobSet completes; the controller's VolumeSnapshot becomes readyToUse
    through the real snapshot-controller and csi-snapshotter (its copy on the host holds A's
    bytes), and only then is the claim deleted, by the controller. The JobSet is deleted and the
    same manifest applied again. Run 2: the new claim has dataSourceRef to that snapshot (and the
    status says restoredFrom it), A resumes from it, B prints run 1's checkpoint; then run 2's
    claim goes the same way and historyLimit 1 deletes run 1's snapshot and its copy."""
    body = example("snapshot-checkpoints.yaml")
    name, claim_name = body["metadata"]["name"], "ckpt-snapshot-resume"
    assert [r["name"] for r in body["spec"]["replicatedJobs"]] == ["A", "B"]
    held(body["spec"]["replicatedJobs"][1])  # B runs last: its log is read while it waits

    async def run() -> tuple[str, str]:
        """A's and B's logs of a run that then completes (A's pod stays until then)."""
        logs = await read_held(node_kube, node_client, node_cluster, node_namespace, name, "B", 1)
        (wrote,) = (await pod_logs(node_kube, node_client, node_namespace, name, "A")).values()
        await completed(node_client, node_namespace, name)
        return wrote, logs["0"]

    async with recording(node_client, node_namespace) as seen:
        await node_client.create(api.JOBSETS, body, node_namespace)
        first = await wait_exists(node_client, CLAIMS, claim_name, node_namespace, seconds=SECONDS)
        assert restored_from(first) is None, first["spec"]
        wrote, read = await run()
        assert wrote.startswith("started fresh, saved checkpoint "), wrote
        checkpoint = wrote.removeprefix("started fresh, saved ")
        assert read == checkpoint, read
        snapshot = await ready_snapshot_of(node_client, node_namespace, first)
        await claim_deleted(seen, node_client, node_namespace, claim_name)
    assert_ready_before_deleted(seen, node_cluster, node_namespace, first, snapshot)
    copy = await copy_on_host(node_cluster, node_client, snapshot)
    assert (copy / "checkpoint").read_text().strip() == checkpoint

    await delete_and_wait(node_client, node_namespace, name)
    await node_client.create(api.JOBSETS, body, node_namespace)
    second = await wait_exists(node_client, CLAIMS, claim_name, node_namespace, seconds=SECONDS)
    assert restored_from(second) == snapshot["metadata"]["name"], second["spec"]
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    await wait_for(
        lambda: node_client.get(api.JOBSETS, name, node_namespace),
        lambda js: template_status(js, "ckpt").get("restoredFrom") == snapshot["metadata"]["name"],
        f"JobSet {name}'s status: claim restored from {snapshot['metadata']['name']}",
        seconds=SECONDS,
    )
    resumed, read = await run()
    assert resumed == f"resumed from {checkpoint}", resumed
    assert read == checkpoint, read

    # Run 2 is kept the same way, and only the newest snapshot stays (historyLimit: 1).
    newer = await ready_snapshot_of(node_client, node_namespace, second)
    await wait_gone(node_client, CLAIMS, claim_name, node_namespace, seconds=SECONDS)
    await wait_for(
        lambda: snapshots_of(node_client, node_namespace, claim_name),
        lambda snaps: [s["metadata"]["name"] for s in snaps] == [newer["metadata"]["name"]],
        f"only the newest snapshot of {claim_name} left",
        seconds=SECONDS,
    )
    await wait_for(
        current(copy.exists), lambda exists: not exists, f"{copy} removed", seconds=SECONDS
    )
    node_controller.assert_clean()


async def test_per_rank_checkpoints_come_back_rank_by_rank(
    node_cluster: LocalCluster,
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    node_controller: ControllerProcesses,
) -> None:
    """Job scope: 2 Jobs, one claim each; each rank saves its own random checkpoint. On
    completion each claim is snapshotted and deleted only after its snapshot is ready. Applied
    again, each rank's new claim starts from its own rank's snapshot, and each rank's pod finds
    exactly what that rank wrote in run 1."""
    name = "ranks"
    body = checkpointing(
        name,
        scope="Job",
        replicas=2,
        retentionPolicy={"whenCompleted": "Snapshot"},
        snapshotPolicy={"volumeSnapshotClassName": csi.SNAPSHOT_CLASS},
    )
    ranks = ("0", "1")
    claim_names = {r: f"ckpt-{name}-trainer-{r}" for r in ranks}

    async def rank_logs() -> dict[str, str]:
        """Job index → the log of that Job's pod, in a run that then completes."""
        logs = await read_held(
            node_kube, node_client, node_cluster, node_namespace, name, "trainer", len(ranks)
        )
        await completed(node_client, node_namespace, name)
        return logs

    async with recording(node_client, node_namespace) as seen:
        await node_client.create(api.JOBSETS, body, node_namespace)
        firsts = {
            r: await wait_exists(node_client, CLAIMS, c, node_namespace, seconds=SECONDS)
            for r, c in claim_names.items()
        }
        wrote = await rank_logs()
        assert sorted(wrote) == list(ranks), wrote
        saved = {r: log.removeprefix("wrote ") for r, log in wrote.items()}
        for r in ranks:
            assert saved[r].startswith(f"rank {name}-trainer-{r}-0 "), wrote
        assert saved["0"] != saved["1"]
        snapshots = {
            r: await ready_snapshot_of(node_client, node_namespace, firsts[r]) for r in ranks
        }
        for r in ranks:
            await claim_deleted(seen, node_client, node_namespace, claim_names[r])
    for r in ranks:
        assert_ready_before_deleted(seen, node_cluster, node_namespace, firsts[r], snapshots[r])
        copy = await copy_on_host(node_cluster, node_client, snapshots[r])
        assert (copy / "rank").read_text().strip() == saved[r]

    await delete_and_wait(node_client, node_namespace, name)
    await node_client.create(api.JOBSETS, body, node_namespace)
    for r, c in claim_names.items():
        again = await wait_exists(node_client, CLAIMS, c, node_namespace, seconds=SECONDS)
        assert restored_from(again) == snapshots[r]["metadata"]["name"], (r, again["spec"])
    await wait_for(
        lambda: node_client.get(api.JOBSETS, name, node_namespace),
        lambda js: template_status(js, "ckpt").get("restored") == len(ranks),
        f"JobSet {name}'s status: {len(ranks)} claims restored",
        seconds=SECONDS,
    )
    assert await rank_logs() == {r: f"found {saved[r]}" for r in ranks}
    node_controller.assert_clean()


async def test_a_rank_scaled_away_is_snapshotted_and_comes_back_from_its_snapshot(
    node_cluster: LocalCluster,
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    node_controller: ControllerProcesses,
) -> None:
    """whenScaled: Snapshot. Two ranks run (held) and have saved their tokens; replicas goes
    from 2 to 1: rank 1's Job goes, its claim is snapshotted and deleted only once the snapshot
    is ready; rank 0 runs on with its claim untouched. Replicas back to 2: rank 1's new claim
    starts from its snapshot and its new pod finds the token rank 1 saved before."""
    name = "scaled"
    body = checkpointing(
        name,
        scope="Job",
        replicas=2,
        retentionPolicy={"whenScaled": "Snapshot"},
        snapshotPolicy={"volumeSnapshotClassName": csi.SNAPSHOT_CLASS},
    )
    rank0, rank1 = (f"ckpt-{name}-trainer-{r}" for r in ("0", "1"))

    async def scale(replicas: int) -> None:
        await node_client.patch(
            api.JOBSETS,
            name,
            [{"op": "replace", "path": "/spec/replicatedJobs/0/replicas", "value": replicas}],
            node_namespace,
            patch_type="json",
        )

    async with recording(node_client, node_namespace) as seen:
        await node_client.create(api.JOBSETS, body, node_namespace)
        first = await printed(node_kube, node_client, node_namespace, name, "trainer", 2)
        saved = {r: log.removeprefix("wrote ") for r, log in by_rank(first).items()}
        assert sorted(saved) == ["0", "1"] and saved["0"] != saved["1"], saved
        kept = await node_client.get(CLAIMS, rank0, node_namespace)
        scaled = await node_client.get(CLAIMS, rank1, node_namespace)
        await scale(1)
        snapshot = await ready_snapshot_of(node_client, node_namespace, scaled)
        await claim_deleted(seen, node_client, node_namespace, rank1)
    assert_ready_before_deleted(seen, node_cluster, node_namespace, scaled, snapshot)
    copy = await copy_on_host(node_cluster, node_client, snapshot)
    assert (copy / "rank").read_text().strip() == saved["1"]
    # Rank 0 ran on: its claim is the same object, and it was never snapshotted.
    assert (await node_client.get(CLAIMS, rank0, node_namespace))["metadata"]["uid"] == (
        kept["metadata"]["uid"]
    )
    assert await snapshots_of(node_client, node_namespace, rank0) == []

    await scale(2)
    again = await wait_exists(node_client, CLAIMS, rank1, node_namespace, seconds=SECONDS)
    assert restored_from(again) == snapshot["metadata"]["name"], again["spec"]
    second = await printed(node_kube, node_client, node_namespace, name, "trainer", 2)
    assert by_rank(second) == {"0": f"wrote {saved['0']}", "1": f"found {saved['1']}"}
    for pod, _ in second:
        open_gate(node_cluster, pod)
    await completed(node_client, node_namespace, name)
    node_controller.assert_clean()


async def test_pod_scope_ranks_come_back_from_one_group_snapshot(
    node_cluster: LocalCluster,
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    node_controller: ControllerProcesses,
) -> None:
    """snapshotPolicy.volumeGroupSnapshotClassName, Pod scope: one Job of 2 pods, a claim per
    pod, each pod saving its own random checkpoint. On completion the controller takes one
    VolumeGroupSnapshot of both claims (no snapshot of its own per claim); the real
    snapshot-controller and csi-snapshotter make a member snapshot of each, all copied in one
    call of our driver; each claim is deleted only once its member is ready. Applied again, each
    pod's new claim starts from its member of that group, and each pod finds exactly what that
    rank saved in run 1."""
    ns, name = node_namespace, "grouped"
    body = checkpointing(
        name,
        scope="Pod",
        pods=2,
        retentionPolicy={"whenCompleted": "Snapshot"},
        snapshotPolicy={"volumeGroupSnapshotClassName": csi.GROUP_SNAPSHOT_CLASS},
    )
    pods = ("0", "1")
    claim_names = {p: pod_claim_name("ckpt", name, "trainer", 0, int(p)) for p in pods}

    async def pod_logs_by_index() -> dict[str, str]:
        """Completion index → log of that pod, in a run that then completes."""
        logs = await printed(node_kube, node_client, ns, name, "trainer", len(pods))
        for pod, _ in logs:
            open_gate(node_cluster, pod)
        await completed(node_client, ns, name)
        return {p["metadata"]["annotations"][COMPLETION_INDEX_ANNOTATION]: log for p, log in logs}

    async with policy_in_effect(node_kube, ns), recording(node_client, ns) as seen:
        await node_client.create(api.JOBSETS, body, ns)
        firsts = {
            p: await wait_exists(node_client, CLAIMS, c, ns, seconds=SECONDS)
            for p, c in claim_names.items()
        }
        wrote = await pod_logs_by_index()
        saved = {p: log.removeprefix("wrote ") for p, log in wrote.items()}
        assert sorted(saved) == list(pods) and saved["0"] != saved["1"], wrote
        group = await ready_group(node_client, ns)
        members = {
            m["spec"]["source"]["persistentVolumeClaimName"]: m
            for m in (await node_client.list(VOLUME_SNAPSHOTS, ns))["items"]
            if any(o.get("uid") == group["metadata"]["uid"] for o in m["metadata"].get(
                "ownerReferences") or [])
        }  # fmt: skip
        assert sorted(members) == sorted(claim_names.values()), sorted(members)
        for p in pods:  # no snapshot of its own: the group took them all
            assert await snapshots_of(node_client, ns, claim_names[p]) == []
        for p in pods:
            await claim_deleted(seen, node_client, ns, claim_names[p])
    for p in pods:
        member = await node_client.get(
            VOLUME_SNAPSHOTS, members[claim_names[p]]["metadata"]["name"], ns
        )
        assert_ready_before_deleted(seen, node_cluster, ns, firsts[p], member)
        copy = await copy_on_host(node_cluster, node_client, member)
        assert (copy / "rank").read_text().strip() == saved[p]

    await delete_and_wait(node_client, ns, name)
    async with policy_in_effect(node_kube, ns):
        await node_client.create(api.JOBSETS, body, ns)
        for p, c in claim_names.items():
            again = await wait_exists(node_client, CLAIMS, c, ns, seconds=SECONDS)
            assert restored_from(again) == members[c]["metadata"]["name"], (p, again["spec"])
        assert await pod_logs_by_index() == {p: f"found {saved[p]}" for p in pods}
    node_controller.assert_clean()


async def ready_group(client: KubeClient, namespace: str) -> Obj:
    """The namespace's one VolumeGroupSnapshot, once readyToUse."""
    listed = await wait_for(
        lambda: client.list(VOLUME_GROUP_SNAPSHOTS, namespace),
        lambda found: (
            len(found["items"]) == 1
            and (found["items"][0].get("status") or {}).get("readyToUse") is True
        ),
        "one VolumeGroupSnapshot of the JobSet's claims, readyToUse",
        seconds=SECONDS,
    )
    group: Obj = listed["items"][0]
    return group


async def test_a_failed_snapshot_keeps_the_claim_until_the_user_fixes_it(
    node_cluster: LocalCluster,
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    node_controller: ControllerProcesses,
) -> None:
    """whenCompleted: Snapshot with snapshotPolicy.volumeSnapshotClassName
    ``csi-snapshot-failing``, a class whose snapshots our driver refuses (its test knob, a class
    parameter the csi-snapshotter passes to CreateSnapshot). A pod writes a token into the
    claim and the JobSet completes; the controller's VolumeSnapshot reports the driver's error
    (status.error, through the real csi-snapshotter and snapshot-controller); VolumeSnapshotsReady
    is False with reason SnapshotFailed and a Warning Event SnapshotFailed names the claim; once
    the controller has settled, the claim is still there, the same object, not being deleted,
    and its bytes on this host are the token. Then the user's fix (docs/volumes.md): the
    JobSet's snapshotPolicy names ``csi-snapshot`` and the failed VolumeSnapshot is deleted; the
    controller takes the snapshot again, it becomes readyToUse with the token in its copy, and
    only then is the claim deleted, by the controller."""
    ns, name = node_namespace, "unlucky"
    claim_name = f"ckpt-{name}"
    token = secrets.token_hex(8)
    body = jobset(
        name,
        shell_job("trainer", f"echo {token} > /ckpt/token", mounts={"ckpt": "/ckpt"}),
        volumeClaimPolicies=[
            {
                "templates": [claim_template("ckpt", "1Mi", csi.IMMEDIATE_CLASS)],
                "retentionPolicy": {"whenCompleted": "Snapshot"},
                "snapshotPolicy": {"volumeSnapshotClassName": csi.FAILING_SNAPSHOT_CLASS},
            }
        ],
    )

    async with recording(node_client, ns) as seen:
        await node_client.create(api.JOBSETS, body, ns)
        directory = await directory_of(node_cluster, node_client, ns, claim_name)
        claim = await node_client.get(CLAIMS, claim_name, ns)
        await completed(node_client, ns, name)
        wanted = f"{claim_name}-{claim['metadata']['uid'].replace('-', '')[:8]}"

        # The snapshot reports the driver's error, through the real sidecars.
        failed = await wait_for(
            functools.partial(node_client.get, VOLUME_SNAPSHOTS, wanted, ns),
            lambda s: bool(((s.get("status") or {}).get("error") or {}).get("message")),
            f"VolumeSnapshot {wanted} reporting an error",
            seconds=SECONDS,
        )
        error = failed["status"]["error"]["message"]
        assert csi.FAIL_SNAPSHOTS_PARAMETER in error and "FailedPrecondition" in error, error
        assert failed["status"].get("readyToUse") is not True, failed["status"]
        assert failed["spec"]["volumeSnapshotClassName"] == csi.FAILING_SNAPSHOT_CLASS
        assert failed["spec"]["source"] == {"persistentVolumeClaimName": claim_name}

        # The JobSet says why the claim is kept: the condition and a Warning Event.
        said = await wait_for(
            lambda: node_client.get(api.JOBSETS, name, ns),
            lambda js: (
                (condition(js, "VolumeSnapshotsReady") or {}).get("reason") == "SnapshotFailed"
            ),
            f"JobSet {name}: VolumeSnapshotsReady reason SnapshotFailed",
            seconds=SECONDS,
        )
        ready = condition(said, "VolumeSnapshotsReady") or {}
        assert ready["status"] == "False", ready
        assert claim_name in ready["message"] and wanted in ready["message"], ready
        event = await wait_event(
            node_kube,
            ns,
            name,
            "SnapshotFailed",
            event_type="Warning",
            contains=claim_name,
            seconds=SECONDS,
        )
        assert wanted in event.message, event

        # Once the controller has processed all that, the claim is kept, with its bytes.
        await settled_process(node_controller.replicas[-1], node_client, ns)
        kept = await node_client.get(CLAIMS, claim_name, ns)
        assert kept["metadata"]["uid"] == claim["metadata"]["uid"]
        assert not kept["metadata"].get("deletionTimestamp"), kept["metadata"]
        assert (directory / "token").read_text().strip() == token
        assert [s["metadata"]["name"] for s in await snapshots_of(node_client, ns, claim_name)] == [
            wanted
        ]

        # The user's fix: a class that works, then the failed snapshot deleted. The JobSet's
        # change is processed before the deletion (settled), so the snapshot taken again is of
        # the new class.
        await node_client.patch(
            api.JOBSETS,
            name,
            [
                {
                    "op": "replace",
                    "path": "/spec/volumeClaimPolicies/0/snapshotPolicy/volumeSnapshotClassName",
                    "value": csi.SNAPSHOT_CLASS,
                }
            ],
            ns,
            patch_type="json",
        )
        await settled_process(node_controller.replicas[-1], node_client, ns)
        await node_client.delete(VOLUME_SNAPSHOTS, wanted, ns)
        snapshot = await wait_for(
            functools.partial(node_client.get, VOLUME_SNAPSHOTS, wanted, ns),
            lambda s: (
                s["metadata"]["uid"] != failed["metadata"]["uid"]
                and (s.get("status") or {}).get("readyToUse") is True
            ),
            f"VolumeSnapshot {wanted} taken again and readyToUse",
            seconds=SECONDS,
        )
        assert snapshot["spec"]["volumeSnapshotClassName"] == csi.SNAPSHOT_CLASS
        await claim_deleted(seen, node_client, ns, claim_name)
    assert_ready_before_deleted(seen, node_cluster, ns, claim, snapshot)
    copy = await copy_on_host(node_cluster, node_client, snapshot)
    assert (copy / "token").read_text().strip() == token
    await wait_for(
        lambda: node_client.get(api.JOBSETS, name, ns),
        lambda js: (condition(js, "VolumeSnapshotsReady") or {}).get("status") == "True",
        f"JobSet {name}: VolumeSnapshotsReady True once no claim waits",
        seconds=SECONDS,
    )
    node_controller.assert_clean()
