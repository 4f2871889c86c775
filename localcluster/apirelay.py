"""The API server as pods see it: the ``kubernetes`` Service's address, relayed to loopback.

A pod finds the API server through ``KUBERNETES_SERVICE_HOST``/``PORT``, which the kubelet sets to
the ``kubernetes`` Service's ClusterIP and port (``10.96.0.1:443`` here). Nothing on the real node
routes Service addresses (no kube-proxy), and the local API server listens on 127.0.0.1 only (a
pod's 127.0.0.1 is its own). So the real node puts the ClusterIP on its CNI bridge (pods reach it
through their gateway; it goes away with the bridge) and runs this relay there: every TCP
connection is spliced to the API server's loopback port. TLS passes through untouched (the
serving certificate names the ClusterIP), so a pod's client verifies the API server itself with
its service account's ``ca.crt``. Without it no controller runs in a pod (issue 16).

``python -m localcluster.apirelay LISTEN_HOST LISTEN_PORT TARGET_PORT`` relays until SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys

TARGET_HOST = "127.0.0.1"
CHUNK = 64 * 1024


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until end of stream, then half-close the other side (a watch ends cleanly)."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


async def _splice(
    target_port: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    try:
        upstream_reader, upstream_writer = await asyncio.open_connection(TARGET_HOST, target_port)
    except OSError:
        writer.close()
        return
    try:
        await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
    finally:
        for side in (writer, upstream_writer):
            side.close()
            with contextlib.suppress(ConnectionError, OSError):
                await side.wait_closed()


async def start(listen_host: str, listen_port: int, target_port: int) -> asyncio.Server:
    """Accept on ``listen_host:listen_port`` (0: any free port), splice each connection to
    ``TARGET_HOST:target_port``."""
    return await asyncio.start_server(
        lambda r, w: _splice(target_port, r, w), listen_host, listen_port
    )


async def serve(listen_host: str, listen_port: int, target_port: int) -> None:
    server = await start(listen_host, listen_port, target_port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    loop.add_signal_handler(signal.SIGINT, stop.set)
    print(
        f"relaying {listen_host}:{listen_port} to {TARGET_HOST}:{target_port}",
        file=sys.stderr,
        flush=True,
    )
    async with server:
        await stop.wait()


def main(argv: list[str]) -> int:
    listen_host, listen_port, target_port = argv[0], int(argv[1]), int(argv[2])
    asyncio.run(serve(listen_host, listen_port, target_port))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
