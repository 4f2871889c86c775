"""Claims that cannot be made or provisioned (issue 12, item 9): a ResourceQuota that refuses them
is acted on as soon as it is raised, and a storage class that does not exist is named.

The integration tier has no kube-controller-manager: the tests write a quota's status themselves
(admission enforces ``status.hard`` against ``status.used``, as the quota controller leaves them),
and no claim is ever provisioned (claims stay Pending).
"""

from __future__ import annotations

import uuid
from collections.abc import Hashable
from typing import Any

import pytest

from controller.jobset import api
from controller.runtime import workqueue
from controller.runtime.client import CLAIMS, STORAGE_CLASSES, KubeClient
from controller.runtime.clock import Clock
from tests.helpers import Kube, current, wait_for
from tests.support.jobsets import (
    RunningController,
    condition,
    get_jobset,
    jobset,
    replicated_job,
    running_controller,
    settled,
    wait_jobs,
    with_mounts,
)
from tests.support.volumes_e2e import QUOTAS, claim_template, example, find

Obj = dict[str, Any]

# A retry that would come back only after the test (and the session) is long over.
FOREVER = 1e6


class FirstRetryOnly:
    """A rate limiter that retries a failed key once soon, then practically never: only an event
    (and forgetting the key's failures) can bring the key back before the test times out.

    The one quick retry absorbs the API server's own quota cache trailing the quota's watch event
    by a few milliseconds: the controller may be refused once more right after the event."""

    def __init__(self, clock: Clock | None = None) -> None:
        self._failures: dict[Hashable, int] = {}

    def when(self, item: Hashable) -> float:
        failures = self._failures.get(item, 0)
        self._failures[item] = failures + 1
        return 0.1 if failures == 0 else FOREVER

    def forget(self, item: Hashable) -> None:
        self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        return self._failures.get(item, 0)


async def set_quota(client: KubeClient, namespace: str, claims: str, *, create: bool) -> None:
    """A quota on the number of claims, in force: spec and (as the quota controller would write
    it) status."""
    hard = {"persistentvolumeclaims": claims}
    if create:
        await client.create(
            QUOTAS, {"metadata": {"name": "claims"}, "spec": {"hard": hard}}, namespace
        )
    else:
        await client.patch(QUOTAS, "claims", {"spec": {"hard": hard}}, namespace)
    used = {"persistentvolumeclaims": "0"}
    await client.patch(
        QUOTAS, "claims", {"status": {"hard": hard, "used": used}}, namespace, subresource="status"
    )


async def test_raised_quota_is_acted_on_by_its_event_not_after_the_backoff(
    kube: Kube, namespace: str, client: KubeClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim refused by a ResourceQuota is created as soon as the quota is raised: the quota's
    watch event brings the JobSet back and resets its backoff. The controller's backoff here is
    practically infinite after one retry, so nothing else could create the claim in time (it used
    to wait for the backoff, up to 1000 s with the default rate limiter)."""
    monkeypatch.setattr(workqueue, "default_controller_rate_limiter", FirstRetryOnly)
    name, claim_name = "trainjob-shared", "initializer-trainjob-shared"
    key = f"{namespace}/{name}"
    await set_quota(client, namespace, "0", create=True)
    async with running_controller(kube, namespace) as running:
        queue = running.manager.controllers[0].queue
        await client.create(api.JOBSETS, example("02-upstream-shared-initializer.yaml"), namespace)
        # Refused, retried once, refused again: now the key waits "forever".
        await wait_for(
            current(lambda: queue.num_requeues(key)),
            lambda retries: retries >= 2,
            "the JobSet's claim to be refused twice (the key in its long backoff)",
        )
        await settled(running, client)
        assert key in queue.delayed()
        assert await find(client, CLAIMS, claim_name, namespace) is None

        await set_quota(client, namespace, "10", create=False)
        await wait_for(
            lambda: find(client, CLAIMS, claim_name, namespace),
            lambda claim: claim is not None,
            f"claim {claim_name} to be created once the quota allows it",
        )
        await wait_jobs(client, namespace, name, 1)


# ----------------------------------------------------------------------------- storage classes


async def test_a_storage_class_that_does_not_exist_is_named(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """A claim whose storageClassName names no StorageClass is reported as such (it used to be
    "waiting for a volume to be provisioned"), naming the class and the claim. Claims without a
    class (the default class, or none: this tier has none) and with "" (static binding) are merely
    pending. Once the class is created, the status says so without any other change."""
    missing = f"no-such-class-{uuid.uuid4().hex[:8]}"
    name = "classes"
    body = jobset(
        name,
        with_mounts(replicated_job("workers"), "data", "static", "plain"),
        volumeClaimPolicies=[
            {
                "templates": [
                    claim_template("data", storage_class=missing),
                    claim_template("static", storage_class=""),
                    claim_template("plain"),
                ]
            }
        ],
    )
    await client.create(api.JOBSETS, body, namespace)

    def reason(obj: Obj) -> str:
        return str((condition(obj, "VolumesReady") or {}).get("reason") or "")

    reported = await wait_for(
        lambda: get_jobset(client, namespace, name),
        lambda obj: reason(obj) == "StorageClassNotFound",
        "VolumesReady to name the missing storage class",
    )
    ready = condition(reported, "VolumesReady") or {}
    message = str(ready.get("message"))
    assert ready.get("status") == "False", ready
    assert missing in message and f"data-{name}" in message, message
    assert f"static-{name}" not in message and f"plain-{name}" not in message, message

    created = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": missing},
        "provisioner": "example.com/nobody",
        "volumeBindingMode": "Immediate",
    }
    await client.create(STORAGE_CLASSES, created)
    try:
        pending = await wait_for(
            lambda: get_jobset(client, namespace, name),
            lambda obj: reason(obj) == "ClaimsPending",
            "VolumesReady to notice the storage class now exists",
        )
        message = str((condition(pending, "VolumesReady") or {}).get("message"))
        assert f"data-{name}" in message, message
    finally:
        await client.delete(STORAGE_CLASSES, missing)
