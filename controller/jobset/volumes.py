"""Volume claim policies: which claims a JobSet needs, how its Jobs mount them, what to keep (pure).

Both spellings of a policy normalise to ``VolumePolicy``:

- ``spec.volumeClaimPolicies[]`` (upstream, plus our ``targetReplicatedJobs``, ``scope`` and the
  extra ``retentionPolicy`` fields), and
- ``spec.volumePolicy`` (the original request: ``replicatedJobs: [{name}]``,
  ``volumeClaimTemplates``, ``retentionPolicy``), always JobSet scope.

Claim names are deterministic (``<template>-<jobset>``, or
``<template>-<jobset>-<replicatedJob>-<jobIndex>`` for Job scope) so that a restarted controller,
and a restarted JobSet, find the same claims again.

Everything here takes observed objects as plain JSON dicts and tolerates missing fields. Invalid
policies raise ``InvalidJobSet`` naming the field; nothing else is raised for bad input.
"""

from __future__ import annotations

import collections
import copy
import decimal
import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from controller.jobset import api
from controller.jobset.model import InvalidJobSet, JobSet, Obj, ReplicatedJob

Scope = Literal["JobSet", "Job", "Pod"]
Classification = Literal["owned", "adoptable", "conflict"]
Keep = Literal["Retain", "Delete"]

# Labels on the claims we create (besides api.JOBSET_NAME, and for Job scope
# api.REPLICATED_JOB_NAME and api.JOB_INDEX).
CLAIM_TEMPLATE_LABEL = "jobset.sigs.k8s.io/volume-template"
CLAIM_SCOPE_LABEL = "jobset.sigs.k8s.io/volume-scope"
# The uid of the JobSet instance that currently owns the claim.
OWNER_UID_ANNOTATION = "jobset.sigs.k8s.io/jobset-uid"
# Set when a JobSet with ``whenDeleted: Retain`` went away: the uid it was retained from.
RETAINED_FROM_ANNOTATION = "jobset.sigs.k8s.io/retained-from-uid"
FINALIZER = "jobset.x-k8s.io/volume-retention"
# Set by the scheduler on a WaitForFirstConsumer claim once a pod using it was placed.
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"

# VolumesReady reasons.
REASON_NO_VOLUMES = "NoVolumeClaims"
REASON_CLAIMS_BOUND = "ClaimsBound"
REASON_WAITING_FOR_FIRST_CONSUMER = "WaitingForFirstConsumer"
REASON_CLAIM_CONFLICT = "ClaimConflict"
REASON_CLAIMS_MISSING = "ClaimsNotCreated"
REASON_CLAIMS_LOST = "ClaimsLost"
# The JobSet finished and its retention (whenCompleted/whenFailed: Delete) released the claims.
REASON_CLAIMS_RELEASED = "ClaimsReleased"
REASON_CLAIMS_PENDING = "ClaimsPending"

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_MAX_LABEL = 63
_MAX_SUBDOMAIN = 253
_SHOWN = 5  # names listed in a message before "and N more"


# ----------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class Retention:
    when_deleted: Keep = "Delete"
    when_completed: Keep = "Retain"
    when_failed: Keep = "Retain"
    when_scaled: Keep = "Retain"


@dataclass(frozen=True)
class ClaimTemplate:
    name: str
    labels: dict[str, str] = field(hash=False)
    annotations: dict[str, str] = field(hash=False)
    spec: Obj = field(hash=False)  # PersistentVolumeClaimSpec; never mutate


@dataclass(frozen=True)
class VolumePolicy:
    templates: tuple[ClaimTemplate, ...]
    retention: Retention
    targets: tuple[str, ...] | None  # None: every replicated job that mounts a template's name
    scope: Scope
    where: str = ""  # the field it came from, for messages: spec.volumeClaimPolicies[0], ...


# Claims one JobSet may ask for, as many as child Jobs (api.MAX_CHILD_JOBS): every reconcile lists
# every desired claim several times; 10,000 claims and Jobs plan in 1.5-2.5 s on a 2-core machine.
MAX_CLAIMS = api.MAX_CHILD_JOBS


@dataclass(frozen=True)
class DesiredClaim:
    name: str
    template: ClaimTemplate
    policy: VolumePolicy
    replicated_job: str | None
    job_index: int | None
    jobset: JobSet = field(hash=False, compare=False, repr=False)

    @functools.cached_property
    def metadata(self) -> Obj:
        """The claim's metadata (name, namespace, labels, annotations, ownerReferences)."""
        return _claim_metadata(
            self.jobset, self.policy, self.template, self.name, self.replicated_job, self.job_index
        )

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


# ----------------------------------------------------------------------------- small readers


def _d(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _meta(obj: Any) -> Obj:
    return _d(_d(obj).get("metadata"))


def _labels(obj: Any) -> Obj:
    return _d(_meta(obj).get("labels"))


def _annotations(obj: Any) -> Obj:
    return _d(_meta(obj).get("annotations"))


def _name(obj: Any) -> str:
    name = _meta(obj).get("name")
    return name if isinstance(name, str) else ""


def _terminating(obj: Any) -> bool:
    return bool(_meta(obj).get("deletionTimestamp"))


def _phase(obj: Any) -> str:
    phase = _d(_d(obj).get("status")).get("phase")
    return phase if isinstance(phase, str) else ""


def _listing(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    more = len(names) - _SHOWN
    return shown if more <= 0 else f"{shown} and {more} more"


# ----------------------------------------------------------------------------- quantities

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
}
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?:(?P<exponent>[eE][+-]?[0-9]+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?)$"
)
# Kubernetes parses an exponent as an int32 (``1e1000`` is a valid quantity): so do we, in a
# decimal context wide enough to hold the result.
_MAX_EXPONENT = 2**31 - 1
_WIDE = decimal.Context(Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def parse_quantity(text: str) -> Decimal:
    """A Kubernetes resource quantity (``10Gi``, ``500M``, ``1.5e3``, ``250m``) as a number."""
    match = _QUANTITY.match(text) if isinstance(text, str) else None
    if match is None:
        raise InvalidJobSet(f"{text!r} is not a valid quantity")
    number = Decimal(match["number"])
    if match["exponent"] is not None:
        exponent = int(match["exponent"][1:])
        if abs(exponent) > _MAX_EXPONENT:
            raise InvalidJobSet(f"{text!r} is out of range for a quantity")
        return number.scaleb(exponent, context=_WIDE)
    suffix = match["suffix"] or ""
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    return number * _DECIMAL[suffix]


def _quantity(value: Any) -> Decimal | None:
    """A quantity from a JSON value (string or number); None when absent or unreadable."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        return parse_quantity(value if isinstance(value, str) else str(value))
    except (InvalidJobSet, InvalidOperation):
        return None


def _storage(spec: Any) -> Any:
    return _d(_d(_d(spec).get("resources")).get("requests")).get("storage")


# ----------------------------------------------------------------------------- parsing


def _str_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidJobSet(f"{where} must be an object, got {type(value).__name__}")
    for key, item in value.items():
        if not isinstance(item, str):
            raise InvalidJobSet(f"{where}.{key} must be a string, got {item!r}")
    return dict(value)


def _template(raw: Any, where: str) -> ClaimTemplate:
    if not isinstance(raw, dict):
        raise InvalidJobSet(f"{where} must be an object, got {type(raw).__name__}")
    meta = raw.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise InvalidJobSet(f"{where}.metadata must be an object, got {type(meta).__name__}")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise InvalidJobSet(f"{where}.metadata.name is required (it names the pod volume)")
    if len(name) > _MAX_LABEL or not _DNS_LABEL.match(name):
        raise InvalidJobSet(
            f"{where}.metadata.name {name!r} must be a DNS-1123 label (lowercase letters, "
            f"digits and '-', at most {_MAX_LABEL} characters): it names the pod volume"
        )
    if meta.get("namespace"):
        raise InvalidJobSet(
            f"{where}.metadata.namespace must not be set: claims are always created in the "
            "JobSet's namespace"
        )
    spec = raw.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise InvalidJobSet(f"{where}.spec must be an object, got {type(spec).__name__}")
    storage = _storage(spec)
    if storage is not None and _quantity(storage) is None:
        raise InvalidJobSet(
            f"{where}.spec.resources.requests.storage: {storage!r} is not a valid quantity"
        )
    return ClaimTemplate(
        name=name,
        labels=_str_map(meta.get("labels"), f"{where}.metadata.labels"),
        annotations=_str_map(meta.get("annotations"), f"{where}.metadata.annotations"),
        spec=copy.deepcopy(spec),
    )


def _templates(raw: Any, where: str) -> tuple[ClaimTemplate, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InvalidJobSet(f"{where} must be a list, got {type(raw).__name__}")
    return tuple(_template(t, f"{where}[{i}]") for i, t in enumerate(raw))


def _keep(value: Any, where: str, default: Keep) -> Keep:
    if value is None or value == "":
        return default
    if value == "Retain":
        return "Retain"
    if value == "Delete":
        return "Delete"
    raise InvalidJobSet(f"{where} must be Retain or Delete, got {value!r}")


def _retention(raw: Any, where: str) -> Retention:
    if raw is None:
        return Retention()
    if not isinstance(raw, dict):
        raise InvalidJobSet(f"{where} must be an object, got {type(raw).__name__}")
    return Retention(
        when_deleted=_keep(raw.get("whenDeleted"), f"{where}.whenDeleted", "Delete"),
        when_completed=_keep(raw.get("whenCompleted"), f"{where}.whenCompleted", "Retain"),
        when_failed=_keep(raw.get("whenFailed"), f"{where}.whenFailed", "Retain"),
        when_scaled=_keep(raw.get("whenScaled"), f"{where}.whenScaled", "Retain"),
    )


def _target_names(raw: Any, where: str) -> tuple[str, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise InvalidJobSet(f"{where} must be a list, got {type(raw).__name__}")
    names = []
    for i, item in enumerate(raw):
        if not isinstance(item, str) or not item:
            raise InvalidJobSet(f"{where}[{i}] must be a replicated job name, got {item!r}")
        names.append(item)
    return tuple(names)


def _upstream_policy(raw: Any, where: str) -> VolumePolicy:
    if not isinstance(raw, dict):
        raise InvalidJobSet(f"{where} must be an object, got {type(raw).__name__}")
    scope = raw.get("scope")
    if scope is None or scope == "":
        scope = "JobSet"
    if scope == "Pod":
        raise InvalidJobSet(
            f"{where}.scope: Pod scope is not supported yet (a later release adds it); "
            "use JobSet or Job"
        )
    if scope not in ("JobSet", "Job"):
        raise InvalidJobSet(f"{where}.scope must be JobSet, Job or Pod, got {scope!r}")
    chosen: Scope = "Job" if scope == "Job" else "JobSet"
    return VolumePolicy(
        templates=_templates(raw.get("templates"), f"{where}.templates"),
        retention=_retention(raw.get("retentionPolicy"), f"{where}.retentionPolicy"),
        targets=_target_names(raw.get("targetReplicatedJobs"), f"{where}.targetReplicatedJobs"),
        scope=chosen,
        where=where,
    )


def _request_policy(raw: Any, where: str) -> VolumePolicy:
    if not isinstance(raw, dict):
        raise InvalidJobSet(f"{where} must be an object, got {type(raw).__name__}")
    targets_raw = raw.get("replicatedJobs")
    targets: tuple[str, ...] | None = None
    if targets_raw is not None:
        if not isinstance(targets_raw, list):
            raise InvalidJobSet(
                f"{where}.replicatedJobs must be a list, got {type(targets_raw).__name__}"
            )
        names = []
        for i, item in enumerate(targets_raw):
            name = item.get("name") if isinstance(item, dict) else None
            if not isinstance(name, str) or not name:
                raise InvalidJobSet(f"{where}.replicatedJobs[{i}].name is required")
            names.append(name)
        targets = tuple(names)
    return VolumePolicy(
        templates=_templates(raw.get("volumeClaimTemplates"), f"{where}.volumeClaimTemplates"),
        retention=_retention(raw.get("retentionPolicy"), f"{where}.retentionPolicy"),
        targets=targets,
        scope="JobSet",
        where=where,
    )


# ----------------------------------------------------------------------------- pod templates


def mounted_names(rjob: ReplicatedJob) -> frozenset[str]:
    """Names of every volumeMount of the replicated job's containers and initContainers."""
    return rjob.mount_names


def _volume_names(rjob: ReplicatedJob) -> frozenset[str]:
    return rjob.volume_names


def targeted(policy: VolumePolicy, jobset: JobSet) -> tuple[str, ...]:
    """The replicated jobs (in spec order) whose pods get the policy's volumes."""
    if policy.targets is not None:
        return tuple(r.name for r in jobset.replicated_jobs if r.name in policy.targets)
    wanted = {t.name for t in policy.templates}
    return tuple(r.name for r in jobset.replicated_jobs if wanted & mounted_names(r))


# ----------------------------------------------------------------------------- names


def claim_name(
    template: str,
    jobset: str,
    scope: Scope,
    replicated_job: str | None = None,
    job_index: int | None = None,
) -> str:
    """``<template>-<jobset>`` (JobSet scope) or ``<template>-<jobset>-<rjob>-<index>`` (Job).

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
    raise InvalidJobSet(f"scope {scope!r}: Pod scope is not supported yet; use JobSet or Job")


def _valid_claim_name(name: str) -> bool:
    return len(name) <= _MAX_SUBDOMAIN and bool(_DNS_SUBDOMAIN.match(name))


# ----------------------------------------------------------------------------- policies


def _raw_policies(jobset: JobSet) -> list[VolumePolicy]:
    spec = _d(jobset.raw.get("spec"))
    found: list[VolumePolicy] = []
    upstream = spec.get("volumeClaimPolicies")
    if upstream is not None:
        if not isinstance(upstream, list):
            raise InvalidJobSet(
                f"spec.volumeClaimPolicies must be a list, got {type(upstream).__name__}"
            )
        found.extend(
            _upstream_policy(p, f"spec.volumeClaimPolicies[{i}]") for i, p in enumerate(upstream)
        )
    request = spec.get("volumePolicy")
    if request is not None:
        found.append(_request_policy(request, "spec.volumePolicy"))
    return found


def _targets_field(policy: VolumePolicy) -> str:
    suffix = ".replicatedJobs" if policy.where == "spec.volumePolicy" else ".targetReplicatedJobs"
    return policy.where + suffix


def _templates_field(policy: VolumePolicy, index: int) -> str:
    key = "volumeClaimTemplates" if policy.where == "spec.volumePolicy" else "templates"
    return f"{policy.where}.{key}[{index}]"


def _validate(jobset: JobSet, found: list[VolumePolicy]) -> None:
    names = collections.Counter(t.name for p in found for t in p.templates)
    repeated = sorted(n for n, count in names.items() if count > 1)
    if repeated:
        raise InvalidJobSet(
            "spec: volume claim template names must be unique across volumeClaimPolicies and "
            f"volumePolicy, repeated: {', '.join(repeated)}"
        )
    rjob_names = {r.name for r in jobset.replicated_jobs}
    positions = {r.name: i for i, r in enumerate(jobset.replicated_jobs)}
    for policy in found:
        for target in policy.targets or ():
            if target not in rjob_names:
                raise InvalidJobSet(
                    f"{_targets_field(policy)}: {target!r} is not a replicated job of this JobSet"
                )
        chosen = set(targeted(policy, jobset))
        for i, template in enumerate(policy.templates):
            users = [
                r.name
                for r in jobset.replicated_jobs
                if r.name in chosen and template.name in mounted_names(r)
            ]
            if not users:
                raise InvalidJobSet(
                    f"{_templates_field(policy, i)}: volume claim template {template.name!r} is "
                    "not mounted by any replicated job it targets (add a volumeMount named "
                    f"{template.name!r} to a container)"
                )
            for rjob in jobset.replicated_jobs:
                where = f"spec.replicatedJobs[{positions[rjob.name]}]"
                if rjob.name in chosen and template.name in _volume_names(rjob):
                    raise InvalidJobSet(
                        f"{where}.template.spec.template.spec.volumes: replicated job "
                        f"{rjob.name!r} defines a volume named {template.name!r}, which the "
                        f"volume claim template of {policy.where} provides; remove it"
                    )
                # Not targeted: its pods must not mount the name, unless they define a volume of
                # that name themselves (then they mount their own volume, and start).
                if (
                    rjob.name not in chosen
                    and template.name in mounted_names(rjob)
                    and template.name not in _volume_names(rjob)
                ):
                    raise InvalidJobSet(
                        f"{where}: replicated job {rjob.name!r} mounts {template.name!r}, but "
                        f"{_targets_field(policy)} does not include it (its pods would never "
                        "start)"
                    )


def _validate_claim_names(jobset: JobSet, found: tuple[VolumePolicy, ...]) -> None:
    seen: dict[str, str] = {}
    for policy, template, _, _, name in _slots(jobset, found):
        if not _valid_claim_name(name):
            raise InvalidJobSet(
                f"{policy.where}: claim name {name!r} must be a DNS-1123 subdomain of at most "
                f"{_MAX_SUBDOMAIN} characters: shorten the JobSet, template or replicated job name"
            )
        if name in seen:
            raise InvalidJobSet(
                f"{policy.where}: claim name {name!r} of template {template.name!r} collides "
                f"with the claim of template {seen[name]!r}: rename a template or replicated job"
            )
        seen[name] = template.name


def claim_count(jobset: JobSet, found: Iterable[VolumePolicy]) -> int:
    """How many claims the policies ask for: one per JobSet-scope template, one per Job-scope
    template and child Job of the replicated jobs it targets."""
    count = 0
    for policy in found:
        if policy.scope == "JobSet":
            count += len(policy.templates)
            continue
        replicas = 0
        for name in targeted(policy, jobset):
            rjob = jobset.replicated_job(name)
            replicas += rjob.replicas if rjob is not None else 0
        count += len(policy.templates) * replicas
    return count


def policies(jobset: JobSet) -> tuple[VolumePolicy, ...]:
    """The JobSet's volume claim policies, both spellings, validated; () when it has none."""
    found = _raw_policies(jobset)
    _validate(jobset, found)
    result = tuple(found)
    count = claim_count(jobset, result)
    if count > MAX_CLAIMS:
        # Every reconcile lists every desired claim several times; 16 Job-scope templates on
        # 10,000 Jobs (160,000 claims) took over a minute of event-loop time per reconcile.
        raise InvalidJobSet(
            f"spec: the volume claim policies ask for {count} claims; at most {MAX_CLAIMS} per "
            "JobSet (Job-scope templates count once per child Job they target)"
        )
    _validate_claim_names(jobset, result)
    return result


# ----------------------------------------------------------------------------- desired claims


def _claim_metadata(
    jobset: JobSet,
    policy: VolumePolicy,
    template: ClaimTemplate,
    name: str,
    rjob: str | None,
    index: int | None,
) -> Obj:
    labels = dict(template.labels)
    labels[api.JOBSET_NAME] = jobset.name
    labels[CLAIM_TEMPLATE_LABEL] = template.name
    labels[CLAIM_SCOPE_LABEL] = policy.scope
    if rjob is not None and index is not None:
        labels[api.REPLICATED_JOB_NAME] = rjob
        labels[api.JOB_INDEX] = str(index)
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


_Slot = tuple[VolumePolicy, ClaimTemplate, str | None, int | None, str]


def _slots(jobset: JobSet, found: Iterable[VolumePolicy]) -> Iterable[_Slot]:
    """(policy, template, replicated job, job index, claim name) of every claim needed now."""
    for policy in found:
        if policy.scope == "JobSet":
            for template in policy.templates:
                yield policy, template, None, None, claim_name(template.name, jobset.name, "JobSet")
            continue
        for rjob_name in targeted(policy, jobset):
            rjob = jobset.replicated_job(rjob_name)
            replicas = rjob.replicas if rjob is not None else 0
            for template in policy.templates:
                for index in range(replicas):
                    name = claim_name(template.name, jobset.name, policy.scope, rjob_name, index)
                    yield policy, template, rjob_name, index, name


def desired_claims(jobset: JobSet, policies: Iterable[VolumePolicy]) -> list[DesiredClaim]:
    """Every claim the JobSet needs now: per template one (JobSet scope) or one per child Job."""
    return [
        DesiredClaim(name, template, policy, rjob, index, jobset)
        for policy, template, rjob, index, name in _slots(jobset, policies)
    ]


class JobClaims:
    """Pod volume name → claim name for each child Job, under one set of policies.

    A JobSet-scope claim is the same for every Job of a replicated job, so that part is worked out
    once per replicated job and copied; only Job-scope names are made per Job. (Worked out per
    Job, a pod mounting 800 JobSet-scope templates cost 8 s per reconcile for 10,000 Jobs.)
    """

    def __init__(self, jobset: JobSet, policies: Iterable[VolumePolicy]) -> None:
        self.jobset = jobset
        self.policies = tuple(policies)
        # Per replicated job: (template, JobSet-scope claim or None for a Job-scope one) in
        # policy order, and the JobSet-scope part alone when that is all there is.
        self._by_rjob: dict[str, tuple[tuple[tuple[str, str | None], ...], dict[str, str]]] = {}

    def _plan(self, rjob_name: str) -> tuple[tuple[tuple[str, str | None], ...], dict[str, str]]:
        found = self._by_rjob.get(rjob_name)
        if found is not None:
            return found
        order: list[tuple[str, str | None]] = []
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
                if policy.scope == "JobSet":
                    order.append(
                        (template.name, claim_name(template.name, self.jobset.name, "JobSet"))
                    )
                else:
                    claim_name(template.name, self.jobset.name, policy.scope, rjob_name, 0)  # Pod
                    order.append((template.name, None))
        shared = {t: c for t, c in order if c is not None}
        self._by_rjob[rjob_name] = found = (tuple(order), shared)
        return found

    def for_job(self, rjob_name: str, job_index: int) -> dict[str, str]:
        """Pod volume name → claim name, in policy order."""
        order, shared = self._plan(rjob_name)
        if len(shared) == len(order):
            return dict(shared)
        name = self.jobset.name
        return {
            t: c if c is not None else claim_name(t, name, "Job", rjob_name, job_index)
            for t, c in order
        }


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
    """A copy of ``job`` whose pod template has a claim volume for every template it gets.

    Only the objects on the path to the pod's volumes are copied; the rest is shared with ``job``
    (a deep copy of a large template per Job cost seconds per reconcile at 10,000 Jobs).
    """
    result = dict(job)
    if wanted is None:
        wanted = claims_for_job(jobset, policies, rjob_name, job_index)
    if not wanted:
        return result
    spec = result["spec"] = dict(_d(result.get("spec")))
    template = spec["template"] = dict(_d(spec.get("template")))
    pod = template["spec"] = dict(_d(template.get("spec")))
    volumes = list(_l(pod.get("volumes")))
    # Position of each named volume (the first, as a linear search would find), looked up once
    # per claim: a search per claim was quadratic, minutes for 10,000 pods of 800 claims each.
    position: dict[Any, int] = {}
    for i, v in enumerate(volumes):
        position.setdefault(_d(v).get("name"), i)
    for name, claim in wanted.items():
        volume = {"name": name, "persistentVolumeClaim": {"claimName": claim}}
        at = position.get(name)
        if at is None:
            position[name] = len(volumes)
            volumes.append(volume)
        else:
            volumes[at] = volume  # admission forbids a volume of this name; ours wins anyway
    pod["volumes"] = volumes
    return result


# ----------------------------------------------------------------------------- adoption


def _owner_refs(obj: Any) -> list[Obj]:
    return [r for r in _l(_meta(obj).get("ownerReferences")) if isinstance(r, dict)]


def _is_jobset_ref(ref: Mapping[str, Any], name: str) -> bool:
    group = str(ref.get("apiVersion") or "").split("/")[0]
    return ref.get("kind") == api.KIND and group == api.GROUP and ref.get("name") == name


def _foreign_controller(existing: Obj, jobset: JobSet) -> Obj | None:
    """A controller ownerReference to something other than a JobSet of this name."""
    for ref in _owner_refs(existing):
        if ref.get("controller") is True and not _is_jobset_ref(ref, jobset.name):
            return ref
    return None


def _semantic(value: Any) -> Any:
    """Drop empty values so that ``{}``, ``[]``, ``""`` and missing compare equal."""
    if isinstance(value, dict):
        cleaned = {k: _semantic(v) for k, v in value.items()}
        return {k: v for k, v in cleaned.items() if v not in (None, "", [], {})}
    if isinstance(value, list):
        return [_semantic(v) for v in value]
    return value


def compatible(existing_spec: Obj, template_spec: Obj) -> tuple[bool, str]:
    """Whether an existing claim satisfies the template: only what the template sets counts."""
    have = _d(existing_spec)
    want = _d(template_spec)
    modes = _l(want.get("accessModes"))
    if modes:
        have_modes = _l(have.get("accessModes"))
        if set(map(str, modes)) != set(map(str, have_modes)):
            return False, (
                f"access modes {sorted(map(str, have_modes))} differ from the template's "
                f"{sorted(map(str, modes))}"
            )
    wanted_storage = _storage(want)
    wanted_q = _quantity(wanted_storage)
    if wanted_q is not None:
        have_storage = _storage(have)
        have_q = _quantity(have_storage)
        if have_q is None:
            return (
                False,
                f"the claim has no storage request; the template asks for {wanted_storage}",
            )
        if wanted_q > have_q:
            return False, (
                f"the claim requests {have_storage} of storage, less than the template's "
                f"{wanted_storage}"
            )
    if want.get("storageClassName") is not None:
        mine = want.get("storageClassName") or ""
        theirs = have.get("storageClassName") or ""
        if mine != theirs:
            return False, f"storage class {theirs!r} differs from the template's {mine!r}"
    if want.get("volumeMode"):
        mine = want["volumeMode"]
        theirs = have.get("volumeMode") or "Filesystem"
        if mine != theirs:
            return False, f"volume mode {theirs!r} differs from the template's {mine!r}"
    if _semantic(want.get("selector")) and _semantic(want.get("selector")) != _semantic(
        have.get("selector")
    ):
        return False, "the claim's selector differs from the template's"
    for key in ("dataSource", "dataSourceRef"):
        source = _semantic(want.get(key))
        if source and any(_semantic(_d(have.get(key)).get(k)) != v for k, v in _d(source).items()):
            return False, f"the claim's {key} differs from the template's"
    return True, ""


def _owned(existing: Obj, jobset: JobSet) -> bool:
    return (
        _labels(existing).get(api.JOBSET_NAME) == jobset.name
        and _annotations(existing).get(OWNER_UID_ANNOTATION) == jobset.uid
    )


def conflict_reason(existing: Obj, desired: DesiredClaim, jobset: JobSet) -> str:
    """Why ``existing`` cannot be used for ``desired``; "" when it can (owned or adoptable)."""
    if _owned(existing, jobset):
        return ""
    if _labels(existing).get(api.JOBSET_NAME) != jobset.name:
        return (
            f"claim {desired.name} exists but was not made for JobSet {jobset.name} "
            f"(it lacks the label {api.JOBSET_NAME}={jobset.name})"
        )
    if not _annotations(existing).get(RETAINED_FROM_ANNOTATION):
        # Labels are copied by charts and `-o yaml` round trips: only the annotation that Retain
        # writes proves the claim was this controller's, kept from an earlier JobSet of the name.
        return (
            f"claim {desired.name} carries the label {api.JOBSET_NAME}={jobset.name} but was "
            f"neither made by this JobSet nor retained from an earlier one (it lacks the "
            f"annotation {RETAINED_FROM_ANNOTATION} that retention writes); a copied label is "
            f"no proof of ownership"
        )
    foreign = _foreign_controller(existing, jobset)
    if foreign is not None:
        return f"claim {desired.name} is controlled by {foreign.get('kind')} {foreign.get('name')}"
    ok, why = compatible(_d(_d(existing).get("spec")), desired.template.spec)
    if not ok:
        return (
            f"claim {desired.name} (retained from an earlier JobSet {jobset.name}) does not "
            f"match template {desired.template.name}: {why}"
        )
    return ""


def classify(existing: Obj, desired: DesiredClaim, jobset: JobSet) -> Classification:
    """owned: ours already; adoptable: retained from an earlier JobSet of this name (the
    annotation Retain writes, not just the name label), controlled by no one else, and fits."""
    if _owned(existing, jobset):
        return "owned"
    return "conflict" if conflict_reason(existing, desired, jobset) else "adoptable"


def _owner(name: str, uid: str) -> Obj:
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.KIND,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _refs_with_owner(existing: Obj, owner: Obj, want: bool) -> list[Obj]:
    """Existing ownerReferences without stale JobSet ones of this name; ``owner`` iff ``want``."""
    uid = owner.get("uid")
    kept = [
        r
        for r in _owner_refs(existing)
        if not _is_jobset_ref(r, str(owner.get("name"))) or (want and r.get("uid") == uid)
    ]
    if want and not any(r.get("uid") == uid for r in kept):
        kept.append(owner)
    return kept


def adoption_patch(existing: Obj, desired: DesiredClaim, jobset: JobSet) -> Obj:
    """Merge patch making a retained claim this JobSet's (labels, owner uid, ownerReference)."""
    desired_meta = desired.metadata
    labels = {
        k: v for k, v in _d(desired_meta.get("labels")).items() if _labels(existing).get(k) != v
    }
    annotations: dict[str, Any] = {
        k: v
        for k, v in _d(desired_meta.get("annotations")).items()
        if _annotations(existing).get(k) != v
    }
    annotations[OWNER_UID_ANNOTATION] = jobset.uid
    annotations[RETAINED_FROM_ANNOTATION] = None
    metadata: Obj = {"annotations": annotations}
    if labels:
        metadata["labels"] = labels
    want = desired.policy.retention.when_deleted == "Delete"
    refs = _refs_with_owner(existing, jobset.owner_reference(), want)
    if refs != _owner_refs(existing):
        metadata["ownerReferences"] = refs
    return {"metadata": metadata}


def retain_patch(existing: Obj, jobset: JobSet) -> Obj:
    """Merge patch keeping a claim after its JobSet is gone: no ownerReference, note the uid."""
    refs = [r for r in _owner_refs(existing) if r.get("uid") != jobset.uid]
    return {
        "metadata": {
            "annotations": {RETAINED_FROM_ANNOTATION: jobset.uid},
            "ownerReferences": refs or None,
        }
    }


def update_patch(existing: Obj, desired: DesiredClaim) -> Obj | None:
    """Merge patch bringing an owned claim to the desired one; None when nothing differs.

    Storage is only ever raised; labels and annotations are added or changed, never removed;
    the ownerReference is present exactly while the policy deletes claims with the JobSet.
    """
    metadata: Obj = {}
    desired_meta = desired.metadata
    for key, current in (("labels", _labels(existing)), ("annotations", _annotations(existing))):
        changed = {k: v for k, v in _d(desired_meta.get(key)).items() if current.get(k) != v}
        if changed:
            metadata[key] = changed
    owner = _owner(
        str(_d(desired_meta.get("labels")).get(api.JOBSET_NAME, "")),
        str(_d(desired_meta.get("annotations")).get(OWNER_UID_ANNOTATION, "")),
    )
    want = desired.policy.retention.when_deleted == "Delete"
    refs = _refs_with_owner(existing, owner, want)
    if refs != _owner_refs(existing):
        metadata["ownerReferences"] = refs or None
    patch: Obj = {}
    if metadata:
        patch["metadata"] = metadata
    wanted = _storage(desired.template.spec)
    wanted_q = _quantity(wanted)
    have_q = _quantity(_storage(_d(existing).get("spec")))
    if wanted_q is not None and have_q is not None and wanted_q > have_q:
        patch["spec"] = {"resources": {"requests": {"storage": str(wanted)}}}
    return patch or None


def usable_claims(
    jobset: JobSet, desired: Iterable[DesiredClaim], existing_claims: Iterable[Obj]
) -> set[str]:
    """Desired claims that exist, are this JobSet's (owned) and are not being deleted."""
    by_name = {_name(c): c for c in existing_claims}
    result = set()
    for claim in desired:
        found = by_name.get(claim.name)
        if found is not None and not _terminating(found) and _owned(found, jobset):
            result.add(claim.name)
    return result


def missing_claims(
    jobset: JobSet,
    policies: Iterable[VolumePolicy],
    rjob_name: str,
    job_index: int,
    usable: set[str],
) -> list[str]:
    """Claims the Job needs that are not usable yet; create the Job only when this is empty."""
    needed = claims_for_job(jobset, policies, rjob_name, job_index).values()
    return [name for name in needed if name not in usable]


# ----------------------------------------------------------------------------- retention


def _policy_of(claim: Obj, found: Iterable[VolumePolicy]) -> VolumePolicy | None:
    template = _labels(claim).get(CLAIM_TEMPLATE_LABEL)
    return next((p for p in found if any(t.name == template for t in p.templates)), None)


def _scaled_away(claim: Obj, policy: VolumePolicy, jobset: JobSet) -> bool:
    if policy.scope != "Job" or _labels(claim).get(CLAIM_SCOPE_LABEL) != "Job":
        return False
    labels = _labels(claim)
    index_text = labels.get(api.JOB_INDEX)
    if not isinstance(index_text, str) or not index_text.isdigit():
        return False
    rjob = jobset.replicated_job(str(labels.get(api.REPLICATED_JOB_NAME)))
    replicas = rjob.replicas if rjob is not None else 0
    return int(index_text) >= replicas


def claims_to_delete(
    jobset: JobSet,
    policies: Iterable[VolumePolicy],
    existing_claims: list[Obj],
    *,
    deleting: bool,
    terminal_state: str,
) -> list[str]:
    """Owned claims whose retention says Delete now (claims already being deleted are left out)."""
    found = tuple(policies)
    result = []
    for claim in existing_claims:
        if _terminating(claim) or not _owned(claim, jobset):
            continue
        policy = _policy_of(claim, found)
        if policy is None:
            continue
        retention = policy.retention
        if (
            (deleting and retention.when_deleted == "Delete")
            or released_by(retention, terminal_state)
            or (retention.when_scaled == "Delete" and _scaled_away(claim, policy, jobset))
        ):
            result.append(_name(claim))
    return result


def claims_to_retain(
    jobset: JobSet,
    policies: Iterable[VolumePolicy],
    existing_claims: list[Obj],
    *,
    deleting: bool,
    terminal_state: str = "",
) -> list[str]:
    """Owned claims of ``whenDeleted: Retain`` policies that still need ``retain_patch``.

    Only while the JobSet is being deleted; claims that ``claims_to_delete`` (with the same
    ``terminal_state``) deletes are left out.
    """
    if not deleting:
        return []
    found = tuple(policies)
    dropped = set(
        claims_to_delete(
            jobset, found, existing_claims, deleting=True, terminal_state=terminal_state
        )
    )
    result = []
    for claim in existing_claims:
        name = _name(claim)
        if name in dropped or not _owned(claim, jobset):
            continue
        policy = _policy_of(claim, found)
        if policy is None or policy.retention.when_deleted != "Retain":
            continue
        has_ref = any(r.get("uid") == jobset.uid for r in _owner_refs(claim))
        recorded = _annotations(claim).get(RETAINED_FROM_ANNOTATION) == jobset.uid
        if has_ref or not recorded:
            result.append(name)
    return result


# ----------------------------------------------------------------------------- status


def _is_wffc_wait(claim: Obj, wffc_classes: set[str]) -> bool:
    if _phase(claim) != "Pending" or SELECTED_NODE_ANNOTATION in _annotations(claim):
        return False
    storage_class = _d(claim.get("spec")).get("storageClassName")
    return isinstance(storage_class, str) and storage_class in wffc_classes


def volume_status(
    jobset: JobSet, policies: Iterable[VolumePolicy], existing_claims: Iterable[Obj]
) -> list[Obj]:
    """Per template: scope and counts of claims desired / existing (ours) / Bound / Pending / Lost.

    ``conflicts`` counts claims of a desired name that are not this JobSet's and cannot be
    adopted. ``claimName`` is given for JobSet scope only.
    """
    found = tuple(policies)
    by_name = {_name(c): c for c in existing_claims}
    entries: dict[str, Obj] = {}
    for policy in found:
        for template in policy.templates:
            entry: Obj = {
                "name": template.name,
                "scope": policy.scope,
                "desired": 0,
                "existing": 0,
                "bound": 0,
                "pending": 0,
                "lost": 0,
                "conflicts": 0,
            }
            if policy.scope == "JobSet":
                entry["claimName"] = claim_name(template.name, jobset.name, "JobSet")
            entries[template.name] = entry
    for desired in desired_claims(jobset, found):
        entry = entries[desired.template.name]
        entry["desired"] += 1
        claim = by_name.get(desired.name)
        if claim is None:
            continue
        kind = classify(claim, desired, jobset)
        if kind == "conflict":
            entry["conflicts"] += 1
            continue
        if kind == "adoptable":
            continue
        entry["existing"] += 1
        phase = _phase(claim)
        if phase in ("Bound", "Pending", "Lost"):
            entry[phase.lower()] += 1
    return list(entries.values())


def released_by(retention: Retention, terminal_state: str) -> bool:
    """Whether ``retention`` deletes claims once the JobSet reached ``terminal_state``."""
    return (terminal_state == api.TERMINAL_COMPLETED and retention.when_completed == "Delete") or (
        terminal_state == api.TERMINAL_FAILED and retention.when_failed == "Delete"
    )


def volumes_ready(
    jobset: JobSet,
    policies: Iterable[VolumePolicy],
    existing_claims: Iterable[Obj],
    wffc_classes: set[str],
) -> tuple[bool, str, str]:
    """The VolumesReady condition: (ready, reason, message).

    Ready when every desired claim is this JobSet's and Bound, or Pending only because its
    WaitForFirstConsumer storage class binds once a pod is scheduled. Once the stored terminal
    state's retention deleted claims (whenCompleted/whenFailed: Delete), those are released, not
    missing: nothing will create them again.
    """
    desired = desired_claims(jobset, policies)
    if not desired:
        return True, REASON_NO_VOLUMES, "the JobSet needs no volume claims"
    by_name = {_name(c): c for c in existing_claims}
    state = jobset.status.terminal_state
    conflicts, missing, lost, pending, waiting, released = [], [], [], [], [], []
    for claim in desired:
        found = by_name.get(claim.name)
        if released_by(claim.policy.retention, state) and (found is None or _terminating(found)):
            released.append(claim.name)
            continue
        if found is None:
            missing.append(claim.name)
            continue
        kind = classify(found, claim, jobset)
        if kind == "conflict":
            conflicts.append(claim.name)
        elif kind == "adoptable" or _terminating(found):
            missing.append(claim.name)
        elif _phase(found) == "Lost":
            lost.append(claim.name)
        elif _phase(found) == "Bound":
            continue
        elif _is_wffc_wait(found, wffc_classes):
            waiting.append(claim.name)
        else:
            pending.append(claim.name)
    total = len(desired)
    if conflicts:
        return (
            False,
            REASON_CLAIM_CONFLICT,
            (
                f"{len(conflicts)} of {total} claims exist but are not this JobSet's and cannot be "
                f"adopted: {_listing(conflicts)}"
            ),
        )
    if lost:
        return (
            False,
            REASON_CLAIMS_LOST,
            (f"{len(lost)} of {total} claims lost their persistent volume: {_listing(lost)}"),
        )
    if released and not missing:
        return (
            False,
            REASON_CLAIMS_RELEASED,
            (
                f"{len(released)} of {total} claims were released by the retention policy once "
                f"the JobSet was {state}: {_listing(released)}"
            ),
        )
    if missing:
        return (
            False,
            REASON_CLAIMS_MISSING,
            (
                f"{len(missing)} of {total} claims are not created (or adopted) yet: "
                f"{_listing(missing)}"
            ),
        )
    if pending:
        return (
            False,
            REASON_CLAIMS_PENDING,
            (
                f"{len(pending)} of {total} claims are waiting for a volume to be provisioned or "
                f"bound: {_listing(pending)}"
            ),
        )
    if waiting:
        return (
            True,
            REASON_WAITING_FOR_FIRST_CONSUMER,
            (
                f"all {total} claims exist; {len(waiting)} bind when their first pod is scheduled "
                f"(WaitForFirstConsumer): {_listing(waiting)}"
            ),
        )
    return True, REASON_CLAIMS_BOUND, f"all {total} claims are bound"
