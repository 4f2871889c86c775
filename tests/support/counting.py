"""Counting calls, for tests that prove a path cheap by how often it runs (not by timing)."""

from __future__ import annotations

from typing import Any

import pytest


class CallCounter:
    """Replaces ``owner.attr`` with a wrapper that counts its calls (the original still runs);
    ``monkeypatch`` puts the original back after the test."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, owner: Any, attr: str) -> None:
        self.count = 0
        real = getattr(owner, attr)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, attr, counted)
