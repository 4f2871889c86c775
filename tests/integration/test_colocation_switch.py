"""Whether Jobs keep the pods that share a ReadWriteOnce claim on one node follows the cluster's
storage and the controller's switch (volumes/singlenode.py, attach.py), against the real API
server: the controller reads StorageClasses and CSIDrivers from its informers, a CSIDriver's
arrival is acted on by its event (no change to the JobSet), and only Jobs created from then on
follow it: running Jobs are never rewritten.

The integration tier has no scheduler: what the scheduler does with the affinity is the e2e
tier's (``tests/e2e/test_multi_attach.py``); here, the Jobs' pod templates and the condition.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import AsyncIterator
from typing import Any

from controller.jobset import api
from controller.jobset.volumes.model import SINGLE_NODE_LABEL
from controller.runtime.client import CSI_DRIVERS, STORAGE_CLASSES, ApiError, KubeClient
from tests.helpers import Kube, wait_for
from tests.support.jobsets import (
    condition,
    get_jobset,
    jobs_of,
    jobset,
    replicated_job,
    running_controller,
    wait_jobs,
    with_mounts,
)
from tests.support.volumes_e2e import claim_template

Obj = dict[str, Any]
RISK = "MultiAttachRisk"


@contextlib.asynccontextmanager
async def storage_class(client: KubeClient, attach: bool | None) -> AsyncIterator[str]:
    """A class whose provisioner is a CSI driver of this ``attachRequired`` (None: no CSIDriver
    object yet); both removed at the end. Yields the class's name (the driver's: ``.csi``)."""
    name = f"coloc-{uuid.uuid4().hex[:6]}"
    created: list[tuple[Any, str]] = []
    try:
        body = {"metadata": {"name": name}, "provisioner": f"{name}.csi"}
        await client.create(STORAGE_CLASSES, body, None)
        created.append((STORAGE_CLASSES, name))
        if attach is not None:
            await create_driver(client, f"{name}.csi", attach)
            created.append((CSI_DRIVERS, f"{name}.csi"))
        yield name
    finally:
        for resource, what in [*created, (CSI_DRIVERS, f"{name}.csi")]:
            with contextlib.suppress(ApiError):
                await client.delete(resource, what, None)


async def create_driver(client: KubeClient, name: str, attach: bool) -> None:
    body = {"metadata": {"name": name}, "spec": {"attachRequired": attach}}
    await client.create(CSI_DRIVERS, body, None)


def sharing(name: str, storage: str, replicas: int = 2) -> Obj:
    """Workers, ``replicas`` Jobs of one pod, that mount one ReadWriteOnce claim at once."""
    workers = with_mounts(replicated_job("workers", replicas), "data")
    template = claim_template("data", storage_class=storage)
    return jobset(name, workers, volumeClaimPolicies=[{"templates": [template]}])


def pinned(job: Obj) -> bool:
    template = job["spec"]["template"]
    labels = (template.get("metadata") or {}).get("labels") or {}
    affinity = (template["spec"].get("affinity") or {}).get("podAffinity")
    assert (SINGLE_NODE_LABEL in labels) == (affinity is not None), job["metadata"]["name"]
    return SINGLE_NODE_LABEL in labels


async def said(client: KubeClient, namespace: str, name: str, reason: str) -> Obj:
    found: Obj = await wait_for(
        lambda: get_jobset(client, namespace, name),
        lambda js: (condition(js, RISK) or {}).get("reason") == reason,
        f"{RISK} {reason} on {name}",
    )
    risk = condition(found, RISK)
    assert risk is not None and risk["status"] == "False", risk
    return risk


async def test_never_leaves_the_pods_free_even_where_the_storage_attaches(
    kube: Kube, namespace: str, client: KubeClient
) -> None:
    """--colocate-claims=never: Jobs without the affinity on storage that attaches, and the
    condition says why (the switch) and what the storage is (it attaches); a JobSet's annotation
    "true" still keeps its pods together."""
    async with (
        storage_class(client, attach=True) as storage,
        running_controller(kube, namespace, "--colocate-claims=never"),
    ):
        await client.create(api.JOBSETS, sharing("free", storage), namespace)
        forced = sharing("forced", storage)
        forced["metadata"]["annotations"] = {"jobset.sigs.k8s.io/colocate-claims": "true"}
        await client.create(api.JOBSETS, forced, namespace)
        assert not any(pinned(j) for j in await wait_jobs(client, namespace, "free", 2))
        assert all(pinned(j) for j in await wait_jobs(client, namespace, "forced", 2))
        risk = await said(client, namespace, "free", "ColocationOff")
        assert "as the controller's --colocate-claims is never" in risk["message"]
        assert f"CSIDriver {storage}.csi has attachRequired: true" in risk["message"]
        await said(client, namespace, "forced", "Colocated")


async def test_a_csidriver_that_attaches_nothing_frees_the_jobs_made_after_it(
    kube: Kube, namespace: str, client: KubeClient
) -> None:
    """A class whose driver has no CSIDriver object yet: taken to attach, the Jobs keep their
    pods together and the condition says it was assumed. The CSIDriver created with
    attachRequired: false changes the condition by its own event; the running Jobs stay as
    they were made, and a Job added by a scale-up carries no affinity."""
    async with (
        storage_class(client, attach=None) as storage,
        running_controller(kube, namespace),
    ):
        await client.create(api.JOBSETS, sharing("later", storage), namespace)
        made = await wait_jobs(client, namespace, "later", 2)
        assert all(pinned(j) for j in made)
        risk = await said(client, namespace, "later", "Colocated")
        assert f"no CSIDriver {storage}.csi, so its volumes are taken to attach" in risk["message"]

        await create_driver(client, f"{storage}.csi", attach=False)
        risk = await said(client, namespace, "later", "AttachNotRequired")
        assert f"CSIDriver {storage}.csi has attachRequired: false" in risk["message"]
        versions = {j["metadata"]["name"]: j["metadata"]["resourceVersion"] for j in made}
        assert {
            j["metadata"]["name"]: j["metadata"]["resourceVersion"]
            for j in await jobs_of(client, namespace, "later")
        } == versions  # not rewritten

        grow = [{"op": "replace", "path": "/spec/replicatedJobs/0/replicas", "value": 3}]
        await client.patch(api.JOBSETS, "later", grow, namespace, patch_type="json")
        jobs = {j["metadata"]["name"]: j for j in await wait_jobs(client, namespace, "later", 3)}
        assert {n: pinned(j) for n, j in jobs.items()} == {
            "later-workers-0": True,
            "later-workers-1": True,
            "later-workers-2": False,
        }
