"""ownership (and the observed views it reads): which existing claims are this JobSet's, which it
may adopt (only with the proof Retain writes), the patches that adopt, retain and update them,
and when an existing claim's spec satisfies a template."""

from __future__ import annotations

import copy
from decimal import Decimal
from typing import Any

import pytest

from controller.jobset import api, volumes
from controller.jobset.volumes import ClaimView
from controller.jobset.volumes.annotations import parse as parse_entries
from controller.jobset.volumes.desired import DesiredClaim
from controller.jobset.volumes.model import (
    CLAIM_SCOPE_LABEL,
    OWNER_UID_ANNOTATION,
    RETAINED_FROM_ANNOTATION,
)
from controller.jobset.volumes.observed import views as claim_views
from controller.jobset.volumes.ownership import (
    adoption_patch,
    classify,
    compatible,
    conflict_reason,
    owned,
    retain_patch,
    update_patch,
)
from controller.runtime.store import Obj
from tests.unit.volumes.factories import RETAINED, claim, make, merge_patch, only, owner, tpl

# ----------------------------------------------------------------------------- the views


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            claim(
                "data-js",
                uid="u-1",
                phase="Pending",
                spec={"storageClassName": "fast", "resources": {"requests": {"storage": "2Gi"}}},
                annotations={
                    RETAINED_FROM_ANNOTATION: "uid-old",
                    "volume.kubernetes.io/selected-node": "n1",
                },
                refs=[owner()],
                deleting=True,
            ),
            {
                "name": "data-js",
                "uid": "u-1",
                "phase": "Pending",
                "storage": Decimal(2 * 2**30),
                "storage_text": "2Gi",
                "storage_class": "fast",
                "terminating": True,
                "jobset_name": "js",
                "owner_uid": "uid-js",
                "retained_from": "uid-old",
                "node_selected": True,
                "owner_references": (owner(),),
            },
            id="everything",
        ),
        pytest.param(
            {},
            {
                "name": "",
                "uid": "",
                "phase": "",
                "storage": None,
                "storage_text": None,
                "storage_class": None,
                "terminating": False,
                "jobset_name": None,
                "owner_uid": None,
                "retained_from": None,
                "node_selected": False,
                "owner_references": (),
            },
            id="empty",
        ),
        # Junk where a map, a list or a string belongs is read as absent, never raised on.
        pytest.param(
            {
                "metadata": {"name": "x", "labels": [1], "annotations": "a", "ownerReferences": 7},
                "spec": {"storageClassName": 3, "resources": {"requests": {"storage": "lots"}}},
                "status": {"phase": ["Bound"]},
            },
            {
                "name": "x",
                "phase": "",
                "storage": None,
                "storage_text": "lots",
                "storage_class": None,
                "jobset_name": None,
                "owner_references": (),
            },
            id="junk",
        ),
        pytest.param(
            {"spec": {"resources": {"requests": {"storage": 1073741824}}}},
            {"storage": Decimal(2**30), "storage_text": "1073741824"},
            id="numeric-storage",
        ),
    ],
)
def test_claim_view(obj: Obj, expected: dict[str, Any]) -> None:
    view = ClaimView.of(obj)
    assert {key: getattr(view, key) for key in expected} == expected
    assert view.raw is obj


def test_views_by_name() -> None:
    found = claim_views([claim("a"), claim("b", phase="Pending")])
    assert {name: view.phase for name, view in found.items()} == {"a": "Bound", "b": "Pending"}
    assert found["a"] == ClaimView.of(claim("a"))  # a frozen value
    with pytest.raises(AttributeError):
        found["a"].phase = "Lost"  # type: ignore[misc]


# ----------------------------------------------------------------------------- compatibility

BASE: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}


def spec_with(**changes: Any) -> Obj:
    result = copy.deepcopy(BASE)
    for key, value in changes.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


@pytest.mark.parametrize(
    ("existing", "template", "ok", "reason"),
    [
        (BASE, BASE, True, ""),
        (spec_with(accessModes=["ReadWriteOnce", "ReadOnlyMany"]), BASE, False, "access modes"),
        (spec_with(accessModes=["ReadWriteMany"]), BASE, False, "access modes"),
        (
            spec_with(accessModes=["ReadOnlyMany", "ReadWriteOnce"]),
            spec_with(accessModes=["ReadWriteOnce", "ReadOnlyMany"]),
            True,
            "",
        ),
        (BASE, spec_with(accessModes=None), True, ""),
        (spec_with(resources={"requests": {"storage": "20Gi"}}), BASE, True, ""),
        (spec_with(resources={"requests": {"storage": "10737418240"}}), BASE, True, ""),
        (spec_with(resources={"requests": {"storage": "5Gi"}}), BASE, False, "less than"),
        (spec_with(resources={"requests": {"storage": "10G"}}), BASE, False, "less than"),
        (spec_with(resources=None), BASE, False, "no storage request"),
        (spec_with(resources=None), spec_with(resources=None), True, ""),
        (BASE, spec_with(storageClassName="fast"), False, "storage class"),
        (spec_with(storageClassName="slow"), spec_with(storageClassName="fast"), False, "'slow'"),
        (spec_with(storageClassName="fast"), spec_with(storageClassName="fast"), True, ""),
        (spec_with(storageClassName="standard"), BASE, True, ""),  # defaulted class
        (BASE, spec_with(storageClassName=""), True, ""),
        (spec_with(volumeMode="Block"), spec_with(volumeMode="Filesystem"), False, "volume mode"),
        (BASE, spec_with(volumeMode="Filesystem"), True, ""),
        (spec_with(volumeMode="Filesystem"), BASE, True, ""),  # defaulted mode
        (BASE, spec_with(selector={"matchLabels": {"a": "b"}}), False, "selector"),
        (
            spec_with(selector={"matchLabels": {"a": "b"}, "matchExpressions": []}),
            spec_with(selector={"matchLabels": {"a": "b"}}),
            True,
            "",
        ),
        (spec_with(selector={"matchLabels": {"a": "c"}}), BASE, True, ""),
        (BASE, spec_with(dataSource={"kind": "VolumeSnapshot", "name": "s"}), False, "dataSource"),
        (
            spec_with(
                dataSource={"kind": "VolumeSnapshot", "name": "s", "apiGroup": "x"},
                dataSourceRef={"kind": "VolumeSnapshot", "name": "s", "apiGroup": "x"},
            ),
            spec_with(dataSource={"kind": "VolumeSnapshot", "name": "s", "apiGroup": "x"}),
            True,
            "",
        ),
        (
            spec_with(dataSourceRef={"kind": "VolumeSnapshot", "name": "t"}),
            spec_with(dataSourceRef={"kind": "VolumeSnapshot", "name": "s"}),
            False,
            "dataSourceRef",
        ),
        ({}, {}, True, ""),
    ],
)
def test_compatible(existing: Obj, template: Obj, ok: bool, reason: str) -> None:
    result, why = compatible(existing, template)
    assert result is ok
    assert reason in why
    assert bool(why) is not ok


def test_compatible_tolerates_garbage() -> None:
    assert compatible(None, BASE)[0] is False  # type: ignore[arg-type]
    assert compatible(spec_with(resources={"requests": {"storage": "lots"}}), BASE) == (
        False,
        "the claim has no storage request; the template asks for 10Gi",
    )


# ----------------------------------------------------------------------------- classify


def bug_1307_claim() -> Obj:
    """A claim retained from an earlier JobSet of this name, bound by the binder."""
    spec: Obj = copy.deepcopy(BASE)
    spec.update(volumeName="pvc-0f6c7a2e", storageClassName="standard", volumeMode="Filesystem")
    return claim(
        "data-js",
        owner_uid="uid-old",
        spec=spec,
        annotations={RETAINED_FROM_ANNOTATION: "uid-old", "pv.kubernetes.io/bind-completed": "yes"},
        refs=[],
    )


def test_bug_1307_retained_bound_claim_is_adopted() -> None:
    retain = {"whenDeleted": "Retain"}
    js = make([{"templates": [tpl("data", "10Gi")], "retentionPolicy": retain}])
    desired = only(js)
    existing = ClaimView.of(bug_1307_claim())
    assert classify(existing, desired, js) == "adoptable"
    assert conflict_reason(existing, desired, js) == ""
    patch = adoption_patch(existing, desired, js)
    assert patch == {
        "metadata": {
            "annotations": {OWNER_UID_ANNOTATION: "uid-js", RETAINED_FROM_ANNOTATION: None}
        }
    }
    adopted = ClaimView.of(merge_patch(existing.raw, patch))
    assert classify(adopted, desired, js) == "owned"
    assert owned(adopted, js)
    assert update_patch(adopted, desired) is None
    assert adopted.spec["volumeName"] == "pvc-0f6c7a2e"


STATEFULSET = {"kind": "StatefulSet", "name": "db", "uid": "u", "controller": True}


@pytest.mark.parametrize(
    ("existing", "expected", "reason"),
    [
        (claim("data-js"), "owned", ""),
        (claim("data-js", spec={"accessModes": ["ReadWriteMany"]}), "owned", ""),
        (claim("data-js", owner_uid="uid-old", annotations=RETAINED), "adoptable", ""),
        (claim("data-js", owner_uid=None, annotations=RETAINED), "adoptable", ""),
        (
            claim("data-js", owner_uid="uid-old", refs=[owner("uid-old")], annotations=RETAINED),
            "adoptable",
            "",
        ),
        # The name label alone (copied by a chart or an `-o yaml` round trip) proves nothing.
        (claim("data-js", owner_uid=None), "conflict", "no proof of ownership"),
        (claim("data-js", owner_uid="uid-old"), "conflict", "no proof of ownership"),
        (claim("data-js", owner_uid="uid-old", refs=[owner("uid-old")]), "conflict", "no proof"),
        (claim("data-js", annotations={RETAINED_FROM_ANNOTATION: ""}), "owned", ""),
        (
            claim("data-js", owner_uid=None, annotations={RETAINED_FROM_ANNOTATION: ""}),
            "conflict",
            "no",
        ),
        # Upstream JobSet's claim: its controller ownerReference names this JobSet (kind, name,
        # uid), whoever wrote it; not a reference that is not the controller, nor another kind.
        (claim("data-js", owner_uid=None, refs=[owner()]), "adoptable", ""),
        (claim("data-js", owner_uid=None, jobset=None, refs=[owner()]), "adoptable", ""),
        (
            claim("data-js", owner_uid=None, refs=[{**owner(), "controller": False}]),
            "conflict",
            "no proof",
        ),
        (
            claim("data-js", owner_uid=None, refs=[{**owner(), "kind": "Job"}]),
            "conflict",
            "controlled by Job js",
        ),
        (
            claim("data-js", owner_uid=None, refs=[owner(name="other")]),
            "conflict",
            "controlled by JobSet other",
        ),
        (
            claim(
                "data-js", owner_uid=None, refs=[owner()], spec={"accessModes": ["ReadWriteMany"]}
            ),
            "conflict",
            "(controlled by this JobSet) does not match template data: access modes",
        ),
        (claim("data-js", jobset=None), "conflict", "lacks the label"),
        (claim("data-js", jobset="other"), "conflict", "not made for JobSet js"),
        ({"metadata": {"name": "data-js"}}, "conflict", "lacks the label"),
        ({}, "conflict", "lacks the label"),
        (
            claim("data-js", owner_uid="uid-old", refs=[STATEFULSET], annotations=RETAINED),
            "conflict",
            "controlled by StatefulSet db",
        ),
        (
            claim(
                "data-js",
                owner_uid="uid-old",
                spec={"accessModes": ["ReadWriteMany"]},
                annotations=RETAINED,
            ),
            "conflict",
            "does not match template data: access modes",
        ),
    ],
)
def test_classify(existing: Obj, expected: str, reason: str) -> None:
    js = make([{"templates": [tpl("data")]}])
    desired = only(js)
    view = ClaimView.of(existing)
    assert classify(view, desired, js) == expected
    message = conflict_reason(view, desired, js)
    assert reason in message
    assert bool(message) is (expected == "conflict")
    assert owned(view, js) is (expected == "owned")


def test_classify_with_the_adopt_claims_annotation() -> None:
    """A claim without proof is adopted when the annotation names it with its uid; never a
    claim of that name with another uid, nor one controlled by something else."""
    js = make([{"templates": [tpl("data")]}])
    desired = only(js)
    hand_made = ClaimView.of(claim("data-js", jobset=None, owner_uid=None))
    (entry,) = parse_entries(f"data-js@{hand_made.uid[:8]}").entries
    (other,) = parse_entries("data-js@0123abcd").entries
    assert classify(hand_made, desired, js) == "conflict"
    assert classify(hand_made, desired, js, adopt=[entry]) == "adoptable"
    assert classify(hand_made, desired, js, adopt=[other]) == "conflict"
    controlled = ClaimView.of(claim("data-js", jobset=None, owner_uid=None, refs=[STATEFULSET]))
    assert conflict_reason(controlled, desired, js, adopt=[entry]) == (
        "claim data-js (named in jobset.sigs.k8s.io/adopt-claims) is controlled by StatefulSet db"
    )
    patch = adoption_patch(hand_made, desired, js)
    adopted = ClaimView.of(merge_patch(hand_made.raw, patch))
    assert owned(adopted, js)
    assert update_patch(adopted, desired) is None


# ----------------------------------------------------------------------------- patches


def test_adoption_patch_with_delete_policy_replaces_stale_owner() -> None:
    js = make([{"templates": [tpl("data")], "retentionPolicy": {"whenDeleted": "Delete"}}])
    desired = only(js)
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "c"}
    raw = claim("data-js", owner_uid="uid-old", refs=[other, owner("uid-old")])
    raw["metadata"]["labels"].pop(CLAIM_SCOPE_LABEL)
    patch = adoption_patch(ClaimView.of(raw), desired, js)
    assert patch == {
        "metadata": {
            "annotations": {OWNER_UID_ANNOTATION: "uid-js", RETAINED_FROM_ANNOTATION: None},
            "labels": {CLAIM_SCOPE_LABEL: "JobSet"},
            "ownerReferences": [other, owner()],
        }
    }
    adopted = ClaimView.of(merge_patch(raw, patch))
    assert update_patch(adopted, desired) is None


def test_adoption_patch_with_retain_policy_drops_stale_owner() -> None:
    js = make([{"templates": [tpl("data")], "retentionPolicy": {"whenDeleted": "Retain"}}])
    desired = only(js)
    existing = ClaimView.of(claim("data-js", owner_uid="uid-old", refs=[owner("uid-old")]))
    patch = adoption_patch(existing, desired, js)
    assert patch["metadata"]["ownerReferences"] == []


def test_retain_patch() -> None:
    js = make([{"templates": [tpl("data")]}])
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "c"}
    existing = ClaimView.of(claim("data-js", refs=[owner(), other]))
    assert retain_patch(existing, js.uid) == {
        "metadata": {
            "annotations": {RETAINED_FROM_ANNOTATION: "uid-js"},
            "ownerReferences": [other],
        }
    }
    lone = claim("data-js", refs=[owner()])
    patch = retain_patch(ClaimView.of(lone), js.uid)
    assert patch["metadata"]["ownerReferences"] is None
    kept = merge_patch(lone, patch)
    assert "ownerReferences" not in kept["metadata"]
    assert kept["metadata"]["labels"][api.JOBSET_NAME] == "js"
    # Retained: what a later JobSet of this name may adopt.
    later = make([{"templates": [tpl("data")]}], uid="uid-later")
    assert classify(ClaimView.of(kept), only(later), later) == "adoptable"


def observed(desired: DesiredClaim, **meta: Any) -> Obj:
    """The desired claim as the API server returns it: defaults, binder fields, extra metadata."""
    obj = copy.deepcopy(desired.object)
    obj["metadata"].update(uid="pvc-uid", resourceVersion="7", **meta)
    obj["metadata"]["labels"]["added-by-someone"] = "x"
    obj["metadata"]["annotations"]["pv.kubernetes.io/bound-by-controller"] = "yes"
    obj["spec"].setdefault("storageClassName", "standard")
    obj["spec"].setdefault("volumeMode", "Filesystem")
    obj["spec"]["volumeName"] = "pvc-123"
    obj["status"] = {"phase": "Bound", "capacity": {"storage": "1Gi"}}
    return obj


def update(raw: Obj, desired: DesiredClaim) -> Obj | None:
    return update_patch(ClaimView.of(raw), desired)


@pytest.mark.parametrize("when_deleted", ["Delete", "Retain"])
def test_update_patch_none_at_steady_state(when_deleted: str) -> None:
    js = make([{"templates": [tpl("data")], "retentionPolicy": {"whenDeleted": when_deleted}}])
    desired = only(js)
    assert update(desired.object, desired) is None
    assert update(observed(desired), desired) is None


def test_update_patch_raises_storage_never_lowers() -> None:
    desired = only(make([{"templates": [tpl("data", "2Gi")]}]))
    small = observed(desired)
    small["spec"]["resources"]["requests"]["storage"] = "1Gi"
    assert update(small, desired) == {"spec": {"resources": {"requests": {"storage": "2Gi"}}}}
    big = observed(desired)
    big["spec"]["resources"]["requests"]["storage"] = "3Gi"
    assert update(big, desired) is None
    same = observed(desired)
    same["spec"]["resources"]["requests"]["storage"] = "2048Mi"
    assert update(same, desired) is None


def test_update_patch_metadata() -> None:
    template = tpl("data")
    template["metadata"].update(labels={"team": "ml"}, annotations={"cost": "a"})
    desired = only(make([{"templates": [template]}]))
    existing = observed(desired)
    existing["metadata"]["labels"]["team"] = "old"
    del existing["metadata"]["annotations"]["cost"]
    existing["metadata"]["ownerReferences"] = []
    assert update(existing, desired) == {
        "metadata": {
            "labels": {"team": "ml"},
            "annotations": {"cost": "a"},
            "ownerReferences": [owner()],
        }
    }


def test_update_patch_removes_owner_reference_for_retain() -> None:
    desired = only(
        make([{"templates": [tpl("data")], "retentionPolicy": {"whenDeleted": "Retain"}}])
    )
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "c"}
    existing = observed(desired, ownerReferences=[owner(), other])
    assert update(existing, desired) == {"metadata": {"ownerReferences": [other]}}
    lone = observed(desired, ownerReferences=[owner()])
    assert update(lone, desired) == {"metadata": {"ownerReferences": None}}


def test_update_patch_tolerates_partial_claim() -> None:
    desired = only(make([{"templates": [tpl("data")]}]))
    patch = update({}, desired)
    assert patch is not None
    assert patch["metadata"]["ownerReferences"] == [owner()]
    assert "spec" not in patch  # unknown current size: no expansion guess


@pytest.mark.parametrize("when_deleted", ["Delete", "Retain"])
def test_an_upstream_claim_is_adopted_in_one_write_then_left_alone(when_deleted: str) -> None:
    """Upstream JobSet's claim (its name label and controller ownerReference, nothing of ours):
    one patch makes it this JobSet's, after which the update has nothing to write."""
    js = make([{"templates": [tpl("data")], "retentionPolicy": {"whenDeleted": when_deleted}}])
    desired = only(js)
    raw = claim("data-js", owner_uid=None, refs=[owner()])
    raw["metadata"]["labels"] = {api.JOBSET_NAME: "js"}
    upstreams = ClaimView.of(raw)
    assert classify(upstreams, desired, js) == "adoptable"
    adopted = ClaimView.of(merge_patch(raw, adoption_patch(upstreams, desired, js)))
    assert owned(adopted, js)
    assert update_patch(adopted, desired) is None
    # The ownerReference stays only while the policy deletes the claim with the JobSet.
    assert bool(adopted.owner_references) is (when_deleted == "Delete")


def test_storage_classes_from_the_informers_objects() -> None:
    found = volumes.observed.storage_classes(
        [
            {"metadata": {"name": "wffc"}, "volumeBindingMode": "WaitForFirstConsumer"},
            {"metadata": {"name": "grows"}, "allowVolumeExpansion": True},
            {"metadata": {"name": "plain"}, "allowVolumeExpansion": "yes"},  # not a bool: no
            {"metadata": None},
        ]
    )
    assert found.wait_for_first_consumer == {"wffc"}
    assert found.expandable == {"grows"}
    assert found.names == frozenset({"wffc", "grows", "plain", ""})
    assert found.missing("gone") and not found.missing("plain") and not found.missing(None)
