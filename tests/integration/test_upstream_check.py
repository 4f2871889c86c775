"""The start-up check for a running upstream JobSet controller, on a real API server: what
``controller.jobset.upstream.observe`` reads, with what RBAC, and a controller process that
refuses to start.

Upstream's objects here are made by the test under upstream's names (its Lease renewed by a task
of the test as its leader would, its Deployment's status written as a kubelet-less cluster
needs, its webhook configurations calling nobody for nothing); the real manager beside a real
canary is tests/node/test_canary.py's. Everything is deleted after each test: a ready Deployment
of that name would make every later controller process of the session refuse to start.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient

from controller.jobset import api
from controller.jobset.upstream import (
    UPSTREAM_LEASE,
    UPSTREAM_MUTATING_WEBHOOKS,
    UPSTREAM_VALIDATING_WEBHOOKS,
    decide,
    observe,
)
from controller.runtime.client import (
    DEPLOYMENTS,
    LEASES,
    MUTATING_WEBHOOK_CONFIGURATIONS,
    VALIDATING_WEBHOOK_CONFIGURATIONS,
    ApiError,
    KubeClient,
    Resource,
)
from localcluster.cluster import LocalCluster
from tests.helpers import Kube
from tests.support.crd import REPO
from tests.support.replicas import start_replica

Obj = dict[str, Any]
CLUSTER_ROLES = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False
)
CLUSTER_ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding",
    namespaced=False,
)  # fmt: skip
CONTROLLER_ROLE = REPO / "manifests" / "rbac" / "cluster-role.yaml"


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _webhooks(kind: str, name: str) -> Obj:
    """A webhook configuration of upstream's name that judges nothing anyone writes."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "nothing.upstream-check.test",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Ignore",
                "clientConfig": {"url": "https://127.0.0.1:1/never"},
                "rules": [
                    {
                        "apiGroups": ["upstream-check.test"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["nothings"],
                    }
                ],
            }
        ],
    }


@contextlib.asynccontextmanager
async def upstream_objects(
    client: KubeClient, namespace: str, *, renewed: bool = True, ready: int = 1
) -> AsyncIterator[None]:
    """Upstream's Lease (renewed every half second by a task, or left to run out in 3 s), its
    Deployment with ``ready`` ready replicas and its two webhook configurations; all deleted
    after."""
    lease = await client.create(
        LEASES,
        {
            "metadata": {"name": UPSTREAM_LEASE},
            "spec": {
                "holderIdentity": "jobset-controller-manager-7d9_1a2b",
                "leaseDurationSeconds": 15 if renewed else 3,
                "renewTime": _now(),
                "acquireTime": _now(),
            },
        },
        namespace,
    )

    async def renew() -> None:
        current = lease
        while True:
            await asyncio.sleep(0.5)
            current["spec"]["renewTime"] = _now()
            current = await client.replace(LEASES, current, namespace)

    renewer = asyncio.create_task(renew()) if renewed else None
    deployment = await client.create(
        DEPLOYMENTS,
        {
            "metadata": {"name": "jobset-controller-manager"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"control-plane": "controller-manager"}},
                "template": {
                    "metadata": {"labels": {"control-plane": "controller-manager"}},
                    "spec": {"containers": [{"name": "manager", "image": "upstream"}]},
                },
            },
        },
        namespace,
    )
    deployment["status"] = {"replicas": 1, "readyReplicas": ready} if ready else {"replicas": 1}
    await client.replace(DEPLOYMENTS, deployment, namespace, subresource="status")
    for resource, name in (
        (VALIDATING_WEBHOOK_CONFIGURATIONS, UPSTREAM_VALIDATING_WEBHOOKS),
        (MUTATING_WEBHOOK_CONFIGURATIONS, UPSTREAM_MUTATING_WEBHOOKS),
    ):
        await client.create(resource, _webhooks(resource.kind, name))
    try:
        yield
    finally:
        if renewer is not None:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewer
        for resource, name, ns in (
            (LEASES, UPSTREAM_LEASE, namespace),
            (DEPLOYMENTS, "jobset-controller-manager", namespace),
            (VALIDATING_WEBHOOK_CONFIGURATIONS, UPSTREAM_VALIDATING_WEBHOOKS, None),
            (MUTATING_WEBHOOK_CONFIGURATIONS, UPSTREAM_MUTATING_WEBHOOKS, None),
        ):
            with contextlib.suppress(ApiError):
                await client.delete(resource, name, ns)


@contextlib.asynccontextmanager
async def as_user(kube: Kube, user: str) -> AsyncIterator[KubeClient]:
    """A client the API server authorizes as ``user`` alone (impersonation by the admin)."""
    async with ApiClient(kube.api.configuration) as impersonating:
        impersonating.set_default_header("Impersonate-User", user)
        yield KubeClient(impersonating)


async def test_a_running_upstream_is_seen_and_refused(
    kube: Kube, client: KubeClient, namespace: str
) -> None:
    async with upstream_objects(client, namespace):
        seen = await observe(client)
        (lease,) = seen.leases
        assert (lease.namespace, lease.holder, lease.renewed) == (
            namespace,
            "jobset-controller-manager-7d9_1a2b",
            True,
        )
        assert [(d.namespace, d.name, d.ready) for d in seen.deployments] == [
            (namespace, "jobset-controller-manager", 1)
        ]
        assert seen.webhooks == (
            f"validatingwebhookconfiguration/{UPSTREAM_VALIDATING_WEBHOOKS}",
            f"mutatingwebhookconfiguration/{UPSTREAM_MUTATING_WEBHOOKS}",
        )
        assert seen.unreadable == ()
        assert decide(seen, api.CONTROLLER_NAME, share=False).refuse
        assert not decide(seen, "example.com/canary", share=False).refuse


async def test_a_lease_nobody_renews_is_not_a_running_upstream(
    kube: Kube, client: KubeClient, namespace: str
) -> None:
    """A Lease whose timestamps say held but that nobody renews (upstream just stopped): watched
    until it would run out, then not running. The Deployment scaled to no ready replica; its
    webhooks left registered: a warning, not a refusal."""
    async with upstream_objects(client, namespace, renewed=False, ready=0):
        seen = await observe(client)
        (lease,) = seen.leases
        assert lease.renewed is False
        assert not seen.running
        verdict = decide(seen, api.CONTROLLER_NAME, share=False)
        assert not verdict.refuse
        assert [level for level, _ in verdict.notes] == ["warning"]


async def test_what_rbac_forbids_is_said_and_not_a_reason_to_refuse(
    kube: Kube, client: KubeClient, namespace: str
) -> None:
    async with upstream_objects(client, namespace), as_user(kube, "nobody") as nobody:
        seen = await observe(nobody)
        assert len(seen.unreadable) == 5, seen.unreadable
        assert all("403" in what for what in seen.unreadable), seen.unreadable
        verdict = decide(seen, api.CONTROLLER_NAME, share=False)
        assert not verdict.refuse
        assert "could not fully check" in verdict.notes[-1][1]


async def test_the_controllers_cluster_role_reads_upstreams_objects_by_name_only(
    kube: Kube, client: KubeClient, namespace: str
) -> None:
    """With the ClusterRole of manifests/rbac alone: every read of the check is allowed, and
    the same resources without the name are not (resourceNames)."""
    role = yaml.safe_load(CONTROLLER_ROLE.read_text())
    role["metadata"]["name"] = f"upstream-check-{namespace}"
    user = f"upstream-check-{namespace}"
    await client.create(CLUSTER_ROLES, role)
    await client.create(
        CLUSTER_ROLE_BINDINGS,
        {
            "metadata": {"name": user},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role["metadata"]["name"],
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
    )
    try:
        async with upstream_objects(client, namespace), as_user(kube, user) as controller:
            seen = await observe(controller)
            assert seen.unreadable == ()
            assert seen.running and len(seen.webhooks) == 2
            for resource in (LEASES, DEPLOYMENTS, VALIDATING_WEBHOOK_CONFIGURATIONS):
                with pytest.raises(ApiError) as refused:
                    await controller.list(resource)
                assert refused.value.status == 403
    finally:
        await client.delete(CLUSTER_ROLE_BINDINGS, user)
        await client.delete(CLUSTER_ROLES, role["metadata"]["name"])


async def test_the_controller_refuses_to_start_beside_a_running_upstream(
    apiserver_cluster: LocalCluster,
    kube: Kube,
    client: KubeClient,
    namespace: str,
    tmp_path: Path,
) -> None:
    """``python -m controller`` with the default --managed-by exits 1, its error naming the
    Lease, the Deployment and the webhook configurations; with the override it starts."""
    async with upstream_objects(client, namespace):
        refused = start_replica(
            apiserver_cluster.kubeconfig,
            namespace,
            "refused",
            tmp_path,
            lease_name="upstream-check",
            module="controller",
        )
        try:
            code = await asyncio.to_thread(refused.process.popen.wait, 60)  # type: ignore[union-attr]
        finally:
            refused.process.stop()
        assert code == 1, refused.process.log_tail(20)
        (message,) = [
            str(line["msg"]) for line in refused.log_lines() if line.get("level") == "error"
        ]
        for part in (
            f"Lease {namespace}/{UPSTREAM_LEASE} held by 'jobset-controller-manager-7d9_1a2b'",
            f"Deployment {namespace}/jobset-controller-manager with 1 ready replica",
            f"validatingwebhookconfiguration/{UPSTREAM_VALIDATING_WEBHOOKS}",
            "--managed-by=example.com/canary",
            "--share-upstream-managed-by=true",
        ):
            assert part in message, message

        shared = start_replica(
            apiserver_cluster.kubeconfig,
            namespace,
            "shared",
            tmp_path,
            lease_name="upstream-check",
            module="controller",
            extra={"--share-upstream-managed-by": "true"},
        )
        try:

            def warned() -> bool:
                return any(
                    "starting anyway" in str(line.get("msg")) for line in shared.log_lines()
                ) and any(line.get("msg") == "caches synced" for line in shared.log_lines())

            for _ in range(240):
                if warned():
                    break
                assert shared.process.running(), shared.process.log_tail(20)
                await asyncio.sleep(0.25)  # polling the process's log
            assert warned(), shared.process.log_tail(20)
        finally:
            shared.process.stop()
