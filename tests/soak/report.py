"""The soak's result: counts, chaos, memory, violations; printed and written as JSON."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.soak.model import COMPLETED, FAILED, AuditEntry, JobSetRecord

MIB = 1024 * 1024


@dataclass
class Report:
    seconds: float
    wall_seconds: float = 0.0
    quiesce_seconds: float = 0.0
    converged: bool = False
    jobsets: dict[str, Any] = field(default_factory=dict)
    writes: dict[str, int] = field(default_factory=dict)
    leader_kills: list[dict[str, Any]] = field(default_factory=list)
    replica_exits: list[dict[str, Any]] = field(default_factory=list)
    apiserver_restart: dict[str, float] = field(default_factory=dict)
    rss_peak_mib: dict[str, float] = field(default_factory=dict)
    rss_limit_mib: float = 0.0
    driver_retries: int = 0
    checked: dict[str, int] = field(default_factory=dict)
    controller_errors: dict[str, int] = field(default_factory=dict)
    logs: str = ""
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, **asdict(self)}

    def write(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")

    def summary(self) -> list[str]:
        js = self.jobsets
        kills = ", ".join(f"{k['identity']}@{k['at']:.0f}s" for k in self.leader_kills)
        lines = [
            f"soak: {self.seconds:.0f}s of chaos, {self.wall_seconds:.0f}s in all "
            f"(quiesce {self.quiesce_seconds:.0f}s, converged: {self.converged})",
            f"  JobSets: {js.get('created', 0)} created, {js.get('completed', 0)} completed, "
            f"{js.get('failed', 0)} failed, {js.get('deleted', 0)} deleted; scenarios "
            f"{js.get('by_scenario', {})}",
            f"  writes (audit log): {self.writes}",
            f"  leader kills: {len(self.leader_kills)} "
            f"({kills}); "
            f"replica exits by themselves: {len(self.replica_exits)}",
            f"  kube-apiserver restart: {self.apiserver_restart or 'did not happen'}",
            f"  peak RSS (MiB, bound {self.rss_limit_mib:.0f}): {self.rss_peak_mib}",
            f"  driver retries while the API server was away: {self.driver_retries}; "
            f"controller error log lines: {self.controller_errors}",
            f"  checked: {self.checked}",
            f"  logs: {self.logs}",
        ]
        if self.violations:
            lines.append(f"FAILED: {len(self.violations)} violation(s):")
            lines += [f"  - {v}" for v in self.violations]
        else:
            lines.append("OK: no invariant violated")
        return lines


def jobset_counts(records: Mapping[str, JobSetRecord]) -> dict[str, Any]:
    values = list(records.values())
    return {
        "created": len(values),
        "completed": sum(r.terminal == COMPLETED for r in values),
        "failed": sum(r.terminal == FAILED for r in values),
        "finished": sum(bool(r.terminal) for r in values),
        "deleted": sum(r.deletion_time is not None for r in values),
        "restarts": sum(r.restarts for r in values),
        "scaled": sum(bool(r.scales) for r in values),
        "by_scenario": dict(sorted(Counter(r.scenario for r in values).items())),
    }


def write_counts(entries: Iterable[AuditEntry]) -> dict[str, int]:
    """Successful creates and deletes of Jobs and claims, by anyone (from the audit log)."""
    counts: Counter[str] = Counter()
    for entry in entries:
        if entry.ok and entry.verb in ("create", "delete") and not entry.subresource:
            counts[f"{entry.resource} {entry.verb}"] += 1
    return dict(sorted(counts.items()))
