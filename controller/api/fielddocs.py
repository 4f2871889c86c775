"""The field tables of docs/api.md, written from the schema (``schema.py``).

Each table sits between ``<!-- fields: <path> -->`` and ``<!-- end fields -->`` in docs/api.md;
everything else in the file is prose and left alone. A row per field of the object at ``<path>``
(``spec``, ``spec.replicatedJobs[]``, ...), nested objects flattened into ``a.b`` rows down to
the objects that have a table of their own:

- **type** from the schema: ``string ≤ 63``, ``int32 ≥ 0``, enums as ``A`` | ``B``, lists with
  their bound, keys and items;
- **default**: the schema's default (``schema: X``, written by the API server, visible in
  ``kubectl get -o yaml``); the controller's own defaults are in the description;
- **meaning**: the field's description, the same text ``kubectl explain`` shows.

So a changed bound, default or description changes the CRD, ``kubectl explain`` and these
tables together. ``make crd`` rewrites them; ``tests/unit/test_fielddocs.py`` checks they are
current.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from controller.api import schema
from controller.api.fields import Schema

BEGIN = re.compile(r"<!-- fields: (?P<path>[\w.\[\]]+) -->\n")
END = "<!-- end fields -->"
# Fields this controller adds to upstream's API (docs/api.md "Extensions over upstream").
EXTENSIONS = frozenset(
    {
        "spec.volumePolicy",
        "spec.volumeClaimPolicies[].retentionPolicy.whenCompleted",
        "spec.volumeClaimPolicies[].retentionPolicy.whenFailed",
        "spec.volumeClaimPolicies[].retentionPolicy.whenScaled",
        "spec.volumeClaimPolicies[].retentionPolicy.whenSuspended",
        "spec.volumeClaimPolicies[].creationPolicy",
        "spec.volumeClaimPolicies[].snapshotPolicy",
        "spec.volumeClaimPolicies[].restorePolicy",
        "spec.volumeClaimPolicies[].targetReplicatedJobs",
        "spec.volumeClaimPolicies[].scope",
    }
)
# Embedded Kubernetes types, named rather than expanded.
EMBEDDED = {
    "spec.replicatedJobs[].template": "batch/v1 JobTemplateSpec",
    "spec.volumeClaimPolicies[].templates": "list of PersistentVolumeClaim",
    "spec.volumePolicy.volumeClaimTemplates": "list of PersistentVolumeClaim",
}


def node_at(root: Schema, path: str) -> Schema:
    """The schema node at ``spec.a[].b`` below the JobSet's root."""
    node = root
    for part in path.split("."):
        name, items = part.removesuffix("[]"), part.endswith("[]")
        node = node["properties"][name]
        if items:
            node = node["items"]
    return node


def _flow(value: Any) -> str:
    """A default as YAML flow, e.g. ``{operator: All}``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str):
        return value
    return json.dumps(value)


def _bounds(node: Schema) -> str:
    parts = []
    if "maxItems" in node:
        parts.append(f"up to {node['maxItems']}")
    keys = node.get("x-kubernetes-list-map-keys")
    if keys:
        parts.append("keyed by " + ", ".join(f"`{k}`" for k in keys))
    return (", " + ", ".join(parts)) if parts else ""


def type_of(node: Schema, path: str) -> str:
    if path in EMBEDDED:
        bound = f", up to {node['maxItems']}" if "maxItems" in node else ""
        return EMBEDDED[path] + bound
    if "enum" in node:
        return " \\| ".join(f"`{v}`" for v in node["enum"])
    kind = node.get("type")
    if kind == "string":
        return "string" + (f" ≤ {node['maxLength']}" if "maxLength" in node else "")
    if kind == "integer":
        text = str(node.get("format", "integer"))
        if "minimum" in node:
            text += f" ≥ {node['minimum']}"
        if "maximum" in node:
            text += f", ≤ {node['maximum']}"
        return text
    if kind == "boolean":
        return "bool"
    if kind == "array":
        items = node["items"]
        if items.get("type") == "string":
            noun = "set" if node.get("x-kubernetes-list-type") == "set" else "list"
            each = f" (each ≤ {items['maxLength']})" if "maxLength" in items else ""
            return f"{noun} of strings{each}" + _bounds(node)
        return "list" + _bounds(node)
    return "object"


def default_of(node: Schema) -> str:
    return f"schema: `{_flow(node['default'])}`" if "default" in node else "none"


def _cell(text: str) -> str:
    """A description as a table cell: one line, '|' escaped, '<x>' not taken for HTML."""
    text = " ".join(text.split()).replace("|", "\\|")
    return text.replace("<", "&lt;").replace(">", "&gt;")


def rows(root: Schema, path: str, own_tables: frozenset[str]) -> Iterator[str]:
    """The table rows of the object at ``path``, nested objects flattened into ``a.b`` rows
    unless they have a table of their own."""

    def walk(node: Schema, prefix: str, full: str) -> Iterator[str]:
        for name, child in node.get("properties", {}).items():
            field_path = f"{full}.{name}"
            label = f"`{prefix}{name}`" + (" **(ext)**" if field_path in EXTENSIONS else "")
            yield (
                f"| {label} | {type_of(child, field_path)} | {default_of(child)} | "
                f"{_cell(child.get('description', ''))} |"
            )
            nested = child["items"] if child.get("type") == "array" else child
            nested_path = field_path + ("[]" if child.get("type") == "array" else "")
            if (
                nested.get("properties")
                and nested_path not in own_tables
                and field_path not in own_tables
                and field_path not in EMBEDDED
            ):
                yield from walk(
                    nested,
                    prefix + name + ("[]." if child.get("type") == "array" else "."),
                    nested_path,
                )

    yield "| field | type | default | meaning |"
    yield "|---|---|---|---|"
    yield from walk(node_at(root, path), "", path)


def render(text: str, root: Schema) -> str:
    """docs/api.md with every field table written from ``root`` (the JobSet's schema)."""
    own = frozenset(m["path"] for m in BEGIN.finditer(text))
    out: list[str] = []
    position = 0
    for match in BEGIN.finditer(text):
        end = text.index(END, match.end())
        out.append(text[position : match.end()])
        out.append("\n".join(rows(root, match["path"], own)) + "\n")
        position = end
    out.append(text[position:])
    return "".join(out)


def jobset_root(job_template: Schema, claim: Schema) -> Schema:
    """The JobSet's openAPIV3Schema, every rule in place, from the embedded types."""
    builder = schema.Builder(dict(job_template), dict(claim))
    return builder.openapi_schema()
