"""The secure-metrics kustomize Component as tests use it: rendered with the kubectl this project
builds, and the flags and Secret mount it gives the controller's Deployment."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from localcluster.build import ensure_binaries
from tests.support.incluster import ROOT

READER_ROLE = ROOT / "manifests" / "components" / "secure-metrics" / "metrics-reader-role.yaml"


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
