"""What monitoring ships beside the controller: the alert rules twice (a rule file and a
prometheus-operator PrometheusRule) and a Grafana dashboard, checked against each other and against
the metrics the controller really exports.

The exported names come from the controller's real wiring (Manager with leader election, the
JobSet setup), built without a cluster, as tests/unit/test_metrics.py builds it. PromQL is parsed
roughly (strings, label matchers, ranges and grouping clauses removed; what remains that is not
called like a function is a metric name); ``promtool`` checks the queries for real in the
end-to-end tier (tests/e2e/test_alert_rules.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio.client import ApiClient, Configuration

from controller import config as configmod
from controller.jobset.setup import setup
from controller.runtime.manager import Manager
from tests.support.promql import dashboard_queries, metric_names

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "manifests" / "alerts" / "prometheus-rules.yaml"
COMPONENT = REPO / "manifests" / "components" / "prometheusrule"
DASHBOARD = REPO / "manifests" / "dashboards" / "stateful-jobset.json"
# Series Prometheus itself makes for every target, not the controller.
FROM_PROMETHEUS = {"up"}
# Sample names per family type (prometheus_client strips _total and _info from a family's name).
SUFFIXES = {
    "counter": ("_total",),
    "info": ("_info",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("", "_sum", "_count"),
    "gauge": ("",),
    "stateset": ("",),
    "unknown": ("",),
}


def test_metric_names_parser() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (le, name) (rate(workqueue_queue_duration_seconds_bucket"
        '{job="$job", x=~"a|b"}[$__rate_interval]))) > 1e3 and on (instance) '
        '(leader_election_master_status == 1) or absent(up{job="j"} == 1)'
    )
    assert metric_names(expr) == {
        "workqueue_queue_duration_seconds_bucket",
        "leader_election_master_status",
        "up",
    }


@pytest.fixture
async def exported() -> AsyncIterator[set[str]]:
    """Every sample name the controller's registry can export (with leader election on, which
    adds leader_election_master_status)."""
    config = configmod.parse(["--leader-elect=true"], env={})
    async with ApiClient(Configuration()) as api_client:
        manager = Manager(config, api_client)
        setup(manager)
        yield {
            family.name + suffix
            for family in manager.registry.collect()
            for suffix in SUFFIXES[family.type]
        }


def _alert_rules() -> list[dict[str, Any]]:
    return [r for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]


def _dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def _panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


# ------------------------------------------------------------------------------ the two rule files


def test_prometheusrule_component_carries_the_alert_rules_unchanged() -> None:
    kust = yaml.safe_load((COMPONENT / "kustomization.yaml").read_text())
    assert kust["kind"] == "Component"
    objects = [
        d for f in kust["resources"] for d in yaml.safe_load_all((COMPONENT / f).read_text()) if d
    ]
    assert [(o["apiVersion"], o["kind"]) for o in objects] == [
        ("monitoring.coreos.com/v1", "PrometheusRule")
    ]
    rule = objects[0]
    assert rule["metadata"]["namespace"] == "stateful-jobset-system"
    assert rule["spec"] == yaml.safe_load(ALERTS.read_text()), (
        "manifests/components/prometheusrule/prometheusrule.yaml's spec must be "
        "manifests/alerts/prometheus-rules.yaml: edit both together"
    )


# -------------------------------------------------------------------- names the controller exports


async def test_alerts_read_only_metrics_the_controller_exports(exported: set[str]) -> None:
    assert "stateful_jobset_build_info" in exported  # the fixture sees the whole registry
    for rule in _alert_rules():
        unknown = metric_names(rule["expr"]) - exported - FROM_PROMETHEUS
        assert not unknown, f"alert {rule['alert']} reads metrics nobody exports: {unknown}"


async def test_dashboard_reads_only_metrics_the_controller_exports(exported: set[str]) -> None:
    queries = dashboard_queries()
    assert len(queries) >= 15
    read = set()
    for expr in queries:
        names = metric_names(expr)
        assert names, f"no metric found in {expr!r}"
        unknown = names - exported - FROM_PROMETHEUS
        assert not unknown, f"the dashboard reads metrics nobody exports: {unknown} in {expr!r}"
        read |= names
    # The controller's own JobSet and claim metrics and the build are all on it.
    own = {n for n in exported if n.startswith(("jobset_", "stateful_jobset_"))}
    assert own <= read, f"not on the dashboard: {sorted(own - read)}"


# --------------------------------------------------------------------------------- the dashboard


def test_dashboard_is_importable_and_selects_by_job() -> None:
    dashboard = _dashboard()
    assert dashboard["uid"] == "stateful-jobset"
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    # The default job is what the ServiceMonitor produces, as the alerts assume.
    assert variables["job"]["current"]["value"] == "stateful-jobset-controller-metrics"
    assert 'job="stateful-jobset-controller-metrics"' in ALERTS.read_text()
    panels = list(_panels(dashboard))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert panel["targets"] and panel.get("description"), panel["title"]
        for target in panel["targets"]:
            # Every series selector is of this installation's job: two installations in one
            # Prometheus do not mix.
            selectors = re.findall(r"([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?", target["expr"])
            for name, matchers in selectors:
                if name in metric_names(target["expr"]):
                    assert 'job="$job"' in matchers, f'{name} without job="$job" in {target}'
