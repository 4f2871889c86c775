"""Running the controller exactly as in a pod: manifests applied, a ServiceAccount token minted."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcluster.processes import ManagedProcess, free_port, run_apply
from tests.helpers import Kube
from tests.support.replicas import Replica, secure_metrics

ROOT = Path(__file__).resolve().parents[2]


def _manifest_objects() -> list[dict[str, Any]]:
    rendered = subprocess.run(
        [str(_kubectl()), "kustomize", str(ROOT / "manifests")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return [d for d in yaml.safe_load_all(rendered.stdout) if d]


def _kubectl() -> Path:
    from localcluster.build import ensure_binaries

    return ensure_binaries(lambda _: None).path("kubectl")


def _service_account() -> tuple[str, str]:
    for obj in _manifest_objects():
        if obj["kind"] == "ServiceAccount":
            return obj["metadata"]["namespace"], obj["metadata"]["name"]
    raise AssertionError("manifests/ defines no ServiceAccount")


@pytest.fixture(scope="module")
def installed(full_cluster: Any) -> Iterator[tuple[str, str]]:
    run_apply(
        [
            str(_kubectl()),
            f"--kubeconfig={full_cluster.kubeconfig}",
            "apply",
            "--server-side",
            "-k",
            str(ROOT / "manifests"),
        ],
        what="kubectl apply -k manifests",
        timeout=120,
    )
    yield _service_account()


async def mint_token(kube: Kube, namespace: str, account: str) -> str:
    minted = await kube.raw(
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{account}/token",
        {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600},
        },
    )
    return str(minted["status"]["token"])


def service_account_dir(tmp: Path, kube: Kube, namespace: str, token: str) -> Path:
    folder = tmp / "serviceaccount"
    folder.mkdir()
    (folder / "token").write_text(token)
    (folder / "ca.crt").write_bytes(kube.cluster.pki.ca_cert.read_bytes())
    (folder / "namespace").write_text(namespace)
    return folder


def start_in_cluster(
    kube: Kube, folder: Path, namespace: str, identity: str, log_dir: Path, *flags: str
) -> Replica:
    """``python -m controller`` as a pod runs it: no kubeconfig, only KUBERNETES_SERVICE_HOST/PORT
    and the service-account ``folder``; watching ``namespace``, metrics and health on free
    loopback ports, ``flags`` added. The caller kills it."""
    metrics, health = free_port(), free_port()
    env = {
        **os.environ,
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": kube.cluster.server.rsplit(":", 1)[1],
        "KUBECONFIG": "",
    }
    argv = [
        sys.executable,
        "-m",
        "controller",
        f"--service-account-dir={folder}",
        f"--namespaces={namespace}",
        f"--identity={identity}",
        f"--metrics-bind-address=127.0.0.1:{metrics}",
        f"--health-probe-bind-address=127.0.0.1:{health}",
        *flags,
    ]
    process = ManagedProcess(identity, argv, log_dir / f"{identity}.log", env=env)
    process.start()
    secure = [f.partition("=")[2] for f in flags if f.startswith("--metrics-secure=")]
    return Replica(
        identity, process, metrics, health, kubeconfig=kube.cluster.kubeconfig,
        metrics_secure=secure_metrics(secure[-1] if secure else "true"),
    )  # fmt: skip
