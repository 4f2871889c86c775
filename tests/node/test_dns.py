"""CoreDNS answers a headless Service's records from the local control plane (issue 13).

The Service and its EndpointSlice are made by hand here, with the hostnames a JobSet's pods give
them; ``test_data.py`` resolves a real JobSet's pod from another pod on the real node.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from localcluster import build, dns, processes
from localcluster.cluster import LocalCluster

NS = "dns-check"
SERVICE = "workers"
# As a JobSet's pods: hostname <jobset>-<rjob>-<job index>-<pod index>, subdomain = Service.
PODS = {"train-a-0-0": "10.244.0.10", "train-a-0-1": "10.244.0.11"}


def _objects() -> list[dict[str, object]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": SERVICE, "namespace": NS},
            "spec": {"clusterIP": "None", "selector": {"jobset": "train"}},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": f"{SERVICE}-byhand",
                "namespace": NS,
                "labels": {"kubernetes.io/service-name": SERVICE},
            },
            "addressType": "IPv4",
            "ports": [],
            "endpoints": [
                {"addresses": [ip], "hostname": host, "conditions": {"ready": True}}
                for host, ip in PODS.items()
            ],
        },
    ]


def _wait_for(name: str, port: int, expected: list[str]) -> list[str]:
    deadline = time.monotonic() + 20
    got: list[str] = []
    while time.monotonic() < deadline:
        try:
            got = dns.query_a(name, port)
        except TimeoutError:
            # No answer in 2 s: CoreDNS runs niced on a busy machine; ask again.
            print(f"no answer for {name} within 2 s, asking again")
            continue
        if got == expected:
            break
        time.sleep(0.2)
    return got


def test_headless_service_and_pod_hostnames_resolve(tmp_path: Path) -> None:
    binary = build.ensure_node_binaries(("coredns",))["coredns"] / "coredns"
    with LocalCluster(tmp_path / "cluster", profile="apiserver", report=lambda _: None) as cluster:
        for obj in _objects():
            cluster.kubectl("apply", "-f", "-", input_text=json.dumps(obj))
        server = dns.start(binary, tmp_path, cluster.kubeconfig, report=lambda _: None)
        pid = server.process.pid
        assert pid is not None
        try:
            domain = f"{SERVICE}.{NS}.svc.{dns.CLUSTER_DOMAIN}"
            assert _wait_for(domain, server.port, sorted(PODS.values())) == sorted(PODS.values())
            for host, ip in PODS.items():
                assert _wait_for(f"{host}.{domain}", server.port, [ip]) == [ip]
            assert _wait_for(f"nobody.{domain}", server.port, []) == []
            # A new pod (endpoint) shows up through the watch.
            slice_obj = _objects()[2]
            endpoints = slice_obj["endpoints"]
            assert isinstance(endpoints, list)
            endpoints.append(
                {"addresses": ["10.244.0.12"], "hostname": "train-b-0-0", "conditions": {}}
            )
            cluster.kubectl("apply", "-f", "-", input_text=json.dumps(slice_obj))
            assert _wait_for(f"train-b-0-0.{domain}", server.port, ["10.244.0.12"]) == [
                "10.244.0.12"
            ]
        finally:
            server.stop()
        assert not processes.pid_alive(pid)
