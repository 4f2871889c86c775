"""The test provisioner (``localcluster/provisioner.py``) keeps trying a volume the API server
refused: a claim must not stay Pending for good because one create of its PersistentVolume failed
(found by the chaos soak: a claim whose volume create was refused while the restarted API server
was not yet ready never bound, and its JobSet never finished).

The refusal is real: a ValidatingAdmissionPolicy that denies the PersistentVolumes of this test's
namespace, until the API server's own metric shows it denied one; then it is removed, and the
claim, untouched since, binds."""

from __future__ import annotations

import uuid
from typing import Any

from kubernetes_asyncio import client as client_v1
from kubernetes_asyncio.client.exceptions import ApiException

from controller.runtime.client import (
    CLAIMS,
    VALIDATING_ADMISSION_POLICIES,
    VALIDATING_ADMISSION_POLICY_BINDINGS,
    ApiError,
    KubeClient,
)
from tests.helpers import Kube, wait_for

Obj = dict[str, Any]
DENIED = 'apiserver_validating_admission_policy_check_total{enforcement_action="deny"'


def _refusing(name: str, namespace: str) -> tuple[Obj, Obj]:
    """A policy (and its binding) that denies every PersistentVolume bound to a claim of
    ``namespace``: the provisioner's creates for this test, no other test's."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["persistentvolumes"],
                    }
                ]
            },
            "validations": [
                {
                    "expression": (
                        "!has(object.spec.claimRef) || !has(object.spec.claimRef.namespace) || "
                        f"object.spec.claimRef.namespace != '{namespace}'"
                    ),
                    "message": "refused by the test, once",
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {"policyName": name, "validationActions": ["Deny"]},
    }
    return policy, binding


async def _refused_in_dry_run(kube: Kube, namespace: str) -> bool:
    """Whether a volume for a claim of ``namespace`` is refused now (dry run: nothing stored)."""
    volume: Any = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"probe-{uuid.uuid4().hex[:8]}"},
        "spec": {
            "capacity": {"storage": "1Mi"},
            "accessModes": ["ReadWriteOnce"],
            "hostPath": {"path": "/nonexistent"},
            "claimRef": {"namespace": namespace, "name": "probe"},
        },
    }
    try:
        await client_v1.CoreV1Api(kube.api).create_persistent_volume(volume, dry_run="All")
    except ApiException as err:
        return "refused by the test" in str(err.body)
    return False


async def _denials(kube: Kube, policy: str) -> int:
    """How many requests the policy ``policy`` denied, from the API server's metrics."""
    response = await kube.api.call_api(
        "/metrics",
        "GET",
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    async with response:
        text = await response.text()
    found = 0
    for line in text.splitlines():
        if line.startswith(DENIED) and f'policy="{policy}"' in line:
            found += int(float(line.rsplit(" ", 1)[1]))
    return found


async def test_a_claim_binds_after_its_volume_create_was_refused(
    full_kube: Kube, full_namespace: str
) -> None:
    kube, ns = full_kube, full_namespace
    client = KubeClient(kube.api)
    name = f"refuse-volumes-{uuid.uuid4().hex[:6]}"
    policy, binding = _refusing(name, ns)
    await client.create(VALIDATING_ADMISSION_POLICIES, policy)
    try:
        await client.create(VALIDATING_ADMISSION_POLICY_BINDINGS, binding)
        claim = {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "refused-once"},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "standard",
                "resources": {"requests": {"storage": "1Mi"}},
            },
        }
        # The policy takes effect once the API server's informers have it and its binding.
        await wait_for(
            lambda: _refused_in_dry_run(kube, ns),
            bool,
            "the policy to refuse a volume for the namespace's claims",
        )
        created = await client.create(CLAIMS, claim, ns)
        await wait_for(
            lambda: _denials(kube, name),
            lambda n: n >= 1,
            "the API server to deny the provisioner's volume for the claim",
        )
        stored = await client.get(CLAIMS, "refused-once", ns)
        assert stored["status"].get("phase") == "Pending", stored["status"]
    finally:
        for resource in (VALIDATING_ADMISSION_POLICY_BINDINGS, VALIDATING_ADMISSION_POLICIES):
            try:
                await client.delete(resource, name)
            except ApiError as err:
                if not err.not_found:
                    raise
    # Nothing else happens to the claim: the provisioner must come back to it by itself.
    bound = await wait_for(
        lambda: client.get(CLAIMS, "refused-once", ns),
        lambda c: (c.get("status") or {}).get("phase") == "Bound",
        "the claim to bind once the API server accepts its volume",
    )
    assert bound["metadata"]["uid"] == created["metadata"]["uid"]
    assert bound["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]
