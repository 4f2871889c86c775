"""The real node's relay to the API server (localcluster/apirelay.py) passes bytes both ways
untouched, ends a stream when the other side ends it, and drops a client whose target is gone."""

from __future__ import annotations

import asyncio

from localcluster import apirelay


async def _echo_upper(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Answers with the request in upper case once the client half-closed (as a server would
    answer a request and close)."""
    request = await reader.read()
    writer.write(request.upper())
    await writer.drain()
    writer.close()


def _port(server: asyncio.Server) -> int:
    return int(server.sockets[0].getsockname()[1])


async def test_bytes_pass_both_ways_and_eof_is_relayed() -> None:
    target = await asyncio.start_server(_echo_upper, "127.0.0.1", 0)
    relay = await apirelay.start("127.0.0.1", 0, _port(target))
    async with target, relay:
        reader, writer = await asyncio.open_connection("127.0.0.1", _port(relay))
        payload = bytes(range(256)) * 1024  # 256 KiB: several chunks, every byte value
        writer.write(b"get /api " + payload)
        writer.write_eof()
        answer = await asyncio.wait_for(reader.read(), 30)
        writer.close()
        assert answer == (b"get /api " + payload).upper()


async def test_a_client_is_dropped_when_the_target_refuses() -> None:
    unused = await asyncio.start_server(_echo_upper, "127.0.0.1", 0)
    port = _port(unused)
    unused.close()
    await unused.wait_closed()
    relay = await apirelay.start("127.0.0.1", 0, port)
    async with relay:
        reader, writer = await asyncio.open_connection("127.0.0.1", _port(relay))
        assert await asyncio.wait_for(reader.read(), 30) == b""
        writer.close()
