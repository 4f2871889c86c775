"""The end-to-end tier's control plane is a real one: scheduling, KWOK pods, Jobs, volumes, GC."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from tests.helpers import Kube, wait_for


def _job(
    name: str,
    *,
    completions: int,
    annotations: dict[str, str] | None = None,
    backoff_limit: int = 6,
    claim: str | None = None,
) -> Any:  # a plain dict: kubernetes_asyncio accepts one where its stubs say V1Job
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "busybox"}],
    }
    if claim:
        pod_spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        pod_spec["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    return {
        "metadata": {"name": name},
        "spec": {
            "completionMode": "Indexed",
            "completions": completions,
            "parallelism": completions,
            "backoffLimit": backoff_limit,
            "template": {"metadata": {"annotations": annotations or {}}, "spec": pod_spec},
        },
    }


def _condition(job: Any, kind: str) -> bool:
    return any(c.type == kind and c.status == "True" for c in (job.status.conditions or []))


async def test_indexed_job_pods_schedule_run_and_succeed(
    full_kube: Kube, full_namespace: str
) -> None:
    ns = full_namespace
    await full_kube.batch.create_namespaced_job(ns, _job("three", completions=3))
    job = await wait_for(
        lambda: full_kube.batch.read_namespaced_job("three", ns),
        lambda j: _condition(j, "Complete"),
        "Job three to be Complete",
    )
    assert job.status.succeeded == 3
    pods = (await full_kube.core.list_namespaced_pod(ns, label_selector="job-name=three")).items
    assert len(pods) == 3
    assert {p.status.phase for p in pods} == {"Succeeded"}
    assert all(p.spec.node_name and p.spec.node_name.startswith("kwok-node-") for p in pods)
    indexes = {p.metadata.annotations["batch.kubernetes.io/job-completion-index"] for p in pods}
    assert indexes == {"0", "1", "2"}


async def test_pod_failing_with_exit_code_fails_the_job(
    full_kube: Kube, full_namespace: str
) -> None:
    ns = full_namespace
    body = _job(
        "doomed", completions=1, backoff_limit=0, annotations={"localcluster.test/exit-code": "42"}
    )
    await full_kube.batch.create_namespaced_job(ns, body)
    job = await wait_for(
        lambda: full_kube.batch.read_namespaced_job("doomed", ns),
        lambda j: _condition(j, "Failed"),
        "Job doomed to be Failed",
    )
    failed = next(c for c in job.status.conditions if c.type == "Failed")
    assert failed.reason == "BackoffLimitExceeded"
    pods = (await full_kube.core.list_namespaced_pod(ns, label_selector="job-name=doomed")).items
    assert [p.status.phase for p in pods] == ["Failed"]
    terminated = pods[0].status.container_statuses[0].state.terminated
    assert terminated.exit_code == 42


def _claim(name: str, storage_class: str, size: str = "1Gi") -> Any:  # a plain dict, as _job
    return {
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": storage_class,
            "resources": {"requests": {"storage": size}},
        },
    }


async def _bound(kube: Kube, ns: str, name: str) -> Any:
    return await wait_for(
        lambda: kube.core.read_namespaced_persistent_volume_claim(name, ns),
        lambda c: c.status.phase == "Bound",
        f"claim {name} to be Bound",
    )


async def test_immediate_claim_binds(full_kube: Kube, full_namespace: str) -> None:
    await full_kube.core.create_namespaced_persistent_volume_claim(
        full_namespace, _claim("plain", "standard")
    )
    claim = await _bound(full_kube, full_namespace, "plain")
    volume = await full_kube.core.read_persistent_volume(claim.spec.volume_name)
    assert volume.spec.claim_ref.name == "plain"
    assert volume.spec.capacity["storage"] == "1Gi"


async def test_wait_for_first_consumer_binds_only_after_scheduling(
    full_kube: Kube, full_namespace: str
) -> None:
    ns = full_namespace
    core = full_kube.core
    await core.create_namespaced_persistent_volume_claim(ns, _claim("lazy", "wffc"))
    # The PV controller marks it as waiting for a consumer; nothing binds yet.
    await wait_for(
        lambda: core.list_namespaced_event(ns, field_selector="involvedObject.name=lazy"),
        lambda events: any(e.reason == "WaitForFirstConsumer" for e in events.items),
        "the WaitForFirstConsumer event on claim lazy",
    )
    claim = await core.read_namespaced_persistent_volume_claim("lazy", ns)
    assert claim.status.phase == "Pending"
    assert not claim.spec.volume_name

    await full_kube.batch.create_namespaced_job(ns, _job("consumer", completions=1, claim="lazy"))
    claim = await _bound(full_kube, ns, "lazy")
    node = claim.metadata.annotations["volume.kubernetes.io/selected-node"]
    volume = await core.read_persistent_volume(claim.spec.volume_name)
    term = volume.spec.node_affinity.required.node_selector_terms[0]
    assert term.match_expressions[0].values == [node]


async def test_expansion_allowed_by_class_only(full_kube: Kube, full_namespace: str) -> None:
    ns = full_namespace
    core = full_kube.core
    for name, storage_class in (("grows", "expandable"), ("stuck", "fixed")):
        await core.create_namespaced_persistent_volume_claim(ns, _claim(name, storage_class))
        await _bound(full_kube, ns, name)
    bigger = {"spec": {"resources": {"requests": {"storage": "2Gi"}}}}

    await core.patch_namespaced_persistent_volume_claim("grows", ns, bigger)
    grown = await wait_for(
        lambda: core.read_namespaced_persistent_volume_claim("grows", ns),
        lambda c: (c.status.capacity or {}).get("storage") == "2Gi",
        "claim grows to report 2Gi capacity",
    )
    assert (await core.read_persistent_volume(grown.spec.volume_name)).spec.capacity == {
        "storage": "2Gi"
    }

    with pytest.raises(ApiException) as raised:
        await core.patch_namespaced_persistent_volume_claim("stuck", ns, bigger)
    assert raised.value.status == 403
    assert "only dynamically provisioned pvc can be resized" in str(raised.value.body)


def _config_map(metadata: dict[str, Any]) -> Any:  # a plain dict, as _job
    return {"metadata": metadata}


async def test_garbage_collector_deletes_dependents(full_kube: Kube, full_namespace: str) -> None:
    ns = full_namespace
    core = full_kube.core
    owner = await core.create_namespaced_config_map(ns, _config_map({"name": "owner"}))
    reference = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "name": "owner",
        "uid": owner.metadata.uid,
    }
    for i in range(3):
        await core.create_namespaced_config_map(
            ns, _config_map({"name": f"dependent-{i}", "ownerReferences": [reference]})
        )
    await core.delete_namespaced_config_map("owner", ns)
    await wait_for(
        lambda: core.list_namespaced_config_map(ns),
        lambda maps: not any(m.metadata.name.startswith("dependent-") for m in maps.items),
        "the garbage collector to delete the dependents",
    )


async def test_kwok_nodes_advertise_gpus(full_kube: Kube) -> None:
    nodes = (
        await full_kube.core.list_node(label_selector="localcluster.test/kwok-node=true")
    ).items
    assert len(nodes) == 4
    for node in nodes:
        assert node.status.allocatable["nvidia.com/gpu"] == "8"
        assert any(c.type == "Ready" and c.status == "True" for c in node.status.conditions)
