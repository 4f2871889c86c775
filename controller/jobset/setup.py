"""Wire the JobSet controller into a manager: caches, event handlers, workers."""

from __future__ import annotations

from controller.api import specpolicy
from controller.config import Config
from controller.jobset import api, children, metrics, triggers, volumes
from controller.jobset.reconciler import JOBSET_INDEX, JobSetReconciler
from controller.runtime.client import (
    CLAIMS,
    JOBS,
    MUTATING_ADMISSION_POLICIES,
    MUTATING_ADMISSION_POLICY_BINDINGS,
    PODS,
    RESOURCE_QUOTAS,
    SERVICES,
    STORAGE_CLASSES,
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
    # Claims and StorageClasses keep what is read (claims: ownership proof in metadata, spec and
    # status; classes: provisioner, binding mode, expansion): the default drops managedFields.
    # All claims, not only ours: a conflict is precisely a claim we did not label.
    claims = manager.cache(CLAIMS, indexers={JOBSET_INDEX: by_label(api.JOBSET_NAME)})
    storage_classes = manager.cache(STORAGE_CLASSES)
    # Only watched so that a raised (or deleted) quota is acted on at once; never read otherwise.
    quotas = manager.cache(RESOURCE_QUOTAS)
    # Pod scope works only with our admission policy and binding installed: watched so that
    # Pod-scope JobSets wait while they are not, and go on as soon as they are. Optional: an API
    # server older than 1.36 does not serve them (404), an old ClusterRole may not allow them
    # (403); JobSet and Job scope never wait for them.
    policies = manager.cache(MUTATING_ADMISSION_POLICIES, optional=True)
    bindings = manager.cache(MUTATING_ADMISSION_POLICY_BINDINGS, optional=True)
    # The spec's cross-field and immutability rules are a ValidatingAdmissionPolicy beside the
    # CRD: watched only to say, in a metric, whether it is installed (reduced to what that reads).
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
    # Only the pods of Pod-scope replicated jobs, reduced to the placeholders they still mount: a
    # pod the policy did not rewrite waits Pending for good, and its JobSet must say so.
    pods = manager.cache(
        PODS,
        label_selector=f"{volumes.POD_SCOPE_LABEL}=true",
        indexers={JOBSET_INDEX: by_label(api.JOBSET_NAME)},
        transform=volumes.podscope.pod_view,
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

    def enqueue_waiting(namespace: str | None) -> None:
        # A quota raised or a storage class created may unblock them now: a JobSet whose claim
        # was refused may sit in a long backoff, so forget it (the next refusal starts over).
        for js in jobsets.items(namespace):
            if volumes.waits_for_volumes(js):
                key = object_key(js)
                queue.forget(key)
                queue.add(key)

    def changed(old: Obj, new: Obj) -> bool:
        # A resync redelivers the same object: nothing was raised.
        version = (old.get("metadata") or {}).get("resourceVersion")
        return bool(version != (new.get("metadata") or {}).get("resourceVersion"))

    def on_quota(obj: Obj) -> None:
        enqueue_waiting((obj.get("metadata") or {}).get("namespace"))

    quotas.add_handler(
        EventHandler(
            on_add=on_quota,
            on_update=lambda old, new: on_quota(new) if changed(old, new) else None,
            on_delete=on_quota,
        )
    )
    storage_classes.add_handler(
        EventHandler(
            on_add=lambda _: enqueue_waiting(None),
            on_update=lambda old, new: enqueue_waiting(None) if changed(old, new) else None,
            on_delete=lambda _: enqueue_waiting(None),
        )
    )

    def on_admission(obj: Obj) -> None:
        if (obj.get("metadata") or {}).get("name") != volumes.podscope.POLICY_NAME:
            return  # another policy: says nothing about Pod scope
        for js in jobsets.items():
            if volumes.has_pod_scope(js):
                queue.add(object_key(js))

    for cache in (policies, bindings):
        cache.add_handler(
            EventHandler(
                on_add=on_admission,
                on_update=lambda old, new: on_admission(new) if changed(old, new) else None,
                on_delete=on_admission,
            )
        )

    def on_pod(old: Obj | None, new: Obj | None) -> None:
        # Only a pod that mounts a placeholder, or no longer does, changes what a JobSet says.
        target = new if new is not None else old
        if target is not None and any(
            o is not None and volumes.podscope.placeholders(o) for o in (old, new)
        ):
            enqueue_parent(target)

    pods.add_handler(
        EventHandler(
            on_add=lambda obj: on_pod(None, obj),
            on_update=on_pod,
            on_delete=lambda obj: on_pod(obj, None),
        )
    )
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
        claims,
        storage_classes,
        metrics=metrics.register(
            manager.registry, jobsets, claims, manager.config.managed_by, spec_policies
        ),
        status_progress_period=manager.config.status_progress_period,
        status_progress_rate=manager.config.status_progress_rate,
        managed_by=manager.config.managed_by,
        feature_gates=manager.config.feature_gates,
        admission_policies=policies,
        admission_bindings=bindings,
        pods=pods,
    )

    def enqueue_for_claim(obj: Obj) -> None:
        # The JobSet it is labelled for (its claim), and the JobSets that want its name: a claim
        # that blocks a JobSet (a conflict) is not labelled for it, and once gone unblocks it.
        enqueue_parent(obj)
        meta = obj.get("metadata") or {}
        namespace, name = meta.get("namespace"), meta.get("name")
        if isinstance(namespace, str) and isinstance(name, str):
            for key in reconciler.wanted.wanting(namespace, name):
                queue.add_batched(key, batch_period)

    def on_claim_update(old: Obj, new: Obj) -> None:
        # Five of the six updates of a claim being provisioned and bound (annotations, the
        # volume's name, the Unused condition) change nothing this controller reads: no pass.
        if volumes.claim_changed(old, new):
            enqueue_for_claim(new)

    claims.add_handler(
        EventHandler(
            on_add=enqueue_for_claim, on_update=on_claim_update, on_delete=enqueue_for_claim
        )
    )
    manager.controller(CONTROLLER, queue, reconciler.reconcile, object_label="jobset")
    return reconciler
