"""The JobSet as the decision functions see it: parsed, typed, with upstream's defaults applied.

The API server's CRD and admission policy refuse bad input at admission; ``parse`` refuses the
same again, for what reaches the cache anyway (a JobSet stored under an older CRD, carried over
from upstream JobSet, or created while the admission policy was not installed). It does not
re-code those rules: it runs them, the API server's own checks of a create as
``controller.api.validation`` does them offline (defaults, the structural schema with the
embedded Job template and claim types, every CEL rule by its Python predicate, the admission
policy's rules), for the controller's feature gates, and refuses with the API server's words.
Only a create's rules apply: the parser has no stored object to compare with, so the transition
rules (immutability) are the API server's alone. What the API server cannot check (RE2 message
patterns, exclusive-placement annotations, and the volume policies' counts and claim names,
``volumes.spec``) is checked here and there, as docs/api.md "Checked by the controller" lists.

It never raises anything but ``InvalidJobSet``, whose message names the field, so the reconciler
can report it as a condition and an Event instead of crashing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Literal, TypeVar

from controller import features
from controller.api import fields, validation
from controller.api.fields import Field, ListField, ObjectField, Record
from controller.features import FeatureGates
from controller.jobset import api, messagepatterns, placement
from controller.jobset.errors import InvalidJobSet as InvalidJobSet
from controller.jobset.jobsetstatus import JobSetStatus
from controller.runtime.store import Obj

DependencyStatus = Literal["Ready", "Complete"]
T = TypeVar("T", str, int, bool)
R = TypeVar("R")


@dataclass(frozen=True)
class DependsOn:
    name: str
    status: DependencyStatus


@dataclass(frozen=True)
class ReplicatedJob:
    name: str
    replicas: int
    template: Obj  # batch/v1 JobTemplateSpec, with defaults applied; never mutate
    group_name: str = api.DEFAULT_GROUP_NAME
    depends_on: tuple[DependsOn, ...] = ()

    @property
    def parallelism(self) -> int:
        return int(self.template.get("spec", {}).get("parallelism", 1))

    @property
    def completions(self) -> int | None:
        value = self.template.get("spec", {}).get("completions")
        return None if value is None else int(value)

    @property
    def pods_per_job(self) -> int:
        """Pods a Job of this replicated job runs at once: min(parallelism, completions)."""
        completions = self.completions
        return self.parallelism if completions is None else min(self.parallelism, completions)

    @functools.cached_property
    def mount_names(self) -> frozenset[str]:
        """Names of every volumeMount of the pod's containers and initContainers.

        Computed once: volume policies ask for every template and child Job, and a pod may have
        32 containers of 64 mounts (recomputing took seconds per reconcile).
        """
        pod = _pod_spec_of(self.template)
        names = set()
        for kind in ("containers", "initContainers"):
            for container in _as_list(pod.get(kind)):
                for mount in _as_list(_as_dict(container).get("volumeMounts")):
                    name = _as_dict(mount).get("name")
                    if isinstance(name, str):
                        names.add(name)
        return frozenset(names)

    @functools.cached_property
    def volume_names(self) -> frozenset[str]:
        """Names of the pod's volumes (computed once)."""
        names = (
            _as_dict(v).get("name") for v in _as_list(_pod_spec_of(self.template).get("volumes"))
        )
        return frozenset(n for n in names if isinstance(n, str))


def _as_dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _pod_spec_of(template: Obj) -> Obj:
    return _as_dict(_as_dict(_as_dict(template.get("spec")).get("template")).get("spec"))


@dataclass(frozen=True)
class Network:
    enable_dns_hostnames: bool = api.DEFAULT_ENABLE_DNS_HOSTNAMES
    subdomain: str = ""
    publish_not_ready_addresses: bool = api.DEFAULT_PUBLISH_NOT_READY_ADDRESSES


@dataclass(frozen=True)
class SuccessPolicy:
    operator: Literal["All", "Any"] = api.DEFAULT_SUCCESS_OPERATOR
    target_replicated_jobs: tuple[str, ...] = ()


@dataclass(frozen=True)
class FailurePolicyRule:
    name: str
    action: str
    on_job_failure_reasons: tuple[str, ...] = ()
    on_job_failure_message_patterns: tuple[str, ...] = ()
    target_replicated_jobs: tuple[str, ...] = ()
    # The patterns compiled by ``parse`` (RE2); a rule built otherwise compiles them on first use.
    compiled_patterns: tuple[messagepatterns.Pattern | None, ...] | None = field(
        default=None, compare=False, repr=False
    )

    def message_patterns(self) -> tuple[messagepatterns.Pattern | None, ...]:
        """The compiled patterns; None for one that is invalid (it never matches)."""
        if self.compiled_patterns is not None:
            return self.compiled_patterns
        return messagepatterns.compile_all(self.on_job_failure_message_patterns)


@dataclass(frozen=True)
class FailurePolicy:
    max_restarts: int = 0
    restart_strategy: str = api.DEFAULT_RESTART_STRATEGY
    rules: tuple[FailurePolicyRule, ...] = ()


@dataclass(frozen=True)
class Coordinator:
    replicated_job: str
    job_index: int = 0
    pod_index: int = 0


@dataclass(frozen=True)
class JobSet:
    name: str
    namespace: str
    uid: str
    generation: int
    replicated_jobs: tuple[ReplicatedJob, ...]
    network: Network
    success_policy: SuccessPolicy
    failure_policy: FailurePolicy | None
    startup_in_order: bool
    suspend: bool
    coordinator: Coordinator | None
    managed_by: str | None
    ttl_seconds_after_finished: int | None
    status: JobSetStatus
    labels: dict[str, str]
    annotations: dict[str, str]
    deleting: bool
    finalizers: tuple[str, ...]
    raw: Obj
    # The feature gates it was parsed for: the rules of the CRD made for them judge it (and the
    # volume policies its annotations complete, ``volumes.spec``).
    gates: FeatureGates = field(default=features.DEFAULT, compare=False)

    @property
    def subdomain(self) -> str:
        """The headless Service's name (upstream: network.subdomain, default the JobSet name)."""
        return self.network.subdomain or self.name

    @property
    def global_replicas(self) -> int:
        return sum(r.replicas for r in self.replicated_jobs)

    def replicated_job(self, name: str) -> ReplicatedJob | None:
        return next((r for r in self.replicated_jobs if r.name == name), None)

    @property
    def finished(self) -> bool:
        return self.status.terminal_state in (api.TERMINAL_COMPLETED, api.TERMINAL_FAILED) or (
            self.status.is_true(api.COMPLETED) or self.status.is_true(api.FAILED)
        )

    def owner_reference(self) -> Obj:
        return owner_reference(self.name, self.uid)


def owner_reference(name: str, uid: str) -> Obj:
    """The controller ownerReference to the JobSet ``name`` of ``uid``."""
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.KIND,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


# ---------------------------------------------------------------------------- parsing helpers


def _dict(value: Any, where: str) -> Obj:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidJobSet(f"{where} must be an object, got {type(value).__name__}")
    return value


def _int(value: Any, where: str, default: int, minimum: int = 0) -> int:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidJobSet(f"{where} must be an integer, got {value!r}")
    if value < minimum:
        raise InvalidJobSet(f"{where} must be at least {minimum}, got {value}")
    return value


def _str(value: Any, where: str, default: str = "") -> str:
    if value is None:
        return default
    if not isinstance(value, str):
        raise InvalidJobSet(f"{where} must be a string, got {value!r}")
    return value


def as_invalid(read: Callable[[Any, str], R], value: Any, where: str) -> R:
    """``read(value, where)``: a ``controller.api.fields`` record's reading of the value at
    ``where``, its refusal (``FieldInvalid``, naming the field) raised as ``InvalidJobSet``."""
    try:
        return read(value, where)
    except fields.FieldInvalid as err:
        raise InvalidJobSet(str(err)) from None


def read_field(declared: Record[R], parent: Obj, where: str) -> R:
    """The field, list, map or object ``declared`` of ``parent`` (at ``where``), read as its one
    definition says (``controller.api.fields``: type, bounds, allowed values, what leaving it
    out means)."""
    return as_invalid(declared.read, parent.get(declared.name), f"{where}.{declared.name}")


def read_object(declared: ObjectField, parent: Obj, where: str) -> Obj:
    """``read_field`` of an object; left out (without a default of its own), empty."""
    return read_field(declared, parent, where) or {}


def _strings(declared: ListField, parent: Obj, where: str) -> tuple[str, ...]:
    """``read_field`` of a list of strings, each checked too."""
    return as_invalid(declared.read_strings, parent.get(declared.name), f"{where}.{declared.name}")


def read_item(declared: ObjectField, value: Any, where: str) -> Obj:
    """The item at ``where`` of a list of objects (``declared``: their record)."""
    return as_invalid(declared.read_given, value, where)


def _got(declared: Field[T], parent: Obj, where: str) -> T:
    """``read_field`` of a field that has a value: given, or meant by leaving it out."""
    value = read_field(declared, parent, where)
    if value is None:
        raise InvalidJobSet(f"{where}.{declared.name} is required")
    return value


def _metadata_object(template: Obj, where: str) -> None:
    """A template's ``metadata``, if given, is an object; ``metadata:`` alone (null) is {}."""
    if "metadata" in template:
        template["metadata"] = _dict(template["metadata"], f"{where}.metadata")


def _template_with_defaults(template: Obj, where: str) -> Obj:
    """Upstream's defaults on a replicated job's template: Indexed completion, OnFailure."""
    import copy

    result = copy.deepcopy(template)
    _metadata_object(result, where)
    spec = result.setdefault("spec", {})
    if not isinstance(spec, dict):
        raise InvalidJobSet(f"{where}.spec must be an object")
    spec.setdefault("completionMode", api.DEFAULT_COMPLETION_MODE)
    pod_template = spec.setdefault("template", {})
    if not isinstance(pod_template, dict):
        raise InvalidJobSet(f"{where}.spec.template must be an object")
    _metadata_object(pod_template, f"{where}.spec.template")
    pod_spec = pod_template.setdefault("spec", {})
    if not isinstance(pod_spec, dict):
        raise InvalidJobSet(f"{where}.spec.template.spec must be an object")
    pod_spec.setdefault("restartPolicy", api.DEFAULT_POD_RESTART_POLICY)
    pod_where = f"{where}.spec.template.spec"
    read_field(fields.CONTAINERS, pod_spec, pod_where)
    read_field(fields.INIT_CONTAINERS, pod_spec, pod_where)
    return result


def _replicated_job(raw: Any, index: int) -> ReplicatedJob:
    where = f"{fields.REPLICATED_JOBS.path}[{index}]"
    obj = read_item(fields.REPLICATED_JOB, raw, where)
    name = _got(fields.REPLICATED_JOB_NAME, obj, where)
    depends = []
    for j, dep in enumerate(read_field(fields.DEPENDS_ON, obj, where)):
        dep_where = f"{where}.{fields.DEPENDS_ON.name}[{j}]"
        dep_obj = read_item(fields.DEPENDENCY, dep, dep_where)
        status = _got(fields.DEPENDENCY_STATUS, dep_obj, dep_where)
        dep_name = _got(fields.DEPENDENCY_NAME, dep_obj, dep_where)
        depends.append(DependsOn(dep_name, "Ready" if status == "Ready" else "Complete"))
    return ReplicatedJob(
        name=name,
        replicas=_got(fields.REPLICAS, obj, where),
        template=_template_with_defaults(
            _dict(obj.get("template"), f"{where}.template"), f"{where}.template"
        ),
        group_name=_got(fields.GROUP_NAME, obj, where),
        depends_on=tuple(depends),
    )


def _failure_policy(spec: Obj) -> FailurePolicy | None:
    obj = read_field(fields.FAILURE_POLICY, spec, "spec")
    if obj is None:
        return None
    rules = []
    program = 0  # RE2 instructions of all patterns so far
    for i, rule_raw in enumerate(read_field(fields.FAILURE_RULES, obj, fields.FAILURE_POLICY.path)):
        where = f"{fields.FAILURE_RULES.path}[{i}]"
        rule = read_item(fields.FAILURE_RULE, rule_raw, where)
        action = _got(fields.FAILURE_ACTION, rule, where)
        patterns = _strings(fields.FAILURE_RULE_PATTERNS, rule, where)
        compiled = []
        for pattern in patterns:
            try:
                compiled.append(messagepatterns.compile(pattern))
            except messagepatterns.PatternError as err:
                raise InvalidJobSet(
                    f"{where}.onJobFailureMessagePatterns: {pattern!r} is not a valid "
                    f"regular expression ({err})"
                ) from err
            program += compiled[-1].size
            if program > messagepatterns.MAX_POLICY_PROGRAM:
                raise InvalidJobSet(
                    f"{where}.onJobFailureMessagePatterns: the failure policy's patterns "
                    f"compile to more than {messagepatterns.MAX_POLICY_PROGRAM} RE2 "
                    "instructions together; use fewer or simpler patterns"
                )
        rules.append(
            FailurePolicyRule(
                name=read_field(fields.FAILURE_RULE_NAME, rule, where)
                or f"{fields.DEFAULT_RULE_NAME_PREFIX}{i}",
                action=action,
                on_job_failure_reasons=_strings(fields.FAILURE_RULE_REASONS, rule, where),
                on_job_failure_message_patterns=patterns,
                target_replicated_jobs=_strings(fields.FAILURE_RULE_TARGETS, rule, where),
                compiled_patterns=tuple(compiled),
            )
        )
    return FailurePolicy(
        max_restarts=_got(fields.MAX_RESTARTS, obj, fields.FAILURE_POLICY.path),
        restart_strategy=_got(fields.RESTART_STRATEGY, obj, fields.FAILURE_POLICY.path),
        rules=tuple(rules),
    )


def _check_placement(
    namespace: str, name: str, annotations: Obj, replicated: tuple[ReplicatedJob, ...]
) -> None:
    """Exclusive placement that would fail later (a Job or pod the API server refuses): refused
    now. The JobSet's annotations are out of the CRD's reach (CEL cannot see the root's
    metadata); the templates' are checked at admission too, and again here for older CRDs."""
    problem = placement.annotation_error(annotations, "metadata.annotations")
    for i, rjob in enumerate(replicated):
        if problem is not None:
            break
        rjob_annotations = _as_dict(_as_dict(rjob.template.get("metadata")).get("annotations"))
        where = f"spec.replicatedJobs[{i}]"
        problem = placement.annotation_error(
            rjob_annotations, f"{where}.template.metadata.annotations"
        )
        chosen = placement.placement(annotations, rjob_annotations)
        if problem is None and chosen is not None and chosen.node_selector and rjob.replicas:
            # The longest value is the last Job's: the index has the most digits.
            last = placement.job_name(name, rjob.name, rjob.replicas - 1)
            problem = placement.node_selector_error(namespace, last, where)
    if problem is not None:
        raise InvalidJobSet(problem)


def with_new_status(previous: JobSet, obj: Obj) -> JobSet | None:
    """``parse(obj)``, made from ``previous`` (a parse of an earlier version of the same JobSet)
    when ``obj`` differs from ``previous.raw`` in its status and ``metadata.resourceVersion``
    only, as the echo of a status write does; None otherwise (``parse`` it).

    ``parse`` reads the metadata (all but resourceVersion), the spec and the status: with the
    first two equal, every field of the result but ``status`` and ``raw`` is what ``previous``
    has. Comparing two dicts of JSON is done in C and costs a small part of parsing the spec
    again (its replicated jobs, policies and placement checks)."""
    old = previous.raw
    if obj.keys() != old.keys():
        return None
    for key, value in obj.items():
        if key not in ("status", "metadata") and value != old[key]:
            return None
    meta, old_meta = obj.get("metadata"), old.get("metadata")
    if not isinstance(meta, dict) or not isinstance(old_meta, dict):
        return None
    if meta.keys() != old_meta.keys():
        return None
    for key, value in meta.items():
        if key != "resourceVersion" and value != old_meta[key]:
            return None
    return replace(previous, status=JobSetStatus.parse(obj.get("status")), raw=obj)


def refused_on_create(obj: Obj, gates: FeatureGates) -> str | None:
    """Why the API server, with this version's CRD and admission policy for ``gates``, would
    refuse ``obj`` as a create (its words: each field error, or each broken rule of the policy,
    joined by "; "); None when it would admit it. The status is left out, as a create drops it:
    what the controller wrote there is not the spec's fault."""
    created = {key: value for key, value in obj.items() if key != "status"}
    refusal = validation.packaged(gates).refusal(created)
    return None if refusal is None else "; ".join(refusal.errors)


def parse(obj: Obj, gates: FeatureGates = features.DEFAULT) -> JobSet:
    """A cached JobSet object → ``JobSet``; raises ``InvalidJobSet`` naming what is wrong: first
    whatever the API server would refuse on a create (``refused_on_create``, for the controller's
    feature ``gates``), then what only the controller checks."""
    meta = _dict(obj.get("metadata"), "metadata")
    refusal = refused_on_create(obj, gates)
    if refusal is not None:
        raise InvalidJobSet(refusal)
    spec = as_invalid(fields.SPEC.read, obj.get(fields.SPEC.name), fields.SPEC.path) or {}
    replicated = tuple(
        _replicated_job(r, i)
        for i, r in enumerate(read_field(fields.REPLICATED_JOBS, spec, fields.SPEC.path))
    )
    # No replicated jobs is valid, as upstream: such a JobSet creates no Jobs and, since no Job
    # ever succeeds, never completes (success is decided only once a Job has succeeded).

    network_raw = read_object(fields.NETWORK, spec, "spec")
    at = fields.NETWORK.path
    network = Network(
        enable_dns_hostnames=_got(fields.ENABLE_DNS_HOSTNAMES, network_raw, at),
        subdomain=read_field(fields.SUBDOMAIN, network_raw, at) or "",
        publish_not_ready_addresses=_got(fields.PUBLISH_NOT_READY_ADDRESSES, network_raw, at),
    )
    success_raw = read_object(fields.SUCCESS_POLICY, spec, "spec")
    at = fields.SUCCESS_POLICY.path
    operator = _got(fields.SUCCESS_OPERATOR, success_raw, at)
    success = SuccessPolicy(
        operator="Any" if operator == "Any" else "All",
        target_replicated_jobs=_strings(fields.SUCCESS_TARGETS, success_raw, at),
    )
    startup = read_object(fields.STARTUP_POLICY, spec, "spec")
    c = read_field(fields.COORDINATOR, spec, "spec")
    coordinator = None
    if c is not None:
        at = fields.COORDINATOR.path
        coordinator = Coordinator(
            replicated_job=_got(fields.COORDINATOR_REPLICATED_JOB, c, at),
            job_index=_got(fields.COORDINATOR_JOB_INDEX, c, at),
            pod_index=_got(fields.COORDINATOR_POD_INDEX, c, at),
        )
    managed_by = spec.get(fields.MANAGED_BY.name)
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    annotations = meta.get("annotations") if isinstance(meta.get("annotations"), dict) else {}
    _check_placement(
        _str(meta.get("namespace"), "metadata.namespace"),
        _str(meta.get("name"), "metadata.name"),
        annotations or {},
        replicated,
    )
    return JobSet(
        name=_str(meta.get("name"), "metadata.name"),
        namespace=_str(meta.get("namespace"), "metadata.namespace"),
        uid=_str(meta.get("uid"), "metadata.uid"),
        generation=_int(meta.get("generation"), "metadata.generation", 0),
        replicated_jobs=replicated,
        network=network,
        success_policy=success,
        failure_policy=_failure_policy(spec),
        startup_in_order=_got(fields.STARTUP_ORDER, startup, fields.STARTUP_POLICY.path)
        == "InOrder",
        suspend=_got(fields.SUSPEND, spec, "spec"),
        coordinator=coordinator,
        managed_by=managed_by if isinstance(managed_by, str) and managed_by else None,
        ttl_seconds_after_finished=read_field(fields.TTL_SECONDS_AFTER_FINISHED, spec, "spec"),
        status=JobSetStatus.parse(obj.get("status")),
        labels=dict(labels or {}),
        annotations=dict(annotations or {}),
        deleting=bool(meta.get("deletionTimestamp")),
        finalizers=tuple(f for f in meta.get("finalizers") or [] if isinstance(f, str)),
        raw=obj,
        gates=gates,
    )
