"""Which claim updates are worth a pass (``claim_changed``): what the controller reads of a claim
changed. The bookkeeping of provisioning and binding (as measured on the local control plane)
is not; everything a ``ClaimView`` is made of is."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from controller.jobset.volumes import ClaimView
from controller.jobset.volumes.observed import claim_changed

Obj = dict[str, Any]

# A claim as created by this controller for JobSet "train", before anything else touched it.
CREATED: Obj = {
    "metadata": {
        "name": "train-shared",
        "namespace": "ns",
        "uid": "c-1",
        "resourceVersion": "305",
        "labels": {
            "jobset.sigs.k8s.io/jobset-name": "train",
            "jobset.sigs.k8s.io/volume-template": "shared",
        },
        "annotations": {"jobset.sigs.k8s.io/jobset-uid": "js-1"},
        "finalizers": ["kubernetes.io/pvc-protection"],
        "ownerReferences": [{"kind": "JobSet", "name": "train", "uid": "js-1"}],
    },
    "spec": {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
        "storageClassName": "standard",
        "volumeMode": "Filesystem",
    },
    "status": {"phase": "Pending"},
}


def _provisioner_named(c: Obj) -> None:
    c["metadata"]["annotations"]["volume.kubernetes.io/storage-provisioner"] = "example/hostpath"
    c["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-provisioner"] = "example/h"


def _volume_bound(c: Obj) -> None:
    c["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] = "yes"
    c["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] = "yes"
    c["spec"]["volumeName"] = "pvc-1234"


def _status_details(c: Obj) -> None:
    c["status"]["capacity"] = {"storage": "1Gi"}
    c["status"]["accessModes"] = ["ReadWriteOnce"]
    c["status"]["conditions"] = [{"type": "Unused", "status": "True", "reason": "NoPodsUsingPVC"}]


def _resync(c: Obj) -> None:
    c["metadata"]["resourceVersion"] = "306"


def _phase_bound(c: Obj) -> None:
    c["status"]["phase"] = "Bound"


def _phase_lost(c: Obj) -> None:
    c["status"]["phase"] = "Lost"


def _phase_reported(c: Obj) -> None:
    del c["status"]["phase"]


def _node_selected(c: Obj) -> None:
    c["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] = "node-1"


def _retained(c: Obj) -> None:
    c["metadata"]["annotations"]["jobset.sigs.k8s.io/retained-from-uid"] = "js-1"
    c["metadata"]["ownerReferences"] = []


def _label_copied(c: Obj) -> None:
    c["metadata"]["labels"]["team"] = "a"


def _annotation_of_user(c: Obj) -> None:
    c["metadata"]["annotations"]["backup"] = "nightly"


def _deleting(c: Obj) -> None:
    c["metadata"]["deletionTimestamp"] = "2026-12-02T00:00:00Z"


def _expanded(c: Obj) -> None:
    c["spec"]["resources"]["requests"]["storage"] = "2Gi"


def _class_changed(c: Obj) -> None:
    c["spec"]["storageClassName"] = "fast"


def _recreated(c: Obj) -> None:
    c["metadata"]["uid"] = "c-2"


@pytest.mark.parametrize(
    ("change", "worth_a_pass"),
    [
        pytest.param(_provisioner_named, False, id="the provisioner's annotations"),
        pytest.param(_volume_bound, False, id="the volume's name and the binding annotations"),
        pytest.param(_status_details, False, id="capacity, access modes, the Unused condition"),
        pytest.param(_resync, False, id="only the resourceVersion"),
        pytest.param(_phase_bound, True, id="phase Bound"),
        pytest.param(_phase_lost, True, id="phase Lost"),
        pytest.param(_phase_reported, True, id="phase not reported to Pending"),
        pytest.param(_node_selected, True, id="the scheduler's selected node"),
        pytest.param(_retained, True, id="retained: our annotation, no ownerReference"),
        pytest.param(_label_copied, True, id="a label"),
        pytest.param(_annotation_of_user, True, id="another annotation (a template may set it)"),
        pytest.param(_deleting, True, id="being deleted"),
        pytest.param(_expanded, True, id="the storage request"),
        pytest.param(_class_changed, True, id="the storage class"),
        pytest.param(_recreated, True, id="another uid"),
    ],
)
def test_claim_changed(change: Callable[[Obj], None], worth_a_pass: bool) -> None:
    new = copy.deepcopy(CREATED)
    change(new)
    assert claim_changed(CREATED, new) is worth_a_pass
    assert claim_changed(new, CREATED) is worth_a_pass


def test_what_is_left_out_is_not_read_by_the_view() -> None:
    """Each update the filter drops leaves the claim as the volume logic sees it unchanged, but
    for the raw spec it carries (``spec.volumeName``, which no reader of the view looks at)."""
    for change in (_provisioner_named, _volume_bound, _status_details, _resync):
        new = copy.deepcopy(CREATED)
        change(new)
        before, after = ClaimView.of(CREATED), ClaimView.of(new)
        for name in ("name", "uid", "phase", "labels", "owner_references", "storage"):
            assert getattr(before, name) == getattr(after, name), (change.__name__, name)
        assert (before.storage_class, before.terminating, before.node_selected) == (
            after.storage_class,
            after.terminating,
            after.node_selected,
        )
        assert (before.owner_uid, before.retained_from) == (after.owner_uid, after.retained_from)


def test_the_six_updates_of_a_provisioned_claim_make_one_pass() -> None:
    """The sequence measured on the local control plane for a dynamically provisioned claim
    used by one pod: only the phase's change to Bound is worth a pass."""
    steps: list[Callable[[Obj], None]] = [
        _provisioner_named,
        _volume_bound,
        _phase_bound,
        _status_details,
        lambda c: c["status"]["conditions"][0].update(status="False", reason="PodUsingPVC"),
        lambda c: c["status"]["conditions"][0].update(status="True", reason="NoPodsUsingPVC"),
    ]
    passes, current = 0, copy.deepcopy(CREATED)
    for number, step in enumerate(steps):
        new = copy.deepcopy(current)
        step(new)
        new["metadata"]["resourceVersion"] = str(306 + number)
        passes += claim_changed(current, new)
        current = new
    assert passes == 1
