"""Pod scope: the placeholder claim name a Job's pod template carries, and how it is resolved.

A Job has one pod template, so it cannot name a different claim for each completion index. The
controller writes a **placeholder** into the template, and the API server itself resolves it for
each pod it admits: the ``MutatingAdmissionPolicy`` in ``manifests/pod-scope/`` replaces the
trailing ``POD-INDEX`` by the completion index the Job controller puts on every pod it creates
(``batch.kubernetes.io/job-completion-index``). That policy's CEL computes exactly
``resolved_claim_name``; tests/integration/test_pod_scope_policy.py checks they agree.

Fail closed: the placeholder has capitals, which no PersistentVolumeClaim name can have (a claim's
name is a lowercase DNS-1123 subdomain), while a pod's ``claimName`` may be any non-empty string.
A pod the policy did not rewrite (policy or binding missing, no index) therefore waits Pending for
a claim that can never exist: it never starts with another index's claim or without one.

The controller writes the placeholders (``desired.mount``) and watches the pods that carry the
label of Pod scope (``pod_view``): one of the JobSet's own Jobs still mounting a placeholder
(``unresolved_pods``) was admitted without the rewrite, and its JobSet says so (``admission``).
``admitted_pod`` is a pod as the policy admits it (``python -m controller render`` prints one).
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from controller.jobset.volumes.model import POD_SCOPE_LABEL

# What the policy replaces; capitals make the placeholder an impossible claim name.
PLACEHOLDER_SUFFIX = "POD-INDEX"
_MARK = "-" + PLACEHOLDER_SUFFIX
# Set by the Job controller on every pod of an Indexed Job, at creation.
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
# The shipped policy and binding (manifests/pod-scope/), both of this name.
POLICY_NAME = "stateful-jobset-pod-scope-volumes"


def placeholder_claim_name(template: str, jobset: str, replicated_job: str, job_index: int) -> str:
    """``<template>-<jobset>-<replicatedJob>-<jobIndex>-POD-INDEX``: the pod template's claim name.

    The replicated job name is lowercased, as for Job scope (``desired.claim_name``), so that
    everything before the suffix is a valid claim name prefix.
    """
    if job_index < 0:
        raise ValueError(f"job index {job_index} is negative")
    return f"{template}-{jobset}-{replicated_job.lower()}-{job_index}{_MARK}"


def is_placeholder(claim_name: str) -> bool:
    """Whether the policy rewrites a pod volume of this claim name (the CEL's ``endsWith``)."""
    return claim_name.endswith(_MARK)


def resolved_claim_name(placeholder: str, index: int) -> str:
    """The claim of the pod with completion index ``index``: the suffix replaced by the index.

    ``placeholder_claim_name(t, js, r, j)`` resolves to ``<t>-<js>-<r>-<j>-<index>``, the Pod-scope
    claim name of the design (docs/volumes.md). Exactly what the policy's CEL computes, for any
    placeholder it matches (lengths count code points in both).
    """
    if not is_placeholder(placeholder):
        raise ValueError(f"{placeholder!r} is not a Pod-scope placeholder (no {_MARK!r} suffix)")
    if isinstance(index, bool) or index < 0:
        raise ValueError(f"completion index {index!r} is not a non-negative integer")
    return placeholder[: -len(PLACEHOLDER_SUFFIX)] + str(index)


def pod_claim_name(
    template: str, jobset: str, replicated_job: str, job_index: int, pod_index: int
) -> str:
    """``<template>-<jobset>-<replicatedJob>-<jobIndex>-<podIndex>``: one pod's claim."""
    return resolved_claim_name(
        placeholder_claim_name(template, jobset, replicated_job, job_index), pod_index
    )


def admitted_pod(job: Mapping[str, Any], index: int, name: str) -> dict[str, Any] | None:
    """The pod of completion index ``index`` of a Job with Pod-scope claims, named ``name`` (the
    Job controller adds a random suffix), as the Job controller creates it and the policy admits
    it: the template's labels and spec, the index as label and annotation, each placeholder
    resolved to that index's claim. None for a Job whose template lacks the label of Pod scope."""
    template = job["spec"]["template"]
    labels = dict((template.get("metadata") or {}).get("labels") or {})
    if labels.get(POD_SCOPE_LABEL) != "true":
        return None
    spec = copy.deepcopy(template["spec"])
    for volume in spec.get("volumes") or []:
        claim = volume.get("persistentVolumeClaim") or {}
        if is_placeholder(str(claim.get("claimName", ""))):
            claim["claimName"] = resolved_claim_name(claim["claimName"], index)
    text = str(index)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": job["metadata"]["namespace"],
            "labels": {**labels, COMPLETION_INDEX_ANNOTATION: text},
            "annotations": {COMPLETION_INDEX_ANNOTATION: text},
        },
        "spec": spec,
    }


def placeholders(pod: Mapping[str, Any]) -> list[str]:
    """The placeholder claim names a pod mounts: left unresolved by the admission policy."""
    spec = pod.get("spec")
    volumes = spec.get("volumes") if isinstance(spec, Mapping) else None
    found = []
    for volume in volumes if isinstance(volumes, list) else []:
        claim = volume.get("persistentVolumeClaim") if isinstance(volume, Mapping) else None
        name = claim.get("claimName") if isinstance(claim, Mapping) else None
        if isinstance(name, str) and is_placeholder(name):
            found.append(name)
    return found


def pod_view(pod: dict[str, Any]) -> dict[str, Any]:
    """What the controller keeps of a Pod-scope pod (its informer's transform): who it is, its
    labels, its controller, and the placeholders it still mounts. Nothing else is ever read."""
    meta = pod.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    kept = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta}
    labels = meta.get("labels")
    kept["labels"] = dict(labels) if isinstance(labels, Mapping) else {}
    # Its controller (the Job): only pods of the JobSet's own Jobs count (``unresolved_pods``).
    refs = meta.get("ownerReferences")
    controller = [
        {k: r[k] for k in ("kind", "name", "uid", "controller") if k in r}
        for r in (refs if isinstance(refs, list) else [])
        if isinstance(r, Mapping) and r.get("controller") is True
    ]
    if controller:
        kept["ownerReferences"] = controller
    claims = [{"persistentVolumeClaim": {"claimName": name}} for name in placeholders(pod)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": kept, "spec": {"volumes": claims}}


@dataclass(frozen=True)
class PodScopePod:
    """A Pod-scope pod as the controller reads it (``pod``): its name, the uid of the Job that
    controls it, and the placeholders it still mounts."""

    name: str
    job_uid: str | None
    placeholders: tuple[str, ...]


def pod(obj: Mapping[str, Any]) -> PodScopePod:
    """The typed view of a cached Pod-scope pod (whole, or as ``pod_view`` keeps it)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    refs = meta.get("ownerReferences")
    job = next(
        (
            r.get("uid")
            for r in (refs if isinstance(refs, list) else [])
            if isinstance(r, Mapping) and r.get("controller") is True and r.get("kind") == "Job"
        ),
        None,
    )
    return PodScopePod(
        name=str(meta.get("name")),
        job_uid=job if isinstance(job, str) else None,
        placeholders=tuple(placeholders(obj)),
    )


def unresolved_pods(pods: Iterable[PodScopePod], jobs: Collection[str]) -> dict[str, list[str]]:
    """Pod name → the placeholders it still mounts, for pods whose controller is one of
    ``jobs`` (uids of the JobSet's own Jobs). A pod that only carries the JobSet's labels (made
    by hand, or by another controller) is not the JobSet's: suspending and resuming it would
    not clear it, so it must not block the JobSet."""
    return {
        p.name: list(p.placeholders)
        for p in pods
        if p.placeholders and p.job_uid is not None and p.job_uid in jobs
    }
