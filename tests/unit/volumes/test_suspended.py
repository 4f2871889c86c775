"""Claims of a suspended JobSet (issue 18, item 3): what a pass creates, adopts and reports while
the JobSet is suspended (queued by Kueue, say), with ``creationPolicy.whenSuspended`` left out
(WaitForResume) or ``Create`` (tables), and the passes of one JobSet through creation suspended,
resume, and suspension again (``decide``, pure).

One JobSet-scope claim ``data-js`` (both workers mount it) unless a case says otherwise; ``P`` is
the uid prefix of the claim the JobSet had.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import pytest

from controller.jobset import api, volumes
from controller.jobset.children import views as job_views
from controller.jobset.decide import Plan, decide
from controller.jobset.model import InvalidJobSet, JobSet, parse
from controller.jobset.volumes import FINALIZER, StorageClasses
from controller.jobset.volumes import lifecycle as volume_lifecycle
from controller.jobset.volumes import status as volume_status
from controller.jobset.volumes.annotations import ADOPT_ANNOTATION
from controller.jobset.volumes.desired import Slot
from controller.jobset.volumes.lifecycle import REASON_CLAIM_ADOPTED, ClaimState
from controller.jobset.volumes.record import ClaimRecord, read_record, uid_prefix
from controller.jobset.volumes.status import (
    REASON_CLAIM_CONFLICT,
    REASON_CLAIMS_BOUND,
    REASON_CLAIMS_LOST,
    REASON_CLAIMS_PENDING,
    REASON_WAITING_FOR_RESUME,
    volumes_ready,
    waits_for_volumes,
)
from controller.runtime.store import Obj
from tests.unit.jobset_factories import T0, at, make_job, rjob
from tests.unit.volumes.factories import (
    RETAINED,
    accepting,
    applied,
    ckpt,
    claim,
    make_obj,
    mounting,
    owner,
    prefix_of,
    tpl,
    views,
)

P = prefix_of("data-js")
DATA: Slot = ("data", None, None, None)
CLASSES = StorageClasses()
CREATE = {"whenSuspended": "Create"}


def policy(creation: Obj | None = None, **extra: Any) -> Obj:
    found: Obj = {"templates": [tpl("data")], **extra}
    if creation is not None:
        found["creationPolicy"] = creation
    return found


def jobset(
    policies: list[Obj] | None = None,
    *,
    suspend: bool = True,
    record: dict[Slot, str] | None = None,
    annotations: dict[str, str] | None = None,
    rjobs: list[Obj] | None = None,
    terminal: str = "",
) -> JobSet:
    obj = make_obj(
        policies if policies is not None else [policy()],
        rjobs=rjobs,
        annotations=annotations,
        suspend=suspend,
    )
    obj["metadata"]["finalizers"] = [FINALIZER]
    if record:
        obj["status"]["volumes"] = {"claimUIDs": ClaimRecord(record).render()}
    if terminal:
        obj["status"]["terminalState"] = terminal
    return parse(obj)


def ours(**kw: Any) -> Obj:
    kw.setdefault("refs", [owner()])
    return claim("data-js", **kw)


def retained() -> Obj:
    """``data-js`` kept by an earlier JobSet js (``whenDeleted: Retain``): adoptable."""
    return claim("data-js", owner_uid="uid-old", annotations=RETAINED, refs=[])


def upstreams() -> Obj:
    """``data-js`` as upstream JobSet makes it: its name label, a controller ownerReference to
    the JobSet, none of this controller's annotations or labels."""
    obj = claim("data-js", owner_uid=None, refs=[owner()])
    obj["metadata"]["labels"] = {api.JOBSET_NAME: "js"}
    return obj


def hand_made() -> Obj:
    return claim("data-js", owner_uid=None, jobset=None)


def adopting(*entries: str) -> dict[str, str]:
    return {ADOPT_ANNOTATION: ",".join(entries)}


@dataclass(frozen=True)
class Case:
    js: JobSet
    claims: list[Obj] = field(default_factory=list)


@dataclass(frozen=True)
class Outcome:
    creates: list[str]
    adopts: list[str]
    state: ClaimState
    deferred: bool
    reason: str  # VolumesReady's
    record: dict[Slot, str] = field(default_factory=dict)


def _outcome(case: Case) -> Outcome:
    model = volumes.model(case.js)
    vplan = volume_lifecycle.plan(
        model, views(case.claims), CLASSES, terminal_state=case.js.status.terminal_state
    )
    (at_,) = vplan.claims
    ready = volumes_ready(model, vplan.claims)
    return Outcome(
        creates=[c.name for c in vplan.create],
        adopts=[p.name for p in vplan.patch if p.reason == REASON_CLAIM_ADOPTED],
        state=at_.state,
        deferred=at_.deferred,
        reason=ready.reason,
        record=dict(vplan.record.uids),
    )


WAIT = REASON_WAITING_FOR_RESUME
MISSING, ADOPTABLE, PENDING = ClaimState.MISSING, ClaimState.ADOPTABLE, ClaimState.PENDING
BOUND, LOST = ClaimState.BOUND, ClaimState.LOST

CASES = [
    pytest.param(
        Case(jobset()),
        Outcome([], [], MISSING, True, WAIT),
        id="suspended-never-ran-creates-nothing",
    ),
    pytest.param(
        Case(jobset([policy({})])),
        Outcome([], [], MISSING, True, WAIT),
        id="creationPolicy-empty-is-WaitForResume",
    ),
    pytest.param(
        Case(jobset([policy({"whenSuspended": "WaitForResume"})])),
        Outcome([], [], MISSING, True, WAIT),
        id="WaitForResume-spelled-out",
    ),
    pytest.param(
        Case(jobset(suspend=False)),
        Outcome(["data-js"], [], PENDING, False, REASON_CLAIMS_PENDING),
        id="resumed-creates",
    ),
    pytest.param(
        Case(jobset([policy(CREATE)])),
        Outcome(["data-js"], [], PENDING, False, REASON_CLAIMS_PENDING),
        id="opt-in-creates-while-suspended",
    ),
    # Claims that exist stay, and stay usable, through suspension: no retention acts on it.
    pytest.param(
        Case(jobset(record={DATA: P}), [ours()]),
        Outcome([], [], BOUND, False, REASON_CLAIMS_BOUND, {DATA: P}),
        id="suspended-keeps-its-claim",
    ),
    # Its claim, created by a pass whose status write was lost: remembered, not re-created.
    pytest.param(
        Case(jobset(), [ours(phase="Pending")]),
        Outcome([], [], PENDING, False, REASON_CLAIMS_PENDING, {DATA: P}),
        id="suspended-records-its-unrecorded-claim",
    ),
    # A recorded claim gone while suspended is Lost, not Missing: never silently re-created.
    pytest.param(
        Case(jobset(record={DATA: P})),
        Outcome([], [], LOST, False, REASON_CLAIMS_LOST, {DATA: P}),
        id="recorded-claim-gone-while-suspended-is-lost",
    ),
    pytest.param(
        Case(jobset(record={DATA: P}, suspend=False)),
        Outcome([], [], LOST, False, REASON_CLAIMS_LOST, {DATA: P}),
        id="and-stays-lost-on-resume",
    ),
    pytest.param(
        Case(jobset([policy(CREATE)], record={DATA: P})),
        Outcome([], [], LOST, False, REASON_CLAIMS_LOST, {DATA: P}),
        id="lost-with-opt-in-too",
    ),
    # The user's explicit acceptance of an empty replacement is acted on at once.
    pytest.param(
        Case(jobset(record={DATA: P}, annotations=accepting(f"data-js@{P}"))),
        Outcome(["data-js"], [], PENDING, False, REASON_CLAIMS_PENDING),
        id="accepted-loss-replaced-while-suspended",
    ),
    # A retained claim is adopted on resume: adopted while queued, a whenDeleted: Delete JobSet
    # deleted before it ever ran would delete another run's data.
    pytest.param(
        Case(jobset(), [retained()]),
        Outcome([], [], ADOPTABLE, True, WAIT),
        id="retained-claim-not-adopted-while-suspended",
    ),
    pytest.param(
        Case(jobset(suspend=False), [retained()]),
        Outcome([], ["data-js"], ADOPTABLE, False, volume_status.REASON_CLAIMS_MISSING, {DATA: P}),
        id="retained-claim-adopted-on-resume",
    ),
    pytest.param(
        Case(jobset([policy(CREATE)]), [retained()]),
        Outcome([], ["data-js"], ADOPTABLE, False, volume_status.REASON_CLAIMS_MISSING, {DATA: P}),
        id="retained-claim-adopted-while-suspended-with-opt-in",
    ),
    # Upstream JobSet's claim (its controller ownerReference names this JobSet): the JobSet's
    # already, adopted at once, also while suspended (queued by Kueue at the switch-over), so
    # its suspended Jobs can be resumed with it.
    pytest.param(
        Case(jobset(), [upstreams()]),
        Outcome([], ["data-js"], ADOPTABLE, False, volume_status.REASON_CLAIMS_MISSING, {DATA: P}),
        id="upstream-claim-adopted-while-suspended",
    ),
    # Named in adopt-claims: an explicit adoption waits for the resume like a retained claim.
    pytest.param(
        Case(jobset(annotations=adopting(f"data-js@{P}")), [hand_made()]),
        Outcome([], [], ADOPTABLE, True, WAIT),
        id="named-claim-not-adopted-while-suspended",
    ),
    pytest.param(
        Case(jobset(suspend=False, annotations=adopting(f"data-js@{P}")), [hand_made()]),
        Outcome([], ["data-js"], ADOPTABLE, False, volume_status.REASON_CLAIMS_MISSING, {DATA: P}),
        id="named-claim-adopted-on-resume",
    ),
    # A claim of that name that is not the JobSet's: a conflict, suspended or not.
    pytest.param(
        Case(jobset(), [claim("data-js", owner_uid=None, jobset=None)]),
        Outcome([], [], ClaimState.CONFLICT, False, REASON_CLAIM_CONFLICT),
        id="conflict-reported-while-suspended",
    ),
    # A finished JobSet creates nothing whatever its suspension, and says so as before.
    pytest.param(
        Case(jobset(terminal=api.TERMINAL_COMPLETED)),
        Outcome([], [], MISSING, False, volume_status.REASON_CLAIMS_MISSING),
        id="finished-suspended-not-deferred",
    ),
]


@pytest.mark.parametrize(("case", "expected"), CASES)
def test_suspended_claims(case: Case, expected: Outcome) -> None:
    assert _outcome(case) == expected


def test_only_the_missing_claims_of_waiting_policies_are_deferred() -> None:
    """Two policies, one opting in; Job scope with a Job raised while suspended: the claim of the
    new Job waits, the one the JobSet has stays, the opted-in template is made."""
    rjobs = [mounting("workers", 2, ("data", "ckpt"))]
    js = jobset(
        [policy(CREATE), {"templates": [tpl("ckpt")], "scope": "Job"}],
        rjobs=rjobs,
        record={("ckpt", "workers", 0, None): prefix_of("ckpt-js-workers-0")},
    )
    model = volumes.model(js)
    vplan = volume_lifecycle.plan(
        model, views([ckpt(0, refs=[owner()])]), CLASSES, terminal_state=""
    )
    assert [c.name for c in vplan.create] == ["data-js"]
    assert {c.name: (c.state, c.deferred) for c in vplan.claims} == {
        "data-js": (PENDING, False),
        "ckpt-js-workers-0": (BOUND, False),
        "ckpt-js-workers-1": (MISSING, True),
    }
    ready = volumes_ready(model, vplan.claims)
    # A claim is created in this pass and another waits: the one that waits for resume is named.
    assert (ready.reason, ready.status) == (WAIT, "False")
    assert ready.message == (
        "1 of 3 claims are created when the JobSet is resumed: ckpt-js-workers-1. It is "
        "suspended; a volume claim policy with creationPolicy.whenSuspended: Create makes its "
        "claims while the JobSet waits"
    )
    assert ready.event_type is None  # the Suspended condition has its Event: no more


def test_waiting_for_resume_is_not_waiting_for_the_cluster() -> None:
    """A quota or storage class event does not retry a JobSet whose claims wait for resume."""
    obj = make_obj([policy()], suspend=True)
    obj["status"]["conditions"] = [
        {"type": volume_status.VOLUMES_READY, "status": "False", "reason": WAIT, "message": "m"}
    ]
    assert not waits_for_volumes(obj)
    obj["status"]["conditions"][0]["reason"] = volume_status.REASON_CLAIMS_MISSING
    assert waits_for_volumes(obj)


@pytest.mark.parametrize(
    ("creation", "message"),
    [
        (
            "nope",
            'spec.volumeClaimPolicies[0].creationPolicy: Invalid value: "string": '
            "spec.volumeClaimPolicies[0].creationPolicy in body must be of type object: "
            '"string"',
        ),
        (
            {"whenSuspended": "Later"},
            'spec.volumeClaimPolicies[0].creationPolicy.whenSuspended: Unsupported value: "Later": '
            'supported values: "WaitForResume", "Create"',
        ),
    ],
)
def test_bad_creation_policy_is_named(creation: Any, message: str) -> None:
    """In the API server's words (the parser runs its schema), the field named first."""
    with pytest.raises(InvalidJobSet) as err:
        volumes.model(jobset([policy(creation)]))
    assert str(err.value).startswith(message + "; ")


def test_volume_policy_spelling_takes_the_opt_in() -> None:
    obj = make_obj(None, {"volumeClaimTemplates": [tpl("data")], "creationPolicy": CREATE})
    obj["spec"]["suspend"] = True
    (found,) = volumes.model(parse(obj)).policies
    assert found.when_suspended == "Create"


# ----------------------------------------------------------------------------- passes


def _jobs_of(plan: Plan, suspended: bool | None = None) -> list[tuple[str, bool, list[str]]]:
    """(name, suspended, claims mounted) of the Jobs a plan creates."""
    result = []
    for job in plan.create_jobs:
        pod = job["spec"]["template"]["spec"]
        mounted = [
            v["persistentVolumeClaim"]["claimName"]
            for v in pod.get("volumes", [])
            if "persistentVolumeClaim" in v
        ]
        result.append((job["metadata"]["name"], bool(job["spec"].get("suspend")), mounted))
    return result


def _stored(js: JobSet, plan: Plan) -> JobSet:
    raw = copy.deepcopy(js.raw)
    if plan.status is not None:
        raw["status"] = plan.status.to_dict()
    return parse(raw)


def _with_spec(js: JobSet, **spec: Any) -> JobSet:
    raw = copy.deepcopy(js.raw)
    raw["spec"].update(spec)
    return parse(raw)


def test_created_suspended_then_resumed_then_suspended_again() -> None:
    """A queued JobSet: no claim and no Job that needs one while suspended, VolumesReady says
    why, and a second pass writes nothing. Resumed: the claim, then (once its uid is stored) the
    Jobs. Suspended again: the Jobs are suspended, the claim is kept, nothing is deleted."""
    rjobs = [mounting("workers", 2, ("data",)), rjob("sidecar")]
    js = parse(make_obj([policy()], rjobs=rjobs, suspend=True))

    first = decide(js, [], None, T0)
    assert first.volume is not None and first.volume.create == []
    assert first.volume.add_finalizer  # retention must be able to run: the finalizer is cheap
    # The replicated job without volumes gets its Job, suspended (as upstream's would).
    assert _jobs_of(first) == [("js-sidecar-0", True, [])]
    assert first.status is not None
    written = first.status.to_dict()
    ready = next(c for c in written["conditions"] if c["type"] == volume_status.VOLUMES_READY)
    assert (ready["status"], ready["reason"]) == ("False", WAIT)
    assert "1 of 1 claims are created when the JobSet is resumed: data-js" in ready["message"]
    assert written["volumes"]["templates"] == [
        {"name": "data", "scope": "JobSet", "claimName": "data-js", "desired": 1, "existing": 0,
         "bound": 0, "pending": 0, "lost": 0, "conflicts": 0}
    ]  # fmt: skip
    assert [e.reason for e in first.events] == [api.REASON_SUSPENDED]

    js = _stored(js, first)
    js.raw["metadata"]["finalizers"] = [FINALIZER]
    js = parse(js.raw)
    sidecar = make_job(js, "sidecar", 0, suspended=True)
    service = first.create_service
    counted = decide(
        js, job_views([sidecar]), service, at(30)
    )  # the sidecar's Job counted: progress only
    assert counted.writes == 1 and counted.status is not None and counted.events == []
    js = _stored(js, counted)
    steady = decide(js, job_views([sidecar]), service, at(60))
    assert steady.writes == 0, (steady.status, steady.create_jobs, steady.patch_jobs)

    # Resumed (Kueue admitted it): the claim is created, no Job mounts it yet.
    js = _with_spec(js, suspend=False)
    resumed = decide(js, job_views([sidecar]), service, at(61))
    assert resumed.volume is not None
    assert [c.name for c in resumed.volume.create] == ["data-js"]
    assert resumed.create_jobs == []
    stored, claims = applied(js, resumed)
    js = parse(stored)
    # The next pass sees it recorded: the Jobs that mount it are created, running.
    running = decide(js, job_views([sidecar]), service, at(62), claims=views(claims.values()))
    assert running.volume is not None and running.volume.create == []
    assert _jobs_of(running) == [
        ("js-workers-0", False, ["data-js"]),
        ("js-workers-1", False, ["data-js"]),
    ]
    uid = claims["data-js"]["metadata"]["uid"]

    # Suspended again (preempted): Jobs suspended, the same claim kept, nothing deleted.
    js = _with_spec(_stored(js, running), suspend=True)
    jobs = [
        make_job(js, "workers", 0, active=1),
        make_job(js, "workers", 1, active=1),
        make_job(js, "sidecar", 0, active=1),
    ]
    preempted = decide(js, job_views(jobs), service, at(63), claims=views(claims.values()))
    assert sorted(name for name, patch in preempted.patch_jobs) == [
        "js-sidecar-0",
        "js-workers-0",
        "js-workers-1",
    ]
    assert all(patch == {"spec": {"suspend": True}} for _, patch in preempted.patch_jobs)
    assert preempted.delete_jobs == []
    assert preempted.volume is not None
    assert (preempted.volume.create, preempted.volume.deleted) == ([], [])
    assert preempted.volume.mountable == {"data-js"}
    assert read_record(preempted.status.volumes if preempted.status else None).get(
        DATA
    ) == uid_prefix(uid)


def test_deleting_a_jobset_that_never_ran_touches_nothing() -> None:
    """Deleted while still queued: it owns no claim (the retained one was never adopted), so
    retention deletes and patches nothing and the finalizer goes at once."""
    obj = copy.deepcopy(jobset(annotations=None).raw)
    obj["metadata"]["deletionTimestamp"] = "2025-01-01T12:00:00Z"
    vplan = volumes.deletion.plan(obj, views([retained()]).values())
    assert (vplan.deleted, vplan.patch, vplan.remove_finalizer) == ([], [], True)
