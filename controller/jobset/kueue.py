"""Kueue: what this controller says about a JobSet that Kueue cannot admit.

Kueue admits a queued JobSet by patching it: un-suspended, with its scheduling directives in the
pod templates. It builds that patch (a JSON merge patch of the whole ``spec.replicatedJobs``)
from upstream JobSet's Go types, which leave empty lists out (``omitempty``). This CRD's rule
for suspended JobSets compares every pod template field but labels, annotations, nodeSelector,
tolerations and schedulingGates exactly, so a template holding ``env: []`` (or ``args: []``,
``volumeMounts: []``, ...) is changed by the patch, which the API server refuses: the JobSet
would stay suspended while its Workload says Admitted, and Kueue would retry for ever. Upstream
JobSet's webhook compares with Kubernetes' semantic equality (empty equals absent) and accepts
it. Those lists cannot be removed while the JobSet is suspended either (the same rule), so the
condition tells the user to create the JobSet again without them. Pure.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from controller.api.schema import SUSPENDED_MUTABLE_POD_SPEC
from controller.jobset.model import JobSet

QUEUE_NAME_LABEL = "kueue.x-k8s.io/queue-name"
CONDITION = "KueueIncompatible"
REASON_EMPTY_LISTS = "EmptyListsInPodTemplate"
REASON_COMPATIBLE = "Compatible"
MESSAGE_COMPATIBLE = "no pod template holds a value Kueue's admission patch would change"
# How many places the message names (the rest are counted).
MAX_NAMED = 5


def _empty_lists(value: Any, path: str) -> Iterator[str]:
    if isinstance(value, list):
        if not value:
            yield path
        for index, item in enumerate(value):
            yield from _empty_lists(item, f"{path}[{index}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _empty_lists(item, f"{path}.{key}")


def empty_template_lists(jobset: JobSet) -> list[str]:
    """The empty lists in the pod templates' specs, as field paths, but those Kueue may change
    anyway (the fields that stay mutable while suspended)."""
    found: list[str] = []
    replicated = (jobset.raw.get("spec") or {}).get("replicatedJobs")
    for index, rjob in enumerate(replicated if isinstance(replicated, list) else []):
        template = ((rjob or {}).get("template") or {}).get("spec") or {}
        pod = ((template.get("template") or {}).get("spec")) or {}
        if not isinstance(pod, dict):
            continue
        base = f"spec.replicatedJobs[{index}].template.spec.template.spec"
        for key, value in pod.items():
            if key not in SUSPENDED_MUTABLE_POD_SPEC:
                found.extend(_empty_lists(value, f"{base}.{key}"))
    return found


def queued(jobset: JobSet) -> bool:
    """Kueue manages the JobSet: it names a LocalQueue."""
    return bool(jobset.labels.get(QUEUE_NAME_LABEL))


def incompatibility(jobset: JobSet) -> str | None:
    """The condition message when Kueue cannot admit this JobSet, else None."""
    if not queued(jobset):
        return None
    paths = empty_template_lists(jobset)
    if not paths:
        return None
    named = ", ".join(paths[:MAX_NAMED])
    more = f" and {len(paths) - MAX_NAMED} more" if len(paths) > MAX_NAMED else ""
    return (
        f"Kueue cannot admit this JobSet: its admission patch leaves out empty lists, and a "
        f"suspended JobSet's pod templates may not change; empty: {named}{more}. Delete the "
        f"JobSet and create it again without these empty lists (leave the fields out)"
    )
