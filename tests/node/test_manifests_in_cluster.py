"""The manifests, proven as pods: the image ``make image`` builds runs the Deployment on the
real node (issue 16).

The image is built as ``make image`` builds it, imported into the node's containerd (what
``ctr images import`` does on any node), and installed with the documented command,
``kubectl apply --server-side -k`` of an overlay that overrides the image. Then: both replicas
Running and Ready, exactly one of them holds the Lease (and says so in
``leader_election_master_status``), the seed-volume example completes with real pods and a real
claim, the leader pod is deleted and the other replica takes the Lease and reconciles a new JobSet
to completion, Debian's Prometheus scrapes both pods at the metrics Service's endpoints (its
EndpointSlices; HTTPS with a reader's bearer token), and ``make undeploy`` removes every object
the install created.

The test starts its own real node (``no_session_node``: before the tier's shared node, one real
node per host) so that the cluster-wide install meets no other test's controller.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml

from localcluster import controllerimage
from localcluster.cluster import LocalCluster
from localcluster.node import host_checks
from localcluster.processes import LaunchError, ManagedProcess, free_port
from tests.support.prometheus import query, start_prometheus
from tests.support.securemetrics import reader_token

REPO = Path(__file__).resolve().parents[2]
SYSTEM = "stateful-jobset-system"
DEPLOYMENT = "stateful-jobset-controller"
LEASE = "stateful-jobset-controller"
METRICS_SERVICE = "stateful-jobset-controller-metrics"
METRICS_PORT = "https-metrics"
TAG = "in-cluster-test"
JOBS = "jobs"
T = TypeVar("T")

pytestmark = [pytest.mark.own_node, pytest.mark.timeout(900)]


def _progress(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _poll(observe: Callable[[], T], done: Callable[[T], bool], what: str, seconds: float) -> T:
    """Observe until ``done``; on timeout fail with what was last seen."""
    deadline = time.monotonic() + seconds
    last: T | None = None
    while time.monotonic() < deadline:
        try:
            last = observe()
        except LaunchError as err:  # a kubectl error: keep polling, report it if it lasts
            last = None
            _progress(f"  ({what}: {str(err)[:200]})")
        if last is not None and done(last):
            return last
        time.sleep(1)
    raise AssertionError(f"{what}: not reached in {seconds:.0f}s; last seen {last!r}")


def _json(cluster: LocalCluster, *args: str) -> Any:
    return json.loads(cluster.kubectl(*args, "-o", "json"))


def _overlay(directory: Path) -> Path:
    """The documented install: an overlay of manifests/ with the image overridden."""
    directory.mkdir(parents=True)
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        # Kustomize refuses absolute paths in resources.
        "resources": [os.path.relpath(REPO / "manifests", directory)],
        "images": [{"name": "stateful-jobset", "newTag": TAG}],
    }
    (directory / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return directory


def _controller_pods(cluster: LocalCluster) -> list[dict[str, Any]]:
    selector = "app.kubernetes.io/name=stateful-jobset,app.kubernetes.io/component=controller"
    pods = _json(cluster, "get", "pods", "-n", SYSTEM, "-l", selector)["items"]
    return [p for p in pods if not p["metadata"].get("deletionTimestamp")]


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return pod["status"].get("phase") == "Running" and any(
        c["type"] == "Ready" and c["status"] == "True" for c in conditions
    )


def _holder(cluster: LocalCluster) -> str:
    lease = _json(cluster, "get", "lease", LEASE, "-n", SYSTEM)
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


def _owner(holder: str, pods: list[str]) -> str:
    """The pod whose name the Lease holder's identity starts with (hostname + suffix)."""
    owners = [name for name in pods if holder.startswith(f"{name}_")]
    return owners[0] if len(owners) == 1 else ""


def _condition(cluster: LocalCluster, name: str) -> str:
    jobset = _json(cluster, "get", "jobsets.jobset.x-k8s.io", name, "-n", JOBS)
    for condition in (jobset.get("status") or {}).get("conditions") or []:
        if condition["type"] in ("Completed", "Failed") and condition["status"] == "True":
            return str(condition["type"])
    return ""


def _tiny_jobset(name: str) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox", "command": ["true"]}
    template = {"spec": {"restartPolicy": "Never", "containers": [container]}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": JOBS},
        "spec": {"replicatedJobs": [{"name": "r", "template": {"spec": {"template": template}}}]},
    }


def _metrics_endpoints(cluster: LocalCluster) -> list[dict[str, Any]]:
    """The metrics Service's ready endpoints (EndpointSlices): file_sd target groups."""
    slices = _json(
        cluster,
        "get",
        "endpointslices",
        "-n",
        SYSTEM,
        "-l",
        f"kubernetes.io/service-name={METRICS_SERVICE}",
    )["items"]
    groups = []
    for endpoint_slice in slices:
        ports = [p["port"] for p in endpoint_slice.get("ports") or [] if p["name"] == METRICS_PORT]
        for endpoint in endpoint_slice.get("endpoints") or []:
            if ports and (endpoint.get("conditions") or {}).get("ready"):
                pod = endpoint["targetRef"]["name"]
                targets = [f"{address}:{ports[0]}" for address in endpoint["addresses"]]
                groups.append({"targets": targets, "labels": {"pod": pod}})
    return groups


def _prometheus(
    folder: Path, groups: list[dict[str, Any]], token: str
) -> tuple[ManagedProcess, int]:
    """Debian's Prometheus scraping the metrics Service's endpoints, each pod by its IP (the
    node's bridge is reachable from this host), as the servicemonitor component has it: HTTPS
    (the pods' self-signed certificates, not verified) with a reader's bearer token. Debian
    builds Prometheus without Kubernetes service discovery, so the test hands it what that
    discovery would find (the Service's EndpointSlices) as a file_sd target file."""
    folder.mkdir(parents=True, exist_ok=True)
    targets = folder / "targets.json"
    targets.write_text(json.dumps(groups))
    token_file = folder / "token"
    token_file.write_text(token)
    scrape = {
        "job_name": "stateful-jobset",
        "scheme": "https",
        "authorization": {"credentials_file": str(token_file)},
        "tls_config": {"insecure_skip_verify": True},
        "file_sd_configs": [{"files": [str(targets)], "refresh_interval": "1s"}],
    }
    port = free_port()
    return start_prometheus(port, folder, [scrape]), port


def _undeploy(cluster: LocalCluster) -> subprocess.CompletedProcess[str]:
    """``make undeploy`` against this cluster, with this interpreter's environment (``-o``: the
    virtualenv this test runs in is not rebuilt)."""
    prefix = Path(sys.prefix)
    assert cluster.binaries is not None
    return subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(REPO),
            "undeploy",
            f"VENV={prefix}",
            "-o",
            str(prefix / ".installed-stamp"),
            f"KUBECTL={cluster.binaries.path('kubectl')}",
        ],
        env=dict(os.environ, KUBECONFIG=str(cluster.kubeconfig)),
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_the_manifests_run_the_image_as_pods(
    tmp_path_factory: pytest.TempPathFactory, no_session_node: None
) -> None:
    assert host_checks() == [], "this host cannot run containers (make tools installs it)"
    # Short: containerd's socket path under it must stay within 104 bytes.
    state = tmp_path_factory.mktemp("pods")
    began = time.monotonic()
    _progress("building the image (make image)")
    built = controllerimage.build_image(state / "image", f"stateful-jobset:{TAG}", _progress)
    cluster = LocalCluster(state / "cluster", profile="node", report=_progress)
    prometheus: ManagedProcess | None = None
    try:
        cluster.start()
        assert cluster.node is not None
        cluster.node.ctr("images", "import", str(built.archive))
        _progress(f"image imported into the node's containerd ({time.monotonic() - began:.0f}s)")

        overlay = _overlay(state / "overlay")
        applied = cluster.kubectl("apply", "--server-side", "-k", str(overlay))
        installed = yaml.safe_load_all(cluster.kubectl("kustomize", str(overlay)))
        objects = [
            (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace")) for o in installed
        ]
        _progress(f"installed {len(objects)} objects:\n{applied}")
        deployment = _json(cluster, "get", "deployment", DEPLOYMENT, "-n", SYSTEM)
        image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
        assert image == f"stateful-jobset:{TAG}"

        pods = _poll(
            lambda: _controller_pods(cluster),
            lambda ps: len(ps) == 2 and all(_ready(p) for p in ps),
            "2 controller pods Running and Ready",
            240,
        )
        names = sorted(p["metadata"]["name"] for p in pods)
        for pod in pods:
            assert pod["spec"]["containers"][0]["securityContext"]["readOnlyRootFilesystem"]
            assert pod["status"]["containerStatuses"][0]["restartCount"] == 0, pod["status"]
        _progress(f"2 replicas Running and Ready: {names} ({time.monotonic() - began:.0f}s)")
        leader = _owner(
            _poll(lambda: _holder(cluster), lambda h: _owner(h, names) != "", "a leader", 60), names
        )
        _progress(f"leader: {leader}")

        groups = _poll(
            lambda: _metrics_endpoints(cluster),
            lambda gs: sorted(g["labels"]["pod"] for g in gs) == names,
            "the metrics Service's endpoints: both pods",
            60,
        )
        token = reader_token(cluster.kubeconfig)
        prometheus, prom_port = _prometheus(state / "prometheus", groups, token)
        up = _poll(
            lambda: query(prom_port, 'up{job="stateful-jobset"}'),
            lambda r: (
                sorted(s["metric"].get("pod", "") for s in r if s["value"][1] == "1") == names
            ),
            "Prometheus scraping both pods through the metrics Service's endpoints",
            90,
        )
        _progress(f"Prometheus scrapes {[s['metric']['instance'] for s in up]}")
        leaders = _poll(
            lambda: query(prom_port, "leader_election_master_status"),
            lambda r: len(r) == 2,
            "leader_election_master_status of both pods",
            60,
        )
        by_pod = {s["metric"]["pod"]: float(s["value"][1]) for s in leaders}
        assert by_pod == {n: float(n == leader) for n in names}, by_pod

        cluster.kubectl("create", "namespace", JOBS)
        seed = yaml.safe_load((REPO / "manifests/examples/seed-volume-policy.yaml").read_text())
        seed["metadata"]["namespace"] = JOBS
        cluster.kubectl("create", "-f", "-", input_text=json.dumps(seed))
        name = seed["metadata"]["name"]
        _poll(lambda: _condition(cluster, name), bool, f"JobSet {name} finished", 300)
        assert _condition(cluster, name) == "Completed"
        claim = _json(cluster, "get", "pvc", f"pretrained-model-{name}", "-n", JOBS)
        assert claim["status"]["phase"] == "Bound"
        _progress(f"JobSet {name} Completed, its claim Bound ({time.monotonic() - began:.0f}s)")

        cluster.kubectl("delete", "pod", leader, "-n", SYSTEM, "--wait=false")
        # The deleted leader releases the Lease as it stops; the standby and the pod the
        # Deployment starts in its place both try for it, and either may win (both seen).
        successor = _poll(
            lambda: _holder(cluster),
            lambda h: bool(h) and not h.startswith(f"{leader}_"),
            "another replica takes the Lease",
            90,
        )
        assert successor.startswith("stateful-jobset-controller-"), successor
        _progress(f"{leader} deleted, {successor} leads ({time.monotonic() - began:.0f}s)")
        cluster.kubectl("create", "-f", "-", input_text=json.dumps(_tiny_jobset("after-failover")))
        _poll(lambda: _condition(cluster, "after-failover"), bool, "after-failover finished", 180)
        assert _condition(cluster, "after-failover") == "Completed"
        _progress("a JobSet created after the failover Completed")
        # The Deployment replaces the deleted pod: two replicas again.
        _poll(
            lambda: _controller_pods(cluster),
            lambda ps: len(ps) == 2 and all(_ready(p) for p in ps),
            "the Deployment back at 2 Ready replicas",
            180,
        )

        undeployed = _undeploy(cluster)
        assert undeployed.returncode == 0, undeployed.stdout + undeployed.stderr
        _progress(f"make undeploy:\n{undeployed.stdout}")
        left = []
        for kind, object_name, namespace in objects:
            where = ["-n", namespace] if namespace else []
            found = cluster.kubectl(
                "get", kind, object_name, *where, "--ignore-not-found", "-o", "name"
            )
            if found.strip():
                left.append(found.strip())
        assert left == [], left
        assert ("Namespace", SYSTEM, None) in objects
        assert ("CustomResourceDefinition", "jobsets.jobset.x-k8s.io", None) in objects
        part_of = "app.kubernetes.io/part-of=stateful-jobset"
        cluster_wide = cluster.kubectl(
            "get", "clusterroles,clusterrolebindings,crd,namespaces", "-l", part_of, "-o", "name"
        )
        assert cluster_wide.strip() == ""
        _progress(f"nothing left behind ({time.monotonic() - began:.0f}s in all)")
    finally:
        if prometheus is not None:
            prometheus.kill()
        cluster.stop()
