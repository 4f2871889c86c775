"""The API server's version as /version reports it, and the refusal below 1.35."""

from __future__ import annotations

from typing import Any

import pytest

from controller.kubeversion import MINIMUM, ServerVersion, refusal, server_version


@pytest.mark.parametrize(
    ("info", "minor"),
    [
        ({"major": "1", "minor": "35", "gitVersion": "v1.35.4"}, (1, 35)),
        ({"major": "1", "minor": "34", "gitVersion": "v1.34.2"}, (1, 34)),
        # Providers add a "+" to the minor.
        ({"major": "1", "minor": "33+", "gitVersion": "v1.33.5-eks-113cf36"}, (1, 33)),
        # The emulation version is what the server behaves as.
        (
            {
                "major": "1",
                "minor": "36",
                "emulationMajor": "1",
                "emulationMinor": "34",
                "gitVersion": "v1.36.0",
            },
            (1, 34),
        ),
        # Built without version stamping: major and minor empty, the emulation version set.
        (
            {
                "major": "",
                "minor": "",
                "emulationMajor": "1",
                "emulationMinor": "37",
                "gitVersion": "v0.0.0-master+$Format:%H$",
            },
            (1, 37),
        ),
        ({"gitVersion": "v1.36.1-gke.1200"}, (1, 36)),
        ({"major": "", "minor": "", "gitVersion": "v0.0.0-master+$Format:%H$"}, None),
        ({}, None),
    ],
)
def test_server_version(info: dict[str, Any], minor: tuple[int, int] | None) -> None:
    assert server_version(info).minor == minor


@pytest.mark.parametrize(
    ("version", "refused"),
    [
        (ServerVersion("v1.35.0", (1, 35)), False),
        (ServerVersion("v1.37.2", (1, 37)), False),
        (ServerVersion("v2.0.0", (2, 0)), False),
        (ServerVersion("v1.34.4", (1, 34)), True),
        (ServerVersion("v1.28.0", (1, 28)), True),
        (ServerVersion("v0.0.0-master", None), False),  # cannot tell: not refused
    ],
)
def test_refusal_below_the_minimum(version: ServerVersion, refused: bool) -> None:
    assert (refusal(version) is not None) == refused


def test_the_refusal_names_the_servers_version_and_the_minimum() -> None:
    assert MINIMUM == (1, 35)
    message = refusal(server_version({"major": "1", "minor": "34", "gitVersion": "v1.34.2"}))
    assert message is not None
    assert message.startswith("the API server runs Kubernetes v1.34.2; this controller needs 1.35")
    emulating = server_version(
        {"major": "1", "minor": "36", "emulationMajor": "1", "emulationMinor": "34",
         "gitVersion": "v1.36.0"}
    )  # fmt: skip
    assert f"{refusal(emulating)}".startswith("the API server runs Kubernetes v1.36.0 (as 1.34);")
