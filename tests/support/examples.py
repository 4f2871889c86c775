"""The specification's example manifests (shared/spec/examples, beside the repository)."""

from __future__ import annotations

from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[2]
EXAMPLES = _REPO.parent / "shared" / "spec" / "examples"

if not EXAMPLES.is_dir():  # pragma: no cover - a broken checkout, not a test outcome
    pytest.fail(
        f"the example manifests are missing: expected {EXAMPLES} (shared/ beside the repository)",
        pytrace=False,
    )
