"""What the volumes watch, and which JobSets each event brings back to the queue.

``caches`` makes the informers the volumes read or watch (claims, storage classes, CSIDrivers,
quotas, the Pod-scope admission policy and binding, Pod-scope pods, snapshots); ``watch`` puts the
event handlers on them once the reconciler exists (claim events are routed by the claim names each
JobSet wants). ``jobset.setup``, which owns the JobSets' queue, reaches both through ``VolumeIO``
(``VolumeIO.caches``, ``VolumeIO.watch``: the names each JobSet wants are that object's).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from controller.jobset import api
from controller.jobset.volumes import podscope, singlenode
from controller.jobset.volumes.model import POD_SCOPE_LABEL, as_dict, as_list
from controller.jobset.volumes.observed import GROUP_INDEX, by_group, claim_changed
from controller.jobset.volumes.spec import has_pod_scope
from controller.jobset.volumes.status import waits_for_volumes
from controller.jobset.wanted import WantedClaims
from controller.runtime.client import (
    CLAIMS,
    CSI_DRIVERS,
    MUTATING_ADMISSION_POLICIES,
    MUTATING_ADMISSION_POLICY_BINDINGS,
    PODS,
    RESOURCE_QUOTAS,
    STORAGE_CLASSES,
    VOLUME_GROUP_SNAPSHOTS,
    VOLUME_SNAPSHOTS,
)
from controller.runtime.informer import EventHandler
from controller.runtime.manager import Cache, Manager
from controller.runtime.store import Obj, by_label, object_key
from controller.runtime.workqueue import WorkQueue


@dataclass(frozen=True)
class VolumeCaches:
    claims: Cache
    storage_classes: Cache
    # Only watched, so that a raised (or deleted) quota is acted on at once; never read.
    quotas: Cache
    admission_policies: Cache
    admission_bindings: Cache
    pods: Cache
    volume_snapshots: Cache
    volume_group_snapshots: Cache
    csi_drivers: Cache


def caches(manager: Manager[Any], index: str) -> VolumeCaches:
    """The volumes' informers; claims and Pod-scope pods indexed by their JobSet (``index``)."""
    return VolumeCaches(
        # Claims and StorageClasses keep what is read (claims: ownership proof in metadata,
        # spec and status; classes: provisioner, binding mode, expansion): the default drops
        # managedFields. All claims, not only ours: a conflict is precisely a claim we did not
        # label.
        claims=manager.cache(CLAIMS, indexers={index: by_label(api.JOBSET_NAME)}),
        storage_classes=manager.cache(STORAGE_CLASSES),
        quotas=manager.cache(RESOURCE_QUOTAS),
        # Pod scope works only with our admission policy and binding installed: watched so that
        # Pod-scope JobSets wait while they are not, and go on as soon as they are. Optional: an
        # API server older than 1.36 does not serve them (404), an old ClusterRole may not allow
        # them (403); JobSet and Job scope never wait for them.
        admission_policies=manager.cache(MUTATING_ADMISSION_POLICIES, optional=True),
        admission_bindings=manager.cache(MUTATING_ADMISSION_POLICY_BINDINGS, optional=True),
        # Only the pods of Pod-scope replicated jobs, reduced to the placeholders they still
        # mount: a pod the policy did not rewrite waits Pending for good, and its JobSet must
        # say so.
        pods=manager.cache(
            PODS,
            label_selector=f"{POD_SCOPE_LABEL}=true",
            indexers={index: by_label(api.JOBSET_NAME)},
            transform=podscope.pod_view,
        ),
        # Retention Snapshot and restorePolicy. Optional: a cluster without the snapshot CRDs
        # (404) or an old ClusterRole (403) has none, and only JobSets that ask for snapshots
        # wait, saying why. All of them, not only ours: a restorePolicy may name any snapshot.
        # Member snapshots of a group are not labelled: found by their group (its uid).
        volume_snapshots=manager.cache(
            VOLUME_SNAPSHOTS,
            optional=True,
            indexers={index: by_label(api.JOBSET_NAME), GROUP_INDEX: by_group},
        ),
        # snapshotPolicy.volumeGroupSnapshotClassName; optional too (older snapshot CRDs).
        volume_group_snapshots=manager.cache(
            VOLUME_GROUP_SNAPSHOTS, optional=True, indexers={index: by_label(api.JOBSET_NAME)}
        ),
        # attachRequired: whether pods that share a ReadWriteOnce claim must share a node
        # (singlenode, attach). A few objects, cluster-wide. Optional: an older ClusterRole
        # (403) leaves every driver taken to attach, as before.
        csi_drivers=manager.cache(CSI_DRIVERS, optional=True),
    )


def says_colocation(stored: Obj) -> bool:
    """Whether a stored JobSet's status has a MultiAttachRisk condition (a cheap look)."""
    conditions = as_list(as_dict(stored.get("status")).get("conditions"))
    return any(isinstance(c, dict) and c.get("type") == singlenode.CONDITION for c in conditions)


def _changed(old: Obj, new: Obj) -> bool:
    # A resync redelivers the same object: nothing changed.
    version = (old.get("metadata") or {}).get("resourceVersion")
    return bool(version != (new.get("metadata") or {}).get("resourceVersion"))


def watch(
    found: VolumeCaches,
    jobsets: Cache,
    queue: WorkQueue[str],
    enqueue_parent: Callable[[Obj], None],
    wanted: WantedClaims,
    batch_period: float,
    wanted_snapshots: WantedClaims | None = None,
    wanted_runs: WantedClaims | None = None,
) -> None:
    """The event handlers: a claim's event brings back the JobSet it is labelled for and the
    JobSets that want its name; a quota or storage class change the JobSets waiting for their
    claims; the Pod-scope admission policy's the Pod-scope JobSets; a Pod-scope pod's its
    JobSet. ``enqueue_parent`` gathers a child's event with its JobSet's others."""

    def enqueue_waiting(namespace: str | None) -> None:
        # A quota raised or a storage class created may unblock them now: a JobSet whose claim
        # was refused may sit in a long backoff, so forget it (the next refusal starts over).
        for js in jobsets.items(namespace):
            if waits_for_volumes(js):
                key = object_key(js)
                queue.forget(key)
                queue.add(key)

    def on_quota(obj: Obj) -> None:
        enqueue_waiting((obj.get("metadata") or {}).get("namespace"))

    found.quotas.add_handler(
        EventHandler(
            on_add=on_quota,
            on_update=lambda old, new: on_quota(new) if _changed(old, new) else None,
            on_delete=on_quota,
        )
    )

    def on_storage(_: Obj) -> None:
        # A class may unblock JobSets waiting for their claims; a class or a CSIDriver may
        # change whether the pods that share a ReadWriteOnce claim are kept on one node, which
        # the JobSets that say so (MultiAttachRisk) say again (their new Jobs follow it).
        enqueue_waiting(None)
        for js in jobsets.items():
            if says_colocation(js):
                queue.add(object_key(js))

    for cache in (found.storage_classes, found.csi_drivers):
        cache.add_handler(
            EventHandler(
                on_add=on_storage,
                on_update=lambda old, new: on_storage(new) if _changed(old, new) else None,
                on_delete=on_storage,
            )
        )

    def on_admission(obj: Obj) -> None:
        if (obj.get("metadata") or {}).get("name") != podscope.POLICY_NAME:
            return  # another policy: says nothing about Pod scope
        for js in jobsets.items():
            if has_pod_scope(js):
                queue.add(object_key(js))

    for cache in (found.admission_policies, found.admission_bindings):
        cache.add_handler(
            EventHandler(
                on_add=on_admission,
                on_update=lambda old, new: on_admission(new) if _changed(old, new) else None,
                on_delete=on_admission,
            )
        )

    def on_pod(old: Obj | None, new: Obj | None) -> None:
        # Only a pod that mounts a placeholder, or no longer does, changes what a JobSet says.
        target = new if new is not None else old
        if target is not None and any(
            o is not None and podscope.placeholders(o) for o in (old, new)
        ):
            enqueue_parent(target)

    found.pods.add_handler(
        EventHandler(
            on_add=lambda obj: on_pod(None, obj),
            on_update=on_pod,
            on_delete=lambda obj: on_pod(obj, None),
        )
    )

    def enqueue_for_claim(obj: Obj) -> None:
        # The JobSet it is labelled for (its claim), and the JobSets that want its name: a claim
        # that blocks a JobSet (a conflict) is not labelled for it, and once gone unblocks it.
        enqueue_parent(obj)
        meta = obj.get("metadata") or {}
        namespace, name = meta.get("namespace"), meta.get("name")
        if isinstance(namespace, str) and isinstance(name, str):
            for key in wanted.wanting(namespace, name):
                queue.add_batched(key, batch_period)

    def on_claim_update(old: Obj, new: Obj) -> None:
        # Five of the six updates of a claim being provisioned and bound (annotations, the
        # volume's name, the Unused condition) change nothing this controller reads: no pass.
        if claim_changed(old, new):
            enqueue_for_claim(new)

    found.claims.add_handler(
        EventHandler(
            on_add=enqueue_for_claim, on_update=on_claim_update, on_delete=enqueue_for_claim
        )
    )

    def enqueue_restoring(obj: Obj) -> None:
        # The JobSets whose restorePolicy.fromJobSet names the JobSet it was taken for.
        meta = obj.get("metadata") or {}
        namespace, run = meta.get("namespace"), (meta.get("labels") or {}).get(api.JOBSET_NAME)
        if wanted_runs is not None and isinstance(namespace, str) and isinstance(run, str):
            for key in wanted_runs.wanting(namespace, run):
                queue.add_batched(key, batch_period)

    def enqueue_for_snapshot(obj: Obj) -> None:
        # The JobSet it was taken for (labelled), and those whose restorePolicy names it or
        # that JobSet.
        enqueue_parent(obj)
        enqueue_restoring(obj)
        meta = obj.get("metadata") or {}
        namespace, name = meta.get("namespace"), meta.get("name")
        if wanted_snapshots is not None and isinstance(namespace, str) and isinstance(name, str):
            for key in wanted_snapshots.wanting(namespace, name):
                queue.add_batched(key, batch_period)

    def enqueue_for_group(obj: Obj) -> None:
        enqueue_parent(obj)
        enqueue_restoring(obj)

    found.volume_group_snapshots.add_handler(
        EventHandler(
            on_add=enqueue_for_group,
            on_update=lambda old, new: enqueue_for_group(new) if _changed(old, new) else None,
            on_delete=enqueue_for_group,
        )
    )
    found.volume_snapshots.add_handler(
        EventHandler(
            on_add=enqueue_for_snapshot,
            on_update=lambda old, new: enqueue_for_snapshot(new) if _changed(old, new) else None,
            on_delete=enqueue_for_snapshot,
        )
    )
