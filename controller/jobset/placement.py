"""Exclusive placement: each child Job's pods in one topology domain no other Job shares (pure).

Upstream's alpha annotations, on the JobSet (every replicated job) or on a replicated job's Job
template metadata (that replicated job; it wins over the JobSet's):

- ``alpha.jobset.sigs.k8s.io/exclusive-topology: <node label key>``: the pods of one Job must
  share one value of that node label (a topology domain: rack, node pool, zone), and no pod of
  another Job may run in that domain.
- ``alpha.jobset.sigs.k8s.io/node-selector`` (any value; only with exclusive-topology at the
  same level): the nodes were labelled ahead of time, one Job per domain, with
  ``alpha.jobset.sigs.k8s.io/namespaced-job: <namespace>_<job name>`` and tainted
  ``alpha.jobset.sigs.k8s.io/no-schedule`` (NoSchedule); the pods select their Job's label and
  tolerate the taint. The scheduler then filters nodes by label only.

Upstream's controller once wrote the affinity form into the Job template, then moved it to a pod
webhook (affinities on each Job's first pod, the others pinned to its domain by nodeSelector).
This controller runs no webhook: it writes the constraints into the Job's pod template, so every
pod carries the required pod affinity to its own Job and the anti-affinity to other Jobs' pods.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from controller.api import bounds
from controller.jobset import api
from controller.runtime.store import Obj

EXCLUSIVE_TOPOLOGY = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODE_SELECTOR_STRATEGY = "alpha.jobset.sigs.k8s.io/node-selector"
NAMESPACED_JOB = "alpha.jobset.sigs.k8s.io/namespaced-job"
NO_SCHEDULE_TAINT = "alpha.jobset.sigs.k8s.io/no-schedule"

TOPOLOGY_KEY_RULE = (
    "must be a node label key (a qualified name: an optional DNS subdomain prefix and '/', then "
    f"at most {bounds.MAX_LABEL_VALUE} letters, digits, '-', '_' or '.', starting and ending with "
    "a letter or digit)"
)

# Matched whole (fullmatch): ``$`` would also admit a trailing newline, which Kubernetes refuses.
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@dataclass(frozen=True)
class Placement:
    """How one replicated job's Jobs are placed: the node label that names a domain, and whether
    the nodes were labelled per Job ahead of time (node-selector strategy)."""

    topology_key: str
    node_selector: bool


def job_name(jobset: str, replicated_job: str, index: int) -> str:
    """``<jobset>-<replicatedJob>-<index>``, upstream's child Job name (see construct.job_name)."""
    return f"{jobset}-{replicated_job.lower()}-{index}"


def namespaced_job(namespace: str, job: str) -> str:
    """The node label value the node-selector strategy selects: ``<namespace>_<job>`` ('/' is
    not allowed in a label value, hence '_', as upstream)."""
    return f"{namespace}_{job}"


def qualified_name_error(key: str) -> str | None:
    """Why ``key`` is not a label key (Kubernetes' qualified-name syntax), or None."""
    parts = key.split("/")
    if len(parts) > 2:
        return f"{key!r} has more than one '/'"
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            return f"{key!r} has an empty prefix before '/'"
        if len(prefix) > bounds.MAX_DNS_SUBDOMAIN or not _SUBDOMAIN.fullmatch(prefix):
            return f"{key!r}: the prefix must be a lower-case DNS subdomain"
    if not name:
        return f"{key!r}: the name part is empty"
    if len(name) > bounds.MAX_LABEL_VALUE:
        return f"{key!r}: the name part is longer than {bounds.MAX_LABEL_VALUE} characters"
    if not _NAME.fullmatch(name):
        return f"{key!r}: the name part has a character other than letters, digits, '-', '_', '.'"
    return None


def annotation_error(annotations: Mapping[str, Any], where: str) -> str | None:
    """The refusal of a bad exclusive-topology annotation in ``annotations``, or None."""
    if EXCLUSIVE_TOPOLOGY not in annotations:
        return None
    key = annotations[EXCLUSIVE_TOPOLOGY]
    error = qualified_name_error(key) if isinstance(key, str) else "not a string"
    if error is None:
        return None
    return f"{where}[{EXCLUSIVE_TOPOLOGY}] {TOPOLOGY_KEY_RULE}: {error}"


def placement(
    jobset_annotations: Mapping[str, str], template_annotations: Mapping[str, str]
) -> Placement | None:
    """The placement of a replicated job's Jobs, None when it has none.

    As upstream: the replicated job's exclusive-topology wins over the JobSet's; the
    node-selector flag counts on the JobSet only together with the JobSet's exclusive-topology,
    and on the template whenever present (upstream copies the template's annotations to the Job
    and reads the flag there).
    """
    key = template_annotations.get(EXCLUSIVE_TOPOLOGY, jobset_annotations.get(EXCLUSIVE_TOPOLOGY))
    if key is None:
        return None
    node_selector = NODE_SELECTOR_STRATEGY in template_annotations or (
        EXCLUSIVE_TOPOLOGY in jobset_annotations and NODE_SELECTOR_STRATEGY in jobset_annotations
    )
    return Placement(topology_key=key, node_selector=node_selector)


def child_annotations(
    jobset_annotations: Mapping[str, str], template_annotations: Mapping[str, str]
) -> dict[str, str]:
    """The placement annotations upstream puts on each child Job and its pods (tools read them):
    the JobSet's pair, then the replicated job's over it."""
    out: dict[str, str] = {}
    for source in (jobset_annotations, template_annotations):
        if EXCLUSIVE_TOPOLOGY in source:
            out[EXCLUSIVE_TOPOLOGY] = source[EXCLUSIVE_TOPOLOGY]
            if NODE_SELECTOR_STRATEGY in source:
                out[NODE_SELECTOR_STRATEGY] = source[NODE_SELECTOR_STRATEGY]
    return out


def node_selector_error(namespace: str, job: str, where: str) -> str | None:
    """The refusal of a Job whose node-selector label value Kubernetes would refuse, or None."""
    value = namespaced_job(namespace, job)
    if len(value) <= bounds.MAX_LABEL_VALUE:
        return None
    return (
        f"{where}: the node-selector strategy selects the node label {NAMESPACED_JOB}="
        f"<namespace>_<job name>, and {value!r} is longer than {bounds.MAX_LABEL_VALUE} "
        "characters: shorten the namespace, JobSet or replicated job name"
    )


def _term(topology_key: str, expressions: list[Obj]) -> Obj:
    # An empty namespaceSelector means every namespace: exclusivity is cluster-wide, as upstream.
    return {
        "labelSelector": {"matchExpressions": expressions},
        "topologyKey": topology_key,
        "namespaceSelector": {},
    }


def affinity_terms(topology_key: str, key: str) -> tuple[Obj, Obj]:
    """The required pod affinity (to this Job's pods, by job-key ``key``) and anti-affinity (to
    every other Job's pods: a job-key that is not ``key``), both over ``topology_key``."""
    together = _term(topology_key, [{"key": api.JOB_KEY, "operator": "In", "values": [key]}])
    apart = _term(
        topology_key,
        [
            {"key": api.JOB_KEY, "operator": "Exists"},
            {"key": api.JOB_KEY, "operator": "NotIn", "values": [key]},
        ],
    )
    return together, apart


def _required(section: Any, term: Obj) -> Obj:
    """``section`` (podAffinity or podAntiAffinity) copied with ``term`` appended to its
    required terms; the user's own terms stay."""
    copied: Obj = dict(section) if isinstance(section, dict) else {}
    terms = copied.get("requiredDuringSchedulingIgnoredDuringExecution")
    listed = list(terms) if isinstance(terms, list) else []
    copied["requiredDuringSchedulingIgnoredDuringExecution"] = [*listed, term]
    return copied


def constrained(pod_spec: Obj, where: Placement, namespace: str, job: str, key: str) -> Obj:
    """``pod_spec`` (not changed) copied with the scheduling constraints of ``where`` for the Job
    ``job`` of job-key ``key``; only the fields written are copied."""
    spec = dict(pod_spec)
    if where.node_selector:
        selector = spec.get("nodeSelector")
        spec["nodeSelector"] = {
            **(selector if isinstance(selector, dict) else {}),
            NAMESPACED_JOB: namespaced_job(namespace, job),
        }
        tolerations = spec.get("tolerations")
        spec["tolerations"] = [
            *(tolerations if isinstance(tolerations, list) else []),
            {"key": NO_SCHEDULE_TAINT, "operator": "Exists", "effect": "NoSchedule"},
        ]
        return spec
    together, apart = affinity_terms(where.topology_key, key)
    affinity: Obj = dict(spec["affinity"]) if isinstance(spec.get("affinity"), dict) else {}
    affinity["podAffinity"] = _required(affinity.get("podAffinity"), together)
    affinity["podAntiAffinity"] = _required(affinity.get("podAntiAffinity"), apart)
    spec["affinity"] = affinity
    return spec
