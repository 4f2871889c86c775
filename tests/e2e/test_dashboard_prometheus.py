"""The Grafana dashboard's queries, run by a real Prometheus against a real controller.

One controller replica (leader) runs the original request's example to completion on the full
control plane; Debian's Prometheus scrapes it (HTTPS, a reader's bearer token) under the job name
the ServiceMonitor produces. Then
every metric the dashboard reads has series there, except those that only exist once something
happened that this run does not cause (named below), and every query, Grafana's variables filled
in, evaluates (Prometheus' query API says ``success``) and, if all its metrics exist, returns data.
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from controller.jobset import api
from controller.runtime.client import KubeClient
from localcluster.processes import free_port
from tests.helpers import current, wait_for
from tests.support.jobsets import jobset, replicated_job, wait_condition
from tests.support.prometheus import query, secure_job, start_prometheus
from tests.support.promql import dashboard_queries, metric_names
from tests.support.securemetrics import reader_token
from tests.support.volumes_e2e import ControllerProcesses, example

JOB = "stateful-jobset-controller-metrics"
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$job": JOB}
# Series that appear only once such a thing happens, which this run does not cause.
NOT_YET = {
    "jobset_failed_total": "no JobSet failed",
}


def _evaluate(port: int, expression: str) -> dict[str, Any]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
    with urllib.request.urlopen(url, timeout=10) as response:
        body: dict[str, Any] = json.loads(response.read())
    return body


def _filled(expression: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expression = expression.replace(variable, value)
    return expression


async def test_dashboard_queries_answer_on_a_real_prometheus(
    full_namespace: str, client: KubeClient, controller: ControllerProcesses, tmp_path: Path
) -> None:
    [replica] = controller.replicas
    port = free_port()
    assert replica.kubeconfig is not None
    token = tmp_path / "scraper-token"
    token.write_text(reader_token(replica.kubeconfig))
    targets = [f"127.0.0.1:{replica.metrics_port}"]
    prometheus = start_prometheus(port, tmp_path, [secure_job(JOB, targets, token)])
    try:
        await client.create(api.JOBSETS, example("seed-volume-policy.yaml"), full_namespace)
        # One JobSet left to another controller, for the panel that counts them.
        elsewhere = jobset("upstream-run", replicated_job("a", 1), managedBy="example.com/other")
        await client.create(api.JOBSETS, elsewhere, full_namespace)
        await wait_condition(client, full_namespace, "volume-sample", api.COMPLETED, seconds=180)
        # Scraped after the completion.
        await wait_for(
            current(
                lambda: query(port, f'jobset_terminal_state{{job="{JOB}", state="Completed"}}')
            ),
            bool,
            "Prometheus to scrape the completed JobSet",
        )
        queries = dashboard_queries()
        read = set().union(*(metric_names(q) for q in queries))
        absent = {
            name for name in read if not query(port, f'count({{__name__="{name}", job="{JOB}"}})')
        }
        assert absent == set(NOT_YET) & read, f"no series for {absent - set(NOT_YET)}"
        answers = {_filled(e): _evaluate(port, _filled(e)) for e in queries}
        failed = {q: a for q, a in answers.items() if a["status"] != "success"}
        assert not failed, failed
        # Rates and increases need two scrapes of a series inside their window: wait for them.
        expected = [_filled(e) for e in queries if not metric_names(e) & absent]

        def without_data() -> list[str]:
            return [q for q in expected if not _evaluate(port, q)["data"]["result"]]

        await wait_for(current(without_data), lambda left: not left, "every query to answer")
        controller.assert_clean()
    finally:
        prometheus.kill()
