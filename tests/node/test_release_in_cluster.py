"""docs/getting-started.md's "Install into a cluster", from a release, on the real node: the
release (``make release``, into a temporary ``dist/``) verified with ``sha256sum -c``, its image
archive imported into the node's containerd (``ctr images import``, the no-registry route), the
install manifest applied with ``kubectl apply --server-side -f``; then ``rollout status`` succeeds
with both replicas Running and Ready on the node, one of them holds the Lease, the first log line
names the release's version, and ``kubectl delete -f`` removes every object.

The rest of the manifests' behaviour as pods (failover, a JobSet with volumes, Prometheus) is
tests/node/test_manifests_in_cluster.py's, from the same image installed with kustomize.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from localcluster.cluster import LocalCluster
from localcluster.node import host_checks
from tests.support.release import VERSION, make_release

SYSTEM = "stateful-jobset-system"
DEPLOYMENT = "stateful-jobset-controller"

pytestmark = [pytest.mark.own_node, pytest.mark.timeout(900)]


def _present(cluster: LocalCluster, manifest: Path) -> str:
    return cluster.kubectl("get", "-f", str(manifest), "--ignore-not-found", "-o", "name")


def test_getting_started_from_a_release(
    tmp_path_factory: pytest.TempPathFactory, no_session_node: None
) -> None:
    assert host_checks() == [], "this host cannot run containers (make tools installs it)"
    dist = make_release(tmp_path_factory.mktemp("release") / "dist")
    checked = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=dist, capture_output=True, text=True, timeout=60
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr

    # Short: containerd's socket path under it must stay within 104 bytes.
    cluster = LocalCluster(tmp_path_factory.mktemp("rel"), profile="node")
    try:
        cluster.start()
        assert cluster.node is not None
        cluster.node.ctr("images", "import", str(dist / f"stateful-jobset-image-{VERSION}.tar"))
        # (ctr's import progress prints the name with a space for the dash: the list is exact.)
        listed = cluster.node.ctr("images", "ls", "-q").split()
        assert f"docker.io/library/stateful-jobset:{VERSION}" in listed

        manifest = dist / f"stateful-jobset-{VERSION}.yaml"
        cluster.kubectl("apply", "--server-side", "-f", str(manifest))
        cluster.kubectl(
            "-n", SYSTEM, "rollout", "status", f"deployment/{DEPLOYMENT}", "--timeout=240s"
        )
        pods = json.loads(
            cluster.kubectl(
                "-n", SYSTEM, "get", "pods", "-l", "app.kubernetes.io/component=controller",
                "-o", "json",
            )
        )["items"]  # fmt: skip
        names = sorted(p["metadata"]["name"] for p in pods)
        assert len(names) == 2, names
        for pod in pods:
            assert pod["status"]["phase"] == "Running"
            assert pod["spec"]["containers"][0]["image"] == f"stateful-jobset:{VERSION}"

        holder = ""
        deadline = time.monotonic() + 60
        while not holder and time.monotonic() < deadline:
            lease = cluster.kubectl("-n", SYSTEM, "get", "lease", DEPLOYMENT, "-o", "json")
            holder = (json.loads(lease).get("spec") or {}).get("holderIdentity") or ""
            time.sleep(0.5)
        assert [n for n in names if holder.startswith(f"{n}_")], (holder, names)

        first = json.loads(cluster.kubectl("-n", SYSTEM, "logs", names[0]).splitlines()[0])
        assert (first["msg"], first["version"]) == ("stateful-jobset", VERSION)

        cluster.kubectl("delete", "-f", str(manifest), "--wait=true", "--timeout=180s")
        assert _present(cluster, manifest) == ""
    finally:
        cluster.stop()
