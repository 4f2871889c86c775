"""Semantic equality of replicated jobs (controller.api.semantic): what upstream JobSet's Go types
decode alike is equal, what they keep apart is not. The CEL twin is checked against the same
table on the real API server (tests/integration/test_crd.py, the suspended-update cases)."""

from __future__ import annotations

from typing import Any

import pytest

from controller.api import semantic
from controller.api.gofields import CLASSES

DEPTH = 16
CONTAINERS = "template.?spec.?template.?spec.?containers"
POD_FIELDS = (
    CONTAINERS,
    "template.?spec.?template.?spec.?hostNetwork",
    "template.?spec.?template.?spec.?automountServiceAccountToken",
    "template.?spec.?template.?spec.?securityContext",
    "template.?spec.?template.?spec.?volumes",
    "template.?spec.?template.?spec.?overhead",
)


def container(**extra: Any) -> dict[str, Any]:
    return {"name": "c", "image": "busybox", **extra}


def equal(new: list[Any], old: list[Any]) -> bool:
    return semantic.same(new, old, POD_FIELDS, DEPTH)


ABSENT = None
# (case, new values, old values, equal?): one value per POD_FIELDS entry.
CASES: list[tuple[str, list[Any], list[Any], bool]] = [
    ("identical", [[container()], True, False, None, None, None],
     [[container()], True, False, None, None, None], True),
    ("empty list in a container (env: [])", [[container(env=[])], None, None, None, None, None],
     [[container()], None, None, None, None, None], True),
    ("empty args and volumeMounts", [[container(args=[], volumeMounts=[])], *[None] * 5],
     [[container()], *[None] * 5], True),
    ("resources: {} added (a struct, not a pointer)", [[container(resources={})], *[None] * 5],
     [[container()], *[None] * 5], True),
    ("resources with empty maps", [[container(resources={"limits": {}})], *[None] * 5],
     [[container()], *[None] * 5], True),
    ("hostNetwork: false (a bool, not a pointer) is absent", [None, False, None, None, None, None],
     [None, None, None, None, None, None], True),
    ("hostNetwork: true is not", [None, True, None, None, None, None], [None] * 6, False),
    ("automountServiceAccountToken: false (a pointer) is not absent",
     [None, None, False, None, None, None], [None] * 6, False),
    ("securityContext: {} (a pointer) is not absent", [None, None, None, {}, None, None],
     [None] * 6, False),
    ("a pointer's empty fields inside it are", [None, None, None, {"runAsUser": 0}, None, None],
     [None, None, None, {"runAsUser": 0}, None, None], True),
    ("emptyDir: {} is a volume source, kept", [None, None, None, None,
     [{"name": "v", "emptyDir": {}}], None], [None, None, None, None, [{"name": "v"}], None],
     False),
    ("quantities compare by value", [[container(resources={"requests": {"cpu": "0.5",
     "memory": "1Gi"}})], *[None] * 5], [[container(resources={"requests": {"cpu": "500m",
     "memory": "1024Mi"}})], *[None] * 5], True),
    ("different quantities differ", [[container(resources={"requests": {"cpu": "1"}})],
     *[None] * 5], [[container(resources={"requests": {"cpu": "2"}})], *[None] * 5], False),
    ("a zero quantity in a map is kept", [[container(resources={"requests": {"cpu": 0}})],
     *[None] * 5], [[container()], *[None] * 5], False),
    ("overhead quantities", [None, None, None, None, None, {"cpu": "1000m"}],
     [None, None, None, None, None, {"cpu": "1"}], True),
    ("an env var's empty value is a scalar of a struct (absent)",
     [[container(env=[{"name": "A", "value": ""}])], *[None] * 5],
     [[container(env=[{"name": "A"}])], *[None] * 5], True),
    ("a changed image", [[container(image="other")], *[None] * 5], [[container()], *[None] * 5],
     False),
    ("[{}] is not []", [[container(ports=[{}])], *[None] * 5], [[container(ports=[])], *[None] * 5],
     False),
    ("an item is never dropped", [[container(args=["", "x"])], *[None] * 5],
     [[container(args=["x"])], *[None] * 5], False),
    ("empty string of a scalar at the pod level", [[container(workingDir="")], *[None] * 5],
     [[container()], *[None] * 5], True),
]  # fmt: skip


@pytest.mark.parametrize(("new", "old", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_semantic_equality(new: list[Any], old: list[Any], expected: bool) -> None:
    assert equal(new, old) is expected
    assert equal(old, new) is expected


def test_labels_keep_empty_values() -> None:
    """A map's entries are data: an empty label value is not a missing label."""
    meta = "template.?spec.?template.?metadata"
    assert not semantic.same([{"labels": {"a": ""}}], [{"labels": {}}], [meta], DEPTH)
    assert semantic.same([{"labels": {}}], [None], [meta], DEPTH)


def test_places() -> None:
    assert semantic.place("name") == ("replicatedJobs", "name")
    assert semantic.place("?groupName") == ("replicatedJobs", "groupName")
    assert semantic.place(CONTAINERS) == ("spec", "containers")


def test_the_table_names_what_the_comparison_needs() -> None:
    """The generated table (from the Go types) holds the classes the cases above rely on."""
    assert CLASSES["spec.hostNetwork"] == "s"
    assert "spec.automountServiceAccountToken" not in CLASSES  # a pointer
    assert CLASSES["containers.resources"] == "t"
    assert "spec.securityContext" not in CLASSES  # a pointer
    assert CLASSES["requests.*"] == "Q"
    assert CLASSES["metadata.labels"] == "m"
    assert "volumes.emptyDir" not in CLASSES  # a pointer


def test_below_the_depth_values_compare_as_they_are() -> None:
    deep = [[container(env=[])]]
    assert semantic.same(deep, [[container()]], [CONTAINERS], 2) is False
    assert semantic.same(deep, [[container()]], [CONTAINERS], 4) is True
