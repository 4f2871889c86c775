"""Kueue's API in tests: its resources, queue labels, and waiting for a JobSet's Workload
(tests/e2e/test_kueue.py, tests/node/queued/test_kueue_checkpoint.py)."""

from __future__ import annotations

from typing import Any

from controller.runtime.client import KubeClient, Resource
from localcluster import kueue
from tests.helpers import wait_for
from tests.support.jobsets import condition, get_jobset

Obj = dict[str, Any]

WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")
CLUSTER_QUEUES = Resource(
    "kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", namespaced=False
)
LOCAL_QUEUES = Resource("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue")
PRIORITY_CLASSES = Resource(
    "kueue.x-k8s.io",
    "v1beta2",
    "workloadpriorityclasses",
    "WorkloadPriorityClass",
    namespaced=False,
)
MUTATING_HOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    namespaced=False,
)
VALIDATING_HOOKS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)


def queued(body: Obj, queue: str, priority: str | None = None) -> Obj:
    labels = body["metadata"].setdefault("labels", {})
    labels[kueue.QUEUE_LABEL] = queue
    if priority is not None:
        labels[kueue.PRIORITY_LABEL] = priority
    return body


async def workload_of(client: KubeClient, namespace: str, name: str) -> Obj | None:
    """The Workload Kueue made for JobSet ``name`` (owned by it), or None."""
    js = await get_jobset(client, namespace, name)
    uid = js["metadata"]["uid"]
    for wl in (await client.list(WORKLOADS, namespace))["items"]:
        if any(r.get("uid") == uid for r in wl["metadata"].get("ownerReferences") or []):
            return dict(wl)
    return None


def holds(obj: Obj | None, kind: str, status: str = "True") -> bool:
    return obj is not None and (condition(obj, kind) or {}).get("status") == status


async def wait_workload(
    client: KubeClient, namespace: str, name: str, kind: str, status: str = "True"
) -> Obj:
    found = await wait_for(
        lambda: workload_of(client, namespace, name),
        lambda wl: holds(wl, kind, status),
        f"the Workload of JobSet {name} to have {kind}={status}",
        seconds=90,
    )
    assert found is not None
    return found


async def wait_waiting(client: KubeClient, namespace: str, name: str, reason: str) -> Obj:
    """The Workload once Kueue tried and could not reserve quota for it: ``Pending`` (not enough
    quota now) or ``Inadmissible`` (its queue cannot admit anything, e.g. held)."""
    found = await wait_for(
        lambda: workload_of(client, namespace, name),
        lambda wl: (
            holds(wl, "QuotaReserved", "False")
            and (condition(wl or {}, "QuotaReserved") or {}).get("reason") == reason
        ),
        f"the Workload of JobSet {name} to wait (QuotaReserved=False, {reason})",
        seconds=90,
    )
    assert found is not None
    return found
