"""Desired claims: their deterministic names, their objects, and the pod volumes that mount them.

Claim names are deterministic (``<template>-<jobset>``,
``<template>-<jobset>-<replicatedJob>-<jobIndex>`` for Job scope, and
``<template>-<jobset>-<replicatedJob>-<jobIndex>-<podIndex>`` for Pod scope) so that a restarted
controller, and a restarted JobSet, find the same claims again.

Pod scope: a Job's pod template names one **placeholder** per template (``podscope.py``), which
the admission policy resolves to each pod's own claim; so what a Job *mounts*
(``JobClaims.for_job``, written into its template) differs from the claims it *needs*
(``JobClaims.needed``: one per completion index, all mountable before the Job is created).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.jobset import api
from controller.jobset.model import InvalidJobSet, JobSet, ReplicatedJob
from controller.jobset.volumes import podscope
from controller.jobset.volumes.model import (
    CLAIM_POD_INDEX_LABEL,
    CLAIM_SCOPE_LABEL,
    CLAIM_TEMPLATE_LABEL,
    OWNER_UID_ANNOTATION,
    POD_SCOPE_LABEL,
    ClaimTemplate,
    Scope,
    VolumePolicy,
    as_dict,
    as_list,
)
from controller.runtime.store import Obj

# A claim's place in the model: (template, replicated job, job index, pod index); the last three
# are None for JobSet scope, the pod index is None for Job scope. The name follows from it
# (``claim_name``); the uid record is keyed by it.
Slot = tuple[str, str | None, int | None, int | None]


def slot_scope(slot: Slot) -> Scope:
    """The scope of the claim in ``slot`` (which of its places are given says it)."""
    if slot[1] is None:
        return "JobSet"
    return "Job" if slot[3] is None else "Pod"


def pod_indexes(rjob: ReplicatedJob) -> int:
    """The completion indexes of a Job of ``rjob``: one Pod-scope claim each.

    ``completions`` (not ``parallelism``: with fewer pods at once than completions, every index
    still runs, and each needs its claim before the Job starts). Neither given: Kubernetes
    defaults both to 1. ``parallelism`` alone: an Indexed Job the API server refuses, and that
    ``spec`` refuses for Pod scope; 1 here.
    """
    completions = rjob.completions
    return 1 if completions is None else max(completions, 0)


def targeted(policy: VolumePolicy, jobset: JobSet) -> tuple[str, ...]:
    """The replicated jobs (in spec order) whose pods get the policy's volumes."""
    if policy.targets is not None:
        return tuple(r.name for r in jobset.replicated_jobs if r.name in policy.targets)
    wanted = {t.name for t in policy.templates}
    return tuple(r.name for r in jobset.replicated_jobs if wanted & r.mount_names)


def mounted_names(rjob: ReplicatedJob) -> frozenset[str]:
    """Names of every volumeMount of the replicated job's containers and initContainers."""
    return rjob.mount_names


def claim_name(
    template: str,
    jobset: str,
    scope: Scope,
    replicated_job: str | None = None,
    job_index: int | None = None,
    pod_index: int | None = None,
) -> str:
    """``<template>-<jobset>`` (JobSet scope), ``<template>-<jobset>-<rjob>-<index>`` (Job) or
    ``<template>-<jobset>-<rjob>-<index>-<podIndex>`` (Pod).

    The replicated job name is lowercased, as in ``construct.job_name``: a claim name must be a
    DNS-1123 subdomain.
    """
    if scope == "JobSet":
        return f"{template}-{jobset}"
    if scope == "Job":
        if replicated_job is None or job_index is None:
            raise InvalidJobSet(
                f"the Job-scope claim of template {template!r} needs a replicated job and index"
            )
        return f"{template}-{jobset}-{replicated_job.lower()}-{job_index}"
    if replicated_job is None or job_index is None or pod_index is None:
        raise InvalidJobSet(
            f"the Pod-scope claim of template {template!r} needs a replicated job, a job index "
            "and a pod index"
        )
    return podscope.pod_claim_name(template, jobset, replicated_job, job_index, pod_index)


def slot_claim_name(jobset: str, slot: Slot) -> str:
    """The name of the claim in ``slot``."""
    template, rjob, job_index, pod_index = slot
    return claim_name(template, jobset, slot_scope(slot), rjob, job_index, pod_index)


@dataclass(frozen=True)
class DesiredClaim:
    name: str
    template: ClaimTemplate
    policy: VolumePolicy
    replicated_job: str | None
    job_index: int | None
    jobset: JobSet = field(hash=False, compare=False, repr=False)
    pod_index: int | None = None  # Pod scope only: the completion index of the pod using it

    @property
    def slot(self) -> Slot:
        return (self.template.name, self.replicated_job, self.job_index, self.pod_index)

    @functools.cached_property
    def metadata(self) -> Obj:
        """The claim's metadata (name, namespace, labels, annotations, ownerReferences)."""
        return _claim_metadata(self.jobset, self.policy, self.template, self.name, self.slot)

    @functools.cached_property
    def object(self) -> Obj:
        """The complete PersistentVolumeClaim to create.

        Built when first asked for: a reconcile lists every desired claim several times (up to
        10,000) and needs the whole object only for the few it creates.
        """
        return {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": copy.deepcopy(self.metadata),
            "spec": copy.deepcopy(self.template.spec),
        }


def _claim_metadata(
    jobset: JobSet, policy: VolumePolicy, template: ClaimTemplate, name: str, slot: Slot
) -> Obj:
    _, rjob, index, pod_index = slot
    labels = dict(template.labels)
    labels[api.JOBSET_NAME] = jobset.name
    labels[CLAIM_TEMPLATE_LABEL] = template.name
    labels[CLAIM_SCOPE_LABEL] = policy.scope
    if rjob is not None and index is not None:
        labels[api.REPLICATED_JOB_NAME] = rjob
        labels[api.JOB_INDEX] = str(index)
    if pod_index is not None:
        labels[CLAIM_POD_INDEX_LABEL] = str(pod_index)
    annotations = dict(template.annotations)
    annotations[OWNER_UID_ANNOTATION] = jobset.uid
    metadata: Obj = {
        "name": name,
        "namespace": jobset.namespace,
        "labels": labels,
        "annotations": annotations,
    }
    if policy.retention.when_deleted == "Delete":
        metadata["ownerReferences"] = [jobset.owner_reference()]
    return metadata


SlotEntry = tuple[VolumePolicy, ClaimTemplate, Slot, str]


def _pods(policy: VolumePolicy, rjob: ReplicatedJob) -> Iterable[int | None]:
    """The pod indexes of one Job that get a claim each: all of them (Pod scope), or one claim
    for the whole Job (None)."""
    return range(pod_indexes(rjob)) if policy.scope == "Pod" else (None,)


def claim_slots(jobset: JobSet, found: Iterable[VolumePolicy]) -> Iterable[SlotEntry]:
    """(policy, template, slot, claim name) of every claim needed now: per template, by Job
    index, then by pod index."""
    for policy in found:
        if policy.scope == "JobSet":
            for template in policy.templates:
                slot: Slot = (template.name, None, None, None)
                yield policy, template, slot, claim_name(template.name, jobset.name, "JobSet")
            continue
        for rjob_name in targeted(policy, jobset):
            rjob = jobset.replicated_job(rjob_name)
            if rjob is None:
                continue
            for template in policy.templates:
                for index in range(rjob.replicas):
                    for pod in _pods(policy, rjob):
                        name = claim_name(
                            template.name, jobset.name, policy.scope, rjob_name, index, pod
                        )
                        yield policy, template, (template.name, rjob_name, index, pod), name


def desired_claims(jobset: JobSet, policies: Iterable[VolumePolicy]) -> list[DesiredClaim]:
    """Every claim the JobSet needs now: per template one (JobSet scope), one per child Job (Job
    scope) or one per completion index of every child Job (Pod scope)."""
    return [
        DesiredClaim(
            name=name,
            template=template,
            policy=policy,
            replicated_job=rjob,
            job_index=index,
            jobset=jobset,
            pod_index=pod,
        )
        for policy, template, (_, rjob, index, pod), name in claim_slots(jobset, policies)
    ]


# One template a replicated job gets: (template, scope, its JobSet-scope claim or None).
_Entry = tuple[str, Scope, str | None]


class JobClaims:
    """For each child Job, under one set of policies: pod volume name → the claim name its pod
    template mounts (``for_job``), and every claim its pods use (``needed``).

    A JobSet-scope claim is the same for every Job of a replicated job, so that part is worked out
    once per replicated job and copied; only Job- and Pod-scope names are made per Job. (Worked
    out per Job, a pod mounting 800 JobSet-scope templates cost 8 s per reconcile for 10,000
    Jobs.)
    """

    def __init__(self, jobset: JobSet, policies: Iterable[VolumePolicy]) -> None:
        self.jobset = jobset
        self.policies = tuple(policies)
        # Per replicated job: its templates in policy order, and the JobSet-scope part alone
        # when that is all there is.
        self._by_rjob: dict[str, tuple[tuple[_Entry, ...], dict[str, str]]] = {}

    def _plan(self, rjob_name: str) -> tuple[tuple[_Entry, ...], dict[str, str]]:
        found = self._by_rjob.get(rjob_name)
        if found is not None:
            return found
        order: list[_Entry] = []
        rjob = self.jobset.replicated_job(rjob_name)
        for policy in self.policies:
            if rjob is None:
                break
            # ``rjob_name in targeted(policy, jobset)``, without looking at every replicated job.
            if policy.targets is not None:
                if rjob_name not in policy.targets:
                    continue
            elif not any(t.name in rjob.mount_names for t in policy.templates):
                continue
            for template in policy.templates:
                shared = None
                if policy.scope == "JobSet":
                    shared = claim_name(template.name, self.jobset.name, "JobSet")
                order.append((template.name, policy.scope, shared))
        alone = {t: c for t, _, c in order if c is not None}
        self._by_rjob[rjob_name] = found = (tuple(order), alone)
        return found

    def _own(self, template: str, scope: Scope, rjob_name: str, job_index: int) -> str:
        if scope == "Pod":
            return podscope.placeholder_claim_name(template, self.jobset.name, rjob_name, job_index)
        return claim_name(template, self.jobset.name, "Job", rjob_name, job_index)

    def for_job(self, rjob_name: str, job_index: int) -> dict[str, str]:
        """Pod volume name → the claim name the Job's pod template mounts, in policy order.

        For a Pod-scope template that is the placeholder the admission policy resolves for each
        pod (``podscope.py``), not a claim: ask ``needed`` for the claims.
        """
        order, alone = self._plan(rjob_name)
        if len(alone) == len(order):
            return dict(alone)
        return {
            t: c if c is not None else self._own(t, scope, rjob_name, job_index)
            for t, scope, c in order
        }

    def needed(self, rjob_name: str, job_index: int) -> list[str]:
        """Every claim the Job's pods use, in policy order: what ``for_job`` mounts, with each
        Pod-scope placeholder replaced by the claims of all the Job's completion indexes. A Job
        is created (or resumed) only once all of them are mountable."""
        order, _ = self._plan(rjob_name)
        mounted = self.for_job(rjob_name, job_index)
        rjob = self.jobset.replicated_job(rjob_name)
        result: list[str] = []
        for template, scope, _ in order:
            claim = mounted[template]
            if scope == "Pod" and rjob is not None:
                pods = range(pod_indexes(rjob))
                result.extend(podscope.resolved_claim_name(claim, i) for i in pods)
            else:
                result.append(claim)
        return result


def claims_for_job(
    jobset: JobSet, policies: Iterable[VolumePolicy], rjob_name: str, job_index: int
) -> dict[str, str]:
    """Pod volume name → claim name, for the Job ``job_index`` of replicated job ``rjob_name``."""
    return JobClaims(jobset, policies).for_job(rjob_name, job_index)


def mount(
    job: Obj,
    jobset: JobSet,
    policies: Iterable[VolumePolicy],
    rjob_name: str,
    job_index: int,
    wanted: Mapping[str, str] | None = None,
) -> Obj:
    """A copy of ``job`` whose pod template has a claim volume for every template it gets, and,
    when one is a Pod-scope placeholder, the label that has the admission policy resolve it.

    Only the objects on the path to the pod's volumes are copied; the rest is shared with ``job``
    (a deep copy of a large template per Job cost seconds per reconcile at 10,000 Jobs).
    """
    result = dict(job)
    if wanted is None:
        wanted = claims_for_job(jobset, policies, rjob_name, job_index)
    if not wanted:
        return result
    spec = result["spec"] = dict(as_dict(result.get("spec")))
    template = spec["template"] = dict(as_dict(spec.get("template")))
    pod = template["spec"] = dict(as_dict(template.get("spec")))
    volumes = list(as_list(pod.get("volumes")))
    # Position of each named volume (the first, as a linear search would find), looked up once
    # per claim: a search per claim was quadratic, minutes for 10,000 pods of 800 claims each.
    position: dict[Any, int] = {}
    for i, v in enumerate(volumes):
        position.setdefault(as_dict(v).get("name"), i)
    for name, claim in wanted.items():
        volume = {"name": name, "persistentVolumeClaim": {"claimName": claim}}
        at = position.get(name)
        if at is None:
            position[name] = len(volumes)
            volumes.append(volume)
        else:
            volumes[at] = volume  # admission forbids a volume of this name; ours wins anyway
    pod["volumes"] = volumes
    if any(map(podscope.is_placeholder, wanted.values())):
        # Selects the pods for the admission policy that resolves their placeholders.
        meta = template["metadata"] = dict(as_dict(template.get("metadata")))
        meta["labels"] = {**as_dict(meta.get("labels")), POD_SCOPE_LABEL: "true"}
    return result
