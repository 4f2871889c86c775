"""finalizers: the JSON patches adding and removing our finalizer, beside other controllers'."""

from __future__ import annotations

import pytest

from controller.jobset import finalizers
from controller.runtime.store import Obj

OURS = "jobset.x-k8s.io/volume-retention"
THEIRS = "example.com/audit"
RV_TEST: Obj = {"op": "test", "path": "/metadata/resourceVersion", "value": "41"}


@pytest.mark.parametrize(
    ("metadata", "patch"),
    [
        pytest.param({"resourceVersion": "41"},
                     [RV_TEST,
                      {"op": "add", "path": "/metadata/finalizers", "value": [OURS]}],
                     id="no-finalizers"),
        pytest.param({"resourceVersion": "41", "finalizers": []},
                     [RV_TEST,
                      {"op": "add", "path": "/metadata/finalizers", "value": [OURS]}],
                     id="empty-list"),
        # Appended, so another controller's finalizer is kept; the resourceVersion test makes a
        # concurrent change a conflict instead of a lost update.
        pytest.param({"resourceVersion": "41", "finalizers": [THEIRS]},
                     [RV_TEST,
                      {"op": "add", "path": "/metadata/finalizers/-", "value": OURS}],
                     id="after-another"),
        pytest.param({"resourceVersion": "41", "finalizers": [OURS]}, None, id="already-there"),
        pytest.param({"resourceVersion": "41", "finalizers": [THEIRS, OURS]}, None,
                     id="already-there-second"),
    ],
)  # fmt: skip
def test_add_patch(metadata: Obj, patch: list[Obj] | None) -> None:
    assert finalizers.add_patch(metadata, OURS) == patch


@pytest.mark.parametrize(
    ("metadata", "patch"),
    [
        pytest.param({"finalizers": [OURS]},
                     [{"op": "test", "path": "/metadata/finalizers/0", "value": OURS},
                      {"op": "remove", "path": "/metadata/finalizers/0"}],
                     id="only-ours"),
        # By the index where we saw it, guarded by a test that it is still ours there.
        pytest.param({"finalizers": [THEIRS, OURS, "example.com/other"]},
                     [{"op": "test", "path": "/metadata/finalizers/1", "value": OURS},
                      {"op": "remove", "path": "/metadata/finalizers/1"}],
                     id="between-others"),
        pytest.param({"finalizers": [THEIRS]}, None, id="not-ours"),
        pytest.param({"finalizers": []}, None, id="empty"),
        pytest.param({}, None, id="absent"),
    ],
)  # fmt: skip
def test_remove_patch(metadata: Obj, patch: list[Obj] | None) -> None:
    assert finalizers.remove_patch(metadata, OURS) == patch
