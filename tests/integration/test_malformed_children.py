"""Malformed objects in the controller's caches, next to a healthy JobSet, on a real API server.

Jobs and claims that carry the JobSet labels but have the wrong shape - job-index and
restart-attempt labels that are not integers, a jobset-name label naming a JobSet that does not
exist, controller ownerReferences to another JobSet or to another kind, a non-controller reference
to the healthy JobSet, claims with our labels and no owner - are created beside a healthy JobSet
with volumes. The real controller runs. The healthy JobSet must still complete; the malformed
objects must never be modified or deleted (docs/volumes.md: a claim that was not created or
adopted under the JobSet's rules is never touched), except the one claim that the JobSet's own
policy does own (a Job-scope claim with its uid beyond replicas, ``whenScaled: Delete``), which
shows that the controller did look at them; and the controller must not loop: it settles (every
event reconciled, nothing queued, no write) with no reconcile scheduled for later, and touching the
malformed objects costs one reconcile per event at most, no write and no reconcile error.
"""

from __future__ import annotations

from typing import Any

from controller.config import Config
from controller.jobset import api
from controller.jobset.volumes.model import (
    CLAIM_SCOPE_LABEL,
    CLAIM_TEMPLATE_LABEL,
    OWNER_UID_ANNOTATION,
)
from controller.runtime.client import CLAIMS, CONFIG_MAPS, JOBS, ApiError, KubeClient, Resource
from controller.runtime.manager import Manager
from tests.helpers import Kube, wait_for
from tests.support.jobsets import (
    complete_job,
    condition,
    get_jobset,
    jobset,
    reconciles,
    replicated_job,
    running_controller,
    settled,
    wait_condition,
    writes,
)

Obj = dict[str, Any]


def errors(manager: Manager[Config]) -> float:
    for family in manager.registry.collect():
        if family.name == "controller_runtime_reconcile_errors":
            return sum(s.value for s in family.samples if s.name.endswith("_total"))
    return 0.0


def with_mounts(rjob: Obj, *names: str) -> Obj:
    container = rjob["template"]["spec"]["template"]["spec"]["containers"][0]
    container["volumeMounts"] = [{"name": n, "mountPath": f"/{n}"} for n in names]
    return rjob


def pvc(name: str) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


def owner(kind: str, api_version: str, name: str, uid: str, controller: bool = True) -> Obj:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": controller,
    }


def stray_job(name: str, labels: dict[str, str], refs: list[Obj]) -> Obj:
    return {
        "metadata": {"name": name, "labels": labels, "ownerReferences": refs},
        "spec": {
            "suspend": True,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "main", "image": "busybox"}],
                }
            },
        },
    }


def stray_claim(
    name: str, labels: dict[str, str], refs: list[Obj], annotations: dict[str, str] | None = None
) -> Obj:
    body = pvc(name)
    body["metadata"].update(labels=labels, ownerReferences=refs, annotations=annotations or {})
    return body


def healthy_jobset() -> Obj:
    return jobset(
        "healthy",
        with_mounts(replicated_job("a", replicas=2), "data"),
        with_mounts(replicated_job("b", replicas=1), "data", "ckpt"),
        volumeClaimPolicies=[
            {"templates": [pvc("data")]},
            {
                "scope": "Job",
                "templates": [pvc("ckpt")],
                "targetReplicatedJobs": ["b"],
                "retentionPolicy": {"whenScaled": "Delete"},
            },
        ],
    )


async def owned_jobs(client: KubeClient, namespace: str, uid: str) -> list[Obj]:
    listed = await client.list(JOBS, namespace)
    return [
        j
        for j in listed["items"]
        if any(
            r.get("uid") == uid and r.get("controller")
            for r in j["metadata"].get("ownerReferences") or []
        )
    ]


async def gone_or_deleting(
    client: KubeClient, resource: Resource, namespace: str, name: str
) -> bool:
    try:
        obj = await client.get(resource, name, namespace)
    except ApiError as err:
        if err.not_found:
            return True
        raise
    return bool(obj["metadata"].get("deletionTimestamp"))


async def test_malformed_children_are_left_alone_and_do_not_loop(
    kube: Kube, namespace: str, client: KubeClient
) -> None:
    ns = namespace
    async with running_controller(kube, ns) as running:
        manager = running.manager
        other = await client.create(api.JOBSETS, jobset("other", replicated_job("x")), ns)
        other_ref = owner(api.KIND, api.API_VERSION, "other", other["metadata"]["uid"])
        config_map = await client.create(CONFIG_MAPS, {"metadata": {"name": "unrelated"}}, ns)
        cm_ref = owner("ConfigMap", "v1", "unrelated", config_map["metadata"]["uid"])
        healthy = await client.create(api.JOBSETS, healthy_jobset(), ns)
        uid = healthy["metadata"]["uid"]
        ours = {api.JOBSET_NAME: "healthy"}
        claim_labels = {
            **ours,
            CLAIM_TEMPLATE_LABEL: "ckpt",
            CLAIM_SCOPE_LABEL: "Job",
        }

        rjob_a = {api.REPLICATED_JOB_NAME: "a"}
        jobs = [
            stray_job(
                "stray-index",
                {**ours, **rjob_a, api.JOB_INDEX: "x", api.RESTART_ATTEMPT: "0"},
                [],
            ),
            stray_job(
                "stray-attempt",
                {**ours, **rjob_a, api.JOB_INDEX: "0", api.RESTART_ATTEMPT: "garbage"},
                [other_ref],
            ),
            stray_job(
                "stray-ghost",
                {api.JOBSET_NAME: "ghost", **rjob_a, api.JOB_INDEX: "0", api.RESTART_ATTEMPT: "0"},
                [],
            ),
            stray_job(
                "stray-kind",
                {**ours, **rjob_a, api.JOB_INDEX: "1", api.RESTART_ATTEMPT: "0"},
                [cm_ref],
            ),
            stray_job(
                "stray-not-controller",
                {
                    **ours,
                    api.REPLICATED_JOB_NAME: "b",
                    api.JOB_INDEX: "0",
                    api.RESTART_ATTEMPT: "0",
                },
                [owner(api.KIND, api.API_VERSION, "healthy", uid, controller=False)],
            ),
            stray_job(
                "stray-rjob",
                {**ours, api.REPLICATED_JOB_NAME: "nope", api.JOB_INDEX: "1e3"},
                [other_ref],
            ),
        ]
        claims = [
            stray_claim(
                "stray-data",
                {**ours, CLAIM_TEMPLATE_LABEL: "data", CLAIM_SCOPE_LABEL: "JobSet"},
                [],
            ),
            stray_claim(
                "stray-ckpt",
                {**claim_labels, api.REPLICATED_JOB_NAME: "b", api.JOB_INDEX: "zz"},
                [],
            ),
            stray_claim(
                "stray-ckpt-other",
                {**claim_labels, api.REPLICATED_JOB_NAME: "b", api.JOB_INDEX: "7"},
                [other_ref],
                {OWNER_UID_ANNOTATION: other["metadata"]["uid"]},
            ),
            stray_claim("stray-ghost-claim", {api.JOBSET_NAME: "ghost"}, []),
            stray_claim("stray-kind-claim", {**ours, CLAIM_TEMPLATE_LABEL: "data"}, [cm_ref]),
        ]
        # The control: a Job-scope claim this JobSet's policy owns (its uid), for a Job beyond
        # replicas; whenScaled: Delete means the controller deletes it.
        owned = stray_claim(
            "ckpt-healthy-b-5",
            {**claim_labels, api.REPLICATED_JOB_NAME: "b", api.JOB_INDEX: "5"},
            [],
            {OWNER_UID_ANNOTATION: uid},
        )
        created: dict[tuple[str, str], Obj] = {}
        for body in jobs:
            made = await client.create(JOBS, body, ns)
            created[("Job", made["metadata"]["name"])] = made
        for body in claims:
            made = await client.create(CLAIMS, body, ns)
            created[("PersistentVolumeClaim", made["metadata"]["name"])] = made
        await client.create(CLAIMS, owned, ns)

        # The healthy JobSet runs and completes as if the strays were not there.
        children = await wait_for(
            lambda: owned_jobs(client, ns, uid),
            lambda found: len(found) == 3,
            "the healthy JobSet's 3 Jobs",
        )
        assert sorted(j["metadata"]["name"] for j in children) == [
            "healthy-a-0",
            "healthy-a-1",
            "healthy-b-0",
        ]
        for job in children:
            await complete_job(client, ns, job)
        done = await wait_condition(client, ns, "healthy", api.COMPLETED)
        assert done["status"]["terminalState"] == api.TERMINAL_COMPLETED
        assert condition(done, api.SPEC_INVALID) is None
        conflict = condition(done, "VolumeClaimConflict") or {}
        assert conflict.get("status", "False") == "False", conflict  # absent: never in conflict
        assert await wait_for(
            lambda: gone_or_deleting(client, CLAIMS, ns, "ckpt-healthy-b-5"),
            bool,
            "the policy-owned claim beyond replicas to be deleted (whenScaled: Delete)",
        )

        # Quiet: nothing changes, so the controller settles with nothing scheduled (a loop
        # always has its next reconcile queued, running or scheduled) and writes nothing more.
        await settled(running, client, quiet=True)
        after = (reconciles(manager), writes(manager), errors(manager))

        # Touching each malformed object is one event, one reconcile at most, no write.
        for kind, name in list(created):
            resource = JOBS if kind == "Job" else CLAIMS
            patch = {"metadata": {"annotations": {"tests.stateful-jobset/poke": "1"}}}
            created[(kind, name)] = await client.patch(resource, name, patch, ns)
        await settled(running, client, quiet=True)  # every poke seen and reconciled
        poked = (reconciles(manager), writes(manager), errors(manager))
        assert poked[0] > after[0], "the pokes were not reconciled"
        assert poked[0] - after[0] <= len(created), f"{poked[0] - after[0]} reconciles"
        assert poked[1] == after[1], "the controller wrote because a malformed object changed"
        assert poked[2] == after[2] == 0, "reconciles failed"

        # Never modified, never deleted.
        for (kind, name), made in created.items():
            resource = JOBS if kind == "Job" else CLAIMS
            now = await client.get(resource, name, ns)
            assert now["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"], (
                f"{kind} {name} was modified by the controller"
            )
            assert not now["metadata"].get("deletionTimestamp"), f"{kind} {name} is being deleted"
        final = await get_jobset(client, ns, "healthy")
        assert final["status"]["terminalState"] == api.TERMINAL_COMPLETED
