"""Event recorder against the real API server: created, aggregated, visible to kubectl describe."""

from __future__ import annotations

import pytest

from controller.runtime.client import CONFIG_MAPS, EVENTS, KubeClient, WriteRefused
from controller.runtime.events import NORMAL, WARNING, EventRecorder
from tests.helpers import Kube


async def _events(client: KubeClient, namespace: str) -> list[dict[str, object]]:
    return list((await client.list(EVENTS, namespace))["items"])


async def test_repeats_are_aggregated_into_one_event(kube: Kube, namespace: str) -> None:
    client = KubeClient(kube.api)
    subject = await client.create(CONFIG_MAPS, {"metadata": {"name": "subject"}}, namespace)
    subject.update({"apiVersion": "v1", "kind": "ConfigMap"})
    recorder = EventRecorder(client, "test-component")
    for _ in range(3):
        recorder.event(subject, WARNING, "SomethingOdd", "it happened again")
    recorder.event(subject, NORMAL, "AllGood", "fine")
    await recorder.flush()

    events = await _events(client, namespace)
    by_reason = {e["reason"]: e for e in events}
    assert set(by_reason) == {"SomethingOdd", "AllGood"}
    odd = by_reason["SomethingOdd"]
    assert odd["count"] == 3
    assert odd["type"] == "Warning"
    assert odd["message"] == "it happened again"
    assert odd["involvedObject"]["uid"] == subject["metadata"]["uid"]  # type: ignore[index]
    assert odd["source"] == {"component": "test-component"}


async def test_a_fenced_client_records_nothing(kube: Kube, namespace: str) -> None:
    fenced = KubeClient(kube.api, write_guard=lambda: False)
    recorder = EventRecorder(fenced, "test-component")
    subject = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "x", "namespace": namespace, "uid": "u"}}  # fmt: skip
    recorder.event(subject, NORMAL, "Ignored", "standby replicas do not write")
    await recorder.flush()
    assert await _events(KubeClient(kube.api), namespace) == []
    with pytest.raises(WriteRefused, match="not the leader"):
        await fenced.create(CONFIG_MAPS, {"metadata": {"name": "y"}}, namespace)
