"""The JobSet reconciler: read the caches, ``decide``, perform exactly the planned writes.

Reads come only from the informer caches. Every write comes from the plan, i.e. from a difference
between desired and observed state; at steady state the plan is empty and nothing is written.
What this process remembers of a JobSet between passes is one value (``passes.Memory``): the
pure steps around ``decide`` (``passes.step``, ``passes.settle``) take it and return it anew, and
the reconciler keeps it; the writes of a pass go in ``passes.WRITE_ORDER``.
Creates use deterministic names, so ``409 AlreadyExists`` is success when the object is ours (a
lost response, a stale cache); a Job of that name that is not ours is reported. A write the API
server refuses (quota, validation, admission) does not stop the pass: the others are made, the
status written last says what was refused (``writefailures``) and the key is retried with
backoff. Status is written with the cached resourceVersion (optimistic concurrency): a conflict
means our view was stale and the key is simply processed again.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import structlog

from controller import features
from controller.features import FeatureGates
from controller.jobset import (
    api,
    children,
    failure,
    finalizers,
    invalid,
    passes,
    preflight,
    volumes,
    writefailures,
)
from controller.jobset.children import ChildJob
from controller.jobset.decide import Plan, decide
from controller.jobset.jobsetstatus import JobSetStatus
from controller.jobset.metrics import JobSetMetrics
from controller.jobset.model import InvalidJobSet, JobSet
from controller.jobset.parses import Parses
from controller.jobset.passes import Memory, Outcomes, Settled
from controller.jobset.volumes import VolumeIO, VolumePlan
from controller.jobset.writefailures import Failure, Write
from controller.runtime.client import JOBS, SERVICES, ApiError, KubeClient
from controller.runtime.controller import Result
from controller.runtime.events import EventRecorder
from controller.runtime.manager import Cache
from controller.runtime.store import Obj, by_controller_uid, namespace_of, split_key
from controller.runtime.views import Views

log = structlog.get_logger("jobset")

JOBSET_INDEX = "jobset"
# Upstream creates and deletes child Jobs with at most this many requests in flight.
MAX_PARALLELISM = 50


class JobSetReconciler:
    def __init__(
        self,
        client: KubeClient,
        recorder: EventRecorder,
        jobsets: Cache,
        jobs: Cache,
        services: Cache,
        claims: Cache | None = None,
        storage_classes: Cache | None = None,
        *,
        metrics: JobSetMetrics | None = None,
        status_progress_period: float = 0.0,
        managed_by: str = api.CONTROLLER_NAME,
        feature_gates: FeatureGates = features.DEFAULT,
        snapshot_warn_after: datetime.timedelta | None = None,
        admission_policies: Cache | None = None,
        admission_bindings: Cache | None = None,
        pods: Cache | None = None,
        volume_snapshots: Cache | None = None,
        volume_group_snapshots: Cache | None = None,
        csi_drivers: Cache | None = None,
        colocate_claims: str = "auto",
        wall_clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(datetime.UTC),
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.recorder = recorder
        # How long a snapshot retention waits for may take before the status warns.
        self.snapshot_warn_after = snapshot_warn_after
        self.jobsets = jobsets
        # Typed views of the cached Jobs, made once per object the cache stores.
        self.job_views: Views[ChildJob] = Views(jobs, children.view)
        self.services = services
        self.metrics = metrics or JobSetMetrics(None)
        # The volumes' cache reads (claims, storage classes, Pod-scope admission) and claim
        # writes, and the claim names each JobSet wants (routing claim events: setup's
        # ``volume_io.watch``).
        self.volume_io = VolumeIO(
            client,
            self.metrics,
            self._event,
            index=JOBSET_INDEX,
            claims=claims,
            storage_classes=storage_classes,
            admission_policies=admission_policies,
            admission_bindings=admission_bindings,
            pods=pods,
            volume_snapshots=volume_snapshots,
            volume_group_snapshots=volume_group_snapshots,
            csi_drivers=csi_drivers,
            colocate_claims=colocate_claims,
        )
        self._wall = wall_clock
        # Seconds on a monotonic clock (expectations, pacing, the Pod-scope settle window):
        # injected, so that tests drive time instead of sleeping through it.
        self._clock = clock
        # What this process remembers of each JobSet between its passes (expected Jobs, our last
        # write, status pacing): one value per JobSet, renewed by ``passes``.
        self._memory: dict[str, Memory] = {}
        # The longest a change of status counters alone is held (``pacing``).
        self.status_progress_period = status_progress_period
        # The spec.managedBy value this controller serves (--managed-by): other JobSets are left
        # alone, so a canary can run beside upstream JobSet.
        self.managed_by = managed_by
        # Upstream's alpha features this controller runs (--feature-gates; the CRD must match).
        self.feature_gates = feature_gates
        # The JobSets' parses and volume models, made again only for a new object (the parse runs
        # the rules of the CRD made for these gates).
        self.parses = Parses(gates=feature_gates)

    # ---------------------------------------------------------------- memory

    def memory(self, key: str) -> Memory | None:
        """What this process remembers of the JobSet ``key``; None: nothing (never reconciled,
        or forgotten once deleted)."""
        return self._memory.get(key)

    def _recall(self, key: str) -> Memory:
        found = self._memory.get(key)
        return found if found is not None else passes.FRESH

    # --------------------------------------------------------------- observe

    def _children(self, key: str, uid: str) -> tuple[list[ChildJob], dict[str, Obj]]:
        """Jobs with the JobSet's name label: its own (controller reference with its uid), and
        the others by name (orphaned, another owner's, an earlier JobSet's of this name)."""
        owned, others = [], {}
        for job in self.job_views.by_index(JOBSET_INDEX, key):
            if job.controller_uid == uid:
                owned.append(job)
            else:
                others[job.name] = job.raw
        return owned, others

    def _forget(self, key: str) -> None:
        self._memory.pop(key, None)
        self.parses.forget(key)
        self.volume_io.forget(key)

    # -------------------------------------------------------------- reconcile

    async def reconcile(self, key: str) -> Result:
        namespace, name = split_key(key)
        obj = self.jobsets.get(namespace, name)
        if obj is None:
            self._forget(key)
            return Result()
        if preflight.managed_elsewhere(obj, self.managed_by):
            return Result()  # another controller's JobSet
        if preflight.is_stale(obj, self._recall(key).written):
            return Result(requeue_after=preflight.STALE_REQUEUE_AFTER)
        if (obj.get("metadata") or {}).get("deletionTimestamp"):
            # Whatever the spec says, or whether it parses: deletion must never be blocked.
            self.volume_io.forget(key)
            return await self._finalise(key, obj)
        jobs: list[ChildJob] = []
        try:
            # The parse refuses what the CRD made for this controller's gates would (a RestartJob
            # action with the gate off, say), in the API server's words.
            jobset = self.parses.parse(key, obj)
            jobs, others = self._children(key, jobset.uid)
            # A tenant's failure-message patterns can take long on many messages: off the loop.
            matches = await failure.match_messages_in_thread(jobset, jobs)
            service = self.services.get(namespace, jobset.subdomain)
            model = self.parses.model(key, jobset)
            claims = self.volume_io.claims_of(key, jobset, model)
            found = self.volume_io.snapshots_of(key, jobset.namespace, model)
            classes, wall = self.volume_io.classes(), self._wall()
            blocked, look_again = (
                self.volume_io.pod_scope_blocked(key, jobset, {j.uid for j in jobs}, self._clock())
                if model.pod_scope
                else (None, None)
            )

            def decide_with(failures: Sequence[Failure]) -> Plan:
                # The same snapshot of the caches both times: the writes await, the caches move.
                return decide(
                    jobset, jobs, service, wall, claims=claims, classes=classes, model=model,
                    snapshots=found,
                    message_matches=matches, others=others, failures=failures,
                    pod_scope_blocked=blocked, restart_job=self.feature_gates.restart_job,
                    resize=self.feature_gates.elastic_jobset,
                    snapshot_warn_after=self.snapshot_warn_after,
                )  # fmt: skip

            plan = decide_with(())
            if look_again is not None:
                plan.requeue_after = min(plan.requeue_after or look_again, look_again)
        except InvalidJobSet as err:
            if jobs:  # the cache shows them, whatever the JobSet says: no longer expected
                self._memory[key] = passes.observed(self._recall(key), _names(jobs))
            self.volume_io.forget(key)  # it acts on no claim until the object changes
            await self._report_invalid(key, obj, str(err))
            return Result()  # nothing to retry until the object changes
        now = self._clock()
        stepped = passes.step(plan, _names(jobs), self._recall(key), now)
        self._memory[key], plan = stepped.memory, stepped.plan
        if plan.writes - (plan.status is not None):
            # The status is left out: it may yet be held (pacing), and is logged when written.
            log.info(
                "applying plan",
                creates=len(plan.create_jobs),
                deletes=len(plan.delete_jobs),
                patches=len(plan.patch_jobs),
                service=plan.create_service is not None,
                claims=plan.volume.writes if plan.volume else 0,
            )
        latest, created, failures = await self._write_children(key, jobset, plan)
        redecided = None
        if failures:
            log.warning("writes refused", refused=[f.text for f in failures])
            # What the status says once the refusals are known (pure, same inputs).
            redecided = decide_with(failures)
        settled = passes.settle(
            plan,
            Outcomes(created, failures, redecided),
            self._recall(key),
            self.status_progress_period,
            now,
            jobset=jobset,
        )
        # Kept before the JobSet's writes (no await between reading and keeping them).
        self._memory[key] = settled.memory
        await self._write_jobset(key, jobset, plan, settled, latest)
        return settled.result

    # ------------------------------------------------------------------ act

    async def _write_children(
        self, key: str, jobset: JobSet, plan: Plan
    ) -> tuple[Obj, dict[str, str], list[Failure]]:
        """Every write of the plan but the JobSet's own, in ``passes.WRITE_ORDER``. Returns the
        JobSet as last written by us (the finalizer), the uids of the claims created (by claim
        name), and the writes refused."""
        ns = jobset.namespace
        vplan = plan.volume
        latest = jobset.raw
        created: dict[str, str] = {}
        failures: list[Failure] = []
        if vplan is not None:
            updated, created, failures = await self._apply_volumes(key, jobset, vplan)
            latest = updated or latest
        if plan.create_service is not None:
            name = str(plan.create_service["metadata"]["name"])
            failures += await self._parallel(
                [self._refusal(Write.CREATE_SERVICE, name, self._create_service(jobset, plan))]
            )
        failures += await self._parallel(
            [
                self._refusal(Write.CREATE_JOB, job["metadata"]["name"],
                              self._create_job(key, jobset, job))
                for job in plan.create_jobs
            ]
        )  # fmt: skip
        failures += await self._parallel(
            [
                self._refusal(Write.DELETE_JOB, name, self._delete_job(ns, name))
                for name in plan.delete_jobs
            ]
        )
        clear = {"status": {"startTime": None}}
        failures += await self._parallel(
            [
                self._refusal(Write.UPDATE_JOB, name,
                              self.client.patch(JOBS, name, clear, ns, subresource="status"))
                for name in plan.clear_start_time
            ]
        )  # fmt: skip
        failures += await self._parallel(
            [
                self._refusal(Write.UPDATE_JOB, name, self.client.patch(JOBS, name, patch, ns))
                for name, patch in plan.patch_jobs
            ]
        )
        return latest, created, failures

    async def _write_jobset(
        self, key: str, jobset: JobSet, plan: Plan, settled: Settled, latest: Obj
    ) -> None:
        """The JobSet's own writes, last: its status, its deletion (ttlSecondsAfterFinished)."""
        ns = jobset.namespace
        if settled.status is not None:
            await self._write_status(key, jobset, plan, settled, latest)
        else:
            for event in settled.events:
                self._event(jobset.raw, event.type, event.reason, event.message)
        if plan.delete_jobset:
            try:
                await self.client.delete(
                    api.JOBSETS, jobset.name, ns,
                    # As upstream: Foreground, so the JobSet is gone only after its Jobs (and
                    # their pods); the uid precondition spares a new JobSet of the same name.
                    propagation="Foreground", precondition_uid=jobset.uid,
                )  # fmt: skip
                log.info("deleted finished JobSet after ttlSecondsAfterFinished")
            except ApiError as err:
                if not (err.not_found or err.conflict):
                    raise

    async def _parallel(self, calls: list[Awaitable[Failure | None]]) -> list[Failure]:
        """Run writes with at most MAX_PARALLELISM in flight; all of them run. Returns the
        refused ones; any other error (a stale cache, the API server away) is raised, the first
        one, once all are done."""
        if not calls:
            return []
        semaphore = asyncio.Semaphore(MAX_PARALLELISM)

        async def bounded(call: Awaitable[Failure | None]) -> Failure | None:
            async with semaphore:
                return await call

        results = await asyncio.gather(*(bounded(c) for c in calls), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise errors[0]
        return [r for r in results if isinstance(r, Failure)]

    @staticmethod
    async def _refusal(
        write: Write, name: str, call: Awaitable[Any], reason: str = ""
    ) -> Failure | None:
        """``call``, with a refusal by the API server turned into a ``Failure`` to report (and
        a ``Failure`` that ``call`` found itself passed on)."""
        try:
            result = await call
        except ApiError as err:
            if not writefailures.refused(err):
                raise
            return Failure(write, name, err.message, reason)
        return result if isinstance(result, Failure) else None

    async def _apply_volumes(
        self, key: str, jobset: JobSet, vplan: VolumePlan
    ) -> tuple[Obj | None, dict[str, str], list[Failure]]:
        """Claim writes; returns the JobSet if this pass changed it (the finalizer), the uids of
        the claims it created (by claim name), and the writes refused."""
        updated = None
        if vplan.add_finalizer:
            # Before any claim exists, so retention runs whatever happens next.
            try:
                updated = await self._add_finalizer(jobset)
            except ApiError as err:
                if not writefailures.refused(err):
                    raise
                # No claim write without it; the status says why.
                creates = [c.name for c in vplan.create]
                return (
                    None,
                    {},
                    writefailures.finalizer_refused(volumes.FINALIZER, err.message, creates),
                )
            if updated is not None:
                self._remember(key, updated)
        created: dict[str, str] = {}
        try:
            failures = await self._parallel(
                [
                    self._refusal(Write.CREATE_CLAIM, name, create)
                    for name, create in self.volume_io.claim_creates(jobset, vplan, created)
                ]
            )
        except ApiError:
            if not created:
                raise
            # Some claims were created: their uids must reach the status before the error goes
            # back to the queue, or a later pass could not tell them from copies.
            await self._write_created(key, jobset, updated or jobset.raw, vplan, created)
            raise
        failures += await self._parallel(
            [
                self._refusal(Write.PATCH_CLAIM, change.name,
                              self.volume_io.patch_claim(jobset.raw, change),
                              reason=change.reason + "Failed")
                for change in vplan.patch
            ]
        )  # fmt: skip
        failures += await self._snapshot_writes(jobset.raw, vplan)
        failures += await self._claim_deletes(key, jobset.raw, vplan)
        if vplan.conflicts:
            self.metrics.claim_conflicts.inc(len(vplan.conflicts))
        return updated, created, failures

    async def _claim_deletes(self, key: str, obj: Obj, vplan: VolumePlan) -> list[Failure]:
        """Retention's claim deletes (each only of the object and version judged), each
        remembered once made (``passes.unsent_deletes``)."""

        async def remembered(delete: Awaitable[None], uid: str) -> None:
            await delete
            self._memory[key] = passes.claim_deleted(self._recall(key), uid, self._clock())

        io = self.volume_io
        return await self._parallel(
            [
                self._refusal(Write.DELETE_CLAIM, claim.name,
                              remembered(io.delete_claim(obj, claim), claim.uid))
                for claim in vplan.delete
            ]
        )  # fmt: skip

    async def _snapshot_writes(self, obj: Obj, vplan: VolumePlan) -> list[Failure]:
        """Retention's VolumeSnapshots and VolumeGroupSnapshots: those to take, then those
        historyLimit prunes."""
        io = self.volume_io
        failures = await self._parallel(
            [
                self._refusal(Write.CREATE_SNAPSHOT, str(body["metadata"]["name"]),
                              io.create_snapshot(obj, body))
                for body in [*vplan.create_snapshots, *vplan.create_groups]
            ]
        )  # fmt: skip
        pruned = [(n, False) for n in vplan.delete_snapshots]
        pruned += [(n, True) for n in vplan.delete_groups]
        return failures + await self._parallel(
            [
                self._refusal(Write.DELETE_SNAPSHOT, name,
                              io.delete_snapshot(obj, name, group=group))
                for name, group in pruned
            ]
        )  # fmt: skip

    async def _write_created(
        self,
        key: str,
        jobset: JobSet,
        latest: Obj,
        vplan: VolumePlan,
        created: dict[str, str],
    ) -> None:
        """Only the uid record of the claims just created, when the pass cannot go on."""
        status = jobset.status.with_claim_uids(vplan.claim_uids_with(created))
        body = _with_status(latest, jobset, status)
        updated = await self.client.replace(
            api.JOBSETS, body, jobset.namespace, subresource="status"
        )
        self._remember(key, updated)

    def _remember(self, key: str, written: Obj) -> None:
        """Our newest write of this JobSet: until the cache shows it, the cache is stale."""
        self._memory[key] = passes.remembered(self._recall(key), written)

    async def _add_finalizer(self, jobset: JobSet) -> Obj | None:
        patch = finalizers.add_patch(jobset.raw.get("metadata") or {}, volumes.FINALIZER)
        if patch is None:
            return None
        return await self.client.patch(
            api.JOBSETS, jobset.name, patch, jobset.namespace, patch_type="json"
        )

    async def _finalise(self, key: str, obj: Obj) -> Result:
        """Retention for a JobSet being deleted (``VolumeIO.deletion_plan``: from the stored
        object, whatever its spec), then the finalizer goes."""
        vplan = self.volume_io.deletion_plan(key, obj, self._wall(), self.snapshot_warn_after)
        vplan, self._memory[key] = passes.unsent_deletes(vplan, self._recall(key), self._clock())
        failures = await self._parallel(
            [
                self._refusal(Write.PATCH_CLAIM, change.name,
                              self.volume_io.patch_claim(obj, change),
                              reason=change.reason + "Failed")
                for change in vplan.patch
            ]
        )  # fmt: skip
        failures += await self._snapshot_writes(obj, vplan)
        failures += await self._claim_deletes(key, obj, vplan)
        for name, step in sorted(vplan.snapshotting.items()):
            # No status to say it while the JobSet goes: an Event.
            if step.step == "failed":
                text = f"claim {name} is kept: its snapshot {step.snapshot} failed: {step.why}"
                self._event(obj, "Warning", "SnapshotFailed", text)
            elif name in vplan.overdue.claims:
                text = (
                    f"claim {name} is kept: its snapshot {step.snapshot} is not ready long after "
                    "it was asked for, and reports no error (is the snapshot controller running?)"
                )
                self._event(obj, "Warning", "SnapshotNotReady", text)
        if failures:
            # No status to carry them while the JobSet goes: each one is an Event, and the key
            # goes back to the queue with backoff.
            for found in failures:
                self._event(obj, "Warning", writefailures.event_reason(found), found.text)
            return Result(requeue=True)
        if not vplan.remove_finalizer:
            # The next pass (the claims' and snapshots' events) checks again; a wait that may
            # become overdue is looked at then, since a stuck snapshot sends no event.
            return Result(requeue_after=vplan.overdue.look_again)
        meta = obj.get("metadata") or {}
        patch = finalizers.remove_patch(meta, volumes.FINALIZER)
        if patch is None:
            return Result()
        try:
            await self.client.patch(
                api.JOBSETS, str(meta.get("name")), patch, namespace_of(obj), patch_type="json"
            )
        except ApiError as err:
            if not err.not_found:
                raise
        log.info("volume retention done; finalizer removed")
        return Result()

    async def _create_service(self, jobset: JobSet, plan: Plan) -> Failure | None:
        """Creates the headless Service. One of that name that is this JobSet's (its controller
        reference: upstream JobSet made it, without the label our cache selects by) gets the
        label, so the cache sees it and no later pass creates it again; another's is a
        ``Failure``."""
        assert plan.create_service is not None
        name = str(plan.create_service["metadata"]["name"])
        try:
            await self.client.create(SERVICES, plan.create_service, jobset.namespace)
        except ApiError as err:
            if not err.already_exists:
                raise
            try:
                found = await self.client.get(SERVICES, name, jobset.namespace)
            except ApiError as gone:
                if gone.not_found:
                    raise err from gone  # deleted meanwhile: retried (with backoff), created
                raise
            if by_controller_uid(found) != [jobset.uid]:
                owner = writefailures.owner_of(found)
                held = f"a Service of this name exists and is not this JobSet's ({owner})"
                return Failure(Write.CREATE_SERVICE, name, held)
            labels = (found.get("metadata") or {}).get("labels") or {}
            if labels.get(api.JOBSET_NAME) != jobset.name:
                patch = {"metadata": {"labels": {api.JOBSET_NAME: jobset.name}}}
                await self.client.patch(SERVICES, name, patch, jobset.namespace)
        return None

    async def _create_job(self, key: str, jobset: JobSet, job: Obj) -> Failure | None:
        """Creates the Job; a Job of that name that is not ours (one without our labels, or one
        the cache has not shown yet) is a ``Failure``, never success."""
        name = job["metadata"]["name"]
        try:
            await self.client.create(JOBS, job, jobset.namespace)
        except ApiError as err:
            if not err.already_exists:
                raise
            try:
                found = await self.client.get(JOBS, name, jobset.namespace)
            except ApiError as gone:
                if gone.not_found:
                    raise err from gone  # deleted meanwhile: retried (with backoff), created
                raise
            if by_controller_uid(found) == [jobset.uid]:
                return None  # ours: a lost response or a stale cache
            return Failure(Write.HELD_JOB, name, writefailures.owner_of(found))
        self._memory[key] = passes.job_created(self._recall(key), name, self._clock())
        return None

    async def _delete_job(self, namespace: str, name: str) -> None:
        try:
            # Foreground: the Job object stays until its pods are gone, so a recreated Job of
            # the same name never overlaps with the old attempt's pods.
            await self.client.delete(JOBS, name, namespace, propagation="Foreground")
        except ApiError as err:
            if not err.not_found:
                raise

    async def _write_status(
        self, key: str, jobset: JobSet, plan: Plan, settled: Settled, latest: Obj
    ) -> None:
        assert settled.status is not None
        body = _with_status(latest, jobset, settled.status)
        # A 409 here means the cache was stale: the error requeues the key with backoff.
        updated = await self.client.replace(
            api.JOBSETS, body, jobset.namespace, subresource="status"
        )
        self.metrics.status_written(settled.cause)
        stored = jobset.raw.get("status") or {}
        log.debug(
            "status written",
            cause=settled.cause,
            fields=sorted(k for k, v in body["status"].items() if stored.get(k) != v),
        )
        self._memory[key] = passes.status_stored(self._recall(key), updated)
        # Events and metrics describe transitions that are now stored.
        for event in settled.events:
            self._event(jobset.raw, event.type, event.reason, event.message)
        if plan.completed:
            self.metrics.jobset_completed(jobset.namespace, jobset.name)
        if plan.failed:
            self.metrics.jobset_failed(jobset.namespace, jobset.name)

    async def _report_invalid(self, key: str, obj: Obj, message: str) -> None:
        found = invalid.report(obj, message, self._wall())
        if found is None:
            return  # already reported for this generation
        body = dict(obj)
        body["status"] = found.status
        log.warning("invalid JobSet", error=message)
        # A 409 (stale cache) requeues the key; the Event follows the stored status, as all do,
        # so a retried write cannot send it twice.
        updated = await self.client.replace(
            api.JOBSETS, body, obj["metadata"].get("namespace"), subresource="status"
        )
        self._remember(key, updated)
        self._event(obj, found.event.type, found.event.reason, found.event.message)

    def _event(self, obj: Obj, event_type: str, reason: str, message: str) -> None:
        subject = dict(obj)
        subject.setdefault("apiVersion", api.API_VERSION)
        subject.setdefault("kind", api.KIND)
        self.recorder.event(subject, event_type, reason, message)


def _with_status(latest: Obj, jobset: JobSet, status: JobSetStatus) -> Obj:
    """The JobSet ``latest`` (as last written by us) with ``status`` to write over the stored
    one (fields this version does not read are kept): where the reconciler turns the value into
    the API's dict."""
    body = dict(latest)
    body["status"] = {**(jobset.raw.get("status") or {}), **status.to_dict()}
    return body


def _names(jobs: Iterable[ChildJob]) -> Iterable[str]:
    """The names of ``jobs`` (cached Jobs)."""
    return (job.name for job in jobs)
