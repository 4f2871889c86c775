"""The environment (proxy variables, ``~/.netrc``) is looked up once for the API server, not before
every request, and only when it has nothing for that host; what it supplies still applies. Plain
JSON request bodies are sent without the library's rebuilding, as the same bytes.

The server is a recording HTTP endpoint on loopback (as in test_client_fence), not a fake
Kubernetes API: it answers ``{}`` and remembers the Authorization header of each request.
"""

from __future__ import annotations

import base64
import copy
import datetime
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio.client import ApiClient, Configuration

from controller.runtime.client import CONFIG_MAPS, KubeClient, _plain_json, _settle_environment

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No proxy variables; NETRC names a file of the test's (absent until written)."""
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    netrc = tmp_path / "netrc"
    monkeypatch.setenv("NETRC", str(netrc))
    return netrc


@pytest.fixture
async def server() -> AsyncIterator[tuple[list[str | None], str]]:
    seen: list[str | None] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(request.headers.get("Authorization"))
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    test_server = TestServer(app, host="127.0.0.1")
    await test_server.start_server()
    try:
        yield seen, f"http://127.0.0.1:{test_server.port}"
    finally:
        await test_server.close()


def _write(path: Path, text: str) -> None:
    path.write_text(text)


def _api(url: str) -> ApiClient:
    configuration = Configuration()
    configuration.host = url
    return ApiClient(configuration)


def _session(api: ApiClient) -> aiohttp.ClientSession:
    session = api.rest_client.pool_manager
    assert isinstance(session, aiohttp.ClientSession)
    return session


async def test_nothing_in_the_environment_turns_the_lookups_off(
    environment: Path, server: tuple[list[str | None], str]
) -> None:
    seen, url = server
    async with _api(url) as api:
        assert _session(api).trust_env  # kubernetes_asyncio's session, as built
        client = KubeClient(api)
        assert not _session(api).trust_env
        assert await client.get(CONFIG_MAPS, "cm", "ns") == {}
        assert _settle_environment(api) is False  # already settled
    assert seen == [None]


async def test_netrc_credentials_for_the_host_keep_the_lookups(
    environment: Path, server: tuple[list[str | None], str]
) -> None:
    seen, url = server
    _write(environment, "machine 127.0.0.1 login alice password secret\n")
    async with _api(url) as api:
        client = KubeClient(api)
        assert _session(api).trust_env
        await client.get(CONFIG_MAPS, "cm", "ns")
    assert seen == ["Basic " + base64.b64encode(b"alice:secret").decode()]


async def test_netrc_credentials_for_another_host_do_not(
    environment: Path, server: tuple[list[str | None], str]
) -> None:
    seen, url = server
    _write(environment, "machine elsewhere.example login alice password secret\n")
    async with _api(url) as api:
        client = KubeClient(api)
        assert not _session(api).trust_env
        await client.get(CONFIG_MAPS, "cm", "ns")
    assert seen == [None]


@pytest.mark.parametrize(
    ("variables", "settled"),
    [
        ({"HTTP_PROXY": "http://proxy.invalid:3128"}, False),
        ({"HTTP_PROXY": "http://proxy.invalid:3128", "NO_PROXY": "127.0.0.1"}, True),
        ({"HTTPS_PROXY": "http://proxy.invalid:3128"}, True),  # not the API server's scheme
    ],
)
async def test_a_proxy_for_the_host_keeps_the_lookups(
    environment: Path,
    monkeypatch: pytest.MonkeyPatch,
    variables: dict[str, str],
    settled: bool,
) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    async with _api("http://127.0.0.1:1") as api:
        assert _settle_environment(api) is settled
        assert _session(api).trust_env is not settled


async def test_an_explicit_proxy_keeps_the_lookups(environment: Path) -> None:
    configuration = Configuration()
    configuration.host = "http://127.0.0.1:1"
    configuration.proxy = "http://proxy.invalid:3128"
    async with ApiClient(configuration) as api:
        assert _settle_environment(api) is False
        assert _session(api).trust_env


# ------------------------------------------------------------------ request bodies


@pytest.mark.parametrize(
    ("value", "plain"),
    [
        ({"a": [1, 2.5, True, None, "x", {"b": []}]}, True),
        ([], True),
        ({"when": datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)}, False),
        ({"a": ("tuple",)}, False),
        ({"a": [b"bytes"]}, False),
    ],
)
def test_plain_json(value: object, plain: bool) -> None:
    assert _plain_json(value) is plain


@pytest.fixture
async def echo() -> AsyncIterator[tuple[list[bytes], str]]:
    bodies: list[bytes] = []

    async def handle(request: web.Request) -> web.Response:
        bodies.append(await request.read())
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    test_server = TestServer(app, host="127.0.0.1")
    await test_server.start_server()
    try:
        yield bodies, f"http://127.0.0.1:{test_server.port}"
    finally:
        await test_server.close()


async def test_bodies_are_sent_as_the_library_would_serialise_them(
    echo: tuple[list[bytes], str],
) -> None:
    """Plain bodies go out as they are, others the library's way: the bytes are the same."""
    bodies, url = echo
    plain = {"metadata": {"name": "cm", "labels": {"a": "b"}}, "data": {"n": "1"}, "x": [1, None]}
    dated = {"metadata": {"name": "cm"}, "when": datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)}
    async with _api(url) as api:
        library = api.sanitize_for_serialization
        client = KubeClient(api)
        assert api.sanitize_for_serialization is not library
        KubeClient(api)  # installed once
        for body in (plain, dated):
            await client.create(CONFIG_MAPS, copy.deepcopy(body), "ns")
        expected = [json.dumps(library(copy.deepcopy(b))).encode() for b in (plain, dated)]
    assert bodies == expected
    assert json.loads(bodies[1])["when"] == "2025-01-01T00:00:00+00:00"
