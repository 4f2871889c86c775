"""Leader election with two real controller processes against the real API server."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controller.runtime.client import CONFIG_MAPS, LEASES, ClientMetrics, KubeClient
from controller.runtime.leaderelection import LeaderElectionConfig, LeaderElector
from tests.helpers import Kube
from tests.support.recording import watch_events
from tests.support.replicas import Replica, start_replica, wait_holder, wait_stopped, wait_until

ANNOTATION = "sample.test/echo"

Obj = dict[str, Any]


@pytest.fixture
def lease_name() -> str:
    return f"sample-{uuid.uuid4().hex[:6]}"


@pytest.fixture
async def client(kube: Kube) -> AsyncIterator[KubeClient]:
    yield KubeClient(kube.api)


@pytest.fixture
def pair(
    kube: Kube, namespace: str, lease_name: str, tmp_path: Path
) -> Iterator[tuple[Replica, Replica]]:
    replicas: list[Replica] = []
    try:
        for name in ("replica-a", "replica-b"):
            replicas.append(
                start_replica(
                    kube.cluster.kubeconfig, namespace, name, tmp_path, lease_name=lease_name
                )
            )
        yield replicas[0], replicas[1]
    finally:
        for replica in replicas:
            replica.process.kill()


async def _echoed(client: KubeClient, namespace: str, name: str, value: str) -> bool:
    obj = await client.get(CONFIG_MAPS, name, namespace)
    return (obj["metadata"].get("annotations") or {}).get(ANNOTATION) == value


async def _sample_cm(client: KubeClient, namespace: str, name: str, value: str) -> None:
    body = {"metadata": {"name": name, "labels": {"sample": "yes"}}, "data": {"v": value}}
    await client.create(CONFIG_MAPS, body, namespace)


async def _wait_echo(client: KubeClient, namespace: str, name: str, value: str) -> None:
    started = time.monotonic()
    while time.monotonic() - started < 60:
        if await _echoed(client, namespace, name, value):
            return
        await asyncio.sleep(0.1)
    raise AssertionError(f"configmap {name} was not echoed with {value!r} within 60s")


def _by_name(pair: tuple[Replica, Replica]) -> dict[str, Replica]:
    return {r.identity: r for r in pair}


async def test_exactly_one_leader_and_it_reconciles(
    client: KubeClient, namespace: str, lease_name: str, pair: tuple[Replica, Replica]
) -> None:
    leader = await wait_holder(client, namespace, lease_name, {"replica-a", "replica-b"})
    for replica in pair:
        await wait_until(lambda r=replica: r.get("/readyz")[0] == 200, f"{replica.identity} ready")
    expected = {r.identity: 1.0 if r.identity == leader else 0.0 for r in pair}

    def statuses() -> dict[str, float | None]:
        return {
            r.identity: r.sample("leader_election_master_status", name=lease_name) for r in pair
        }

    # Polled: the leader sets its gauge once its Lease write is answered, which may be after
    # the test reads the Lease; the standby's gauge is 0 from the start.
    await wait_until(lambda: statuses() == expected, f"the gauges to say {expected}")
    await _sample_cm(client, namespace, "one", "1")
    await _wait_echo(client, namespace, "one", "1")


def _records(seen: list[Obj], lease_name: str) -> list[Obj]:
    """The Lease's specs as the test's watch saw them written, in order."""
    return [
        e["object"]["spec"]
        for e in seen
        if e["object"].get("kind") == "Lease" and e["object"]["metadata"]["name"] == lease_name
    ]


def _expires(record: Obj) -> datetime.datetime:
    """When the Lease as ``record`` holds it expires, unless renewed."""
    renewed = datetime.datetime.fromisoformat(record["renewTime"])
    return renewed + datetime.timedelta(seconds=record["leaseDurationSeconds"])


def _acquired(record: Obj) -> datetime.datetime:
    return datetime.datetime.fromisoformat(record["acquireTime"])


async def _until_held(seen: list[Obj], lease_name: str, identity: str) -> list[Obj]:
    """Wait until the watch has a record of the Lease held by ``identity``; the records up to
    the first such one. (Once one renewal by a leader is in the watch, its last one before the
    test stops it will be too.)"""

    def held(record: Obj) -> bool:
        return record.get("holderIdentity") == identity

    await wait_until(
        lambda: any(map(held, _records(seen, lease_name))),
        f"a record of the Lease held by {identity} in the watch",
    )
    records = _records(seen, lease_name)
    first = next(i for i, r in enumerate(records) if held(r))
    return records[: first + 1]


async def test_kill_9_of_the_leader_hands_over_once_the_lease_expires(
    client: KubeClient, namespace: str, lease_name: str, pair: tuple[Replica, Replica]
) -> None:
    """A leader killed cannot release: the standby takes the Lease over only once the leader's
    last renewal has expired (never two leaders), and counts the transition. How long that
    takes is a benchmark's (docs/performance.md, failover), not an assertion."""
    replicas = _by_name(pair)
    async with watch_events(client, namespace, (LEASES,)) as seen:
        leader = await wait_holder(client, namespace, lease_name, set(replicas))
        standby = next(name for name in replicas if name != leader)
        await _until_held(seen, lease_name, leader)
        replicas[leader].process.kill()
        records = await _until_held(seen, lease_name, standby)
    last, taken = records[-2], records[-1]
    assert last["holderIdentity"] == leader, records  # nothing in between: no release
    # Both times are written from this host's clock; the standby measures the expiry on its
    # monotonic clock, which may drift from the wall clock by a few ms at most.
    slack = datetime.timedelta(milliseconds=50)
    assert _acquired(taken) >= _expires(last) - slack, (last, taken)
    assert taken["leaseTransitions"] == last.get("leaseTransitions", 0) + 1, (last, taken)
    await _sample_cm(client, namespace, "after-kill", "2")
    await _wait_echo(client, namespace, "after-kill", "2")


async def test_sigterm_releases_the_lease_for_an_immediate_takeover(
    client: KubeClient, namespace: str, lease_name: str, pair: tuple[Replica, Replica]
) -> None:
    """On SIGTERM the leader writes the Lease free (no holder, a one-second duration) before it
    exits, and the standby takes it over from that release, before the leader's last renewal
    would have expired."""
    replicas = _by_name(pair)
    async with watch_events(client, namespace, (LEASES,)) as seen:
        leader = await wait_holder(client, namespace, lease_name, set(replicas))
        standby = next(name for name in replicas if name != leader)
        await wait_until(lambda: replicas[standby].get("/readyz")[0] == 200, "standby ready")
        await _until_held(seen, lease_name, leader)
        process = replicas[leader].process
        assert process.popen is not None
        process.popen.send_signal(signal.SIGTERM)
        records = await _until_held(seen, lease_name, standby)
    assert process.popen.wait(timeout=30) == 0
    renewed, released, taken = records[-3:]
    assert renewed["holderIdentity"] == leader, records
    assert (released.get("holderIdentity"), released["leaseDurationSeconds"]) == (None, 1)
    assert _acquired(taken) < _expires(renewed), (renewed, released, taken)
    assert any(line.get("msg") == "released the lease" for line in replicas[leader].log_lines())


def _requests(registry: CollectorRegistry, method: str) -> float:
    return sum(
        sample.value
        for metric in registry.collect()
        for sample in metric.samples
        if sample.name == "rest_client_requests_total" and sample.labels["method"] == method
    )


async def test_the_leader_renews_with_an_update_and_no_read(
    kube: Kube, namespace: str, lease_name: str
) -> None:
    """client-go's optimistic renewal against the real API server: once leading, each renewal is
    one PUT and no GET; a Lease edited behind the leader's back costs one GET, then it renews."""
    registry = CollectorRegistry()
    leader_client = KubeClient(kube.api, metrics=ClientMetrics(registry))
    config = LeaderElectionConfig(lease_name, namespace, "leader", 15, 10, 2)
    leader = LeaderElector(leader_client, config, registry=registry)
    assert await leader.try_lead()
    gets, puts = _requests(registry, "GET"), _requests(registry, "PUT")
    for _ in range(5):
        assert await leader.try_acquire_or_renew()
    assert _requests(registry, "GET") == gets
    assert _requests(registry, "PUT") == puts + 5

    other = KubeClient(kube.api)
    lease = await other.get(LEASES, lease_name, namespace)
    lease["metadata"]["labels"] = {"edited": "by-hand"}
    await other.replace(LEASES, lease, namespace)
    assert await leader.try_acquire_or_renew()
    assert _requests(registry, "GET") == gets + 1
    renewed = await other.get(LEASES, lease_name, namespace)
    assert renewed["metadata"]["labels"] == {"edited": "by-hand"}
    assert renewed["spec"]["holderIdentity"] == "leader"
    assert renewed["spec"]["renewTime"] != lease["spec"]["renewTime"]


def _audit_writes_by(
    audit_log: Path, identity: str, since: datetime.datetime
) -> list[dict[str, Any]]:
    writes = []
    for raw in audit_log.read_text().splitlines():
        entry = json.loads(raw)
        if not str(entry.get("userAgent", "")).startswith(f"stateful-jobset/{identity}"):
            continue
        if entry.get("verb") not in ("create", "update", "patch", "delete"):
            continue
        resource = (entry.get("objectRef") or {}).get("resource")
        if resource == "leases":
            continue  # the election protocol itself; a stale lease write would be rejected anyway
        received = datetime.datetime.fromisoformat(entry["requestReceivedTimestamp"])
        if received >= since:
            writes.append(entry)
    return writes


async def test_frozen_leader_makes_no_write_after_losing_the_lease(
    kube: Kube,
    client: KubeClient,
    namespace: str,
    lease_name: str,
    pair: tuple[Replica, Replica],
) -> None:
    replicas = _by_name(pair)
    leader = await wait_holder(client, namespace, lease_name, set(replicas))
    standby = next(name for name in replicas if name != leader)
    await _sample_cm(client, namespace, "busy", "0")
    await _wait_echo(client, namespace, "busy", "0")

    frozen = replicas[leader].process
    assert frozen.pid is not None
    os.kill(frozen.pid, signal.SIGSTOP)
    await wait_stopped(frozen.pid)  # its writes until then are not after the freeze
    frozen_at = datetime.datetime.now(datetime.UTC)
    try:
        await wait_holder(client, namespace, lease_name, {standby})
        # Work for whoever leads: the new leader must do it.
        await client.patch(CONFIG_MAPS, "busy", {"data": {"v": "1"}}, namespace)
        await _wait_echo(client, namespace, "busy", "1")
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    # On resume the old leader sees the same change (and more) and would write if unfenced.
    await client.patch(CONFIG_MAPS, "busy", {"data": {"v": "2"}}, namespace)
    await _wait_echo(client, namespace, "busy", "2")
    assert frozen.popen is not None
    assert frozen.popen.wait(timeout=30) == 1, "the old leader should exit after losing the lease"
    assert _audit_writes_by(kube.cluster.audit_log, leader, frozen_at) == []
    assert _audit_writes_by(kube.cluster.audit_log, standby, frozen_at) != []
