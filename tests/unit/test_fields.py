"""A JobSet field is defined once (``controller/api/fields.py``): its node in the CRD, its row in
docs/api.md, the contract's check and the parser's reading all come from that one record, so a
changed bound, allowed value or default changes every one of them."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml

from controller.api import fielddocs, fields, predicates, schema, specpolicy
from controller.api.fields import Field, FieldInvalid
from controller.api.validation import Contract, embedded_types
from controller.jobset.model import InvalidJobSet, JobSet, parse
from controller.jobset.volumes.spec import policies
from tests.integration.test_crd import base
from tests.support.crd import CRD_FILE, REPO

Schema = dict[str, Any]
DOCS = REPO / "docs" / "api.md"
# Where the retention, creation, snapshot and restore policies sit (both spellings of a volume
# policy).
POLICY_SITES = ("spec.volumeClaimPolicies[]", "spec.volumePolicy")
POLICY_OBJECTS = ("retentionPolicy.", "creationPolicy.", "snapshotPolicy.", "restorePolicy.")
# The Kubernetes types the JobSet embeds: their fields are Kubernetes', not ours.
EMBEDDED = (
    "spec.replicatedJobs[].template",
    "spec.volumeClaimPolicies[].templates[]",
    "spec.volumePolicy.volumeClaimTemplates[]",
)


def _installed() -> Schema:
    loaded: Schema = yaml.load(CRD_FILE.read_text(), Loader=yaml.CSafeLoader)
    return loaded


def _root(crd: Schema) -> Schema:
    root: Schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return root


def _built() -> Schema:
    """The CRD as ``make crd`` builds it now (from the installed one's embedded types)."""
    return schema.custom_resource_definition(*embedded_types(_installed()))


def _paths(declared: Field[Any]) -> list[str]:
    if declared.path.startswith(POLICY_OBJECTS):
        return [f"{site}.{declared.path}" for site in POLICY_SITES]
    return [declared.path]


def _without_rules(node: Mapping[str, Any]) -> Schema:
    return {k: v for k, v in node.items() if k != "x-kubernetes-validations"}


def test_every_field_is_its_node_in_the_installed_crd() -> None:
    root = _root(_installed())
    for declared in fields.ALL:
        for path in _paths(declared):
            node = fielddocs.node_at(root, path)
            assert _without_rules(node) == declared.schema(), path


def _scalars(node: Mapping[str, Any], path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if path in EMBEDDED:
        return
    if node.get("type") in ("string", "integer", "boolean"):
        yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from _scalars(child, f"{path}.{name}" if path else name)
    if isinstance(node.get("items"), dict):
        yield from _scalars(node["items"], f"{path}[]")


def test_every_bounded_or_defaulted_field_of_the_spec_is_declared_once() -> None:
    """A scalar of the JobSet's own spec with a bound, allowed values or a default is a
    ``Field``: the parser cannot read it with constants of its own."""
    declared = {path for f in fields.ALL for path in _paths(f)}
    spec = fielddocs.node_at(_root(_installed()), "spec")
    constrained = [
        path
        for path, node in _scalars(spec, "spec")
        if {"enum", "minimum", "maximum", "default"} & node.keys()
    ]
    assert len(constrained) >= 20
    assert [p for p in constrained if p not in declared] == []


@pytest.mark.parametrize(
    ("declared", "parent"),
    [(fields.SUCCESS_OPERATOR, "spec.successPolicy"), (fields.STARTUP_ORDER, "spec.startupPolicy")],
)
def test_a_field_implied_by_its_objects_default_is_that_default(
    declared: Field[str], parent: str
) -> None:
    node = fielddocs.node_at(_root(_installed()), parent)
    assert node["default"] == {declared.name: declared.when_absent}


BOOL = Field("spec.x", bool, "A switch.", default=True)
COUNT = Field("spec.n", int, "A count.", minimum=0, maximum=5)
CHOICE = Field("spec.c", str, "A choice.", implied="A", enum=("A", "B", "C"))
NAME = Field("spec.s", str, "A name.", max_length=3)


@pytest.mark.parametrize(
    ("declared", "value", "read"),
    [
        (BOOL, None, True),
        (BOOL, False, False),
        (COUNT, None, None),
        (COUNT, 5, 5),
        (COUNT, 0, 0),
        (CHOICE, None, "A"),
        (CHOICE, "", "A"),  # empty is left out, for a field that has a meaning left out
        (CHOICE, "C", "C"),
        (NAME, "", ""),
        (NAME, "abc", "abc"),
    ],
)
def test_read(declared: Field[Any], value: object, read: object) -> None:
    assert declared.read(value, "spec.f") == read


@pytest.mark.parametrize(
    ("declared", "value", "message"),
    [
        (BOOL, "yes", "spec.f must be true or false, got 'yes'"),
        (COUNT, True, "spec.f must be an integer, got True"),
        (COUNT, "1", "spec.f must be an integer, got '1'"),
        (COUNT, -1, "spec.f must be at least 0, got -1"),
        (COUNT, 6, "spec.f must be at most 5, got 6"),
        (CHOICE, "D", "spec.f must be A, B or C, got 'D'"),
        (CHOICE, 1, "spec.f must be a string, got 1"),
        (NAME, "abcd", "spec.f must be at most 3 characters, got 4"),
    ],
)
def test_read_refuses_what_the_schema_refuses(
    declared: Field[Any], value: object, message: str
) -> None:
    with pytest.raises(FieldInvalid) as refused:
        declared.read(value, "spec.f")
    assert str(refused.value) == message


def _parsed(body: Schema) -> JobSet:
    obj = copy.deepcopy(body)
    obj["metadata"] = {"name": "train", "namespace": "default", "uid": "u-1"}
    return parse(obj)


def test_a_changed_bound_changes_the_crd_the_docs_the_contract_and_the_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(fields, "REPLICAS", dataclasses.replace(fields.REPLICAS, maximum=3))
    crd = _built()
    root = _root(crd)
    assert fielddocs.node_at(root, "spec.replicatedJobs[].replicas")["maximum"] == 3
    assert "| `replicas` | int32 ≥ 0, ≤ 3 |" in fielddocs.render(DOCS.read_text(), root)
    body = base()
    body["spec"]["replicatedJobs"][1]["replicas"] = 4
    installed, _ = specpolicy.split(crd)
    refusal = Contract.from_crd(installed).refusal(body)
    assert refusal is not None
    assert "spec.replicatedJobs[1].replicas: Invalid value: 4: " in refusal.message
    assert "should be less than or equal to 3" in refusal.message
    with pytest.raises(InvalidJobSet, match=r"replicas must be at most 3, got 4"):
        _parsed(body)
    body["spec"]["replicatedJobs"][1]["replicas"] = 3
    assert Contract.from_crd(installed).refusal(body) is None
    assert _parsed(body).replicated_jobs[1].replicas == 3


def test_a_changed_allowed_value_or_default_changes_the_crd_and_the_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        fields, "VOLUME_SCOPE", dataclasses.replace(fields.VOLUME_SCOPE, enum=("JobSet", "Job"))
    )
    monkeypatch.setattr(fields, "GROUP_NAME", dataclasses.replace(fields.GROUP_NAME, default="g"))
    root = _root(_built())
    assert fielddocs.node_at(root, "spec.volumeClaimPolicies[].scope")["enum"] == ["JobSet", "Job"]
    assert fielddocs.node_at(root, "spec.replicatedJobs[].groupName")["default"] == "g"
    body = base()
    assert all("groupName" not in r for r in body["spec"]["replicatedJobs"])
    jobset = _parsed(body)
    assert {r.group_name for r in jobset.replicated_jobs} == {"g"}
    body["spec"]["volumeClaimPolicies"][0]["scope"] = "Pod"
    with pytest.raises(InvalidJobSet, match=r"scope must be JobSet or Job, got 'Pod'"):
        policies(_parsed(body))


# ------------------------------------------------------------- snapshot retention and restore


@pytest.mark.parametrize(
    ("declared", "value", "read"),
    [
        (fields.WHEN_DELETED, "Snapshot", "Snapshot"),
        (fields.WHEN_COMPLETED, "Snapshot", "Snapshot"),
        (fields.WHEN_FAILED, "Snapshot", "Snapshot"),
        (fields.WHEN_SCALED, "Snapshot", "Snapshot"),
        (fields.WHEN_DELETED, None, "Delete"),  # the defaults are unchanged
        (fields.WHEN_COMPLETED, None, "Retain"),
        (fields.SNAPSHOT_CLASS_NAME, None, None),  # the cluster's default class
        (fields.SNAPSHOT_CLASS_NAME, "csi-snapclass", "csi-snapclass"),
        (fields.SNAPSHOT_HISTORY_LIMIT, None, 1),
        (fields.SNAPSHOT_HISTORY_LIMIT, 100, 100),
        (fields.RESTORE_SOURCE, None, None),  # required: the schema says so, the parser too
        (fields.RESTORE_SOURCE, "NewestSnapshot", "NewestSnapshot"),
        (fields.RESTORE_SOURCE, "VolumeSnapshot", "VolumeSnapshot"),
        (fields.RESTORE_SNAPSHOT_NAME, None, None),
        (fields.RESTORE_SNAPSHOT_NAME, "s" * 253, "s" * 253),
        (fields.RESTORE_WHEN_MISSING, None, "Wait"),
        (fields.RESTORE_WHEN_MISSING, "", "Wait"),
        (fields.RESTORE_WHEN_MISSING, "CreateEmpty", "CreateEmpty"),
    ],
)
def test_snapshot_and_restore_fields_read(
    declared: Field[Any], value: object, read: object
) -> None:
    assert declared.read(value, "spec.f") == read


@pytest.mark.parametrize(
    ("declared", "value", "message"),
    [
        (
            fields.WHEN_FAILED,
            "Snapshots",
            "spec.f must be Retain, Delete or Snapshot, got 'Snapshots'",
        ),
        (fields.SNAPSHOT_CLASS_NAME, "c" * 254, "spec.f must be at most 253 characters, got 254"),
        (fields.SNAPSHOT_HISTORY_LIMIT, 0, "spec.f must be at least 1, got 0"),
        (fields.SNAPSHOT_HISTORY_LIMIT, 101, "spec.f must be at most 100, got 101"),
        (
            fields.RESTORE_SOURCE,
            "Newest",
            "spec.f must be NewestSnapshot or VolumeSnapshot, got 'Newest'",
        ),
        (fields.RESTORE_SNAPSHOT_NAME, "s" * 254, "spec.f must be at most 253 characters, got 254"),
        (fields.RESTORE_WHEN_MISSING, "Skip", "spec.f must be Wait or CreateEmpty, got 'Skip'"),
    ],
)
def test_snapshot_and_restore_fields_refuse_what_the_schema_refuses(
    declared: Field[Any], value: object, message: str
) -> None:
    with pytest.raises(FieldInvalid) as refused:
        declared.read(value, "spec.f")
    assert str(refused.value) == message


def test_snapshot_and_restore_policies_are_in_both_spellings_and_not_immutable() -> None:
    """snapshotPolicy and restorePolicy sit beside creationPolicy in both spellings, and, like it,
    may change at any time: the immutability rules do not compare them."""
    root = _root(_installed())
    for site in POLICY_SITES:
        restore = fielddocs.node_at(root, f"{site}.restorePolicy")
        assert restore["required"] == ["source"]
        assert "default" not in restore  # left out: new claims start empty
        assert "default" not in fielddocs.node_at(root, f"{site}.snapshotPolicy")
    body = base()
    body["spec"]["volumeClaimPolicies"][0]["retentionPolicy"] = {"whenCompleted": "Snapshot"}
    contract = Contract.from_crd(_installed())
    stored = contract.defaulted(body)
    changed = copy.deepcopy(stored)
    changed["spec"]["volumeClaimPolicies"][0].update(
        snapshotPolicy={"historyLimit": 3},
        restorePolicy={"source": "VolumeSnapshot", "volumeSnapshotName": "ckpt-7"},
    )
    assert contract.refusal(stored) is None
    assert contract.refusal(changed, stored) is None
    # retentionPolicy, Snapshot included, stays immutable
    changed["spec"]["volumeClaimPolicies"][0]["retentionPolicy"]["whenCompleted"] = "Delete"
    refusal = contract.refusal(changed, stored)
    assert refusal is not None and "spec.volumeClaimPolicies is immutable" in refusal.message


@pytest.mark.parametrize(
    "restore",
    [
        {"source": "VolumeSnapshot"},
        {"source": "VolumeSnapshot", "volumeSnapshotName": ""},
        {"source": "NewestSnapshot", "volumeSnapshotName": "ckpt-7"},
    ],
)
@pytest.mark.parametrize("spelling", ["volumeClaimPolicies", "volumePolicy"])
def test_restore_snapshot_name_rule_admission_predicate_and_parser_say_the_same(
    spelling: str, restore: Schema
) -> None:
    """restore-snapshot-name (volumeSnapshotName with source VolumeSnapshot, and only then): the
    admission policy, the rule's predicate and the parser refuse the same specs with the same
    message."""
    body = base()
    if spelling == "volumeClaimPolicies":
        body["spec"]["volumeClaimPolicies"][0]["restorePolicy"] = restore
        where = "spec.volumeClaimPolicies[0]"
    else:  # the first policy (template data, for init and workers) in the other spelling
        first = body["spec"]["volumeClaimPolicies"].pop(0)
        body["spec"]["volumePolicy"] = {
            "volumeClaimTemplates": first["templates"],
            "replicatedJobs": [{"name": n} for n in first["targetReplicatedJobs"]],
            "restorePolicy": restore,
        }
        where = "spec.volumePolicy"
    rules = schema.rules(*embedded_types(_installed()))
    (rule,) = [r for r in rules if r.check is predicates.restore_snapshot_name]
    assert rule.id == "restore-snapshot-name" and rule.message == fields.RESTORE_SNAPSHOT_NAME_RULE
    contract = Contract.from_crd(_installed())
    assert predicates.restore_snapshot_name(contract.defaulted(body)["spec"]) is not None
    refusal = contract.refusal(body)
    assert refusal is not None
    assert refusal.errors == (f"spec: {fields.RESTORE_SNAPSHOT_NAME_RULE}",)
    with pytest.raises(InvalidJobSet) as refused:
        policies(_parsed(body))
    assert str(refused.value) == f"{where}: {fields.RESTORE_SNAPSHOT_NAME_RULE}"
    # and with the name where it belongs, all three accept it
    fixed = {"source": "VolumeSnapshot", "volumeSnapshotName": "ckpt-7"}
    if spelling == "volumeClaimPolicies":
        body["spec"]["volumeClaimPolicies"][0]["restorePolicy"] = fixed
    else:
        body["spec"]["volumePolicy"]["restorePolicy"] = fixed
    assert predicates.restore_snapshot_name(contract.defaulted(body)["spec"]) is None
    assert contract.refusal(body) is None
    assert policies(_parsed(body))
