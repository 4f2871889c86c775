"""``make demo``: the whole thing on the local control plane, narrated.

1. start the control plane (etcd, kube-apiserver, controller-manager, scheduler, KWOK nodes,
   test provisioner);
2. install the JobSet CRD;
3. start the controller (two replicas with leader election, as in a cluster);
4. apply the demo JobSet and follow it until it finishes, printing progress;
5. print a summary (objects, Events, a few metrics) and stop everything.
"""

from __future__ import annotations

import json
import signal
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from localcluster.cluster import LocalCluster
from localcluster.processes import LaunchError, ManagedProcess, free_port

ROOT = Path(__file__).resolve().parent.parent
CRD = ROOT / "manifests" / "crd" / "jobsets.jobset.x-k8s.io.yaml"
DEMO_JOBSET = ROOT / "manifests" / "examples" / "seed-volume-policy.yaml"
DEMO_NAME = "volume-sample"
CLAIM = "pretrained-model-volume-sample"
NAMESPACE = "demo"


class _Interrupted(Exception):
    pass


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise _Interrupted(signal.Signals(signum).name)


def _wait_established(cluster: LocalCluster) -> None:
    """Wait until the JobSet CRD is served (its status has no conditions at first)."""
    deadline = time.monotonic() + 60

    def established() -> bool:
        crd = json.loads(cluster.kubectl("get", "crd", "jobsets.jobset.x-k8s.io", "-o", "json"))
        conditions = (crd.get("status") or {}).get("conditions") or []
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)

    while not established():
        if time.monotonic() > deadline:
            raise LaunchError("the JobSet CRD was not Established within 60 s")
        time.sleep(0.3)


def _controller(cluster: LocalCluster, identity: str) -> tuple[ManagedProcess, int]:
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "controller",
        f"--kubeconfig={cluster.kubeconfig}",
        f"--identity={identity}",
        "--leader-election-namespace=kube-system",
        f"--metrics-bind-address=127.0.0.1:{port}",
        f"--health-probe-bind-address=127.0.0.1:{free_port()}",
    ]
    process = ManagedProcess(identity, argv, cluster.state_dir / "logs" / f"{identity}.log")
    process.start()
    return process, port


def _metrics(port: int, prefixes: tuple[str, ...]) -> list[str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            text = response.read().decode()
    except OSError:
        return []
    return [line for line in text.splitlines() if line.startswith(prefixes)]


def _progress(cluster: LocalCluster) -> tuple[str, str]:
    js = json.loads(cluster.kubectl("get", "jobset", DEMO_NAME, "-n", NAMESPACE, "-o", "json"))
    status = js.get("status") or {}
    per_rjob = ", ".join(
        f"{r['name']}: {r.get('succeeded', 0)} succeeded/{r.get('active', 0)} active"
        for r in status.get("replicatedJobsStatus") or []
    )
    pods = cluster.kubectl(
        "get",
        "pods",
        "-n",
        NAMESPACE,
        "--no-headers",
        "-o",
        "custom-columns=N:.metadata.name,P:.status.phase",
    ).split()
    phases: dict[str, int] = {}
    for phase in pods[1::2]:
        phases[phase] = phases.get(phase, 0) + 1
    claim = cluster.kubectl(
        "get", "pvc", CLAIM, "-n", NAMESPACE, "--ignore-not-found", "-o", "jsonpath={.status.phase}"
    ).strip()
    pod_summary = ", ".join(f"{n} {p}" for p, n in sorted(phases.items())) or "none"
    line = f"  claim {claim or 'not yet'} | {per_rjob or 'no jobs yet'} | pods {pod_summary}"
    return line, str(status.get("terminalState") or "")


def run(say: Callable[[str], None], state_dir: Path, timeout: float = 240) -> int:
    started = time.monotonic()
    with LocalCluster(state_dir, profile="full", report=say) as cluster:
        say(f"\n[2/5] installing the JobSet CRD ({CRD.relative_to(ROOT)})")
        cluster.kubectl("apply", "--server-side", "-f", str(CRD))
        _wait_established(cluster)
        say("\n[3/5] starting two controller replicas (leader election on a Lease)")
        replicas = [_controller(cluster, name) for name in ("controller-a", "controller-b")]
        try:
            deadline = time.monotonic() + 60
            holder = ""
            while not holder:
                holder = cluster.kubectl(
                    "get",
                    "lease",
                    "stateful-jobset-controller",
                    "-n",
                    "kube-system",
                    "-o",
                    "jsonpath={.spec.holderIdentity}",
                    "--ignore-not-found",
                ).strip()
                if time.monotonic() > deadline:
                    raise LaunchError("no controller replica became leader within 60 s")
                time.sleep(0.5)
            say(f"  leader: {holder} (the other replica is a warm standby)")

            say(f"\n[4/5] applying {DEMO_JOBSET.relative_to(ROOT)} in namespace {NAMESPACE}")
            cluster.kubectl("create", "namespace", NAMESPACE)
            cluster.kubectl("apply", "-n", NAMESPACE, "-f", str(DEMO_JOBSET))
            last, state = "", ""
            deadline = time.monotonic() + timeout
            while not state:
                if time.monotonic() > deadline:
                    raise LaunchError(f"the demo JobSet did not finish within {timeout:.0f}s")
                line, state = _progress(cluster)
                if line != last:
                    say(line)
                    last = line
                time.sleep(1)
            say(f"  JobSet {DEMO_NAME} finished: {state}")

            say("\n[5/5] summary")
            for args in (
                ("get", "jobset", "-n", NAMESPACE),
                ("get", "pvc", "-n", NAMESPACE),
                (
                    "get",
                    "jobs",
                    "-n",
                    NAMESPACE,
                    "-o",
                    "custom-columns=JOB:.metadata.name,COMPLETIONS:.status.succeeded,"
                    "VOLUMES:.spec.template.spec.volumes[*].persistentVolumeClaim.claimName",
                ),
            ):
                say(cluster.kubectl(*args).rstrip())
            events = cluster.kubectl(
                "get",
                "events",
                "-n",
                NAMESPACE,
                "--field-selector",
                "involvedObject.kind=JobSet",
                "-o",
                "custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message",
            )
            say(events.rstrip())
            leader_port = next(port for p, port in replicas if p.name == holder)
            for metric in _metrics(
                leader_port, ("jobset_completed_total{", "controller_runtime_reconcile_total{")
            ):
                say(f"  {metric}")
            outcome = "succeeded" if state == "Completed" else f"ended: {state}"
            took = time.monotonic() - started
            say(f"\ndemo {outcome} in {took:.0f}s; logs in {cluster.state_dir / 'logs'}")
            return 0 if state == "Completed" else 1
        finally:
            for process, _ in replicas:
                process.stop()


def main(state_dir: Path) -> int:
    signal.signal(signal.SIGTERM, _interrupt)

    def say(message: str) -> None:
        print(message, flush=True)

    say("[1/5] starting the local control plane (first run builds it from source: ~20 min)")
    try:
        return run(say, state_dir)
    except (LaunchError, _Interrupted, KeyboardInterrupt) as err:
        say(f"demo stopped: {err}; every process it started has been stopped")
        return 1
