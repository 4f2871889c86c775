"""Claim expansion (pure): only Bound claims are resized; smaller retained claims on an expandable
class are adopted, then expanded (issue 12, items 3 and 10).

Tables: ``growth`` (what a raised request does to one claim), ``plan`` (the writes and what is
reported), ``compatible``/``state_of`` (adoption of a smaller retained claim), ``conditions`` (the
VolumeExpansionBlocked condition) and ``decide`` (a deferred expansion holds nothing back).
"""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from controller.jobset import api, model, volumes
from controller.jobset.children import views as job_views
from controller.jobset.decide import decide
from controller.jobset.jobsetstatus import Condition
from controller.jobset.model import JobSet
from controller.jobset.volumes import StorageClasses
from controller.jobset.volumes import lifecycle as volume_lifecycle
from controller.jobset.volumes import status as volume_status
from controller.jobset.volumes.lifecycle import ClaimState, growth, state_of
from controller.jobset.volumes.model import (
    CLAIM_SCOPE_LABEL,
    CLAIM_TEMPLATE_LABEL,
    OWNER_UID_ANNOTATION,
    RETAINED_FROM_ANNOTATION,
)
from controller.jobset.volumes.observed import views as claim_views
from controller.jobset.volumes.ownership import compatible
from controller.runtime.store import Obj
from tests.unit.jobset_factories import T0, make_job, make_jobset_obj, rjob

UID = "0a1b2c3d-0000-0000-0000-000000000000"  # the claim's uid; recorded as its first group
CLASSES = StorageClasses(
    wait_for_first_consumer=frozenset({"wffc", "wffc-expandable"}),
    expandable=frozenset({"expandable", "wffc-expandable"}),
)


def _mounting(name: str, **extra: Any) -> Obj:
    mounts = [{"name": "data", "mountPath": "/data"}]
    return rjob(
        name,
        pod_spec={"containers": [{"name": "main", "image": "busybox", "volumeMounts": mounts}]},
        **extra,
    )


def _jobset(
    storage: str = "2Gi",
    *,
    recorded: bool = True,
    retain: bool = False,
    rjobs: list[Obj] | None = None,
) -> JobSet:
    """JobSet ``js`` whose template ``data`` (claim ``data-js``) asks for ``storage``; the stored
    status records the claim ``UID`` unless ``recorded`` is False."""
    policy: Obj = {
        "templates": [
            {
                "metadata": {"name": "data"},
                "spec": {
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": storage}},
                },
            }
        ]
    }
    if retain:
        policy["retentionPolicy"] = {"whenDeleted": "Retain"}
    obj = make_jobset_obj(
        replicated_jobs=rjobs or [_mounting("trainer")],
        spec={"volumeClaimPolicies": [policy]},
    )
    obj["metadata"]["finalizers"] = [volumes.FINALIZER]
    if recorded:
        obj["status"]["volumes"] = {"claimUIDs": [{"template": "data", "uids": UID[:8]}]}
    return model.parse(obj)


def _claim(
    phase: str,
    storage_class: str | None,
    storage: str = "1Gi",
    *,
    owner: str | None = "uid-js",
    retained_from: str | None = None,
    ref: bool = True,
) -> Obj:
    """Claim ``data-js``: made for JobSet js (owner uid annotation ``owner``; an ownerReference
    to it when ``ref``, as ``whenDeleted: Delete`` wants), or retained."""
    annotations = {}
    if owner is not None:
        annotations[OWNER_UID_ANNOTATION] = owner
    if retained_from is not None:
        annotations[RETAINED_FROM_ANNOTATION] = retained_from
    spec: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    claim: Obj = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "data-js",
            "namespace": "default",
            "uid": UID,
            "labels": {
                api.JOBSET_NAME: "js",
                CLAIM_TEMPLATE_LABEL: "data",
                CLAIM_SCOPE_LABEL: "JobSet",
            },
            "annotations": annotations,
        },
        "spec": spec,
    }
    if owner == "uid-js" and ref:
        claim["metadata"]["ownerReferences"] = [model.parse(make_jobset_obj()).owner_reference()]
    if phase:
        claim["status"] = {"phase": phase}
    return claim


# ----------------------------------------------------------------------------- growth


@pytest.mark.parametrize(
    ("phase", "storage_class", "have", "want", "expected"),
    [
        ("Bound", "expandable", "1Gi", "2Gi", "expand"),
        ("Bound", "wffc-expandable", "1Gi", "2Gi", "expand"),
        # Kubernetes refuses (422) to resize a claim that is not Bound: wait for the binding.
        ("Pending", "wffc-expandable", "1Gi", "2Gi", "unbound"),
        ("Pending", "expandable", "1Gi", "2Gi", "unbound"),
        ("", "expandable", "1Gi", "2Gi", "unbound"),  # no phase reported yet
        # A class that cannot expand: never, bound or not.
        ("Bound", "fixed", "1Gi", "2Gi", "unsupported"),
        ("Pending", "wffc", "1Gi", "2Gi", "unsupported"),
        ("Bound", None, "1Gi", "2Gi", "unsupported"),
        ("Bound", "missing-class", "1Gi", "2Gi", "unsupported"),
        # Nothing to grow: equal (in any spelling), smaller (claims never shrink), unreadable.
        ("Bound", "expandable", "1Gi", "1Gi", "none"),
        ("Bound", "expandable", "1024Mi", "1Gi", "none"),
        ("Pending", "wffc-expandable", "2Gi", "1Gi", "none"),
        ("Bound", "expandable", "lots", "2Gi", "none"),
    ],
)
def test_growth(phase: str, storage_class: str | None, have: str, want: str, expected: str) -> None:
    js = _jobset(want)
    desired = volumes.model(js).desired[0]
    claim = volumes.ClaimView.of(_claim(phase, storage_class, have))
    assert growth(claim, desired, CLASSES) == expected


# ----------------------------------------------------------------------------- the plan


def _plan(js: JobSet, claim: Obj) -> volumes.VolumePlan:
    return volume_lifecycle.plan(
        volumes.model(js), claim_views([claim]), CLASSES, terminal_state=""
    )


@pytest.mark.parametrize(
    ("claim", "patches", "blocked", "deferred"),
    [
        # Bound on an expandable class: the request is patched now.
        (_claim("Bound", "expandable"), [("ClaimExpanded", "2Gi")], "", ""),
        # Pending (WaitForFirstConsumer, no pod yet): no PATCH that would fail; reported.
        (
            _claim("Pending", "wffc-expandable"),
            [],
            "",
            "claim data-js grows from 1Gi to 2Gi once it is bound",
        ),
        # A class that cannot expand: reported, never written.
        (
            _claim("Bound", "fixed"),
            [],
            "claim data-js cannot grow to 2Gi: its storage class fixed does not allow volume "
            "expansion",
            "",
        ),
        (
            _claim("Pending", "wffc"),
            [],
            "claim data-js cannot grow to 2Gi: its storage class wffc does not allow volume "
            "expansion",
            "",
        ),
        # Already the size (or larger): nothing.
        (_claim("Pending", "wffc-expandable", "2Gi"), [], "", ""),
        (_claim("Bound", "expandable", "3Gi"), [], "", ""),
    ],
)
def test_plan_expands_only_bound_claims(
    claim: Obj, patches: list[tuple[str, str]], blocked: str, deferred: str
) -> None:
    vplan = _plan(_jobset("2Gi"), claim)
    written = [
        (p.reason, p.patch["spec"]["resources"]["requests"]["storage"])
        for p in vplan.patch
        if "spec" in p.patch
    ]
    assert written == patches
    assert vplan.expansion_blocked == ({"data-js": blocked} if blocked else {})
    assert {k: v.split(" (")[0] for k, v in vplan.expansion_deferred.items()} == (
        {"data-js": deferred} if deferred else {}
    )
    assert "data-js" in vplan.mountable, "a claim waiting to grow is still mounted"
    assert not vplan.create and not vplan.deleted


def test_a_deferred_expansion_still_sends_the_rest_of_the_update() -> None:
    claim = _claim("Pending", "wffc-expandable")
    del claim["metadata"]["labels"][CLAIM_SCOPE_LABEL]
    vplan = _plan(_jobset("2Gi"), claim)
    assert [(p.reason, p.patch) for p in vplan.patch] == [
        ("ClaimUpdated", {"metadata": {"labels": {CLAIM_SCOPE_LABEL: "JobSet"}}})
    ]
    assert list(vplan.expansion_deferred) == ["data-js"]


def test_a_deferred_expansion_writes_nothing_at_steady_state() -> None:
    vplan = _plan(_jobset("2Gi"), _claim("Pending", "wffc-expandable"))
    assert vplan.writes == 0


# ----------------------------------------------------------------------------- adoption


@pytest.mark.parametrize(
    ("storage_class", "expandable", "ok", "why"),
    [
        ("expandable", {"expandable"}, True, ""),
        (
            "fixed",
            {"expandable"},
            False,
            "the claim requests 1Gi of storage, less than the template's 2Gi, and its storage "
            "class fixed does not allow volume expansion",
        ),
        (
            None,
            {"expandable"},
            False,
            "the claim requests 1Gi of storage, less than the template's 2Gi, and its storage "
            "class (none) does not allow volume expansion",
        ),
        # No class information: nothing may grow.
        (
            "expandable",
            set(),
            False,
            "the claim requests 1Gi of storage, less than the template's 2Gi, and its storage "
            "class expandable does not allow volume expansion",
        ),
    ],
)
def test_compatible_smaller_claim(
    storage_class: str | None, expandable: set[str], ok: bool, why: str
) -> None:
    have: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if storage_class is not None:
        have["storageClassName"] = storage_class
    want: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}
    assert compatible(have, want, frozenset(expandable)) == (ok, why)


@pytest.mark.parametrize(
    ("phase", "storage_class", "state", "why"),
    [
        ("Bound", "expandable", ClaimState.ADOPTABLE, ""),
        ("Pending", "wffc-expandable", ClaimState.ADOPTABLE, ""),
        (
            "Bound",
            "fixed",
            ClaimState.CONFLICT,
            "claim data-js (retained from an earlier JobSet js) does not match template data: "
            "the claim requests 1Gi of storage, less than the template's 2Gi, and its storage "
            "class fixed does not allow volume expansion",
        ),
    ],
)
def test_a_smaller_retained_claim_is_adoptable_on_an_expandable_class(
    phase: str, storage_class: str, state: ClaimState, why: str
) -> None:
    js = _jobset("2Gi", recorded=False, retain=True)
    retained = _claim(phase, storage_class, owner="uid-old", retained_from="uid-old")
    at = state_of(
        volumes.model(js), volumes.model(js).desired[0], volumes.ClaimView.of(retained), CLASSES
    )
    assert (at.state, at.why) == (state, why)


def test_adopted_first_then_expanded_once_owned_and_bound() -> None:
    """Adoption and expansion are separate writes: the adoption patch never touches the spec
    (it may be Pending), the next pass expands the claim it now owns."""
    js = _jobset("2Gi", recorded=False, retain=True)
    retained = _claim("Bound", "expandable", owner="uid-old", retained_from="uid-old")
    adopting = _plan(js, retained)
    assert [(p.reason, "spec" in p.patch) for p in adopting.patch] == [("ClaimAdopted", False)]
    assert not adopting.conflicts

    adopted = _claim("Bound", "expandable", ref=False)  # js's now (retained: no reference)
    expanding = _plan(_jobset("2Gi", retain=True), adopted)
    assert [(p.reason, p.patch.get("spec")) for p in expanding.patch] == [
        ("ClaimExpanded", {"resources": {"requests": {"storage": "2Gi"}}})
    ]


# ----------------------------------------------------------------------------- conditions


def _blocked_condition(*claims: tuple[str, str]) -> Condition:
    vplan = volumes.VolumePlan()
    for kind, name in claims:
        target = vplan.expansion_blocked if kind == "blocked" else vplan.expansion_deferred
        target[name] = f"{kind} {name}"
    found = [
        c
        for c in volume_status.conditions(volumes.model(_jobset()), vplan)
        if c.type == "VolumeExpansionBlocked"
    ]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize(
    ("claims", "status", "reason", "message", "event_type"),
    [
        ((), "False", "NoExpansionPending", "no blocked expansion", None),
        ((("deferred", "a"),), "True", "ClaimNotBound", "deferred a", "Normal"),
        (
            (("deferred", "a"), ("blocked", "b")),
            "True",
            "VolumeExpansionNotSupported",
            "deferred a; blocked b",
            "Warning",
        ),
        ((("blocked", "b"),), "True", "VolumeExpansionNotSupported", "blocked b", "Warning"),
    ],
)
def test_expansion_blocked_condition(
    claims: tuple[tuple[str, str], ...],
    status: str,
    reason: str,
    message: str,
    event_type: str | None,
) -> None:
    found = _blocked_condition(*claims)
    assert (found.status, found.reason, found.message, found.event_type) == (
        status,
        reason,
        message,
        event_type,
    )


# ----------------------------------------------------------------------------- decide

NOW = T0 + datetime.timedelta(minutes=1)
INITIALIZER = rjob("initializer")
TRAINER = _mounting("trainer", depends_on=[("initializer", "Complete")])


@pytest.mark.parametrize(
    ("jobs", "created", "resumed"),
    [
        # dependsOn met: the gated trainer is created, mounting the claim that waits to grow.
        ([("initializer", True, False)], ["js-trainer-0"], []),
        # Resumed: the suspended Jobs are resumed.
        ([("initializer", False, True)], [], ["js-initializer-0"]),
    ],
)
def test_a_pending_claim_waiting_to_grow_holds_nothing_back(
    jobs: list[tuple[str, bool, bool]], created: list[str], resumed: list[str]
) -> None:
    """(Job, complete, suspended) exist; the JobSet is not suspended (any more)."""
    js = _jobset("2Gi", rjobs=[INITIALIZER, TRAINER])
    children = [
        make_job(js, name, 0, complete=complete, succeeded=int(complete), suspended=suspended)
        for name, complete, suspended in jobs
    ]
    claims = claim_views([_claim("Pending", "wffc-expandable")])
    plan = decide(js, job_views(children), None, NOW, claims=claims, classes=CLASSES)
    assert [j["metadata"]["name"] for j in plan.create_jobs] == created
    for job in plan.create_jobs:
        volumes_of = job["spec"]["template"]["spec"]["volumes"]
        assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-js"}} in volumes_of
    assert sorted(name for name, _ in plan.patch_jobs) == resumed
    assert plan.volume is not None and not plan.volume.patch, "no claim PATCH the API refuses"
    assert plan.status is not None
    found = {c["type"]: c for c in plan.status.to_dict()["conditions"]}
    assert (
        found["VolumeExpansionBlocked"]["status"],
        found["VolumeExpansionBlocked"]["reason"],
    ) == (
        "True",
        "ClaimNotBound",
    )
    assert (
        "data-js grows from 1Gi to 2Gi once it is bound"
        in found["VolumeExpansionBlocked"]["message"]
    )
    assert (found["VolumesReady"]["status"], found["VolumesReady"]["reason"]) == (
        "True",
        "WaitingForFirstConsumer",
    )
    assert [(e.type, e.reason) for e in plan.events if e.reason == "ClaimNotBound"] == [
        ("Normal", "ClaimNotBound")
    ]
