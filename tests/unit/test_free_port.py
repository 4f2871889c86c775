"""localcluster.processes.free_port: a cluster's components never share a port."""

from __future__ import annotations

import socket
from pathlib import Path

from localcluster.controlplane import Ports
from localcluster.processes import free_port


def test_ports_are_never_handed_out_twice_and_stay_out_of_the_ephemeral_range() -> None:
    # Before: bind(0) per port, and a cluster's kube-scheduler once got the API server's port.
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    low, _ = (int(p) for p in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    assert all(1024 < port < low for port in ports)


def test_a_handed_out_port_can_be_bound() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", free_port()))
        sock.listen()


def test_a_clusters_ports_are_distinct() -> None:
    for _ in range(50):
        ports = Ports.allocate()
        values = [
            ports.etcd_client,
            ports.etcd_peer,
            ports.apiserver,
            ports.controller_manager,
            ports.scheduler,
            ports.kwok,
        ]
        assert len(set(values)) == len(values)
