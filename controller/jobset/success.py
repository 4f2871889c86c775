"""The success policy: has the JobSet completed?

Upstream semantics (``successPolicy``, operator ``All`` by default):
- only succeeded Jobs of the target replicated jobs count (all replicated jobs when the target
  list is empty);
- ``All``: the count reaches the sum of the targets' replicas;
- ``Any``: the count reaches one;
- nothing is decided until at least one Job of the current attempt has succeeded, so ``All`` over
  targets with zero replicas completes on the first success anywhere (upstream's arithmetic).
"""

from __future__ import annotations

from collections.abc import Mapping

from controller.jobset.jobsetstatus import ReplicatedJobStatus
from controller.jobset.model import JobSet


def targets(jobset: JobSet) -> tuple[str, ...]:
    """The replicated jobs the success policy looks at, in spec order."""
    wanted = jobset.success_policy.target_replicated_jobs
    return tuple(r.name for r in jobset.replicated_jobs if not wanted or r.name in wanted)


def jobs_needed(jobset: JobSet) -> int:
    """How many succeeded target Jobs complete the JobSet."""
    if jobset.success_policy.operator == "Any":
        return 1
    names = set(targets(jobset))
    return sum(r.replicas for r in jobset.replicated_jobs if r.name in names)


def _succeeded(status: ReplicatedJobStatus | None) -> int:
    return status.succeeded if status is not None else 0


def evaluate(jobset: JobSet, status_by_name: Mapping[str, ReplicatedJobStatus]) -> bool:
    """True when the success policy is met by the current attempt's counters."""
    any_succeeded = any(_succeeded(status_by_name.get(r.name)) > 0 for r in jobset.replicated_jobs)
    if not any_succeeded:
        return False
    succeeded = sum(_succeeded(status_by_name.get(name)) for name in targets(jobset))
    return succeeded >= jobs_needed(jobset)
