"""A JobSet field, list or map is defined once (``controller/api/fields.py``): its node in the CRD,
its row in docs/api.md, the contract's check and the parser's reading all come from that one
record, so a changed bound, allowed value or default changes every one of them. The numbers in the
CEL rules are named once too (``controller/api/bounds.py``): a changed one changes the rule's CEL,
its message and its Python predicate together."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
import yaml

from controller.api import bounds, fielddocs, fields, predicates, schema, specpolicy, validation
from controller.api.fields import Field, FieldInvalid, ListField, MapField, ObjectField, Schema
from controller.api.validation import Contract, embedded_types
from controller.jobset.model import InvalidJobSet, JobSet, parse
from controller.jobset.placement import EXCLUSIVE_TOPOLOGY
from controller.jobset.volumes.spec import policies, readable_policies
from tests.integration.test_crd import base
from tests.support.crd import CRD_FILE, REPO

DOCS = REPO / "docs" / "api.md"
# Where the retention, creation, snapshot and restore policies sit (both spellings of a volume
# policy).
POLICY_SITES = ("spec.volumeClaimPolicies[]", "spec.volumePolicy")
POLICY_OBJECTS = ("retentionPolicy", "creationPolicy", "snapshotPolicy", "restorePolicy")
# Where a volume claim template sits (its lists' and maps' records name paths inside one).
TEMPLATE_SITES = (
    "spec.volumeClaimPolicies[].templates[]",
    "spec.volumePolicy.volumeClaimTemplates[]",
)
IN_TEMPLATES = frozenset([fields.CLAIM_ACCESS_MODES.path, *(m.path for m in fields.MAPS)])
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


def _paths(declared: Field[Any] | ObjectField) -> list[str]:
    if declared.path.split(".", 1)[0] in POLICY_OBJECTS:
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


def _spec_nodes(embedded: bool = False) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every node of the installed CRD's spec with its path; inside the embedded Kubernetes types
    too only if ``embedded``."""

    def walk(node: Mapping[str, Any], path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
        if path in EMBEDDED and not embedded:
            return
        yield path, node
        for name, child in (node.get("properties") or {}).items():
            yield from walk(child, f"{path}.{name}")
        if isinstance(node.get("items"), dict):
            yield from walk(node["items"], f"{path}[]")

    return walk(fielddocs.node_at(_root(_installed()), "spec"), "spec")


def test_every_bounded_or_defaulted_field_of_the_spec_is_declared_once() -> None:
    """A scalar of the JobSet's own spec with a bound, allowed values or a default is a
    ``Field``: the parser cannot read it with constants of its own."""
    declared = {path for f in fields.ALL for path in _paths(f)}
    constrained = [
        path
        for path, node in _spec_nodes()
        if node.get("type") in ("string", "integer", "boolean")
        and {"enum", "minimum", "maximum", "default"} & node.keys()
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


@pytest.fixture(autouse=True)
def _contract_of_the_records() -> Iterator[None]:
    """The parser's contract is built once per process from these records: a test that changes
    one gets a contract built from the changed record, the next test the real one again."""
    validation.packaged.cache_clear()
    yield
    validation.packaged.cache_clear()


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
    with pytest.raises(InvalidJobSet) as refused:
        _parsed(body)
    assert str(refused.value) == "; ".join(refusal.errors)  # the parser runs the same contract
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
    with pytest.raises(InvalidJobSet, match=r'scope: Unsupported value: "Pod": supported values: '):
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
    else:  # the first policy (template data, for init and workers) in the other spelling
        first = body["spec"]["volumeClaimPolicies"].pop(0)
        body["spec"]["volumePolicy"] = {
            "volumeClaimTemplates": first["templates"],
            "replicatedJobs": [{"name": n} for n in first["targetReplicatedJobs"]],
            "restorePolicy": restore,
        }
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
    assert str(refused.value) == f"spec: {fields.RESTORE_SNAPSHOT_NAME_RULE}"  # the policy's words
    # and with the name where it belongs, all three accept it
    fixed = {"source": "VolumeSnapshot", "volumeSnapshotName": "ckpt-7"}
    if spelling == "volumeClaimPolicies":
        body["spec"]["volumeClaimPolicies"][0]["restorePolicy"] = fixed
    else:
        body["spec"]["volumePolicy"]["restorePolicy"] = fixed
    assert predicates.restore_snapshot_name(contract.defaulted(body)["spec"]) is None
    assert contract.refusal(body) is None
    assert policies(_parsed(body))


# ------------------------------------------------------------------------- lists and maps


def _bounded_paths(declared: ListField | MapField) -> list[str]:
    if declared.path in IN_TEMPLATES:
        return [f"{site}.{declared.path}" for site in TEMPLATE_SITES]
    if declared.path == fields.VOLUME_MOUNTS.path:  # of containers and of initContainers
        return [declared.path, declared.path.replace(".containers[]", ".initContainers[]")]
    return [declared.path]


def test_every_list_and_map_is_its_node_in_the_installed_crd() -> None:
    root = _root(_installed())
    for declared in fields.LISTS:
        for path in _bounded_paths(declared):
            node = fielddocs.node_at(root, path)
            assert (node.get("maxItems"), node.get("minItems")) == (
                declared.max_items,
                declared.min_items,
            ), path
            if declared.item_max_length is not None:
                assert node["items"] == {"type": "string", "maxLength": declared.item_max_length}
            if declared.description:  # one of the JobSet's own: the whole node is the record's
                assert _without_rules(node) == declared.schema(node["items"]), path
    for mapped in fields.MAPS:
        for path in _bounded_paths(mapped):
            node = fielddocs.node_at(root, path)
            assert node["maxProperties"] == mapped.max_properties, path
            assert node["additionalProperties"].get("maxLength") == mapped.value_max_length


def test_every_bounded_list_or_map_of_the_spec_is_declared_once() -> None:
    """A list or map of the spec with a bound (the JobSet's own or one of an embedded Kubernetes
    type) is a ``ListField`` or ``MapField``: the parser cannot read it with constants of its
    own."""
    records: list[ListField | MapField] = [*fields.LISTS, *fields.MAPS]
    declared = [path for d in records for path in _bounded_paths(d)]
    assert len(declared) == len(set(declared))
    bounded = {"maxItems", "minItems", "maxProperties"}
    found = [path for path, node in _spec_nodes(embedded=True) if bounded & node.keys()]
    assert len(found) >= 20
    assert [path for path in found if path not in declared] == []


LIST = ListField("spec.l", "A list.", max_items=2, item_max_length=3)
CONTAINERS = ListField("spec.c", min_items=1)
MAP = MapField("m", max_properties=1, value_max_length=2)


@pytest.mark.parametrize(
    ("declared", "value", "message"),
    [
        (LIST, "a", "spec.f must be a list, got str"),
        (LIST, ["a", "b", "c"], "spec.f must have at most 2 items, got 3"),
        (CONTAINERS, [], "spec.f must have at least 1 item, got 0"),
        (MAP, ["a"], "spec.f must be an object, got list"),
        (MAP, {"a": "1", "b": "2"}, "spec.f must have at most 1 entry, got 2"),
        (MAP, {"a": 1}, "spec.f.a must be a string, got 1"),
        (MAP, {"a": "123"}, "spec.f.a must be at most 2 characters, got 3"),
    ],
)
def test_list_and_map_read_refuse_what_the_schema_refuses(
    declared: ListField | MapField, value: object, message: str
) -> None:
    with pytest.raises(FieldInvalid) as refused:
        declared.read(value, "spec.f")
    assert str(refused.value) == message


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (["a", 1], "spec.f[1] must be a string, got 1"),
        (["abcd"], "spec.f[0] must be at most 3 characters, got 4"),
    ],
)
def test_read_strings_refuses_what_the_schema_refuses(value: object, message: str) -> None:
    with pytest.raises(FieldInvalid) as refused:
        LIST.read_strings(value, "spec.f")
    assert str(refused.value) == message


def test_lists_and_maps_read_what_the_schema_admits() -> None:
    assert LIST.read(None, "spec.f") == []
    assert LIST.read_strings(["a", "abc"], "spec.f") == ("a", "abc")
    assert MAP.read(None, "spec.f") == {}
    assert MAP.read({"a": "12"}, "spec.f") == {"a": "12"}


def _changed(
    monkeypatch: pytest.MonkeyPatch, record: str, **changes: Any
) -> tuple[Schema, Contract]:
    """The record ``record`` of ``fields`` changed for the test: the CRD's root ``make crd``
    builds then, and the contract of that CRD (its admission policy's rules apart)."""
    monkeypatch.setattr(fields, record, dataclasses.replace(getattr(fields, record), **changes))
    crd = _built()
    installed, _ = specpolicy.split(crd)
    return _root(crd), Contract.from_crd(installed)


def test_a_changed_list_bound_changes_the_crd_the_docs_the_contract_and_the_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root, contract = _changed(monkeypatch, "POLICY_TARGETS", max_items=1)
    assert fielddocs.node_at(root, fields.POLICY_TARGETS.path)["maxItems"] == 1
    row = "| `targetReplicatedJobs` **(ext)** | set of strings (each ≤ 63), up to 1 |"
    assert row in fielddocs.render(DOCS.read_text(), root)
    body = base()
    assert body["spec"]["volumeClaimPolicies"][0]["targetReplicatedJobs"] == ["init", "workers"]
    refusal = contract.refusal(body)
    assert refusal is not None
    too_many = "spec.volumeClaimPolicies[0].targetReplicatedJobs: Too many: 2: must have at most 1"
    assert f"{too_many} item" in refusal.message, refusal.message
    assert _refusal(body) == "; ".join(refusal.errors)  # the parser runs the same contract
    body["spec"]["volumeClaimPolicies"][0]["targetReplicatedJobs"] = ["workers"]
    # init no longer gets the volume: it must not mount it
    _pod(body["spec"], 0)["containers"][0]["volumeMounts"] = []
    assert contract.refusal(body) is None
    assert policies(_parsed(body))[0].targets == ("workers",)


def test_a_changed_map_bound_changes_the_crd_the_contract_and_the_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    root, contract = _changed(monkeypatch, "CLAIM_LABELS", max_properties=1)
    for path in _bounded_paths(fields.CLAIM_LABELS):
        assert fielddocs.node_at(root, path)["maxProperties"] == 1
    body = base()
    template = body["spec"]["volumeClaimPolicies"][1]["templates"][0]
    template["metadata"]["labels"] = {"team": "ml", "tier": "gold"}
    refusal = contract.refusal(body)
    assert refusal is not None
    where = "spec.volumeClaimPolicies[1].templates[0].metadata.labels"
    assert f"{where}: Too many: 2: must have at most 1 item" in refusal.message, refusal.message
    assert _refusal(body) == "; ".join(refusal.errors)
    del template["metadata"]["labels"]["tier"]
    assert contract.refusal(body) is None
    assert policies(_parsed(body))[1].templates[0].labels == {"team": "ml"}


def _pod(spec: Schema, index: int) -> Schema:
    found: Schema = spec["replicatedJobs"][index]["template"]["spec"]["template"]["spec"]
    return found


def _request_spelling(spec: Schema) -> Schema:
    """The second policy of ``base`` in the other spelling (spec.volumePolicy)."""
    policy = spec["volumeClaimPolicies"].pop()
    spec["volumePolicy"] = {
        "volumeClaimTemplates": policy["templates"],
        "replicatedJobs": [{"name": n} for n in policy["targetReplicatedJobs"]],
    }
    found: Schema = spec["volumePolicy"]
    return found


# Each list the parsers read: where it is in ``base``'s spec, and how to hand it n items.
READ_LISTS: list[tuple[ListField, str, Any]] = [
    (fields.REPLICATED_JOBS, "spec.replicatedJobs", lambda s: (s, "replicatedJobs")),
    (
        fields.DEPENDS_ON,
        "spec.replicatedJobs[1].dependsOn",
        lambda s: (s["replicatedJobs"][1], "dependsOn"),
    ),
    (
        fields.CONTAINERS,
        "spec.replicatedJobs[1].template.spec.template.spec.containers",
        lambda s: (_pod(s, 1), "containers"),
    ),
    (
        fields.INIT_CONTAINERS,
        "spec.replicatedJobs[1].template.spec.template.spec.initContainers",
        lambda s: (_pod(s, 1), "initContainers"),
    ),
    (
        fields.SUCCESS_TARGETS,
        "spec.successPolicy.targetReplicatedJobs",
        lambda s: (s["successPolicy"], "targetReplicatedJobs"),
    ),
    (fields.FAILURE_RULES, "spec.failurePolicy.rules", lambda s: (s["failurePolicy"], "rules")),
    (
        fields.FAILURE_RULE_REASONS,
        "spec.failurePolicy.rules[0].onJobFailureReasons",
        lambda s: (s["failurePolicy"]["rules"][0], "onJobFailureReasons"),
    ),
    (
        fields.FAILURE_RULE_TARGETS,
        "spec.failurePolicy.rules[0].targetReplicatedJobs",
        lambda s: (s["failurePolicy"]["rules"][0], "targetReplicatedJobs"),
    ),
    (
        fields.VOLUME_CLAIM_POLICIES,
        "spec.volumeClaimPolicies",
        lambda s: (s, "volumeClaimPolicies"),
    ),
    (
        fields.POLICY_TEMPLATES,
        "spec.volumeClaimPolicies[0].templates",
        lambda s: (s["volumeClaimPolicies"][0], "templates"),
    ),
    (
        fields.POLICY_TARGETS,
        "spec.volumeClaimPolicies[0].targetReplicatedJobs",
        lambda s: (s["volumeClaimPolicies"][0], "targetReplicatedJobs"),
    ),
    (
        fields.VOLUME_POLICY_TEMPLATES,
        "spec.volumePolicy.volumeClaimTemplates",
        lambda s: (_request_spelling(s), "volumeClaimTemplates"),
    ),
    (
        fields.VOLUME_POLICY_TARGETS,
        "spec.volumePolicy.replicatedJobs",
        lambda s: (_request_spelling(s), "replicatedJobs"),
    ),
]


@pytest.mark.parametrize(
    ("declared", "where", "site"), READ_LISTS, ids=[d.path for d, _, _ in READ_LISTS]
)
def test_the_parsers_refuse_a_list_longer_than_its_bound(
    declared: ListField, where: str, site: Any
) -> None:
    """As the schema does (an object stored under an older CRD): InvalidJobSet in the API
    server's words, which the SpecInvalid condition and Event carry."""
    assert declared.max_items is not None
    body = base()
    parent, key = site(body["spec"])
    items = parent.get(key) or [copy.deepcopy(_pod(body["spec"], 1)["containers"][0])]
    parent[key] = [items[0]] * declared.max_items
    at_bound = _refusal(body)  # repeated items may break a rule the parser checks, not the bound
    assert at_bound is None or "must have at most" not in at_bound
    parent[key] = [items[0]] * (declared.max_items + 1)
    too_many = f"Too many: {declared.max_items + 1}: must have at most {declared.max_items} items"
    refusal = _refusal(body)
    assert refusal is not None and refusal.startswith(f"{where}: {too_many}"), refusal


def _refusal(body: Schema) -> str | None:
    """Why the parsers refuse ``body`` (InvalidJobSet), None when they read it."""
    try:
        policies(_parsed(body))
    except InvalidJobSet as err:
        return str(err)
    return None


def test_a_too_long_list_of_policies_still_lets_each_policy_be_read_for_deletion() -> None:
    """Deletion reads every policy entry that parses on its own (``readable_policies``): a list
    that is only too long keeps its claims findable."""
    spec = base()["spec"]
    spec["volumeClaimPolicies"] *= 26  # 52 entries
    found, problems = readable_policies(spec)
    assert len(found) == 52
    assert problems == ["spec.volumeClaimPolicies must have at most 50 items, got 52"]


# ---------------------------------------------------------------------------------- objects


def test_every_object_is_its_node_in_the_installed_crd() -> None:
    """Its description, required keys and default; its properties are its fields' records."""
    root = _root(_installed())
    for declared in fields.OBJECTS:
        for path in _paths(declared):
            node = fielddocs.node_at(root, path)
            kept = {
                k: v for k, v in node.items() if k not in ("properties", "x-kubernetes-validations")
            }
            assert kept == {k: v for k, v in declared.schema({}).items() if k != "properties"}, path
            for key in declared.required:
                assert key in node["properties"], f"{path}: required {key} is no field"


def test_every_object_of_the_spec_is_declared_once() -> None:
    declared = [path for d in fields.OBJECTS for path in _paths(d)]
    assert len(declared) == len(set(declared))
    found = [
        path
        for path, node in _spec_nodes()
        if node.get("type") == "object" and "properties" in node
    ]
    assert len(found) >= 15
    assert sorted(found) == sorted(declared)


def _policy(spec: Schema) -> Schema:
    found: Schema = spec["volumeClaimPolicies"][0]
    found["restorePolicy"] = {"source": "NewestSnapshot"}
    return found


# Each object that requires a key, where it is in ``base``'s spec (made there if need be).
REQUIRING: list[tuple[ObjectField, str, Any]] = [
    (fields.REPLICATED_JOB, "spec.replicatedJobs[1]", lambda s: s["replicatedJobs"][1]),
    (
        fields.DEPENDENCY,
        "spec.replicatedJobs[1].dependsOn[0]",
        lambda s: s["replicatedJobs"][1]["dependsOn"][0],
    ),
    (fields.SUCCESS_POLICY, "spec.successPolicy", lambda s: s["successPolicy"]),
    (fields.FAILURE_RULE, "spec.failurePolicy.rules[0]", lambda s: s["failurePolicy"]["rules"][0]),
    (fields.STARTUP_POLICY, "spec.startupPolicy", lambda s: s.setdefault("startupPolicy", {})),
    (fields.COORDINATOR, "spec.coordinator", lambda s: s["coordinator"]),
    (
        fields.RESTORE_POLICY,
        "spec.volumeClaimPolicies[0].restorePolicy",
        lambda s: _policy(s)["restorePolicy"],
    ),
    (
        fields.VOLUME_POLICY_TARGET,
        "spec.volumePolicy.replicatedJobs[0]",
        lambda s: _request_spelling(s)["replicatedJobs"][0],
    ),
]


def test_every_object_that_requires_keys_is_listed() -> None:
    assert {d.path for d, _, _ in REQUIRING} == {d.path for d in fields.OBJECTS if d.required}


@pytest.mark.parametrize(
    ("declared", "where", "site"), REQUIRING, ids=[d.path for d, _, _ in REQUIRING]
)
def test_the_parsers_read_an_objects_required_keys_as_the_schema_does(
    declared: ObjectField, where: str, site: Any
) -> None:
    """A required key left out (an object stored under an older CRD) is refused, naming it, as
    the API server refuses it: also where the object's default says what the key means, which
    applies only when the whole object is left out."""
    for key in declared.required:
        body = base()
        obj = site(body["spec"])
        obj.pop(key, None)
        field = next((f for f in fields.ALL if f.path == f"{declared.path}.{key}"), None)
        if field is not None and field.when_absent is not None:
            assert declared.default == {key: field.when_absent}
        refusal = _refusal(body)
        assert refusal is not None and refusal.startswith(f"{where}.{key}: Required value"), refusal


# ------------------------------------------------------------------------- the rules' numbers

# Each bound a rule's CEL or message uses, and the rule. A ``format`` library function (a DNS
# label) has its own bound: the rules that call one name the bound in their message only.
RULE_BOUNDS = [
    ("MAX_INT32", "replicas-times-parallelism", True),
    ("MAX_DNS_LABEL", "group-name-format", False),
    ("MAX_DNS_LABEL", "subdomain-format", False),
    ("MAX_LABEL_KEY", "exclusive-topology-key", True),
    ("MAX_MANAGED_BY", "managed-by-format", True),
    ("MAX_LABEL_VALUE", "template-label-keys", False),
    ("MAX_ANNOTATIONS_SIZE", "template-annotations-size", True),
    ("MAX_JOB_NAME", "child-job-names", True),
    ("MAX_JOB_NAME", "pod-names", True),
    ("MAX_CLAIM_NAME", "claim-names", True),
    ("MAX_LABEL_VALUE", "coordinator-address", True),
]
CHANGED = 4321  # a number no rule has


def _rule(rule_id: str) -> schema.Rule:
    (found,) = [r for r in schema.rules(*embedded_types(_installed())) if r.id == rule_id]
    return found


@pytest.mark.parametrize(("bound", "rule_id", "in_cel"), RULE_BOUNDS)
def test_a_changed_rule_bound_changes_its_cel_and_its_message(
    monkeypatch: pytest.MonkeyPatch, bound: str, rule_id: str, in_cel: bool
) -> None:
    before, value = _rule(rule_id), getattr(bounds, bound)
    assert str(CHANGED) not in before.cel + before.message
    assert str(value) in before.message
    monkeypatch.setattr(bounds, bound, CHANGED)
    after = _rule(rule_id)
    assert str(CHANGED) in after.message
    assert (str(CHANGED) in after.cel) is in_cel
    # only the bound changed
    assert after.message.replace(str(CHANGED), str(value)) == before.message
    assert after.cel.replace(str(CHANGED), str(value)) == before.cel


def test_the_pod_name_suffix_is_counted_in_the_cel_and_the_predicate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = base()
    body["metadata"]["name"] = "t" * 42  # its longest pod name: 42 + 8 + 4 + 6 = 60 characters
    contract = Contract.from_crd(_installed())
    assert predicates.pod_names(contract.defaulted(body)) is None
    monkeypatch.setattr(bounds, "POD_NAME_SUFFIX", 10)
    assert f"+ 10 <= {bounds.MAX_JOB_NAME}" in _rule("pod-names").cel
    assert predicates.pod_names(contract.defaulted(body)) == predicates.Broken(
        "replicatedJob workers"
    )


def test_a_changed_claim_name_bound_changes_the_rule_the_predicate_the_contract_and_the_parser(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    body = base()  # its longest claim name: ckpt-train-workers-1, 20 characters
    contract = Contract.from_crd(_installed())
    assert predicates.claim_names(contract.defaulted(body)) is None
    monkeypatch.setattr(bounds, "MAX_CLAIM_NAME", 19)
    rule = _rule("claim-names")
    assert "<= 19" in rule.cel and "<= 253" not in rule.cel
    assert rule.message.endswith("must be at most 19 characters")
    assert predicates.claim_names(contract.defaulted(body)) == predicates.Broken()
    crd = _built()
    installed, _ = specpolicy.split(crd)
    refusal = Contract.from_crd(installed).refusal(body)
    assert refusal is not None and "must be at most 19 characters" in refusal.message
    with pytest.raises(InvalidJobSet) as refused:
        policies(_parsed(body))
    assert str(refused.value) == "; ".join(refusal.errors)
    monkeypatch.setattr(bounds, "MAX_CLAIM_NAME", 20)
    assert predicates.claim_names(contract.defaulted(body)) is None
    assert Contract.from_crd(specpolicy.split(_built())[0]).refusal(body) is None
    assert policies(_parsed(body))


@pytest.mark.parametrize(
    ("bound", "check", "node", "fits", "too_long"),
    [
        (
            "MAX_LABEL_KEY",
            predicates.exclusive_topology_key,
            lambda key: {
                "name": "r",
                "template": {"metadata": {"annotations": {EXCLUSIVE_TOPOLOGY: key}}},
            },
            "k" * 30,
            "k" * 31,
        ),
        (
            "MAX_MANAGED_BY",
            predicates.managed_by_format,
            lambda v: v,
            "e.io/" + "m" * 25,
            "e.io/" + "m" * 26,
        ),
        (
            "MAX_INT32",
            predicates.replicas_times_parallelism,
            lambda n: {"name": "r", "replicas": n, "template": {"spec": {"parallelism": 1}}},
            30,
            31,
        ),
    ],
)
def test_a_changed_rule_bound_changes_its_predicate(
    monkeypatch: pytest.MonkeyPatch,
    bound: str,
    check: predicates.Predicate,
    node: Any,
    fits: Any,
    too_long: Any,
) -> None:
    assert check(node(too_long)) is None
    monkeypatch.setattr(bounds, bound, 30)
    assert check(node(fits)) is None
    assert check(node(too_long)) is not None
