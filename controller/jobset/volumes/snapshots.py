"""Checkpoints as VolumeSnapshots: retention to a snapshot, pruning, and restore (pure).

Retention ``Snapshot`` (``whenCompleted``, ``whenFailed``, ``whenScaled``, ``whenDeleted``) lets a
claim go only through a ready snapshot of it:

1. the claim is Bound (it may hold data): the controller creates a VolumeSnapshot of it, named
   after the claim and its uid (``snapshot_name``), so a pass that lost the create's answer finds
   its own snapshot, and a claim made again later gets a snapshot of its own;
2. the snapshot is ``readyToUse``: the claim is deleted, as ``Delete`` would have;
3. until then, or for good when the snapshot reports an error, the claim is kept, and the status
   says which claims wait for which snapshot (a failure with a Warning Event).

A claim that is not Bound holds no data (never provisioned, or its volume lost): it goes as with
``Delete``. ``snapshotPolicy.historyLimit`` keeps the newest N ready snapshots the controller
took of each claim name (``prune``); snapshots without the controller's annotation are never
touched.

``restorePolicy`` gives each claim the controller creates a data source: the newest ready
snapshot the controller took of a claim of the same name (a re-applied JobSet has the same claim
names), or one named VolumeSnapshot. A snapshot that exists but is not ready yet is waited for;
none at all is waited for too, unless ``whenMissing: CreateEmpty``.

``snapshotPolicy.volumeGroupSnapshotClassName`` snapshots the claims of a policy that one case
lets go at once (completion, failure, deletion; not a scale-down) together: one
VolumeGroupSnapshot per JobSet and policy (``group_name``) selecting them by label, whose member
VolumeSnapshots (one per claim, made and owned by the snapshot controller) are all from the same
moment. Each claim goes once the group and its member are ready; a claim the group did not take
is snapshotted on its own. A restore from the newest snapshot then takes every claim of the
policy from the newest ready group (a claim it does not hold is missing), so the ranks of a run
resume from the same step. ``historyLimit`` counts groups per policy.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from controller.api.bounds import MAX_DNS_SUBDOMAIN, MAX_LABEL_VALUE
from controller.jobset import api
from controller.jobset.status import parse_time
from controller.jobset.volumes.desired import DesiredClaim, slot_claim_name
from controller.jobset.volumes.model import (
    CLAIM_TEMPLATE_LABEL,
    GROUP_OF_JOBSET_ANNOTATION,
    RESTORED_FROM_GROUP_ANNOTATION,
    SNAPSHOT_CLAIM_LABEL,
    SNAPSHOT_OF_UID_ANNOTATION,
    RestorePolicy,
    VolumePolicy,
    as_dict,
)
from controller.jobset.volumes.observed import SNAPSHOT_GROUP, ClaimView, GroupView, SnapshotView
from controller.runtime.store import Obj

REASON_SNAPSHOT_CREATED = "SnapshotCreated"
REASON_SNAPSHOT_DELETED = "SnapshotDeleted"
REASON_SNAPSHOT_FAILED = "SnapshotFailed"

_UID_PART = 8


def _fit(base: str, suffix: str) -> str:
    """``base + suffix``; too long for a DNS subdomain, ``base`` keeps its start and a hash of
    the rest."""
    if len(base) + len(suffix) > MAX_DNS_SUBDOMAIN:
        digest = hashlib.sha256(base.encode()).hexdigest()[:10]
        base = base[: MAX_DNS_SUBDOMAIN - len(suffix) - len(digest) - 1].rstrip("-.") + "-" + digest
    return base + suffix


def _occasion_part(occasion: str) -> str:
    return f"-{occasion}" if occasion else ""


def named_snapshot(claim: str, uid: str, occasion: str = "") -> str:
    """``<claim>-<first 8 hex of its uid>``: one snapshot per claim object, found again by name;
    with ``occasion`` (a release while suspended, ``suspension.occasion``), ``-<occasion>`` too:
    one per claim object and release."""
    return _fit(claim, "-" + uid.replace("-", "")[:_UID_PART] + _occasion_part(occasion))


def snapshot_name(claim: ClaimView, occasion: str = "") -> str:
    """The name of the snapshot retention takes of ``claim`` (``named_snapshot``)."""
    return named_snapshot(claim.name, claim.uid, occasion)


def snapshot_object(
    claim: ClaimView, policy: VolumePolicy, jobset: str, namespace: str, occasion: str = ""
) -> Obj:
    """The VolumeSnapshot to create of ``claim``, a claim of the JobSet named ``jobset``. It has
    no ownerReference: it outlives the JobSet on purpose (the next run restores from it)."""
    labels = {api.JOBSET_NAME: jobset}
    template = claim.labels.get(CLAIM_TEMPLATE_LABEL)
    if template:
        labels[CLAIM_TEMPLATE_LABEL] = template
    if len(claim.name) <= MAX_LABEL_VALUE:
        labels[SNAPSHOT_CLAIM_LABEL] = claim.name
    spec: Obj = {"source": {"persistentVolumeClaimName": claim.name}}
    if policy.snapshots.class_name:
        spec["volumeSnapshotClassName"] = policy.snapshots.class_name
    return {
        "apiVersion": f"{SNAPSHOT_GROUP}/v1",
        "kind": "VolumeSnapshot",
        "metadata": {
            "name": snapshot_name(claim, occasion),
            "namespace": namespace,
            "labels": labels,
            "annotations": {SNAPSHOT_OF_UID_ANNOTATION: claim.uid},
        },
        "spec": spec,
    }


def group_name(jobset: str, jobset_uid: str, template: str, occasion: str = "") -> str:
    """``<jobSet>-<policy's first template>-<first 8 hex of the JobSet's uid>``: one group per
    JobSet instance and policy, found again by name; with ``occasion`` (a release while
    suspended), ``-<occasion>`` too: one per release."""
    suffix = "-" + jobset_uid.replace("-", "")[:_UID_PART] + _occasion_part(occasion)
    return _fit(f"{jobset}-{template}", suffix)


def group_key(policy: VolumePolicy) -> str:
    """The template a policy's groups are labelled with (its first; "" for a policy without
    templates, which has no claims)."""
    return policy.templates[0].name if policy.templates else ""


def group_object(
    policy: VolumePolicy, jobset: str, jobset_uid: str, namespace: str, occasion: str = ""
) -> Obj:
    """The VolumeGroupSnapshot of the policy's claims of this JobSet (selected by label: the
    JobSet's name and the policy's templates). No ownerReference: it outlives the JobSet."""
    key = group_key(policy)
    return {
        "apiVersion": "groupsnapshot.storage.k8s.io/v1",
        "kind": "VolumeGroupSnapshot",
        "metadata": {
            "name": group_name(jobset, jobset_uid, key, occasion),
            "namespace": namespace,
            "labels": {api.JOBSET_NAME: jobset, CLAIM_TEMPLATE_LABEL: key},
            "annotations": {GROUP_OF_JOBSET_ANNOTATION: jobset_uid},
        },
        "spec": {
            "volumeGroupSnapshotClassName": policy.snapshots.group_class_name,
            "source": {
                "selector": {
                    "matchLabels": {api.JOBSET_NAME: jobset},
                    "matchExpressions": [
                        {
                            "key": CLAIM_TEMPLATE_LABEL,
                            "operator": "In",
                            "values": sorted(t.name for t in policy.templates),
                        }
                    ],
                }
            },
        },
    }


@dataclass(frozen=True)
class Snapshots:
    """The controller's snapshots of a JobSet's claims (labelled with its name), by claim name,
    newest first; and a way to find any snapshot of the namespace by name (restore from a
    named one). ``served``: the VolumeSnapshot API is there (its CRD installed). ``Snapshots()``:
    none, on a cluster that serves them."""

    by_claim: Mapping[str, tuple[SnapshotView, ...]] = field(default_factory=dict)
    named: Callable[[str], SnapshotView | None] = lambda _: None
    served: bool = True
    # The controller's VolumeGroupSnapshots by the policy's first template, newest first, and
    # their members: group uid → claim name → member VolumeSnapshot.
    groups: Mapping[str, tuple[GroupView, ...]] = field(default_factory=dict)
    members: Mapping[str, Mapping[str, SnapshotView]] = field(default_factory=dict)
    # The snapshots of the JobSets a restorePolicy.fromJobSet names (previous runs), by name.
    runs: Mapping[str, Snapshots] = field(default_factory=dict)

    def group(self, template: str, name: str) -> GroupView | None:
        return next((g for g in self.groups.get(template, ()) if g.name == name), None)

    def member(self, group: GroupView, claim: str) -> SnapshotView | None:
        return self.members.get(group.uid, {}).get(claim)

    def taken_of(self, claim: ClaimView, occasion: str = "") -> SnapshotView | None:
        """The snapshot the controller took (or is taking) of exactly this claim object (for the
        release ``occasion``, if given)."""
        return self.named_of(claim.name, snapshot_name(claim, occasion), claim.uid)

    def named_of(self, claim: str, name: str, uid: str) -> SnapshotView | None:
        """The controller's snapshot ``name`` of the claim ``claim`` whose uid is (or starts
        with) ``uid``."""
        for found in self.by_claim.get(claim, ()):
            if found.name == name and uid and (found.of_claim_uid or "").startswith(uid):
                return found
        return None

    def newest_ready(self, claim: str) -> SnapshotView | None:
        return next((s for s in self.by_claim.get(claim, ()) if s.ready and not s.deleting), None)

    def in_flight(self, claim: str) -> SnapshotView | None:
        """A snapshot of the claim name newer than every ready one, neither ready nor failed."""
        for found in self.by_claim.get(claim, ()):
            if found.ready:
                return None
            if not found.error and not found.deleting:
                return found
        return None


def snapshots(
    views: Iterable[SnapshotView],
    named: Callable[[str], SnapshotView | None] = lambda _: None,
    *,
    served: bool = True,
    groups: Iterable[GroupView] = (),
    members: Callable[[GroupView], Iterable[SnapshotView]] = lambda _: (),
) -> Snapshots:
    """``Snapshots`` of the views the cache holds for one JobSet (only the controller's own
    count: the annotation with the claim's uid, and a claim as the source; for groups, the
    annotation with a JobSet's uid). ``members``: the member snapshots of a group."""
    by_claim: dict[str, list[SnapshotView]] = {}
    for found in views:
        if found.ours:
            by_claim.setdefault(found.source_claim, []).append(found)
    ordered = {
        claim: tuple(sorted(found, key=lambda s: (s.created, s.name), reverse=True))
        for claim, found in by_claim.items()
    }
    by_template: dict[str, list[GroupView]] = {}
    for group in groups:
        if group.of_jobset_uid and group.template:
            by_template.setdefault(group.template, []).append(group)
    newest_first = {
        template: tuple(sorted(found, key=lambda g: (g.created, g.name), reverse=True))
        for template, found in by_template.items()
    }
    held = {
        group.uid: {m.source_claim: m for m in members(group) if m.source_claim}
        for found in newest_first.values()
        for group in found
    }
    return Snapshots(ordered, named, served, newest_first, held)


NO_SNAPSHOTS = Snapshots(served=False)
# A run (restorePolicy.fromJobSet) with no snapshot of the controller's.
NO_RUN = Snapshots()


# ----------------------------------------------------------------------------- retention

Step = Literal["delete", "take", "wait", "failed"]


@dataclass(frozen=True)
class SnapshotStep:
    """What retention ``Snapshot`` does with one claim in this pass."""

    step: Step
    snapshot: str = ""  # the snapshot's name (take, wait, failed)
    why: str = ""  # failed: the snapshot's error
    # wait: when the snapshot (or group) waited for was asked for (its creationTimestamp).
    requested: str = ""


def retention_step(claim: ClaimView, found: Snapshots, occasion: str = "") -> SnapshotStep:
    """``delete`` the claim (its snapshot is ready, or it holds no data: not Bound), ``take`` a
    snapshot of it, ``wait`` for the snapshot, or keep it because the snapshot ``failed``.
    ``occasion``: the release while suspended the snapshot is taken for."""
    if claim.phase != "Bound":
        return SnapshotStep("delete")
    name = snapshot_name(claim, occasion)
    if not found.served:
        return SnapshotStep(
            "failed",
            name,
            "this cluster does not serve VolumeSnapshots (install the snapshot "
            "CRDs and controller)",
        )
    taken = found.taken_of(claim, occasion)
    if taken is None:
        return SnapshotStep("take", name)
    if taken.ready:
        return SnapshotStep("delete", name)
    if taken.error:
        return SnapshotStep("failed", name, taken.error)
    return SnapshotStep("wait", name, requested=taken.requested)


def group_steps(
    claims: Iterable[ClaimView],
    group: GroupView | None,
    found: Snapshots,
    name: str,
    occasion: str = "",
) -> dict[str, SnapshotStep]:
    """What retention does with each claim of one group snapshot in this pass: ``take`` the
    group (none yet), ``wait`` for it, ``failed`` (its error), or once it is ready each claim
    ``delete`` (its member is ready), ``wait`` (its member is not yet), or on its own (the group
    did not take it: ``retention_step``, for the same ``occasion``)."""
    result = {}
    for claim in claims:
        if group is None:
            result[claim.name] = SnapshotStep("take", name)
        elif group.error:
            result[claim.name] = SnapshotStep("failed", name, group.error)
        elif not group.ready:
            result[claim.name] = SnapshotStep("wait", name, requested=group.requested)
        else:
            member = found.member(group, claim.name)
            if member is None:
                result[claim.name] = retention_step(claim, found, occasion)
            elif member.ready:
                result[claim.name] = SnapshotStep("delete", member.name)
            elif member.error:
                result[claim.name] = SnapshotStep("failed", member.name, member.error)
            else:
                result[claim.name] = SnapshotStep("wait", member.name, requested=member.requested)
    return result


@dataclass(frozen=True)
class Overdue:
    """The waits for a snapshot that have lasted ``after`` or longer (claim → its step), and in
    how many seconds the next wait becomes overdue (None: no other wait)."""

    claims: Mapping[str, SnapshotStep] = field(default_factory=dict)
    look_again: float | None = None


NOT_LATE = Overdue()
# How long a snapshot may take before the condition warns: large volumes on cloud storage take
# many minutes to copy (the controller's --snapshot-warn-after).
WARN_AFTER = datetime.timedelta(minutes=30)


def overdue(
    steps: Mapping[str, SnapshotStep],
    now: datetime.datetime,
    after: datetime.timedelta | None = None,
) -> Overdue:
    """Which of the claims retention keeps for a snapshot have waited ``after`` or longer since
    the snapshot was asked for, with no error reported (a snapshot controller or csi-snapshotter
    that is not running, a driver that never finishes): the condition and a Warning say so.
    Pure: ``now`` is the pass's time; ``after`` None: ``WARN_AFTER``."""
    after = WARN_AFTER if after is None else after
    late: dict[str, SnapshotStep] = {}
    soonest: float | None = None
    for claim, step in steps.items():
        requested = parse_time(step.requested) if step.step == "wait" else None
        if requested is None:
            continue
        left = (requested + after - now).total_seconds()
        if left <= 0:
            late[claim] = step
        elif soonest is None or left < soonest:
            soonest = left
    return Overdue(late, soonest)


def prune_groups(policies: Iterable[VolumePolicy], found: Snapshots) -> list[str]:
    """The controller's ready groups beyond each group-snapshotting policy's ``historyLimit``
    (newest kept); their members go with them (the snapshot controller's ownerReferences)."""
    result: list[str] = []
    for policy in policies:
        if not policy.snapshots.group_class_name:
            continue
        ready = [g for g in found.groups.get(group_key(policy), ()) if g.ready and not g.deleting]
        result.extend(g.name for g in ready[policy.snapshots.history_limit :])
    return sorted(result)


def prune(policies: Iterable[VolumePolicy], found: Snapshots) -> list[str]:
    """The controller's ready snapshots beyond each claim name's ``historyLimit`` (newest kept),
    for the templates of ``policies``; a snapshot of a template no policy names is kept (its
    limit is unknown)."""
    limits = {t.name: p.snapshots.history_limit for p in policies for t in p.templates}
    result: list[str] = []
    for taken in found.by_claim.values():
        ready = [s for s in taken if s.ready and not s.deleting]
        template = ready[0].template if ready else None
        limit = limits.get(template or "")
        if limit is None:
            continue
        result.extend(s.name for s in ready[limit:])
    return sorted(result)


# ----------------------------------------------------------------------------- restore


@dataclass(frozen=True)
class Restore:
    """Where a new claim's data comes from: ``source`` (a VolumeSnapshot's name), or nothing
    (an empty claim); ``wait``: why it is not created yet ("" when it may be); ``group``: the
    VolumeGroupSnapshot ``source`` is a member of."""

    source: str | None = None
    wait: str = ""
    group: str | None = None


EMPTY = Restore()


def restore(desired: DesiredClaim, found: Snapshots) -> Restore:
    """The data source of ``desired``, about to be created, under its policy's restorePolicy."""
    policy = desired.policy.restore
    if policy is None:
        return EMPTY
    if not found.served:
        return Restore(
            wait=f"claim {desired.name} is restored from a snapshot, but this cluster does not "
            "serve VolumeSnapshots (install the snapshot CRDs and controller)"
        )
    if policy.source == "VolumeSnapshot":
        named = found.named(policy.snapshot_name)
        if named is not None and named.ready and not named.deleting:
            return Restore(named.name)
        if named is not None and not named.deleting:
            state = f"failed: {named.error}" if named.error else "not ready yet"
            return Restore(
                wait=f"claim {desired.name} starts from VolumeSnapshot {named.name}, which is "
                f"{state}"
            )
        return _missing(f"VolumeSnapshot {policy.snapshot_name} does not exist", policy)
    source = _source(desired, found)
    if desired.policy.snapshots.group_class_name and source.found.groups.get(
        group_key(desired.policy)
    ):
        return _from_group(desired, source)
    pending = source.found.in_flight(source.claim)
    if pending is not None:
        return Restore(
            wait=f"claim {desired.name} starts from {source.newest}, {pending.name}, which is "
            "not ready yet"
        )
    newest = source.found.newest_ready(source.claim)
    if newest is not None:
        return Restore(newest.name)
    return _missing(f"no ready snapshot of claim {source.claim} exists", policy)


@dataclass(frozen=True)
class _Source:
    """Whose snapshots a claim restored from the newest snapshot starts from: this JobSet's own
    claim of its name, or (``restorePolicy.fromJobSet``) the claim in the same slot of that
    JobSet."""

    found: Snapshots
    claim: str
    newest: str  # how messages name it: "its newest snapshot", ...


def _source(desired: DesiredClaim, found: Snapshots) -> _Source:
    run = desired.policy.restore.from_jobset if desired.policy.restore else ""
    if not run:
        return _Source(found, desired.name, "its newest snapshot")
    claim = slot_claim_name(run, desired.slot)
    return _Source(
        found.runs.get(run, NO_RUN), claim, f"the newest snapshot of claim {claim} of JobSet {run}"
    )


def _missing(why: str, policy: RestorePolicy) -> Restore:
    if policy.when_missing == "CreateEmpty":
        return EMPTY
    return Restore(
        wait=f"{why}; the claim is not created (restorePolicy.whenMissing: CreateEmpty would "
        "start it empty)"
    )


def _from_group(desired: DesiredClaim, source: _Source) -> Restore:
    """The newest snapshot of a group-snapshotting policy: the source claim's member of the
    newest ready group (a newer group still being taken is waited for, a failed one passed
    over)."""
    policy = desired.policy.restore
    assert policy is not None
    run = f" of JobSet {policy.from_jobset}" if policy.from_jobset else ""
    for group in source.found.groups.get(group_key(desired.policy), ()):
        if group.deleting or group.error:
            continue
        if not group.ready:
            return Restore(
                wait=f"claim {desired.name} starts from the newest group snapshot{run}, "
                f"{group.name}, which is not ready yet"
            )
        member = source.found.member(group, source.claim)
        if member is not None and member.ready:
            return Restore(member.name, group=group.name)
        return _missing(
            f"the newest group snapshot{run}, {group.name}, holds no ready snapshot of claim "
            f"{source.claim}",
            policy,
        )
    return _missing(f"no ready group snapshot{run} holds claim {source.claim}", policy)


def restored(desired: DesiredClaim, source: str, group: str | None = None) -> Obj:
    """The claim object of ``desired`` with ``source`` as its data source (and ``group``, the
    VolumeGroupSnapshot whose member it is, named in an annotation)."""
    claim = desired.object
    spec = dict(claim["spec"])
    spec["dataSourceRef"] = {"apiGroup": SNAPSHOT_GROUP, "kind": "VolumeSnapshot", "name": source}
    if group is None:
        return {**claim, "spec": spec}
    meta = dict(claim["metadata"])
    meta["annotations"] = {
        **as_dict(meta.get("annotations")),
        RESTORED_FROM_GROUP_ANNOTATION: group,
    }
    return {**claim, "metadata": meta, "spec": spec}
