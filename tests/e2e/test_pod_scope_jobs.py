"""The Pod-scope admission policy with the real Job controller creating the pods.

tests/integration/test_pod_scope_policy.py builds pods in the Job controller's shape; here an
Indexed Job whose pod template carries the placeholder claim and the Pod-scope label, as the
JobSet controller will write it, gets its pods from kube-controller-manager: each pod has its
index's claim, and a pod replaced within its Job (same index) gets the same claim again; without
the policy the pods wait, unschedulable, for a claim that cannot exist.
"""

from __future__ import annotations

from typing import Any

from controller.jobset.volumes.model import POD_SCOPE_LABEL
from controller.jobset.volumes.podscope import (
    COMPLETION_INDEX_ANNOTATION,
    placeholder_claim_name,
    resolved_claim_name,
)
from tests.helpers import Kube, wait_for
from tests.support.podscope import Obj, claim_names, policy_in_effect

PLACEHOLDER = placeholder_claim_name("ckpt", "train", "workers", 1)


def _job(name: str, completions: int) -> Obj:
    pod_spec = {
        "restartPolicy": "Never",
        "containers": [
            {
                "name": "main",
                "image": "busybox",
                "volumeMounts": [{"name": "ckpt", "mountPath": "/c"}],
            }
        ],
        "volumes": [{"name": "ckpt", "persistentVolumeClaim": {"claimName": PLACEHOLDER}}],
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completionMode": "Indexed",
            "completions": completions,
            "parallelism": completions,
            "template": {"metadata": {"labels": {POD_SCOPE_LABEL: "true"}}, "spec": pod_spec},
        },
    }


async def _pods(kube: Kube, namespace: str, job: str) -> list[Obj]:
    """The Job's pods that are not being deleted."""
    found: Obj = await kube.raw(
        "GET", f"/api/v1/namespaces/{namespace}/pods?labelSelector=job-name%3D{job}"
    )
    return [p for p in found["items"] if "deletionTimestamp" not in p["metadata"]]


def _by_index(pods: list[Obj]) -> dict[str, Obj]:
    return {p["metadata"]["annotations"][COMPLETION_INDEX_ANNOTATION]: p for p in pods}


async def test_each_pod_of_an_indexed_job_gets_its_index_claim(
    full_kube: Kube, full_namespace: str
) -> None:
    ns = full_namespace
    async with policy_in_effect(full_kube, ns):
        created: Any = await full_kube.raw(
            "POST", f"/apis/batch/v1/namespaces/{ns}/jobs", _job("w", 3)
        )
        assert created.get("kind") == "Job", created
        pods = await wait_for(
            lambda: _pods(full_kube, ns, "w"), lambda p: len(p) == 3, "the Job's 3 pods"
        )
        claims = {i: claim_names(p)["ckpt"] for i, p in _by_index(pods).items()}
        assert claims == {str(i): resolved_claim_name(PLACEHOLDER, i) for i in range(3)}
        assert len(set(claims.values())) == 3

        # The claims do not exist, so the pods wait (unschedulable); delete one: the Job
        # controller replaces it with a new pod of the same index, which gets the same claim.
        old = _by_index(pods)["1"]["metadata"]
        deleted: Any = await full_kube.raw("DELETE", f"/api/v1/namespaces/{ns}/pods/{old['name']}")
        assert deleted.get("kind") == "Pod", deleted
        pods = await wait_for(
            lambda: _pods(full_kube, ns, "w"),
            lambda p: "1" in _by_index(p) and _by_index(p)["1"]["metadata"]["uid"] != old["uid"],
            "a new pod for completion index 1",
        )
        assert claim_names(_by_index(pods)["1"]) == {"ckpt": claims["1"]}


def _unschedulable_for(pod: Obj) -> str:
    """The scheduler's message when it could not place the pod ("" while it has not said)."""
    for condition in pod.get("status", {}).get("conditions", []):
        if condition["type"] == "PodScheduled" and condition["status"] == "False":
            return str(condition.get("message", ""))
    return ""


async def test_without_the_policy_the_pods_wait_for_a_claim_that_cannot_exist(
    full_kube: Kube, full_namespace: str
) -> None:
    """Fail closed with the real Job controller and scheduler: the policy was never installed."""
    ns = full_namespace
    created: Any = await full_kube.raw("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", _job("w", 2))
    assert created.get("kind") == "Job", created
    pods = await wait_for(
        lambda: _pods(full_kube, ns, "w"),
        lambda p: len(p) == 2 and all(_unschedulable_for(q) for q in p),
        "the Job's 2 pods, reported unschedulable by the scheduler",
    )
    for pod in pods:
        assert claim_names(pod) == {"ckpt": PLACEHOLDER}
        assert f'persistentvolumeclaim "{PLACEHOLDER}" not found' in _unschedulable_for(pod)
