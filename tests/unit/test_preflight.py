"""preflight: another controller's JobSet is left alone; a cache older than our write waits."""

from __future__ import annotations

from typing import Any

import pytest

from controller.jobset import api, preflight
from controller.runtime.store import Obj


def _with_rv(version: Any) -> Obj:
    return {"metadata": {"name": "js", "resourceVersion": version}}


def test_stale_requeue_is_short() -> None:
    assert preflight.STALE_REQUEUE_AFTER == 0.2


CANARY = "example.com/canary"


@pytest.mark.parametrize(
    ("obj", "serves", "elsewhere"),
    [
        # Serving upstream's reserved value (the default): a drop-in for upstream.
        pytest.param({"spec": {}}, api.CONTROLLER_NAME, False, id="absent"),
        pytest.param({}, api.CONTROLLER_NAME, False, id="no-spec"),
        pytest.param({"spec": {"managedBy": ""}}, api.CONTROLLER_NAME, False, id="empty"),
        pytest.param(
            {"spec": {"managedBy": api.CONTROLLER_NAME}}, api.CONTROLLER_NAME, False, id="default"
        ),
        pytest.param(
            {"spec": {"managedBy": "kueue.x-k8s.io/multikueue"}},
            api.CONTROLLER_NAME,
            True,
            id="multikueue",
        ),
        pytest.param({"spec": {"managedBy": CANARY}}, api.CONTROLLER_NAME, True, id="canary's"),
        pytest.param({"spec": {"managedBy": 7}}, api.CONTROLLER_NAME, False, id="not-a-string"),
        pytest.param({"spec": None}, api.CONTROLLER_NAME, False, id="spec-null"),
        # Serving another value (a canary beside upstream): only JobSets naming it.
        pytest.param({"spec": {"managedBy": CANARY}}, CANARY, False, id="canary-ours"),
        pytest.param({"spec": {}}, CANARY, True, id="canary-absent-is-upstream's"),
        pytest.param({}, CANARY, True, id="canary-no-spec"),
        pytest.param({"spec": {"managedBy": ""}}, CANARY, True, id="canary-empty"),
        pytest.param(
            {"spec": {"managedBy": api.CONTROLLER_NAME}}, CANARY, True, id="canary-default"
        ),
        pytest.param(
            {"spec": {"managedBy": "example.com/canary2"}}, CANARY, True, id="canary-prefix-only"
        ),
        pytest.param({"spec": {"managedBy": 7}}, CANARY, True, id="canary-not-a-string"),
    ],
)
def test_managed_elsewhere(obj: Obj, serves: str, elsewhere: bool) -> None:
    assert preflight.managed_elsewhere(obj, serves) is elsewhere


@pytest.mark.parametrize(
    ("obj", "version"),
    [
        pytest.param(_with_rv("1234"), 1234, id="numeric"),
        pytest.param(_with_rv(""), None, id="empty"),
        pytest.param({"metadata": {}}, None, id="absent"),
        pytest.param({}, None, id="no-metadata"),
        pytest.param(_with_rv("abc"), None, id="opaque"),
        pytest.param(_with_rv("-3"), None, id="negative"),
        pytest.param(_with_rv("²"), None, id="superscript-is-not-a-number"),
    ],
)
def test_resource_version(obj: Obj, version: int | None) -> None:
    assert preflight.resource_version(obj) == version


@pytest.mark.parametrize(
    ("cached", "last_written", "stale"),
    [
        pytest.param(_with_rv("100"), None, False, id="never-written"),
        pytest.param(_with_rv("99"), 100, True, id="older-than-our-write"),
        pytest.param(_with_rv("100"), 100, False, id="shows-our-write"),
        pytest.param(_with_rv("150"), 100, False, id="newer-than-our-write"),
        # Lexically "99" > "100": the comparison must be numeric.
        pytest.param(_with_rv("99"), 1000, True, id="numeric-not-lexical"),
        pytest.param(_with_rv("abc"), 100, False, id="opaque-never-stale"),
        pytest.param({"metadata": {}}, 100, False, id="no-version-never-stale"),
    ],
)
def test_is_stale(cached: Obj, last_written: int | None, stale: bool) -> None:
    assert preflight.is_stale(cached, last_written) is stale


@pytest.mark.parametrize(
    ("last_written", "written", "remembered"),
    [
        pytest.param(None, _with_rv("7"), 7, id="first-write"),
        pytest.param(5, _with_rv("7"), 7, id="newer-write"),
        pytest.param(5, _with_rv(""), 5, id="answer-without-version-keeps"),
        pytest.param(None, {}, None, id="nothing-to-remember"),
    ],
)
def test_remember(last_written: int | None, written: Obj, remembered: int | None) -> None:
    assert preflight.remember(last_written, written) == remembered
