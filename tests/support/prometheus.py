"""Debian's Prometheus server for end-to-end tests: started on loopback, queried over HTTP."""

from __future__ import annotations

import json
import shutil
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

from localcluster.processes import ManagedProcess


def start_prometheus(
    port: int, folder: Path, scrape_configs: list[dict[str, Any]]
) -> ManagedProcess:
    """Prometheus on 127.0.0.1:``port``, scraping and evaluating every second; its config, data
    and log go to ``folder``. The caller kills it."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("Debian's prometheus server is not installed (make test installs it)")
    config = folder / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "scrape_configs": scrape_configs,
            }
        )
    )
    process = ManagedProcess(
        "prometheus",
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={folder / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        folder / "prometheus.log",
    )
    process.start()
    return process


def secure_job(
    name: str, targets: list[str], token_file: Path, ca_file: Path | None = None
) -> dict[str, Any]:
    """A scrape job for the controller's /metrics as upstream's ServiceMonitor has Prometheus
    scrape it: HTTPS with a bearer token (a file, as Prometheus' own ServiceAccount token), the
    certificate verified against ``ca_file``, or not at all (the self-signed one)."""
    tls: dict[str, Any] = {"ca_file": str(ca_file)} if ca_file else {"insecure_skip_verify": True}
    return {
        "job_name": name,
        "scheme": "https",
        "authorization": {"credentials_file": str(token_file)},
        "tls_config": tls,
        "static_configs": [{"targets": targets}],
    }


def query(port: int, expression: str) -> list[dict[str, Any]]:
    """The result vector of an instant query; empty while Prometheus is not answering."""
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            body = json.loads(response.read())
    except OSError:
        return []
    return list(body.get("data", {}).get("result", [])) if body.get("status") == "success" else []
