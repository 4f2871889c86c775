"""The JobSet spec's cross-field and immutability rules as a ValidatingAdmissionPolicy.

Why not in the CRD: the API server runs every ``x-kubernetes-validations`` rule of a CRD on every
write of the object, status updates included (the status subresource validates the whole object;
ratcheting only turns an error on an unchanged field into a warning, it still evaluates the rule).
A JobSet's status is written several times in its life, its spec rarely: the rules that read the
spec made each status update cost the API server 2.5 to 3 times what it costs with upstream's CRD
(docs/performance.md, "What a JobSet write costs the API server"). A ValidatingAdmissionPolicy
bound to ``jobsets`` does not match a request on ``jobsets/status``, and its match condition skips
updates that leave the spec as it was (a finalizer added or removed, a label changed), so the
rules run on creates and spec changes only.

Which rules move: every rule of the generated CRD on a node reached from the root through object
properties only (the root, ``spec``, ``spec.volumeClaimPolicies`` as a whole, ...): 40 of 70, the
cross-field checks and the transition (immutability) rules, about 70 % of the CEL time. Rules on
list items and map values (``spec.replicatedJobs[]``, a claim template's labels) stay in the CRD:
they are per-field, cheap, and the CRD reports all their errors at once with their field paths.

How a rule is carried over, exactly: the API server evaluates a policy's CEL on the object as
plain data (no schema types), so a CRD rule on the node at ``a.b`` becomes
``!has(object.a) || !has(object.a.b) || [object.a.b].all(self, RULE)`` (a CRD rule runs only
when its node is present), a transition rule also binds ``oldSelf`` and holds on a create or when
the old object lacks the node (as a CRD transition rule, which runs only when both exist), and
escaped reserved words (``__namespace__``) are written plainly. The API server reports a policy's
first failing validation only, so the rules are variables and one validation lists every failing
one (``validations``). One behaviour differs from the CRD and is documented (docs/api.md): a
list's equality is order-sensitive (a CRD compares ``x-kubernetes-list-type: map/set`` lists
without order), which only makes the immutability rules stricter.

Which JobSets it judges. The policy holds the ``spec.managedBy`` value the controller serves, as
its variable ``managedBy`` (a CEL string literal written at install time: the generated file has
upstream's reserved value; a canary's kustomize overlay copies its Deployment's value into it, the
chart writes its ``managedBy`` value into both). With upstream's reserved value (the default: this
controller replaces upstream JobSet) every JobSet is this controller's to judge, as upstream's
webhook judges every JobSet. With another value (a canary beside upstream) only the JobSets naming
it, in the new or the stored object (so that a change of ``managedBy`` is still judged): the
others are upstream's, and get only the rules of upstream's own CRD that this project's CRD, which
replaced it, does not have (``UPSTREAM_SITES``), so upstream's JobSets are judged as upstream
judges them. The controller checks that the installed policy holds the value it serves
(``missing``).

Why a literal and not a parameter (``paramKind: ConfigMap``, which would let a deleted ConfigMap
switch the policy off): the API server (v1.37.2's ``policy_source.go``; Kubernetes issue 130887)
watches a built-in parameter kind through its shared informer factory and stops that informer for
good as soon as no binding uses the kind; a later binding then reads a frozen copy of the
ConfigMap until the API server restarts. An uninstall followed by a canary install judged
JobSets by the old value (found by tests/node/test_canary.py).

Pure: a CRD in, the CRD without the moved rules and the policy out.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator
from dataclasses import dataclass

from controller.api import volumekeys
from controller.api.schema import CEL_RESERVED
from controller.jobset.api import CONTROLLER_NAME as UPSTREAM_MANAGED_BY
from controller.runtime.store import Obj

API_VERSION = "admissionregistration.k8s.io/v1"
POLICY_NAME = "jobsets.jobset.x-k8s.io"
BINDING_NAME = POLICY_NAME
GROUP = "jobset.x-k8s.io"
VERSION = "v1alpha2"
RESOURCE = "jobsets"
# The match condition: every create, and the updates that change the spec or the annotations. The
# rules read the spec and the annotations (the volume policy keys, ``volumekeys``; and the name,
# which never changes, and the status, which a request on jobsets cannot change), so an update
# that leaves both alone cannot break one; and an object created before a rule existed can still
# have its finalizer removed.
SPEC_CHANGED = (
    "request.operation == 'CREATE' || object.spec != oldObject.spec || "
    "has(object.metadata.annotations) != has(oldObject.metadata.annotations) || "
    "(has(object.metadata.annotations) && "
    "object.metadata.annotations != oldObject.metadata.annotations)"
)
MANAGED_BY = "managedBy"
MANAGED_HERE = "managedHere"
# Whether the JobSet is the controller's (as controller.jobset.preflight.manager_of reads it: an
# absent or empty managedBy is upstream's reserved value): every JobSet when the controller serves
# upstream's reserved value, else those naming its value, in the new or the stored object.
MANAGED_HERE_CEL = (
    f"[variables.{MANAGED_BY}].all(m, m == '{UPSTREAM_MANAGED_BY}' || "
    "object.?spec.?managedBy.orValue('') == m || "
    "(oldObject != null && oldObject.?spec.?managedBy.orValue('') == m))"
)


def managed_by_literal(value: str) -> str:
    """The ``managedBy`` variable's CEL: ``value`` in double quotes. A spec.managedBy value
    (``config.valid_managed_by``) has no double quote or backslash, so nothing needs escaping, and
    kustomize can replace the value between the quotes (``options.delimiter: '"'``)."""
    assert '"' not in value and "\\" not in value, value
    return f'"{value}"'


def managed_by_of(installed: Obj) -> str | None:
    """The value an installed policy judges the JobSets of (its ``managedBy`` variable); None
    when it has none (an older release's policy, which judges every JobSet) or it is not a plain
    string literal."""
    for variable in (installed.get("spec") or {}).get("variables") or []:
        if variable.get("name") == MANAGED_BY:
            found = re.fullmatch(r'"([^"\\]*)"', str(variable.get("expression", "")).strip())
            return found.group(1) if found else None
    return None


_ESCAPED = re.compile(r"\b__(" + "|".join(sorted(CEL_RESERVED)) + r")__\b")


@dataclass(frozen=True)
class Site:
    """A CRD rule and the object-property path of the node it sits on (``()`` for the root)."""

    path: tuple[str, ...]
    rule: Obj

    @property
    def transition(self) -> bool:
        return "oldSelf" in self.rule["rule"] or "oldSelf" in self.rule.get("messageExpression", "")

    @property
    def where(self) -> str:
        """Where the error is, as the CRD would say it: the node's path and the rule's fieldPath."""
        field_path = str(self.rule.get("fieldPath", "")).lstrip(".")
        return ".".join([*self.path, *([field_path] if field_path else [])])


def _root(crd: Obj) -> Obj:
    versions = crd["spec"]["versions"]
    assert len(versions) == 1, "one served version"
    root: Obj = versions[0]["schema"]["openAPIV3Schema"]
    return root


def _walk(node: Obj, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Obj]]:
    """Every node reached from ``node`` through object properties only, with its path."""
    yield path, node
    for name, child in sorted((node.get("properties") or {}).items()):
        yield from _walk(child, (*path, name))


def split(crd: Obj) -> tuple[Obj, list[Site]]:
    """The CRD without the rules the policy takes over, and those rules, the deepest nodes' first
    (schema order among equals): the API server reports a policy's first failing rule only, and a
    rule on a narrower node says more precisely what is wrong (``spec.network``'s subdomain rule
    before the root's coordinator-address rule, which a long subdomain also breaks)."""
    out = copy.deepcopy(crd)
    sites: list[Site] = []
    for path, node in _walk(_root(out), ()):
        for rule in node.pop("x-kubernetes-validations", []):
            sites.append(Site(path, rule))
    return out, sorted(sites, key=lambda site: -len(site.path))


# The rules on the volume policy annotations (``volumekeys``), which only a policy can run: a
# CRD's rules on its root see only the name of the metadata.
METADATA_SITES: tuple[Site, ...] = tuple(Site((), r.render()) for r in volumekeys.rules())


def policy_sites(crd: Obj) -> tuple[Obj, list[Site]]:
    """``split``, and the rules on the metadata after the CRD's: what the policy runs."""
    out, sites = split(crd)
    return out, [*sites, *METADATA_SITES]


# The rules of upstream JobSet's own CRD that this project's CRD does not carry (its transition
# rules and the startupPolicy/dependsOn exclusion; upstream's webhook leaves them to its CRD).
# During a canary this project's CRD has replaced upstream's, so the policy runs them for the
# JobSets upstream manages. Written here, with the same meaning (the rest of upstream's admission
# is its webhook, which keeps running beside a canary).
UPSTREAM_SITES = (
    Site(
        ("spec",),
        {
            "rule": "!(has(self.startupPolicy) && "
            "self.startupPolicy.?startupPolicyOrder.orValue('') == 'InOrder' && "
            "has(self.replicatedJobs) && self.replicatedJobs.exists(r, has(r.dependsOn)))",
            "message": "startupPolicy InOrder and dependsOn cannot be combined",
        },
    ),
    *(
        Site(("spec", name), {"rule": "self == oldSelf", "message": "is immutable"})
        for name in (
            "network",
            "successPolicy",
            "failurePolicy",
            "startupPolicy",
            "volumeClaimPolicies",
        )
    ),
)


def unescape(cel: str) -> str:
    """A CRD rule's escaped field names (``__namespace__``) as plain names: a policy's CEL reads
    the object as plain data, where the escape is not a key."""
    return _ESCAPED.sub(r"\1", cel)


def _select(base: str, path: tuple[str, ...]) -> str:
    return ".".join([base, *path])


def _present(base: str, path: tuple[str, ...]) -> list[str]:
    return [f"has({_select(base, path[: i + 1])})" for i in range(len(path))]


def _bound(site: Site, body: str, value: bool = False, on: str = "object") -> str:
    """``body`` (a CRD rule's CEL) with ``self`` (and ``oldSelf``) bound to the node of ``on``: a
    one-element list's ``all`` for a condition, ``map(...)[0]`` for a value (a policy's CEL has no
    ``cel.bind``)."""

    def bind(name: str, node: str, inner: str) -> str:
        return f"[{node}].map({name}, {inner})[0]" if value else f"[{node}].all({name}, {inner})"

    if site.transition:
        body = bind("oldSelf", _select("oldObject", site.path), body)
    return bind("self", _select(on, site.path), body)


def expression(site: Site) -> str:
    """The policy's CEL for one CRD rule: true where the CRD rule would not run or holds.

    A rule that does not read the old object also holds on an update of a JobSet that already
    broke it (stored before the rule existed, or while the policy was not installed): without
    that, such a JobSet could not have its spec changed at all, not even ``suspend`` flipped by
    Kueue. A CRD only forgives an unchanged field (ratcheting); every spec update changes
    ``spec``, the node most rules sit on, so the policy forgives what the update did not break."""
    skip = [f"!{c}" for c in _present("object", site.path)]
    if site.transition:
        skip += ["oldObject == null", *(f"!{c}" for c in _present("oldObject", site.path))]
        return " || ".join([*skip, _bound(site, unescape(site.rule["rule"]))])
    rule = unescape(site.rule["rule"])
    broken_before = " && ".join(
        [
            "oldObject != null",
            *_present("oldObject", site.path),
            "!" + _bound(site, rule, on="oldObject"),
        ]
    )
    return " || ".join([*skip, _bound(site, rule), f"({broken_before})"])


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def message(site: Site) -> str:
    """CEL: the rule's message, prefixed with where the error is, with the same detail as the CRD
    rule's (the offending value) when it has one."""
    prefix = f"{site.where}: " if site.where else ""
    detail = site.rule.get("messageExpression")
    if not detail:
        return _quote(prefix + site.rule["message"])
    return f"{_quote(prefix)} + string({_bound(site, unescape(detail), value=True)})"


def validations(sites: list[Site], prefix: str = "rule") -> tuple[list[Obj], list[Obj]]:
    """The policy's variables (one per rule: does it hold; ``<prefix><i>``) and its one
    validation: all hold, and else a message naming every rule that does not (the API server
    reports the first failing validation only; one validation that lists them all says as much as
    the CRD would)."""
    variables = [{"name": f"{prefix}{i}", "expression": expression(s)} for i, s in enumerate(sites)]
    failed = " + ".join(
        f"(variables.{prefix}{i} ? '' : '; ' + {message(site)})" for i, site in enumerate(sites)
    )
    check = {
        "expression": " && ".join(f"variables.{prefix}{i}" for i in range(len(sites))) or "true",
        "message": "the JobSet's spec breaks a cross-field or immutability rule (docs/api.md)",
        "messageExpression": f"[{failed}].map(m, m == '' ? '' : m.substring(2))[0]",
        "reason": "Invalid",
    }
    return variables, [check]


def policy(sites: list[Site], managed_by: str = UPSTREAM_MANAGED_BY) -> Obj:
    """The ValidatingAdmissionPolicy for a controller serving ``managed_by``: one variable per
    rule (each its own CEL program, with the API server's cost limit per expression, as a CRD
    rule has), one validation over them all for the JobSets the controller manages
    (``MANAGED_HERE``), and one over ``UPSTREAM_SITES`` for the others. Variables are evaluated
    only when a validation reads them, so a JobSet pays only for the rules it is judged by."""
    variables, (ours,) = validations(sites)
    theirs, (upstream,) = validations(list(UPSTREAM_SITES), prefix="upstream")
    ours["expression"] = f"!variables.{MANAGED_HERE} || ({ours['expression']})"
    upstream.update(
        expression=f"variables.{MANAGED_HERE} || ({upstream['expression']})",
        message="the spec of a JobSet another controller manages breaks a rule of upstream "
        'JobSet\'s CRD (docs/operations.md, "Running beside upstream")',
    )
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME},
        "spec": {
            "failurePolicy": "Fail",
            # With the API server's defaults written out: matchConstraints is atomic for
            # server-side apply, so a value that lacked them would differ from the stored one
            # and conflict between two appliers (helm, then kubectl apply -k) of the same file.
            "matchConstraints": {
                "matchPolicy": "Equivalent",
                "namespaceSelector": {},
                "objectSelector": {},
                "resourceRules": [
                    {
                        "apiGroups": [GROUP],
                        "apiVersions": [VERSION],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": [RESOURCE],
                        "scope": "*",
                    }
                ],
            },
            "matchConditions": [{"name": "spec-written", "expression": SPEC_CHANGED}],
            "variables": [
                # First, and alone on its line: what an install sets (docs/operations.md).
                {"name": MANAGED_BY, "expression": managed_by_literal(managed_by)},
                {"name": MANAGED_HERE, "expression": MANAGED_HERE_CEL},
                *variables,
                *theirs,
            ],
            "validations": [ours, upstream],
        },
    }


def installed_view(obj: Obj) -> Obj:
    """What the controller caches of a ValidatingAdmissionPolicy or binding: its name and the
    fields ``missing`` reads (not a policy's rules, ~100 KB for ours: of its variables only
    ``managedBy``)."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    view: Obj = {
        "metadata": {
            k: meta[k] for k in ("name", "resourceVersion", "deletionTimestamp") if k in meta
        },
        "spec": {
            k: spec[k]
            for k in ("failurePolicy", "matchConstraints", "policyName", "validationActions")
            if k in spec
        },
    }
    kept = [v for v in spec.get("variables") or [] if v.get("name") == MANAGED_BY]
    if kept:
        view["spec"]["variables"] = kept
    return view


def missing(
    unavailable: int | None,
    installed: Obj | None,
    installed_binding: Obj | None,
    serves: str | None = None,
) -> str | None:
    """Why the API server does not judge the JobSets of this controller by the spec's rules now,
    or None when the policy and its binding are installed and the policy holds the managedBy
    value the controller serves (``serves``, its --managed-by; None: not checked).
    ``unavailable``: the status of listing the policies and bindings, 403 or 404, if refused.
    Predictive, as the controller sees them: a JobSet of ours that breaks a cross-field or
    immutability rule is admitted while this returns a message."""
    hint = "install it with `kubectl apply --server-side -f manifests/crd/` (docs/api.md)"
    subject = f"the ValidatingAdmissionPolicy {POLICY_NAME!r}"
    if unavailable == 403:
        return (
            "the controller may not read validatingadmissionpolicies and their bindings (its "
            "ClusterRole, manifests/rbac, needs list and watch on them), so it cannot tell "
            f"whether {subject} is installed"
        )
    if unavailable is not None:
        return f"the API server does not serve validatingadmissionpolicies ({unavailable})"
    if installed is None or (installed.get("metadata") or {}).get("deletionTimestamp"):
        return f"{subject} is not installed: {hint}"
    if (installed.get("spec") or {}).get("failurePolicy", "Fail") != "Fail":
        return f"{subject} has failurePolicy Ignore: a rule that cannot be evaluated admits"
    if installed_binding is None or (installed_binding.get("metadata") or {}).get(
        "deletionTimestamp"
    ):
        return f"the binding {BINDING_NAME!r} of {subject} is not installed: {hint}"
    spec = installed_binding.get("spec") or {}
    if spec.get("policyName") != POLICY_NAME or "Deny" not in (spec.get("validationActions") or []):
        return f"the binding {BINDING_NAME!r} does not deny with {subject}: {hint}"
    judged = managed_by_of(installed)
    if serves is None or judged == serves:
        return None
    if judged is None:
        return (
            f"{subject} is an older release's, without the variable {MANAGED_BY!r}: it judges "
            f"every JobSet of the cluster, whichever controller manages it: "
            f"{hint.replace('install', 're-apply')}"
        )
    return (
        f"{subject} judges the JobSets of {judged!r} but this controller serves {serves!r}: "
        "install the policy with the value the controller serves (docs/operations.md, "
        '"Which JobSets the admission policy judges")'
    )


def binding() -> Obj:
    """Binds the policy in every namespace, denying what it rejects."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": BINDING_NAME},
        "spec": {"policyName": POLICY_NAME, "validationActions": ["Deny"]},
    }
