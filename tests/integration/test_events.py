"""Event recorder against the real API server: events.k8s.io/v1 Events, repeats as one Event with
a series, and what a core/v1 reader (kubectl describe) sees of them."""

from __future__ import annotations

import asyncio
import datetime
import json
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from controller.runtime.client import CONFIG_MAPS, EVENTS, EVENTS_V1, KubeClient, WriteRefused
from controller.runtime.events import (
    FINISH_AFTER,
    NORMAL,
    RECONCILING,
    WARNING,
    EventRecorder,
    micro_time,
)
from tests.helpers import Kube, wait_for

T0 = datetime.datetime(2026, 12, 1, 12, 0, 0, 123456, tzinfo=datetime.UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime.datetime:
        return self.now


async def _listed(client: KubeClient, namespace: str, *, core: bool) -> dict[str, dict[str, Any]]:
    """The Events of ``namespace`` by reason, read through core/v1 or events.k8s.io/v1."""
    items = (await client.list(EVENTS if core else EVENTS_V1, namespace))["items"]
    by_reason: dict[str, dict[str, Any]] = {}
    for event in items:
        assert event["reason"] not in by_reason, f"two Events of one reason: {items}"
        by_reason[event["reason"]] = event
    return by_reason


async def _subject(client: KubeClient, namespace: str) -> dict[str, Any]:
    subject = await client.create(CONFIG_MAPS, {"metadata": {"name": "subject"}}, namespace)
    subject.update({"apiVersion": "v1", "kind": "ConfigMap"})
    return subject


async def test_an_event_is_written_through_events_k8s_io_with_what_it_requires(
    kube: Kube, namespace: str
) -> None:
    client = KubeClient(kube.api)
    subject = await _subject(client, namespace)
    recorder = EventRecorder(
        client, "test-component", instance="test-component-host", wall_clock=Clock()
    )
    recorder.event(subject, NORMAL, "AllGood", "fine")
    await recorder.flush()

    event = (await _listed(client, namespace, core=False))["AllGood"]
    assert event["reportingController"] == "test-component"
    assert event["reportingInstance"] == "test-component-host"
    assert event["action"] == RECONCILING
    assert (event["type"], event["note"]) == (NORMAL, "fine")
    assert event["regarding"] == {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "namespace": namespace,
        "name": "subject",
        "uid": subject["metadata"]["uid"],
        "resourceVersion": subject["metadata"]["resourceVersion"],
    }
    assert event["eventTime"] == "2026-12-01T12:00:00.123456Z"  # a MicroTime
    assert "series" not in event
    assert event["metadata"]["name"].startswith("subject.")


async def test_repeats_become_one_event_with_a_series(kube: Kube, namespace: str) -> None:
    client = KubeClient(kube.api)
    subject = await _subject(client, namespace)
    clock = Clock()
    recorder = EventRecorder(client, "test-component", wall_clock=clock)
    recorder.event(subject, NORMAL, "AllGood", "fine")
    for _ in range(5):
        clock.now += datetime.timedelta(seconds=10)
        recorder.event(subject, WARNING, "SomethingOdd", "it happened again")
    await recorder.flush()

    # The first repeat is written at once (series.count 2), as client-go does; later ones wait.
    odd = (await _listed(client, namespace, core=False))["SomethingOdd"]
    assert odd["series"]["count"] == 2
    name = odd["metadata"]["name"]

    # Six quiet minutes end the series: its final count is written, to the same object.
    last_repeat = clock.now
    clock.now += FINISH_AFTER
    await recorder.housekeeping()
    by_reason = await _listed(client, namespace, core=False)
    assert set(by_reason) == {"AllGood", "SomethingOdd"}
    odd = by_reason["SomethingOdd"]
    assert odd["metadata"]["name"] == name
    assert odd["series"] == {
        "count": 5,
        "lastObservedTime": last_repeat.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }
    assert odd["eventTime"] == (T0 + datetime.timedelta(seconds=10)).strftime(
        "%Y-%m-%dT%H:%M:%S.%fZ"
    )

    # The same objects read through core/v1, as kubectl describe reads them: involvedObject,
    # message, the series; the deprecated count and source are not set by events.k8s.io writers.
    core = (await _listed(client, namespace, core=True))["SomethingOdd"]
    assert core["involvedObject"]["uid"] == subject["metadata"]["uid"]
    assert core["involvedObject"]["kind"] == "ConfigMap"
    assert core["message"] == "it happened again"
    assert core["type"] == WARNING
    assert core["series"]["count"] == 5
    assert core.get("count") is None, json.dumps(core)
    assert core["reportingComponent"] == "test-component"
    assert not core.get("source"), json.dumps(core)
    # kubectl's field selectors on core/v1 find it.
    selected = await kube.core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=subject,reason=SomethingOdd"
    )
    assert [e.series.count for e in selected.items] == [5]

    # After the series ended, the next occurrence is a new Event.
    recorder.event(subject, WARNING, "SomethingOdd", "it happened again")
    await recorder.flush()
    names = [
        e["metadata"]["name"]
        for e in (await client.list(EVENTS_V1, namespace))["items"]
        if e["reason"] == "SomethingOdd"
    ]
    assert len(names) == 2 and name in names


async def test_the_running_recorder_ends_series_by_itself(kube: Kube, namespace: str) -> None:
    """run() writes as events come and looks at series on its own (every 50 ms here)."""
    client = KubeClient(kube.api)
    subject = await _subject(client, namespace)
    clock = Clock()
    recorder = EventRecorder(client, "test-component", wall_clock=clock)
    running = asyncio.create_task(recorder.run(housekeeping_every=0.05))
    try:
        for _ in range(3):
            recorder.event(subject, WARNING, "SomethingOdd", "again")

        async def series() -> Any:
            found = (await _listed(client, namespace, core=False)).get("SomethingOdd") or {}
            return found.get("series")

        await wait_for(series, bool, "the first repeat's series")
        clock.now += FINISH_AFTER
        final = await wait_for(series, lambda s: s["count"] == 3, "the series' final count")
        assert final["lastObservedTime"] == micro_time(T0)
    finally:
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)


async def test_a_series_whose_event_is_gone_is_created_again(kube: Kube, namespace: str) -> None:
    client = KubeClient(kube.api)
    subject = await _subject(client, namespace)
    clock = Clock()
    recorder = EventRecorder(client, "test-component", wall_clock=clock)
    recorder.event(subject, WARNING, "SomethingOdd", "again")
    await recorder.flush()
    created = (await _listed(client, namespace, core=False))["SomethingOdd"]
    await client.delete(EVENTS_V1, created["metadata"]["name"], namespace)

    for _ in range(3):
        clock.now += datetime.timedelta(seconds=1)
        recorder.event(subject, WARNING, "SomethingOdd", "again")
    await recorder.close()  # shutdown: the unwritten count too

    again = (await _listed(client, namespace, core=False))["SomethingOdd"]
    assert again["metadata"]["name"] == created["metadata"]["name"]
    assert again["series"]["count"] == 4
    assert again["note"] == "again"


async def test_distinct_notes_and_a_new_resource_version_are_distinct_events(
    kube: Kube, namespace: str
) -> None:
    client = KubeClient(kube.api)
    subject = await _subject(client, namespace)
    recorder = EventRecorder(client, "test-component")
    recorder.event(subject, NORMAL, "ClaimCreated", "created claim a")
    recorder.event(subject, NORMAL, "ClaimCreated", "created claim b")
    changed = await client.patch(CONFIG_MAPS, "subject", {"data": {"k": "v"}}, namespace)
    changed.update({"apiVersion": "v1", "kind": "ConfigMap"})
    recorder.event(changed, NORMAL, "ClaimCreated", "created claim a")
    await recorder.flush()

    items = (await client.list(EVENTS_V1, namespace))["items"]
    seen = sorted((e["note"], e["regarding"]["resourceVersion"]) for e in items)
    before, after = subject["metadata"]["resourceVersion"], changed["metadata"]["resourceVersion"]
    assert seen == sorted(
        [("created claim a", before), ("created claim b", before), ("created claim a", after)]
    )
    assert all("series" not in e for e in items)


async def test_a_long_note_is_cut_to_what_the_api_server_accepts(
    kube: Kube, namespace: str
) -> None:
    client = KubeClient(kube.api)
    subject = await _subject(client, namespace)
    recorder = EventRecorder(client, "test-component")
    recorder.event(subject, WARNING, "Long", "é" * 2000)
    await recorder.flush()
    note = (await _listed(client, namespace, core=False))["Long"]["note"]
    assert len(note.encode()) <= 1024
    assert note.endswith("...") and note.startswith("éé")


async def test_an_event_that_cannot_be_written_is_dropped_and_counted(
    kube: Kube, namespace: str
) -> None:
    """Recording is best-effort, never a retry loop: an Event the buffer has no room for (the
    oldest goes), or one the API server refuses, is dropped and counted."""
    client = KubeClient(kube.api)
    subject = await _subject(client, namespace)
    registry = CollectorRegistry()
    recorder = EventRecorder(
        client, "test-component", registry=registry, buffer_size=2, wall_clock=Clock()
    )
    for reason in ("First", "Second", "Third"):
        recorder.event(subject, NORMAL, reason, "buffered")
    await recorder.flush()
    assert sorted(await _listed(client, namespace, core=False)) == ["Second", "Third"]
    assert registry.get_sample_value("events_dropped_total") == 1
    elsewhere = {**subject, "metadata": {**subject["metadata"], "namespace": "no-such-namespace"}}
    recorder.event(elsewhere, WARNING, "Refused", "its namespace does not exist")
    await recorder.flush()  # the 404 is not retried
    assert registry.get_sample_value("events_dropped_total") == 2
    await recorder.flush()
    assert registry.get_sample_value("events_dropped_total") == 2
    assert sorted(await _listed(client, namespace, core=False)) == ["Second", "Third"]


async def test_a_fenced_client_records_nothing(kube: Kube, namespace: str) -> None:
    fenced = KubeClient(kube.api, write_guard=lambda: False)
    recorder = EventRecorder(fenced, "test-component")
    subject = {"apiVersion": "v1", "kind": "ConfigMap",
               "metadata": {"name": "x", "namespace": namespace, "uid": "u"}}  # fmt: skip
    recorder.event(subject, NORMAL, "Ignored", "standby replicas do not write")
    await recorder.flush()
    assert await _listed(KubeClient(kube.api), namespace, core=True) == {}
    with pytest.raises(WriteRefused, match="not the leader"):
        await fenced.create(CONFIG_MAPS, {"metadata": {"name": "y"}}, namespace)
