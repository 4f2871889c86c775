"""Cluster DNS for the real node: CoreDNS (``gomod/coredns``) with its ``kubernetes`` plugin.

CoreDNS watches Services and EndpointSlices through a kubeconfig for the local control plane and
answers ``<svc>.<ns>.svc.cluster.local`` and, for a headless Service whose endpoints carry a
hostname (a JobSet's pods, with ``hostname`` and ``subdomain`` set), the per-pod names
``<hostname>.<svc>.<ns>.svc.cluster.local``. ``query_a`` is a minimal DNS client (standard
library) for tests.
"""

from __future__ import annotations

import secrets
import socket
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from localcluster import processes

CLUSTER_DOMAIN = "cluster.local"


@dataclass
class CoreDNS:
    process: processes.ManagedProcess
    port: int

    def stop(self) -> None:
        self.process.stop()


def corefile(kubeconfig: Path, port: int, ready_port: int, bind: str = "127.0.0.1") -> str:
    return (
        f".:{port} {{\n"
        f"    bind {bind}\n"
        "    errors\n"
        f"    ready 127.0.0.1:{ready_port}\n"
        f"    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{\n"
        f"        kubeconfig {kubeconfig}\n"
        "        ttl 5\n"
        "    }\n"
        "}\n"
    )


def start(
    binary: Path,
    state: Path,
    kubeconfig: Path,
    port: int = 0,
    bind: str = "127.0.0.1",
    report: Callable[[str], None] = print,
) -> CoreDNS:
    """CoreDNS answering on ``bind``:``port`` (a free loopback port by default)."""
    port = port or processes.free_port()
    ready_port = processes.free_port()
    config = state / "coredns" / "Corefile"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(corefile(kubeconfig, port, ready_port, bind))
    process = processes.ManagedProcess(
        "coredns", [str(binary), "-conf", str(config)], state / "logs" / "coredns.log"
    )
    process.start()
    try:
        # /ready answers 200 once the kubernetes plugin has synced its caches. It can answer
        # before the DNS socket serves (the first query then went unanswered in about 1 run of
        # 4), so ready also means that a real query got a reply.
        def probe() -> tuple[int, str]:
            status = processes.https_get(f"http://127.0.0.1:{ready_port}/ready")
            if status[0] != 200:
                return status
            try:
                query_a(f"kubernetes.default.svc.{CLUSTER_DOMAIN}", port, bind, timeout=0.5)
            except TimeoutError:
                return 0, "no DNS answer yet"
            return 200, ""

        processes.wait_ready(process, probe, timeout=60, report=report)
    except BaseException:
        process.stop()
        raise
    return CoreDNS(process, port)


def query_a(name: str, port: int, server: str = "127.0.0.1", timeout: float = 2.0) -> list[str]:
    """The IPv4 addresses of an A query over UDP; [] for NXDOMAIN or no answer."""
    ident = secrets.randbelow(1 << 16)
    question = b"".join(
        bytes([len(label)]) + label.encode() for label in name.rstrip(".").split(".")
    )
    packet = struct.pack("!HHHHHH", ident, 0x0100, 1, 0, 0, 0) + question + b"\0"
    packet += struct.pack("!HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.settimeout(timeout)
        sock.sendto(packet, (server, port))
        reply, _ = sock.recvfrom(4096)
    got_id, _flags, qdcount, ancount = struct.unpack("!HHHH", reply[:8])
    if got_id != ident:
        raise RuntimeError(f"DNS reply id {got_id} != {ident}")
    offset = 12
    for _ in range(qdcount):
        offset = _skip_name(reply, offset) + 4
    addresses = []
    for _ in range(ancount):
        offset = _skip_name(reply, offset)
        rtype, _rclass, _ttl, length = struct.unpack("!HHIH", reply[offset : offset + 10])
        offset += 10
        if rtype == 1 and length == 4:
            addresses.append(socket.inet_ntoa(reply[offset : offset + 4]))
        offset += length
    return sorted(addresses)


def _skip_name(message: bytes, offset: int) -> int:
    while True:
        length = message[offset]
        if length == 0:
            return offset + 1
        if length & 0xC0 == 0xC0:  # a compression pointer ends the name
            return offset + 2
        offset += 1 + length
