"""The example alert rules (``manifests/alerts/prometheus-rules.yaml``) and the Grafana dashboard's
queries (``manifests/dashboards/``) pass Prometheus' own check.

In the end-to-end tier because it needs Debian's ``promtool``, which ``make test`` and
``make test-e2e`` install (``make tools``); the unit tier needs no tool beside Python.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.support.promql import dashboard_queries
from tests.support.securemetrics import only, render

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
ALERTS = MANIFESTS / "alerts" / "prometheus-rules.yaml"
DASHBOARD = MANIFESTS / "dashboards" / "stateful-jobset.json"
# What Grafana puts in place of the dashboard's variables before it sends a query.
GRAFANA_VARIABLES = {"$__rate_interval": "2m", "$job": "stateful-jobset-controller-metrics"}


def _promtool(checked: Path) -> str:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail(
            "promtool is missing: run `make tools` (Debian's prometheus package) to check "
            f"{checked.name}",
            pytrace=False,
        )
    return promtool


def test_alert_rules_pass_promtool() -> None:
    done = subprocess.run(
        [_promtool(ALERTS), "check", "rules", str(ALERTS)],
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


def test_dashboard_queries_pass_promtool(tmp_path: Path) -> None:
    """Each query, its Grafana variables filled in, as a recording rule: promtool parses it."""
    queries = dashboard_queries(DASHBOARD)
    assert queries
    rules = []
    for index, query in enumerate(queries):
        for variable, value in GRAFANA_VARIABLES.items():
            query = query.replace(variable, value)
        assert not re.search(r"\$\w", query), f"a variable the test does not fill: {query}"
        rules.append({"record": f"dashboard:query{index}", "expr": query})
    checked = tmp_path / "dashboard-queries.yaml"
    checked.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run(
        [_promtool(DASHBOARD), "check", "rules", str(checked)],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules)} rules found" in done.stdout, done.stdout


def test_prometheusrule_component_renders_the_rules(tmp_path: Path) -> None:
    """``kubectl kustomize`` of manifests/ with the component: one PrometheusRule, in the
    controller's namespace, whose groups are the rule file's."""
    objects = render(tmp_path / "overlay", "servicemonitor", "prometheusrule")
    rule = only(objects, "PrometheusRule")
    assert rule["metadata"]["namespace"] == "stateful-jobset-system"
    assert rule["spec"] == yaml.safe_load(ALERTS.read_text())
