"""Generate the JobSet CustomResourceDefinition.

The JobSet schema embeds two Kubernetes types: ``batch/v1 JobTemplateSpec`` (each replicated job's
template) and ``core/v1 PersistentVolumeClaim`` (the volume claim templates). Rather than copying
them by hand, this module reads them from the API server's own OpenAPI v3 documents and inlines
every ``$ref`` into a structural schema that a CustomResourceDefinition accepts:

- ``$ref`` and ``allOf: [{$ref}]`` are replaced by the referenced schema;
- ``IntOrString`` and ``Quantity`` become ``x-kubernetes-int-or-string`` (a Quantity keeps its
  syntax as a ``pattern``); ``RawExtension`` keeps unknown fields;
- ObjectMeta inside a template is reduced to name, namespace, labels, annotations and finalizers,
  the only metadata a template can meaningfully carry (everything else is pruned);
- descriptions, enums, ``x-kubernetes-patch-*`` and other extensions a CRD does not know, and
  ``format`` values a CRD would not recognise are dropped;
- ``default`` values are dropped, except where a list keyed by that field
  (``x-kubernetes-list-type: map``) needs one (e.g. a container port's ``protocol: TCP``).

The JobSet part (spec and status fields, defaults, CEL rules, descriptions) is hand-written in
:mod:`controller.api.schema`. ``build_crd`` is pure: same documents in, same CRD out, and
``render`` writes it as YAML with sorted keys, so the committed file can be compared as text.

Command line::

    python -m controller.api.crdgen --kubeconfig FILE [--check]
    python -m localcluster crd [--check]       # a local control plane of its own (make crd)

It writes two CRDs: ``manifests/crd/`` (every feature gate off, upstream's default) and
``manifests/components/alpha-features/`` (every alpha gate on; see :mod:`controller.features`),
each beside the ValidatingAdmissionPolicy that runs the spec's cross-field and immutability rules
(``policy.yaml``, :mod:`controller.api.specpolicy`), and the policy's binding; the field
tables of ``docs/api.md`` (:mod:`controller.api.fielddocs`); and the Kubernetes types the CRD
embeds, which the controller's parser checks JobSets with (``controller/api/embedded-types.json``,
:func:`controller.api.validation.packaged`).

``python -m localcluster crd`` starts an ``apiserver``-profile local control plane, reads the
documents and stops it (the product never imports the development tooling: ``localcluster``
calls ``generate`` and ``write``). ``--check`` compares instead of writing and exits 1 when a
file is out of date.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from controller import features
from controller.api import fielddocs, schema, specpolicy, validation
from controller.api.fields import Schema
from controller.features import FeatureGates

OpenAPIDocs = Mapping[str, Mapping[str, Any]]

BATCH_V1_PATH = "/openapi/v3/apis/batch/v1"
CORE_V1_PATH = "/openapi/v3/api/v1"
OPENAPI_PATHS = (BATCH_V1_PATH, CORE_V1_PATH)

DEFAULT_OUT = Path("manifests/crd/jobsets.jobset.x-k8s.io.yaml")
# The spec's cross-field and immutability rules, as a ValidatingAdmissionPolicy (specpolicy).
DEFAULT_POLICY_OUT = Path("manifests/crd/policy.yaml")
BINDING_OUT = Path("manifests/crd/binding.yaml")
# Its field tables are written from the same schema (controller.api.fielddocs).
API_DOCS = Path("docs/api.md")
# The same CRD and policy with every alpha feature gate on (controller/features.py), for that
# component.
ALPHA_OUT = Path("manifests/components/alpha-features/jobsets.jobset.x-k8s.io.yaml")
ALPHA_POLICY_OUT = Path("manifests/components/alpha-features/policy.yaml")
# The embedded Kubernetes types, for the controller's own contract (its image has no manifests/).
EMBEDDED_OUT = Path("controller/api") / validation.EMBEDDED_TYPES_FILE

JOB_TEMPLATE_SPEC = "io.k8s.api.batch.v1.JobTemplateSpec"
PERSISTENT_VOLUME_CLAIM = "io.k8s.api.core.v1.PersistentVolumeClaim"

_REF_PREFIX = "#/components/schemas/"
_OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
_RAW_EXTENSION = "io.k8s.apimachinery.pkg.runtime.RawExtension"

# The grammar of a resource.Quantity ("1Gi", "500m", "1e3", "0.5").
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
    r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)

# Keywords of a JSON schema node that a structural CRD schema keeps as they are.
_KEPT_SCALARS = (
    "type",
    "required",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
)
# Keywords dropped on purpose (anything else unexpected is an error, so a new Kubernetes version
# that adds a construct fails loudly instead of producing a wrong schema).
_DROPPED = frozenset(
    {
        "description",
        "default",
        "enum",
        "example",
        "x-kubernetes-patch-strategy",
        "x-kubernetes-patch-merge-key",
        "x-kubernetes-group-version-kind",
        "x-kubernetes-unions",
    }
)
# `format` values a CRD recognises, per type (others are dropped).
_FORMATS = {
    "string": {"byte", "date", "date-time", "duration", "uri", "uuid", "password"},
    "integer": {"int32", "int64"},
    "number": {"float", "double"},
}


class SchemaError(Exception):
    """The OpenAPI documents contain something this generator does not know how to inline."""


def int_or_string(pattern: str | None = None) -> Schema:
    node: Schema = {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    }
    if pattern:
        node["pattern"] = pattern
    return node


def template_metadata() -> Schema:
    """The metadata a template may carry; other ObjectMeta fields are pruned."""
    string_map: Schema = {"type": "object", "additionalProperties": {"type": "string"}}
    return {
        "type": "object",
        "properties": {
            "annotations": copy.deepcopy(string_map),
            "finalizers": {"type": "array", "items": {"type": "string"}},
            "labels": copy.deepcopy(string_map),
            "name": {"type": "string"},
            "namespace": {"type": "string"},
        },
    }


class Inliner:
    """Resolves named schemas of the OpenAPI documents into self-contained structural schemas."""

    def __init__(self, docs: OpenAPIDocs) -> None:
        self.schemas: dict[str, Schema] = {}
        for path in OPENAPI_PATHS:
            if path not in docs:
                raise SchemaError(f"the OpenAPI document {path} is missing")
            components = docs[path].get("components", {}).get("schemas", {})
            for name, node in components.items():
                self.schemas.setdefault(name, node)
        self._done: dict[str, Schema] = {}

    def named(self, name: str, stack: tuple[str, ...] = ()) -> Schema:
        if name == _OBJECT_META:
            return template_metadata()
        if name == _QUANTITY:
            return int_or_string(QUANTITY_PATTERN)
        if name == _INT_OR_STRING:
            return int_or_string()
        if name == _RAW_EXTENSION:
            return {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        if name in stack:
            raise SchemaError(f"recursive schema {' -> '.join((*stack, name))} cannot be inlined")
        if name not in self._done:
            if name not in self.schemas:
                raise SchemaError(f"schema {name} is not in the OpenAPI documents")
            self._done[name] = self.node(self.schemas[name], (*stack, name))
        return copy.deepcopy(self._done[name])

    def node(self, raw: Mapping[str, Any], stack: tuple[str, ...]) -> Schema:
        ref = _single_ref(raw)
        if ref is not None:
            return self.named(ref, stack)
        where = stack[-1] if stack else "(root)"
        if raw.get("format") == "int-or-string":
            return int_or_string()
        unknown = set(raw) - _DROPPED - set(_KEPT_SCALARS)
        unknown -= {"properties", "items", "additionalProperties", "format"}
        if unknown:
            raise SchemaError(f"{where}: unsupported keywords {sorted(unknown)}")
        out: Schema = {key: copy.deepcopy(raw[key]) for key in _KEPT_SCALARS if key in raw}
        schema_type = raw.get("type")
        if "format" in raw and raw["format"] in _FORMATS.get(str(schema_type), set()):
            out["format"] = raw["format"]
        if "properties" in raw:
            out["properties"] = {
                key: self.node(value, stack) for key, value in sorted(raw["properties"].items())
            }
        if "items" in raw:
            out["items"] = self.node(raw["items"], stack)
        additional = raw.get("additionalProperties")
        if isinstance(additional, Mapping):
            out["additionalProperties"] = self.node(additional, stack)
        elif additional is not None:
            out["additionalProperties"] = additional
        if "type" not in out and not _typeless_ok(out):
            raise SchemaError(f"{where}: a node without a type: {sorted(raw)}")
        if out.get("x-kubernetes-list-type") == "map":
            self._keep_list_map_key_defaults(raw, out, where)
        return out

    def _keep_list_map_key_defaults(self, raw: Mapping[str, Any], out: Schema, where: str) -> None:
        """Every key of a map-typed list must be required or defaulted, or the CRD is rejected."""
        item_raw = raw["items"]
        ref = _single_ref(item_raw)
        if ref is not None:
            item_raw = self.schemas[ref]
        item = out["items"]
        required = set(item.get("required", []))
        for key in raw.get("x-kubernetes-list-map-keys", []):
            if key in required:
                continue
            default = item_raw.get("properties", {}).get(key, {}).get("default")
            if default is None:
                raise SchemaError(
                    f"{where}: list map key {key!r} is neither required nor defaulted"
                )
            item["properties"][key]["default"] = default


def _single_ref(raw: Mapping[str, Any]) -> str | None:
    ref = raw.get("$ref")
    if ref is None:
        all_of = raw.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1 and "$ref" in all_of[0]:
            ref = all_of[0]["$ref"]
    if ref is None:
        return None
    if not str(ref).startswith(_REF_PREFIX):
        raise SchemaError(f"unsupported $ref {ref!r}")
    return str(ref)[len(_REF_PREFIX) :]


def _typeless_ok(node: Schema) -> bool:
    return bool(
        node.get("x-kubernetes-int-or-string") or node.get("x-kubernetes-preserve-unknown-fields")
    )


def embedded_types(docs: OpenAPIDocs) -> tuple[Schema, Schema]:
    """The inlined schemas of a Job template and of a PersistentVolumeClaim."""
    inliner = Inliner(docs)
    return inliner.named(JOB_TEMPLATE_SPEC), inliner.named(PERSISTENT_VOLUME_CLAIM)


def kubernetes_version(docs: OpenAPIDocs) -> str:
    return str(docs[BATCH_V1_PATH].get("info", {}).get("version", "unknown"))


def build_crd(docs: OpenAPIDocs, gates: FeatureGates = features.DEFAULT) -> dict[str, Any]:
    """The JobSet CustomResourceDefinition with every rule, from the OpenAPI documents of batch/v1
    and core/v1, admitting what the given feature gates allow (``build`` splits it in two)."""
    job_template, claim = embedded_types(docs)
    return schema.custom_resource_definition(job_template, claim, gates)


def build(
    docs: OpenAPIDocs, gates: FeatureGates = features.DEFAULT
) -> tuple[dict[str, Any], dict[str, Any]]:
    """What is installed: the CRD without the rules the spec's admission policy runs, and that
    ValidatingAdmissionPolicy (controller.api.specpolicy)."""
    crd, sites = specpolicy.policy_sites(build_crd(docs, gates))
    return crd, specpolicy.policy(sites)


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (CEL rules) as literal blocks, everything else as usual."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_Dumper.add_representer(str, _represent_str)


def render(crd: Mapping[str, Any], version: str) -> str:
    """The CRD (or the policy) as YAML: sorted keys, block style, a header naming how it was
    made."""
    header = (
        "# Generated by `make crd` (python -m controller.api.crdgen) from the OpenAPI of\n"
        f"# Kubernetes {version} and controller/api/schema.py. Do not edit by hand.\n"
    )
    body = yaml.dump(dict(crd), Dumper=_Dumper, sort_keys=True, default_flow_style=False, width=100)
    return header + body


_BINDING_HEADER = """\
# Generated by `make crd` (python -m controller.api.crdgen). Do not edit by hand.
# Binds the JobSet spec's admission policy (policy.yaml) in every namespace. Without it the API
# server admits JobSets that break the spec's cross-field and immutability rules
# (docs/api.md, "Where the rules run").
"""


async def fetch_openapi(kubeconfig: Path | str) -> dict[str, dict[str, Any]]:
    """GET the OpenAPI v3 documents of batch/v1 and core/v1 from the API server."""
    from kubernetes_asyncio import config

    api = await config.new_client_from_config(config_file=str(kubeconfig))
    docs: dict[str, dict[str, Any]] = {}
    async with api:
        for path in OPENAPI_PATHS:
            response = await api.call_api(
                path,
                "GET",
                header_params={"Accept": "application/json"},
                auth_settings=["BearerToken"],
                _preload_content=False,
                _return_http_data_only=True,
            )
            docs[path] = await response.json()
    return docs


async def generate(kubeconfig: Path | str) -> dict[Path, str]:
    """The default CRD and policy, the binding, and the all-alpha CRD and policy, by output
    path."""
    docs = await fetch_openapi(kubeconfig)
    version = kubernetes_version(docs)
    crd, policy = build(docs)
    alpha_crd, alpha_policy = build(docs, features.ALPHA)
    binding = yaml.dump(specpolicy.binding(), Dumper=_Dumper, sort_keys=True, width=100)
    job_template, claim = embedded_types(docs)
    current_docs = await asyncio.to_thread(API_DOCS.read_text)
    api_docs = fielddocs.render(current_docs, fielddocs.jobset_root(job_template, claim))
    return {
        DEFAULT_OUT: render(crd, version),
        DEFAULT_POLICY_OUT: render(policy, version),
        BINDING_OUT: _BINDING_HEADER + binding,
        ALPHA_OUT: render(alpha_crd, version),
        ALPHA_POLICY_OUT: render(alpha_policy, version),
        API_DOCS: api_docs,
        EMBEDDED_OUT: validation.embedded_types_json(crd),
    }


def write(outputs: Mapping[Path, str], check: bool = False) -> int:
    """Write ``outputs`` (``generate``'s), or with ``check`` compare them with the files; 1 when
    a file is out of date, else 0."""
    stale = 0
    for out, text in outputs.items():
        if check:
            if not out.exists() or out.read_text() != text:
                print(f"{out} is out of date: run `make crd`", file=sys.stderr)
                stale += 1
            else:
                print(f"{out} is up to date")
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out} ({len(text.encode())} bytes)")
    return 1 if stale else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m controller.api.crdgen", description=__doc__)
    parser.add_argument(
        "--kubeconfig", type=Path, required=True, help="read the OpenAPI from this cluster"
    )
    parser.add_argument(
        "--check", action="store_true", help="compare with the committed files instead of writing"
    )
    args = parser.parse_args(argv)
    return write(asyncio.run(generate(args.kubeconfig)), args.check)


if __name__ == "__main__":
    sys.exit(main())
