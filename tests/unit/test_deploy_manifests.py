"""Deployment artefacts, checked as files: the Dockerfile, manifests/ and the alert rules.

No cluster and no container engine: these tests read the files. The ClusterRole is pinned to an
explicit list of (apiGroup, resource, verb), each with the code that needs it.
"""

from __future__ import annotations

import functools
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
DOCKERFILE = REPO / "Dockerfile"
ALERTS = MANIFESTS / "alerts" / "prometheus-rules.yaml"
NAME_LABELS = {
    "app.kubernetes.io/name": "stateful-jobset",
    "app.kubernetes.io/component": "controller",
}

# Every permission the controller needs, and why. Nothing else may be granted.
CLUSTER_ROLE: dict[tuple[str, str, str], str] = {
    # JobSets: the informer (setup.py: manager.cache(api.JOBSETS)) lists and watches.
    ("jobset.x-k8s.io", "jobsets", "list"): "informer initial list and re-list after 410",
    ("jobset.x-k8s.io", "jobsets", "watch"): "informer watch",
    ("jobset.x-k8s.io", "jobsets", "patch"): "retention finalizer add/remove (JSON patch)",
    ("jobset.x-k8s.io", "jobsets", "delete"): "ttlSecondsAfterFinished deletes the JobSet",
    ("jobset.x-k8s.io", "jobsets/status", "update"): "status written with PUT + resourceVersion",
    # Never requested: OwnerReferencesPermissionEnforcement (e.g. OpenShift) requires it to set
    # blockOwnerDeletion on the ownerReference to a JobSet (model.py, volumes.py).
    ("jobset.x-k8s.io", "jobsets/finalizers", "update"): "blockOwnerDeletion on child objects",
    # Child Jobs (batch/v1).
    ("batch", "jobs", "list"): "informer of labelled child Jobs",
    ("batch", "jobs", "watch"): "informer of labelled child Jobs",
    ("batch", "jobs", "create"): "create child Jobs",
    ("batch", "jobs", "delete"): "restarts, scale-down, finished attempts (foreground)",
    ("batch", "jobs", "patch"): "spec.suspend and resumed pod-template directives",
    ("batch", "jobs/status", "patch"): "clear status.startTime of a Job being resumed",
    # Headless Service for pod DNS.
    ("", "services", "list"): "informer of labelled Services",
    ("", "services", "watch"): "informer of labelled Services",
    ("", "services", "create"): "create the JobSet's headless Service",
    # Claims: all of them are watched (a conflict is precisely a claim we did not label).
    ("", "persistentvolumeclaims", "list"): "informer of claims",
    ("", "persistentvolumeclaims", "watch"): "informer of claims",
    ("", "persistentvolumeclaims", "create"): "create claims from templates",
    ("", "persistentvolumeclaims", "patch"): "adopt, retain (drop ownerRef), expand, metadata",
    ("", "persistentvolumeclaims", "delete"): "retention Delete (deletion, completion, scale)",
    # Storage classes: binding mode and expansion support, read only.
    ("storage.k8s.io", "storageclasses", "list"): "informer of storage classes",
    ("storage.k8s.io", "storageclasses", "watch"): "informer of storage classes",
    # core/v1 Events in the JobSets' namespaces (events.py).
    ("", "events", "create"): "record an Event",
    ("", "events", "patch"): "bump count/lastTimestamp of a repeated Event",
}
# The Role in the controller's namespace (leaderelection.py).
LEADER_ELECTION_ROLE: dict[tuple[str, str, str], str] = {
    ("coordination.k8s.io", "leases", "get"): "read the Lease",
    ("coordination.k8s.io", "leases", "create"): "the first replica creates the Lease",
    ("coordination.k8s.io", "leases", "update"): "acquire, renew, release (PUT)",
}
FORBIDDEN_RESOURCES = {"secrets", "configmaps", "pods", "pods/exec", "nodes", "serviceaccounts"}


# ------------------------------------------------------------------------------------ helpers


def _stages() -> list[list[str]]:
    """The Dockerfile's stages, each a list of instructions (continuations joined)."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    stages: list[list[str]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.upper().startswith("FROM "):
            stages.append([])
        if stages:
            stages[-1].append(line)
    return stages


@functools.cache
def _docs(path: Path) -> list[dict[str, Any]]:
    """A file's YAML documents, parsed once (the CRD alone is ~350 KB)."""
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def _kustomization_files(directory: Path) -> set[Path]:
    """Every file a kustomization (and the kustomizations it includes) uses, itself included."""
    kfile = directory / "kustomization.yaml"
    kust = _docs(kfile)[0]
    used = {kfile}
    for entry in kust.get("resources", []) + kust.get("components", []):
        target = (directory / entry).resolve()
        used |= _kustomization_files(target) if target.is_dir() else {target}
    return used


def _objects() -> list[dict[str, Any]]:
    return [d for f in sorted(_kustomization_files(MANIFESTS)) for d in _docs(f)]


def _one(kind: str, objects: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    found = [o for o in (objects if objects is not None else _objects()) if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def _grants(role: dict[str, Any]) -> dict[tuple[str, str, str], int]:
    grants: dict[tuple[str, str, str], int] = {}
    for rule in role["rules"]:
        assert "resourceNames" not in rule and "nonResourceURLs" not in rule, rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    key = (group, resource, verb)
                    grants[key] = grants.get(key, 0) + 1
    return grants


def _deployment_pod() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    deployment = _one("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    containers = pod["containers"]
    assert len(containers) == 1
    return deployment, pod, containers[0]


# ---------------------------------------------------------------------------------- Dockerfile


def test_dockerfile_is_multi_stage_from_python_311_slim() -> None:
    stages = _stages()
    assert len(stages) >= 2
    args = {
        m.group(1): m.group(2)
        for m in re.finditer(r"^ARG (\w+)=(\S+)$", DOCKERFILE.read_text(), re.MULTILINE)
    }
    for stage in stages:
        image = stage[0].split()[1]
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], image)
        assert image == "python:3.11-slim", stage[0]
    builder = " ".join(stages[0])
    assert "pip install --no-cache-dir -c requirements.lock ." in builder
    assert "[test" not in builder and "[dev" not in builder and "-e " not in builder


def test_dockerfile_final_stage_is_minimal_and_non_root() -> None:
    final = _stages()[-1]
    text = "\n".join(final)
    users = [line.split()[1] for line in final if line.upper().startswith("USER ")]
    assert users, "the final stage sets no USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0") and (not user.isdigit() or int(user) == 65532), users
    for forbidden in ("gcc", "build-essential", "apt-get install", "pip install", "[test", "[dev"):
        assert forbidden not in text, f"final stage contains {forbidden!r}"
    copies = [line for line in final if line.upper().startswith(("COPY", "ADD"))]
    assert copies and all("--from=builder" in c and "/opt/venv" in c for c in copies), copies
    assert any(re.match(r"ENV .*PATH=/opt/venv/bin:", line) for line in final)
    assert re.search(r"PYTHONDONTWRITEBYTECODE=1", text)
    assert re.search(r"PYTHONUNBUFFERED=1", text)
    entrypoints = [line for line in final if line.upper().startswith("ENTRYPOINT")]
    assert entrypoints == ['ENTRYPOINT ["python", "-m", "controller"]']


def test_dockerfile_copies_only_what_the_build_needs() -> None:
    builder = _stages()[0]
    sources = {s for line in builder if line.startswith("COPY ") for s in shlex.split(line)[1:-1]}
    assert sources == {"pyproject.toml", "requirements.lock", "README.md", "controller"}


# --------------------------------------------------------------------------------- kustomization


def test_every_manifest_parses_as_yaml() -> None:
    for path in sorted(MANIFESTS.rglob("*.y*ml")):
        docs = _docs(path)
        assert docs, f"{path} is empty"
        if path != ALERTS:
            for doc in docs:
                assert {"apiVersion", "kind"} <= doc.keys(), path


def test_kustomization_lists_every_manifest_and_not_the_optional_parts() -> None:
    used = _kustomization_files(MANIFESTS)
    present = {p.resolve() for p in MANIFESTS.rglob("*.y*ml")}
    # Not part of the default install, on purpose: example JobSets, the optional ServiceMonitor
    # component, and the Prometheus rule file (not a Kubernetes object).
    optional = {
        p.resolve()
        for folder in ("examples", "components", "alerts")
        for p in (MANIFESTS / folder).rglob("*.y*ml")
    }
    orphans = sorted(str(p.relative_to(MANIFESTS)) for p in present - used - optional)
    assert not orphans, f"manifests not listed in a kustomization: {orphans}"
    assert not used & optional
    kust = _docs(MANIFESTS / "kustomization.yaml")[0]
    assert not kust.get("components"), "the ServiceMonitor component must stay opt-in"
    assert kust["namespace"] == "stateful-jobset-system"
    assert {"name": "stateful-jobset", "newName": "stateful-jobset", "newTag": "0.1.0"} in kust[
        "images"
    ]
    assert _one("Namespace")["metadata"]["name"] == "stateful-jobset-system"
    assert _one("CustomResourceDefinition")["metadata"]["name"] == "jobsets.jobset.x-k8s.io"


def test_servicemonitor_component_scrapes_the_metrics_service() -> None:
    folder = MANIFESTS / "components" / "servicemonitor"
    kust = _docs(folder / "kustomization.yaml")[0]
    assert kust["kind"] == "Component"
    monitors = [d for f in kust["resources"] for d in _docs(folder / f)]
    monitor = _one("ServiceMonitor", monitors)
    service = _one("Service")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items()
        <= {**service["metadata"]["labels"], "app.kubernetes.io/name": "stateful-jobset"}.items()
    )
    ports = {p["name"] for p in service["spec"]["ports"]}
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["http-metrics"]
    assert "http-metrics" in ports
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == ["stateful-jobset-system"]


# ----------------------------------------------------------------------------------- Deployment


def test_deployment_replicas_probes_ports_and_args() -> None:
    deployment, pod, container = _deployment_pod()
    assert deployment["spec"]["replicas"] == 2
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels.items() >= NAME_LABELS.items()
    assert deployment["spec"]["selector"]["matchLabels"] == NAME_LABELS
    assert container["image"] == "stateful-jobset:0.1.0"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http-metrics": 8080, "health": 8081}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    args = container["args"]
    assert "--leader-election-namespace=$(POD_NAMESPACE)" in args
    assert "--metrics-bind-address=:8080" in args
    assert "--health-probe-bind-address=:8081" in args
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    timeout = next(float(a.split("=")[1]) for a in args if a.startswith("--shutdown-timeout="))
    assert pod["terminationGracePeriodSeconds"] > timeout
    assert pod["serviceAccountName"] == _one("ServiceAccount")["metadata"]["name"]


def test_deployment_security_context_and_resources() -> None:
    _, pod, container = _deployment_pod()
    security = container["securityContext"]
    assert security["runAsNonRoot"] is True
    assert security["runAsUser"] == 65532
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    resources = container["resources"]
    assert resources["requests"] == {"cpu": "100m", "memory": "256Mi"}
    assert resources["limits"] == {"cpu": "1", "memory": "512Mi"}


def test_deployment_spreads_replicas_and_the_pdb_keeps_one() -> None:
    _, pod, _ = _deployment_pod()
    preferred = pod["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    term = preferred[0]["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"] == NAME_LABELS
    pdb = _one("PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == NAME_LABELS
    service = _one("Service")
    assert service["spec"]["selector"] == NAME_LABELS
    assert service["spec"]["ports"][0]["port"] == 8080


# ----------------------------------------------------------------------------------------- RBAC


def test_cluster_role_grants_exactly_what_the_controller_uses() -> None:
    role = _one("ClusterRole")
    grants = _grants(role)
    duplicates = sorted(k for k, n in grants.items() if n > 1)
    assert not duplicates, duplicates
    assert set(grants) == set(CLUSTER_ROLE), (
        f"extra: {sorted(set(grants) - set(CLUSTER_ROLE))}, "
        f"missing: {sorted(set(CLUSTER_ROLE) - set(grants))}"
    )
    for group, resource, verb in grants:
        assert "*" not in (group, resource, verb)
        assert resource not in FORBIDDEN_RESOURCES


def test_leader_election_role_is_namespaced_to_the_controller() -> None:
    role = _one("Role")
    assert role["metadata"]["namespace"] == "stateful-jobset-system"
    assert set(_grants(role)) == set(LEADER_ELECTION_ROLE)
    account = _one("ServiceAccount")["metadata"]
    subject = {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    for kind, role_kind, name in (
        ("RoleBinding", "Role", role["metadata"]["name"]),
        ("ClusterRoleBinding", "ClusterRole", _one("ClusterRole")["metadata"]["name"]),
    ):
        binding = _one(kind)
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": name,
        }
        assert binding["subjects"] == [subject]
