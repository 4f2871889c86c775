"""Shared ReadWriteOnce claims against Kubernetes' own attach/detach controller (issue 38).

KWOK's nodes mount nothing, so the proof that pods kept on one node never meet ``Multi-Attach``
comes from the component that enforces it: kube-controller-manager's attach/detach controller,
which refuses to attach a ReadWriteOnce volume to a second node (a ``FailedAttachVolume`` Warning
on the pod: "Volume is already used by pod(s) ..."). Each test brings what that controller needs
and KWOK lacks: nodes it manages (the ``controller-managed-attach-detach`` annotation a kubelet
sets), a CSIDriver whose volumes must be attached, a pre-bound PersistentVolume of that driver for
the JobSet's claim, and the external attacher's part, played by the test (a VolumeAttachment it
marks attached, as the CSI sidecar does once the driver answered).

The control, colocation turned off and the pods sent to two nodes, shows the refusal happens here;
with colocation on, the same JobSet's pods share one node and one attachment. The class's
provisioner is the driver, as a CSI driver's class names it: the controller reads the CSIDriver's
``attachRequired`` to know that the pods must share a node. A driver that attaches nothing
(``attachRequired: false``, as NFS-style CSI drivers say) gets no attachment and no refusal:
there the pods that share the claim run on as many nodes as they need.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

from controller.jobset import api
from controller.jobset.placement import EXCLUSIVE_TOPOLOGY
from controller.jobset.volumes.model import COLOCATE_ANNOTATION, SINGLE_NODE_LABEL
from controller.runtime.client import (
    EVENTS,
    PODS,
    STORAGE_CLASSES,
    ApiError,
    KubeClient,
    Resource,
)
from tests.e2e.test_exclusive_placement import (
    NODES,
    RUNNING,
    _delete_and_wait,
    _node,
    _pods,
    kwok_nodes,
)
from tests.e2e.test_single_node_claims import _placed
from tests.helpers import Kube, wait_for
from tests.support.jobsets import jobset, replicated_job, with_mounts, with_pod_annotations
from tests.support.recording import first_revision, watch_events
from tests.support.volumes_e2e import ControllerProcesses, claim_template

Obj = dict[str, Any]
SECONDS = 120
MANAGED = "volumes.kubernetes.io/controller-managed-attach-detach"
CSI_DRIVERS = Resource("storage.k8s.io", "v1", "csidrivers", "CSIDriver", namespaced=False)
VOLUME_ATTACHMENTS = Resource(
    "storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", namespaced=False
)
VOLUMES = Resource("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False)
REFUSED = "FailedAttachVolume"
REASON = "ExclusivePlacement"  # MultiAttachRisk's reason under exclusive placement


class Attachable:
    """A CSI driver whose volumes the attach/detach controller must attach (or, ``attach``
    False, never attaches), its class, and the test's nodes; ``volume`` pre-binds a volume of
    it to a claim."""

    def __init__(self, suffix: str, attach: bool = True) -> None:
        self.attach = attach
        self.driver = f"attach-{suffix}.test.local"
        self.storage_class = f"attach-{suffix}"
        self.label = f"example.com/attach-{suffix}"
        taint = {"key": self.label, "value": "true", "effect": "NoSchedule"}
        self.nodes = [_node(f"attach-{suffix}-{i}", {self.label: "yes"}, [taint]) for i in range(3)]
        for node in self.nodes:
            node["metadata"]["annotations"][MANAGED] = "true"
        self.names = [n["metadata"]["name"] for n in self.nodes]
        self.volumes: list[str] = []

    def pod_spec(self) -> Obj:
        """What puts a pod on this test's nodes only."""
        return {
            "tolerations": [{"key": self.label, "operator": "Exists", "effect": "NoSchedule"}],
            "nodeSelector": {self.label: "yes"},
        }

    async def volume(self, client: KubeClient, namespace: str, claim: str) -> None:
        name = f"{self.storage_class}-{len(self.volumes)}"
        body = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": name},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "persistentVolumeReclaimPolicy": "Retain",
                "storageClassName": self.storage_class,
                "claimRef": {"namespace": namespace, "name": claim},
                "csi": {"driver": self.driver, "volumeHandle": name},
            },
        }
        await client.create(VOLUMES, body, None)
        self.volumes.append(name)

    async def attachments(self, client: KubeClient) -> list[Obj]:
        listed: list[Obj] = (await client.list(VOLUME_ATTACHMENTS, None))["items"]
        return [a for a in listed if a["spec"]["attacher"] == self.driver]


async def _play_the_attacher(client: KubeClient, attachable: Attachable) -> None:
    """The external attacher's part: each VolumeAttachment of the driver marked attached."""
    while True:
        for attachment in await attachable.attachments(client):
            if not (attachment.get("status") or {}).get("attached"):
                with contextlib.suppress(ApiError):  # deleted meanwhile: the next round
                    await client.patch(
                        VOLUME_ATTACHMENTS,
                        attachment["metadata"]["name"],
                        {"status": {"attached": True}},
                        None,
                        subresource="status",
                    )
        await asyncio.sleep(0.5)  # a poll interval (the attacher has no event to wait for)


@contextlib.asynccontextmanager
async def attachable_storage(client: KubeClient, attach: bool = True) -> AsyncIterator[Attachable]:
    """The driver, its class, the nodes and the attacher; all removed at the end. The class's
    provisioner is the driver (its volumes here are pre-bound: nothing is provisioned)."""
    found = Attachable(uuid.uuid4().hex[:6], attach)
    driver = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": found.driver},
        "spec": {"attachRequired": attach, "podInfoOnMount": False},
    }
    storage_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": found.storage_class},
        "provisioner": found.driver,
        "volumeBindingMode": "Immediate",
    }
    await client.create(CSI_DRIVERS, driver, None)
    await client.create(STORAGE_CLASSES, storage_class, None)
    attacher = asyncio.create_task(_play_the_attacher(client, found))
    try:
        async with kwok_nodes(client, found.nodes):
            yield found
    finally:
        attacher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await attacher
        for resource, name in [
            *((VOLUMES, v) for v in found.volumes),
            (STORAGE_CLASSES, found.storage_class),
            (CSI_DRIVERS, found.driver),
        ]:
            with contextlib.suppress(ApiError):
                await client.delete(resource, name, None)


def _sharing(name: str, attachable: Attachable, *, colocate: bool) -> Obj:
    """A writer (1 pod) and readers (1 Job of 2 pods) that mount one ReadWriteOnce claim of
    the attachable class at once."""
    rjobs = []
    for rjob in (replicated_job("writer"), replicated_job("readers", 1, completions=2)):
        with_mounts(with_pod_annotations(rjob, **RUNNING), "data")
        rjob["template"]["spec"]["template"]["spec"].update(attachable.pod_spec())
        rjobs.append(rjob)
    template = claim_template("data", "1Gi", attachable.storage_class)
    body = jobset(name, *rjobs, volumeClaimPolicies=[{"templates": [template]}])
    if not colocate:
        body["metadata"]["annotations"] = {COLOCATE_ANNOTATION: "false"}
    return body


async def _refusals(client: KubeClient, namespace: str, pods: set[str]) -> list[Obj]:
    listed: list[Obj] = (await client.list(EVENTS, namespace))["items"]
    return [
        e for e in listed if e.get("reason") == REFUSED and e["involvedObject"].get("name") in pods
    ]


async def test_the_attach_detach_controller_refuses_a_second_node_when_colocation_is_off(
    full_kube: Kube, full_namespace: str, client: KubeClient, controller: ControllerProcesses
) -> None:
    """The control: colocation off and the readers sent to another node than the writer (node
    selectors). The volume attaches to one of the two nodes (whichever pod the attach/detach
    controller takes first), and the attach/detach controller refuses the other node's pods
    with the Warning users meet as Multi-Attach."""
    ns = full_namespace
    async with attachable_storage(client) as storage:
        body = _sharing("apart", storage, colocate=False)
        writer, readers = body["spec"]["replicatedJobs"]
        hostname = "kubernetes.io/hostname"
        writer["template"]["spec"]["template"]["spec"]["nodeSelector"][hostname] = storage.names[0]
        readers["template"]["spec"]["template"]["spec"]["nodeSelector"][hostname] = storage.names[1]
        await storage.volume(client, ns, "data-apart")
        await client.create(api.JOBSETS, body, ns)
        pods = await _placed(client, ns, "apart", 3)
        assert {p["spec"]["nodeName"] for p in pods} == set(storage.names[:2])
        (attached,) = await wait_for(
            lambda: storage.attachments(client),
            lambda found: len(found) == 1 and bool((found[0].get("status") or {}).get("attached")),
            "the volume attached to one of the two nodes",
            seconds=SECONDS,
        )
        there = attached["spec"]["nodeName"]
        elsewhere = {p["metadata"]["name"] for p in pods if p["spec"]["nodeName"] != there}
        refused = await wait_for(
            lambda: _refusals(client, ns, elsewhere),
            lambda found: {e["involvedObject"]["name"] for e in found} == elsewhere,
            "the attach/detach controller to refuse the other node's pods",
            seconds=SECONDS,
        )
        assert all("already used by pod" in e["message"] for e in refused), refused
        assert len(await storage.attachments(client)) == 1  # never attached to the other node
        await _delete_and_wait(client, ns, "apart")


async def test_pods_kept_on_one_node_share_one_attachment_and_meet_no_refusal(
    full_kube: Kube, full_namespace: str, client: KubeClient, controller: ControllerProcesses
) -> None:
    """The same JobSet with colocation on (the default) and no node chosen by the user: every
    pod on one node, the volume attached there once, no attach refused."""
    ns = full_namespace
    async with attachable_storage(client) as storage:
        await storage.volume(client, ns, "data-together")
        await client.create(api.JOBSETS, _sharing("together", storage, colocate=True), ns)
        pods = await _placed(client, ns, "together", 3)
        nodes = {p["spec"]["nodeName"] for p in pods}
        assert len(nodes) == 1, [(p["metadata"]["name"], p["spec"]["nodeName"]) for p in pods]
        # The attach/detach controller has processed them all: the volume is attached to that
        # node (the attachment it created, marked attached, and recorded in the node's status).
        (node,) = nodes
        await wait_for(
            lambda: client.get(NODES, node, None),
            lambda n: any(
                v.get("name", "").endswith(storage.volumes[0])
                for v in (n.get("status") or {}).get("volumesAttached") or []
            ),
            "the volume attached to the pods' node",
            seconds=SECONDS,
        )
        (attachment,) = await storage.attachments(client)
        assert attachment["spec"]["nodeName"] == node
        assert await _refusals(client, ns, {p["metadata"]["name"] for p in pods}) == []
        js = await client.get(api.JOBSETS, "together", ns)
        risk = next(c for c in js["status"]["conditions"] if c["type"] == "MultiAttachRisk")
        assert (risk["status"], risk["reason"]) == ("False", "Colocated")
        assert f"CSIDriver {storage.driver} has attachRequired: true" in risk["message"]
        await _delete_and_wait(client, ns, "together")


async def test_pods_sharing_a_claim_of_storage_that_attaches_nothing_run_across_nodes(
    full_kube: Kube, full_namespace: str, client: KubeClient, controller: ControllerProcesses
) -> None:
    """Three workers share one ReadWriteOnce claim of a CSI driver with attachRequired: false,
    and each asks for 20 of a node's 32 CPUs: no two fit on one node. The controller writes no
    affinity (kept on one node, two of them would stay Pending), every pod runs, each on a
    node of its own, MultiAttachRisk says why they are not kept together, and the
    attach/detach controller makes no attachment (so refuses none)."""
    ns = full_namespace
    async with attachable_storage(client, attach=False) as storage:
        rjob = with_mounts(with_pod_annotations(replicated_job("workers", 3), **RUNNING), "data")
        pod_spec = rjob["template"]["spec"]["template"]["spec"]
        pod_spec.update(storage.pod_spec())
        pod_spec["containers"][0]["resources"] = {"requests": {"cpu": "20"}}
        template = claim_template("data", "1Gi", storage.storage_class)
        body = jobset("across", rjob, volumeClaimPolicies=[{"templates": [template]}])
        await storage.volume(client, ns, "data-across")
        await client.create(api.JOBSETS, body, ns)
        pods = await wait_for(
            lambda: _pods(client, ns, "across"),
            lambda ps: len(ps) == 3 and all(p["status"].get("phase") == "Running" for p in ps),
            "the three workers running",
            seconds=SECONDS,
        )
        assert {p["spec"]["nodeName"] for p in pods} == set(storage.names)
        for pod in pods:
            assert SINGLE_NODE_LABEL not in pod["metadata"]["labels"]
            assert "podAffinity" not in (pod["spec"].get("affinity") or {})
            claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["spec"]["volumes"]
                      if "persistentVolumeClaim" in v]  # fmt: skip
            assert claims == ["data-across"]
        js = await client.get(api.JOBSETS, "across", ns)
        risk = next(c for c in js["status"]["conditions"] if c["type"] == "MultiAttachRisk")
        assert (risk["status"], risk["reason"]) == ("False", "AttachNotRequired")
        assert f"CSIDriver {storage.driver} has attachRequired: false" in risk["message"]
        assert await storage.attachments(client) == []
        assert await _refusals(client, ns, {p["metadata"]["name"] for p in pods}) == []
        await _delete_and_wait(client, ns, "across")


async def test_a_job_added_by_a_scale_up_joins_the_node_its_claim_is_attached_to(
    full_kube: Kube, full_namespace: str, client: KubeClient, controller: ControllerProcesses
) -> None:
    """One Job of one pod mounts the claim (nothing shared: no affinity), then replicas goes to
    2: the new Job's pod must run where the claim is attached, beside the first Job's pod that
    carries no label of the controller's. Each pod asks for a CPU, so the scheduler, left to
    itself, would prefer an emptier node."""
    ns = full_namespace
    async with attachable_storage(client) as storage:
        rjob = with_mounts(with_pod_annotations(replicated_job("workers"), **RUNNING), "data")
        pod = rjob["template"]["spec"]["template"]["spec"]
        pod.update(storage.pod_spec())
        pod["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
        template = claim_template("data", "1Gi", storage.storage_class)
        body = jobset("grow", rjob, volumeClaimPolicies=[{"templates": [template]}])
        await storage.volume(client, ns, "data-grow")
        await client.create(api.JOBSETS, body, ns)
        (first,) = await wait_for(
            lambda: _pods(client, ns, "grow"),
            lambda ps: len(ps) == 1 and bool(ps[0]["spec"].get("nodeName")),
            "the first Job's pod scheduled",
            seconds=SECONDS,
        )
        node = first["spec"]["nodeName"]
        await wait_for(
            lambda: storage.attachments(client),
            lambda found: len(found) == 1 and bool((found[0].get("status") or {}).get("attached")),
            "the claim's volume attached to the first pod's node",
            seconds=SECONDS,
        )
        grow = [{"op": "replace", "path": "/spec/replicatedJobs/0/replicas", "value": 2}]
        await client.patch(api.JOBSETS, "grow", grow, ns, patch_type="json")
        pods = await _placed(client, ns, "grow", 2)
        assert {p["spec"]["nodeName"] for p in pods} == {node}, [
            (p["metadata"]["name"], p["spec"]["nodeName"]) for p in pods
        ]
        assert await _refusals(client, ns, {p["metadata"]["name"] for p in pods}) == []
        await _delete_and_wait(client, ns, "grow")


async def test_exclusive_placement_is_named_before_the_volume_fails_to_attach(
    full_kube: Kube, full_namespace: str, client: KubeClient, controller: ControllerProcesses
) -> None:
    """Exclusive placement over hostname puts each Job on a node of its own, so two Jobs that
    share the claim cannot share its node, whatever the controller writes: the second Job's pod
    goes elsewhere and the attach/detach controller refuses it. MultiAttachRisk
    (ExclusivePlacement) says so first: the condition is stored before the pod exists (with the
    claim's uid, which the Jobs wait for), its Warning Event before the refusal (etcd revisions,
    from a watch opened before the JobSet). The Event is not always before the pod: the
    recorder posts it in the background while the next pass creates the Jobs."""
    ns = full_namespace
    recorded = watch_events(client, ns, (api.JOBSETS, PODS, EVENTS))
    async with attachable_storage(client) as storage, recorded as seen:
        rjob = with_mounts(with_pod_annotations(replicated_job("workers", 2), **RUNNING), "data")
        rjob["template"]["spec"]["template"]["spec"].update(storage.pod_spec())
        template = claim_template("data", "1Gi", storage.storage_class)
        body = jobset("excl", rjob, volumeClaimPolicies=[{"templates": [template]}])
        body["metadata"]["annotations"] = {EXCLUSIVE_TOPOLOGY: "kubernetes.io/hostname"}
        await storage.volume(client, ns, "data-excl")
        await client.create(api.JOBSETS, body, ns)
        pods = await _placed(client, ns, "excl", 2)
        assert len({p["spec"]["nodeName"] for p in pods}) == 2  # exclusive: a node each
        (attached,) = await wait_for(
            lambda: storage.attachments(client), lambda found: len(found) == 1, "one attachment"
        )
        there = attached["spec"]["nodeName"]
        apart = {p["metadata"]["name"] for p in pods if p["spec"]["nodeName"] != there}
        await wait_for(
            lambda: _refusals(client, ns, apart),
            lambda found: len(found) >= 1,
            "the attach/detach controller to refuse the other node",
            seconds=SECONDS,
        )
        js = await client.get(api.JOBSETS, "excl", ns)
        risk = next(c for c in js["status"]["conditions"] if c["type"] == "MultiAttachRisk")
        assert (risk["status"], risk["reason"]) == ("True", REASON)
        assert "data-excl" in risk["message"]

        def event(reason: str, about: str) -> int | None:
            return first_revision(
                seen,
                "Event",
                None,
                lambda e: e.get("reason") == reason and e["involvedObject"].get("name") == about,
            )

        def at_risk(stored: Obj) -> bool:
            conditions = (stored.get("status") or {}).get("conditions") or []
            return any(
                (c["type"], c["status"], c["reason"]) == (risk["type"], "True", REASON)
                for c in conditions
            )

        (refused_pod,) = apart
        stored = first_revision(seen, "JobSet", "excl", at_risk)
        made = first_revision(seen, "Pod", refused_pod, lambda _: True)
        said = event(REASON, "excl")
        refused = event(REFUSED, refused_pod)
        assert stored is not None and made is not None, (stored, made)
        assert said is not None and refused is not None, (said, refused)
        assert stored < made < refused and stored < said < refused, (stored, made, said, refused)
        await _delete_and_wait(client, ns, "excl")


async def test_pods_with_a_required_pod_affinity_of_their_own_still_schedule(
    full_kube: Kube, full_namespace: str, client: KubeClient, controller: ControllerProcesses
) -> None:
    """The user's pod template requires its pods next to another pod (a cache, say). The
    scheduler counts an existing pod for a pod's required affinity only if it matches every
    required term: a term of the controller's added beside the user's would match no pod at all
    (the cache is no pod of the JobSet's, the JobSet's pods are no cache), and the pods would
    never schedule. They run next to the cache, on one node, and the volume attaches once."""
    ns = full_namespace
    async with attachable_storage(client) as storage:
        cache_label = {"app": f"cache-{storage.storage_class}"}
        cache = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "cache", "labels": cache_label,
                         "annotations": {"localcluster.test/run-duration": "600s"}},
            "spec": {**storage.pod_spec(), "containers": [{"name": "c", "image": "busybox"}]},
        }  # fmt: skip
        await client.create(PODS, cache, ns)
        body = _sharing("near", storage, colocate=True)
        near = {
            "labelSelector": {"matchLabels": cache_label},
            "topologyKey": "kubernetes.io/hostname",
        }
        for rjob in body["spec"]["replicatedJobs"]:
            rjob["template"]["spec"]["template"]["spec"]["affinity"] = {
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [near]}
            }
        await storage.volume(client, ns, "data-near")
        await client.create(api.JOBSETS, body, ns)
        placed = await wait_for(
            lambda: client.get(PODS, "cache", ns),
            lambda p: bool(p["spec"].get("nodeName")),
            "the cache pod scheduled",
            seconds=SECONDS,
        )
        pods = await _placed(client, ns, "near", 3)
        assert {p["spec"]["nodeName"] for p in pods} == {placed["spec"]["nodeName"]}
        assert await _refusals(client, ns, {p["metadata"]["name"] for p in pods}) == []
        await _delete_and_wait(client, ns, "near")
        await client.delete(PODS, "cache", ns)
