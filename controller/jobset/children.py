"""Reading observed child Jobs: which replicated job, index and attempt they belong to, and state.

Child Jobs come from the informer cache as plain JSON dicts. Any field may be missing (a Job just
created has no status yet, a hand-made object may lack labels), so every reader here tolerates
partial objects and answers with a neutral value instead of raising.

Upstream facts mirrored here:
- a Job is finished when it has a ``Complete`` or ``Failed`` condition with status ``"True"``;
  Kubernetes >= 1.31 first sets ``SuccessCriteriaMet`` / ``FailureTarget``, which do not count;
- a Job belongs to the current run when its ``restart-attempt`` label is not below
  ``status.restarts``; Jobs of earlier attempts are stale and get deleted;
- a Job is "ready" when ready + succeeded pods reach min(parallelism, completions).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controller.jobset import api
from controller.jobset.model import JobSet, ReplicatedJob
from controller.runtime.store import Obj

JOB_COMPLETE = "Complete"
JOB_FAILED = "Failed"
_FINISHED_TYPES = (JOB_COMPLETE, JOB_FAILED)


# ----------------------------------------------------------------------------- field access


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int:
    """A non-negative integer counter from a status field; anything else counts as zero."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return max(value, 0)


def _label_int(job: Obj, key: str) -> int | None:
    raw = labels_of(job).get(key)
    if not isinstance(raw, str) or not raw.isascii() or not raw.isdigit():
        return None
    return int(raw)


def name_of(job: Obj) -> str:
    name = _dict(job.get("metadata")).get("name")
    return name if isinstance(name, str) else ""


def labels_of(job: Obj) -> Mapping[str, Any]:
    return _dict(_dict(job.get("metadata")).get("labels"))


def spec_of(job: Obj) -> Mapping[str, Any]:
    return _dict(job.get("spec"))


def status_of(job: Obj) -> Mapping[str, Any]:
    return _dict(job.get("status"))


def conditions_of(job: Obj) -> list[Obj]:
    raw = status_of(job).get("conditions")
    if not isinstance(raw, list):
        return []
    return [c for c in raw if isinstance(c, dict)]


# ----------------------------------------------------------------------------- identity


def replicated_job_of(job: Obj) -> str | None:
    """The ``replicatedjob-name`` label, or None when missing or empty."""
    value = labels_of(job).get(api.REPLICATED_JOB_NAME)
    return value if isinstance(value, str) and value else None


def job_index_of(job: Obj) -> int | None:
    """The ``job-index`` label as a non-negative integer, or None when missing or malformed."""
    return _label_int(job, api.JOB_INDEX)


def restart_attempt_of(job: Obj) -> int | None:
    """The ``restart-attempt`` label as a non-negative integer, or None when missing/malformed."""
    return _label_int(job, api.RESTART_ATTEMPT)


# ----------------------------------------------------------------------------- state


def finished_condition(job: Obj) -> Obj | None:
    """The first ``Complete`` or ``Failed`` condition with status "True", if any."""
    for condition in conditions_of(job):
        if condition.get("type") in _FINISHED_TYPES and condition.get("status") == "True":
            return condition
    return None


def failed_condition(job: Obj) -> Obj | None:
    """The Job's ``Failed`` condition with status "True", if any."""
    for condition in conditions_of(job):
        if condition.get("type") == JOB_FAILED and condition.get("status") == "True":
            return condition
    return None


def is_finished(job: Obj) -> bool:
    return finished_condition(job) is not None


def is_complete(job: Obj) -> bool:
    found = finished_condition(job)
    return found is not None and found.get("type") == JOB_COMPLETE


def is_failed(job: Obj) -> bool:
    found = finished_condition(job)
    return found is not None and found.get("type") == JOB_FAILED


def is_suspended(job: Obj) -> bool:
    """``spec.suspend`` is true."""
    return spec_of(job).get("suspend") is True


def is_active(job: Obj) -> bool:
    """Unfinished, with at least one pod pending or running (``status.active`` > 0)."""
    return not is_finished(job) and _count(status_of(job).get("active")) > 0


def expected_pods(job: Obj, rjob: ReplicatedJob | None = None) -> int:
    """Pods the Job runs at once: min(parallelism, completions).

    Read from the Job's own spec (upstream does, so a Job resized in place counts right); when the
    Job carries no parallelism, from the replicated job's template; with neither, 1 (the default).
    """
    spec = spec_of(job)
    parallelism = spec.get("parallelism")
    if isinstance(parallelism, int) and not isinstance(parallelism, bool):
        completions = spec.get("completions")
        if isinstance(completions, int) and not isinstance(completions, bool):
            return max(min(parallelism, completions), 0)
        return max(parallelism, 0)
    if rjob is not None:
        return rjob.pods_per_job
    return 1


def is_ready(job: Obj, rjob: ReplicatedJob | None = None) -> bool:
    """Unfinished, and ready + succeeded pods reach the expected pod count.

    Upstream's ``ready`` in ReplicatedJobStatus counts only unfinished Jobs this way; a finished
    Job is counted as succeeded or failed instead.
    """
    if is_finished(job):
        return False
    status = status_of(job)
    done = _count(status.get("ready")) + _count(status.get("succeeded"))
    return done >= expected_pods(job, rjob)


def is_deleting(job: Obj) -> bool:
    """``metadata.deletionTimestamp`` is set."""
    return bool(_dict(job.get("metadata")).get("deletionTimestamp"))


def start_time_of(job: Obj) -> str | None:
    value = status_of(job).get("startTime")
    return value if isinstance(value, str) and value else None


# ----------------------------------------------------------------------------- attempts


def job_restart_attempt_of(job: Obj) -> int:
    """The ``job-restart-attempt`` label (RestartJob gate); 0 when missing or malformed: such
    a Job was created before any individual restart of its index."""
    return _label_int(job, api.JOB_RESTART_ATTEMPT) or 0


def _restarted_individually(jobset: JobSet, job: Obj) -> bool:
    """A RestartJob action has been decided for this Job's index since it was created: its
    ``job-restart-attempt`` is below the index's ``jobRestarts`` entry."""
    if not jobset.status.job_restarts:
        return False  # the usual case: no Job ever restarted on its own
    rjob, index = replicated_job_of(job), job_index_of(job)
    if rjob is None or index is None:
        return False
    return job_restart_attempt_of(job) < jobset.status.job_restart_target(rjob, index)


def is_current(jobset: JobSet, job: Obj) -> bool:
    """The Job belongs to the JobSet's current run.

    Upstream treats every attempt label not below ``status.restarts`` as current (a label above it
    can only come from a status the cache has not caught up with yet). A Job whose label is missing
    or malformed cannot be placed in any run and is treated as stale. So is a Job whose index was
    restarted individually (RestartJob) since it was created; upstream keeps a Job without the
    ``job-restart-attempt`` label, which would fail and restart its index again on every pass:
    here the missing label counts as 0.
    """
    attempt = restart_attempt_of(job)
    if attempt is None or attempt < jobset.status.restarts:
        return False
    return not _restarted_individually(jobset, job)


def current_jobs(jobset: JobSet, jobs: Iterable[Obj]) -> list[Obj]:
    """Jobs of the current restart attempt, in input order."""
    return [job for job in jobs if is_current(jobset, job)]


def stale_jobs(jobset: JobSet, jobs: Iterable[Obj]) -> list[Obj]:
    """Jobs of earlier restart attempts (or with an unreadable attempt label), in input order."""
    return [job for job in jobs if not is_current(jobset, job)]


# ----------------------------------------------------------------------------- cache view

# Pod-spec fields of a child Job that nothing here reads: the containers (their commands,
# environment, resources, mounts) are most of a Job's size. What is read of the pod template is
# its metadata, its volumes (the claims mounted) and the scheduling fields suspend.template_patch
# compares (nodeSelector, tolerations, schedulingGates).
_UNREAD_POD_FIELDS = ("containers", "initContainers", "ephemeralContainers")


def job_view(job: Obj) -> Obj:
    """What the Job informer keeps of a child Job (its transform): the object without
    ``metadata.managedFields`` and without the containers of its pod template. Every reader of
    observed Jobs (this module, decide, suspend, failure, elastic, status) answers the same for
    the view as for the whole object. The received object is changed in place (the informer
    owns it); a part that is not a mapping is left as it is."""
    meta = job.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    spec = job.get("spec")
    template = spec.get("template") if isinstance(spec, dict) else None
    pod = template.get("spec") if isinstance(template, dict) else None
    if isinstance(pod, dict):
        for key in _UNREAD_POD_FIELDS:
            pod.pop(key, None)
    return job


def service_view(service: Obj) -> Obj:
    """What the Service informer keeps of a headless Service (its transform): its metadata
    without ``managedFields``. Only whether the JobSet's Service exists is ever read (a missing
    one is created; an existing one is never changed), so its spec and status are dropped. The
    received object is changed in place (the informer owns it)."""
    meta = service.get("metadata")
    if isinstance(meta, dict):
        meta.pop("managedFields", None)
    service.pop("spec", None)
    service.pop("status", None)
    return service
