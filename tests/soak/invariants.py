"""The soak's invariants, pure: plain data in (audit entries, listed objects, the driver's records),
violation messages out. Each message names the object, what happened and when.

Times are compared conservatively, so that a message is always a real violation: an event that
justifies a claim deletion counts from the earliest moment it can have taken effect (the driver's
first attempt, the API server's receipt of the request, a condition's time truncated to seconds).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping

from tests.soak.model import (
    COMPLETED,
    DELETE,
    DRIVER_AGENT,
    FAILED,
    SNAPSHOT,
    AuditEntry,
    ClaimObject,
    JobSetRecord,
    Obj,
    PlannedClaim,
    SnapshotRecord,
    by_controller,
    labels,
    meta,
    name_of,
    stamp,
    terminal_state,
    terminating,
)

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
RESTART_ATTEMPT = "jobset.sigs.k8s.io/restart-attempt"
RETAINED_FROM = "jobset.sigs.k8s.io/retained-from-uid"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
# What the Pod-scope admission policy replaces in a pod's claim name (never a valid claim name).
PLACEHOLDER_SUFFIX = "-POD-INDEX"
PER_JOB = ("Job", "Pod")
# How long the controller may act on a cache that has not yet seen an out-of-band claim delete.
LOSS_NOTICE = 30.0  # scopes whose claims belong to one Job (whenScaled acts on them)
# Conditions carry whole seconds (truncated): the transition happened at most this much later.
CONDITION_RESOLUTION = 1.0
# Retention Snapshot: a claim seen Bound this long before its delete was Bound in the controller's
# caches too (the controller deletes a claim that is not Bound without a snapshot: no data). At
# 10 s, a 300 s soak left a quarter of these deletes unjudged: a short JobSet's claim is Bound,
# used, snapshotted and deleted within 10 s.
CACHE_LAG = 5.0
# An event (deleted, terminal state stored, scaled) this long before a claim's delete was surely
# in the controller's view when it decided: its retention setting was in force.
SURELY_SEEN = 30.0
_CHILDREN = ("jobs", "persistentvolumeclaims")
_KIND = {"jobs": "Job", "persistentvolumeclaims": "claim"}

Records = Mapping[str, JobSetRecord]


def claim_index(records: Records) -> dict[str, tuple[JobSetRecord, PlannedClaim]]:
    return {c.name: (r, c) for r in records.values() for c in r.claims}


# A write whose client went away before the answer (a replica killed mid-request, or the API
# server stopping while it was in flight) is answered 504 in the audit log, though the API server
# may have stored it.
CLIENT_GONE = 504


def _stored(later: Iterable[AuditEntry]) -> bool:
    """Whether a create answered ``CLIENT_GONE`` was stored, from what the audit log shows of the
    name after it: a request that acted on the object (an update, a patch, a delete, of the claim
    or its status) before any create did, or a create refused because it exists (409)."""
    for entry in later:
        if entry.verb == "create" and not entry.subresource:
            return entry.code == 409
        if entry.ok and entry.verb in ("update", "patch", "delete"):
            return True
    return False


def claim_histories(entries: Iterable[AuditEntry]) -> dict[str, list[AuditEntry]]:
    """Per claim name, the creates and deletes that took effect, in time order: creates answered
    201, or ``CLIENT_GONE`` and stored all the same (the 60 s soak saw the controller's creates of
    two claims answered 504 as the API server stopped, then bound and used), and deletes that
    succeeded."""
    seen: dict[str, list[AuditEntry]] = defaultdict(list)
    for entry in sorted(entries, key=lambda e: e.time):
        if entry.resource == "persistentvolumeclaims":
            seen[entry.name].append(entry)
    found: dict[str, list[AuditEntry]] = {}
    for name, history in seen.items():
        took = [
            entry
            for i, entry in enumerate(history)
            if not entry.subresource
            and (
                (entry.verb == "create" and entry.code == 201)
                or (
                    entry.verb == "create"
                    and entry.code == CLIENT_GONE
                    and _stored(history[i + 1 :])
                )
                or (entry.verb == "delete" and entry.ok)
            )
        ]
        if took:
            found[name] = took
    return found


def _last_deleted_by_driver(entries: Iterable[AuditEntry]) -> set[str]:
    """Claim names whose last successful delete was the driver's (out of band, on purpose)."""
    last: dict[str, AuditEntry] = {}
    for name, history in claim_histories(entries).items():
        for entry in history:
            if entry.verb == "delete":
                last[name] = entry
    return {name for name, entry in last.items() if entry.user_agent == DRIVER_AGENT}


# ----------------------------------------------------------------------------- 1. duplicates


def duplicate_creates(entries: Iterable[AuditEntry]) -> list[str]:
    """A Job or claim name successfully created (201) twice with no delete between that succeeded
    or may have (answered ``CLIENT_GONE``: the leader was killed while its delete was in flight; a
    300 s soak saw a restart's Job delete answered 504 and then the next leader's create 201)."""
    alive: dict[tuple[str, str], AuditEntry] = {}
    found = []
    for entry in sorted(entries, key=lambda e: e.time):
        if entry.resource not in _CHILDREN or entry.subresource:
            continue
        key = (entry.resource, entry.name)
        if entry.verb == "create" and entry.code == 201:
            earlier = alive.get(key)
            if earlier is not None:
                found.append(
                    f"duplicate {_KIND[entry.resource]} {entry.name}: created twice with no delete "
                    f"in between: {earlier.describe()}, then {entry.describe()}"
                )
            alive[key] = entry
        elif entry.verb == "delete" and (entry.ok or entry.code == CLIENT_GONE):
            alive.pop(key, None)
    return found


def job_creates_beyond_attempts(entries: Iterable[AuditEntry], records: Records) -> list[str]:
    """A Job name created more often than its JobSet had restart attempts (restarts + 1)."""
    owner = {job: r for r in records.values() for job in r.job_names()}
    creates: dict[str, list[AuditEntry]] = defaultdict(list)
    for entry in entries:
        if entry.resource == "jobs" and entry.verb == "create" and entry.code == 201:
            creates[entry.name].append(entry)
    found = []
    for job, made in sorted(creates.items()):
        record = owner.get(job)
        if record is None:
            found.append(f"Job {job} was created but belongs to no JobSet of the driver")
            continue
        attempts = record.restarts + 1
        if len(made) > attempts:
            found.append(
                f"Job {job} created {len(made)} times, but {record.describe()} had {attempts} "
                f"attempt(s) (status.restarts={record.restarts}): "
                + "; ".join(e.describe() for e in sorted(made, key=lambda e: e.time))
            )
    return found


def _controller_uid(obj: Obj) -> str:
    for ref in meta(obj).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return str(ref.get("uid") or "")
    return ""


def live_duplicate_jobs(jobs: Iterable[Obj]) -> list[str]:
    """Two live Jobs of one JobSet for the same replicated job index (and attempt)."""
    per_index: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    per_attempt: dict[tuple[str, str, str, str], list[str]] = defaultdict(list)
    for job in jobs:
        tags = labels(job)
        owner = _controller_uid(job) or f"name:{tags.get(JOBSET_NAME)}"
        rjob, index = str(tags.get(REPLICATED_JOB)), str(tags.get(JOB_INDEX))
        attempt = str(tags.get(RESTART_ATTEMPT))
        per_attempt[(owner, rjob, index, attempt)].append(name_of(job))
        if not terminating(job):
            per_index[(owner, rjob, index)].append(name_of(job))
    found = []
    for (owner, rjob, index, attempt), names in sorted(per_attempt.items()):
        if len(names) > 1:
            found.append(
                f"JobSet {owner}: {len(names)} Jobs for {rjob} index {index} at restart attempt "
                f"{attempt}: {', '.join(sorted(names))}"
            )
    for (owner, rjob, index), names in sorted(per_index.items()):
        if len(names) > 1:
            found.append(
                f"JobSet {owner}: {len(names)} live (not terminating) Jobs for {rjob} index "
                f"{index}: {', '.join(sorted(names))}"
            )
    return found


# ----------------------------------------------------------------------------- 3. deletions


def _reasons(plan: PlannedClaim, record: JobSetRecord, at: float, value: str) -> list[str]:
    """Why the claim's retention settings that say ``value`` (Delete, Snapshot) may be in force by
    time ``at``: each event counted from the earliest moment it can have taken effect."""
    retention = plan.retention
    reasons = []
    deleted = record.deletion_time
    if retention.when_deleted == value and deleted is not None and at >= deleted:
        reasons.append(f"whenDeleted={value} (JobSet deleted at {stamp(deleted)})")
    finished = record.terminal_at
    earliest = -math.inf if finished is None else finished - CONDITION_RESOLUTION
    if retention.when_completed == value and record.terminal == COMPLETED and at >= earliest:
        reasons.append(f"whenCompleted={value} (Completed at {stamp(finished)})")
    if retention.when_failed == value and record.terminal == FAILED and at >= earliest:
        reasons.append(f"whenFailed={value} (Failed at {stamp(finished)})")
    if plan.scope in PER_JOB and retention.when_scaled == value and plan.job_index is not None:
        for scale in record.scales:
            if (
                scale.replicated_job == plan.replicated_job
                and plan.job_index >= scale.replicas
                and at >= scale.at
            ):
                reasons.append(
                    f"whenScaled={value} ({scale.replicated_job} scaled to {scale.replicas} at "
                    f"{stamp(scale.at)})"
                )
                break
    return reasons


def delete_reasons(plan: PlannedClaim, record: JobSetRecord, at: float) -> list[str]:
    """Why the claim's policy lets it go by time ``at`` (empty: it must still exist then): a
    setting that says Delete, or Snapshot (deleted once a snapshot of it is ready)."""
    return _reasons(plan, record, at, DELETE) + _reasons(plan, record, at, SNAPSHOT)


def _surely_snapshot(plan: PlannedClaim, record: JobSetRecord, at: float) -> list[str]:
    """The Snapshot settings surely in force by ``at``: their event at least ``SURELY_SEEN``
    before it (the controller then takes Snapshot over Delete: the data asked for is kept)."""
    retention = plan.retention
    reasons = []
    deleted = record.deleted_at  # the API server's time, not the driver's first attempt
    if retention.when_deleted == SNAPSHOT and deleted is not None and at >= deleted + SURELY_SEEN:
        reasons.append(f"whenDeleted=Snapshot (JobSet deleted at {stamp(deleted)})")
    finished = record.terminal_at
    if finished is not None and at >= finished + CONDITION_RESOLUTION + SURELY_SEEN:
        if retention.when_completed == SNAPSHOT and record.terminal == COMPLETED:
            reasons.append(f"whenCompleted=Snapshot (Completed at {stamp(finished)})")
        if retention.when_failed == SNAPSHOT and record.terminal == FAILED:
            reasons.append(f"whenFailed=Snapshot (Failed at {stamp(finished)})")
    if plan.scope in PER_JOB and retention.when_scaled == SNAPSHOT and plan.job_index is not None:
        for scale in record.scales:
            if (
                scale.replicated_job == plan.replicated_job
                and plan.job_index >= scale.replicas
                and at >= scale.at + SURELY_SEEN
            ):
                reasons.append(
                    f"whenScaled=Snapshot ({scale.replicated_job} scaled to {scale.replicas} at "
                    f"{stamp(scale.at)})"
                )
                break
    return reasons


def snapshot_required(plan: PlannedClaim, record: JobSetRecord, at: float) -> list[str]:
    """The Snapshot settings that a delete of the claim at ``at`` must have gone through (empty:
    none surely did). Either Snapshot is all that may justify the delete, or a Snapshot setting
    was surely in force (it wins over a Delete one that may apply too)."""
    snapshot = _reasons(plan, record, at, SNAPSHOT)
    if not snapshot:
        return []
    if not _reasons(plan, record, at, DELETE):
        return snapshot
    return _surely_snapshot(plan, record, at)


def unjustified_claim_deletes(entries: Iterable[AuditEntry], records: Records) -> list[str]:
    """Successful DELETEs of claims that no retention setting and fate of the JobSet explain."""
    index = claim_index(records)
    found = []
    for entry in sorted(entries, key=lambda e: e.time):
        if entry.resource != "persistentvolumeclaims" or not entry.ok:
            continue
        if entry.verb == "deletecollection":
            found.append(f"claims deleted wholesale: {entry.describe()}")
            continue
        if entry.verb != "delete" or entry.user_agent == DRIVER_AGENT:
            continue  # the driver's deletes are out of band on purpose (see deletes_without_proof)
        known = index.get(entry.name)
        if known is None:
            found.append(f"claim {entry.name} deleted, but no JobSet of the driver asks for it: "
                         f"{entry.describe()}")  # fmt: skip
            continue
        record, plan = known
        if not delete_reasons(plan, record, entry.time):
            found.append(
                f"claim {entry.name} deleted against its policy: {entry.describe()}; "
                f"{record.describe()}; policy {plan.retention.describe()}"
            )
    return found


def retained_claims_missing(
    entries: Iterable[AuditEntry], claims: Iterable[Obj], records: Records
) -> list[str]:
    """Claims that were created and that policy retains, but that no longer exist (at the end)."""
    index = claim_index(records)
    created: dict[str, AuditEntry] = {}
    for entry in entries:
        if (
            entry.resource == "persistentvolumeclaims"
            and entry.verb == "create"
            and entry.code == 201
        ):
            created.setdefault(entry.name, entry)
    existing = {name_of(c) for c in claims if not terminating(c)}
    lost = _last_deleted_by_driver(entries)  # retention cannot keep what the driver deleted
    found = []
    for name in sorted(set(created) - existing - lost):
        known = index.get(name)
        if known is None:
            continue  # reported by unjustified_claim_deletes / unexplained_claims
        record, plan = known
        if not delete_reasons(plan, record, math.inf):
            found.append(
                f"claim {name} (created {stamp(created[name].time)}) is gone or being deleted, "
                f"but its policy retains it: {record.describe()}; policy "
                f"{plan.retention.describe()}"
            )
    return found


# ----------------------------------------------------------------------------- ownership, loss


def _impostor_note(name: str, records: Records) -> str:
    for record in records.values():
        if name in record.impostors.values():
            return (
                f" (the driver's impostor for {record.describe()}: a copied name label, no "
                f"retained-from annotation)"
            )
    return ""


def deletes_without_proof(entries: Iterable[AuditEntry], records: Records) -> list[str]:
    """No claim deleted (by the controller, or by the garbage collector through an ownerReference
    the controller set) unless the controller created it. The controller creates a claim for one
    JobSet (name label and owner-uid annotation) and adopts only claims it retained itself
    (retained-from-uid annotation), which it also created: in the soak, proof of ownership is
    that the claim's creation (201) was the controller's. Only the driver may delete the rest."""
    found = []
    for name, history in sorted(claim_histories(entries).items()):
        creator: AuditEntry | None = None
        for entry in history:
            if entry.verb == "create":
                creator = entry
                continue
            if entry.user_agent == DRIVER_AGENT or (creator is not None and by_controller(creator)):
                continue
            made = (
                f"created by {creator.describe()}"
                if creator is not None
                else "created by nobody the audit log shows"
            )
            found.append(
                f"claim {name} deleted without proof of ownership: {entry.describe()}; it was "
                f"{made}, not by the controller{_impostor_note(name, records)}"
            )
    return found


def recreated_after_loss(entries: Iterable[AuditEntry], records: Records) -> list[str]:
    """No claim of a JobSet created again after someone else deleted it (it was Lost) unless the
    JobSet's replace-lost-claims annotation accepted that loss (``<claim>@<uid prefix>`` of the
    claim that was lost) before the create."""
    index = claim_index(records)
    found = []
    for name, history in sorted(claim_histories(entries).items()):
        creator: AuditEntry | None = None
        deleted: AuditEntry | None = None  # the first delete since the last create
        for entry in history:
            if entry.verb == "delete":
                deleted = deleted or entry
                continue
            lost = (
                deleted is not None
                and not by_controller(deleted)
                and creator is not None
                and by_controller(creator)
            )
            if lost and deleted is not None and by_controller(entry):
                known = index.get(name)
                why = _unaccepted(name, known[0] if known else None, entry.time)
                if why:
                    found.append(
                        f"claim {name} created again after it was lost, without the opt-in: lost "
                        f"by {deleted.describe()}, created by {entry.describe()}; {why}"
                    )
            creator, deleted = entry, None
    return found


def _unaccepted(name: str, record: JobSetRecord | None, at: float) -> str:
    """Why no opt-in of ``record`` accepted replacing the lost claim ``name`` by ``at`` ("")."""
    if record is None:
        return "no JobSet of the driver asks for it"
    losses = [loss for loss in record.losses if loss.claim == name and loss.at <= at]
    if not losses:
        return f"{record.describe()} has no loss of it on record"
    prefix = losses[-1].uid[:8]
    if any(o.claim == name and o.uid_prefix == prefix and o.at <= at for o in record.opt_ins):
        return ""
    accepted = ", ".join(f"{o.claim}@{o.uid_prefix} at {stamp(o.at)}" for o in record.opt_ins)
    return (
        f"{record.describe()} accepted [{accepted}], not {name}@{prefix} (the lost claim's uid "
        f"{losses[-1].uid}) by {stamp(at)}"
    )


# ----------------------------------------------------------------------------- 2. claims


def _replicas(jobset: Obj, rjob: str | None) -> int:
    for entry in (jobset.get("spec") or {}).get("replicatedJobs") or []:
        if entry.get("name") == rjob:
            return int(entry.get("replicas", 1))
    return 0


def unexplained_claims(
    claims: Iterable[Obj], jobsets: Iterable[Obj], records: Records
) -> dict[str, str]:
    """Claims that exist but that no live JobSet desires and no retention setting keeps.

    Keyed by claim name. Some of these are transient (the controller has not caught up yet); the
    caller decides how long one may last.
    """
    index = claim_index(records)
    live = {name_of(j): j for j in jobsets}
    impostors = {uid for r in records.values() for uid in r.impostors}
    found: dict[str, str] = {}
    for claim in claims:
        name = name_of(claim)
        if terminating(claim):
            continue  # its deletion is judged by unjustified_claim_deletes
        if meta(claim).get("uid") in impostors:
            continue  # the driver's own: see deletes_without_proof
        known = index.get(name)
        if known is None:
            found[name] = (
                f"claim {name} exists but no JobSet of the driver asks for it "
                f"(labels {labels(claim)})"
            )
            continue
        record, plan = known
        jobset = live.get(record.name)
        if jobset is not None and not terminating(jobset):
            why = _live_owner_drops(plan, jobset)
            if why:
                found[name] = (
                    f"claim {name} should be gone: {record.describe()}: {'; '.join(why)}; "
                    f"policy {plan.retention.describe()}"
                )
            continue
        reasons = delete_reasons(plan, record, math.inf)
        if jobset is not None:
            if reasons:
                found[name] = (
                    f"claim {name} still exists while {record.describe()} is being deleted "
                    f"(policy: {', '.join(reasons)})"
                )
            continue
        if reasons:
            found[name] = (
                f"claim {name} outlived {record.describe()} though its policy deletes it: "
                f"{', '.join(reasons)}"
            )
        elif record.uid and any(
            isinstance(r, dict) and r.get("uid") == record.uid
            for r in meta(claim).get("ownerReferences") or []
        ):
            found[name] = (
                f"claim {name} is retained (policy {plan.retention.describe()}) but still has an "
                f"ownerReference to the deleted {record.describe()} (uid {record.uid})"
            )
        elif record.uid and (meta(claim).get("annotations") or {}).get(RETAINED_FROM) != (
            record.uid
        ):
            found[name] = (
                f"claim {name} is retained from the deleted {record.describe()} but lacks the "
                f"annotation {RETAINED_FROM}={record.uid}"
            )
    return found


def _live_owner_drops(plan: PlannedClaim, jobset: Obj) -> list[str]:
    state, _ = terminal_state(jobset)
    retention = plan.retention
    why = []
    lets_go = (DELETE, SNAPSHOT)
    if state == COMPLETED and retention.when_completed in lets_go:
        why.append(f"the JobSet is Completed and whenCompleted={retention.when_completed}")
    if state == FAILED and retention.when_failed in lets_go:
        why.append(f"the JobSet is Failed and whenFailed={retention.when_failed}")
    if plan.scope in PER_JOB and retention.when_scaled in lets_go and plan.job_index is not None:
        replicas = _replicas(jobset, plan.replicated_job)
        if plan.job_index >= replicas:
            why.append(
                f"{plan.replicated_job} has {replicas} replicas and "
                f"whenScaled={retention.when_scaled}"
            )
    return why


# ----------------------------------------------------------------------------- 4. and 5.


def _status_summary(jobset: Obj) -> str:
    status = jobset.get("status") or {}
    conditions = ", ".join(
        f"{c.get('type')}={c.get('status')}({c.get('reason')})"
        for c in status.get("conditions") or []
    )
    rjobs = ", ".join(
        f"{r.get('name')}: {r.get('active', 0)} active/{r.get('succeeded', 0)} succeeded/"
        f"{r.get('failed', 0)} failed/{r.get('suspended', 0)} suspended"
        for r in status.get("replicatedJobsStatus") or []
    )
    return (
        f"suspend={(jobset.get('spec') or {}).get('suspend')}, restarts={status.get('restarts', 0)}"
        f", conditions [{conditions}], jobs [{rjobs}]"
    )


def not_terminal(jobsets: Iterable[Obj], records: Records) -> list[str]:
    """Every JobSet of the driver is terminal (Completed/Failed) or gone (and was deleted)."""
    live = {name_of(j): j for j in jobsets}
    found = []
    for name in sorted(set(live) - set(records)):
        found.append(f"JobSet {name} exists but the driver never created it")
    for record in sorted(records.values(), key=lambda r: r.created_at):
        jobset = live.get(record.name)
        if jobset is None:
            if record.deletion_time is None:
                found.append(f"{record.describe()} disappeared, but nobody deleted it")
            continue
        if terminating(jobset) or record.deletion_time is not None:
            continue  # stuck_deleting reports it
        state, _ = terminal_state(jobset)
        if not state:
            found.append(
                f"{record.describe()} did not reach a terminal state: {_status_summary(jobset)}"
            )
    return found


def stuck_deleting(jobsets: Iterable[Obj], records: Records) -> list[str]:
    """Every JobSet the driver deleted is gone, and none is left with a deletionTimestamp (a
    finalizer not removed): each named with its finalizers and conditions."""
    found = []
    for jobset in jobsets:
        record = records.get(name_of(jobset))
        deleted = record is not None and record.deletion_time is not None
        if not (terminating(jobset) or deleted):
            continue
        who = record.describe() if record is not None else f"JobSet {name_of(jobset)}"
        since = meta(jobset).get("deletionTimestamp")
        state = f"being deleted since {since}" if since else "not even being deleted"
        found.append(
            f"{who} is not gone: {state}, finalizers {meta(jobset).get('finalizers') or []}; "
            f"{_status_summary(jobset)}"
        )
    return found


# ----------------------------------------------------------------------------- 6. memory


def rss_exceeded(peaks: Mapping[str, int], limit_bytes: int) -> list[str]:
    """Replicas whose peak resident set size went above the bound."""
    mib = 1024 * 1024
    return [
        f"controller replica {identity} peaked at {peak / mib:.0f} MiB RSS, above the bound of "
        f"{limit_bytes / mib:.0f} MiB"
        for identity, peak in sorted(peaks.items())
        if peak > limit_bytes
    ]


# ----------------------------------------------------------------------------- 7. mounts


def _claim_at(history: list[AuditEntry], received: float, answered: float) -> str:
    """What the audit log proves about a claim (its time-ordered ``claim_histories``) while a write
    received at ``received`` and answered at ``answered`` ran: "" when a create by the controller
    may have come first and no delete surely did, else why not. Conservative: a create that
    overlaps the write counts as before it, a delete that overlaps it does not.

    A claim the driver deleted out of band (Lost) less than ``LOSS_NOTICE`` before the write is
    not held against it: the controller acts on its caches, which learn of the delete a moment
    later (a Job created then is suspended once the loss is seen; ``recreated_after_loss`` checks
    that the claim is not replaced without the opt-in)."""
    made: AuditEntry | None = None
    deleted: AuditEntry | None = None
    for entry in history:
        if entry.verb == "create" and entry.received < answered:
            made, deleted = entry, None
        elif entry.verb == "delete" and entry.time < received:
            made, deleted = None, entry
    if made is None:
        if (
            deleted is not None
            and deleted.user_agent == DRIVER_AGENT
            and received - deleted.time < LOSS_NOTICE
        ):
            return ""
        return "it did not exist (never created before, or deleted since)"
    if not by_controller(made):
        return f"it was not the controller's ({made.describe()})"
    return ""


def jobs_created_before_their_claims(entries: Iterable[AuditEntry], records: Records) -> list[str]:
    """Every claim a Job's pods mount exists, created by the controller, before the Job is created:
    the JobSet-scope claims, the Job's Job-scope claim and, for Pod scope, the claim of every
    completion index (also those a parallelism below completions would start later)."""
    histories = claim_histories(entries)
    owner = {job: r for r in records.values() for job in r.job_names()}
    found = []
    for entry in sorted(entries, key=lambda e: e.time):
        if not (entry.resource == "jobs" and entry.verb == "create" and entry.code == 201):
            continue
        record = owner.get(entry.name)
        where = record.job_of(entry.name) if record is not None else None
        if record is None or where is None:
            continue  # reported by job_creates_beyond_attempts
        for plan in record.claims:
            if not plan.mounted_by(*where):
                continue
            state = _claim_at(histories.get(plan.name, []), entry.received, entry.time)
            if state:
                found.append(  # no fate in the message: it is reported once
                    f"Job {entry.name} created ({entry.describe()}) before its {plan.scope}-scope "
                    f"claim {plan.name}: {state}; JobSet {record.name} (scenario "
                    f"{record.scenario})"
                )
    return found


def _pod_claims(pod: Obj) -> dict[str, str]:
    """Volume name -> claimName of a pod's claim volumes."""
    found = {}
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        claim = volume.get("persistentVolumeClaim") if isinstance(volume, dict) else None
        if isinstance(claim, dict):
            found[str(volume.get("name"))] = str(claim.get("claimName"))
    return found


def pods_with_wrong_claims(pods: Iterable[Obj], records: Records) -> list[str]:
    """Every pod of a driver's JobSet that exists (it was admitted) mounts exactly the claims its
    Job's scope says: the JobSet's, its Job's and, for Pod scope, the claim of its own completion
    index; never a Pod-scope placeholder (the admission policy did not rewrite it)."""
    found = []
    for pod in pods:
        tags = labels(pod)
        record = records.get(str(tags.get(JOBSET_NAME)))
        if record is None:
            continue
        rjob, job_index = str(tags.get(REPLICATED_JOB)), str(tags.get(JOB_INDEX))
        annotations = meta(pod).get("annotations") or {}
        pod_index = str(annotations.get(COMPLETION_INDEX))
        who = f"pod {name_of(pod)} ({rjob} Job {job_index}, completion index {pod_index})"
        mounted = _pod_claims(pod)
        for volume, claim_name in sorted(mounted.items()):
            if claim_name.endswith(PLACEHOLDER_SUFFIX):
                found.append(
                    f"{who} was admitted with the Pod-scope placeholder {claim_name} in volume "
                    f"{volume}: the admission policy did not give it its claim; "
                    f"{record.describe()}"
                )
        expected = {
            plan.template: plan.name
            for plan in record.claims
            if job_index.isdigit()
            and plan.mounted_by(rjob, int(job_index))
            and (plan.pod_index is None or str(plan.pod_index) == pod_index)
        }
        wrong = {  # a placeholder is reported above
            v: c
            for v, c in mounted.items()
            if expected.get(v) != c and not c.endswith(PLACEHOLDER_SUFFIX)
        }
        missing = sorted(set(expected) - set(mounted))
        if wrong or missing:
            found.append(
                f"{who} mounts {dict(sorted(mounted.items()))}, expected "
                f"{dict(sorted(expected.items()))}; {record.describe()}"
            )
    return found


def live_jobs_without_claims(
    entries: Iterable[AuditEntry],
    jobsets: Iterable[Obj],
    jobs: Iterable[Obj],
    claims: Iterable[Obj],
    records: Records,
) -> list[str]:
    """Once quiesced: every claim the pods of a live Job of a live JobSet mount exists (all
    completion indexes of a Pod-scope Job), unless policy deleted it by now or the driver did
    (out of band, on purpose)."""
    live = {name_of(j): j for j in jobsets if not terminating(j)}
    existing = {name_of(c) for c in claims if not terminating(c)}
    lost = _last_deleted_by_driver(entries)
    found = []
    for job in sorted(jobs, key=name_of):
        record = records.get(str(labels(job).get(JOBSET_NAME)))
        if record is None or terminating(job) or record.name not in live:
            continue
        if record.uid and _controller_uid(job) not in ("", record.uid):
            continue  # a leftover of an earlier JobSet of that name (never in the soak)
        where = record.job_of(name_of(job))
        if where is None:
            continue
        absent = [
            plan.name
            for plan in record.claims
            if plan.mounted_by(*where)
            and plan.name not in existing
            and plan.name not in lost
            and not delete_reasons(plan, record, math.inf)
        ]
        if absent:
            found.append(
                f"Job {name_of(job)} of {record.describe()} exists but its claims "
                f"{', '.join(absent)} do not"
            )
    return found


# ----------------------------------------------------------------------------- 8. snapshots


def ready_times(
    entries: Iterable[AuditEntry], snapshots: Iterable[SnapshotRecord]
) -> dict[str, float]:
    """Snapshot uid -> the earliest moment it can have been readyToUse: the API server's receipt
    of the driver's status patch that made it ready (audit log), else the driver's first attempt
    at that patch (the write came after both)."""
    patches: dict[str, list[float]] = defaultdict(list)
    for entry in entries:
        if (
            entry.resource == "volumesnapshots"
            and entry.subresource == "status"
            and entry.ok
            and entry.user_agent == DRIVER_AGENT
        ):
            patches[entry.name].append(entry.received)
    found = {}
    for taken in snapshots:
        if taken.outcome != "ready" or taken.marked_at is None:
            continue
        after = [t for t in patches.get(taken.name, []) if t >= taken.marked_at]
        found[taken.uid] = min(after) if after else taken.marked_at
    return found


def _object_of(
    objects: Iterable[ClaimObject], made: AuditEntry | None, following: AuditEntry | None
) -> ClaimObject | None:
    """The claim object that the create ``made`` made (the next create of the name being
    ``following``): the one seen by a listing that began after ``made`` was answered and was
    answered before ``following`` was received. None when no listing (or, impossibly, more than
    one object) fits."""
    low = made.time if made is not None else -math.inf
    high = following.received if following is not None else math.inf
    fits = [o for o in objects if any(s.began >= low and s.at <= high for s in o.sightings)]
    return fits[0] if len(fits) == 1 else None


def claim_deletes_without_ready_snapshot(
    entries: Iterable[AuditEntry],
    records: Records,
    snapshots: Iterable[SnapshotRecord],
    claims: Mapping[str, ClaimObject],
) -> list[str]:
    return [why for _, why in snapshot_delete_verdicts(entries, records, snapshots, claims) if why]


def snapshot_delete_verdicts(
    entries: Iterable[AuditEntry],
    records: Records,
    snapshots: Iterable[SnapshotRecord],
    claims: Mapping[str, ClaimObject],
) -> list[tuple[AuditEntry, str]]:
    """No claim deleted by a Snapshot policy without a ready snapshot: every successful delete of
    a claim by the controller whose policy says Snapshot for the case in force
    (``snapshot_required``) comes after a VolumeSnapshot of exactly that claim object (its source
    the claim's name, its snapshot-of-claim-uid annotation the claim's uid) became readyToUse (the
    delete received after the status patch that made it ready was). ``snapshots``: the
    controller's snapshots as the driver found them; ``claims``: claim objects by uid, as the
    monitor's listings saw them.

    A claim that was not seen Bound ``CACHE_LAG`` before its delete is not judged (the controller
    deletes a claim that is not Bound without a snapshot: it holds no data), nor one no listing
    saw (its uid is unknown): in the soak, a claim under Snapshot retention lives for seconds
    after its pods ran, and the monitor lists every 2 s.

    ``snapshot_delete_verdicts``: each delete judged, with "" (a ready snapshot came first) or
    why not."""
    entries = list(entries)
    taken = list(snapshots)
    ready = ready_times(entries, taken)
    index = claim_index(records)
    by_name: dict[str, list[ClaimObject]] = defaultdict(list)
    for found_object in claims.values():
        by_name[found_object.name].append(found_object)
    found: list[tuple[AuditEntry, str]] = []
    for name, history in sorted(claim_histories(entries).items()):
        known = index.get(name)
        if known is None:
            continue  # reported by unjustified_claim_deletes
        record, plan = known
        for position, entry in enumerate(history):
            if entry.verb != "delete" or not by_controller(entry):
                continue
            reasons = snapshot_required(plan, record, entry.time)
            if not reasons:
                continue
            made = next((e for e in reversed(history[:position]) if e.verb == "create"), None)
            following = next((e for e in history[position:] if e.verb == "create"), None)
            deleted = _object_of(by_name.get(name, []), made, following)
            bound = deleted.first_bound if deleted is not None else None
            if deleted is None or bound is None or bound.at > entry.received - CACHE_LAG:
                continue
            of_it = [s for s in taken if s.source_claim == name and s.claim_uid == deleted.uid]
            if any(ready.get(s.uid, math.inf) <= entry.received for s in of_it):
                found.append((entry, ""))
                continue
            others = [s for s in taken if s.source_claim == name and s not in of_it]
            found.append((
                entry,
                f"claim {name} (uid {deleted.uid}, Bound by {stamp(bound.at)}) deleted without a "
                f"ready snapshot of it, though its policy says Snapshot ({', '.join(reasons)}): "
                f"{entry.describe()}; snapshots of it: "
                f"{'; '.join(s.describe() for s in of_it) or 'none'}"
                + (
                    f"; of other claims of that name: {'; '.join(s.describe() for s in others)}"
                    if others
                    else ""
                )
                + f"; {record.describe()}",
            ))  # fmt: skip
    return found


def snapshots_of_unknown_claims(snapshots: Iterable[SnapshotRecord], records: Records) -> list[str]:
    """Every snapshot labelled with a JobSet of the driver is of one of that JobSet's claims."""
    found = []
    for taken in snapshots:
        record = records.get(taken.jobset)
        if record is not None and record.claim(taken.source_claim) is None:
            found.append(
                f"{taken.describe()} is labelled for {record.describe()}, which has no such claim"
            )
    return found


# ----------------------------------------------------------------------------- all of them


def audit_violations(entries: list[AuditEntry], records: Records) -> list[str]:
    return [
        *duplicate_creates(entries),
        *job_creates_beyond_attempts(entries, records),
        *unjustified_claim_deletes(entries, records),
        *deletes_without_proof(entries, records),
        *recreated_after_loss(entries, records),
        *jobs_created_before_their_claims(entries, records),
    ]


def snapshot_violations(
    entries: list[AuditEntry],
    records: Records,
    snapshots: Iterable[SnapshotRecord],
    claim_objects: Mapping[str, ClaimObject],
) -> list[str]:
    taken = list(snapshots)
    return [
        *claim_deletes_without_ready_snapshot(entries, records, taken, claim_objects),
        *snapshots_of_unknown_claims(taken, records),
    ]


def final_violations(
    entries: list[AuditEntry],
    jobsets: list[Obj],
    jobs: list[Obj],
    claims: list[Obj],
    records: Records,
    pods: list[Obj] | None = None,
    snapshots: Iterable[SnapshotRecord] = (),
    claim_objects: Mapping[str, ClaimObject] | None = None,
) -> list[str]:
    """Everything that must hold once the soak has quiesced (RSS is checked separately)."""
    return [
        *audit_violations(entries, records),
        *snapshot_violations(entries, records, snapshots, claim_objects or {}),
        *live_duplicate_jobs(jobs),
        *pods_with_wrong_claims(pods or [], records),
        *live_jobs_without_claims(entries, jobsets, jobs, claims, records),
        *unexplained_claims(claims, jobsets, records).values(),
        *retained_claims_missing(entries, claims, records),
        *not_terminal(jobsets, records),
        *stuck_deleting(jobsets, records),
    ]
