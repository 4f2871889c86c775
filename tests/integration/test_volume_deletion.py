"""Deleting JobSets with volume claims, and claim events, against a real API server.

Issue 12: a JobSet that became invalid is still finalised (retention on what can be proved, the
rest kept); ``--cascade=orphan`` keeps the claims; a conflict is re-evaluated when the other claim
goes (the claim event reaches the JobSets that want its name, and only those).
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.jobset import api, volumes
from controller.jobset.metrics import JobSetMetrics
from controller.jobset.model import parse
from controller.jobset.volumes.io import VolumeIO
from controller.jobset.volumes.lifecycle import ClaimDelete
from controller.jobset.volumes.model import (
    CLAIM_TEMPLATE_LABEL,
    OWNER_UID_ANNOTATION,
    RETAINED_FROM_ANNOTATION,
)
from controller.jobset.volumes.observed import ClaimView
from controller.runtime.client import CLAIMS, EVENTS, ApiError, KubeClient
from tests.helpers import wait_for
from tests.support.admission import BINDINGS, POLICIES
from tests.support.jobsets import (
    RunningController,
    condition,
    get_jobset,
    jobs_of,
    jobset,
    reconciles,
    replicated_job,
    settled,
    wait_condition,
    wait_jobs,
    with_mounts,
)

Obj = dict[str, Any]

CLAIM_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


def template(name: str) -> Obj:
    return {"metadata": {"name": name}, "spec": CLAIM_SPEC}


async def jobset_gone(client: KubeClient, namespace: str, name: str) -> None:
    async def names() -> list[str]:
        return [j["metadata"]["name"] for j in (await client.list(api.JOBSETS, namespace))["items"]]

    await wait_for(names, lambda found: name not in found, f"JobSet {name} to be deleted")


async def claims_by_name(client: KubeClient, namespace: str) -> dict[str, Obj]:
    return {c["metadata"]["name"]: c for c in (await client.list(CLAIMS, namespace))["items"]}


def assert_retained(claim: Obj, uid: str) -> None:
    """Kept as ``whenDeleted: Retain`` keeps a claim: alive, no ownerReference to the JobSet (the
    garbage collector would delete it), the JobSet's uid recorded for a later adoption."""
    meta = claim["metadata"]
    assert not meta.get("deletionTimestamp"), f"claim {meta['name']} was deleted"
    assert not any(r.get("uid") == uid for r in meta.get("ownerReferences") or []), meta
    assert (meta.get("annotations") or {}).get(RETAINED_FROM_ANNOTATION) == uid, meta


async def events_about(client: KubeClient, namespace: str, name: str, reason: str) -> list[Obj]:
    listed = (await client.list(EVENTS, namespace))["items"]
    return [
        e for e in listed if e["involvedObject"].get("name") == name and e.get("reason") == reason
    ]


async def set_replicas(client: KubeClient, namespace: str, name: str, replicas: int) -> None:
    rjobs = (await get_jobset(client, namespace, name))["spec"]["replicatedJobs"]
    rjobs[0]["replicas"] = replicas
    await client.patch(api.JOBSETS, name, {"spec": {"replicatedJobs": rjobs}}, namespace)


def growing(name: str) -> Obj:
    """Three Job-scope templates (deleted with the JobSet) and a JobSet-scope one (retained).
    Raising ``replicas`` to 4,000 asks for 12,001 claims: more than the controller plans
    (``MAX_CLAIMS``), admitted by the API server (at most 10,000 child Jobs)."""
    return jobset(
        name,
        with_mounts(replicated_job("workers", 1), "a", "b", "c", "keep"),
        volumeClaimPolicies=[
            {"scope": "Job", "templates": [template("a"), template("b"), template("c")]},
            {"templates": [template("keep")], "retentionPolicy": {"whenDeleted": "Retain"}},
        ],
    )


async def test_jobset_that_became_invalid_is_deleted_with_its_retention(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Deletion does not depend on parsing the spec: a JobSet made SpecInvalid by raising
    replicas is finalised, its whenDeleted: Delete claims deleted and the Retain one kept.
    Before, the reconcile stopped at the parse error and the finalizer was never removed."""
    name = "grown"
    await client.create(api.JOBSETS, growing(name), namespace)
    await wait_jobs(client, namespace, name, 1)
    uid = (await get_jobset(client, namespace, name))["metadata"]["uid"]
    deleted = [f"{t}-{name}-workers-0" for t in ("a", "b", "c")]
    assert sorted(await claims_by_name(client, namespace)) == [*deleted, f"keep-{name}"]

    await set_replicas(client, namespace, name, 4000)
    invalid = await wait_condition(client, namespace, name, "SpecInvalid")
    assert "12001 claims" in condition(invalid, "SpecInvalid")["message"]  # type: ignore[index]

    await client.delete(api.JOBSETS, name, namespace)
    await jobset_gone(client, namespace, name)
    claims = await claims_by_name(client, namespace)
    for claim_name in deleted:
        assert claims[claim_name]["metadata"].get("deletionTimestamp"), claim_name
    assert_retained(claims[f"keep-{name}"], uid)


async def test_owned_claim_without_readable_policy_is_kept(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """A claim the JobSet owns (name label and uid annotation) whose template is not in the spec:
    no policy says what to do with it, so deletion keeps it (ownerReference removed, uid
    recorded) and says so in a Warning Event. Before, its ownerReference stayed and the garbage
    collector deleted it with the JobSet."""
    name = "spare"
    body = jobset(
        name,
        with_mounts(replicated_job("workers", 1), "data"),
        volumeClaimPolicies=[{"templates": [template("data")]}],
    )
    await client.create(api.JOBSETS, body, namespace)
    await wait_jobs(client, namespace, name, 1)
    js = await get_jobset(client, namespace, name)
    uid = js["metadata"]["uid"]
    stray = {
        "metadata": {
            "name": "gone-spare",
            "labels": {api.JOBSET_NAME: name, CLAIM_TEMPLATE_LABEL: "gone"},
            "annotations": {OWNER_UID_ANNOTATION: uid},
            # As on the claims it makes with whenDeleted: Delete (the garbage collector's hold).
            "ownerReferences": [parse(js).owner_reference()],
        },
        "spec": CLAIM_SPEC,
    }
    await client.create(CLAIMS, stray, namespace)
    await settled(controller, client)

    await client.delete(api.JOBSETS, name, namespace)
    await jobset_gone(client, namespace, name)
    claims = await claims_by_name(client, namespace)
    assert claims[f"data-{name}"]["metadata"].get("deletionTimestamp"), "whenDeleted: Delete"
    assert_retained(claims["gone-spare"], uid)
    events = await wait_for(
        lambda: events_about(client, namespace, name, "ClaimRetained"),
        lambda found: any("gone-spare" in e["message"] for e in found),
        "an Event naming the kept claim",
    )
    kept = [e for e in events if "gone-spare" in e["message"]]
    assert [e["type"] for e in kept] == ["Warning"], kept
    assert "gone" in kept[0]["message"], kept  # names the template no policy has


async def test_spec_invalid_clears_once_valid_again(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """SpecInvalid=True turns False when an edit makes the JobSet valid again, and the JobSet
    proceeds. Before, the condition stayed True forever."""
    name = "regrown"
    await client.create(api.JOBSETS, growing(name), namespace)
    await wait_jobs(client, namespace, name, 1)
    await set_replicas(client, namespace, name, 4000)
    await wait_condition(client, namespace, name, "SpecInvalid")
    await set_replicas(client, namespace, name, 2)
    await wait_condition(client, namespace, name, "SpecInvalid", status="False")
    await wait_jobs(client, namespace, name, 2)


async def test_orphan_deletion_keeps_claims(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """``kubectl delete --cascade=orphan`` leaves the Jobs (and their pods) running: their claims
    are kept as whenDeleted: Retain keeps them, whatever the policy says (here the default
    whenDeleted: Delete). Before, the claims were deleted under the running pods."""
    name = "orphaner"
    body = jobset(
        name,
        with_mounts(replicated_job("workers", 2), "data", "ckpt"),
        volumeClaimPolicies=[
            {"templates": [template("data")]},
            {"scope": "Job", "templates": [template("ckpt")]},
        ],
    )
    await client.create(api.JOBSETS, body, namespace)
    await wait_jobs(client, namespace, name, 2)
    uid = (await get_jobset(client, namespace, name))["metadata"]["uid"]
    await client.delete(api.JOBSETS, name, namespace, propagation="Orphan")

    # The API server adds the "orphan" finalizer; the garbage collector (absent here) removes it.
    done = await wait_for(
        lambda: get_jobset(client, namespace, name),
        lambda js: volumes.FINALIZER not in (js["metadata"].get("finalizers") or []),
        "the volume-retention finalizer to be removed",
    )
    assert "orphan" in done["metadata"]["finalizers"]
    claims = await claims_by_name(client, namespace)
    assert sorted(claims) == [f"ckpt-{name}-workers-0", f"ckpt-{name}-workers-1", f"data-{name}"]
    for claim in claims.values():
        assert_retained(claim, uid)
    assert len(await jobs_of(client, namespace, name)) == 2
    await client.patch(api.JOBSETS, name, {"metadata": {"finalizers": None}}, namespace)
    await jobset_gone(client, namespace, name)


def claiming(name: str, template_name: str) -> Obj:
    return jobset(
        name,
        with_mounts(replicated_job("workers", 1), template_name),
        volumeClaimPolicies=[{"templates": [template(template_name)]}],
    )


async def test_conflict_with_another_jobsets_claim_clears_when_it_goes(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """JobSet ``b`` (template ``t-a``) and JobSet ``a-b`` (template ``t``) both want the claim
    ``t-a-b``: ``b`` made it, ``a-b`` is blocked by a conflict. Once ``b`` and its claim are
    gone, ``a-b`` proceeds by itself. Nothing else would reconcile ``a-b`` (the controller is
    settled with nothing scheduled, there is no periodic resync): the claim's delete event must
    reach the JobSet that wants its name. Before, it reached only ``b`` (the claim's label)."""
    await client.create(api.JOBSETS, claiming("b", "t-a"), namespace)
    await wait_jobs(client, namespace, "b", 1)
    await client.create(api.JOBSETS, claiming("a-b", "t"), namespace)
    conflicted = await wait_condition(client, namespace, "a-b", "VolumeClaimConflict")
    assert "t-a-b" in condition(conflicted, "VolumeClaimConflict")["message"]  # type: ignore[index]
    await settled(controller, client, quiet=True)
    assert await jobs_of(client, namespace, "a-b") == []

    await client.delete(api.JOBSETS, "b", namespace)
    await jobset_gone(client, namespace, "b")
    # Without kube-controller-manager the pvc-protection finalizer must be lifted by hand.
    await client.patch(CLAIMS, "t-a-b", {"metadata": {"finalizers": None}}, namespace)
    await wait_jobs(client, namespace, "a-b", 1)
    await wait_condition(client, namespace, "a-b", "VolumeClaimConflict", status="False")
    uid = (await get_jobset(client, namespace, "a-b"))["metadata"]["uid"]
    claim = await client.get(CLAIMS, "t-a-b", namespace)
    assert claim["metadata"]["annotations"][OWNER_UID_ANNOTATION] == uid


async def test_unrelated_claim_event_reconciles_no_jobset(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """A claim event is mapped to the JobSets that want the claim's name (or that it is
    labelled for), not to every JobSet of the namespace. Before, a claim without the name label
    enqueued every JobSet of its namespace."""
    await client.create(api.JOBSETS, claiming("quiet", "data"), namespace)
    await wait_jobs(client, namespace, "quiet", 1)
    await settled(controller, client, quiet=True)
    before = reconciles(controller.manager)
    unrelated = {"metadata": {"name": "unrelated", "labels": {"owner": "someone-else"}}}
    await client.create(CLAIMS, {**unrelated, "spec": CLAIM_SPEC}, namespace)
    await client.delete(CLAIMS, "unrelated", namespace)
    await client.patch(CLAIMS, "unrelated", {"metadata": {"finalizers": None}}, namespace)
    await settled(controller, client, quiet=True)
    assert reconciles(controller.manager) == before


async def refuses_deletes(client: KubeClient, namespace: str) -> bool:
    """Whether the API server refuses to delete a probe claim yet (an admission policy takes a
    moment to be enforced): the probe is made again when it was deleted."""
    probe = {"metadata": {"name": "probe"}, "spec": CLAIM_SPEC}
    try:
        await client.create(CLAIMS, probe, namespace)
    except ApiError as err:
        if not err.already_exists:
            raise
    try:
        await client.delete(CLAIMS, "probe", namespace)
    except ApiError as err:
        if err.status in (403, 422):  # a policy's denial: Forbidden, or Invalid by default
            return True
        raise
    # Deleted (pvc-protection keeps it Terminating in this tier: no kube-controller-manager).
    await client.patch(CLAIMS, "probe", {"metadata": {"finalizers": None}}, namespace)
    await wait_for(
        lambda: claims_by_name(client, namespace), lambda c: "probe" not in c, "probe gone"
    )
    return False


async def test_refused_claim_delete_while_deleting_is_an_event_and_a_retry(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """A JobSet being deleted has no status to carry a refused write: the API server's refusal
    (here a ValidatingAdmissionPolicy that forbids deleting the claim) becomes a Warning Event
    naming the claim and the API's message, the finalizer stays, and once the refusal is lifted
    the retry completes the deletion."""
    name, claim = "guarded", "data-guarded"
    body = jobset(
        name,
        with_mounts(replicated_job("workers", 1), "data"),
        volumeClaimPolicies=[{"templates": [template("data")]}],
    )
    await client.create(api.JOBSETS, body, namespace)
    await wait_jobs(client, namespace, name, 1)
    policy = f"keep-claims-{namespace}"
    await client.create(
        POLICIES,
        {
            "metadata": {"name": policy},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["DELETE"],
                            "resources": ["persistentvolumeclaims"],
                        }
                    ]
                },
                "validations": [
                    {"expression": "false", "message": "claims of this namespace are kept"}
                ],
            },
        },
    )
    await client.create(
        BINDINGS,
        {
            "metadata": {"name": policy},
            "spec": {
                "policyName": policy,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
                },
            },
        },
    )
    try:
        await wait_for(
            lambda: refuses_deletes(client, namespace),
            bool,
            "the admission policy to refuse claim deletes",
        )
        await client.delete(api.JOBSETS, name, namespace)
        refused = await wait_for(
            lambda: events_about(client, namespace, name, "ClaimDeletionFailed"),
            bool,
            "a Warning Event ClaimDeletionFailed",
        )
        assert refused[0]["type"] == "Warning"
        assert claim in refused[0]["message"], refused[0]
        assert "claims of this namespace are kept" in refused[0]["message"], refused[0]
        still = await get_jobset(client, namespace, name)
        assert volumes.FINALIZER in still["metadata"]["finalizers"]
    finally:
        await client.delete(BINDINGS, policy)
        await client.delete(POLICIES, policy)
    await jobset_gone(client, namespace, name)
    claims = await claims_by_name(client, namespace)
    assert claims[claim]["metadata"].get("deletionTimestamp"), claims[claim]


async def test_a_claim_delete_never_reaches_another_object_or_version_than_the_one_judged(
    client: KubeClient, namespace: str
) -> None:
    """Retention decides on the cached claim; the cache may be behind. The DELETE carries the
    judged claim's uid and resourceVersion as preconditions: a claim made again under the name
    since (no snapshot or proof covers it), or changed since (seen Pending, so deleted without a
    snapshot, and bound meanwhile), is refused with 409 and kept; the claim as judged is deleted."""
    jobset_obj = {"metadata": {"name": "js", "namespace": namespace, "uid": "u"}}
    deleted: list[str] = []
    io = VolumeIO(
        client,
        JobSetMetrics(None),
        lambda _obj, _type, reason, message: deleted.append(f"{reason}: {message}"),
        index="jobset-name",
    )
    claim = {"metadata": {"name": "data-js"}, "spec": CLAIM_SPEC}
    judged = ClaimView.of(await client.create(CLAIMS, claim, namespace))
    # The name now holds another claim: the judged one was deleted (pvc-protection let go, as
    # kube-controller-manager does once no pod uses it) and a new one made.
    await client.delete(CLAIMS, "data-js", namespace)
    await client.patch(CLAIMS, "data-js", {"metadata": {"finalizers": None}}, namespace)
    await wait_for(
        lambda: claims_by_name(client, namespace), lambda c: "data-js" not in c, "the claim to go"
    )
    again = ClaimView.of(await client.create(CLAIMS, claim, namespace))
    with pytest.raises(ApiError) as refused:
        await io.delete_claim(jobset_obj, ClaimDelete.of(judged))
    assert refused.value.conflict, refused.value
    assert (await client.get(CLAIMS, "data-js", namespace))["metadata"]["uid"] == again.uid
    # The same claim, changed since it was judged (here: bound, as the PV controller would).
    await client.patch(
        CLAIMS, "data-js", {"status": {"phase": "Bound"}}, namespace, subresource="status"
    )
    with pytest.raises(ApiError) as stale:
        await io.delete_claim(jobset_obj, ClaimDelete.of(again))
    assert stale.value.conflict, stale.value
    current = await client.get(CLAIMS, "data-js", namespace)
    assert not current["metadata"].get("deletionTimestamp")
    assert deleted == []
    # The claim as it is now: deleted.
    await io.delete_claim(jobset_obj, ClaimDelete.of(ClaimView.of(current)))
    assert deleted == ["ClaimDeleted: deleted claim data-js"]
    gone = await client.get(CLAIMS, "data-js", namespace)
    assert gone["metadata"]["uid"] == again.uid and gone["metadata"].get("deletionTimestamp")
