"""Small factories for JobSets (parsed through ``model.parse``) and their child Jobs (dicts).

    js = make_jobset(replicated_jobs=[rjob("leader"), rjob("workers", 3)], suspend=True)
    job = make_job(js, "workers", 0, ready=1)
    job = make_job(js, "workers", 1, failed=("BackoffLimitExceeded", "too many", T0))

Everything is a plain dict underneath, so a test can still poke at any field it needs.
"""

from __future__ import annotations

import copy
import datetime
from collections.abc import Mapping
from typing import Any

from controller import features
from controller.features import FeatureGates
from controller.jobset import api, model
from controller.jobset.jobsetstatus import ReplicatedJobStatus
from controller.jobset.model import JobSet, ReplicatedJob
from controller.runtime.store import Obj

T0 = datetime.datetime(2025, 1, 1, 12, 0, 0, tzinfo=datetime.UTC)


def at(seconds: float) -> datetime.datetime:
    """T0 plus ``seconds``."""
    return T0 + datetime.timedelta(seconds=seconds)


def stamp(moment: datetime.datetime | str) -> str:
    if isinstance(moment, str):
        return moment
    return moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rjob(
    name: str,
    replicas: int = 1,
    *,
    parallelism: int | None = None,
    completions: int | None = None,
    depends_on: list[tuple[str, str]] | None = None,
    pod_labels: dict[str, str] | None = None,
    pod_annotations: dict[str, str] | None = None,
    pod_spec: dict[str, Any] | None = None,
) -> Obj:
    """One ``spec.replicatedJobs[]`` entry; ``depends_on`` is [(name, "Ready"|"Complete")]."""
    job_spec: Obj = {
        "template": {
            "spec": {"containers": [{"name": "main", "image": "busybox"}], **(pod_spec or {})}
        }
    }
    if parallelism is not None:
        job_spec["parallelism"] = parallelism
    if completions is not None:
        job_spec["completions"] = completions
    meta: Obj = {}
    if pod_labels:
        meta["labels"] = dict(pod_labels)
    if pod_annotations:
        meta["annotations"] = dict(pod_annotations)
    if meta:
        job_spec["template"]["metadata"] = meta
    entry: Obj = {"name": name, "replicas": replicas, "template": {"spec": job_spec}}
    if depends_on:
        entry["dependsOn"] = [{"name": n, "status": s} for n, s in depends_on]
    return entry


def make_jobset_obj(
    *,
    name: str = "js",
    namespace: str = "default",
    uid: str = "uid-js",
    generation: int = 1,
    replicated_jobs: list[Obj] | None = None,
    success_policy: Obj | None = None,
    failure_policy: Obj | None = None,
    startup_in_order: bool = False,
    suspend: bool | None = None,
    ttl: int | None = None,
    restarts: int = 0,
    restarts_count_towards_max: int = 0,
    conditions: list[Obj] | None = None,
    terminal_state: str | None = None,
    deleting: bool = False,
    spec: Obj | None = None,
) -> Obj:
    """The raw JobSet dict; ``spec`` is merged over the built spec last."""
    built_spec: Obj = {
        "replicatedJobs": copy.deepcopy(
            replicated_jobs if replicated_jobs is not None else [rjob("leader"), rjob("workers", 2)]
        )
    }
    if success_policy is not None:
        built_spec["successPolicy"] = success_policy
    if failure_policy is not None:
        built_spec["failurePolicy"] = failure_policy
    if startup_in_order:
        built_spec["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    if suspend is not None:
        built_spec["suspend"] = suspend
    if ttl is not None:
        built_spec["ttlSecondsAfterFinished"] = ttl
    built_spec.update(spec or {})
    status: Obj = {"restarts": restarts}
    if restarts_count_towards_max:
        status["restartsCountTowardsMax"] = restarts_count_towards_max
    if conditions:
        status["conditions"] = copy.deepcopy(conditions)
    if terminal_state:
        status["terminalState"] = terminal_state
    metadata: Obj = {"name": name, "namespace": namespace, "uid": uid, "generation": generation}
    if deleting:
        metadata["deletionTimestamp"] = stamp(T0)
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.KIND,
        "metadata": metadata,
        "spec": built_spec,
        "status": status,
    }


def make_jobset(gates: FeatureGates = features.DEFAULT, **overrides: Any) -> JobSet:
    """A parsed, defaulted ``JobSet`` (parsed as a controller with ``gates`` does); see
    ``make_jobset_obj`` for the keywords."""
    return model.parse(make_jobset_obj(**overrides), gates)


def stored_counts(counts: dict[str, Any], name: str = "any") -> ReplicatedJobStatus:
    """A stored ``replicatedJobsStatus`` entry (``name`` and ``counts``: absent is 0, junk too)
    as the status reads it."""
    found = ReplicatedJobStatus.parse({"name": name, **counts})
    assert found is not None
    return found


def condition(
    kind: str,
    status: str = "True",
    *,
    reason: str = "",
    message: str = "",
    time: datetime.datetime | str = T0,
) -> Obj:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp(time),
    }


def make_job(
    jobset: JobSet,
    rjob: str | ReplicatedJob,
    index: int,
    *,
    complete: bool = False,
    failed: tuple[str, str, datetime.datetime | str] | None = None,
    active: int = 0,
    ready: int = 0,
    succeeded: int = 0,
    suspended: bool = False,
    restart_attempt: int | None = None,
    deleting: bool = False,
    start_time: datetime.datetime | None = None,
    pod_labels: Mapping[str, str] | None = None,
    terminating: int = 0,
    suspended_condition: bool = False,
) -> Obj:
    """A child Job as the cache would hold it.

    ``failed`` is (reason, message, time) of its Failed condition. ``restart_attempt`` defaults to
    the JobSet's current attempt (``status.restarts``). ``pod_labels``: labels the controller
    added to its pod template (the template's own are there). ``terminating``: its pods being
    deleted; ``suspended_condition``: its Suspended condition True (the Job controller acted on
    spec.suspend).
    """
    spec_rjob = jobset.replicated_job(rjob) if isinstance(rjob, str) else rjob
    rjob_name = rjob if isinstance(rjob, str) else rjob.name
    attempt = jobset.status.restarts if restart_attempt is None else restart_attempt
    name = f"{jobset.name}-{rjob_name}-{index}"
    labels = {
        api.JOBSET_NAME: jobset.name,
        api.REPLICATED_JOB_NAME: rjob_name,
        api.JOB_INDEX: str(index),
        api.RESTART_ATTEMPT: str(attempt),
    }
    spec: Obj = copy.deepcopy(spec_rjob.template.get("spec", {})) if spec_rjob else {}
    spec.setdefault("parallelism", 1)
    spec["suspend"] = suspended
    if pod_labels:
        template = spec["template"] = dict(spec.get("template") or {})
        meta = template["metadata"] = dict(template.get("metadata") or {})
        meta["labels"] = {**(meta.get("labels") or {}), **pod_labels}
    status: Obj = {}
    conditions: list[Obj] = []
    if complete:
        conditions.append(condition("SuccessCriteriaMet", reason="CompletionsReached"))
        conditions.append(condition("Complete", reason="CompletionsReached"))
    if failed is not None:
        reason, message, when = failed
        conditions.append(condition("FailureTarget", reason=reason, message=message, time=when))
        conditions.append(condition("Failed", reason=reason, message=message, time=when))
    if suspended_condition:
        conditions.append(condition("Suspended", reason="JobSuspended", message="Job suspended"))
    if conditions:
        status["conditions"] = conditions
    if active:
        status["active"] = active
    if terminating:
        status["terminating"] = terminating
    if ready:
        status["ready"] = ready
    if succeeded:
        status["succeeded"] = succeeded
    if start_time is not None:
        status["startTime"] = stamp(start_time)
    metadata: Obj = {"name": name, "namespace": jobset.namespace, "labels": labels}
    if deleting:
        metadata["deletionTimestamp"] = stamp(T0)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": metadata,
        "spec": spec,
        "status": status,
    }
