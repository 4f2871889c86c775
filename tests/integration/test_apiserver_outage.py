"""An API server outage is survived: replicas keep trying instead of exiting, and a request to an
API server that stopped answering gives up instead of holding its worker.

Found by the chaos soak: a refused connection used to escape the lease loop, so every replica
(the standby too) exited at once when kube-apiserver went away. As in client-go, a standby keeps
trying to acquire, and a leader keeps trying to renew until its renew deadline; only a leader
that could not renew in time steps down (exit 1, restarted as a standby by its pod).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest
from kubernetes_asyncio import config

from controller.runtime.client import NAMESPACES, KubeClient
from localcluster.cluster import LocalCluster
from tests.support.replicas import (
    Replica,
    start_replica,
    thread_states,
    wait_holder,
    wait_stopped,
    wait_until,
)


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
        leader = await wait_holder(client, "default", lease, set(replicas))
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
        await wait_holder(client, "default", lease, alive)
        assert standby.process.running()
    finally:
        for replica in replicas.values():
            replica.process.kill()


async def test_a_request_to_a_frozen_api_server_times_out_and_the_next_one_succeeds(
    own_cluster: LocalCluster,
) -> None:
    """A frozen kube-apiserver (SIGSTOP: its connections stay open, nothing answers) stands for
    a host gone without a reset. Requests used to have no timeout at all and waited on such a
    connection until the kernel gave up on it, about 15 minutes, holding their reconcile worker."""
    api = await config.new_client_from_config(config_file=str(own_cluster.kubeconfig))
    async with api:
        client = KubeClient(api, read_timeout=2)
        await client.get(NAMESPACES, "default")  # a pooled connection to reuse
        apiserver = own_cluster.pids()["kube-apiserver"]
        os.kill(apiserver, signal.SIGSTOP)
        try:
            # kill() returns before every thread has stopped: on a loaded machine a thread still
            # running answered the request (a cold CI run side by side). Wait until all have.
            await wait_stopped(apiserver)
            started = time.monotonic()
            request = asyncio.create_task(client.get(NAMESPACES, "default"))
            done, _ = await asyncio.wait({request}, timeout=30)
            assert request in done, "the request to the frozen API server still waits after 30 s"
            waited = time.monotonic() - started
            error = request.exception()
            assert isinstance(error, aiohttp.ServerTimeoutError), (
                f"{error!r}; kube-apiserver's threads now: {thread_states(apiserver)}"
            )
            assert waited >= 2, waited  # no byte for the read timeout, not an earlier failure
        finally:
            os.kill(apiserver, signal.SIGCONT)
        # Thawed: the client goes on (the timed-out connection was dropped, not reused).
        namespace = await asyncio.wait_for(client.get(NAMESPACES, "default"), 30)
        assert namespace["metadata"]["name"] == "default"
