"""The migration guide's claims about upstream's conversion stanza, on the real API server.

Upstream's install gives the JobSet CRD ``conversion.strategy: Webhook`` pointing at its webhook
Service. docs/operations.md says: with one version the API server never calls it (so it does no
harm while it points at nothing); server-side apply by another field manager of a CRD without the
stanza leaves it in place; and one merge patch removes it. A scratch CRD of the same shape stands
in for the JobSet CRD, which other tests of the session share.
"""

from __future__ import annotations

import uuid
from typing import Any

from tests.helpers import Kube, wait_for

CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
GROUP = "migration.example.com"


def _crd(plural: str, *, conversion: dict[str, Any] | None) -> dict[str, Any]:
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    spec: dict[str, Any] = {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": plural, "singular": plural[:-1], "kind": "Scratch" + plural[-9:-1]},
        "versions": [
            {
                "name": "v1alpha2",
                "served": True,
                "storage": True,
                "schema": {"openAPIV3Schema": schema},
            }
        ],
    }
    if conversion is not None:
        spec["conversion"] = conversion
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": spec,
    }


UPSTREAM_CONVERSION = {
    "strategy": "Webhook",
    "webhook": {
        "clientConfig": {
            "service": {
                "namespace": "jobset-system",
                "name": "jobset-webhook-service",
                "path": "/convert",
            }
        },
        "conversionReviewVersions": ["v1"],
    },
}


async def _patch(
    kube: Kube,
    path: str,
    body: dict[str, Any],
    content_type: str,
    query: list[tuple[str, str]] | None = None,
) -> Any:
    response = await kube.api.call_api(
        path,
        "PATCH",
        query_params=query or [],
        header_params={"Content-Type": content_type, "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    async with response:
        assert response.status in (200, 201), await response.text()
        return await response.json()


async def _apply(kube: Kube, name: str, body: dict[str, Any], manager: str) -> Any:
    query = [("fieldManager", manager), ("force", "true")]
    return await _patch(kube, f"{CRDS}/{name}", body, "application/apply-patch+yaml", query)


async def _merge_patch(kube: Kube, path: str, body: dict[str, Any]) -> Any:
    return await _patch(kube, path, body, "application/merge-patch+json")


def _established(crd: Any) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


async def test_upstream_conversion_stanza_is_inert_kept_by_apply_and_removed_by_patch(
    kube: Kube, namespace: str
) -> None:
    plural = "scratch" + uuid.uuid4().hex[:8] + "s"
    name = f"{plural}.{GROUP}"
    await _apply(kube, name, _crd(plural, conversion=UPSTREAM_CONVERSION), "upstream-install")
    try:
        await wait_for(lambda: kube.raw("GET", f"{CRDS}/{name}"), _established, "Established")
        # One version: objects are written and read although the conversion Service is absent.
        objects = f"/apis/{GROUP}/v1alpha2/namespaces/{namespace}/{plural}"
        kind = "Scratch" + plural[-9:-1]
        body = {"apiVersion": f"{GROUP}/v1alpha2", "kind": kind, "metadata": {"name": "a"}}

        async def created() -> Any:
            return await kube.raw("POST", objects, body)

        made = await wait_for(created, lambda o: o.get("kind") == kind, "the object created")
        assert made["metadata"]["name"] == "a"
        listed = await kube.raw("GET", objects)
        assert [o["metadata"]["name"] for o in listed["items"]] == ["a"], listed

        # Another field manager's apply without the stanza leaves it as it was.
        ours = await _apply(kube, name, _crd(plural, conversion=None), "kubectl-ours")
        kept = ours["spec"]["conversion"]
        assert kept["strategy"] == "Webhook", kept
        assert kept["webhook"]["clientConfig"]["service"]["name"] == "jobset-webhook-service", kept

        # The documented merge patch removes it.
        patched = await _merge_patch(
            kube, f"{CRDS}/{name}", {"spec": {"conversion": {"strategy": "None", "webhook": None}}}
        )
        assert patched["spec"]["conversion"] == {"strategy": "None"}, patched["spec"]["conversion"]
        still = await kube.raw("GET", f"{objects}/a")
        assert still["metadata"]["name"] == "a"
    finally:
        await kube.raw("DELETE", f"{CRDS}/{name}")
