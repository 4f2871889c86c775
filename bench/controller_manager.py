"""What kube-controller-manager did during a benchmark row: its work queues' counters from its
/metrics and, optionally, a CPU profile from its /debug/pprof (both read as the cluster's admin,
whom the controller-manager's delegated authorization allows).

The comparison's time figures are the cluster's work, and these say which controller inside
kube-controller-manager did how much under each row (adds, retries, seconds of work per queue).
Without volumes the largest share of its CPU goes to the Endpoints and EndpointSlice controllers,
whose every sync of a JobSet's headless Service scans every pod of the namespace
(docs/performance.md).
"""

from __future__ import annotations

import threading
import urllib.request
from pathlib import Path

from localcluster import pki
from localcluster.cluster import LocalCluster
from localcluster.processes import https_get, tls_client_context
from tests.support.compare import QueueWork, parse_queue_work


def _base_url(cluster: LocalCluster) -> str:
    assert cluster.ports is not None
    return f"https://127.0.0.1:{cluster.ports.controller_manager}"


def _admin_cert(cluster: LocalCluster) -> tuple[Path, Path]:
    return cluster.pki.client_cert(pki.ADMIN), cluster.pki.client_key(pki.ADMIN)


def queue_work(cluster: LocalCluster) -> QueueWork:
    """Per work queue of the controller-manager: adds, retries and seconds spent working so far.
    Empty when /metrics does not answer (the figures are extra, never the row's failure)."""
    status, text = https_get(f"{_base_url(cluster)}/metrics", cert=_admin_cert(cluster), timeout=10)
    return parse_queue_work(text) if status == 200 else {}


def start_profile(cluster: LocalCluster, seconds: int, out: Path) -> threading.Thread:
    """A thread that records ``seconds`` of the controller-manager's CPU profile into ``out``
    (pprof format; read with ``go tool pprof -top out``). Join it before the cluster stops."""
    context = tls_client_context(cert=_admin_cert(cluster))  # its serving cert is self-signed
    url = f"{_base_url(cluster)}/debug/pprof/profile?seconds={seconds}"

    def record() -> None:
        try:
            with urllib.request.urlopen(url, timeout=seconds + 60, context=context) as response:
                body = response.read()
        except OSError as err:
            print(f"    controller-manager profile failed: {err}", flush=True)
            return
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(body)

    thread = threading.Thread(target=record, name="kcm-profile", daemon=True)
    thread.start()
    return thread
