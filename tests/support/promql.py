"""Rough PromQL reading for tests: which metric names a query reads."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

DASHBOARD = (
    Path(__file__).resolve().parents[2] / "manifests" / "dashboards" / "stateful-jobset.json"
)
PROMQL_WORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads (roughly: enough for the queries shipped)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # strings (label values, legends)
    text = re.sub(r"\$\{?\w+\}?", "", text)  # Grafana variables ($__rate_interval, $job)
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # ranges and subqueries
    text = re.sub(
        r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text
    )  # grouping
    names = set()
    # Not right after a digit or a dot: 1e3, durations.
    for found in re.finditer(r"(?<![\w.])[A-Za-z_:][A-Za-z0-9_:]*", text):
        called = re.match(r"\s*\(", text[found.end() :]) is not None
        if not called and found.group(0).lower() not in PROMQL_WORDS:
            names.add(found.group(0))
    return names


def dashboard_queries(path: Path = DASHBOARD) -> list[str]:
    """Every query of a Grafana dashboard's panels (rows' nested panels included)."""
    dashboard: dict[str, Any] = json.loads(path.read_text())
    panels = [*dashboard["panels"]]
    panels += [inner for p in dashboard["panels"] for inner in p.get("panels", [])]
    return [t["expr"] for p in panels for t in p.get("targets", [])]
