"""decide: how one reconcile composes the policies — observed state in, the plan of writes out.

Each row is a JobSet (its spec and stored status), the children and claims the caches hold, and
the time; the expected plan is written out in full as a summary (``_summary``): which Jobs are
created (name, restart attempt, suspended), deleted and patched, the Service, the new status
(counters, conditions as type/status/reason), the Events, the claims' writes and ``writes``.
The policies themselves are tabled in their own tests; this table is about their order and
how they combine (upstream's reconcile order, see ``decide``'s docstring).
"""

from __future__ import annotations

import copy
import datetime
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from controller import features
from controller.jobset import api, children, construct, model, pacing, volumes
from controller.jobset.children import views as job_views
from controller.jobset.decide import TTL_HOLD_SECONDS, Plan, decide
from controller.jobset.jobsetstatus import JobSetStatus, SuspensionRelease
from controller.jobset.volumes import desired as volume_desired
from controller.jobset.volumes import snapshots as volume_snapshots
from controller.jobset.volumes.admission import Blocked
from controller.jobset.volumes.model import (
    POD_SCOPE_LABEL,
    SINGLE_NODE_LABEL,
    SNAPSHOT_OF_UID_ANNOTATION,
)
from controller.jobset.volumes.observed import SnapshotView
from controller.jobset.volumes.observed import views as claim_views
from controller.jobset.volumes.record import parse_record
from controller.jobset.volumes.snapshots import named_snapshot
from controller.jobset.volumes.suspension import occasion, started_at
from controller.runtime.store import Obj
from tests.unit.jobset_factories import T0, at, condition, make_job, make_jobset_obj, rjob

# ----------------------------------------------------------------------------- inputs

FAIL = ("BackoffLimitExceeded", "Job has reached the specified backoff limit", T0)
TWO = [rjob("leader"), rjob("workers", 2)]
CLAIM_SPEC: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
RETENTION_FINALIZER = "jobset.x-k8s.io/volume-retention"
REPLACE_LOST = "jobset.sigs.k8s.io/replace-lost-claims"
# The uid of the claim data-js this JobSet created, and of another object of that name later.
CLAIM_UID = "3f9c1a27-0b1e-4c8a-9d2f-6e5b4a3c2d1e"
OTHER_UID = "77ae0c42-5d3b-4f1a-8e2c-1b0a9f8e7d6c"
# status.volumes.claimUIDs remembering data-js (by the first group of its uid).
RECORD = [{"template": "data", "uids": "3f9c1a27"}]


def _mounting(name: str, replicas: int, *claims: str) -> Obj:
    """A replicated job whose main container mounts the claim templates ``claims``."""
    mounts = [{"name": c, "mountPath": f"/{c}"} for c in claims]
    return rjob(
        name,
        replicas,
        pod_spec={"containers": [{"name": "main", "image": "busybox", "volumeMounts": mounts}]},
    )


# leader mounts nothing; each worker mounts the JobSet-scope claim "data-js".
VOLUME_RJOBS = [rjob("leader"), _mounting("workers", 2, "data")]
# The workers share the ReadWriteOnce claim data-js: the controller makes their Jobs with the
# label that keeps their pods on one node (volumes.singlenode).
COLOCATED: Obj = {"pod_labels": {SINGLE_NODE_LABEL: "data-js"}}
# MultiAttachRisk of a JobSet whose leader and workers share data-js at once, written also while
# False: kept on one node (no storage classes given: taken to attach).
COLOCATED_CONDITION = ("MultiAttachRisk", "False", "Colocated")
COLOCATED_MESSAGE = (
    "the pods that share ReadWriteOnce claims are kept on one node (a required pod affinity of "
    "the Jobs this controller creates): claim data-js: the storage classes are not known: "
    'assumed to attach. jobset.sigs.k8s.io/colocate-claims: "false" on the JobSet turns it off'
)
VOLUME_SPEC: Obj = {
    "volumeClaimPolicies": [
        {"templates": [{"metadata": {"name": "data"}, "spec": CLAIM_SPEC}]},
    ]
}


def _claim(phase: str, uid: str = CLAIM_UID) -> Obj:
    """The claim ``data-js`` as this controller created it for JobSet js (uid-js)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "data-js",
            "namespace": "default",
            "uid": uid,
            "labels": {
                api.JOBSET_NAME: "js",
                "jobset.sigs.k8s.io/volume-template": "data",
                "jobset.sigs.k8s.io/volume-scope": "JobSet",
            },
            "annotations": {api.JOBSET_UID: "uid-js"},
            "ownerReferences": [
                {
                    "apiVersion": api.API_VERSION,
                    "kind": api.KIND,
                    "name": "js",
                    "uid": "uid-js",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": copy.deepcopy(CLAIM_SPEC),
        "status": {"phase": phase},
    }


def _suspended_status(
    ready: str, snapshots: str | None = None, *, suspended: bool = True, recorded: bool = True
) -> Obj:
    """The status summary of ``_preempted``: VolumesReady's reason, VolumeSnapshotsReady's
    (written True first, so shown while True), MultiAttachRisk (leader and workers share data-js
    at once: kept on one node), Suspended, data-js Bound unless said otherwise."""
    conditions = [("VolumesReady", "True" if ready == "ClaimsBound" else "False", ready)]
    if snapshots is not None:
        conditions.append(("VolumeSnapshotsReady", "True", snapshots))
    conditions.append(COLOCATED_CONDITION)
    if suspended:
        conditions.append(("Suspended", "True", "SuspendedJobs"))
    out: Obj = {
        "restarts": 0,
        "conditions": conditions,
        "replicatedJobs": {"leader": {"suspended": 1}, "workers": {"suspended": 2}},
        "volumes": [{"name": "data", "scope": "JobSet", "claimName": "data-js", "desired": 1,
                     "existing": 1, "bound": 1}],
    }  # fmt: skip
    if recorded:
        out["claimUIDs"] = RECORD
    return out


# Pod scope (built past its refusal: ``Case.pod_scope``): 2 worker Jobs of 3 completion indexes,
# one pod at a time, each pod mounting its own claim of template "ckpt".
POD_RJOBS = [
    rjob(
        "workers",
        2,
        parallelism=1,
        completions=3,
        pod_spec={"containers": [{"name": "main", "image": "busybox",
                                  "volumeMounts": [{"name": "ckpt", "mountPath": "/ckpt"}]}]},
    )
]  # fmt: skip
POD_SPEC: Obj = {
    "volumeClaimPolicies": [
        {"templates": [{"metadata": {"name": "ckpt"}, "spec": CLAIM_SPEC}], "scope": "Pod"},
    ]
}
POD_INDEXES = [(j, p) for j in range(2) for p in range(3)]
POD_CLAIMS = [f"ckpt-js-workers-{j}-{p}" for j, p in POD_INDEXES]


def _pod_claim(job: int, pod: int) -> Obj:
    """The Pod-scope claim of pod ``pod`` of Job workers-``job``, as this controller made it; its
    uid prefix is ``<job><pod>000000``."""
    obj = _claim("Bound", f"{job}{pod}000000-0000-4000-8000-000000000000")
    obj["metadata"]["name"] = f"ckpt-js-workers-{job}-{pod}"
    obj["metadata"]["labels"].update({
        "jobset.sigs.k8s.io/volume-template": "ckpt",
        "jobset.sigs.k8s.io/volume-scope": "Pod",
        api.REPLICATED_JOB_NAME: "workers",
        api.JOB_INDEX: str(job),
        "jobset.sigs.k8s.io/pod-index": str(pod),
    })  # fmt: skip
    return obj


def _pod_record(*missing: tuple[int, int]) -> list[Obj]:
    """``status.volumes.claimUIDs`` remembering the six Pod-scope claims but ``missing``."""
    uids = ";".join(
        ",".join("" if (j, p) in missing else f"{j}{p}000000" for p in range(3)) for j in range(2)
    )
    return [{"template": "ckpt", "replicatedJob": "workers", "scope": "Pod", "uids": uids}]


def _with_pods(
    *, missing: tuple[tuple[int, int], ...] = (), gone: tuple[int, int] | None = None, **kw: Any
) -> Case:
    """The Pod-scope JobSet with its six claims Bound but ``gone``, remembered but ``missing``."""
    return Case(
        jobset={"replicated_jobs": POD_RJOBS, "spec": POD_SPEC},
        stored={"volumes": {"claimUIDs": _pod_record(*missing)}},
        finalizers=(RETENTION_FINALIZER,),
        claims=tuple(_pod_claim(j, p) for j, p in POD_INDEXES if (j, p) != gone),
        pod_scope=True,
        **kw,
    )


def _counts(**per_rjob: dict[str, int]) -> list[Obj]:
    """Stored ``replicatedJobsStatus``: every counter, zero unless given."""
    zero = {"ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0}
    return [{"name": name, **zero, **counters} for name, counters in per_rjob.items()]


def _terminating(claim: Obj) -> Obj:
    return {**claim, "metadata": {**claim["metadata"], "deletionTimestamp": "2025-01-01T12:00:00Z"}}


# retentionPolicy.whenSuspended: Snapshot (restored from the newest snapshot): data-js goes
# through a snapshot while the JobSet is suspended, and comes back from it when it is resumed.
SUSPEND_SPEC: Obj = {
    "volumeClaimPolicies": [
        {
            "templates": [{"metadata": {"name": "data"}, "spec": CLAIM_SPEC}],
            "retentionPolicy": {"whenSuspended": "Snapshot"},
            "restorePolicy": {"source": "NewestSnapshot"},
        }
    ]
}
# Jobs the Job controller has suspended, no pod left (the workers made by this controller, with
# the label that keeps the pods sharing data-js on one node).
STOPPED: dict[str, Any] = {"suspended": True, "suspended_condition": True}
STOPPED_JOBS = (
    ("leader", 0, STOPPED),
    ("workers", 0, {**STOPPED, **COLOCATED}),
    ("workers", 1, {**STOPPED, **COLOCATED}),
)
STOPPED_STATUS = {
    "replicatedJobsStatus": _counts(leader={"suspended": 1}, workers={"suspended": 2})
}
# The release that started at T0, holding data-js; the snapshot it takes of it.
RELEASE = {"template": "data", "uids": "3f9c1a27", "started": started_at(T0)}
TAKEN = named_snapshot(
    "data-js", CLAIM_UID, occasion(SuspensionRelease("data", ("3f9c1a27",), started_at(T0)))
)


def _taken(ready: bool) -> Obj:
    """The release's VolumeSnapshot of data-js, as this controller made it."""
    return {
        "metadata": {
            "name": TAKEN,
            "namespace": "default",
            "labels": {api.JOBSET_NAME: "js", "jobset.sigs.k8s.io/volume-template": "data"},
            "annotations": {SNAPSHOT_OF_UID_ANNOTATION: CLAIM_UID},
            "creationTimestamp": "2025-01-01T12:00:01Z",
        },
        "spec": {"source": {"persistentVolumeClaimName": "data-js"}},
        "status": {"readyToUse": ready},
    }


def _preempted(
    *claims: Obj,
    jobs: tuple[tuple[str, int, dict[str, Any]], ...] = STOPPED_JOBS,
    suspend: bool = True,
    releases: list[Obj] | None = None,
    recorded: bool = True,
    snapshots: tuple[Obj, ...] = (),
    record: list[Obj] | None = None,
) -> Case:
    """JobSet js under ``SUSPEND_SPEC`` (suspended unless ``suspend`` is False), its Jobs
    ``jobs``, ``claims`` observed, data-js remembered when ``recorded`` (or ``record``),
    ``releases`` stored."""
    volumes: Obj = {}
    if recorded or record:
        volumes["claimUIDs"] = record or RECORD
    if releases:
        volumes["suspensionReleases"] = releases
    return Case(
        jobset={"replicated_jobs": VOLUME_RJOBS, "spec": SUSPEND_SPEC, "suspend": suspend},
        stored={**STOPPED_STATUS, **({"volumes": volumes} if volumes else {})},
        finalizers=(RETENTION_FINALIZER,),
        jobs=jobs,
        claims=claims,
        snapshots=snapshots,
    )


def _with_data(
    *claims: Obj, recorded: bool = True, leader: bool = True, accepting: str = ""
) -> Case:
    """JobSet js mounting ``data-js`` in its workers (none created yet), its retention finalizer
    added, the leader running unless ``leader`` is False, ``claims`` observed, the stored status
    remembering data-js (``RECORD``) when ``recorded``, the loss ``accepting`` accepted."""
    stored: Obj = {
        "replicatedJobsStatus": _counts(leader={"active": 1} if leader else {}, workers={})
    }
    if recorded:
        stored["volumes"] = {"claimUIDs": RECORD}
    return Case(
        jobset={"replicated_jobs": VOLUME_RJOBS, "spec": VOLUME_SPEC},
        stored=stored,
        annotations={REPLACE_LOST: accepting} if accepting else {},
        finalizers=(RETENTION_FINALIZER,),
        jobs=(ALL_ACTIVE[0],) if leader else (),
        claims=claims,
    )


def _data_status(reason: str, *, recorded: bool = True, **counts: int) -> Obj:
    """The status summary of ``_with_data``: VolumesReady (True when bound), MultiAttachRisk
    (kept on one node), data-js's ``counts``, and the record of data-js unless the pass forgot
    it."""
    ready = "True" if reason == "ClaimsBound" else "False"
    out: Obj = {
        "restarts": 0,
        "conditions": [("VolumesReady", ready, reason), COLOCATED_CONDITION],
        "replicatedJobs": {"leader": {"active": 1}, "workers": {}},
        "volumes": [
            {"name": "data", "scope": "JobSet", "claimName": "data-js", "desired": 1, **counts}
        ],
    }
    if recorded:
        out["claimUIDs"] = RECORD
    return out


# The ClaimsLost message for data-js (``why``: how it was lost) with the command accepting it.
LOST_DATA_JS = (
    "1 of 1 claims this JobSet had are lost, with their data: data-js ({why}). The Jobs that "
    "mount them wait; they are not replaced by empty claims unless you accept it: kubectl "
    f"annotate jobset js -n default --overwrite {REPLACE_LOST}=data-js@3f9c1a27"
)


LOST_POD_CLAIM = (
    "1 of 6 claims this JobSet had are lost, with their data: ckpt-js-workers-1-1 (deleted). The "
    "Jobs that mount them wait; they are not replaced by empty claims unless you accept it: "
    f"kubectl annotate jobset js -n default --overwrite {REPLACE_LOST}=ckpt-js-workers-1-1@11000000"
)


NO_POLICY = Blocked(
    "PodScopePolicyMissing",
    "Pod-scope volumes need the MutatingAdmissionPolicy 'x', which is not installed",
)


UNRESOLVED = Blocked("PodScopePodsUnresolved", "1 pod(s) of this JobSet were admitted without")


def _ours(kind: str, reason: str, message: str, status: str = "True", generation: int = 1) -> Obj:
    """A condition as this controller writes it (with observedGeneration)."""
    return {
        **condition(kind, status, reason=reason, message=message),
        "observedGeneration": generation,
    }


SERVICE: Obj = {"metadata": {"name": "js", "namespace": "default"}}


@dataclass(frozen=True)
class Case:
    """One observed state. ``jobset``: keywords of ``make_jobset_obj``; ``stored``: more stored
    status fields; ``jobs``: (replicated job, index, ``make_job`` keywords)."""

    jobset: dict[str, Any] = field(default_factory=dict)
    stored: dict[str, Any] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    finalizers: tuple[str, ...] = ()
    jobs: tuple[tuple[str, int, dict[str, Any]], ...] = ()
    service: bool = True
    claims: tuple[Obj, ...] = ()
    now: datetime.datetime = T0
    # Build the volume model before deciding (the Pod-scope rows, whose claims it lists).
    pod_scope: bool = False
    # Why Pod-scope pods cannot get their claims now (``volumes.admission``), if so.
    pod_scope_blocked: Blocked | None = None
    # The controller's VolumeSnapshots of the JobSet's claims; None: the API is not served.
    snapshots: tuple[Obj, ...] | None = None


def _run(case: Case, view: bool = False) -> Plan:
    """The plan for ``case``; ``view``: with the Jobs as the Job informer keeps them
    (``children.job_view``) rather than whole."""
    raw = make_jobset_obj(**case.jobset)
    raw["status"].update(copy.deepcopy(case.stored))
    if case.finalizers:
        raw["metadata"]["finalizers"] = list(case.finalizers)
    if case.annotations:
        raw["metadata"]["annotations"] = dict(case.annotations)
    jobset = model.parse(raw)
    jobs = [make_job(jobset, name, index, **kw) for name, index, kw in case.jobs]
    if view:
        assert all(_pod_spec(job).get("containers") for job in jobs)  # something to drop
        jobs = [children.job_view(copy.deepcopy(job)) for job in jobs]
        assert not any(_pod_spec(job).get("containers") for job in jobs)
    claims = claim_views(case.claims)
    found = volumes.model(jobset) if case.pod_scope else None
    taken = None
    if case.snapshots is not None:
        taken = volume_snapshots.snapshots(SnapshotView.of(s) for s in case.snapshots)
    return decide(
        jobset,
        job_views(jobs),
        SERVICE if case.service else None,
        case.now,
        claims=claims or None,
        model=found,
        snapshots=taken,
        pod_scope_blocked=case.pod_scope_blocked,
    )


def _pod_spec(job: Obj) -> Obj:
    spec: Obj = job["spec"]["template"]["spec"]
    return spec


# ----------------------------------------------------------------------------- the summary


def _status(status: Obj) -> Obj:
    out: Obj = {"restarts": status.get("restarts", 0)}
    if status.get("restartsCountTowardsMax"):
        out["restartsCountTowardsMax"] = status["restartsCountTowardsMax"]
    if status.get("terminalState"):
        out["terminalState"] = status["terminalState"]
    out["conditions"] = [(c["type"], c["status"], c["reason"]) for c in status["conditions"]]
    out["replicatedJobs"] = {
        r["name"]: {k: v for k, v in r.items() if k != "name" and v}
        for r in status.get("replicatedJobsStatus") or []
    }
    if "volumes" in status:
        out["volumes"] = [{k: v for k, v in t.items() if v} for t in status["volumes"]["templates"]]
        if "claimUIDs" in status["volumes"]:
            out["claimUIDs"] = status["volumes"]["claimUIDs"]
        if "suspensionReleases" in status["volumes"]:
            out["suspensionReleases"] = status["volumes"]["suspensionReleases"]
    return out


def _mounted(job: Obj) -> list[str]:
    pod = job["spec"]["template"]["spec"]
    return sorted(
        v["persistentVolumeClaim"]["claimName"]
        for v in pod.get("volumes") or []
        if "persistentVolumeClaim" in v
    )


def _summary(plan: Plan) -> Obj:
    """The plan, with only what it does."""
    out: Obj = {}
    if plan.create_jobs:
        out["create"] = [
            (
                j["metadata"]["name"],
                int(j["metadata"]["labels"][api.RESTART_ATTEMPT]),
                "suspended" if j["spec"]["suspend"] else "running",
            )
            for j in plan.create_jobs
        ]
        mounts = {j["metadata"]["name"]: _mounted(j) for j in plan.create_jobs if _mounted(j)}
        if mounts:
            out["mounts"] = mounts
        # Pod templates selected for the admission policy that resolves Pod-scope placeholders.
        labelled = [
            j["metadata"]["name"]
            for j in plan.create_jobs
            if (j["spec"]["template"].get("metadata") or {}).get("labels", {}).get(POD_SCOPE_LABEL)
            == "true"
        ]
        if labelled:
            out["pod_scope_label"] = labelled
    if plan.create_service is not None:
        out["service"] = plan.create_service["metadata"]["name"]
    if plan.delete_jobs:
        out["delete"] = sorted(plan.delete_jobs)
    if plan.clear_start_time:
        out["clear_start_time"] = list(plan.clear_start_time)
    if plan.patch_jobs:
        out["patch"] = dict(plan.patch_jobs)
    if plan.status is not None:
        out["status"] = _status(plan.status.to_dict())
    if plan.events:
        out["events"] = [(e.type, e.reason, e.message) for e in plan.events]
    if plan.volume is not None and plan.volume.writes:
        v = plan.volume
        claims: Obj = {}
        if v.add_finalizer:
            claims["add_finalizer"] = True
        if v.create:
            claims["create"] = [c.name for c in v.create]
        if v.patch:
            claims["patch"] = [p.name for p in v.patch]
        if v.deleted:
            claims["delete"] = list(v.deleted)
        if v.restore:
            claims["restore"] = dict(v.restore)
        if v.create_snapshots:
            claims["create_snapshots"] = [b["metadata"]["name"] for b in v.create_snapshots]
        if v.remove_finalizer:
            claims["remove_finalizer"] = True
        out["claims"] = claims
    if plan.delete_jobset:
        out["delete_jobset"] = True
    if plan.requeue_after is not None:
        out["requeue_after"] = plan.requeue_after
    if plan.completed:
        out["completed"] = True
    if plan.failed:
        out["failed"] = True
    out["writes"] = plan.writes
    return out


# ----------------------------------------------------------------------------- the table

RUNNING = {"active": 1}
SUSPENDED_JOB = {"suspended": True}
ALL_ACTIVE = (("leader", 0, RUNNING), ("workers", 0, RUNNING), ("workers", 1, RUNNING))
ALL_ACTIVE_STATUS = {"replicatedJobsStatus": _counts(leader={"active": 1}, workers={"active": 2})}
ALL_COMPLETE = tuple((n, i, {"complete": True}) for n, i, _ in ALL_ACTIVE)
COMPLETED = _ours(api.COMPLETED, api.REASON_ALL_JOBS_COMPLETED, api.MESSAGE_ALL_JOBS_COMPLETED)
SUSPENDED = _ours(api.SUSPENDED, api.REASON_SUSPENDED, api.MESSAGE_SUSPENDED)
FIRST_FAILED = " (first failed job: js-workers-1)"
UNSTARTED: dict[str, Obj] = {"leader": {}, "workers": {}}
READY = tuple((n, i, {"active": 1, "ready": 1}) for n, i, _ in ALL_ACTIVE)
READY_SUMMARY = {"leader": {"active": 1, "ready": 1}, "workers": {"active": 2, "ready": 2}}
READY_STATUS = {
    "replicatedJobsStatus": _counts(
        leader=READY_SUMMARY["leader"], workers=READY_SUMMARY["workers"]
    )
}
RESTARTING = _ours(
    api.RESTARTING,
    "DefaultFailurePolicy",
    "applying RestartJobSet failure policy action" + FIRST_FAILED,
)
RESTART_ENDED = _ours(api.RESTARTING, api.REASON_JOBS_READY, api.MESSAGE_JOBS_READY, "False")
IGNORE_MAX_MESSAGE = "applying RestartJobSetAndIgnoreMaxRestarts failure policy action"

ROWS = [
    # --- creating
    pytest.param(
        Case(service=False),
        {
            "create": [("js-leader-0", 0, "running"), ("js-workers-0", 0, "running"),
                       ("js-workers-1", 0, "running")],
            "service": "js",
            "status": {"restarts": 0, "conditions": [], "replicatedJobs": UNSTARTED},
            "writes": 5,
        },
        id="new-jobset-creates-jobs-service-status",
    ),
    # Upstream creates a suspended JobSet's Jobs, suspended (Kueue then resumes the JobSet).
    pytest.param(
        Case(jobset={"suspend": True}),
        {
            "create": [("js-leader-0", 0, "suspended"), ("js-workers-0", 0, "suspended"),
                       ("js-workers-1", 0, "suspended")],
            "status": {"restarts": 0, "conditions": [("Suspended", "True", "SuspendedJobs")],
                       "replicatedJobs": UNSTARTED},
            "events": [("Normal", "SuspendedJobs", "jobset is suspended")],
            "writes": 4,
        },
        id="new-suspended-jobs-created-suspended",
    ),
    pytest.param(
        Case(jobset={"suspend": True}, jobs=ALL_ACTIVE, stored=ALL_ACTIVE_STATUS),
        {
            "patch": {"js-leader-0": {"spec": {"suspend": True}},
                      "js-workers-0": {"spec": {"suspend": True}},
                      "js-workers-1": {"spec": {"suspend": True}}},
            "status": {"restarts": 0, "conditions": [("Suspended", "True", "SuspendedJobs")],
                       "replicatedJobs": {"leader": {"active": 1}, "workers": {"active": 2}}},
            "events": [("Normal", "SuspendedJobs", "jobset is suspended")],
            "writes": 4,
        },
        id="suspend-running-no-creates",
    ),
    pytest.param(
        Case(
            jobset={"conditions": [SUSPENDED]},
            jobs=tuple((n, i, {"suspended": True}) for n, i, _ in ALL_ACTIVE),
            stored={"replicatedJobsStatus": _counts(leader={"suspended": 1},
                                                    workers={"suspended": 2})},
        ),
        {
            "patch": {"js-leader-0": {"spec": {"suspend": False}},
                      "js-workers-0": {"spec": {"suspend": False}},
                      "js-workers-1": {"spec": {"suspend": False}}},
            "status": {"restarts": 0, "conditions": [("Suspended", "False", "ResumeJobs")],
                       "replicatedJobs": {"leader": {"suspended": 1},
                                          "workers": {"suspended": 2}}},
            "events": [("Normal", "ResumeJobs", "jobset is resumed")],
            "writes": 4,
        },
        id="resume",
    ),
    pytest.param(
        Case(jobset={"replicated_jobs": [rjob("leader"),
                                         rjob("workers", 2, depends_on=[("leader", "Ready")])]}),
        {
            "create": [("js-leader-0", 0, "running")],
            "status": {"restarts": 0, "conditions": [], "replicatedJobs": UNSTARTED},
            "writes": 2,
        },
        id="depends-on-not-met-only-first",
    ),
    pytest.param(
        Case(
            jobset={"replicated_jobs": [rjob("leader"),
                                        rjob("workers", 2, depends_on=[("leader", "Ready")])]},
            jobs=(("leader", 0, {"active": 1, "ready": 1}),),
            stored={"replicatedJobsStatus": _counts(leader={"active": 1}, workers={})},
        ),
        {
            "create": [("js-workers-0", 0, "running"), ("js-workers-1", 0, "running")],
            "status": {"restarts": 0, "conditions": [],
                       "replicatedJobs": {"leader": {"active": 1, "ready": 1}, "workers": {}}},
            "writes": 3,
        },
        id="depends-on-met-rest-created",
    ),
    pytest.param(
        Case(jobset={"startup_in_order": True}),
        {
            "create": [("js-leader-0", 0, "running")],
            "status": {"restarts": 0,
                       "conditions": [("StartupPolicyInProgress", "True",
                                       "InOrderStartupPolicyInProgress")],
                       "replicatedJobs": UNSTARTED},
            "events": [("Normal", "InOrderStartupPolicyInProgress",
                        "in order startup policy is in progress")],
            "writes": 2,
        },
        id="in-order-first-replicated-job-only",
    ),
    # A lost Job is recreated (steady state otherwise).
    pytest.param(
        Case(jobs=ALL_ACTIVE[:2],
             stored={"replicatedJobsStatus": _counts(leader={"active": 1},
                                                     workers={"active": 1})}),
        {"create": [("js-workers-1", 0, "running")], "writes": 1},
        id="missing-job-recreated",
    ),
    # --- failing and restarting
    pytest.param(
        Case(
            jobset={"failure_policy": {"maxRestarts": 2}},
            jobs=(ALL_ACTIVE[0], ALL_ACTIVE[1], ("workers", 1, {"failed": FAIL})),
            stored={"replicatedJobsStatus": _counts(leader={"active": 1},
                                                    workers={"active": 2})},
        ),
        {
            "status": {"restarts": 1, "restartsCountTowardsMax": 1,
                       "conditions": [("RestartingJobSet", "True", "DefaultFailurePolicy")],
                       "replicatedJobs": {"leader": {"active": 1},
                                          "workers": {"active": 1, "failed": 1}}},
            "events": [("Warning", "DefaultFailurePolicy",
                        "applying RestartJobSet failure policy action" + FIRST_FAILED),
                       ("Warning", "RestartJobSetFailurePolicyAction",
                        "applying RestartJobSet failure policy action" + FIRST_FAILED)],
            "writes": 1,
        },
        id="failed-job-restarts-counter-bumped-first",
    ),
    # A rule's restart names the rule; a restart that does not count says so in the message.
    pytest.param(
        Case(
            jobset={"failure_policy": {"maxRestarts": 0, "rules": [
                {"name": "evicted", "action": "RestartJobSetAndIgnoreMaxRestarts"}]}},
            jobs=(ALL_ACTIVE[0], ALL_ACTIVE[1], ("workers", 1, {"failed": FAIL})),
            stored={"replicatedJobsStatus": _counts(leader={"active": 1},
                                                    workers={"active": 2})},
        ),
        {
            "status": {"restarts": 1,
                       "conditions": [("RestartingJobSet", "True", "FailurePolicy_evicted")],
                       "replicatedJobs": {"leader": {"active": 1},
                                          "workers": {"active": 1, "failed": 1}}},
            "events": [("Warning", "FailurePolicy_evicted", IGNORE_MAX_MESSAGE + FIRST_FAILED),
                       ("Warning", "RestartJobSetAndIgnoreMaxRestartsFailurePolicyAction",
                        IGNORE_MAX_MESSAGE + FIRST_FAILED)],
            "writes": 1,
        },
        id="rule-restart-names-the-rule",
    ),
    # The new attempt's Jobs run but are not all ready: still restarting, nothing to write.
    pytest.param(
        Case(
            jobset={"failure_policy": {"maxRestarts": 2}, "restarts": 1,
                    "restarts_count_towards_max": 1, "conditions": [RESTARTING]},
            jobs=(READY[0], READY[1], ALL_ACTIVE[2]),
            stored={"replicatedJobsStatus": _counts(leader={"active": 1, "ready": 1},
                                                    workers={"active": 2, "ready": 1})},
        ),
        {"writes": 0},
        id="restarting-until-all-ready",
    ),
    pytest.param(
        Case(
            jobset={"failure_policy": {"maxRestarts": 2}, "restarts": 1,
                    "restarts_count_towards_max": 1, "conditions": [RESTARTING]},
            jobs=READY, stored=READY_STATUS,
        ),
        {
            "status": {"restarts": 1, "restartsCountTowardsMax": 1,
                       "conditions": [("RestartingJobSet", "False", "JobsReady")],
                       "replicatedJobs": READY_SUMMARY},
            "events": [("Normal", "JobsReady", "all jobs are ready")],
            "writes": 1,
        },
        id="new-attempt-ready-restart-ends",
    ),
    pytest.param(
        Case(
            jobset={"failure_policy": {"maxRestarts": 2}, "restarts": 1,
                    "restarts_count_towards_max": 1, "conditions": [RESTART_ENDED]},
            jobs=READY, stored=READY_STATUS,
        ),
        {"writes": 0},
        id="steady-restart-ended",
    ),
    # Upstream adds RestartingJobSet only by a restart: a JobSet that never restarted gets none.
    pytest.param(
        Case(jobset={"failure_policy": {"maxRestarts": 2}}, jobs=READY, stored=READY_STATUS),
        {"writes": 0},
        id="never-restarted-no-condition",
    ),
    # Jobs ready but the JobSet suspended: the restart ends as suspended, not as ready.
    pytest.param(
        Case(
            jobset={"failure_policy": {"maxRestarts": 2}, "restarts": 1, "suspend": True,
                    "restarts_count_towards_max": 1, "conditions": [RESTARTING]},
            jobs=tuple((n, i, {**kw, "suspended": True}) for n, i, kw in READY),
            stored={"replicatedJobsStatus": _counts(leader={"active": 1, "ready": 1,
                                                            "suspended": 1},
                                                    workers={"active": 2, "ready": 2,
                                                             "suspended": 2})},
        ),
        {
            "status": {"restarts": 1, "restartsCountTowardsMax": 1,
                       "conditions": [("RestartingJobSet", "False", "JobSetSuspended"),
                                      ("Suspended", "True", "SuspendedJobs")],
                       "replicatedJobs": {"leader": {"active": 1, "ready": 1, "suspended": 1},
                                          "workers": {"active": 2, "ready": 2,
                                                      "suspended": 2}}},
            "events": [("Normal", "SuspendedJobs", "jobset is suspended"),
                       ("Normal", "JobSetSuspended", "jobset is suspended")],
            "writes": 1,
        },
        id="suspended-while-restarting",
    ),
    pytest.param(
        Case(
            jobset={"failure_policy": {"maxRestarts": 1}, "restarts": 1,
                    "restarts_count_towards_max": 1, "conditions": [RESTARTING]},
            jobs=(ALL_ACTIVE[0], ALL_ACTIVE[1], ("workers", 1, {"failed": FAIL})),
            stored={"replicatedJobsStatus": _counts(leader={"active": 1},
                                                    workers={"active": 2})},
        ),
        {
            "status": {"restarts": 1, "restartsCountTowardsMax": 1, "terminalState": "Failed",
                       "conditions": [("RestartingJobSet", "False", "JobSetFailed"),
                                      ("Failed", "True", "ReachedMaxRestarts")],
                       "replicatedJobs": {"leader": {"active": 1},
                                          "workers": {"active": 1, "failed": 1}}},
            "events": [("Warning", "ReachedMaxRestarts",
                        "jobset failed due to reaching max number of restarts" + FIRST_FAILED),
                       ("Normal", "JobSetFailed", "jobset failed")],
            "failed": True,
            "writes": 1,
        },
        id="failed-while-restarting",
    ),
    # Succeeded Jobs count as ready (upstream checks readiness first, then success: both
    # Events, the condition ends as JobSetCompleted).
    pytest.param(
        Case(
            jobset={"failure_policy": {"maxRestarts": 1}, "restarts": 1,
                    "restarts_count_towards_max": 1, "conditions": [RESTARTING]},
            jobs=ALL_COMPLETE, stored=ALL_ACTIVE_STATUS,
        ),
        {
            "status": {"restarts": 1, "restartsCountTowardsMax": 1, "terminalState": "Completed",
                       "conditions": [("RestartingJobSet", "False", "JobSetCompleted"),
                                      ("Completed", "True", "AllJobsCompleted")],
                       "replicatedJobs": {"leader": {"succeeded": 1},
                                          "workers": {"succeeded": 2}}},
            "events": [("Normal", "JobsReady", "all jobs are ready"),
                       ("Normal", "AllJobsCompleted", "jobset completed successfully"),
                       ("Normal", "JobSetCompleted", "jobset completed successfully")],
            "completed": True,
            "writes": 1,
        },
        id="completed-while-restarting",
    ),
    # The next pass: the old attempt's Jobs go (foreground); the new ones take the same names,
    # so they are created only once the old ones are gone.
    pytest.param(
        Case(
            jobset={"failure_policy": {"maxRestarts": 2}, "restarts": 1,
                    "restarts_count_towards_max": 1},
            jobs=(("leader", 0, {"active": 1, "restart_attempt": 0}),
                  ("workers", 0, {"active": 1, "restart_attempt": 0}),
                  ("workers", 1, {"failed": FAIL, "restart_attempt": 0})),
            stored={"replicatedJobsStatus": _counts(leader={"active": 1},
                                                    workers={"active": 1, "failed": 1})},
        ),
        {
            "delete": ["js-leader-0", "js-workers-0", "js-workers-1"],
            "status": {"restarts": 1, "restartsCountTowardsMax": 1, "conditions": [],
                       "replicatedJobs": UNSTARTED},
            "writes": 4,
        },
        id="restart-deletes-old-attempt",
    ),
    pytest.param(
        Case(
            jobset={"failure_policy": {"maxRestarts": 2}, "restarts": 1,
                    "restarts_count_towards_max": 1},
            jobs=(("workers", 1, {"restart_attempt": 0, "deleting": True}),),
            stored={"replicatedJobsStatus": _counts(leader={}, workers={})},
        ),
        {"create": [("js-leader-0", 1, "running"), ("js-workers-0", 1, "running")],
         "writes": 2},
        id="recreate-creates-names-already-free",
    ),
    pytest.param(
        Case(
            jobset={"failure_policy": {"maxRestarts": 2, "restartStrategy": "BlockingRecreate"},
                    "restarts": 1, "restarts_count_towards_max": 1},
            jobs=(("workers", 1, {"restart_attempt": 0, "deleting": True}),),
            stored={"replicatedJobsStatus": _counts(leader={}, workers={})},
        ),
        {"writes": 0},
        id="blocking-recreate-waits-for-all-old-jobs",
    ),
    pytest.param(
        Case(
            jobset={"failure_policy": {"maxRestarts": 2}, "restarts": 1,
                    "restarts_count_towards_max": 1},
            stored={"replicatedJobsStatus": _counts(leader={}, workers={})},
        ),
        {"create": [("js-leader-0", 1, "running"), ("js-workers-0", 1, "running"),
                    ("js-workers-1", 1, "running")],
         "writes": 3},
        id="old-attempt-gone-new-attempt-created",
    ),
    pytest.param(
        Case(
            jobset={"failure_policy": {"maxRestarts": 1}, "restarts": 1,
                    "restarts_count_towards_max": 1},
            jobs=(ALL_ACTIVE[0], ALL_ACTIVE[1], ("workers", 1, {"failed": FAIL})),
            stored={"replicatedJobsStatus": _counts(leader={"active": 1},
                                                    workers={"active": 2})},
        ),
        {
            "status": {"restarts": 1, "restartsCountTowardsMax": 1, "terminalState": "Failed",
                       "conditions": [("Failed", "True", "ReachedMaxRestarts")],
                       "replicatedJobs": {"leader": {"active": 1},
                                          "workers": {"active": 1, "failed": 1}}},
            "events": [("Warning", "ReachedMaxRestarts",
                        "jobset failed due to reaching max number of restarts" + FIRST_FAILED)],
            "failed": True,
            "writes": 1,
        },
        id="max-restarts-reached-fails",
    ),
    pytest.param(
        Case(jobs=(ALL_ACTIVE[0], ALL_ACTIVE[1], ("workers", 1, {"failed": FAIL})),
             stored=ALL_ACTIVE_STATUS),
        {
            "status": {"restarts": 0, "terminalState": "Failed",
                       "conditions": [("Failed", "True", "FailedJobs")],
                       "replicatedJobs": {"leader": {"active": 1},
                                          "workers": {"active": 1, "failed": 1}}},
            "events": [("Warning", "FailedJobs",
                        "jobset failed due to one or more job failures" + FIRST_FAILED)],
            "failed": True,
            "writes": 1,
        },
        id="no-failure-policy-fails",
    ),
    # --- succeeding
    pytest.param(
        Case(jobset={"ttl": 60}, jobs=ALL_COMPLETE, stored=ALL_ACTIVE_STATUS),
        {
            "status": {"restarts": 0, "terminalState": "Completed",
                       "conditions": [("Completed", "True", "AllJobsCompleted")],
                       "replicatedJobs": {"leader": {"succeeded": 1},
                                          "workers": {"succeeded": 2}}},
            "events": [("Normal", "AllJobsCompleted", "jobset completed successfully")],
            "requeue_after": 60.0,
            "completed": True,
            "writes": 1,
        },
        id="all-succeeded-completes",
    ),
    # successPolicy Any on workers: one worker done completes the JobSet; the pass that decides
    # it deletes nothing...
    pytest.param(
        Case(
            jobset={"success_policy": {"operator": "Any", "targetReplicatedJobs": ["workers"]}},
            jobs=(ALL_ACTIVE[0], ("workers", 0, {"complete": True}), ALL_ACTIVE[2]),
            stored=ALL_ACTIVE_STATUS,
        ),
        {
            "status": {"restarts": 0, "terminalState": "Completed",
                       "conditions": [("Completed", "True", "AllJobsCompleted")],
                       "replicatedJobs": {"leader": {"active": 1},
                                          "workers": {"active": 1, "succeeded": 1}}},
            "events": [("Normal", "AllJobsCompleted", "jobset completed successfully")],
            "completed": True,
            "writes": 1,
        },
        id="success-policy-any-completes",
    ),
    # ... the next pass, with Completed stored, deletes the Jobs still running.
    pytest.param(
        Case(
            jobset={"success_policy": {"operator": "Any", "targetReplicatedJobs": ["workers"]},
                    "conditions": [COMPLETED], "terminal_state": "Completed"},
            jobs=(ALL_ACTIVE[0], ("workers", 0, {"complete": True}), ALL_ACTIVE[2]),
            stored={"replicatedJobsStatus": _counts(leader={"active": 1},
                                                    workers={"active": 1, "succeeded": 1})},
            now=at(5),
        ),
        {"delete": ["js-leader-0", "js-workers-1"], "writes": 2},
        id="completed-stored-deletes-unfinished-jobs",
    ),
    pytest.param(
        Case(jobset={"ttl": 60, "conditions": [COMPLETED], "terminal_state": "Completed"},
             jobs=ALL_COMPLETE, stored={"replicatedJobsStatus": _counts(
                 leader={"succeeded": 1}, workers={"succeeded": 2})}, now=at(10)),
        {"requeue_after": 50.0, "writes": 0},
        id="ttl-not-yet-requeue-for-the-rest",
    ),
    pytest.param(
        Case(jobset={"ttl": 60, "conditions": [COMPLETED], "terminal_state": "Completed"},
             jobs=ALL_COMPLETE, stored={"replicatedJobsStatus": _counts(
                 leader={"succeeded": 1}, workers={"succeeded": 2})}, now=at(60)),
        {"delete_jobset": True, "writes": 1},
        id="ttl-expired-deletes-jobset",
    ),
    # --- Pod scope (built past its refusal, as the controller will once it checks the policy)
    # One claim per completion index of every Job (completions 3, not parallelism 1), all
    # created before any Job; the status stays one count per template.
    pytest.param(
        Case(jobset={"replicated_jobs": POD_RJOBS, "spec": POD_SPEC}, pod_scope=True),
        {
            "status": {"restarts": 0, "conditions": [("VolumesReady", "False", "ClaimsPending")],
                       "replicatedJobs": {"workers": {}},
                       "volumes": [{"name": "ckpt", "scope": "Pod", "desired": 6, "existing": 6,
                                    "pending": 6}]},
            "claims": {"add_finalizer": True, "create": POD_CLAIMS},
            "writes": 8,
        },
        id="pod-scope-claims-per-index-created-jobs-wait",
    ),
    # Five of six recorded: the Job whose three claims are all recorded is created, the other
    # waits for its last pod's claim (this pass records it). The template mounts the placeholder
    # and carries the label that has the admission policy resolve it per pod.
    pytest.param(
        _with_pods(missing=((1, 2),)),
        {
            "create": [("js-workers-0", 0, "running")],
            "mounts": {"js-workers-0": ["ckpt-js-workers-0-POD-INDEX"]},
            "pod_scope_label": ["js-workers-0"],
            "status": {"restarts": 0, "conditions": [("VolumesReady", "True", "ClaimsBound")],
                       "replicatedJobs": {"workers": {}},
                       "volumes": [{"name": "ckpt", "scope": "Pod", "desired": 6, "existing": 6,
                                    "bound": 6}],
                       "claimUIDs": _pod_record()},
            "writes": 2,
        },
        id="pod-scope-job-waits-for-all-its-pods-claims",
    ),
    pytest.param(
        _with_pods(),
        {
            "create": [("js-workers-0", 0, "running"), ("js-workers-1", 0, "running")],
            "mounts": {"js-workers-0": ["ckpt-js-workers-0-POD-INDEX"],
                       "js-workers-1": ["ckpt-js-workers-1-POD-INDEX"]},
            "pod_scope_label": ["js-workers-0", "js-workers-1"],
            "status": {"restarts": 0, "conditions": [("VolumesReady", "True", "ClaimsBound")],
                       "replicatedJobs": {"workers": {}},
                       "volumes": [{"name": "ckpt", "scope": "Pod", "desired": 6, "existing": 6,
                                    "bound": 6}],
                       "claimUIDs": _pod_record()},
            "writes": 3,
        },
        id="pod-scope-all-recorded-jobs-mount-the-placeholder",
    ),
    # One pod's claim is lost: its Job is suspended (a retried pod of that index would wait for
    # any claim of the name), the other Job runs on.
    pytest.param(
        _with_pods(gone=(1, 1), jobs=(("workers", 0, RUNNING), ("workers", 1, RUNNING))),
        {
            "patch": {"js-workers-1": {"spec": {"suspend": True}}},
            "status": {"restarts": 0, "conditions": [("VolumesReady", "False", "ClaimsLost")],
                       "replicatedJobs": {"workers": {"active": 2}},
                       "volumes": [{"name": "ckpt", "scope": "Pod", "desired": 6, "existing": 5,
                                    "bound": 5, "lost": 1}],
                       "claimUIDs": _pod_record()},
            "events": [("Warning", "ClaimsLost", LOST_POD_CLAIM)],
            "writes": 2,
        },
        id="pod-scope-lost-claim-suspends-its-job-only",
    ),
    # The admission policy is missing: nothing is created (no claim, no Job), the finalizer that
    # guards retention still is; VolumesReady says why, with a Warning.
    pytest.param(
        Case(jobset={"replicated_jobs": POD_RJOBS, "spec": POD_SPEC}, pod_scope=True,
             pod_scope_blocked=NO_POLICY),
        {
            "status": {"restarts": 0,
                       "conditions": [("VolumesReady", "False", "PodScopePolicyMissing")],
                       "replicatedJobs": {"workers": {}},
                       "volumes": [{"name": "ckpt", "scope": "Pod", "desired": 6}]},
            "events": [("Warning", "PodScopePolicyMissing", NO_POLICY.message)],
            "claims": {"add_finalizer": True},
            "writes": 2,
        },
        id="pod-scope-policy-missing-creates-nothing",
    ),
    # Every claim there and recorded: still no Job (its pods would wait on the placeholder).
    pytest.param(
        _with_pods(pod_scope_blocked=NO_POLICY),
        {
            "status": {"restarts": 0,
                       "conditions": [("VolumesReady", "False", "PodScopePolicyMissing")],
                       "replicatedJobs": {"workers": {}},
                       "volumes": [{"name": "ckpt", "scope": "Pod", "desired": 6, "existing": 6,
                                    "bound": 6}],
                       "claimUIDs": _pod_record()},
            "events": [("Warning", "PodScopePolicyMissing", NO_POLICY.message)],
            "writes": 1,
        },
        id="pod-scope-policy-missing-no-job-even-with-claims",
    ),
    # Jobs created suspended are not resumed while it is missing; running ones are left alone.
    pytest.param(
        _with_pods(pod_scope_blocked=NO_POLICY,
                   jobs=(("workers", 0, SUSPENDED_JOB), ("workers", 1, RUNNING))),
        {
            "status": {"restarts": 0,
                       "conditions": [("VolumesReady", "False", "PodScopePolicyMissing")],
                       "replicatedJobs": {"workers": {"active": 1, "suspended": 1}},
                       "volumes": [{"name": "ckpt", "scope": "Pod", "desired": 6, "existing": 6,
                                    "bound": 6}],
                       "claimUIDs": _pod_record()},
            "events": [("Warning", "PodScopePolicyMissing", NO_POLICY.message)],
            "writes": 1,
        },
        id="pod-scope-policy-missing-no-resume",
    ),
    # Pods admitted without the rewrite: the same gate, under its own reason.
    pytest.param(
        _with_pods(pod_scope_blocked=UNRESOLVED, jobs=(("workers", 0, RUNNING),)),
        {
            "status": {"restarts": 0,
                       "conditions": [("VolumesReady", "False", "PodScopePodsUnresolved")],
                       "replicatedJobs": {"workers": {"active": 1}},
                       "volumes": [{"name": "ckpt", "scope": "Pod", "desired": 6, "existing": 6,
                                    "bound": 6}],
                       "claimUIDs": _pod_record()},
            "events": [("Warning", "PodScopePodsUnresolved", UNRESOLVED.message)],
            "writes": 1,
        },
        id="pod-scope-pods-unresolved-nothing-more-created",
    ),
    # --- suspended with retentionPolicy.whenSuspended: Snapshot
    # Suspended after it ran, every pod gone (each Job suspended as the Job controller saw it):
    # the release starts, in the status only; data-js is held (never mounted again) and no
    # snapshot is taken before the release is stored.
    pytest.param(
        _preempted(_claim("Bound")),
        {
            "events": [("Normal", "SuspendedJobs", "jobset is suspended")],
            "status": {**_suspended_status("WaitingForSnapshot", "NoSnapshotPending"),
                       "suspensionReleases": [RELEASE]},
            "writes": 1,
        },
        id="suspended-pods-stopped-release-starts",
    ),
    # A pod still terminating: nothing yet.
    pytest.param(
        _preempted(_claim("Bound"), jobs=(*STOPPED_JOBS[:2],
                                          ("workers", 1, {**STOPPED, **COLOCATED,
                                                          "terminating": 1}))),
        {
            "events": [("Normal", "SuspendedJobs", "jobset is suspended")],
            "status": _suspended_status("ClaimsBound", "NoSnapshotPending"),
            "writes": 1,
        },
        id="suspended-pods-terminating-nothing-yet",
    ),
    # The release stored: the snapshot of this release is taken ...
    pytest.param(
        _preempted(_claim("Bound"), releases=[RELEASE]),
        {
            "claims": {"create_snapshots": [TAKEN]},
            "events": [("Normal", "SuspendedJobs", "jobset is suspended")],
            "status": {**_suspended_status("WaitingForSnapshot"), "suspensionReleases": [RELEASE]},
            "writes": 2,
        },
        id="suspended-release-takes-its-snapshot",
    ),
    # ... the claim deleted once it is ready, and forgotten by the record (made again, not Lost).
    pytest.param(
        _preempted(_claim("Bound"), releases=[RELEASE], snapshots=(_taken(True),)),
        {
            "claims": {"delete": ["data-js"]},
            "events": [("Normal", "SuspendedJobs", "jobset is suspended")],
            "status": {**_suspended_status("WaitingForSnapshot", "NoSnapshotPending",
                                           recorded=False),
                       "suspensionReleases": [RELEASE]},
            "writes": 2,
        },
        id="suspended-snapshot-ready-claim-deleted",
    ),
    # Resumed while the snapshot is taken: the claim stays held, the Jobs that mount it stay
    # suspended (leader mounts nothing: resumed).
    pytest.param(
        _preempted(_claim("Bound"), suspend=False, releases=[RELEASE],
                   snapshots=(_taken(False),)),
        {
            "patch": {"js-leader-0": {"spec": {"suspend": False}}},
            "status": {**_suspended_status("WaitingForSnapshot", suspended=False),
                       "suspensionReleases": [RELEASE]},
            "writes": 2,
            # Asked for 1 s after T0: looked at again when its wait would be overdue.
            "requeue_after": 1801.0,
        },
        id="resumed-while-snapshotted-jobs-wait",
    ),
    # Resumed, the claim gone: made again from the release's snapshot; its Jobs still wait ...
    pytest.param(
        _preempted(suspend=False, recorded=False, snapshots=(_taken(True),)),
        {
            "claims": {"create": ["data-js"], "restore": {"data-js": TAKEN}},
            "patch": {"js-leader-0": {"spec": {"suspend": False}}},
            "status": {**_suspended_status("ClaimsPending", "NoSnapshotPending",
                                           suspended=False, recorded=False),
                       "volumes": [{"name": "data", "scope": "JobSet", "claimName": "data-js",
                                    "desired": 1, "existing": 1, "pending": 1}]},
            "writes": 3,
        },
        id="resumed-claim-made-again-from-the-snapshot",
    ),
    # ... and resume once the new claim's uid is stored.
    pytest.param(
        _preempted(_claim("Bound", OTHER_UID), suspend=False, recorded=False,
                   snapshots=(_taken(True),), record=[{"template": "data", "uids": "77ae0c42"}]),
        {
            "patch": {"js-leader-0": {"spec": {"suspend": False}},
                      "js-workers-0": {"spec": {"suspend": False}},
                      "js-workers-1": {"spec": {"suspend": False}}},
            "status": {**_suspended_status("ClaimsBound", "NoSnapshotPending", suspended=False,
                                           recorded=False),
                       "claimUIDs": [{"template": "data", "uids": "77ae0c42"}]},
            "writes": 4,
        },
        id="resumed-restored-claim-recorded-jobs-resume",
    ),
    # --- scale-down (extension: replicas may be lowered)
    pytest.param(
        Case(jobset={"replicated_jobs": [rjob("leader"), rjob("workers", 1)]}, jobs=ALL_ACTIVE,
             stored=ALL_ACTIVE_STATUS),
        {
            "delete": ["js-workers-1"],
            "status": {"restarts": 0, "conditions": [],
                       "replicatedJobs": {"leader": {"active": 1}, "workers": {"active": 1}}},
            "writes": 2,
        },
        id="scale-down-deletes-beyond-replicas",
    ),
    # --- volumes
    pytest.param(
        Case(jobset={"replicated_jobs": VOLUME_RJOBS, "spec": VOLUME_SPEC}),
        {
            "create": [("js-leader-0", 0, "running")],
            "status": {"restarts": 0,
                       # Absent conditions are added only when True; VolumesReady and
                       # MultiAttachRisk are shown while False too.
                       "conditions": [("VolumesReady", "False", "ClaimsPending"),
                                      COLOCATED_CONDITION],
                       "replicatedJobs": UNSTARTED,
                       # The claim this pass creates is counted as Pending already.
                       "volumes": [{"name": "data", "scope": "JobSet", "claimName": "data-js",
                                    "desired": 1, "existing": 1, "pending": 1}]},
            "claims": {"add_finalizer": True, "create": ["data-js"]},
            "writes": 4,
        },
        id="volumes-jobs-needing-a-missing-claim-wait",
    ),
    # The claim is ours and Bound, but the stored status does not remember it yet: this pass
    # records it, and the Jobs that mount it wait for that record to be stored ...
    pytest.param(
        _with_data(_claim("Bound"), recorded=False),
        {"status": _data_status("ClaimsBound", existing=1, bound=1), "writes": 1},
        id="volumes-claim-bound-not-recorded-jobs-wait",
    ),
    # ... and once it is, they are created with it mounted.
    pytest.param(
        _with_data(_claim("Bound")),
        {
            "create": [("js-workers-0", 0, "running"), ("js-workers-1", 0, "running")],
            "mounts": {"js-workers-0": ["data-js"], "js-workers-1": ["data-js"]},
            "status": _data_status("ClaimsBound", existing=1, bound=1),
            "writes": 3,
        },
        id="volumes-claim-recorded-mounting-jobs-created",
    ),
    # The claim it had is gone: Lost, not created again; the Jobs that mount it wait, the Job
    # that mounts nothing is created; a Warning gives the command that accepts the loss.
    pytest.param(
        _with_data(leader=False),
        {
            "create": [("js-leader-0", 0, "running")],
            "status": {**_data_status("ClaimsLost", lost=1), "replicatedJobs": UNSTARTED},
            "events": [("Warning", "ClaimsLost", LOST_DATA_JS.format(why="deleted"))],
            "writes": 2,
        },
        id="volumes-claim-lost-its-jobs-wait-the-others-start",
    ),
    # The same loss while the Jobs exist suspended (created before the loss) and the JobSet is
    # resumed: the Jobs that mount the lost claim stay suspended. Resumed, their pods would wait
    # for any claim of that name and mount whatever appeared there.
    pytest.param(
        replace(
            _with_data(leader=False),
            jobs=(("leader", 0, SUSPENDED_JOB), ("workers", 0, {**SUSPENDED_JOB, **COLOCATED}),
                  ("workers", 1, {**SUSPENDED_JOB, **COLOCATED})),
        ),
        {
            "patch": {"js-leader-0": {"spec": {"suspend": False}}},
            "status": {**_data_status("ClaimsLost", lost=1),
                       "replicatedJobs": {"leader": {"suspended": 1}, "workers": {"suspended": 2}}},
            "events": [("Warning", "ClaimsLost", LOST_DATA_JS.format(why="deleted"))],
            "writes": 2,
        },
        id="volumes-claim-lost-its-suspended-jobs-stay-suspended",
    ),
    # Lost while its Jobs run (a claim is deleted only once no pod uses it, so their pods do
    # not hold it): they are suspended, so that no retry pod waits for, and mounts, whatever
    # claim appears at the name. The leader mounts nothing and runs on.
    pytest.param(
        replace(
            _with_data(),
            jobs=(("leader", 0, RUNNING), ("workers", 0, {**RUNNING, **COLOCATED}),
                  ("workers", 1, {**RUNNING, **COLOCATED})),
        ),
        {
            "patch": {"js-workers-0": {"spec": {"suspend": True}},
                      "js-workers-1": {"spec": {"suspend": True}}},
            "status": {**_data_status("ClaimsLost", lost=1),
                       "replicatedJobs": {"leader": {"active": 1}, "workers": {"active": 2}}},
            "events": [("Warning", "ClaimsLost", LOST_DATA_JS.format(why="deleted"))],
            "writes": 3,
        },
        id="volumes-claim-lost-its-running-jobs-are-suspended",
    ),
    # Another object now has the name (re-created from its YAML): Lost too, never mounted.
    pytest.param(
        _with_data(_claim("Bound", OTHER_UID)),
        {
            "status": _data_status("ClaimsLost", lost=1),
            "events": [("Warning", "ClaimsLost", LOST_DATA_JS.format(
                why="deleted; the name now belongs to another claim (uid 77ae0c42)"))],
            "writes": 1,
        },
        id="volumes-claim-replaced-out-of-band-lost",
    ),
    # Being deleted by someone else while pods use it: reported, and nothing waits on it.
    pytest.param(
        _with_data(_terminating(_claim("Bound"))),
        {
            "status": _data_status("ClaimsTerminating", existing=1),
            "events": [("Warning", "ClaimsTerminating",
                        "1 of 1 claims this JobSet had are being deleted, not by this controller: "
                        "data-js. Kubernetes keeps each until the pods using it stop; then it is "
                        "lost, and not replaced by an empty claim")],
            "writes": 1,
        },
        id="volumes-claim-terminating-reported",
    ),
    # The user accepted exactly that loss: an empty claim is created, the record forgets the
    # lost one (the reconciler records the new uid), and the Jobs wait for the new record.
    pytest.param(
        _with_data(accepting="data-js@3f9c1a27"),
        {
            "status": _data_status("ClaimsPending", recorded=False, existing=1, pending=1),
            "events": [("Warning", "LostClaimReplaced",
                        "replacing lost claim data-js (uid 3f9c1a27, deleted) with an empty "
                        f"claim, as the annotation {REPLACE_LOST} accepts")],
            "claims": {"create": ["data-js"]},
            "writes": 2,
        },
        id="volumes-lost-claim-accepted-replaced-empty",
    ),
    # An acceptance of another loss (another uid) does not apply.
    # ... and says so: a mismatched entry is never ignored silently.
    pytest.param(
        _with_data(accepting="data-js@77ae0c42"),
        {
            "status": {
                **_data_status("ClaimsLost", lost=1),
                "conditions": [
                    ("VolumesReady", "False", "ClaimsLost"),
                    ("VolumeAnnotationsRejected", "True", "ReplaceLostClaimsRejected"),
                    COLOCATED_CONDITION,
                ],
            },
            "events": [
                ("Warning", "ClaimsLost", LOST_DATA_JS.format(why="deleted")),
                ("Warning", "ReplaceLostClaimsRejected",
                 f"entries not accepted: {REPLACE_LOST}: \"data-js@77ae0c42\": the claim "
                 "data-js that was lost had uid 3f9c1a27, not 77ae0c42: not replaced (the entry "
                 "must name the lost claim's uid)"),
            ],
            "writes": 1,
        },
        id="volumes-lost-claim-other-uid-accepted-not-replaced",
    ),
    # A claim of that name that is not ours: never mounted; the Jobs needing it wait.
    pytest.param(
        Case(
            jobset={"replicated_jobs": VOLUME_RJOBS, "spec": VOLUME_SPEC},
            finalizers=(RETENTION_FINALIZER,),
            jobs=(ALL_ACTIVE[0],),
            claims=({"metadata": {"name": "data-js", "namespace": "default"},
                     "spec": CLAIM_SPEC, "status": {"phase": "Bound"}},),
            stored={"replicatedJobsStatus": _counts(leader={"active": 1}, workers={})},
        ),
        {
            "status": {"restarts": 0,
                       "conditions": [("VolumesReady", "False", "ClaimConflict"),
                                      ("VolumeClaimConflict", "True", "ClaimConflict"),
                                      COLOCATED_CONDITION],
                       "replicatedJobs": {"leader": {"active": 1}, "workers": {}},
                       "volumes": [{"name": "data", "scope": "JobSet", "claimName": "data-js",
                                    "desired": 1, "conflicts": 1}]},
            "events": [("Warning", "ClaimConflict",
                        "data-js: claim data-js exists but was not made for JobSet js (it lacks "
                        "the label jobset.sigs.k8s.io/jobset-name=js). To adopt the claims "
                        "without proof that hold this JobSet's data: kubectl annotate jobset js "
                        "-n default --overwrite jobset.sigs.k8s.io/adopt-claims=data-js@")],
            "writes": 1,
        },
        id="volumes-foreign-claim-conflict-jobs-wait",
    ),
    # Being deleted: children go with the garbage collector; the reconciler finalises the JobSet
    # (claims by retention) with volumes.deletion, from the stored object (test_volume_deletion).
    pytest.param(
        Case(jobset={"replicated_jobs": VOLUME_RJOBS, "spec": VOLUME_SPEC, "deleting": True},
             finalizers=(RETENTION_FINALIZER,), jobs=ALL_ACTIVE, claims=(_claim("Bound"),)),
        {"writes": 0},
        id="deleting-with-volumes-nothing-here",
    ),
    pytest.param(
        Case(jobset={"deleting": True}, jobs=ALL_ACTIVE, service=False),
        {"writes": 0},
        id="deleting-without-volumes-nothing",
    ),
    # --- SpecInvalid (reported by the reconciler when parsing fails) turns False once the
    # JobSet parses again; absent, it is not added.
    pytest.param(
        Case(jobset={"conditions": [_ours("SpecInvalid", "InvalidSpec", "too many claims")]},
             jobs=ALL_ACTIVE, stored=ALL_ACTIVE_STATUS),
        {"status": {"restarts": 0, "conditions": [("SpecInvalid", "False", "ValidSpec")],
                    "replicatedJobs": {"leader": {"active": 1}, "workers": {"active": 2}}},
         "writes": 1},
        id="spec-valid-again-spec-invalid-false",
    ),
    # --- steady states: nothing to write
    pytest.param(
        Case(jobs=ALL_ACTIVE, stored=ALL_ACTIVE_STATUS),
        {"writes": 0},
        id="steady-running",
    ),
    pytest.param(
        Case(
            jobset={"replicated_jobs": VOLUME_RJOBS, "spec": VOLUME_SPEC,
                    "conditions": [_ours("VolumesReady", "ClaimsBound", "all 1 claims are bound"),
                                   _ours("MultiAttachRisk", "Colocated", COLOCATED_MESSAGE,
                                         "False")]},
            finalizers=(RETENTION_FINALIZER,),
            jobs=tuple((n, i, {**kw, **COLOCATED} if n == "workers" else kw)
                       for n, i, kw in ALL_ACTIVE),
            claims=(_claim("Bound"),),
            stored={**ALL_ACTIVE_STATUS,
                    "volumes": {"templates": [{"name": "data", "scope": "JobSet", "desired": 1,
                                               "existing": 1, "bound": 1, "pending": 0,
                                               "lost": 0, "conflicts": 0,
                                               "claimName": "data-js"}],
                                "claimUIDs": RECORD}},
        ),
        {"writes": 0},
        id="steady-running-with-volumes",
    ),
    # The same Jobs made without the pod affinity that keeps the pods sharing the ReadWriteOnce
    # claim on one node (by upstream JobSet before a migration, say): named, before any pod
    # of theirs fails to attach.
    pytest.param(
        Case(
            jobset={"replicated_jobs": VOLUME_RJOBS, "spec": VOLUME_SPEC,
                    "conditions": [_ours("VolumesReady", "ClaimsBound", "all 1 claims are bound")]},
            finalizers=(RETENTION_FINALIZER,),
            jobs=ALL_ACTIVE,
            claims=(_claim("Bound"),),
            stored={**ALL_ACTIVE_STATUS,
                    "volumes": {"templates": [{"name": "data", "scope": "JobSet", "desired": 1,
                                               "existing": 1, "bound": 1, "pending": 0,
                                               "lost": 0, "conflicts": 0,
                                               "claimName": "data-js"}],
                                "claimUIDs": RECORD}},
        ),
        {
            "status": {"restarts": 0,
                       "conditions": [("VolumesReady", "True", "ClaimsBound"),
                                      ("MultiAttachRisk", "True", "JobsNotColocated")],
                       "replicatedJobs": {"leader": {"active": 1}, "workers": {"active": 2}},
                       "volumes": [{"name": "data", "scope": "JobSet", "claimName": "data-js",
                                    "desired": 1, "existing": 1, "bound": 1}],
                       "claimUIDs": [{"template": "data", "uids": "3f9c1a27"}]},
            "events": [("Warning", "JobsNotColocated",
                        "claim data-js is ReadWriteOnce and Jobs js-workers-0, js-workers-1 that "
                        "mount it were created without this controller's pod affinity (by another "
                        "controller, or an older release, or while it was not needed): their pods "
                        "may run on different nodes, where the volume cannot attach "
                        "(Multi-Attach). Jobs this controller makes again (after a restart of the "
                        "JobSet, or once deleted) carry it; or use a ReadWriteMany class")],
            "writes": 1,
        },
        id="volumes-shared-read-write-once-jobs-made-without-the-affinity-named",
    ),
    pytest.param(
        Case(jobset={"suspend": True, "conditions": [SUSPENDED]},
             jobs=tuple((n, i, {"suspended": True}) for n, i, _ in ALL_ACTIVE),
             stored={"replicatedJobsStatus": _counts(leader={"suspended": 1},
                                                     workers={"suspended": 2})}),
        {"writes": 0},
        id="steady-suspended",
    ),
    pytest.param(
        Case(jobset={"conditions": [COMPLETED], "terminal_state": "Completed"},
             jobs=ALL_COMPLETE, stored={"replicatedJobsStatus": _counts(
                 leader={"succeeded": 1}, workers={"succeeded": 2})}, now=at(3600)),
        {"writes": 0},
        id="steady-completed-no-ttl",
    ),
    # --- a spec edit that changes no condition (generation 1 -> 2): the conditions' new
    # observedGeneration is written, but nothing transitioned, so no Event is repeated
    # (upstream emits an Event only when a condition is added or changes status).
    pytest.param(
        Case(jobset={"suspend": True, "conditions": [SUSPENDED], "generation": 2},
             jobs=tuple((n, i, {"suspended": True}) for n, i, _ in ALL_ACTIVE),
             stored={"replicatedJobsStatus": _counts(leader={"suspended": 1},
                                                     workers={"suspended": 2})}),
        {"status": {"restarts": 0, "conditions": [("Suspended", "True", "SuspendedJobs")],
                    "replicatedJobs": {"leader": {"suspended": 1}, "workers": {"suspended": 2}}},
         "writes": 1},
        id="suspended-spec-edited-no-repeated-event",
    ),
    pytest.param(
        Case(jobset={"startup_in_order": True, "generation": 2,
                     "conditions": [_ours(api.STARTUP_POLICY_IN_PROGRESS,
                                          api.REASON_IN_ORDER_IN_PROGRESS,
                                          api.MESSAGE_IN_ORDER_IN_PROGRESS)]},
             jobs=(ALL_ACTIVE[0],),
             stored={"replicatedJobsStatus": _counts(leader={"active": 1}, workers={})}),
        {"status": {"restarts": 0,
                    "conditions": [("StartupPolicyInProgress", "True",
                                    "InOrderStartupPolicyInProgress")],
                    "replicatedJobs": {"leader": {"active": 1}, "workers": {}}},
         "writes": 1},
        id="in-order-spec-edited-no-repeated-event",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("case", "expected"), ROWS)
def test_decide(case: Case, expected: Obj) -> None:
    assert _summary(_run(case)) == expected


@pytest.mark.parametrize(
    "case",
    [p.values[0] for p in ROWS if isinstance(p.values[0], Case) and not p.values[0].pod_scope],
)
def test_a_missing_pod_scope_policy_changes_nothing_for_other_scopes(case: Case) -> None:
    """Only a JobSet with a Pod-scope policy waits for the admission policy."""
    assert _summary(_run(replace(case, pod_scope_blocked=NO_POLICY))) == _summary(_run(case))


@pytest.mark.parametrize(
    "case", [p.values[0] for p in ROWS if isinstance(p.values[0], Case) and p.values[0].jobs]
)
def test_jobs_as_the_informer_keeps_them_decide_the_same(case: Case) -> None:
    """The Job informer's transform drops what no decision reads: the whole plan is equal."""
    assert _run(case, view=True) == _run(case)


def test_decide_is_pure() -> None:
    """The same observed state gives the same plan, and decide changes none of its inputs."""
    raw = make_jobset_obj(replicated_jobs=TWO, failure_policy={"maxRestarts": 2})
    jobset = model.parse(raw)
    jobs = [make_job(jobset, "workers", 1, failed=FAIL), make_job(jobset, "leader", 0)]
    before = copy.deepcopy((raw, jobs))
    first = _summary(decide(jobset, job_views(jobs), None, T0))
    assert _summary(decide(jobset, job_views(jobs), None, T0)) == first
    assert (raw, jobs) == before


def test_spec_edit_moves_observed_generation() -> None:
    raw = make_jobset_obj(suspend=True, generation=2, conditions=[SUSPENDED])
    jobset = model.parse(raw)
    jobs = [make_job(jobset, n, i, suspended=True) for n, i, _ in ALL_ACTIVE]
    plan = decide(jobset, job_views(jobs), SERVICE, at(30))
    assert plan.status is not None
    assert plan.status.to_dict()["conditions"] == [{**SUSPENDED, "observedGeneration": 2}]
    assert plan.events == []


def _stored_after(
    raw: Obj, plan: Plan, *, held_since: float | None, now: float
) -> tuple[Obj, bool]:
    """``raw`` with the status the reconciler writes for ``plan`` at ``now`` under the default
    longest hold (``--status-progress-period`` 5 s), and whether it wrote one."""
    timing = pacing.status_timing(
        JobSetStatus.parse(raw["status"]),
        plan.status,
        with_events=bool(plan.events),
        requeue_after=plan.requeue_after,
        held_since=held_since,
        now=now,
        longest_hold=5.0,
    )
    if plan.status is None or not timing.write:
        return raw, False
    return {**raw, "status": plan.status.to_dict()}, True


def test_claims_deleted_by_retention_are_forgotten_whatever_the_pace() -> None:
    """Scale-down with ``whenScaled: Delete`` shortly after a status write: the claim of the Job
    that went is deleted, and the record must forget it (in the pass that deletes it, or the next
    one), so that scaling up again makes a new claim (not a Lost one)."""
    ckpt = {"templates": [{"metadata": {"name": "ckpt"}, "spec": CLAIM_SPEC}], "scope": "Job",
            "retentionPolicy": {"whenScaled": "Delete"}}  # fmt: skip
    two = make_jobset_obj(replicated_jobs=[_mounting("workers", 2, "ckpt")],
                          spec={"volumeClaimPolicies": [ckpt]})  # fmt: skip
    two["metadata"]["finalizers"] = [RETENTION_FINALIZER]

    def claim(index: int, deleting: bool = False) -> Obj:
        obj = _claim("Bound", f"{index}0000000-0000-4000-8000-000000000000")
        obj["metadata"]["name"] = f"ckpt-js-workers-{index}"
        obj["metadata"]["labels"].update({
            "jobset.sigs.k8s.io/volume-template": "ckpt",
            "jobset.sigs.k8s.io/volume-scope": "Job",
            api.REPLICATED_JOB_NAME: "workers",
            api.JOB_INDEX: str(index),
        })  # fmt: skip
        obj["metadata"].pop("ownerReferences")
        return _terminating(obj) if deleting else obj

    claims = [claim(0), claim(1)]
    two["status"]["volumes"] = {
        "claimUIDs": [{"template": "ckpt", "replicatedJob": "workers", "uids": "00000000,10000000"}]
    }
    # Steady at 2 replicas, its status written at t=0.
    js = model.parse(two)
    jobs = [make_job(js, "workers", i, active=1) for i in range(2)]
    steady = decide(js, job_views(jobs), None, T0, claims=claim_views(claims))
    raw, _ = _stored_after(two, steady, held_since=None, now=0.0)
    assert (
        decide(model.parse(raw), job_views(jobs), None, T0, claims=claim_views(claims)).status
        is None
    )
    # t=1: scaled down to 1. The claim of workers-1 is deleted with its Job.
    one = copy.deepcopy(raw)
    one["spec"]["replicatedJobs"][0]["replicas"] = 1
    first = decide(model.parse(one), job_views(jobs), None, T0, claims=claim_views(claims))
    assert first.volume is not None and first.volume.deleted == ["ckpt-js-workers-1"]
    one, wrote = _stored_after(one, first, held_since=None, now=1.0)
    # t=6: the longest hold is over; the claim is still terminating (its pod is stopping).
    going = [claims[0], claim(1, deleting=True)]
    second = decide(model.parse(one), job_views(jobs[:1]), None, T0, claims=claim_views(going))
    one, _ = _stored_after(one, second, held_since=None if wrote else 1.0, now=6.0)
    record = parse_record(one["status"].get("volumes"))
    assert record.get(("ckpt", "workers", 1, None)) is None
    # Scaled up again once the claim is gone: a new, empty claim, as whenScaled: Delete promised.
    up = copy.deepcopy(one)
    up["spec"]["replicatedJobs"][0]["replicas"] = 2
    third = decide(model.parse(up), job_views(jobs[:1]), None, T0, claims=claim_views(claims[:1]))
    assert third.volume is not None
    assert [c.name for c in third.volume.create] == ["ckpt-js-workers-1"]


def test_pod_scope_release_deletes_the_finished_jobs_using_the_claims() -> None:
    """``whenCompleted: Delete`` on a Completed Pod-scope JobSet: the finished Jobs' pods still
    use their claims (pvc-protection would keep them), so those Jobs go too; each is found by
    the placeholder its template mounts, which stands for all its completion indexes' claims."""
    spec = copy.deepcopy(POD_SPEC)
    spec["volumeClaimPolicies"][0]["retentionPolicy"] = {"whenCompleted": "Delete"}
    raw = make_jobset_obj(
        replicated_jobs=POD_RJOBS, spec=spec, conditions=[COMPLETED], terminal_state="Completed"
    )
    raw["metadata"]["finalizers"] = [RETENTION_FINALIZER]
    raw["status"]["volumes"] = {"claimUIDs": _pod_record()}
    js = model.parse(raw)
    found = volumes.model(js)
    jobs = [
        volume_desired.mount(
            make_job(js, "workers", j, complete=True), js, found.policies, "workers", j
        )
        for j in range(2)
    ]
    claims = claim_views(_pod_claim(j, p) for j, p in POD_INDEXES)
    plan = decide(js, job_views(jobs), SERVICE, T0, claims=claims, model=found)
    assert sorted(plan.delete_jobs) == ["js-workers-0", "js-workers-1"]
    assert plan.volume is not None
    assert sorted(plan.volume.deleted) == POD_CLAIMS


NO_RJOBS: dict[str, Any] = {"replicated_jobs": []}


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        pytest.param(
            Case(service=False, jobset=NO_RJOBS),
            {"service": "js", "writes": 1},
            id="new-gets-its-service-only",
        ),
        # Success is decided only once a Job has succeeded (upstream): it never completes.
        pytest.param(Case(jobset=NO_RJOBS), {"writes": 0}, id="stays-active-never-completes"),
        pytest.param(
            Case(jobset=NO_RJOBS | {"success_policy": {"operator": "Any"}}),
            {"writes": 0},
            id="any-never-completes-either",
        ),
        pytest.param(
            Case(jobset=NO_RJOBS | {"suspend": True}),
            {
                "status": {
                    "restarts": 0,
                    "conditions": [("Suspended", "True", "SuspendedJobs")],
                    "replicatedJobs": {},
                },
                "events": [("Normal", "SuspendedJobs", "jobset is suspended")],
                "writes": 1,
            },
            id="suspended",
        ),
        pytest.param(
            Case(jobset=NO_RJOBS | {"startup_in_order": True}),
            {
                "status": {
                    "restarts": 0,
                    "conditions": [
                        ("StartupPolicyCompleted", "True", "InOrderStartupPolicyCompleted")
                    ],
                    "replicatedJobs": {},
                },
                "events": [
                    (
                        "Normal",
                        "InOrderStartupPolicyCompleted",
                        "in order startup policy has completed",
                    )
                ],
                "writes": 1,
            },
            id="in-order-completes-at-once",
        ),
    ],
)
def test_no_replicated_jobs(case: Case, expected: Obj) -> None:
    """A JobSet without replicated jobs (accepted upstream) creates no Jobs and never finishes."""
    assert _summary(_run(case)) == expected


def _ttl_due(retention: Obj) -> Case:
    """js completed 60 s ago with ttl 60, its claim data-js still owned (ownerReference)."""
    spec = copy.deepcopy(VOLUME_SPEC)
    spec["volumeClaimPolicies"][0]["retentionPolicy"] = retention
    return Case(
        jobset={"replicated_jobs": VOLUME_RJOBS, "spec": spec, "ttl": 60,
                "conditions": [COMPLETED], "terminal_state": "Completed"},
        finalizers=(RETENTION_FINALIZER,),
        jobs=ALL_COMPLETE,
        claims=(_claim("Bound"),),
        now=at(60),
    )  # fmt: skip


def test_ttl_delete_waits_for_kept_claims_to_lose_the_owner_reference() -> None:
    """The TTL delete is Foreground: the garbage collector would take an owned claim before
    retention ran. One retention keeps waits (this pass drops the ownerReference)."""
    plan = _run(_ttl_due({"whenDeleted": "Retain"}))
    assert not plan.delete_jobset
    assert plan.requeue_after == TTL_HOLD_SECONDS
    assert plan.volume is not None
    assert [c.name for c in plan.volume.patch] == ["data-js"]
    assert plan.volume.patch[0].patch["metadata"]["ownerReferences"] is None


def test_ttl_delete_goes_when_the_owned_claims_are_deleted_with_the_jobset() -> None:
    plan = _run(_ttl_due({"whenDeleted": "Delete"}))
    assert plan.delete_jobset


def test_restart_job_replaces_only_the_failed_job() -> None:
    """RestartJob (gate on): the decision is stored first (jobRestarts bumped, an Event, no
    RestartingJobSet), then the failed Job alone is deleted, then recreated with its
    job-restart-attempt; the JobSet's restarts stay 0."""
    policy = {"maxRestarts": 1, "rules": [{"action": api.RESTART_JOB}]}
    raw = make_jobset_obj(replicated_jobs=TWO, failure_policy=policy)
    js = model.parse(raw, features.ALPHA)
    jobs = [make_job(js, "leader", 0, active=1), make_job(js, "workers", 0, active=1)]
    jobs.append(make_job(js, "workers", 1, failed=FAIL))
    plan = decide(js, job_views(jobs), None, T0, restart_job=True)
    assert (plan.delete_jobs, plan.create_jobs) == ([], [])
    assert plan.status is not None
    assert [e.reason for e in plan.events] == [api.REASON_RESTART_JOB_ACTION]
    written = plan.status.to_dict()
    workers = next(s for s in written["replicatedJobsStatus"] if s["name"] == "workers")
    assert (workers[api.JOB_RESTARTS], workers[api.JOB_RESTARTS_TOWARDS_MAX]) == ([0, 1], [0, 1])
    assert written["restarts"] == 0
    assert all(c["type"] != api.RESTARTING for c in written.get("conditions", []))
    assert plan.status.is_milestone_from(js.status)

    raw["status"] = written
    js = model.parse(raw, features.ALPHA)
    plan = decide(js, job_views(jobs), None, T0, restart_job=True)
    assert plan.delete_jobs == ["js-workers-1"]
    assert plan.create_jobs == [] and plan.events == []
    # The stale Job no longer counts as failed; the restart history is kept.
    assert plan.status is not None
    workers = next(
        s for s in plan.status.to_dict()["replicatedJobsStatus"] if s["name"] == "workers"
    )
    assert (workers["failed"], workers[api.JOB_RESTARTS]) == (0, [0, 1])

    plan = decide(js, job_views(jobs[:2]), None, T0, restart_job=True)
    assert [j["metadata"]["name"] for j in plan.create_jobs] == ["js-workers-1"]
    created = plan.create_jobs[0]["metadata"]
    assert created["labels"][api.JOB_RESTART_ATTEMPT] == "1"
    assert created["labels"][api.RESTART_ATTEMPT] == "0"


def test_jobs_keep_the_replica_labels_they_were_created_with() -> None:
    """``replicas`` may change (upstream's never does): the Jobs created when workers had 2
    replicas keep the counts of that time in their labels (and their pods'), the Job added by
    raising it to 3 carries the new ones; nothing patches the Jobs that exist."""
    before = model.parse(make_jobset_obj(replicated_jobs=TWO))
    made = [job.object for job in construct.desired_jobs(before)]
    raised = model.parse(make_jobset_obj(replicated_jobs=[rjob("leader"), rjob("workers", 3)]))
    plan = decide(raised, job_views(made), SERVICE, T0)
    assert not plan.patch_jobs and not plan.delete_jobs
    counts = (api.REPLICATED_JOB_REPLICAS, api.GLOBAL_REPLICAS, api.GROUP_REPLICAS)
    (added,) = plan.create_jobs
    assert added["metadata"]["name"] == "js-workers-2"
    for job, expected in ((made[1], ("2", "3", "3")), (added, ("3", "4", "4"))):
        for labels in (job["metadata"]["labels"], job["spec"]["template"]["metadata"]["labels"]):
            assert tuple(labels[k] for k in counts) == expected, job["metadata"]["name"]


def test_a_queued_jobsets_jobs_that_wait_for_their_claims_count_as_no_suspended_job() -> None:
    """Created suspended (queued by Kueue), the JobSet makes no claim (creationPolicy
    WaitForResume, the default) and so no Job that mounts one: its workers count no suspended
    Job, where upstream's Jobs would all exist and count as suspended."""
    case = Case(
        jobset={"replicated_jobs": VOLUME_RJOBS, "spec": VOLUME_SPEC, "suspend": True},
        finalizers=(RETENTION_FINALIZER,),
        jobs=(("leader", 0, {"suspended": True}),),
    )
    summary = _summary(_run(case))
    assert "create" not in summary, summary
    assert "claims" not in summary, summary
    assert ("VolumesReady", "False", "WaitingForResume") in summary["status"]["conditions"]
    assert summary["status"]["replicatedJobs"] == {"leader": {"suspended": 1}, "workers": {}}
