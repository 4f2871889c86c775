"""writefailures: refused writes and held Job names in, conditions out; and how ``decide`` puts
them into the status (which Jobs wait, what VolumesReady and status.volumes say, which Events)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.jobset import api, model, volumes, writefailures
from controller.jobset.decide import Plan, decide
from controller.jobset.jobsetstatus import Condition
from controller.jobset.writefailures import Failure, Write
from controller.runtime.client import ApiError
from controller.runtime.store import Obj
from tests.unit.jobset_factories import T0, make_jobset_obj, rjob

QUOTA = (
    'persistentvolumeclaims "data-js" is forbidden: exceeded quota: storage, requested: '
    "requests.storage=10Gi, used: requests.storage=0, limited: requests.storage=1Gi"
)
INVALID_JOB = 'Job.batch "js-leader-0" is invalid: spec.template.spec.restartPolicy: Required value'
PENDING = Condition(
    "VolumesReady", "False", "ClaimsPending", "1 of 1 claims are waiting for a volume", None
)
LOST = Condition("VolumesReady", "False", "ClaimsLost", "1 of 2 claims ... are lost", "Warning")


def create_claim(name: str = "data-js", message: str = QUOTA) -> Failure:
    return Failure(Write.CREATE_CLAIM, name, message)


def create_job(name: str, message: str = INVALID_JOB) -> Failure:
    return Failure(Write.CREATE_JOB, name, message)


def held(name: str, owner: str = "no owner") -> Failure:
    return Failure(Write.HELD_JOB, name, owner)


def _row(found: Condition) -> tuple[str, str, str, str | None]:
    return (found.status, found.reason, found.message, found.event_type)


@pytest.mark.parametrize(
    ("decided", "failures", "expected"),
    [
        pytest.param(PENDING, [], _row(PENDING), id="no-failures-as-decided"),
        pytest.param(
            PENDING, [create_job("js-leader-0")], _row(PENDING), id="job-failures-leave-it"
        ),
        pytest.param(
            Condition("VolumesReady", "False", "ClaimsNotCreated", "1 of 1 ... data-js", None),
            [create_claim()],
            ("False", "PVCCreationFailed", f"could not create claim data-js: {QUOTA}",
             "Warning"),
            id="create-refused-names-claim-and-quota",
        ),
        pytest.param(
            PENDING,
            [create_claim()],
            ("False", "PVCCreationFailed",
             f"could not create claim data-js: {QUOTA}. Besides: {PENDING.message}", "Warning"),
            id="create-refused-besides-pending",
        ),
        pytest.param(
            LOST,
            [create_claim()],
            ("False", "PVCCreationFailed",
             f"could not create claim data-js: {QUOTA}. Besides: {LOST.message}", "Warning"),
            id="lost-kept-in-message",
        ),
        pytest.param(
            PENDING,
            [Failure(Write.PATCH_CLAIM, "a-js", "too big", "ClaimExpandedFailed"), create_claim()],
            ("False", "PVCCreationFailed",
             f"could not update claim a-js: too big; could not create claim data-js: {QUOTA}. "
             f"Besides: {PENDING.message}", "Warning"),
            id="create-reason-wins-over-patch",
        ),
        pytest.param(
            Condition("VolumesReady", "True", "ClaimsBound", "all 1 claims are bound", None),
            [Failure(Write.PATCH_CLAIM, "data-js", "exceeded quota: q", "ClaimExpandedFailed")],
            ("False", "ClaimExpandedFailed", "could not update claim data-js: exceeded quota: q",
             "Warning"),
            id="patch-reason-plus-failed",
        ),
        pytest.param(
            Condition("VolumesReady", "False", "ClaimsReleased", "released", None),
            [Failure(Write.DELETE_CLAIM, "data-js", "forbidden")],
            ("False", "ClaimDeletionFailed",
             "could not delete claim data-js: forbidden. Besides: released", "Warning"),
            id="retention-delete-refused",
        ),
        pytest.param(
            PENDING,
            writefailures.finalizer_refused(
                "jobset.x-k8s.io/volume-retention", "denied", ["data-js"]
            ),
            ("False", "RetentionFinalizerFailed",
             "could not add the finalizer jobset.x-k8s.io/volume-retention to the JobSet: "
             "denied; could not create claim data-js: waits for the JobSet's retention "
             f"finalizer. Besides: {PENDING.message}", "Warning"),
            id="finalizer-refused-first-and-no-claim-created",
        ),
    ],
)  # fmt: skip
def test_volumes_ready(
    decided: Condition, failures: list[Failure], expected: tuple[str, str, str, str | None]
) -> None:
    assert _row(writefailures.volumes_ready(decided, failures)) == expected


@pytest.mark.parametrize(
    ("failures", "jobs", "others"),
    [
        pytest.param(
            [],
            ("False", "JobsCreated", "no Job creation is failing", None),
            ("False", "NoFailedWrites", "no write is failing", None),
            id="none",
        ),
        pytest.param(
            [create_job("js-b-0")],
            ("True", "JobCreationFailed", f"could not create Job js-b-0: {INVALID_JOB}",
             "Warning"),
            ("False", "NoFailedWrites", "no write is failing", None),
            id="refused",
        ),
        pytest.param(
            [held("js-a-1", "owned by ConfigMap cm (uid u1)"), held("js-a-0")],
            ("True", "JobConflict",
             "Job js-a-0 exists and is not this JobSet's (no owner); Job js-a-1 exists and is "
             "not this JobSet's (owned by ConfigMap cm (uid u1))", "Warning"),
            ("False", "NoFailedWrites", "no write is failing", None),
            id="held-sorted-by-name",
        ),
        pytest.param(
            [held("js-a-0"), create_job("js-b-0", "no")],
            ("True", "JobCreationFailed",
             "Job js-a-0 exists and is not this JobSet's (no owner); could not create Job "
             "js-b-0: no", "Warning"),
            ("False", "NoFailedWrites", "no write is failing", None),
            id="held-and-refused",
        ),
        pytest.param(
            [create_job(f"js-a-{i}", "no") for i in range(5)],
            ("True", "JobCreationFailed",
             "could not create Job js-a-0: no; could not create Job js-a-1: no; could not "
             "create Job js-a-2: no; and 2 more", "Warning"),
            ("False", "NoFailedWrites", "no write is failing", None),
            id="many-shortened",
        ),
        pytest.param(
            [Failure(Write.CREATE_SERVICE, "js", "exceeded quota: services"),
             Failure(Write.DELETE_JOB, "js-a-0", "forbidden")],
            ("False", "JobsCreated", "no Job creation is failing", None),
            ("True", "HeadlessServiceCreationFailed",
             "could not create Service js: exceeded quota: services; could not delete Job "
             "js-a-0: forbidden", "Warning"),
            id="service-and-job-delete",
        ),
        pytest.param(
            [Failure(Write.UPDATE_JOB, "js-a-0", "denied by webhook")],
            ("False", "JobsCreated", "no Job creation is failing", None),
            ("True", "JobUpdateFailed", "could not update Job js-a-0: denied by webhook",
             "Warning"),
            id="job-update",
        ),
        pytest.param(
            [create_claim()],
            ("False", "JobsCreated", "no Job creation is failing", None),
            ("False", "NoFailedWrites", "no write is failing", None),
            id="claims-are-volumes-ready",
        ),
    ],
)  # fmt: skip
def test_job_and_child_conditions(
    failures: list[Failure],
    jobs: tuple[str, str, str, str | None],
    others: tuple[str, str, str, str | None],
) -> None:
    assert _row(writefailures.job_creation(failures)) == jobs
    assert _row(writefailures.child_writes(failures)) == others


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (create_claim(), "PVCCreationFailed"),
        (Failure(Write.PATCH_CLAIM, "c", "m", "ClaimRetainedFailed"), "ClaimRetainedFailed"),
        (Failure(Write.DELETE_CLAIM, "c", "m"), "ClaimDeletionFailed"),
        (create_job("j"), "JobCreationFailed"),
        (held("j"), "JobConflict"),
        (Failure(Write.CREATE_SERVICE, "s", "m"), "HeadlessServiceCreationFailed"),
        (Failure(Write.UPDATE_JOB, "j", "m"), "JobUpdateFailed"),
        (Failure(Write.DELETE_JOB, "j", "m"), "JobDeletionFailed"),
    ],
)
def test_event_reason(failure: Failure, reason: str) -> None:
    assert writefailures.event_reason(failure) == reason


def _job(**metadata: Any) -> Obj:
    return {"metadata": {"name": "js-a-0", **metadata}}


def _ref(kind: str, name: str, uid: str, controller: bool) -> Obj:
    return {"apiVersion": "v1", "kind": kind, "name": name, "uid": uid, "controller": controller}


@pytest.mark.parametrize(
    ("job", "text"),
    [
        pytest.param(_job(), "no owner", id="orphaned"),
        pytest.param(_job(ownerReferences=[]), "no owner", id="empty-refs"),
        pytest.param(
            _job(ownerReferences=[_ref("ConfigMap", "a", "u1", False),
                                  _ref(api.KIND, "js", "old-uid", True)]),
            "owned by JobSet js (uid old-uid)",
            id="controller-ref-first",
        ),
        pytest.param(
            _job(ownerReferences=[_ref("ConfigMap", "a", "u1", False)]),
            "owned by ConfigMap a (uid u1)",
            id="only-non-controller",
        ),
        pytest.param(
            _job(deletionTimestamp="2025-01-01T12:00:00Z"), "no owner, being deleted",
            id="being-deleted",
        ),
        pytest.param({"metadata": "garbage"}, "no owner", id="malformed"),
    ],
)  # fmt: skip
def test_owner_of(job: Obj, text: str) -> None:
    assert writefailures.owner_of(job) == text


@pytest.mark.parametrize(
    ("status", "reason", "expected"),
    [
        (403, "Forbidden", True),  # quota, RBAC, a terminating namespace
        (422, "Invalid", True),
        (400, "BadRequest", True),
        (404, "NotFound", False),
        (408, "Timeout", False),
        (409, "Conflict", False),
        (409, "AlreadyExists", False),
        (429, "TooManyRequests", False),
        (500, "InternalError", False),
        (503, "ServiceUnavailable", False),
    ],
)
def test_refused(status: int, reason: str, expected: bool) -> None:
    err = ApiError(status, {"reason": reason, "message": "m"}, "POST", "/x")
    assert writefailures.refused(err) is expected


def test_held_jobs_only_wanted_names() -> None:
    others: dict[str, Obj] = {"js-a-0": _job(), "js-z-9": _job()}
    assert writefailures.held_jobs(["js-a-0", "js-a-1"], others) == [held("js-a-0")]


# ----------------------------------------------------------------------------- with decide

CLAIM_SPEC: Obj = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
MOUNTS = [{"name": "data", "mountPath": "/data"}]
# leader mounts nothing; the worker mounts the JobSet-scope claim data-js.
RJOBS = [
    rjob("leader"),
    rjob("workers", pod_spec={"containers": [{"name": "m", "image": "b", "volumeMounts": MOUNTS}]}),
]
VOLUMES: Obj = {"volumeClaimPolicies": [{"templates": [{"metadata": {"name": "data"},
                                                         "spec": CLAIM_SPEC}]}]}  # fmt: skip


def _decide(
    stored: list[Obj] | None = None,
    failures: tuple[Failure, ...] = (),
    others: dict[str, Obj] | None = None,
    plain: bool = False,
) -> Plan:
    """``plain``: two replicated jobs without volumes."""
    rjobs, spec = ([rjob("leader"), rjob("workers")], {}) if plain else (RJOBS, VOLUMES)
    raw = make_jobset_obj(replicated_jobs=rjobs, spec=spec, conditions=stored)
    raw["metadata"]["finalizers"] = [volumes.FINALIZER]
    jobset = model.parse(raw)
    return decide(jobset, [], {"metadata": {"name": "js"}}, T0, others=others, failures=failures)


def _conditions(plan: Plan) -> dict[str, tuple[str, str]]:
    assert plan.status is not None
    return {c.type: (c.status, c.reason) for c in plan.status.conditions}


def test_refused_claim_in_status_and_unrelated_job_created() -> None:
    first = _decide()
    # Before the writes, the plan creates the claim and counts it as Pending; the leader, which
    # mounts nothing, is created in the same pass.
    assert first.volume is not None
    assert [c.name for c in first.volume.create] == ["data-js"]
    assert [j["metadata"]["name"] for j in first.create_jobs] == ["js-leader-0"]
    assert _conditions(first)["VolumesReady"] == ("False", "ClaimsPending")

    told = _decide(failures=(create_claim(),))
    assert _conditions(told)["VolumesReady"] == ("False", "PVCCreationFailed")
    assert told.status is not None
    assert told.status.volumes is not None
    (template,) = told.status.volumes.templates
    assert (template.desired, template.existing, template.pending) == (1, 0, 0)
    assert [(e.type, e.reason) for e in told.events] == [("Warning", "PVCCreationFailed")]
    assert QUOTA in told.events[0].message

    # The retry: the same refusal, already stored, changes no condition and announces nothing.
    written = told.status.to_dict()["conditions"]
    again = _decide(stored=copy.deepcopy(written), failures=(create_claim(),))
    assert again.status is not None and again.status.conditions == told.status.conditions
    assert again.events == []


def test_held_job_name_not_created_and_reported() -> None:
    plan = _decide(plain=True, others={"js-leader-0": _job(name="js-leader-0")})
    assert [j["metadata"]["name"] for j in plan.create_jobs] == ["js-workers-0"]
    assert _conditions(plan)["JobCreationFailed"] == ("True", "JobConflict")
    assert [(e.type, e.reason) for e in plan.events] == [("Warning", "JobConflict")]
    assert "js-leader-0 exists and is not this JobSet's (no owner)" in plan.events[0].message


def test_cleared_once_nothing_fails() -> None:
    stored = [
        {"type": "JobCreationFailed", "status": "True", "reason": "JobCreationFailed",
         "message": "could not create Job js-leader-0: no", "lastTransitionTime": "x",
         "observedGeneration": 1},
    ]  # fmt: skip
    plan = _decide(plain=True, stored=stored)
    assert _conditions(plan)["JobCreationFailed"] == ("False", "JobsCreated")
    assert plan.events == []
    # Never added as False: a JobSet that never failed has no such condition.
    assert "JobCreationFailed" not in _conditions(_decide(plain=True))
