"""The lease protocol and the write fence, with a controllable clock and an in-memory lease.

(The real thing — two processes, kill -9, SIGSTOP — is in tests/integration.)
"""

from __future__ import annotations

import copy
import datetime
from typing import Any

import pytest

from controller.runtime.client import ApiError, KubeClient, Resource
from controller.runtime.leaderelection import LeaderElectionConfig, LeaderElector


class LeaseTable:
    """Just enough of the API server for one Lease: get, create, optimistic replace."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.gets = 0

    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Any:
        self.gets += 1
        if self.lease is None:
            raise ApiError(404, {"reason": "NotFound"}, "GET", name)
        return copy.deepcopy(self.lease)

    async def create(self, resource: Resource, obj: Any, namespace: str | None = None) -> Any:
        if self.lease is not None:
            raise ApiError(409, {"reason": "AlreadyExists"}, "POST", "lease")
        self.version += 1
        self.lease = copy.deepcopy(obj)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.lease)

    async def replace(self, resource: Resource, obj: Any, namespace: str | None = None) -> Any:
        assert self.lease is not None
        if obj["metadata"]["resourceVersion"] != self.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, {"reason": "Conflict"}, "PUT", "lease")
        self.version += 1
        self.lease = copy.deepcopy(obj)
        self.lease["metadata"]["resourceVersion"] = str(self.version)
        return copy.deepcopy(self.lease)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


CONFIG: dict[str, Any] = {"lease_name": "l", "namespace": "ns", "lease_duration": 15,
                          "renew_deadline": 10, "retry_period": 2}  # fmt: skip


def elector(table: LeaseTable, identity: str, clock: Clock) -> LeaderElector:
    epoch = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

    def wall() -> datetime.datetime:
        return epoch + datetime.timedelta(seconds=clock.now)

    client: KubeClient = table  # type: ignore[assignment]
    return LeaderElector(
        client, LeaderElectionConfig(identity=identity, **CONFIG), clock=clock, wall_clock=wall
    )


async def test_first_candidate_leads_and_second_waits_out_the_lease() -> None:
    table, clock_a, clock_b = LeaseTable(), Clock(), Clock()
    a, b = elector(table, "a", clock_a), elector(table, "b", clock_b)
    assert await a.try_acquire_or_renew()
    assert not await b.try_acquire_or_renew()
    clock_b.now += 14.9
    assert not await b.try_acquire_or_renew()
    clock_b.now += 0.2  # b has now seen the same record for more than lease_duration
    assert await b.try_acquire_or_renew()
    assert table.lease is not None
    assert table.lease["spec"]["holderIdentity"] == "b"
    assert table.lease["spec"]["leaseTransitions"] == 1


async def test_renewals_keep_the_standby_out() -> None:
    table, clock_a, clock_b = LeaseTable(), Clock(), Clock()
    a, b = elector(table, "a", clock_a), elector(table, "b", clock_b)
    assert await a.try_acquire_or_renew()
    for _ in range(20):
        clock_a.now += 2
        clock_b.now += 2
        assert await a.try_acquire_or_renew()
        assert not await b.try_acquire_or_renew()
    assert table.lease is not None
    assert table.lease["spec"]["leaseTransitions"] == 0


async def test_fence_closes_renew_deadline_after_the_last_renewal() -> None:
    table, clock = LeaseTable(), Clock()
    a = elector(table, "a", clock)
    assert not a.is_leader()
    assert await a.try_lead()
    assert a.is_leader()
    clock.now += 9.9
    assert a.is_leader()
    clock.now += 0.2
    assert not a.is_leader()  # frozen or partitioned past the renew deadline: no more writes


async def test_release_lets_a_standby_take_over_at_once() -> None:
    table, clock_a, clock_b = LeaseTable(), Clock(), Clock()
    a, b = elector(table, "a", clock_a), elector(table, "b", clock_b)
    assert await a.try_lead()
    assert not await b.try_acquire_or_renew()
    await a.release()
    assert not a.is_leader()
    assert await b.try_acquire_or_renew()


async def test_a_concurrent_update_makes_the_attempt_fail() -> None:
    table, clock = LeaseTable(), Clock()
    a = elector(table, "a", clock)
    assert await a.try_acquire_or_renew()
    original_get = table.get

    async def racing_get(*args: Any, **kwargs: Any) -> Any:
        seen = await original_get(*args, **kwargs)
        table.version += 1  # someone else wrote in between
        assert table.lease is not None
        table.lease["metadata"]["resourceVersion"] = str(table.version)
        return seen

    table.get = racing_get  # type: ignore[method-assign]
    assert not await a.try_acquire_or_renew()


async def test_the_leader_renews_without_reading_the_lease() -> None:
    # client-go's optimistic renewal: one PUT per renewal, no GET before it.
    table, clock = LeaseTable(), Clock()
    a = elector(table, "a", clock)
    assert await a.try_lead()
    gets = table.gets
    for _ in range(10):
        clock.now += 2
        assert await a.try_acquire_or_renew()
    assert table.gets == gets
    assert table.version == 11
    assert table.lease is not None
    assert table.lease["spec"]["renewTime"] == "2026-01-01T00:17:00.000000Z"


async def test_an_edited_lease_makes_the_leader_read_it_and_renew() -> None:
    table, clock = LeaseTable(), Clock()
    a = elector(table, "a", clock)
    assert await a.try_lead()
    assert table.lease is not None
    table.version += 1  # an operator's edit: the leader's copy is stale now
    table.lease["metadata"]["resourceVersion"] = str(table.version)
    table.lease["metadata"]["labels"] = {"edited": "yes"}
    gets = table.gets
    clock.now += 2
    assert await a.try_acquire_or_renew()
    assert table.gets == gets + 1
    assert table.lease["metadata"]["labels"] == {"edited": "yes"}  # read, not overwritten
    assert table.lease["spec"]["holderIdentity"] == "a"


async def test_a_leader_whose_lease_was_taken_does_not_renew_it() -> None:
    table, clock_a, clock_b = LeaseTable(), Clock(), Clock()
    a, b = elector(table, "a", clock_a), elector(table, "b", clock_b)
    assert await a.try_lead()
    clock_b.now += 16  # a was frozen; b has waited out the lease and takes it
    assert not await b.try_acquire_or_renew()
    clock_b.now += 16
    assert await b.try_acquire_or_renew()
    clock_a.now += 5  # a resumes inside its own renew deadline: its optimistic PUT conflicts
    assert a.is_leader()
    assert not await a.try_acquire_or_renew()
    assert table.lease is not None
    assert table.lease["spec"]["holderIdentity"] == "b"


def test_inconsistent_durations_are_rejected() -> None:
    with pytest.raises(ValueError, match="lease_duration > renew_deadline"):
        LeaderElectionConfig("l", "ns", "a", lease_duration=5, renew_deadline=10, retry_period=2)
