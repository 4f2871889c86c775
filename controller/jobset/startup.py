"""Startup order: which replicated jobs may have their missing Jobs created now.

Upstream semantics (``startupPolicy`` and ``dependsOn`` are mutually exclusive at admission, but
both are honoured here if they meet):
- ``dependsOn``: a replicated job waits until every dependency has reached its status:
  ``Ready`` when ready + succeeded + failed Jobs reach the dependency's replicas, ``Complete``
  when succeeded Jobs do. This holds while the JobSet is suspended too (its Jobs are then created
  suspended, and the chain starts again on resume).
- ``startupPolicyOrder: InOrder`` (only while the JobSet is not suspended; a suspended JobSet gets
  all its Jobs created, suspended, and ``suspend.py`` resumes them in order): replicated jobs are
  taken in spec order; one that has not fully started (ready + succeeded + failed below its
  replicas) may be created, and the ones after it wait. ``StartupPolicyInProgress`` is True while
  some replicated job has not fully started, then ``StartupPolicyCompleted`` (upstream flips back
  to InProgress if a started one regresses).

Ours on top: a replicated job that already has Jobs in the current attempt stays allowed even if a
dependency or an earlier replicated job regressed, so a lost Job of a running group is recreated
rather than leaving the group short. Nothing here ever asks for a Job to be deleted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller.jobset import api, children
from controller.jobset.children import ChildJob
from controller.jobset.jobsetstatus import Condition, ReplicatedJobStatus
from controller.jobset.model import JobSet, ReplicatedJob
from controller.jobset.status import TRUE

# The startup conditions; both are set with status True.
IN_ORDER_IN_PROGRESS = Condition(
    api.STARTUP_POLICY_IN_PROGRESS,
    TRUE,
    api.REASON_IN_ORDER_IN_PROGRESS,
    api.MESSAGE_IN_ORDER_IN_PROGRESS,
)
IN_ORDER_COMPLETED = Condition(
    api.STARTUP_POLICY_COMPLETED,
    TRUE,
    api.REASON_IN_ORDER_COMPLETED,
    api.MESSAGE_IN_ORDER_COMPLETED,
)


@dataclass(frozen=True)
class StartupDecision:
    """``allowed``: replicated jobs (spec order) whose missing Jobs may be created now.

    ``waiting``: the others. ``in_order_condition``: the startup condition to set, or None
    when there is no InOrder policy or the JobSet is suspended.
    """

    allowed: tuple[str, ...]
    waiting: tuple[str, ...]
    in_order_condition: Condition | None


def started_count(status: ReplicatedJobStatus | None) -> int:
    """Jobs that have started: ready + succeeded + failed (none without a status)."""
    return status.started if status is not None else 0


def all_started(rjob: ReplicatedJob, status: ReplicatedJobStatus | None) -> bool:
    """Every Job of the replicated job is ready, succeeded or failed."""
    return started_count(status) >= rjob.replicas


def dependencies_met(
    jobset: JobSet, rjob: ReplicatedJob, status_by_name: Mapping[str, ReplicatedJobStatus]
) -> bool:
    """Every ``dependsOn`` entry of ``rjob`` has reached its status (an unknown name never does)."""
    for dependency in rjob.depends_on:
        target = jobset.replicated_job(dependency.name)
        if target is None:
            return False
        status = status_by_name.get(dependency.name)
        if dependency.status == "Complete":
            reached = (status.succeeded if status is not None else 0) >= target.replicas
        else:
            reached = started_count(status) >= target.replicas
        if not reached:
            return False
    return True


def allowed_replicated_jobs(
    jobset: JobSet,
    status_by_name: Mapping[str, ReplicatedJobStatus],
    jobs: Iterable[ChildJob] = (),
) -> StartupDecision:
    """Which replicated jobs may be created now, and the InOrder condition to report.

    ``jobs``: the observed children (optional); a replicated job with a Job in the current attempt
    stays allowed whatever its dependencies do.
    """
    present = {
        name
        for job in children.current_jobs(jobset, jobs)
        if (name := job.replicated_job) is not None
    }
    in_order = jobset.startup_in_order and not jobset.suspend
    allowed: list[str] = []
    waiting: list[str] = []
    blocked = False  # an earlier replicated job (InOrder) has not fully started
    for rjob in jobset.replicated_jobs:
        gate_open = not blocked and dependencies_met(jobset, rjob, status_by_name)
        if gate_open or rjob.name in present:
            allowed.append(rjob.name)
        else:
            waiting.append(rjob.name)
        if (
            in_order
            and not blocked
            and gate_open
            and not all_started(rjob, status_by_name.get(rjob.name))
        ):
            blocked = True
    condition = None
    if in_order:
        condition = IN_ORDER_IN_PROGRESS if blocked else IN_ORDER_COMPLETED
    return StartupDecision(tuple(allowed), tuple(waiting), condition)
