"""Deployment manifests, checked as files (kustomization, Deployment, RBAC).

No cluster: these tests read the files. What the RBAC must grant is derived from the controller's
code (every API call it makes, every informer it starts, every ownerReference it sets), not from a
list kept beside the manifests; tests/e2e/test_in_cluster.py runs the controller with exactly these
roles. The Dockerfile is not read here but carried out (tests/integration/test_entrypoint_venv.py).
"""

from __future__ import annotations

import ast
import functools
import importlib
from pathlib import Path
from typing import Any

import yaml

import controller
from controller import config
from controller.jobset import api, construct, upstream
from controller.jobset.model import parse
from controller.jobset.volumes import spec as volume_spec
from controller.jobset.volumes.desired import desired_claims
from controller.runtime.client import Resource
from tests.support.examples import SUPPORTED

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "manifests"
ALERTS = MANIFESTS / "alerts" / "prometheus-rules.yaml"
NAME_LABELS = {
    "app.kubernetes.io/name": "stateful-jobset",
    "app.kubernetes.io/component": "controller",
}

FORBIDDEN_RESOURCES = {"secrets", "configmaps", "pods/exec", "nodes", "serviceaccounts"}
# Pods may be listed and watched (those of Pod-scope replicated jobs), never written.
READ_ONLY_RESOURCES = {"pods": {"list", "watch"}}
CONTROLLER = Path(controller.__file__).resolve().parent
# KubeClient methods and the RBAC verb each one needs.
CLIENT_VERBS = {
    "get": "get",
    "list": "list",
    "watch": "watch",
    "create": "create",
    "replace": "update",
    "patch": "patch",
    "delete": "delete",
}
# The generic informer lists and watches whatever resource it is given: the resources come from
# the manager.cache(...) calls, which grant list and watch.
GENERIC = {CONTROLLER / "runtime" / "informer.py", CONTROLLER / "runtime" / "client.py"}
# Modules that list objects by name from a table of their own: the calls read a (resource, name)
# of that table, and nothing else (the module asserts it).
NAMED_READERS = {CONTROLLER / "jobset" / "upstream.py": upstream.READS}
# (apiGroup, resource[/subresource], verb, name): name "" for any object, else the one object a
# field selector `named(...)` picks (RBAC resourceNames).
Grant = tuple[str, str, str, str]


# ------------------------------------------------------------------------------------ helpers


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


def _named(kind: str, name: str) -> dict[str, Any]:
    found = [o for o in _objects() if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def _controller_role() -> dict[str, Any]:
    """The controller's ClusterRole (the others are for users)."""
    return _named("ClusterRole", "stateful-jobset-controller")


def _grants(role: dict[str, Any]) -> dict[Grant, int]:
    grants: dict[Grant, int] = {}
    for rule in role["rules"]:
        assert "nonResourceURLs" not in rule, rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    for name in rule.get("resourceNames") or [""]:
                        key = (group, resource, verb, name)
                        grants[key] = grants.get(key, 0) + 1
    return grants


def _deployment_pod() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    deployment = _one("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    containers = pod["containers"]
    assert len(containers) == 1
    return deployment, pod, containers[0]


# ----------------------------------------------------------------- what the code needs (RBAC)


def _modules() -> dict[Path, ast.Module]:
    return {
        path: ast.parse(path.read_text(), str(path)) for path in sorted(CONTROLLER.rglob("*.py"))
    }


def _resources(modules: dict[Path, ast.Module]) -> dict[str, Resource]:
    """Every module-level ``NAME = Resource(...)`` of the controller, by name (names are unique)."""
    found: dict[str, Resource] = {}
    for path, tree in modules.items():
        assignments = [
            node.targets[0]
            for node in tree.body
            if isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.value, ast.Call)
            and ast.unparse(node.value.func).split(".")[-1] == "Resource"
        ]
        if not assignments:
            continue
        module = importlib.import_module(
            ".".join(path.relative_to(CONTROLLER.parent).with_suffix("").parts)
        )
        for target in assignments:
            if not isinstance(target, ast.Name):
                continue
            value = getattr(module, target.id, None)
            if isinstance(value, Resource):
                assert found.get(target.id, value) == value, f"two resources named {target.id}"
                found[target.id] = value
    return found


def _resource_of(node: ast.expr, resources: dict[str, Resource]) -> Resource | None:
    name = (
        node.id
        if isinstance(node, ast.Name)
        else node.attr
        if isinstance(node, ast.Attribute)
        else ""
    )
    return resources.get(name)


def _subresource(call: ast.Call) -> str:
    for keyword in call.keywords:
        if keyword.arg == "subresource":
            assert isinstance(keyword.value, ast.Constant), ast.unparse(call)
            return "/" + str(keyword.value.value)
    return ""


@functools.cache
def _needed_by_the_code() -> dict[Grant, list[str]]:
    """Every (apiGroup, resource, verb) the controller's code asks the API server for, with where.

    A call ``<...>client.<method>(RESOURCE, ...)`` needs ``method``'s verb on RESOURCE (and its
    ``subresource=``); ``<...>.cache(RESOURCE, ...)`` starts informers, which list and watch. A
    client call whose resource cannot be resolved to a ``Resource`` constant fails the test, so a
    new kind of call cannot go unnoticed.
    """
    modules = _modules()
    resources = _resources(modules)
    needed: dict[Grant, list[str]] = {}
    unresolved: list[str] = []

    def need(resource: Resource, sub: str, verb: str, where: str, name: str = "") -> None:
        needed.setdefault((resource.group, resource.plural + sub, verb, name), []).append(where)

    def picked(path: Path, call: ast.Call) -> str | None:
        """The name a ``field_selector=named(X)`` keyword picks ("" without one; None when X
        is not a constant of the module)."""
        for keyword in call.keywords:
            if keyword.arg != "field_selector":
                continue
            value = keyword.value
            if not (isinstance(value, ast.Call) and ast.unparse(value.func) == "named"):
                return None
            module = importlib.import_module(
                ".".join(path.relative_to(CONTROLLER.parent).with_suffix("").parts)
            )
            try:
                found = eval(ast.unparse(value.args[0]), vars(module))
            except NameError:
                return None
            return found if isinstance(found, str) else None
        return ""

    for path, tree in modules.items():
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            where = f"{path.relative_to(CONTROLLER.parent)}:{node.lineno}"
            method, receiver = node.func.attr, ast.unparse(node.func.value)
            if method == "cache" and node.args:
                resource = _resource_of(node.args[0], resources)
                name = picked(path, node)
                if resource is None or name is None:
                    unresolved.append(f"{where}: {ast.unparse(node)}")
                else:
                    need(resource, "", "list", where, name)
                    need(resource, "", "watch", where, name)
            elif method in CLIENT_VERBS and receiver.split(".")[-1].endswith("client"):
                if path in GENERIC:
                    continue
                resource = _resource_of(node.args[0], resources) if node.args else None
                name = picked(path, node)
                if path in NAMED_READERS and method == "list" and resource is None:
                    for read, read_name in NAMED_READERS[path]:
                        need(read, "", "list", where, read_name)
                elif resource is None or name is None:
                    unresolved.append(f"{where}: {ast.unparse(node)}")
                else:
                    need(resource, _subresource(node), CLIENT_VERBS[method], where, name)
    assert not unresolved, f"API calls whose resource the test cannot tell: {unresolved}"

    # Setting blockOwnerDeletion on a reference to an owner needs update on the owner's
    # finalizers subresource where OwnerReferencesPermissionEnforcement is enabled (OpenShift):
    # look at what the controller creates for an example that has every kind of child.
    by_kind = {(r.api_version, r.kind): r for r in resources.values()}
    for path in SUPPORTED:
        obj = yaml.safe_load(path.read_text())
        obj["metadata"].update(namespace="ns", uid="uid-1")
        jobset = parse(obj)
        policies = volume_spec.policies(jobset)
        children = [construct.desired_job(jobset, r, 0) for r in jobset.replicated_jobs]
        children.append(construct.desired_service(jobset) or {})
        children += [c.object for c in desired_claims(jobset, policies)]
        for child in children:
            for ref in (child.get("metadata") or {}).get("ownerReferences") or []:
                if ref.get("blockOwnerDeletion"):
                    owner = by_kind[(ref["apiVersion"], ref["kind"])]
                    need(owner, "/finalizers", "update", f"blockOwnerDeletion in {path.name}")
    return needed


def test_the_derivation_sees_the_calls_it_must() -> None:
    """The derivation itself: calls known to be in the code are found (a broken scan finds none)."""
    needed = _needed_by_the_code()
    for grant in (
        (api.GROUP, "jobsets", "watch", ""),  # setup.py: manager.cache(api.JOBSETS)
        (api.GROUP, "jobsets/status", "update", ""),  # reconciler: replace(subresource=status)
        ("batch", "jobs", "create", ""),
        ("events.k8s.io", "events", "patch", ""),  # events.py: the series of a repeated Event
        ("coordination.k8s.io", "leases", "update", ""),  # leaderelection.py: replace
        (api.GROUP, "jobsets/finalizers", "update", ""),  # blockOwnerDeletion on children
        # upstream.py: its Lease, listed by name
        ("coordination.k8s.io", "leases", "list", "6d4f6a47.jobset.x-k8s.io"),
        ("apps", "deployments", "list", "jobset-controller"),
    ):
        assert grant in needed, grant


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
    # component, the Prometheus rule file (not a Kubernetes object), and the Pod-scope admission
    # policy (MutatingAdmissionPolicy v1 needs Kubernetes >= 1.36, which the rest does not; and
    # kustomize 5.8 does not know it is cluster-scoped, so it would get the install's namespace).
    optional = {
        p.resolve()
        for folder in ("examples", "components", "alerts", "pod-scope")
        for p in (MANIFESTS / folder).rglob("*.y*ml")
    }
    orphans = sorted(str(p.relative_to(MANIFESTS)) for p in present - used - optional)
    assert not orphans, f"manifests not listed in a kustomization: {orphans}"
    assert not used & optional
    kust = _docs(MANIFESTS / "kustomization.yaml")[0]
    assert not kust.get("components"), "the ServiceMonitor component must stay opt-in"
    assert kust["namespace"] == "stateful-jobset-system"
    assert {
        "name": "stateful-jobset",
        "newName": "stateful-jobset",
        "newTag": controller.__version__,
    } in kust["images"]
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
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "https-metrics" and endpoint["scheme"] == "https"
    assert "https-metrics" in ports
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == ["stateful-jobset-system"]


# ----------------------------------------------------------------------------------- Deployment


def test_deployment_replicas_probes_ports_and_args() -> None:
    deployment, pod, container = _deployment_pod()
    assert deployment["spec"]["replicas"] == 2
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels.items() >= NAME_LABELS.items()
    assert deployment["spec"]["selector"]["matchLabels"] == NAME_LABELS
    assert container["image"] == f"stateful-jobset:{controller.__version__}"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"https-metrics": 8443, "health": 8081}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    args = container["args"]
    assert "--leader-election-namespace=$(POD_NAMESPACE)" in args
    assert "--metrics-bind-address=:8443" in args
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
    assert service["spec"]["ports"][0]["port"] == 8443


# ----------------------------------------------------------------------------------------- RBAC


def _lease_grants(needed: dict[Grant, list[str]]) -> set[Grant]:
    """Leader election's: its own Lease, in its own namespace (upstream's, read by name across
    namespaces, is the ClusterRole's)."""
    return {
        g
        for g in needed
        if (g[0], g[1].split("/")[0]) == ("coordination.k8s.io", "leases") and not g[3]
    }


def test_cluster_role_grants_exactly_what_the_controller_uses() -> None:
    needed = _needed_by_the_code()
    wanted = set(needed) - _lease_grants(needed)
    role = _controller_role()
    grants = _grants(role)
    duplicates = sorted(k for k, n in grants.items() if n > 1)
    assert not duplicates, duplicates
    extra = sorted(set(grants) - wanted)
    missing = {g: needed[g] for g in sorted(wanted - set(grants))}
    assert not extra and not missing, (
        f"granted but never used: {extra}; used (at) but not granted: {missing}"
    )
    for group, resource, verb, name in grants:
        assert "*" not in (group, resource, verb)
        assert resource not in FORBIDDEN_RESOURCES
        assert verb in READ_ONLY_RESOURCES.get(resource, {verb}), (resource, verb)
        if name:  # objects read by name are never written
            assert verb in ("get", "list", "watch"), (resource, verb, name)


def test_user_roles_are_upstreams_and_aggregate_into_the_builtin_roles() -> None:
    """Upstream's jobset-editor-role and jobset-viewer-role rules, with the aggregation labels
    (tests/e2e/test_user_roles.py proves the aggregation on a real control plane)."""
    editor, viewer = (
        _named("ClusterRole", "stateful-jobset-editor"),
        _named("ClusterRole", "stateful-jobset-viewer"),
    )
    status = {("jobset.x-k8s.io", "jobsets/status", "get", "")}
    writes = ("create", "delete", "patch", "update")
    reads = ("get", "list", "watch")
    assert (
        set(_grants(editor))
        == {("jobset.x-k8s.io", "jobsets", verb, "") for verb in reads + writes} | status
    )
    assert (
        set(_grants(viewer))
        == {("jobset.x-k8s.io", "jobsets", verb, "") for verb in reads} | status
    )
    aggregate = "rbac.authorization.k8s.io/aggregate-to-"
    marks = {
        name: {k.removeprefix(aggregate) for k, v in role["metadata"]["labels"].items()
               if k.startswith(aggregate) and v == "true"}
        for name, role in (("editor", editor), ("viewer", viewer))
    }  # fmt: skip
    assert marks == {"editor": {"edit", "admin"}, "viewer": {"view"}}
    # Nothing binds them: the built-in roles carry them to users.
    bound = {o["roleRef"]["name"] for o in _objects() if o["kind"].endswith("RoleBinding")}
    assert not bound & {"stateful-jobset-editor", "stateful-jobset-viewer"}


def test_leader_election_role_is_namespaced_to_the_controller() -> None:
    role = _one("Role")
    assert role["metadata"]["namespace"] == "stateful-jobset-system"
    leases = _lease_grants(_needed_by_the_code())
    assert leases, "the code takes no Lease: leader election not found"
    assert set(_grants(role)) == leases
    account = _one("ServiceAccount")["metadata"]
    subject = {"kind": "ServiceAccount", "name": account["name"], "namespace": account["namespace"]}
    for kind, role_kind, name in (
        ("RoleBinding", "Role", role["metadata"]["name"]),
        ("ClusterRoleBinding", "ClusterRole", _controller_role()["metadata"]["name"]),
    ):
        binding = _one(kind)
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": role_kind,
            "name": name,
        }
        assert binding["subjects"] == [subject]


# ------------------------------------------------------------------------ beside upstream's


# Upstream JobSet v0.12.0's install (config/default): its namespace, Deployment, leader election
# Lease and webhook Service.
UPSTREAM_NAMES = {
    "jobset-system",
    "jobset-controller-manager",
    "6d4f6a47.jobset.x-k8s.io",
    "jobset-webhook-service",
}


def test_installed_under_its_own_names_with_no_webhook() -> None:
    """The namespace, Deployment and Lease are this project's own, not upstream's, and nothing
    serves a webhook (no webhook configuration, Service or certificate): installed beside
    upstream's controller (a canary), it replaces none of upstream's objects."""
    objects = _objects()
    assert _docs(MANIFESTS / "kustomization.yaml")[0]["namespace"] == "stateful-jobset-system"
    assert _one("Namespace", objects)["metadata"]["name"] == "stateful-jobset-system"
    deployment, _, container = _deployment_pod()
    assert deployment["metadata"]["name"] == "stateful-jobset-controller"
    # The Lease: the controller's default, not set otherwise by the Deployment.
    assert config.parse([], env={}).leader_election_id == "stateful-jobset-controller"
    assert not [a for a in container["args"] if a.startswith("--leader-election-id")]
    assert not [e for e in container.get("env", []) if e["name"].endswith("LEADER_ELECTION_ID")]
    webhooks = {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "Certificate"}
    assert not webhooks & {o["kind"] for o in objects}
    services = [o["metadata"]["name"] for o in objects if o["kind"] == "Service"]
    assert services == ["stateful-jobset-controller-metrics"]
    metadata = [o.get("metadata") or {} for o in objects]
    names = {m.get("name") for m in metadata} | {m.get("namespace") for m in metadata}
    assert not names & UPSTREAM_NAMES
