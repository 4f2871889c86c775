"""The Helm chart (charts/stateful-jobset): lint, the same objects as manifests/, and a release's
whole life on a real API server.

helm is built from the Go module proxy (localcluster.build.ensure_helm; `make helm`), never
skipped. ``helm template`` is compared with ``kubectl kustomize`` of manifests/ and its optional
parts, object by object: same kinds, namespaces and names, same content, modulo labels (helm's
conventional ones added; the chart's common labels on every object) and the keep policy of the
CRD and its admission policy.
The intentional differences are asserted as such:

- no Namespace object: the chart installs into the release's namespace, which
  ``helm install --create-namespace`` makes (helm stores the release there before it creates any
  object, so a chart cannot create its own namespace).

The release's life runs on an API server of its own (no kube-controller-manager, so no pod
runs): the objects are created, changed by an upgrade, removed by an uninstall, except the CRD,
which is kept (``helm.sh/resource-policy: keep``) with every JobSet in it, and with the spec's
admission policy and its binding.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcluster.cluster import LocalCluster
from tests.support.helm import (
    CHART,
    HELM_LABELS,
    KEEP,
    NAMESPACE,
    RELEASE,
    ROOT,
    Helm,
    Key,
    Obj,
    by_key,
    kubectl,
    kustomize,
    parse,
    values_file,
    without_helm_metadata,
)
from tests.support.jobsets import jobset, replicated_job

CRD_NAME = "jobsets.jobset.x-k8s.io"
# What `helm uninstall` leaves (helm.sh/resource-policy: keep): the CRD, with every JobSet, and the
# admission policy that keeps guarding those JobSets' specs, with its binding.
KEPT: set[Key] = {
    ("CustomResourceDefinition", "", CRD_NAME),
    ("ValidatingAdmissionPolicy", "", CRD_NAME),
    ("ValidatingAdmissionPolicyBinding", "", CRD_NAME),
}
NAMESPACE_KEY: Key = ("Namespace", "", NAMESPACE)
# Labels the chart gives every object; kustomize gives them only to the objects of manifests/
# itself (not to those its components or manifests/pod-scope add).
COMMON_LABELS = {"app.kubernetes.io/name", "app.kubernetes.io/part-of"}
ALPHA_GATES = "ElasticJobSet=true,RestartJob=true"
DEFAULT_GATES = "ElasticJobSet=false,RestartJob=false"

# (helm values, kustomize components of manifests/, extra folders of manifests/)
VARIANTS: dict[str, tuple[dict[str, Any], tuple[str, ...], tuple[str, ...]]] = {
    "defaults": ({}, (), ()),
    "servicemonitor": ({"metrics": {"serviceMonitor": {"enabled": True}}}, ("servicemonitor",), ()),
    "secure-metrics": (
        {
            "metrics": {
                "secure": {"secretName": "stateful-jobset-metrics-tls"},
                "serviceMonitor": {"enabled": True},
            }
        },
        ("servicemonitor", "secure-metrics"),
        (),
    ),
    "plain-metrics": (
        {"metrics": {"secure": {"enabled": False}, "serviceMonitor": {"enabled": True}}},
        ("servicemonitor", "plain-metrics"),
        (),
    ),
    "alpha-features": (
        {"featureGates": {"RestartJob": True, "ElasticJobSet": True}},
        ("alpha-features",),
        (),
    ),
    "pod-scope": ({"podScope": {"enabled": True}}, (), ("pod-scope",)),
    "prometheusrule": (
        {"metrics": {"prometheusRule": {"enabled": True}}},
        ("prometheusrule",),
        (),
    ),
}


@pytest.fixture(scope="module")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(tmp_path_factory.mktemp("helm-home"))


def _labels_match(helm_obj: Obj, kustomize_obj: Obj) -> None:
    """Modulo labels: every label kustomize gives is there with its value; the chart adds only
    helm's conventional labels and its common ones."""
    ours = helm_obj["metadata"].get("labels", {})
    theirs = kustomize_obj["metadata"].get("labels", {})
    assert {k: ours.get(k) for k in theirs} == theirs, helm_obj["metadata"]["name"]
    assert set(ours) - set(theirs) <= HELM_LABELS | COMMON_LABELS, helm_obj["metadata"]["name"]


def _spec(obj: Obj) -> Obj:
    """Everything but the labels (compared by _labels_match)."""
    out = copy.deepcopy(obj)
    out["metadata"].pop("labels", None)
    return out


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_template_has_the_objects_of_the_kustomize_manifests(
    helm: Helm, tmp_path: Path, variant: str
) -> None:
    values, components, extra = VARIANTS[variant]
    ours = by_key(helm.template(values_file(tmp_path, values)))
    theirs = by_key(kustomize(tmp_path / "overlay", components, extra))

    # The namespace is helm's (--create-namespace), everything else is the same set.
    assert set(theirs) - set(ours) == {NAMESPACE_KEY}
    assert set(ours) - set(theirs) == set()
    for k, obj in ours.items():
        _labels_match(obj, theirs[k])
        assert _spec(without_helm_metadata(obj)) == _spec(theirs[k]), f"{k} differs"


def test_only_the_crd_is_kept_on_uninstall(helm: Helm) -> None:
    kept = [o["kind"] for o in helm.template() if KEEP in o["metadata"].get("annotations", {})]
    assert kept == [
        "CustomResourceDefinition",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    ]


def test_feature_gates_pick_the_crd_and_the_controller_flag(helm: Helm, tmp_path: Path) -> None:
    """One gate on: the CRD that admits every gated feature, and the controller told exactly which
    gates are on (a JobSet using the other one gets a condition from the controller)."""
    objects = helm.template(values_file(tmp_path, {"featureGates": {"RestartJob": True}}))
    crd = next(o for o in objects if o["kind"] == "CustomResourceDefinition")
    assert crd["metadata"]["annotations"]["jobset.sigs.k8s.io/feature-gates"] == ALPHA_GATES
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    env = {
        e["name"]: e.get("value")
        for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["STATEFUL_JOBSET_FEATURE_GATES"] == "ElasticJobSet=false,RestartJob=true"


def test_values_reach_the_controller(helm: Helm, tmp_path: Path) -> None:
    values = {
        "image": {"repository": "registry.example.com/stateful-jobset", "tag": "9.9.9"},
        "replicas": 3,
        "namespaces": ["team-a", "team-b"],
        "colocateClaims": "never",
        # Helm merges maps with the defaults: null removes the default limits.
        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": None},
        "extraArgs": ["--workers=8"],
        "podDisruptionBudget": {"enabled": False},
        "crds": {"install": False},
        "metrics": {"prometheusRule": {"enabled": True, "labels": {"release": "kube-prom"}}},
    }
    objects = by_key(helm.template(values_file(tmp_path, values)))
    deployment = objects[("Deployment", NAMESPACE, "stateful-jobset-controller")]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "registry.example.com/stateful-jobset:9.9.9"
    assert deployment["spec"]["replicas"] == 3
    assert "--namespaces=team-a,team-b" in container["args"]
    assert "--colocate-claims=never" in container["args"]
    assert container["args"][-1] == "--workers=8"
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "1Gi"}}
    kinds = {k[0] for k in objects}
    assert "PodDisruptionBudget" not in kinds
    assert "CustomResourceDefinition" not in kinds
    rule = objects[("PrometheusRule", NAMESPACE, "stateful-jobset")]
    assert rule["metadata"]["labels"]["release"] == "kube-prom"
    alerts = yaml.safe_load((ROOT / "manifests/alerts/prometheus-rules.yaml").read_text())
    assert rule["spec"] == alerts


def test_default_image_is_the_chart_app_version(helm: Helm) -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    deployment = next(o for o in helm.template() if o["kind"] == "Deployment")
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"stateful-jobset:{chart['appVersion']}"


def test_values_outside_the_schema_are_refused(helm: Helm, tmp_path: Path) -> None:
    bad = values_file(tmp_path, {"featureGates": {"InPlaceRestart": True}})
    done = helm.run("template", RELEASE, str(CHART), "--values", str(bad), check=False)
    assert done.returncode != 0
    assert "InPlaceRestart" in done.stderr


def test_pod_scope_is_refused_before_kubernetes_1_36(helm: Helm) -> None:
    args = ("template", RELEASE, str(CHART), "--set", "podScope.enabled=true")
    done = helm.run(*args, "--kube-version", "1.35.4", check=False)
    assert done.returncode != 0
    assert "podScope.enabled needs Kubernetes >= 1.36" in done.stderr
    names = [o["kind"] for o in parse(helm.run(*args, "--kube-version", "1.36.0").stdout)]
    assert "MutatingAdmissionPolicy" in names


def test_kubernetes_older_than_1_35_is_refused(helm: Helm) -> None:
    """The CRD's rules need 1.35 (docs/operations.md, "Supported Kubernetes versions"): helm
    says so, by the chart's kubeVersion, before anything reaches the API server."""
    args = ("template", RELEASE, str(CHART))
    done = helm.run(*args, "--kube-version", "1.34.0", check=False)
    assert done.returncode != 0
    assert "chart requires kubeVersion: >=1.35.0-0" in done.stderr, done.stderr
    assert "v1.34.0" in done.stderr, done.stderr
    for version in ("1.35.0", "1.35.2-gke.100", "1.37.2"):
        kinds = {o["kind"] for o in parse(helm.run(*args, "--kube-version", version).stdout)}
        assert "Deployment" in kinds, version


@pytest.mark.parametrize(
    "sets",
    [
        [],
        [
            "podScope.enabled=true",
            "metrics.secure.secretName=stateful-jobset-metrics-tls",
            "metrics.serviceMonitor.enabled=true",
            "metrics.prometheusRule.enabled=true",
            "featureGates.RestartJob=true",
        ],
    ],
    ids=["defaults", "everything-on"],
)
def test_lint(helm: Helm, sets: list[str]) -> None:
    args = [a for s in sets for a in ("--set", s)]
    done = helm.run("lint", "--strict", str(CHART), *args)
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


# ------------------------------------------------------------------ a release on a real cluster


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """An API server of its own: the session's has the CRD installed by the tests (not by a
    release), and this module's uninstall must be free to leave it or not. It reports its
    release as its version: the chart's kubeVersion refuses v0.0.0-master."""
    with LocalCluster(
        tmp_path_factory.mktemp("helm-cluster"), profile="apiserver", versioned_apiserver=True
    ) as cluster:
        yield cluster


class Cluster:
    """kubectl on own_cluster."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig

    def run(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [str(kubectl()), f"--kubeconfig={self.kubeconfig}", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done.stdout

    def present(self, manifest: str) -> set[Key]:
        """Which of the manifest's objects exist."""
        out = json.loads(
            self.run("get", "-f", "-", "--ignore-not-found", "-o", "json", stdin=manifest)
        )
        return {
            (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
            for o in out["items"]
        }

    def get(self, kind: str, name: str, namespace: str = NAMESPACE) -> Obj:
        return dict(json.loads(self.run("get", kind, name, "-n", namespace, "-o", "json")))


def _keys(manifest: str) -> set[Key]:
    return set(by_key(parse(manifest)))


def _manifest(helm: Helm) -> str:
    return helm.run("get", "manifest", RELEASE, "-n", NAMESPACE).stdout


def test_install_upgrade_uninstall(own_cluster: LocalCluster, tmp_path: Path) -> None:
    helm = Helm(tmp_path / "helm-home", own_cluster.kubeconfig)
    cluster = Cluster(own_cluster.kubeconfig)
    chart = str(CHART)

    # Install: every object of the release exists, the namespace made by helm.
    helm.run("install", RELEASE, chart, "-n", NAMESPACE, "--create-namespace")
    first = _manifest(helm)
    assert cluster.present(first) == _keys(first)
    assert ("CustomResourceDefinition", "", CRD_NAME) in _keys(first)
    cluster.run("wait", "--for=condition=Established", f"crd/{CRD_NAME}", "--timeout=60s")
    deployment = cluster.get("deployment", "stateful-jobset-controller")
    assert deployment["spec"]["replicas"] == 2
    assert deployment["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"

    # Upgrade: values change objects in place, new ones appear (the Pod-scope policy), and the
    # CRD itself is upgraded (the feature gates' variant), which a crds/ folder never is.
    helm.run(
        "upgrade", RELEASE, chart, "-n", NAMESPACE,
        "--set", "replicas=3", "--set", "namespaces={team-a,team-b}",
        "--set", "podScope.enabled=true", "--set", "featureGates.RestartJob=true",
        "--set", "featureGates.ElasticJobSet=true",
    )  # fmt: skip
    second = _manifest(helm)
    assert cluster.present(second) == _keys(second)
    assert _keys(second) - _keys(first) == {
        ("MutatingAdmissionPolicy", "", "stateful-jobset-pod-scope-volumes"),
        ("MutatingAdmissionPolicyBinding", "", "stateful-jobset-pod-scope-volumes"),
    }
    deployment = cluster.get("deployment", "stateful-jobset-controller")
    assert deployment["spec"]["replicas"] == 3
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert "--namespaces=team-a,team-b" in container["args"]
    assert {"name": "STATEFUL_JOBSET_FEATURE_GATES", "value": ALPHA_GATES} in container["env"]
    crd = cluster.get("crd", CRD_NAME, namespace="")
    assert crd["metadata"]["annotations"]["jobset.sigs.k8s.io/feature-gates"] == ALPHA_GATES
    assert crd["metadata"]["annotations"][KEEP] == "keep"

    # Upgrade back to the defaults (--reset-values): what is no longer rendered is deleted.
    helm.run("upgrade", RELEASE, chart, "-n", NAMESPACE, "--reset-values")
    third = _manifest(helm)
    assert cluster.present(second) == _keys(third)
    assert cluster.get("deployment", "stateful-jobset-controller")["spec"]["replicas"] == 2
    history = json.loads(helm.run("history", RELEASE, "-n", NAMESPACE, "-o", "json").stdout)
    assert [h["revision"] for h in history] == [1, 2, 3]

    # Rollback to the second revision: its objects and its CRD come back.
    helm.run("rollback", RELEASE, "2", "-n", NAMESPACE)
    assert _manifest(helm) == second
    assert cluster.present(second) == _keys(second)
    crd = cluster.get("crd", CRD_NAME, namespace="")
    assert crd["metadata"]["annotations"]["jobset.sigs.k8s.io/feature-gates"] == ALPHA_GATES

    # A JobSet, as a user's, while the release is installed.
    namespace = "team-a"
    cluster.run("create", "namespace", namespace)
    body = json.dumps(jobset("kept", replicated_job("w")))
    cluster.run("apply", "-n", namespace, "-f", "-", stdin=body)

    # Uninstall: every object goes except the CRD (and with it the JobSet) and its policy.
    helm.run("uninstall", RELEASE, "-n", NAMESPACE, "--wait")
    assert cluster.present(second) == KEPT
    kept = cluster.get("jobsets.jobset.x-k8s.io", "kept", namespace=namespace)
    assert kept["metadata"]["name"] == "kept"
    assert json.loads(helm.run("list", "-A", "-o", "json").stdout) == []

    # Installing again takes the kept CRD back into the new release (and back to its defaults).
    helm.run("install", RELEASE, chart, "-n", NAMESPACE)
    fourth = _manifest(helm)
    assert cluster.present(fourth) == _keys(fourth)
    crd = cluster.get("crd", CRD_NAME, namespace="")
    assert crd["metadata"]["annotations"]["jobset.sigs.k8s.io/feature-gates"] == DEFAULT_GATES
    helm.run("uninstall", RELEASE, "-n", NAMESPACE, "--wait")
    assert cluster.present(fourth) == KEPT


def test_take_over_a_kustomize_install(own_cluster: LocalCluster, tmp_path: Path) -> None:
    """`kubectl apply --server-side -k manifests/`, then `helm install --take-ownership
    --force-conflicts`: the release adopts every object (selectors are the same, so the
    Deployment is updated in place), and its uninstall leaves the CRD and the namespace it did
    not make. Without --force-conflicts, helm's server-side apply refuses a field kubectl's
    apply owns (helm 4.3.1 reported the POD_NAMESPACE env's fieldRef)."""
    helm = Helm(tmp_path / "helm-home", own_cluster.kubeconfig)
    cluster = Cluster(own_cluster.kubeconfig)
    cluster.run("apply", "--server-side", "-k", str(ROOT / "manifests"))
    before = cluster.get("deployment", "stateful-jobset-controller")

    take = ("install", RELEASE, str(CHART), "-n", NAMESPACE, "--take-ownership")
    helm.run(*take, "--force-conflicts")
    manifest = _manifest(helm)
    assert cluster.present(manifest) == _keys(manifest)
    after = cluster.get("deployment", "stateful-jobset-controller")
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert after["spec"]["selector"] == before["spec"]["selector"]

    helm.run("uninstall", RELEASE, "-n", NAMESPACE, "--wait")
    assert cluster.present(manifest) == KEPT
    assert cluster.get("namespace", NAMESPACE, namespace="")["metadata"]["name"] == NAMESPACE
