"""The project's example manifests (``manifests/examples/``): what tests, the demo and the docs use.

``01``-``04`` are the specification's examples (the original request's among them); the others are
their variants for the local control plane. Every example is accepted by admission and renders,
except those in :data:`REFUSED`, which show what admission says about a feature not built yet.
"""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

EXAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "examples"


class Refusal(NamedTuple):
    admission: str  # in the API server's 422 message
    parser: str  # in the controller's (and ``render``'s) InvalidJobSet message


REFUSED = {
    "04-per-pod-rank-checkpoints.yaml": Refusal(
        admission="scope Pod is not supported yet", parser="Pod scope is not supported yet"
    )
}

SUPPORTED = sorted(p for p in EXAMPLES.glob("*.yaml") if p.name not in REFUSED)
