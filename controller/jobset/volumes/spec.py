"""The JobSet's volume claim policies, parsed and validated once per reconcile (pure).

Both spellings of a policy normalise to ``VolumePolicy``:

- ``spec.volumeClaimPolicies[]`` (upstream, plus our ``targetReplicatedJobs``, ``scope``,
  ``creationPolicy``, ``snapshotPolicy``, ``restorePolicy``, the extra ``retentionPolicy``
  fields and its ``Snapshot`` value), and
- ``spec.volumePolicy`` (the original request: ``replicatedJobs: [{name}]``,
  ``volumeClaimTemplates``, ``retentionPolicy``, and our ``creationPolicy``,
  ``snapshotPolicy`` and ``restorePolicy``), always JobSet scope.

Invalid policies raise ``InvalidJobSet`` naming the field; nothing else is raised for bad input.
The rules the API server runs (template names and namespaces, quantities, targets, mounts, the
restore and suspension rules, the claim names' characters and lengths, ``pod-scope-indexed``)
are not written here: ``model.parse`` has run them already, in the API server's words
(``controller.api.validation``). What is left is reading, and what only the controller checks
(docs/api.md "Checked by the controller"): the number of claims, the claim names that collide
(Pod scope's are beyond ``claim-names-unique``), and of the replicated jobs a Pod-scope policy
gives claims, ``completionMode: Indexed`` where the policy has no ``targetReplicatedJobs`` (CEL
cannot tell which replicated jobs mount a template), no ``parallelism: 0`` and no negative
``completions`` (the CRD embeds the Job's schema, which has no bounds).

Whether Pod scope's admission policy is installed is the reconciler's question (``admission``),
not the spec's: a Pod-scope JobSet is valid whatever the cluster has.
``VolumeModel`` is what the rest of the package works on: the policies, the desired claims, the
claims this JobSet is known to have had (its uid record) and the Lost claims it accepts to
replace, all read from the JobSet once.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.api import fields, volumekeys
from controller.api.fields import Field, ListField
from controller.jobset.model import (
    InvalidJobSet,
    JobSet,
    ReplicatedJob,
    read_field,
    read_item,
    read_object,
    refused_on_create,
)
from controller.jobset.volumes import annotations as annotationsmod
from controller.jobset.volumes import metadata, singlenode
from controller.jobset.volumes import record as recordmod
from controller.jobset.volumes.annotations import ClaimEntries
from controller.jobset.volumes.desired import (
    DesiredClaim,
    JobClaims,
    Slot,
    claim_slots,
    desired_claims,
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
)
from controller.runtime.store import Obj


def _template(raw: Any, where: str) -> ClaimTemplate:
    if not isinstance(raw, dict):
        raise InvalidJobSet(f"{where} must be an object, got {type(raw).__name__}")
    meta = raw.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise InvalidJobSet(f"{where}.metadata must be an object, got {type(meta).__name__}")
    name = meta.get("name")
    if not isinstance(name, str) or not name:  # deletion reads policies the parse refused
        raise InvalidJobSet(f"{where}.metadata.name is required (it names the pod volume)")
    spec = raw.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise InvalidJobSet(f"{where}.spec must be an object, got {type(spec).__name__}")
    return ClaimTemplate(
        name=name,
        labels=read_field(fields.CLAIM_LABELS, meta, f"{where}.metadata"),
        annotations=read_field(fields.CLAIM_ANNOTATIONS, meta, f"{where}.metadata"),
        spec=copy.deepcopy(spec),
    )


def _templates(declared: ListField, policy: Obj, where: str) -> tuple[ClaimTemplate, ...]:
    at = f"{where}.{declared.name}"
    return tuple(
        _template(t, f"{at}[{i}]") for i, t in enumerate(read_field(declared, policy, where))
    )


def _choice(declared: Field[str], found: Obj, where: str) -> str:
    """``read_field`` of a field that has a meaning when left out."""
    value = read_field(declared, found, where)
    assert value is not None  # every field read here has a meaning when left out
    return value


def _keep(declared: Field[str], found: Obj, where: str) -> Keep:
    value = _choice(declared, found, where)
    return "Delete" if value == "Delete" else "Snapshot" if value == "Snapshot" else "Retain"


def _retention(policy: Obj, where: str) -> Retention:
    """``retentionPolicy``; left out, every field's default."""
    found = read_object(fields.RETENTION_POLICY, policy, where)
    at = f"{where}.{fields.RETENTION_POLICY.name}"
    return Retention(
        when_deleted=_keep(fields.WHEN_DELETED, found, at),
        when_completed=_keep(fields.WHEN_COMPLETED, found, at),
        when_failed=_keep(fields.WHEN_FAILED, found, at),
        when_scaled=_keep(fields.WHEN_SCALED, found, at),
        when_suspended=(
            "Snapshot"
            if _choice(fields.RETAIN_WHEN_SUSPENDED, found, at) == "Snapshot"
            else "Retain"
        ),
    )


def _when_suspended(policy: Obj, where: str) -> WhenSuspended:
    """``creationPolicy.whenSuspended``; left out, WaitForResume."""
    found = read_object(fields.CREATION_POLICY, policy, where)
    value = _choice(fields.CREATE_WHEN_SUSPENDED, found, f"{where}.{fields.CREATION_POLICY.name}")
    return "Create" if value == "Create" else "WaitForResume"


def _snapshots(policy: Obj, where: str) -> SnapshotPolicy:
    """``snapshotPolicy``; left out, the default class and one snapshot kept per claim."""
    found = read_object(fields.SNAPSHOT_POLICY, policy, where)
    at = f"{where}.{fields.SNAPSHOT_POLICY.name}"
    limit = read_field(fields.SNAPSHOT_HISTORY_LIMIT, found, at)
    assert limit is not None  # it has a meaning when left out
    return SnapshotPolicy(
        class_name=read_field(fields.SNAPSHOT_CLASS_NAME, found, at) or None,
        group_class_name=read_field(fields.GROUP_SNAPSHOT_CLASS_NAME, found, at) or None,
        history_limit=limit,
    )


def _restore(policy: Obj, where: str) -> RestorePolicy | None:
    """``restorePolicy``; left out, None (new claims start empty)."""
    found = read_field(fields.RESTORE_POLICY, policy, where)
    if found is None:
        return None
    at = f"{where}.{fields.RESTORE_POLICY.name}"
    source = read_field(fields.RESTORE_SOURCE, found, at)
    name = read_field(fields.RESTORE_SNAPSHOT_NAME, found, at) or ""
    missing = _choice(fields.RESTORE_WHEN_MISSING, found, at)
    from_jobset = read_field(fields.RESTORE_FROM_JOBSET, found, at) or ""
    return RestorePolicy(
        source="VolumeSnapshot" if source == "VolumeSnapshot" else "NewestSnapshot",
        snapshot_name=name,
        when_missing="CreateEmpty" if missing == "CreateEmpty" else "Wait",
        from_jobset=from_jobset,
    )


def _targets(
    policy: Obj, where: str, declared: ListField, name_of: Callable[[Any, str], str]
) -> tuple[str, ...] | None:
    """The replicated jobs the list ``declared`` of ``policy`` names (``name_of`` an item);
    left out, None (every replicated job that mounts a template)."""
    if policy.get(declared.name) is None:
        return None
    at = f"{where}.{declared.name}"
    listed = read_field(declared, policy, where)
    return tuple(name_of(item, f"{at}[{i}]") for i, item in enumerate(listed))


def _target_name(item: Any, where: str) -> str:
    """An item of ``targetReplicatedJobs``."""
    if not isinstance(item, str) or not item:
        raise InvalidJobSet(f"{where} must be a replicated job name, got {item!r}")
    return item


def _request_target_name(item: Any, where: str) -> str:
    """An item of ``volumePolicy.replicatedJobs``: ``{name}``."""
    target = read_item(fields.VOLUME_POLICY_TARGET, item, where)
    name = read_field(fields.VOLUME_POLICY_TARGET_NAME, target, where)
    if not name:
        raise InvalidJobSet(f"{where}.{fields.VOLUME_POLICY_TARGET_NAME.name} is required")
    return name


def _policy(
    policy: Obj, where: str, templates: ListField, targets: tuple[str, ...] | None, scope: Scope
) -> VolumePolicy:
    """A volume claim policy of either spelling, its templates the list ``templates``."""
    return VolumePolicy(
        templates=_templates(templates, policy, where),
        retention=_retention(policy, where),
        targets=targets,
        scope=scope,
        where=where,
        when_suspended=_when_suspended(policy, where),
        snapshots=_snapshots(policy, where),
        restore=_restore(policy, where),
    )


def _upstream_policy(raw: Any, where: str) -> VolumePolicy:
    policy = read_item(fields.VOLUME_CLAIM_POLICY, raw, where)
    scope = _choice(fields.VOLUME_SCOPE, policy, where)
    chosen: Scope = "Job" if scope == "Job" else "Pod" if scope == "Pod" else "JobSet"
    targets = _targets(policy, where, fields.POLICY_TARGETS, _target_name)
    return _policy(policy, where, fields.POLICY_TEMPLATES, targets, chosen)


def _request_policy(raw: Any, where: str) -> VolumePolicy:
    policy = read_item(fields.VOLUME_POLICY, raw, where)
    targets = _targets(policy, where, fields.VOLUME_POLICY_TARGETS, _request_target_name)
    return _policy(policy, where, fields.VOLUME_POLICY_TEMPLATES, targets, "JobSet")


@dataclass(frozen=True)
class _Keys:
    """The JobSet's volume policy annotations: the keys that set a field, and the reason a
    refused key gives, by its template."""

    declared: tuple[volumekeys.Declared, ...] = ()
    refused: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, annotations: Obj) -> _Keys:
        if not any(isinstance(k, str) and volumekeys.ours(k) for k in annotations):
            return NO_KEYS
        templates = {
            volumekeys.split(k)[0] for k in annotations if isinstance(k, str) and volumekeys.ours(k)
        }
        refused: dict[str, str] = {}
        for key, value in sorted(annotations.items()):
            if isinstance(key, str) and volumekeys.ours(key):
                why = volumekeys.why(key, value if isinstance(value, str) else "", templates)
                if why:
                    refused.setdefault(volumekeys.split(key)[0], why)
        return cls(tuple(volumekeys.declared(annotations)), refused)

    def complete(self, raw: Any, where: str) -> metadata.Overlaid:
        """The policy entry ``raw`` (at ``where``) with the keys of its templates applied."""
        return metadata.overlay(raw, where, self.declared, self.refused)

    def read(self, read: Callable[[Any, str], VolumePolicy], raw: Any, where: str) -> VolumePolicy:
        """The policy entry ``raw`` read with the keys of its templates applied."""
        completed = self.complete(raw, where)
        try:
            policy = read(completed.raw, where)
        except InvalidJobSet as err:
            raise completed.explain(err) from None
        if not completed.applied:
            return policy
        return dataclasses.replace(
            policy,
            overrides=tuple(map(str, completed.overrides)),
            declared_by=completed.applied,
        )


NO_KEYS = _Keys()


def _refused(problem: str) -> VolumePolicy:
    raise InvalidJobSet(problem)


def _entries(spec: Obj, keys: _Keys = NO_KEYS) -> Iterator[Callable[[], VolumePolicy]]:
    """Each policy entry of the spec, in order, as a parser that raises ``InvalidJobSet`` when
    the entry (only that one) is invalid; a list of entries that is not one, or is too long, is
    refused first (the entries of a list that is only too long are still read). ``keys``: the
    volume policy annotations, applied to the entries of their templates (``metadata``)."""
    upstream = spec.get(fields.VOLUME_CLAIM_POLICIES.name)
    where = fields.VOLUME_CLAIM_POLICIES.path
    try:
        fields.VOLUME_CLAIM_POLICIES.read(upstream, where)
    except fields.FieldInvalid as err:
        yield functools.partial(_refused, str(err))
    if isinstance(upstream, list):
        for i, raw in enumerate(upstream):
            yield functools.partial(keys.read, _upstream_policy, raw, f"{where}[{i}]")
    request = spec.get(fields.VOLUME_POLICY.name)
    if request is not None:
        yield functools.partial(keys.read, _request_policy, request, fields.VOLUME_POLICY.path)


def _raw_policies(jobset: JobSet) -> list[VolumePolicy]:
    """The policies, each completed by its templates' volume policy annotations; when any key
    completed one, the spec as completed is judged by the API server's rules too (the keys'
    values were, by ``model.parse``; how they combine with the spec is judged here)."""
    spec = as_dict(jobset.raw.get("spec"))
    keys = _Keys.of(jobset.annotations)
    found = [entry() for entry in _entries(spec, keys)]
    if keys.declared:
        _judge_completed(jobset, spec, keys)
    return found


def _judge_completed(jobset: JobSet, spec: Obj, keys: _Keys) -> None:
    """Refuses the spec as the keys complete it where the API server would refuse that spec,
    naming the keys (its words, as ``model.refused_on_create`` gives them)."""
    completed = dict(spec)
    applied: list[str] = []
    entries = spec.get(fields.VOLUME_CLAIM_POLICIES.name)
    if isinstance(entries, list):
        where = fields.VOLUME_CLAIM_POLICIES.path
        overlaid = [keys.complete(p, f"{where}[{i}]") for i, p in enumerate(entries)]
        completed[fields.VOLUME_CLAIM_POLICIES.name] = [o.raw for o in overlaid]
        applied += [k for o in overlaid for k in o.applied]
    request = spec.get(fields.VOLUME_POLICY.name)
    if request is not None:
        overlaid_request = keys.complete(request, fields.VOLUME_POLICY.path)
        completed[fields.VOLUME_POLICY.name] = overlaid_request.raw
        applied += overlaid_request.applied
    if not applied:
        return
    meta = {k: v for k, v in as_dict(jobset.raw.get("metadata")).items() if k != "annotations"}
    refusal = refused_on_create({**jobset.raw, "metadata": meta, "spec": completed}, jobset.gates)
    if refusal is not None:
        explained = metadata.Overlaid(completed, applied=tuple(applied))
        raise explained.explain(InvalidJobSet(refusal))


def readable_policies(spec: Any, annotations: Any = None) -> tuple[list[VolumePolicy], list[str]]:
    """The policy entries that parse on their own (with the volume policy annotations of their
    templates), and why each other one does not.

    For deletion, which must not depend on the whole spec being valid: a JobSet that became
    invalid (more claims than ``MAX_CLAIMS`` after raising replicas, a refused annotation of
    another template) still has readable policies.
    """
    found, problems = [], []
    for entry in _entries(as_dict(spec), _Keys.of(as_dict(annotations))):
        try:
            found.append(entry())
        except InvalidJobSet as err:
            problems.append(str(err))
    return found, problems


def _job_spec_field(jobset: JobSet, rjob: ReplicatedJob, key: str) -> str:
    position = next(i for i, r in enumerate(jobset.replicated_jobs) if r.name == rjob.name)
    return f"spec.replicatedJobs[{position}].template.spec.{key}"


def _validate_pod_rjob(
    jobset: JobSet, policy: VolumePolicy, rjob: ReplicatedJob, *, untargeted: bool
) -> None:
    """What the API server does not check of a replicated job a Pod-scope policy gives claims.

    ``completionMode: Indexed`` and ``completions`` are the rule ``pod-scope-indexed``'s, which
    ``model.parse`` has run, for the policies that list ``targetReplicatedJobs``: CEL cannot
    tell which replicated jobs mount a template, so a policy without that list (``untargeted``)
    is checked here, with Kubernetes' own leniency (a Job with neither ``parallelism`` nor
    ``completions`` is defaulted to one completion). A claim name's length is not checked: the
    rules ``child-job-names`` and ``claim-names`` bound every name the policies can make (a
    Pod-scope claim is a child Job name of at most 63 characters, a template of at most 63 and
    a pod index), and the property test of ``tests/unit/volumes/test_spec.py`` checks it.
    """
    spec = rjob.template.get("spec", {})
    mode = spec.get("completionMode")
    if untargeted and mode != "Indexed":
        raise InvalidJobSet(
            f"{policy.where}.scope: Pod scope needs completionMode Indexed (each pod finds its "
            f"claim by its completion index), but {_job_spec_field(jobset, rjob, 'completionMode')}"
            f" of replicated job {rjob.name!r} is {mode!r}"
        )
    completions = spec.get("completions")
    # The schema has made it an integer; the Job's API, not the CRD's, refuses a negative one,
    # and Pod scope would plan no claim for it.
    if completions is not None and completions < 0:
        raise InvalidJobSet(
            f"{_job_spec_field(jobset, rjob, 'completions')} must be a non-negative integer, "
            f"got {completions!r}"
        )
    if untargeted and completions is None and "parallelism" in spec:
        raise InvalidJobSet(
            f"{policy.where}.scope: Pod scope needs {_job_spec_field(jobset, rjob, 'completions')}"
            f" for replicated job {rjob.name!r}: an Indexed Job has one pod, and one claim, per "
            "completion index"
        )
    parallelism = spec.get("parallelism")
    if parallelism == 0 and not isinstance(parallelism, bool) and pod_indexes(rjob) > 0:
        raise InvalidJobSet(
            f"{policy.where}.scope: Pod scope makes a claim for each completion index before the "
            f"Job starts, but {_job_spec_field(jobset, rjob, 'parallelism')} of replicated job "
            f"{rjob.name!r} is 0: its Jobs would run no pod and the claims would hold storage "
            "for nothing; set parallelism to 1 or more (or leave it out)"
        )


def _explained(err: InvalidJobSet, found: Iterable[VolumePolicy]) -> InvalidJobSet:
    """``err``, naming the volume policy annotations that completed the policies ``found`` (a
    scope or targets set by a key is why the JobSet is refused, where the spec says neither)."""
    keys = tuple(k for p in found for k in p.declared_by)
    return metadata.Overlaid(None, applied=keys).explain(err)


def _validate_pod_scope(jobset: JobSet, found: Iterable[VolumePolicy]) -> None:
    for policy in found:
        if policy.scope != "Pod":
            continue
        for name in targeted(policy, jobset):
            rjob = jobset.replicated_job(name)
            if rjob is None:
                continue
            try:
                _validate_pod_rjob(jobset, policy, rjob, untargeted=policy.targets is None)
            except InvalidJobSet as err:
                raise _explained(err, [policy]) from None


def _validate_claim_names(jobset: JobSet, found: tuple[VolumePolicy, ...]) -> None:
    """Two templates whose claims share a name. The rule ``claim-names-unique`` refuses the
    Job- and JobSet-scope collisions (and more: it does not know which replicated jobs mount a
    template); a Pod-scope claim's name is beyond it. A name's characters and length are the
    contract's (see ``_validate_pod_rjob``)."""
    seen: dict[str, str] = {}
    for policy, template, _, name in claim_slots(jobset, found):
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
    result = tuple(_raw_policies(jobset))
    _validate_pod_scope(jobset, result)
    count = claim_count(jobset, result)
    if count > MAX_CLAIMS:
        # Every reconcile lists every desired claim several times; 16 Job-scope templates on
        # 10,000 Jobs (160,000 claims) took over a minute of event-loop time per reconcile.
        raise _explained(
            InvalidJobSet(
                f"spec: the volume claim policies ask for {count} claims; at most {MAX_CLAIMS} "
                "per JobSet (Job-scope templates count once per child Job they target, Pod-scope "
                "ones once per completion index of each)"
            ),
            result,
        )
    _validate_claim_names(jobset, result)
    return result


def has_pod_scope(stored: Obj) -> bool:
    """Whether a stored JobSet asks for Pod-scope claims (a cheap look, without parsing: which
    JobSets an admission policy event concerns)."""
    found = as_dict(stored.get(fields.SPEC.name)).get(fields.VOLUME_CLAIM_POLICIES.name)
    annotations = as_dict(as_dict(stored.get("metadata")).get("annotations"))
    return (
        isinstance(found, list)
        and any(isinstance(p, dict) and p.get(fields.VOLUME_SCOPE.name) == "Pod" for p in found)
    ) or any(
        isinstance(k, str)
        and volumekeys.ours(k)
        and volumekeys.split(k)[1] == fields.VOLUME_SCOPE.name
        and v == "Pod"
        for k, v in annotations.items()
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
