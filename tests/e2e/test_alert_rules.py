"""The example alert rules (``manifests/alerts/prometheus-rules.yaml``) pass Prometheus' own check.

In the end-to-end tier because it needs Debian's ``promtool``, which ``make test`` and
``make test-e2e`` install (``make tools``); the unit tier needs no tool beside Python.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ALERTS = Path(__file__).resolve().parents[2] / "manifests" / "alerts" / "prometheus-rules.yaml"


def test_alert_rules_pass_promtool() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail(
            "promtool is missing: run `make tools` (Debian's prometheus package) to check "
            f"{ALERTS.name}",
            pytrace=False,
        )
    done = subprocess.run(
        [promtool, "check", "rules", str(ALERTS)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    names = {r["alert"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]}
    assert {
        "StatefulJobSetNoLeader",
        "StatefulJobSetReconcileErrors",
        "StatefulJobSetWorkqueueBacklogGrowing",
        "StatefulJobSetVolumeClaimConflicts",
    } <= names
