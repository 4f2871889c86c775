"""Volume policy fields declared in a JobSet's metadata: annotations that travel where the spec's
extensions do not.

Clients built on upstream JobSet's Go types drop the fields they do not know, and a CRD that
embeds upstream's schema prunes them: Kubeflow Trainer's runtimes lose ``scope``,
``snapshotPolicy``, ``restorePolicy``, ``whenCompleted``... and refuse ``whenDeleted: Snapshot``.
What they carry is the JobSet's labels and annotations (Trainer: the runtime's
``spec.template.metadata``, overridden key by key by a TrainJob's ``runtimePatches``). So every
field a volume claim policy has beyond its templates can also be written as an annotation:

    <template>.volumes.jobset.sigs.k8s.io/<field>: <value>

``<template>`` is a volume claim template's name (a DNS-1123 label, so the key's prefix is a DNS
subdomain), ``<field>`` the field's path in a ``volumeClaimPolicies`` entry
(``retentionPolicy.whenCompleted``, ``restorePolicy.source``...; ``targetReplicatedJobs`` as a
comma-separated list), ``<value>`` what the field holds. The key sets that field of the policy
holding the template. An empty value is the same as leaving the key out (a TrainJob can cancel
its runtime's key).

One contract: a key is a ``controller.api.fields`` record and its path; what a value must be is
that record's type, bounds and allowed values, checked by one rule (``RULE``) that both the
admission policy (CEL) and the controller (``RULE.check``, the same words) run; the cross-field
rules are the spec's, run on the policy the keys complete (``jobset.volumes.spec``).

Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from controller.api import fields, predicates, schema
from controller.api.fields import Field, ListField

DOMAIN: Final = "volumes.jobset.sigs.k8s.io"
# What every key of ours holds: the end of its prefix and the slash.
MARK: Final = f".{DOMAIN}/"
_POLICY_PREFIX = fields.VOLUME_CLAIM_POLICY.path + "."


@dataclass(frozen=True)
class Key:
    """One field a key may set: its record, and its path in a ``volumeClaimPolicies`` entry."""

    record: Field[Any] | ListField

    @property
    def name(self) -> str:
        """The key's name (after the slash): the field's path in a policy."""
        return self.record.path.removeprefix(_POLICY_PREFIX).removesuffix("[]")

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(self.name.split("."))

    @property
    def rule(self) -> str:
        """What a value must be, in the words of both checks."""
        record = self.record
        if isinstance(record, ListField):
            return (
                f"must be a comma-separated list of at most {record.max_items} replicated job "
                f"names of 1 to {record.item_max_length} characters"
            )
        if record.enum:
            return f"must be {_one_of(record.enum)}"
        if record.type is int:
            return f"must be an integer from {record.minimum} to {record.maximum}"
        return f"must be at most {record.max_length} characters"

    def holds(self, value: str) -> bool:
        """Whether ``value`` (not empty) is one the field admits (``cel_holds``, in Python)."""
        record = self.record
        if isinstance(record, ListField):
            names = [n.strip() for n in value.split(",")]
            limit = record.item_max_length or 0
            return len(names) <= (record.max_items or 0) and all(
                1 <= len(n) <= limit for n in names
            )
        if record.enum:
            return value in record.enum
        if record.type is int:
            if not (value.isascii() and value.isdigit() and len(value) <= _MAX_DIGITS):
                return False
            return (record.minimum or 0) <= int(value) <= (record.maximum or 0)
        return len(value) <= (record.max_length or 0)

    def cel_holds(self, v: str) -> str:
        """CEL: whether the string ``v`` (not empty) is one the field admits."""
        record = self.record
        if isinstance(record, ListField):
            return (
                f"size({v}.split(',')) <= {record.max_items} && {v}.split(',').all(n, "
                f"size(n.trim()) >= 1 && size(n.trim()) <= {record.item_max_length})"
            )
        if record.enum:
            return f"{v} in [{', '.join(_quote(e) for e in record.enum)}]"
        if record.type is int:
            return (
                f"{v}.matches('^[0-9]{{1,{_MAX_DIGITS}}}$') && int({v}) >= {record.minimum} && "
                f"int({v}) <= {record.maximum}"
            )
        return f"size({v}) <= {record.max_length}"

    def value(self, text: str) -> Any:
        """The field's value for ``text`` (which ``holds``), as the spec would hold it."""
        if isinstance(self.record, ListField):
            return [n.strip() for n in text.split(",")]
        if self.record.type is int:
            return int(text)
        return text


# An int32 has at most 10 digits; every bound of ours has fewer than 10.
_MAX_DIGITS = 9

KEYS: Final[tuple[Key, ...]] = tuple(
    Key(record)
    for record in (
        fields.VOLUME_SCOPE,
        fields.POLICY_TARGETS,
        fields.WHEN_DELETED,
        fields.WHEN_COMPLETED,
        fields.WHEN_FAILED,
        fields.WHEN_SCALED,
        fields.RETAIN_WHEN_SUSPENDED,
        fields.CREATE_WHEN_SUSPENDED,
        fields.SNAPSHOT_CLASS_NAME,
        fields.GROUP_SNAPSHOT_CLASS_NAME,
        fields.SNAPSHOT_HISTORY_LIMIT,
        fields.RESTORE_SOURCE,
        fields.RESTORE_SNAPSHOT_NAME,
        fields.RESTORE_WHEN_MISSING,
        fields.RESTORE_FROM_JOBSET,
    )
)
BY_NAME: Final[Mapping[str, Key]] = {k.name: k for k in KEYS}
UNKNOWN_FIELD: Final = f"is not a volume policy field (one of {', '.join(BY_NAME)})"
UNKNOWN_TEMPLATE: Final = (
    "names no volume claim template of spec.volumeClaimPolicies or spec.volumePolicy"
)
MESSAGE: Final = "invalid volume policy annotation"


def _one_of(values: Iterable[str]) -> str:
    listed = list(values)
    return listed[0] if len(listed) == 1 else f"{', '.join(listed[:-1])} or {listed[-1]}"


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def ours(key: str) -> bool:
    """Whether an annotation key is one of this module's (its prefix ends with ``DOMAIN``)."""
    return MARK in key


def split(key: str) -> tuple[str, str]:
    """(template, field name) of one of our keys."""
    prefix, _, name = key.partition("/")
    return prefix.removesuffix(MARK.rstrip("/")), name


def template_names(obj: Mapping[str, Any]) -> list[str]:
    """The names of the volume claim templates of both spellings, as ``CEL_TEMPLATES`` reads them
    (a template without a name counts as '')."""
    spec = _dict(obj.get("spec"))
    found: list[Any] = []
    for policy in _list(spec.get(fields.VOLUME_CLAIM_POLICIES.name)):
        found += _list(_dict(policy).get(fields.POLICY_TEMPLATES.name))
    request = _dict(spec.get(fields.VOLUME_POLICY.name))
    found += _list(request.get(fields.VOLUME_POLICY_TEMPLATES.name))
    names = (_dict(_dict(t).get("metadata")).get("name", "") for t in found)
    return [n if isinstance(n, str) else "" for n in names]


def why(key: str, value: str, templates: Iterable[str]) -> str:
    """Why one of our keys, with ``value``, is refused ('' when it is not): ``CEL_WHY``."""
    template, name = split(key)
    if template not in templates:
        return f"{key}: {UNKNOWN_TEMPLATE}"
    found = BY_NAME.get(name)
    if found is None:
        return f"{key}: {UNKNOWN_FIELD}"
    if value == "" or found.holds(value):
        return ""
    return f"{key}: {found.rule}, got '{value}'"


def problems(obj: Mapping[str, Any]) -> list[str]:
    """Every refused key of ``obj``'s annotations, each as ``why`` words it, by key."""
    annotations = _dict(_dict(obj.get("metadata")).get("annotations"))
    templates = set(template_names(obj))
    found = (
        why(key, value if isinstance(value, str) else "", templates)
        for key, value in sorted(annotations.items())
        if isinstance(key, str) and ours(key)
    )
    return [w for w in found if w]


def detail(refused: list[str]) -> str:
    """The rule's detail: the first refused key's reason, and how many more there are."""
    more = len(refused) - 1
    return refused[0] + (f" (and {more} more)" if more > 0 else "")


def check(obj: Any) -> predicates.Verdict:
    """``RULE``'s predicate, on the whole object (the rule sits on the root)."""
    refused = problems(obj if isinstance(obj, Mapping) else {})
    return predicates.Broken(detail(refused)) if refused else None


def message(obj: Mapping[str, Any]) -> str | None:
    """The admission policy's message for ``obj``'s keys (None when it admits them)."""
    verdict = check(obj)
    if verdict is None:
        return None
    return f"{WHERE}: {MESSAGE}: {verdict.detail}"


# ------------------------------------------------------------------------------------- CEL

WHERE: Final = "metadata.annotations"
_ANNOTATIONS = "self.metadata.annotations"


def _template_names_cel() -> str:
    """CEL: the template names of both spellings (``template_names``)."""
    name = "has(t.metadata) && has(t.metadata.name) ? t.metadata.name : ''"
    upstream = (
        "has(self.spec) && has(self.spec.volumeClaimPolicies) ? "
        "self.spec.volumeClaimPolicies.map(p, has(p.templates) ? "
        f"p.templates.map(t, {name}) : []).flatten() : []"
    )
    request = (
        "has(self.spec) && has(self.spec.volumePolicy) && "
        f"has(self.spec.volumePolicy.volumeClaimTemplates) ? "
        f"self.spec.volumePolicy.volumeClaimTemplates.map(t, {name}) : []"
    )
    return f"({upstream}) + ({request})"


def _why_cel(k: str, ts: str) -> str:
    """CEL: ``why`` of the key ``k`` (``ts``: the template names)."""
    v = f"{_ANNOTATIONS}[{k}]"
    template = f"{k}.substring(0, {k}.indexOf({_quote(MARK)}))"
    name = f"{k}.substring({k}.indexOf('/') + 1)"
    branches = [f"!({template} in {ts}) ? {k} + {_quote(': ' + UNKNOWN_TEMPLATE)}"]
    for key in KEYS:
        refused = f"{k} + {_quote(f': {key.rule}, got ' + chr(39))} + {v} + {_quote(chr(39))}"
        branches.append(
            f"{name} == {_quote(key.name)} ? ({v} == '' || {key.cel_holds(v)} ? '' : {refused})"
        )
    return " : ".join([*branches, f"{k} + {_quote(': ' + UNKNOWN_FIELD)}"])


def _admitted_cel(k: str, ts: str) -> str:
    """CEL: whether the key ``k`` is admitted (``why`` is ''), without building the message:
    the rule and the list of refused keys need only this, the message's one key the reason
    (a third of the policy's CEL, which the API server type-checks on every apply)."""
    v = f"{_ANNOTATIONS}[{k}]"
    template = f"{k}.substring(0, {k}.indexOf({_quote(MARK)}))"
    name = f"{k}.substring({k}.indexOf('/') + 1)"
    branches = [f"{name} == {_quote(key.name)} ? ({v} == '' || {key.cel_holds(v)})" for key in KEYS]
    return f"({template} in {ts}) && ({' : '.join([*branches, 'false'])})"


def _refused_cel() -> str:
    """CEL: the refused keys, as a list (bound to ``ts``, the template names)."""
    return f"{_ANNOTATIONS}.filter(k, k.contains({_quote(MARK)}) && !({_admitted_cel('k', 'ts')}))"


def rule() -> str:
    """CEL of ``RULE`` (on the root, ``self`` the object)."""
    return f"!has({_ANNOTATIONS}) || [{_template_names_cel()}].all(ts, size({_refused_cel()}) == 0)"


def detail_cel() -> str:
    """CEL of ``RULE``'s detail (``detail``): the smallest refused key's reason, and how many
    more there are. The smallest, so that the message is the controller's whatever order the
    API server iterates the map in."""
    more = "size(bad) > 1 ? ' (and ' + string(size(bad) - 1) + ' more)' : ''"
    first = f"[bad.min()].map(k, {_why_cel('k', 'ts')})[0]"
    return (
        f"[{_template_names_cel()}].map(ts, [{_refused_cel()}].map(bad, "
        f"size(bad) == 0 ? '' : {first} + ({more}))[0])[0]"
    )


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# ------------------------------------------------------------------------- declared values


@dataclass(frozen=True)
class Declared:
    """One key that holds a value the field admits (not empty)."""

    annotation: str  # the whole key
    template: str
    key: Key
    value: Any  # as the spec would hold it

    @property
    def where(self) -> str:
        return f"{WHERE}[{self.annotation}]"


def declared(annotations: Mapping[str, Any]) -> Iterator[Declared]:
    """The keys of ``annotations`` that set a field to a value it admits, by key; keys that name
    no field, or hold a value it refuses, are ``problems``' (left out here)."""
    for annotation, text in sorted(annotations.items()):
        if not (isinstance(annotation, str) and ours(annotation) and isinstance(text, str)):
            continue
        template, name = split(annotation)
        key = BY_NAME.get(name)
        if key is not None and text != "" and key.holds(text):
            yield Declared(annotation, template, key, key.value(text))


# ----------------------------------------------------------------------- immutable fields

# The fields a running JobSet's claims depend on (their names, who mounts them, what happens to
# them): immutable in the spec (``volume-claim-policies-immutable``), so as keys too.
IMMUTABLE: Final[tuple[str, ...]] = tuple(
    k.name for k in KEYS if k.path[0] in ("scope", "targetReplicatedJobs", "retentionPolicy")
)
IMMUTABLE_MESSAGE: Final = (
    "volume policy annotations of scope, targetReplicatedJobs and retentionPolicy cannot be "
    "added, changed or removed once the JobSet exists, as the spec's fields cannot"
)


def _annotations_of(obj: Any) -> dict[str, Any]:
    return _dict(_dict(_dict(obj).get("metadata")).get("annotations"))


def changed_immutable(new: Any, old: Any) -> list[str]:
    """The immutable keys whose value differs between ``old`` and ``new`` ('' for absent)."""
    after, before = _annotations_of(new), _annotations_of(old)
    return sorted(
        k
        for k in {*after, *before}
        if isinstance(k, str)
        and ours(k)
        and split(k)[1] in IMMUTABLE
        and after.get(k, "") != before.get(k, "")
    )


def check_update(new: Any, old: Any) -> predicates.Verdict:
    """``IMMUTABLE_RULE``'s predicate (a transition rule on the root)."""
    changed = changed_immutable(new, old)
    return predicates.Broken(changed[0]) if changed else None


def _changed_cel(this: str, other: str) -> str:
    """CEL: the immutable keys of ``this`` whose value in ``other`` differs ('' for absent)."""
    names = f"[{', '.join(_quote(n) for n in IMMUTABLE)}]"
    there = f"{other}.metadata.annotations"
    other_value = f"(has({there}) && k in {there} ? {there}[k] : '')"
    return (
        f"(has({this}.metadata.annotations) ? {this}.metadata.annotations.filter(k, "
        f"k.contains({_quote(MARK)}) && k.substring(k.indexOf('/') + 1) in {names} && "
        f"{this}.metadata.annotations[k] != {other_value}) : [])"
    )


def immutable_rule() -> str:
    return (
        f"size({_changed_cel('self', 'oldSelf')}) == 0 && "
        f"size({_changed_cel('oldSelf', 'self')}) == 0"
    )


def immutable_detail_cel() -> str:
    both = f"{_changed_cel('self', 'oldSelf')} + {_changed_cel('oldSelf', 'self')}"
    return f"[{both}].map(c, size(c) == 0 ? '' : c.min())[0]"


# -------------------------------------------------------------------------------- the rules


def rules() -> tuple[schema.Rule, ...]:
    """The two rules on the keys, which the admission policy runs (a CRD's rules cannot see the
    root's metadata) and the controller runs by their predicates."""
    return (
        schema.Rule(
            id="volume-annotations",
            where="the JobSet",
            rule=rule(),
            message=MESSAGE,
            detail=detail_cel(),
            field_path=f".{WHERE}",
            check=check,
            protects="volume policy fields declared in metadata (Kubeflow Trainer's runtimes): "
            "a key naming no template or field, or a value the field does not admit",
        ),
        schema.Rule(
            id="volume-annotations-immutable",
            where="the JobSet",
            rule=immutable_rule(),
            message=IMMUTABLE_MESSAGE,
            detail=immutable_detail_cel(),
            field_path=f".{WHERE}",
            on_update=True,
            check_update=check_update,
            protects="claims already made and mounted, as volume-claim-policies-immutable",
        ),
    )
