"""snapshots: retention to a VolumeSnapshot, pruning to historyLimit, restore from one.

Rows: the JobSet js (policies, terminal state), the claims and the VolumeSnapshots that exist;
out: the snapshots created and deleted, the claims deleted or kept, the data source of the
claims created, and what the status says.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
from typing import Any

import pytest

from controller.jobset import api
from controller.jobset.jobsetstatus import SuspensionRelease
from controller.jobset.model import parse
from controller.jobset.volumes import StorageClasses, deletion, model
from controller.jobset.volumes import lifecycle as volume_lifecycle
from controller.jobset.volumes import snapshots as snapshots_mod
from controller.jobset.volumes import status as volume_status
from controller.jobset.volumes.lifecycle import ClaimState, VolumePlan
from controller.jobset.volumes.model import (
    CLAIM_TEMPLATE_LABEL,
    FINALIZER,
    GROUP_OF_JOBSET_ANNOTATION,
    RESTORED_FROM_GROUP_ANNOTATION,
    SNAPSHOT_CLAIM_LABEL,
    SNAPSHOT_OF_UID_ANNOTATION,
)
from controller.jobset.volumes.observed import ClaimView, GroupView, SnapshotView, views
from controller.jobset.volumes.snapshots import (
    NO_SNAPSHOTS,
    Snapshots,
    SnapshotStep,
    group_name,
    group_object,
    named_snapshot,
    prune,
    prune_groups,
    restore,
    restored,
    retention_step,
    snapshot_name,
    snapshot_object,
    snapshots,
)
from controller.jobset.volumes.suspension import Suspension, occasion
from controller.runtime.store import Obj
from tests.unit.volumes.factories import (
    ckpt,
    claim,
    make,
    make_obj,
    mounting,
    prefix_of,
    recorded,
    tpl,
    uid_of,
)

SNAPSHOT_ON_COMPLETION = {"whenCompleted": "Snapshot"}


def snap(
    of: str,
    *,
    uid: str | None = None,
    name: str | None = None,
    ready: bool = True,
    error: str = "",
    created: str = "2026-12-01T10:00:00Z",
    ours: bool = True,
    template: str = "data",
    deleting: bool = False,
) -> Obj:
    """A VolumeSnapshot of the claim ``of`` (the controller's unless ``ours=False``)."""
    claim_uid = uid or uid_of(of)
    meta: Obj = {
        "name": name or f"{of}-{claim_uid.replace('-', '')[:8]}",
        "namespace": "default",
        "labels": {api.JOBSET_NAME: "js", CLAIM_TEMPLATE_LABEL: template},
        "creationTimestamp": created,
    }
    if ours:
        meta["annotations"] = {SNAPSHOT_OF_UID_ANNOTATION: claim_uid}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T00:00:00Z"
    status: Obj = {"readyToUse": ready, "creationTime": created}
    if error:
        status["error"] = {"message": error}
    return {
        "apiVersion": "snapshot.storage.k8s.io/v1",
        "kind": "VolumeSnapshot",
        "metadata": meta,
        "spec": {"source": {"persistentVolumeClaimName": of}},
        "status": status,
    }


def found(*objs: Obj, served: bool = True) -> Snapshots:
    all_views = [SnapshotView.of(o) for o in objs]
    return snapshots(
        all_views, lambda name: next((v for v in all_views if v.name == name), None), served=served
    )


def view(obj: Obj) -> ClaimView:
    return ClaimView.of(obj)


# ----------------------------------------------------------------------------- names


def test_a_snapshot_is_named_after_its_claim_and_the_claims_uid() -> None:
    data = view(claim("data-js", uid="0123abcd-0000-0000-0000-000000000000"))
    assert snapshot_name(data) == "data-js-0123abcd"
    long = view(claim("x" * 250, uid="0123abcd-0000-0000-0000-000000000000"))
    name = snapshot_name(long)
    assert len(name) <= 253 and name.endswith("-0123abcd")
    assert snapshot_name(long) == name  # deterministic: a lost create's answer is found again


def test_the_snapshot_object_is_labelled_and_annotated_as_the_controllers_own() -> None:
    data = view(claim("data-js"))
    js = make([{"templates": [tpl("data")], "snapshotPolicy": {"volumeSnapshotClassName": "fast"}}])
    (policy,) = model(js).policies
    body = snapshot_object(data, policy, "js", "default")
    assert body["metadata"]["labels"] == {
        api.JOBSET_NAME: "js",
        CLAIM_TEMPLATE_LABEL: "data",
        SNAPSHOT_CLAIM_LABEL: "data-js",
    }
    assert body["metadata"]["annotations"] == {SNAPSHOT_OF_UID_ANNOTATION: data.uid}
    assert "ownerReferences" not in body["metadata"]  # it outlives the JobSet
    assert body["spec"] == {
        "source": {"persistentVolumeClaimName": "data-js"},
        "volumeSnapshotClassName": "fast",
    }
    # A claim name too long for a label value is not labelled (its uid annotation still is).
    long = view(claim("d" * 70))
    assert (
        SNAPSHOT_CLAIM_LABEL
        not in snapshot_object(long, policy, "js", "default")["metadata"]["labels"]
    )


# ----------------------------------------------------------------------------- retention


@pytest.mark.parametrize(
    ("phase", "existing", "served", "step"),
    [
        pytest.param("Bound", [], True, "take", id="bound-no-snapshot-take-one"),
        pytest.param("Bound", [snap("data-js", ready=False)], True, "wait", id="not-ready-wait"),
        pytest.param("Bound", [snap("data-js")], True, "delete", id="ready-delete-the-claim"),
        pytest.param("Bound", [snap("data-js", ready=False, error="no space")], True, "failed",
                     id="failed-keep-the-claim"),
        # A snapshot of an earlier claim of the same name is not this claim's.
        pytest.param("Bound", [snap("data-js", uid="11111111-0000-0000-0000-000000000000")],
                     True, "take", id="another-claims-snapshot-does-not-count"),
        # A user's snapshot of the claim (no uid annotation) is not the controller's proof.
        pytest.param("Bound", [snap("data-js", ours=False)], True, "take", id="not-ours"),
        pytest.param("Bound", [], False, "failed", id="snapshots-not-served-keep-the-claim"),
        pytest.param("Pending", [], True, "delete", id="never-bound-holds-no-data"),
    ],
)  # fmt: skip
def test_retention_step(phase: str, existing: list[Obj], served: bool, step: str) -> None:
    data = view(claim("data-js", phase=phase))
    assert retention_step(data, found(*existing, served=served)).step == step


def completed(
    retention: dict[str, str],
    claims: list[Obj],
    terminal_state: str = api.TERMINAL_COMPLETED,
    **kw: Any,
) -> Any:
    js = make(
        [{"templates": [tpl("data")], "retentionPolicy": retention, **kw}],
        terminal_state=terminal_state,
    )
    return recorded(js, claims)


# Each terminal state, and the retention field that acts on it.
OCCASIONS = [
    pytest.param("whenCompleted", api.TERMINAL_COMPLETED, id="completed"),
    pytest.param("whenFailed", api.TERMINAL_FAILED, id="failed"),
]


@pytest.mark.parametrize(
    ("existing", "deleted", "taken", "condition"),
    [
        pytest.param([], [], ["data-js-"], ("False", "SnapshotsPending"), id="take"),
        pytest.param([snap("data-js", ready=False)], [], [], ("False", "SnapshotsPending"),
                     id="wait"),
        pytest.param([snap("data-js")], ["data-js"], [], ("True", "NoSnapshotPending"),
                     id="ready-then-deleted"),
        pytest.param([snap("data-js", ready=False, error="quota")], [], [],
                     ("False", "SnapshotFailed"), id="failed-kept"),
    ],
)  # fmt: skip
@pytest.mark.parametrize(("field", "terminal_state"), OCCASIONS)
def test_terminal_snapshot_deletes_the_claim_only_through_a_ready_snapshot(
    field: str,
    terminal_state: str,
    existing: list[Obj],
    deleted: list[str],
    taken: list[str],
    condition: tuple[str, str],
) -> None:
    """whenCompleted: Snapshot on Completed, whenFailed: Snapshot on Failed, alike."""
    data = claim("data-js")
    js = completed({field: "Snapshot"}, [data], terminal_state)
    vm = model(js)
    vplan = volume_lifecycle.plan(
        vm, views([data]), StorageClasses(), terminal_state=terminal_state,
        found=found(*existing),
    )  # fmt: skip
    assert vplan.deleted == deleted
    names = [b["metadata"]["name"] for b in vplan.create_snapshots]
    assert len(names) == len(taken)
    assert all(n.startswith(t) for n, t in zip(names, taken, strict=True))
    (ready,) = [c for c in volume_status.conditions(vm, vplan) if c.type == "VolumeSnapshotsReady"]
    assert (ready.status, ready.reason) == condition
    if condition[1] == "SnapshotFailed":
        assert ready.event_type == "Warning" and "quota" in ready.message


@pytest.mark.parametrize(("field", "terminal_state"), OCCASIONS)
def test_a_snapshot_for_the_other_terminal_state_keeps_the_claim_untouched(
    field: str, terminal_state: str
) -> None:
    """whenFailed: Snapshot on a Completed JobSet (and the reverse) is the default, Retain:
    nothing is snapshotted or deleted."""
    other = "whenFailed" if field == "whenCompleted" else "whenCompleted"
    data = claim("data-js")
    js = completed({other: "Snapshot"}, [data], terminal_state)
    vm = model(js)
    vplan = volume_lifecycle.plan(
        vm, views([data]), StorageClasses(), terminal_state=terminal_state
    )
    assert (vplan.deleted, vplan.create_snapshots, vplan.snapshotting) == ([], [], {})


def test_delete_and_retain_policies_write_no_snapshot_condition() -> None:
    data = claim("data-js")
    js = completed({"whenCompleted": "Delete"}, [data])
    vm = model(js)
    vplan = volume_lifecycle.plan(
        vm, views([data]), StorageClasses(), terminal_state=api.TERMINAL_COMPLETED
    )
    assert vplan.deleted == ["data-js"] and vplan.create_snapshots == []
    assert "VolumeSnapshotsReady" not in {c.type for c in volume_status.conditions(vm, vplan)}


def test_when_scaled_snapshot_keeps_a_scaled_away_claim_until_its_snapshot_is_ready() -> None:
    existing = [ckpt(0), ckpt(1)]
    obj = make_obj(
        [{"templates": [tpl("ckpt")], "scope": "Job",
          "retentionPolicy": {"whenScaled": "Snapshot"}}],
        rjobs=[mounting("workers", 1, ("ckpt",))],
    )  # fmt: skip
    js = recorded(parse(obj), existing)
    vm = model(js)
    first = volume_lifecycle.plan(vm, views(existing), StorageClasses(), terminal_state="",
                                  found=found())  # fmt: skip
    assert first.deleted == []
    assert [b["spec"]["source"]["persistentVolumeClaimName"] for b in first.create_snapshots] == [
        "ckpt-js-workers-1"
    ]
    ready = snap("ckpt-js-workers-1", template="ckpt")
    second = volume_lifecycle.plan(vm, views(existing), StorageClasses(), terminal_state="",
                                   found=found(ready))  # fmt: skip
    assert second.deleted == ["ckpt-js-workers-1"]


# ----------------------------------------------------------------------------- pruning


def test_prune_keeps_the_newest_ready_snapshots_of_each_claim() -> None:
    js = make([{"templates": [tpl("data")], "snapshotPolicy": {"historyLimit": 2}}])
    existing = [
        snap("data-js", uid=f"{i}0000000-0000-0000-0000-000000000000",
             created=f"2026-12-0{i}T00:00:00Z")
        for i in range(1, 5)
    ]  # fmt: skip
    existing.append(snap("data-js", uid="90000000-0000-0000-0000-000000000000", ready=False,
                         created="2026-11-01T00:00:00Z"))  # fmt: skip
    existing.append(snap("data-js", uid="80000000-0000-0000-0000-000000000000", ours=False,
                         created="2026-10-01T00:00:00Z"))  # fmt: skip
    existing.append(snap("other-js", template="other", created="2026-01-01T00:00:00Z"))
    assert prune(model(js).policies, found(*existing)) == ["data-js-10000000", "data-js-20000000"]
    one = make([{"templates": [tpl("data")]}])  # historyLimit left out: 1
    assert len(prune(model(one).policies, found(*existing))) == 3


# ----------------------------------------------------------------------------- restore


def restoring(**policy: Any) -> Any:
    js = make([{"templates": [tpl("data")], "restorePolicy": policy}])
    (desired,) = model(js).desired
    return desired


@pytest.mark.parametrize(
    ("policy", "existing", "served", "source", "waits"),
    [
        pytest.param({"source": "NewestSnapshot"},
                     [snap("data-js", uid="10000000-0000-0000-0000-000000000000",
                           created="2026-12-01T00:00:00Z"),
                      snap("data-js", uid="20000000-0000-0000-0000-000000000000",
                           created="2026-12-02T00:00:00Z")],
                     True, "data-js-20000000", "", id="newest-ready"),
        pytest.param({"source": "NewestSnapshot"},
                     [snap("data-js", uid="10000000-0000-0000-0000-000000000000",
                           created="2026-12-01T00:00:00Z"),
                      snap("data-js", uid="20000000-0000-0000-0000-000000000000",
                           created="2026-12-02T00:00:00Z", ready=False)],
                     True, None, "not ready yet", id="a-newer-one-in-flight-is-waited-for"),
        pytest.param({"source": "NewestSnapshot"},
                     [snap("data-js", uid="10000000-0000-0000-0000-000000000000",
                           created="2026-12-01T00:00:00Z"),
                      snap("data-js", uid="20000000-0000-0000-0000-000000000000",
                           created="2026-12-02T00:00:00Z", ready=False, error="boom")],
                     True, "data-js-10000000", "", id="a-failed-newer-one-is-passed-over"),
        pytest.param({"source": "NewestSnapshot"}, [], True, None, "no ready snapshot",
                     id="none-wait"),
        pytest.param({"source": "NewestSnapshot", "whenMissing": "CreateEmpty"}, [], True, None,
                     "", id="none-create-empty"),
        pytest.param({"source": "NewestSnapshot"}, [snap("data-js", ours=False)], True, None,
                     "no ready snapshot", id="only-the-controllers-snapshots-count"),
        pytest.param({"source": "VolumeSnapshot", "volumeSnapshotName": "golden"},
                     [snap("seed", name="golden", ours=False)], True, "golden", "",
                     id="named-ready"),
        pytest.param({"source": "VolumeSnapshot", "volumeSnapshotName": "golden"},
                     [snap("seed", name="golden", ready=False)], True, None, "not ready yet",
                     id="named-not-ready"),
        pytest.param({"source": "VolumeSnapshot", "volumeSnapshotName": "golden"}, [], True,
                     None, "does not exist", id="named-missing"),
        pytest.param({"source": "VolumeSnapshot", "volumeSnapshotName": "golden",
                      "whenMissing": "CreateEmpty"}, [], True, None, "",
                     id="named-missing-create-empty"),
        pytest.param({"source": "NewestSnapshot", "whenMissing": "CreateEmpty"}, [], False,
                     None, "does not serve VolumeSnapshots", id="not-served-always-waits"),
    ],
)  # fmt: skip
def test_restore(
    policy: Obj, existing: list[Obj], served: bool, source: str | None, waits: str
) -> None:
    chosen = restore(restoring(**policy), found(*existing, served=served))
    assert chosen.source == source
    assert (waits in chosen.wait) if waits else chosen.wait == ""


def test_a_restored_claim_is_created_from_its_snapshot_and_the_status_says_so() -> None:
    js = make([{"templates": [tpl("data")], "restorePolicy": {"source": "NewestSnapshot"}}])
    vm = model(js)
    vplan = volume_lifecycle.plan(vm, {}, StorageClasses(), terminal_state="",
                                  found=found(snap("data-js")))  # fmt: skip
    assert [d.name for d in vplan.create] == ["data-js"]
    assert vplan.restore == {"data-js": snapshot_name(view(claim("data-js")))}
    # Once it exists, the status counts it and names its snapshot (JobSet scope).
    made = claim("data-js", uid=uid_of("data-js", 1), phase="Pending")
    made["spec"]["dataSourceRef"] = {
        "apiGroup": "snapshot.storage.k8s.io",
        "kind": "VolumeSnapshot",
        "name": vplan.restore["data-js"],
    }
    after = volume_lifecycle.plan(vm, views([made]), StorageClasses(), terminal_state="")
    (entry,) = volume_status.volumes_status(vm, after).to_dict()["templates"]
    assert entry["restored"] == 1 and entry["restoredFrom"] == vplan.restore["data-js"]


def test_a_claim_waiting_for_its_snapshot_is_not_created_and_volumes_are_not_ready() -> None:
    js = make([{"templates": [tpl("data")], "restorePolicy": {"source": "NewestSnapshot"}}])
    vm = model(js)
    vplan = volume_lifecycle.plan(vm, {}, StorageClasses(), terminal_state="",
                                  found=found(snap("data-js", ready=False)))  # fmt: skip
    assert vplan.create == [] and "data-js" in vplan.restore_waiting
    assert vplan.mountable == set()
    ready = volume_status.volumes_ready(vm, vplan.claims)
    assert (ready.status, ready.reason) == ("False", "WaitingForSnapshot")
    assert "not ready yet" in ready.message


# ----------------------------------------------------------------------------- deletion


def test_when_deleted_snapshot_holds_the_finalizer_until_the_snapshot_is_ready() -> None:
    obj = make_obj([{"templates": [tpl("data")], "retentionPolicy": {"whenDeleted": "Snapshot"}}],
                   deleting=True)  # fmt: skip
    obj["metadata"]["finalizers"] = [FINALIZER]
    data = claim("data-js")
    first = deletion.plan(obj, views([data]).values(), found())
    assert (first.deleted, first.remove_finalizer) == ([], False)
    assert [b["metadata"]["name"] for b in first.create_snapshots] == [snapshot_name(view(data))]
    waiting = deletion.plan(obj, views([data]).values(), found(snap("data-js", ready=False)))
    assert (waiting.deleted, waiting.create_snapshots, waiting.remove_finalizer) == ([], [], False)
    failed = deletion.plan(obj, views([data]).values(), found(snap("data-js", ready=False,
                                                                    error="quota")))  # fmt: skip
    assert (failed.deleted, failed.remove_finalizer) == ([], False)
    assert failed.snapshotting["data-js"].step == "failed"
    ready = deletion.plan(obj, views([data]).values(), found(snap("data-js")))
    assert (ready.deleted, ready.remove_finalizer) == (["data-js"], False)
    gone = deletion.plan(obj, [], found(snap("data-js")))
    assert gone.remove_finalizer
    # Without the snapshot API the claim is never let go.
    unserved = deletion.plan(obj, views([data]).values(), NO_SNAPSHOTS)
    assert (unserved.deleted, unserved.remove_finalizer) == ([], False)


def test_a_snapshot_retention_claim_holds_a_foreground_ttl_delete() -> None:
    obj = make_obj([{"templates": [tpl("data")], "retentionPolicy": SNAPSHOT_ON_COMPLETION}],
                   terminal_state=api.TERMINAL_COMPLETED)  # fmt: skip
    obj["metadata"]["finalizers"] = [FINALIZER]
    owned = claim("data-js", refs=[{"uid": "uid-js", "kind": "JobSet", "name": "js",
                                    "controller": True}])  # fmt: skip
    assert deletion.kept_but_owned(obj, views([owned]).values()) == ["data-js"]


def test_nothing_is_planned_for_snapshots_without_a_snapshot_policy() -> None:
    data = claim("data-js")
    js = recorded(make([{"templates": [tpl("data")]}]), [data])
    vplan = volume_lifecycle.plan(model(js), views([data]), StorageClasses(), terminal_state="",
                                  found=found(snap("data-js")))  # fmt: skip
    assert isinstance(vplan, VolumePlan)
    # historyLimit 1 and one ready snapshot: nothing pruned; nothing taken or restored.
    assert (vplan.create_snapshots, vplan.delete_snapshots, vplan.restore) == ([], [], {})


def test_a_preempted_jobset_takes_no_snapshot_and_keeps_its_claims() -> None:
    """Kueue preempts by suspending: no retention case, so nothing is snapshotted or deleted,
    whatever the policy says for completion, failure, deletion or scale-down."""
    data = claim("data-js")
    every = {"whenCompleted": "Snapshot", "whenFailed": "Snapshot", "whenDeleted": "Snapshot"}
    js = recorded(
        make([{"templates": [tpl("data")], "retentionPolicy": every}], suspend=True), [data]
    )
    vm = model(js)
    vplan = volume_lifecycle.plan(
        vm, views([data]), StorageClasses(), terminal_state="", found=found()
    )
    assert (vplan.create_snapshots, vplan.deleted, vplan.snapshotting) == ([], [], {})
    (ready,) = [c for c in volume_status.conditions(vm, vplan) if c.type == "VolumeSnapshotsReady"]
    assert (ready.status, ready.reason) == ("True", "NoSnapshotPending")


# ----------------------------------------------------------------------------- group snapshots

GROUPED = {"volumeGroupSnapshotClassName": "csi-group-snapshot"}


def group(
    name: str = "js-ckpt-uidjs",
    *,
    uid: str = "group-uid-1",
    ready: bool = True,
    error: str = "",
    created: str = "2026-12-01T10:00:00Z",
) -> Obj:
    status: Obj = {"readyToUse": ready, "creationTime": created}
    if error:
        status["error"] = {"message": error}
    return {
        "metadata": {
            "name": name,
            "uid": uid,
            "namespace": "default",
            "labels": {api.JOBSET_NAME: "js", CLAIM_TEMPLATE_LABEL: "ckpt"},
            "annotations": {GROUP_OF_JOBSET_ANNOTATION: "uid-js"},
        },
        "spec": {},
        "status": status,
    }


def member(of: str, group_uid: str = "group-uid-1", *, ready: bool = True) -> Obj:
    """A member VolumeSnapshot the snapshot controller made for a group (not labelled by us)."""
    return {
        "metadata": {
            "name": f"snapshot-{of}",
            "namespace": "default",
            "ownerReferences": [{"kind": "VolumeGroupSnapshot", "uid": group_uid, "name": "g"}],
        },
        "spec": {"source": {"persistentVolumeClaimName": of}},
        "status": {"readyToUse": ready},
    }


def with_groups(*objs: Obj, groups: tuple[Obj, ...] = ()) -> Snapshots:
    all_views = [SnapshotView.of(o) for o in objs]
    return snapshots(
        all_views,
        groups=[GroupView.of(g) for g in groups],
        members=lambda g: [v for v in all_views if v.group_uid == g.uid],
    )


def ranks(retention: dict[str, str], claims: list[Obj], **policy: Any) -> Any:
    obj = make_obj(
        [{"templates": [tpl("ckpt")], "scope": "Job", "retentionPolicy": retention, **policy}],
        rjobs=[mounting("workers", 2, ("ckpt",))],
        terminal_state=api.TERMINAL_COMPLETED,
    )
    return recorded(parse(obj), claims)


def test_the_group_snapshot_selects_the_policys_claims_of_this_jobset() -> None:
    js = ranks(SNAPSHOT_ON_COMPLETION, [], snapshotPolicy=GROUPED)
    (policy,) = model(js).policies
    body = group_object(policy, "js", "0123abcd-9999", "default")
    assert body["metadata"]["name"] == "js-ckpt-0123abcd"
    assert body["metadata"]["labels"] == {api.JOBSET_NAME: "js", CLAIM_TEMPLATE_LABEL: "ckpt"}
    assert body["metadata"]["annotations"] == {GROUP_OF_JOBSET_ANNOTATION: "0123abcd-9999"}
    assert body["spec"] == {
        "volumeGroupSnapshotClassName": "csi-group-snapshot",
        "source": {
            "selector": {
                "matchLabels": {api.JOBSET_NAME: "js"},
                "matchExpressions": [
                    {"key": CLAIM_TEMPLATE_LABEL, "operator": "In", "values": ["ckpt"]}
                ],
            }
        },
    }


@pytest.mark.parametrize(
    ("existing", "groups", "created", "deleted", "steps"),
    [
        pytest.param([], (), 1, [], {"take"}, id="no-group-take-one"),
        pytest.param([], (group(ready=False),), 0, [], {"wait"}, id="group-not-ready"),
        pytest.param([], (group(ready=False, error="frozen"),), 0, [], {"failed"},
                     id="group-failed-keeps-every-claim"),
        pytest.param([member("ckpt-js-workers-0"), member("ckpt-js-workers-1")], (group(),), 0,
                     ["ckpt-js-workers-0", "ckpt-js-workers-1"], set(), id="ready-all-go"),
        pytest.param([member("ckpt-js-workers-0"), member("ckpt-js-workers-1", ready=False)],
                     (group(),), 0, ["ckpt-js-workers-0"], {"wait"}, id="a-member-not-ready"),
        # The group did not take rank 1 (say, it was labelled later): it gets one of its own.
        pytest.param([member("ckpt-js-workers-0")], (group(),), 0, ["ckpt-js-workers-0"],
                     {"take"}, id="a-claim-the-group-missed-goes-on-its-own"),
    ],
)  # fmt: skip
def test_completion_snapshots_the_ranks_together(
    existing: list[Obj], groups: tuple[Obj, ...], created: int, deleted: list[str], steps: set[str]
) -> None:
    claims = [ckpt(0), ckpt(1)]
    js = ranks(SNAPSHOT_ON_COMPLETION, claims, snapshotPolicy=GROUPED)
    found = with_groups(*existing, groups=tuple(
        {**g, "metadata": {**g["metadata"], "name": group_name("js", js.uid, "ckpt")}}
        for g in groups
    ))  # fmt: skip
    vplan = volume_lifecycle.plan(
        model(js), views(claims), StorageClasses(), terminal_state=api.TERMINAL_COMPLETED,
        found=found,
    )  # fmt: skip
    assert len(vplan.create_groups) == created
    assert sorted(vplan.deleted) == deleted
    assert {s.step for s in vplan.snapshotting.values()} == steps
    individual = [b["spec"]["source"]["persistentVolumeClaimName"] for b in vplan.create_snapshots]
    assert individual == (["ckpt-js-workers-1"] if "take" in steps and groups else [])


def test_an_unbound_rank_makes_the_policy_snapshot_claim_by_claim() -> None:
    claims = [ckpt(0), ckpt(1, phase="Pending")]
    js = ranks(SNAPSHOT_ON_COMPLETION, claims, snapshotPolicy=GROUPED)
    vplan = volume_lifecycle.plan(
        model(js), views(claims), StorageClasses(), terminal_state=api.TERMINAL_COMPLETED,
        found=with_groups(),
    )  # fmt: skip
    assert vplan.create_groups == []
    assert [b["spec"]["source"]["persistentVolumeClaimName"] for b in vplan.create_snapshots] == [
        "ckpt-js-workers-0"
    ]
    assert vplan.deleted == ["ckpt-js-workers-1"]  # never bound: no data


def test_restore_takes_every_rank_from_the_newest_group() -> None:
    obj = make_obj(
        [{"templates": [tpl("ckpt")], "scope": "Job", "snapshotPolicy": GROUPED,
          "restorePolicy": {"source": "NewestSnapshot"}}],
        rjobs=[mounting("workers", 3, ("ckpt",))],
    )  # fmt: skip
    vm = model(parse(obj))
    older = group("old", uid="g-old", created="2026-11-01T00:00:00Z")
    newer = group("new", uid="g-new", created="2026-12-01T00:00:00Z")
    found = with_groups(
        member("ckpt-js-workers-0", "g-old"),
        member("ckpt-js-workers-1", "g-old"),
        member("ckpt-js-workers-2", "g-old"),
        {**member("ckpt-js-workers-0", "g-new"), "metadata": {
            **member("ckpt-js-workers-0", "g-new")["metadata"], "name": "new-0"}},
        {**member("ckpt-js-workers-1", "g-new"), "metadata": {
            **member("ckpt-js-workers-1", "g-new")["metadata"], "name": "new-1"}},
        groups=(older, newer),
    )  # fmt: skip
    chosen = {d.name: restore(d, found) for d in vm.desired}
    assert chosen["ckpt-js-workers-0"].source == "new-0"
    assert chosen["ckpt-js-workers-1"].source == "new-1"
    assert {chosen[f"ckpt-js-workers-{i}"].group for i in (0, 1)} == {"new"}
    # Rank 2 is not in the newest group: not taken from an older one (another step).
    assert chosen["ckpt-js-workers-2"].source is None
    assert "holds no ready snapshot" in chosen["ckpt-js-workers-2"].wait
    in_flight = with_groups(groups=(older, group("newest", uid="g-3", ready=False,
                                                 created="2026-12-02T00:00:00Z")))  # fmt: skip
    assert "not ready yet" in restore(vm.desired[0], in_flight).wait


def test_ranks_restored_from_one_group_say_so_in_the_status() -> None:
    """Each rank's claim names its member (dataSourceRef) and the group (an annotation); the
    template's status says every restored claim came from that one group. A claim restored on
    its own, from no group, leaves the field out."""
    obj = make_obj(
        [{"templates": [tpl("ckpt")], "scope": "Job", "snapshotPolicy": GROUPED,
          "restorePolicy": {"source": "NewestSnapshot"}}],
        rjobs=[mounting("workers", 2, ("ckpt",))],
    )  # fmt: skip
    vm = model(parse(obj))
    bodies = [restored(d, f"member-{i}", "run-1") for i, d in enumerate(vm.desired)]
    assert all(
        b["metadata"]["annotations"][RESTORED_FROM_GROUP_ANNOTATION] == "run-1" for b in bodies
    )
    assert (
        restored(vm.desired[0], "alone")["metadata"]
        .get("annotations", {})
        .get(RESTORED_FROM_GROUP_ANNOTATION)
        is None
    )

    def status_of(claims: list[Obj]) -> Obj:
        for c in claims:
            c["metadata"]["uid"] = uid_of(c["metadata"]["name"])
            c["status"] = {"phase": "Bound"}
        js = recorded(parse(obj), claims)
        found = volume_status.template_counts(model(js), volume_lifecycle.lifecycle(
            model(js), views(claims), StorageClasses()))  # fmt: skip
        return found[0].to_dict()

    together = status_of(copy.deepcopy(bodies))
    assert (together["restored"], together["restoredFromGroup"]) == (2, "run-1")
    mixed = status_of([copy.deepcopy(bodies[0]), restored(vm.desired[1], "alone")])
    assert mixed["restored"] == 2 and "restoredFromGroup" not in mixed


def test_prune_groups_keeps_the_newest_per_policy() -> None:
    js = ranks(SNAPSHOT_ON_COMPLETION, [], snapshotPolicy={**GROUPED, "historyLimit": 1})
    found = with_groups(groups=(
        group("g1", uid="1", created="2026-12-01T00:00:00Z"),
        group("g2", uid="2", created="2026-12-02T00:00:00Z"),
        group("g3", uid="3", created="2026-12-03T00:00:00Z", ready=False),
    ))  # fmt: skip
    assert prune_groups(model(js).policies, found) == ["g1"]


# ----------------------------------------------------------------------------- suspension
# retentionPolicy.whenSuspended: Snapshot. A release starts once the suspended JobSet's pods have
# all stopped (its entry stored in status.volumes.suspensionReleases), and acts from the pass that
# reads the stored entry: the claim is held (never mountable), snapshotted under the release's
# own name, and deleted once that snapshot is ready.

ON_SUSPEND = {"whenSuspended": "Snapshot"}
NEWEST = {"source": "NewestSnapshot"}
STARTED = "2026-12-05T10:00:00.000001Z"
STOPPED = Suspension(stopped=True, now=STARTED)
RELEASE = SuspensionRelease("data", (prefix_of("data-js"),), STARTED)
# The snapshot the release takes of data-js: its name, uid and the release's start.
TAKEN = named_snapshot("data-js", uid_of("data-js"), occasion(RELEASE))


def preempted(
    claims: list[Obj],
    *,
    suspend: bool = True,
    releases: tuple[SuspensionRelease, ...] = (RELEASE,),
    record: list[Obj] | None = None,
    retention: Obj | None = None,
) -> Any:
    """JobSet js (workers mount data, whenSuspended Snapshot, restored from the newest snapshot)
    with ``releases`` stored and ``record`` (default: ``claims``) remembered."""
    kept = ON_SUSPEND if retention is None else retention
    obj = make_obj(
        [{"templates": [tpl("data")], "retentionPolicy": kept, "restorePolicy": NEWEST}],
        suspend=suspend,
    )  # fmt: skip
    obj["status"]["volumes"] = {"suspensionReleases": [r.to_dict() for r in releases]}
    return recorded(parse(obj), claims if record is None else record)


def suspended_pass(
    js: Any, claims: list[Obj], *snaps: Obj, pods: Suspension = STOPPED
) -> VolumePlan:
    return volume_lifecycle.plan(
        model(js), views(claims), StorageClasses(), terminal_state="", found=found(*snaps),
        suspended=pods,
    )  # fmt: skip


def snapshots_ready_reason(js: Any, vplan: VolumePlan) -> str:
    (ready,) = [c for c in volume_status.conditions(model(js), vplan)
                if c.type == "VolumeSnapshotsReady"]  # fmt: skip
    return ready.reason


@pytest.mark.parametrize(
    ("pods", "suspend", "retention", "started"),
    [
        pytest.param(STOPPED, True, ON_SUSPEND, True, id="stopped-starts"),
        pytest.param(Suspension(stopped=False, now=STARTED), True, ON_SUSPEND, False,
                     id="pods-still-running-or-terminating-nothing-yet"),
        pytest.param(STOPPED, False, ON_SUSPEND, False, id="not-suspended-nothing"),
        pytest.param(STOPPED, True, {}, False, id="retain-the-default-nothing"),
    ],
)  # fmt: skip
def test_a_release_starts_once_the_suspended_jobsets_pods_stopped(
    pods: Suspension, suspend: bool, retention: Obj, started: bool
) -> None:
    """The pass that starts a release only writes it into the status and holds the claim: no
    snapshot is taken before the entry is stored."""
    data = claim("data-js")
    js = preempted([data], suspend=suspend, releases=(), retention=retention)
    vplan = suspended_pass(js, [data], pods=pods)
    assert vplan.suspension_releases == ((RELEASE,) if started else ())
    assert (vplan.create_snapshots, vplan.create_groups, vplan.deleted) == ([], [], [])
    assert vplan.mountable == (set() if started else {"data-js"})
    assert [c.held for c in vplan.claims] == [started]


def test_retain_keeps_a_preempted_jobsets_claims_once_its_pods_stopped() -> None:
    """whenSuspended left out (Retain), every other case Snapshot: suspension is still no
    retention case, also once no pod runs (test_a_preempted_jobset_takes_no_snapshot_...)."""
    data = claim("data-js")
    every = {"whenCompleted": "Snapshot", "whenFailed": "Snapshot", "whenDeleted": "Snapshot"}
    js = preempted([data], releases=(), retention=every)
    vplan = suspended_pass(js, [data])
    assert (vplan.create_snapshots, vplan.deleted, vplan.suspension_releases) == ([], [], ())
    assert vplan.mountable == {"data-js"}


@pytest.mark.parametrize(
    ("existing", "suspend", "deleted", "taken", "reason", "kept", "mountable"),
    [
        pytest.param([], True, [], [TAKEN], "SnapshotsPending", True, False, id="take"),
        pytest.param([snap("data-js", name=TAKEN, ready=False)], True, [], [],
                     "SnapshotsPending", True, False, id="wait-kept"),
        pytest.param([snap("data-js", name=TAKEN)], True, ["data-js"], [],
                     "NoSnapshotPending", True, False, id="ready-then-deleted"),
        pytest.param([snap("data-js", name=TAKEN, ready=False, error="quota")], True, [], [],
                     "SnapshotFailed", True, False, id="failed-kept-while-suspended"),
        # A ready snapshot of this very claim, taken for another case (a scale-down given up, an
        # earlier name): not this release's proof.
        pytest.param([snap("data-js")], True, [], [TAKEN], "SnapshotsPending", True, False,
                     id="another-cases-snapshot-is-no-proof"),
        # Resumed (Kueue admitted it again) while the snapshot is taken: the claim stays held,
        # so no pod writes to it after the snapshot; the Jobs that mount it wait.
        pytest.param([snap("data-js", name=TAKEN, ready=False)], False, [], [],
                     "SnapshotsPending", True, False, id="resumed-while-taken-still-held"),
        pytest.param([snap("data-js", name=TAKEN)], False, ["data-js"], [],
                     "NoSnapshotPending", True, False, id="resumed-ready-then-deleted"),
        # Resumed after it failed: given up; the claim is kept, with its data, and mounted again.
        pytest.param([snap("data-js", name=TAKEN, ready=False, error="quota")], False, [], [],
                     "NoSnapshotPending", False, True, id="resumed-after-failure-given-up"),
    ],
)  # fmt: skip
def test_a_held_claim_goes_only_through_a_ready_snapshot_of_its_release(
    existing: list[Obj],
    suspend: bool,
    deleted: list[str],
    taken: list[str],
    reason: str,
    kept: bool,
    mountable: bool,
) -> None:
    data = claim("data-js")
    js = preempted([data], suspend=suspend)
    vplan = suspended_pass(js, [data], *existing)
    assert vplan.deleted == deleted
    assert [b["metadata"]["name"] for b in vplan.create_snapshots] == taken
    assert snapshots_ready_reason(js, vplan) == reason
    assert vplan.suspension_releases == ((RELEASE,) if kept else ())
    assert vplan.mountable == ({"data-js"} if mountable else set())
    # A claim deleted is forgotten by the record (as whenScaled: Snapshot's): made again, not Lost.
    assert (vplan.record.get(("data", None, None, None)) is None) == bool(deleted)
    if kept and not deleted:
        ready = volume_status.volumes_ready(model(js), vplan.claims)
        assert (ready.reason, "let go through a snapshot" in ready.message) == (
            "WaitingForSnapshot",
            True,
        )
    if not kept:
        assert vplan.delete_snapshots == [TAKEN]  # no one's checkpoint: the claim moved on
        assert "quota" in vplan.abandoned["data-js"]


def test_the_snapshot_of_a_release_is_the_claims_own_labelled_and_annotated() -> None:
    data = claim("data-js")
    (body,) = suspended_pass(preempted([data]), [data]).create_snapshots
    assert (
        body["metadata"]["name"] == TAKEN == f"data-js-{prefix_of('data-js')}-{occasion(RELEASE)}"
    )
    assert body["metadata"]["annotations"] == {SNAPSHOT_OF_UID_ANNOTATION: uid_of("data-js")}
    assert body["spec"]["source"] == {"persistentVolumeClaimName": "data-js"}
    # Another release (a later suspension) has a name of its own.
    later = SuspensionRelease("data", RELEASE.uids, "2026-12-06T08:00:00.000001Z")
    assert occasion(later) != occasion(RELEASE)


def test_once_deleted_the_claim_waits_for_the_resume_then_comes_back_from_its_snapshot() -> None:
    ready = snap("data-js", name=TAKEN)
    going = claim("data-js", deleting=True)
    # Being deleted (pvc-protection), no longer recorded: the release ends, the claim is going.
    js = preempted([], record=[])
    vplan = suspended_pass(js, [going], ready)
    assert vplan.suspension_releases == ()
    assert [c.state for c in vplan.claims] == [ClaimState.DELETING]
    # Gone, still suspended: nothing is created while it waits; the status says why.
    waiting = preempted([], releases=(), record=[])
    vplan = suspended_pass(waiting, [], ready)
    assert vplan.create == []
    condition = volume_status.volumes_ready(model(waiting), vplan.claims)
    assert condition.reason == "WaitingForResume"
    assert "whenSuspended: Snapshot let go start from their newest snapshot" in condition.message
    # Resumed: the claim is created from the release's snapshot (dataSourceRef), not empty.
    resumed = preempted([], suspend=False, releases=(), record=[])
    vplan = suspended_pass(resumed, [], ready)
    assert [d.name for d in vplan.create] == ["data-js"]
    assert vplan.restore == {"data-js": TAKEN}
    assert vplan.mountable == set()  # mounted once its uid is stored: the Jobs resume after
    (desired,) = vplan.create
    assert restored(desired, TAKEN)["spec"]["dataSourceRef"] == {
        "apiGroup": "snapshot.storage.k8s.io",
        "kind": "VolumeSnapshot",
        "name": TAKEN,
    }


@pytest.mark.parametrize(
    ("observed", "existing", "state"),
    [
        pytest.param([], [snap("data-js", name=TAKEN)], ClaimState.MISSING,
                     id="gone-through-its-ready-snapshot-not-lost"),
        pytest.param([claim("data-js", deleting=True)], [snap("data-js", name=TAKEN)],
                     ClaimState.DELETING, id="going-through-its-ready-snapshot-not-terminating"),
        # Deleted by someone else before its snapshot was ready: its data may be gone.
        pytest.param([], [snap("data-js", name=TAKEN, ready=False)], ClaimState.LOST,
                     id="gone-before-its-snapshot-was-ready-lost"),
        pytest.param([], [snap("data-js")], ClaimState.LOST, id="another-snapshot-is-no-proof"),
    ],
)  # fmt: skip
def test_a_claim_the_release_deleted_is_not_lost_when_the_record_was_not_stored(
    observed: list[Obj], existing: list[Obj], state: ClaimState
) -> None:
    """The pass that deleted the claim lost its status write: the record still has the claim
    and the release is still stored. A ready snapshot of the release proves the controller let
    it go: not Lost (nor made again empty), forgotten, and made again from it once resumed."""
    js = preempted([claim("data-js")])
    vplan = suspended_pass(js, observed, *existing)
    assert [c.state for c in vplan.claims] == [state]
    forgotten = vplan.record.get(("data", None, None, None)) is None
    assert forgotten == (state is not ClaimState.LOST)
    assert vplan.create == []  # suspended: made again only once resumed


def test_a_jobset_suspended_at_creation_has_nothing_to_snapshot() -> None:
    """Queued, never ran: no claim yet (creationPolicy WaitForResume), so no release."""
    js = preempted([], releases=(), record=[])
    vplan = suspended_pass(js, [])
    assert (vplan.suspension_releases, vplan.create, vplan.create_snapshots) == ((), [], [])
    ready = volume_status.volumes_ready(model(js), vplan.claims)
    assert ready.reason == "WaitingForResume"


def test_a_claim_without_a_volume_is_kept_and_not_released() -> None:
    """Not Bound (a WaitForFirstConsumer claim never used): it holds no data and costs nothing;
    deleting it would leave nothing to restore from."""
    pending = claim("data-js", phase="Pending")
    vplan = suspended_pass(preempted([pending], releases=()), [pending])
    assert (vplan.suspension_releases, vplan.deleted) == ((), [])


# ----------------------------------------------------------------------------- suspension: groups


def held_ranks(suspend: bool = True, ranks: int = 2) -> tuple[Any, list[Obj], SuspensionRelease]:
    claims = [ckpt(i) for i in range(ranks)]
    entry = SuspensionRelease("ckpt", tuple(sorted(prefix_of(c["metadata"]["name"])
                                                   for c in claims)), STARTED)  # fmt: skip
    obj = make_obj(
        [{"templates": [tpl("ckpt")], "scope": "Job", "retentionPolicy": ON_SUSPEND,
          "restorePolicy": NEWEST, "snapshotPolicy": GROUPED}],
        rjobs=[mounting("workers", ranks, ("ckpt",))],
        suspend=suspend,
    )  # fmt: skip
    obj["status"]["volumes"] = {"suspensionReleases": [entry.to_dict()]}
    return recorded(parse(obj), claims), claims, entry


def test_a_release_of_ranks_takes_one_group_of_its_own() -> None:
    js, claims, entry = held_ranks()
    name = group_name("js", js.uid, "ckpt", occasion(entry))
    first = volume_lifecycle.plan(model(js), views(claims), StorageClasses(), terminal_state="",
                                  found=with_groups(), suspended=STOPPED)  # fmt: skip
    assert [g["metadata"]["name"] for g in first.create_groups] == [name]
    assert first.create_snapshots == []  # not one by one
    assert first.mountable == set()
    # An earlier group of this JobSet (its completion's, another release's) is not this one.
    old = {**group(), "metadata": {**group()["metadata"], "name": group_name("js", js.uid, "ckpt")}}
    again = volume_lifecycle.plan(model(js), views(claims), StorageClasses(), terminal_state="",
                                  found=with_groups(member("ckpt-js-workers-0"),
                                                    member("ckpt-js-workers-1"),
                                                    groups=(old,)),
                                  suspended=STOPPED)  # fmt: skip
    assert (again.deleted, [g["metadata"]["name"] for g in again.create_groups]) == ([], [name])


@pytest.mark.parametrize(
    ("suspend", "ready", "error", "deleted", "groups_deleted", "mountable"),
    [
        pytest.param(True, True, "", ["ckpt-js-workers-0", "ckpt-js-workers-1"], [], set(),
                     id="ready-every-rank-goes"),
        pytest.param(True, False, "", [], [], set(), id="not-ready-every-rank-kept"),
        pytest.param(True, False, "frozen", [], [], set(), id="failed-every-rank-kept"),
        pytest.param(False, False, "frozen", [], ["GROUP"],
                     {"ckpt-js-workers-0", "ckpt-js-workers-1"},
                     id="resumed-after-failure-given-up"),
    ],
)  # fmt: skip
def test_the_ranks_of_a_release_go_together(
    suspend: bool,
    ready: bool,
    error: str,
    deleted: list[str],
    groups_deleted: list[str],
    mountable: set[str],
) -> None:
    js, claims, entry = held_ranks(suspend)
    name = group_name("js", js.uid, "ckpt", occasion(entry))
    taken = group(name, ready=ready, error=error)
    found = with_groups(member("ckpt-js-workers-0"), member("ckpt-js-workers-1"), groups=(taken,))
    vplan = volume_lifecycle.plan(model(js), views(claims), StorageClasses(), terminal_state="",
                                  found=found, suspended=STOPPED)  # fmt: skip
    assert sorted(vplan.deleted) == deleted
    assert vplan.delete_groups == [name if g == "GROUP" else g for g in groups_deleted]
    assert vplan.mountable == mountable
    assert vplan.create_groups == [] and vplan.create_snapshots == []


def test_a_rank_the_group_would_not_take_makes_the_release_go_one_by_one() -> None:
    """A claim of the policy that the release does not hold (bound after it started) would be in
    the group's selector: the release snapshots its claims one by one instead."""
    js, claims, entry = held_ranks(ranks=3)
    held = SuspensionRelease("ckpt", entry.uids[:2], STARTED)
    raw = copy.deepcopy(js.raw)
    raw["status"]["volumes"]["suspensionReleases"] = [held.to_dict()]
    vplan = volume_lifecycle.plan(model(parse(raw)), views(claims), StorageClasses(),
                                  terminal_state="", found=with_groups(),
                                  suspended=STOPPED)  # fmt: skip
    assert vplan.create_groups == []
    assert len(vplan.create_snapshots) == 2


# ----------------------------------------------------------------------------- overdue

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.UTC)
AFTER = datetime.timedelta(minutes=30)
READY = "VolumeSnapshotsReady"


@pytest.mark.parametrize(
    ("steps", "late", "look_again"),
    [
        pytest.param({}, [], None, id="nothing-waited-for"),
        pytest.param({"a": SnapshotStep("wait", "a-1", requested="2026-12-01T11:30:00Z")},
                     ["a"], None, id="waited-exactly-that-long"),
        pytest.param({"a": SnapshotStep("wait", "a-1", requested="2026-12-01T11:59:00Z")},
                     [], 1740.0, id="asked-a-minute-ago"),
        pytest.param({"a": SnapshotStep("wait", "a-1", requested="2026-12-01T10:00:00Z"),
                      "b": SnapshotStep("wait", "b-1", requested="2026-12-01T11:50:00Z"),
                      "c": SnapshotStep("wait", "c-1", requested="2026-12-01T11:45:00Z")},
                     ["a"], 900.0, id="the-next-to-become-late-sets-the-look-again"),
        # A failure is said as such; a snapshot to take was just asked for; a wait with no
        # time read (a malformed object) is never judged late.
        pytest.param({"a": SnapshotStep("failed", "a-1", "quota", requested="2026-12-01T10:00:00Z"),
                      "b": SnapshotStep("take", "b-1"),
                      "c": SnapshotStep("wait", "c-1", requested="yesterday")},
                     [], None, id="only-waits-with-a-time"),
    ],
)  # fmt: skip
def test_overdue(steps: dict[str, SnapshotStep], late: list[str], look_again: float | None) -> None:
    found = snapshots_mod.overdue(steps, NOW, AFTER)
    assert (sorted(found.claims), found.look_again) == (late, look_again)


def test_a_snapshot_long_in_coming_is_a_warning_and_the_claim_stays() -> None:
    data = claim("data-js")
    js = completed(SNAPSHOT_ON_COMPLETION, [data])
    vm = model(js)
    asked = snap("data-js", ready=False)
    asked["metadata"]["creationTimestamp"] = "2026-12-01T11:00:00Z"
    vplan = volume_lifecycle.plan(
        vm, views([data]), StorageClasses(), terminal_state=api.TERMINAL_COMPLETED,
        found=found(asked),
    )  # fmt: skip
    assert vplan.deleted == [] and vplan.snapshotting["data-js"].step == "wait"
    (pending,) = [
        c for c in volume_status.conditions(vm, vplan) if c.type == "VolumeSnapshotsReady"
    ]
    assert (pending.reason, pending.event_type) == ("SnapshotsPending", None)
    vplan.overdue = snapshots_mod.overdue(vplan.snapshotting, NOW, AFTER)
    (late,) = [c for c in volume_status.conditions(vm, vplan) if c.type == READY]
    assert (late.status, late.reason, late.event_type) == ("False", "SnapshotNotReady", "Warning")
    assert "data-js" in late.message and asked["metadata"]["name"] in late.message


def test_a_deleted_jobsets_late_snapshot_is_overdue_in_its_deletion_plan() -> None:
    """whenDeleted: Snapshot, the JobSet being deleted: the deletion plan says which waits are
    overdue (the reconciler's Warning Event; no status while the JobSet goes)."""
    data = claim("data-js")
    obj = make_obj([{"templates": [tpl("data")], "retentionPolicy": {"whenDeleted": "Snapshot"}}],
                   deleting=True)  # fmt: skip
    obj["metadata"]["finalizers"] = [FINALIZER]
    asked = snap("data-js", ready=False)
    asked["metadata"]["creationTimestamp"] = "2026-12-01T11:00:00Z"
    early = deletion.plan(obj, [view(data)], found(asked), NOW - 2 * AFTER, AFTER)
    assert (early.overdue.claims, early.overdue.look_again) == ({}, 1800.0)
    late = deletion.plan(obj, [view(data)], found(asked), NOW, AFTER)
    assert list(late.overdue.claims) == ["data-js"] and not late.remove_finalizer


def test_restore_from_another_jobset_takes_each_rank_from_its_slot_in_that_run() -> None:
    """restorePolicy.fromJobSet: every claim starts from the newest snapshot of the claim in
    the same slot of the JobSet named (a previous run), from its newest group when the policy
    takes group snapshots; never from this JobSet's own, never another rank's."""

    def ranks_of(**snapshot_policy: Any) -> list[Any]:
        obj = make_obj(
            [{"templates": [tpl("ckpt")], "scope": "Job", "snapshotPolicy": snapshot_policy,
              "restorePolicy": {"source": "NewestSnapshot", "fromJobSet": "run-1"}}],
            rjobs=[mounting("workers", 2, ("ckpt",))],
        )  # fmt: skip
        return list(model(parse(obj)).desired)

    grouped = with_groups(
        member("ckpt-run-1-workers-0", "g-run"),
        member("ckpt-run-1-workers-1", "g-run"),
        groups=(group("run-1-ckpt-1234", uid="g-run"),),
    )
    own = with_groups(member("ckpt-js-workers-0", "g-own"), groups=(group("own", uid="g-own"),))
    both = dataclasses.replace(own, runs={"run-1": grouped})
    chosen = {d.name: restore(d, both) for d in ranks_of(**GROUPED)}
    assert {n: (r.source, r.group) for n, r in chosen.items()} == {
        "ckpt-js-workers-0": ("snapshot-ckpt-run-1-workers-0", "run-1-ckpt-1234"),
        "ckpt-js-workers-1": ("snapshot-ckpt-run-1-workers-1", "run-1-ckpt-1234"),
    }
    # Claim by claim: the newest snapshot of the slot's claim of that run.
    single = dataclasses.replace(
        own, runs={"run-1": found(snap("ckpt-run-1-workers-1", template="ckpt"))}
    )
    chosen = {d.name: restore(d, single) for d in ranks_of()}
    assert (
        chosen["ckpt-js-workers-1"].source
        == "ckpt-run-1-workers-1-" + uid_of("ckpt-run-1-workers-1").replace("-", "")[:8]
    )
    assert chosen["ckpt-js-workers-0"].wait == (
        "no ready snapshot of claim ckpt-run-1-workers-0 exists; the claim is not created "
        "(restorePolicy.whenMissing: CreateEmpty would start it empty)"
    )
    # Nothing of that run (not snapshotted yet, or no such JobSet): waited for, not empty.
    nothing = dataclasses.replace(own, runs={})
    waited = restore(ranks_of(**GROUPED)[0], nothing)
    assert waited.source is None
    assert waited.wait.startswith("no ready snapshot of claim ckpt-run-1-workers-0 exists")
    # Its newest group still being taken: waited for, naming the run.
    taking = with_groups(groups=(group("run-1-ckpt-5678", uid="g-2", ready=False),))
    pending = restore(ranks_of(**GROUPED)[0], dataclasses.replace(own, runs={"run-1": taking}))
    assert pending.wait == (
        "claim ckpt-js-workers-0 starts from the newest group snapshot of JobSet run-1, "
        "run-1-ckpt-5678, which is not ready yet"
    )
