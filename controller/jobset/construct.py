"""Desired child objects of a JobSet: its Jobs and its headless Service (pure).

Names, labels and annotations are upstream's, so tools that select on them keep working:
Job ``<jobset>-<replicatedJob>-<jobIndex>``; on the Job *and* its pod template the labels and
annotations jobset-name, jobset-uid, replicatedjob-name, replicatedjob-replicas, global-replicas,
job-index, job-global-index, job-key (SHA-1 of ``<namespace>/<job name>``), restart-attempt, the
group ones, and the coordinator endpoint when a coordinator is set.
"""

from __future__ import annotations

import hashlib
from collections.abc import Container
from dataclasses import dataclass
from typing import Any

from controller.jobset import api, placement
from controller.jobset.model import JobSet, ReplicatedJob
from controller.runtime.store import Obj


def job_name(jobset: str, replicated_job: str, index: int) -> str:
    """``<jobset>-<replicatedJob>-<index>``, upstream's name.

    Extension: a replicated job name with capitals (as in the original request's example, whose
    replicated jobs are ``A`` and ``B``) is lowercased here, because a Job name must be a DNS
    label; upstream cannot run such a JobSet at all. For every name upstream accepts, the result
    is identical. Admission rejects two replicated jobs whose names differ only in case.
    """
    return placement.job_name(jobset, replicated_job, index)


def job_key(namespace: str, name: str) -> str:
    return hashlib.sha1(f"{namespace}/{name}".encode()).hexdigest()


def global_job_index(jobset: JobSet, replicated_job: str, index: int) -> int:
    """Position of a Job across the whole JobSet: replicas of earlier replicated jobs + index."""
    offset = 0
    for rjob in jobset.replicated_jobs:
        if rjob.name == replicated_job:
            return offset + index
        offset += rjob.replicas
    raise KeyError(replicated_job)


def group_replicas(jobset: JobSet, group: str) -> int:
    return sum(r.replicas for r in jobset.replicated_jobs if r.group_name == group)


def job_group_index(jobset: JobSet, replicated_job: str, index: int) -> int:
    target = jobset.replicated_job(replicated_job)
    if target is None:
        raise KeyError(replicated_job)
    offset = 0
    for rjob in jobset.replicated_jobs:
        if rjob.name == replicated_job:
            return offset + index
        if rjob.group_name == target.group_name:
            offset += rjob.replicas
    raise KeyError(replicated_job)  # pragma: no cover (found above)


def coordinator_endpoint(jobset: JobSet) -> str | None:
    """``<jobset>-<rjob>-<jobIndex>-<podIndex>.<subdomain>``: the coordinator pod's DNS name."""
    c = jobset.coordinator
    if c is None:
        return None
    job = job_name(jobset.name, c.replicated_job, c.job_index)
    return f"{job}-{c.pod_index}.{jobset.subdomain}"


def child_labels(
    jobset: JobSet, rjob: ReplicatedJob, index: int, restart_job: bool = False
) -> dict[str, str]:
    """The JobSet labels of a child Job (also set as annotations, and on its pods).
    ``restart_job``: the RestartJob gate is on, which adds ``job-restart-attempt`` (upstream)."""
    name = job_name(jobset.name, rjob.name, index)
    labels = {
        api.JOBSET_NAME: jobset.name,
        api.JOBSET_UID: jobset.uid,
        api.REPLICATED_JOB_NAME: rjob.name,
        api.REPLICATED_JOB_REPLICAS: str(rjob.replicas),
        api.GLOBAL_REPLICAS: str(jobset.global_replicas),
        api.JOB_INDEX: str(index),
        api.JOB_GLOBAL_INDEX: str(global_job_index(jobset, rjob.name, index)),
        api.JOB_KEY: job_key(jobset.namespace, name),
        api.RESTART_ATTEMPT: str(jobset.status.restarts),
        api.GROUP_NAME: rjob.group_name,
        api.GROUP_REPLICAS: str(group_replicas(jobset, rjob.group_name)),
        api.JOB_GROUP_INDEX: str(job_group_index(jobset, rjob.name, index)),
    }
    if restart_job:
        attempt = jobset.status.job_restart_target(rjob.name, index)
        labels[api.JOB_RESTART_ATTEMPT] = str(attempt)
    endpoint = coordinator_endpoint(jobset)
    if endpoint is not None:
        labels[api.COORDINATOR] = endpoint
    return labels


def _merged(base: Any, extra: dict[str, str]) -> dict[str, str]:
    merged = dict(base) if isinstance(base, dict) else {}
    merged.update(extra)
    return merged


def _copied(parent: Obj, key: str) -> Obj:
    """``parent[key]`` replaced by a shallow copy of itself ({} when absent), returned."""
    child = parent.get(key)
    copied: Obj = dict(child) if isinstance(child, dict) else {}
    parent[key] = copied
    return copied


def desired_job(jobset: JobSet, rjob: ReplicatedJob, index: int, restart_job: bool = False) -> Obj:
    """The Job for replica ``index`` of ``rjob``, at the JobSet's current restart attempt.

    Only the objects on the paths this function changes are copied; the rest (containers, volumes,
    ...) is shared with ``rjob.template`` and with the other Jobs built from it, so the Job is
    read-only (``volumes.desired.mount`` copies what it changes). Deep-copying a large template
    for each of up to 10,000 Jobs cost seconds of event-loop time per reconcile.
    """
    template = rjob.template
    ours = child_labels(jobset, rjob, index, restart_job)
    metadata = template.get("metadata") or {}
    annotations = metadata.get("annotations")
    rjob_annotations = annotations if isinstance(annotations, dict) else {}
    ours_annotated = {
        **ours,
        **placement.child_annotations(jobset.annotations, rjob_annotations),
    }
    name = job_name(jobset.name, rjob.name, index)
    spec: Obj = dict(template["spec"])
    pod_template = _copied(spec, "template")
    pod_meta = _copied(pod_template, "metadata")
    pod_meta["labels"] = _merged(pod_meta.get("labels"), ours)
    pod_meta["annotations"] = _merged(pod_meta.get("annotations"), ours_annotated)
    pod_spec = _copied(pod_template, "spec")
    where = placement.placement(jobset.annotations, rjob_annotations)
    if where is not None:
        pod_spec = pod_template["spec"] = placement.constrained(
            pod_spec, where, jobset.namespace, name, ours[api.JOB_KEY]
        )
    if jobset.network.enable_dns_hostnames:
        # The Job controller names Indexed pods' hostnames <job>-<index>; with the subdomain
        # they resolve as <job>-<index>.<subdomain> through the headless Service.
        pod_spec["subdomain"] = jobset.subdomain
    spec["suspend"] = jobset.suspend
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": jobset.namespace,
            "labels": _merged(metadata.get("labels"), ours),
            "annotations": _merged(rjob_annotations, ours_annotated),
            "ownerReferences": [jobset.owner_reference()],
        },
        "spec": spec,
    }


@dataclass(frozen=True)
class DesiredJob:
    """A child Job the JobSet wants: the replicated job and index it is made for (never read
    back from the labels written into it), and the object to create."""

    replicated_job: str
    index: int
    object: Obj

    @property
    def name(self) -> str:
        return str(self.object["metadata"]["name"])


def desired_jobs(
    jobset: JobSet,
    allowed: frozenset[str] | None = None,
    existing: Container[str] = frozenset(),
    restart_job: bool = False,
) -> list[DesiredJob]:
    """Every Job of the current attempt, in spec order (optionally only some replicated jobs),
    but those named in ``existing``: they are not built at all. ``restart_job``: the RestartJob
    gate is on (``child_labels``)."""
    return [
        DesiredJob(rjob.name, index, desired_job(jobset, rjob, index, restart_job))
        for rjob in jobset.replicated_jobs
        if allowed is None or rjob.name in allowed
        for index in range(rjob.replicas)
        if job_name(jobset.name, rjob.name, index) not in existing
    ]


def desired_service(jobset: JobSet) -> Obj | None:
    """The headless Service giving pods stable DNS names; None when DNS hostnames are off."""
    if not jobset.network.enable_dns_hostnames:
        return None
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": jobset.subdomain,
            "namespace": jobset.namespace,
            "labels": {api.JOBSET_NAME: jobset.name},
            "ownerReferences": [jobset.owner_reference()],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {api.JOBSET_NAME: jobset.name},
            "publishNotReadyAddresses": jobset.network.publish_not_ready_addresses,
        },
    }
