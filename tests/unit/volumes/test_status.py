"""status: what the JobSet's status says about its claims, read off the lifecycle: the counts per
template, ``VolumesReady`` (and its Warning reasons), the conflict and expansion conditions, and
the uid record written with the claims created in a pass."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from controller.jobset import api, volumes
from controller.jobset.jobsetstatus import Condition, JobSetStatus
from controller.jobset.model import JobSet, parse
from controller.jobset.volumes import StorageClasses, VolumeModel, VolumePlan
from controller.jobset.volumes import lifecycle as volume_lifecycle
from controller.jobset.volumes import status as volume_status
from controller.jobset.volumes.lifecycle import lifecycle
from controller.jobset.volumes.model import REPLACE_LOST_ANNOTATION, SELECTED_NODE_ANNOTATION
from controller.jobset.volumes.status import template_counts, volumes_ready
from controller.runtime.store import Obj
from tests.unit.jobset_factories import make_jobset
from tests.unit.volumes.factories import (
    RETAINED,
    ckpt,
    claim,
    make,
    mounting,
    owner,
    pod_ckpt,
    prefix_of,
    recorded,
    tpl,
    uid_of,
    views,
)

CLASSES = StorageClasses(wait_for_first_consumer=frozenset({"wffc"}))
WFFC: Obj = {"storageClassName": "wffc"}


def status_jobset(record: list[Obj] | None = None, **kw: Any) -> JobSet:
    """4 workers, each with its ``ckpt`` (Job scope) and the shared ``data`` (class wffc); the
    stored status remembers the claims ``record``."""
    js = make(
        [
            {"templates": [tpl("ckpt")], "scope": "Job"},
            {"templates": [tpl("data", storageClassName="wffc")]},
        ],
        rjobs=[mounting("workers", 4, ("ckpt", "data"))],
        **kw,
    )
    return recorded(js, record) if record else js


def ready(model: VolumeModel, claims: list[Obj]) -> Condition:
    return volumes_ready(model, lifecycle(model, views(claims), CLASSES))


def bound_all() -> list[Obj]:
    return [ckpt(i) for i in range(4)] + [claim("data-js", spec=WFFC, phase="Bound")]


def command(*keys: str) -> str:
    value = ",".join(keys)
    return f"kubectl annotate jobset js -n default --overwrite {REPLACE_LOST_ANNOTATION}={value}"


# ----------------------------------------------------------------------------- counts


def test_template_counts() -> None:
    existing = [
        ckpt(0, phase="Bound"),
        ckpt(1, phase="Pending"),
        ckpt(2, phase="Lost"),  # its volume is lost: it still exists, and is the JobSet's
        ckpt(3, owner_uid="uid-old", annotations=RETAINED),  # adoptable: not existing yet
        ckpt(7),  # not desired
        claim("data-js", jobset="someone-else"),
    ]
    js = status_jobset(existing[:3])
    model = volumes.model(js)
    counted = template_counts(model, lifecycle(model, views(existing), CLASSES))
    assert [t.to_dict() for t in counted] == [
        {
            "name": "ckpt",
            "scope": "Job",
            "desired": 4,
            "existing": 3,
            "bound": 1,
            "pending": 1,
            "lost": 1,
            "conflicts": 0,
        },
        {
            "name": "data",
            "scope": "JobSet",
            "desired": 1,
            "existing": 0,
            "bound": 0,
            "pending": 0,
            "lost": 0,
            "conflicts": 1,
            "claimName": "data-js",
        },
    ]


# The counts of ``ckpt`` (desired 4) for claims in each state; ``data-js`` is Bound throughout.
COUNTS = [
    pytest.param(
        [ckpt(0), ckpt(1, phase="Pending"), ckpt(2, phase=None),
         ckpt(3, spec=WFFC, phase="Pending")],
        [0, 1, 2, 3], {"existing": 4, "bound": 1, "pending": 3},
        id="bound-pending-no-phase-waiting",
    ),
    # Gone, or replaced by another object: lost, not existing.
    pytest.param(
        [ckpt(1, uid=uid_of("ckpt-js-workers-1", 1))], [0, 1], {"lost": 2},
        id="lost-gone-and-replaced",
    ),
    # Being deleted (by someone else, or by retention): still there, not bound.
    pytest.param(
        [ckpt(0, deleting=True), ckpt(1, deleting=True)], [0], {"existing": 2},
        id="terminating-and-deleting",
    ),
    pytest.param([], [], {}, id="missing"),
]  # fmt: skip


@pytest.mark.parametrize(("claims", "had", "counts"), COUNTS)
def test_template_counts_by_state(claims: list[Obj], had: list[int], counts: Obj) -> None:
    data = claim("data-js", spec=WFFC)
    js = status_jobset([data] + [ckpt(i) for i in had])
    model = volumes.model(js)
    found = lifecycle(model, views([*claims, data]), CLASSES)
    (ckpts, shared) = [t.to_dict() for t in template_counts(model, found)]
    zero = {"existing": 0, "bound": 0, "pending": 0, "lost": 0, "conflicts": 0}
    assert ckpts == {"name": "ckpt", "scope": "Job", "desired": 4, **zero, **counts}
    assert shared["bound"] == shared["existing"] == 1


def test_template_counts_released() -> None:
    js = status_jobset(
        [ckpt(0)],
        terminal_state=api.TERMINAL_COMPLETED,
    )
    raw = copy.deepcopy(js.raw)
    raw["spec"]["volumeClaimPolicies"][0]["retentionPolicy"] = {"whenCompleted": "Delete"}
    model = volumes.model(parse(raw))
    found = lifecycle(model, views([]), CLASSES)
    ckpts = template_counts(model, found)[0].to_dict()
    assert (ckpts["desired"], ckpts["existing"], ckpts["lost"]) == (4, 0, 0)
    assert volume_status.released_claims(model) == {f"ckpt-js-workers-{i}" for i in range(4)}


def test_counts_without_policies() -> None:
    model = volumes.model(make_jobset())
    assert template_counts(model, []) == []
    assert volume_status.conditions(model, volumes.VolumePlan()) == []
    assert volume_status.released_claims(model) == set()


# ----------------------------------------------------------------------------- VolumesReady

Change = Callable[[list[Obj]], list[Obj]]


def same(cs: list[Obj]) -> list[Obj]:
    return cs


READY = [
    pytest.param(same, True, True, "ClaimsBound", "all 5 claims are bound", id="bound"),
    # Ours, not in the stored record yet: the status this pass writes records them.
    pytest.param(same, False, True, "ClaimsBound", "all 5 claims are bound",
                 id="bound-recorded-this-pass"),
    pytest.param(
        lambda cs: [*cs[:4], claim("data-js", spec=WFFC, phase="Pending")], True, True,
        "WaitingForFirstConsumer", "1 bind when their first pod is scheduled", id="wffc",
    ),
    pytest.param(
        lambda cs: [*cs[:4], claim("data-js", spec=WFFC, phase="Pending",
                                   annotations={SELECTED_NODE_ANNOTATION: "n1"})],
        True, False, "ClaimsPending", "1 of 5 claims are waiting", id="wffc-node-selected",
    ),
    pytest.param(
        lambda cs: [*cs[:4], claim("data-js", spec={"storageClassName": "slow"},
                                   phase="Pending")],
        True, False, "ClaimsPending", "data-js", id="pending",
    ),
    pytest.param(lambda cs: [*cs[:4], claim("data-js", phase=None)], True, False, "ClaimsPending",
                 "data-js", id="no-phase"),
    # Never had: not created yet. Had: lost, with the command that accepts the loss.
    pytest.param(lambda cs: cs[1:], False, False, "ClaimsNotCreated",
                 "1 of 5 claims are not created", id="missing"),
    pytest.param(
        lambda cs: cs[1:], True, False, "ClaimsLost",
        "1 of 5 claims this JobSet had are lost, with their data: ckpt-js-workers-0 (deleted). "
        "The Jobs that mount them wait; they are not replaced by empty claims unless you accept "
        "it: " + command(f"ckpt-js-workers-0@{prefix_of('ckpt-js-workers-0')}"),
        id="lost-deleted",
    ),
    pytest.param(
        lambda cs: [ckpt(0, uid=uid_of("ckpt-js-workers-0", 1)), *cs[1:]], True, False,
        "ClaimsLost", "ckpt-js-workers-0 (deleted; the name now belongs to another claim",
        id="lost-replaced",
    ),
    pytest.param(
        lambda cs: [ckpt(0, phase="Lost"), *cs[1:]], True, False, "ClaimsLost",
        "ckpt-js-workers-0 (its persistent volume is lost). The Jobs that mount them wait; they "
        "are not replaced by empty claims unless you accept it (a claim whose volume is lost "
        "must be deleted first)",
        id="lost-volume",
    ),
    # Being deleted: by retention, or before it was ever recorded (created again once gone) ...
    pytest.param(lambda cs: [ckpt(0, deleting=True), *cs[1:]], False, False, "ClaimsNotCreated",
                 "ckpt-js-workers-0", id="deleting"),
    # ... or a claim the JobSet had, by someone else: it will be lost.
    pytest.param(
        lambda cs: [ckpt(0, deleting=True), *cs[1:]], True, False, "ClaimsTerminating",
        "1 of 5 claims this JobSet had are being deleted, not by this controller: "
        "ckpt-js-workers-0", id="terminating",
    ),
    pytest.param(
        lambda cs: [ckpt(1, deleting=True), *cs[2:]], True, False, "ClaimsLost",
        "1 of 5 claims", id="lost-before-terminating",
    ),
    pytest.param(
        lambda cs: [ckpt(0, owner_uid="uid-old", annotations=RETAINED), *cs[1:]], False, False,
        "ClaimsNotCreated", "ckpt-js-workers-0", id="adoptable",
    ),
    pytest.param(
        lambda cs: [ckpt(0, jobset="other"), ckpt(1, phase="Lost"), *cs[2:]], False, False,
        "ClaimConflict", "1 of 5 claims exist but are not this JobSet's", id="conflict-first",
    ),
    pytest.param(lambda cs: [], False, False, "ClaimsNotCreated", "5 of 5 claims", id="none"),
    pytest.param(lambda cs: [], True, False, "ClaimsLost", "5 of 5 claims", id="all-lost"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "had", "is_ready", "reason", "fragment"), READY)
def test_volumes_ready(
    change: Change, had: bool, is_ready: bool, reason: str, fragment: str
) -> None:
    model = volumes.model(status_jobset(bound_all() if had else None))
    result = ready(model, change(bound_all()))
    assert (result.type, result.status, result.reason) == (
        "VolumesReady",
        "True" if is_ready else "False",
        reason,
    )
    assert fragment in result.message
    # A claim the JobSet had, lost or going, is announced by a Warning.
    warned = reason in ("ClaimsLost", "ClaimsTerminating")
    assert result.event_type == ("Warning" if warned else None)


def test_claims_lost_command_lists_the_replaceable_claims_only() -> None:
    existing = [ckpt(1, phase="Lost"), claim("data-js", spec=WFFC)]
    model = volumes.model(status_jobset(bound_all()))
    result = ready(model, existing)
    assert result.reason == "ClaimsLost"
    assert result.message == (
        "4 of 5 claims this JobSet had are lost, with their data: ckpt-js-workers-0 (deleted), "
        "ckpt-js-workers-1 (its persistent volume is lost), ckpt-js-workers-2 (deleted), "
        "ckpt-js-workers-3 (deleted). The Jobs that mount them wait; they are not replaced by "
        "empty claims unless you accept it: "
        + command(*(f"ckpt-js-workers-{i}@{prefix_of(f'ckpt-js-workers-{i}')}" for i in (0, 2, 3)))
    )


def test_claims_lost_command_is_bounded() -> None:
    js = make(
        [{"templates": [tpl("ckpt")], "scope": "Job"}], rjobs=[mounting("workers", 25, ("ckpt",))]
    )
    model = volumes.model(recorded(js, [ckpt(i) for i in range(25)]))
    result = ready(model, [])
    assert result.reason == "ClaimsLost"
    listed = result.message.split(f"{REPLACE_LOST_ANNOTATION}=")[1].split(" ")[0].split(",")
    assert listed == [f"ckpt-js-workers-{i}@{prefix_of(f'ckpt-js-workers-{i}')}" for i in range(20)]
    assert result.message.endswith(
        f"@{prefix_of('ckpt-js-workers-19')} (and 5 more, as <claim>@<uid prefix>; the prefixes "
        "are in status.volumes.claimUIDs)"
    )
    assert "kubectl annotate jobset js -n default --overwrite " in result.message
    assert "ckpt-js-workers-4 (deleted) and 20 more" in result.message


def test_claims_lost_unrecorded_lost_volume_offers_no_key() -> None:
    model = volumes.model(status_jobset())  # no record: e.g. written by an older controller
    result = ready(model, [*bound_all()[:2], ckpt(2, phase="Lost"), *bound_all()[3:]])
    assert result.reason == "ClaimsLost"
    assert "@None" not in result.message
    assert result.message.endswith("(a claim whose volume is lost must be deleted first)")


@pytest.mark.parametrize(
    ("state", "when", "claims", "reason", "fragment"),
    [
        # Completed and whenCompleted: Delete deleted the Job-scope claims: released, not missing.
        ("Completed", {"whenCompleted": "Delete"}, "data", "ClaimsReleased", "4 of 5 claims"),
        # Being deleted (pvc-protection keeps them while pods use them): released too.
        ("Completed", {"whenCompleted": "Delete"}, "deleting", "ClaimsReleased", "once the JobSet"),
        ("Failed", {"whenFailed": "Delete"}, "data", "ClaimsReleased", "was Failed"),
        # Retention did not ask for it: a missing claim is missing (never had) ...
        ("Failed", {"whenCompleted": "Delete"}, "data", "ClaimsNotCreated", "4 of 5"),
        ("", {"whenCompleted": "Delete"}, "data", "ClaimsNotCreated", "4 of 5"),
        # ... or lost (had).
        ("Failed", {"whenCompleted": "Delete"}, "data-recorded", "ClaimsLost", "4 of 5"),
        # A claim missing for another reason is reported first.
        ("Completed", {"whenCompleted": "Delete"}, "none", "ClaimsNotCreated", "1 of 5"),
    ],
)
def test_volumes_ready_after_retention_released_claims(
    state: str, when: Obj, claims: str, reason: str, fragment: str
) -> None:
    js = make(
        [
            {"templates": [tpl("ckpt")], "scope": "Job", "retentionPolicy": when},
            {"templates": [tpl("data", storageClassName="wffc")]},
        ],
        rjobs=[mounting("workers", 4, ("ckpt", "data"))],
        terminal_state=state or None,
    )
    if claims == "data-recorded":
        js = recorded(js, bound_all())
    existing = {
        "data": [claim("data-js", spec=WFFC)],
        "data-recorded": [claim("data-js", spec=WFFC)],
        "deleting": [ckpt(i, deleting=True) for i in range(4)] + [claim("data-js", spec=WFFC)],
        "none": [],
    }[claims]
    result = ready(volumes.model(js), existing)
    assert (result.status, result.reason) == ("False", reason), result.message
    assert fragment in result.message


def test_volumes_ready_lists_a_few_names() -> None:
    js = make(
        [{"templates": [tpl("ckpt")], "scope": "Job"}], rjobs=[mounting("workers", 9, ("ckpt",))]
    )
    result = ready(volumes.model(js), [])
    assert (result.status, result.reason) == ("False", "ClaimsNotCreated")
    assert result.message.endswith("ckpt-js-workers-4 and 4 more")


def test_volumes_ready_without_claims() -> None:
    assert volumes_ready(volumes.model(make_jobset()), []) == Condition(
        "VolumesReady", "True", "NoVolumeClaims", "the JobSet needs no volume claims", None
    )


# ----------------------------------------------------------------------------- conditions


def conditions_of(js: JobSet, claims: list[Obj], classes: StorageClasses) -> list[Obj]:
    model = volumes.model(js)
    vplan = volume_lifecycle.plan(model, views(claims), classes, terminal_state="")
    return [
        {"type": c.type, "status": c.status, "reason": c.reason, "event": c.event_type}
        for c in volume_status.conditions(model, vplan)
    ]


def test_conditions_steady() -> None:
    existing = bound_all()
    assert conditions_of(status_jobset(existing), existing, CLASSES) == [
        {"type": "VolumesReady", "status": "True", "reason": "ClaimsBound", "event": None},
        {"type": "VolumeClaimConflict", "status": "False", "reason": "NoConflict", "event": None},
        {
            "type": "VolumeExpansionBlocked",
            "status": "False",
            "reason": "NoExpansionPending",
            "event": None,
        },
        {
            "type": "VolumeAnnotationsRejected",
            "status": "False",
            "reason": "VolumeAnnotationsAccepted",
            "event": None,
        },
        # Said False: written only once it was True (decide's condition), as the others above.
        {
            "type": "VolumePolicyOverridden",
            "status": "False",
            "reason": "NoOverride",
            "event": None,
        },
    ]


def test_conditions_conflict_and_blocked_expansion() -> None:
    js = make([{"templates": [tpl("data", "2Gi")]}])
    existing = [claim("data-js", jobset="other")]
    model = volumes.model(js)
    vplan = volume_lifecycle.plan(model, views(existing), StorageClasses(), terminal_state="")
    (_, conflict, expansion, *_) = volume_status.conditions(model, vplan)
    assert conflict == Condition(
        "VolumeClaimConflict",
        "True",
        "ClaimConflict",
        "data-js: claim data-js exists but was not made for JobSet js (it lacks the label "
        f"{api.JOBSET_NAME}=js)",
        "Warning",
    )
    assert expansion.status == "False"
    small = claim("data-js", spec={**tpl("data")["spec"], "storageClassName": "fixed"})
    grown = volumes.model(recorded(js, [small]))
    vplan = volume_lifecycle.plan(grown, views([small]), StorageClasses(), terminal_state="")
    (_, conflict, expansion, *_) = volume_status.conditions(grown, vplan)
    assert conflict.status == "False"
    assert (expansion.status, expansion.reason, expansion.event_type) == (
        "True",
        "VolumeExpansionNotSupported",
        "Warning",
    )
    assert expansion.message == (
        "claim data-js cannot grow to 2Gi: its storage class fixed does not allow volume expansion"
    )


# ----------------------------------------------------------------------------- status.volumes


def test_volumes_status_carries_the_record() -> None:
    existing = [ckpt(0, phase="Pending")]
    model = volumes.model(status_jobset())
    vplan = volume_lifecycle.plan(model, views(existing), CLASSES, terminal_state="")
    status = volume_status.volumes_status(model, vplan).to_dict()
    assert status["claimUIDs"] == [
        {"template": "ckpt", "replicatedJob": "workers", "uids": prefix_of("ckpt-js-workers-0")}
    ]
    # The claims this pass creates count as Pending already.
    assert [(t["name"], t["existing"], t["pending"]) for t in status["templates"]] == [
        ("ckpt", 4, 4),
        ("data", 1, 1),
    ]
    # Nothing recorded, nothing written for it.
    empty = volume_lifecycle.plan(model, views([]), CLASSES, terminal_state=api.TERMINAL_COMPLETED)
    assert "claimUIDs" not in volume_status.volumes_status(model, empty).to_dict()


def test_with_created_claims() -> None:
    """The uids of the claims a pass created (known only from the API server's responses) join
    the record in the status that pass writes; the rest of the status is kept."""
    model = volumes.model(status_jobset([ckpt(0)]))
    stored = JobSetStatus.parse(
        {"restarts": 1, "volumes": {"templates": [{"name": "ckpt"}], "claimUIDs": []}}
    )
    made = {"ckpt-js-workers-2", "data-js"}
    vplan = VolumePlan(create=[d for d in model.desired if d.name in made], record=model.record)
    status = stored.with_claim_uids(vplan.claim_uids_with({name: uid_of(name) for name in made}))
    assert status.to_dict() == {
        "restarts": 1,
        "restartsCountTowardsMax": 0,
        "conditions": [],
        "replicatedJobsStatus": [],
        "volumes": {
            "templates": [
                {"name": "ckpt", "scope": "", "desired": 0, "existing": 0, "bound": 0,
                 "pending": 0, "lost": 0, "conflicts": 0}
            ],
            "claimUIDs": [
                {
                    "template": "ckpt",
                    "replicatedJob": "workers",
                    "uids": f"{prefix_of('ckpt-js-workers-0')},,{prefix_of('ckpt-js-workers-2')}",
                },
                {"template": "data", "uids": prefix_of("data-js")},
            ],
        },
    }  # fmt: skip
    # A new status, the stored one untouched; only the record differs.
    assert stored.volumes is not None and stored.volumes.claim_uids == ()
    assert replace(status, volumes=stored.volumes) == stored
    # Claims the plan did not create are not recorded, whatever uids are given for them.
    assert vplan.claim_uids_with({"ckpt-js-workers-7": uid_of("x")}) == model.record.entries()


def test_pod_scope_status_stays_compact() -> None:
    """20 Pod-scope claims (4 Jobs of 5 completion indexes): one count entry for the template
    and one record entry, whatever their number; the per-claim detail is in the claims' labels."""
    rjobs = [mounting("workers", 4, ("ckpt",))]
    rjobs[0]["template"]["spec"]["completions"] = 5
    js = make([{"templates": [tpl("ckpt")], "scope": "Pod"}], rjobs=rjobs)
    made = [pod_ckpt(j, p, refs=[owner()]) for j in range(4) for p in range(5) if (j, p) != (3, 4)]
    js = recorded(js, made)
    model = volumes.model(js)
    vplan = volume_lifecycle.plan(model, views(made), CLASSES, terminal_state="")
    status = volume_status.volumes_status(model, vplan).to_dict()
    assert status["templates"] == [
        {"name": "ckpt", "scope": "Pod", "desired": 20, "existing": 20, "bound": 19,
         "pending": 1, "lost": 0, "conflicts": 0}
    ]  # fmt: skip
    (entry,) = status["claimUIDs"]
    assert entry == {
        "template": "ckpt",
        "replicatedJob": "workers",
        "scope": "Pod",
        "uids": ";".join(
            ",".join(prefix_of(f"ckpt-js-workers-{j}-{p}") for p in range(5 if j < 3 else 4))
            for j in range(4)
        ),
    }  # the claim this pass creates joins once its uid is known (with_created_claims)
    assert [c.name for c in vplan.create] == ["ckpt-js-workers-3-4"]
