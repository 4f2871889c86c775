"""Migration from upstream JobSet, on the real node, against upstream's own manager (v0.12.0).

Each test runs JobSets with ``volumeClaimPolicies`` under upstream's manager (its CRD installed
in place of ours, the way a cluster running upstream has it; no webhook registered, so the
JobSets are pre-defaulted as its defaulting webhook would: ``upstreamjobset.defaulted``), then
switches to this controller as docs/operations.md "Replacing upstream at once" says: upstream's
manager stopped, this project's CRD and admission policy applied over upstream's, this controller
started. What is proven about data is proven with bytes written and read by containers.

Upstream makes a JobSet's claim ``<template>-<jobset>`` with the JobSet's name label and, for
``whenDeleted: Delete``, a controller ownerReference to the JobSet: that reference is the proof
(ownership.py) by which this controller adopts it. For ``whenDeleted: Retain`` upstream writes no
owner at all: such claims are adopted only when the user names them in ``adopt-claims``.

The claims are the real node's CSI storage (``csi-immediate``, our CSI driver); a claim's bytes on
this host are read in its volume's directory in the driver's state directory (``directory_of``).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from controller.jobset import api, volumes
from controller.jobset.volumes import singlenode
from controller.jobset.volumes.annotations import ADOPT_ANNOTATION
from controller.jobset.volumes.model import (
    COLOCATE_ANNOTATION,
    OWNER_UID_ANNOTATION,
    SINGLE_NODE_LABEL,
)
from controller.jobset.volumes.status import ANNOTATIONS_REJECTED
from controller.runtime.client import CLAIMS, EVENTS, JOBS, KubeClient
from localcluster import csi, upstream, upstreamjobset
from localcluster.cluster import LocalCluster
from localcluster.upstreamjobset import UpstreamManager
from tests.helpers import Kube, wait_for
from tests.node.test_data import SECONDS, completed, directory_of, pod_logs, shell_job
from tests.support.crd import (
    BINDING_FILE,
    install_crd,
    install_crd_only,
    load_crd,
    wait_policy_gone,
)
from tests.support.jobsets import condition, jobset
from tests.support.volumes_e2e import (
    ControllerProcesses,
    claim_template,
    controller_processes,
    find,
    wait_event,
    wait_exists,
    wait_gone,
)

Obj = dict[str, Any]
BINDINGS = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"


def upstream_policy(template: str, when_deleted: str) -> Obj:
    """A claim policy as upstream spells it (no scope: upstream has JobSet scope only)."""
    return {
        "templates": [claim_template(template, "1Gi", csi.IMMEDIATE_CLASS)],
        "retentionPolicy": {"whenDeleted": when_deleted},
    }


async def install_upstream_crd(kube: Kube) -> upstream.UpstreamBuild:
    """Upstream's CRD in place of ours, and our admission policy's binding removed (a cluster
    that runs upstream has none); upstream's build (made once, cached)."""
    binding = load_crd(BINDING_FILE)["metadata"]["name"]
    await kube.raw("DELETE", f"{BINDINGS}/{binding}")
    build = await asyncio.to_thread(upstream.ensure_upstream)
    await install_crd_only(kube, build.crd)
    await wait_policy_gone(kube)
    return build


@contextlib.asynccontextmanager
async def upstream_installed(cluster: LocalCluster, kube: Kube) -> AsyncIterator[UpstreamManager]:
    """Upstream's CRD and manager, as on a cluster that runs upstream JobSet; stopped on exit."""
    build = await install_upstream_crd(kube)
    async with upstreamjobset.running_async(cluster, build, install=False) as manager:
        yield manager


@contextlib.asynccontextmanager
async def switched(
    manager: UpstreamManager, kube: Kube, namespace: str, client: KubeClient, logs: Path
) -> AsyncIterator[ControllerProcesses]:
    """docs/operations.md "Replacing upstream at once": upstream's controller goes first, our
    CRD (and its admission policy) replaces upstream's, then this controller starts."""
    await manager.stop_async()
    await install_crd(kube)
    async with controller_processes(kube, namespace, client, logs) as running:
        yield running


async def adopted(client: KubeClient, namespace: str, claim: str, owner_uid: str) -> Obj:
    """The claim once this controller adopted it (its uid annotation names the JobSet)."""
    return await wait_for(
        lambda: client.get(CLAIMS, claim, namespace),
        lambda c: (c["metadata"].get("annotations") or {}).get(OWNER_UID_ANNOTATION) == owner_uid,
        f"claim {claim} adopted by the JobSet of uid {owner_uid}",
        seconds=SECONDS,
    )


async def file_says(path: Path, text: str) -> None:
    """Wait until the file on the node (in a claim's directory) holds ``text``."""

    def text_of() -> str:
        return path.read_text().strip() if path.exists() else ""

    async def read() -> str:
        return await asyncio.to_thread(text_of)

    await wait_for(read, lambda found: found == text, f"{path} to hold {text!r}", seconds=SECONDS)


def controller_ref(claim: Obj) -> Obj | None:
    refs = claim["metadata"].get("ownerReferences") or []
    return next((r for r in refs if r.get("controller") is True), None)


# A trainer that keeps its step in the claim. Attempt 0 writes step 100, then waits for the test
# to drop /ckpt/fail-now and fails; the JobSet restarts (failurePolicy) and attempt 1 goes on
# from the step it reads.
RESTARTING = (
    "step=$(cat /ckpt/step 2>/dev/null || echo 0); "
    'echo "attempt $ATTEMPT resumes at step $step"; '
    "step=$((step + 100)); echo $step > /ckpt/step; "
    'if [ "$ATTEMPT" = 0 ]; then until [ -f /ckpt/fail-now ]; do sleep 0.2; done; '
    'echo "attempt 0 fails"; exit 1; fi; '
    'echo "attempt $ATTEMPT done at step $step"'
)


async def test_a_running_upstream_jobset_restarts_here_with_the_same_claim_and_its_data(
    node_cluster: LocalCluster,
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    tmp_path: Path,
) -> None:
    """Running under upstream when the controllers are switched, then restarted by this
    controller: the next attempt's Jobs mount the same claim (same uid) and read what attempt 0
    wrote; the JobSet completes; deleting it deletes the claim (``whenDeleted: Delete``)."""
    ns, name, claim = node_namespace, "moved", "ckpt-moved"
    body = upstreamjobset.defaulted(
        jobset(
            name,
            shell_job("trainer", RESTARTING, mounts={"ckpt": "/ckpt"}),
            failurePolicy={"maxRestarts": 1},
            volumeClaimPolicies=[upstream_policy("ckpt", "Delete")],
        )
    )
    async with upstream_installed(node_cluster, node_kube) as manager:
        created = await node_client.create(api.JOBSETS, body, ns)
        uid = created["metadata"]["uid"]
        directory = await directory_of(node_cluster, node_client, ns, claim)
        await file_says(directory / "step", "100")  # attempt 0 runs, under upstream
        made = await node_client.get(CLAIMS, claim, ns)
        ref = controller_ref(made)
        assert ref is not None and (ref["kind"], ref["uid"]) == ("JobSet", uid), made["metadata"]
        assert OWNER_UID_ANNOTATION not in (made["metadata"].get("annotations") or {})

        async with switched(manager, node_kube, ns, node_client, tmp_path) as ours:
            taken = await adopted(node_client, ns, claim, uid)
            assert taken["metadata"]["uid"] == made["metadata"]["uid"]
            (directory / "fail-now").write_text("now\n")
            finished = await completed(node_client, ns, name)
            assert finished["status"].get("restarts") == 1, finished["status"]
            conflict = condition(finished, "VolumeClaimConflict") or {}
            assert conflict.get("status") in (None, "False"), finished["status"]
            logs = await pod_logs(node_kube, node_client, ns, name, "trainer")
            assert list(logs.values()) == [
                "attempt 1 resumes at step 100\nattempt 1 done at step 200"
            ], logs
            assert (directory / "step").read_text().strip() == "200"
            after = await node_client.get(CLAIMS, claim, ns)
            assert after["metadata"]["uid"] == made["metadata"]["uid"]
            recorded = finished["status"]["volumes"]["claimUIDs"]
            assert recorded == [{"template": "ckpt", "uids": made["metadata"]["uid"][:8]}]

            await node_client.delete(api.JOBSETS, name, ns)
            await wait_gone(node_client, api.JOBSETS, name, ns, seconds=SECONDS)
            await wait_gone(node_client, CLAIMS, claim, ns, seconds=SECONDS)
            ours.assert_clean()


# Two Jobs share the ReadWriteOnce claim: attempt 0 (upstream's Jobs) waits for a file, then
# fails; attempt 1 (this controller's Jobs) ends at once.
SHARED_RESTARTING = (
    'if [ "$ATTEMPT" = 0 ]; then until [ -f /shared/fail-now ]; do sleep 0.2; done; exit 1; fi; '
    "echo done"
)


async def test_upstream_jobs_sharing_a_read_write_once_claim_are_named_then_made_colocated(
    node_cluster: LocalCluster,
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    tmp_path: Path,
) -> None:
    """Upstream makes the Jobs of a shared ReadWriteOnce claim without any affinity: after the
    switch, MultiAttachRisk names them (a Warning Event too) while they run; the restart's Jobs
    are this controller's, with the pod affinity that keeps them on one node, and the condition
    turns False. The node's CSI driver attaches nothing (its pods need not share a node): the
    JobSet's annotation asks for one node all the same, as for storage that attaches."""
    ns, name = node_namespace, "sharing"
    body = upstreamjobset.defaulted(
        jobset(
            name,
            shell_job("workers", SHARED_RESTARTING, replicas=2, mounts={"shared": "/shared"}),
            failurePolicy={"maxRestarts": 1},
            volumeClaimPolicies=[upstream_policy("shared", "Delete")],
        )
    )
    body["metadata"].setdefault("annotations", {})[COLOCATE_ANNOTATION] = "true"
    claim = f"shared-{name}"
    async with upstream_installed(node_cluster, node_kube) as manager:
        await node_client.create(api.JOBSETS, body, ns)
        directory = await directory_of(node_cluster, node_client, ns, claim)
        async with switched(manager, node_kube, ns, node_client, tmp_path) as ours:
            named = await wait_for(
                lambda: node_client.get(api.JOBSETS, name, ns),
                lambda js: (condition(js, singlenode.CONDITION) or {}).get("status") == "True",
                "MultiAttachRisk True",
                seconds=SECONDS,
            )
            risk = condition(named, singlenode.CONDITION) or {}
            assert risk["reason"] == "JobsNotColocated", risk
            assert (
                f"claim {claim} is ReadWriteOnce and Jobs {name}-workers-0, {name}-workers-1 "
                in (risk["message"])
            )
            await wait_event(
                node_kube,
                ns,
                name,
                "JobsNotColocated",
                event_type="Warning",
                contains=f"claim {claim} is ReadWriteOnce",
                seconds=SECONDS,
            )

            (directory / "fail-now").write_text("now\n")
            finished = await completed(node_client, ns, name)
            assert finished["status"].get("restarts") == 1
            risk = condition(finished, singlenode.CONDITION) or {}
            assert (risk.get("status"), risk.get("reason")) == ("False", "Colocated"), risk
            jobs = (await node_client.list(JOBS, ns, label_selector=f"{api.JOBSET_NAME}={name}"))[
                "items"
            ]
            assert len(jobs) == 2
            for job in jobs:
                labels = job["spec"]["template"]["metadata"]["labels"]
                assert labels[SINGLE_NODE_LABEL] == claim, job["metadata"]["name"]
            ours.assert_clean()


async def test_a_suspended_upstream_jobset_resumes_here_with_its_claim(
    node_cluster: LocalCluster,
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    tmp_path: Path,
) -> None:
    """Suspended (queued) under upstream when the controllers are switched: its claim is adopted
    while it is still suspended, and once resumed its Job runs with it and writes to it."""
    ns, name, claim = node_namespace, "queued", "data-queued"
    token = secrets.token_hex(8)
    body = upstreamjobset.defaulted(
        jobset(
            name,
            shell_job(
                "trainer", f"echo {token} > /data/file && echo wrote", mounts={"data": "/data"}
            ),
            suspend=True,
            volumeClaimPolicies=[upstream_policy("data", "Delete")],
        )
    )
    async with upstream_installed(node_cluster, node_kube) as manager:
        created = await node_client.create(api.JOBSETS, body, ns)
        uid = created["metadata"]["uid"]
        made = await wait_exists(node_client, CLAIMS, claim, ns, seconds=SECONDS)
        job = f"{name}-trainer-0"
        await wait_for(
            lambda: find(node_client, JOBS, job, ns),
            lambda j: j is not None and j["spec"].get("suspend") is True,
            f"upstream to create Job {job}, suspended",
            seconds=SECONDS,
        )

        async with switched(manager, node_kube, ns, node_client, tmp_path) as ours:
            await adopted(node_client, ns, claim, uid)  # still suspended
            await node_client.patch(api.JOBSETS, name, {"spec": {"suspend": False}}, ns)
            await completed(node_client, ns, name)
            directory = await directory_of(node_cluster, node_client, ns, claim)
            assert (directory / "file").read_text().strip() == token
            after = await node_client.get(CLAIMS, claim, ns)
            assert after["metadata"]["uid"] == made["metadata"]["uid"]
            ours.assert_clean()


READ_OR_WRITE = (
    'if [ -f /data/file ]; then echo "found: $(cat /data/file)"; '
    'else echo "{token}" > /data/file; echo "wrote {token}"; fi'
)


async def test_a_claim_upstream_retained_is_adopted_by_the_manifest_applied_again(
    node_cluster: LocalCluster,
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    tmp_path: Path,
) -> None:
    """Upstream's "Retain, then apply the same manifest again", across the migration: upstream
    ran the JobSet with ``whenDeleted: Retain`` and it was deleted, leaving a claim with no proof
    (only the name label). Applied again here, the JobSet reports the claim as a conflict whose
    message prints the command that adopts it; with that annotation the claim is adopted, and
    the new run reads what upstream's run wrote."""
    ns, name, claim = node_namespace, "keeper", "data-keeper"
    token = secrets.token_hex(8)
    manifest = jobset(
        name,
        shell_job("trainer", READ_OR_WRITE.format(token=token), mounts={"data": "/data"}),
        volumeClaimPolicies=[upstream_policy("data", "Retain")],
    )
    async with upstream_installed(node_cluster, node_kube) as manager:
        await node_client.create(api.JOBSETS, upstreamjobset.defaulted(manifest), ns)
        await completed(node_client, ns, name)
        first = await pod_logs(node_kube, node_client, ns, name, "trainer")
        assert list(first.values()) == [f"wrote {token}"], first
        await node_client.delete(api.JOBSETS, name, ns)
        await wait_gone(node_client, api.JOBSETS, name, ns, seconds=SECONDS)
        kept = await node_client.get(CLAIMS, claim, ns)
        assert not kept["metadata"].get("ownerReferences"), kept["metadata"]
        claim_uid = kept["metadata"]["uid"]

        async with switched(manager, node_kube, ns, node_client, tmp_path) as ours:
            await node_client.create(api.JOBSETS, manifest, ns)
            conflicted = await wait_for(
                lambda: node_client.get(api.JOBSETS, name, ns),
                lambda js: (condition(js, "VolumeClaimConflict") or {}).get("status") == "True",
                f"JobSet {name}: VolumeClaimConflict",
                seconds=SECONDS,
            )
            message = (condition(conflicted, "VolumeClaimConflict") or {})["message"]
            entry = f"{claim}@{claim_uid[:8]}"
            command = (
                f"kubectl annotate jobset {name} -n {ns} --overwrite {ADOPT_ANNOTATION}={entry}"
            )
            assert message.endswith(command), message
            assert not (await node_client.list(JOBS, ns))["items"]  # the Job waits for it
            # As the message says (the annotation written by the API, not by kubectl).
            await node_client.patch(
                api.JOBSETS,
                name,
                {"metadata": {"annotations": {ADOPT_ANNOTATION: entry}}},
                ns,
            )
            await completed(node_client, ns, name)
            second = await pod_logs(node_kube, node_client, ns, name, "trainer")
            assert list(second.values()) == [f"found: {token}"], second
            after = await node_client.get(CLAIMS, claim, ns)
            assert after["metadata"]["uid"] == claim_uid
            ours.assert_clean()


async def test_bad_adopt_claims_entries_are_reported_not_ignored(
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    node_controller: ControllerProcesses,
) -> None:
    """A wrong uid, an unknown claim and a malformed item: a condition and a Warning Event quote
    each; the claim of that name is not adopted, nothing is mounted."""
    ns, name, claim = node_namespace, "picky", "data-picky"
    by_hand = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": claim},
        "spec": claim_template("data", "1Gi", csi.IMMEDIATE_CLASS)["spec"],
    }
    made = await node_client.create(CLAIMS, by_hand, ns)
    wrong = f"{claim}@{'0' * 8 if not made['metadata']['uid'].startswith('0') else '1' * 8}"
    body = jobset(
        name,
        shell_job("trainer", "cat /data/file", mounts={"data": "/data"}),
        volumeClaimPolicies=[upstream_policy("data", "Retain")],
    )
    body["metadata"]["annotations"] = {ADOPT_ANNOTATION: f"{wrong},nope@abcdef12,junk"}
    await node_client.create(api.JOBSETS, body, ns)
    rejected = await wait_for(
        lambda: node_client.get(api.JOBSETS, name, ns),
        lambda js: (condition(js, ANNOTATIONS_REJECTED) or {}).get("status") == "True",
        f"JobSet {name}: {ANNOTATIONS_REJECTED}",
        seconds=SECONDS,
    )
    found = condition(rejected, ANNOTATIONS_REJECTED) or {}
    assert found["reason"] == "AdoptClaimsRejected", found
    for quoted in (f'"{wrong}"', '"nope@abcdef12"', '"junk"'):
        assert quoted in found["message"], found["message"]

    async def warnings() -> list[Obj]:
        listed = (await node_client.list(EVENTS, ns))["items"]
        return [
            e
            for e in listed
            if e.get("reason") == "AdoptClaimsRejected"
            and (e.get("involvedObject") or {}).get("name") == name
        ]

    events = await wait_for(warnings, bool, "a Warning Event AdoptClaimsRejected", seconds=SECONDS)
    assert events[0]["type"] == "Warning", events
    untouched = await node_client.get(CLAIMS, claim, ns)
    assert OWNER_UID_ANNOTATION not in (untouched["metadata"].get("annotations") or {})
    assert not (await node_client.list(JOBS, ns))["items"]
    node_controller.assert_clean()


# Writes the token, then waits for the test to drop /data/go before it exits.
WRITE_THEN_WAIT = (
    'echo "{token}" > /data/file; echo "wrote {token}"; '
    "until [ -f /data/go ]; do sleep 0.2; done; echo done"
)


async def test_the_way_back_to_upstream_keeps_the_claim_and_the_finalizer_must_go(
    node_cluster: LocalCluster,
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    tmp_path: Path,
) -> None:
    """Rolling back: a JobSet this controller runs (its claim made here) is handed to upstream's
    manager (ours stopped, upstream's CRD back). Upstream keeps using the claim (it ignores
    AlreadyExists and mounts the claim by its name) and the JobSet completes there. Deleting it
    then waits on this controller's retention finalizer, which nobody removes any more: the
    documented step removes it, and the garbage collector deletes the claim (its ownerReference,
    ``whenDeleted: Delete``)."""
    ns, name, claim = node_namespace, "back", "data-back"
    token = secrets.token_hex(8)
    body = upstreamjobset.defaulted(
        jobset(
            name,
            shell_job("trainer", WRITE_THEN_WAIT.format(token=token), mounts={"data": "/data"}),
            volumeClaimPolicies=[upstream_policy("data", "Delete")],
        )
    )
    async with controller_processes(node_kube, ns, node_client, tmp_path) as ours:
        created = await node_client.create(api.JOBSETS, body, ns)
        uid = created["metadata"]["uid"]
        made = await adopted(node_client, ns, claim, uid)  # made here: our uid annotation
        directory = await directory_of(node_cluster, node_client, ns, claim)
        await file_says(directory / "file", token)
        ours.assert_clean()
        # Rolled back: this controller stopped (its finalizer stays on the JobSet), upstream's
        # CRD back in place of ours, upstream's manager started.
        ours.kill()

        async with upstream_installed(node_cluster, node_kube):
            (directory / "go").write_text("go\n")
            await completed(node_client, ns, name)
            logs = await pod_logs(node_kube, node_client, ns, name, "trainer")
            assert list(logs.values()) == [f"wrote {token}\ndone"], logs
            after = await node_client.get(CLAIMS, claim, ns)
            assert after["metadata"]["uid"] == made["metadata"]["uid"]

            await node_client.delete(api.JOBSETS, name, ns)
            stuck = await node_client.get(api.JOBSETS, name, ns)
            assert stuck["metadata"].get("deletionTimestamp"), stuck["metadata"]
            assert volumes.FINALIZER in stuck["metadata"]["finalizers"], stuck["metadata"]
            # docs/operations.md "Rolling back to upstream": the finalizer removed by hand.
            await node_client.patch(api.JOBSETS, name, {"metadata": {"finalizers": None}}, ns)
            await wait_gone(node_client, api.JOBSETS, name, ns, seconds=SECONDS)
            await wait_gone(node_client, CLAIMS, claim, ns, seconds=SECONDS)
    await install_crd(node_kube)
