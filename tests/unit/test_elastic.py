"""ElasticJobSet: running Jobs resized to their template's parallelism and completions (decide).

Each row: the replicated job "workers" (1 Job, Indexed unless said) with the template's sizes,
its Job's sizes and state, the gate; the expected Job patches, claim writes and the
``ElasticScalingDisabled`` condition. Pod-scope rows (one claim per completion index): claims of
new indexes come first and the Job is resized only once they are recorded; claims of indexes
dropped follow ``whenScaled`` once no Job has those indexes any more.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.jobset import elastic, model, volumes
from controller.jobset.children import views as job_views
from controller.jobset.decide import Plan, decide
from controller.jobset.volumes.observed import views as claim_views
from controller.runtime.store import Obj
from tests.unit.jobset_factories import T0, make_job, make_jobset_obj, rjob
from tests.unit.test_decide import CLAIM_SPEC, RETENTION_FINALIZER, _pod_claim

MOUNT = {"containers": [{"name": "main", "image": "busybox",
                         "volumeMounts": [{"name": "ckpt", "mountPath": "/ckpt"}]}]}  # fmt: skip


def _pod_spec(when_scaled: str) -> Obj:
    policy = {
        "templates": [{"metadata": {"name": "ckpt"}, "spec": CLAIM_SPEC}],
        "scope": "Pod",
        "retentionPolicy": {"whenScaled": when_scaled},
    }
    return {"volumeClaimPolicies": [policy]}


def _record(pods: range) -> list[Obj]:
    """``status.volumes.claimUIDs`` remembering the claims of Job 0's pods ``pods``."""
    uids = ",".join(f"0{p}000000" if p in pods else "" for p in range(max(pods) + 1))
    return [{"template": "ckpt", "replicatedJob": "workers", "scope": "Pod", "uids": uids}]


@dataclass(frozen=True)
class Case:
    template: tuple[int, int]  # (parallelism, completions) of the template
    job: tuple[int, int] | None  # the Job's (None: no Job yet)
    gate: bool = True
    mode: str = "Indexed"
    job_state: dict[str, Any] = field(default_factory=lambda: {"active": 1})
    suspend: bool = False
    conditions: tuple[Obj, ...] = ()
    # Pod scope: whenScaled, and the pod indexes whose claims exist and are recorded.
    pod_scope: str | None = None
    claims: range = range(0)


def _run(case: Case) -> Plan:
    spec = {"completionMode": case.mode}
    parallelism, completions = case.template
    template = rjob("workers", parallelism=parallelism, completions=completions,
                    pod_spec=MOUNT if case.pod_scope else None)  # fmt: skip
    template["template"]["spec"].update(spec)
    raw = make_jobset_obj(
        replicated_jobs=[template],
        suspend=case.suspend or None,
        conditions=list(case.conditions),
        spec=_pod_spec(case.pod_scope) if case.pod_scope else None,
    )
    if case.pod_scope:
        raw["metadata"]["finalizers"] = [RETENTION_FINALIZER]
        raw["status"]["volumes"] = {"claimUIDs": _record(case.claims)} if case.claims else {}
    jobset = model.parse(raw)
    jobs = []
    if case.job is not None:
        job = make_job(jobset, "workers", 0, **case.job_state)
        job["spec"]["parallelism"], job["spec"]["completions"] = case.job
        jobs.append(job)
    claims = claim_views([_pod_claim(0, p) for p in case.claims])
    return decide(
        jobset,
        job_views(jobs),
        None,
        T0,
        claims=claims or None,
        model=volumes.model(jobset) if case.pod_scope else None,
        resize=case.gate,
    )


def _summary(plan: Plan) -> Obj:
    out: Obj = {}
    if plan.patch_jobs:
        out["patch"] = dict(plan.patch_jobs)
    if plan.volume is not None and plan.volume.create:
        out["create_claims"] = sorted(c.name for c in plan.volume.create)
    if plan.volume is not None and plan.volume.deleted:
        out["delete_claims"] = sorted(plan.volume.deleted)
    found = [
        (c.status, c.reason)
        for c in (plan.status.conditions if plan.status is not None else ())
        if c.type == elastic.CONDITION
    ]
    if found:
        out["condition"] = found[0]
    events = [e.reason for e in plan.events if e.reason == elastic.REASON_GATE_OFF]
    if events:
        out["events"] = events
    return out


def _sizes(n: int) -> Obj:
    return {"spec": {"parallelism": n, "completions": n}}


GATE_OFF_TRUE = {"type": elastic.CONDITION, "status": "True", "reason": elastic.REASON_GATE_OFF,
                 "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}  # fmt: skip

# fmt: off
CASES = [
    pytest.param(Case((4, 4), (2, 2)), {"patch": {"js-workers-0": _sizes(4)}},
                 id="resized-up-job-patched-in-place"),
    pytest.param(Case((1, 1), (3, 3)), {"patch": {"js-workers-0": _sizes(1)}},
                 id="resized-down-job-patched-in-place"),
    pytest.param(Case((2, 2), (2, 2)), {}, id="same-sizes-nothing-written"),
    pytest.param(Case((4, 4), (2, 2), job_state={"complete": True, "succeeded": 2}), {},
                 id="finished-job-left-as-it-is"),
    pytest.param(Case((4, 4), (2, 2), mode="NonIndexed"), {}, id="non-indexed-never-resized"),
    pytest.param(Case((4, 5), (2, 2)), {}, id="unequal-template-not-applied"),
    pytest.param(Case((4, 4), None), {}, id="no-job-yet-created-from-template-elsewhere"),
    # Suspending and resizing one Job: one patch with both.
    pytest.param(Case((4, 4), (2, 2), suspend=True),
                 {"patch": {"js-workers-0": {"spec": {"suspend": True, "parallelism": 4,
                                                      "completions": 4}}}},
                 id="suspend-and-resize-one-patch"),
    # Gate off in the controller (the alpha CRD admitted the change): reported, not applied.
    pytest.param(Case((4, 4), (2, 2), gate=False),
                 {"condition": ("True", elastic.REASON_GATE_OFF),
                  "events": [elastic.REASON_GATE_OFF]},
                 id="gate-off-reported-jobs-unchanged"),
    pytest.param(Case((2, 2), (2, 2), gate=False, conditions=(GATE_OFF_TRUE,)),
                 {"condition": ("False", elastic.REASON_IN_SYNC)},
                 id="gate-off-sizes-back-condition-false"),
    pytest.param(Case((2, 2), (2, 2), gate=False), {}, id="gate-off-in-sync-no-condition"),
    # Pod scope, scaled up 3 → 4: the claim of index 3 first, the Job waits for it.
    pytest.param(Case((4, 4), (3, 3), pod_scope="Retain", claims=range(3)),
                 {"create_claims": ["ckpt-js-workers-0-3"]},
                 id="pod-scope-up-claim-first-job-waits"),
    pytest.param(Case((4, 4), (3, 3), pod_scope="Retain", claims=range(4)),
                 {"patch": {"js-workers-0": _sizes(4)}},
                 id="pod-scope-up-claim-recorded-job-resized"),
    # Pod scope, scaled down 3 → 2 under whenScaled: Delete: the Job first (its pod of index 2
    # still uses the claim), the claim once the Job has 2 indexes.
    pytest.param(Case((2, 2), (3, 3), pod_scope="Delete", claims=range(3)),
                 {"patch": {"js-workers-0": _sizes(2)}},
                 id="pod-scope-down-job-first-claim-kept-while-used"),
    pytest.param(Case((2, 2), (2, 2), pod_scope="Delete", claims=range(3)),
                 {"delete_claims": ["ckpt-js-workers-0-2"]},
                 id="pod-scope-down-whenScaled-Delete-claim-deleted"),
    pytest.param(Case((2, 2), (2, 2), pod_scope="Retain", claims=range(3)), {},
                 id="pod-scope-down-whenScaled-Retain-claim-kept"),
    # Gate off: the Job keeps 3 indexes, so does the claim of index 2, whatever whenScaled says.
    pytest.param(Case((2, 2), (3, 3), gate=False, pod_scope="Delete", claims=range(3)),
                 {"condition": ("True", elastic.REASON_GATE_OFF),
                  "events": [elastic.REASON_GATE_OFF]},
                 id="pod-scope-gate-off-claims-of-running-indexes-kept"),
]
# fmt: on


@pytest.mark.parametrize(("case", "expected"), CASES)
def test_resize(case: Case, expected: Obj) -> None:
    assert _summary(_run(copy.deepcopy(case))) == expected


def test_pods_in_use_is_the_largest_completions_per_replicated_job() -> None:
    jobset = model.parse(make_jobset_obj(replicated_jobs=[rjob("a", 2), rjob("b")]))
    jobs = [make_job(jobset, "a", 0), make_job(jobset, "a", 1), make_job(jobset, "b", 0)]
    jobs[0]["spec"]["completions"], jobs[1]["spec"]["completions"] = 5, 3
    assert elastic.pods_in_use(job_views(jobs)) == {"a": 5, "b": 1}
