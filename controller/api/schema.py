"""The JobSet part of the CustomResourceDefinition, written by hand.

Fields follow the upstream JobSet API (``jobset.x-k8s.io/v1alpha2``) plus the stateful volume
extensions. Admission checks that upstream performs in a webhook are expressed here as CEL rules
(``x-kubernetes-validations``) so that the API server itself rejects bad input with a specific
message; ``docs/api.md`` lists every rule and what the controller checks instead.

Every rule is a :class:`Rule`; :func:`rules` returns them all (for the docs and the tests).
The scalar fields and the lists are ``controller.api.fields`` records, whose nodes are placed here
(:func:`_nodes`, ``ListField.schema``; the bounds of the embedded Kubernetes types' lists and maps
with ``bound``) and which the parser reads with the same bounds, allowed values and defaults. A
number in a rule's CEL or message is one of ``controller.api.bounds``, read when the rule is
built, as its predicate reads it.

CEL cost. The API server estimates the worst-case cost of every rule from the schema's bounds and
rejects the CRD when one could be too expensive (10M units per rule, 100M for the CRD). Hence:

- the bounds (``maxItems``/``maxLength``/``maxProperties``) on what rules iterate: ``bounds``'
  numbers, in ``fields``' records of the lists and maps;
- an optional list is guarded with ``has()`` or collected with the three-argument ``map`` over
  ``[base]`` (:func:`collect`): ``c ? l : []``, ``l.filter(...)`` and ``x.?l.orValue([])`` make
  the estimator lose the bounds of the elements;
- a value needed many times is computed once and bound with ``[value].all(v, ...)``;
- rules relating volume templates to volumeMounts do not compare every template with every mount:
  they look names up in sets (maps built with ``transformMapEntry``), so the cost is a sum, not a
  product;
- fields compared on update are wrapped in lists of ``dyn`` values (``[dyn(a.?f)] ==
  [dyn(b.?f)]``): comparing unbounded lists directly has a huge estimated cost;
- message expressions name the first offending value (``list[0]``): joining computed lists has an
  unbounded estimated cost, so does ``string(int)``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller import features
from controller.api import bounds, fields, predicates, semantic
from controller.api.fields import (
    ACCESS_MODES,
    DEFAULT_RULE_NAME_PREFIX,
    JOB_FAILURE_REASONS,
    RULE_NAME_REGEX,
    Schema,
)
from controller.features import FeatureGates
from controller.jobset import api as jobset_api
from controller.jobset.placement import EXCLUSIVE_TOPOLOGY

GROUP = "jobset.x-k8s.io"
VERSION = "v1alpha2"
KIND = "JobSet"
PLURAL = "jobsets"
CRD_NAME = f"{PLURAL}.{GROUP}"

# The exclusive-topology annotation's value on a replicated job's template (CEL).
EXCLUSIVE_VALUE = f"self.template.metadata.annotations['{EXCLUSIVE_TOPOLOGY}']"

# A label value (Kubernetes' IsValidLabelValue; its length is bounded by the schema's maxLength):
# letters, digits, '-', '_' and '.' (RE2's \w is ASCII), starting and ending with a letter or digit.
# A regex's estimated cost grows with its length and the rule runs on every label of up to 2500
# templates: a short regex plus prefix and suffix checks costs a fraction of the whole pattern.
LABEL_VALUE_RULE = "self.matches('^[-\\\\w.]*$') && " + " && ".join(
    f"!self.{end}('{c}')" for end in ("startsWith", "endsWith") for c in "-_."
)
# Pod template fields that may change while the JobSet is (or is being) suspended, so that a
# queueing system (e.g. Kueue) can place the workload before resuming it.
SUSPENDED_MUTABLE_POD_META = ("annotations", "labels")
SUSPENDED_MUTABLE_POD_SPEC = ("nodeSelector", "schedulingGates", "tolerations")
# Replicated job fields that may change at any time (an extension over upstream, where
# replicatedJobs is immutable): lowering replicas deletes the Jobs whose index is >= replicas (and,
# with retentionPolicy.whenScaled: Delete, their Job-scope claims); raising it adds Jobs.
MUTABLE_REPLICATED_JOB_FIELDS = ("replicas",)
# Job template fields that may change on a running JobSet with the ElasticJobSet gate (upstream's
# alpha): for an Indexed replicated job only, and the child Jobs are resized in place.
ELASTIC_JOB_FIELDS = ("parallelism", "completions")
# The other fields of a replicated job, compared on update (``?``: optional).
REPLICATED_JOB_FIELDS = ("name", "?groupName", "?dependsOn", "template")
# CEL reserved words that must be escaped when used as field names.
CEL_RESERVED = frozenset(
    [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ]
)


@dataclass(frozen=True)
class Rule:
    """One CEL validation rule and where it sits in the schema."""

    id: str
    where: str
    rule: str
    message: str
    detail: str | None = None  # CEL string naming the offending value, appended to the message
    field_path: str | None = None
    reason: str | None = None
    protects: str = ""
    on_update: bool = False
    # The same rule in Python (controller/api/predicates.py), on the same node: ``check`` for a
    # rule on the new object alone, ``check_update`` for a transition rule (on_update), which
    # also gets the node in the stored object.
    check: predicates.Predicate | None = field(default=None, compare=False, repr=False)
    check_update: predicates.TransitionPredicate | None = field(
        default=None, compare=False, repr=False
    )

    @property
    def cel(self) -> str:
        """The rule's CEL as the schema has it (on one line)."""
        return _squash(self.rule)

    def render(self) -> Schema:
        out: Schema = {"rule": self.cel, "message": self.message}
        if self.detail:
            out["messageExpression"] = _squash(f"{_q(self.message + ': ')} + {self.detail}")
        if self.field_path:
            out["fieldPath"] = self.field_path
        if self.reason:
            out["reason"] = self.reason
        return out


# Part of the claim template's schema (a check Kubernetes' own schema lacks), not one of the
# JobSet's rules: docs/api.md lists it under "Checked by the schema itself".
QUANTITY_RULE = Rule(
    id="quantity",
    where="volume claim templates: each spec.resources requests and limits value",
    rule="isQuantity(string(self))",
    message="must be a Kubernetes quantity, e.g. 10Gi or 500M",
    check=predicates.is_quantity,
)


def _squash(cel: str) -> str:
    return " ".join(cel.split())


def _q(text: str) -> str:
    """A CEL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _cel_list(values: Iterable[str]) -> str:
    """A CEL list of string literals."""
    return "[" + ", ".join(_q(v) for v in values) + "]"


def _attach(node: Schema, rules: Iterable[Rule], registry: list[Rule]) -> Schema:
    for rule in rules:
        if rule not in registry:  # a schema used twice (claim templates) registers its rules once
            registry.append(rule)
        node.setdefault("x-kubernetes-validations", []).append(rule.render())
    return node


# ---------------------------------------------------------------- CEL helpers


def _height(node: Schema) -> int:
    """Levels of a value of this schema: 1 for a scalar, 1 + its deepest child's for an object
    or a list (a map's values counted as children)."""
    children = [*(node.get("properties") or {}).values()]
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            children.append(node[key])
    return 1 + max((_height(child) for child in children), default=0)


def _seg(name: str) -> str:
    return f"__{name}__" if name in CEL_RESERVED else name


def sel(base: str, path: str) -> str:
    """``base.a.b`` with reserved words escaped."""
    return ".".join([base, *(_seg(p) for p in path.split("."))])


def present(base: str, path: str) -> str:
    """CEL: every field along ``path`` is set (so ``sel(base, path)`` can be read)."""
    parts = path.split(".")
    return (
        "("
        + " && ".join(f"has({sel(base, '.'.join(parts[: i + 1]))})" for i in range(len(parts)))
        + ")"
    )


def same(a: str, b: str, path: str) -> str:
    """CEL: the field at ``path`` is unset on both, or set on both with equal values."""
    pa, pb = present(a, path), present(b, path)
    return f"({pa} ? ({pb} && {sel(a, path)} == {sel(b, path)}) : !{pb})"


def guarded_all(base: str, path: str, var: str, cond: str) -> str:
    """CEL: ``cond`` holds for every element of the optional list at ``path`` (if set)."""
    return f"(!{present(base, path)} || {sel(base, path)}.all({var}, {cond}))"


def collect(base: str, path: str, var: str, transform: str, when: str = "") -> str:
    """CEL: ``[transform for var in base.path if when]``, an empty list when the field is unset.

    Written with the three-argument ``map`` over ``[base]``: a conditional ``c ? l : []`` or a
    ``filter`` would make the cost estimator lose the bounds of the elements.
    """
    inner = (
        f"{sel('x', path)}.map({var}, {when}, {transform})"
        if when
        else (f"{sel('x', path)}.map({var}, {transform})")
    )
    return f"[{base}].map(x, {present('x', path)}, {inner}).flatten()"


RJ = "self.replicatedJobs"
# CEL: the replicated job ``r`` runs Indexed Jobs.
INDEXED_R = "r.template.?spec.?completionMode.orValue('') == 'Indexed'"
HAS_RJ = "has(self.replicatedJobs)"
POD = "template.spec.template.spec"


def pod_ok(r: str) -> str:
    return f"(has({r}.template.spec) && has({r}.{POD}))"


def all_mounts(r: str, m: str, cond: str) -> str:
    """CEL: ``cond`` holds for every volumeMount ``m`` of every (init)container of ``r``."""
    pod = f"{r}.{POD}"
    each = f"c.volumeMounts.all({m}, {cond})"
    return (
        f"(!{pod_ok(r)} || ({pod}.containers.all(c, !has(c.volumeMounts) || {each}) && "
        f"(!has({pod}.initContainers) || {pod}.initContainers.all(c, "
        f"!has(c.volumeMounts) || {each}))))"
    )


def all_mount_names() -> str:
    """CEL: the names of every volumeMount of every (init)container of every replicated job."""
    names = "c.volumeMounts.map(m, m.name)"
    pod = f"r.{POD}"
    containers = (
        f"{RJ}.map(r, {pod_ok('r')}, {pod}.containers.map(c, has(c.volumeMounts), {names})"
        ".flatten()).flatten()"
    )
    init = (
        f"{RJ}.map(r, {pod_ok('r')} && has({pod}.initContainers), {pod}.initContainers.map(c, "
        f"has(c.volumeMounts), {names}).flatten()).flatten()"
    )
    return f"({containers} + {init})"


def digits(n: str) -> str:
    """CEL: the number of decimal digits of the non-negative int32 ``n``."""
    expr = "10"
    for width in range(9, 0, -1):
        expr = f"{n} < {10**width} ? {width} : ({expr})"
    return f"({expr})"


def snapshot_named(restore: str) -> str:
    """CEL: the restorePolicy ``restore`` names a VolumeSnapshot exactly when its source is
    VolumeSnapshot (an empty name is no name)."""
    return (
        f"(({restore}.source == 'VolumeSnapshot') == "
        f"(has({restore}.volumeSnapshotName) && {restore}.volumeSnapshotName != ''))"
    )


def from_jobset_newest(restore: str) -> str:
    """CEL: the restorePolicy ``restore`` names a JobSet to restore from only with source
    NewestSnapshot (an empty name is no name)."""
    return (
        f"(!has({restore}.fromJobSet) || {restore}.fromJobSet == '' || "
        f"{restore}.source == 'NewestSnapshot')"
    )


def snapshots_on_suspend(policy: str) -> str:
    """CEL: the volume claim policy ``policy`` says retentionPolicy.whenSuspended: Snapshot."""
    return (
        f"({present(policy, 'retentionPolicy.whenSuspended')} && "
        f"{policy}.retentionPolicy.whenSuspended == 'Snapshot')"
    )


def restores_newest(policy: str) -> str:
    """CEL: the policy ``policy`` makes its claims from the newest snapshot of their name."""
    return (
        f"({present(policy, 'restorePolicy.source')} && "
        f"{policy}.restorePolicy.source == 'NewestSnapshot')"
    )


def creates_suspended(policy: str) -> str:
    """CEL: the policy ``policy`` makes its claims while the JobSet is suspended."""
    return (
        f"({present(policy, 'creationPolicy.whenSuspended')} && "
        f"{policy}.creationPolicy.whenSuspended == 'Create')"
    )


def each_policy(holds: Callable[[str], str]) -> str:
    """CEL: ``holds`` of every volume claim policy, both spellings."""
    return (
        guarded_all("self", "volumeClaimPolicies", "p", holds("p"))
        + f" && (!{present('self', 'volumePolicy')} || {holds('self.volumePolicy')})"
    )


def rjob_exists(name: str) -> str:
    return f"({HAS_RJ} && {RJ}.exists(r, r.name == {name}))"


# The replicated job names as a set. Rules that look up many names (targets) bind it once as
# ``rn``: a lookup costs one step where a search of the list costs as many as there are replicated
# jobs. replicatedJobs is a list keyed by name, but the API server still runs the rules on a list
# with a repeated name (and transformMapEntry fails on a repeated key): such rules hold vacuously
# then, replicated-job-names-unique and the schema's "Duplicate value" say what is wrong.
RJ_NAMES = "[self].map(x, has(x.replicatedJobs), x.replicatedJobs.map(r, r.name)).flatten()"
RJ_SET = f"{RJ_NAMES}.transformMapEntry(i, n, {{n: true}})"


def with_rjob_set(body: str) -> str:
    return f"(size({RJ_NAMES}.distinct()) != size({RJ_NAMES}) || [{RJ_SET}].all(rn, {body}))"


def with_rjob_set_value(value: str) -> str:
    return f"[{RJ_SET}].map(rn, {value})[0]"


def named(rule: str) -> str:
    return f"(has({rule}.name) && {rule}.name != '')"


def is_default_name(name: str, index: str) -> str:
    """CEL: ``name`` is the default name of the rule at ``index`` (failurePolicyRule<index>)."""
    n = len(DEFAULT_RULE_NAME_PREFIX)
    return (
        f"({name}.startsWith({_q(DEFAULT_RULE_NAME_PREFIX)}) && "
        f"{name}.substring({n}).matches('^(0|[1-9][0-9]*)$') && "
        f"int({name}.substring({n})) == {index})"
    )


def rule_names_clash(i: str, p: str, j: str, q: str) -> str:
    """CEL: rules p (index i) and q (index j) end up with the same name."""
    return (
        f"({named(p)} && {named(q)} ? {p}.name == {q}.name : "
        f"({named(p)} && {is_default_name(f'{p}.name', j)}) || "
        f"({named(q)} && {is_default_name(f'{q}.name', i)}))"
    )


# The volume claim templates of both spellings. Maps are built with transformMapEntry, which fails
# on a repeated key, so rules that use them first check that the keys are unique.
VCP_NAMES = (
    collect(
        "self",
        "volumeClaimPolicies",
        "p",
        "p.templates.map(t, t.metadata.name)",
        when="has(p.templates)",
    )
    + ".flatten()"
)
VP_NAMES = collect("self", "volumePolicy.volumeClaimTemplates", "t", "t.metadata.name")
TEMPLATE_NAMES = f"({VCP_NAMES} + {VP_NAMES})"
# Templates of policies with an explicit list of target replicated jobs.
VP_EXPLICIT = (
    "has(x.volumePolicy) && has(x.volumePolicy.replicatedJobs) && "
    "has(x.volumePolicy.volumeClaimTemplates)"
)
EXPLICIT_NAMES = (
    collect(
        "self",
        "volumeClaimPolicies",
        "p",
        "p.templates.map(t, t.metadata.name)",
        when="has(p.templates) && has(p.targetReplicatedJobs)",
    )
    + f".flatten() + [self].map(x, {VP_EXPLICIT}, "
    "x.volumePolicy.volumeClaimTemplates.map(t, t.metadata.name)).flatten()"
)
# Where the targets of each template in EXPLICIT_NAMES are listed: the position of its policy in
# volumeClaimPolicies, or -1 for volumePolicy. (Looking a replicated job up in its policy's set of
# targets costs far less than building every "<replicatedJob>/<template>" pair: that product of
# policies, targets and templates was the largest estimated cost of the CRD.)
EXPLICIT_POLICY = (
    "[self].map(x, has(x.volumeClaimPolicies), x.volumeClaimPolicies.transformList(i, p, "
    "has(p.templates) && has(p.targetReplicatedJobs), p.templates.map(t, i)).flatten()).flatten()"
    f" + [self].map(x, {VP_EXPLICIT}, x.volumePolicy.volumeClaimTemplates.map(t, -1)).flatten()"
)
# The targets of each volume claim policy as a set (empty without an explicit list), in order.
POLICY_TARGETS = (
    "[self].map(x, has(x.volumeClaimPolicies), x.volumeClaimPolicies.map(p, "
    "has(p.targetReplicatedJobs) ? p.targetReplicatedJobs.transformMapEntry(j, n, {n: true}) : "
    "{})).flatten()"
)
VP_TARGETS = collect("self", "volumePolicy.replicatedJobs", "x", "x.name")
# The keys of the sets are unique when template names are, and each list of targets is.
MAPS_SAFE = (
    f"(size({TEMPLATE_NAMES}.distinct()) == size({TEMPLATE_NAMES}) && "
    "(!has(self.volumeClaimPolicies) || self.volumeClaimPolicies.all(p, "
    "!has(p.targetReplicatedJobs) || "
    "size(p.targetReplicatedJobs.distinct()) == size(p.targetReplicatedJobs))) && "
    "(!has(self.volumePolicy) || !has(self.volumePolicy.replicatedJobs) || "
    "self.volumePolicy.replicatedJobs.all(x, "
    "self.volumePolicy.replicatedJobs.exists_one(y, y.name == x.name))))"
)


def as_set(names: str) -> str:
    return f"({names}).transformMapEntry(i, n, {{n: true}})"


def _bind_sets(quantifier: str, inner: str) -> str:
    """``inner`` with ``tn`` (template names), ``ex`` (templates with explicit targets, to where
    their targets are: see EXPLICIT_POLICY), ``ts`` (POLICY_TARGETS) and ``vt`` (volumePolicy's
    targets) bound, each computed once. ``quantifier`` is ``all``, or ``map`` for a value (each
    level takes its single element at once: the estimator multiplies nested lists' sizes)."""
    index = f"({EXPLICIT_NAMES}).transformMapEntry(j, n, {{n: ei[j]}})"
    bindings = [
        ("tn", as_set(TEMPLATE_NAMES)),
        ("ei", EXPLICIT_POLICY),
        ("ex", index),
        ("ts", POLICY_TARGETS),
        ("vt", as_set(VP_TARGETS)),
    ]
    out = inner
    for var, value in reversed(bindings):
        out = f"[{value}].{quantifier}({var}, {out})" + ("[0]" if quantifier == "map" else "")
    return out


def with_sets(body: str) -> str:
    """CEL: ``body`` with the sets of :func:`_bind_sets` bound."""
    return _bind_sets("all", body)


def with_sets_value(value: str) -> str:
    """Like :func:`with_sets` for a message expression: the value computed with the sets."""
    return _bind_sets("map", value)


def gets_template(r: str, name: str) -> str:
    """CEL: replicated job ``r`` gets the volume of template ``name`` (``name`` in ``tn``)."""
    return f"(!({name} in ex) || (ex[{name}] < 0 ? {r}.name in vt : {r}.name in ts[ex[{name}]]))"


# ---------------------------------------------------------------- schema building blocks


def _nodes(*declared: fields.Field[Any] | fields.ListField) -> dict[str, Schema]:
    """The schema nodes of scalar fields and lists of strings, by name (``fields``: their one
    definition)."""
    return {f.name: f.schema() for f in declared}


def _list(declared: fields.ListField, items: Schema) -> dict[str, Schema]:
    """The schema node of a list whose items are ``items``, by name."""
    return {declared.name: declared.schema(items)}


def string(description: str, **extra: Any) -> Schema:
    return {"type": "string", "description": description, **extra}


def integer(description: str, fmt: str = "int32", **extra: Any) -> Schema:
    return {"type": "integer", "format": fmt, "description": description, **extra}


def obj(description: str, properties: dict[str, Schema], **extra: Any) -> Schema:
    return {"type": "object", "description": description, "properties": properties, **extra}


def array(description: str, items: Schema, list_type: str = "atomic", **extra: Any) -> Schema:
    node: Schema = {"type": "array", "description": description, "items": items, **extra}
    node["x-kubernetes-list-type"] = list_type
    return node


def immutable(where: str, protects: str) -> Rule:
    return Rule(
        id=f"{where.rsplit('.', 1)[-1]}-immutable",
        where=where,
        rule="self == oldSelf",
        message=f"{where} is immutable",
        reason="FieldValueForbidden",
        protects=protects,
        on_update=True,
        check_update=predicates.unchanged,
    )


class Builder:
    """Builds the schema from the inlined Kubernetes types, recording every rule."""

    def __init__(
        self, job_template: Schema, claim: Schema, gates: FeatureGates = features.DEFAULT
    ) -> None:
        self.job_template_raw = job_template
        self.claim_raw = claim
        # Alpha features whose admission differs (see controller/features.py).
        self.gates = gates
        self.rules: list[Rule] = []

    def attach(self, node: Schema, *rules: Rule) -> Schema:
        return _attach(node, rules, self.rules)

    # ------------------------------------------------------------ spec fields

    def network(self) -> Schema:
        node = fields.NETWORK.schema(
            _nodes(
                fields.ENABLE_DNS_HOSTNAMES,
                fields.SUBDOMAIN,
                fields.PUBLISH_NOT_READY_ADDRESSES,
            )
        )
        return self.attach(
            node,
            immutable("spec.network", "the Service and hostnames that running pods use"),
            Rule(
                id="subdomain-format",
                check=predicates.subdomain_format,
                where="spec.network",
                rule="!has(self.subdomain) || self.subdomain == '' || "
                "!format.dns1035Label().validate(self.subdomain).hasValue()",
                message="spec.network.subdomain must be a DNS-1035 label of at most "
                f"{bounds.MAX_DNS_LABEL} characters",
                detail="format.dns1035Label().validate(self.subdomain).value()[0]",
                field_path=".subdomain",
                protects="the headless Service, whose name is a DNS-1035 label",
            ),
        )

    def success_policy(self) -> Schema:
        node = fields.SUCCESS_POLICY.schema(_nodes(fields.SUCCESS_OPERATOR, fields.SUCCESS_TARGETS))
        return self.attach(
            node, immutable("spec.successPolicy", "the success criterion of a running JobSet")
        )

    def failure_rule(self) -> Schema:
        node = fields.FAILURE_RULE.schema(
            _nodes(
                fields.FAILURE_RULE_NAME,
                fields.FAILURE_ACTION,
                fields.FAILURE_RULE_REASONS,
                fields.FAILURE_RULE_PATTERNS,
                fields.FAILURE_RULE_TARGETS,
            )
        )
        reasons = _cel_list(JOB_FAILURE_REASONS)
        return self.attach(
            node,
            Rule(
                id="failure-rule-name-format",
                check=predicates.failure_rule_name_format,
                where="spec.failurePolicy.rules[]",
                rule="!has(self.name) || self.name == '' || "
                f"self.name.matches({_q(RULE_NAME_REGEX)})",
                message="a failure policy rule name must start with a letter, contain only "
                "letters, digits, '_', ',' and ':', and end with a letter, digit or '_'",
                detail="self.name",
                field_path=".name",
                protects="rule names, which Events and conditions quote",
            ),
            Rule(
                id="failure-rule-reasons",
                check=predicates.failure_rule_reasons,
                where="spec.failurePolicy.rules[]",
                rule=f"!has(self.onJobFailureReasons) || self.onJobFailureReasons.all(x, "
                f"x in {reasons})",
                message="onJobFailureReasons may contain only " + ", ".join(JOB_FAILURE_REASONS),
                detail=f"self.onJobFailureReasons.filter(x, !(x in {reasons}))[0]",
                field_path=".onJobFailureReasons",
                protects="rules that could never match: Job failure reasons are a fixed set",
            ),
            *self.restart_job_gated(),
        )

    def restart_job_gated(self) -> list[Rule]:
        """Without the RestartJob gate, its two actions are refused (upstream's webhook)."""
        if self.gates.restart_job:
            return []
        return [
            Rule(
                id="restart-job-gated",
                check=predicates.restart_job_gated,
                where="spec.failurePolicy.rules[]",
                rule=f"!(self.action in {_cel_list(jobset_api.RESTART_JOB_ACTIONS)})",
                message=jobset_api.MESSAGE_RESTART_JOB_GATED,
                field_path=".action",
                protects="a JobSet whose policy the controller would not run (the RestartJob "
                "feature gate is off; the alpha-features CRD admits it)",
            )
        ]

    def failure_policy(self) -> Schema:
        node = fields.FAILURE_POLICY.schema(
            {
                **_nodes(fields.MAX_RESTARTS, fields.RESTART_STRATEGY),
                **_list(fields.FAILURE_RULES, self.failure_rule()),
            }
        )
        return self.attach(
            node,
            immutable("spec.failurePolicy", "the restart budget and rules of a running JobSet"),
        )

    def startup_policy(self) -> Schema:
        node = fields.STARTUP_POLICY.schema(_nodes(fields.STARTUP_ORDER))
        return self.attach(
            node, immutable("spec.startupPolicy", "the start order of a running JobSet")
        )

    def coordinator(self) -> Schema:
        node = fields.COORDINATOR.schema(
            _nodes(
                fields.COORDINATOR_REPLICATED_JOB,
                fields.COORDINATOR_JOB_INDEX,
                fields.COORDINATOR_POD_INDEX,
            )
        )
        return self.attach(
            node, immutable("spec.coordinator", "the coordinator address already given to pods")
        )

    @staticmethod
    def retention_policy() -> Schema:
        return fields.RETENTION_POLICY.schema(
            _nodes(
                fields.WHEN_DELETED,
                fields.WHEN_COMPLETED,
                fields.WHEN_FAILED,
                fields.WHEN_SCALED,
                fields.RETAIN_WHEN_SUSPENDED,
            )
        )

    @staticmethod
    def creation_policy() -> Schema:
        return fields.CREATION_POLICY.schema(_nodes(fields.CREATE_WHEN_SUSPENDED))

    @staticmethod
    def snapshot_policy() -> Schema:
        return fields.SNAPSHOT_POLICY.schema(
            _nodes(
                fields.SNAPSHOT_CLASS_NAME,
                fields.GROUP_SNAPSHOT_CLASS_NAME,
                fields.SNAPSHOT_HISTORY_LIMIT,
            )
        )

    @staticmethod
    def restore_policy() -> Schema:
        return fields.RESTORE_POLICY.schema(
            _nodes(
                fields.RESTORE_SOURCE,
                fields.RESTORE_SNAPSHOT_NAME,
                fields.RESTORE_WHEN_MISSING,
                fields.RESTORE_FROM_JOBSET,
            )
        )

    def claim_policies(self) -> dict[str, Schema]:
        """The retention, creation, snapshot and restore policies of a volume claim policy (both
        spellings), by name."""
        return {
            fields.RETENTION_POLICY.name: self.retention_policy(),
            fields.CREATION_POLICY.name: self.creation_policy(),
            fields.SNAPSHOT_POLICY.name: self.snapshot_policy(),
            fields.RESTORE_POLICY.name: self.restore_policy(),
        }

    def claim_template(self) -> Schema:
        template = copy.deepcopy(self.claim_raw)
        template["description"] = (
            "A PersistentVolumeClaim template. metadata.name names the pod volume (a DNS-1123 "
            "label) and prefixes the claim names; labels and annotations are copied to the "
            "claims; metadata.namespace must be left out."
        )
        # A claim's status is declared as upstream's CRD does, and ignored: clients that send
        # typed PersistentVolumeClaims by server-side apply always send one (Kubeflow Trainer's
        # JobSets carry ``status: {}``), and an undeclared field fails the whole apply.
        template["properties"]["status"]["description"] = (
            "Ignored (a claim made from the template starts without a status); declared so "
            "that clients which send a typed PersistentVolumeClaim, status included, by "
            "server-side apply are not refused."
        )
        template["required"] = ["metadata"]
        metadata = template["properties"]["metadata"]
        metadata["required"] = ["name"]
        metadata["properties"]["name"]["maxLength"] = bounds.MAX_NAME
        resources = template["properties"]["spec"]["properties"]["resources"]["properties"]
        for key, declared in (("requests", fields.CLAIM_REQUESTS), ("limits", fields.CLAIM_LIMITS)):
            declared.bound(resources[key])
            # The schema's pattern admits strings Kubernetes cannot parse (1e2.5, 1e1000).
            resources[key]["additionalProperties"]["x-kubernetes-validations"] = [
                QUANTITY_RULE.render()
            ]
        fields.CLAIM_ACCESS_MODES.bound(template["properties"]["spec"]["properties"]["accessModes"])
        fields.CLAIM_LABELS.bound(metadata["properties"]["labels"])
        fields.CLAIM_ANNOTATIONS.bound(metadata["properties"]["annotations"])
        label_value = metadata["properties"]["labels"]["additionalProperties"]
        # On each value rather than on the map: the cost estimator bounds a value looked up in a
        # map by the request size, not by its maxLength.
        self.attach(
            label_value,
            Rule(
                id="template-label-values",
                check=predicates.label_value,
                where="volume claim templates: each metadata.labels value",
                rule=LABEL_VALUE_RULE,
                message="metadata.labels values of a volume claim template must be empty or "
                "letters, digits, '-', '_' or '.', starting and ending with a letter or digit",
                detail="self",
                protects="claims Kubernetes would refuse (label value syntax; at most "
                f"{fields.CLAIM_LABELS.value_max_length} characters is the schema's maxLength)",
            ),
        )
        return self.attach(template, *self.claim_rules())

    @staticmethod
    def claim_rules() -> list[Rule]:
        """What Kubernetes' validation of a PersistentVolumeClaim would refuse in the claims made
        from a template (ValidatePersistentVolumeClaimSpec and the metadata checks): refused here
        so that the JobSet is not admitted to fail later at every claim create."""
        where = "volume claim templates"
        modes = "self.spec.accessModes"
        has_modes = f"has(self.spec) && has({modes})"
        allowed = _cel_list(ACCESS_MODES)
        requests = "self.spec.resources.requests"
        has_storage = (
            f"has(self.spec) && has(self.spec.resources) && has({requests}) && "
            f"'storage' in {requests}"
        )
        storage = "string(s)"
        labels = "self.metadata.labels"
        annotations = "self.metadata.annotations"
        bad_key = "format.qualifiedName().validate(k).hasValue()"
        bad_annotation = "format.qualifiedName().validate(k.lowerAscii()).hasValue()"
        name = "self.metadata.name"
        return [
            Rule(
                id="template-access-modes-required",
                check=predicates.access_modes_required,
                where=where,
                rule=f"{has_modes} && size({modes}) > 0",
                message="a volume claim template must list at least one access mode in "
                "spec.accessModes",
                detail=name,
                field_path=".spec.accessModes",
                reason="FieldValueRequired",
                protects="claims Kubernetes would refuse (at least 1 access mode is required)",
            ),
            Rule(
                id="template-access-modes-valid",
                check=predicates.access_modes_valid,
                where=where,
                rule=f"!({has_modes}) || {modes}.all(m, m in {allowed})",
                message="spec.accessModes of a volume claim template may contain only "
                + ", ".join(ACCESS_MODES),
                detail=name,
                field_path=".spec.accessModes",
                protects="claims Kubernetes would refuse (an unsupported access mode)",
            ),
            Rule(
                id="template-read-write-once-pod-alone",
                check=predicates.read_write_once_pod_alone,
                where=where,
                rule=f"!({has_modes}) || !('ReadWriteOncePod' in {modes}) || "
                f"{modes}.all(m, m == 'ReadWriteOncePod' || !(m in {allowed}))",
                message="spec.accessModes of a volume claim template cannot combine "
                "ReadWriteOncePod with other access modes",
                detail=name,
                field_path=".spec.accessModes",
                protects="claims Kubernetes would refuse (ReadWriteOncePod only alone)",
            ),
            Rule(
                id="template-storage-required",
                check=predicates.storage_required,
                where=where,
                rule=has_storage,
                message="a volume claim template must request storage in "
                "spec.resources.requests.storage",
                detail=name,
                field_path=".spec.resources",
                reason="FieldValueRequired",
                protects="claims Kubernetes would refuse (the storage request is required)",
            ),
            Rule(
                id="template-storage-positive",
                check=predicates.storage_positive,
                where=where,
                rule=f"!({has_storage}) || [{requests}.storage].all(s, !isQuantity({storage}) || "
                f"quantity({storage}).isGreaterThan(quantity('0')))",
                message="spec.resources.requests.storage of a volume claim template must be "
                "greater than zero",
                detail=name,
                field_path=".spec.resources.requests",
                protects="claims Kubernetes would refuse (a storage request of 0 or less)",
            ),
            Rule(
                id="template-label-keys",
                check=predicates.label_keys,
                where=where,
                rule=f"!has({labels}) || {labels}.all(k, !{bad_key})",
                message="metadata.labels keys of a volume claim template must be qualified names: "
                f"an optional DNS subdomain prefix and '/', then at most {bounds.MAX_LABEL_VALUE} "
                "letters, digits, "
                "'-', '_' or '.', starting and ending with a letter or digit",
                detail=f"{labels}.filter(k, {bad_key})[0]",
                field_path=".metadata.labels",
                protects="claims Kubernetes would refuse (label syntax)",
            ),
            Rule(
                id="template-annotation-keys",
                check=predicates.annotation_keys,
                where=where,
                rule=f"!has({annotations}) || {annotations}.all(k, !{bad_annotation})",
                message="metadata.annotations keys of a volume claim template must be qualified "
                "names (as label keys, but letters of either case)",
                detail=f"{annotations}.filter(k, {bad_annotation})[0]",
                field_path=".metadata.annotations",
                protects="claims Kubernetes would refuse (annotation key syntax)",
            ),
            Rule(
                id="template-annotations-size",
                check=predicates.annotations_size,
                where=where,
                rule=f"!has({annotations}) || {annotations}.map(k, size(k) + "
                f"size({annotations}[k])).sum() <= {bounds.MAX_ANNOTATIONS_SIZE}",
                message="metadata.annotations of a volume claim template must not exceed "
                f"{bounds.MAX_ANNOTATIONS_SIZE} bytes in all (keys and values)",
                detail=name,
                field_path=".metadata.annotations",
                protects="claims Kubernetes would refuse (annotations too large)",
            ),
        ]

    def template_rules(self, where: str, prefix: str, path: str) -> list[Rule]:
        """Rules on one policy's templates, the list at ``self.<path>``."""
        bad_name = "format.dns1123Label().validate(t.metadata.name).hasValue()"
        namespaced = "has(t.metadata.__namespace__) && t.metadata.__namespace__ != ''"
        return [
            Rule(
                id=f"{prefix}template-name",
                check=predicates.template_names_format(path),
                where=where,
                rule=guarded_all("self", path, "t", f"!{bad_name}"),
                message="a volume claim template's metadata.name must be a DNS-1123 label (it "
                "names the pod volume)",
                detail=collect("self", path, "t", "t.metadata.name", when=bad_name) + "[0]",
                protects="pod volumes: a volume name is a DNS-1123 label",
            ),
            Rule(
                id=f"{prefix}template-namespace",
                check=predicates.template_namespaces(path),
                where=where,
                rule=guarded_all("self", path, "t", f"!({namespaced})"),
                message="a volume claim template must not set metadata.namespace: claims are "
                "made in the JobSet's namespace",
                detail=collect("self", path, "t", "t.metadata.name", when=namespaced) + "[0]",
                protects="claims in another namespace, which the pods could not mount",
            ),
        ]

    def volume_claim_policy(self) -> Schema:
        node = fields.VOLUME_CLAIM_POLICY.schema(
            {
                **_list(fields.POLICY_TEMPLATES, self.claim_template()),
                **self.claim_policies(),
                **_nodes(fields.POLICY_TARGETS, fields.VOLUME_SCOPE),
            }
        )
        return self.attach(
            node, *self.template_rules("spec.volumeClaimPolicies[]", "", "templates")
        )

    def volume_policy(self) -> Schema:
        target = fields.VOLUME_POLICY_TARGET.schema(_nodes(fields.VOLUME_POLICY_TARGET_NAME))
        node = fields.VOLUME_POLICY.schema(
            {
                **_list(fields.VOLUME_POLICY_TARGETS, target),
                **_list(fields.VOLUME_POLICY_TEMPLATES, self.claim_template()),
                **self.claim_policies(),
            }
        )
        return self.attach(
            node,
            *self.template_rules("spec.volumePolicy", "volume-policy-", "volumeClaimTemplates"),
        )

    def job_template(self) -> Schema:
        """The Job template with upstream's webhook defaults, and bounds for the CEL rules."""
        template = copy.deepcopy(self.job_template_raw)
        template["description"] = (
            "The template of the child Jobs (a batch/v1 JobTemplateSpec). completionMode "
            "defaults to Indexed, the pods' restartPolicy to OnFailure. Immutable while the "
            "JobSet runs, except, with the ElasticJobSet feature gate, spec.parallelism and "
            "spec.completions of an Indexed template (the running Jobs are resized in place)."
        )
        job_spec = template["properties"]["spec"]
        job_spec["properties"]["completionMode"]["default"] = jobset_api.DEFAULT_COMPLETION_MODE
        pod = job_spec["properties"]["template"]["properties"]["spec"]
        pod["properties"]["restartPolicy"]["default"] = jobset_api.DEFAULT_POD_RESTART_POLICY
        # A pod needs a container (CONTAINERS' minItems): caught here, not when the Job is
        # created.
        for declared in (fields.CONTAINERS, fields.INIT_CONTAINERS):
            containers = declared.bound(pod["properties"][declared.name])
            container = containers["items"]["properties"]
            container["name"]["maxLength"] = bounds.MAX_NAME
            mounts = fields.VOLUME_MOUNTS.bound(container["volumeMounts"])
            mounts["items"]["properties"]["name"]["maxLength"] = bounds.MAX_NAME
        volumes = fields.POD_VOLUMES.bound(pod["properties"]["volumes"])
        volumes["items"]["properties"]["name"]["maxLength"] = bounds.MAX_NAME
        return template

    def replicated_job(self) -> Schema:
        dependency = fields.DEPENDENCY.schema(
            _nodes(fields.DEPENDENCY_NAME, fields.DEPENDENCY_STATUS)
        )
        node = fields.REPLICATED_JOB.schema(
            {
                **_nodes(fields.REPLICATED_JOB_NAME, fields.GROUP_NAME),
                "template": self.job_template(),
                **_nodes(fields.REPLICAS),
                **_list(fields.DEPENDS_ON, dependency),
            }
        )
        return self.attach(
            node,
            Rule(
                id="replicas-times-parallelism",
                check=predicates.replicas_times_parallelism,
                where="spec.replicatedJobs[]",
                rule="!has(self.template.spec) || !has(self.template.spec.parallelism) || "
                f"self.replicas * self.template.spec.parallelism <= {bounds.MAX_INT32}",
                message="replicas times the template's parallelism must not exceed "
                f"{bounds.MAX_INT32}",
                detail="self.name",
                protects="pod counts that overflow the 32-bit counters of Jobs and JobSets",
            ),
            Rule(
                id="group-name-format",
                check=predicates.group_name_format,
                where="spec.replicatedJobs[]",
                rule="!format.dns1035Label().validate(self.groupName).hasValue()",
                message="groupName must be a DNS-1035 label of at most "
                f"{bounds.MAX_DNS_LABEL} characters",
                detail="format.dns1035Label().validate(self.groupName).value()[0]",
                field_path=".groupName",
                protects="the jobset.sigs.k8s.io/group-name label of Jobs and pods",
            ),
            Rule(
                # Only the length: a syntax check costs per character of an unbounded string
                # (32 replicated jobs x any annotation size exceeds the CEL budget). The full
                # label-key syntax is the controller's (SpecInvalid condition and Event).
                id="exclusive-topology-key",
                check=predicates.exclusive_topology_key,
                where="spec.replicatedJobs[]",
                rule=f"!has(self.template.metadata) || !has(self.template.metadata.annotations) "
                f"|| !({_q(EXCLUSIVE_TOPOLOGY)} in self.template.metadata.annotations) || "
                f"(size({EXCLUSIVE_VALUE}) >= 1 && "
                f"size({EXCLUSIVE_VALUE}) <= {bounds.MAX_LABEL_KEY})",
                message=f"the {EXCLUSIVE_TOPOLOGY} annotation of a replicated job's template "
                f"must name a node label key (1 to {bounds.MAX_LABEL_KEY} characters)",
                detail="self.name",
                field_path=".template.metadata.annotations",
                protects="child Jobs the API server would refuse (a pod affinity topologyKey "
                "that is not a label key)",
            ),
        )

    def managed_by(self) -> Schema:
        return self.attach(
            fields.MANAGED_BY.schema(),
            Rule(
                id="managed-by-format",
                check=predicates.managed_by_format,
                where="spec.managedBy",
                rule=f"size(self) <= {bounds.MAX_MANAGED_BY} && self.indexOf('/') > 0 && "
                "!format.dns1123Subdomain().validate(self.substring(0, self.indexOf('/')))"
                ".hasValue() && self.substring(self.indexOf('/') + 1)"
                ".matches('^[-A-Za-z0-9._~!$&\\'()*+,;=:%/]+$')",
                message="spec.managedBy must be a domain-prefixed path (e.g. example.com/name) "
                f"of at most {bounds.MAX_MANAGED_BY} characters",
                detail="self",
                protects="a controller name no controller could match",
            ),
        )

    # ------------------------------------------------------------ cross-field rules

    def restart_job_replicas(self, has_fp: str, fp: str) -> list[Rule]:
        """With the RestartJob gate, upstream's bound on replicas: jobRestarts has one entry
        per Job index, at most 1024 (maxItems)."""
        if not self.gates.restart_job:
            return []
        actions = _cel_list(jobset_api.RESTART_JOB_ACTIONS)
        limit = jobset_api.MAX_REPLICAS_RESTART_JOB
        return [
            Rule(
                id="restart-job-replicas",
                check=predicates.restart_job_replicas,
                where="spec",
                rule=f"!({has_fp}) || !{fp}.exists(r, r.action in {actions}) || "
                f"!{HAS_RJ} || {RJ}.all(r, r.replicas <= {limit})",
                message=jobset_api.MESSAGE_RESTART_JOB_REPLICAS,
                field_path=".replicatedJobs",
                protects="status.replicatedJobsStatus[].jobRestarts, one entry per Job index "
                f"(at most {limit})",
            )
        ]

    def spec_rules(self) -> list[Rule]:
        fp = "self.failurePolicy.rules"
        has_fp = "has(self.failurePolicy) && has(self.failurePolicy.rules)"
        clash = rule_names_clash("i", "p", "j", "q")
        c = "self.coordinator"
        coordinated = f"r.name == {c}.replicatedJob"
        job_index = f"({c}.?jobIndex.orValue(0))"
        pod_index = f"({c}.?podIndex.orValue(0))"
        unique = f"{RJ}.exists_one(o, o.name.lowerAscii() == r.name.lowerAscii())"
        earlier = f"{RJ}.exists(j, e, j < i && e.name == d.name)"
        bad_depends = f"i > 0 && has(r.dependsOn) && r.dependsOn.exists(d, !{earlier})"
        missing = "!(t in rn)"
        return [
            *self.restart_job_replicas(has_fp, fp),
            Rule(
                id="child-jobs-bounded",
                check=predicates.child_jobs_bounded,
                where="spec",
                rule=f"!{HAS_RJ} || {RJ}.map(r, r.replicas).sum() <= {jobset_api.MAX_CHILD_JOBS}",
                message=f"the replicas of all replicated jobs must add up to at most "
                f"{jobset_api.MAX_CHILD_JOBS} child Jobs",
                field_path=".replicatedJobs",
                protects="a JobSet too large to plan in one reconcile (the controller plans "
                "every child Job each time)",
            ),
            Rule(
                id="replicated-job-names-unique",
                check=predicates.replicated_job_names_unique,
                where="spec",
                rule=f"!{HAS_RJ} || {RJ}.all(r, {unique})",
                message="replicatedJob names must be unique, also when compared without case "
                "(child Job names use the lower-case form)",
                detail=f"{RJ}.map(r, !{unique}, r.name)[0]",
                field_path=".replicatedJobs",
                protects="child Jobs, labels and hostnames that would collide",
            ),
            Rule(
                id="success-policy-targets",
                check=predicates.success_policy_targets,
                where="spec",
                rule=with_rjob_set(
                    guarded_all("self", "successPolicy.targetReplicatedJobs", "t", "t in rn")
                ),
                message="successPolicy.targetReplicatedJobs must name replicated jobs of this "
                "JobSet",
                detail=with_rjob_set_value(
                    f"self.successPolicy.targetReplicatedJobs.map(t, {missing}, t)[0]"
                ),
                field_path=".successPolicy.targetReplicatedJobs",
                protects="a success policy that could never be met",
            ),
            Rule(
                id="failure-rule-targets",
                check=predicates.failure_rule_targets,
                where="spec",
                rule=f"!({has_fp}) || "
                + with_rjob_set(
                    f"{fp}.all(p, {guarded_all('p', 'targetReplicatedJobs', 't', 't in rn')})"
                ),
                message="failurePolicy.rules[].targetReplicatedJobs must name replicated jobs "
                "of this JobSet",
                detail=with_rjob_set_value(
                    f"{fp}.map(p, has(p.targetReplicatedJobs), "
                    f"p.targetReplicatedJobs.map(t, {missing}, t)).flatten()[0]"
                ),
                field_path=".failurePolicy.rules",
                protects="failure rules that could never match",
            ),
            Rule(
                id="failure-rule-names-unique",
                check=predicates.failure_rule_names_unique,
                where="spec",
                rule=f"!({has_fp}) || {fp}.all(i, p, {fp}.all(j, q, i == j || !{clash}))",
                message="failurePolicy rule names must be unique (a rule without a name is "
                f"called {DEFAULT_RULE_NAME_PREFIX}<index>)",
                detail=f"{fp}.transformList(i, p, {named('p')} && {fp}.exists(j, q, i != j && "
                f"{clash}), p.name)[0]",
                field_path=".failurePolicy.rules",
                protects="Events and conditions that name the matching rule",
            ),
            Rule(
                id="depends-on-first",
                check=predicates.depends_on_first,
                where="spec",
                rule=f"!{HAS_RJ} || size({RJ}) == 0 || !has({RJ}[0].dependsOn) || "
                f"size({RJ}[0].dependsOn) == 0",
                message="the first replicated job cannot have dependsOn: nothing starts before it",
                detail=f"{RJ}[0].name",
                field_path=".replicatedJobs",
                protects="a first replicated job that would never start",
            ),
            Rule(
                id="depends-on-earlier",
                check=predicates.depends_on_earlier,
                where="spec",
                rule=f"!{HAS_RJ} || {RJ}.all(i, r, !({bad_depends}))",
                message="dependsOn must name a replicated job listed before this one",
                detail=f"{RJ}.transformList(i, r, {bad_depends}, r.name + ' depends on ' + "
                f"r.dependsOn.map(d, !{earlier}, d.name)[0])[0]",
                field_path=".replicatedJobs",
                protects="dependency cycles and dependencies that can never be met",
            ),
            Rule(
                id="startup-policy-or-depends-on",
                check=predicates.startup_policy_or_depends_on,
                where="spec",
                rule="!(has(self.startupPolicy) && self.startupPolicy.startupPolicyOrder == "
                f"'InOrder' && {HAS_RJ} && {RJ}.exists(r, has(r.dependsOn) && "
                "size(r.dependsOn) > 0))",
                message="startupPolicy InOrder and dependsOn cannot be combined: use dependsOn",
                protects="two start orders that could contradict each other",
            ),
            Rule(
                id="coordinator-replicated-job",
                check=predicates.coordinator_replicated_job,
                where="spec",
                rule=f"!has({c}) || {rjob_exists(f'{c}.replicatedJob')}",
                message="coordinator.replicatedJob must name a replicated job of this JobSet",
                detail=f"{c}.replicatedJob",
                field_path=".coordinator.replicatedJob",
                protects="a coordinator address that points at no pod",
            ),
            Rule(
                id="coordinator-job-index",
                check=predicates.coordinator_job_index,
                where="spec",
                rule=f"!has({c}) || !{HAS_RJ} || {RJ}.all(r, !({coordinated}) || "
                f"{job_index} < r.replicas)",
                message="coordinator.jobIndex must be less than the replicas of the "
                "coordinator's replicated job",
                detail=f"{c}.replicatedJob",
                field_path=".coordinator.jobIndex",
                protects="a coordinator address that points at no pod",
            ),
            Rule(
                id="coordinator-indexed",
                check=predicates.coordinator_indexed,
                where="spec",
                rule=f"!has({c}) || !{HAS_RJ} || {RJ}.all(r, !({coordinated}) || "
                "(has(r.template.spec) && has(r.template.spec.completionMode) && "
                "r.template.spec.completionMode == 'Indexed'))",
                message="the coordinator's replicated job must use completionMode Indexed",
                detail=f"{c}.replicatedJob",
                field_path=".coordinator.replicatedJob",
                protects="a coordinator chosen by a completion index that does not exist",
            ),
            Rule(
                id="coordinator-pod-index",
                check=predicates.coordinator_pod_index,
                where="spec",
                rule=f"!has({c}) || !{HAS_RJ} || {RJ}.all(r, !({coordinated}) || "
                "!has(r.template.spec) || !has(r.template.spec.completions) || "
                f"{pod_index} < r.template.spec.completions)",
                message="coordinator.podIndex must be less than the completions of the "
                "coordinator's replicated job",
                detail=f"{c}.replicatedJob",
                field_path=".coordinator.podIndex",
                protects="a coordinator address that points at no pod",
            ),
            Rule(
                id="managed-by-immutable",
                where="spec",
                rule=same("self", "oldSelf", "managedBy"),
                message="spec.managedBy is immutable",
                field_path=".managedBy",
                reason="FieldValueForbidden",
                protects="a JobSet handed between controllers while it runs",
                on_update=True,
                check_update=predicates.field_unchanged("managedBy"),
            ),
            Rule(
                id="volume-policy-kept",
                where="spec",
                rule="!has(oldSelf.volumePolicy) || has(self.volumePolicy)",
                message="spec.volumePolicy cannot be removed (a client that knows only upstream "
                "JobSet's types drops it when it writes the whole object: patch instead)",
                field_path=".volumePolicy",
                reason="FieldValueForbidden",
                protects="claims made and mounted: spec.volumePolicy's own rules run only while "
                "it is there",
                on_update=True,
                check_update=predicates.field_kept("volumePolicy"),
            ),
            *self.volume_rules(),
            *self.replicated_jobs_update_rules(),
        ]

    def volume_rules(self) -> list[Rule]:
        names = TEMPLATE_NAMES
        vcp_targets = (
            collect(
                "self",
                "volumeClaimPolicies",
                "p",
                "p.targetReplicatedJobs",
                when="has(p.targetReplicatedJobs)",
            )
            + ".flatten()"
        )
        vp_targets = collect("self", "volumePolicy.replicatedJobs", "x", "x.name")
        all_targets = f"({vcp_targets} + {vp_targets})"
        # A replicated job that does not get a template may still mount a pod volume of that
        # name which it defines itself (vs: the names of its own volumes).
        bad_mount = f"(m.name in tn) && !(m.name in vs) && !{gets_template('r', 'm.name')}"
        bad_volume = f"(v.name in tn) && {gets_template('r', 'v.name')}"
        own_volumes = (
            f"({pod_ok('r')} && {present('r', POD + '.volumes')} ? "
            f"r.{POD}.volumes.transformMapEntry(i, v, {{v.name: true}}) : {{}})"
        )
        mounts_ok = f"[{own_volumes}].all(vs, {all_mounts('r', 'm', f'!({bad_mount})')})"
        volumes_ok = guarded_all("r", POD + ".volumes", "v", f"!({bad_volume})")
        return [
            Rule(
                id="template-names-unique",
                check=predicates.template_names_unique,
                where="spec",
                rule=f"size({names}.distinct()) == size({names})",
                message="volume claim template names must be unique across volumeClaimPolicies "
                "and volumePolicy",
                detail=f"{names}.map(n, !{names}.exists_one(x, x == n), n)[0]",
                protects="two claims competing for one pod volume name",
            ),
            Rule(
                id="volume-targets",
                check=predicates.volume_targets,
                where="spec",
                rule=with_rjob_set(f"{all_targets}.all(t, t in rn)"),
                message="volume claim policies must target replicated jobs of this JobSet",
                detail=with_rjob_set_value(f"{all_targets}.map(t, !(t in rn), t)[0]"),
                protects="volumes promised to replicated jobs that do not exist",
            ),
            Rule(
                id="template-mounted",
                check=predicates.template_mounted,
                where="spec",
                # Without replicated jobs nothing mounts a template (and reading
                # self.replicatedJobs would be an evaluation error): any template is unmounted.
                rule=f"{HAS_RJ} ? [{all_mount_names()}].all(ms, {names}.all(n, n in ms)) : "
                f"size({names}) == 0",
                message="every volume claim template must be mounted by a replicated job it "
                "targets (a volumeMount with the template's name)",
                detail=f"({HAS_RJ} ? [{all_mount_names()}].map(ms, {names}.map(n, !(n in ms), "
                f"n)[0])[0] : {names}[0])",
                protects="claims that no pod would use",
            ),
            Rule(
                id="untargeted-mount",
                check=predicates.untargeted_mount,
                where="spec",
                rule=f"!{MAPS_SAFE} || !{HAS_RJ} || {with_sets(f'{RJ}.all(r, {mounts_ok})')}",
                message="a replicated job that a volume claim policy does not target must not "
                "mount its templates, unless its pod template defines a volume of that name itself",
                detail=with_sets_value(f"{RJ}.map(r, !{mounts_ok}, r.name)[0]"),
                protects="pods that would mount a volume they do not get, and never start (a "
                "volume the pod template defines itself is its own: allowed)",
            ),
            Rule(
                id="template-volume-name-free",
                check=predicates.template_volume_name_free,
                where="spec",
                rule=f"!{MAPS_SAFE} || !{HAS_RJ} || {with_sets(f'{RJ}.all(r, {volumes_ok})')}",
                message="a replicated job that gets a volume claim template must not define a "
                "pod volume of the same name",
                detail=with_sets_value(f"{RJ}.map(r, !{volumes_ok}, r.name)[0]"),
                protects="two pod volumes with one name (the pod would be rejected)",
            ),
            Rule(
                id="restore-snapshot-name",
                check=predicates.restore_snapshot_name,
                where="spec",
                rule=guarded_all(
                    "self",
                    "volumeClaimPolicies",
                    "p",
                    f"!has(p.restorePolicy) || {snapshot_named('p.restorePolicy')}",
                )
                + f" && (!{present('self', 'volumePolicy.restorePolicy')} || "
                f"{snapshot_named('self.volumePolicy.restorePolicy')})",
                message=fields.RESTORE_SNAPSHOT_NAME_RULE,
                protects="a restore with no snapshot to restore from, or a snapshot name that "
                "would be ignored",
            ),
            Rule(
                id="restore-from-jobset",
                check=predicates.restore_from_jobset,
                where="spec",
                rule=guarded_all(
                    "self",
                    "volumeClaimPolicies",
                    "p",
                    f"!has(p.restorePolicy) || {from_jobset_newest('p.restorePolicy')}",
                )
                + f" && (!{present('self', 'volumePolicy.restorePolicy')} || "
                f"{from_jobset_newest('self.volumePolicy.restorePolicy')})",
                message=fields.RESTORE_FROM_JOBSET_RULE,
                protects="a JobSet to restore from that would be ignored",
            ),
            Rule(
                id="suspend-snapshot-restores",
                check=predicates.suspend_snapshot_restores,
                where="spec",
                rule=each_policy(lambda p: f"!{snapshots_on_suspend(p)} || {restores_newest(p)}"),
                message=fields.SUSPEND_SNAPSHOT_RESTORE_RULE,
                protects="claims deleted while the JobSet is suspended and made again empty "
                "when it is resumed",
            ),
            Rule(
                id="suspend-snapshot-not-created",
                check=predicates.suspend_snapshot_not_created,
                where="spec",
                rule=each_policy(
                    lambda p: f"!{snapshots_on_suspend(p)} || !{creates_suspended(p)}"
                ),
                message=fields.SUSPEND_SNAPSHOT_CREATE_RULE,
                protects="claims snapshotted and deleted while suspended, then made again at once",
            ),
        ]

    def replicated_jobs_update_rules(self) -> list[Rule]:
        job_spec = self.job_template_raw["properties"]["spec"]
        pod_template = job_spec["properties"]["template"]["properties"]
        job_fields = [f for f in sorted(job_spec["properties"]) if f != "template"]
        meta_fields = [
            f
            for f in sorted(pod_template["metadata"]["properties"])
            if f not in SUSPENDED_MUTABLE_POD_META
        ]
        pod_fields = [
            f
            for f in sorted(pod_template["spec"]["properties"])
            if f not in SUSPENDED_MUTABLE_POD_SPEC
        ]
        # ElasticJobSet: an Indexed replicated job's parallelism and completions are compared
        # apart (``each_same``), so that they may change; the elastic rules say how.
        elastic = self.gates.elastic_jobset
        sized = [f for f in job_fields if elastic and f in ELASTIC_JOB_FIELDS]
        fixed = [f for f in job_fields if f not in sized]
        running: list[str] = list(REPLICATED_JOB_FIELDS)
        if elastic:
            running = [p for p in REPLICATED_JOB_FIELDS if p != "template"]
            running += ["template.?metadata", "template.?spec.?template"]
            running += [f"template.?spec.?{_seg(f)}" for f in fixed]
        # Levels of lists and objects below a replicated job: how deep the comparison reads.
        depth = 1 + _height(self.job_template_raw)
        # While suspended: every field but the pod templates' placement fields is compared.
        paths = [p for p in REPLICATED_JOB_FIELDS if p != "template"] + ["template.?metadata"]
        paths += [f"template.?spec.?{_seg(f)}" for f in fixed]
        paths += [f"template.?spec.?template.?metadata.?{_seg(f)}" for f in meta_fields]
        paths += [f"template.?spec.?template.?spec.?{_seg(f)}" for f in pod_fields]

        def fields(r: str, compared: Sequence[str]) -> str:
            return "[" + ", ".join(f"dyn({r}.{p})" for p in compared) + "]"

        # An Indexed replicated job may change its sizes (ElasticJobSet); others compare them.
        sizes = [f"template.?spec.?{f}" for f in sized]
        resizable = (
            f" && ({INDEXED_R} || "
            f"{fields('r', sizes)} == {fields('oldSelf.replicatedJobs[i]', sizes)})"
            if sized
            else ""
        )

        def each_same(compared: Sequence[str]) -> str:
            """CEL: the same replicated jobs, in the same order, semantically equal in
            ``compared`` (as upstream's Go types decode them: :mod:`controller.api.semantic`)."""
            same = semantic.cel_same("r", "oldSelf.replicatedJobs[i]", compared, depth)
            return (
                "(has(self.replicatedJobs) == has(oldSelf.replicatedJobs) && "
                "(!has(self.replicatedJobs) || (size(self.replicatedJobs) == "
                "size(oldSelf.replicatedJobs) && self.replicatedJobs.all(i, r, "
                f"{same}{resizable}))))"
            )

        also = (
            " (and, ElasticJobSet, parallelism and completions of an Indexed replicated job)"
            if elastic
            else ""
        )
        suspended = (
            "((has(self.suspend) && self.suspend) || (has(oldSelf.suspend) && oldSelf.suspend))"
        )
        return [
            Rule(
                id="replicated-jobs-immutable",
                where="spec",
                rule=f"{suspended} || {each_same(running)}",
                message="spec.replicatedJobs is immutable while the JobSet is not suspended, "
                f"except replicas{also}",
                field_path=".replicatedJobs",
                reason="FieldValueForbidden",
                protects="the child Jobs of a running JobSet",
                on_update=True,
                check_update=predicates.replicated_jobs_same(
                    running, sizes, depth, when_suspended=False
                ),
            ),
            Rule(
                id="replicated-jobs-suspended-changes",
                where="spec",
                rule=f"!{suspended} || {each_same(paths)}",
                message="while the JobSet is suspended, only replicas and the labels, "
                "annotations, nodeSelector, tolerations and schedulingGates of the pod templates "
                f"in spec.replicatedJobs may change{also}",
                field_path=".replicatedJobs",
                reason="FieldValueForbidden",
                protects="the child Jobs; a queueing system may still place the pods",
                on_update=True,
                check_update=predicates.replicated_jobs_same(
                    paths, sizes, depth, when_suspended=True
                ),
            ),
            *(self.elastic_rules() if elastic else []),
        ]

    @staticmethod
    def elastic_rules() -> list[Rule]:
        """ElasticJobSet (upstream's rules): a resized Indexed replicated job keeps at least one
        pod and completions equal to parallelism (what Kubernetes allows to change in place on
        an Indexed Job). Only where the template changed: a JobSet created otherwise stays."""
        o = "oldSelf.replicatedJobs[i]"

        def changed(field: str) -> str:
            return f"[dyn(r.template.?spec.?{field})] != [dyn({o}.template.?spec.?{field})]"

        def each(bad: str) -> tuple[str, str]:
            """CEL: no resized Indexed replicated job is ``bad``; the first that is, by name."""
            resized = f"i < size(oldSelf.replicatedJobs) && {INDEXED_R} && "
            guard = f"!{HAS_RJ} || !has(oldSelf.replicatedJobs) || "
            rule = f"{guard}{RJ}.all(i, r, !({resized}{bad}))"
            detail = f"{RJ}.transformList(i, r, {resized}{bad}, r.name)[0]"
            return rule, detail

        def at_least_one(field: str) -> Rule:
            rule, detail = each(f"{changed(field)} && r.template.?spec.?{field}.orValue(1) < 1")
            return Rule(
                id=f"elastic-{field}-at-least-one",
                where="spec",
                rule=rule,
                message=f"{field} must be >= 1 when an Indexed replicated job is resized "
                "(ElasticJobSet)",
                detail=detail,
                field_path=".replicatedJobs",
                protects="a running Job resized to no pods (its claims and work gone)",
                on_update=True,
                check_update=predicates.elastic_at_least_one(field),
            )

        p, c = (f"r.template.?spec.?{f}" for f in ELASTIC_JOB_FIELDS)
        unequal_rule, unequal_detail = each(
            f"({changed('parallelism')} || {changed('completions')}) && "
            f"{p}.hasValue() && {c}.hasValue() && {p}.value() != {c}.value()"
        )
        return [
            at_least_one("parallelism"),
            at_least_one("completions"),
            Rule(
                id="elastic-completions-equal-parallelism",
                where="spec",
                rule=unequal_rule,
                message="completions must equal parallelism when an Indexed replicated job is "
                "resized (elastic Indexed Jobs)",
                detail=unequal_detail,
                field_path=".replicatedJobs",
                protects="a resize Kubernetes refuses on the running Jobs",
                on_update=True,
                check_update=predicates.elastic_completions_equal_parallelism,
            ),
        ]

    def elastic_terminal_rule(self) -> list[Rule]:
        """ElasticJobSet: a finished JobSet is not resized (upstream refuses it too)."""
        if not self.gates.elastic_jobset:
            return []
        sizes = [f"template.?spec.?{f}" for f in ELASTIC_JOB_FIELDS]

        def fields(r: str) -> str:
            return "[" + ", ".join(f"dyn({r}.{p})" for p in sizes) + "]"

        old = "oldSelf.spec.replicatedJobs"
        finished = (
            "has(oldSelf.status) && has(oldSelf.status.terminalState) && "
            "oldSelf.status.terminalState != ''"
        )
        return [
            Rule(
                id="elastic-not-when-finished",
                where="(root)",
                rule=f"!({finished}) || !has(self.spec.replicatedJobs) || "
                f"!has({old}) || self.spec.replicatedJobs.all(i, r, i >= size({old}) || "
                f"{fields('r')} == {fields(f'{old}[i]')})",
                message="parallelism and completions cannot change once the JobSet is "
                "Completed or Failed",
                field_path=".spec.replicatedJobs",
                reason="FieldValueForbidden",
                protects="the Jobs and claims of a finished JobSet",
                on_update=True,
                check_update=predicates.elastic_not_when_finished,
            )
        ]

    def policy_update_rules(self) -> tuple[list[Rule], list[Rule]]:
        claim_spec = sorted(self.claim_raw["properties"]["spec"]["properties"])
        requests = "spec.resources.requests"

        def storage(x: str) -> str:
            return f"({present(x, requests)} && 'storage' in {sel(x, requests)})"

        compared = ["?apiVersion", "?kind", "metadata.name", "metadata.?__namespace__"]
        compared += ["metadata.?finalizers", "?spec.?resources.?limits"]
        compared += [f"?spec.?{_seg(f)}" for f in claim_spec if f != "resources"]

        def template_fields(t: str) -> str:
            return "[" + ", ".join(f"dyn({t}.{p})" for p in compared) + f", dyn({storage(t)})]"

        def other_requests_in(a: str, b: str) -> str:
            """Every request of a other than storage is in b with the same value."""
            ra, rb = sel(a, requests), sel(b, requests)
            return (
                f"(!{present(a, requests)} || {ra}.all(k, k == 'storage' || "
                f"({present(b, requests)} && k in {rb} && [{ra}[k]] == [{rb}[k]])))"
            )

        def template_same(t: str, o: str) -> str:
            return (
                f"({template_fields(t)} == {template_fields(o)} && {other_requests_in(t, o)} "
                f"&& {other_requests_in(o, t)})"
            )

        def not_lowered(t: str, o: str) -> str:
            new, old = f"{sel(t, requests)}.storage", f"{sel(o, requests)}.storage"
            return (
                f"({t}.metadata.name != {o}.metadata.name || !{storage(t)} || !{storage(o)} || "
                f"[{new}].all(n, [{old}].all(q, !isQuantity(string(n)) || "
                "!isQuantity(string(q)) || !quantity(string(n)).isLessThan(quantity(string(q))))))"
            )

        def templates_same(new: str, old: str, path: str) -> str:
            n, o = sel(new, path), sel(old, path)
            return (
                f"has({n}) == has({o}) && (!has({n}) || (size({n}) == size({o}) && "
                f"{n}.all(j, t, {template_same('t', f'{o}[j]')})))"
            )

        def none_lowered(new: str, old: str, path: str) -> str:
            n, o = sel(new, path), sel(old, path)
            return (
                f"(!has({n}) || !has({o}) || {n}.all(j, t, j >= size({o}) || "
                f"{not_lowered('t', f'{o}[j]')}))"
            )

        def lowered_names(new: str, old: str, path: str) -> str:
            n, o = sel(new, path), sel(old, path)
            return (
                f"{n}.transformList(j, t, j < size({o}) && !{not_lowered('t', f'{o}[j]')}, "
                "t.metadata.name)"
            )

        immutable_message = (
            "is immutable, except the templates' labels and annotations and raising a "
            "template's storage request"
        )
        lowered = "a volume claim template's storage request cannot be lowered"
        o = "oldSelf[i]"
        policy_fields = (
            "[dyn({0}.?retentionPolicy), dyn({0}.?targetReplicatedJobs), dyn({0}.scope)]"
        )
        vcp = [
            Rule(
                id="volume-claim-policies-immutable",
                where="spec.volumeClaimPolicies",
                rule="size(self) == size(oldSelf) && self.all(i, p, "
                f"{policy_fields.format('p')} == {policy_fields.format(o)} && "
                f"{templates_same('p', o, 'templates')})",
                message=f"spec.volumeClaimPolicies {immutable_message}",
                reason="FieldValueForbidden",
                protects="claims already made and mounted by running pods",
                on_update=True,
                check_update=predicates.volume_claim_policies_same(compared),
            ),
            Rule(
                id="volume-claim-policies-storage-not-lowered",
                where="spec.volumeClaimPolicies",
                rule=f"self.all(i, p, i >= size(oldSelf) || {none_lowered('p', o, 'templates')})",
                message=lowered,
                detail=f"self.transformList(i, p, i < size(oldSelf) && has(p.templates) && "
                f"has({o}.templates), {lowered_names('p', o, 'templates')}).flatten()[0]",
                protects="existing claims: a claim cannot shrink",
                on_update=True,
                check_update=predicates.volume_claim_policies_not_lowered,
            ),
        ]
        path = "volumeClaimTemplates"
        vp_fields = "[dyn({0}.?replicatedJobs), dyn({0}.?retentionPolicy)]"
        vp = [
            Rule(
                id="volume-policy-immutable",
                where="spec.volumePolicy",
                rule=f"{vp_fields.format('self')} == {vp_fields.format('oldSelf')} && "
                f"{templates_same('self', 'oldSelf', path)}",
                message=f"spec.volumePolicy {immutable_message}",
                reason="FieldValueForbidden",
                protects="claims already made and mounted by running pods",
                on_update=True,
                check_update=predicates.volume_policy_same(compared),
            ),
            Rule(
                id="volume-policy-storage-not-lowered",
                where="spec.volumePolicy",
                rule=none_lowered("self", "oldSelf", path),
                message=lowered,
                detail=f"{lowered_names('self', 'oldSelf', path)}[0]",
                protects="existing claims: a claim cannot shrink",
                on_update=True,
                check_update=predicates.volume_policy_not_lowered,
            ),
        ]
        return vcp, vp

    # ------------------------------------------------------------ names (root level)

    def root_rules(self) -> list[Rule]:
        rj = "self.spec.replicatedJobs"
        guard = "!has(self.spec) || !has(self.spec.replicatedJobs) || "
        js = "self.metadata.name"
        job_index = "(r.replicas > 0 ? r.replicas - 1 : 0)"
        completions = "r.template.spec.completions"
        pod_index = f"({completions} > 0 ? {completions} - 1 : 0)"
        # A child Job name is <jobSet>-<replicatedJob>-<digits>: a DNS-1035 label when the JobSet
        # name starts with a letter, both names use only [-a-z0-9] (the replicated job name in
        # lower case) and the whole is at most MAX_JOB_NAME characters.
        chars_ok = (
            f"{js}.matches('^[a-z][-a-z0-9]*$') && r.name.lowerAscii().matches('^[-a-z0-9]*$')"
        )
        job_len = f"size({js}) + size(r.name) + 2 + {digits(job_index)}"
        job_bad = f"!({chars_ok} && {job_len} <= {bounds.MAX_JOB_NAME})"
        indexed = (
            "has(r.template.spec) && has(r.template.spec.completionMode) && "
            "r.template.spec.completionMode == 'Indexed' && has(r.template.spec.completions)"
        )
        pod_len = f"{job_len} + 1 + {digits(pod_index)} + {bounds.POD_NAME_SUFFIX}"
        pod_bad = f"{indexed} && !({chars_ok} && {pod_len} <= {bounds.MAX_JOB_NAME})"
        shared_len = f"size(t.metadata.name) + 1 + size({js})"
        # The longest child Job name (mj), worked out once: comparing every template with every
        # replicated job would cost their product.
        longest_job = f"({rj}.map(r, {job_len}) + [0]).max()"
        per_job_len = "size(t.metadata.name) + 1 + mj"
        # Pod scope's -<podIndex> is not counted: with Job names of at most 63 characters
        # (child-job-names) and templates of 63, its claims have at most 138.
        templates_ok = guarded_all(
            "p",
            "templates",
            "t",
            f"p.scope == 'JobSet' ? {shared_len} <= {bounds.MAX_CLAIM_NAME} : "
            f"{per_job_len} <= {bounds.MAX_CLAIM_NAME}",
        )
        not_indexed = (
            "p.scope == 'Pod' && has(p.targetReplicatedJobs) && "
            f"{rj}.exists(r, r.name in p.targetReplicatedJobs && !({indexed}))"
        )
        claims_ok = (
            f"[{longest_job}].all(mj, "
            + guarded_all("self", "spec.volumeClaimPolicies", "p", templates_ok)
            + ")"
            + " && "
            + guarded_all(
                "self",
                "spec.volumePolicy.volumeClaimTemplates",
                "t",
                f"{shared_len} <= {bounds.MAX_CLAIM_NAME}",
            )
        )
        # The coordinator's address goes into a label of every Job and pod: its characters are
        # those of the names the rules above and subdomain-format check, its length is checked
        # here (upstream's webhook refuses the same JobSets).
        c = "self.spec.coordinator"
        network = "self.spec.network"
        subdomain = (
            f"(has({network}) && has({network}.subdomain) && {network}.subdomain != '' ? "
            f"{network}.subdomain : {js})"
        )
        address_len = (
            f"size({js}) + size({c}.replicatedJob) + {digits(f'{c}.?jobIndex.orValue(0)')} + "
            f"{digits(f'{c}.?podIndex.orValue(0)')} + size({subdomain}) + 4"
        )
        return [
            Rule(
                id="child-job-names",
                check=predicates.child_job_names,
                where="(root)",
                rule=f"{guard}{rj}.all(r, !({job_bad}))",
                message="child Job names (<jobSet>-<replicatedJob>-<jobIndex>) must be DNS-1035 "
                "labels: the JobSet name must start with a letter, both names may contain only "
                "letters, digits and '-' (the replicated job name is used in lower case), and "
                f"the longest Job name must fit in {bounds.MAX_JOB_NAME} characters",
                detail=f"'replicatedJob ' + {rj}.map(r, {job_bad}, r.name)[0]",
                field_path=".spec.replicatedJobs",
                protects="child Jobs the API server would refuse",
            ),
            Rule(
                id="pod-names",
                check=predicates.pod_names,
                where="(root)",
                rule=f"{guard}{rj}.all(r, !({pod_bad}))",
                message="pod names (<jobSet>-<replicatedJob>-<jobIndex>-<podIndex>-<suffix>) "
                f"must be DNS-1035 labels of at most {bounds.MAX_JOB_NAME} characters: shorten the "
                "JobSet or "
                "replicated job name",
                detail=f"'replicatedJob ' + {rj}.map(r, {pod_bad}, r.name)[0]",
                field_path=".spec.replicatedJobs",
                protects="pod hostnames that DNS could not resolve",
            ),
            Rule(
                id="claim-names",
                check=predicates.claim_names,
                where="(root)",
                rule=f"{guard}({claims_ok})",
                message="claim names (<template>-<jobSet>, "
                "<template>-<jobSet>-<replicatedJob>-<jobIndex> for scope Job, and "
                "<template>-<jobSet>-<replicatedJob>-<jobIndex>-<podIndex> for scope Pod) must "
                f"be at most {bounds.MAX_CLAIM_NAME} characters",
                field_path=".spec",
                protects="claims the API server would refuse",
            ),
            Rule(
                id="pod-scope-indexed",
                check=predicates.pod_scope_indexed,
                where="(root)",
                rule=f"{guard}"
                + guarded_all("self", "spec.volumeClaimPolicies", "p", f"!({not_indexed})"),
                message="a scope Pod policy needs completionMode Indexed and completions in every "
                "replicated job it targets: an Indexed Job has one pod, and one claim, per "
                "completion index",
                field_path=".spec.volumeClaimPolicies",
                protects="pods that would have no completion index to find their claim by",
            ),
            self.claim_collision_rule(),
            # Last: a long JobSet name breaks the name rules above too, which say it better
            # (the admission policy reports the first failing rule only).
            Rule(
                id="coordinator-address",
                check=predicates.coordinator_address,
                where="(root)",
                rule=f"!has(self.spec) || !has({c}) || {address_len} <= {bounds.MAX_LABEL_VALUE}",
                message="the coordinator's address (<jobSet>-<replicatedJob>-<jobIndex>-"
                f"<podIndex>.<subdomain>) must fit in a label value of at most "
                f"{bounds.MAX_LABEL_VALUE} characters: "
                "shorten the JobSet, replicated job or subdomain name",
                field_path=".spec.coordinator",
                protects="Jobs and pods whose coordinator label the API server would refuse",
            ),
        ]

    @staticmethod
    def claim_collision_rule() -> Rule:
        """Two templates whose claims could have the same name.

        Claim names are ``T-J`` (scope JobSet) and ``T-J-r-i`` (scope Job), for template T, JobSet
        J, replicated job r (lower case, replicas >= 1) and job index i. Two claims of one
        template never share a name (the index follows the last '-', and r differs), nor do two
        JobSet-scope claims (template names are unique). What remains (docs/api.md,
        ``claim-names-unique``):

        (A) ``T1-J-r1-i == T2-J-r2-i`` for Job-scope T1, T2 (the same index on both sides: it
            follows the last '-'): T2 = T1-X and r1 = V + r2 with ``J-V == X-J-``. Every such X
            is worked out from the pairs of replicated jobs (``xs``), then each Job-scope
            template T2 that is a Job-scope template, '-' and such an X collides.
        (B) ``T1-J == T2-J-r2-i`` for JobSet-scope T1, Job-scope T2: then i is the last
            '-'-separated part of J (digits, i < r2's replicas), T1 = T2-Y and ``Y-J ==
            J-r2-i``: every such Y is worked out from the replicated jobs (``ys``), then each
            JobSet-scope template that is a Job-scope template, '-' and such a Y collides.

        Whether the policies target r1 and r2 is not looked at (it would multiply the cost by
        the number of replicated jobs): names that could collide are refused.
        """
        js = "self.metadata.name"
        # [self].map(x, ...x.spec...): from [self.spec] the cost estimator loses the bounds.
        spec_names = (
            "[self].map(x, has(x.spec.volumeClaimPolicies), x.spec.volumeClaimPolicies.map(p, "
        )
        job_scope = spec_names + (
            "has(p.templates) && p.scope == 'Job', p.templates.map(t, t.metadata.name))"
            ".flatten()).flatten()"
        )
        jobset_scope = (
            spec_names + "has(p.templates) && p.scope == 'JobSet', p.templates.map(t, "
            "t.metadata.name)).flatten()).flatten() + [self].map(x, has(x.spec.volumePolicy) && "
            "has(x.spec.volumePolicy.volumeClaimTemplates), "
            "x.spec.volumePolicy.volumeClaimTemplates.map(t, t.metadata.name)).flatten()"
        )
        live = "self.spec.replicatedJobs.map(r, r.replicas > 0, r.name.lowerAscii())"
        # (A) J-V for each pair r1 = V + r2; the X of those that end with -J- (J-V == X-J-).
        job_v = (
            f"[{live}].map(l, l.map(a, l.map(b, a != b && a.endsWith('-' + b), "
            f"{js} + '-' + a.substring(0, size(a) - size(b)))).flatten())[0]"
        )
        xs = (
            f"{job_v}.filter(v, v.endsWith('-' + {js} + '-') && size(v) > size({js}) + 2)"
            f".map(v, v.substring(0, size(v) - size({js}) - 2)).distinct()"
        )
        # (B) J-r2-i for each r2 with replicas > i; the Y of those that end with -J (Y-J == J-r2-i).
        last = f"{js}.substring({js}.lastIndexOf('-') + 1)"
        index_ok = (
            f"{js}.lastIndexOf('-') > 0 && {last}.matches({_q(predicates.job_index_pattern())})"
        )
        job_r_i = (
            f"self.spec.replicatedJobs.map(r, {index_ok} && int({last}) < r.replicas, "
            f"{js} + '-' + r.name.lowerAscii() + '-' + {last})"
        )
        ys = (
            f"{job_r_i}.filter(e, e.endsWith('-' + {js}) && size(e) > size({js}) + 1)"
            f".map(e, e.substring(0, size(e) - size({js}) - 1)).distinct()"
        )

        def extends(rests: str) -> str:
            """CEL: template name ``t`` is a Job-scope template, '-' and one of ``rests``. The
            rests are few (none unless a replicated job's name holds the JobSet's name), so this
            costs next to nothing for most JobSets, whatever their template names."""
            return (
                f"{rests}.exists(x, size(t) > size(x) + 1 && t.endsWith('-' + x) && "
                "t.substring(0, size(t) - size(x) - 1) in jtl)"
            )

        # Positions in job_scope + jobset_scope of the templates that collide with a shorter one.
        found = (
            f"(jtl + jsl).transformList(i, t, (i < size(jtl) && {extends('xs')}) || "
            f"(i >= size(jtl) && {extends('ys')}), i)"
        )

        def bound(body: str) -> str:
            """``body`` with the template names and the rests, each made once. (A string made
            inside would lose its size bound: only positions come out.) Job-scope names are
            looked up in a list, not a set: a set needs unique keys, and checking that costs the
            square of the number of templates; a lookup happens only for a name that ends with
            one of the rests."""
            return (
                f"[{job_scope}].map(jtl, [{jobset_scope}].map(jsl, "
                f"[{xs}].map(xs, [{ys}].map(ys, {body})[0])[0])[0])[0]"
            )

        guard = "!has(self.spec.replicatedJobs) || "
        return Rule(
            id="claim-names-unique",
            check=predicates.claim_names_unique,
            where="(root)",
            rule=f"{guard}size({bound(found)}) == 0",
            message="two volume claim templates could make claims of the same name "
            "(<template>-<jobSet>-<replicatedJob>-<jobIndex> for scope Job, "
            "<template>-<jobSet> for scope JobSet, the replicated job name in lower case): "
            "rename a template or a replicated job",
            detail=f"'template ' + ({job_scope} + {jobset_scope})[{bound(found)}[0]]",
            field_path=".spec",
            protects="claims that two templates would share, which makes the JobSet "
            "SpecInvalid (checked on every update too: raising replicas can make a collision)",
        )

    # ------------------------------------------------------------ status

    @staticmethod
    def status() -> Schema:
        condition = obj(
            "A condition in the metav1.Condition shape.",
            {
                "type": string(
                    "Type of the condition, e.g. Completed, Failed, Suspended.",
                    maxLength=bounds.MAX_CONDITION_TYPE,
                ),
                "status": string("True, False or Unknown.", enum=["True", "False", "Unknown"]),
                "observedGeneration": integer(
                    "The metadata.generation the condition was computed from.",
                    fmt="int64",
                    minimum=0,
                ),
                "lastTransitionTime": string("When the status last changed.", format="date-time"),
                "reason": string(
                    "A CamelCase reason for the last transition.",
                    maxLength=bounds.MAX_CONDITION_REASON,
                    minLength=1,
                ),
                "message": string(
                    "A human-readable explanation.", maxLength=bounds.MAX_CONDITION_MESSAGE
                ),
            },
            required=["type", "status", "lastTransitionTime", "reason", "message"],
        )

        def count(what: str) -> Schema:
            return integer(f"Child Jobs of this replicated job that are {what}.")

        replicated_job_status = obj(
            "Counts of the child Jobs of one replicated job.",
            {
                "name": string("Name of the replicated job."),
                "ready": count("ready: every pod ready or succeeded"),
                "succeeded": count("complete"),
                "failed": count("failed"),
                "active": count("active: at least one pod pending or running"),
                "suspended": count("suspended"),
                "jobRestarts": array(
                    "RestartJob feature gate: per job index, how many times that Job was "
                    "restarted on its own (RestartJob or RestartJobAndIgnoreMaxRestarts).",
                    integer("Individual restarts of the Job with this index."),
                    maxItems=jobset_api.MAX_REPLICAS_RESTART_JOB,
                ),
                "jobRestartsCountTowardsMax": array(
                    "RestartJob feature gate: per job index, the individual restarts that count "
                    "towards failurePolicy.maxRestarts (RestartJob).",
                    integer("Counted individual restarts of the Job with this index."),
                    maxItems=jobset_api.MAX_REPLICAS_RESTART_JOB,
                ),
            },
            required=["name", "ready", "succeeded", "failed", "active", "suspended"],
        )
        return obj(
            "What the controller observed.",
            {
                "conditions": array(
                    "Conditions of the JobSet: Completed, Failed, Suspended, "
                    "StartupPolicyInProgress, StartupPolicyCompleted, and this controller's own.",
                    condition,
                    list_type="map",
                    **{"x-kubernetes-list-map-keys": ["type"]},
                ),
                "restarts": integer("How many times the JobSet restarted."),
                "restartsCountTowardsMax": integer(
                    "The restarts that count towards failurePolicy.maxRestarts."
                ),
                "terminalState": string(
                    "Completed or Failed once the JobSet has finished; empty before."
                ),
                "replicatedJobsStatus": array(
                    "Counts of child Jobs, per replicated job.",
                    replicated_job_status,
                    list_type="map",
                    **{"x-kubernetes-list-map-keys": ["name"]},
                ),
                "volumes": {
                    "type": "object",
                    "description": "State of the claims made from the volume claim templates.",
                    "x-kubernetes-preserve-unknown-fields": True,
                },
            },
        )

    # ------------------------------------------------------------ assembly

    def spec(self) -> Schema:
        vcp_update, vp_update = self.policy_update_rules()
        spec = fields.SPEC.schema(
            {
                **_list(fields.REPLICATED_JOBS, self.replicated_job()),
                fields.NETWORK.name: self.network(),
                fields.SUCCESS_POLICY.name: self.success_policy(),
                fields.FAILURE_POLICY.name: self.failure_policy(),
                fields.STARTUP_POLICY.name: self.startup_policy(),
                **_nodes(fields.SUSPEND),
                fields.COORDINATOR.name: self.coordinator(),
                fields.MANAGED_BY.name: self.managed_by(),
                **_nodes(fields.TTL_SECONDS_AFTER_FINISHED),
                fields.VOLUME_CLAIM_POLICIES.name: self.attach(
                    fields.VOLUME_CLAIM_POLICIES.schema(self.volume_claim_policy()), *vcp_update
                ),
                fields.VOLUME_POLICY.name: self.attach(self.volume_policy(), *vp_update),
            }
        )
        return self.attach(spec, *self.spec_rules())

    def openapi_schema(self) -> Schema:
        root = obj(
            "A JobSet: a set of Jobs that succeed, fail and restart as one unit, with managed "
            "persistent volumes.",
            {
                "apiVersion": string("The versioned schema of this object."),
                "kind": string("The kind of this object: JobSet."),
                # generateName is declared (unrestricted) only so that API servers before
                # 1.37 keep name's maxLength in CEL cost estimates: they replace a root metadata
                # lacking either field with unbounded strings, and the rules on metadata.name
                # then exceed the cost budget (docs/operations.md, "Supported Kubernetes
                # versions").
                "metadata": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "maxLength": bounds.MAX_OBJECT_NAME},
                        "generateName": {"type": "string"},
                    },
                },
                fields.SPEC.name: self.spec(),
                "status": self.status(),
            },
            required=["spec"],
        )
        return self.attach(root, *self.root_rules(), *self.elastic_terminal_rule())


PRINTER_COLUMNS: list[Schema] = [
    {
        "name": "TerminalState",
        "type": "string",
        "jsonPath": ".status.terminalState",
        "description": "Completed or Failed once the JobSet has finished",
    },
    {
        "name": "Restarts",
        "type": "string",
        "jsonPath": ".status.restarts",
        "description": "How many times the JobSet restarted",
    },
    {
        "name": "Completed",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Completed")].status',
        "description": "Status of the Completed condition",
    },
    {
        "name": "Suspended",
        "type": "string",
        "jsonPath": ".spec.suspend",
        "description": "Whether the JobSet is suspended",
    },
    {
        "name": "Age",
        "type": "date",
        "jsonPath": ".metadata.creationTimestamp",
        "description": "Time since the JobSet was created",
    },
]


def rules(
    job_template: Schema, claim: Schema, gates: FeatureGates = features.DEFAULT
) -> list[Rule]:
    """Every CEL rule of the CRD, in schema order."""
    return definition(job_template, claim, gates)[1]


def custom_resource_definition(
    job_template: Schema, claim: Schema, gates: FeatureGates = features.DEFAULT
) -> dict[str, Any]:
    """The JobSet CRD, given the inlined JobTemplateSpec and PersistentVolumeClaim schemas and
    the feature gates whose admission it implements (recorded in an annotation)."""
    return definition(job_template, claim, gates)[0]


def definition(
    job_template: Schema, claim: Schema, gates: FeatureGates = features.DEFAULT
) -> tuple[dict[str, Any], list[Rule]]:
    """The CRD and its rules (in schema order), from one build of the schema: the CRD's rules
    are these very records, with their predicates."""
    builder = Builder(job_template, claim, gates)
    root = builder.openapi_schema()
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME, "annotations": {features.CRD_ANNOTATION: gates.flag()}},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": KIND.lower(),
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": root},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": copy.deepcopy(PRINTER_COLUMNS),
                }
            ],
        },
    }
    return crd, builder.rules
