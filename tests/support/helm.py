"""The Helm chart as tests use it: helm built from the Go module proxy (localcluster.build), the
chart rendered with given values, manifests/ rendered with kustomize for comparison, and the
normalisation that makes the two comparable."""

from __future__ import annotations

import copy
import os
import subprocess
from pathlib import Path
from typing import Any

import yaml

from localcluster.build import ensure_binaries, ensure_helm

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "stateful-jobset"
NAMESPACE = "stateful-jobset-system"
RELEASE = "stateful-jobset"
# Labels helm's conventions add to every object, beside the ones manifests/ gives.
HELM_LABELS = frozenset(
    {
        "app.kubernetes.io/instance",
        "app.kubernetes.io/managed-by",
        "app.kubernetes.io/version",
        "helm.sh/chart",
    }
)
KEEP = "helm.sh/resource-policy"

Obj = dict[str, Any]
Key = tuple[str, str, str]  # (kind, namespace or "", name)


class Helm:
    """helm with its own cache, config and data folders (nothing read from or written to ~)."""

    def __init__(self, home: Path, kubeconfig: Path | None = None) -> None:
        # Never skipped: a helm that cannot be built fails the test (BuildError) with the reason.
        self.binary = ensure_helm(lambda _: None)
        self.env = dict(os.environ)
        for name in ("CACHE", "CONFIG", "DATA"):
            folder = home / name.lower()
            folder.mkdir(parents=True, exist_ok=True)
            self.env[f"HELM_{name}_HOME"] = str(folder)
        self.env.pop("KUBECONFIG", None)
        if kubeconfig is not None:
            self.env["KUBECONFIG"] = str(kubeconfig)

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.binary), *args],
            capture_output=True,
            text=True,
            env=self.env,
            timeout=300,
        )
        if check:
            assert done.returncode == 0, f"helm {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
        return done

    def template(self, values: Path | None = None, namespace: str = NAMESPACE) -> list[Obj]:
        """``helm template`` of the chart in ``namespace``, with a values file or the
        defaults."""
        args = ["template", RELEASE, str(CHART), "--namespace", namespace]
        if values is not None:
            args += ["--values", str(values)]
        return parse(self.run(*args).stdout)


# libyaml's loader when PyYAML has it: the CRD is ~350 KB, ten times slower to parse in Python.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse(text: str) -> list[Obj]:
    return [d for d in yaml.load_all(text, Loader=_LOADER) if d]


def kubectl() -> Path:
    return ensure_binaries(lambda _: None).path("kubectl")


def kustomize(folder: Path, components: tuple[str, ...], extra: tuple[str, ...] = ()) -> list[Obj]:
    """``kubectl kustomize`` of an overlay of manifests/ with the given components (in order)
    and extra resources (folders of manifests/, e.g. pod-scope)."""
    folder.mkdir(parents=True)
    base = os.path.relpath(ROOT / "manifests", folder)  # kustomize refuses absolute paths
    overlay = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [base, *(f"{base}/{e}" for e in extra)],
        "components": [f"{base}/components/{c}" for c in components],
    }
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
    done = subprocess.run(
        [str(kubectl()), "kustomize", str(folder)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return parse(done.stdout)


def key(obj: Obj) -> Key:
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]


def by_key(objects: list[Obj]) -> dict[Key, Obj]:
    keyed = {key(o): o for o in objects}
    assert len(keyed) == len(objects), "two objects with the same kind, namespace and name"
    return keyed


def without_helm_metadata(obj: Obj) -> Obj:
    """The object less what helm's conventions add: the HELM_LABELS (which must all be there)
    and the CRD's keep policy. Fails if a label is missing, so the comparison cannot pass by
    dropping something that was never there."""
    out = copy.deepcopy(obj)
    meta = out["metadata"]
    labels = meta.get("labels", {})
    missing = HELM_LABELS - set(labels)
    assert not missing, f"{key(obj)} lacks {sorted(missing)}"
    meta["labels"] = {k: v for k, v in labels.items() if k not in HELM_LABELS}
    annotations = meta.get("annotations", {})
    annotations.pop(KEEP, None)
    if not annotations:
        meta.pop("annotations", None)
    return out


def values_file(folder: Path, values: dict[str, Any]) -> Path:
    path = folder / "values.yaml"
    path.write_text(yaml.safe_dump(values))
    return path
