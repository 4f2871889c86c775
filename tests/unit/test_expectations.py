"""expectations: creates we made stay out of the plan until the cache shows them, or 30 s pass."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from controller.jobset import expectations
from controller.runtime.store import Obj


def _job(name: str) -> Obj:
    return {"metadata": {"name": name}}


def test_ttl_is_thirty_seconds() -> None:
    assert expectations.EXPECTATION_TTL == 30.0


@pytest.mark.parametrize(
    ("expected", "names", "now", "result"),
    [
        pytest.param({}, [], 5.0, {}, id="nothing-created"),
        pytest.param({}, ["js-a-0"], 5.0, {"js-a-0": 5.0}, id="first-create"),
        pytest.param({"js-a-0": 1.0}, ["js-a-1", "js-a-2"], 5.0,
                     {"js-a-0": 1.0, "js-a-1": 5.0, "js-a-2": 5.0}, id="more-creates-keep-older"),
        pytest.param({"js-a-0": 1.0}, ["js-a-0"], 5.0, {"js-a-0": 5.0},
                     id="created-again-restarts-clock"),
    ],
)  # fmt: skip
def test_expect(
    expected: Mapping[str, float], names: list[str], now: float, result: dict[str, float]
) -> None:
    before = dict(expected)
    assert expectations.expect(expected, names, now) == result
    assert expected == before  # pure: the input is not changed


@pytest.mark.parametrize(
    ("expected", "seen", "result"),
    [
        pytest.param({}, ["js-a-0"], {}, id="nothing-expected"),
        pytest.param({"js-a-0": 1.0, "js-a-1": 1.0}, [], {"js-a-0": 1.0, "js-a-1": 1.0},
                     id="cache-shows-none-yet"),
        pytest.param({"js-a-0": 1.0, "js-a-1": 1.0}, ["js-a-0"], {"js-a-1": 1.0},
                     id="cache-shows-one"),
        pytest.param({"js-a-0": 1.0}, ["js-a-0", "js-b-0"], {}, id="cache-shows-all-and-more"),
    ],
)  # fmt: skip
def test_observe(expected: Mapping[str, float], seen: list[str], result: dict[str, float]) -> None:
    before = dict(expected)
    assert expectations.observe(expected, seen) == result
    assert expected == before


@pytest.mark.parametrize(
    ("expected", "now", "result"),
    [
        pytest.param({}, 100.0, {}, id="empty"),
        pytest.param({"js-a-0": 100.0}, 100.0, {"js-a-0": 100.0}, id="just-created"),
        pytest.param({"js-a-0": 100.0}, 129.9, {"js-a-0": 100.0}, id="just-before-ttl"),
        pytest.param({"js-a-0": 100.0}, 130.0, {}, id="lapses-at-ttl"),
        pytest.param({"js-a-0": 100.0, "js-a-1": 110.0}, 135.0, {"js-a-1": 110.0},
                     id="older-lapses-newer-stays"),
    ],
)  # fmt: skip
def test_live(expected: Mapping[str, float], now: float, result: dict[str, float]) -> None:
    assert expectations.live(expected, now) == result


@pytest.mark.parametrize(
    ("creates", "expected", "now", "sent"),
    [
        pytest.param(["js-a-0", "js-a-1"], {}, 100.0, ["js-a-0", "js-a-1"],
                     id="nothing-expected-all-sent"),
        # The informer has not shown js-a-0 yet: posting it again would be a duplicate.
        pytest.param(["js-a-0", "js-a-1"], {"js-a-0": 99.0}, 100.0, ["js-a-1"],
                     id="expected-create-held"),
        pytest.param(["js-a-0", "js-a-1"], {"js-a-0": 99.0, "js-a-1": 99.5}, 100.0, [],
                     id="all-expected"),
        # The cache never showed it in 30 s (lost watch event, deleted before seen): plan it
        # again; the deterministic name makes a repeat a harmless 409.
        pytest.param(["js-a-0"], {"js-a-0": 70.0}, 100.0, ["js-a-0"], id="lapsed-sent-again"),
        pytest.param([], {"js-a-0": 99.0}, 100.0, [], id="no-creates"),
        pytest.param(["js-b-0", "js-a-0"], {"js-x-0": 99.0}, 100.0, ["js-b-0", "js-a-0"],
                     id="order-kept-unrelated-expectation"),
    ],
)  # fmt: skip
def test_creates_to_send(
    creates: Sequence[str], expected: Mapping[str, float], now: float, sent: list[str]
) -> None:
    jobs = [_job(name) for name in creates]
    result = expectations.creates_to_send(jobs, expected, now)
    assert [job["metadata"]["name"] for job in result] == sent


def test_one_create_through_its_life() -> None:
    """The reconciler's sequence: create, a pass before the cache caught up, the cache shows it."""
    expected = expectations.expect({}, ["js-a-0"], 10.0)
    plan = [_job("js-a-0")]
    assert expectations.creates_to_send(plan, expected, 10.1) == []  # cache is behind
    expected = expectations.observe(expected, ["js-a-0"])  # cache caught up
    assert expected == {}
    # Deleted later (a restart): the same name is created again at once.
    assert expectations.creates_to_send(plan, expected, 50.0) == plan
