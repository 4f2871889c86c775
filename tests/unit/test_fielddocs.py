"""docs/api.md's field tables come from the schema, so a bound, a default or a description is
written once (``controller/api/fields.py``, ``schema.py``) and the CRD, ``kubectl explain``, the
tables, ``render``'s validation and the parser follow it."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

import pytest
import yaml

from controller.api import crdgen, fielddocs, fields, schema, specpolicy, validation
from controller.api.validation import Contract, embedded_types
from controller.jobset.model import InvalidJobSet, parse
from tests.integration.test_crd import base
from tests.support.crd import CRD_FILE, REPO

DOCS = REPO / crdgen.API_DOCS


def _installed() -> dict[str, object]:
    loaded: dict[str, object] = yaml.load(CRD_FILE.read_text(), Loader=yaml.CSafeLoader)
    return loaded


def test_the_field_tables_are_current() -> None:
    root = fielddocs.jobset_root(*embedded_types(_installed()))
    assert fielddocs.render(DOCS.read_text(), root) == DOCS.read_text(), (
        "docs/api.md's field tables are out of date with controller/api/schema.py: run `make crd`"
    )


def test_every_spec_field_has_a_row() -> None:
    text = DOCS.read_text()
    tables = [m["path"] for m in fielddocs.BEGIN.finditer(text)]
    assert tables[0] == "spec" and len(tables) >= 9
    spec = fielddocs.node_at(fielddocs.jobset_root(*embedded_types(_installed())), "spec")
    for name in spec["properties"]:
        assert f"| `{name}`" in text, f"spec.{name} has no row in docs/api.md"


def test_a_changed_bound_changes_the_crd_the_docs_and_the_validation(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(fields, "DEPENDS_ON", dataclasses.replace(fields.DEPENDS_ON, max_items=2))
    job_template, claim = embedded_types(_installed())
    crd = schema.custom_resource_definition(job_template, claim)
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert fielddocs.node_at(root, "spec.replicatedJobs[].dependsOn")["maxItems"] == 2
    docs = fielddocs.render(DOCS.read_text(), root)
    assert "| `dependsOn` | list, up to 2, keyed by `name` |" in docs
    assert "At most 2 entries" in docs  # the description says it too
    body = base()
    rjobs = body["spec"]["replicatedJobs"]
    rjobs.extend({**rjobs[-1], "name": f"extra{i}"} for i in range(3))
    rjobs[-1]["dependsOn"] = [{"name": r["name"], "status": "Ready"} for r in rjobs[:3]]
    installed, _ = specpolicy.split(crd)
    refusal = Contract.from_crd(installed).refusal(body)
    assert refusal is not None
    too_many = f"spec.replicatedJobs[{len(rjobs) - 1}].dependsOn: Too many: 3: must have at most 2"
    assert f"{too_many} items" in refusal.message, refusal.message
    stored = copy.deepcopy(body)
    stored["metadata"] = {"name": "train", "namespace": "default", "uid": "u-1"}
    # The parser runs the contract of this process's schema, built once: again for the new bound.
    validation.packaged.cache_clear()
    try:
        with pytest.raises(InvalidJobSet) as refused:
            parse(stored)
    finally:
        validation.packaged.cache_clear()  # the next test's contract is the real schema's
    assert str(refused.value).startswith(f"{too_many} items;"), str(refused.value)


def test_types_and_defaults_read_as_the_schema_says() -> None:
    node = {"type": "integer", "format": "int32", "minimum": 0, "default": 1}
    assert fielddocs.type_of(node, "x") == "int32 ≥ 0"
    assert fielddocs.default_of(node) == "schema: `1`"
    names = {"type": "array", "items": {"type": "string", "maxLength": 63}, "maxItems": 5}
    assert fielddocs.type_of(names, "x") == "list of strings (each ≤ 63), up to 5"
    enum = {"type": "string", "enum": ["All", "Any"]}
    assert fielddocs.type_of(enum, "x") == "`All` \\| `Any`"
    assert fielddocs.default_of({"default": {"operator": "All"}}) == "schema: `{operator: All}`"
    assert fielddocs.default_of({"type": "string"}) == "none"
