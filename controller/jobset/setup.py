"""Wire the JobSet controller into a manager: caches, event handlers, workers."""

from __future__ import annotations

import datetime

from controller.api import specpolicy
from controller.config import Config
from controller.jobset import api, children, metrics, triggers
from controller.jobset.reconciler import JOBSET_INDEX, JobSetReconciler
from controller.jobset.volumes import VolumeIO
from controller.runtime.client import (
    JOBS,
    SERVICES,
    VALIDATING_ADMISSION_POLICIES,
    VALIDATING_ADMISSION_POLICY_BINDINGS,
)
from controller.runtime.informer import EventHandler
from controller.runtime.manager import Manager
from controller.runtime.store import Obj, by_label, object_key
from controller.version import register_build_info

CONTROLLER = "jobset"


def setup(manager: Manager[Config]) -> JobSetReconciler:
    register_build_info(manager.registry)  # stateful_jobset_build_info: which build runs
    jobsets = manager.cache(api.JOBSETS)
    # Only children labelled by this controller are watched (and cached).
    owned = f"{api.JOBSET_NAME}"
    # Reduced to what the reconciler reads of a Job (children.job_view: no containers).
    jobs = manager.cache(
        JOBS,
        label_selector=owned,
        indexers={JOBSET_INDEX: by_label(api.JOBSET_NAME)},
        transform=children.job_view,
    )
    # Only whether a JobSet's Service exists is read (children.service_view: metadata only).
    services = manager.cache(SERVICES, label_selector=owned, transform=children.service_view)
    # What the volumes read and watch (claims, storage classes, quotas, the Pod-scope admission
    # policy, Pod-scope pods, snapshots): their handlers go on once the reconciler exists.
    volume_caches = VolumeIO.caches(manager, JOBSET_INDEX)
    # The spec's cross-field and immutability rules are a ValidatingAdmissionPolicy beside the
    # CRD, which judges the JobSets of the managedBy value it holds: watched only to say, in a
    # metric, whether it judges this controller's JobSets (reduced to what that reads).
    spec_policies = (
        manager.cache(
            VALIDATING_ADMISSION_POLICIES, transform=specpolicy.installed_view, optional=True
        ),
        manager.cache(
            VALIDATING_ADMISSION_POLICY_BINDINGS,
            transform=specpolicy.installed_view,
            optional=True,
        ),
    )
    queue = manager.queue(CONTROLLER)
    batch_period = manager.config.child_event_batch_period

    def enqueue(obj: Obj) -> None:
        queue.add(object_key(obj))

    def enqueue_parent(obj: Obj) -> None:
        # A child's event: gathered with the others of its JobSet in the batch period (its Jobs
        # move together, and each step of each is an event).
        meta = obj.get("metadata") or {}
        parent = (meta.get("labels") or {}).get(api.JOBSET_NAME)
        if isinstance(parent, str) and meta.get("namespace"):
            queue.add_batched(f"{meta['namespace']}/{parent}", batch_period)

    def on_jobset_update(old: Obj, new: Obj) -> None:
        # Its status alone (mostly the echo of our own write): gathered with its children's
        # events (triggers.status_only); anything else at once.
        if triggers.status_only(old, new):
            queue.add_batched(object_key(new), batch_period)
        else:
            enqueue(new)

    jobsets.add_handler(EventHandler(on_add=enqueue, on_update=on_jobset_update, on_delete=enqueue))

    for cache in (jobs, services):
        cache.add_handler(
            EventHandler(
                on_add=enqueue_parent,
                on_update=lambda _, new: enqueue_parent(new),
                on_delete=enqueue_parent,
            )
        )
    reconciler = JobSetReconciler(
        manager.client,
        manager.recorder,
        jobsets,
        jobs,
        services,
        volume_caches.claims,
        volume_caches.storage_classes,
        metrics=metrics.register(
            manager.registry,
            jobsets,
            volume_caches.claims,
            manager.config.managed_by,
            spec_policies,
        ),
        status_progress_period=manager.config.status_progress_period,
        managed_by=manager.config.managed_by,
        feature_gates=manager.config.feature_gates,
        snapshot_warn_after=datetime.timedelta(seconds=manager.config.snapshot_warn_after),
        admission_policies=volume_caches.admission_policies,
        admission_bindings=volume_caches.admission_bindings,
        pods=volume_caches.pods,
        volume_snapshots=volume_caches.volume_snapshots,
        volume_group_snapshots=volume_caches.volume_group_snapshots,
        csi_drivers=volume_caches.csi_drivers,
        colocate_claims=manager.config.colocate_claims,
    )
    reconciler.volume_io.watch(volume_caches, jobsets, queue, enqueue_parent, batch_period)

    manager.controller(CONTROLLER, queue, reconciler.reconcile, object_label="jobset")
    return reconciler
