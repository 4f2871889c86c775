"""The soak's invariants (tests/soak/invariants.py): each violation is detected, and the lawful
histories next to it are not reported."""

from __future__ import annotations

import math
from dataclasses import astuple, replace
from typing import Any

import pytest

from tests.soak import invariants
from tests.soak.model import (
    DELETE,
    DRIVER_AGENT,
    RETAIN,
    SNAPSHOT,
    AuditEntry,
    ClaimObject,
    JobSetRecord,
    Loss,
    OptIn,
    PlannedClaim,
    Retention,
    Scale,
    Sighting,
    SnapshotRecord,
    parse_audit_line,
    stamp,
)
from tests.soak.scenarios import SCENARIOS, plan, snapshots

Obj = dict[str, Any]
T0 = 1_800_000_000.0
NS = "soak"
NAME = "js"
PVC = "persistentvolumeclaims"
UID = "uid-1"
DATA = "data-js"
CKPT = [f"ckpt-js-workers-{i}" for i in range(3)]


def retention(**fields: str) -> Retention:
    return replace(Retention(), **fields)


def record(
    data: Retention | None = None,
    ckpt: Retention | None = None,
    **fields: Any,
) -> JobSetRecord:
    claims = [PlannedClaim(DATA, "data", "JobSet", data or Retention())]
    claims += [
        PlannedClaim(name, "ckpt", "Job", ckpt or Retention(), "workers", i)
        for i, name in enumerate(CKPT)
    ]
    base = JobSetRecord(
        name=NAME,
        scenario="test",
        replicated_jobs={"leader": 1, "workers": 3},
        claims=tuple(claims),
        created_at=T0,
        uid=UID,
    )
    return replace(base, **fields)


CONTROLLER = "stateful-jobset/replica-0"
GC = "kube-controller-manager/v1.37.2 (linux/amd64) generic-garbage-collector"


def entry(
    verb: str, resource: str, name: str, at: float, code: int = 200, agent: str = CONTROLLER
) -> AuditEntry:
    return AuditEntry(at, at - 0.01, verb, resource, NS, name, "", code, agent, f"id-{at}")


def create(resource: str, name: str, at: float, agent: str = CONTROLLER) -> AuditEntry:
    return entry("create", resource, name, at, 201, agent)


def delete(name: str, at: float, agent: str = CONTROLLER, code: int = 200) -> AuditEntry:
    return entry("delete", PVC, name, at, code, agent)


def claim(
    name: str, *, owner: str = UID, retained: str = "", deleting: bool = False, uid: str = ""
) -> Obj:
    meta: Obj = {"name": name, "labels": {invariants.JOBSET_NAME: NAME}, "annotations": {}}
    if uid:
        meta["uid"] = uid
    if owner:
        meta["ownerReferences"] = [{"kind": "JobSet", "uid": owner, "controller": True}]
    if retained:
        meta["annotations"][invariants.RETAINED_FROM] = retained
    if deleting:
        meta["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    return {"metadata": meta}


def live_jobset(
    *, terminal: str = "", workers: int = 3, deleting: bool = False, finalizers: bool = False
) -> Obj:
    meta: Obj = {"name": NAME, "uid": UID}
    if deleting:
        meta["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    if finalizers:
        meta["finalizers"] = ["jobset.x-k8s.io/volume-retention"]
    status: Obj = {}
    if terminal:
        status["terminalState"] = terminal
        status["conditions"] = [
            {"type": terminal, "status": "True", "lastTransitionTime": "2027-01-15T08:00:00Z"}
        ]
    rjobs = [{"name": "leader", "replicas": 1}, {"name": "workers", "replicas": workers}]
    spec = {"replicatedJobs": rjobs}
    return {"metadata": meta, "spec": spec, "status": status}


def job(name: str, index: int, attempt: int, *, owner: str = UID, deleting: bool = False) -> Obj:
    meta: Obj = {
        "name": name,
        "labels": {
            invariants.JOBSET_NAME: NAME,
            invariants.REPLICATED_JOB: "workers",
            invariants.JOB_INDEX: str(index),
            invariants.RESTART_ATTEMPT: str(attempt),
        },
        "ownerReferences": [{"kind": "JobSet", "uid": owner, "controller": True}],
    }
    if deleting:
        meta["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    return {"metadata": meta}


# ----------------------------------------------------------------------------- 1. duplicates

DUPLICATE_CASES = [
    ("claim created once", [create(PVC, DATA, T0)], []),
    (
        "claim created twice",
        [create(PVC, DATA, T0), create(PVC, DATA, T0 + 5)],
        [f"duplicate claim {DATA}"],
    ),
    (
        "claim recreated after a delete",
        [
            create(PVC, DATA, T0),
            entry("delete", PVC, DATA, T0 + 2),
            create(PVC, DATA, T0 + 5),
        ],
        [],
    ),
    (
        "a failed delete does not count",
        [
            create(PVC, DATA, T0),
            entry("delete", PVC, DATA, T0 + 2, code=404),
            create(PVC, DATA, T0 + 5),
        ],
        [f"duplicate claim {DATA}"],
    ),
    (
        "a delete answered 504 (its client killed) may have been stored",
        [
            create("jobs", "js-workers-0", T0),
            entry("delete", "jobs", "js-workers-0", T0 + 2, code=504),
            create("jobs", "js-workers-0", T0 + 5),
        ],
        [],
    ),
    (
        "a second create answered 409 is no duplicate",
        [create("jobs", "js-workers-0", T0), entry("create", "jobs", "js-workers-0", T0 + 1, 409)],
        [],
    ),
    (
        "Job created twice (order in the file does not matter)",
        [create("jobs", "js-workers-0", T0 + 3), create("jobs", "js-workers-0", T0)],
        ["duplicate Job js-workers-0"],
    ),
]


@pytest.mark.parametrize(
    ("entries", "expected"),
    [c[1:] for c in DUPLICATE_CASES],
    ids=[c[0] for c in DUPLICATE_CASES],
)
def test_duplicate_creates(entries: list[AuditEntry], expected: list[str]) -> None:
    found = invariants.duplicate_creates(entries)
    assert [f.split(":")[0] for f in found] == expected, found


ATTEMPT_CASES = [
    ("one create, no restart", 0, [T0], False),
    ("two creates, no restart", 0, [T0, T0 + 9], True),
    ("two creates, one restart", 1, [T0, T0 + 9], False),
    ("three creates, one restart", 1, [T0, T0 + 9, T0 + 19], True),
]


@pytest.mark.parametrize(
    ("restarts", "times", "violated"),
    [c[1:] for c in ATTEMPT_CASES],
    ids=[c[0] for c in ATTEMPT_CASES],
)
def test_job_creates_beyond_attempts(restarts: int, times: list[float], violated: bool) -> None:
    entries = [create("jobs", "js-workers-1", t) for t in times]
    found = invariants.job_creates_beyond_attempts(entries, {NAME: record(restarts=restarts)})
    assert bool(found) == violated, found
    if violated:
        assert "Job js-workers-1 created" in found[0] and f"restarts={restarts}" in found[0]


def test_a_job_of_no_driver_jobset_is_reported() -> None:
    found = invariants.job_creates_beyond_attempts(
        [create("jobs", "other-workers-0", T0)], {NAME: record()}
    )
    assert found == ["Job other-workers-0 was created but belongs to no JobSet of the driver"]


LIVE_JOB_CASES = [
    ("one Job per index", [job("a", 0, 0), job("b", 1, 0)], 0),
    (
        "an old attempt being deleted beside the new",
        [job("a", 0, 0, deleting=True), job("b", 0, 1)],
        0,
    ),
    ("two live Jobs for one index", [job("a", 0, 0), job("b", 0, 1)], 1),
    ("two Jobs for one index and attempt", [job("a", 0, 0, deleting=True), job("b", 0, 0)], 1),
    ("same index, different JobSets", [job("a", 0, 0), job("b", 0, 0, owner="uid-2")], 0),
]


@pytest.mark.parametrize(
    ("jobs", "count"), [c[1:] for c in LIVE_JOB_CASES], ids=[c[0] for c in LIVE_JOB_CASES]
)
def test_live_duplicate_jobs(jobs: list[Obj], count: int) -> None:
    found = invariants.live_duplicate_jobs(jobs)
    assert len(found) == count, found


# ----------------------------------------------------------------------------- 3. deletions

DELETE_AT = T0 + 30
DELETE_CASES: list[tuple[str, JobSetRecord, str, bool]] = [
    ("no reason at all", record(), DATA, False),
    (
        "JobSet deleted, whenDeleted=Delete",
        record(deleted_at=T0 + 20),
        DATA,
        True,
    ),
    (
        "claim deleted before the JobSet was",
        record(deleted_at=T0 + 40),
        DATA,
        False,
    ),
    (
        "JobSet deleted, but whenDeleted=Retain",
        record(data=retention(when_deleted=RETAIN), deleted_at=T0 + 20),
        DATA,
        False,
    ),
    (
        "only the driver's request time is known",
        record(delete_requested_at=T0 + 20),
        DATA,
        True,
    ),
    (
        "Completed, whenCompleted=Delete",
        record(data=retention(when_completed=DELETE), terminal="Completed", terminal_at=T0 + 29.5),
        DATA,
        True,
    ),
    (
        "Completed (condition time truncated to the second)",
        record(data=retention(when_completed=DELETE), terminal="Completed", terminal_at=T0 + 30.9),
        DATA,
        True,
    ),
    (
        "deleted long before it Completed",
        record(data=retention(when_completed=DELETE), terminal="Completed", terminal_at=T0 + 40),
        DATA,
        False,
    ),
    (
        "Completed, but whenCompleted=Retain",
        record(terminal="Completed", terminal_at=T0 + 10),
        DATA,
        False,
    ),
    (
        "Failed, whenFailed=Delete",
        record(data=retention(when_failed=DELETE), terminal="Failed", terminal_at=T0 + 10),
        DATA,
        True,
    ),
    (
        "Failed, but only whenCompleted=Delete",
        record(data=retention(when_completed=DELETE), terminal="Failed", terminal_at=T0 + 10),
        DATA,
        False,
    ),
    (
        "scaled below its index, whenScaled=Delete",
        record(ckpt=retention(when_scaled=DELETE), scales=[Scale(T0 + 20, "workers", 1)]),
        CKPT[2],
        True,
    ),
    (
        "scaled, but its index stays",
        record(ckpt=retention(when_scaled=DELETE), scales=[Scale(T0 + 20, "workers", 1)]),
        CKPT[0],
        False,
    ),
    (
        "scaled, but whenScaled=Retain",
        record(scales=[Scale(T0 + 20, "workers", 1)]),
        CKPT[1],
        False,
    ),
    (
        "deleted before the scale-down was sent",
        record(ckpt=retention(when_scaled=DELETE), scales=[Scale(T0 + 35, "workers", 1)]),
        CKPT[1],
        False,
    ),
]


@pytest.mark.parametrize(
    ("rec", "claim_name", "justified"),
    [c[1:] for c in DELETE_CASES],
    ids=[c[0] for c in DELETE_CASES],
)
def test_unjustified_claim_deletes(rec: JobSetRecord, claim_name: str, justified: bool) -> None:
    deleted = entry("delete", PVC, claim_name, DELETE_AT, agent="ctl/replica-0")
    found = invariants.unjustified_claim_deletes([deleted], {NAME: rec})
    if justified:
        assert found == []
    else:
        assert len(found) == 1
        assert found[0].startswith(f"claim {claim_name} deleted against its policy: delete ")
        assert "by ctl/replica-0" in found[0] and "auditID" in found[0]


def test_deletes_that_failed_or_of_unknown_claims() -> None:
    rec = {NAME: record()}
    failed = entry("delete", PVC, DATA, T0, code=404)
    assert invariants.unjustified_claim_deletes([failed], rec) == []
    stranger = entry("delete", PVC, "other", T0)
    assert (
        "no JobSet of the driver asks for it"
        in invariants.unjustified_claim_deletes([stranger], rec)[0]
    )
    wholesale = entry("deletecollection", PVC, "", T0)
    assert invariants.unjustified_claim_deletes([wholesale], rec)[0].startswith("claims deleted")


RETAINED_CASES = [
    ("retained and still there", record(deleted_at=T0, data=retention(when_deleted=RETAIN)),
     [claim(DATA, owner="", retained=UID)], []),
    ("retained but gone", record(deleted_at=T0, data=retention(when_deleted=RETAIN)), [], [DATA]),
    ("retained but being deleted", record(deleted_at=T0, data=retention(when_deleted=RETAIN)),
     [claim(DATA, deleting=True)], [DATA]),
    ("deleted by policy", record(deleted_at=T0), [], []),
    ("completed, kept by whenCompleted=Retain", record(terminal="Completed", terminal_at=T0), [],
     [DATA]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("rec", "claims", "missing"),
    [c[1:] for c in RETAINED_CASES],
    ids=[c[0] for c in RETAINED_CASES],
)
def test_retained_claims_missing(rec: JobSetRecord, claims: list[Obj], missing: list[str]) -> None:
    entries = [create(PVC, DATA, T0 - 10)]
    found = invariants.retained_claims_missing(entries, claims, {NAME: rec})
    assert [f.split(" ")[1] for f in found] == missing, found
    for message in found:
        assert "its policy retains it" in message and "whenDeleted=" in message


def test_the_drivers_own_deletes_are_not_judged_by_policy() -> None:
    rec = {NAME: record()}  # nothing justifies a delete
    assert invariants.unjustified_claim_deletes([delete(DATA, T0, DRIVER_AGENT)], rec) == []
    assert invariants.unjustified_claim_deletes([delete(DATA, T0)], rec) != []


def test_a_claim_the_driver_deleted_is_not_missing() -> None:
    rec = {NAME: record(deleted_at=T0, data=retention(when_deleted=RETAIN))}
    made = create(PVC, DATA, T0 - 10)
    lost = [made, delete(DATA, T0 - 5, DRIVER_AGENT)]
    assert invariants.retained_claims_missing(lost, [], rec) == []
    # ... but the last delete decides: one by the controller after it is judged by policy.
    again = [*lost, create(PVC, DATA, T0 - 4), delete(DATA, T0 - 2)]
    assert [f.split(" ")[1] for f in invariants.retained_claims_missing(again, [], rec)] == [DATA]


# ----------------------------------------------------------------------------- ownership, loss

IMPOSTOR_UID = "imp-0001-uid"

PROOF_CASES: list[tuple[str, list[AuditEntry], list[str]]] = [
    ("created and deleted by the controller", [create(PVC, DATA, T0), delete(DATA, T0 + 5)], []),
    (
        "created by the controller, collected by the garbage collector",
        [create(PVC, DATA, T0), delete(DATA, T0 + 5, GC)],
        [],
    ),
    (
        "the impostor deleted by the controller",
        [create(PVC, DATA, T0, DRIVER_AGENT), delete(DATA, T0 + 5)],
        [f"created by create {PVC}/{DATA} by {DRIVER_AGENT}", "impostor", "by " + CONTROLLER],
    ),
    (
        "the impostor collected through an ownerReference the controller gave it",
        [create(PVC, DATA, T0, DRIVER_AGENT), delete(DATA, T0 + 5, GC)],
        ["generic-garbage-collector", "impostor"],
    ),
    (
        "the impostor deleted by the driver itself",
        [create(PVC, DATA, T0, DRIVER_AGENT), delete(DATA, T0 + 5, DRIVER_AGENT)],
        [],
    ),
    (
        "the impostor gone, the controller's own claim deleted",
        [
            create(PVC, DATA, T0, DRIVER_AGENT),
            delete(DATA, T0 + 5, DRIVER_AGENT),
            create(PVC, DATA, T0 + 6),
            delete(DATA, T0 + 9),
        ],
        [],
    ),
    (
        "the controller's claim replaced by the driver's, which the controller deletes",
        [
            create(PVC, DATA, T0),
            delete(DATA, T0 + 5, DRIVER_AGENT),
            create(PVC, DATA, T0 + 6, DRIVER_AGENT),
            delete(DATA, T0 + 9),
        ],
        [f"by {DRIVER_AGENT} at"],
    ),
    ("deleted, never created", [delete(DATA, T0)], ["created by nobody the audit log shows"]),
    (
        "created by the controller, answered 504 as the API server stopped, stored all the same",
        [
            entry("create", PVC, DATA, T0, invariants.CLIENT_GONE),
            entry("update", PVC, DATA, T0 + 2, agent=GC),
            delete(DATA, T0 + 5),
        ],
        [],
    ),
    (
        "a create answered 504 and not stored: the claim is the driver's",
        [
            entry("create", PVC, DATA, T0, invariants.CLIENT_GONE),
            create(PVC, DATA, T0 + 1, DRIVER_AGENT),
            delete(DATA, T0 + 5),
        ],
        [f"created by create {PVC}/{DATA} by {DRIVER_AGENT}"],
    ),
    (
        "a create answered 504, then one refused because it exists: stored",
        [
            entry("create", PVC, DATA, T0, invariants.CLIENT_GONE),
            entry("create", PVC, DATA, T0 + 1, 409),
            delete(DATA, T0 + 5),
        ],
        [],
    ),
    (
        "a create answered 504 and nothing after it but the delete that failed",
        [entry("create", PVC, DATA, T0, invariants.CLIENT_GONE), delete(DATA, T0 + 5, code=404)],
        [],
    ),
    (
        "a second delete of a terminating claim",
        [create(PVC, DATA, T0), delete(DATA, T0 + 5), delete(DATA, T0 + 6, GC)],
        [],
    ),
]


@pytest.mark.parametrize(
    ("entries", "says"), [c[1:] for c in PROOF_CASES], ids=[c[0] for c in PROOF_CASES]
)
def test_deletes_without_proof(entries: list[AuditEntry], says: list[str]) -> None:
    rec = record(impostors={IMPOSTOR_UID: DATA})
    found = invariants.deletes_without_proof(entries, {NAME: rec})
    if not says:
        assert found == []
        return
    assert len(found) == 1, found
    assert found[0].startswith(f"claim {DATA} deleted without proof of ownership: delete ")
    for text in says:
        assert text in found[0], found[0]


LOST_UID = "0a1b2c3d-aaaa-bbbb-cccc-000000000000"
LOSS = Loss(T0 + 4, DATA, LOST_UID)
LOSS_CASES: list[tuple[str, list[AuditEntry], list[OptIn], list[str]]] = [
    (
        "lost, not recreated",
        [create(PVC, DATA, T0), delete(DATA, T0 + 5, DRIVER_AGENT)],
        [],
        [],
    ),
    (
        "lost, recreated without the opt-in",
        [create(PVC, DATA, T0), delete(DATA, T0 + 5, DRIVER_AGENT), create(PVC, DATA, T0 + 9)],
        [],
        ["accepted []", f"not {DATA}@0a1b2c3d", "by soak-driver"],
    ),
    (
        "lost, recreated after the opt-in",
        [create(PVC, DATA, T0), delete(DATA, T0 + 5, DRIVER_AGENT), create(PVC, DATA, T0 + 9)],
        [OptIn(T0 + 7, DATA, "0a1b2c3d")],
        [],
    ),
    (
        "recreated before the opt-in was sent",
        [create(PVC, DATA, T0), delete(DATA, T0 + 5, DRIVER_AGENT), create(PVC, DATA, T0 + 9)],
        [OptIn(T0 + 10, DATA, "0a1b2c3d")],
        ["created again after it was lost"],
    ),
    (
        "an opt-in for another loss of the name",
        [create(PVC, DATA, T0), delete(DATA, T0 + 5, DRIVER_AGENT), create(PVC, DATA, T0 + 9)],
        [OptIn(T0 + 7, DATA, "ffffffff")],
        [f"{DATA}@ffffffff", f"not {DATA}@0a1b2c3d"],
    ),
    (
        "an opt-in for another claim",
        [create(PVC, DATA, T0), delete(DATA, T0 + 5, DRIVER_AGENT), create(PVC, DATA, T0 + 9)],
        [OptIn(T0 + 7, CKPT[0], "0a1b2c3d")],
        ["created again after it was lost"],
    ),
    (
        "deleted by its own retention, then created again",
        [create(PVC, DATA, T0), delete(DATA, T0 + 5), create(PVC, DATA, T0 + 9)],
        [],
        [],
    ),
    (
        "deleted by retention, then once more by the collector: not lost",
        [
            create(PVC, DATA, T0),
            delete(DATA, T0 + 5),
            delete(DATA, T0 + 6, GC),
            create(PVC, DATA, T0 + 9),
        ],
        [],
        [],
    ),
    (
        "the driver's impostor deleted, then the controller's claim created",
        [
            create(PVC, DATA, T0, DRIVER_AGENT),
            delete(DATA, T0 + 5, DRIVER_AGENT),
            create(PVC, DATA, T0 + 9),
        ],
        [],
        [],
    ),
]


@pytest.mark.parametrize(
    ("entries", "opt_ins", "says"), [c[1:] for c in LOSS_CASES], ids=[c[0] for c in LOSS_CASES]
)
def test_recreated_after_loss(
    entries: list[AuditEntry], opt_ins: list[OptIn], says: list[str]
) -> None:
    rec = record(losses=[LOSS], opt_ins=opt_ins)
    found = invariants.recreated_after_loss(entries, {NAME: rec})
    if not says:
        assert found == []
        return
    assert len(found) == 1, found
    assert found[0].startswith(f"claim {DATA} created again after it was lost, without the opt-in")
    assert f"lost by delete {PVC}/{DATA} by {DRIVER_AGENT}" in found[0], found[0]
    for text in says:
        assert text in found[0], found[0]


def test_a_recreated_claim_with_no_loss_on_record_is_reported() -> None:
    entries = [create(PVC, DATA, T0), delete(DATA, T0 + 5, GC), create(PVC, DATA, T0 + 9)]
    found = invariants.recreated_after_loss(entries, {NAME: record()})
    assert len(found) == 1 and "has no loss of it on record" in found[0], found


# ----------------------------------------------------------------------------- 2. claims

UNEXPLAINED_CASES = [
    ("desired by a running JobSet", record(), [live_jobset()], claim(DATA), None),
    ("Job-scope claim within replicas", record(), [live_jobset(workers=1)], claim(CKPT[0]), None),
    ("scaled away, whenScaled=Retain", record(), [live_jobset(workers=1)], claim(CKPT[2]), None),
    ("scaled away, whenScaled=Delete", record(ckpt=retention(when_scaled=DELETE)),
     [live_jobset(workers=1)], claim(CKPT[2]), "whenScaled=Delete"),
    ("Completed, whenCompleted=Delete", record(data=retention(when_completed=DELETE)),
     [live_jobset(terminal="Completed")], claim(DATA), "whenCompleted=Delete"),
    ("Completed, whenCompleted=Retain", record(), [live_jobset(terminal="Completed")],
     claim(DATA), None),
    ("Failed, whenFailed=Delete", record(data=retention(when_failed=DELETE)),
     [live_jobset(terminal="Failed")], claim(DATA), "whenFailed=Delete"),
    ("JobSet gone, whenDeleted=Delete", record(deleted_at=T0), [], claim(DATA),
     "outlived"),
    ("JobSet gone, retained properly", record(deleted_at=T0, data=retention(when_deleted=RETAIN)),
     [], claim(DATA, owner="", retained=UID), None),
    ("retained, still owned", record(deleted_at=T0, data=retention(when_deleted=RETAIN)), [],
     claim(DATA, retained=UID), "still has an ownerReference"),
    ("retained, not annotated", record(deleted_at=T0, data=retention(when_deleted=RETAIN)), [],
     claim(DATA, owner=""), "lacks the annotation"),
    ("retained on deletion but completed with whenCompleted=Delete",
     record(deleted_at=T0, terminal="Completed", terminal_at=T0 - 5,
            data=retention(when_deleted=RETAIN, when_completed=DELETE)),
     [], claim(DATA, owner="", retained=UID), "whenCompleted=Delete"),
    ("JobSet being deleted", record(deleted_at=T0), [live_jobset(deleting=True)], claim(DATA),
     "is being deleted"),
    ("claim being deleted is not judged here", record(), [], claim(DATA, deleting=True), None),
    ("a claim nobody asked for", record(), [live_jobset()], claim("stranger"),
     "no JobSet of the driver asks for it"),
    ("the driver's impostor, its JobSet gone", record(deleted_at=T0, impostors={"u-1": DATA}),
     [], claim(DATA, owner="", uid="u-1"), None),
    ("the JobSet's own claim at the impostor's name", record(deleted_at=T0,
     impostors={"u-1": DATA}), [], claim(DATA, uid="u-2"), "outlived"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("rec", "jobsets", "the_claim", "why"),
    [c[1:] for c in UNEXPLAINED_CASES],
    ids=[c[0] for c in UNEXPLAINED_CASES],
)
def test_unexplained_claims(
    rec: JobSetRecord, jobsets: list[Obj], the_claim: Obj, why: str | None
) -> None:
    found = invariants.unexplained_claims([the_claim], jobsets, {NAME: rec})
    if why is None:
        assert found == {}
    else:
        name = the_claim["metadata"]["name"]
        assert list(found) == [name]
        assert why in found[name] and name in found[name]


# ----------------------------------------------------------------------------- 4. and 5.

TERMINAL_CASES = [
    ("Completed", record(), [live_jobset(terminal="Completed")], None),
    ("Failed", record(), [live_jobset(terminal="Failed")], None),
    ("still running", record(), [live_jobset()], "did not reach a terminal state"),
    ("deleted and gone", record(deleted_at=T0), [], None),
    ("gone, never deleted", record(), [], "disappeared, but nobody deleted it"),
    ("deleted by the driver, still there: stuck_deleting says so", record(deleted_at=T0),
     [live_jobset()], None),
    ("stranger", replace(record(), name="other"), [live_jobset(terminal="Completed")],
     "the driver never created it"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("rec", "jobsets", "why"), [c[1:] for c in TERMINAL_CASES], ids=[c[0] for c in TERMINAL_CASES]
)
def test_not_terminal(rec: JobSetRecord, jobsets: list[Obj], why: str | None) -> None:
    found = invariants.not_terminal(jobsets, {rec.name: rec})
    if why is None:
        assert found == []
    else:
        assert any(why in f for f in found), found


STUCK_CASES: list[tuple[str, JobSetRecord, list[Obj], str | None]] = [
    ("Completed, not deleted", record(), [live_jobset(terminal="Completed")], None),
    ("deleted and gone", record(deleted_at=T0), [], None),
    (
        "deleted, held by a finalizer",
        record(deleted_at=T0),
        [live_jobset(deleting=True, finalizers=True, terminal="Completed")],
        "JobSet js (scenario test; not terminal, deleted at 08:00:00.000Z) is not gone: "
        "being deleted since 2027-01-15T08:00:00Z, finalizers "
        "['jobset.x-k8s.io/volume-retention']; suspend=None, restarts=0, conditions "
        "[Completed=True(None)], jobs []",
    ),
    (
        "deleted by the driver, no deletionTimestamp",
        record(delete_requested_at=T0),
        [live_jobset()],
        "JobSet js (scenario test; not terminal, deleted at 08:00:00.000Z) is not gone: not even "
        "being deleted, finalizers []; suspend=None, restarts=0, conditions [], jobs []",
    ),
    (
        "being deleted, though the driver never deleted it",
        record(),
        [live_jobset(deleting=True)],
        "JobSet js (scenario test; not terminal) is not gone: being deleted since",
    ),
]


@pytest.mark.parametrize(
    ("rec", "jobsets", "message"), [c[1:] for c in STUCK_CASES], ids=[c[0] for c in STUCK_CASES]
)
def test_stuck_deleting_names_the_jobset_its_finalizers_and_conditions(
    rec: JobSetRecord, jobsets: list[Obj], message: str | None
) -> None:
    found = invariants.stuck_deleting(jobsets, {rec.name: rec})
    if message is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith(message), found


# ----------------------------------------------------------------------------- 6. and data


def test_rss_exceeded() -> None:
    mib = 1024 * 1024
    peaks = {"replica-0": 120 * mib, "replica-1": 401 * mib}
    assert invariants.rss_exceeded(peaks, 400 * mib) == [
        "controller replica replica-1 peaked at 401 MiB RSS, above the bound of 400 MiB"
    ]
    assert invariants.rss_exceeded(peaks, 500 * mib) == []


def test_final_violations_of_a_clean_history_are_empty() -> None:
    rec = record(deleted_at=T0 + 50, data=retention(when_deleted=RETAIN))
    entries = [create(PVC, n, T0) for n in (DATA, *CKPT)]
    entries += [entry("delete", PVC, n, T0 + 51) for n in CKPT]
    entries += [create("jobs", "js-workers-0", T0 + 1)]
    claims = [claim(DATA, owner="", retained=UID)]
    assert invariants.final_violations(entries, [], [], claims, {NAME: rec}) == []


def test_audit_lines_are_parsed() -> None:
    line = (
        '{"kind":"Event","level":"Metadata","auditID":"a1","stage":"ResponseComplete",'
        '"verb":"delete","userAgent":"stateful-jobset/replica-0","objectRef":{"resource":'
        '"persistentvolumeclaims","namespace":"soak","name":"data-js","apiVersion":"v1"},'
        '"responseStatus":{"metadata":{},"code":200},'
        '"requestReceivedTimestamp":"2027-01-15T08:00:00.100000Z",'
        '"stageTimestamp":"2027-01-15T08:00:00.250000Z"}'
    )
    parsed = parse_audit_line(line, "soak")
    assert parsed is not None
    assert (parsed.verb, parsed.resource, parsed.name, parsed.code) == (
        "delete",
        PVC,
        "data-js",
        200,
    )
    assert math.isclose(parsed.time - parsed.received, 0.15, abs_tol=1e-6)
    assert parse_audit_line(line, "elsewhere") is None
    assert parse_audit_line(line.replace("ResponseComplete", "Panic"), "soak") is None
    assert parse_audit_line("not json", "soak") is None


def test_the_scenarios_cover_every_scope_spelling_and_retention() -> None:
    # 16 retentions, Pod scope in 1 of 3, Snapshot in 2 of 5: every combination once over this.
    planned = [plan(i, T0) for i in range(16 * 3 * 5 * len(SCENARIOS))]
    assert {p.record.scenario for p in planned} == set(SCENARIOS)
    for scope in ("JobSet", "Job", "Pod"):
        found = {c.retention for p in planned for c in p.record.claims if c.scope == scope}
        # Every Retain/Delete combination, and with Snapshot instead of Delete every one of them
        # that has a Delete (the 15 others; all Retain is the same either way).
        assert len({r for r in found if SNAPSHOT not in astuple(r)}) == 16, scope
        assert len({r for r in found if DELETE not in astuple(r)}) == 16, scope
    # Two JobSets out of five say Snapshot where the others say Delete; every scenario does both.
    assert {(p.record.scenario, snapshots(i)) for i, p in enumerate(planned)} == {
        (s, b) for s in SCENARIOS for b in (True, False)
    }
    for i, p in enumerate(planned):
        values = {v for c in p.record.claims for v in astuple(c.retention)}
        assert (DELETE not in values) if snapshots(i) else (SNAPSHOT not in values)
    policies = plan(1, T0).manifest["spec"]["volumeClaimPolicies"]
    assert policies[0]["retentionPolicy"] == {  # ckpt of JobSet 1: Delete, Retain, Delete, Retain
        "whenDeleted": SNAPSHOT,
        "whenCompleted": RETAIN,
        "whenFailed": SNAPSHOT,
        "whenScaled": RETAIN,
    }
    # Every scenario runs with and without a Pod-scope policy.
    with_pod_scope = {
        (p.record.scenario, any(c.scope == "Pod" for c in p.record.claims)) for p in planned
    }
    assert with_pod_scope == {(s, b) for s in SCENARIOS for b in (True, False)}
    spellings = {("volumePolicy" in p.manifest["spec"]) for p in planned}
    assert spellings == {True, False}
    first = planned[0]
    assert [c.name for c in first.record.claims] == [
        "data-soak-0000-complete",
        "ckpt-soak-0000-complete-workers-0",
        "ckpt-soak-0000-complete-workers-1",
        "rank-soak-0000-complete-workers-0-0",
        "rank-soak-0000-complete-workers-0-1",
        "rank-soak-0000-complete-workers-1-0",
        "rank-soak-0000-complete-workers-1-1",
    ]


def test_the_impostor_and_loss_scenarios_plan_every_ending() -> None:
    planned = [plan(i, T0) for i in range(6 * len(SCENARIOS))]
    impostors = [p for p in planned if p.record.scenario == "impostor"]
    assert {p.first_variant for p in impostors} == {True, False}
    for p in impostors:
        assert p.impostor is not None
        meta = p.impostor["metadata"]
        assert meta["name"] == f"data-{p.record.name}" and "annotations" not in meta
        assert meta["labels"][invariants.JOBSET_NAME] == p.record.name  # copied, no proof
    losses = [p for p in planned if p.record.scenario == "lose-claim"]
    assert {(p.lose.split("-")[0], p.first_variant) for p in losses} == {
        (template, accepted) for template in ("data", "ckpt", "rank") for accepted in (True, False)
    }
    for p in losses:
        assert p.manifest["spec"]["suspend"] is True  # no pod holds the claim it loses
        assert p.lose in {c.name for c in p.record.claims}


def test_a_pod_scope_jobset_plans_a_claim_per_job_and_completion_index() -> None:
    planned = plan(0, T0)  # Pod scope: index % 3 == 0
    workers = planned.manifest["spec"]["replicatedJobs"][1]
    assert workers["name"] == "workers"
    job = workers["template"]["spec"]
    assert (job["completionMode"], job["completions"], job["parallelism"]) == ("Indexed", 2, 2)
    policies = planned.manifest["spec"]["volumeClaimPolicies"]
    assert policies[-1]["scope"] == "Pod" and policies[-1]["targetReplicatedJobs"] == ["workers"]
    rank = [(c.name, c.job_index, c.pod_index) for c in planned.record.claims if c.scope == "Pod"]
    name = planned.record.name
    assert rank == [(f"rank-{name}-workers-{j}-{k}", j, k) for j in range(2) for k in range(2)]
    without = plan(1, T0)
    assert all(c.scope != "Pod" for c in without.record.claims)
    assert "completionMode" not in without.manifest["spec"]["replicatedJobs"][1]["template"]["spec"]


# ----------------------------------------------------------------------------- 7. Pod scope

RANK = [[f"rank-js-workers-{j}-{k}" for k in range(2)] for j in range(3)]


def pod_record(rank: Retention | None = None, **fields: Any) -> JobSetRecord:
    """``record`` with a Pod-scope claim ``rank`` per workers Job and completion index (2)."""
    base = record(**fields)
    claims = [
        PlannedClaim(RANK[j][k], "rank", "Pod", rank or Retention(), "workers", j, k)
        for j in range(3)
        for k in range(2)
    ]
    return replace(base, claims=base.claims + tuple(claims))


def claims_of_worker(j: int, at: float) -> list[AuditEntry]:
    return [create(PVC, n, at) for n in (DATA, CKPT[j], *RANK[j])]


def overlapping(name: str, received: float, answered: float) -> AuditEntry:
    return replace(create(PVC, name, answered), received=received)


BEFORE_CLAIMS_CASES = [
    ("every claim first", [*claims_of_worker(0, T0), create("jobs", "js-workers-0", T0 + 1)], []),
    ("the leader needs only the JobSet's claim",
     [create(PVC, DATA, T0), create("jobs", "js-leader-0", T0 + 1)], []),
    ("one completion index's claim missing",
     [create(PVC, n, T0) for n in (DATA, CKPT[0], RANK[0][0])]
     + [create("jobs", "js-workers-0", T0 + 1)],
     [f"before its Pod-scope claim {RANK[0][1]}: it did not exist"]),
    ("a claim created after the Job",
     [*claims_of_worker(1, T0 + 2), create("jobs", "js-workers-1", T0 + 1)],
     [f"claim {n}: it did not exist" for n in (DATA, CKPT[1], *RANK[1])]),
    ("a create overlapping the Job's counts as before it",
     [*claims_of_worker(0, T0)[:-1], overlapping(RANK[0][1], T0 + 0.5, T0 + 1.2),
      create("jobs", "js-workers-0", T0 + 1)], []),
    ("deleted by the controller before the Job",
     [*claims_of_worker(0, T0), delete(RANK[0][0], T0 + 1),
      create("jobs", "js-workers-0", T0 + 2)],
     [f"before its Pod-scope claim {RANK[0][0]}: it did not exist"]),
    ("lost (deleted by the driver) a moment before: the caches had not seen it yet",
     [*claims_of_worker(0, T0), delete(RANK[0][0], T0 + 1, agent=DRIVER_AGENT),
      create("jobs", "js-workers-0", T0 + 2)], []),
    ("lost long before",
     [*claims_of_worker(0, T0), delete(RANK[0][0], T0 + 1, agent=DRIVER_AGENT),
      create("jobs", "js-workers-0", T0 + 2 + invariants.LOSS_NOTICE)],
     [f"before its Pod-scope claim {RANK[0][0]}: it did not exist"]),
    ("deleted and created again by the controller before the Job",
     [*claims_of_worker(0, T0), delete(RANK[0][0], T0 + 1, agent=DRIVER_AGENT),
      create(PVC, RANK[0][0], T0 + 2), create("jobs", "js-workers-0", T0 + 3)], []),
    ("only the driver's claim at that name",
     [*claims_of_worker(0, T0)[1:], create(PVC, DATA, T0, agent=DRIVER_AGENT),
      create("jobs", "js-workers-0", T0 + 1)],
     [f"before its JobSet-scope claim {DATA}: it was not the controller's"]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("entries", "says"),
    [c[1:] for c in BEFORE_CLAIMS_CASES],
    ids=[c[0] for c in BEFORE_CLAIMS_CASES],
)
def test_jobs_created_before_their_claims(entries: list[AuditEntry], says: list[str]) -> None:
    found = invariants.jobs_created_before_their_claims(entries, {NAME: pod_record()})
    assert len(found) == len(says), found
    for message, expected in zip(found, says, strict=True):
        assert expected in message


def pod(rjob: str, job_index: int, pod_index: int, **volumes: str) -> Obj:
    return {
        "metadata": {
            "name": f"js-{rjob}-{job_index}-{pod_index}-abcde",
            "labels": {
                invariants.JOBSET_NAME: NAME,
                invariants.REPLICATED_JOB: rjob,
                invariants.JOB_INDEX: str(job_index),
            },
            "annotations": {invariants.COMPLETION_INDEX: str(pod_index)},
        },
        "spec": {
            "volumes": [{"name": "token", "projected": {}}]
            + [{"name": v, "persistentVolumeClaim": {"claimName": c}} for v, c in volumes.items()]
        },
    }


PODS_CASES = [
    ("its own claims", pod("workers", 1, 1, data=DATA, ckpt=CKPT[1], rank=RANK[1][1]), None),
    ("a leader pod", pod("leader", 0, 0, data=DATA), None),
    ("the placeholder", pod("workers", 1, 1, data=DATA, ckpt=CKPT[1],
                            rank="rank-js-workers-1-POD-INDEX"),
     "admitted with the Pod-scope placeholder rank-js-workers-1-POD-INDEX"),
    ("another index's claim", pod("workers", 1, 1, data=DATA, ckpt=CKPT[1], rank=RANK[1][0]),
     f"'rank': '{RANK[1][0]}'"),
    ("another Job's claim", pod("workers", 2, 0, data=DATA, ckpt=CKPT[2], rank=RANK[1][0]),
     f"expected {{'ckpt': '{CKPT[2]}', 'data': '{DATA}', 'rank': '{RANK[2][0]}'}}"),
    ("a claim missing", pod("workers", 0, 0, data=DATA, ckpt=CKPT[0]), "expected"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("the_pod", "why"), [c[1:] for c in PODS_CASES], ids=[c[0] for c in PODS_CASES]
)
def test_pods_with_wrong_claims(the_pod: Obj, why: str | None) -> None:
    found = invariants.pods_with_wrong_claims([the_pod], {NAME: pod_record()})
    if why is None:
        assert found == []
    else:
        assert len(found) == 1 and why in found[0], found


def test_a_pod_of_another_jobset_is_not_judged() -> None:
    stranger = pod("workers", 0, 0, rank="rank-other-workers-0-POD-INDEX")
    stranger["metadata"]["labels"][invariants.JOBSET_NAME] = "other"
    assert invariants.pods_with_wrong_claims([stranger], {NAME: pod_record()}) == []


def worker_job(index: int, *, deleting: bool = False) -> Obj:
    return job(f"js-workers-{index}", index, 0, deleting=deleting)


LIVE_JOB_CLAIMS_CASES = [
    ("all there", pod_record(), [live_jobset()], [worker_job(0)],
     [DATA, CKPT[0], *RANK[0]], []),
    ("an index's claim absent", pod_record(), [live_jobset()], [worker_job(0)],
     [DATA, CKPT[0], RANK[0][0]], [RANK[0][1]]),
    ("a terminating Job is not judged", pod_record(), [live_jobset()],
     [worker_job(0, deleting=True)], [], []),
    ("a terminating JobSet is not judged", pod_record(deleted_at=T0),
     [live_jobset(deleting=True)], [worker_job(0)], [], []),
    ("policy deleted them", pod_record(terminal="Completed", terminal_at=T0,
     rank=retention(when_completed=DELETE)), [live_jobset(terminal="Completed")], [worker_job(0)],
     [DATA, CKPT[0]], []),
    ("deleted claims count as absent", pod_record(), [live_jobset()], [worker_job(1)],
     [DATA, CKPT[1], RANK[1][0]], [RANK[1][1]]),
]  # fmt: skip


@pytest.mark.parametrize(
    ("rec", "jobsets", "jobs", "claims", "absent"),
    [c[1:] for c in LIVE_JOB_CLAIMS_CASES],
    ids=[c[0] for c in LIVE_JOB_CLAIMS_CASES],
)
def test_live_jobs_without_claims(
    rec: JobSetRecord, jobsets: list[Obj], jobs: list[Obj], claims: list[str], absent: list[str]
) -> None:
    listed = [claim(n) for n in claims]
    found = invariants.live_jobs_without_claims([], jobsets, jobs, listed, {NAME: rec})
    if not absent:
        assert found == []
    else:
        assert len(found) == 1 and f"claims {', '.join(absent)} do not" in found[0], found


def test_a_claim_the_driver_lost_is_not_expected_of_a_live_job() -> None:
    lost = [create(PVC, RANK[0][1], T0), delete(RANK[0][1], T0 + 1, agent=DRIVER_AGENT)]
    listed = [claim(n) for n in (DATA, CKPT[0], RANK[0][0])]
    found = invariants.live_jobs_without_claims(
        lost, [live_jobset()], [worker_job(0)], listed, {NAME: pod_record()}
    )
    assert found == []


def test_pod_scope_claims_of_jobs_scaled_away() -> None:
    scaled = pod_record(rank=retention(when_scaled=DELETE))
    found = invariants.unexplained_claims(
        [claim(RANK[2][1]), claim(RANK[0][1])], [live_jobset(workers=1)], {NAME: scaled}
    )
    assert list(found) == [RANK[2][1]] and "whenScaled=Delete" in found[RANK[2][1]]
    moment = T0 + 10
    rec = replace(scaled, scales=[Scale(T0, "workers", 1)])
    assert invariants.delete_reasons(rec.claims[-1], rec, moment) == [
        f"whenScaled=Delete (workers scaled to 1 at {stamp(T0)})"
    ]
    assert invariants.delete_reasons(rec.claims[3], rec, moment) == []  # Job 0 stays


# ----------------------------------------------------------------------------- 8. snapshots

CLAIM_UID = "c-new"
SNAP = f"{DATA}-cnew"


def snapshot_record(**fields: Any) -> SnapshotRecord:
    base = SnapshotRecord(
        name=SNAP,
        uid="s-1",
        jobset=NAME,
        source_claim=DATA,
        claim_uid=CLAIM_UID,
        seen_at=T0 + 21,
        outcome="ready",
        marked_at=T0 + 23,
        answered_at=T0 + 23.1,
    )
    return replace(base, **fields)


def seen(
    uid: str = CLAIM_UID, *, bound_at: float | None = T0 + 2, at: float = T0 + 1
) -> ClaimObject:
    """A claim object of ``DATA``: listed at ``at`` (Pending), Bound in a listing answered at
    ``bound_at`` (None: never seen Bound)."""
    found = ClaimObject.seen(DATA, uid, Sighting(at - 0.1, at, False))
    if bound_at is not None:
        found.see(Sighting(bound_at - 0.1, bound_at, True))
    return found


def ready_patch(at: float, name: str = SNAP) -> AuditEntry:
    return AuditEntry(
        at, at - 0.01, "patch", "volumesnapshots", NS, name, "status", 200, DRIVER_AGENT, f"p-{at}"
    )


COMPLETED_SNAPSHOT = record(
    terminal="Completed", terminal_at=T0 + 20, data=retention(when_completed=SNAPSHOT)
)
HISTORY = [create(PVC, DATA, T0), ready_patch(T0 + 23.05)]

SNAPSHOT_CASES = [
    ("deleted after its snapshot was ready", COMPLETED_SNAPSHOT,
     [*HISTORY, delete(DATA, T0 + 24)], [snapshot_record()], [seen()], None),
    ("the ready patch not in the audit log yet: the driver's first attempt counts",
     COMPLETED_SNAPSHOT, [create(PVC, DATA, T0), delete(DATA, T0 + 24)], [snapshot_record()],
     [seen()], None),
    ("deleted before its snapshot was ready", COMPLETED_SNAPSHOT,
     [*HISTORY, delete(DATA, T0 + 22)], [snapshot_record()], [seen()], "deleted without a ready"),
    ("deleted with no snapshot at all", COMPLETED_SNAPSHOT,
     [create(PVC, DATA, T0), delete(DATA, T0 + 24)], [], [seen()], "snapshots of it: none"),
    ("its snapshot failed", COMPLETED_SNAPSHOT, [*HISTORY, delete(DATA, T0 + 24)],
     [snapshot_record(outcome="failed")], [seen()], "failed"),
    ("the ready snapshot is of an earlier claim of that name", COMPLETED_SNAPSHOT,
     [create(PVC, DATA, T0 - 30), delete(DATA, T0 - 20, agent=DRIVER_AGENT), *HISTORY,
      delete(DATA, T0 + 24)],
     [snapshot_record(claim_uid="c-old")], [seen("c-old", at=T0 - 25, bound_at=T0 - 24), seen()],
     "of other claims of that name"),
    ("the ready snapshot is of another claim", COMPLETED_SNAPSHOT,
     [*HISTORY, delete(DATA, T0 + 24)], [snapshot_record(source_claim=CKPT[0])], [seen()],
     "snapshots of it: none"),
    ("failed, then deleted and taken again: ready before the delete", COMPLETED_SNAPSHOT,
     [*HISTORY, ready_patch(T0 + 40), delete(DATA, T0 + 41)],
     [snapshot_record(outcome="failed", deleted_at=T0 + 30),
      snapshot_record(uid="s-2", marked_at=T0 + 39.9)], [seen()], None),
    ("failed, then deleted and taken again: deleted before the new one was ready",
     COMPLETED_SNAPSHOT, [*HISTORY, ready_patch(T0 + 40), delete(DATA, T0 + 35)],
     [snapshot_record(outcome="failed", deleted_at=T0 + 30),
      snapshot_record(uid="s-2", marked_at=T0 + 39.9)], [seen()], "deleted without a ready"),
    ("never seen Bound (the controller deletes a claim with no data at once)",
     COMPLETED_SNAPSHOT, [create(PVC, DATA, T0), delete(DATA, T0 + 22)], [],
     [seen(bound_at=None)], None),
    ("seen Bound only just before its delete", COMPLETED_SNAPSHOT,
     [create(PVC, DATA, T0), delete(DATA, T0 + 22)], [], [seen(bound_at=T0 + 19)], None),
    ("never listed: its uid is unknown", COMPLETED_SNAPSHOT,
     [create(PVC, DATA, T0), delete(DATA, T0 + 22)], [], [], None),
    ("deleted by the driver (out of band)", COMPLETED_SNAPSHOT,
     [create(PVC, DATA, T0), delete(DATA, T0 + 22, agent=DRIVER_AGENT)], [], [seen()], None),
    ("whenCompleted=Delete: no snapshot needed", record(terminal="Completed", terminal_at=T0 + 20,
     data=retention(when_completed=DELETE)), [create(PVC, DATA, T0), delete(DATA, T0 + 22)], [],
     [seen()], None),
    ("Snapshot and a Delete that may apply too: either may have done it",
     record(terminal="Completed", terminal_at=T0 + 20, deleted_at=T0 + 21,
            data=retention(when_completed=SNAPSHOT, when_deleted=DELETE)),
     [create(PVC, DATA, T0), delete(DATA, T0 + 22)], [], [seen()], None),
    ("Snapshot surely in force long before, a Delete too: Snapshot wins",
     record(terminal="Completed", terminal_at=T0 + 20, deleted_at=T0 + 21,
            data=retention(when_completed=SNAPSHOT, when_deleted=DELETE)),
     [create(PVC, DATA, T0), delete(DATA, T0 + 60)], [], [seen()], "whenCompleted=Snapshot"),
    ("whenDeleted=Snapshot, deleted before its snapshot was ready",
     record(deleted_at=T0 + 20, data=retention(when_deleted=SNAPSHOT)),
     [*HISTORY, delete(DATA, T0 + 22)], [snapshot_record()], [seen()], "whenDeleted=Snapshot"),
    ("whenScaled=Snapshot, the scaled-away Job's claim after its snapshot",
     record(scales=[Scale(T0 + 10, "workers", 1)], ckpt=retention(when_scaled=SNAPSHOT)),
     [create(PVC, CKPT[1], T0), ready_patch(T0 + 23.05, f"{CKPT[1]}-cnew"),
      delete(CKPT[1], T0 + 24)],
     [snapshot_record(name=f"{CKPT[1]}-cnew", source_claim=CKPT[1])],
     [replace(seen(), name=CKPT[1])], None),
    ("whenScaled=Snapshot, the scaled-away Job's claim with none",
     record(scales=[Scale(T0 + 10, "workers", 1)], ckpt=retention(when_scaled=SNAPSHOT)),
     [create(PVC, CKPT[1], T0), delete(CKPT[1], T0 + 24)], [],
     [replace(seen(), name=CKPT[1])], "whenScaled=Snapshot"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("rec", "entries", "taken", "objects", "why"),
    [c[1:] for c in SNAPSHOT_CASES],
    ids=[c[0] for c in SNAPSHOT_CASES],
)
def test_claim_deletes_without_ready_snapshot(
    rec: JobSetRecord,
    entries: list[AuditEntry],
    taken: list[SnapshotRecord],
    objects: list[ClaimObject],
    why: str | None,
) -> None:
    claims = {o.uid: o for o in objects}
    found = invariants.claim_deletes_without_ready_snapshot(entries, {NAME: rec}, taken, claims)
    if why is None:
        assert found == []
    else:
        assert len(found) == 1, found
        assert why in found[0] and "by stateful-jobset/replica-0" in found[0], found[0]


def test_a_snapshot_of_a_claim_its_jobset_does_not_have_is_reported() -> None:
    stray = snapshot_record(source_claim="data-elsewhere")
    found = invariants.snapshots_of_unknown_claims([snapshot_record(), stray], {NAME: record()})
    assert len(found) == 1 and "data-elsewhere" in found[0]


def test_claims_under_retention_snapshot_are_let_go_like_delete() -> None:
    rec = COMPLETED_SNAPSHOT
    assert invariants.unjustified_claim_deletes([delete(DATA, T0 + 24)], {NAME: rec}) == []
    found = invariants.unexplained_claims([claim(DATA)], [live_jobset(terminal="Completed")],
                                          {NAME: rec})  # fmt: skip
    assert "whenCompleted=Snapshot" in found[DATA]
    assert invariants.retained_claims_missing([create(PVC, DATA, T0)], [], {NAME: rec}) == []


def test_final_violations_judge_the_snapshots() -> None:
    entries = [*HISTORY, delete(DATA, T0 + 22)]
    rec = {NAME: COMPLETED_SNAPSHOT}
    claims = {CLAIM_UID: seen()}
    jobsets = [live_jobset(terminal="Completed")]
    taken = [snapshot_record()]
    found = invariants.final_violations(entries, jobsets, [], [], rec, [], taken, claims)
    assert any("deleted without a ready snapshot" in f for f in found)
    clean = [*HISTORY, delete(DATA, T0 + 24)]
    assert invariants.final_violations(clean, jobsets, [], [], rec, [], taken, claims) == []


def test_snapshot_status_patches_are_parsed() -> None:
    line = (
        '{"stage":"ResponseComplete","verb":"patch","userAgent":"soak-driver","auditID":"a2",'
        '"objectRef":{"resource":"volumesnapshots","namespace":"soak","name":"data-js-1234abcd",'
        '"subresource":"status","apiGroup":"snapshot.storage.k8s.io"},'
        '"responseStatus":{"code":200},"requestReceivedTimestamp":"2027-01-15T08:00:00.100000Z",'
        '"stageTimestamp":"2027-01-15T08:00:00.150000Z"}'
    )
    parsed = parse_audit_line(line, "soak")
    assert parsed is not None
    assert (parsed.resource, parsed.subresource, parsed.name) == (
        "volumesnapshots",
        "status",
        "data-js-1234abcd",
    )
