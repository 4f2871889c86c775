"""Show that the local control plane is real: a claim binds, an Indexed Job runs to Complete."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import yaml

from localcluster.controlplane import ControlPlane
from localcluster.processes import LaunchError

_NAMESPACE = "smoke"


def _objects() -> list[dict[str, object]]:
    claim: dict[str, object] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": _NAMESPACE},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    }
    job: dict[str, object] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "hello", "namespace": _NAMESPACE},
        "spec": {
            "completionMode": "Indexed",
            "completions": 3,
            "parallelism": 3,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                        }
                    ],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
                }
            },
        },
    }
    namespace: dict[str, object] = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": _NAMESPACE},
    }
    return [namespace, claim, job]


def run_smoke(cluster: ControlPlane, say: Callable[[str], None], timeout: float = 120) -> None:
    cluster.kubectl("apply", "-f", "-", input_text=yaml.safe_dump_all(_objects()))
    say("created namespace smoke, claim 'data' (class standard) and Indexed Job 'hello' (3 pods)")
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        claim = json.loads(cluster.kubectl("get", "pvc", "data", "-n", _NAMESPACE, "-o", "json"))
        job = json.loads(cluster.kubectl("get", "job", "hello", "-n", _NAMESPACE, "-o", "json"))
        pods = cluster.kubectl(
            "get",
            "pods",
            "-n",
            _NAMESPACE,
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.status.phase}@{.spec.nodeName} {end}",
        )
        status = job.get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        line = (
            f"  claim {claim['status'].get('phase')}, job succeeded "
            f"{status.get('succeeded', 0)}/3, pods: {pods.strip() or '-'}"
        )
        if line != last:
            say(line)
            last = line
        if conditions.get("Complete") == "True" and claim["status"].get("phase") == "Bound":
            say("claim Bound and Job Complete: scheduler, KWOK, job controller and PV binding work")
            return
        time.sleep(0.5)
    raise LaunchError(f"smoke test did not finish within {timeout:.0f}s (last: {last.strip()})")
