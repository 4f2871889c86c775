"""The Pod-scope admission policy (manifests/pod-scope/) in a test cluster: installing it, removing
it, and knowing by probing when the API server applies it (a policy change takes effect
asynchronously: the API server watches policies and bindings).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from controller.jobset.volumes.model import POD_SCOPE_LABEL
from controller.jobset.volumes.podscope import (
    COMPLETION_INDEX_ANNOTATION,
    POLICY_NAME,
    placeholder_claim_name,
)
from controller.runtime.client import PODS, KubeClient
from localcluster.build import ensure_binaries
from tests.helpers import Kube, wait_for

Obj = dict[str, Any]
POLICY_DIR = Path(__file__).resolve().parents[2] / "manifests" / "pod-scope"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
PROBE = placeholder_claim_name("probe", "js", "workers", 0)


def job_pod(
    claims: dict[str, str],
    index: str | None,
    *,
    labelled: bool = True,
    other_volumes: tuple[Obj, ...] = (),
) -> Obj:
    """A pod as the Job controller creates one of an Indexed Job: its labels, and its completion
    index as an annotation (and label), set at creation; ``claims``: volume name -> claimName."""
    job = f"job-{uuid.uuid4().hex[:6]}"
    labels = {"batch.kubernetes.io/job-name": job, "job-name": job}
    annotations = {}
    if labelled:
        labels[POD_SCOPE_LABEL] = "true"
    if index is not None:
        # The Job controller sets the index as a label too; "-1" or "" would be invalid label
        # values, and only the annotation matters to the policy.
        labels[COMPLETION_INDEX_ANNOTATION] = index if index.isdigit() else "x"
        annotations[COMPLETION_INDEX_ANNOTATION] = index
    volumes = [{"name": n, "persistentVolumeClaim": {"claimName": c}} for n, c in claims.items()]
    mounts = [{"name": n, "mountPath": f"/mnt/{n}"} for n in claims]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": f"{job}-", "labels": labels, "annotations": annotations},
        "spec": {
            "restartPolicy": "Never",
            # No token volume from the ServiceAccount plugin: the volumes are exactly ours.
            "automountServiceAccountToken": False,
            "containers": [{"name": "c", "image": "busybox", "volumeMounts": mounts}],
            "volumes": volumes + list(other_volumes),
        },
    }


async def create_pod(kube: Kube, namespace: str, body: Obj) -> Obj:
    """Create the pod and return it as the API server stored it (after admission)."""
    created: Obj = await kube.raw("POST", f"/api/v1/namespaces/{namespace}/pods", body)
    assert created.get("kind") == "Pod", f"the pod was refused: {created}"
    return created


def claim_names(pod: Obj) -> dict[str, str]:
    """Volume name -> claimName of the pod's claim volumes."""
    return {
        v["name"]: v["persistentVolumeClaim"]["claimName"]
        for v in pod["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }


async def policy_applies(kube: Kube, namespace: str) -> bool:
    """Whether the API server rewrites a probe pod now (the probe is deleted again)."""
    probe = await create_pod(kube, namespace, job_pod({"ckpt": PROBE}, "0"))
    gone: Obj = await kube.raw(
        "DELETE", f"/api/v1/namespaces/{namespace}/pods/{probe['metadata']['name']}"
    )
    assert gone.get("kind") == "Pod", gone
    # Rewritten at all: whether correctly is what the tests check.
    return claim_names(probe)["ckpt"] != PROBE


def install_policy(kube: Kube, *, force_conflicts: bool = False) -> None:
    """``kubectl apply --server-side -k manifests/pod-scope``, as docs/volumes.md says;
    ``force_conflicts``: with ``--force-conflicts``, as the controller says to reinstall an edited
    copy."""
    kubectl = ensure_binaries(lambda _: None).path("kubectl")
    apply = ["apply", "--server-side", *(["--force-conflicts"] if force_conflicts else [])]
    apply += ["-k", str(POLICY_DIR)]
    result = subprocess.run(
        [str(kubectl), f"--kubeconfig={kube.cluster.kubeconfig}", *apply],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


async def remove_policy(kube: Kube) -> None:
    """Delete the binding and the policy (either may be gone already)."""
    for path in (
        f"{ADMISSION}/mutatingadmissionpolicybindings/{POLICY_NAME}",
        f"{ADMISSION}/mutatingadmissionpolicies/{POLICY_NAME}",
    ):
        deleted: Obj = await kube.raw("DELETE", path)
        assert deleted.get("status") == "Success" or deleted.get("code") == 404, deleted


async def wait_until_removed(kube: Kube, namespace: str) -> None:
    await remove_policy(kube)
    await wait_for(
        lambda: policy_applies(kube, namespace),
        lambda applies: not applies,
        "the API server to stop applying the removed Pod-scope policy",
    )


@asynccontextmanager
async def policy_in_effect(kube: Kube, namespace: str) -> AsyncIterator[None]:
    """The shipped policy and binding, applied by the API server; removed (and no longer applied)
    afterwards, so that the session's cluster is left as it was and the next install starts clean
    (a probe cannot mistake a removal still in flight for the new install)."""
    install_policy(kube)
    try:
        await wait_for(
            lambda: policy_applies(kube, namespace),
            lambda applies: applies,
            "the API server to apply the installed Pod-scope policy",
        )
        yield
    finally:
        await wait_until_removed(kube, namespace)


async def wait_policy_applied(client: KubeClient, namespace: str, seconds: float = 60) -> None:
    """For the soak and the benchmark (a process of their own, no ``Kube``): until the API server
    rewrites a probe pod's placeholder claim (it loads policies asynchronously). Each probe, which
    could never run (its claim does not exist), is deleted again."""
    deadline = time.monotonic() + seconds
    while True:
        probe = await client.create(PODS, job_pod({"ckpt": PROBE}, "0"), namespace)
        await client.delete(PODS, probe["metadata"]["name"], namespace)
        if claim_names(probe)["ckpt"] != PROBE:
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"the API server did not apply the Pod-scope policy in {seconds} s")
        await asyncio.sleep(0.5)
