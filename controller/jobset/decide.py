"""What the controller does for one JobSet: observed state in, a plan of writes out (pure).

Order of concerns, as upstream's reconcile:
1. Jobs of earlier restart attempts are deleted (Recreate; BlockingRecreate also holds back the
   new attempt's Jobs until the old ones are gone).
2. A finished JobSet: its still-active Jobs are deleted, then only TTL-after-finished matters.
3. Status per replicated job is computed from the current attempt's Jobs.
4. A failed Job → the failure policy (fail, or restart: bump ``status.restarts`` and set
   ``RestartingJobSet=True``; the next pass deletes the old attempt and creates the new one;
   RestartJob bumps only the failed Job's ``jobRestarts`` entry, and the next passes replace
   that Job alone).
   Before it, ``RestartingJobSet`` turns False once the new attempt's Jobs are all ready; it
   turns False too when the JobSet fails, completes or is suspended.
5. The success policy → Completed.
6. Suspend / resume of child Jobs.
7. Missing Jobs (allowed by startupPolicy / dependsOn) and the headless Service are created.
8. Status is part of the plan only when it differs from what is stored.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from controller.jobset import (
    api,
    children,
    construct,
    elastic,
    failure,
    kueue,
    startup,
    status,
    success,
    suspend,
    ttl,
    volumes,
    writefailures,
)
from controller.jobset.children import ChildJob
from controller.jobset.jobsetstatus import Condition, JobSetStatus
from controller.jobset.model import JobSet
from controller.jobset.status import Event
from controller.jobset.volumes import (
    Blocked,
    ClaimView,
    Snapshots,
    Storage,
    StorageClasses,
    VolumeModel,
    VolumePlan,
)
from controller.jobset.writefailures import Failure
from controller.runtime.store import Obj

# How long a due TTL delete waits for claims to lose an ownerReference retention keeps them
# without (their update events usually bring the next pass sooner).
TTL_HOLD_SECONDS = 5.0


@dataclass
class Plan:
    create_service: Obj | None = None
    create_jobs: list[Obj] = field(default_factory=list)
    delete_jobs: list[str] = field(default_factory=list)
    patch_jobs: list[tuple[str, Obj]] = field(default_factory=list)
    # Suspended Jobs whose pod template changes on resume must have status.startTime cleared first.
    clear_start_time: list[str] = field(default_factory=list)
    status: JobSetStatus | None = None  # the complete new status, only when it changed
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None
    delete_jobset: bool = False
    volume: VolumePlan | None = None
    # Transitions made by this plan (for metrics once the status write succeeded).
    completed: bool = False
    failed: bool = False

    @property
    def writes(self) -> int:
        return (
            (1 if self.create_service else 0)
            + len(self.create_jobs)
            + len(self.delete_jobs)
            + len(self.patch_jobs)
            + len(self.clear_start_time)
            + (1 if self.status is not None else 0)
            + (1 if self.delete_jobset else 0)
            + (self.volume.writes if self.volume else 0)
        )


def _announced(conditions: tuple[Condition, ...], kind: str) -> tuple[str, ...] | None:
    found = next((c for c in conditions if c.type == kind), None)
    return None if found is None else (found.status, found.reason, found.message)


class _Status:
    """The status being built, starting from what is stored (``jobset.status``)."""

    def __init__(self, jobset: JobSet, now: datetime.datetime) -> None:
        self.now = now
        self.generation = jobset.generation
        self.original = stored = jobset.status
        self.restarts = stored.restarts
        self.restarts_count_towards_max = stored.restarts_count_towards_max
        self.terminal_state = stored.terminal_state
        self.conditions = stored.conditions
        self.replicated_jobs_status = stored.replicated_jobs_status
        self.volumes = stored.volumes
        self.events: list[Event] = []

    def condition(self, condition: Condition, *, add_when_false: bool = False) -> None:
        before = self.conditions
        after = status.set_condition(
            before,
            condition.type,
            condition.status,
            condition.reason,
            condition.message,
            self.now,
            self.generation,
            add_when_false=add_when_false,
        )
        if after is not before:
            self.conditions = after
            # An Event announces what a reader sees change: the condition added, or its status,
            # reason or message. A new observedGeneration alone (a spec edit) is no news.
            kind = condition.type
            if condition.event_type and _announced(before, kind) != _announced(after, kind):
                self.events.append(Event(condition.event_type, condition.reason, condition.message))

    def changed(self) -> JobSetStatus | None:
        """The status to write, made once, or None when it says what is stored
        (``JobSetStatus.same_as``, the "none" of ``change_from``, which pacing reads too)."""
        stored = self.original
        # Most passes change nothing: plain equality of the parts first, before a value is made.
        if (
            self.conditions is stored.conditions
            and self.restarts == stored.restarts
            and self.restarts_count_towards_max == stored.restarts_count_towards_max
            and self.terminal_state == stored.terminal_state
            and self.replicated_jobs_status == stored.replicated_jobs_status
            and self.volumes == stored.volumes
        ):
            return None
        built = JobSetStatus(
            self.restarts,
            self.restarts_count_towards_max,
            self.terminal_state,
            self.conditions,
            self.replicated_jobs_status,
            self.volumes,
        )
        return None if built.same_as(stored) else built


def _beyond_replicas(jobset: JobSet, job: ChildJob) -> bool:
    rjob = jobset.replicated_job(job.replicated_job or "")
    index = job.job_index
    return rjob is None or (index is not None and index >= rjob.replicas)


def _mounted_jobs(
    jobset: JobSet,
    allowed: frozenset[str],
    store: Storage,
    existing: set[str],
    others: Mapping[str, Obj],
    restart_job: bool = False,
) -> tuple[list[Obj], list[Failure]]:
    """Desired Jobs not in ``existing``, with their claims mounted; a Job waits until every claim
    its pods use is mountable (Pod scope: the claims of all its completion indexes, although its
    template mounts one placeholder). A name held by a Job in ``others`` (not this JobSet's) is
    reported, never taken over: creating it would only get a 409."""
    result = []
    held = []
    for job in construct.desired_jobs(jobset, allowed, existing, restart_job):
        if job.name in others:
            held.append(job.name)
            continue
        if not store.may_create(job):
            continue  # a claim it needs is not mountable yet
        result.append(store.mounted(job, jobset))
    return result, writefailures.held_jobs(held, others)


def _resize(
    jobset: JobSet, jobs: Sequence[ChildJob], store: Storage, gate: bool
) -> list[tuple[str, Obj]]:
    """ElasticJobSet: the patches that resize running Jobs to their template. A Job waits until
    every claim its pods use at the new size is mountable, as a Job not created yet does (Pod
    scope: the claims of the new completion indexes are made first)."""
    if not gate:
        return []

    return elastic.resize_patches(jobset, jobs, store.may_resize)


def _resize_condition(built: _Status, jobset: JobSet, jobs: Sequence[ChildJob], gate: bool) -> None:
    """Without the gate, a resized template is reported (condition and Event), never applied."""
    pending = [] if gate else elastic.out_of_size(jobset, jobs)
    if pending:
        message = elastic.gate_off_message(pending)
        built.condition(
            Condition(elastic.CONDITION, "True", elastic.REASON_GATE_OFF, message, "Warning")
        )
    else:
        built.condition(
            Condition(
                elastic.CONDITION,
                "False",
                elastic.REASON_IN_SYNC,
                elastic.MESSAGE_IN_SYNC,
                "Normal",
            )
        )


def _kueue_condition(built: _Status) -> None:
    """``KueueIncompatible``, set by an older release, cleared if present (``kueue``)."""
    built.condition(
        Condition(
            kueue.CONDITION, "False", kueue.REASON_COMPATIBLE, kueue.MESSAGE_COMPATIBLE, "Normal"
        )
    )


def _merged(patches: Sequence[tuple[str, Obj]]) -> list[tuple[str, Obj]]:
    """One patch per Job: several patches to one Job joined, part by part (they set different
    fields: suspend, the pod template, the sizes)."""
    by_name: dict[str, Obj] = {}
    for name, patch in patches:
        if name not in by_name:
            by_name[name] = patch
            continue
        joined = dict(by_name[name])
        for part, value in patch.items():
            before = joined.get(part)
            if isinstance(before, dict) and isinstance(value, dict):
                joined[part] = {**before, **value}
            else:
                joined[part] = value
        by_name[name] = joined
    return list(by_name.items())


def _volume_status(
    built: _Status, store: Storage, failures: Sequence[Failure], jobs: Sequence[ChildJob]
) -> None:
    report = store.report(failures, jobs)
    if report is None:
        return
    built.volumes = report.status
    # "Not ready yet" is news: VolumesReady is written False too.
    built.condition(report.ready, add_when_false=True)
    for found in report.others:
        built.condition(found)
    if report.colocation is not None:
        built.condition(report.colocation, add_when_false=True)
    built.events.extend(report.events)


def _sooner(a: float | None, b: float | None) -> float | None:
    """The sooner of two requeue delays (None: none)."""
    return b if a is None else a if b is None else min(a, b)


def _close(plan: Plan, built: _Status, failures: Sequence[Failure]) -> Plan:
    """The plan with its status: the writes of the pass that failed are part of it."""
    for found in (writefailures.job_creation(failures), writefailures.child_writes(failures)):
        built.condition(found)
    plan.status = built.changed()
    plan.events = built.events
    return plan


def decide(
    jobset: JobSet,
    jobs: Sequence[ChildJob],
    service: Obj | None,
    now: datetime.datetime,
    *,
    claims: Mapping[str, ClaimView] | None = None,
    classes: StorageClasses | None = None,
    model: VolumeModel | None = None,
    snapshots: Snapshots | None = None,
    message_matches: failure.MessageMatches | None = None,
    others: Mapping[str, Obj] | None = None,
    failures: Sequence[Failure] = (),
    pod_scope_blocked: Blocked | None = None,
    restart_job: bool = False,
    resize: bool = False,
    snapshot_warn_after: datetime.timedelta | None = None,
) -> Plan:
    """Raises ``InvalidJobSet`` when the volume policies cannot be acted on.

    ``model`` may be passed when the caller already read the JobSet's volumes (saves a second
    parse); ``message_matches`` when the failure messages were matched already
    (``failure.match_messages_in_thread``). ``others``: Jobs with this JobSet's name label that
    are not its own, by name. ``failures``: the writes of this pass the API server refused (the
    reconciler decides again with them once it knows, for the status). ``pod_scope_blocked``:
    why Pod-scope pods cannot get their claims now (``VolumeIO.pod_scope_blocked``: the policy
    missing, settling, or pods admitted without it), if so; read only for a JobSet with a
    Pod-scope policy, which then gets nothing created. ``restart_job``: the RestartJob feature
    gate is on (new Jobs carry ``job-restart-attempt``; without it the parser refuses the
    RestartJob actions, as the CRD made for the controller's gates does). ``resize``: the
    ElasticJobSet gate is on (running Jobs follow their template's parallelism and completions,
    ``elastic``).
    ``snapshot_warn_after``: how long retention may wait for a snapshot before the status warns
    (None: the volumes' default).
    """
    plan = Plan()
    known = list(failures)  # and the Job names held by others, found below
    claims = claims or {}
    classes = classes or StorageClasses()
    if jobset.deleting:
        # Children go with garbage collection; the reconciler finalises the JobSet (claims by
        # their retention) with ``VolumeIO.deletion_plan``, without parsing it.
        return plan
    if model is None:
        model = volumes.model(jobset)
    built = _Status(jobset, now)
    # Parsed and acted on: whatever made it SpecInvalid was fixed (no-op when never invalid).
    built.condition(
        Condition(api.SPEC_INVALID, "False", api.REASON_SPEC_VALID, api.MESSAGE_SPEC_VALID)
    )
    current = [j for j in children.current_jobs(jobset, jobs) if not j.deleting]
    stale = children.stale_jobs(jobset, jobs)
    plan.delete_jobs.extend(j.name for j in stale if not j.deleting)
    # Scale-down (extension: replicas may be lowered): Jobs beyond the new count go.
    beyond = [j for j in current if _beyond_replicas(jobset, j)]
    plan.delete_jobs.extend(j.name for j in beyond)
    current = [j for j in current if j not in beyond]
    in_use = elastic.pods_in_use(jobs) if model.pod_scope else None

    if jobset.finished:
        # Upstream: a finished JobSet's unfinished Jobs are deleted, and counted down as they go
        # (it counts every pass, before it looks at the terminal state). Its finished Jobs stay
        # counted when retention deletes them (``status.finished_counts``).
        counted = status.replicated_jobs_status(jobset, current)
        built.replicated_jobs_status = failure.carry_job_restarts(
            jobset, status.finished_counts(jobset.status.replicated_jobs_status, counted)
        )
        plan.delete_jobs.extend(j.name for j in current if not j.is_finished)
        store = volumes.storage(
            model,
            claims,
            classes,
            terminal_state=jobset.status.terminal_state,
            pods_in_use=in_use,
            blocked=pod_scope_blocked,
            found=snapshots,
            now=now,
            warn_after=snapshot_warn_after,
        )
        plan.volume = store.plan
        # Retention on completion/failure releases storage: the finished Jobs' pods still use
        # the claims (pvc-protection would keep them forever), so those Jobs go too. The JobSet
        # and its status stay.
        plan.delete_jobs.extend(store.released_jobs(current))
        _volume_status(built, store, known, current)
        _close(plan, built, known)
        decision = ttl.ttl_decision(jobset, ttl.finished_at(jobset), now)
        plan.delete_jobset = decision.delete_now
        plan.requeue_after = decision.requeue_after
        if decision.delete_now and store.holds_deletion(jobset, claims.values()):
            # The delete is Foreground: the garbage collector would take these claims before
            # retention ran. This pass's claim patches drop the ownerReference; delete after.
            plan.delete_jobset = False
            plan.requeue_after = TTL_HOLD_SECONDS
        plan.requeue_after = _sooner(plan.requeue_after, store.look_again)
        return plan

    counted = status.replicated_jobs_status(jobset, current)
    per_rjob = failure.carry_job_restarts(jobset, counted)
    built.replicated_jobs_status = per_rjob
    by_name = {s.name: s for s in per_rjob}
    ended = failure.restart_ended(jobset, per_rjob)
    if ended is not None:
        built.condition(ended.announced("Normal"))
    outcome = failure.evaluate(jobset, current, message_matches)
    completes = outcome is None and success.evaluate(jobset, by_name)
    terminal = (
        api.TERMINAL_FAILED
        if outcome is not None and outcome.fails_jobset
        else api.TERMINAL_COMPLETED
        if completes
        else ""
    )
    store = volumes.storage(
        model,
        claims,
        classes,
        terminal_state=terminal,
        pods_in_use=in_use,
        blocked=pod_scope_blocked,
        found=snapshots,
        # Every Job, of every attempt: a pod of any may still write to a claim.
        jobs=jobs,
        now=now,
        warn_after=snapshot_warn_after,
    )
    plan.volume = store.plan
    plan.requeue_after = store.look_again
    _volume_status(built, store, known, current)

    if outcome is not None:
        if outcome.fails_jobset:
            built.terminal_state = api.TERMINAL_FAILED
            built.condition(
                Condition(api.FAILED, "True", outcome.condition_reason, outcome.condition_message)
            )
            built.events.append(Event("Warning", outcome.event_reason, outcome.event_message))
            built.condition(failure.RESTART_ENDED_FAILED.announced("Normal"))
            plan.failed = True
        elif outcome.job_restart is not None:
            # Only the failed Job restarts: the next pass finds it stale and replaces it.
            built.replicated_jobs_status = failure.bump_job_restarts(
                jobset, per_rjob, outcome.job_restart
            )
            built.events.append(Event("Warning", outcome.event_reason, outcome.event_message))
        else:
            built.restarts = outcome.new_restarts
            built.restarts_count_towards_max = outcome.new_restarts_count_towards_max
            built.condition(
                Condition(
                    outcome.condition_type,
                    "True",
                    outcome.condition_reason,
                    outcome.condition_message,
                    "Warning",
                )
            )
            built.events.append(Event("Warning", outcome.event_reason, outcome.event_message))
        return _close(plan, built, known)

    if completes:
        built.terminal_state = api.TERMINAL_COMPLETED
        built.condition(
            Condition(
                api.COMPLETED,
                "True",
                api.REASON_ALL_JOBS_COMPLETED,
                api.MESSAGE_ALL_JOBS_COMPLETED,
                "Normal",
            )
        )
        built.condition(failure.RESTART_ENDED_COMPLETED.announced("Normal"))
        plan.completed = True
        _close(plan, built, known)
        if jobset.ttl_seconds_after_finished is not None:
            plan.requeue_after = _sooner(
                plan.requeue_after, float(jobset.ttl_seconds_after_finished)
            )
        return plan

    suspension = store.withhold_resume(suspend.plan(jobset, current, counted), current)
    plan.clear_start_time.extend(suspension.clear_start_time)
    plan.patch_jobs.extend(suspension.patches)
    plan.patch_jobs.extend(store.must_suspend(jobset, current))
    plan.patch_jobs = _merged(plan.patch_jobs + _resize(jobset, current, store, resize))
    _resize_condition(built, jobset, current, resize)
    _kueue_condition(built)
    if suspension.condition is not None:
        built.condition(suspension.condition.announced("Normal"))
    if jobset.suspend:
        built.condition(failure.RESTART_ENDED_SUSPENDED.announced("Normal"))

    gate = startup.allowed_replicated_jobs(jobset, by_name, current)
    if gate.in_order_condition is not None and not jobset.suspend:
        built.condition(gate.in_order_condition.announced("Normal"))

    blocking = (
        jobset.failure_policy is not None
        and jobset.failure_policy.restart_strategy == "BlockingRecreate"
        and bool(stale)
    )
    if not blocking and store.blocked is None:
        existing = {j.name for j in jobs}
        plan.create_jobs, held = _mounted_jobs(
            jobset, frozenset(gate.allowed), store, existing, others or {}, restart_job
        )
        known.extend(held)
    wanted_service = construct.desired_service(jobset)
    if wanted_service is not None and service is None:
        plan.create_service = wanted_service
    return _close(plan, built, known)
