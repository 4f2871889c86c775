"""Retention on suspension, ``retentionPolicy.whenSuspended: Snapshot`` (pure).

A JobSet suspended after it ran (Kueue preempts by suspending; or ``spec.suspend: true``) may
free its storage while it waits: each Bound claim of such a policy is snapshotted, deleted once
its snapshot is readyToUse, and made again from the newest snapshot (``restorePolicy.source:
NewestSnapshot``, required at admission) when the JobSet is resumed, before the Jobs that mount
it resume. ``lifecycle.plan`` acts on it; this module says who, when and under which name.

Two steps, so that no pod ever writes to a claim once a snapshot of it may have been taken:

1. **Start**: the JobSet is suspended, has not finished, and no pod of its Jobs runs or is
   terminating (``stopped``): the policy's Bound claims are written into the status,
   ``status.volumes.suspensionReleases`` (the policy's first template, the claims' uid
   prefixes, when the release started). Nothing else happens to them in that pass.
2. **Release**: from the pass that reads the entry in the stored status on, its claims are
   *held*: never mountable, so no Job that mounts one is created or resumed, whether the JobSet
   is still suspended or not. Each is snapshotted (a VolumeSnapshot each, or one
   VolumeGroupSnapshot of them all with ``volumeGroupSnapshotClassName``) and deleted once its
   snapshot is ready, its uid forgotten by the record (as ``whenScaled: Snapshot`` does); then,
   missing and never recorded, it is made again from the newest snapshot once resumed.

The entry is stored (a milestone) before any snapshot is taken, and the stale-cache guard makes
every later pass of this process read it (a new leader's caches start from the stored objects):
a resume that comes while the snapshot is being taken, even one that comes before the snapshot
reaches the cache, cannot let pods write to the claim. A snapshot cut while they wrote would be
the proof that deletes the claim, and what they wrote after it would be lost.

The snapshots and the group are named after the entry's start (``occasion``), as well as after
the claim (or the JobSet): a later release never takes an earlier release's snapshot of the same
claim object (one that was given up, below, and may have become ready since) for its own.

The entry ends, and its claims are mountable again, when none of them is left (each deleted),
when the JobSet finished or the policy no longer says Snapshot, or, once the JobSet is resumed,
when a snapshot of it failed: the release is given up (``abandoned``), the claims are kept with
their data and mounted again, and the failed snapshots are deleted. While it is suspended a
failed snapshot keeps its claim, as in every other retention case.

A recorded claim that is gone (or going) while the stored entry holds it, and whose snapshot of
that release is ready, was let go by the controller (the pass that deleted it may not have
stored its record): ``released_through`` says so, and it is made again, not reported Lost.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from controller.jobset.jobsetstatus import SuspensionRelease
from controller.jobset.model import JobSet
from controller.jobset.volumes import ownership
from controller.jobset.volumes.model import CLAIM_TEMPLATE_LABEL, VolumePolicy
from controller.jobset.volumes.observed import ClaimView
from controller.jobset.volumes.record import uid_prefix
from controller.jobset.volumes.snapshots import (
    Snapshots,
    SnapshotStep,
    group_key,
    group_name,
    named_snapshot,
)
from controller.jobset.volumes.spec import VolumeModel

_OCCASION = 8  # hex digits of the hash of a release's start in the names of its snapshots


def started_at(now: datetime.datetime) -> str:
    """When a release that starts ``now`` started, as the status keeps it (RFC 3339, with
    microseconds: two releases of one policy never start in the same microsecond)."""
    return now.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def occasion(entry: SuspensionRelease) -> str:
    """What the names of the release's snapshots and group end with: ``s`` and a hash of its
    start, one per release."""
    return "s" + hashlib.sha256(entry.started.encode()).hexdigest()[:_OCCASION]


def snapshots_on_suspend(policy: VolumePolicy) -> bool:
    return policy.retention.when_suspended == "Snapshot"


def stored(model: VolumeModel) -> dict[str, SuspensionRelease]:
    """The releases the stored status has, by policy (its first template), of the policies that
    still say ``whenSuspended: Snapshot`` (an entry of another has ended), while the JobSet has
    not finished (a finished one needs no claims: its release has ended too)."""
    volumes = model.jobset.status.volumes
    if volumes is None or model.jobset.status.terminal_state:
        return {}
    keys = {group_key(p) for p in model.policies if snapshots_on_suspend(p)}
    return {e.template: e for e in volumes.suspension_releases if e.template in keys}


@dataclass(frozen=True)
class Suspension:
    """What a pass knows of the JobSet's pods for a release: none of its Jobs' runs or is
    terminating (``stopped``: a release may start, if it is suspended), and the time (``now``,
    ``started_at``)."""

    stopped: bool = False
    now: str = ""


# No release starts: nothing known of the pods (a finished JobSet's pass, a table test).
RUNNING = Suspension()


def starting(
    model: VolumeModel,
    bound: Iterable[tuple[VolumePolicy, ClaimView]],
    already: Mapping[str, SuspensionRelease],
    suspension: Suspension,
    *,
    finished: bool,
) -> list[SuspensionRelease]:
    """The releases that start in this pass: of each ``whenSuspended: Snapshot`` policy without
    one, its ``bound`` claims (the JobSet's own, Bound: the only ones holding data), once the
    JobSet is suspended, unfinished and ``stopped``."""
    if not (model.jobset.suspend and suspension.stopped and not finished):
        return []
    by_policy: dict[str, list[str]] = {}
    for policy, claim in bound:
        key = group_key(policy)
        if snapshots_on_suspend(policy) and key not in already:
            by_policy.setdefault(key, []).append(uid_prefix(claim.uid))
    return [
        SuspensionRelease(key, tuple(sorted(uids)), suspension.now)
        for key, uids in sorted(by_policy.items())
    ]


def _of_policy(claim: ClaimView, policy: VolumePolicy, jobset: JobSet) -> bool:
    """One of the JobSet's live claims made from the policy's templates."""
    template = claim.labels.get(CLAIM_TEMPLATE_LABEL)
    return (
        not claim.terminating
        and any(t.name == template for t in policy.templates)
        and ownership.owned(claim, jobset)
    )


def held(
    entry: SuspensionRelease, policy: VolumePolicy, claims: Iterable[ClaimView], jobset: JobSet
) -> list[ClaimView]:
    """The claims the release holds that are still there (not being deleted)."""
    uids = set(entry.uids)
    return [c for c in claims if uid_prefix(c.uid) in uids and _of_policy(c, policy, jobset)]


def together(
    policy: VolumePolicy, holding: list[ClaimView], claims: Iterable[ClaimView], jobset: JobSet
) -> bool:
    """Whether the release snapshots its claims in one group: the policy asks for groups, and
    the group's selector (the JobSet's name, the policy's templates) would take exactly the held
    claims, every one Bound (a claim without a volume fails a group)."""
    if not policy.snapshots.group_class_name or not holding:
        return False
    names = {c.name for c in holding}
    others = [c for c in claims if c.name not in names and _of_policy(c, policy, jobset)]
    return not others and all(c.phase == "Bound" for c in holding)


def abandons(steps: Iterable[SnapshotStep], jobset: JobSet) -> bool:
    """Whether a release is given up: the JobSet was resumed and a snapshot of it failed (its
    claims are kept, with their data, and mounted again)."""
    return not jobset.suspend and any(s.step == "failed" for s in steps)


def abandoned_message(claim: str, step: SnapshotStep) -> str:
    return (
        f"snapshot {step.snapshot} of claim {claim} failed: {step.why}; the JobSet was resumed, "
        "so the claim is kept and mounted again, and the failed snapshot deleted "
        "(retentionPolicy.whenSuspended: Snapshot)"
    )


def released_through(
    entry: SuspensionRelease,
    claim: str,
    recorded: str,
    found: Snapshots,
    jobset: JobSet,
) -> bool:
    """Whether the claim ``claim`` of uid prefix ``recorded`` was let go by the release
    ``entry``: the release holds it and its snapshot of that release (or its member of the
    release's group) is ready."""
    if recorded not in entry.uids:
        return False
    taken = occasion(entry)
    mine = found.named_of(claim, named_snapshot(claim, recorded, taken), recorded)
    if mine is not None and mine.ready and not mine.deleting:
        return True
    group = found.group(entry.template, group_name(jobset.name, jobset.uid, entry.template, taken))
    if group is None or not group.ready or group.deleting:
        return False
    member = found.member(group, claim)
    return member is not None and member.ready and not member.deleting
