"""The soak's reading of what it sees: which answers mean the API server is still starting, and
which pods KWOK left behind."""

from __future__ import annotations

import datetime

import pytest

from controller.runtime.client import ApiError
from tests.soak.chaos import stuck_pods
from tests.soak.driver import starting
from tests.soak.scenarios import FAIL_AFTER, RUN_DURATION

NOT_SERVED = {"kind": "Status", "reason": "NotFound", "details": {}, "code": 404,
              "message": "the server could not find the requested resource"}  # fmt: skip
NO_OBJECT = {"kind": "Status", "reason": "NotFound", "code": 404,
             "details": {"name": "a", "group": "jobset.x-k8s.io", "kind": "jobsets"},
             "message": 'jobsets.jobset.x-k8s.io "a" not found'}  # fmt: skip


NOT_READY = {"kind": "Status", "reason": "Forbidden", "code": 403,
             "message": 'jobsets "a" is forbidden: not yet ready to handle request'}  # fmt: skip


@pytest.mark.parametrize(
    ("status", "body", "away"),
    [
        pytest.param(404, NOT_SERVED, True, id="resource-not-served-yet"),
        pytest.param(404, None, True, id="bare-404"),
        pytest.param(404, NO_OBJECT, False, id="object-not-found"),
        pytest.param(409, NOT_SERVED | {"code": 409}, False, id="not-a-404"),
        pytest.param(403, NOT_READY, True, id="admission-not-ready"),
        pytest.param(
            403, NOT_READY | {"message": "jobsets is forbidden: User x"}, False, id="forbidden"
        ),
    ],
)
def test_an_api_server_starting_is_away(
    status: int, body: dict[str, object] | None, away: bool
) -> None:
    assert starting(ApiError(status, body, "POST", "/apis/jobset.x-k8s.io/v1alpha2")) is away


T = 1_000_000.0  # now, in epoch seconds


Pod = dict[str, object]


def _pod(phase: str, *, node: str = "n1", created: float = T - 100, started: float | None = None,
         run: str | None = "12s", fail: str | None = None,
         deleting: bool = False) -> Pod:  # fmt: skip
    def stamp(at: float) -> str:
        return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    annotations = {k: v for k, v in ((RUN_DURATION, run), (FAIL_AFTER, fail)) if v is not None}
    meta: dict[str, object] = {"name": "p", "creationTimestamp": stamp(created),
                               "annotations": annotations}  # fmt: skip
    if deleting:
        meta["deletionTimestamp"] = stamp(T)
    status: dict[str, object] = {"phase": phase}
    if started is not None:
        status["startTime"] = stamp(started)
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": status}


@pytest.mark.parametrize(
    ("pod", "stuck"),
    [
        pytest.param(_pod("Running", started=T - 40), True, id="running-past-run-and-margin"),
        pytest.param(_pod("Running", started=T - 25), False, id="running-within-margin"),
        pytest.param(_pod("Running", started=T - 25, fail="2s"), True, id="fail-after-sooner"),
        pytest.param(_pod("Running", started=T - 500, run="600s"), False, id="long-run"),
        pytest.param(_pod("Running", started=T - 500, run=None), False, id="no-duration-known"),
        pytest.param(_pod("Pending", created=T - 30), True, id="bound-pending"),
        pytest.param(_pod("Pending", created=T - 10), False, id="bound-pending-briefly"),
        pytest.param(_pod("Pending", node=""), False, id="unscheduled-is-not-kwoks"),
        pytest.param(_pod("Running", started=T - 40, deleting=True), False, id="being-deleted"),
        pytest.param(_pod("Succeeded", started=T - 40), False, id="finished"),
    ],
)
def test_stuck_pods_are_those_kwok_should_have_moved_on(
    pod: dict[str, object], stuck: bool
) -> None:
    assert stuck_pods([pod], T) == (["p"] if stuck else [])
