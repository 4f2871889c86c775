"""Run controller processes (the sample controller) as real OS processes for tests."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from controller.runtime.client import LEASES, ApiError, KubeClient
from localcluster.processes import ManagedProcess, free_port
from tests.support.securemetrics import reader_token, scrape

# Short lease timings keep the tests quick; the ratios are those of the defaults (15/10/2).
LEASE = {"--lease-duration": "6", "--renew-deadline": "4", "--retry-period": "0.8"}


@dataclass
class Replica:
    identity: str
    process: ManagedProcess
    metrics_port: int
    health_port: int
    extra: dict[str, str] = field(default_factory=dict)
    # The cluster's admin kubeconfig: a scraper's token is made with it.
    kubeconfig: Path | None = None
    # /metrics over HTTPS with a bearer token (the default), or plain (--metrics-secure=false).
    metrics_secure: bool = True

    def get(self, path: str, port: int | None = None) -> tuple[int, str]:
        """A plain HTTP GET: the health endpoints (and /metrics with --metrics-secure=false)."""
        url = f"http://127.0.0.1:{port or self.health_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return int(response.status), response.read().decode()
        except urllib.error.HTTPError as err:
            return int(err.code), err.read().decode()
        except OSError as err:
            return 0, str(err)

    def scrape(self) -> tuple[int, str]:
        """/metrics as a Prometheus allowed to read it would get it: over HTTPS with a reader's
        bearer token (tests/support/securemetrics.py), or plain HTTP if the replica opted out."""
        if not self.metrics_secure:
            return self.get("/metrics", self.metrics_port)
        assert self.kubeconfig is not None, "a secure replica needs the kubeconfig for a token"
        return scrape(self.metrics_port, reader_token(self.kubeconfig))

    def metrics_text(self) -> str:
        status, body = self.scrape()
        assert status == 200, f"/metrics of {self.identity}: {status} {body[:200]}"
        return body

    def sample(self, metric: str, **labels: str) -> float | None:
        for family in text_string_to_metric_families(self.metrics_text()):
            for sample in family.samples:
                if sample.name == metric and all(
                    sample.labels.get(k) == v for k, v in labels.items()
                ):
                    return float(sample.value)
        return None

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for raw in self.process.log_path.read_text(errors="replace").splitlines():
            if raw.startswith("{"):
                try:
                    lines.append(json.loads(raw))
                except ValueError:
                    continue
        return lines


def start_replica(
    kubeconfig: Path,
    namespace: str,
    identity: str,
    log_dir: Path,
    *,
    lease_name: str,
    module: str = "tests.support.sample_controller",
    extra: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    args: tuple[str, ...] = (),
) -> Replica:
    """A controller process on ``kubeconfig``, watching ``namespace``, on free loopback ports;
    ``extra`` flags as ``--flag=value``, ``args`` as they are (after them)."""
    metrics_port, health_port = free_port(), free_port()
    flags = {
        "--kubeconfig": str(kubeconfig),
        "--namespaces": namespace,
        "--leader-election-namespace": namespace,
        "--leader-election-id": lease_name,
        "--identity": identity,
        "--metrics-bind-address": f"127.0.0.1:{metrics_port}",
        "--health-probe-bind-address": f"127.0.0.1:{health_port}",
        **LEASE,
        **(extra or {}),
    }
    argv = [sys.executable, "-m", module, *(f"{k}={v}" for k, v in flags.items()), *args]
    environment = {**os.environ, **env} if env is not None else None
    process = ManagedProcess(identity, argv, log_dir / f"{identity}.log", env=environment)
    process.start()
    return Replica(
        identity, process, metrics_port, health_port, extra or {}, kubeconfig,
        metrics_secure=secure_metrics(flags.get("--metrics-secure", "true")),
    )  # fmt: skip


def secure_metrics(flag_value: str) -> bool:
    """Whether a --metrics-secure value leaves /metrics on HTTPS (its default)."""
    return flag_value.strip().lower() not in ("false", "f", "0", "no", "off")


async def wait_until(predicate: Any, what: str, seconds: float = 60.0) -> float:
    """Poll a plain predicate; return how long it took. Fails with ``what`` on timeout."""
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        if predicate():
            return time.monotonic() - started
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out after {seconds:.0f}s waiting for {what}")


async def holder(client: KubeClient, namespace: str, lease_name: str) -> str:
    """Who the Lease names ("" while there is none, or the API server cannot say)."""
    try:
        lease = await client.get(LEASES, lease_name, namespace)
    except (ApiError, OSError):
        return ""
    return str((lease.get("spec") or {}).get("holderIdentity") or "")


async def wait_holder(
    client: KubeClient, namespace: str, lease_name: str, among: set[str], seconds: float = 60
) -> str:
    """Wait until the Lease names one of ``among``; return it."""
    started = time.monotonic()
    last = ""
    while time.monotonic() - started < seconds:
        last = await holder(client, namespace, lease_name)
        if last in among:
            return last
        await asyncio.sleep(0.1)
    raise AssertionError(
        f"no lease holder among {sorted(among)} after {seconds:.0f}s (last {last!r})"
    )


def thread_states(pid: int) -> str:
    """The state letter of each thread of ``pid`` (``T``: stopped), from /proc."""
    states = []
    for stat in sorted(Path(f"/proc/{pid}/task").glob("*/stat")):
        try:
            # "pid (comm) S ...": the state follows the command's closing parenthesis.
            states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
        except (OSError, IndexError):
            continue
    return "".join(states)


async def wait_stopped(pid: int) -> float:
    """Wait until every thread of ``pid`` is stopped after a SIGSTOP: ``kill()`` returns before
    they are (here 131 of 200 SIGSTOPs left a busy process's threads running a moment), and a
    thread still running can answer a request or write meanwhile."""

    def stopped() -> bool:
        states = thread_states(pid)
        return bool(states) and set(states) <= {"T", "t"}

    return await wait_until(stopped, f"every thread of process {pid} to stop")
