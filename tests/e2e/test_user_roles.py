"""The users' ClusterRoles of manifests/rbac/user-roles.yaml, aggregated on a real control plane.

manifests/ is applied; kube-controller-manager's clusterrole-aggregation controller copies the
rules of ``stateful-jobset-viewer`` into the built-in ``view`` role and those of
``stateful-jobset-editor`` into ``edit`` and ``admin``. Users bound (in one namespace) only to a
built-in role then make real requests, by impersonation: a ``view`` user reads JobSets and may
not create or change one; ``edit`` and ``admin`` users create and delete them.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient

from controller.jobset import api
from controller.runtime.client import ApiError, KubeClient, Resource
from tests.helpers import Kube, wait_for
from tests.support.incluster import ROOT

ROLE_BINDINGS = Resource(
    "rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", namespaced=True
)
EXAMPLE = ROOT / "manifests" / "examples" / "seed-volume-policy.yaml"


@asynccontextmanager
async def as_user(kube: Kube, user: str) -> AsyncIterator[KubeClient]:
    """A client whose every request the API server authorizes as ``user`` (impersonation by the
    cluster admin: the request is then authorized as that user alone)."""
    async with ApiClient(kube.api.configuration) as impersonating:
        impersonating.set_default_header("Impersonate-User", user)
        yield KubeClient(impersonating)


async def bind(admin: KubeClient, namespace: str, user: str, cluster_role: str) -> None:
    await admin.create(
        ROLE_BINDINGS,
        {
            "metadata": {"name": f"{user}-{cluster_role}"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": cluster_role,
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        },
        namespace,
    )


def jobset(name: str) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    body["metadata"] = {"name": name}
    return body


async def refused(attempt: Awaitable[object]) -> int:
    with pytest.raises(ApiError) as error:
        await attempt
    return error.value.status


async def until_allowed(what: str, attempt: Callable[[], Awaitable[object]]) -> None:
    """Wait for the aggregation controller (and the API server's RBAC cache after it): a 403
    meanwhile is expected, anything else fails at once."""

    async def observe() -> bool:
        try:
            await attempt()
        except ApiError as err:
            if err.status != 403:
                raise AssertionError(f"{what}: {err.status} {err}") from err
            return False
        return True

    await wait_for(observe, bool, what, seconds=60)


async def test_builtin_roles_carry_the_jobset_roles(
    full_kube: Kube, full_namespace: str, installed: tuple[str, str]
) -> None:
    admin = KubeClient(full_kube.api)
    namespace = full_namespace
    await admin.create(api.JOBSETS, jobset("by-admin"), namespace)
    for user, role in (("vera", "view"), ("eddie", "edit"), ("ada", "admin")):
        await bind(admin, namespace, user, role)

    async with as_user(full_kube, "vera") as viewer:
        await until_allowed(
            "the view role to let vera list jobsets", lambda: viewer.list(api.JOBSETS, namespace)
        )
        listed = await viewer.list(api.JOBSETS, namespace)
        assert [j["metadata"]["name"] for j in listed["items"]] == ["by-admin"]
        fetched = await viewer.get(api.JOBSETS, "by-admin", namespace)
        assert fetched["metadata"]["name"] == "by-admin"
        # Reading is all: no create, no change, no delete.
        assert await refused(viewer.create(api.JOBSETS, jobset("by-vera"), namespace)) == 403
        patch = {"metadata": {"labels": {"touched": "yes"}}}
        assert await refused(viewer.patch(api.JOBSETS, "by-admin", patch, namespace)) == 403
        assert await refused(viewer.delete(api.JOBSETS, "by-admin", namespace)) == 403

    for user in ("eddie", "ada"):
        async with as_user(full_kube, user) as editor:
            name = f"by-{user}"
            await until_allowed(
                f"{user}'s built-in role to let them create a jobset",
                functools.partial(editor.create, api.JOBSETS, jobset(name), namespace),
            )
            assert (await editor.get(api.JOBSETS, name, namespace))["metadata"]["name"] == name
            await editor.delete(api.JOBSETS, name, namespace)

    # The roles hold only in the namespace of the binding.
    async with as_user(full_kube, "eddie") as editor:
        assert await refused(editor.list(api.JOBSETS, "default")) == 403
