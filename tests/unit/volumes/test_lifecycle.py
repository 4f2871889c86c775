"""lifecycle: each desired claim's state (from what exists and what the JobSet's status recorded),
the writes of one pass (create, adopt, update, delete, the uid record after it, the Lost claims
the user accepted to replace), and retention while the JobSet lives (``claims_to_delete``; the
deletion plan and its finalizer are test_deletion's).

The state tables show one JobSet-scope claim ``data-js`` (the JobSet js mounts it in its two
workers) in every situation; ``P`` is the uid prefix of the claim the JobSet had (``uid_of``
generation 0), ``P1`` that of another object of the same name (generation 1).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.jobset import api, volumes
from controller.jobset.jobsetstatus import JobSetStatus
from controller.jobset.model import JobSet, parse
from controller.jobset.volumes import (
    FINALIZER,
    ClaimView,
    StorageClasses,
    VolumePlan,
)
from controller.jobset.volumes import lifecycle as volume_lifecycle
from controller.jobset.volumes import spec as volume_spec
from controller.jobset.volumes.desired import Slot
from controller.jobset.volumes.lifecycle import (
    ClaimDelete,
    ClaimLifecycle,
    ClaimState,
    claims_to_delete,
    lifecycle,
    slot_of,
)
from controller.jobset.volumes.model import SELECTED_NODE_ANNOTATION
from controller.jobset.volumes.record import ClaimRecord, read_record
from controller.runtime.store import Obj
from tests.unit.volumes.factories import (
    CLAIM_VERSION,
    RETAINED,
    accepting,
    ckpt,
    claim,
    make_obj,
    mounting,
    owner,
    pod_ckpt,
    prefix_of,
    recorded,
    tpl,
    uid_of,
    views,
)

P = prefix_of("data-js")
P1 = prefix_of("data-js", 1)
DATA: Slot = ("data", None, None, None)
CLASSES = StorageClasses(wait_for_first_consumer=frozenset({"wffc"}), expandable=frozenset())
WFFC: Obj = {"storageClassName": "wffc", **tpl("data")["spec"]}


def ours(**kw: Any) -> Obj:
    """``data-js`` as this controller made it for js (owner reference included)."""
    kw.setdefault("refs", [owner()])
    return claim("data-js", **kw)


def another(**kw: Any) -> Obj:
    """Another object now named ``data-js`` (re-created from its YAML: same labels, new uid)."""
    return ours(uid=uid_of("data-js", 1), **kw)


def jobset(
    policies: list[Obj] | None = None,
    *,
    record: dict[Slot, str] | None = None,
    annotations: dict[str, str] | None = None,
    finalizer: bool = True,
    **kw: Any,
) -> JobSet:
    """js with the policies (default: ``data`` for both workers), the stored uid ``record`` and
    the retention finalizer (added by an earlier pass) unless ``finalizer`` is False."""
    obj = make_obj(
        policies if policies is not None else [{"templates": [tpl("data")]}],
        annotations=annotations,
        **kw,
    )
    if record:
        obj["status"]["volumes"] = {"claimUIDs": ClaimRecord(record).render()}
    if finalizer:
        obj["metadata"]["finalizers"] = [FINALIZER]
    return parse(obj)


def states(js: JobSet, claims: list[Obj]) -> list[ClaimLifecycle]:
    return lifecycle(volumes.model(js), views(claims), CLASSES)


def plan(js: JobSet, claims: list[Obj], terminal_state: str | None = None) -> VolumePlan:
    after = js.status.terminal_state if terminal_state is None else terminal_state
    return volume_lifecycle.plan(volumes.model(js), views(claims), CLASSES, terminal_state=after)


# ----------------------------------------------------------------------------- states

RECORDED = {DATA: P}
WHEN_COMPLETED_DELETE = [
    {"templates": [tpl("data")], "retentionPolicy": {"whenCompleted": "Delete"}}
]


@dataclass(frozen=True)
class At:
    """One situation of ``data-js``: the claim (None: absent), the stored record, and for
    retention the policy and the stored terminal state."""

    claim: Obj | None
    record: dict[Slot, str] = field(default_factory=dict)
    policies: list[Obj] | None = None
    terminal_state: str | None = None
    classes: StorageClasses = CLASSES


STATES = [
    pytest.param(At(None), ClaimState.MISSING, False, "", id="missing"),
    pytest.param(At(None, RECORDED), ClaimState.LOST, False, "deleted", id="lost-deleted"),
    # Re-created from its own YAML: our labels and annotations, another uid, no data.
    pytest.param(
        At(another(), RECORDED), ClaimState.LOST, False, f"another claim (uid {P1})",
        id="lost-replaced-by-another-uid",
    ),
    pytest.param(
        At(another(jobset="other"), RECORDED), ClaimState.LOST, False, "another claim",
        id="lost-replaced-by-a-foreign-claim",
    ),
    pytest.param(
        At(another(deleting=True), RECORDED), ClaimState.LOST, False, "another claim",
        id="lost-replaced-and-that-one-going",
    ),
    pytest.param(
        At(ours(phase="Lost"), RECORDED), ClaimState.LOST, False, "persistent volume is lost",
        id="lost-volume",
    ),
    pytest.param(
        At(ours(owner_uid="uid-old", annotations=RETAINED, refs=[])), ClaimState.ADOPTABLE,
        False, "", id="adoptable",
    ),
    pytest.param(
        At(ours(jobset="other", refs=[])), ClaimState.CONFLICT, False, "not made for JobSet js",
        id="conflict",
    ),
    pytest.param(
        At(ours(owner_uid="uid-old", refs=[])), ClaimState.CONFLICT, False,
        "no proof of ownership", id="conflict-label-only",
    ),
    # Our annotation of an earlier JobSet of the name and its ownerReference: no proof either.
    pytest.param(
        At(ours(owner_uid="uid-old", refs=[owner("uid-old")])), ClaimState.CONFLICT, False,
        "no proof of ownership", id="conflict-earlier-jobset-reference",
    ),
    # Upstream JobSet's claim (its name label and controller ownerReference to this JobSet,
    # none of our annotations): the JobSet's own, adopted.
    pytest.param(
        At(ours(owner_uid=None)), ClaimState.ADOPTABLE, False, "",
        id="adoptable-controller-reference",
    ),
    pytest.param(At(ours(phase="Pending"), RECORDED), ClaimState.PENDING, True, "",
                 id="pending-recorded"),
    # Ours, but the stored status does not remember it yet: not mounted.
    pytest.param(At(ours(phase="Pending")), ClaimState.PENDING, False, "",
                 id="pending-not-recorded"),
    pytest.param(At(ours(phase=None), RECORDED), ClaimState.PENDING, True, "",
                 id="no-phase-yet"),
    pytest.param(At(ours(phase="Pending", spec=WFFC), RECORDED), ClaimState.WAITING, True, "",
                 id="waiting-for-first-consumer"),
    pytest.param(
        At(ours(phase="Pending", spec=WFFC, annotations={SELECTED_NODE_ANNOTATION: "n"}),
           RECORDED),
        ClaimState.PENDING, True, "", id="wffc-node-selected-pending",
    ),
    pytest.param(
        At(ours(phase="Pending", spec=WFFC), RECORDED, classes=StorageClasses()),
        ClaimState.PENDING, True, "", id="class-not-wffc-pending",
    ),
    pytest.param(At(ours(), RECORDED), ClaimState.BOUND, True, "", id="bound-recorded"),
    pytest.param(At(ours()), ClaimState.BOUND, False, "", id="bound-not-recorded"),
    # Ours, being deleted: never recorded (retention deleted it and forgot it) or recorded.
    pytest.param(At(ours(deleting=True)), ClaimState.DELETING, False, "being deleted",
                 id="deleting-not-recorded"),
    pytest.param(At(ours(deleting=True), RECORDED), ClaimState.TERMINATING, False,
                 "being deleted", id="terminating-recorded"),
    pytest.param(
        At(None, RECORDED, WHEN_COMPLETED_DELETE, api.TERMINAL_COMPLETED), ClaimState.RELEASED,
        False, "", id="released",
    ),
    pytest.param(
        At(ours(deleting=True), RECORDED, WHEN_COMPLETED_DELETE, api.TERMINAL_COMPLETED),
        ClaimState.RELEASED, False, "", id="released-terminating",
    ),
    # Retention deletes it in this pass; until then it is what it is.
    pytest.param(
        At(ours(), RECORDED, WHEN_COMPLETED_DELETE, api.TERMINAL_COMPLETED), ClaimState.BOUND,
        True, "", id="released-this-pass-bound",
    ),
    # Retention did not ask for it: gone is Lost.
    pytest.param(
        At(None, RECORDED, WHEN_COMPLETED_DELETE, api.TERMINAL_FAILED), ClaimState.LOST, False,
        "deleted", id="failed-keeps-claims-gone-is-lost",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("at", "state", "mountable", "why"), STATES)
def test_state(at: At, state: ClaimState, mountable: bool, why: str) -> None:
    js = jobset(at.policies, record=at.record, terminal_state=at.terminal_state)
    model = volumes.model(js)
    existing = [] if at.claim is None else [at.claim]
    (found,) = lifecycle(model, views(existing), at.classes)
    assert (found.name, found.state, found.mountable) == ("data-js", state, mountable)
    assert why in found.why
    assert bool(found.why) is bool(why)
    assert found.recorded == at.record.get(DATA)
    assert found.claim == (None if at.claim is None else ClaimView.of(at.claim))
    assert found.volume_lost is (why == "persistent volume is lost")


@pytest.mark.parametrize(
    ("state", "held", "mountable"),
    [
        pytest.param(ClaimState.BOUND, False, True, id="bound"),
        # retentionPolicy.whenSuspended: Snapshot lets it go through a snapshot: however it was
        # before, and whether the JobSet is resumed meanwhile, no pod mounts it again.
        pytest.param(ClaimState.BOUND, True, False, id="held-for-its-snapshot"),
        pytest.param(ClaimState.PENDING, True, False, id="held-pending"),
    ],
)
def test_a_claim_held_for_a_snapshot_is_never_mountable(
    state: ClaimState, held: bool, mountable: bool
) -> None:
    js = jobset()
    (desired,) = volumes.model(js).desired
    found = ClaimLifecycle(desired, state, ClaimView.of(ours()), P, held=held)
    assert found.mountable is mountable


def test_states_are_per_slot() -> None:
    """Job scope: each Job's claim has its own record entry and its own state."""
    policies = [{"templates": [tpl("ckpt")], "scope": "Job"}]
    existing = [ckpt(0, refs=[owner()]), ckpt(3, refs=[owner()])]
    js = jobset(policies, rjobs=[mounting("workers", 4, ("ckpt",))])
    found = states(recorded(js, [ckpt(0), ckpt(1), ckpt(3)]), existing)
    assert [(s.name, s.state, s.mountable) for s in found] == [
        ("ckpt-js-workers-0", ClaimState.BOUND, True),
        ("ckpt-js-workers-1", ClaimState.LOST, False),
        ("ckpt-js-workers-2", ClaimState.MISSING, False),
        ("ckpt-js-workers-3", ClaimState.BOUND, True),
    ]
    assert found[1].replacement_key == f"ckpt-js-workers-1@{prefix_of('ckpt-js-workers-1')}"


def test_mountable_claims_and_the_jobs_that_wait() -> None:
    """A Job is created only when every claim it mounts is mountable; a Job mounting nothing
    never waits."""
    js = jobset(
        [{"templates": [tpl("ckpt")], "scope": "Job"}, {"templates": [tpl("data")]}],
        rjobs=[mounting("workers", 2, ("ckpt", "data")), mounting("idle", 1)],
    )
    existing = [
        ckpt(0, refs=[owner()]),
        ckpt(1, deleting=True),
        claim("data-js", owner_uid="uid-old"),  # a copied label: a conflict
        claim("unrelated"),
    ]
    model = volumes.model(recorded(js, existing[:1]))
    mountable = {s.name for s in lifecycle(model, views(existing), CLASSES) if s.mountable}
    assert mountable == {"ckpt-js-workers-0"}

    def waiting_for(rjob: str, index: int, usable: set[str]) -> list[str]:
        wanted = model.job_claims.for_job(rjob, index).values()
        return [c for c in wanted if c not in usable]

    assert waiting_for("workers", 0, mountable) == ["data-js"]
    assert waiting_for("workers", 1, mountable) == ["ckpt-js-workers-1", "data-js"]
    assert waiting_for("idle", 0, set()) == []
    everything = {c.name for c in model.desired}
    assert waiting_for("workers", 1, everything) == []
    # The same claims, not recorded: nothing is mountable.
    unrecorded = volumes.model(js)
    assert not any(s.mountable for s in lifecycle(unrecorded, views(existing), CLASSES))


# ----------------------------------------------------------------------------- the plan


def summary(vplan: VolumePlan) -> Obj:
    """What one pass does: the writes, the claims' states after it and the uid record after it."""
    out: Obj = {}
    if vplan.add_finalizer:
        out["add_finalizer"] = True
    if vplan.create:
        out["create"] = [d.name for d in vplan.create]
    if vplan.patch:
        out["patch"] = [(p.name, p.reason) for p in vplan.patch]
    if vplan.deleted:
        out["delete"] = list(vplan.deleted)
    if vplan.remove_finalizer:
        out["remove_finalizer"] = True
    if vplan.conflicts:
        out["conflicts"] = sorted(vplan.conflicts)
    if vplan.replaced:
        out["replaced"] = sorted(vplan.replaced)
    out["states"] = {c.name: c.state.value for c in vplan.claims}
    out["mountable"] = sorted(vplan.mountable)
    out["record"] = dict(vplan.record.uids)
    return out


@dataclass(frozen=True)
class Pass:
    """One pass over ``data-js``: what exists, the stored record, the JobSet's annotations, the
    stored terminal state and the one this pass reaches."""

    claims: tuple[Obj, ...] = ()
    record: dict[Slot, str] = field(default_factory=dict)
    annotations: dict[str, str] | None = None
    policies: list[Obj] | None = None
    stored: str | None = None
    after: str | None = None
    finalizer: bool = True


PASSES = [
    pytest.param(
        Pass(finalizer=False),
        {"add_finalizer": True, "create": ["data-js"], "states": {"data-js": "Pending"},
         "mountable": [], "record": {}},
        id="first-pass-finalizer-and-claim",
    ),
    # The reconciler records the uid of the claim it creates (from the response), not the plan.
    pytest.param(
        Pass(),
        {"create": ["data-js"], "states": {"data-js": "Pending"}, "mountable": [], "record": {}},
        id="missing-created",
    ),
    pytest.param(
        Pass(after=api.TERMINAL_COMPLETED),
        {"states": {"data-js": "Missing"}, "mountable": [], "record": {}},
        id="missing-not-created-once-finishing",
    ),
    pytest.param(
        Pass(claims=(ours(phase="Pending"),)),
        {"states": {"data-js": "Pending"}, "mountable": [], "record": {DATA: P}},
        id="ours-recorded-then-mounted",
    ),
    pytest.param(
        Pass(claims=(ours(phase="Pending"),), record=RECORDED),
        {"states": {"data-js": "Pending"}, "mountable": ["data-js"], "record": {DATA: P}},
        id="recorded-mounted-nothing-written",
    ),
    pytest.param(
        Pass(claims=(ours(owner_uid="uid-old", annotations=RETAINED, refs=[]),)),
        {"patch": [("data-js", "ClaimAdopted")], "states": {"data-js": "Adoptable"},
         "mountable": [], "record": {DATA: P}},
        id="adopted-and-recorded-not-mounted-yet",
    ),
    pytest.param(
        Pass(claims=(ours(jobset="other", refs=[]),)),
        {"conflicts": ["data-js"], "states": {"data-js": "Conflict"}, "mountable": [],
         "record": {}},
        id="conflict-untouched",
    ),
    pytest.param(
        Pass(claims=(ours(deleting=True),)),
        {"states": {"data-js": "Deleting"}, "mountable": [], "record": {}},
        id="deleting-created-once-gone",
    ),
    pytest.param(
        Pass(claims=(ours(deleting=True),), record=RECORDED),
        {"states": {"data-js": "Terminating"}, "mountable": [], "record": {DATA: P}},
        id="terminating-kept-in-the-record",
    ),
    # --- Lost: never recreated, never mounted, remembered ...
    pytest.param(
        Pass(record=RECORDED),
        {"states": {"data-js": "Lost"}, "mountable": [], "record": {DATA: P}},
        id="lost-not-recreated",
    ),
    pytest.param(
        Pass(claims=(another(),), record=RECORDED),
        {"states": {"data-js": "Lost"}, "mountable": [], "record": {DATA: P}},
        id="lost-the-other-object-not-mounted-nor-recorded",
    ),
    # ... until the annotation accepts exactly that loss: name and uid prefix.
    pytest.param(
        Pass(record=RECORDED, annotations=accepting(f"data-js@{P}")),
        {"create": ["data-js"], "replaced": ["data-js"], "states": {"data-js": "Pending"},
         "mountable": [], "record": {}},
        id="lost-accepted-replaced-empty",
    ),
    pytest.param(
        Pass(record=RECORDED, annotations=accepting(f"data-js@{P1}")),
        {"states": {"data-js": "Lost"}, "mountable": [], "record": {DATA: P}},
        id="lost-another-prefix-accepted-does-not-apply",
    ),
    pytest.param(
        Pass(record=RECORDED, annotations=accepting("data-js")),
        {"states": {"data-js": "Lost"}, "mountable": [], "record": {DATA: P}},
        id="lost-name-alone-does-not-apply",
    ),
    pytest.param(
        Pass(record=RECORDED, annotations=accepting(f"other-js@{P}")),
        {"states": {"data-js": "Lost"}, "mountable": [], "record": {DATA: P}},
        id="lost-another-name-accepted-does-not-apply",
    ),
    pytest.param(
        Pass(record=RECORDED, annotations=accepting(f"ckpt-js@0, data-js@{P}")),
        {"create": ["data-js"], "replaced": ["data-js"], "states": {"data-js": "Pending"},
         "mountable": [], "record": {}},
        id="lost-accepted-among-others",
    ),
    # The JobSet's own claim now has the name: taken over and recorded; mounted next pass.
    pytest.param(
        Pass(claims=(another(),), record=RECORDED, annotations=accepting(f"data-js@{P}")),
        {"replaced": ["data-js"], "states": {"data-js": "Pending"}, "mountable": [],
         "record": {DATA: P1}},
        id="lost-accepted-own-claim-of-the-name-taken-over",
    ),
    # Another's claim has the name: forgotten; the next pass finds a conflict, never mounts it.
    pytest.param(
        Pass(claims=(another(jobset="other"),), record=RECORDED,
             annotations=accepting(f"data-js@{P}")),
        {"replaced": ["data-js"], "states": {"data-js": "Lost"}, "mountable": [], "record": {}},
        id="lost-accepted-foreign-claim-of-the-name-forgotten",
    ),
    # The acceptance named a loss that is over: one-shot, it does nothing now.
    pytest.param(
        Pass(claims=(another(),), record={DATA: P1}, annotations=accepting(f"data-js@{P}")),
        {"states": {"data-js": "Bound"}, "mountable": ["data-js"], "record": {DATA: P1}},
        id="accepted-once-then-nothing",
    ),
    # --- retention: the record forgets what retention deletes
    pytest.param(
        Pass(claims=(ours(),), record=RECORDED, policies=WHEN_COMPLETED_DELETE,
             stored=api.TERMINAL_COMPLETED),
        {"delete": ["data-js"], "states": {"data-js": "Bound"}, "mountable": ["data-js"],
         "record": {}},
        id="released-deleted-and-forgotten",
    ),
    pytest.param(
        Pass(claims=(ours(),), record=RECORDED, policies=WHEN_COMPLETED_DELETE,
             after=api.TERMINAL_COMPLETED),
        {"states": {"data-js": "Bound"}, "mountable": ["data-js"], "record": {DATA: P}},
        id="completing-this-pass-nothing-deleted-yet",
    ),
    pytest.param(
        Pass(record=RECORDED, policies=WHEN_COMPLETED_DELETE, stored=api.TERMINAL_COMPLETED),
        {"states": {"data-js": "Released"}, "mountable": [], "record": {DATA: P}},
        id="released-gone",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("case", "expected"), PASSES)
def test_plan(case: Pass, expected: Obj) -> None:
    js = jobset(
        case.policies,
        record=case.record,
        annotations=case.annotations,
        terminal_state=case.stored,
        finalizer=case.finalizer,
    )
    vplan = plan(js, list(case.claims), case.after)
    assert summary(vplan) == expected


def test_accepting_a_lost_volume_replaces_nothing_until_the_claim_is_deleted() -> None:
    js = jobset(record=RECORDED, annotations=accepting(f"data-js@{P}"))
    vplan = plan(js, [ours(phase="Lost")])
    assert summary(vplan) == {
        "states": {"data-js": "Lost"},
        "mountable": [],
        "record": {DATA: P},
    }


@pytest.mark.parametrize("terminal_state", ["Completed", "Failed"])
def test_a_finishing_jobset_replaces_no_lost_claim(terminal_state: str) -> None:
    """No claim is created for a JobSet that finishes in this pass, accepted loss or not: the
    claim stays Lost (the status says so) rather than "not created yet", a promise never kept."""
    js = jobset(record=RECORDED, annotations=accepting(f"data-js@{P}"))
    assert summary(plan(js, [], terminal_state)) == {
        "states": {"data-js": "Lost"},
        "mountable": [],
        "record": {DATA: P},
    }


def test_a_replacement_is_mounted_once_its_new_uid_is_stored() -> None:
    """Accepted loss → created → the reconciler records the response's uid → mounted; the
    annotation left in place never applies again (it names the lost uid)."""
    notes = accepting(f"data-js@{P}")
    first = plan(jobset(record=RECORDED, annotations=notes), [])
    assert [d.name for d in first.create] == ["data-js"]
    replacement = another(phase="Pending")
    status = JobSetStatus().with_claim_uids(
        first.claim_uids_with({"data-js": replacement["metadata"]["uid"]})
    )
    js = jobset(record=dict(read_record(status.volumes).uids), annotations=notes)
    second = plan(js, [replacement])
    assert summary(second) == {
        "states": {"data-js": "Pending"},
        "mountable": ["data-js"],
        "record": {DATA: P1},
    }
    # Lost again later: the old acceptance does not cover the new loss.
    third = plan(js, [])
    assert summary(third) == {"states": {"data-js": "Lost"}, "mountable": [], "record": {DATA: P1}}


def test_plan_without_policies() -> None:
    js = jobset([], rjobs=[mounting("workers", 1)], finalizer=False)
    assert plan(js, []).writes == 0
    # Being deleted: volumes.deletion finalises it, from the stored object (test_deletion).
    going = jobset([{"templates": [tpl("data")]}], deleting=True)
    assert plan(going, [ours()]).writes == 0


def test_expansion() -> None:
    """Storage raised in the template: the claim grows where its class allows it, else the
    expansion is reported as blocked (and the rest of the patch still goes)."""
    grown = [{"templates": [tpl("data", "2Gi", storageClassName="fast")]}]
    js = jobset(grown, record=RECORDED)
    small = ours(spec={**tpl("data")["spec"], "storageClassName": "fast"})
    model = volumes.model(js)
    allowed = volume_lifecycle.plan(
        model, views([small]), StorageClasses(expandable=frozenset({"fast"})), terminal_state=""
    )
    assert [(p.name, p.reason, p.patch) for p in allowed.patch] == [
        ("data-js", "ClaimExpanded", {"spec": {"resources": {"requests": {"storage": "2Gi"}}}})
    ]
    assert allowed.expansion_blocked == {}
    unowned = ours(spec=small["spec"], refs=[])
    blocked = volume_lifecycle.plan(model, views([unowned]), StorageClasses(), terminal_state="")
    assert [(p.name, p.reason, p.patch) for p in blocked.patch] == [
        ("data-js", "ClaimUpdated", {"metadata": {"ownerReferences": [owner()]}})
    ]
    assert "does not allow volume expansion" in blocked.expansion_blocked["data-js"]


# ----------------------------------------------------------------------------- retention


def retention_jobset(retention: Obj, replicas: int = 2, **kw: Any) -> JobSet:
    return jobset(
        [{"templates": [tpl("ckpt")], "scope": "Job", "retentionPolicy": retention}],
        rjobs=[mounting("workers", replicas, ("ckpt",))],
        **kw,
    )


def names(found: list[ClaimView]) -> list[str]:
    return [c.name for c in found]


@pytest.mark.parametrize(
    ("retention", "deleting", "terminal", "expected"),
    [
        ({}, False, "", []),
        ({}, True, "", ["ckpt-js-workers-0", "ckpt-js-workers-1"]),
        ({"whenDeleted": "Retain"}, True, "", []),
        ({}, False, "Completed", []),
        (
            {"whenCompleted": "Delete"},
            False,
            "Completed",
            ["ckpt-js-workers-0", "ckpt-js-workers-1"],
        ),
        ({"whenCompleted": "Delete"}, False, "Failed", []),
        ({"whenFailed": "Delete"}, False, "Failed", ["ckpt-js-workers-0", "ckpt-js-workers-1"]),
        ({"whenFailed": "Delete"}, False, "Completed", []),
        (
            {"whenDeleted": "Retain", "whenCompleted": "Delete"},
            True,
            "Completed",
            ["ckpt-js-workers-0", "ckpt-js-workers-1"],
        ),
    ],
)
def test_claims_to_delete(
    retention: Obj, deleting: bool, terminal: str, expected: list[str]
) -> None:
    js = retention_jobset(retention)
    claims = [ckpt(0), ckpt(1), ckpt(1, owner_uid="uid-other"), ckpt(0, jobset="other"), {}]
    claims[2]["metadata"]["name"] = "foreign-1"
    claims[3]["metadata"]["name"] = "foreign-2"
    result = claims_to_delete(
        js,
        volume_spec.policies(js),
        [ClaimView.of(c) for c in claims],
        deleting=deleting,
        terminal_state=terminal,
    )
    assert names(result) == expected


@pytest.mark.parametrize(
    ("when_scaled", "replicas", "expected"),
    [
        ("Delete", 1, ["ckpt-js-workers-1", "ckpt-js-workers-2"]),
        ("Delete", 0, ["ckpt-js-workers-0", "ckpt-js-workers-1", "ckpt-js-workers-2"]),
        ("Delete", 3, []),
        ("Retain", 1, []),
    ],
)
def test_claims_to_delete_when_scaled(when_scaled: str, replicas: int, expected: list[str]) -> None:
    js = retention_jobset({"whenScaled": when_scaled}, replicas)
    claims = views([ckpt(0), ckpt(1), ckpt(2)])
    result = claims_to_delete(
        js, volume_spec.policies(js), claims.values(), deleting=False, terminal_state=""
    )
    assert names(result) == expected


@pytest.mark.parametrize(
    ("when_scaled", "delete", "record"),
    [
        pytest.param("Delete", ["ckpt-js-workers-1"], [0], id="deleted-and-forgotten"),
        pytest.param("Retain", [], [0, 1], id="kept-and-remembered"),
    ],
)
def test_scaled_away_claims_in_the_plan(
    when_scaled: str, delete: list[str], record: list[int]
) -> None:
    """Replicas lowered from 2 to 1: retention deletes the claim of the Job that went (and the
    record forgets it, so that a later scale-up makes a new claim instead of reporting it Lost),
    or keeps it, remembered, for a scale-up to mount again."""
    existing = [ckpt(0), ckpt(1)]
    js = retention_jobset({"whenScaled": when_scaled}, 1)
    vplan = plan(recorded(js, existing), existing)
    assert vplan.deleted == delete
    assert dict(vplan.record.uids) == {
        ("ckpt", "workers", i, None): prefix_of(f"ckpt-js-workers-{i}") for i in record
    }
    assert [c.name for c in vplan.claims] == ["ckpt-js-workers-0"]


@pytest.mark.parametrize(
    ("when_scaled", "record"),
    [
        pytest.param("Delete", [0], id="being-deleted-is-forgotten"),
        pytest.param("Retain", [0, 1], id="retained-is-remembered"),
    ],
)
def test_a_scaled_away_claim_still_recorded_after_its_delete(
    when_scaled: str, record: list[int]
) -> None:
    """The pass that deleted the claim of a scaled-away Job lost its status write (a 409): the
    claim is Terminating and still in the stored record. It is forgotten all the same, so that a
    later scale-up creates a new claim instead of reporting the deleted one Lost."""
    existing = [ckpt(0), ckpt(1)]
    js = recorded(retention_jobset({"whenScaled": when_scaled}, 1), existing)
    terminating = [
        ckpt(0),
        {**ckpt(1), "metadata": {**ckpt(1)["metadata"], "deletionTimestamp": "x"}},
    ]
    vplan = plan(js, terminating)
    assert vplan.deleted == []
    assert dict(vplan.record.uids) == {
        ("ckpt", "workers", i, None): prefix_of(f"ckpt-js-workers-{i}") for i in record
    }


def test_when_scaled_reads_labels_and_skips_odd_claims() -> None:
    js = retention_jobset({"whenScaled": "Delete"}, 1)
    policies = volume_spec.policies(js)
    gone_rjob = ckpt(0)
    gone_rjob["metadata"]["labels"][api.REPLICATED_JOB_NAME] = "removed"
    bad_index = ckpt(5)
    bad_index["metadata"]["labels"][api.JOB_INDEX] = "five"
    no_index = ckpt(6)
    del no_index["metadata"]["labels"][api.JOB_INDEX]
    terminating = ckpt(3, deleting=True)
    unknown = ckpt(4, template="other")
    claims = views([gone_rjob, bad_index, no_index, terminating, unknown])
    found = claims_to_delete(js, policies, claims.values(), deleting=False, terminal_state="")
    assert names(found) == ["ckpt-js-workers-0"]


def test_when_scaled_ignores_jobset_scope() -> None:
    js = jobset([{"templates": [tpl("data")], "retentionPolicy": {"whenScaled": "Delete"}}])
    existing = views([claim("data-js", rjob_name="workers", index=9, scope="JobSet")])
    policies = volume_spec.policies(js)
    assert (
        claims_to_delete(js, policies, existing.values(), deleting=False, terminal_state="") == []
    )


@pytest.mark.parametrize(
    ("stored", "after_this_pass", "deleted"),
    [
        pytest.param("", "", False, id="running"),
        # The pass that decides completion only records it; a leader killed before its status
        # write lands must not have deleted claims for a completion nobody stored.
        pytest.param("", api.TERMINAL_COMPLETED, False, id="completing-this-pass"),
        pytest.param(api.TERMINAL_COMPLETED, api.TERMINAL_COMPLETED, True, id="completion-stored"),
        pytest.param("", api.TERMINAL_FAILED, False, id="failing-this-pass"),
        pytest.param(api.TERMINAL_FAILED, api.TERMINAL_FAILED, True, id="failure-stored"),
    ],
)
def test_retention_deletes_only_after_the_terminal_state_is_stored(
    stored: str, after_this_pass: str, deleted: bool
) -> None:
    retention = {"whenCompleted": "Delete", "whenFailed": "Delete"}
    existing = [ours()]
    js = jobset(
        [{"templates": [tpl("data")], "retentionPolicy": retention}],
        record=RECORDED,
        terminal_state=stored or None,
    )
    vplan = plan(js, existing, after_this_pass)
    assert vplan.deleted == (["data-js"] if deleted else [])
    # The delete names the very object and version judged (the DELETE's preconditions).
    judged = ClaimDelete("data-js", uid_of("data-js"), CLAIM_VERSION)
    assert vplan.delete == ([judged] if deleted else [])
    assert dict(vplan.record.uids) == ({} if deleted else RECORDED)


# ----------------------------------------------------------------------------- Pod scope


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        pytest.param({}, ("data", None, None, None), id="jobset-scope"),
        pytest.param({"scope": "Job", "rjob_name": "workers", "index": 1},
                     ("data", "workers", 1, None), id="job-scope"),
        pytest.param({"scope": "Pod", "rjob_name": "workers", "index": 1, "pod_index": 2},
                     ("data", "workers", 1, 2), id="pod-scope"),
        # A Pod-scope claim whose labels do not place it is nobody's slot.
        pytest.param({"scope": "Pod", "rjob_name": "workers", "index": 1}, None,
                     id="pod-scope-without-pod-index"),
        pytest.param({"scope": "Pod", "rjob_name": "workers", "index": 1, "pod_index": -1},
                     None, id="pod-index-not-a-number"),
        pytest.param({"scope": "Pod", "index": 1, "pod_index": 0}, None,
                     id="pod-scope-without-replicated-job"),
    ],
)  # fmt: skip
def test_slot_of(labels: dict[str, Any], expected: Slot | None) -> None:
    (view,) = views([claim("x", **labels)]).values()
    assert slot_of(view) == expected


def pod_jobset(retention: Obj, replicas: int, **kw: Any) -> JobSet:
    """js whose workers (``replicas`` Jobs of 2 completion indexes) mount Pod-scope ``ckpt``."""
    rjobs = [mounting("workers", replicas, ("ckpt",))]
    rjobs[0]["template"]["spec"]["completions"] = 2
    policy = {"templates": [tpl("ckpt")], "scope": "Pod", "retentionPolicy": retention}
    return jobset([policy], rjobs=rjobs, **kw)


@pytest.mark.parametrize(
    ("when_scaled", "delete", "record"),
    [
        pytest.param("Delete", ["ckpt-js-workers-1-0", "ckpt-js-workers-1-1"], [(0, 0), (0, 1)],
                     id="delete-deletes-and-forgets-the-jobs-beyond-replicas"),
        pytest.param("Retain", [], [(0, 0), (0, 1), (1, 0), (1, 1)],
                     id="retain-keeps-and-remembers"),
    ],
)  # fmt: skip
def test_pod_scope_scaled_away(
    when_scaled: str, delete: list[str], record: list[tuple[int, int]]
) -> None:
    """Replicas lowered from 2 to 1: per claim, as for Job scope; every pod index of the Job
    that went."""
    existing = [pod_ckpt(j, p, refs=[owner()]) for j in range(2) for p in range(2)]
    js = recorded(pod_jobset({"whenScaled": when_scaled}, 1), existing)
    model = volumes.model(js)
    vplan = volume_lifecycle.plan(model, views(existing), CLASSES, terminal_state="")
    assert vplan.deleted == delete
    assert dict(vplan.record.uids) == {
        ("ckpt", "workers", j, p): prefix_of(f"ckpt-js-workers-{j}-{p}") for j, p in record
    }
    assert [c.name for c in vplan.claims] == ["ckpt-js-workers-0-0", "ckpt-js-workers-0-1"]
    assert vplan.create == []


def test_pod_scope_lost_claim_is_not_recreated() -> None:
    """A recorded Pod-scope claim that is gone is Lost, per claim: the others stay mountable."""
    existing = [pod_ckpt(0, 0, refs=[owner()]), pod_ckpt(0, 1, refs=[owner()])]
    js = recorded(pod_jobset({}, 1), existing)
    model = volumes.model(js)
    vplan = volume_lifecycle.plan(model, views(existing[:1]), CLASSES, terminal_state="")
    assert vplan.create == []
    assert [(c.name, c.state) for c in vplan.claims] == [
        ("ckpt-js-workers-0-0", ClaimState.BOUND),
        ("ckpt-js-workers-0-1", ClaimState.LOST),
    ]
    assert vplan.mountable == {"ckpt-js-workers-0-0"}
