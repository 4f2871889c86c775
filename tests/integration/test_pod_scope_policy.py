"""The Pod-scope admission policy (manifests/pod-scope/) on the real API server.

The API server enforces a MutatingAdmissionPolicy itself: no webhook, no controller. Pods are
created here the way the Job controller creates those of an Indexed Job (its labels and the
``batch.kubernetes.io/job-completion-index`` annotation, set at creation); a real Job controller
doing it is tests/e2e/test_pod_scope_jobs.py.

A policy change takes effect asynchronously, so installing and removing it are followed by
probing (tests/support/podscope.py): a probe pod is created until the API server does (or no
longer does) rewrite it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from controller.jobset.volumes.podscope import placeholder_claim_name, resolved_claim_name
from tests.helpers import Kube
from tests.support.podscope import (
    Obj,
    claim_names,
    create_pod,
    job_pod,
    policy_in_effect,
    wait_until_removed,
)

# Placeholders the policy's CEL and resolved_claim_name must agree on: names of every shape the
# controller makes, a long one, and odd ones only the CEL's suffix test matches (code points count
# the same in CEL's size() and Python's len()).
PLACEHOLDERS = [
    placeholder_claim_name("ckpt", "train", "workers", 0),
    placeholder_claim_name("ckpt", "train", "Workers", 12),
    placeholder_claim_name("a.b", "js", "pod-index", 3),
    placeholder_claim_name("x" * 150, "y" * 60, "z" * 20, 99999),
    "é-ü-POD-INDEX",
    "-POD-INDEX",
]


@pytest.fixture
async def policy(kube: Kube, namespace: str) -> AsyncIterator[None]:
    """The shipped policy and binding, in effect for the test (tests/support/podscope.py)."""
    # No kube-controller-manager in this profile: the pods' ServiceAccount is made here.
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}}
    made: Obj = await kube.raw("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", account)
    assert made.get("kind") == "ServiceAccount", made
    async with policy_in_effect(kube, namespace):
        yield


# -------------------------------------------------------------------------------------- tests


@pytest.mark.usefixtures("policy")
async def test_each_completion_index_gets_its_own_claim(kube: Kube, namespace: str) -> None:
    placeholder = placeholder_claim_name("ckpt", "train", "workers", 1)
    names = []
    for index in range(3):
        pod = await create_pod(kube, namespace, job_pod({"ckpt": placeholder}, str(index)))
        names.append(claim_names(pod)["ckpt"])
    assert names == ["ckpt-train-workers-1-0", "ckpt-train-workers-1-1", "ckpt-train-workers-1-2"]


@pytest.mark.usefixtures("policy")
async def test_the_policy_computes_exactly_resolved_claim_name(kube: Kube, namespace: str) -> None:
    """Several placeholders in one pod (each its own volume), for several indexes."""
    claims = {f"v{i}": p for i, p in enumerate(PLACEHOLDERS)}
    for index in (0, 7, 123456):
        pod = await create_pod(kube, namespace, job_pod(claims, str(index)))
        expected = {v: resolved_claim_name(p, index) for v, p in claims.items()}
        assert claim_names(pod) == expected


@pytest.mark.usefixtures("policy")
@pytest.mark.parametrize("index", [None, "01", "-1", "1x", ""])
async def test_without_a_canonical_index_the_placeholder_stays(
    kube: Kube, namespace: str, index: str | None
) -> None:
    """No index annotation (or one the Job controller never writes): untouched, so it waits."""
    placeholder = placeholder_claim_name("ckpt", "train", "workers", 0)
    pod = await create_pod(kube, namespace, job_pod({"ckpt": placeholder}, index))
    assert claim_names(pod) == {"ckpt": placeholder}


@pytest.mark.usefixtures("policy")
async def test_a_pod_without_the_label_is_untouched(kube: Kube, namespace: str) -> None:
    """A pod of a JobSet without Pod scope: not selected, even with a placeholder-like name."""
    placeholder = placeholder_claim_name("ckpt", "train", "workers", 0)
    pod = await create_pod(kube, namespace, job_pod({"ckpt": placeholder}, "2", labelled=False))
    assert claim_names(pod) == {"ckpt": placeholder}


@pytest.mark.usefixtures("policy")
async def test_other_volumes_are_untouched(kube: Kube, namespace: str) -> None:
    placeholder = placeholder_claim_name("ckpt", "train", "workers", 0)
    # Written as the API server stores them (a ConfigMap volume's defaultMode filled in), so
    # that "untouched" is plain equality.
    others: tuple[Obj, ...] = (
        {"name": "dataset", "persistentVolumeClaim": {"claimName": "data-train", "readOnly": True}},
        {"name": "job-scope", "persistentVolumeClaim": {"claimName": "ckpt-train-workers-0"}},
        {"name": "lowercase", "persistentVolumeClaim": {"claimName": "ckpt-js-w-0-pod-index"}},
        {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
        {"name": "config", "configMap": {"name": "settings", "optional": True, "defaultMode": 420}},
    )
    body = job_pod({"ckpt": placeholder}, "4", other_volumes=others)
    body["spec"]["volumes"][0]["persistentVolumeClaim"]["readOnly"] = True
    pod = await create_pod(kube, namespace, body)
    # The same volumes in the same order; only the placeholder's claimName rewritten (its
    # readOnly kept).
    resolved = {"claimName": "ckpt-train-workers-0-4", "readOnly": True}
    assert pod["spec"]["volumes"] == [
        {"name": "ckpt", "persistentVolumeClaim": resolved},
        *others,
    ]


@pytest.mark.usefixtures("policy")
async def test_without_the_policy_the_claim_can_never_exist(kube: Kube, namespace: str) -> None:
    """Fail closed: once the policy is gone a new pod keeps the placeholder, and no claim of that
    name can ever be made, so the pod waits instead of mounting anything."""
    await wait_until_removed(kube, namespace)
    placeholder = placeholder_claim_name("ckpt", "train", "workers", 0)
    pod = await create_pod(kube, namespace, job_pod({"ckpt": placeholder}, "0"))
    assert claim_names(pod) == {"ckpt": placeholder}
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": placeholder},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    refused: Obj = await kube.raw(
        "POST", f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", claim
    )
    assert (refused.get("kind"), refused.get("code")) == ("Status", 422), refused
    assert "lowercase RFC 1123 subdomain" in refused["message"]
