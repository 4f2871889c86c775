"""The project's example manifests (``manifests/examples/``): what tests, the demo and the docs use.

``01``-``04`` are the specification's examples (the original request's among them); the others are
their variants for the local control plane. Every example is accepted by admission and renders.
"""

from __future__ import annotations

from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "examples"

SUPPORTED = sorted(EXAMPLES.glob("*.yaml"))
