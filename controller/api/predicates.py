"""The JobSet's validation rules in Python: one predicate per CEL rule of ``schema.py``.

Each :class:`~controller.api.schema.Rule` carries its CEL (what the API server runs) and one of
these predicates (what ``render`` and the tests run), side by side in one record. A predicate gets
the node the rule sits on (``self`` in the CEL), after the schema's defaults, and returns ``None``
when the rule holds, else :class:`Broken` with the value the rule's message expression names (the
first offending name), so the message is the one the API server gives.

They read the object as the API server's CEL does once the schema admitted it: types are right,
required fields are there; an optional field is read only where the CEL checks ``has()`` first.
``tests/unit/test_predicates.py`` runs every create case of ``tests/integration/test_crd.py``
(each checked against the real API server there) through them, and the admission fuzz compares
them with the API server's verdicts on generated JobSets.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.api import bounds, semantic
from controller.api.fields import (
    ACCESS_MODES,
    DEFAULT_RULE_NAME_PREFIX,
    JOB_FAILURE_REASONS,
    RULE_NAME_REGEX,
)
from controller.jobset import api as jobset_api
from controller.jobset import placement
from controller.jobset.placement import EXCLUSIVE_TOPOLOGY
from controller.jobset.quantity import quantity

MANAGED_BY_PATH = r"^[-A-Za-z0-9._~!$&'()*+,;=:%/]+$"

Node = Mapping[str, Any]


@dataclass(frozen=True)
class Broken:
    """A rule that does not hold; ``detail`` is what its message expression names (None: the
    rule has no message expression, or it names nothing)."""

    detail: str | None = None


Verdict = Broken | None
Predicate = Callable[[Any], Verdict]


# ---------------------------------------------------------------- Kubernetes' formats


def matches(pattern: str, text: str) -> bool:
    """CEL's ``matches`` (RE2, a search): ``$`` is the end of the text, never before a newline."""
    return (
        re.search(pattern.removesuffix("$") + r"\Z" if pattern.endswith("$") else pattern, text)
        is not None
    )


_DNS_1035 = "[a-z]([-a-z0-9]*[a-z0-9])?"
_DNS_1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_1123_SUBDOMAIN = f"{_DNS_1123_LABEL}(\\.{_DNS_1123_LABEL})*"


def dns1035_label_errors(value: str) -> list[str]:
    """Kubernetes' IsDNS1035Label: its explanations, in its order (``format.dns1035Label()``)."""
    errors = []
    if len(value.encode()) > bounds.MAX_DNS_LABEL:
        errors.append(f"must be no more than {bounds.MAX_DNS_LABEL} characters")
    if not matches(f"^{_DNS_1035}$", value):
        errors.append(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
            "with an alphabetic character, and end with an alphanumeric character (e.g. "
            "'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
        )
    return errors


def is_dns1123_label(value: str) -> bool:
    return len(value.encode()) <= bounds.MAX_DNS_LABEL and matches(f"^{_DNS_1123_LABEL}$", value)


def is_dns1123_subdomain(value: str) -> bool:
    return len(value.encode()) <= bounds.MAX_DNS_SUBDOMAIN and matches(
        f"^{_DNS_1123_SUBDOMAIN}$", value
    )


def is_qualified_name(value: str) -> bool:
    """Kubernetes' IsQualifiedName (``format.qualifiedName()``): the controller's own check of
    label keys (``placement``)."""
    return placement.qualified_name_error(value) is None


def lower_ascii(text: str) -> str:
    """CEL's ``lowerAscii``: only A-Z change."""
    return text.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def digits(n: int) -> int:
    """Decimal digits of a non-negative int32."""
    return len(str(max(n, 0)))


def job_index_pattern() -> str:
    """A job index written out: no more digits than the most child Jobs a JobSet may have (a
    longer number is no index of a JobSet's Job)."""
    return f"^(0|[1-9][0-9]{{0,{digits(jobset_api.MAX_CHILD_JOBS) - 1}}})$"


# ---------------------------------------------------------------- reading the object


def get(node: Any, *path: str) -> Any:
    """The value at ``path`` below ``node``, None where a field is absent."""
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def items(node: Any, *path: str) -> list[Any]:
    value = get(node, *path)
    return value if isinstance(value, list) else []


def first(values: Iterable[str]) -> Verdict:
    """Broken with the first value, None when there is none."""
    for value in values:
        return Broken(value)
    return None


def unless(holds: bool, detail: str | None = None) -> Verdict:
    return None if holds else Broken(detail)


def pod_spec(rjob: Node) -> Node | None:
    """The pod spec of a replicated job's template, None when the template has none."""
    spec = get(rjob, "template", "spec", "template", "spec")
    return spec if isinstance(spec, Mapping) else None


def mount_names(rjob: Node) -> Iterator[str]:
    pod = pod_spec(rjob)
    for kind in ("containers", "initContainers"):
        for container in items(pod, kind):
            for mount in items(container, "volumeMounts"):
                yield str(mount["name"])


def is_indexed_with_completions(rjob: Node) -> bool:
    spec = get(rjob, "template", "spec")
    return get(spec, "completionMode") == "Indexed" and get(spec, "completions") is not None


# ---------------------------------------------------------------- spec.replicatedJobs[]


def replicas_times_parallelism(rjob: Node) -> Verdict:
    parallelism = get(rjob, "template", "spec", "parallelism")
    if parallelism is None:
        return None
    return unless(rjob["replicas"] * parallelism <= bounds.MAX_INT32, rjob["name"])


def group_name_format(rjob: Node) -> Verdict:
    return first(dns1035_label_errors(rjob["groupName"]))


def exclusive_topology_key(rjob: Node) -> Verdict:
    annotations = get(rjob, "template", "metadata", "annotations") or {}
    if EXCLUSIVE_TOPOLOGY not in annotations:
        return None
    key = annotations[EXCLUSIVE_TOPOLOGY]
    return unless(1 <= len(key) <= bounds.MAX_LABEL_KEY, rjob["name"])


# ---------------------------------------------------------------- fields


def subdomain_format(network: Node) -> Verdict:
    subdomain = network.get("subdomain")
    if not subdomain:
        return None
    return first(dns1035_label_errors(subdomain))


def failure_rule_name_format(rule: Node) -> Verdict:
    name = rule.get("name")
    return unless(not name or matches(RULE_NAME_REGEX, name), name)


def failure_rule_reasons(rule: Node) -> Verdict:
    return first(r for r in rule.get("onJobFailureReasons") or () if r not in JOB_FAILURE_REASONS)


def restart_job_gated(rule: Node) -> Verdict:
    return unless(rule["action"] not in jobset_api.RESTART_JOB_ACTIONS)


def managed_by_format(value: str) -> Verdict:
    slash = value.find("/")
    holds = (
        len(value) <= bounds.MAX_MANAGED_BY
        and slash > 0
        and is_dns1123_subdomain(value[:slash])
        and matches(MANAGED_BY_PATH, value[slash + 1 :])
    )
    return unless(holds, value)


# ---------------------------------------------------------------- volume claim templates


def label_value(value: str) -> Verdict:
    holds = matches(r"^[-0-9A-Za-z_.]*$", value) and not any(
        value.startswith(c) or value.endswith(c) for c in "-_."
    )
    return unless(holds, value)


def _access_modes(template: Node) -> list[str] | None:
    modes = get(template, "spec", "accessModes")
    return modes if isinstance(modes, list) else None


def access_modes_required(template: Node) -> Verdict:
    return unless(bool(_access_modes(template)), template["metadata"]["name"])


def access_modes_valid(template: Node) -> Verdict:
    modes = _access_modes(template) or []
    return unless(all(m in ACCESS_MODES for m in modes), template["metadata"]["name"])


def read_write_once_pod_alone(template: Node) -> Verdict:
    modes = _access_modes(template) or []
    holds = "ReadWriteOncePod" not in modes or all(
        m == "ReadWriteOncePod" or m not in ACCESS_MODES for m in modes
    )
    return unless(holds, template["metadata"]["name"])


def _storage(template: Node) -> tuple[bool, Any]:
    requests = get(template, "spec", "resources", "requests")
    if not isinstance(requests, Mapping) or "storage" not in requests:
        return False, None
    return True, requests["storage"]


def storage_required(template: Node) -> Verdict:
    return unless(_storage(template)[0], template["metadata"]["name"])


def storage_positive(template: Node) -> Verdict:
    present, value = _storage(template)
    amount = quantity(value) if present else None
    return unless(amount is None or amount > 0, template["metadata"]["name"])


def is_quantity(value: Any) -> Verdict:
    return unless(quantity(value) is not None)


def label_keys(template: Node) -> Verdict:
    labels = get(template, "metadata", "labels") or {}
    return first(k for k in labels if not is_qualified_name(k))


def annotation_keys(template: Node) -> Verdict:
    annotations = get(template, "metadata", "annotations") or {}
    return first(k for k in annotations if not is_qualified_name(lower_ascii(k)))


def annotations_size(template: Node) -> Verdict:
    annotations = get(template, "metadata", "annotations") or {}
    size = sum(len(k) + len(v) for k, v in annotations.items())
    return unless(size <= bounds.MAX_ANNOTATIONS_SIZE, template["metadata"]["name"])


def template_names_format(field: str) -> Predicate:
    """``template-name`` on a policy whose templates are the list ``field``."""

    def check(policy: Node) -> Verdict:
        names = (t["metadata"]["name"] for t in items(policy, field))
        return first(n for n in names if not is_dns1123_label(n))

    return check


def template_namespaces(field: str) -> Predicate:
    def check(policy: Node) -> Verdict:
        return first(
            t["metadata"]["name"] for t in items(policy, field) if t["metadata"].get("namespace")
        )

    return check


# ---------------------------------------------------------------- spec: cross-field


def _rjobs(spec: Node) -> list[Node]:
    return items(spec, "replicatedJobs")


def child_jobs_bounded(spec: Node) -> Verdict:
    return unless(sum(r["replicas"] for r in _rjobs(spec)) <= jobset_api.MAX_CHILD_JOBS)


def replicated_job_names_unique(spec: Node) -> Verdict:
    names = [r["name"] for r in _rjobs(spec)]
    lowered = [lower_ascii(n) for n in names]
    return first(n for n, low in zip(names, lowered, strict=True) if lowered.count(low) != 1)


def _rjob_names(spec: Node) -> list[str] | None:
    """The replicated job names, None when one repeats (the rules that look names up hold then:
    the schema's Duplicate value says what is wrong)."""
    names = [r["name"] for r in _rjobs(spec)]
    return None if len(set(names)) != len(names) else names


def success_policy_targets(spec: Node) -> Verdict:
    names = _rjob_names(spec)
    if names is None:
        return None
    targets = get(spec, "successPolicy", "targetReplicatedJobs") or []
    return first(t for t in targets if t not in names)


def failure_rule_targets(spec: Node) -> Verdict:
    names = _rjob_names(spec)
    if names is None:
        return None
    rules = items(spec, "failurePolicy", "rules")
    return first(t for p in rules for t in p.get("targetReplicatedJobs") or () if t not in names)


def _is_default_name(name: str, index: int) -> bool:
    rest = name.removeprefix(DEFAULT_RULE_NAME_PREFIX)
    return (
        name.startswith(DEFAULT_RULE_NAME_PREFIX)
        and matches("^(0|[1-9][0-9]*)$", rest)
        and int(rest) == index
    )


def _names_clash(i: int, p: Node, j: int, q: Node) -> bool:
    p_name, q_name = p.get("name") or "", q.get("name") or ""
    if p_name and q_name:
        return bool(p_name == q_name)
    return bool(p_name and _is_default_name(p_name, j)) or bool(
        q_name and _is_default_name(q_name, i)
    )


def failure_rule_names_unique(spec: Node) -> Verdict:
    rules = items(spec, "failurePolicy", "rules")
    # A clash has a named rule on one side (a name against another's default name): the
    # message names the first named rule that clashes, as the CEL's does.
    return first(
        p["name"]
        for i, p in enumerate(rules)
        if p.get("name") and any(i != j and _names_clash(i, p, j, q) for j, q in enumerate(rules))
    )


def depends_on_first(spec: Node) -> Verdict:
    rjobs = _rjobs(spec)
    return unless(not rjobs or not rjobs[0].get("dependsOn"), rjobs[0]["name"] if rjobs else None)


def depends_on_earlier(spec: Node) -> Verdict:
    rjobs = _rjobs(spec)
    for i, rjob in enumerate(rjobs):
        earlier = {e["name"] for e in rjobs[:i]}
        missing = [d["name"] for d in rjob.get("dependsOn") or () if d["name"] not in earlier]
        if i > 0 and missing:
            return Broken(f"{rjob['name']} depends on {missing[0]}")
    return None


def startup_policy_or_depends_on(spec: Node) -> Verdict:
    in_order = get(spec, "startupPolicy", "startupPolicyOrder") == "InOrder"
    return unless(not (in_order and any(r.get("dependsOn") for r in _rjobs(spec))))


def _coordinated(spec: Node) -> tuple[Node, list[Node]] | None:
    coordinator = spec.get("coordinator")
    if coordinator is None:
        return None
    return coordinator, [r for r in _rjobs(spec) if r["name"] == coordinator["replicatedJob"]]


def _on_coordinator(holds: Callable[[Node, list[Node]], bool]) -> Predicate:
    """A coordinator rule: ``holds(coordinator, its replicated jobs)``, naming the replicated
    job when it does not; nothing to check without a coordinator."""

    def check(spec: Node) -> Verdict:
        found = _coordinated(spec)
        if found is None:
            return None
        coordinator, rjobs = found
        return unless(holds(coordinator, rjobs), coordinator["replicatedJob"])

    return check


def _pod_index_below_completions(coordinator: Node, rjobs: list[Node]) -> bool:
    index = coordinator.get("podIndex", 0)
    completions = (get(r, "template", "spec", "completions") for r in rjobs)
    return all(c is None or index < c for c in completions)


coordinator_replicated_job = _on_coordinator(lambda _, rjobs: bool(rjobs))
coordinator_job_index = _on_coordinator(
    lambda c, rjobs: all(c.get("jobIndex", 0) < r["replicas"] for r in rjobs)
)
coordinator_indexed = _on_coordinator(
    lambda _, rjobs: all(get(r, "template", "spec", "completionMode") == "Indexed" for r in rjobs)
)
coordinator_pod_index = _on_coordinator(_pod_index_below_completions)


def restart_job_replicas(spec: Node) -> Verdict:
    rules = items(spec, "failurePolicy", "rules")
    if not any(p["action"] in jobset_api.RESTART_JOB_ACTIONS for p in rules):
        return None
    return unless(all(r["replicas"] <= jobset_api.MAX_REPLICAS_RESTART_JOB for r in _rjobs(spec)))


# ---------------------------------------------------------------- spec: volumes


def _template_names(spec: Node) -> list[str]:
    names = [
        t["metadata"]["name"]
        for p in items(spec, "volumeClaimPolicies")
        for t in items(p, "templates")
    ]
    return names + [
        t["metadata"]["name"] for t in items(spec, "volumePolicy", "volumeClaimTemplates")
    ]


def template_names_unique(spec: Node) -> Verdict:
    names = _template_names(spec)
    return first(n for n in names if names.count(n) != 1)


def snapshot_named(restore: Node) -> bool:
    """A restorePolicy names a VolumeSnapshot exactly when its source is VolumeSnapshot (an
    empty name is no name)."""
    return (restore.get("source") == "VolumeSnapshot") == bool(restore.get("volumeSnapshotName"))


def restore_snapshot_name(spec: Node) -> Verdict:
    restores = [p.get("restorePolicy") for p in items(spec, "volumeClaimPolicies")]
    restores.append(get(spec, "volumePolicy", "restorePolicy"))
    return None if all(snapshot_named(r) for r in restores if r is not None) else Broken()


def from_jobset_newest(restore: Node) -> bool:
    """A restorePolicy names a JobSet to restore from only with source NewestSnapshot."""
    return not restore.get("fromJobSet") or restore.get("source") == "NewestSnapshot"


def restore_from_jobset(spec: Node) -> Verdict:
    restores = [p.get("restorePolicy") for p in items(spec, "volumeClaimPolicies")]
    restores.append(get(spec, "volumePolicy", "restorePolicy"))
    found = (r for r in restores if isinstance(r, Mapping))
    return None if all(from_jobset_newest(r) for r in found) else Broken()


def _policies(spec: Node) -> list[Node]:
    """Every volume claim policy of the spec, both spellings."""
    found = [p for p in items(spec, "volumeClaimPolicies") if isinstance(p, Mapping)]
    request = get(spec, "volumePolicy")
    return [*found, request] if isinstance(request, Mapping) else found


def _snapshots_on_suspend(policy: Node) -> bool:
    return bool(get(policy, "retentionPolicy", "whenSuspended") == "Snapshot")


def suspend_snapshot_restores(spec: Node) -> Verdict:
    return unless(
        all(
            get(p, "restorePolicy", "source") == "NewestSnapshot"
            for p in _policies(spec)
            if _snapshots_on_suspend(p)
        )
    )


def suspend_snapshot_not_created(spec: Node) -> Verdict:
    return unless(
        not any(
            get(p, "creationPolicy", "whenSuspended") == "Create"
            for p in _policies(spec)
            if _snapshots_on_suspend(p)
        )
    )


def volume_targets(spec: Node) -> Verdict:
    names = _rjob_names(spec)
    if names is None:
        return None
    targets = [
        t for p in items(spec, "volumeClaimPolicies") for t in p.get("targetReplicatedJobs") or ()
    ]
    targets += [x["name"] for x in items(spec, "volumePolicy", "replicatedJobs")]
    return first(t for t in targets if t not in names)


def template_mounted(spec: Node) -> Verdict:
    names = _template_names(spec)
    if "replicatedJobs" not in spec:
        return first(names)
    mounted = {m for r in _rjobs(spec) if pod_spec(r) is not None for m in mount_names(r)}
    return first(n for n in names if n not in mounted)


@dataclass(frozen=True)
class _Targets:
    """Which replicated jobs get each template: None for every one (no explicit list)."""

    names: frozenset[str]
    explicit: Mapping[str, frozenset[str]]

    def gets(self, rjob: str, template: str) -> bool:
        targets = self.explicit.get(template)
        return targets is None or rjob in targets


def _targets(spec: Node) -> _Targets | None:
    """None when the CEL's maps could not be built (a template name or a target repeats): the
    rules that need them hold then, others say what is wrong."""
    names = _template_names(spec)
    if len(set(names)) != len(names):
        return None
    explicit: dict[str, frozenset[str]] = {}
    for policy in items(spec, "volumeClaimPolicies"):
        targets = policy.get("targetReplicatedJobs")
        if targets is None:
            continue
        if len(set(targets)) != len(targets):
            return None
        for template in items(policy, "templates"):
            explicit[template["metadata"]["name"]] = frozenset(targets)
    volume_policy = spec.get("volumePolicy") or {}
    if "replicatedJobs" in volume_policy:
        targets = [x["name"] for x in volume_policy["replicatedJobs"]]
        if len(set(targets)) != len(targets):
            return None
        for template in items(volume_policy, "volumeClaimTemplates"):
            explicit[template["metadata"]["name"]] = frozenset(targets)
    return _Targets(frozenset(names), explicit)


def untargeted_mount(spec: Node) -> Verdict:
    targets = _targets(spec)
    if targets is None or "replicatedJobs" not in spec:
        return None

    def mounts_ok(rjob: Node) -> bool:
        own = {v["name"] for v in items(pod_spec(rjob), "volumes")}
        return all(
            not (m in targets.names and m not in own and not targets.gets(rjob["name"], m))
            for m in mount_names(rjob)
        )

    return first(r["name"] for r in _rjobs(spec) if not mounts_ok(r))


def template_volume_name_free(spec: Node) -> Verdict:
    targets = _targets(spec)
    if targets is None or "replicatedJobs" not in spec:
        return None

    def volumes_ok(rjob: Node) -> bool:
        return all(
            not (v["name"] in targets.names and targets.gets(rjob["name"], v["name"]))
            for v in items(pod_spec(rjob), "volumes")
        )

    return first(r["name"] for r in _rjobs(spec) if not volumes_ok(r))


# ---------------------------------------------------------------- the JobSet


def _job_name_length(jobset: Node, rjob: Node) -> int:
    return len(jobset["metadata"]["name"]) + len(rjob["name"]) + 2 + digits(rjob["replicas"] - 1)


def _names_ok(jobset: Node, rjob: Node) -> bool:
    return matches("^[a-z][-a-z0-9]*$", jobset["metadata"]["name"]) and matches(
        "^[-a-z0-9]*$", lower_ascii(rjob["name"])
    )


def _spec_rjobs(jobset: Node) -> list[Node] | None:
    spec = jobset.get("spec")
    if not isinstance(spec, Mapping) or "replicatedJobs" not in spec:
        return None
    return _rjobs(spec)


def child_job_names(jobset: Node) -> Verdict:
    rjobs = _spec_rjobs(jobset) or []
    return first(
        f"replicatedJob {r['name']}"
        for r in rjobs
        if not (_names_ok(jobset, r) and _job_name_length(jobset, r) <= bounds.MAX_JOB_NAME)
    )


def pod_names(jobset: Node) -> Verdict:
    def bad(rjob: Node) -> bool:
        if not is_indexed_with_completions(rjob):
            return False
        completions = rjob["template"]["spec"]["completions"]
        length = (
            _job_name_length(jobset, rjob) + 1 + digits(completions - 1) + bounds.POD_NAME_SUFFIX
        )
        return not (_names_ok(jobset, rjob) and length <= bounds.MAX_JOB_NAME)

    return first(f"replicatedJob {r['name']}" for r in _spec_rjobs(jobset) or [] if bad(r))


def claim_names(jobset: Node) -> Verdict:
    rjobs = _spec_rjobs(jobset)
    if rjobs is None:
        return None
    name = len(jobset["metadata"]["name"])
    longest_job = max([_job_name_length(jobset, r) for r in rjobs] + [0])
    spec = jobset["spec"]
    for policy in items(spec, "volumeClaimPolicies"):
        suffix = name if policy["scope"] == "JobSet" else longest_job
        if any(
            len(t["metadata"]["name"]) + 1 + suffix > bounds.MAX_CLAIM_NAME
            for t in items(policy, "templates")
        ):
            return Broken()
    templates = items(spec, "volumePolicy", "volumeClaimTemplates")
    return unless(
        all(len(t["metadata"]["name"]) + 1 + name <= bounds.MAX_CLAIM_NAME for t in templates)
    )


def pod_scope_indexed(jobset: Node) -> Verdict:
    rjobs = _spec_rjobs(jobset)
    if rjobs is None:
        return None
    for policy in items(jobset["spec"], "volumeClaimPolicies"):
        targets = policy.get("targetReplicatedJobs")
        if policy["scope"] != "Pod" or targets is None:
            continue
        if any(r["name"] in targets and not is_indexed_with_completions(r) for r in rjobs):
            return Broken()
    return None


def claim_names_unique(jobset: Node) -> Verdict:
    """See ``schema.Builder.claim_collision_rule`` for the two ways names collide."""
    rjobs = _spec_rjobs(jobset)
    if rjobs is None:
        return None
    js = jobset["metadata"]["name"]
    spec = jobset["spec"]
    policies = items(spec, "volumeClaimPolicies")

    def scoped(scope: str) -> list[str]:
        return [
            t["metadata"]["name"]
            for p in policies
            if p["scope"] == scope
            for t in items(p, "templates")
        ]

    job_scope = scoped("Job")
    jobset_scope = scoped("JobSet") + [
        t["metadata"]["name"] for t in items(spec, "volumePolicy", "volumeClaimTemplates")
    ]
    live = [lower_ascii(r["name"]) for r in rjobs if r["replicas"] > 0]
    job_v = [
        f"{js}-{a[: len(a) - len(b)]}" for a in live for b in live if a != b and a.endswith("-" + b)
    ]
    xs = _distinct(
        v[: len(v) - len(js) - 2] for v in job_v if v.endswith(f"-{js}-") and len(v) > len(js) + 2
    )
    dash = js.rfind("-")
    last = js[dash + 1 :]
    index_ok = dash > 0 and matches(job_index_pattern(), last)
    job_r_i = [
        f"{js}-{lower_ascii(r['name'])}-{last}"
        for r in rjobs
        if index_ok and int(last) < r["replicas"]
    ]
    ys = _distinct(
        e[: len(e) - len(js) - 1] for e in job_r_i if e.endswith("-" + js) and len(e) > len(js) + 1
    )

    def extends(template: str, rests: list[str]) -> bool:
        return any(
            len(template) > len(x) + 1
            and template.endswith("-" + x)
            and template[: len(template) - len(x) - 1] in job_scope
            for x in rests
        )

    names = job_scope + jobset_scope
    found = [
        i
        for i, t in enumerate(names)
        if (i < len(job_scope) and extends(t, xs)) or (i >= len(job_scope) and extends(t, ys))
    ]
    return Broken(f"template {names[found[0]]}") if found else None


def _distinct(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def coordinator_address(jobset: Node) -> Verdict:
    spec = jobset.get("spec")
    coordinator = get(spec, "coordinator")
    if coordinator is None:
        return None
    name = jobset["metadata"]["name"]
    subdomain = get(spec, "network", "subdomain") or name
    length = (
        len(name)
        + len(coordinator["replicatedJob"])
        + digits(coordinator.get("jobIndex", 0))
        + digits(coordinator.get("podIndex", 0))
        + len(subdomain)
        + 4
    )
    return unless(length <= bounds.MAX_LABEL_VALUE)


# ---------------------------------------------------------------- transition (update) rules
#
# A transition rule gets the node in the new object and in the stored one (``self`` and
# ``oldSelf``). ``?a.?b`` in a path is CEL's optional field: absent anywhere along it reads as
# absent (``ABSENT``), as the CEL compares ``[dyn(r.?a.?b)]`` lists.

TransitionPredicate = Callable[[Any, Any], Verdict]
ABSENT = object()


def at_path(node: Any, path: str) -> Any:
    """The value at a CEL path such as ``template.?spec.?parallelism``; ``ABSENT`` where a field
    is missing."""
    for part in path.split("."):
        key = part.removeprefix("?").removeprefix("__").removesuffix("__")
        if not isinstance(node, Mapping) or key not in node:
            return ABSENT
        node = node[key]
    return node


def fields(node: Any, paths: Iterable[str]) -> list[Any]:
    return [at_path(node, p) for p in paths]


def unchanged(new: Any, old: Any) -> Verdict:
    """``self == oldSelf``."""
    return unless(new == old)


def field_unchanged(name: str) -> TransitionPredicate:
    """The field ``name`` is absent from both, or present in both with one value."""

    def check(new: Node, old: Node) -> Verdict:
        return unless(at_path(new, name) == at_path(old, name))

    return check


def field_kept(name: str) -> TransitionPredicate:
    """The field ``name``, once there, is not removed."""

    def check(new: Node, old: Node) -> Verdict:
        return unless(name in new or name not in old)

    return check


def _suspended(new: Node, old: Node) -> bool:
    return new.get("suspend") is True or old.get("suspend") is True


def _is_indexed(rjob: Node) -> bool:
    return bool(at_path(rjob, "template.?spec.?completionMode") == "Indexed")


def replicated_jobs_same(
    compared: Sequence[str], sizes: Sequence[str], depth: int, *, when_suspended: bool
) -> TransitionPredicate:
    """``replicated-jobs-immutable`` (``when_suspended`` False: holds while either object is
    suspended) and ``replicated-jobs-suspended-changes`` (True: holds unless one is): the same
    replicated jobs in the same order, semantically equal in ``compared`` (as upstream's Go types
    decode them, to ``depth`` levels: :mod:`controller.api.semantic`); with ``sizes``
    (ElasticJobSet), an Indexed one may change those."""

    def present(node: Node, paths: Sequence[str]) -> list[Any]:
        return [None if v is ABSENT else v for v in fields(node, paths)]

    def check(new: Node, old: Node) -> Verdict:
        if _suspended(new, old) != when_suspended:
            return None
        if ("replicatedJobs" in new) != ("replicatedJobs" in old):
            return Broken()
        rjobs, before = items(new, "replicatedJobs"), items(old, "replicatedJobs")
        if len(rjobs) != len(before):
            return Broken()
        return unless(
            all(
                semantic.same(present(r, compared), present(o, compared), compared, depth)
                and (not sizes or _is_indexed(r) or fields(r, sizes) == fields(o, sizes))
                for r, o in zip(rjobs, before, strict=True)
            )
        )

    return check


def _resized(new: Node, old: Node) -> Iterator[tuple[Node, Node]]:
    """Pairs (new, old) of Indexed replicated jobs at the same position in both."""
    if "replicatedJobs" not in new or "replicatedJobs" not in old:
        return
    before = items(old, "replicatedJobs")
    for i, rjob in enumerate(items(new, "replicatedJobs")):
        if i < len(before) and _is_indexed(rjob):
            yield rjob, before[i]


def _changed(new: Node, old: Node, field: str) -> bool:
    path = f"template.?spec.?{field}"
    return bool(at_path(new, path) != at_path(old, path))


def elastic_at_least_one(field: str) -> TransitionPredicate:
    def check(new: Node, old: Node) -> Verdict:
        return first(
            r["name"]
            for r, o in _resized(new, old)
            if _changed(r, o, field) and _value_or(r, field, 1) < 1
        )

    return check


def _value_or(rjob: Node, field: str, default: int) -> int:
    value = at_path(rjob, f"template.?spec.?{field}")
    return default if value is ABSENT else int(value)


def elastic_completions_equal_parallelism(new: Node, old: Node) -> Verdict:
    def unequal(rjob: Node) -> bool:
        p = at_path(rjob, "template.?spec.?parallelism")
        c = at_path(rjob, "template.?spec.?completions")
        return p is not ABSENT and c is not ABSENT and p != c

    return first(
        r["name"]
        for r, o in _resized(new, old)
        if (_changed(r, o, "parallelism") or _changed(r, o, "completions")) and unequal(r)
    )


def elastic_not_when_finished(new: Node, old: Node) -> Verdict:
    if not get(old, "status", "terminalState"):
        return None
    spec, before = get(new, "spec"), get(old, "spec")
    if "replicatedJobs" not in (spec or {}) or "replicatedJobs" not in (before or {}):
        return None
    sizes = ("template.?spec.?parallelism", "template.?spec.?completions")
    old_rjobs = items(before, "replicatedJobs")
    return unless(
        all(
            i >= len(old_rjobs) or fields(r, sizes) == fields(old_rjobs[i], sizes)
            for i, r in enumerate(items(spec, "replicatedJobs"))
        )
    )


def _has_storage(template: Node) -> bool:
    return _storage(template)[0]


def _other_requests_in(a: Node, b: Node) -> bool:
    """Every request of ``a`` but storage is in ``b`` with the same value."""
    requests = get(a, "spec", "resources", "requests")
    if not isinstance(requests, Mapping):
        return True
    theirs = get(b, "spec", "resources", "requests")
    return all(
        k == "storage" or (isinstance(theirs, Mapping) and k in theirs and theirs[k] == v)
        for k, v in requests.items()
    )


def template_same(template_fields: Sequence[str]) -> Callable[[Node, Node], bool]:
    def same(new: Node, old: Node) -> bool:
        return (
            fields(new, template_fields) == fields(old, template_fields)
            and _has_storage(new) == _has_storage(old)
            and _other_requests_in(new, old)
            and _other_requests_in(old, new)
        )

    return same


def _not_lowered(new: Node, old: Node) -> bool:
    if new["metadata"]["name"] != old["metadata"]["name"]:
        return True
    if not _has_storage(new) or not _has_storage(old):
        return True
    amount, before = quantity(_storage(new)[1]), quantity(_storage(old)[1])
    return amount is None or before is None or not amount < before


def _lowered(new: Node, old: Node, field: str) -> list[str]:
    """The templates of ``new[field]`` whose storage request is below their stored one."""
    if field not in new or field not in old:
        return []
    before = items(old, field)
    return [
        t["metadata"]["name"]
        for j, t in enumerate(items(new, field))
        if j < len(before) and not _not_lowered(t, before[j])
    ]


def _templates_same(new: Node, old: Node, field: str, same: Callable[[Node, Node], bool]) -> bool:
    if (field in new) != (field in old):
        return False
    templates, before = items(new, field), items(old, field)
    return len(templates) == len(before) and all(
        same(t, o) for t, o in zip(templates, before, strict=True)
    )


def volume_claim_policies_same(template_fields: Sequence[str]) -> TransitionPredicate:
    same = template_same(template_fields)
    policy_fields = ("?retentionPolicy", "?targetReplicatedJobs", "scope")

    def check(new: list[Node], old: list[Node]) -> Verdict:
        return unless(
            len(new) == len(old)
            and all(
                fields(p, policy_fields) == fields(o, policy_fields)
                and _templates_same(p, o, "templates", same)
                for p, o in zip(new, old, strict=True)
            )
        )

    return check


def volume_claim_policies_not_lowered(new: list[Node], old: list[Node]) -> Verdict:
    return first(
        name for i, p in enumerate(new) if i < len(old) for name in _lowered(p, old[i], "templates")
    )


def volume_policy_same(template_fields: Sequence[str]) -> TransitionPredicate:
    same = template_same(template_fields)
    policy_fields = ("?replicatedJobs", "?retentionPolicy")

    def check(new: Node, old: Node) -> Verdict:
        return unless(
            fields(new, policy_fields) == fields(old, policy_fields)
            and _templates_same(new, old, "volumeClaimTemplates", same)
        )

    return check


def volume_policy_not_lowered(new: Node, old: Node) -> Verdict:
    return first(_lowered(new, old, "volumeClaimTemplates"))
