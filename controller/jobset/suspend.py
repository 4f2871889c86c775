"""Suspend and resume: which child Jobs need ``spec.suspend`` flipped, and the Suspended condition.

Upstream semantics:
- JobSet suspended: every unfinished Job of the current attempt gets ``spec.suspend: true``;
  condition ``Suspended=True`` (``SuspendedJobs``, "jobset is suspended").
- JobSet not suspended: suspended unfinished Jobs get ``spec.suspend: false``, replicated job by
  replicated job in spec order, skipping those whose ``dependsOn`` is not met. Before resuming,
  the Job's pod template takes the replicated job's current labels, annotations, nodeSelector,
  tolerations and schedulingGates (merged: maps take the template's values over the Job's,
  lists gain the template's entries they lack), since a queueing system such as Kueue may have
  changed these on the suspended JobSet. With ``InOrder``, the first replicated job that has not
  fully started is resumed and the rest wait; ``Suspended=False`` (``ResumeJobs``, "jobset is
  resumed") is reported only once the walk got through every replicated job.
- Kubernetes lets a suspended Job's scheduling directives change only while its
  ``status.startTime`` is unset; upstream clears it first. ``clear_start_time`` lists the Jobs
  whose template changes need that (the Job controller normally clears it on suspension).

Jobs being deleted and Jobs of earlier attempts are left alone. Patches are JSON merge patches
(``application/merge-patch+json``) and are produced only for Jobs that differ, so a steady state
issues no writes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.jobset import api, children
from controller.jobset.children import ChildJob
from controller.jobset.jobsetstatus import Condition, ReplicatedJobStatus
from controller.jobset.model import JobSet, ReplicatedJob
from controller.jobset.startup import all_started, dependencies_met
from controller.jobset.status import FALSE, TRUE, replicated_jobs_status
from controller.runtime.store import Obj

SUSPENDED = Condition(api.SUSPENDED, TRUE, api.REASON_SUSPENDED, api.MESSAGE_SUSPENDED)
RESUMED = Condition(api.SUSPENDED, FALSE, api.REASON_RESUMED, api.MESSAGE_RESUMED)

_MAP_FIELDS_META = ("labels", "annotations")
_MAP_FIELDS_SPEC = ("nodeSelector",)
_LIST_FIELDS_SPEC = ("tolerations", "schedulingGates")


@dataclass(frozen=True)
class SuspendDecision:
    """``patches``: (Job name, JSON merge patch) pairs, in spec then input order.

    ``clear_start_time``: Jobs whose ``status.startTime`` must be cleared (status subresource)
    before their patch. ``condition``: the Suspended condition to set, or None (not yet).
    """

    patches: tuple[tuple[str, Obj], ...]
    clear_start_time: tuple[str, ...]
    condition: Condition | None


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _merged_map_changes(current: Any, wanted: Any) -> dict[str, Any]:
    """Keys whose template value differs from the Job's (template wins)."""
    have = _dict(current)
    return {k: v for k, v in _dict(wanted).items() if have.get(k) != v}


def _merged_list(current: Any, wanted: Any) -> list[Any] | None:
    """The Job's list plus the template entries it lacks; None when nothing is missing."""
    have = list(_list(current))
    missing = [item for item in _list(wanted) if item not in have]
    return have + missing if missing else None


def template_patch(job: ChildJob, rjob: ReplicatedJob) -> Obj:
    """Merge patch for ``spec.template`` bringing the replicated job's scheduling fields in."""
    job_template = _dict(_dict(job.raw.get("spec")).get("template"))
    job_meta = _dict(job_template.get("metadata"))
    job_pod = _dict(job_template.get("spec"))
    rjob_template = _dict(_dict(rjob.template.get("spec")).get("template"))
    rjob_meta = _dict(rjob_template.get("metadata"))
    rjob_pod = _dict(rjob_template.get("spec"))

    meta: Obj = {}
    for key in _MAP_FIELDS_META:
        changes = _merged_map_changes(job_meta.get(key), rjob_meta.get(key))
        if changes:
            meta[key] = changes
    pod: Obj = {}
    for key in _MAP_FIELDS_SPEC:
        changes = _merged_map_changes(job_pod.get(key), rjob_pod.get(key))
        if changes:
            pod[key] = changes
    for key in _LIST_FIELDS_SPEC:
        merged = _merged_list(job_pod.get(key), rjob_pod.get(key))
        if merged is not None:
            pod[key] = merged
    patch: Obj = {}
    if meta:
        patch["metadata"] = meta
    if pod:
        patch["spec"] = pod
    return patch


def _live_jobs(jobset: JobSet, jobs: Iterable[ChildJob]) -> list[ChildJob]:
    """Unfinished Jobs of the current attempt that are not being deleted."""
    return [
        job
        for job in children.current_jobs(jobset, jobs)
        if not job.is_finished and not job.deleting
    ]


def plan(
    jobset: JobSet,
    jobs: Sequence[ChildJob],
    counted: Sequence[ReplicatedJobStatus] | None = None,
) -> SuspendDecision:
    """The Job patches and the Suspended condition for the JobSet's ``spec.suspend``.

    ``counted``: ``replicated_jobs_status(jobset, jobs)`` when the caller has it already (decide
    does: counting every Job again cost as much as the rest of this function)."""
    live = _live_jobs(jobset, jobs)
    if jobset.suspend:
        patches = tuple(
            (job.name, {"spec": {"suspend": True}}) for job in live if not job.suspended
        )
        return SuspendDecision(patches, (), SUSPENDED)

    if counted is None:
        counted = replicated_jobs_status(jobset, jobs)
    status = {s.name: s for s in counted}
    found: list[tuple[str, Obj]] = []
    clear: list[str] = []
    walked_all = True
    for rjob in jobset.replicated_jobs:
        if not dependencies_met(jobset, rjob, status):
            continue
        if jobset.startup_in_order and all_started(rjob, status.get(rjob.name)):
            continue
        for job in live:
            if job.replicated_job != rjob.name or not job.suspended:
                continue
            name = job.name
            spec: Obj = {"suspend": False}
            template = template_patch(job, rjob)
            if template:
                spec["template"] = template
                if job.start_time is not None:
                    clear.append(name)
            found.append((name, {"spec": spec}))
        if jobset.startup_in_order:
            walked_all = False
            break
    return SuspendDecision(tuple(found), tuple(clear), RESUMED if walked_all else None)


def stopped(jobs: Iterable[ChildJob]) -> bool:
    """No pod of these Jobs (every attempt's: the JobSet's Jobs) runs or is terminating, nor
    will start (``ChildJob.pods_stopped``): what a suspended JobSet waits for before its claims
    may be snapshotted (retentionPolicy.whenSuspended: Snapshot)."""
    return all(job.pods_stopped for job in jobs)


def suspend_patches(jobset: JobSet, jobs: Sequence[ChildJob]) -> list[tuple[str, Obj]]:
    """(Job name, JSON merge patch) for every Job whose suspension must change; [] when none."""
    return list(plan(jobset, jobs).patches)
