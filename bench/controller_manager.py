"""What kube-controller-manager did during a benchmark row: its work queues' counters from its
/metrics and, optionally, a CPU profile from its /debug/pprof (both read as the cluster's admin,
whom the controller-manager's delegated authorization allows).

The comparison's time figures are the cluster's work: with every Job created at once, the Job
controller and the garbage collector are the bottleneck, and these say which of their queues did
how much (adds, seconds of work, retries) under each row.
"""

from __future__ import annotations

import ssl
import threading
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from localcluster import pki
from localcluster.cluster import LocalCluster
from localcluster.processes import https_get

QueueWork = dict[str, dict[str, float]]

# workqueue metric family (as the parser names it, without _total) -> our short name
_QUEUE_FAMILIES = {
    "workqueue_adds": "adds",
    "workqueue_retries": "retries",
    "workqueue_work_duration_seconds": "work_seconds",
}


def _base_url(cluster: LocalCluster) -> str:
    assert cluster.ports is not None
    return f"https://127.0.0.1:{cluster.ports.controller_manager}"


def _admin_cert(cluster: LocalCluster) -> tuple[Path, Path]:
    return cluster.pki.client_cert(pki.ADMIN), cluster.pki.client_key(pki.ADMIN)


def queue_work(cluster: LocalCluster) -> QueueWork:
    """Per work queue of the controller-manager: adds, retries and seconds spent working so far.
    Empty when /metrics does not answer (the figures are extra, never the row's failure)."""
    status, text = https_get(f"{_base_url(cluster)}/metrics", cert=_admin_cert(cluster), timeout=10)
    if status != 200:
        return {}
    found: QueueWork = {}
    for family in text_string_to_metric_families(text):
        short = _QUEUE_FAMILIES.get(family.name)
        if short is None:
            continue
        for sample in family.samples:
            wanted = "_sum" if short == "work_seconds" else "_total"
            if not sample.name.endswith(wanted):
                continue
            queue = found.setdefault(sample.labels.get("name", ""), {})
            queue[short] = queue.get(short, 0.0) + sample.value
    return found


def queue_work_delta(before: QueueWork, after: QueueWork, n: int) -> QueueWork:
    """``after - before`` per queue and figure, per JobSet (``n``); queues that did nothing are
    left out."""
    delta: QueueWork = {}
    for queue, figures in sorted(after.items()):
        was = before.get(queue, {})
        per = {k: round((v - was.get(k, 0.0)) / n, 4) for k, v in sorted(figures.items())}
        if any(per.values()):
            delta[queue] = per
    return delta


def start_profile(cluster: LocalCluster, seconds: int, out: Path) -> threading.Thread:
    """A thread that records ``seconds`` of the controller-manager's CPU profile into ``out``
    (pprof format; read with ``go tool pprof -top out``). Join it before the cluster stops."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the controller-manager's self-signed serving cert
    cert, key = _admin_cert(cluster)
    context.load_cert_chain(str(cert), str(key))
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
