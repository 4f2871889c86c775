"""Every default of the JobSet schema is the parser's too: one value (controller/jobset/api.py),
written into a stored JobSet by the API server and applied by the parser to an object without it.

The table maps each defaulted field of the schema to where the parsed JobSet shows it; a default
added to the schema without its place here fails ``test_every_schema_default_is_in_the_table``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
import yaml

from controller.api import fielddocs
from controller.api.validation import embedded_types
from controller.jobset.model import JobSet, parse
from controller.jobset.volumes import spec as volume_spec
from tests.support.crd import CRD_FILE

Obj = dict[str, Any]
POD = "template.spec.template.spec"


def _jobset() -> Obj:
    """A JobSet with every defaulted field left out (and the objects that hold them given)."""
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "train", "namespace": "default", "uid": "u-1"},
        "spec": {
            "failurePolicy": {"maxRestarts": 1},
            "replicatedJobs": [
                {
                    "name": "workers",
                    "template": {
                        "spec": {
                            "template": {
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "main",
                                            "image": "busybox",
                                            "volumeMounts": [
                                                {"name": "data", "mountPath": "/d"},
                                                {"name": "old", "mountPath": "/o"},
                                            ],
                                        }
                                    ]
                                }
                            }
                        }
                    },
                }
            ],
            "volumeClaimPolicies": [{"templates": [_pvc("data")]}],
            "volumePolicy": {"volumeClaimTemplates": [_pvc("old")]},
        },
    }


def _pvc(name: str) -> Obj:
    return {
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


def _policy(index: int) -> Callable[[JobSet], Any]:
    return lambda js: volume_spec.policies(js)[index]


def _retention(index: int, attribute: str) -> Callable[[JobSet], Any]:
    return lambda js: getattr(_policy(index)(js).retention, attribute)


PARSED: Mapping[str, Callable[[JobSet], Any]] = {
    "spec.network.enableDNSHostnames": lambda js: js.network.enable_dns_hostnames,
    "spec.network.publishNotReadyAddresses": lambda js: js.network.publish_not_ready_addresses,
    "spec.successPolicy.operator": lambda js: js.success_policy.operator,
    "spec.failurePolicy.restartStrategy": lambda js: (
        js.failure_policy.restart_strategy if js.failure_policy else None
    ),
    "spec.startupPolicy.startupPolicyOrder": lambda js: (
        "InOrder" if js.startup_in_order else "AnyOrder"
    ),
    "spec.replicatedJobs[].groupName": lambda js: js.replicated_jobs[0].group_name,
    "spec.replicatedJobs[].replicas": lambda js: js.replicated_jobs[0].replicas,
    "spec.replicatedJobs[].template.spec.completionMode": lambda js: js.replicated_jobs[0].template[
        "spec"
    ]["completionMode"],
    f"spec.replicatedJobs[].{POD}.restartPolicy": lambda js: js.replicated_jobs[0].template["spec"][
        "template"
    ]["spec"]["restartPolicy"],
    "spec.volumeClaimPolicies[].scope": lambda js: _policy(0)(js).scope,
    **{
        f"spec.{where}.retentionPolicy.{field}": _retention(index, attribute)
        for where, index in (("volumeClaimPolicies[]", 0), ("volumePolicy", 1))
        for field, attribute in (
            ("whenDeleted", "when_deleted"),
            ("whenCompleted", "when_completed"),
            ("whenFailed", "when_failed"),
            ("whenScaled", "when_scaled"),
            ("whenSuspended", "when_suspended"),
        )
    },
}
# Kubernetes' own defaults in the embedded types (keys of its keyed lists): not the parser's.
NOT_READ = ("ports[].protocol", "imagePullSecrets[].name")


def _schema_defaults(node: Mapping[str, Any], path: str) -> Iterator[tuple[str, Any]]:
    """Each defaulted field and its default; an object's default ({operator: All}) as its
    fields' ({} as nothing: its fields have their own)."""
    default = node.get("default")
    if isinstance(default, Mapping):
        yield from ((f"{path}.{k}", v) for k, v in default.items())
    elif "default" in node:
        yield path, default
    for name, child in (node.get("properties") or {}).items():
        yield from _schema_defaults(child, f"{path}.{name}" if path else name)
    if isinstance(node.get("items"), Mapping):
        yield from _schema_defaults(node["items"], path + "[]")


def _defaults() -> dict[str, Any]:
    crd = yaml.load(CRD_FILE.read_text(), Loader=yaml.CSafeLoader)
    root = fielddocs.jobset_root(*embedded_types(crd))
    return dict(_schema_defaults(root, ""))


DEFAULTS = _defaults()


def test_every_schema_default_is_in_the_table() -> None:
    read = {p for p in DEFAULTS if not p.endswith(NOT_READ)}
    assert read == set(PARSED)


@pytest.mark.parametrize("path", sorted(PARSED))
def test_the_parser_applies_the_schemas_default(path: str) -> None:
    jobset = parse(copy.deepcopy(_jobset()))
    assert PARSED[path](jobset) == DEFAULTS[path]
