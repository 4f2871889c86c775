"""The soak driver's reading of the API server's answers: which 404 means "away"."""

from __future__ import annotations

import pytest

from controller.runtime.client import ApiError
from tests.soak.driver import not_served

NOT_SERVED = {"kind": "Status", "reason": "NotFound", "details": {}, "code": 404,
              "message": "the server could not find the requested resource"}  # fmt: skip
NO_OBJECT = {"kind": "Status", "reason": "NotFound", "code": 404,
             "details": {"name": "a", "group": "jobset.x-k8s.io", "kind": "jobsets"},
             "message": 'jobsets.jobset.x-k8s.io "a" not found'}  # fmt: skip


@pytest.mark.parametrize(
    ("status", "body", "away"),
    [
        pytest.param(404, NOT_SERVED, True, id="resource-not-served-yet"),
        pytest.param(404, None, True, id="bare-404"),
        pytest.param(404, NO_OBJECT, False, id="object-not-found"),
        pytest.param(409, NOT_SERVED | {"code": 409}, False, id="not-a-404"),
    ],
)
def test_a_404_naming_no_object_is_the_api_server_away(
    status: int, body: dict[str, object] | None, away: bool
) -> None:
    assert not_served(ApiError(status, body, "POST", "/apis/jobset.x-k8s.io/v1alpha2")) is away
