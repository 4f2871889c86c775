"""The JobSets the soak creates (pure): every volume scope, both spellings, every retention setting.

Each JobSet has a replicated job ``leader`` (1 Job) and ``workers`` (2 or 3 Jobs). Claims:

- ``data``: JobSet scope, mounted by both (``volumeClaimPolicies`` or, every other JobSet, the
  original request's ``volumePolicy`` spelling);
- ``ckpt``: Job scope, one claim per ``workers`` Job (``volumeClaimPolicies``);
- ``rank``: Pod scope, in one JobSet out of three (``pod_scope``): ``workers`` is then an Indexed
  Job of 2 completions and each completion index of each Job gets its own claim, which the
  Pod-scope admission policy (installed in the soak's cluster) puts into each pod.

The policies' retention settings walk through all 16 combinations of
whenDeleted/whenCompleted/whenFailed/whenScaled x Retain/Delete; in two JobSets out of five
(``snapshots``) every Delete of them is Snapshot instead (the claim goes only once a VolumeSnapshot
of it is ready; the driver plays the snapshot controller). The scenario says what the driver does
to the JobSet (see ``engine.Driver``).
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
from collections.abc import Callable
from dataclasses import dataclass

from tests.soak.model import DELETE, RETAIN, SNAPSHOT, JobSetRecord, Obj, PlannedClaim, Retention
from tests.support.jobsets import jobset, replicated_job, with_pod_annotations

JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
RUN_DURATION = "localcluster.test/run-duration"
EXIT_CODE = "localcluster.test/exit-code"
FAIL_AFTER = "localcluster.test/fail-after"

# What the driver does with a JobSet; the driver cycles through them in this order.
SCENARIOS = (
    "complete",  # runs to Completed
    "fail",  # a worker fails every attempt: one restart (maxRestarts 1), then Failed
    "delete-running",  # deleted while its pods run
    "restart",  # a running worker pod is made to fail once; restarted, then Completed
    "suspend-resume",  # created suspended (no claims until resumed), resumed a few seconds later
    "scale-down",  # workers 3 -> 1 while running (whenScaled)
    "delete-finished",  # runs to Completed, then deleted
    "suspend-running",  # suspended while running, resumed
    "fail-deleted",  # fails (no restarts), then deleted
    # Before the JobSet, the driver makes a claim at the name of its "data" claim with the name
    # label copied and no proof of ownership: a conflict, never mounted, changed or deleted by the
    # controller. Then either the JobSet is deleted (the impostor stays; the driver deletes it),
    # or the impostor is deleted and the JobSet proceeds with a claim of its own.
    "impostor",
    # Created suspended (creationPolicy.whenSuspended: Create); once its claims exist and are
    # recorded, the driver deletes one out of band: it is Lost (VolumesReady ClaimsLost) and must
    # not be recreated. Resumed; then either the loss is accepted (the replace-lost-claims
    # annotation) and the JobSet completes, or it is deleted.
    "lose-claim",
)

_RETENTIONS = tuple(
    Retention(*combo) for combo in itertools.product((RETAIN, DELETE), repeat=4)
)  # 16: when_deleted, when_completed, when_failed, when_scaled


@dataclass(frozen=True)
class Planned:
    manifest: Obj
    record: JobSetRecord
    impostor: Obj | None = None  # impostor: the claim the driver makes first
    lose: str = ""  # lose-claim: the claim the driver deletes out of band
    # impostor: delete the JobSet while the impostor exists (else the impostor first);
    # lose-claim: accept the loss (else delete the JobSet).
    first_variant: bool = True


def retention_field(retention: Retention) -> Obj:
    return {
        "whenDeleted": retention.when_deleted,
        "whenCompleted": retention.when_completed,
        "whenFailed": retention.when_failed,
        "whenScaled": retention.when_scaled,
    }


def _mount(rjob: Obj, *volumes: str) -> Obj:
    for container in rjob["template"]["spec"]["template"]["spec"]["containers"]:
        mounts = container.setdefault("volumeMounts", [])
        mounts.extend({"name": v, "mountPath": f"/{v}"} for v in volumes)
    return rjob


def _template(name: str, storage_class: str) -> Obj:
    return {
        "metadata": {"name": name, "labels": {"soak": "true"}},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }


# Pods per workers Job of a Pod-scope JobSet (Indexed; one "rank" claim per completion index).
POD_SCOPE_COMPLETIONS = 2


def pod_scope(index: int) -> bool:
    """Whether the ``index``-th JobSet has a Pod-scope policy: one out of three (each brings 4
    claims more, and the test provisioner makes about one volume a second on a busy machine), and,
    as 3 and the number of scenarios are coprime, every scenario with and without it in turn."""
    return index % 3 == 0


def snapshots(index: int) -> bool:
    """Whether the ``index``-th JobSet's retention says Snapshot wherever the cycle of
    combinations says Delete: two out of five, and, as 5 is coprime with 16, 3 and the number of
    scenarios, every combination, scope and scenario with and without it in turn."""
    return index % 5 in (1, 3)


def snapshotting(retention: Retention) -> Retention:
    """``retention`` with Snapshot wherever it says Delete."""
    values = dataclasses.astuple(retention)
    return Retention(*(SNAPSHOT if value == DELETE else value for value in values))


def _lose_target(name: str, rounds: int, with_pod_scope: bool) -> str:
    """lose-claim: the claim the driver deletes out of band; in turn a JobSet-scope, a Job-scope
    and (when the JobSet has one) a Pod-scope claim, each with both endings over six rounds."""
    if with_pod_scope and rounds % 3 == 1:
        return f"rank-{name}-workers-0-1"
    return f"data-{name}" if rounds // 2 % 2 == 0 else f"ckpt-{name}-workers-0"


def _same(retention: Retention) -> Retention:
    return retention


def _run_seconds(scenario: str) -> tuple[str, str]:
    """(leader, workers) run durations."""
    if scenario == "delete-running":
        return "600s", "600s"
    if scenario in ("restart", "scale-down", "suspend-running"):
        return "3s", "12s"
    return "2s", "4s"


def plan(index: int, now: float) -> Planned:
    """The ``index``-th JobSet of the run: its manifest and the driver's record of it."""
    scenario = SCENARIOS[index % len(SCENARIOS)]
    name = f"soak-{index:04d}-{scenario}"
    cycle: Callable[[Retention], Retention] = snapshotting if snapshots(index) else _same
    data_retention = cycle(_RETENTIONS[index % 16])
    ckpt_retention = cycle(_RETENTIONS[(index * 7 + 3) % 16])
    workers_replicas = 3 if scenario == "scale-down" else 2
    leader_run, workers_run = _run_seconds(scenario)

    leader = _mount(replicated_job("leader"), "data")
    with_pod_annotations(leader, **{RUN_DURATION: leader_run})
    with_pod_scope = pod_scope(index)
    completions = POD_SCOPE_COMPLETIONS if with_pod_scope else 1
    workers = replicated_job("workers", workers_replicas, completions)
    workers = _mount(workers, "data", "ckpt", *(("rank",) if with_pod_scope else ()))
    if with_pod_scope:
        workers["template"]["spec"]["completionMode"] = "Indexed"
    with_pod_annotations(workers, **{RUN_DURATION: workers_run})
    if scenario in ("fail", "fail-deleted"):
        with_pod_annotations(workers, **{EXIT_CODE: "3", FAIL_AFTER: "2s"})

    ckpt_class = "wffc" if index % 2 else "standard"
    ckpt_policy: Obj = {
        "templates": [_template("ckpt", ckpt_class)],
        "retentionPolicy": retention_field(ckpt_retention),
        "scope": "Job",
        "targetReplicatedJobs": ["workers"],
    }
    rank_retention = cycle(_RETENTIONS[(index * 5 + 1) % 16])
    rank_policy: Obj = {
        "templates": [_template("rank", ckpt_class)],
        "retentionPolicy": retention_field(rank_retention),
        "scope": "Pod",
        "targetReplicatedJobs": ["workers"],
    }
    extra = [rank_policy] if with_pod_scope else []
    spec: Obj = {}
    if index % 2:
        spec["volumePolicy"] = {  # the original request's spelling
            "replicatedJobs": [{"name": "leader"}, {"name": "workers"}],
            "volumeClaimTemplates": [_template("data", "standard")],
            "retentionPolicy": retention_field(data_retention),
        }
        spec["volumeClaimPolicies"] = [ckpt_policy, *extra]
    else:
        data_policy: Obj = {
            "templates": [_template("data", "standard")],
            "retentionPolicy": retention_field(data_retention),
        }
        if index % 4 == 0:
            data_policy["scope"] = "JobSet"  # else left to its default
        spec["volumeClaimPolicies"] = [data_policy, ckpt_policy, *extra]
    if scenario == "fail":
        spec["failurePolicy"] = {"maxRestarts": 1}
    elif scenario == "restart":
        spec["failurePolicy"] = {"maxRestarts": 3}
    if scenario in ("suspend-resume", "lose-claim"):
        spec["suspend"] = True
    if scenario == "lose-claim":
        # Its claims are made while it is suspended (suspend-resume's wait for the resume).
        for found in [spec.get("volumePolicy"), *spec.get("volumeClaimPolicies", [])]:
            if found is not None:
                found["creationPolicy"] = {"whenSuspended": "Create"}
    manifest = jobset(name, leader, workers, **spec)
    manifest["metadata"]["labels"] = {"soak": "true", "soak-scenario": scenario}

    claims = [PlannedClaim(f"data-{name}", "data", "JobSet", data_retention)]
    claims += [
        PlannedClaim(f"ckpt-{name}-workers-{i}", "ckpt", "Job", ckpt_retention, "workers", i)
        for i in range(workers_replicas)
    ]
    if with_pod_scope:
        claims += [
            PlannedClaim(
                f"rank-{name}-workers-{i}-{k}", "rank", "Pod", rank_retention, "workers", i, k
            )
            for i in range(workers_replicas)
            for k in range(completions)
        ]
    record = JobSetRecord(
        name=name,
        scenario=scenario,
        replicated_jobs={"leader": 1, "workers": workers_replicas},
        claims=tuple(claims),
        created_at=now,
    )
    rounds = index // len(SCENARIOS)  # how many times this scenario came before
    impostor = None
    if scenario == "impostor":
        impostor = {
            "metadata": {
                "name": f"data-{name}",
                "labels": {JOBSET_NAME: name, "soak": "true"},  # copied: no proof
            },
            "spec": _template("data", "standard")["spec"],  # what the template asks for
        }
    lose = ""
    if scenario == "lose-claim":
        lose = _lose_target(name, rounds, with_pod_scope)
    return Planned(copy.deepcopy(manifest), record, impostor, lose, rounds % 2 == 0)
