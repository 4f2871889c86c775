"""Pod-scope volumes end to end (issue 14): the controller as its own process, the shipped
admission policy installed, the Job controller making the pods, the scheduler placing them on
KWOK nodes and the test provisioner binding their WaitForFirstConsumer claims.

A replicated job of 2 Indexed Jobs x 3 pods gets 6 claims, and the pod with Job index j and
completion index p mounts ``ckpt-<jobset>-workers-<j>-<p>``: the Job's template names a
placeholder, and the API server's policy resolves it per pod. A JobSet restart keeps the claims
(same uids, same pod per claim); scaling down with ``whenScaled: Delete`` removes only the claims
of the Jobs beyond ``replicas``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from controller.jobset import api, volumes
from controller.jobset.volumes import admission
from controller.jobset.volumes import status as volume_status
from controller.jobset.volumes.admission import REASON_POLICY_MISSING
from controller.jobset.volumes.lifecycle import REASON_CLAIM_DELETED
from controller.jobset.volumes.model import (
    CLAIM_POD_INDEX_LABEL,
    CLAIM_SCOPE_LABEL,
    CLAIM_TEMPLATE_LABEL,
    POD_SCOPE_LABEL,
    SELECTED_NODE_ANNOTATION,
)
from controller.jobset.volumes.podscope import COMPLETION_INDEX_ANNOTATION, POLICY_NAME
from controller.jobset.volumes.record import uid_prefix
from controller.jobset.volumes.status import REASON_CLAIMS_BOUND
from controller.runtime.client import CLAIMS, PODS, KubeClient
from tests.helpers import Kube, wait_for
from tests.support.jobsets import (
    condition,
    get_jobset,
    jobset,
    replicated_job,
    settled_process,
    with_pod_annotations,
)
from tests.support.podscope import (
    ADMISSION,
    install_policy,
    policy_applies,
    policy_in_effect,
    wait_until_removed,
)
from tests.support.volumes_e2e import (
    EXIT_CODE,
    RUN_DURATION,
    VOLUMES,
    ControllerProcesses,
    claim_template,
    mounting,
    phase,
    pod_claims,
    pods_of,
    wait_claim_phase,
    wait_event,
    wait_gone,
    wait_live_jobs,
    wait_running_pods,
)

Obj = dict[str, Any]
Rank = tuple[int, int]  # (Job index, completion index)

NAME = "ranks"
JOBS, PODS_PER_JOB = 2, 3
# Longer than any test: the pods stay Running (and their claims in use) until the test acts.
FOREVER = "1h"


@pytest.fixture
async def policy(full_kube: Kube, full_namespace: str) -> AsyncIterator[None]:
    """The shipped policy and binding (controller/jobset/volumes/admission.py, as
    manifests/pod-scope installs them), applied by the API server; removed afterwards."""
    async with policy_in_effect(full_kube, full_namespace):
        yield


def ranks_jobset(**retention: str) -> Obj:
    """2 Indexed Jobs x 3 pods (parallelism 3), each pod mounting its Pod-scope ``ckpt`` claim of
    the WaitForFirstConsumer class; a failed pod fails its Job, which restarts the JobSet."""
    workers = replicated_job("workers", JOBS, completions=PODS_PER_JOB)
    workers["template"]["spec"]["completionMode"] = "Indexed"
    mounting(with_pod_annotations(workers, **{RUN_DURATION: FOREVER}), "ckpt")
    policy: Obj = {"scope": "Pod", "templates": [claim_template("ckpt", storage_class="wffc")]}
    if retention:
        policy["retentionPolicy"] = retention
    return jobset(NAME, workers, failurePolicy={"maxRestarts": 1}, volumeClaimPolicies=[policy])


def claim_name(rank: Rank) -> str:
    return f"ckpt-{NAME}-workers-{rank[0]}-{rank[1]}"


ALL_RANKS = [(j, p) for j in range(JOBS) for p in range(PODS_PER_JOB)]


def rank_of_pod(pod: Obj) -> Rank:
    """The pod's (Job index, completion index), as the Job controller and ours labelled it."""
    meta = pod["metadata"]
    return int(meta["labels"][api.JOB_INDEX]), int(meta["annotations"][COMPLETION_INDEX_ANNOTATION])


def rank_of_claim(claim: Obj) -> Rank:
    labels = claim["metadata"]["labels"]
    return int(labels[api.JOB_INDEX]), int(labels[CLAIM_POD_INDEX_LABEL])


async def live_claims(client: KubeClient, namespace: str) -> dict[str, Obj]:
    listed = await client.list(CLAIMS, namespace, label_selector=f"{api.JOBSET_NAME}={NAME}")
    return {
        c["metadata"]["name"]: c
        for c in listed["items"]
        if not c["metadata"].get("deletionTimestamp")
    }


async def running_by_rank(client: KubeClient, namespace: str, attempt: int) -> dict[Rank, Obj]:
    pods = await wait_running_pods(
        client, namespace, NAME, len(ALL_RANKS), f"{api.RESTART_ATTEMPT}={attempt}"
    )
    by_rank = {rank_of_pod(p): p for p in pods}
    assert sorted(by_rank) == ALL_RANKS, sorted(by_rank)
    return by_rank


async def running_by_rank_of_job(client: KubeClient, namespace: str, job: int) -> dict[Rank, Obj]:
    running = await wait_running_pods(
        client, namespace, NAME, PODS_PER_JOB, f"{api.JOB_INDEX}={job}"
    )
    return {rank_of_pod(p): p for p in running}


def assert_each_pod_mounts_its_claim(pods: dict[Rank, Obj]) -> None:
    for rank, pod in pods.items():
        assert pod_claims(pod["spec"]) == {"ckpt": claim_name(rank)}, pod["metadata"]["name"]


async def bound_claims(client: KubeClient, namespace: str, ranks: list[Rank]) -> dict[Rank, Obj]:
    return {r: await wait_claim_phase(client, namespace, claim_name(r)) for r in ranks}


def compact_status(uids: dict[Rank, str]) -> Obj:
    """``status.volumes`` of the JobSet with these claims, all Bound: one count entry for the
    template, one uid-record entry for the replicated job (prefixes by Job, then pod index)."""
    jobs = sorted({j for j, _ in uids})
    record = ";".join(",".join(uid_prefix(uids[(j, p)]) for p in range(PODS_PER_JOB)) for j in jobs)
    count = len(uids)
    return {
        "templates": [
            {
                "name": "ckpt",
                "scope": "Pod",
                "desired": count,
                "existing": count,
                "bound": count,
                "pending": 0,
                "lost": 0,
                "conflicts": 0,
            }
        ],
        "claimUIDs": [
            {"template": "ckpt", "replicatedJob": "workers", "scope": "Pod", "uids": record}
        ],
    }


async def wait_status(client: KubeClient, namespace: str, uids: dict[Rank, str]) -> Obj:
    wanted = compact_status(uids)
    return await wait_for(
        lambda: get_jobset(client, namespace, NAME),
        lambda obj: (obj.get("status") or {}).get("volumes") == wanted,
        f"status.volumes to be {wanted}",
    )


async def assert_bound_where_used(
    client: KubeClient, claims: dict[Rank, Obj], pods: dict[Rank, Obj]
) -> None:
    """Each claim's volume is on the node of the pod that mounts it (WaitForFirstConsumer)."""
    for rank, claim in claims.items():
        node = pods[rank]["spec"]["nodeName"]
        assert claim["metadata"]["annotations"][SELECTED_NODE_ANNOTATION] == node
        volume = await client.get(VOLUMES, claim["spec"]["volumeName"])
        terms = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
        assert terms[0]["matchExpressions"][0]["values"] == [node], claim_name(rank)


# -------------------------------------------------------------------------------------- tests


@pytest.mark.usefixtures("policy")
async def test_each_pod_mounts_its_own_claim_and_a_restart_keeps_them(
    controller: ControllerProcesses, client: KubeClient, full_kube: Kube, full_namespace: str
) -> None:
    ns = full_namespace
    await client.create(api.JOBSETS, ranks_jobset(), ns)

    # 6 claims, one per (Job index, completion index), labelled with both.
    claims = await wait_for(
        lambda: live_claims(client, ns),
        lambda found: len(found) == len(ALL_RANKS),
        f"the {len(ALL_RANKS)} Pod-scope claims",
    )
    assert sorted(claims) == sorted(claim_name(r) for r in ALL_RANKS)
    for name, claim in claims.items():
        assert claim_name(rank_of_claim(claim)) == name
        labels = claim["metadata"]["labels"]
        assert labels[CLAIM_SCOPE_LABEL] == "Pod", name
        assert labels[CLAIM_TEMPLATE_LABEL] == "ckpt", name
        assert labels[api.REPLICATED_JOB_NAME] == "workers", name
        assert claim["spec"]["storageClassName"] == "wffc", name

    # The Jobs name the placeholder; each pod was given its own claim at admission.
    for job in await wait_live_jobs(client, ns, NAME, JOBS, attempt=0):
        index = job["metadata"]["labels"][api.JOB_INDEX]
        assert pod_claims(job["spec"]["template"]["spec"]) == {
            "ckpt": f"ckpt-{NAME}-workers-{index}-POD-INDEX"
        }
    first_pods = await running_by_rank(client, ns, attempt=0)
    assert_each_pod_mounts_its_claim(first_pods)

    # All bind, each where its pod was scheduled; the status stays one entry per template.
    bound = await bound_claims(client, ns, ALL_RANKS)
    await assert_bound_where_used(client, bound, first_pods)
    uids = {r: c["metadata"]["uid"] for r, c in bound.items()}
    ready = await wait_status(client, ns, uids)
    ready_condition = condition(ready, volume_status.VOLUMES_READY) or {}
    assert (ready_condition.get("status"), ready_condition.get("reason")) == (
        "True",
        REASON_CLAIMS_BOUND,
    ), ready_condition

    # One pod fails (KWOK's fail stage), its Job fails (backoffLimit 0): the JobSet restarts.
    failing = first_pods[(1, 2)]["metadata"]["name"]
    await client.patch(PODS, failing, {"metadata": {"annotations": {EXIT_CODE: "42"}}}, ns)
    await wait_live_jobs(client, ns, NAME, JOBS, attempt=1)
    second_pods = await running_by_rank(client, ns, attempt=1)
    assert {p["metadata"]["uid"] for p in second_pods.values()}.isdisjoint(
        p["metadata"]["uid"] for p in first_pods.values()
    )
    assert_each_pod_mounts_its_claim(second_pods)

    # The same claims: none recreated, none added, each Bound where its new pod runs.
    after = await live_claims(client, ns)
    assert {rank_of_claim(c): c["metadata"]["uid"] for c in after.values()} == uids
    again = await bound_claims(client, ns, ALL_RANKS)
    await assert_bound_where_used(client, again, second_pods)
    restarted = await wait_status(client, ns, uids)
    assert restarted["status"]["restarts"] == 1
    controller.assert_clean()


@pytest.mark.usefixtures("policy")
async def test_scaling_down_deletes_only_the_claims_beyond_replicas(
    controller: ControllerProcesses, client: KubeClient, full_kube: Kube, full_namespace: str
) -> None:
    ns = full_namespace
    await client.create(api.JOBSETS, ranks_jobset(whenScaled="Delete"), ns)
    pods = await running_by_rank(client, ns, attempt=0)
    assert_each_pod_mounts_its_claim(pods)
    bound = await bound_claims(client, ns, ALL_RANKS)
    uids = {r: c["metadata"]["uid"] for r, c in bound.items()}
    await wait_status(client, ns, uids)

    # replicas may be lowered (an extension over upstream, where replicatedJobs is immutable).
    js = await get_jobset(client, ns, NAME)
    rjobs = js["spec"]["replicatedJobs"]
    rjobs[0]["replicas"] = 1
    await client.patch(api.JOBSETS, NAME, {"spec": {"replicatedJobs": rjobs}}, ns)

    kept = [r for r in ALL_RANKS if r[0] == 0]
    gone = [r for r in ALL_RANKS if r[0] == 1]
    for rank in gone:
        await wait_gone(client, CLAIMS, claim_name(rank), ns)
    await wait_event(full_kube, ns, NAME, REASON_CLAIM_DELETED, contains=claim_name(gone[0]))
    jobs = await wait_live_jobs(client, ns, NAME, 1)
    assert jobs[0]["metadata"]["labels"][api.JOB_INDEX] == "0"

    remaining = await live_claims(client, ns)
    assert {rank_of_claim(c): c["metadata"]["uid"] for c in remaining.values()} == {
        r: uids[r] for r in kept
    }
    for rank in kept:
        assert phase(remaining[claim_name(rank)]) == "Bound", claim_name(rank)
    await wait_status(client, ns, {r: uids[r] for r in kept})
    # Job 0's pods ran on undisturbed, with their claims.
    still = await running_by_rank_of_job(client, ns, 0)
    assert {r: p["metadata"]["uid"] for r, p in still.items()} == {
        r: pods[r]["metadata"]["uid"] for r in kept
    }
    controller.assert_clean()


async def test_installing_the_policy_releases_a_held_jobset(
    controller: ControllerProcesses, client: KubeClient, full_kube: Kube, full_namespace: str
) -> None:
    """The operator's way (docs/volumes.md): a Pod-scope JobSet created before the policy waits
    with PodScopePolicyMissing; ``kubectl apply`` of manifests/pod-scope, and nothing else, lets
    every pod run with its own claim. (Before the controller gave a new policy time to load, the
    Jobs came at once and their pods, admitted before the API server applied it, kept the
    placeholder for good: 6 runs of 7.)"""
    ns = full_namespace
    await wait_until_removed(full_kube, ns)  # not installed, and no longer applied
    try:
        await client.create(api.JOBSETS, ranks_jobset(), ns)
        await wait_for(
            lambda: get_jobset(client, ns, NAME),
            lambda obj: (
                (condition(obj, volume_status.VOLUMES_READY) or {}).get("reason")
                == REASON_POLICY_MISSING
            ),
            f"VolumesReady to say {REASON_POLICY_MISSING}",
        )
        await settled_process(controller.replicas[-1], client, ns)
        assert await live_claims(client, ns) == {}
        assert await pods_of(client, ns, NAME) == []

        install_policy(full_kube)
        made = await wait_for(
            lambda: pods_of(client, ns, NAME),
            lambda found: len(found) == len(ALL_RANKS),
            f"the {len(ALL_RANKS)} pods",
        )
        # A pod admitted before the API server applied the new policy keeps the placeholder.
        assert_each_pod_mounts_its_claim({rank_of_pod(p): p for p in made})
        pods = await running_by_rank(client, ns, attempt=0)
        assert_each_pod_mounts_its_claim(pods)
        await bound_claims(client, ns, ALL_RANKS)
        controller.assert_clean()
    finally:
        await wait_until_removed(full_kube, ns)


async def test_pods_the_policy_did_not_rewrite_are_reported_and_recovered(
    controller: ControllerProcesses, client: KubeClient, full_kube: Kube, full_namespace: str
) -> None:
    """What the policy objects cannot show, the pods do. A binding narrowed (``matchResources``)
    to other namespaces passes the object check; the JobSet's pods are admitted with the
    placeholder and wait. The JobSet says PodScopePodsUnresolved, naming them; fixing the binding
    and then suspending and resuming the JobSet (the message's way out) gives every pod its own
    claim, without a restart counted."""
    ns = full_namespace
    await wait_until_removed(full_kube, ns)
    bindings = f"{ADMISSION}/mutatingadmissionpolicybindings"
    try:
        install_policy(full_kube)
        await full_kube.raw("DELETE", f"{bindings}/{POLICY_NAME}")
        narrowed = admission.binding()
        narrowed["spec"]["matchResources"] = {
            "namespaceSelector": {"matchLabels": {"pod-scope-e2e": "elsewhere"}}
        }
        created = await full_kube.raw("POST", bindings, narrowed)
        assert created.get("kind") == "MutatingAdmissionPolicyBinding", created
        await wait_for(
            lambda: policy_applies(full_kube, ns),
            lambda applies: not applies,
            "the narrowed binding to leave this namespace out",
        )
        await client.create(api.JOBSETS, ranks_jobset(), ns)
        held = await wait_for(
            lambda: get_jobset(client, ns, NAME),
            lambda obj: (
                (condition(obj, volume_status.VOLUMES_READY) or {}).get("reason")
                == admission.REASON_PODS_UNRESOLVED
            ),
            f"VolumesReady to say {admission.REASON_PODS_UNRESOLVED}",
        )
        message = (condition(held, volume_status.VOLUMES_READY) or {})["message"]
        stuck = await pods_of(client, ns, NAME)
        assert stuck, "no pod was made"
        for pod in stuck:
            claims = pod_claims(pod["spec"])
            assert any(n.endswith("-POD-INDEX") for n in claims.values()), claims
        assert any(p["metadata"]["name"] in message for p in stuck), message
        assert f"excludes namespace '{ns}'" in message, message
        await wait_event(
            full_kube, ns, NAME, admission.REASON_PODS_UNRESOLVED, event_type="Warning"
        )

        # The fix: the shipped binding, then the JobSet suspended and resumed.
        await full_kube.raw("DELETE", f"{bindings}/{POLICY_NAME}")
        install_policy(full_kube)
        await wait_for(
            lambda: policy_applies(full_kube, ns),
            lambda applies: applies,
            "the shipped binding to apply the policy here again",
        )
        await client.patch(api.JOBSETS, NAME, {"spec": {"suspend": True}}, ns)
        await wait_for(
            lambda: pods_of(client, ns, NAME),
            lambda found: found == [],
            "the suspended Jobs' pods to be gone",
        )
        await client.patch(api.JOBSETS, NAME, {"spec": {"suspend": False}}, ns)
        pods = await running_by_rank(client, ns, attempt=0)
        assert_each_pod_mounts_its_claim(pods)
        await bound_claims(client, ns, ALL_RANKS)
        done = await get_jobset(client, ns, NAME)
        assert (condition(done, volume_status.VOLUMES_READY) or {}).get("status") == "True", done
        assert done["status"].get("restarts", 0) == 0
        controller.assert_clean()
    finally:
        await wait_until_removed(full_kube, ns)


async def test_a_stray_pod_with_the_jobsets_labels_does_not_block_it(
    controller: ControllerProcesses, client: KubeClient, full_kube: Kube, full_namespace: str
) -> None:
    """A pod made by hand with the Pod-scope label, the JobSet's name label and an unresolved
    placeholder (admitted while the policy was not installed) is not the JobSet's: only pods of
    the JobSet's own Jobs count for PodScopePodsUnresolved, whose way out (suspend and resume
    the JobSet) could never clear this one. The JobSet runs, every pod with its own claim."""
    ns = full_namespace
    await wait_until_removed(full_kube, ns)
    placeholder = f"ckpt-{NAME}-workers-0-{volumes.podscope.PLACEHOLDER_SUFFIX}"
    stray: Obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "stray",
            "labels": {POD_SCOPE_LABEL: "true", api.JOBSET_NAME: NAME},
        },
        "spec": {
            "containers": [{"name": "main", "image": "busybox"}],
            "volumes": [{"name": "ckpt", "persistentVolumeClaim": {"claimName": placeholder}}],
        },
    }
    await client.create(PODS, stray, ns)
    try:
        install_policy(full_kube)
        await client.create(api.JOBSETS, ranks_jobset(), ns)
        pods = await running_by_rank(client, ns, attempt=0)
        assert_each_pod_mounts_its_claim(pods)
        await bound_claims(client, ns, ALL_RANKS)
        held = await get_jobset(client, ns, NAME)
        ready = condition(held, volume_status.VOLUMES_READY) or {}
        assert ready.get("reason") != admission.REASON_PODS_UNRESOLVED, ready
        assert (await client.get(PODS, "stray", ns))["spec"]["volumes"][0]["persistentVolumeClaim"][
            "claimName"
        ] == placeholder
        controller.assert_clean()
    finally:
        await wait_until_removed(full_kube, ns)
