"""The JobSet's volume claim policies, parsed and validated once per reconcile (pure).

Both spellings of a policy normalise to ``VolumePolicy``:

- ``spec.volumeClaimPolicies[]`` (upstream, plus our ``targetReplicatedJobs``, ``scope``,
  ``creationPolicy``, ``snapshotPolicy``, ``restorePolicy``, the extra ``retentionPolicy``
  fields and its ``Snapshot`` value), and
- ``spec.volumePolicy`` (the original request: ``replicatedJobs: [{name}]``,
  ``volumeClaimTemplates``, ``retentionPolicy``, and our ``creationPolicy``,
  ``snapshotPolicy`` and ``restorePolicy``), always JobSet scope.

Invalid policies raise ``InvalidJobSet`` naming the field; nothing else is raised for bad input.

Pod scope is parsed and validated like the others (``completionMode: Indexed``, claim names that
fit); whether its admission policy is installed is the reconciler's question (``admission``), not
the spec's: a Pod-scope JobSet is valid whatever the cluster has.
``VolumeModel`` is what the rest of the package works on: the policies, the desired claims, the
claims this JobSet is known to have had (its uid record) and the Lost claims it accepts to
replace, all read from the JobSet once.
"""

from __future__ import annotations

import collections
import copy
import functools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from controller.api import bounds, fields
from controller.api.fields import Field, ListField, MapField
from controller.jobset.model import InvalidJobSet, JobSet, ReplicatedJob
from controller.jobset.volumes import annotations as annotationsmod
from controller.jobset.volumes import podscope, singlenode
from controller.jobset.volumes import record as recordmod
from controller.jobset.volumes.annotations import ClaimEntries
from controller.jobset.volumes.desired import (
    DesiredClaim,
    JobClaims,
    Slot,
    claim_slots,
    desired_claims,
    mounted_names,
    pod_indexes,
    slot_claim_name,
    targeted,
)
from controller.jobset.volumes.model import (
    MAX_CLAIMS,
    REPLACE_LOST_ANNOTATION,
    ClaimTemplate,
    Keep,
    RestorePolicy,
    Retention,
    Scope,
    SnapshotPolicy,
    VolumePolicy,
    WhenSuspended,
    as_dict,
    storage_of,
)
from controller.jobset.volumes.quantity import quantity
from controller.runtime.store import Obj

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
T = TypeVar("T", str, int, bool)


def _str_map(declared: MapField, raw: Obj, where: str) -> dict[str, str]:
    """The map ``declared`` of ``raw`` (at ``where``), as its one definition reads it."""
    try:
        return declared.read(raw.get(declared.name), f"{where}.{declared.name}")
    except fields.FieldInvalid as err:
        raise InvalidJobSet(str(err)) from None


def _items(declared: ListField, raw: Any, where: str) -> list[Any]:
    """The list ``raw`` (``declared``, at ``where``), [] when left out, within its bounds."""
    try:
        return declared.read(raw, where)
    except fields.FieldInvalid as err:
        raise InvalidJobSet(str(err)) from None


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
    if len(name) > bounds.MAX_NAME or not _DNS_LABEL.match(name):
        raise InvalidJobSet(
            f"{where}.metadata.name {name!r} must be a DNS-1123 label (lowercase letters, "
            f"digits and '-', at most {bounds.MAX_NAME} characters): it names the pod volume"
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
    storage = storage_of(spec)
    if storage is not None and quantity(storage) is None:
        raise InvalidJobSet(
            f"{where}.spec.resources.requests.storage: {storage!r} is not a valid quantity"
        )
    return ClaimTemplate(
        name=name,
        labels=_str_map(fields.CLAIM_LABELS, meta, f"{where}.metadata"),
        annotations=_str_map(fields.CLAIM_ANNOTATIONS, meta, f"{where}.metadata"),
        spec=copy.deepcopy(spec),
    )


def _templates(declared: ListField, raw: Any, where: str) -> tuple[ClaimTemplate, ...]:
    return tuple(_template(t, f"{where}[{i}]") for i, t in enumerate(_items(declared, raw, where)))


def _read(declared: Field[T], raw: Obj, where: str) -> T | None:
    """The field ``declared`` of ``raw``, as its one definition (``controller.api.fields``)
    reads it: a value the schema admits, or what leaving it out means (None: nothing)."""
    try:
        return declared.read(raw.get(declared.name), f"{where}.{declared.name}")
    except fields.FieldInvalid as err:
        raise InvalidJobSet(str(err)) from None


def _choice(declared: Field[str], raw: Obj, where: str) -> str:
    """Like ``_read``, for a field that has a meaning when left out."""
    value = _read(declared, raw, where)
    assert value is not None  # every field read here has a meaning when left out
    return value


def _object(raw: Any, where: str) -> Obj:
    """An optional object of the spec; left out, empty."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise InvalidJobSet(f"{where} must be an object, got {type(raw).__name__}")
    return raw


def _keep(declared: Field[str], raw: Obj, where: str) -> Keep:
    value = _choice(declared, raw, where)
    return "Delete" if value == "Delete" else "Snapshot" if value == "Snapshot" else "Retain"


def _retention(raw: Any, where: str) -> Retention:
    if raw is None:
        return Retention()
    if not isinstance(raw, dict):
        raise InvalidJobSet(f"{where} must be an object, got {type(raw).__name__}")
    return Retention(
        when_deleted=_keep(fields.WHEN_DELETED, raw, where),
        when_completed=_keep(fields.WHEN_COMPLETED, raw, where),
        when_failed=_keep(fields.WHEN_FAILED, raw, where),
        when_scaled=_keep(fields.WHEN_SCALED, raw, where),
        when_suspended=(
            "Snapshot"
            if _choice(fields.RETAIN_WHEN_SUSPENDED, raw, where) == "Snapshot"
            else "Retain"
        ),
    )


def _when_suspended(raw: Any, where: str) -> WhenSuspended:
    """``creationPolicy.whenSuspended``; left out, WaitForResume."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise InvalidJobSet(f"{where} must be an object, got {type(raw).__name__}")
    value = _choice(fields.CREATE_WHEN_SUSPENDED, raw, where)
    return "Create" if value == "Create" else "WaitForResume"


def _snapshots(raw: Any, where: str) -> SnapshotPolicy:
    """``snapshotPolicy``; left out, the default class and one snapshot kept per claim."""
    found = _object(raw, where)
    limit = _read(fields.SNAPSHOT_HISTORY_LIMIT, found, where)
    assert limit is not None  # it has a meaning when left out
    return SnapshotPolicy(
        class_name=_read(fields.SNAPSHOT_CLASS_NAME, found, where) or None,
        group_class_name=_read(fields.GROUP_SNAPSHOT_CLASS_NAME, found, where) or None,
        history_limit=limit,
    )


def _restore(raw: Any, policy_where: str) -> RestorePolicy | None:
    """``restorePolicy``; left out, None (new claims start empty)."""
    if raw is None:
        return None
    where = f"{policy_where}.restorePolicy"
    found = _object(raw, where)
    source = _read(fields.RESTORE_SOURCE, found, where)
    if source is None:
        raise InvalidJobSet(
            f"{where}.source is required: {' or '.join(fields.RESTORE_SOURCE.enum)}"
        )
    name = _read(fields.RESTORE_SNAPSHOT_NAME, found, where) or ""
    # The admission rule restore-snapshot-name (schema.py), for an object stored without it.
    if (source == "VolumeSnapshot") != bool(name):
        raise InvalidJobSet(f"{policy_where}: {fields.RESTORE_SNAPSHOT_NAME_RULE}")
    missing = _choice(fields.RESTORE_WHEN_MISSING, found, where)
    return RestorePolicy(
        source="VolumeSnapshot" if source == "VolumeSnapshot" else "NewestSnapshot",
        snapshot_name=name,
        when_missing="CreateEmpty" if missing == "CreateEmpty" else "Wait",
    )


def _checked(policy: VolumePolicy) -> VolumePolicy:
    """``policy``, if it keeps the rules of ``whenSuspended: Snapshot`` (the admission rules
    suspend-snapshot-restores and suspend-snapshot-not-created, schema.py, for an object stored
    without them): its claims are made again from their snapshots, and only once resumed."""
    if policy.retention.when_suspended != "Snapshot":
        return policy
    if policy.restore is None or policy.restore.source != "NewestSnapshot":
        raise InvalidJobSet(f"{policy.where}: {fields.SUSPEND_SNAPSHOT_RESTORE_RULE}")
    if policy.when_suspended == "Create":
        raise InvalidJobSet(f"{policy.where}: {fields.SUSPEND_SNAPSHOT_CREATE_RULE}")
    return policy


def _target_names(raw: Any, where: str) -> tuple[str, ...] | None:
    if raw is None:
        return None
    names = []
    for i, item in enumerate(_items(fields.POLICY_TARGETS, raw, where)):
        if not isinstance(item, str) or not item:
            raise InvalidJobSet(f"{where}[{i}] must be a replicated job name, got {item!r}")
        names.append(item)
    return tuple(names)


def _upstream_policy(raw: Any, where: str) -> VolumePolicy:
    if not isinstance(raw, dict):
        raise InvalidJobSet(f"{where} must be an object, got {type(raw).__name__}")
    scope = _choice(fields.VOLUME_SCOPE, raw, where)
    chosen: Scope = "Job" if scope == "Job" else "Pod" if scope == "Pod" else "JobSet"
    return _checked(
        VolumePolicy(
            templates=_templates(
                fields.POLICY_TEMPLATES, raw.get("templates"), f"{where}.templates"
            ),
            retention=_retention(raw.get("retentionPolicy"), f"{where}.retentionPolicy"),
            targets=_target_names(raw.get("targetReplicatedJobs"), f"{where}.targetReplicatedJobs"),
            scope=chosen,
            where=where,
            when_suspended=_when_suspended(raw.get("creationPolicy"), f"{where}.creationPolicy"),
            snapshots=_snapshots(raw.get("snapshotPolicy"), f"{where}.snapshotPolicy"),
            restore=_restore(raw.get("restorePolicy"), where),
        )
    )


def _request_policy(raw: Any, where: str) -> VolumePolicy:
    if not isinstance(raw, dict):
        raise InvalidJobSet(f"{where} must be an object, got {type(raw).__name__}")
    targets_raw = raw.get("replicatedJobs")
    targets: tuple[str, ...] | None = None
    if targets_raw is not None:
        targets_where = f"{where}.replicatedJobs"
        names = []
        for i, item in enumerate(_items(fields.VOLUME_POLICY_TARGETS, targets_raw, targets_where)):
            named = item if isinstance(item, dict) else {}
            name = _read(fields.VOLUME_POLICY_TARGET_NAME, named, f"{targets_where}[{i}]")
            if not name:
                raise InvalidJobSet(f"{targets_where}[{i}].name is required")
            names.append(name)
        targets = tuple(names)
    return _checked(
        VolumePolicy(
            templates=_templates(
                fields.VOLUME_POLICY_TEMPLATES,
                raw.get("volumeClaimTemplates"),
                f"{where}.volumeClaimTemplates",
            ),
            retention=_retention(raw.get("retentionPolicy"), f"{where}.retentionPolicy"),
            targets=targets,
            scope="JobSet",
            where=where,
            when_suspended=_when_suspended(raw.get("creationPolicy"), f"{where}.creationPolicy"),
            snapshots=_snapshots(raw.get("snapshotPolicy"), f"{where}.snapshotPolicy"),
            restore=_restore(raw.get("restorePolicy"), where),
        )
    )


def _valid_claim_name(name: str) -> bool:
    return len(name) <= bounds.MAX_CLAIM_NAME and bool(_DNS_SUBDOMAIN.match(name))


def _refused(problem: str) -> VolumePolicy:
    raise InvalidJobSet(problem)


def _entries(spec: Obj) -> Iterator[Callable[[], VolumePolicy]]:
    """Each policy entry of the spec, in order, as a parser that raises ``InvalidJobSet`` when
    the entry (only that one) is invalid; a list of entries that is not one, or is too long, is
    refused first (the entries of a list that is only too long are still read)."""
    upstream = spec.get("volumeClaimPolicies")
    where = "spec.volumeClaimPolicies"
    try:
        fields.VOLUME_CLAIM_POLICIES.read(upstream, where)
    except fields.FieldInvalid as err:
        yield functools.partial(_refused, str(err))
    if isinstance(upstream, list):
        for i, raw in enumerate(upstream):
            yield functools.partial(_upstream_policy, raw, f"{where}[{i}]")
    request = spec.get("volumePolicy")
    if request is not None:
        yield functools.partial(_request_policy, request, "spec.volumePolicy")


def _raw_policies(jobset: JobSet) -> list[VolumePolicy]:
    return [entry() for entry in _entries(as_dict(jobset.raw.get("spec")))]


def readable_policies(spec: Any) -> tuple[list[VolumePolicy], list[str]]:
    """The policy entries that parse on their own, and why each other one does not.

    For deletion, which must not depend on the whole spec being valid: a JobSet that became
    invalid (more claims than ``MAX_CLAIMS`` after raising replicas) still has readable policies.
    """
    found, problems = [], []
    for entry in _entries(as_dict(spec)):
        try:
            found.append(entry())
        except InvalidJobSet as err:
            problems.append(str(err))
    return found, problems


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
                if rjob.name in chosen and template.name in rjob.volume_names:
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
                    and template.name not in rjob.volume_names
                ):
                    raise InvalidJobSet(
                        f"{where}: replicated job {rjob.name!r} mounts {template.name!r}, but "
                        f"{_targets_field(policy)} does not include it (its pods would never "
                        "start)"
                    )


def _job_spec_field(jobset: JobSet, rjob: ReplicatedJob, key: str) -> str:
    position = next(i for i, r in enumerate(jobset.replicated_jobs) if r.name == rjob.name)
    return f"spec.replicatedJobs[{position}].template.spec.{key}"


def _validate_pod_rjob(jobset: JobSet, policy: VolumePolicy, rjob: ReplicatedJob) -> None:
    """A replicated job a Pod-scope policy targets: Indexed, with one claim per completion
    index, the longest of whose names (largest Job and pod index) is a valid claim name."""
    spec = rjob.template.get("spec", {})
    mode = spec.get("completionMode")
    if mode != "Indexed":
        raise InvalidJobSet(
            f"{policy.where}.scope: Pod scope needs completionMode Indexed (each pod finds its "
            f"claim by its completion index), but {_job_spec_field(jobset, rjob, 'completionMode')}"
            f" of replicated job {rjob.name!r} is {mode!r}"
        )
    completions = spec.get("completions")
    if completions is not None and (
        not isinstance(completions, int) or isinstance(completions, bool) or completions < 0
    ):
        raise InvalidJobSet(
            f"{_job_spec_field(jobset, rjob, 'completions')} must be a non-negative integer, "
            f"got {completions!r}"
        )
    if completions is None and "parallelism" in spec:
        raise InvalidJobSet(
            f"{policy.where}.scope: Pod scope needs {_job_spec_field(jobset, rjob, 'completions')}"
            f" for replicated job {rjob.name!r}: an Indexed Job has one pod, and one claim, per "
            "completion index"
        )
    pods = pod_indexes(rjob)
    if rjob.replicas <= 0 or pods <= 0:
        return
    for template in policy.templates:
        name = podscope.pod_claim_name(
            template.name, jobset.name, rjob.name, rjob.replicas - 1, pods - 1
        )
        if len(name) > bounds.MAX_CLAIM_NAME:
            raise InvalidJobSet(
                f"{policy.where}: the Pod-scope claim of the last pod of the last Job, {name!r}, "
                f"has {len(name)} characters, more than the {bounds.MAX_CLAIM_NAME} of a claim "
                "name: shorten the JobSet, template or replicated job name"
            )


def _validate_pod_scope(jobset: JobSet, found: Iterable[VolumePolicy]) -> None:
    for policy in found:
        if policy.scope != "Pod":
            continue
        for name in targeted(policy, jobset):
            rjob = jobset.replicated_job(name)
            if rjob is not None:
                _validate_pod_rjob(jobset, policy, rjob)


def _validate_claim_names(jobset: JobSet, found: tuple[VolumePolicy, ...]) -> None:
    seen: dict[str, str] = {}
    for policy, template, _, name in claim_slots(jobset, found):
        if not _valid_claim_name(name):
            raise InvalidJobSet(
                f"{policy.where}: claim name {name!r} must be a DNS-1123 subdomain of at most "
                f"{bounds.MAX_CLAIM_NAME} characters: shorten the JobSet, template or replicated "
                "job name"
            )
        if name in seen:
            raise InvalidJobSet(
                f"{policy.where}: claim name {name!r} of template {template.name!r} collides "
                f"with the claim of template {seen[name]!r}: rename a template or replicated job"
            )
        seen[name] = template.name


def claim_count(jobset: JobSet, found: Iterable[VolumePolicy]) -> int:
    """How many claims the policies ask for: one per JobSet-scope template, one per Job-scope
    template and child Job of the replicated jobs it targets, one per Pod-scope template and
    completion index of each such child Job."""
    count = 0
    for policy in found:
        if policy.scope == "JobSet":
            count += len(policy.templates)
            continue
        per_template = 0
        for name in targeted(policy, jobset):
            rjob = jobset.replicated_job(name)
            if rjob is None:
                continue
            pods = pod_indexes(rjob) if policy.scope == "Pod" else 1
            per_template += rjob.replicas * pods
        count += len(policy.templates) * per_template
    return count


def policies(jobset: JobSet) -> tuple[VolumePolicy, ...]:
    """The JobSet's volume claim policies, both spellings, validated; () when it has none."""
    found = _raw_policies(jobset)
    _validate(jobset, found)
    result = tuple(found)
    _validate_pod_scope(jobset, result)
    count = claim_count(jobset, result)
    if count > MAX_CLAIMS:
        # Every reconcile lists every desired claim several times; 16 Job-scope templates on
        # 10,000 Jobs (160,000 claims) took over a minute of event-loop time per reconcile.
        raise InvalidJobSet(
            f"spec: the volume claim policies ask for {count} claims; at most {MAX_CLAIMS} per "
            "JobSet (Job-scope templates count once per child Job they target, Pod-scope ones "
            "once per completion index of each)"
        )
    _validate_claim_names(jobset, result)
    return result


def has_pod_scope(stored: Obj) -> bool:
    """Whether a stored JobSet asks for Pod-scope claims (a cheap look, without parsing: which
    JobSets an admission policy event concerns)."""
    found = as_dict(stored.get("spec")).get("volumeClaimPolicies")
    return isinstance(found, list) and any(
        isinstance(p, dict) and p.get("scope") == "Pod" for p in found
    )


@dataclass(frozen=True)
class VolumeModel:
    """Everything a reconcile needs to know of a JobSet's volumes, read from it once."""

    jobset: JobSet
    policies: tuple[VolumePolicy, ...]
    # The claims the JobSet is known to have had (status.volumes.claimUIDs), as stored.
    record: recordmod.ClaimRecord = field(default_factory=recordmod.ClaimRecord)
    # The JobSet's annotations (annotations.py): Lost claims the user accepts to replace with
    # empty ones, and claims without proof the user asks to adopt.
    replace_lost: ClaimEntries = field(default_factory=ClaimEntries)
    adopt: ClaimEntries = field(default_factory=ClaimEntries)

    @property
    def accepted_losses(self) -> frozenset[tuple[str, str]]:
        """(claim name, uid prefix) of each Lost claim the user accepts to replace."""
        return self.replace_lost.pairs()

    @functools.cached_property
    def desired(self) -> list[DesiredClaim]:
        """Every claim the JobSet needs now (built once, whatever asks for it)."""
        return desired_claims(self.jobset, self.policies)

    @functools.cached_property
    def job_claims(self) -> JobClaims:
        return JobClaims(self.jobset, self.policies)

    @functools.cached_property
    def colocation(self) -> singlenode.Colocation:
        """Which Jobs' pods must share a node, for the ReadWriteOnce claims they share."""
        return singlenode.colocation(self.jobset, self.policies)

    @functools.cached_property
    def pod_scope(self) -> bool:
        """Whether any policy is Pod scope (its pods need the admission policy)."""
        return any(p.scope == "Pod" for p in self.policies)

    def slot_name(self, slot: Slot) -> str:
        return slot_claim_name(self.jobset.name, slot)


def model(jobset: JobSet, same_spec_as: VolumeModel | None = None) -> VolumeModel:
    """The JobSet's volume model; raises ``InvalidJobSet`` for policies that cannot be acted on.

    ``same_spec_as``: a model of an earlier version of this JobSet with the same metadata and
    spec (``model.with_new_status``): its policies, which are read from those alone, are taken
    as they are instead of being read and validated again."""
    annotations = as_dict(as_dict(jobset.raw.get("metadata")).get("annotations"))
    return VolumeModel(
        jobset,
        policies(jobset) if same_spec_as is None else same_spec_as.policies,
        recordmod.read_record(jobset.status.volumes),
        annotationsmod.of(annotations, REPLACE_LOST_ANNOTATION),
        annotationsmod.of(annotations, annotationsmod.ADOPT_ANNOTATION),
    )
