"""What the API server does with a JobSet on create, offline: defaults, schema, rules, policy.

:class:`Contract` is built from an installed CRD (``manifests/crd/``): its structural schema and,
rebuilt from the same definition (``schema.Builder``), every rule with its Python predicate, and
which of them the ValidatingAdmissionPolicy runs (``specpolicy.policy_sites``). ``Contract.refusal``
then answers as ``kubectl apply`` would, in the API server's words:

1. the schema's defaults are applied (as the API server does before validating);
2. the structural schema: types, enums, bounds, required fields, keyed lists' duplicates, each
   a field error formatted as Kubernetes formats it (``spec.x: Too long: may not be more than 63
   bytes``);
3. the CRD's CEL rules, by their predicates, unless step 2 found an error that stops the API
   server from running them (it says so, and so does this);
4. only when the CRD admits the object: the policy's rules, one message listing each broken one.

An update (``old``: the stored object) runs the policy only when the spec changed (its match
condition), the transition rules on nodes both objects have, and forgives a rule the stored
object already broke (``specpolicy.expression``). The CRD's ratcheting (an error on a field the
update did not change is forgiven) is not modelled: the stored object is taken to be valid.

The controller's own contract (``packaged``). The controller's parser (``model.parse``) runs the
same checks, but its image carries this package and not ``manifests/``: the two Kubernetes types
the CRD embeds (the Job template and the claim, ``embedded_types``) are therefore shipped beside
this module as ``embedded-types.json`` (about 70 KB), written by ``make crd`` from the CRD it
generates and compared with the committed CRD by a unit test (``test_validation``), so it
cannot fall out of date unnoticed. Everything else (the JobSet's own fields, bounds and rules)
is ``schema.py`` itself, rebuilt for the controller's feature gates, as ``from_crd`` rebuilds it
for a CRD's: one definition, whichever way the contract is made. The embedded types are the
only part that cannot be derived offline (they come from the API server's OpenAPI), and
deriving the rule sites without them would leave the Job template's schema (types, enums,
required fields, bounds) unchecked. ``packaged`` builds it once per process and set of gates
(20 to 30 ms on the 2-core machine), on first use: a ``functools.cache`` of a pure function of
the gates, the only process-wide state.
"""

from __future__ import annotations

import copy
import functools
import importlib.resources
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller import features
from controller.api import predicates, schema, specpolicy, volumekeys
from controller.api.fields import Schema
from controller.features import FeatureGates

# Beside this module, written by ``make crd`` (``embedded_types_json``); see the docstring.
EMBEDDED_TYPES_FILE = "embedded-types.json"
KIND_QUALIFIED = f"{schema.KIND}.{schema.GROUP}"
SKIPPED = (
    "some validation rules were not checked because the object was invalid; correct the "
    "existing errors to complete validation"
)
_OMIT = object()
# Field errors after which the API server does not run the CEL rules (apiextensions-apiserver's
# hasBlockingErr).
_BLOCKING = frozenset({"Unsupported value", "Required value", "Too long", "Too many", "Type"})
_DNS_1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "
    "'.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used "
    "for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def _go_value(value: Any) -> str:
    """A bad value as Kubernetes' field errors print it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True)
class FieldError:
    """One of the API server's field errors (k8s.io/apimachinery's field.Error)."""

    kind: (
        str  # "Invalid value", "Required value", "Unsupported value", ...; "Type" for a type error
    )
    path: str
    value: Any = _OMIT
    detail: str = ""

    @property
    def blocking(self) -> bool:
        return self.kind in _BLOCKING

    def __str__(self) -> str:
        kind = "Invalid value" if self.kind == "Type" else self.kind
        body = kind if self.value is _OMIT else f"{kind}: {_go_value(self.value)}"
        return f"{self.path}: {body}" + (f": {self.detail}" if self.detail else "")


@dataclass(frozen=True)
class PolicyRule:
    """A rule the admission policy runs: where it sits (``specpolicy.Site``) and the rule."""

    site: specpolicy.Site
    rule: schema.Rule


@dataclass(frozen=True)
class Refusal:
    """What ``kubectl apply`` would print after the server's reason, and each error."""

    message: str
    errors: tuple[str, ...]


class ContractMismatch(ValueError):
    """The CRD is not the one this version's ``schema.py`` makes (another release's)."""


@dataclass(frozen=True)
class Contract:
    """The installed CRD's schema and rules (see the module docstring)."""

    root: Schema  # the full openAPIV3Schema, every rule in place
    rules: Mapping[tuple[str, str], schema.Rule]  # by (CEL, message) as the schema has them
    policy: tuple[PolicyRule, ...]
    gates: features.FeatureGates = field(default=features.DEFAULT)
    # The ids of the rules the policy runs instead of the CRD (each is one or the other).
    policy_ids: frozenset[str] = frozenset()

    @classmethod
    def from_crd(cls, crd: Mapping[str, Any]) -> Contract:
        """The contract of an installed CRD (as ``make crd`` writes it): the Kubernetes types it
        embeds are read from it, the rules rebuilt from ``schema.py`` for its feature gates."""
        annotations = (crd.get("metadata") or {}).get("annotations") or {}
        gates = features.parse(str(annotations.get(features.CRD_ANNOTATION, "")))
        job_template, claim = embedded_types(crd)
        full, rules = schema.definition(job_template, claim, gates)
        installed, sites = specpolicy.policy_sites(full)
        if _schema_of(installed) != _schema_of(crd):
            raise ContractMismatch(
                "its schema is not the one this version of the controller makes "
                "(controller/api/schema.py): a CRD of another release?"
            )
        return cls._made(full, rules, sites, gates)

    @classmethod
    def build(cls, job_template: Schema, claim: Schema, gates: FeatureGates) -> Contract:
        """The contract of the CRD ``make crd`` would write for ``gates``, given the Kubernetes
        types it embeds (``embedded_types``; they are not changed)."""
        full, rules = schema.definition(copy.deepcopy(job_template), copy.deepcopy(claim), gates)
        _, sites = specpolicy.policy_sites(full)
        return cls._made(full, rules, sites, gates)

    @classmethod
    def _made(
        cls,
        full: Mapping[str, Any],
        rules: Sequence[schema.Rule],
        sites: Sequence[specpolicy.Site],
        gates: FeatureGates,
    ) -> Contract:
        extra = [schema.QUANTITY_RULE, *volumekeys.rules()]
        by_text = {(r.cel, r.message): r for r in [*rules, *extra]}
        policy = tuple(PolicyRule(s, by_text[(s.rule["rule"], s.rule["message"])]) for s in sites)
        root = full["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        return cls(
            root=root,
            rules=by_text,
            policy=policy,
            gates=gates,
            policy_ids=frozenset(p.rule.id for p in policy),
        )

    def defaulted(self, obj: Mapping[str, Any]) -> dict[str, Any]:
        """``obj`` with the schema's defaults, as the API server stores it."""
        out = copy.deepcopy(dict(obj))
        _default(out, self.root)
        return out

    def errors(
        self, obj: Mapping[str, Any], old: Mapping[str, Any] | None = None
    ) -> tuple[list[FieldError], list[str]]:
        """The CRD's field errors of a defaulted object, and (when there are none) the messages
        of the policy's broken rules; ``old``: the stored object, for an update."""
        found = list(_metadata_errors(obj))
        found += list(_schema_errors(obj, self.root, ""))
        if any(e.blocking for e in found):
            return [*found, FieldError("Invalid value", "<nil>", None, SKIPPED)], []
        found += list(self._rule_errors(obj, self.root, ""))
        if found:
            return found, []
        if (
            old is not None
            and obj.get("spec") == old.get("spec")
            and _annotations(obj) == (_annotations(old))
        ):
            return [], []  # the policy's match condition: neither spec nor annotations changed
        return [], list(self._policy_messages(obj, old))

    def refusal(
        self, obj: Mapping[str, Any], old: Mapping[str, Any] | None = None
    ) -> Refusal | None:
        """None when the API server would admit the JobSet (created, or replacing ``old``),
        else its message."""
        obj = self.defaulted(obj)
        name = str((obj.get("metadata") or {}).get("name", ""))
        crd_errors, policy_messages = self.errors(obj, old)
        if crd_errors:
            texts = list(dict.fromkeys(str(e) for e in crd_errors))
            joined = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
            return Refusal(f'{KIND_QUALIFIED} "{name}" is invalid: {joined}', tuple(texts))
        if policy_messages:
            binding = specpolicy.BINDING_NAME
            return Refusal(
                f'{schema.CRD_NAME} "{name}" is forbidden: ValidatingAdmissionPolicy '
                f"'{specpolicy.POLICY_NAME}' with binding '{binding}' denied request: "
                # The API server trims the message (an empty last value leaves "...: ").
                + "; ".join(policy_messages).rstrip(),
                tuple(policy_messages),
            )
        return None

    # ------------------------------------------------------------ rules

    def _rule_errors(self, value: Any, node: Schema, path: str) -> Iterator[FieldError]:
        """The CRD's CEL rules, by their predicates, in schema order, on every present node."""
        for rendered in node.get("x-kubernetes-validations", []):
            rule = self.rules[(rendered["rule"], rendered["message"])]
            if rule.on_update or rule.id in self.policy_ids:
                continue
            yield from _rule_error(rule, value, node, path)
        if isinstance(value, Mapping):
            for key, child in (node.get("properties") or {}).items():
                if key in value:
                    yield from self._rule_errors(value[key], child, _child(path, key))
            extra = node.get("additionalProperties")
            if isinstance(extra, dict):
                for key, item in value.items():
                    yield from self._rule_errors(item, extra, f"{path}[{key}]")
        elif isinstance(value, list) and "items" in node:
            for index, item in enumerate(value):
                yield from self._rule_errors(item, node["items"], f"{path}[{index}]")

    def _policy_messages(
        self, obj: Mapping[str, Any], old: Mapping[str, Any] | None
    ) -> Iterator[str]:
        for entry in self.policy:
            node, before = _node(obj, entry.site.path), _node(old, entry.site.path)
            if node is None:
                continue
            if entry.rule.on_update:
                if before is None:
                    continue  # a create, or the stored object lacks the node
                verdict = _check_update(entry.rule, node, before)
            else:
                verdict = _check(entry.rule, node)
                if (
                    verdict is not None
                    and before is not None
                    and _check(entry.rule, before) is not None
                ):
                    continue  # broken before this update already: forgiven
            if verdict is not None:
                where = entry.site.where
                prefix = f"{where}: " if where else ""
                yield prefix + _message(entry.rule, verdict)


def _annotations(obj: Mapping[str, Any]) -> Any:
    return (obj.get("metadata") or {}).get("annotations")


@functools.cache
def packaged(gates: FeatureGates) -> Contract:
    """The contract of this version's CRD for ``gates`` (the controller's ``--feature-gates``),
    from the embedded types this package carries: built on first use, once per process and set
    of gates (a pure function of them, hence the cache)."""
    text = importlib.resources.files("controller.api").joinpath(EMBEDDED_TYPES_FILE).read_text()
    found = json.loads(text)
    return Contract.build(found["jobTemplate"], found["claim"], gates)


def embedded_types_json(crd: Mapping[str, Any]) -> str:
    """The text of ``EMBEDDED_TYPES_FILE`` for a CRD ``make crd`` writes: its embedded types as
    compact JSON, one key or item a line (so that a change shows as a readable diff)."""
    job_template, claim = embedded_types(crd)
    found = {"jobTemplate": job_template, "claim": claim}
    return json.dumps(found, sort_keys=True, indent=0, separators=(",", ":")) + "\n"


def _schema_of(crd: Mapping[str, Any]) -> Any:
    return [v.get("schema") for v in crd["spec"]["versions"]]


def embedded_types(crd: Mapping[str, Any]) -> tuple[Schema, Schema]:
    """The Job template and claim schemas an installed CRD embeds, without the rules put on
    them (``schema.Builder`` puts them back)."""
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = root["properties"]["spec"]["properties"]
    job_template = copy.deepcopy(spec["replicatedJobs"]["items"]["properties"]["template"])
    claim = copy.deepcopy(spec["volumeClaimPolicies"]["items"]["properties"]["templates"]["items"])
    _strip_rules(job_template)
    _strip_rules(claim)
    return job_template, claim


def _strip_rules(node: Any) -> None:
    if isinstance(node, dict):
        node.pop("x-kubernetes-validations", None)
        for child in node.values():
            _strip_rules(child)
    elif isinstance(node, list):
        for child in node:
            _strip_rules(child)


def _node(obj: Mapping[str, Any] | None, path: tuple[str, ...]) -> Any:
    node: Any = obj
    for key in path:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node


def _check_update(rule: schema.Rule, value: Any, old: Any) -> predicates.Broken | None:
    if rule.check_update is None:
        raise AssertionError(f"transition rule {rule.id} has no Python predicate")
    return rule.check_update(value, old)


def _check(rule: schema.Rule, value: Any) -> predicates.Broken | None:
    if rule.check is None:
        raise AssertionError(f"rule {rule.id} has no Python predicate")
    return rule.check(value)


def _message(rule: schema.Rule, verdict: predicates.Broken) -> str:
    if rule.detail and verdict.detail is not None:
        return f"{rule.message}: {verdict.detail}"
    return rule.message


def _rule_error(rule: schema.Rule, value: Any, node: Schema, path: str) -> Iterator[FieldError]:
    verdict = _check(rule, value)
    if verdict is None:
        return
    where = path
    for key in filter(None, (rule.field_path or "").split(".")):
        where = _child(where, key)
    message = _message(rule, verdict)
    if rule.reason == "FieldValueRequired":
        yield FieldError("Required value", where, _OMIT, message)
    elif rule.reason == "FieldValueForbidden":
        yield FieldError("Forbidden", where, _OMIT, message)
    else:
        scalar = node.get("type") not in ("object", "array")
        yield FieldError("Invalid value", where, value if scalar else _OMIT, message)


# ---------------------------------------------------------------- defaults and the schema


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _default(value: Any, node: Schema) -> None:
    """The API server's structural defaulting: a null field that is not nullable and has no
    default is dropped (apiextensions' PruneNonNullableNullsWithoutDefaults: ``metadata:`` left
    empty in YAML is admitted as if it were left out), a property's default goes where it is
    absent (or null), then the same below."""
    if isinstance(value, dict):
        properties = node.get("properties") or {}
        extra = node.get("additionalProperties")
        for key in [k for k, v in value.items() if v is None]:
            child = properties.get(key, extra if key not in properties else None)
            if isinstance(child, dict) and "default" not in child and not child.get("nullable"):
                del value[key]
        for key, child in properties.items():
            if "default" in child and value.get(key) is None:
                value[key] = copy.deepcopy(child["default"])
            if key in value:
                _default(value[key], child)
        if isinstance(extra, dict):
            for key, item in value.items():
                if key not in properties:
                    _default(item, extra)
    elif isinstance(value, list) and "items" in node:
        for item in value:
            _default(item, node["items"])


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    for name in ("boolean", "string", "object", "array", "integer", "number"):
        if isinstance(value, _TYPES[name]) and not (name == "integer" and isinstance(value, bool)):
            return name
    return type(value).__name__


def _has_type(value: Any, wanted: str) -> bool:
    if isinstance(value, bool):
        return wanted == "boolean"
    if wanted == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _TYPES[wanted])


def _schema_errors(value: Any, node: Schema, path: str) -> Iterator[FieldError]:
    """What the structural schema refuses, as kube-openapi's validator reports it."""
    if node.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))):
            actual = _type_name(value)
            yield FieldError(
                "Type", path, actual, f'{path} in body must be of type integer,string: "{actual}"'
            )
            return
    elif "type" in node and not _has_type(value, node["type"]):
        # The value printed is the type's name, as the API server prints it.
        actual = _type_name(value)
        yield FieldError(
            "Type", path, actual, f'{path} in body must be of type {node["type"]}: "{actual}"'
        )
        return
    if "enum" in node and value not in node["enum"]:
        supported = ", ".join(json.dumps(v) for v in node["enum"])
        yield FieldError("Unsupported value", path, value, f"supported values: {supported}")
    if isinstance(value, str):
        yield from _string_errors(value, node, path)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        if node.get("format") == "int32" and not -(2**31) <= value < 2**31:
            yield FieldError(
                "Invalid value",
                "<nil>",
                "",
                f"Checked value must be of type integer with format int32 in {path}",
            )
        if "minimum" in node and value < node["minimum"]:
            yield FieldError(
                "Invalid value",
                path,
                value,
                f"{path} in body should be greater than or equal to {node['minimum']}",
            )
        if "maximum" in node and value > node["maximum"]:
            yield FieldError(
                "Invalid value",
                path,
                value,
                f"{path} in body should be less than or equal to {node['maximum']}",
            )
    elif isinstance(value, list):
        yield from _list_errors(value, node, path)
    elif isinstance(value, dict):
        yield from _object_errors(value, node, path)


def _string_errors(value: str, node: Schema, path: str) -> Iterator[FieldError]:
    if "maxLength" in node and len(value) > node["maxLength"]:
        unit = "byte" if node["maxLength"] == 1 else "bytes"
        yield FieldError(
            "Too long", path, _OMIT, f"may not be more than {node['maxLength']} {unit}"
        )
    if "minLength" in node and len(value) < node["minLength"]:
        yield FieldError(
            "Invalid value",
            path,
            value,
            f"{path} in body should be at least {node['minLength']} chars long",
        )
    if "pattern" in node and not predicates.matches(node["pattern"], value):
        yield FieldError(
            "Invalid value", path, value, f"{path} in body should match '{node['pattern']}'"
        )


def _list_errors(value: list[Any], node: Schema, path: str) -> Iterator[FieldError]:
    if "maxItems" in node and len(value) > node["maxItems"]:
        yield FieldError("Too many", path, len(value), _at_most(node["maxItems"]))
    if "minItems" in node and len(value) < node["minItems"]:
        yield FieldError(
            "Invalid value",
            path,
            len(value),
            f"{path} in body should have at least {node['minItems']} items",
        )
    items = node.get("items")
    if isinstance(items, dict):
        for index, item in enumerate(value):
            yield from _schema_errors(item, items, f"{path}[{index}]")
    yield from _duplicates(value, node, path)


def _at_most(limit: int) -> str:
    return f"must have at most {limit} {'item' if limit == 1 else 'items'}"


def _duplicates(value: Sequence[Any], node: Schema, path: str) -> Iterator[FieldError]:
    """``x-kubernetes-list-type`` set and map: a repeated item, or a repeated key."""
    list_type = node.get("x-kubernetes-list-type")
    seen: list[Any] = []
    for index, item in enumerate(value):
        if list_type == "set":
            key: Any = item
        elif list_type == "map" and isinstance(item, dict):
            key = {k: item[k] for k in node.get("x-kubernetes-list-map-keys", []) if k in item}
        else:
            return
        if key in seen:
            yield FieldError("Duplicate value", f"{path}[{index}]", key)
        else:
            seen.append(key)


def _object_errors(value: dict[str, Any], node: Schema, path: str) -> Iterator[FieldError]:
    if "maxProperties" in node and len(value) > node["maxProperties"]:
        yield FieldError("Too many", path, len(value), _at_most(node["maxProperties"]))
    for key in node.get("required", []):
        if key not in value:
            yield FieldError("Required value", _child(path, key))
    properties = node.get("properties") or {}
    for key, child in properties.items():
        if key in value:
            yield from _schema_errors(value[key], child, _child(path, key))
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        for key, item in value.items():
            if key not in properties:
                yield from _schema_errors(item, extra, _child(path, key))


def _metadata_errors(obj: Mapping[str, Any]) -> Iterator[FieldError]:
    """What the API server checks of any object's metadata on create: a name, a DNS-1123
    subdomain (for a JobSet, a DNS-1035 label is checked by the rules)."""
    name = (obj.get("metadata") or {}).get("name")
    if not name:
        yield FieldError(
            "Required value", "metadata.name", _OMIT, "name or generateName is required"
        )
    elif not isinstance(name, str) or not predicates.is_dns1123_subdomain(name):
        yield FieldError("Invalid value", "metadata.name", name, _DNS_1123_SUBDOMAIN_MESSAGE)
