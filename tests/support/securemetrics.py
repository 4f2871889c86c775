"""Secure metrics as tests use them: a scraper's bearer token, a scrape as Prometheus makes it,
and the kustomize components rendered with the kubectl this project builds (the flags and Secret
mount they give the controller's Deployment)."""

from __future__ import annotations

import hashlib
import json
import os
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from localcluster.build import ensure_binaries

ROOT = Path(__file__).resolve().parents[2]
READER_ROLE = ROOT / "manifests" / "rbac" / "metrics-reader-role.yaml"
# The scraper the tests read /metrics as: a ServiceAccount bound to the shipped reader role.
SCRAPER_NAMESPACE = "default"
SCRAPER = "metrics-scraper"
_tokens: dict[tuple[str, str], str] = {}


def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    kubectl = ensure_binaries(lambda _: None).path("kubectl")
    done = subprocess.run(
        [str(kubectl), f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def reader_token(kubeconfig: Path) -> str:
    """A bearer token that may read /metrics, as a Prometheus bound to the ClusterRole
    stateful-jobset-metrics-reader has: of the ServiceAccount default/metrics-scraper, bound to
    that role (both applied from the shipped manifest if missing), once the API server's
    authorizer allows it. Made once per cluster (its kubeconfig, as written)."""
    key = (str(kubeconfig), hashlib.sha256(kubeconfig.read_bytes()).hexdigest())
    if key in _tokens:
        return _tokens[key]
    objects = [
        yaml.safe_load(READER_ROLE.read_text()),
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": SCRAPER, "namespace": SCRAPER_NAMESPACE},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": f"stateful-jobset-tests-{SCRAPER}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "stateful-jobset-metrics-reader",
            },
            "subjects": [
                {"kind": "ServiceAccount", "name": SCRAPER, "namespace": SCRAPER_NAMESPACE}
            ],
        },
    ]
    _kubectl(
        kubeconfig,
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=stateful-jobset-tests",
        "-f",
        "-",
        stdin="\n---\n".join(json.dumps(o) for o in objects),
    )
    user = f"system:serviceaccount:{SCRAPER_NAMESPACE}:{SCRAPER}"
    # RBAC reaches the API server's authorizer through an informer: wait until it allows.
    deadline = time.monotonic() + 30
    while True:
        answer = subprocess.run(
            [str(ensure_binaries(lambda _: None).path("kubectl")), f"--kubeconfig={kubeconfig}",
             "auth", "can-i", "get", "/metrics", f"--as={user}",
             "--as-group=system:serviceaccounts"],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        if answer.stdout.strip() == "yes":
            break
        assert time.monotonic() < deadline, f"{user} may still not get /metrics: {answer.stderr}"
        time.sleep(0.2)
    token = _kubectl(
        kubeconfig, "create", "token", SCRAPER, "-n", SCRAPER_NAMESPACE, "--duration=24h"
    ).strip()
    _tokens[key] = token
    return token


def scrape(
    port: int, token: str | None, *, host: str = "127.0.0.1", timeout: float = 15.0
) -> tuple[int, str]:
    """GET https://host:port/metrics as Prometheus does with upstream's ServiceMonitor: the
    bearer token, TLS without verifying the certificate (self-signed). (0, error) when nothing
    answered."""
    request = urllib.request.Request(f"https://{host}:{port}/metrics")
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            return int(response.status), response.read().decode()
    except urllib.error.HTTPError as err:
        return int(err.code), err.read().decode()
    except OSError as err:
        return 0, str(err)


def render(folder: Path, *components: str) -> list[dict[str, Any]]:
    """``kubectl kustomize`` of an overlay: manifests/ with the given components, in order."""
    folder.mkdir()
    base = os.path.relpath(ROOT / "manifests", folder)  # kustomize refuses absolute paths
    (folder / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [base],
                "components": [f"{base}/components/{c}" for c in components],
            }
        )
    )
    kubectl = ensure_binaries(lambda _: None).path("kubectl")
    rendered = subprocess.run(
        [str(kubectl), "kustomize", str(folder)], capture_output=True, text=True, timeout=60
    )
    assert rendered.returncode == 0, rendered.stderr
    return [d for d in yaml.safe_load_all(rendered.stdout) if d]


def only(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"{len(found)} {kind}"
    return found[0]


def secure_args_and_mount(objects: list[dict[str, Any]]) -> tuple[list[str], str, str]:
    """The metrics flags of the rendered Deployment, where its Secret is mounted, the Secret."""
    pod = only(objects, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    secrets = {v["name"]: v["secret"]["secretName"] for v in pod["volumes"] if "secret" in v}
    (volume,) = secrets
    flags = ("--metrics-secure", "--metrics-cert-", "--metrics-auth")
    args = [a for a in container["args"] if a.startswith(flags)]
    return args, mounts[volume]["mountPath"], secrets[volume]


def controller_flags(folder: Path, certs: Path) -> list[str]:
    """The component's flags for a controller run outside a pod: the Secret's mount path
    replaced by ``certs`` (a folder with tls.crt and tls.key)."""
    args, mount, _ = secure_args_and_mount(render(folder, "servicemonitor", "secure-metrics"))
    return [a.replace(mount, str(certs)) for a in args]
