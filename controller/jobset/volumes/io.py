"""The volumes' edge: their informers and event routing, what a pass reads of the caches for
them, and the claim writes.

``VolumeIO.caches`` makes the informers the volumes read or watch, and ``VolumeIO.watch`` routes
their events to the JobSets (``watches``); ``jobset.setup`` calls both. The reconciler holds one
:class:`VolumeIO` and asks it, per JobSet, for the claims (those labelled with the JobSet's name and
any claim of a name it wants, which it remembers in ``wanted`` to route claim events), the storage
classes and CSIDrivers, whether Pod-scope pods can get their claims now (``admission.readiness``,
whose first sighting of the policy it keeps), and, for a JobSet being deleted, its retention
(``deletion_plan``); and it creates, patches and deletes claims (and VolumeSnapshots: retention
Snapshot, pruning) through it, each write with its metric and Event. Deciding stays pure
(``lifecycle.plan``, ``gating``, ``deletion.plan``); orchestration (which writes, in what order,
what a refusal means) stays in the reconciler.
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable, Collection
from dataclasses import replace
from typing import Any

from controller.jobset.metrics import JobSetMetrics
from controller.jobset.model import JobSet
from controller.jobset.volumes import admission, deletion, podscope, watches
from controller.jobset.volumes.desired import DesiredClaim
from controller.jobset.volumes.lifecycle import (
    REASON_CLAIM_ADOPTED,
    REASON_CLAIM_CREATED,
    REASON_CLAIM_DELETED,
    ClaimDelete,
    ClaimPatch,
    VolumePlan,
)
from controller.jobset.volumes.model import CLAIM_TEMPLATE_LABEL, Colocate, colocate_mode
from controller.jobset.volumes.observed import (
    GROUP_INDEX,
    ClaimView,
    GroupView,
    SnapshotView,
    StorageClasses,
    attach_required,
    views,
)
from controller.jobset.volumes.observed import storage_classes as storage_classes_of
from controller.jobset.volumes.snapshots import (
    REASON_SNAPSHOT_CREATED,
    REASON_SNAPSHOT_DELETED,
    Snapshots,
    restored,
    snapshots,
)
from controller.jobset.volumes.spec import VolumeModel
from controller.jobset.volumes.watches import VolumeCaches
from controller.jobset.wanted import WantedClaims
from controller.runtime.client import (
    CLAIMS,
    VOLUME_GROUP_SNAPSHOTS,
    VOLUME_SNAPSHOTS,
    ApiError,
    KubeClient,
)
from controller.runtime.manager import Cache, Manager
from controller.runtime.store import Obj, namespace_of
from controller.runtime.views import Summary, Views
from controller.runtime.workqueue import WorkQueue

# (the JobSet object, Event type, reason, message)
EventSink = Callable[[Obj, str, str, str], None]


class VolumeIO:
    """Cache reads and claim writes for the JobSets of one controller (see the module)."""

    def __init__(
        self,
        client: KubeClient,
        metrics: JobSetMetrics,
        event: EventSink,
        *,
        index: str,
        claims: Cache | None = None,
        storage_classes: Cache | None = None,
        admission_policies: Cache | None = None,
        admission_bindings: Cache | None = None,
        pods: Cache | None = None,
        volume_snapshots: Cache | None = None,
        volume_group_snapshots: Cache | None = None,
        csi_drivers: Cache | None = None,
        colocate_claims: str = "auto",
    ) -> None:
        self.client = client
        self.metrics = metrics
        self.event = event
        # The caches' index of objects by the JobSet name label.
        self.index = index
        self.claims = claims
        # Claims as views (each made once per stored object), the storage classes as one view
        # (made again only after one changed).
        self.claim_views = Views(claims, ClaimView.of) if claims is not None else None
        self.class_view = (
            Summary(storage_classes, storage_classes_of) if storage_classes is not None else None
        )
        # The CSIDrivers' attachRequired (one view, as the classes), and the controller's
        # --colocate-claims: with the classes, whether shared ReadWriteOnce claims pin pods.
        self.csi_drivers = csi_drivers
        self.driver_view = Summary(csi_drivers, attach_required) if csi_drivers else None
        self.colocate_claims: Colocate = colocate_mode(colocate_claims)
        # MutatingAdmissionPolicies and their bindings: Pod scope works only with ours installed.
        self.admission_policies = admission_policies
        self.admission_bindings = admission_bindings
        # Pods of Pod-scope replicated jobs (the cache keeps their placeholders:
        # podscope.pod_view), as views.
        self.pod_views = Views(pods, podscope.pod) if pods is not None else None
        # The policy and binding versions first seen installed, and when (monotonic).
        self.admission_seen: admission.Seen | None = None
        # Per JobSet, the claim names it wants: a claim event goes to the JobSets wanting it.
        self.wanted = WantedClaims()
        # VolumeSnapshots (optional: the CRD may not be installed), as views; and per JobSet,
        # the snapshot a restorePolicy names (not labelled for it: routed by name, as claims).
        self.volume_snapshots = volume_snapshots
        self.snapshot_views = (
            Views(volume_snapshots, SnapshotView.of) if volume_snapshots is not None else None
        )
        self.wanted_snapshots = WantedClaims()
        # Per JobSet, the runs its restorePolicy.fromJobSet names: the snapshots labelled for
        # one of those go to it too.
        self.wanted_runs = WantedClaims()
        self.volume_group_snapshots = volume_group_snapshots
        self.group_views = (
            Views(volume_group_snapshots, GroupView.of)
            if volume_group_snapshots is not None
            else None
        )

    # -------------------------------------------------------------- watches

    @staticmethod
    def caches(manager: Manager[Any], index: str) -> VolumeCaches:
        """The volumes' informers (``watches.caches``); claims, Pod-scope pods and snapshots
        indexed by their JobSet (``index``)."""
        return watches.caches(manager, index)

    def watch(
        self,
        found: VolumeCaches,
        jobsets: Cache,
        queue: WorkQueue[str],
        enqueue_parent: Callable[[Obj], None],
        batch_period: float,
    ) -> None:
        """The event handlers on ``found`` (``watches.watch``): claim and snapshot events go to
        the JobSets labelled for them and to those that want their names (``wanted``,
        ``wanted_snapshots``, kept by this object's reads)."""
        watches.watch(
            found,
            jobsets,
            queue,
            enqueue_parent,
            self.wanted,
            batch_period,
            self.wanted_snapshots,
            self.wanted_runs,
        )

    # --------------------------------------------------------------- reads

    def claims_of(self, key: str, jobset: JobSet, model: VolumeModel) -> dict[str, ClaimView]:
        """Claims this JobSet may care about: those labelled with its name, and any claim
        (labelled or not: a conflict is exactly an unlabelled one) with a name it wants."""
        # Recorded in the same step as the cache is read (no await between): an event of a
        # claim is either in what this pass reads, or enqueues the key again.
        self.wanted.want(key, (d.name for d in model.desired))
        if self.claim_views is None or not model.policies:
            return {}
        found = {c.name: c for c in self.claim_views.by_index(self.index, key)}
        for desired in model.desired:
            claim = self.claim_views.get(jobset.namespace, desired.name)
            if claim is not None:
                found[desired.name] = claim
        return found

    def snapshots_of(self, key: str, namespace: str, model: VolumeModel | None) -> Snapshots:
        """The VolumeSnapshots labelled with the JobSet's name, and a lookup by name in its
        namespace (a restorePolicy's named snapshot, which it then wants: ``model``)."""
        if model is not None:
            self.wanted_snapshots.want(
                key,
                (
                    p.restore.snapshot_name
                    for p in model.policies
                    if p.restore is not None and p.restore.source == "VolumeSnapshot"
                ),
            )
        runs = sorted(
            {
                p.restore.from_jobset
                for p in (model.policies if model is not None else ())
                if p.restore is not None and p.restore.from_jobset
            }
        )
        if model is not None:
            self.wanted_runs.want(key, runs)
        cache, views = self.volume_snapshots, self.snapshot_views
        if cache is None or views is None or cache.unavailable() is not None:
            return snapshots((), served=False)
        groups, group_cache = self.group_views, self.volume_group_snapshots
        served_groups = group_cache is not None and group_cache.unavailable() is None

        def of(jobset_key: str) -> Snapshots:
            return snapshots(
                views.by_index(self.index, jobset_key),
                lambda name: views.get(namespace, name),
                groups=groups.by_index(self.index, jobset_key) if groups and served_groups else (),
                members=lambda group: views.by_index(GROUP_INDEX, group.uid),
            )

        own = of(key)
        if not runs:
            return own
        return replace(own, runs={run: of(f"{namespace}/{run}") for run in runs})

    def forget(self, key: str) -> None:
        """The JobSet wants no claim or snapshot (gone, being deleted, or invalid)."""
        self.wanted.drop(key)
        self.wanted_snapshots.drop(key)
        self.wanted_runs.drop(key)

    def labelled_claims(self, key: str) -> list[Obj]:
        """The claims labelled with the JobSet's name (what its deletion retains or deletes)."""
        return self.claims.by_index(self.index, key) if self.claims is not None else []

    def deletion_plan(
        self,
        key: str,
        obj: Obj,
        now: datetime.datetime | None = None,
        warn_after: datetime.timedelta | None = None,
    ) -> VolumePlan:
        """Retention for the JobSet ``obj`` being deleted (``deletion.plan``: from the stored
        object, whatever its spec), over the claims labelled with its name and the controller's
        snapshots of them; the waits for those longer than ``warn_after`` at ``now``, overdue."""
        taken = self.snapshots_of(key, namespace_of(obj) or "", None)
        claims = views(self.labelled_claims(key)).values()
        return deletion.plan(obj, claims, taken, now, warn_after)

    def classes(self) -> StorageClasses:
        """The storage classes, the CSIDrivers (unknown when they cannot be read: every driver
        is then taken to attach) and ``--colocate-claims``."""
        found = StorageClasses() if self.class_view is None else self.class_view.get()
        drivers = None
        if self.driver_view is not None and self.csi_drivers is not None:
            drivers = None if self.csi_drivers.unavailable() else self.driver_view.get()
        return replace(found, attach_required=drivers, colocate_claims=self.colocate_claims)

    def pod_scope_blocked(
        self, key: str, jobset: JobSet, job_uids: Collection[str], now: float
    ) -> tuple[admission.Blocked | None, float | None]:
        """Why Pod-scope pods of this JobSet cannot get their claims now, if so, and when to look
        again: the policy missing (``admission.missing``), just installed (given
        ``SETTLE_SECONDS`` to take effect), or pods of the JobSet's own Jobs (``job_uids``)
        admitted without it."""
        policies, bindings = self.admission_policies, self.admission_bindings
        if policies is None or bindings is None:
            unavailable: str | None = admission.NOT_WATCHED
            policy = binding = None
        else:
            status = policies.unavailable() or bindings.unavailable()
            unavailable = admission.not_served(status) if status is not None else None
            policy = policies.get(None, podscope.POLICY_NAME)
            binding = bindings.get(None, podscope.POLICY_NAME)
        found = admission.readiness(
            unavailable,
            policy,
            binding,
            lambda: podscope.unresolved_pods(
                self.pod_views.by_index(self.index, key) if self.pod_views else [], job_uids
            ),
            namespace=jobset.namespace,
            jobset=jobset.name,
            seen=self.admission_seen,
            now=now,
        )
        self.admission_seen = found.seen
        return found.blocked, found.look_again

    # --------------------------------------------------------------- writes

    def claim_creates(
        self, jobset: JobSet, vplan: VolumePlan, created: dict[str, str]
    ) -> list[tuple[str, Awaitable[None]]]:
        """The claim creates of ``vplan``, each with the claim's name, for the caller to await
        (it bounds how many are in flight and reports refusals). Each claim created puts its uid
        in ``created`` under its name, at once: a pass that fails later must still record the
        uids of those that were (``VolumePlan.claim_uids_with``)."""

        async def create(claim: DesiredClaim) -> None:
            uid = await self.create_claim(
                jobset, claim, vplan.restore.get(claim.name), vplan.restore_groups.get(claim.name)
            )
            if uid:
                created[claim.name] = uid

        return [(claim.name, create(claim)) for claim in vplan.create]

    async def create_claim(
        self,
        jobset: JobSet,
        claim: DesiredClaim,
        source: str | None = None,
        group: str | None = None,
    ) -> str | None:
        """Creates the claim (from the VolumeSnapshot ``source``, if given, a member of the
        VolumeGroupSnapshot ``group``, if given); returns its uid (None when it existed
        already)."""
        body = claim.object if source is None else restored(claim, source, group)
        try:
            created = await self.client.create(CLAIMS, body, jobset.namespace)
        except ApiError as err:
            if err.already_exists:
                return None  # the next pass classifies it (ours from a lost response, or not)
            raise  # a refusal is reported by the status (writefailures)
        self.metrics.claims_created.inc()
        origin = "" if source is None else f" from VolumeSnapshot {source}"
        self.event(
            jobset.raw, "Normal", REASON_CLAIM_CREATED, f"created claim {claim.name}{origin}"
        )
        uid = (created.get("metadata") or {}).get("uid") if isinstance(created, dict) else None
        return uid if isinstance(uid, str) else None

    async def patch_claim(self, obj: Obj, change: ClaimPatch) -> None:
        """Patches a claim of the JobSet ``obj`` (the stored object: it may not parse)."""
        try:
            await self.client.patch(CLAIMS, change.name, change.patch, namespace_of(obj))
        except ApiError as err:
            if err.not_found:
                return
            raise  # a refusal is reported by the status (writefailures), or while deleting by
            # the reconciler's Event
        if change.reason == REASON_CLAIM_ADOPTED:
            self.metrics.claims_adopted.inc()
        self.event(obj, change.event_type, change.reason, change.message)

    async def delete_claim(self, obj: Obj, claim: ClaimDelete) -> None:
        """Deletes the claim judged, only if it is still that object at that version (409
        otherwise, raised: the pass is retried, and judges what the name holds now)."""
        try:
            await self.client.delete(
                CLAIMS,
                claim.name,
                namespace_of(obj),
                precondition_uid=claim.uid or None,
                precondition_resource_version=claim.resource_version or None,
            )
        except ApiError as err:
            if err.not_found:
                return
            raise
        self.metrics.claims_deleted.inc()
        self.event(obj, "Normal", REASON_CLAIM_DELETED, f"deleted claim {claim.name}")

    async def create_snapshot(self, obj: Obj, body: Obj) -> None:
        """Creates a VolumeSnapshot of one of the JobSet ``obj``'s claims (retention Snapshot), or
        a VolumeGroupSnapshot of a policy's claims (retention Snapshot, together)."""
        group = body.get("kind") == "VolumeGroupSnapshot"
        namespace = namespace_of(obj)
        try:
            if group:
                await self.client.create(VOLUME_GROUP_SNAPSHOTS, body, namespace)
            else:
                await self.client.create(VOLUME_SNAPSHOTS, body, namespace)
        except ApiError as err:
            if err.already_exists:
                return  # ours, from a pass whose answer was lost: the next pass reads it
            raise
        name = body["metadata"]["name"]
        if group:
            template = body["metadata"]["labels"][CLAIM_TEMPLATE_LABEL]
            message = (
                f"created VolumeGroupSnapshot {name} of the claims of template {template}'s "
                "policy; each claim is deleted once the group and its snapshot are ready to use"
            )
        else:
            claim = body["spec"]["source"]["persistentVolumeClaimName"]
            message = (
                f"created VolumeSnapshot {name} of claim {claim}; the claim is deleted once it is "
                "ready to use"
            )
        self.event(obj, "Normal", REASON_SNAPSHOT_CREATED, message)

    async def delete_snapshot(self, obj: Obj, name: str, *, group: bool = False) -> None:
        """Deletes one of the controller's older snapshots, or groups (whose members go with
        them): beyond snapshotPolicy.historyLimit."""
        namespace = namespace_of(obj)
        try:
            if group:
                await self.client.delete(VOLUME_GROUP_SNAPSHOTS, name, namespace)
            else:
                await self.client.delete(VOLUME_SNAPSHOTS, name, namespace)
        except ApiError as err:
            if err.not_found:
                return
            raise
        self.event(
            obj,
            "Normal",
            REASON_SNAPSHOT_DELETED,
            f"deleted {'VolumeGroupSnapshot' if group else 'VolumeSnapshot'} {name}: older "
            "than the newest ones snapshotPolicy.historyLimit keeps",
        )
