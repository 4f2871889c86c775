"""The failure policy: what to do when a Job of the current attempt has failed.

Upstream semantics:
- No ``failurePolicy``: the JobSet fails (reason ``FailedJobs``).
- With a policy, rules are tried in order; for each rule, among the failed Jobs it applies to, the
  one that failed first is taken; the first rule that applies to any failed Job wins. A rule
  applies to a Job when the Job has a replicated-job label and that replicated job is targeted
  (empty = all), its ``Failed`` condition's reason is listed (empty = any) and its message
  matches one of the patterns (regex search, empty = any).
- No rule applies: the default action ``RestartJobSet``, for the first failed Job overall.
- ``FailJobSet`` fails the JobSet; ``RestartJobSet`` restarts it, counting towards
  ``maxRestarts`` (failing with ``ReachedMaxRestarts`` once ``restartsCountTowardsMax`` has
  reached it, so ``maxRestarts: 0`` never restarts); ``RestartJobSetAndIgnoreMaxRestarts``
  restarts without counting.
- Messages name the first failed Job: ``"<message> (first failed job: <job name>)"``; a failing
  JobSet's Event carries the Failed condition's reason and message.

"First" is the earliest ``lastTransitionTime`` of the Job's Failed condition; we break ties by Job
name (upstream by list order, which is arbitrary), so the decision does not depend on job order.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from dataclasses import dataclass

from controller.jobset import api, children
from controller.jobset.model import FailurePolicyRule, JobSet, Obj
from controller.jobset.status import parse_time

DEFAULT_ACTION = api.RESTART_JOBSET
EVENT_WARNING = "Warning"

_EARLIEST = datetime.datetime.min.replace(tzinfo=datetime.UTC)


@dataclass(frozen=True)
class FailureDecision:
    """What the failure policy decided for one reconcile.

    ``fails_jobset``: the JobSet fails now; set its Failed condition from ``condition_reason`` /
    ``condition_message`` (both "" when restarting) and ``terminalState: Failed``. Otherwise it
    restarts: write ``new_restarts`` and ``new_restarts_count_towards_max`` to status (when
    failing they equal the current values). Either way, emit the ``event_type`` Event
    ``event_reason`` / ``event_message`` once the status write succeeded.
    """

    action: str
    failed_job: str
    rule: str | None
    fails_jobset: bool
    condition_reason: str
    condition_message: str
    event_type: str
    event_reason: str
    event_message: str
    new_restarts: int
    new_restarts_count_towards_max: int


def with_first_failed_job(message: str, job_name: str) -> str:
    return f"{message} (first failed job: {job_name})"


def failure_time(job: Obj) -> datetime.datetime:
    """When the Job failed; the earliest possible time when its condition carries none."""
    condition = children.failed_condition(job)
    moment = parse_time(condition.get("lastTransitionTime")) if condition else None
    return moment or _EARLIEST


def _order_key(job: Obj) -> tuple[datetime.datetime, str]:
    return failure_time(job), children.name_of(job)


def first_failed(jobs: Iterable[Obj]) -> Obj | None:
    """The Job whose Failed condition is oldest (ties: smallest name); None if none failed."""
    failed = [job for job in jobs if children.failed_condition(job) is not None]
    return min(failed, key=_order_key) if failed else None


def _pattern_matches(pattern: str, message: str) -> bool:
    try:
        return re.search(pattern, message) is not None
    except re.error:
        return False


def rule_applies(rule: FailurePolicyRule, job: Obj) -> bool:
    """Whether ``rule`` applies to the failed ``job`` (reason, message and target all match)."""
    condition = children.failed_condition(job)
    if condition is None:
        return False
    reason = condition.get("reason")
    reason = reason if isinstance(reason, str) else ""
    if rule.on_job_failure_reasons and reason not in rule.on_job_failure_reasons:
        return False
    message = condition.get("message")
    message = message if isinstance(message, str) else ""
    patterns = rule.on_job_failure_message_patterns
    if patterns and not any(_pattern_matches(p, message) for p in patterns):
        return False
    parent = children.replicated_job_of(job)
    if parent is None:
        return False
    return not rule.target_replicated_jobs or parent in rule.target_replicated_jobs


def _fail(
    jobset: JobSet, action: str, job: str, rule: str | None, reason: str, message: str
) -> FailureDecision:
    full = with_first_failed_job(message, job)
    return FailureDecision(
        action=action,
        failed_job=job,
        rule=rule,
        fails_jobset=True,
        condition_reason=reason,
        condition_message=full,
        event_type=EVENT_WARNING,
        event_reason=reason,
        event_message=full,
        new_restarts=jobset.status.restarts,
        new_restarts_count_towards_max=jobset.status.restarts_count_towards_max,
    )


def _restart(
    jobset: JobSet, action: str, job: str, rule: str | None, count: bool
) -> FailureDecision:
    if count:
        reason, message = api.REASON_RESTART_ACTION, api.MESSAGE_RESTART_ACTION
    else:
        reason, message = (
            api.REASON_RESTART_IGNORE_MAX_ACTION,
            api.MESSAGE_RESTART_IGNORE_MAX_ACTION,
        )
    towards = jobset.status.restarts_count_towards_max
    return FailureDecision(
        action=action,
        failed_job=job,
        rule=rule,
        fails_jobset=False,
        condition_reason="",
        condition_message="",
        event_type=EVENT_WARNING,
        event_reason=reason,
        event_message=with_first_failed_job(message, job),
        new_restarts=jobset.status.restarts + 1,
        new_restarts_count_towards_max=towards + 1 if count else towards,
    )


def evaluate(jobset: JobSet, jobs: Iterable[Obj]) -> FailureDecision | None:
    """The failure policy's decision, or None when no Job of the current attempt has failed.

    ``jobs`` may be all observed children; only failed Jobs of the current attempt are looked at.
    """
    failed = [job for job in children.current_jobs(jobset, jobs) if children.is_failed(job)]
    first = first_failed(failed)
    if first is None:
        return None
    policy = jobset.failure_policy
    if policy is None:
        return _fail(
            jobset,
            api.FAIL_JOBSET,
            children.name_of(first),
            None,
            api.REASON_FAILED_JOBS,
            api.MESSAGE_FAILED_JOBS,
        )

    action, rule_name, chosen = DEFAULT_ACTION, None, first
    for rule in policy.rules:
        matched = first_failed(job for job in failed if rule_applies(rule, job))
        if matched is not None:
            action, rule_name, chosen = rule.action, rule.name, matched
            break
    name = children.name_of(chosen)

    if action == api.FAIL_JOBSET:
        return _fail(
            jobset, action, name, rule_name, api.REASON_FAIL_ACTION, api.MESSAGE_FAIL_ACTION
        )
    if action == api.RESTART_JOBSET_IGNORE_MAX:
        return _restart(jobset, action, name, rule_name, count=False)
    if jobset.status.restarts_count_towards_max >= policy.max_restarts:
        return _fail(
            jobset,
            action,
            name,
            rule_name,
            api.REASON_REACHED_MAX_RESTARTS,
            api.MESSAGE_REACHED_MAX_RESTARTS,
        )
    return _restart(jobset, action, name, rule_name, count=True)
