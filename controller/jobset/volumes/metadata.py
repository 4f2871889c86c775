"""A volume claim policy completed by the JobSet's volume policy annotations (pure).

The keys (``controller.api.volumekeys``: ``<template>.volumes.jobset.sigs.k8s.io/<field>``) set
fields of the policy that holds the template, as if the spec had them, before the policy is read:
the spec's records and cross-field rules then judge the result, so a key's value means exactly
what the field means. Precedence: **a key wins over the spec**. A key that sets a field the spec
also sets to another value (not the field's default, which a client that drops the field, or the
API server's defaulting, may have written) is an override, reported by the condition
``VolumePolicyOverridden`` (``status``) so that nobody is surprised by which one counts.

Refused here, naming the keys: two templates of one policy whose keys set one field to different
values, and a Job or Pod scope for ``spec.volumePolicy`` (always JobSet scope).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.api import fields, volumekeys
from controller.api.fields import ListField
from controller.api.volumekeys import Declared
from controller.jobset.model import InvalidJobSet
from controller.jobset.volumes.model import as_dict, as_list
from controller.runtime.store import Obj


@dataclass(frozen=True)
class Override:
    """A key that set a field the spec set to another value."""

    annotation: str
    field: str  # the spec's field, as messages name it
    spec_value: Any
    value: Any

    def __str__(self) -> str:
        return (
            f"{self.annotation}: {_shown(self.value)} overrides {self.field}: "
            f"{_shown(self.spec_value)}"
        )


def _shown(value: Any) -> str:
    if not isinstance(value, list):
        return str(value)
    return ",".join(str(as_dict(v).get("name", v) if isinstance(v, dict) else v) for v in value)


@dataclass(frozen=True)
class Overlaid:
    """A policy entry as the keys complete it."""

    raw: Any
    overrides: tuple[Override, ...] = ()
    applied: tuple[str, ...] = ()  # the keys that set a field of it

    def explain(self, err: InvalidJobSet) -> InvalidJobSet:
        """``err`` (the completed policy refused), saying which keys took part."""
        if not self.applied:
            return err
        templates = sorted({volumekeys.split(k)[0] for k in self.applied})
        keys = ", ".join(f"{t}{volumekeys.MARK}*" for t in templates)
        return InvalidJobSet(f"{err} (as completed by the annotations {keys})")


def _template_names(raw: Obj, request: bool) -> set[str]:
    templates = fields.VOLUME_POLICY_TEMPLATES if request else fields.POLICY_TEMPLATES
    names = (
        as_dict(as_dict(t).get("metadata")).get("name") for t in as_list(raw.get(templates.name))
    )
    return {n for n in names if isinstance(n, str)}


def _path(key: Declared, request: bool) -> tuple[str, ...]:
    """Where the key's field is in a policy of the spelling (``request``: ``spec.volumePolicy``,
    whose targets are ``replicatedJobs``)."""
    if request and key.key.record is fields.POLICY_TARGETS:
        return (fields.VOLUME_POLICY_TARGETS.name,)
    return key.key.path


def _spec_value(key: Declared, request: bool) -> Any:
    """The key's value as the policy of that spelling holds it."""
    if request and key.key.record is fields.POLICY_TARGETS:
        return [{fields.VOLUME_POLICY_TARGET_NAME.name: n} for n in key.value]
    return key.value


def _said(record: Any, value: Any) -> bool:
    """Whether the spec says something with ``value``: given, and not the field's default."""
    if value is None or value == [] or value == "":
        return False
    if isinstance(record, ListField):
        return True
    return bool(value != record.when_absent)


def _one_each(keys: Iterable[Declared], where: str) -> dict[str, Declared]:
    """The keys by field; two templates of one policy must not set a field differently."""
    chosen: dict[str, Declared] = {}
    for key in keys:
        other = chosen.setdefault(key.key.name, key)
        if other.value != key.value:
            raise InvalidJobSet(
                f"{other.where} and {key.where} set {key.key.name} of one volume claim policy "
                f"({where}) to different values: set it on one template of the policy, or to "
                "the same value"
            )
    return chosen


def overlay(
    raw: Any, where: str, declared: Iterable[Declared], refused: Mapping[str, str]
) -> Overlaid:
    """The policy entry ``raw`` (at ``where``) with the keys of its templates applied.

    ``refused``: a refused key's reason by template (``volumekeys.problems``): a template with one
    makes its whole policy unreadable (its claims are kept), since the policy meant is unknown."""
    if not isinstance(raw, dict):
        return Overlaid(raw)  # refused as it is by the policy's reading
    request = where == fields.VOLUME_POLICY.path
    names = _template_names(raw, request)
    spoilt = sorted(names & set(refused))
    if spoilt:
        raise InvalidJobSet(f"{where}: {refused[spoilt[0]]}")
    keys = _one_each((k for k in declared if k.template in names), where)
    if not keys:
        return Overlaid(raw)
    result = copy.deepcopy(raw)
    overrides = []
    for key in keys.values():
        if request and key.key.record is fields.VOLUME_SCOPE and key.value != "JobSet":
            raise InvalidJobSet(
                f"{key.where}: spec.volumePolicy is always JobSet scope; declare a template of "
                "Job or Pod scope in spec.volumeClaimPolicies"
            )
        *parents, leaf = _path(key, request)
        node: Any = result
        for name in parents:
            node = node.setdefault(name, {}) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            continue  # a parent that is not an object: the policy's reading refuses it
        before = node.get(leaf)
        if _said(key.key.record, before) and before != _spec_value(key, request):
            field = ".".join([where, *parents, leaf])
            overrides.append(Override(key.annotation, field, before, key.value))
        node[leaf] = _spec_value(key, request)
    return Overlaid(result, tuple(overrides), tuple(k.annotation for k in keys.values()))
