"""Retention to a VolumeSnapshot and restore from one (issue 37), against a real API server with
the VolumeSnapshot CRDs of external-snapshotter's client module installed.

The integration tier runs no volume controllers: the tests play them. They mark a claim Bound
(its status, as the PV controller would), a VolumeSnapshot ready or failed (its status, as the
snapshot-controller would), and take a deleted claim's pvc-protection finalizer off (as
kube-controller-manager would). What the data looks like after a restore is proven on the real
node with the real CSI sidecars (tests/node); here, what the controller decides and writes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from controller.jobset import api
from controller.jobset.volumes.model import (
    CLAIM_TEMPLATE_LABEL,
    RESTORED_FROM_GROUP_ANNOTATION,
    SNAPSHOT_CLAIM_LABEL,
    SNAPSHOT_OF_UID_ANNOTATION,
)
from controller.runtime.client import (
    CLAIMS,
    EVENTS,
    JOBS,
    VOLUME_GROUP_SNAPSHOTS,
    VOLUME_SNAPSHOTS,
    ApiError,
    KubeClient,
)
from localcluster import csi
from tests.helpers import Kube, wait_for
from tests.support.crd import install_other_crds
from tests.support.jobsets import (
    RunningController,
    complete_job,
    condition,
    fail_job,
    get_jobset,
    jobset,
    mark_suspended,
    ready_job,
    replicated_job,
    running_controller,
    settled,
    wait_condition,
    wait_jobs,
    with_mounts,
)
from tests.support.snapshots import set_snapshot_status, snapshots_of

Obj = dict[str, Any]

CLAIM_SPEC = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}


@pytest.fixture
async def snapshotting(
    kube: Kube, namespace: str, client: KubeClient
) -> AsyncIterator[RunningController]:
    """The controller, started once the cluster serves VolumeSnapshots."""
    await install_other_crds(kube, csi.snapshot_crds())
    async with running_controller(kube, namespace) as running:
        yield running


def checkpointed(name: str, **policy: Any) -> Obj:
    return jobset(
        name,
        with_mounts(replicated_job("w", 1), "data"),
        volumeClaimPolicies=[
            {"templates": [{"metadata": {"name": "data"}, "spec": CLAIM_SPEC}], **policy}
        ],
    )


async def bind(client: KubeClient, namespace: str, name: str) -> Obj:
    claim = await wait_for(
        lambda: client.get(CLAIMS, name, namespace), lambda c: bool(c), f"claim {name}"
    )
    await client.patch(
        CLAIMS, name, {"status": {"phase": "Bound"}}, namespace, subresource="status"
    )
    return claim


async def events(client: KubeClient, namespace: str, name: str, reason: str) -> list[str]:
    listed = (await client.list(EVENTS, namespace))["items"]
    return [
        str(e.get("message"))
        for e in listed
        if e["involvedObject"].get("name") == name and e.get("reason") == reason
    ]


async def release(client: KubeClient, namespace: str, claim: str) -> None:
    """What kube-controller-manager's pvc-protection does once no pod uses the claim."""
    try:
        await client.patch(CLAIMS, claim, {"metadata": {"finalizers": None}}, namespace)
    except ApiError as err:
        if not err.not_found:
            raise


async def deleted_once_ready(
    running: RunningController, client: KubeClient, namespace: str, claim: str, snapshot: str
) -> None:
    """The claim stays while its snapshot is not ready, however long that takes; once the test
    (as the snapshot controller) marks it ready, the claim is deleted."""
    await settled(running, client)
    kept = await client.get(CLAIMS, claim, namespace)
    assert not kept["metadata"].get("deletionTimestamp")
    await set_snapshot_status(client, namespace, snapshot, {"readyToUse": True})
    await wait_for(
        lambda: client.get(CLAIMS, claim, namespace),
        lambda c: bool(c["metadata"].get("deletionTimestamp")),
        "the claim to be deleted once its snapshot is ready",
    )


async def said_and_kept(
    running: RunningController,
    client: KubeClient,
    namespace: str,
    name: str,
    claim: str,
    reason: str,
) -> str:
    """VolumeSnapshotsReady says ``reason`` (its message, returned, naming the claim) and a
    Warning Event of that reason names the claim; once the controller settled, the claim is
    kept."""
    said = await wait_for(
        lambda: get_jobset(client, namespace, name),
        lambda obj: (condition(obj, "VolumeSnapshotsReady") or {}).get("reason") == reason,
        f"VolumeSnapshotsReady to say {reason}",
    )
    message = str((condition(said, "VolumeSnapshotsReady") or {})["message"])
    assert claim in message
    await wait_for(
        lambda: events(client, namespace, name, reason),
        lambda found: any(claim in m for m in found),
        "a Warning Event naming the claim",
    )
    await settled(running, client)
    kept = await client.get(CLAIMS, claim, namespace)
    assert not kept["metadata"].get("deletionTimestamp"), f"{reason}, yet the claim went"
    return message


async def complete(client: KubeClient, namespace: str, name: str) -> None:
    (job,) = await wait_jobs(client, namespace, name, 1)
    await complete_job(client, namespace, job)


async def test_a_completed_jobsets_claim_goes_only_through_a_ready_snapshot_and_comes_back_from_it(
    snapshotting: RunningController, client: KubeClient, namespace: str
) -> None:
    name, claim_name = "ckpt", "data-ckpt"
    body = checkpointed(
        name,
        retentionPolicy={"whenCompleted": "Snapshot"},
        restorePolicy={"source": "NewestSnapshot", "whenMissing": "CreateEmpty"},
    )
    await client.create(api.JOBSETS, body, namespace)
    first = await bind(client, namespace, claim_name)
    assert "dataSourceRef" not in first["spec"]  # no snapshot yet: CreateEmpty
    await complete(client, namespace, name)

    (taken,) = await wait_for(
        lambda: snapshots_of(client, namespace, claim_name), lambda s: len(s) == 1, "a snapshot"
    )
    meta = taken["metadata"]
    assert meta["name"] == f"{claim_name}-{first['metadata']['uid'].replace('-', '')[:8]}"
    assert meta["labels"] == {
        api.JOBSET_NAME: name,
        CLAIM_TEMPLATE_LABEL: "data",
        SNAPSHOT_CLAIM_LABEL: claim_name,
    }
    assert meta["annotations"][SNAPSHOT_OF_UID_ANNOTATION] == first["metadata"]["uid"]
    assert not meta.get("ownerReferences")  # it outlives the JobSet
    pending = await wait_for(
        lambda: get_jobset(client, namespace, name),
        lambda obj: (
            (condition(obj, "VolumeSnapshotsReady") or {}).get("reason") == "SnapshotsPending"
        ),
        "VolumeSnapshotsReady to say the claim waits for its snapshot",
    )
    assert meta["name"] in condition(pending, "VolumeSnapshotsReady")["message"]  # type: ignore[index]
    await deleted_once_ready(snapshotting, client, namespace, claim_name, meta["name"])
    await wait_for(
        lambda: get_jobset(client, namespace, name),
        lambda obj: (
            (condition(obj, "VolumeSnapshotsReady") or {}).get("status") == "True"
            and (condition(obj, "VolumesReady") or {}).get("reason") == "ClaimsReleased"
        ),
        "VolumeSnapshotsReady True, and VolumesReady to say the claim was released",
    )
    assert await events(client, namespace, name, "SnapshotCreated")
    await release(client, namespace, claim_name)

    # The same manifest again: a new JobSet, its claim made from the newest snapshot.
    await client.delete(api.JOBSETS, name, namespace)
    await wait_for(
        lambda: client.list(api.JOBSETS, namespace),
        lambda listed: not listed["items"],
        "the first JobSet to go",
    )
    await wait_for(
        lambda: client.list(CLAIMS, namespace),
        lambda listed: not listed["items"],
        "the first claim to go",
    )
    await client.create(api.JOBSETS, body, namespace)
    second = await wait_for(
        lambda: client.get(CLAIMS, claim_name, namespace), lambda c: bool(c), "the new claim"
    )
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    assert second["spec"]["dataSourceRef"] == {
        "apiGroup": "snapshot.storage.k8s.io",
        "kind": "VolumeSnapshot",
        "name": meta["name"],
    }
    created = await wait_for(
        lambda: events(client, namespace, name, "ClaimCreated"),
        lambda found: any(meta["name"] in m for m in found),
        "the ClaimCreated Event to name the snapshot",
    )
    assert created


async def test_a_failed_snapshot_keeps_the_claim_and_says_why(
    snapshotting: RunningController, client: KubeClient, namespace: str
) -> None:
    name, claim_name = "failing", "data-failing"
    await client.create(
        api.JOBSETS, checkpointed(name, retentionPolicy={"whenCompleted": "Snapshot"}), namespace
    )
    await bind(client, namespace, claim_name)
    await complete(client, namespace, name)
    (taken,) = await wait_for(
        lambda: snapshots_of(client, namespace, claim_name), lambda s: len(s) == 1, "a snapshot"
    )
    await set_snapshot_status(
        client,
        namespace,
        taken["metadata"]["name"],
        {"readyToUse": False, "error": {"message": "out of snapshot quota"}},
    )
    message = await said_and_kept(
        snapshotting, client, namespace, name, claim_name, "SnapshotFailed"
    )
    assert "out of snapshot quota" in message


async def test_a_failed_jobsets_claim_goes_only_through_a_ready_snapshot(
    snapshotting: RunningController, client: KubeClient, namespace: str
) -> None:
    """whenFailed: Snapshot: the JobSet fails (its Job failed, no restarts left); its claim is
    snapshotted and deleted only once the snapshot is ready, as on completion."""
    name, claim_name = "crashed", "data-crashed"
    await client.create(
        api.JOBSETS, checkpointed(name, retentionPolicy={"whenFailed": "Snapshot"}), namespace
    )
    first = await bind(client, namespace, claim_name)
    (job,) = await wait_jobs(client, namespace, name, 1)
    await fail_job(client, namespace, job)
    await wait_condition(client, namespace, name, "Failed")
    (taken,) = await wait_for(
        lambda: snapshots_of(client, namespace, claim_name), lambda s: len(s) == 1, "a snapshot"
    )
    meta = taken["metadata"]
    assert meta["annotations"][SNAPSHOT_OF_UID_ANNOTATION] == first["metadata"]["uid"]
    await deleted_once_ready(snapshotting, client, namespace, claim_name, meta["name"])


async def test_a_claim_starts_from_the_snapshot_its_policy_names(
    snapshotting: RunningController, client: KubeClient, namespace: str
) -> None:
    """restorePolicy source VolumeSnapshot: the claim waits until the named snapshot exists and
    is ready (whenMissing left out: Wait), then starts from it, whoever took it (here a user's
    snapshot of another claim, no label of ours), and the status names it."""
    name, claim_name, golden = "named", "data-named", "golden-dataset"
    await client.create(
        api.JOBSETS,
        checkpointed(
            name, restorePolicy={"source": "VolumeSnapshot", "volumeSnapshotName": golden}
        ),
        namespace,
    )
    waiting = await wait_for(
        lambda: get_jobset(client, namespace, name),
        lambda obj: (condition(obj, "VolumesReady") or {}).get("reason") == "WaitingForSnapshot",
        "VolumesReady to say the claim waits for the named snapshot",
    )
    assert golden in condition(waiting, "VolumesReady")["message"]  # type: ignore[index]
    snapshot = {
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "metadata": {"name": golden},
        "spec": {"source": {"persistentVolumeClaimName": "prepared-by-hand"}},
    }
    await client.create(VOLUME_SNAPSHOTS, snapshot, namespace)
    await settled(snapshotting, client)  # there, but not ready: still no claim, no Job
    assert (await client.list(CLAIMS, namespace))["items"] == []
    assert (await client.list(JOBS, namespace))["items"] == []
    await set_snapshot_status(client, namespace, golden, {"readyToUse": True})
    made = await wait_for(
        lambda: client.get(CLAIMS, claim_name, namespace), lambda c: bool(c), "the claim"
    )
    assert made["spec"]["dataSourceRef"] == {
        "apiGroup": "snapshot.storage.k8s.io",
        "kind": "VolumeSnapshot",
        "name": golden,
    }
    await bind(client, namespace, claim_name)
    reported = await wait_for(
        lambda: get_jobset(client, namespace, name),
        lambda obj: obj["status"]["volumes"]["templates"][0].get("bound") == 1,
        "status.volumes to count the claim Bound",
    )
    (template,) = reported["status"]["volumes"]["templates"]
    assert (template["restored"], template.get("restoredFrom")) == (1, golden)
    await wait_jobs(client, namespace, name, 1)


async def test_a_snapshot_that_never_becomes_ready_keeps_the_claim_and_warns(
    kube: Kube, client: KubeClient, namespace: str
) -> None:
    """A snapshot with neither readyToUse nor an error (no snapshot controller at work, as
    here): the claim is kept; once the wait has lasted --snapshot-warn-after (2 s here),
    VolumeSnapshotsReady says SnapshotNotReady with a Warning Event naming the claim, with no
    other event to wake the controller (it looks again when the wait becomes overdue)."""
    await install_other_crds(kube, csi.snapshot_crds())
    async with running_controller(kube, namespace, "--snapshot-warn-after=2") as running:
        name, claim_name = "stuck", "data-stuck"
        await client.create(
            api.JOBSETS,
            checkpointed(name, retentionPolicy={"whenCompleted": "Snapshot"}),
            namespace,
        )
        await bind(client, namespace, claim_name)
        await complete(client, namespace, name)
        (taken,) = await wait_for(
            lambda: snapshots_of(client, namespace, claim_name), lambda s: len(s) == 1, "a snapshot"
        )
        message = await said_and_kept(
            running, client, namespace, name, claim_name, "SnapshotNotReady"
        )
        assert taken["metadata"]["name"] in message
        # Ready at last: the claim goes.
        await set_snapshot_status(
            client, namespace, taken["metadata"]["name"], {"readyToUse": True}
        )
        await wait_for(
            lambda: client.get(CLAIMS, claim_name, namespace),
            lambda c: bool(c["metadata"].get("deletionTimestamp")),
            "the claim to be deleted once its snapshot is ready",
        )


async def test_a_claim_that_starts_from_a_snapshot_waits_for_one(
    snapshotting: RunningController, client: KubeClient, namespace: str
) -> None:
    """restorePolicy NewestSnapshot, whenMissing left out (Wait): no claim and no Job until a
    ready snapshot of the claim exists; then the claim is made from it."""
    name, claim_name = "waits", "data-waits"
    await client.create(
        api.JOBSETS, checkpointed(name, restorePolicy={"source": "NewestSnapshot"}), namespace
    )
    waiting = await wait_for(
        lambda: get_jobset(client, namespace, name),
        lambda obj: (condition(obj, "VolumesReady") or {}).get("reason") == "WaitingForSnapshot",
        "VolumesReady to say the claim waits for a snapshot",
    )
    assert claim_name in condition(waiting, "VolumesReady")["message"]  # type: ignore[index]
    await settled(snapshotting, client)
    assert (await client.list(CLAIMS, namespace))["items"] == []
    assert (await client.list(JOBS, namespace))["items"] == []

    # A snapshot of an earlier claim of that name, as this controller takes them.
    snapshot = {
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "metadata": {
            "name": f"{claim_name}-0123abcd",
            "labels": {api.JOBSET_NAME: name, CLAIM_TEMPLATE_LABEL: "data"},
            "annotations": {SNAPSHOT_OF_UID_ANNOTATION: "0123abcd-0000-0000-0000-000000000000"},
        },
        "spec": {"source": {"persistentVolumeClaimName": claim_name}},
    }
    await client.create(VOLUME_SNAPSHOTS, snapshot, namespace)
    await set_snapshot_status(client, namespace, f"{claim_name}-0123abcd", {"readyToUse": True})
    made = await wait_for(
        lambda: client.get(CLAIMS, claim_name, namespace), lambda c: bool(c), "the claim"
    )
    assert made["spec"]["dataSourceRef"]["name"] == f"{claim_name}-0123abcd"


async def test_the_ranks_are_snapshotted_together_and_each_restored_from_the_same_group(
    snapshotting: RunningController, client: KubeClient, namespace: str
) -> None:
    """snapshotPolicy.volumeGroupSnapshotClassName, Job scope, two ranks: one
    VolumeGroupSnapshot selects both claims; each claim goes once the group and its member are
    ready; the re-applied JobSet's ranks are each made from their member of that group. The
    test plays the snapshot controller (it makes the members, owned by the group)."""
    name = "ranks"
    ranks = [f"ckpt-{name}-w-{i}" for i in range(2)]
    body = jobset(
        name,
        with_mounts(replicated_job("w", 2), "ckpt"),
        volumeClaimPolicies=[
            {
                "scope": "Job",
                "templates": [{"metadata": {"name": "ckpt"}, "spec": CLAIM_SPEC}],
                "retentionPolicy": {"whenCompleted": "Snapshot"},
                "snapshotPolicy": {"volumeGroupSnapshotClassName": "csi-group-snapshot"},
                "restorePolicy": {"source": "NewestSnapshot", "whenMissing": "CreateEmpty"},
            }
        ],
    )
    await client.create(api.JOBSETS, body, namespace)
    uids = {r: (await bind(client, namespace, r))["metadata"]["uid"] for r in ranks}
    for job in await wait_jobs(client, namespace, name, 2):
        await complete_job(client, namespace, job)

    (group,) = await wait_for(
        lambda: groups_of(client, namespace), lambda found: len(found) == 1, "a group snapshot"
    )
    group_name = group["metadata"]["name"]
    selector = group["spec"]["source"]["selector"]
    assert selector["matchLabels"] == {api.JOBSET_NAME: name}
    assert group["spec"]["volumeGroupSnapshotClassName"] == "csi-group-snapshot"
    assert await snapshots_of(client, namespace, ranks[0]) == []  # not one by one
    # The snapshot controller's part: a member per claim, owned by the group; then ready.
    owner = {
        "apiVersion": "groupsnapshot.storage.k8s.io/v1",
        "kind": "VolumeGroupSnapshot",
        "name": group["metadata"]["name"],
        "uid": group["metadata"]["uid"],
    }
    for rank in ranks:
        member = {
            "apiVersion": "snapshot.storage.k8s.io/v1",
            "kind": "VolumeSnapshot",
            "metadata": {"name": f"member-{rank}", "ownerReferences": [owner]},
            "spec": {"source": {"persistentVolumeClaimName": rank}},
        }
        await client.create(VOLUME_SNAPSHOTS, member, namespace)
        await set_snapshot_status(client, namespace, f"member-{rank}", {"readyToUse": True})
    await settled(snapshotting, client)
    for rank in ranks:  # the group itself is not ready yet: every claim stays
        kept = await client.get(CLAIMS, rank, namespace)
        assert not kept["metadata"].get("deletionTimestamp"), rank
    await client.patch(
        VOLUME_GROUP_SNAPSHOTS,
        group["metadata"]["name"],
        {"status": {"readyToUse": True, "creationTime": "2026-12-04T00:00:00Z"}},
        namespace,
        subresource="status",
    )
    for rank in ranks:
        await wait_for(
            lambda rank=rank: client.get(CLAIMS, rank, namespace),  # type: ignore[misc]
            lambda c: bool(c["metadata"].get("deletionTimestamp")),
            f"{rank} to be deleted once the group is ready",
        )
        await release(client, namespace, rank)

    await client.delete(api.JOBSETS, name, namespace)
    await wait_for(
        lambda: client.list(CLAIMS, namespace), lambda listed: not listed["items"], "claims gone"
    )
    await wait_for(
        lambda: client.list(api.JOBSETS, namespace),
        lambda listed: not listed["items"],
        "the first JobSet to go",
    )
    await client.create(api.JOBSETS, body, namespace)
    for rank in ranks:
        made = await wait_for(
            lambda rank=rank: client.get(CLAIMS, rank, namespace),  # type: ignore[misc]
            lambda c: bool(c),
            f"{rank} again",
        )
        assert made["metadata"]["uid"] != uids[rank]
        assert made["spec"]["dataSourceRef"]["name"] == f"member-{rank}"
        assert made["metadata"]["annotations"][RESTORED_FROM_GROUP_ANNOTATION] == group_name
    # The status says every rank came from that one group (each claim names its member).
    reported = await wait_for(
        lambda: get_jobset(client, namespace, name),
        lambda obj: obj["status"]["volumes"]["templates"][0].get("restored") == 2,
        "status.volumes to count both ranks restored",
    )
    (template,) = reported["status"]["volumes"]["templates"]
    assert template.get("restoredFromGroup") == group_name


async def groups_of(client: KubeClient, namespace: str) -> list[Obj]:
    listed: list[Obj] = (await client.list(VOLUME_GROUP_SNAPSHOTS, namespace))["items"]
    return listed


async def test_a_suspended_jobsets_claim_goes_through_a_snapshot_and_comes_back_on_resume(
    snapshotting: RunningController, client: KubeClient, namespace: str
) -> None:
    """retentionPolicy.whenSuspended: Snapshot. The JobSet runs, is suspended (as Kueue preempts
    it); once its Job reports no pod left, its claim is snapshotted and deleted only when the
    snapshot is ready; resumed, the claim is made again from that snapshot, and the Job resumes
    only after it. The test plays the Job controller and the snapshot controller."""
    name, claim_name = "preempted", "data-preempted"
    body = checkpointed(
        name,
        retentionPolicy={"whenSuspended": "Snapshot"},
        restorePolicy={"source": "NewestSnapshot", "whenMissing": "CreateEmpty"},
    )
    await client.create(api.JOBSETS, body, namespace)
    first = await bind(client, namespace, claim_name)
    (job,) = await wait_jobs(client, namespace, name, 1)
    job_name = job["metadata"]["name"]
    await ready_job(client, namespace, job)

    await client.patch(api.JOBSETS, name, {"spec": {"suspend": True}}, namespace)
    await wait_for(
        lambda: client.get(JOBS, job_name, namespace),
        lambda j: j["spec"].get("suspend") is True,
        "the Job suspended",
    )
    # Its pod is still running (the Job says so): nothing is snapshotted yet.
    await settled(snapshotting, client)
    assert await snapshots_of(client, namespace, claim_name) == []
    # The Job controller's part: the pod gone, the Job says so.
    await mark_suspended(client, namespace, job, active=0, ready=0, terminating=0)

    (taken,) = await wait_for(
        lambda: snapshots_of(client, namespace, claim_name), lambda s: len(s) == 1, "a snapshot"
    )
    meta = taken["metadata"]
    assert meta["name"].startswith(f"{claim_name}-{first['metadata']['uid'][:8]}-s")
    assert meta["annotations"][SNAPSHOT_OF_UID_ANNOTATION] == first["metadata"]["uid"]
    held = await get_jobset(client, namespace, name)
    assert held["status"]["volumes"]["suspensionReleases"] == [
        {
            "template": "data",
            "uids": first["metadata"]["uid"][:8],
            "started": held["status"]["volumes"]["suspensionReleases"][0]["started"],
        }
    ]
    assert (condition(held, "VolumesReady") or {}).get("reason") == "WaitingForSnapshot"
    await deleted_once_ready(snapshotting, client, namespace, claim_name, meta["name"])
    await release(client, namespace, claim_name)
    waiting = await wait_for(
        lambda: get_jobset(client, namespace, name),
        lambda obj: (
            (condition(obj, "VolumesReady") or {}).get("reason") == "WaitingForResume"
            and not obj["status"]["volumes"].get("suspensionReleases")
        ),
        "VolumesReady to say the claim comes back on resume, the release ended",
    )
    assert not waiting["status"]["volumes"].get("claimUIDs"), "the deleted claim is forgotten"
    await settled(snapshotting, client)
    assert (await client.list(CLAIMS, namespace))["items"] == []  # nothing while suspended

    await client.patch(api.JOBSETS, name, {"spec": {"suspend": False}}, namespace)

    async def claim_then_job() -> tuple[Obj, Obj] | None:
        """The new claim and the Job; the Job resumed never before the claim exists."""
        resumed = await client.get(JOBS, job_name, namespace)
        try:
            made = await client.get(CLAIMS, claim_name, namespace)
        except ApiError as err:
            if not err.not_found:
                raise
            assert resumed["spec"].get("suspend") is True, "resumed before its claim exists"
            return None
        if resumed["spec"].get("suspend") is not False:
            return None
        return made, resumed

    made, resumed = await wait_for(claim_then_job, lambda found: found is not None, "resume")  # type: ignore[misc]
    assert made["metadata"]["uid"] != first["metadata"]["uid"]
    assert made["spec"]["dataSourceRef"] == {
        "apiGroup": "snapshot.storage.k8s.io",
        "kind": "VolumeSnapshot",
        "name": meta["name"],
    }
    # The Job's resume is a later write than the claim's creation (etcd revisions).
    assert int(resumed["metadata"]["resourceVersion"]) > int(made["metadata"]["resourceVersion"])
    recorded = await get_jobset(client, namespace, name)
    assert recorded["status"]["volumes"]["claimUIDs"] == [
        {"template": "data", "uids": made["metadata"]["uid"][:8]}
    ]
