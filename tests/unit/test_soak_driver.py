"""The soak driver's reading of the API server's answers: which mean it is still starting."""

from __future__ import annotations

import pytest

from controller.runtime.client import ApiError
from tests.soak.driver import starting

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
