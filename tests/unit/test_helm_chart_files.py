"""The Helm chart's files, read as files.

Rendering, linting and installing the chart: tests/integration/test_helm_chart.py.
"""

from __future__ import annotations

from pathlib import Path

import yaml

import controller
from controller.api import chartgen

REPO = Path(__file__).resolve().parents[2]


def test_chart_copies_of_the_generated_manifests_are_current() -> None:
    """The chart renders copies of the CRDs, the Pod-scope policy and the alert rules: a change to
    the source without `make crd` (python -m controller.api.chartgen) would ship the old one."""
    assert chartgen.stale(REPO) == []


def test_chartgen_check_finds_a_stale_copy(tmp_path: Path) -> None:
    for copy, source in chartgen.COPIES.items():
        (tmp_path / source).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / source).write_text(f"source of {copy}\n")
    assert chartgen.main(["--root", str(tmp_path)]) == 0
    assert chartgen.main(["--root", str(tmp_path), "--check"]) == 0
    changed = next(iter(chartgen.COPIES.values()))
    (tmp_path / changed).write_text("changed\n")
    assert chartgen.main(["--root", str(tmp_path), "--check"]) == 1
    assert [p.relative_to(chartgen.CHART) for p in chartgen.stale(tmp_path)] == [
        next(iter(chartgen.COPIES))
    ]


def test_chart_version_is_the_project_version() -> None:
    """One version everywhere (controller.__version__): the chart's and the image tag it uses."""
    chart = yaml.safe_load((REPO / "charts/stateful-jobset/Chart.yaml").read_text())
    assert chart["version"] == chart["appVersion"] == controller.__version__
