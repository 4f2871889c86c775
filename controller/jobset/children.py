"""Observed child Jobs as typed views (``ChildJob``): which replicated job, index and attempt they
belong to, and state.

Child Jobs come from the informer cache as plain JSON dicts; ``view`` parses one once. Any field
may be missing (a Job just created has no status yet, a hand-made object may lack labels), so the
view tolerates partial objects and reads a neutral value instead of raising.

Upstream facts mirrored here:
- a Job is finished when it has a ``Complete`` or ``Failed`` condition with status ``"True"``;
  Kubernetes >= 1.31 first sets ``SuccessCriteriaMet`` / ``FailureTarget``, which do not count;
- a Job belongs to the current run when its ``restart-attempt`` label is not below
  ``status.restarts``; Jobs of earlier attempts are stale and get deleted;
- a Job is "ready" when ready + succeeded pods reach min(parallelism, completions).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.jobset import api
from controller.jobset.model import JobSet, ReplicatedJob
from controller.runtime.store import Obj, by_controller_uid

JOB_COMPLETE = "Complete"
JOB_FAILED = "Failed"
# Set True by the Job controller once it acted on spec.suspend (its active pods deleted).
JOB_SUSPENDED = "Suspended"
_FINISHED_TYPES = (JOB_COMPLETE, JOB_FAILED)


# ----------------------------------------------------------------------------- field access


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> int:
    """A non-negative integer counter from a status field; anything else counts as zero."""
    if isinstance(value, bool) or not isinstance(value, int):
        return 0
    return max(value, 0)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _label_int(labels: Mapping[str, Any], key: str) -> int | None:
    raw = labels.get(key)
    if not isinstance(raw, str) or not raw.isascii() or not raw.isdigit():
        return None
    return int(raw)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


# ----------------------------------------------------------------------------- the view


@dataclass(frozen=True)
class JobCondition:
    """A condition of a child Job that is True."""

    type: str
    reason: str
    message: str
    last_transition_time: str | None  # as stored (RFC 3339)


def _condition(raw: Mapping[str, Any]) -> JobCondition:
    moment = raw.get("lastTransitionTime")
    return JobCondition(
        type=_text(raw.get("type")),
        reason=_text(raw.get("reason")),
        message=_text(raw.get("message")),
        last_transition_time=moment if isinstance(moment, str) else None,
    )


@dataclass(frozen=True, eq=False)
class ChildJob:
    """A child Job as the decisions read it, parsed once from the cached object (``view``):
    which replicated job, index and attempt it belongs to, its counters and the condition it
    finished with. ``raw`` is the cached object (never mutate it), for what only a few readers
    need (its pod template). Compared by identity, as the cached objects are."""

    name: str
    uid: str
    labels: Mapping[str, Any]
    replicated_job: str | None  # the replicatedjob-name label; None when missing or empty
    job_index: int | None  # the job-index label; None when missing or malformed
    restart_attempt: int | None  # the restart-attempt label; None when missing or malformed
    # The job-restart-attempt label (RestartJob gate); 0 when missing or malformed: such a Job
    # was created before any individual restart of its index.
    job_restart_attempt: int
    controller_uid: str | None  # the uid of its controller ownerReference
    deleting: bool  # metadata.deletionTimestamp is set
    suspended: bool  # spec.suspend is true
    parallelism: int | None
    completions: int | None
    active: int
    ready: int
    succeeded: int
    # Pods being deleted (status.terminating): they may still run, and write to their volumes.
    terminating: int
    # Its Suspended condition is True: the Job controller has seen spec.suspend and deleted its
    # active pods (``active`` and ``terminating`` then count what is left).
    suspended_condition: bool
    start_time: str | None
    # The first Complete or Failed condition that is True: the Job is finished.
    finished: JobCondition | None
    # Its Failed condition that is True (also after a Complete one, which wins ``finished``).
    failed_condition: JobCondition | None
    raw: Obj

    @property
    def is_finished(self) -> bool:
        return self.finished is not None

    @property
    def is_complete(self) -> bool:
        return self.finished is not None and self.finished.type == JOB_COMPLETE

    @property
    def is_failed(self) -> bool:
        return self.finished is not None and self.finished.type == JOB_FAILED

    @property
    def is_active(self) -> bool:
        """Unfinished, with at least one pod pending or running (``status.active`` > 0)."""
        return self.finished is None and self.active > 0

    @property
    def pods_stopped(self) -> bool:
        """No pod of the Job runs or is terminating, and none will start: it is finished or
        suspended as the Job controller has seen it, with no pod active or terminating, and not
        being deleted (deleted Foreground, it stays while its pods go, but its status is no
        longer kept)."""
        if self.deleting or self.active or self.terminating:
            return False
        return self.finished is not None or (self.suspended and self.suspended_condition)

    def expected_pods(self, rjob: ReplicatedJob | None = None) -> int:
        """Pods the Job runs at once: min(parallelism, completions).

        Read from the Job's own spec (upstream does, so a Job resized in place counts right);
        when the Job carries no parallelism, from the replicated job's template; with neither, 1
        (the default).
        """
        if self.parallelism is not None:
            if self.completions is not None:
                return max(min(self.parallelism, self.completions), 0)
            return max(self.parallelism, 0)
        if rjob is not None:
            return rjob.pods_per_job
        return 1

    def is_ready(self, rjob: ReplicatedJob | None = None) -> bool:
        """Unfinished, and ready + succeeded pods reach the expected pod count.

        Upstream's ``ready`` in ReplicatedJobStatus counts only unfinished Jobs this way; a
        finished Job is counted as succeeded or failed instead.
        """
        if self.finished is not None:
            return False
        return self.ready + self.succeeded >= self.expected_pods(rjob)


def view(job: Obj) -> ChildJob:
    """The typed view of a cached child Job. Tolerates partial objects (a Job just created has
    no status yet, a hand-made object may lack labels): a missing or malformed field reads as a
    neutral value, never an error."""
    meta, spec, status = (
        _dict(job.get("metadata")),
        _dict(job.get("spec")),
        _dict(job.get("status")),
    )
    labels = _dict(meta.get("labels"))
    rjob = labels.get(api.REPLICATED_JOB_NAME)
    raw_conditions = status.get("conditions")
    conditions = (
        [c for c in raw_conditions if isinstance(c, dict) and c.get("status") == "True"]
        if isinstance(raw_conditions, list)
        else []
    )
    finished = next((c for c in conditions if c.get("type") in _FINISHED_TYPES), None)
    failed = next((c for c in conditions if c.get("type") == JOB_FAILED), None)
    start = status.get("startTime")
    return ChildJob(
        name=_text(meta.get("name")),
        uid=_text(meta.get("uid")),
        labels=labels,
        replicated_job=rjob if isinstance(rjob, str) and rjob else None,
        job_index=_label_int(labels, api.JOB_INDEX),
        restart_attempt=_label_int(labels, api.RESTART_ATTEMPT),
        job_restart_attempt=_label_int(labels, api.JOB_RESTART_ATTEMPT) or 0,
        controller_uid=next(iter(by_controller_uid(job)), None),
        deleting=bool(meta.get("deletionTimestamp")),
        suspended=spec.get("suspend") is True,
        parallelism=_int(spec.get("parallelism")),
        completions=_int(spec.get("completions")),
        active=_count(status.get("active")),
        ready=_count(status.get("ready")),
        succeeded=_count(status.get("succeeded")),
        terminating=_count(status.get("terminating")),
        suspended_condition=any(c.get("type") == JOB_SUSPENDED for c in conditions),
        start_time=start if isinstance(start, str) and start else None,
        finished=None if finished is None else _condition(finished),
        failed_condition=None if failed is None else _condition(failed),
        raw=job,
    )


def views(jobs: Iterable[Obj]) -> list[ChildJob]:
    return [view(job) for job in jobs]


# ----------------------------------------------------------------------------- attempts


def _restarted_individually(jobset: JobSet, job: ChildJob) -> bool:
    """A RestartJob action has been decided for this Job's index since it was created: its
    ``job-restart-attempt`` is below the index's ``jobRestarts`` entry."""
    if not jobset.status.job_restarts:
        return False  # the usual case: no Job ever restarted on its own
    if job.replicated_job is None or job.job_index is None:
        return False
    return job.job_restart_attempt < jobset.status.job_restart_target(
        job.replicated_job, job.job_index
    )


def is_current(jobset: JobSet, job: ChildJob) -> bool:
    """The Job belongs to the JobSet's current run.

    Upstream treats every attempt label not below ``status.restarts`` as current (a label above it
    can only come from a status the cache has not caught up with yet). A Job whose label is missing
    or malformed cannot be placed in any run and is treated as stale. So is a Job whose index was
    restarted individually (RestartJob) since it was created; upstream keeps a Job without the
    ``job-restart-attempt`` label, which would fail and restart its index again on every pass:
    here the missing label counts as 0.
    """
    attempt = job.restart_attempt
    if attempt is None or attempt < jobset.status.restarts:
        return False
    return not _restarted_individually(jobset, job)


def current_jobs(jobset: JobSet, jobs: Iterable[ChildJob]) -> list[ChildJob]:
    """Jobs of the current restart attempt, in input order."""
    return [job for job in jobs if is_current(jobset, job)]


def stale_jobs(jobset: JobSet, jobs: Iterable[ChildJob]) -> list[ChildJob]:
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
