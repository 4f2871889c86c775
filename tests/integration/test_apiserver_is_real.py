"""The integration tier's API server is a real one: CRD schemas, CEL rules, pruning, 410 Gone."""

from __future__ import annotations

import json
import uuid
from typing import Any, cast

import aiohttp
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.helpers import Kube, wait_for


def _widget_crd(group: str) -> Any:  # a plain dict: kubernetes_asyncio accepts one as a body
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {"replicas": {"type": "integer"}},
                                    "x-kubernetes-validations": [
                                        {
                                            "rule": "self.replicas <= 10",
                                            "message": "replicas must be at most 10",
                                        }
                                    ],
                                }
                            },
                        }
                    },
                }
            ],
        },
    }


@pytest.fixture
async def widgets(kube: Kube) -> str:
    """A fresh CRD (own API group) with a CEL rule; returns the group."""
    group = f"g{uuid.uuid4().hex[:8]}.localcluster.test"
    extensions = client.ApiextensionsV1Api(kube.api)
    await extensions.create_custom_resource_definition(_widget_crd(group))
    await wait_for(
        lambda: extensions.read_custom_resource_definition(f"widgets.{group}"),
        lambda crd: any(
            c.type == "Established" and c.status == "True" for c in crd.status.conditions or []
        ),
        f"CRD widgets.{group} to be Established",
    )
    return group


async def test_cel_rule_rejects_with_its_message(kube: Kube, namespace: str, widgets: str) -> None:
    objects = client.CustomObjectsApi(kube.api)
    bad = {
        "apiVersion": f"{widgets}/v1",
        "kind": "Widget",
        "metadata": {"name": "bad"},
        "spec": {"replicas": 11},
    }
    with pytest.raises(ApiException) as raised:
        await objects.create_namespaced_custom_object(widgets, "v1", namespace, "widgets", bad)
    assert raised.value.status == 422
    status = json.loads(raised.value.body or "")
    assert [c["message"] for c in status["details"]["causes"]] == [
        "Invalid value: replicas must be at most 10"
    ]


async def test_unknown_fields_are_pruned(kube: Kube, namespace: str, widgets: str) -> None:
    objects = client.CustomObjectsApi(kube.api)
    body = {
        "apiVersion": f"{widgets}/v1",
        "kind": "Widget",
        "metadata": {"name": "good"},
        "spec": {"replicas": 3, "colour": "blue"},
    }
    await objects.create_namespaced_custom_object(widgets, "v1", namespace, "widgets", body)
    stored = await objects.get_namespaced_custom_object(widgets, "v1", namespace, "widgets", "good")
    assert stored["spec"] == {"replicas": 3}


async def _etcd(session: aiohttp.ClientSession, url: str, path: str, body: object) -> object:
    async with session.post(f"{url}{path}", json=body) as response:
        assert response.status == 200, await response.text()
        return await response.json()


async def test_watch_from_compacted_version_gets_410(kube: Kube, namespace: str) -> None:
    core = kube.core
    config_map: Any = {"metadata": {"name": "cm"}, "data": {"n": "0"}}
    await core.create_namespaced_config_map(namespace, config_map)
    listed = await core.list_namespaced_config_map(namespace)
    old_version = listed.metadata.resource_version
    for n in range(1, 4):
        await core.patch_namespaced_config_map("cm", namespace, {"data": {"n": str(n)}})
    latest = (await core.list_namespaced_config_map(namespace)).metadata.resource_version
    async with aiohttp.ClientSession() as session:
        await _etcd(
            session,
            kube.cluster.etcd_url,
            "/v3/kv/compaction",
            {"revision": latest, "physical": True},
        )

    # Not a V1ConfigMapList as the stubs say: _preload_content=False returns the raw response.
    response = cast(
        aiohttp.ClientResponse,
        await core.list_namespaced_config_map(
            namespace, watch=True, resource_version=old_version, _preload_content=False
        ),
    )
    async with response:
        first = json.loads(await response.content.readline())
    assert first["type"] == "ERROR"
    assert first["object"]["code"] == 410
    assert first["object"]["reason"] in ("Expired", "Gone")
