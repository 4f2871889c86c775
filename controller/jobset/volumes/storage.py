"""What a JobSet's volumes decide in one pass, behind one object: ``storage(...)`` → ``Storage``.

``decide`` asks the volumes a few questions about the Jobs (may this one be created? resumed?
resized? must that one be suspended, or deleted because retention released its claims?), gets the
claim writes (``Storage.plan``) and what the status says of the volumes (``Storage.report``).
How the answers are reached (claim lifecycle, ownership, storage classes, the Pod-scope admission
policy, whether a suspended JobSet's pods have stopped so that its claims may go through a
snapshot) stays inside the package.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from controller.jobset import api, suspend, writefailures
from controller.jobset.children import ChildJob
from controller.jobset.construct import DesiredJob
from controller.jobset.jobsetstatus import Condition, VolumesStatus
from controller.jobset.model import JobSet
from controller.jobset.status import Event
from controller.jobset.suspend import SuspendDecision
from controller.jobset.volumes import deletion, gating, singlenode
from controller.jobset.volumes.admission import Blocked
from controller.jobset.volumes.lifecycle import REASON_CLAIM_REPLACED, VolumePlan, plan
from controller.jobset.volumes.model import SELECTED_NODE_ANNOTATION
from controller.jobset.volumes.observed import ClaimView, StorageClasses
from controller.jobset.volumes.snapshots import (
    NO_SNAPSHOTS,
    REASON_SNAPSHOT_FAILED,
    Snapshots,
    overdue,
)
from controller.jobset.volumes.spec import VolumeModel
from controller.jobset.volumes.status import conditions, released_claims, volumes_status
from controller.jobset.volumes.suspension import RUNNING, Suspension, started_at
from controller.jobset.writefailures import Failure
from controller.runtime.store import Obj


@dataclass(frozen=True)
class Report:
    """What the JobSet's status says of its volumes after a pass."""

    status: VolumesStatus
    ready: Condition  # VolumesReady: written also while False ("not ready yet" is news)
    others: tuple[Condition, ...]  # the other volume conditions
    events: tuple[Event, ...]
    # MultiAttachRisk, written also while False: whether the pods that share a ReadWriteOnce
    # claim are kept on one node, and why, is news from the start (``singlenode``).
    colocation: Condition | None = None


@dataclass(frozen=True)
class Storage:
    """The volumes of one JobSet in one pass: the claim writes to make and the answers about
    its Jobs. ``blocked``: why Pod-scope pods cannot get their claims now, if so."""

    model: VolumeModel
    plan: VolumePlan
    blocked: Blocked | None = None
    # The node the scheduler chose for each WaitForFirstConsumer claim of ours, by claim name
    # (only those the Jobs' pods must share, ``singlenode``).
    nodes: Mapping[str, str] = field(default_factory=dict)
    # The groups of shared ReadWriteOnce claims whose pods the Jobs made now keep on one node,
    # and those they do not, for this storage and these switches (``singlenode.pinning``).
    colocation: singlenode.Colocation = field(default_factory=singlenode.Colocation)

    @property
    def look_again(self) -> float | None:
        """Seconds until a snapshot wait becomes overdue (the status must then say so, and no
        event may come: a snapshot that is stuck does not change)."""
        return self.plan.overdue.look_again

    def may_create(self, job: DesiredJob) -> bool:
        """Every claim the Job's pods use is mountable (Pod scope: the claims of all its
        completion indexes, although its template mounts one placeholder)."""
        return gating.may_run(job.replicated_job, job.index, self.model, self.plan.mountable)

    def mounted(self, job: DesiredJob, jobset: JobSet) -> Obj:
        """The desired Job's object with its claims mounted, and its pods kept on the node of
        the other pods that share a ReadWriteOnce claim with them (``singlenode``)."""
        mounted = gating.with_claims(job, jobset, self.model)
        group = self.colocation.group_of(job.replicated_job, job.index)
        if group is None:
            return mounted
        node = singlenode.selected_node(group, self.nodes)
        return singlenode.colocated(mounted, group, node, jobset.name)

    def may_resize(self, job: ChildJob) -> bool:
        """Every claim the running Job's pods use at its new size is mountable."""
        return gating.job_may_run(job, self.model, self.plan.mountable)

    def must_suspend(self, jobset: JobSet, jobs: Sequence[ChildJob]) -> list[tuple[str, Obj]]:
        """Patches suspending the running Jobs that mount a Lost claim."""
        return gating.must_suspend(jobset, jobs, self.model, self.plan)

    def withhold_resume(
        self, decision: SuspendDecision, jobs: Sequence[ChildJob]
    ) -> SuspendDecision:
        """``decision`` without the resumes of Jobs whose claims are not all mountable (none
        while Pod scope is blocked)."""
        return gating.withhold_resume(
            decision, jobs, self.model, self.plan.mountable, self.blocked is not None
        )

    def released_jobs(self, jobs: Iterable[ChildJob]) -> list[str]:
        """Finished Jobs whose pods mount a claim retention released: they go, or
        pvc-protection would keep the claim forever."""
        released = released_claims(self.model)
        if not released:
            return []
        return [j.name for j in jobs if j.is_finished and released & gating.claims_mounted(j)]

    @staticmethod
    def holds_deletion(jobset: JobSet, claims: Iterable[ClaimView]) -> bool:
        """A Foreground delete of the JobSet now would let the garbage collector take claims
        that retention keeps (they still carry its ownerReference)."""
        return bool(deletion.kept_but_owned(jobset.raw, claims))

    def report(self, failures: Sequence[Failure], jobs: Sequence[ChildJob] = ()) -> Report | None:
        """The volumes' status, conditions and Events, the pass's refused writes known (and the
        JobSet's Jobs, for ``MultiAttachRisk``); None for a JobSet without volume policies."""
        if not self.model.policies:
            return None
        vplan = self.plan
        refused = writefailures.failed_claim_creates(failures)
        if refused:
            vplan = gating.not_created(vplan, refused)
        ready, others = None, []
        for found in conditions(self.model, vplan):
            if found.type != api.VOLUMES_READY:
                others.append(found)
                continue
            ready = writefailures.volumes_ready(found, failures)
            if self.blocked is not None:
                ready = Condition(
                    api.VOLUMES_READY,
                    "False",
                    self.blocked.reason,
                    self.blocked.message,
                    "Warning",
                )
        assert ready is not None  # conditions() always says VolumesReady
        colocated = singlenode.condition(self.colocation, self.model.jobset, jobs)
        events = tuple(
            Event("Warning", REASON_CLAIM_REPLACED, message) for message in vplan.replaced.values()
        ) + tuple(
            Event("Warning", REASON_SNAPSHOT_FAILED, message)
            for message in vplan.abandoned.values()
        )
        return Report(volumes_status(self.model, vplan), ready, tuple(others), events, colocated)


def storage(
    model: VolumeModel,
    claims: Mapping[str, ClaimView],
    classes: StorageClasses,
    *,
    terminal_state: str,
    pods_in_use: Mapping[str, int] | None,
    blocked: Blocked | None,
    found: Snapshots | None = None,
    jobs: Sequence[ChildJob] | None = None,
    now: datetime.datetime | None = None,
    warn_after: datetime.timedelta | None = None,
) -> Storage:
    """The volumes' decisions of this pass. ``classes``: the cluster's storage classes and
    CSIDrivers, and the controller's ``--colocate-claims``; ``terminal_state``: the JobSet's, as
    this pass leaves it (retention on completion or failure); ``pods_in_use``: the largest
    completions per replicated job of the Jobs that exist (Pod scope); ``blocked``: read for Pod
    scope only; ``found``: the controller's VolumeSnapshots of the JobSet's claims; ``jobs``:
    every Job of the JobSet (of every attempt: a pod of any may still write to a claim), read
    while it is
    suspended (``suspension``: once no pod of them runs, its claims may go through a snapshot;
    None, as a finished JobSet's pass, none does); ``now``: the time of the pass (that too, and
    how long the snapshots retention waits for have taken: ``warn_after``, ``VolumePlan.overdue``).
    While Pod scope is blocked no claim is created and nothing is mountable."""
    blocked = blocked if model.pod_scope else None
    candidates = model.colocation
    existing = {
        name: view.storage_class
        for group in candidates.groups
        for name in group.claims
        if (view := claims.get(name)) is not None
    }
    colocation = singlenode.pinning(candidates, classes, existing)
    shared = {c for g in colocation.groups for c in g.claims}
    nodes = {
        name: view.annotations[SELECTED_NODE_ANNOTATION]
        for name in shared
        if (view := claims.get(name)) is not None and SELECTED_NODE_ANNOTATION in view.annotations
    }
    vplan = plan(
        model,
        claims,
        classes,
        terminal_state=terminal_state,
        pods_in_use=pods_in_use,
        found=NO_SNAPSHOTS if found is None else found,
        suspended=_suspension(model, jobs, now),
    )
    if now is not None:
        vplan.overdue = overdue(vplan.snapshotting, now, warn_after)
    return Storage(model, gating.gate_pod_scope(vplan, blocked), blocked, nodes, colocation)


def _suspension(
    model: VolumeModel, jobs: Sequence[ChildJob] | None, now: datetime.datetime | None
) -> Suspension:
    """What this pass knows of a suspended JobSet's pods for a release (``suspension``)."""
    if jobs is None or now is None or not model.jobset.suspend:
        return RUNNING
    return Suspension(suspend.stopped(jobs), started_at(now))
