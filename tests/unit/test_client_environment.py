"""The environment (proxy variables, ``~/.netrc``) is looked up once for the API server, not before
every request, and only when it has nothing for that host; what it supplies still applies. Plain
JSON request bodies are written by orjson, not rebuilt by the library, and carry the same values.

The server is a recording HTTP endpoint on loopback (as in test_client_fence), not a fake
Kubernetes API: it answers ``{}`` and remembers each request's headers, path and body. Requests
carry what kubernetes_asyncio's ``call_api`` would send: the token, the User-Agent, the query.
"""

from __future__ import annotations

import base64
import copy
import datetime
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from kubernetes_asyncio.client import ApiClient, Configuration, V1ConfigMap, V1ObjectMeta

from controller.runtime.client import CONFIG_MAPS, KubeClient, _settle_environment

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


@dataclass(frozen=True)
class Seen:
    """One request as the loopback server received it."""

    headers: dict[str, str]
    path_qs: str
    body: bytes


@pytest.fixture
async def server() -> AsyncIterator[tuple[list[Seen], str]]:
    seen: list[Seen] = []

    async def handle(request: web.Request) -> web.Response:
        seen.append(Seen(dict(request.headers), request.path_qs, await request.read()))
        return web.json_response({})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    test_server = TestServer(app, host="127.0.0.1")
    await test_server.start_server()
    try:
        yield seen, f"http://127.0.0.1:{test_server.port}"
    finally:
        await test_server.close()


def _authorizations(seen: list[Seen]) -> list[str | None]:
    return [request.headers.get("Authorization") for request in seen]


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
    environment: Path, server: tuple[list[Seen], str]
) -> None:
    seen, url = server
    async with _api(url) as api:
        assert _session(api).trust_env  # kubernetes_asyncio's session, as built
        client = KubeClient(api)
        assert not _session(api).trust_env
        assert await client.get(CONFIG_MAPS, "cm", "ns") == {}
        assert _settle_environment(api) is False  # already settled
    assert _authorizations(seen) == [None]


async def test_netrc_credentials_for_the_host_keep_the_lookups(
    environment: Path, server: tuple[list[Seen], str]
) -> None:
    seen, url = server
    _write(environment, "machine 127.0.0.1 login alice password secret\n")
    async with _api(url) as api:
        client = KubeClient(api)
        assert _session(api).trust_env
        await client.get(CONFIG_MAPS, "cm", "ns")
    assert _authorizations(seen) == ["Basic " + base64.b64encode(b"alice:secret").decode()]


async def test_netrc_credentials_for_another_host_do_not(
    environment: Path, server: tuple[list[Seen], str]
) -> None:
    seen, url = server
    _write(environment, "machine elsewhere.example login alice password secret\n")
    async with _api(url) as api:
        client = KubeClient(api)
        assert not _session(api).trust_env
        await client.get(CONFIG_MAPS, "cm", "ns")
    assert _authorizations(seen) == [None]


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


async def test_bodies_carry_what_the_library_would_send(server: tuple[list[Seen], str]) -> None:
    """Plain bodies go out through orjson, others (a datetime, a model) the library's way: the
    server reads the same values either way."""
    seen, url = server
    plain = {"metadata": {"name": "cm", "labels": {"a": "b"}}, "data": {"n": "1"}, "x": [1, None]}
    dated = {"metadata": {"name": "cm"}, "when": datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)}
    big = {"n": 2**64, "f": 0.1, "s": "é\u2028"}  # beyond 64 bits: orjson refuses, json writes
    model = V1ConfigMap(metadata=V1ObjectMeta(name="cm"), data={"k": "v"})
    async with _api(url) as api:
        client = KubeClient(api)
        bodies_sent: list[Any] = [plain, dated, big, model]
        for body in bodies_sent:
            await client.create(CONFIG_MAPS, copy.deepcopy(body), "ns")
        expected = [api.sanitize_for_serialization(copy.deepcopy(b)) for b in bodies_sent]
    bodies = [json.loads(request.body) for request in seen]
    assert bodies == expected
    assert bodies[1]["when"] == "2025-01-01T00:00:00+00:00"
    assert bodies[3] == {"metadata": {"name": "cm"}, "data": {"k": "v"}}


async def test_requests_carry_the_configurations_token_user_agent_and_query(
    server: tuple[list[Seen], str],
) -> None:
    """What call_api would have sent: the bearer token (refreshed through the library's hook, as
    in-cluster tokens rotate), the client's User-Agent, the content type, the query."""
    seen, url = server
    tokens = iter(["first", "second"])

    async def refresh(configuration: Configuration) -> None:
        configuration.api_key["BearerToken"] = next(tokens)

    configuration = Configuration()
    configuration.host = url
    configuration.api_key = {"BearerToken": "stale"}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    configuration.refresh_api_key_hook = refresh
    async with ApiClient(configuration) as api:
        api.user_agent = "stateful-jobset/test"
        client = KubeClient(api, field_manager="me")
        await client.patch(CONFIG_MAPS, "cm", {"data": {"a": "b"}}, "ns", force=True)
        await client.list(CONFIG_MAPS, "ns", label_selector="a=b")
    first, second = seen
    assert _authorizations(seen) == ["Bearer first", "Bearer second"]
    assert first.headers["User-Agent"] == second.headers["User-Agent"] == "stateful-jobset/test"
    assert first.headers["Content-Type"] == "application/merge-patch+json"
    assert first.path_qs == "/api/v1/namespaces/ns/configmaps/cm?fieldManager=me&force=true"
    assert second.path_qs == "/api/v1/namespaces/ns/configmaps?labelSelector=a%3Db"
