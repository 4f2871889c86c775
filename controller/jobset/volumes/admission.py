"""The admission policy that gives each pod of a Pod-scope Job its own claim, and its check.

``policy()`` and ``binding()`` are the objects shipped in ``manifests/pod-scope/`` (generated from
here by ``python -m controller.api.admissiongen [--check]``, which ``make crd`` runs). The
controller reads the installed ones from its caches and ``missing`` says, purely, whether Pod scope
can work: the API server serves ``MutatingAdmissionPolicy`` (Kubernetes 1.36 or later), the
controller may read it, the policy is installed and contains everything the shipped one says, and
its binding binds it. While ``missing`` returns a message, Pod-scope JobSets get
``VolumesReady=False`` with reason ``PodScopePolicyMissing`` and nothing is created for them.

The check is predictive; the placeholder makes the actual outcome safe whatever it says: a pod the
policy did not rewrite (admission plugin disabled, binding narrowed to other namespaces) names a
claim that cannot exist and waits Pending (``podscope``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.jobset.volumes.model import POD_SCOPE_LABEL
from controller.jobset.volumes.podscope import (
    COMPLETION_INDEX_ANNOTATION,
    PLACEHOLDER_SUFFIX,
    POLICY_NAME,
)
from controller.runtime.store import Obj

API_VERSION = "admissionregistration.k8s.io/v1"
REASON_POLICY_MISSING = "PodScopePolicyMissing"
REASON_PODS_UNRESOLVED = "PodScopePodsUnresolved"


@dataclass(frozen=True)
class Blocked:
    """Why nothing is created for a Pod-scope JobSet now: its VolumesReady reason and message."""

    reason: str
    message: str


INSTALL_HINT = (
    "install it with `kubectl apply --server-side -k manifests/pod-scope` "
    '(docs/operations.md, "Pod-scope volumes")'
)

_ENDS_WITH_PLACEHOLDER = f"v.persistentVolumeClaim.claimName.endsWith('-{PLACEHOLDER_SUFFIX}')"


def _has_placeholder(indent: str) -> str:
    return f"has(v.persistentVolumeClaim) &&\n{indent}{_ENDS_WITH_PLACEHOLDER}"


def policy() -> Obj:
    """The MutatingAdmissionPolicy: the trailing ``POD-INDEX`` of a placeholder claim name becomes
    the pod's completion index. Its CEL computes exactly ``podscope.resolved_claim_name``
    (tests/integration/test_pod_scope_policy.py checks both through the API server)."""
    index = f"object.metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"
    return {
        "apiVersion": API_VERSION,
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME},
        "spec": {
            # An expression that cannot be evaluated refuses the pod: never started unresolved.
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ],
                # Only pods of Pod-scope replicated jobs: every other pod skips the policy
                # before any CEL runs.
                "objectSelector": {"matchLabels": {POD_SCOPE_LABEL: "true"}},
            },
            "matchConditions": [
                # Without a canonical completion index (a pod not made by an Indexed Job's
                # controller, an edited annotation) the pod keeps the placeholder and waits.
                {
                    "name": "has-completion-index",
                    "expression": (
                        "has(object.metadata.annotations) &&\n"
                        f"'{COMPLETION_INDEX_ANNOTATION}' in object.metadata.annotations &&\n"
                        f"{index}.matches('^(0|[1-9][0-9]*)$')"
                    ),
                },
                {
                    "name": "has-placeholder-claim",
                    "expression": (
                        f"has(object.spec.volumes) &&\nobject.spec.volumes.exists(v, "
                        f"{_has_placeholder('  ')})"
                    ),
                },
            ],
            "variables": [{"name": "index", "expression": index}],
            "mutations": [
                # A server-side-apply merge: pod volumes are a list keyed by name, so only the
                # placeholder volumes' claimName is set; everything else stays as it is.
                {
                    "patchType": "ApplyConfiguration",
                    "applyConfiguration": {
                        "expression": (
                            "Object{\n"
                            "  spec: Object.spec{\n"
                            "    volumes: object.spec.volumes.filter(v, "
                            f"{_has_placeholder(' ' * 6)}).map(v,\n"
                            "      Object.spec.volumes{\n"
                            "        name: v.name,\n"
                            "        persistentVolumeClaim: "
                            "Object.spec.volumes.persistentVolumeClaim{\n"
                            "          claimName: v.persistentVolumeClaim.claimName.substring(0,\n"
                            "            size(v.persistentVolumeClaim.claimName) - "
                            f"size('{PLACEHOLDER_SUFFIX}')) + variables.index\n"
                            "        }\n"
                            "      })\n"
                            "  }\n"
                            "}"
                        )
                    },
                }
            ],
        },
    }


def binding() -> Obj:
    """Binds the policy cluster-wide (the policy itself selects the pods)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY_NAME},
        "spec": {"policyName": POLICY_NAME},
    }


def _difference(installed: Any, shipped: Any, path: str) -> str | None:
    """The first path where ``installed`` lacks what ``shipped`` says; None when it has it all.

    Fields the API server defaults (``matchPolicy``, an empty ``namespaceSelector``) or an
    operator adds are not differences; a changed or missing value, or a list of another length,
    is.
    """
    if isinstance(shipped, Mapping):
        if not isinstance(installed, Mapping):
            return path
        for key, value in shipped.items():
            found = _difference(installed.get(key), value, f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(shipped, list):
        if not isinstance(installed, list) or len(installed) != len(shipped):
            return path
        for position, (mine, theirs) in enumerate(zip(installed, shipped, strict=True)):
            found = _difference(mine, theirs, f"{path}[{position}]")
            if found is not None:
                return found
        return None
    return None if installed == shipped else path


def _deleting(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def missing(
    unavailable: str | None, installed_policy: Obj | None, installed_binding: Obj | None
) -> str | None:
    """Why Pod-scope volumes cannot work now, as the JobSet's condition says it; None when they can.

    ``unavailable``: why the policies cannot be read at all (the API server does not serve them,
    or the controller may not read them), from the informer; else the installed objects of
    ``POLICY_NAME`` (None: not installed).
    """
    subject = f"MutatingAdmissionPolicy {POLICY_NAME!r}"
    if unavailable is not None:
        return f"Pod-scope volumes need the {subject}, and {unavailable}"
    if installed_policy is None or _deleting(installed_policy):
        return f"Pod-scope volumes need the {subject}, which is not installed: {INSTALL_HINT}"
    differs = _difference(installed_policy.get("spec"), policy()["spec"], "spec")
    if differs is not None:
        return (
            f"Pod-scope volumes need the {subject} as this controller ships it, and the "
            f"installed one differs at {differs} (an older or edited copy): reinstall it with "
            "`kubectl apply --server-side --force-conflicts -k manifests/pod-scope`"
        )
    if installed_binding is None or _deleting(installed_binding):
        return (
            f"Pod-scope volumes need the MutatingAdmissionPolicyBinding {POLICY_NAME!r} (without "
            f"it the policy does nothing), which is not installed: {INSTALL_HINT}"
        )
    bound = (installed_binding.get("spec") or {}).get("policyName")
    if bound != POLICY_NAME:
        return (
            f"Pod-scope volumes need the MutatingAdmissionPolicyBinding {POLICY_NAME!r} to bind "
            f"the policy {POLICY_NAME!r}, and it binds {bound!r}: {INSTALL_HINT}"
        )
    return None


# When the reconciler was built without the policy caches (never in the shipped setup).
NOT_WATCHED = "this controller does not watch MutatingAdmissionPolicies"


def not_served(status: int) -> str:
    """What ``missing`` says when listing the policies answered ``status`` (404 or 403)."""
    if status == 404:
        return (
            "the API server does not serve admissionregistration.k8s.io/v1 "
            "mutatingadmissionpolicies: Pod scope needs Kubernetes 1.36 or later (JobSet and "
            "Job scope work on older versions)"
        )
    return (
        "the controller may not read mutatingadmissionpolicies and their bindings: its "
        "ClusterRole (manifests/rbac) needs get, list and watch on them"
    )


# How long the controller waits, after it first sees the policy installed and bound, before it
# creates Pod-scope Jobs: the API server loads admission policies asynchronously (about 1 s on
# the local v1.37.2 server), and a pod admitted before then keeps its placeholder for good.
SETTLE_SECONDS = 5.0


def settling() -> str:
    """The condition while the policy, just seen installed, is given time to take effect (the
    same words all along: a countdown would rewrite the status on every pass)."""
    return (
        f"the MutatingAdmissionPolicy {POLICY_NAME!r} and its binding were just installed or "
        f"changed: waiting {SETTLE_SECONDS:.0f}s for the API server to load them before any "
        "Pod-scope pod is created"
    )


def unresolved(namespace: str, jobset: str, pods: Mapping[str, list[str]]) -> str:
    """The condition when pods of the JobSet were admitted without the policy's rewrite (by pod
    name, the placeholders they mount): they wait Pending for claims that cannot exist."""
    names = sorted(pods)
    shown = ", ".join(f"{name} ({', '.join(pods[name])})" for name in names[:3])
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return (
        f"{len(names)} pod(s) of this JobSet were admitted without the Pod-scope admission "
        f"policy's rewrite and wait Pending for a claim that cannot exist: {shown}{more}. The "
        f"MutatingAdmissionPolicy {POLICY_NAME!r} and its binding are installed, so the API "
        "server did not run them for these pods: created before it loaded them, the "
        "MutatingAdmissionPolicy admission plugin disabled, or a binding whose matchResources "
        f"excludes namespace {namespace!r}. Once fixed, suspend and resume the JobSet (kubectl "
        f"patch jobset {jobset} -n {namespace} --type=merge -p "
        '\'{"spec":{"suspend":true}}\', then false): its pods are made again and resolved'
    )


@dataclass(frozen=True)
class Seen:
    """The installed policy and binding (their resourceVersions) and when the controller first
    saw them so: the memory behind the settle window, kept by the reconciler between passes."""

    versions: tuple[str, str]
    since: float


@dataclass(frozen=True)
class Readiness:
    """Whether Pod-scope pods can get their claims now: ``blocked`` says why not (None: they
    can), ``look_again`` in how many seconds (the settle window), ``seen`` the memory to keep."""

    blocked: Blocked | None
    look_again: float | None = None
    seen: Seen | None = None


def _version(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def readiness(
    unavailable: str | None,
    installed_policy: Obj | None,
    installed_binding: Obj | None,
    stuck: Callable[[], Mapping[str, list[str]]],
    *,
    namespace: str,
    jobset: str,
    seen: Seen | None,
    now: float,
) -> Readiness:
    """Why Pod-scope pods of a JobSet cannot get their claims now, if so (pure): the policy
    missing (``missing``), just installed or changed (given ``SETTLE_SECONDS`` to take effect,
    counted from ``seen``), or pods of the JobSet's own Jobs admitted without it (``stuck``:
    ``podscope.unresolved_pods``, read only once the policy can work). ``now``: seconds on a
    monotonic clock."""
    why = missing(unavailable, installed_policy, installed_binding)
    if why is not None:
        return Readiness(Blocked(REASON_POLICY_MISSING, why))
    assert installed_policy is not None and installed_binding is not None
    versions = (_version(installed_policy), _version(installed_binding))
    if seen is None or seen.versions != versions:
        seen = Seen(versions, now)
    remaining = SETTLE_SECONDS - (now - seen.since)
    if remaining > 0:
        return Readiness(Blocked(REASON_POLICY_MISSING, settling()), remaining, seen)
    if pods := stuck():
        return Readiness(
            Blocked(REASON_PODS_UNRESOLVED, unresolved(namespace, jobset, pods)), None, seen
        )
    return Readiness(None, None, seen)
