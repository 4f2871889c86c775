"""Writes the API server refuses (issue 12, items 4 and 7): every pass still ends with a truthful
status, each refusal is a condition and a Warning Event naming the object and the API server's
reason, only the Jobs that need the missing object wait, and retries rewrite nothing."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.jobset import api
from controller.runtime.client import (
    CLAIMS,
    CONFIG_MAPS,
    EVENTS,
    JOBS,
    ApiError,
    KubeClient,
    Resource,
)
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

RESOURCE_QUOTAS = Resource("", "v1", "resourcequotas", "ResourceQuota")
VOLUMES_READY = "VolumesReady"
JOB_CREATION_FAILED = "JobCreationFailed"


def claim_policy(spec: Obj) -> Obj:
    return {"templates": [{"metadata": {"name": "data"}, "spec": spec}]}


def with_claim(name: str, spec: Obj) -> Obj:
    """``train`` mounts the JobSet-scope claim ``data-<name>``; ``free`` mounts nothing."""
    return jobset(
        name,
        with_mounts(replicated_job("train"), "data"),
        replicated_job("free"),
        volumeClaimPolicies=[claim_policy(spec)],
    )


async def set_quota(client: KubeClient, namespace: str, storage: str) -> None:
    """A storage quota the API server enforces. Without kube-controller-manager (this tier) the
    test writes the quota's status itself, as the quota controller would; admission then counts
    usage on its own."""
    name = "storage"
    hard = {"requests.storage": storage}
    try:
        quota = await client.get(RESOURCE_QUOTAS, name, namespace)
        quota["spec"]["hard"] = hard
        quota = await client.replace(RESOURCE_QUOTAS, quota, namespace)
    except Exception:
        body = {"metadata": {"name": name}, "spec": {"hard": hard}}
        quota = await client.create(RESOURCE_QUOTAS, body, namespace)
    used = (quota.get("status") or {}).get("used") or {"requests.storage": "0"}
    quota["status"] = {"hard": hard, "used": used}
    await client.replace(RESOURCE_QUOTAS, quota, namespace, subresource="status")


async def events_about(client: KubeClient, namespace: str, name: str, reason: str) -> list[Obj]:
    listed = (await client.list(EVENTS, namespace))["items"]
    return [
        e
        for e in listed
        if e["involvedObject"].get("name") == name
        and e["involvedObject"].get("kind") == api.KIND
        and e.get("reason") == reason
    ]


async def assert_retries_rewrite_nothing(
    running: RunningController, client: KubeClient, namespace: str, name: str, reason: str
) -> None:
    """The refused write is retried (rate-limited), but neither the status nor the Event is
    written again while nothing changed: the JobSet keeps its resourceVersion and the Warning
    Event its count of 1. First the counters the controller holds (status pacing: at most the
    longest hold) are written: a change of counters that went out late is not a retry's."""

    async def nothing_held() -> bool:
        memory = running.reconciler.memory(f"{namespace}/{name}")
        return memory is None or memory.held_since is None

    await wait_for(nothing_held, bool, "the held counters to be written")
    await settled(running, client)
    before = (await get_jobset(client, namespace, name))["metadata"]["resourceVersion"]
    seen = reconciles(running.manager)

    async def retried() -> float:
        return reconciles(running.manager) - seen

    # Two more retries; their backoff doubles each time (seconds apart by now).
    await wait_for(retried, lambda n: n >= 2, "two retries of the refused write", seconds=150)
    await settled(running, client)
    after = await get_jobset(client, namespace, name)
    assert after["metadata"]["resourceVersion"] == before, "a retry rewrote the status"
    events = await events_about(client, namespace, name, reason)
    assert [(e["type"], e.get("count", 1)) for e in events] == [("Warning", 1)], events


async def refused_claim_reported(
    running: RunningController, client: KubeClient, namespace: str, name: str, why: str
) -> Obj:
    """The JobSet whose claim ``data-<name>`` the API server refuses: VolumesReady says so with
    the API server's message, the unrelated ``free`` Job runs, ``train`` waits."""
    claim = f"data-{name}"

    async def observe() -> Obj:
        return await get_jobset(client, namespace, name)

    def reported(obj: Obj) -> bool:
        found = condition(obj, VOLUMES_READY)
        return found is not None and found.get("reason") == "PVCCreationFailed"

    js = await wait_for(observe, reported, f"VolumesReady=False PVCCreationFailed on {name}")
    ready = condition(js, VOLUMES_READY)
    assert ready is not None and ready["status"] == "False"
    assert claim in ready["message"] and why in ready["message"], ready
    # The rest of the status is there too: volumes and the replicated jobs.
    templates = js["status"]["volumes"]["templates"]
    assert [(t["name"], t["desired"], t.get("existing", 0)) for t in templates] == [("data", 1, 0)]
    assert sorted(r["name"] for r in js["status"]["replicatedJobsStatus"]) == ["free", "train"]

    jobs = await wait_jobs(client, namespace, name, 1)
    assert [j["metadata"]["name"] for j in jobs] == [f"{name}-free-0"]

    async def warnings() -> list[Obj]:
        return await events_about(client, namespace, name, "PVCCreationFailed")

    events = await wait_for(warnings, bool, "the PVCCreationFailed Event")
    assert claim in events[0]["message"] and why in events[0]["message"], events
    await assert_retries_rewrite_nothing(running, client, namespace, name, "PVCCreationFailed")
    assert [j["metadata"]["name"] for j in await jobs_of(client, namespace, name)] == [
        f"{name}-free-0"
    ]
    return js


async def test_quota_refused_claim_is_reported_and_unrelated_jobs_run(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    await set_quota(client, namespace, "1Gi")
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    await client.create(api.JOBSETS, with_claim("quota", spec), namespace)
    # The API server's message names the quota ("exceeded quota: storage, ...").
    await refused_claim_reported(controller, client, namespace, "quota", "exceeded quota: storage")

    # Raised quota: the claim is created (the quota's change retries the JobSet at once), then
    # the Job that mounts it.
    await set_quota(client, namespace, "100Gi")
    jobs = await wait_jobs(client, namespace, "quota", 2)
    assert [j["metadata"]["name"] for j in jobs] == ["quota-free-0", "quota-train-0"]
    js = await get_jobset(client, namespace, "quota")
    ready = condition(js, VOLUMES_READY)
    assert ready is not None and ready["reason"] == "ClaimsPending", ready


async def test_claim_template_the_api_refuses_is_reported(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    # The CRD does not check volumeMode; the API server refuses the claim with a 422.
    spec = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
        "volumeMode": "Bogus",
    }
    await client.create(api.JOBSETS, with_claim("badclaim", spec), namespace)
    await refused_claim_reported(controller, client, namespace, "badclaim", "spec.volumeMode")


async def test_job_the_api_refuses_is_reported_and_status_stays_truthful(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    bad = replicated_job("bad")
    # The CRD admits any restartPolicy; the Job API refuses "Always" with a 422.
    bad["template"]["spec"]["template"]["spec"]["restartPolicy"] = "Always"
    body = jobset("refused", replicated_job("ok"), bad, suspend=True)
    await client.create(api.JOBSETS, body, namespace)

    js = await wait_condition(client, namespace, "refused", JOB_CREATION_FAILED)
    failed = condition(js, JOB_CREATION_FAILED)
    assert failed is not None and failed["reason"] == api.REASON_JOB_CREATION_FAILED, failed
    assert "refused-bad-0" in failed["message"] and "restartPolicy" in failed["message"], failed
    suspended = condition(js, api.SUSPENDED)
    assert suspended is not None and suspended["status"] == "True", js["status"]
    jobs = await wait_jobs(client, namespace, "refused", 1)
    assert [j["metadata"]["name"] for j in jobs] == ["refused-ok-0"]

    async def warnings() -> list[Obj]:
        return await events_about(client, namespace, "refused", api.REASON_JOB_CREATION_FAILED)

    events = await wait_for(warnings, bool, "the JobCreationFailed Event")
    assert "refused-bad-0" in events[0]["message"] and "restartPolicy" in events[0]["message"]
    await assert_retries_rewrite_nothing(
        controller, client, namespace, "refused", api.REASON_JOB_CREATION_FAILED
    )

    # Resumed: Suspended turns False although one Job still cannot be created.
    await client.patch(api.JOBSETS, "refused", {"spec": {"suspend": False}}, namespace)
    js = await wait_condition(client, namespace, "refused", api.SUSPENDED, "False")
    failed = condition(js, JOB_CREATION_FAILED)
    assert failed is not None and failed["status"] == "True", js["status"]
    ok = await client.get(JOBS, "refused-ok-0", namespace)
    assert ok["spec"]["suspend"] is False


def foreign_job(name: str, jobset_name: str, labelled: bool = True) -> Obj:
    """A Job holding a name the JobSet needs, as ``--cascade=orphan`` leaves one (our labels, no
    owner), or another's Job of that name (no labels)."""
    labels = {api.JOBSET_NAME: jobset_name} if labelled else {"app": "someone-else"}
    pod = copy.deepcopy(replicated_job("x")["template"]["spec"]["template"])
    pod.setdefault("metadata", {})["labels"] = dict(labels)
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"backoffLimit": 0, "template": pod},
    }


@pytest.mark.usefixtures("controller")
async def test_job_name_held_by_a_job_not_ours_is_reported(
    client: KubeClient, namespace: str
) -> None:
    # Left by `kubectl delete jobset held --cascade=orphan`: our labels, no owner.
    await client.create(JOBS, foreign_job("held-a-0", "held"), namespace)
    # Our labels, another controller owns it.
    owner = await client.create(CONFIG_MAPS, {"metadata": {"name": "owner"}}, namespace)
    owned = foreign_job("held-a-1", "held")
    owned["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "owner",
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
    ]
    await client.create(JOBS, owned, namespace)
    # Someone else's Job, without our labels (only the create's 409 reveals it).
    await client.create(JOBS, foreign_job("held-a-2", "held", labelled=False), namespace)

    await client.create(api.JOBSETS, jobset("held", replicated_job("a", 4)), namespace)
    js = await wait_condition(client, namespace, "held", JOB_CREATION_FAILED)

    async def observe() -> Obj:
        return await get_jobset(client, namespace, "held")

    def names_all(obj: Obj) -> bool:
        found = condition(obj, JOB_CREATION_FAILED)
        return found is not None and all(f"held-a-{i}" in found["message"] for i in range(3))

    js = await wait_for(observe, names_all, "the condition to name the three Jobs")
    failed = condition(js, JOB_CREATION_FAILED)
    assert failed is not None and failed["reason"] == "JobConflict", failed
    assert "no owner" in failed["message"] and "ConfigMap owner" in failed["message"], failed
    # The Job whose name is free is created; the held names are not taken over.
    jobs = await wait_jobs(client, namespace, "held", 3)  # held-a-0, held-a-1 and ours
    mine = [j for j in jobs if j["metadata"].get("ownerReferences")]
    assert [j["metadata"]["name"] for j in mine if j["metadata"]["name"] != "held-a-1"] == [
        "held-a-3"
    ]

    async def warnings() -> list[Obj]:
        return await events_about(client, namespace, "held", "JobConflict")

    events = await wait_for(warnings, bool, "the JobConflict Event")
    assert "held-a-0" in events[0]["message"], events

    # Once the names are free, the JobSet's own Jobs are created and the condition clears.
    for i in range(3):
        await client.delete(JOBS, f"held-a-{i}", namespace, propagation="Background")
    await wait_condition(client, namespace, "held", JOB_CREATION_FAILED, "False")
    jobs = await wait_jobs(client, namespace, "held", 4)
    for job in jobs:
        refs = job["metadata"].get("ownerReferences") or []
        assert [r["uid"] for r in refs] == [js["metadata"]["uid"]], job["metadata"]


RETENTION = "jobset.x-k8s.io/volume-retention"
_HAS = f"object.metadata.finalizers.exists(f, f == '{RETENTION}')"
_HAD = f"oldObject.metadata.finalizers.exists(f, f == '{RETENTION}')"


async def refuse_retention_finalizers(client: KubeClient, namespace: str) -> str:
    """A ValidatingAdmissionPolicy that refuses adding the retention finalizer to JobSets of
    ``namespace`` (status writes are not matched). Returns its name; enforced once this returns
    (probed with a JobSet no controller manages)."""
    name = f"no-retention-{namespace}"
    rule = {
        "apiGroups": [api.GROUP],
        "apiVersions": [api.VERSION],
        "operations": ["UPDATE"],
        "resources": ["jobsets"],
    }
    expression = (
        f"!has(object.metadata.finalizers) || !{_HAS} || "
        f"(has(oldObject.metadata.finalizers) && {_HAD})"
    )
    await client.create(
        POLICIES,
        {
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [rule]},
                "validations": [
                    {"expression": expression, "message": "retention finalizers are not allowed"}
                ],
            },
        },
    )
    selector = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    await client.create(
        BINDINGS,
        {
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": selector},
            },
        },
    )
    probe = jobset("probe", replicated_job("marker"), managedBy="example.com/not-us")
    await client.create(api.JOBSETS, probe, namespace)

    async def refused() -> bool:
        patch = {"metadata": {"finalizers": [RETENTION]}}
        try:
            await client.patch(api.JOBSETS, "probe", patch, namespace)
        except ApiError as err:
            if err.status in (403, 422):
                return True
            raise
        await client.patch(api.JOBSETS, "probe", {"metadata": {"finalizers": None}}, namespace)
        return False

    await wait_for(refused, bool, "the admission policy to refuse the retention finalizer")
    return name


async def test_refused_retention_finalizer_is_reported_and_no_claim_is_made(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """The JobSet's retention finalizer must be on it before any claim exists (else deleting the
    JobSet could skip its retention). When the API server refuses to add it (here an admission
    policy), the pass still ends with a truthful status: VolumesReady names the refusal, no claim
    is created, the Job that mounts nothing runs, retries rewrite nothing; once the refusal is
    lifted, the finalizer, the claim and the waiting Job follow."""
    policy = await refuse_retention_finalizers(client, namespace)
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    try:
        await client.create(api.JOBSETS, with_claim("guarded", spec), namespace)

        def reported(obj: Obj) -> bool:
            found = condition(obj, VOLUMES_READY)
            return found is not None and found.get("reason") == "RetentionFinalizerFailed"

        js = await wait_for(
            lambda: get_jobset(client, namespace, "guarded"),
            reported,
            "VolumesReady=False RetentionFinalizerFailed",
        )
        ready = condition(js, VOLUMES_READY)
        assert ready is not None and ready["status"] == "False"
        assert RETENTION in ready["message"], ready
        assert "retention finalizers are not allowed" in ready["message"], ready
        assert "data-guarded" in ready["message"], ready
        assert RETENTION not in (js["metadata"].get("finalizers") or [])
        jobs = await wait_jobs(client, namespace, "guarded", 1)
        assert [j["metadata"]["name"] for j in jobs] == ["guarded-free-0"]
        assert "data-guarded" not in {
            c["metadata"]["name"] for c in (await client.list(CLAIMS, namespace))["items"]
        }
        events = await wait_for(
            lambda: events_about(client, namespace, "guarded", "RetentionFinalizerFailed"),
            bool,
            "the RetentionFinalizerFailed Event",
        )
        assert RETENTION in events[0]["message"], events
        await assert_retries_rewrite_nothing(
            controller, client, namespace, "guarded", "RetentionFinalizerFailed"
        )
    finally:
        await client.delete(BINDINGS, policy, None)
        await client.delete(POLICIES, policy, None)

    # Lifted: the JobSet's change of generation is not needed; the retry (with backoff) gets it.
    jobs = await wait_jobs(client, namespace, "guarded", 2, seconds=120)
    assert [j["metadata"]["name"] for j in jobs] == ["guarded-free-0", "guarded-train-0"]
    js = await get_jobset(client, namespace, "guarded")
    assert RETENTION in js["metadata"]["finalizers"]
