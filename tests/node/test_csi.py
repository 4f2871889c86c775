"""The CSI stack of the real node (issue 37, step 1): real sidecars, a real kubelet, our driver.

Each test goes through the Kubernetes storage stack as a cluster with a CSI driver runs it: the
external-provisioner creates the volume (CreateVolume) and its PV, the kubelet publishes it into
the pod (NodePublishVolume, a bind mount), the external-resizer and the kubelet expand it, the
snapshot-controller and the csi-snapshotter take snapshots. Bytes are written and read by
busybox pods on the node; what the driver did is checked on the host too (its state directory).
No JobSet controller is involved: this is the storage the later steps build on.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from localcluster import csi
from localcluster.cluster import LocalCluster
from localcluster.node.realnode import NODE_NAME
from tests.helpers import Kube, wait_for

Obj = dict[str, Any]
# Pulls, sandboxes, provisioning and the kubelet's volume reconciler take seconds each; the
# kubelet notices an online expansion on its own schedule.
SECONDS = 180
SNAPSHOTS = "/apis/snapshot.storage.k8s.io/v1"
GROUP_SNAPSHOTS = "/apis/groupsnapshot.storage.k8s.io/v1"


# ------------------------------------------------------------------------------- helpers


def claim(name: str, storage_class: str, size: str = "1Mi", source: str | None = None) -> Obj:
    spec: Obj = {
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": storage_class,
        "resources": {"requests": {"storage": size}},
    }
    if source is not None:
        spec["dataSourceRef"] = {
            "apiGroup": "snapshot.storage.k8s.io",
            "kind": "VolumeSnapshot",
            "name": source,
        }
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": spec,
    }


def pod(name: str, claim_name: str, script: str, env: dict[str, str] | None = None) -> Obj:
    """A busybox pod that runs ``script`` with the claim mounted at /data."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "command": ["sh", "-c", script],
                    "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim_name}}],
        },
    }


async def create(kube: Kube, namespace: str, body: Obj) -> Obj:
    kind = body["kind"]
    path = {
        "PersistentVolumeClaim": f"/api/v1/namespaces/{namespace}/persistentvolumeclaims",
        "Pod": f"/api/v1/namespaces/{namespace}/pods",
        "VolumeSnapshot": f"{SNAPSHOTS}/namespaces/{namespace}/volumesnapshots",
        "VolumeGroupSnapshot": f"{GROUP_SNAPSHOTS}/namespaces/{namespace}/volumegroupsnapshots",
    }[kind]
    created: Obj = await kube.raw("POST", path, body)
    assert created.get("kind") == kind, created
    return created


async def get_claim(kube: Kube, namespace: str, name: str) -> Obj:
    found: Obj = await kube.raw(
        "GET", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}"
    )
    return found


async def get_volume(kube: Kube, name: str) -> Obj:
    found: Obj = await kube.raw("GET", f"/api/v1/persistentvolumes/{name}")
    return found


async def bound(kube: Kube, namespace: str, name: str) -> Obj:
    return await wait_for(
        lambda: get_claim(kube, namespace, name),
        lambda c: (c.get("status") or {}).get("phase") == "Bound",
        f"claim {name} Bound",
        seconds=SECONDS,
    )


async def finished(kube: Kube, namespace: str, name: str) -> str:
    """Wait until the pod ended; it must have succeeded. Its log."""
    path = f"/api/v1/namespaces/{namespace}/pods/{name}"

    async def read() -> Obj:
        found: Obj = await kube.raw("GET", path)
        return found

    done = await wait_for(
        read,
        lambda p: (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"),
        f"pod {name} to finish",
        seconds=SECONDS,
    )
    log: str = await kube.core.read_namespaced_pod_log(name, namespace)
    assert done["status"]["phase"] == "Succeeded", (name, done["status"], log)
    return log.strip()


async def run(kube: Kube, namespace: str, name: str, claim_name: str, script: str) -> str:
    await create(kube, namespace, pod(name, claim_name, script))
    return await finished(kube, namespace, name)


def host_directory(cluster: LocalCluster, volume: Obj) -> Path:
    """The volume's directory on this host: the driver's state directory and the PV's handle."""
    assert cluster.csi is not None
    handle: str = volume["spec"]["csi"]["volumeHandle"]
    return cluster.csi.state_dir / "volumes" / handle


def is_ours(volume: Obj) -> None:
    """The PV was made by the external-provisioner for our driver (not the hostPath one)."""
    assert volume["spec"]["csi"]["driver"] == csi.DRIVER_NAME, volume["spec"]
    annotations = volume["metadata"].get("annotations") or {}
    assert annotations.get("pv.kubernetes.io/provisioned-by") == csi.DRIVER_NAME, annotations
    assert "hostPath" not in volume["spec"]


async def events_about(kube: Kube, namespace: str, name: str) -> list[Obj]:
    listed: Obj = await kube.raw(
        "GET",
        f"/api/v1/namespaces/{namespace}/events?fieldSelector=involvedObject.name%3D{name}",
    )
    items: list[Obj] = listed["items"]
    return items


async def snapshot_ready(kube: Kube, namespace: str, name: str) -> Obj:
    path = f"{SNAPSHOTS}/namespaces/{namespace}/volumesnapshots/{name}"

    async def read() -> Obj:
        found: Obj = await kube.raw("GET", path)
        return found

    return await wait_for(
        read,
        lambda s: (s.get("status") or {}).get("readyToUse") is True,
        f"VolumeSnapshot {name} readyToUse",
        seconds=SECONDS,
    )


# ------------------------------------------------------------------------------- proofs


async def test_an_immediate_claim_binds_and_holds_bytes(
    node_cluster: LocalCluster, node_kube: Kube, node_namespace: str
) -> None:
    """A claim of the Immediate class binds before any pod, through the external-provisioner
    and our driver's CreateVolume; a pod writes bytes, another pod reads them, and they are in
    the volume's directory under the driver's state directory on this host."""
    token = f"csi-bytes-{secrets.token_hex(8)}"
    await create(node_kube, node_namespace, claim("data", csi.IMMEDIATE_CLASS))
    found = await bound(node_kube, node_namespace, "data")
    volume = await get_volume(node_kube, found["spec"]["volumeName"])
    is_ours(volume)
    assert volume["spec"]["capacity"]["storage"] == "1Mi"

    await run(node_kube, node_namespace, "writer", "data", f"echo {token} > /data/file")
    read = await run(node_kube, node_namespace, "reader", "data", "cat /data/file")
    assert read == token
    directory = host_directory(node_cluster, volume)
    assert (directory / "file").read_text().strip() == token
    assert (directory / csi.CAPACITY_FILE).read_text().strip() == str(2**20)


async def test_a_wait_for_first_consumer_claim_binds_on_the_pods_node(
    node_cluster: LocalCluster, node_kube: Kube, node_namespace: str
) -> None:
    """A claim of the WaitForFirstConsumer class waits for its pod (the PV controller says so
    in an Event, and the claim has no volume then); once the scheduler placed the pod, the
    external-provisioner creates the volume with the topology of the pod's node, and the PV's
    node affinity names that node through our topology key (which the kubelet put on the Node
    from NodeGetInfo)."""
    await create(node_kube, node_namespace, claim("late", csi.WFFC_CLASS))
    await wait_for(
        lambda: events_about(node_kube, node_namespace, "late"),
        lambda events: any(e.get("reason") == "WaitForFirstConsumer" for e in events),
        "the WaitForFirstConsumer Event of claim late",
        seconds=SECONDS,
    )
    waiting = await get_claim(node_kube, node_namespace, "late")
    assert waiting["status"]["phase"] == "Pending", waiting["status"]
    assert not waiting["spec"].get("volumeName"), waiting["spec"]

    token = secrets.token_hex(8)
    log = await run(
        node_kube, node_namespace, "consumer", "late", f"echo {token} > /data/f && cat /data/f"
    )
    assert log == token
    found = await bound(node_kube, node_namespace, "late")
    consumer: Obj = await node_kube.raw("GET", f"/api/v1/namespaces/{node_namespace}/pods/consumer")
    landed = consumer["spec"]["nodeName"]
    assert landed == NODE_NAME
    annotations = found["metadata"].get("annotations") or {}
    assert annotations.get("volume.kubernetes.io/selected-node") == landed, annotations

    volume = await get_volume(node_kube, found["spec"]["volumeName"])
    is_ours(volume)
    terms = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [{"key": csi.TOPOLOGY_KEY, "operator": "In", "values": [landed]}]}
    ], terms
    node: Obj = await node_kube.raw("GET", f"/api/v1/nodes/{landed}")
    assert node["metadata"]["labels"].get(csi.TOPOLOGY_KEY) == landed
    csinode: Obj = await node_kube.raw("GET", f"/apis/storage.k8s.io/v1/csinodes/{landed}")
    drivers = {d["name"]: d for d in csinode["spec"]["drivers"]}
    assert drivers[csi.DRIVER_NAME]["topologyKeys"] == [csi.TOPOLOGY_KEY], drivers
    assert (host_directory(node_cluster, volume) / "f").read_text().strip() == token


async def test_a_bound_claim_grows_while_its_pod_runs(
    node_cluster: LocalCluster, node_kube: Kube, node_namespace: str
) -> None:
    """Online expansion: with a pod running on the claim, its request goes from 1Mi to 3Mi; the
    external-resizer calls ControllerExpandVolume and grows the PV, the kubelet calls
    NodeExpandVolume and records the new capacity in the claim's status, and the pod sees the
    new size: the capacity file the driver's NodeExpandVolume rewrites at the volume's root (a
    directory has no filesystem of its own to resize; the size is recorded, not enforced)."""
    await create(node_kube, node_namespace, claim("growing", csi.IMMEDIATE_CLASS))
    await bound(node_kube, node_namespace, "growing")
    grown = 3 * 2**20
    # The pod reports the size it starts with, then waits until it sees the new one.
    script = (
        "echo before $(cat /data/.csi-capacity); "
        'while [ "$(cat /data/.csi-capacity)" != "$WANT" ]; do sleep 0.2; done; '
        "echo after $(cat /data/.csi-capacity)"
    )
    await create(node_kube, node_namespace, pod("watcher", "growing", script, {"WANT": str(grown)}))
    path = f"/api/v1/namespaces/{node_namespace}/pods/watcher"

    async def watcher() -> Obj:
        found: Obj = await node_kube.raw("GET", path)
        return found

    await wait_for(
        watcher,
        lambda p: (p.get("status") or {}).get("phase") == "Running",
        "pod watcher Running",
        seconds=SECONDS,
    )
    patch = {"spec": {"resources": {"requests": {"storage": "3Mi"}}}}
    response = await node_kube.api.call_api(
        f"/api/v1/namespaces/{node_namespace}/persistentvolumeclaims/growing",
        "PATCH",
        body=patch,
        header_params={
            "Content-Type": "application/merge-patch+json",
            "Accept": "application/json",
        },
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    response.release()
    expanded = await wait_for(
        lambda: get_claim(node_kube, node_namespace, "growing"),
        lambda c: (c.get("status") or {}).get("capacity", {}).get("storage") == "3Mi",
        "claim growing's status capacity 3Mi",
        seconds=SECONDS,
    )
    log = await finished(node_kube, node_namespace, "watcher")
    assert log.splitlines() == [f"before {2**20}", f"after {grown}"], log
    volume = await get_volume(node_kube, expanded["spec"]["volumeName"])
    assert volume["spec"]["capacity"]["storage"] == "3Mi"
    # No resize left pending (the kubelet's node step done).
    conditions = [c["type"] for c in expanded["status"].get("conditions") or []]
    assert "FileSystemResizePending" not in conditions, conditions
    assert "Resizing" not in conditions, conditions
    directory = host_directory(node_cluster, volume)
    assert (directory / csi.CAPACITY_FILE).read_text().strip() == str(grown)


async def test_a_snapshot_restores_the_bytes_it_was_taken_with(
    node_cluster: LocalCluster, node_kube: Kube, node_namespace: str
) -> None:
    """A VolumeSnapshot of a written claim becomes readyToUse through the snapshot-controller
    and the csi-snapshotter (our CreateSnapshot: a copy); bytes written to the claim afterwards
    are not in it; a new claim with ``dataSourceRef`` to the snapshot reads the bytes it was
    taken with."""
    before = f"step-100-{secrets.token_hex(6)}"
    await create(node_kube, node_namespace, claim("ckpt", csi.IMMEDIATE_CLASS))
    await run(node_kube, node_namespace, "train", "ckpt", f"echo {before} > /data/step")
    await create(
        node_kube,
        node_namespace,
        {
            "apiVersion": "snapshot.storage.k8s.io/v1",
            "kind": "VolumeSnapshot",
            "metadata": {"name": "ckpt-snap"},
            "spec": {
                "volumeSnapshotClassName": csi.SNAPSHOT_CLASS,
                "source": {"persistentVolumeClaimName": "ckpt"},
            },
        },
    )
    ready = await snapshot_ready(node_kube, node_namespace, "ckpt-snap")
    assert ready["status"]["restoreSize"] == "1Mi", ready["status"]
    content: Obj = await node_kube.raw(
        "GET",
        f"{SNAPSHOTS}/volumesnapshotcontents/{ready['status']['boundVolumeSnapshotContentName']}",
    )
    assert content["spec"]["driver"] == csi.DRIVER_NAME
    handle = content["status"]["snapshotHandle"]
    assert node_cluster.csi is not None
    copy = node_cluster.csi.state_dir / "snapshots" / handle / "step"
    assert copy.read_text().strip() == before

    await run(node_kube, node_namespace, "train-more", "ckpt", "echo step-200 > /data/step")
    await create(
        node_kube, node_namespace, claim("resumed", csi.IMMEDIATE_CLASS, source="ckpt-snap")
    )
    restored = await bound(node_kube, node_namespace, "resumed")
    assert restored["spec"]["dataSourceRef"]["name"] == "ckpt-snap"
    read = await run(node_kube, node_namespace, "resume", "resumed", "cat /data/step")
    assert read == before
    source = await get_claim(node_kube, node_namespace, "ckpt")
    assert source["spec"]["volumeName"] != restored["spec"]["volumeName"]


async def test_a_group_snapshot_takes_every_claim_and_restores_each(
    node_cluster: LocalCluster, node_kube: Kube, node_namespace: str
) -> None:
    """A VolumeGroupSnapshot of two labelled claims becomes readyToUse through the
    snapshot-controller and the csi-snapshotter (our GroupController's
    CreateVolumeGroupSnapshot); the snapshot-controller makes one VolumeSnapshot per claim, and
    a claim restored from each reads that rank's bytes."""
    ranks = {f"rank-{i}": f"rank-{i}-{secrets.token_hex(4)}" for i in range(2)}
    for name, token in ranks.items():
        body = claim(name, csi.IMMEDIATE_CLASS)
        body["metadata"]["labels"] = {"checkpoint": "run-1"}
        await create(node_kube, node_namespace, body)
        await run(node_kube, node_namespace, f"write-{name}", name, f"echo {token} > /data/ckpt")
    await create(
        node_kube,
        node_namespace,
        {
            "apiVersion": "groupsnapshot.storage.k8s.io/v1",
            "kind": "VolumeGroupSnapshot",
            "metadata": {"name": "run-1"},
            "spec": {
                "volumeGroupSnapshotClassName": csi.GROUP_SNAPSHOT_CLASS,
                "source": {"selector": {"matchLabels": {"checkpoint": "run-1"}}},
            },
        },
    )
    path = f"{GROUP_SNAPSHOTS}/namespaces/{node_namespace}/volumegroupsnapshots/run-1"

    async def group() -> Obj:
        found: Obj = await node_kube.raw("GET", path)
        return found

    ready = await wait_for(
        group,
        lambda g: (g.get("status") or {}).get("readyToUse") is True,
        "VolumeGroupSnapshot run-1 readyToUse",
        seconds=SECONDS,
    )
    listed: Obj = await node_kube.raw(
        "GET", f"{SNAPSHOTS}/namespaces/{node_namespace}/volumesnapshots"
    )
    members = [
        s
        for s in listed["items"]
        if any(
            o.get("uid") == ready["metadata"]["uid"]
            for o in s["metadata"].get("ownerReferences") or []
        )
    ]
    assert len(members) == 2, [s["metadata"] for s in listed["items"]]
    by_claim: dict[str, str] = {}
    for member in members:
        name = member["metadata"]["name"]
        done = await snapshot_ready(node_kube, node_namespace, name)
        by_claim[done["spec"]["source"]["persistentVolumeClaimName"]] = name
    assert set(by_claim) == set(ranks), by_claim
    for rank, token in ranks.items():
        restored = f"{rank}-restored"
        await create(
            node_kube, node_namespace, claim(restored, csi.IMMEDIATE_CLASS, source=by_claim[rank])
        )
        read = await run(node_kube, node_namespace, f"read-{rank}", restored, "cat /data/ckpt")
        assert read == token, (rank, read)
