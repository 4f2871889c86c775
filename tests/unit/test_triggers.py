"""Which JobSet events are gathered with its child events: a change of its status alone."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from controller.jobset import triggers

Obj = dict[str, Any]

STORED: Obj = {
    "metadata": {
        "name": "train",
        "namespace": "ns",
        "resourceVersion": "10",
        "generation": 2,
        "labels": {"team": "a"},
        "finalizers": ["jobset.x-k8s.io/volumes"],
    },
    "spec": {"suspend": False, "replicatedJobs": [{"name": "w", "replicas": 2}]},
    "status": {"restarts": 0},
}


def _status(js: Obj) -> None:
    js["status"]["restarts"] = 1


def _spec(js: Obj) -> None:
    js["spec"]["suspend"] = True
    js["metadata"]["generation"] = 3


def _label(js: Obj) -> None:
    js["metadata"]["labels"]["team"] = "b"


def _finalizer_removed(js: Obj) -> None:
    js["metadata"]["finalizers"] = []


def _deleted(js: Obj) -> None:
    js["metadata"]["deletionTimestamp"] = "2026-12-02T00:00:00Z"


def _nothing(js: Obj) -> None:
    pass


@pytest.mark.parametrize(
    ("change", "gathered"),
    [
        pytest.param(_status, True, id="status: our own write's echo"),
        pytest.param(_nothing, True, id="only the resourceVersion (a resync, a no-op update)"),
        pytest.param(_spec, False, id="spec: suspend flipped (Kueue)"),
        pytest.param(_label, False, id="a label"),
        pytest.param(_finalizer_removed, False, id="a finalizer"),
        pytest.param(_deleted, False, id="deletion"),
    ],
)
def test_only_a_status_change_is_gathered(change: Callable[[Obj], None], gathered: bool) -> None:
    new = copy.deepcopy(STORED)
    change(new)
    new["metadata"]["resourceVersion"] = "11"
    assert triggers.status_only(STORED, new) is gathered


def test_a_spec_change_without_a_generation_still_counts() -> None:
    old = {"metadata": {"name": "x"}, "spec": {"suspend": False}}
    new = {"metadata": {"name": "x"}, "spec": {"suspend": True}}
    assert not triggers.status_only(old, new)
    assert triggers.status_only({}, {"metadata": None})
