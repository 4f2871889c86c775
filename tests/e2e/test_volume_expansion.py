"""Claim expansion end to end: only Bound claims are resized, and retained claims may grow.

Kubernetes refuses to resize a claim that is not Bound (422), so a storage request raised while a
claim is Pending (WaitForFirstConsumer, no pod yet) must wait for the binding, without blocking
anything else the JobSet does. A retained claim smaller than the template of the JobSet that
re-applies it is adopted and then expanded when its class allows expansion; on a class that cannot
expand it stays a conflict.
"""

from __future__ import annotations

from typing import Any

from controller.jobset import api
from controller.jobset.volumes.model import OWNER_UID_ANNOTATION, RETAINED_FROM_ANNOTATION
from controller.runtime.client import CLAIMS, KubeClient
from tests.helpers import Kube, wait_for
from tests.support.jobsets import (
    condition,
    get_jobset,
    jobs_of,
    jobset,
    replicated_job,
    settled_process,
    with_pod_annotations,
)
from tests.support.volumes_e2e import (
    RUN_DURATION,
    ControllerProcesses,
    capacity,
    claim_template,
    events_of,
    find,
    mounting,
    phase,
    quantity,
    raise_storage,
    wait_claim_phase,
    wait_event,
    wait_gone,
    wait_jobset,
)

Obj = dict[str, Any]

EXPANSION_BLOCKED = "VolumeExpansionBlocked"


def _requested(claim: Obj | None) -> str:
    return str(
        (((claim or {}).get("spec") or {}).get("resources") or {})
        .get("requests", {})
        .get("storage", "")
    )


async def test_a_pending_claim_grows_once_bound_and_does_not_wedge_the_jobset(
    controller: ControllerProcesses, client: KubeClient, full_kube: Kube, full_namespace: str
) -> None:
    """Issue 12, item 3: a suspended JobSet whose gated replicated job mounts a Pending claim."""
    ns = full_namespace
    name, claim_name = "lazy", "data-lazy"
    initializer = with_pod_annotations(replicated_job("initializer", 1), **{RUN_DURATION: "2s"})
    trainer = mounting(
        with_pod_annotations(
            replicated_job("trainer", 1, dependsOn=[{"name": "initializer", "status": "Complete"}]),
            **{RUN_DURATION: "8s"},
        ),
        "data",
    )
    body = jobset(
        name,
        initializer,
        trainer,
        suspend=True,
        volumeClaimPolicies=[
            {
                "templates": [claim_template("data", "1Gi", "wffc-expandable")],
                "creationPolicy": {"whenSuspended": "Create"},  # the claim exists while suspended
            }
        ],
    )
    await client.create(api.JOBSETS, body, ns)
    await wait_for(
        lambda: get_jobset(client, ns, name),
        lambda obj: (
            (condition(obj, "VolumesReady") or {}).get("reason") == "WaitingForFirstConsumer"
        ),
        "the claim to wait for its first consumer",
    )

    # Kubernetes cannot resize the Pending claim: the JobSet says it grows once bound.
    await raise_storage(client, ns, name, "2Gi")
    deferred = await wait_for(
        lambda: get_jobset(client, ns, name),
        lambda obj: (condition(obj, EXPANSION_BLOCKED) or {}).get("reason") == "ClaimNotBound",
        "VolumeExpansionBlocked to say the claim grows once it is bound",
    )
    blocked = condition(deferred, EXPANSION_BLOCKED) or {}
    assert blocked.get("status") == "True", blocked
    assert claim_name in blocked["message"] and "2Gi" in blocked["message"], blocked
    await settled_process(controller.replicas[-1], client, ns)
    pending = await client.get(CLAIMS, claim_name, ns)
    assert phase(pending) == "Pending", pending.get("status")
    assert quantity(_requested(pending)) == quantity("1Gi"), "a Pending claim keeps its size"
    assert not any(e.reason == "ClaimExpanded" for e in await events_of(full_kube, ns, name))

    # Resume is applied, the gated trainer starts after the initializer, its pod binds the
    # claim, and then the claim is expanded while the trainer uses it.
    await client.patch(api.JOBSETS, name, {"spec": {"suspend": False}}, ns)
    bound = await wait_claim_phase(client, ns, claim_name, seconds=90)
    assert bound["metadata"]["uid"] == pending["metadata"]["uid"], "the same claim, not a new one"
    expanded = await wait_for(
        lambda: find(client, CLAIMS, claim_name, ns),
        lambda claim: capacity(claim) == quantity("2Gi"),
        f"claim {claim_name} to be expanded to 2Gi once bound",
        seconds=90,
    )
    assert quantity(_requested(expanded)) == quantity("2Gi")
    await wait_event(full_kube, ns, name, "ClaimExpanded", contains=claim_name)

    done = await wait_jobset(client, ns, name, api.COMPLETED)
    assert done["status"].get("restarts", 0) == 0
    jobs = {j["metadata"]["name"]: j for j in await jobs_of(client, ns, name)}
    assert sorted(jobs) == ["lazy-initializer-0", "lazy-trainer-0"]
    finished = await wait_for(
        lambda: get_jobset(client, ns, name),
        lambda obj: (condition(obj, EXPANSION_BLOCKED) or {}).get("status") == "False",
        "VolumeExpansionBlocked to clear once the claim grew",
    )
    assert (condition(finished, "VolumesReady") or {}).get("reason") == "ClaimsBound"
    controller.assert_clean()


def _reusing(name: str, data: str, scratch: str) -> Obj:
    """Two retained templates: ``data`` (mounted by the trainer) on a class that expands,
    ``scratch`` (mounted by the helper) on one that cannot."""
    trainer = mounting(
        with_pod_annotations(replicated_job("trainer", 1), **{RUN_DURATION: "3s"}), "data"
    )
    helper = mounting(
        with_pod_annotations(replicated_job("helper", 1), **{RUN_DURATION: "3s"}), "scratch"
    )
    retain = {"whenDeleted": "Retain"}
    return jobset(
        name,
        trainer,
        helper,
        volumeClaimPolicies=[
            {"templates": [claim_template("data", data, "expandable")], "retentionPolicy": retain},
            {"templates": [claim_template("scratch", scratch, "fixed")], "retentionPolicy": retain},
        ],
    )


async def test_a_retained_claim_smaller_than_the_template_is_adopted_and_expanded(
    controller: ControllerProcesses, client: KubeClient, full_kube: Kube, full_namespace: str
) -> None:
    """Issue 12, item 10: re-applying with a larger template adopts and expands on a class that
    allows expansion; on one that does not, the claim stays a conflict that says why."""
    ns = full_namespace
    name, data, scratch = "reuse", "data-reuse", "scratch-reuse"
    await client.create(api.JOBSETS, _reusing(name, "1Gi", "1Gi"), ns)
    first = await wait_jobset(client, ns, name, api.COMPLETED)
    first_uid = first["metadata"]["uid"]
    uids = {c: (await wait_claim_phase(client, ns, c))["metadata"]["uid"] for c in (data, scratch)}

    await client.delete(api.JOBSETS, name, ns)
    await wait_gone(client, api.JOBSETS, name, ns)
    for claim_name in (data, scratch):
        kept = await client.get(CLAIMS, claim_name, ns)
        assert kept["metadata"]["annotations"][RETAINED_FROM_ANNOTATION] == first_uid
    # The garbage collector takes the old Jobs, whose names the new JobSet's Jobs reuse.
    await wait_for(
        lambda: jobs_of(client, ns, name), lambda jobs: not jobs, "the old Jobs to be gone"
    )

    await client.create(api.JOBSETS, _reusing(name, "2Gi", "2Gi"), ns)
    second_uid = (await get_jobset(client, ns, name))["metadata"]["uid"]
    adopted = await wait_for(
        lambda: find(client, CLAIMS, data, ns),
        lambda claim: (
            ((claim or {}).get("metadata", {}).get("annotations") or {}).get(OWNER_UID_ANNOTATION)
            == second_uid
        ),
        f"the retained claim {data} to be adopted by the new JobSet",
    )
    assert adopted is not None and adopted["metadata"]["uid"] == uids[data]
    await wait_event(full_kube, ns, name, "ClaimAdopted", contains=data)
    expanded = await wait_for(
        lambda: find(client, CLAIMS, data, ns),
        lambda claim: capacity(claim) == quantity("2Gi"),
        f"the adopted claim {data} to be expanded to 2Gi",
    )
    assert expanded is not None and expanded["metadata"]["uid"] == uids[data]
    await wait_event(full_kube, ns, name, "ClaimExpanded", contains=data)

    # The claim on the fixed class cannot grow: a conflict that names the class, never written.
    conflicted = await wait_jobset(client, ns, name, "VolumeClaimConflict")
    message = (condition(conflicted, "VolumeClaimConflict") or {}).get("message", "")
    assert scratch in message and "fixed" in message and "expansion" in message, message
    assert data not in message, message
    # The trainer mounting the adopted claim runs; the helper waits for its claim.
    await wait_for(
        lambda: get_jobset(client, ns, name),
        lambda obj: any(
            r.get("name") == "trainer" and r.get("succeeded") == 1
            for r in (obj.get("status") or {}).get("replicatedJobsStatus") or []
        ),
        "the trainer to succeed on the adopted, expanded claim",
    )
    await settled_process(controller.replicas[-1], client, ns)
    assert [j["metadata"]["name"] for j in await jobs_of(client, ns, name)] == ["reuse-trainer-0"]
    untouched = await client.get(CLAIMS, scratch, ns)
    assert untouched["metadata"]["uid"] == uids[scratch]
    assert untouched["metadata"]["annotations"][RETAINED_FROM_ANNOTATION] == first_uid
    assert OWNER_UID_ANNOTATION not in untouched["metadata"]["annotations"] or (
        untouched["metadata"]["annotations"][OWNER_UID_ANNOTATION] == first_uid
    )
    assert quantity(_requested(untouched)) == quantity("1Gi")
    controller.assert_clean()
