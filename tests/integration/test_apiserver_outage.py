"""An API server outage is survived: replicas keep trying instead of exiting.

Found by the chaos soak: a refused connection used to escape the lease loop, so every replica
(the standby too) exited at once when kube-apiserver went away. As in client-go, a standby keeps
trying to acquire, and a leader keeps trying to renew until its renew deadline; only a leader
that could not renew in time steps down (exit 1, restarted as a standby by its pod).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from kubernetes_asyncio import config

from controller.runtime.client import LEASES, ApiError, KubeClient
from localcluster.cluster import LocalCluster
from tests.support.replicas import Replica, start_replica, wait_until


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """A cluster of this test's own: restarting the shared one would disturb other tests."""
    with LocalCluster(tmp_path / "c", profile="apiserver") as cluster:
        yield cluster


@pytest.fixture
async def client(own_cluster: LocalCluster) -> AsyncIterator[KubeClient]:
    api = await config.new_client_from_config(config_file=str(own_cluster.kubeconfig))
    async with api:
        yield KubeClient(api)


async def _holder(client: KubeClient, lease: str) -> str:
    try:
        obj = await client.get(LEASES, lease, "default")
    except (ApiError, OSError):
        return ""
    return str((obj.get("spec") or {}).get("holderIdentity") or "")


async def _wait_holder(client: KubeClient, lease: str, among: set[str]) -> str:
    for _ in range(600):
        current = await _holder(client, lease)
        if current in among:
            return current
        await asyncio.sleep(0.1)
    raise AssertionError(f"no lease holder among {sorted(among)} within 60 s")


async def test_standby_survives_an_api_server_outage_and_leads_afterwards(
    own_cluster: LocalCluster, client: KubeClient, tmp_path: Path
) -> None:
    lease = f"outage-{uuid.uuid4().hex[:6]}"
    replicas: dict[str, Replica] = {}
    try:
        for name in ("replica-a", "replica-b"):
            replicas[name] = start_replica(
                own_cluster.kubeconfig, "default", name, tmp_path, lease_name=lease
            )
        leader = await _wait_holder(client, lease, set(replicas))
        standby = next(r for name, r in replicas.items() if name != leader)
        # Down longer than the renew deadline (4 s): the leader must step down; the standby
        # must not exit at all.
        own_cluster.restart_apiserver(down_seconds=6)
        await wait_until(lambda: True, "nothing")  # let the replicas notice the API is back
        assert standby.process.running(), (
            "the standby exited during the outage:\n" + standby.process.log_path.read_text()[-2000:]
        )
        failures = [
            line for line in standby.log_lines() if line.get("event") == "controllers failed"
        ]
        assert failures == []
        alive = {name for name, r in replicas.items() if r.process.running()}
        assert standby.identity in alive
        await _wait_holder(client, lease, alive)
        assert standby.process.running()
    finally:
        for replica in replicas.values():
            replica.process.kill()
