"""Event correlation (which writes repeats need, and when) and the Event's fields, with an
injected clock: client-go tools/events semantics, the note kept in the key."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from controller.runtime.events import (
    FINISH_AFTER,
    REFRESH_EVERY,
    Correlator,
    event_name,
    micro_time,
    reference,
    truncate_utf8,
)

T0 = datetime.datetime(2026, 12, 1, 12, 0, 0, 500, tzinfo=datetime.UTC)
MINUTE = datetime.timedelta(minutes=1)


def body(
    reason: str = "Odd", note: str = "n", *, rv: str = "7", name: str = "js"
) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{name}.1", "namespace": "ns"},
        "regarding": {"kind": "JobSet", "name": name, "uid": "u", "resourceVersion": rv},
        "type": "Warning",
        "reason": reason,
        "action": "Reconciling",
        "reportingController": "c",
        "reportingInstance": "c-host",
        "note": note,
    }


def written(writes: list[Any]) -> list[tuple[str, int | None]]:
    """(reason, series count or None for a create) of each write."""
    return [(w.body["reason"], w.series and w.series["count"]) for w in writes]


def test_first_creates_first_repeat_patches_later_repeats_wait() -> None:
    c = Correlator()
    assert written(c.observe(body(), T0)) == [("Odd", None)]
    second = c.observe(body(), T0 + MINUTE)
    assert written(second) == [("Odd", 2)]
    assert second[0].series == {"count": 2, "lastObservedTime": micro_time(T0 + MINUTE)}
    for i in range(2, 5):
        assert c.observe(body(), T0 + i * MINUTE) == []
    assert c.due(T0 + 4 * MINUTE + FINISH_AFTER - datetime.timedelta(microseconds=1)) == []


def test_a_series_ends_after_six_quiet_minutes_with_its_final_count() -> None:
    c = Correlator()
    for i in range(5):
        c.observe(body(), T0 + i * MINUTE)
    last = T0 + 4 * MINUTE
    final = c.due(last + FINISH_AFTER)
    assert written(final) == [("Odd", 5)]
    assert final[0].series == {"count": 5, "lastObservedTime": micro_time(last)}
    assert len(c) == 0
    # The next occurrence starts a new Event.
    assert written(c.observe(body(), last + FINISH_AFTER + MINUTE)) == [("Odd", None)]


def test_an_ended_series_whose_count_was_written_needs_no_more_write() -> None:
    c = Correlator()
    c.observe(body(), T0)
    c.observe(body(), T0 + MINUTE)  # count 2, written at once
    assert c.due(T0 + MINUTE + FINISH_AFTER) == []
    assert len(c) == 0


def test_a_singleton_is_forgotten_after_six_minutes() -> None:
    c = Correlator()
    c.observe(body(), T0)
    assert c.due(T0 + FINISH_AFTER - MINUTE) == [] and len(c) == 1
    assert c.due(T0 + FINISH_AFTER) == [] and len(c) == 0
    assert written(c.observe(body(), T0 + FINISH_AFTER)) == [("Odd", None)]


def test_a_series_going_on_is_written_every_thirty_minutes() -> None:
    c = Correlator()
    c.observe(body(), T0)
    c.observe(body(), T0 + MINUTE)  # written: count 2
    refreshes = []
    now = T0 + MINUTE
    for _ in range(62):  # a repeat a minute for an hour: the series never ends
        now += MINUTE
        c.observe(body(), now)
        refreshes += [(now - T0, w.count) for w in c.due(now)]
    assert refreshes == [(REFRESH_EVERY + MINUTE, 32), (2 * REFRESH_EVERY + MINUTE, 62)]


@pytest.mark.parametrize(
    ("other", "same"),
    [
        (body(), True),
        (body(note="other"), False),  # unlike client-go: distinct messages stay distinct
        (body(reason="Other"), False),
        (body(rv="8"), False),  # regarding includes the resourceVersion, as client-go's
        (body(name="other"), False),
        ({**body(), "type": "Normal"}, False),
        ({**body(), "action": "Deleting"}, False),
        ({**body(), "reportingInstance": "c-other"}, False),
    ],
)
def test_the_isomorphic_key(other: dict[str, Any], same: bool) -> None:
    c = Correlator()
    c.observe(body(), T0)
    assert written(c.observe(other, T0 + MINUTE)) == (
        [("Odd", 2)] if same else [(other["reason"], None)]
    )


def test_the_least_recently_observed_is_forgotten_its_count_written() -> None:
    c = Correlator(capacity=2)
    for _ in range(3):
        c.observe(body("A"), T0)  # count 3, 2 written
    c.observe(body("B"), T0)
    assert written(c.observe(body("C"), T0)) == [("C", None), ("A", 3)]
    assert len(c) == 2
    assert written(c.observe(body("B"), T0)) == [("B", 2)]  # B was kept


def test_unwritten_counts_on_shutdown() -> None:
    c = Correlator()
    c.observe(body("A"), T0)
    c.observe(body("B"), T0)
    c.observe(body("B"), T0)  # written
    for _ in range(3):
        c.observe(body("C"), T0)
    assert written(c.unwritten(T0)) == [("C", 3)]
    assert c.unwritten(T0) == []


def test_notes_are_cut_to_bytes_on_a_character_boundary() -> None:
    assert truncate_utf8("short", 1024) == "short"
    assert truncate_utf8("x" * 1024, 1024) == "x" * 1024
    cut = truncate_utf8("é" * 600, 1024)  # 1200 bytes
    assert len(cut.encode()) <= 1024 and cut == "é" * 510 + "..."


def test_micro_time_keeps_microseconds_in_utc() -> None:
    assert micro_time(T0) == "2026-12-01T12:00:00.000500Z"
    plus_two = datetime.timezone(datetime.timedelta(hours=2))
    assert micro_time(T0.astimezone(plus_two)) == "2026-12-01T12:00:00.000500Z"


def test_event_names_as_client_go_or_random_when_invalid() -> None:
    assert event_name("js", 255) == "js.ff"
    for bad in ("x" * 251, "Upper"):
        name = event_name(bad, 255)
        assert len(name) == 36 and name.count("-") == 4, name


def test_reference_keeps_the_fields_present() -> None:
    obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "uid": "u"}}
    assert reference(obj) == {"apiVersion": "v1", "kind": "ConfigMap", "name": "a", "uid": "u"}
