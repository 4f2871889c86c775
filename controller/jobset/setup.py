"""Wire the JobSet controller into a manager: caches, event handlers, workers."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from controller.jobset import api
from controller.jobset.reconciler import JOBSET_INDEX, JobSetMetrics, JobSetReconciler
from controller.runtime.client import CLAIMS, JOBS, SERVICES, STORAGE_CLASSES
from controller.runtime.informer import EventHandler
from controller.runtime.manager import Cache, Manager
from controller.runtime.store import Obj, by_label, object_key

CONTROLLER = "jobset"


def setup(manager: Manager) -> JobSetReconciler:
    jobsets = manager.cache(api.JOBSETS)
    # Only children labelled by this controller are watched (and cached).
    owned = f"{api.JOBSET_NAME}"
    jobs = manager.cache(
        JOBS, label_selector=owned, indexers={JOBSET_INDEX: by_label(api.JOBSET_NAME)}
    )
    services = manager.cache(SERVICES, label_selector=owned)
    # All claims, not only ours: a conflict is precisely a claim we did not label.
    claims = manager.cache(CLAIMS, indexers={JOBSET_INDEX: by_label(api.JOBSET_NAME)})
    storage_classes = manager.cache(STORAGE_CLASSES)
    queue = manager.queue(CONTROLLER)

    def enqueue(obj: Obj) -> None:
        queue.add(object_key(obj))

    def enqueue_parent(obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        parent = (meta.get("labels") or {}).get(api.JOBSET_NAME)
        if isinstance(parent, str) and meta.get("namespace"):
            queue.add(f"{meta['namespace']}/{parent}")

    jobsets.add_handler(
        EventHandler(on_add=enqueue, on_update=lambda _, new: enqueue(new), on_delete=enqueue)
    )

    def enqueue_for_claim(obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        if (meta.get("labels") or {}).get(api.JOBSET_NAME):
            enqueue_parent(obj)
            return
        # A foreign claim may block (or, once gone, unblock) any JobSet of its namespace.
        for js in jobsets.items(meta.get("namespace")):
            enqueue(js)

    claims.add_handler(
        EventHandler(
            on_add=enqueue_for_claim,
            on_update=lambda _, new: enqueue_for_claim(new),
            on_delete=enqueue_for_claim,
        )
    )
    for cache in (jobs, services):
        cache.add_handler(
            EventHandler(
                on_add=enqueue_parent,
                on_update=lambda _, new: enqueue_parent(new),
                on_delete=enqueue_parent,
            )
        )
    reconciler = JobSetReconciler(
        manager.client,
        manager.recorder,
        jobsets,
        jobs,
        services,
        claims,
        storage_classes,
        metrics=JobSetMetrics(manager.registry),
        status_progress_period=manager.config.status_progress_period,
    )
    manager.registry.register(ClaimPhases(claims))
    manager.registry.register(JobSetView(jobsets))
    manager.controller(CONTROLLER, queue, reconciler.reconcile, object_label="jobset")
    return reconciler


class ClaimPhases(Collector):
    """``jobset_volume_claims{phase}``: claims made for JobSets, by phase (computed at scrape)."""

    def __init__(self, claims: Cache) -> None:
        self.claims = claims

    def collect(self) -> Iterator[GaugeMetricFamily]:
        counts = {"Pending": 0, "Bound": 0, "Lost": 0}
        for claim in self.claims.items():
            labels = (claim.get("metadata") or {}).get("labels") or {}
            if labels.get(api.JOBSET_NAME):
                phase = str((claim.get("status") or {}).get("phase") or "Pending")
                counts[phase] = counts.get(phase, 0) + 1
        family = GaugeMetricFamily(
            "jobset_volume_claims", "Claims created for JobSets, by phase", labels=["phase"]
        )
        for phase, count in sorted(counts.items()):
            family.add_metric([phase], count)
        yield family


class JobSetView(Collector):
    """Per-JobSet restarts and terminal state, read from the cache at scrape time.

    ``jobset_restarts{namespace,jobset}`` and ``jobset_terminal_state{namespace,jobset,state}``
    (1 for Completed or Failed; absent while running). Cardinality is one series per JobSet.
    """

    def __init__(self, jobsets: Cache) -> None:
        self.jobsets = jobsets

    def collect(self) -> Iterator[GaugeMetricFamily]:
        restarts = GaugeMetricFamily(
            "jobset_restarts", "Restarts of each JobSet", labels=["namespace", "jobset"]
        )
        terminal = GaugeMetricFamily(
            "jobset_terminal_state",
            "1 for each JobSet that reached a terminal state (Completed or Failed)",
            labels=["namespace", "jobset", "state"],
        )
        for obj in self.jobsets.items():
            meta = obj.get("metadata") or {}
            status = obj.get("status") or {}
            ident = [str(meta.get("namespace", "")), str(meta.get("name", ""))]
            count = status.get("restarts")
            restarts.add_metric(ident, float(count) if isinstance(count, int) else 0.0)
            state = status.get("terminalState")
            if isinstance(state, str) and state:
                terminal.add_metric([*ident, state], 1.0)
        yield restarts
        yield terminal
