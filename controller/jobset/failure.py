"""The failure policy: what to do when a Job of the current attempt has failed.

Upstream semantics:
- No ``failurePolicy``: the JobSet fails (reason ``FailedJobs``).
- With a policy, rules are tried in order; for each rule, among the failed Jobs it applies to, the
  one that failed first is taken; the first rule that applies to any failed Job wins. A rule
  applies to a Job when the Job has a replicated-job label and that replicated job is targeted
  (empty = all), its ``Failed`` condition's reason is listed (empty = any) and its message
  matches one of the patterns (empty = any): Go's ``regexp.MatchString``, an unanchored search,
  here by RE2 in Go's dialect (``messagepatterns``).
- No rule applies: the default action ``RestartJobSet``, for the first failed Job overall.
- ``FailJobSet`` fails the JobSet; ``RestartJobSet`` restarts it, counting towards
  ``maxRestarts`` (failing with ``ReachedMaxRestarts`` once ``restartsCountTowardsMax`` has
  reached it, so ``maxRestarts: 0`` never restarts); ``RestartJobSetAndIgnoreMaxRestarts``
  restarts without counting.
- Behind the RestartJob feature gate (upstream alpha), ``RestartJob`` recreates only the failed
  Job: it bumps ``jobRestarts[index]`` and ``jobRestartsCountTowardsMax[index]`` of its
  replicated job's status (``JobRestart``); ``RestartJobAndIgnoreMaxRestarts`` bumps only
  ``jobRestarts``. The Job, whose ``job-restart-attempt`` label is now below its index's entry,
  is stale and replaced (same name) on the next passes. With Jobs restarting individually,
  maxRestarts is checked against ``restartsCountTowardsMax`` plus every
  ``jobRestartsCountTowardsMax`` entry (for RestartJobSet too): those arrays stay empty unless
  the gate is on, and a controller without the gate refuses a JobSet using the actions
  (``gate_refusal``). A Job restart sets no RestartingJobSet condition, as upstream.
- Messages name the first failed Job: ``"<message> (first failed job: <job name>)"``; a failing
  JobSet's Event carries the Failed condition's reason and message.
- Every restart (either restart action, no gate) sets ``RestartingJobSet=True`` with reason
  ``FailurePolicy_<rule name>`` (``DefaultFailurePolicy`` when no rule matched) and the restart
  Event's message. It turns False (only if present) with ``JobsReady`` once every Job of the
  new attempt is ready or succeeded and the JobSet is not suspended (``restart_ended``), and with
  ``JobSetFailed`` / ``JobSetCompleted`` / ``JobSetSuspended`` when the JobSet fails, completes
  or is suspended (``RESTART_ENDED_*``).

"First" is the earliest ``lastTransitionTime`` of the Job's Failed condition; we break ties by Job
name (upstream by list order, which is arbitrary), so the decision does not depend on job order.

Matching is the one costly part: RE2 is linear in the message, but every pattern of every rule
meets every distinct failure message (up to the 10,000 Jobs of a JobSet), and a pattern built to
defeat RE2's DFA costs time proportional to its program size times the message length. So each
distinct message is matched once (``match_messages``), and the reconciler does that in a worker
thread (``match_messages_in_thread``; RE2 releases the GIL) and hands the table to ``evaluate``:
however long a tenant's patterns take, the event loop keeps renewing the lease and serving other
JobSets. ``evaluate`` without a table matches inline (tests, the pure path).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from controller.jobset import api, children, messagepatterns
from controller.jobset.children import ChildJob
from controller.jobset.jobsetstatus import Condition, ReplicatedJobStatus
from controller.jobset.model import FailurePolicyRule, JobSet
from controller.jobset.status import FALSE, parse_time
from controller.runtime.threads import run_in_daemon_thread

DEFAULT_ACTION = api.RESTART_JOBSET
EVENT_WARNING = "Warning"

_EARLIEST = datetime.datetime.min.replace(tzinfo=datetime.UTC)


@dataclass(frozen=True)
class JobRestart:
    """A RestartJob decision: the Job of ``replicated_job`` / ``index`` is recreated alone;
    ``counts``: it counts towards maxRestarts (RestartJob, not ...AndIgnoreMaxRestarts)."""

    replicated_job: str
    index: int
    counts: bool


@dataclass(frozen=True)
class FailureDecision:
    """What the failure policy decided for one reconcile.

    ``fails_jobset``: the JobSet fails now; set its Failed condition from ``condition_reason`` /
    ``condition_message`` and ``terminalState: Failed``. Otherwise it restarts: write
    ``new_restarts`` and ``new_restarts_count_towards_max`` to status (when failing they equal
    the current values) and set ``RestartingJobSet=True`` from ``condition_reason`` /
    ``condition_message``. ``condition_type`` names the condition either way. Emit the
    ``event_type`` Event ``event_reason`` / ``event_message`` once the status write succeeded.
    ``job_restart``: set for RestartJob actions: only that Job restarts (``bump_job_restarts``),
    ``new_restarts*`` are unchanged and no RestartingJobSet condition is set.
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
    job_restart: JobRestart | None = None

    @property
    def condition_type(self) -> str:
        return api.FAILED if self.fails_jobset else api.RESTARTING


def restarting_reason(rule: str | None) -> str:
    """The RestartingJobSet reason of a restart by ``rule`` (None: the default action)."""
    return (
        api.REASON_RESTARTING_DEFAULT if rule is None else api.REASON_RESTARTING_RULE_PREFIX + rule
    )


# RestartingJobSet=False, set only over an existing condition (a JobSet that never restarted
# does not get one).
RESTART_ENDED_JOBS_READY = Condition(
    api.RESTARTING, FALSE, api.REASON_JOBS_READY, api.MESSAGE_JOBS_READY
)
RESTART_ENDED_FAILED = Condition(
    api.RESTARTING, FALSE, api.REASON_RESTART_ENDED_FAILED, api.MESSAGE_RESTART_ENDED_FAILED
)
RESTART_ENDED_COMPLETED = Condition(
    api.RESTARTING, FALSE, api.REASON_RESTART_ENDED_COMPLETED, api.MESSAGE_ALL_JOBS_COMPLETED
)
RESTART_ENDED_SUSPENDED = Condition(
    api.RESTARTING, FALSE, api.REASON_RESTART_ENDED_SUSPENDED, api.MESSAGE_SUSPENDED
)


def all_jobs_ready(jobset: JobSet, statuses: Iterable[ReplicatedJobStatus]) -> bool:
    """Ready plus succeeded Jobs, summed over the replicated jobs, equal the replicas summed."""
    wanted = sum(rjob.replicas for rjob in jobset.replicated_jobs)
    done = sum(s.ready + s.succeeded for s in statuses)
    return done == wanted


def restart_ended(jobset: JobSet, statuses: Iterable[ReplicatedJobStatus]) -> Condition | None:
    """``RESTART_ENDED_JOBS_READY`` when the current attempt's Jobs (``statuses``: its
    replicatedJobsStatus) are all ready or succeeded and the JobSet is not suspended; else None.
    Checked on every pass before the failure policy, as upstream."""
    if jobset.suspend or not all_jobs_ready(jobset, statuses):
        return None
    return RESTART_ENDED_JOBS_READY


def with_first_failed_job(message: str, job_name: str) -> str:
    return f"{message} (first failed job: {job_name})"


def failure_time(job: ChildJob) -> datetime.datetime:
    """When the Job failed; the earliest possible time when its condition carries none."""
    condition = job.failed_condition
    moment = parse_time(condition.last_transition_time) if condition else None
    return moment or _EARLIEST


def _order_key(job: ChildJob) -> tuple[datetime.datetime, str]:
    return failure_time(job), job.name


def first_failed(jobs: Iterable[ChildJob]) -> ChildJob | None:
    """The Job whose Failed condition is oldest (ties: smallest name); None if none failed."""
    failed = [job for job in jobs if job.failed_condition is not None]
    return min(failed, key=_order_key) if failed else None


# A failure message → the indices of the policy's rules that have message patterns and one of
# which matches it (rules without patterns match any message and are not listed).
MessageMatches = Mapping[str, frozenset[int]]
_Patterns = tuple[messagepatterns.Pattern | None, ...]


def _failure_message(job: ChildJob) -> str:
    return job.failed_condition.message if job.failed_condition is not None else ""


def _any_matches(patterns: _Patterns, text: bytes) -> bool:
    return any(p is not None and p.search(text) for p in patterns)


def _match(
    rules: Sequence[tuple[int, _Patterns]], messages: Iterable[str]
) -> dict[str, frozenset[int]]:
    """The expensive part, on plain data (safe to run in another thread)."""
    table: dict[str, frozenset[int]] = {}
    for message in messages:
        if message not in table:
            text = messagepatterns.encode(message)
            table[message] = frozenset(i for i, patterns in rules if _any_matches(patterns, text))
    return table


def _pattern_rules(jobset: JobSet) -> list[tuple[int, _Patterns]]:
    policy = jobset.failure_policy
    if policy is None:
        return []
    return [
        (i, rule.message_patterns())
        for i, rule in enumerate(policy.rules)
        if rule.on_job_failure_message_patterns
    ]


def _current_failed(jobset: JobSet, jobs: Iterable[ChildJob]) -> list[ChildJob]:
    return [job for job in children.current_jobs(jobset, jobs) if job.is_failed]


def match_messages(jobset: JobSet, jobs: Iterable[ChildJob]) -> dict[str, frozenset[int]]:
    """Each distinct failure message of the current attempt's failed Jobs, matched once against
    every rule's patterns ({} when no rule has patterns or no Job failed)."""
    rules = _pattern_rules(jobset)
    if not rules:
        return {}
    return _match(rules, (_failure_message(job) for job in _current_failed(jobset, jobs)))


async def match_messages_in_thread(jobset: JobSet, jobs: Iterable[ChildJob]) -> MessageMatches:
    """``match_messages``, with the matching in a daemon thread, off the event loop.

    The messages are read here; the thread gets only strings and compiled patterns. Nothing to
    match (the usual case: no failed Job, no rule with patterns, or a finished or deleted JobSet,
    whose failure policy is not evaluated) costs no thread.
    """
    rules = _pattern_rules(jobset)
    if not rules or jobset.finished or jobset.deleting:
        return {}
    messages = sorted({_failure_message(job) for job in _current_failed(jobset, jobs)})
    if not messages:
        return {}
    return await run_in_daemon_thread(_match, rules, messages)


def _reason_and_target_apply(rule: FailurePolicyRule, job: ChildJob) -> bool:
    condition = job.failed_condition
    if condition is None:
        return False
    if rule.on_job_failure_reasons and condition.reason not in rule.on_job_failure_reasons:
        return False
    parent = job.replicated_job
    if parent is None:
        return False
    return not rule.target_replicated_jobs or parent in rule.target_replicated_jobs


def rule_applies(rule: FailurePolicyRule, job: ChildJob) -> bool:
    """Whether ``rule`` applies to the failed ``job`` (reason, message and target all match)."""
    if not _reason_and_target_apply(rule, job):
        return False
    if not rule.on_job_failure_message_patterns:
        return True
    return _any_matches(rule.message_patterns(), messagepatterns.encode(_failure_message(job)))


def _applies(rule: FailurePolicyRule, index: int, job: ChildJob, matches: MessageMatches) -> bool:
    """``rule_applies``, with the message looked up in ``matches`` (matched here if absent)."""
    if not _reason_and_target_apply(rule, job):
        return False
    if not rule.on_job_failure_message_patterns:
        return True
    message = _failure_message(job)
    row = matches.get(message)
    if row is None:
        return _any_matches(rule.message_patterns(), messagepatterns.encode(message))
    return index in row


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


def _restarting(
    action: str,
    job: str,
    rule: str | None,
    event: tuple[str, str],
    restarts: tuple[int, int],
    job_restart: JobRestart | None = None,
) -> FailureDecision:
    """A restart's decision: the RestartingJobSet condition and a Warning Event, both with
    ``event``'s message naming the first failed ``job``; ``restarts``: the new (restarts,
    restartsCountTowardsMax)."""
    reason, message = event
    full = with_first_failed_job(message, job)
    return FailureDecision(
        action=action,
        failed_job=job,
        rule=rule,
        fails_jobset=False,
        condition_reason=restarting_reason(rule),
        condition_message=full,
        event_type=EVENT_WARNING,
        event_reason=reason,
        event_message=full,
        new_restarts=restarts[0],
        new_restarts_count_towards_max=restarts[1],
        job_restart=job_restart,
    )


def _restart(
    jobset: JobSet, action: str, job: str, rule: str | None, count: bool
) -> FailureDecision:
    event = (
        (api.REASON_RESTART_ACTION, api.MESSAGE_RESTART_ACTION)
        if count
        else (api.REASON_RESTART_IGNORE_MAX_ACTION, api.MESSAGE_RESTART_IGNORE_MAX_ACTION)
    )
    towards = jobset.status.restarts_count_towards_max
    restarts = (jobset.status.restarts + 1, towards + 1 if count else towards)
    return _restarting(action, job, rule, event, restarts)


def _restart_job(jobset: JobSet, action: str, job: ChildJob, rule: str | None) -> FailureDecision:
    counts = action == api.RESTART_JOB
    event = (
        (api.REASON_RESTART_JOB_ACTION, api.MESSAGE_RESTART_JOB_ACTION)
        if counts
        else (api.REASON_RESTART_JOB_IGNORE_MAX_ACTION, api.MESSAGE_RESTART_JOB_IGNORE_MAX_ACTION)
    )
    name = job.name
    rjob, index = job.replicated_job, job.job_index
    if rjob is None or index is None:
        # Not placeable at an index (a hand-made Job; upstream errors and retries forever): the
        # whole JobSet restarts, counting as the action would, which does replace this Job.
        return _restart(jobset, action, name, rule, count=counts)
    unchanged = (jobset.status.restarts, jobset.status.restarts_count_towards_max)
    return _restarting(action, name, rule, event, unchanged, JobRestart(rjob, index, counts))


def _bumped(values: tuple[int, ...], index: int, length: int) -> tuple[int, ...]:
    result = list(values) + [0] * (max(length, index + 1) - len(values))
    result[index] += 1
    return tuple(result)


def bump_job_restarts(
    jobset: JobSet, statuses: Sequence[ReplicatedJobStatus], restart: JobRestart
) -> tuple[ReplicatedJobStatus, ...]:
    """``statuses`` (replicatedJobsStatus) with the restarted Job's entries bumped: jobRestarts
    always, jobRestartsCountTowardsMax when it counts. An array not there yet starts as one 0
    per replica (upstream); a replicated job raised beyond it grows."""
    replicas = next(
        (r.replicas for r in jobset.replicated_jobs if r.name == restart.replicated_job), 0
    )
    index = restart.index
    return tuple(
        replace(
            entry,
            job_restarts=_bumped(entry.job_restarts, index, replicas),
            job_restarts_count_towards_max=(
                _bumped(entry.job_restarts_count_towards_max, index, replicas)
                if restart.counts
                else entry.job_restarts_count_towards_max
            ),
        )
        if entry.name == restart.replicated_job
        else entry
        for entry in statuses
    )


def carry_job_restarts(
    jobset: JobSet, statuses: Sequence[ReplicatedJobStatus]
) -> tuple[ReplicatedJobStatus, ...]:
    """Freshly counted ``statuses`` with the stored jobRestarts arrays kept (they are history,
    not counts of the current Jobs)."""
    restarts, towards = jobset.status.job_restarts, jobset.status.job_restarts_towards_max
    if not restarts and not towards:
        return tuple(statuses)
    return tuple(
        replace(
            entry,
            job_restarts=restarts.get(entry.name, entry.job_restarts),
            job_restarts_count_towards_max=towards.get(
                entry.name, entry.job_restarts_count_towards_max
            ),
        )
        for entry in statuses
    )


def evaluate(
    jobset: JobSet, jobs: Iterable[ChildJob], matches: MessageMatches | None = None
) -> FailureDecision | None:
    """The failure policy's decision, or None when no Job of the current attempt has failed.

    ``jobs`` may be all observed children; only failed Jobs of the current attempt are looked at.
    ``matches``: the messages already matched (``match_messages_in_thread``); without it, or for
    a message it lacks, matching happens here.
    """
    jobs = list(jobs)
    failed = _current_failed(jobset, jobs)
    first = first_failed(failed)
    if first is None:
        return None
    policy = jobset.failure_policy
    if policy is None:
        return _fail(
            jobset,
            api.FAIL_JOBSET,
            first.name,
            None,
            api.REASON_FAILED_JOBS,
            api.MESSAGE_FAILED_JOBS,
        )

    table = matches if matches is not None else match_messages(jobset, failed)
    action, rule_name, chosen = DEFAULT_ACTION, None, first
    for index, rule in enumerate(policy.rules):
        matched = first_failed(job for job in failed if _applies(rule, index, job, table))
        if matched is not None:
            action, rule_name, chosen = rule.action, rule.name, matched
            break
    name = chosen.name

    if action == api.FAIL_JOBSET:
        return _fail(
            jobset, action, name, rule_name, api.REASON_FAIL_ACTION, api.MESSAGE_FAIL_ACTION
        )
    if action == api.RESTART_JOBSET_IGNORE_MAX:
        return _restart(jobset, action, name, rule_name, count=False)
    if action == api.RESTART_JOB_IGNORE_MAX:
        return _restart_job(jobset, action, chosen, rule_name)
    if jobset.status.total_restarts_count_towards_max >= policy.max_restarts:
        return _fail(
            jobset,
            action,
            name,
            rule_name,
            api.REASON_REACHED_MAX_RESTARTS,
            api.MESSAGE_REACHED_MAX_RESTARTS,
        )
    if action == api.RESTART_JOB:
        return _restart_job(jobset, action, chosen, rule_name)
    return _restart(jobset, action, name, rule_name, count=True)
