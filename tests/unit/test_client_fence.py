"""The write fence is consulted immediately before a request is sent, after every wait.

A write may wait for the client-side rate limiter and for a pooled connection; the leader's fence
can close during either wait (about 4 s of limiter wait at the defaults under load, 10 s at
``--kube-api-qps=20``, beyond the lease's safety margin). A fence checked before those waits let
such writes out after it closed. The server here is a recording HTTP endpoint on loopback, not a
fake Kubernetes API: it answers every request with ``{}`` and remembers what reached it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio.client import ApiClient, Configuration
from prometheus_client import CollectorRegistry

from controller.runtime.client import CONFIG_MAPS, ClientMetrics, KubeClient, WriteRefused

CONFIG_MAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}


@dataclass
class Recorder:
    seen: list[tuple[str, str]] = field(default_factory=list)
    hold: asyncio.Event = field(default_factory=asyncio.Event)  # set: /hold requests may answer
    holding: asyncio.Event = field(default_factory=asyncio.Event)  # a /hold request arrived

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.method, request.path))
        if request.path.endswith("/hold"):
            self.holding.set()
            await self.hold.wait()
        return web.json_response({})


@dataclass
class Fence:
    open: bool = True
    asked: int = 0

    def __call__(self) -> bool:
        self.asked += 1
        return self.open


class HeldLimiter:
    """A rate limiter that lets a request through only when the test says so."""

    def __init__(self) -> None:
        self.waiting = asyncio.Event()
        self.release = asyncio.Event()

    async def acquire(self) -> None:
        self.waiting.set()
        await self.release.wait()


@pytest.fixture
async def server() -> AsyncIterator[tuple[Recorder, str]]:
    recorder = Recorder()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", recorder.handle)
    test_server = TestServer(app, host="127.0.0.1")
    await test_server.start_server()
    try:
        yield recorder, f"http://127.0.0.1:{test_server.port}"
    finally:
        recorder.hold.set()
        await test_server.close()


def _queued_for_a_connection(api: ApiClient) -> asyncio.Event:
    """An event set when a request of ``api`` starts waiting for a pooled connection.

    aiohttp's ``on_connection_queued_start`` trace signal fires in the connector when a request
    finds the pool full and queues for a slot. kubernetes_asyncio builds its session without trace
    configs; ``ClientSession.trace_configs`` is that session's list, read at every request.
    """
    queued = asyncio.Event()

    async def on_queued(*_: object) -> None:
        queued.set()

    trace = aiohttp.TraceConfig()
    trace.on_connection_queued_start.append(on_queued)
    trace.freeze()
    session = api.rest_client.pool_manager
    assert isinstance(session, aiohttp.ClientSession)
    session.trace_configs.append(trace)
    return queued


def _api(url: str, pool: int = 4) -> ApiClient:
    configuration = Configuration()
    configuration.host = url
    configuration.connection_pool_maxsize = pool
    return ApiClient(configuration)


async def test_write_refused_when_the_fence_closes_while_the_limiter_holds_it(
    server: tuple[Recorder, str],
) -> None:
    recorder, url = server
    fence = Fence()
    registry = CollectorRegistry()
    async with _api(url) as api:
        client = KubeClient(api, write_guard=fence, metrics=ClientMetrics(registry))
        held = HeldLimiter()
        client.limiter = held  # type: ignore[assignment]
        write = asyncio.create_task(client.create(CONFIG_MAPS, CONFIG_MAP, "ns"))
        await held.waiting.wait()  # the fence was open when the write was asked for
        fence.open = False
        held.release.set()
        with pytest.raises(WriteRefused):
            await write
        assert recorder.seen == []
        # Nothing was sent, so nothing is counted as a request.
        assert registry.get_sample_value(
            "rest_client_requests_total", {"code": "<error>", "method": "POST"}
        ) in (None, 0.0)


async def test_write_refused_when_the_fence_closes_while_waiting_for_a_connection(
    server: tuple[Recorder, str],
) -> None:
    recorder, url = server
    fence = Fence()
    async with _api(url, pool=1) as api:
        client = KubeClient(api, write_guard=fence)
        queued = _queued_for_a_connection(api)
        # A read holds the pool's only connection (as a watch would).
        read = asyncio.create_task(client.get(CONFIG_MAPS, "hold", "ns"))
        await recorder.holding.wait()
        assert not queued.is_set()  # the read got the connection without queueing
        write = asyncio.create_task(client.create(CONFIG_MAPS, CONFIG_MAP, "ns"))
        await queued.wait()  # the write passed the checks before waiting, and now waits
        assert fence.asked == 2  # before and after the limiter; not yet at sending
        assert not write.done()
        fence.open = False
        recorder.hold.set()
        assert await read == {}
        with pytest.raises(WriteRefused):
            await write
        assert recorder.seen == [("GET", "/api/v1/namespaces/ns/configmaps/hold")]
        # The refused request gave its connection back: the pool of one still serves.
        assert await asyncio.wait_for(client.get(CONFIG_MAPS, "after", "ns"), 5) == {}


async def test_open_fence_lets_writes_through_and_reads_never_ask(
    server: tuple[Recorder, str],
) -> None:
    recorder, url = server
    fence = Fence()
    async with _api(url) as api:
        client = KubeClient(api, write_guard=fence)
        assert await client.get(CONFIG_MAPS, "cm", "ns") == {}
        assert fence.asked == 0
        assert await client.create(CONFIG_MAPS, CONFIG_MAP, "ns") == {}
        assert await client.patch(CONFIG_MAPS, "cm", {"data": {"a": "1"}}, "ns") == {}
        assert await client.delete(CONFIG_MAPS, "cm", "ns") == {}
        assert [m for m, _ in recorder.seen] == ["GET", "POST", "PATCH", "DELETE"]


async def test_clients_sharing_an_api_client_keep_their_own_fence(
    server: tuple[Recorder, str],
) -> None:
    recorder, url = server
    async with _api(url) as api:
        fenced = KubeClient(api, write_guard=lambda: False)
        free = KubeClient(api)
        with pytest.raises(WriteRefused):
            await fenced.create(CONFIG_MAPS, CONFIG_MAP, "ns")
        assert await free.create(CONFIG_MAPS, CONFIG_MAP, "ns") == {}
        assert recorder.seen == [("POST", "/api/v1/namespaces/ns/configmaps")]
