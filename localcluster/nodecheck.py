"""The real node, tried by hand: ``python -m localcluster.nodecheck [--pods N]``.

Builds what is missing (``node.node_binaries``: containerd, the kubelet and CoreDNS), starts the
``node`` profile of :class:`LocalCluster`, runs one busybox ``echo hello`` pod, prints its log,
checks pod-to-pod traffic by IP (``--pods N``: start latency over N pods, RSS) and stops it all.
Docs: docs/development.md, "The real node". Here, not in ``localcluster/node``: it starts a
``LocalCluster``, and ``cluster.py`` imports the node.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from localcluster.cluster import LocalCluster
from localcluster.node import RealNode
from localcluster.processes import LaunchError, stop_on_signals

ECHO_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "hello", "namespace": "default"},
    "spec": {
        "restartPolicy": "Never",
        # untagged: pull policy Always, pulled from the local registry every time
        "containers": [{"name": "echo", "image": "busybox", "command": ["echo", "hello"]}],
    },
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcluster.nodecheck", description=__doc__)
    parser.add_argument("--state-dir", type=Path, default=Path("/tmp/localcluster-node"))
    parser.add_argument("--pods", type=int, default=0, help="measure start latency over N pods")
    args = parser.parse_args(argv)
    stop_on_signals()
    cluster = LocalCluster(args.state_dir.resolve(), profile="node")
    return hello(cluster, args.pods)


def measure(cluster: LocalCluster, node: RealNode, pods: int) -> None:
    """Pod start latency (create -> Running, polled every 0.1 s, one pod at a time) and the
    RSS of the kubelet and containerd afterwards."""
    latencies = []
    for i in range(pods):
        pod = json.loads(json.dumps(ECHO_POD))
        pod["metadata"]["name"] = f"latency-{i}"
        pod["spec"]["containers"][0]["command"] = ["sleep", "3600"]
        began = time.monotonic()
        cluster.kubectl("create", "-f", "-", input_text=json.dumps(pod))
        while True:
            phase = cluster.kubectl("get", "pod", f"latency-{i}", "-o", "jsonpath={.status.phase}")
            if phase == "Running":
                latencies.append(time.monotonic() - began)
                break
            if time.monotonic() - began > 120:
                raise LaunchError(f"pod latency-{i} not Running after 120s ({phase!r})")
            time.sleep(0.1)
    latencies.sort()
    print(
        f"pod start latency over {pods} pods: median {latencies[len(latencies) // 2]:.2f}s, "
        f"max {latencies[-1]:.2f}s"
    )
    for process in node.processes:
        rss = next(
            line.split()[1]
            for line in Path(f"/proc/{process.pid}/status").read_text().splitlines()
            if line.startswith("VmRSS:")
        )
        print(f"RSS {process.name}: {int(rss) // 1024} MiB")


def _pod(name: str, command: list[str]) -> str:
    pod = json.loads(json.dumps(ECHO_POD))
    pod["metadata"]["name"] = name
    pod["spec"]["containers"][0]["command"] = command
    return json.dumps(pod)


def _wait_phase(cluster: LocalCluster, name: str, phases: tuple[str, ...]) -> str:
    began = time.monotonic()
    phase = ""
    while time.monotonic() - began < 120 and phase not in phases:
        phase = cluster.kubectl("get", "pod", name, "-o", "jsonpath={.status.phase}")
        time.sleep(0.2)
    return phase


def pod_to_pod(cluster: LocalCluster) -> bool:
    """A busybox httpd pod and a wget pod on the bridge: does one reach the other by pod IP?"""
    serve = "echo from-server > /tmp/index.html && exec httpd -f -p 8080 -h /tmp"
    cluster.kubectl("create", "-f", "-", input_text=_pod("server", ["sh", "-c", serve]))
    if _wait_phase(cluster, "server", ("Running", "Failed")) != "Running":
        print("pod-to-pod: server not Running")
        return False
    ip = cluster.kubectl("get", "pod", "server", "-o", "jsonpath={.status.podIP}")
    # No "-T": Debian busybox-static 1.35 wget segfaults (exit 139) with a timeout option.
    fetch = ["wget", "-qO-", f"http://{ip}:8080/index.html"]
    cluster.kubectl("create", "-f", "-", input_text=_pod("client", fetch))
    phase = _wait_phase(cluster, "client", ("Succeeded", "Failed"))
    log = cluster.kubectl("logs", "client").strip()
    print(f"pod-to-pod: client {phase}, fetched from {ip}: {log!r}")
    return phase == "Succeeded" and log == "from-server"


def hello(cluster: LocalCluster, pods: int = 0) -> int:
    """Start the ``node`` profile, run the echo pod, print its log, stop it all."""
    try:
        cluster.start()
        node = cluster.node
        if node is None:
            raise LaunchError("the node profile started no node")
        print(cluster.kubectl("get", "nodes", "-o", "wide"))
        began = time.monotonic()
        cluster.kubectl("create", "-f", "-", input_text=json.dumps(ECHO_POD))
        phase = _wait_phase(cluster, "hello", ("Succeeded", "Failed"))
        print(f"pod hello: {phase} after {time.monotonic() - began:.1f}s")
        print(cluster.kubectl("get", "pod", "hello", "-o", "wide"))
        print("log:", cluster.kubectl("logs", "hello").strip())
        reached = pod_to_pod(cluster)
        if phase == "Succeeded" and pods:
            measure(cluster, node, pods)
        return 0 if phase == "Succeeded" and reached else 1
    except LaunchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
