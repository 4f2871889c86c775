"""Informer and store logic without a server: event handling, diffs, bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest

from controller.runtime.client import CONFIG_MAPS, ApiError, KubeClient
from controller.runtime.informer import Backoff, EventHandler, Informer, _Gone
from controller.runtime.store import CONTROLLER_INDEX, Store, by_label, object_key, split_key


def cm(name: str, version: str, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version, **extra}}


def line(kind: str, obj: object) -> bytes:
    return json.dumps({"type": kind, "object": obj}).encode()


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str, str]] = []

    def handler(self) -> EventHandler:
        def name(o: dict[str, Any]) -> str:
            return str(o["metadata"]["name"])

        def version(o: dict[str, Any]) -> str:
            return str(o["metadata"]["resourceVersion"])

        return EventHandler(
            on_add=lambda o: self.events.append(("add", name(o), version(o))),
            on_update=lambda _, o: self.events.append(("update", name(o), version(o))),
            on_delete=lambda o: self.events.append(("delete", name(o), version(o))),
        )


@pytest.fixture
def informer() -> Informer:
    # The client is never called in these tests: only the event-handling half is exercised.
    return Informer(KubeClient.__new__(KubeClient), CONFIG_MAPS, namespace="ns")


@pytest.fixture
def recorder(informer: Informer) -> Recorder:
    rec = Recorder()
    informer.add_handler(rec.handler())
    return rec


def test_watch_events_update_the_cache_and_notify(informer: Informer, recorder: Recorder) -> None:
    informer.handle_line(line("ADDED", cm("a", "5")))
    informer.handle_line(line("MODIFIED", cm("a", "6")))
    informer.handle_line(line("DELETED", cm("a", "7")))
    assert recorder.events == [("add", "a", "5"), ("update", "a", "6"), ("delete", "a", "7")]
    assert len(informer.store) == 0
    assert informer.resource_version == "7"


def test_cache_never_goes_backwards(informer: Informer, recorder: Recorder) -> None:
    informer.handle_line(line("ADDED", cm("a", "10")))
    informer.handle_line(line("MODIFIED", cm("a", "9")))
    assert informer.store.get("ns/a")["metadata"]["resourceVersion"] == "10"  # type: ignore[index]
    assert recorder.events == [("add", "a", "10")]
    assert informer.resource_version == "10"


def test_bookmark_moves_the_resource_version_only(informer: Informer, recorder: Recorder) -> None:
    informer.handle_line(line("BOOKMARK", {"metadata": {"resourceVersion": "42"}}))
    assert informer.resource_version == "42"
    assert recorder.events == []


@pytest.mark.parametrize(
    "raw",
    [
        b"not json at all",
        b"[1, 2, 3]",
        json.dumps({"type": "SURPRISE", "object": cm("a", "1")}).encode(),
        json.dumps({"type": "ADDED"}).encode(),
        json.dumps({"type": "ADDED", "object": {"metadata": {"name": 7}}}).encode(),
        json.dumps({"type": "ADDED", "object": "a string"}).encode(),
        json.dumps({"type": "MODIFIED", "object": {"kind": "ConfigMap"}}).encode(),
    ],
)
def test_malformed_events_are_skipped_and_counted(
    informer: Informer, recorder: Recorder, raw: bytes
) -> None:
    informer.handle_line(raw)
    informer.handle_line(line("ADDED", cm("ok", "3")))
    assert informer.malformed_events == 1
    assert recorder.events == [("add", "ok", "3")]


def test_error_410_means_relist(informer: Informer) -> None:
    with pytest.raises(_Gone):
        informer.handle_line(line("ERROR", {"kind": "Status", "code": 410, "message": "too old"}))


def test_other_errors_are_api_errors(informer: Informer) -> None:
    with pytest.raises(ApiError) as raised:
        informer.handle_line(
            line("ERROR", {"kind": "Status", "code": 500, "reason": "InternalError"})
        )
    assert raised.value.status == 500


def test_replace_emits_exactly_the_difference(informer: Informer, recorder: Recorder) -> None:
    for obj in (cm("same", "1"), cm("changed", "1"), cm("gone", "1")):
        informer.handle_line(line("ADDED", obj))
    recorder.events.clear()
    informer.replace([cm("same", "1"), cm("changed", "2"), cm("new", "3")])
    assert sorted(recorder.events) == [
        ("add", "new", "3"),
        ("delete", "gone", "1"),
        ("update", "changed", "2"),
    ]


def test_handler_exceptions_do_not_stop_delivery(informer: Informer, recorder: Recorder) -> None:
    def boom(_: dict[str, Any]) -> None:
        raise RuntimeError("handler bug")

    informer.add_handler(EventHandler(on_add=boom))
    informer.handle_line(line("ADDED", cm("a", "1")))
    assert recorder.events == [("add", "a", "1")]


def test_late_handlers_get_the_cache_replayed(informer: Informer) -> None:
    informer.handle_line(line("ADDED", cm("a", "1")))
    late = Recorder()
    informer.add_handler(late.handler())
    assert late.events == [("add", "a", "1")]


def test_managed_fields_are_stripped(informer: Informer) -> None:
    informer.handle_line(line("ADDED", cm("a", "1", managedFields=[{"manager": "x"}])))
    assert "managedFields" not in informer.store.get("ns/a")["metadata"]  # type: ignore[index]


def test_backoff_grows_caps_and_resets() -> None:
    backoff = Backoff(initial=1.0, cap=8.0, jitter=0.0)
    assert [backoff.next() for _ in range(6)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]
    backoff.reset()
    assert backoff.next() == 1.0


def test_store_indexes_follow_updates_and_removals() -> None:
    store = Store({"jobset": by_label("jobset.sigs.k8s.io/jobset-name")})
    owner = [{"uid": "u1", "controller": True, "kind": "JobSet", "name": "js"}]
    a = cm("a", "1", labels={"jobset.sigs.k8s.io/jobset-name": "js"}, ownerReferences=owner)
    store.put(a)
    assert [object_key(o) for o in store.by_index("jobset", "ns/js")] == ["ns/a"]
    assert [object_key(o) for o in store.by_index(CONTROLLER_INDEX, "u1")] == ["ns/a"]
    store.put(cm("a", "2", labels={"jobset.sigs.k8s.io/jobset-name": "other"}))
    assert store.by_index("jobset", "ns/js") == []
    assert store.by_index(CONTROLLER_INDEX, "u1") == []
    store.remove("ns/a")
    assert store.by_index("jobset", "ns/other") == []
    assert split_key("ns/a") == ("ns", "a")
    assert split_key("cluster-scoped") == (None, "cluster-scoped")
