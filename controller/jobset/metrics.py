"""The JobSet controller's own metrics (the runtime's are in controller/runtime/).

Every per-JobSet series is labelled ``jobset_name`` (the JobSet's name) and ``namespace`` (its
namespace), the labels upstream JobSet puts on ``jobset_completed_total`` and
``jobset_failed_total``: dashboards and alerts written for upstream work unchanged, and the
gauges computed from the cache join with the counters on the same labels. Aggregate metrics
(volume claims) carry no JobSet labels.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from controller.api import specpolicy
from controller.jobset import api, preflight
from controller.runtime.manager import Cache

# Upstream's label names (and order) for its two counters; every per-JobSet metric uses them.
JOBSET_LABELS = ("jobset_name", "namespace")


class JobSetMetrics:
    """Counters that move when the reconciler stores a transition (so only on the leader)."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.completed = Counter(
            "jobset_completed_total",
            "Number of JobSets that reached the Completed state",
            JOBSET_LABELS,
            registry=registry,
        )
        self.failed = Counter(
            "jobset_failed_total",
            "Number of JobSets that reached the Failed state",
            JOBSET_LABELS,
            registry=registry,
        )
        self.status_writes = Counter(
            "jobset_status_writes_total",
            "JobSet status writes, by cause: first, events, milestone, progress (paced counters),"
            " unpaced (counters, pacing off)",
            ("cause",),
            registry=registry,
        )
        self.claims_created = Counter(
            "jobset_volume_claims_created_total", "Claims created from templates", registry=registry
        )
        self.claims_deleted = Counter(
            "jobset_volume_claims_deleted_total",
            "Claims deleted by retention (completion, failure, scale-down, deletion)",
            registry=registry,
        )
        self.claims_adopted = Counter(
            "jobset_volume_claims_adopted_total",
            "Retained claims adopted by a JobSet of the same name",
            registry=registry,
        )
        self.claim_conflicts = Counter(
            "jobset_volume_claims_conflicts_total",
            "Reconciles that found a claim with a generated name that is not ours",
            registry=registry,
        )

    def jobset_completed(self, namespace: str, name: str) -> None:
        self.completed.labels(jobset_name=name, namespace=namespace).inc()

    def jobset_failed(self, namespace: str, name: str) -> None:
        self.failed.labels(jobset_name=name, namespace=namespace).inc()

    def status_written(self, cause: str) -> None:
        self.status_writes.labels(cause=cause).inc()


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

    ``jobset_restarts{jobset_name,namespace}`` and
    ``jobset_terminal_state{jobset_name,namespace,state}`` (1 for Completed or Failed; absent
    while running), for the JobSets this controller serves (``managed_by``): beside upstream, the
    JobSets upstream runs are upstream's to report. Those are counted instead, per
    ``spec.managedBy`` value, in ``stateful_jobset_jobsets_managed_elsewhere{managed_by}``.
    Cardinality is one series per served JobSet and one per other controller.
    """

    def __init__(self, jobsets: Cache, managed_by: str) -> None:
        self.jobsets = jobsets
        self.managed_by = managed_by

    def collect(self) -> Iterator[GaugeMetricFamily]:
        restarts = GaugeMetricFamily(
            "jobset_restarts", "Restarts of each JobSet (status.restarts)", labels=JOBSET_LABELS
        )
        terminal = GaugeMetricFamily(
            "jobset_terminal_state",
            "1 for each JobSet that reached a terminal state (Completed or Failed)",
            labels=[*JOBSET_LABELS, "state"],
        )
        elsewhere: collections.Counter[str] = collections.Counter()
        for obj in self.jobsets.items():
            manager = preflight.manager_of(obj)
            if manager != self.managed_by:
                elsewhere[manager] += 1
                continue
            meta = obj.get("metadata") or {}
            status = obj.get("status") or {}
            ident = [str(meta.get("name", "")), str(meta.get("namespace", ""))]
            count = status.get("restarts")
            restarts.add_metric(ident, float(count) if isinstance(count, int) else 0.0)
            state = status.get("terminalState")
            if isinstance(state, str) and state:
                terminal.add_metric([*ident, state], 1.0)
        others = GaugeMetricFamily(
            "stateful_jobset_jobsets_managed_elsewhere",
            "JobSets in the cache whose spec.managedBy names another controller (left alone)",
            labels=["managed_by"],
        )
        for manager, count in sorted(elsewhere.items()):
            others.add_metric([manager], count)
        yield restarts
        yield terminal
        yield others


class SpecPolicyView(Collector):
    """``stateful_jobset_spec_admission_policy_installed``: 1 while the ValidatingAdmissionPolicy
    that runs the spec's cross-field and immutability rules and its binding are installed, and the
    policy judges the JobSets of the managedBy value this controller serves (``managed_by``), as
    the controller sees them (``specpolicy.missing``), else 0: the API server then admits JobSets
    of this controller that break those rules (docs/api.md, "Where the rules run")."""

    def __init__(self, policies: Cache, bindings: Cache, managed_by: str) -> None:
        self.policies = policies
        self.bindings = bindings
        self.managed_by = managed_by

    def why(self) -> str | None:
        """``specpolicy.missing`` on what the caches hold now."""
        return specpolicy.missing(
            self.policies.unavailable() or self.bindings.unavailable(),
            self.policies.get(None, specpolicy.POLICY_NAME),
            self.bindings.get(None, specpolicy.BINDING_NAME),
            self.managed_by,
        )

    def collect(self) -> Iterator[GaugeMetricFamily]:
        gauge = GaugeMetricFamily(
            "stateful_jobset_spec_admission_policy_installed",
            "1 while the JobSet spec's ValidatingAdmissionPolicy and its binding are installed "
            "and judge this controller's JobSets",
        )
        gauge.add_metric([], 0.0 if self.why() else 1.0)
        yield gauge


def register(
    registry: CollectorRegistry,
    jobsets: Cache,
    claims: Cache,
    managed_by: str,
    spec_policies: tuple[Cache, Cache] | None = None,
) -> JobSetMetrics:
    """Create the counters and register the scrape-time collectors on ``registry``
    (``managed_by``: the spec.managedBy value this controller serves; ``spec_policies``: the
    caches of ValidatingAdmissionPolicies and their bindings)."""
    metrics = JobSetMetrics(registry)
    registry.register(ClaimPhases(claims))
    registry.register(JobSetView(jobsets, managed_by))
    if spec_policies is not None:
        registry.register(SpecPolicyView(*spec_policies, managed_by))
    return metrics
