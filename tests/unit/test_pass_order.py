"""The order of a pass's writes: the reconciler makes them in ``passes.WRITE_ORDER``, each kind's
writes all done before the next kind's start. A pure ordering check: ``decide`` is replaced by a
plan with writes of every kind, and a recording client answers every request at once (what the
API server does with them is for the integration tests)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any, cast

import pytest

from controller.jobset import api, volumes
from controller.jobset import reconciler as reconcilermod
from controller.jobset.decide import Plan
from controller.jobset.jobsetstatus import JobSetStatus
from controller.jobset.model import parse
from controller.jobset.passes import WRITE_ORDER
from controller.jobset.reconciler import JobSetReconciler
from controller.jobset.status import Event
from controller.jobset.volumes import VolumePlan
from controller.jobset.volumes.lifecycle import ClaimDelete, ClaimPatch
from controller.jobset.volumes.record import read_record, uid_prefix
from controller.runtime.client import CLAIMS, JOBS, SERVICES, VOLUME_SNAPSHOTS, ApiError, Resource
from controller.runtime.store import Obj
from tests.unit.volumes.factories import make_obj, tpl

KEY = "default/js"

# (verb, resource, subresource) -> the kind of write (passes.WRITE_ORDER)
KINDS = {
    ("patch", api.JOBSETS, ""): "add finalizer",
    ("create", CLAIMS, ""): "create claims",
    ("patch", CLAIMS, ""): "patch claims",
    ("create", VOLUME_SNAPSHOTS, ""): "create snapshots",
    ("delete", VOLUME_SNAPSHOTS, ""): "delete snapshots",
    ("delete", CLAIMS, ""): "delete claims",
    ("create", SERVICES, ""): "create service",
    ("create", JOBS, ""): "create jobs",
    ("delete", JOBS, ""): "delete jobs",
    ("patch", JOBS, "status"): "clear startTime",
    ("patch", JOBS, ""): "patch jobs",
    ("replace", api.JOBSETS, "status"): "write status",
    ("delete", api.JOBSETS, ""): "delete jobset",
}


class RecordingClient:
    """Answers every write at once, as accepted, and records its kind."""

    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.version = 1
        self.versions: dict[str, int] = {}  # kind -> the resourceVersion of its last answer
        self.bodies: dict[str, Obj] = {}  # kind -> the body of its last request
        self.claim_uids: dict[str, str] = {}  # claim created -> the uid of the answer

    def _answer(self, verb: str, resource: Resource, body: Obj, subresource: str = "") -> Obj:
        kind = KINDS[(verb, resource, subresource)]
        self.kinds.append(kind)
        self.version += 1
        self.versions[kind] = self.version
        self.bodies[kind] = copy.deepcopy(body)
        answer = copy.deepcopy(body)
        meta = answer.setdefault("metadata", {})
        meta.update(resourceVersion=str(self.version), uid=f"uid-{self.version}")
        if kind == "create claims":
            self.claim_uids[meta["name"]] = meta["uid"]
        return answer

    async def create(self, resource: Resource, obj: Obj, namespace: str | None = None) -> Obj:
        await asyncio.sleep(0)  # the other writes of the kind are in flight meanwhile
        return self._answer("create", resource, obj)

    async def patch(
        self, resource: Resource, name: str, patch: object, namespace: str | None = None,
        *, patch_type: str = "merge", subresource: str = "",
    ) -> Obj:  # fmt: skip
        await asyncio.sleep(0)
        return self._answer("patch", resource, {"metadata": {"name": name}}, subresource)

    async def delete(
        self, resource: Resource, name: str, namespace: str | None = None,
        *, propagation: str | None = None, precondition_uid: str | None = None,
        precondition_resource_version: str | None = None,
    ) -> Obj:  # fmt: skip
        await asyncio.sleep(0)
        return self._answer("delete", resource, {"metadata": {"name": name}})

    async def replace(
        self, resource: Resource, obj: Obj, namespace: str | None = None, *, subresource: str = ""
    ) -> Obj:
        await asyncio.sleep(0)
        return self._answer("replace", resource, obj, subresource)


class OneJobSet:
    """The caches of one JobSet without children."""

    def __init__(self, obj: Obj) -> None:
        self.obj = obj

    def get(self, namespace: str | None, name: str) -> Obj | None:
        return self.obj if name == self.obj["metadata"]["name"] else None

    def add_handler(self, handler: object) -> None:
        """No objects to replay, and none ever change."""

    def by_index(self, index: str, value: str) -> list[Obj]:
        return []


class Recorder:
    def event(self, obj: Obj, event_type: str, reason: str, message: str) -> None:
        pass


def _snapshot(claim: str) -> Obj:
    return {
        "metadata": {"name": f"{claim}-0123abcd"},
        "spec": {"source": {"persistentVolumeClaimName": claim}},
    }


def _plan_of_every_kind(obj: Obj) -> Plan:
    """Two writes of each kind that can have several (one finalizer, service, status, delete)."""
    jobset = parse(obj)
    desired = volumes.model(jobset).desired
    assert len(desired) == 2
    patch = ClaimPatch("kept", {"metadata": {"labels": {"a": "b"}}}, "ClaimAdopted", "adopted")
    job: Obj = {"metadata": {"name": "js-workers-0"}, "spec": {}}
    return Plan(
        volume=VolumePlan(
            create=list(desired),
            patch=[patch, ClaimPatch("kept-2", patch.patch, "ClaimAdopted", "adopted")],
            delete=[ClaimDelete("gone", "u1", "1"), ClaimDelete("gone-2", "u2", "2")],
            add_finalizer=True,
            create_snapshots=[_snapshot("kept-3"), _snapshot("kept-4")],
            delete_snapshots=["old-snapshot", "old-snapshot-2"],
        ),
        create_service={"metadata": {"name": "js"}},
        create_jobs=[job, {**job, "metadata": {"name": "js-workers-1"}}],
        delete_jobs=["old-0", "old-1"],
        clear_start_time=["resumed-0", "resumed-1"],
        patch_jobs=[("resumed-0", {"spec": {}}), ("resumed-1", {"spec": {}})],
        status=JobSetStatus(restarts=1),
        events=[Event("Normal", "Restarted", "restarted")],
        delete_jobset=True,
    )


def test_a_pass_writes_in_the_write_order(monkeypatch: pytest.MonkeyPatch) -> None:
    obj = make_obj([{"templates": [tpl("data")], "scope": "Job"}])
    obj["metadata"]["resourceVersion"] = "1"
    plan = _plan_of_every_kind(obj)
    monkeypatch.setattr(reconcilermod, "decide", lambda *args, **kwargs: copy.copy(plan))
    client = RecordingClient()
    cache = cast(Any, OneJobSet(obj))
    reconciler = JobSetReconciler(cast(Any, client), cast(Any, Recorder()), cache, cache, cache)
    result = asyncio.run(reconciler.reconcile(KEY))
    several = {"create claims", "patch claims", "create snapshots", "delete snapshots",
               "delete claims", "create jobs", "delete jobs", "clear startTime",
               "patch jobs"}  # fmt: skip
    assert client.kinds == [k for k in WRITE_ORDER for _ in range(2 if k in several else 1)]
    assert result.requeue is False
    # What the pass leaves in memory: its last write (the status), the Jobs it created.
    memory = reconciler.memory(KEY)
    assert memory is not None
    assert memory.written == client.versions["write status"]
    assert sorted(memory.expected) == ["js-workers-0", "js-workers-1"]


def test_the_status_written_is_the_value_over_the_stored_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The plan's status becomes the API's dict only in the write: over the stored status (a
    field this version does not read is kept), with the uids of the claims the pass created
    (from the API server's answers) in its record."""
    obj = make_obj([{"templates": [tpl("data")], "scope": "Job"}])
    obj["metadata"]["resourceVersion"] = "1"
    obj["status"] = {"restarts": 0, "fromANewerVersion": {"a": 1}}
    plan = _plan_of_every_kind(obj)
    monkeypatch.setattr(reconcilermod, "decide", lambda *args, **kwargs: copy.copy(plan))
    client = RecordingClient()
    cache = cast(Any, OneJobSet(obj))
    reconciler = JobSetReconciler(cast(Any, client), cast(Any, Recorder()), cache, cache, cache)
    asyncio.run(reconciler.reconcile(KEY))
    written = client.bodies["write status"]["status"]
    assert written["fromANewerVersion"] == {"a": 1}
    value = JobSetStatus.parse(written)
    assert value.restarts == 1
    assert plan.volume is not None
    assert sorted(client.claim_uids) == sorted(c.name for c in plan.volume.create)
    assert read_record(value.volumes).uids == {
        claim.slot: uid_prefix(client.claim_uids[claim.name]) for claim in plan.volume.create
    }


class FailingSecondClaim(RecordingClient):
    """Creates the first claim of a pass, then the API server fails (500) on the second."""

    def __init__(self) -> None:
        super().__init__()
        self.asked = 0  # claim creates asked for

    async def create(self, resource: Resource, obj: Obj, namespace: str | None = None) -> Obj:
        if resource == CLAIMS:
            self.asked += 1
            if self.asked > 1:
                raise ApiError(500, {"message": "etcd timed out"}, "POST", "claims")
        return await super().create(resource, obj, namespace)


def test_claims_created_before_a_failure_are_recorded_before_it_goes_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pass that created some claims and then met an error records their uids in the status
    (its only write after them) before the error sends the key back: a later pass could not tell
    them from copies otherwise."""
    obj = make_obj([{"templates": [tpl("data")], "scope": "Job"}])
    obj["metadata"]["resourceVersion"] = "1"
    obj["status"] = {"restarts": 0, "fromANewerVersion": {"a": 1}}
    plan = _plan_of_every_kind(obj)
    monkeypatch.setattr(reconcilermod, "decide", lambda *args, **kwargs: copy.copy(plan))
    client = FailingSecondClaim()
    cache = cast(Any, OneJobSet(obj))
    reconciler = JobSetReconciler(cast(Any, client), cast(Any, Recorder()), cache, cache, cache)
    with pytest.raises(ApiError):
        asyncio.run(reconciler.reconcile(KEY))
    assert client.kinds == ["add finalizer", "create claims", "write status"]
    written = client.bodies["write status"]["status"]
    assert written["fromANewerVersion"] == {"a": 1}
    value = JobSetStatus.parse(written)
    assert value.restarts == 0  # the plan's own status is not written: only the record
    assert plan.volume is not None
    (made,) = client.claim_uids
    (claim,) = [c for c in plan.volume.create if c.name == made]
    assert read_record(value.volumes).uids == {claim.slot: uid_prefix(client.claim_uids[made])}
    memory = reconciler.memory(KEY)
    assert memory is not None and memory.written == client.versions["write status"]
