"""Claims that one node at a time can use, shared by pods that run at once (pure).

A ``ReadWriteOnce`` volume attaches to one node. When several pods that run at the same time use
one such claim (a JobSet-scope claim mounted by the pods of several Jobs, or any claim mounted by
a Job of several pods) and the scheduler puts them on different nodes, the volume cannot attach
to the second node: its pods wait in ContainerCreating with a ``Multi-Attach`` error, and no
JobSet controller says why. Kubernetes' attach/detach controller refuses a second node whenever
the volume's access modes include ``ReadWriteOnce``, so a claim template asking for it counts
here even when it asks for a multi-node mode too.

So the controller keeps such pods on one node, without the user writing any affinity:

- every Job whose pods use a shared single-node claim gets, in its pod template, the label
  ``jobset.sigs.k8s.io/single-node-claims: <group>`` and a *required* pod affinity over
  ``kubernetes.io/hostname`` to the group's pods, selected by the labels every JobSet controller
  writes (``group_pods``), so also pods of Jobs made without the group's label (by upstream
  JobSet, or before a scale-up made the claim shared). A group is every claim mounted together
  (claims two Jobs both mount are one group), named after its first claim. The scheduler
  places one pod at a time and sees the pods it has placed: the first pod of a group goes
  where the scheduler puts it (a pod that matches its own required term may go anywhere while
  no other pod does), every later one to that pod's node. It counts only pods that have not
  finished, which is what ``ReadWriteOnce`` needs: phases that follow each other (initializers,
  then trainers) may move, once the volume is free.
- once the scheduler chose the node of a ``WaitForFirstConsumer`` claim
  (``volume.kubernetes.io/selected-node``), the Jobs created later *prefer* that node, so a
  later phase finds the volume where it is attached instead of waiting for it to detach. Not
  required: a volume bound to one node already pins its pods there (the scheduler reads the
  PersistentVolume's node affinity), and pinning a network disk to a node would leave the
  JobSet stuck when that node goes.

Kubernetes enforces ReadWriteOnce only by attaching: storage that attaches nothing (NFS, a CSI
driver with ``attachRequired: false``) mounts the volume on every node its pods run on, and
pinning them to one would only leave pods Pending. So ``pinning`` keeps a group on one node only
where its storage attaches (``attach``: class, provisioner, CSIDriver; what cannot be known is
taken to attach), unless switched: the controller's ``--colocate-claims`` (``always``, ``never``;
``auto`` by default, from the storage), overridden per JobSet by its annotation
``jobset.sigs.k8s.io/colocate-claims`` (``"true"``, ``"false"``). The decision is the Jobs': made
when each Job is created (a running Job's pod template never changes), so a switch flipped, or a
CSIDriver created, acts on the Jobs made from then on. ``MultiAttachRisk`` says, also while False,
whether the pods are kept on one node and why.

Where that cannot hold, the ``MultiAttachRisk`` condition is True and a Warning Event names the
claims and the Jobs before any of their pods can fail to attach (read from the spec, the
condition of a new JobSet is stored with its claims' uids, which its Jobs wait for): Jobs
created without the affinity (by upstream JobSet before a migration, or by an older release)
that still run more than one pod among them; exclusive placement
(``alpha.jobset.sigs.k8s.io/exclusive-topology``), which puts Jobs that share the claim in
different domains; a ``ReadWriteOncePod`` claim shared by pods that run at once (one pod at a
time may use it: the others stay Pending). Pods of replicated jobs that run one after the other
(``dependsOn`` with ``status: Complete``) do not share a claim at once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from controller.api.bounds import MAX_LABEL_VALUE
from controller.jobset import api, children, placement
from controller.jobset.children import ChildJob
from controller.jobset.jobsetstatus import Condition
from controller.jobset.model import JobSet, ReplicatedJob
from controller.jobset.volumes.attach import attaches
from controller.jobset.volumes.desired import claim_name, targeted
from controller.jobset.volumes.model import (
    COLOCATE_ANNOTATION,
    SINGLE_NODE_LABEL,
    VolumePolicy,
    as_dict,
    as_list,
)
from controller.jobset.volumes.observed import StorageClasses
from controller.runtime.store import Obj

CONDITION = "MultiAttachRisk"
REASON_COLOCATED = "Colocated"
REASON_NOT_COLOCATED = "JobsNotColocated"
REASON_EXCLUSIVE = "ExclusivePlacement"
REASON_ONCE_POD = "ReadWriteOncePodShared"
REASON_OWN_AFFINITY = "RequiredPodAffinity"
# False: the pods are not kept on one node, because their storage attaches nothing, or because
# colocation is switched off (the JobSet's annotation, the controller's --colocate-claims).
REASON_ATTACH_NOT_REQUIRED = "AttachNotRequired"
REASON_OFF = "ColocationOff"
HOSTNAME = "kubernetes.io/hostname"
READ_WRITE_ONCE = "ReadWriteOnce"
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
# Preferred scheduling terms weigh 1 to 100; the selected node's is all of it.
PREFERENCE_WEIGHT = 100
_LISTED = 5  # Jobs named in a message before "and N more"

JobRef = tuple[str, int]  # (replicated job, job index)


@dataclass(frozen=True)
class Group:
    """Claims whose pods must share one node, and the replicated jobs that mount them.
    ``key``: the value of ``SINGLE_NODE_LABEL`` on their pods."""

    key: str
    claims: tuple[str, ...]  # sorted
    rjobs: frozenset[str]  # JobSet-scope claims: every Job of these replicated jobs
    job: JobRef | None = None  # a group of one Job's own (Job-scope) claims
    # Whether the pods may carry a *required* term of ours: the scheduler counts a pod for a
    # pod's required terms only if it matches all of them, so beside a required pod affinity
    # the group's pods do not all match (the user's; exclusive placement's per-Job term, in a
    # group of several Jobs) ours would make theirs match nothing. Else preferred only.
    required: bool = True
    # Each claim's storageClassName as its template asks (None: the default class).
    classes: tuple[str | None, ...] = ()


@dataclass(frozen=True)
class Colocation:
    """What a JobSet's single-node claims ask of its Jobs: read from its spec alone
    (``colocation``: every shared group), then with its storage and switches (``pinning``: the
    groups kept on one node, and those that are not)."""

    groups: tuple[Group, ...] = ()
    # Shared claims whose pods cannot be kept together: (claim, reason, message).
    conflicts: tuple[tuple[str, str, str], ...] = ()
    # The JobSet's colocate-claims annotation, as written (None: absent).
    switch: str | None = None
    # ``pinning``: the shared groups whose pods are not kept on one node; why each group's pods
    # are kept on one node or not, by its key; why none are, when switched off; a note on an
    # annotation that was not read.
    loose: tuple[Group, ...] = ()
    why: Mapping[str, str] = field(default_factory=dict)
    off: str | None = None
    note: str = ""

    def group_of(self, rjob: str, index: int) -> Group | None:
        """The group the pods of Job ``index`` of ``rjob`` belong to, if any."""
        for group in self.groups:
            if group.job == (rjob, index) or (group.job is None and rjob in group.rjobs):
                return group
        return None

    def __bool__(self) -> bool:
        return bool(self.groups or self.conflicts or self.loose)


def _modes(template_spec: Obj) -> frozenset[str]:
    return frozenset(m for m in as_list(template_spec.get("accessModes")) if isinstance(m, str))


def _size(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _pods_per_job(rjob: ReplicatedJob) -> int:
    """Pods of one Job that may run at once, min(parallelism, completions). Read here from the
    template itself: a JobSet stored under an older schema may hold sizes that are not integers
    (the API server refuses such a Job; until then they count as Kubernetes' defaults)."""
    spec = as_dict(rjob.template.get("spec"))
    parallelism = _size(spec.get("parallelism"))
    completions = _size(spec.get("completions"))
    pods = 1 if parallelism is None else parallelism
    return pods if completions is None else min(pods, completions)


def _pods_at_once(rjob: ReplicatedJob) -> int:
    """Pods of one replicated job that may run at once: its Jobs run together."""
    return rjob.replicas * _pods_per_job(rjob)


def finished_before(jobset: JobSet) -> dict[str, frozenset[str]]:
    """For each replicated job, the replicated jobs certain to have finished before it starts:
    those it depends on with ``status: Complete``, and what had finished before any it depends
    on started (a ``Ready`` dependency only started)."""
    result: dict[str, frozenset[str]] = {}
    for rjob in jobset.replicated_jobs:  # dependsOn names earlier replicated jobs only
        done: set[str] = set()
        for dep in rjob.depends_on:
            done |= result.get(dep.name, frozenset())
            if dep.status == "Complete":
                done.add(dep.name)
        result[rjob.name] = frozenset(done)
    return result


def _at_once(
    users: Sequence[ReplicatedJob],
    before: Mapping[str, frozenset[str]],
    count: Callable[[ReplicatedJob], int] = _pods_at_once,
) -> bool:
    """Whether several pods (or, with ``count`` the replicas, several Jobs) of these replicated
    jobs, which mount one claim, may run at the same time."""
    if any(count(r) > 1 for r in users):
        return True
    names = [r.name for r in users if r.replicas > 0]
    return any(
        b not in before.get(a, frozenset()) and a not in before.get(b, frozenset())
        for i, a in enumerate(names)
        for b in names[i + 1 :]
    )


def group_key(claim: str) -> str:
    """A label value naming a group by its first claim: the name when it fits, else its start
    and a digest (claim names are DNS subdomains, whose characters label values allow)."""
    if len(claim) <= MAX_LABEL_VALUE:
        return claim
    digest = hashlib.sha256(claim.encode()).hexdigest()[:16]
    return f"{claim[: MAX_LABEL_VALUE - 17].rstrip('.-')}-{digest}"


def _own_pod_affinity(rjob: ReplicatedJob) -> bool:
    """The replicated job's pods require a pod affinity of their own (the user's)."""
    pod = as_dict(as_dict(as_dict(rjob.template.get("spec")).get("template")).get("spec"))
    affinity = as_dict(as_dict(pod.get("affinity")).get("podAffinity"))
    return bool(as_list(affinity.get("requiredDuringSchedulingIgnoredDuringExecution")))


def _exclusive(jobset: JobSet, rjob: ReplicatedJob) -> bool:
    annotations = as_dict(as_dict(rjob.template.get("metadata")).get("annotations"))
    strings = {str(k): str(v) for k, v in annotations.items()}
    return placement.placement(jobset.annotations, strings) is not None


class _Union:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, item: str) -> str:
        self.parent.setdefault(item, item)
        while self.parent[item] != item:
            self.parent[item] = self.parent[self.parent[item]]
            item = self.parent[item]
        return item

    def join(self, a: str, b: str) -> None:
        self.parent[self.find(a)] = self.find(b)


def colocation(jobset: JobSet, policies: Iterable[VolumePolicy]) -> Colocation:
    """The groups of shared single-node claims and the conflicts, from the spec alone (whether
    their pods are kept on one node is ``pinning``'s)."""
    before = finished_before(jobset)
    class_of: dict[str, str | None] = {}  # claim name: its template's storageClassName
    union = _Union()
    shared_users: dict[str, list[ReplicatedJob]] = {}  # JobSet-scope ReadWriteOnce claims
    own: dict[JobRef, set[str]] = {}  # Job-scope ReadWriteOnce claims shared by a Job's pods
    conflicts: list[tuple[str, str, str]] = []
    for policy in policies:
        if policy.scope == "Pod":
            continue  # a claim per pod
        users = [r for n in targeted(policy, jobset) if (r := jobset.replicated_job(n))]
        for template in policy.templates:
            modes = _modes(template.spec)
            wanted = template.spec.get("storageClassName")
            storage_class = wanted if isinstance(wanted, str) else None
            if READ_WRITE_ONCE_POD in modes:
                _once_pod(jobset, policy, template.name, users, before, conflicts)
            if READ_WRITE_ONCE not in modes:
                continue
            if policy.scope == "JobSet":
                claim = claim_name(template.name, jobset.name, "JobSet")
                if _at_once(users, before):
                    shared_users[claim] = users
                    class_of[claim] = storage_class
                continue
            for rjob in users:
                if _pods_per_job(rjob) > 1:
                    for index in range(rjob.replicas):
                        name = claim_name(template.name, jobset.name, "Job", rjob.name, index)
                        own.setdefault((rjob.name, index), set()).add(name)
                        class_of[name] = storage_class
    # JobSet-scope claims mounted by one replicated job share its pods' node: one group.
    by_rjob: dict[str, list[str]] = {}
    for claim, users in shared_users.items():
        union.find(claim)
        for rjob in users:
            by_rjob.setdefault(rjob.name, []).append(claim)
    for claims in by_rjob.values():
        for claim in claims[1:]:
            union.join(claims[0], claim)
    components: dict[str, list[str]] = {}
    for claim in shared_users:
        components.setdefault(union.find(claim), []).append(claim)
    groups: list[Group] = []
    for members in components.values():
        together = tuple(sorted(members))
        rjobs = frozenset(r.name for c in together for r in shared_users[c])
        users = [r for r in jobset.replicated_jobs if r.name in rjobs]
        jobs_at_once = _at_once(users, before, lambda r: r.replicas)
        exclusive = jobs_at_once and any(_exclusive(jobset, r) for r in users)
        affine = [r.name for r in users if _own_pod_affinity(r)]
        groups.append(
            Group(
                group_key(together[0]),
                together,
                rjobs,
                required=not (affine or exclusive),
                classes=tuple(class_of[c] for c in together),
            )
        )
        if affine and not exclusive:
            conflicts.append(_own_affinity(together[0], affine))
        if exclusive:
            conflicts.append(
                (
                    together[0],
                    REASON_EXCLUSIVE,
                    f"claim {together[0]} is ReadWriteOnce and mounted by the pods of "
                    f"{_rjobs_text(rjobs)}, which run at once, and exclusive placement "
                    f"({placement.EXCLUSIVE_TOPOLOGY}) puts each Job in a domain of its own: "
                    "only one Job at a time can run on the volume's node",
                )
            )
    for job, names in sorted(own.items()):
        if any(job[0] in g.rjobs for g in groups):
            continue  # its pods already follow the JobSet-scope group's node
        mine = tuple(sorted(names))
        owner = jobset.replicated_job(job[0])
        own_affinity = owner is not None and _own_pod_affinity(owner)
        groups.append(
            Group(
                group_key(mine[0]),
                mine,
                frozenset(),
                job,
                required=not own_affinity,
                classes=tuple(class_of[c] for c in mine),
            )
        )
        if own_affinity:
            conflicts.append(_own_affinity(mine[0], [job[0]]))
    groups.sort(key=lambda g: g.claims)
    switch = jobset.annotations.get(COLOCATE_ANNOTATION)
    return Colocation(tuple(groups), tuple(sorted(conflicts)), switch)


def pinning(
    found: Colocation,
    classes: StorageClasses,
    existing: Mapping[str, str | None] | None = None,
) -> Colocation:
    """``found`` (``colocation``, from the spec) as the Jobs created now get it: ``groups`` the
    groups whose pods are kept on one node, ``loose`` those that are not, each with why; the
    conflicts of loose groups dropped (their pods may be apart). The JobSet's annotation decides
    first ("true", "false"), then the controller's ``--colocate-claims`` (``always``,
    ``never``), else the storage: a group is kept on one node when the storage of any of its
    claims attaches (``attach``), read from the class of the claim where it exists
    (``existing``: claim name to its storageClassName; a claim keeps the class it was made with,
    whatever the default is now), else its template's. A ``ReadWriteOncePod`` claim shared at
    once is a conflict whatever the storage: the scheduler enforces that mode, not the attach."""
    existing = existing or {}
    if not found.groups:
        return found
    on = off = None
    note = ""
    mode = classes.colocate_claims
    if found.switch == "true":
        on = f'the JobSet\'s annotation {COLOCATE_ANNOTATION} is "true"'
    elif found.switch == "false":
        off = f'the JobSet\'s annotation {COLOCATE_ANNOTATION} is "false"'
    else:
        if found.switch is not None:
            note = (
                f' (annotation {COLOCATE_ANNOTATION}: "{found.switch}" is not "true" or '
                f'"false", so the controller\'s --colocate-claims={mode} decides)'
            )
        if mode == "always":
            on = "the controller's --colocate-claims is always"
        elif mode == "never":
            off = "the controller's --colocate-claims is never"
    if on is not None:
        return Colocation(
            found.groups, found.conflicts, found.switch, why={g.key: on for g in found.groups}
        )
    # Thousands of groups (a Job-scope claim per Job) share a few classes: judged once each.
    known: dict[tuple[str | None, ...], tuple[bool, str]] = {}
    pinned: list[Group] = []
    loose: list[Group] = []
    why: dict[str, str] = {}
    for group in found.groups:
        if existing:
            actual = tuple(
                existing.get(c, t) for c, t in zip(group.claims, group.classes, strict=True)
            )
            group = group if actual == group.classes else replace(group, classes=actual)
        if group.classes not in known:
            verdicts = [attaches(c, classes) for c in dict.fromkeys(group.classes)]
            attaching = [v for v in verdicts if v.attaches]
            said = "; ".join(dict.fromkeys(v.why for v in attaching or verdicts))
            known[group.classes] = (bool(attaching), said)
        attached, why[group.key] = known[group.classes]
        (pinned if off is None and attached else loose).append(group)
    apart = {g.claims[0] for g in loose}
    conflicts = tuple(
        c
        for c in found.conflicts
        if not (c[1] in (REASON_EXCLUSIVE, REASON_OWN_AFFINITY) and c[0] in apart)
    )
    return Colocation(tuple(pinned), conflicts, found.switch, tuple(loose), why, off, note)


def _own_affinity(claim: str, rjobs: Iterable[str]) -> tuple[str, str, str]:
    """The conflict of a group whose pods require a pod affinity of their own."""
    return (
        claim,
        REASON_OWN_AFFINITY,
        f"claim {claim} is ReadWriteOnce and the pods of {_rjobs_text(rjobs)} that mount it "
        "require a pod affinity of their own: the scheduler counts a pod for required terms "
        "only if it matches all of them, so a term of the controller's beside them would leave "
        "the pods unschedulable. They only prefer the node of the others that share the claim, "
        "and may be placed apart, where the volume cannot attach (Multi-Attach); use a "
        "ReadWriteMany class, or keep them on one node yourself (a node affinity)",
    )


def _once_pod(
    jobset: JobSet,
    policy: VolumePolicy,
    template: str,
    users: Sequence[ReplicatedJob],
    before: Mapping[str, frozenset[str]],
    conflicts: list[tuple[str, str, str]],
) -> None:
    """A ReadWriteOncePod claim shared by pods that run at once: one at a time runs."""
    if policy.scope == "JobSet" and _at_once(users, before):
        claim = claim_name(template, jobset.name, "JobSet")
        what = f"the pods of {_rjobs_text(frozenset(r.name for r in users))}"
    else:
        many = [r for r in users if _pods_per_job(r) > 1]
        if policy.scope != "Job" or not many:
            return
        claim = claim_name(template, jobset.name, "Job", many[0].name, 0)
        what = f"the {_pods_per_job(many[0])} pods of each Job of {many[0].name}"
    conflicts.append(
        (
            claim,
            REASON_ONCE_POD,
            f"claim {claim} is ReadWriteOncePod and mounted by {what}, which run at once: "
            "one pod at a time can use it, the others stay Pending",
        )
    )


def _rjobs_text(rjobs: Iterable[str]) -> str:
    names = sorted(rjobs)
    return ("replicated job " if len(names) == 1 else "replicated jobs ") + ", ".join(names)


# ----------------------------------------------------------------------------- pod templates


def _with_required(section: object, term: Obj) -> Obj:
    copied: Obj = dict(section) if isinstance(section, dict) else {}
    listed = as_list(copied.get("requiredDuringSchedulingIgnoredDuringExecution"))
    copied["requiredDuringSchedulingIgnoredDuringExecution"] = [*listed, term]
    return copied


def _with_preferred(section: object, term: Obj) -> Obj:
    copied: Obj = dict(section) if isinstance(section, dict) else {}
    listed = as_list(copied.get("preferredDuringSchedulingIgnoredDuringExecution"))
    copied["preferredDuringSchedulingIgnoredDuringExecution"] = [*listed, term]
    return copied


def group_pods(group: Group, jobset: str) -> Obj:
    """The label selector of the group's pods, by the labels every JobSet controller puts on
    them (name, replicated job, Job index), not by the group's own label: pods of Jobs made
    without it (by upstream JobSet before a migration, or before a scale-up made the claim
    shared) are followed too, wherever they run."""
    if group.job is not None:
        rjob, index = group.job
        labels = {api.JOBSET_NAME: jobset, api.REPLICATED_JOB_NAME: rjob, api.JOB_INDEX: str(index)}
        return {"matchLabels": labels}
    return {
        "matchLabels": {api.JOBSET_NAME: jobset},
        "matchExpressions": [
            {"key": api.REPLICATED_JOB_NAME, "operator": "In", "values": sorted(group.rjobs)}
        ],
    }


def colocated(job: Obj, group: Group, node: str | None, jobset: str) -> Obj:
    """A copy of the Job object whose pods carry the group's label and a required pod affinity
    to the group's pods (``group_pods``) of the JobSet ``jobset``, and prefer ``node`` (the node
    a WaitForFirstConsumer claim of the group was placed on); only the objects on the path are
    copied."""
    result = dict(job)
    spec = result["spec"] = dict(as_dict(result.get("spec")))
    template = spec["template"] = dict(as_dict(spec.get("template")))
    meta = template["metadata"] = dict(as_dict(template.get("metadata")))
    meta["labels"] = {**as_dict(meta.get("labels")), SINGLE_NODE_LABEL: group.key}
    pod = template["spec"] = dict(as_dict(template.get("spec")))
    affinity = dict(as_dict(pod.get("affinity")))
    together = {"labelSelector": group_pods(group, jobset), "topologyKey": HOSTNAME}
    if group.required:
        affinity["podAffinity"] = _with_required(affinity.get("podAffinity"), together)
    else:  # beside required terms its pods do not all match (``Group.required``)
        preferred = {"weight": PREFERENCE_WEIGHT, "podAffinityTerm": together}
        affinity["podAffinity"] = _with_preferred(affinity.get("podAffinity"), preferred)
    if node is not None:
        there = {"matchExpressions": [{"key": HOSTNAME, "operator": "In", "values": [node]}]}
        affinity["nodeAffinity"] = _with_preferred(
            affinity.get("nodeAffinity"), {"weight": PREFERENCE_WEIGHT, "preference": there}
        )
    pod["affinity"] = affinity
    return result


def selected_node(group: Group, nodes: Mapping[str, str]) -> str | None:
    """The node the scheduler chose for a WaitForFirstConsumer claim of the group (the first
    claim that has one), from ``nodes``: claim name to its selected node."""
    return next((nodes[c] for c in group.claims if c in nodes), None)


# ----------------------------------------------------------------------------- condition


def _carries(job: ChildJob, group: Group) -> bool:
    template = as_dict(as_dict(job.raw.get("spec")).get("template"))
    labels = as_dict(as_dict(template.get("metadata")).get("labels"))
    return labels.get(SINGLE_NODE_LABEL) == group.key


def _listing(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_LISTED])
    return shown if len(names) <= _LISTED else f"{shown} and {len(names) - _LISTED} more"


def _claims(names: Sequence[str]) -> str:
    return ("claim " if len(names) == 1 else "claims ") + _listing(names)


def _reasons(groups: Sequence[Group], why: Mapping[str, str]) -> str:
    """Each distinct ``why`` of ``groups``, after the claims it is about."""
    by_why: dict[str, list[str]] = {}
    for group in groups:
        by_why.setdefault(why.get(group.key, ""), []).extend(group.claims)
    return "; ".join(f"{_claims(claims)}: {why}" for why, claims in by_why.items())


def condition(found: Colocation, jobset: JobSet, jobs: Sequence[ChildJob]) -> Condition | None:
    """``MultiAttachRisk`` for a JobSet with shared single-node claims (None without any), from
    ``pinning``'s answer: True, with a Warning Event, where their pods cannot be kept on one
    node although they must; else False, saying whether they are kept on one node and why."""
    if not found:
        return None
    problems = [(reason, text) for _, reason, text in found.conflicts]
    for group in found.groups:
        unlabelled = [
            j
            for j in children.current_jobs(jobset, jobs)
            if not (j.is_finished or j.deleting)
            and j.replicated_job is not None
            and j.job_index is not None
            and found.group_of(j.replicated_job, j.job_index) == group
            and not _carries(j, group)
        ]
        # The Jobs made with the affinity follow any pod of the group, wherever it runs: one pod
        # made without it is no risk (a scale-up that made the claim shared), several may
        # already run apart.
        outside = sorted(j.name for j in unlabelled)
        if sum(j.expected_pods() for j in unlabelled) > 1:
            problems.append(
                (
                    REASON_NOT_COLOCATED,
                    f"claim {group.claims[0]} is ReadWriteOnce and Jobs {_listing(outside)} that "
                    "mount it were created without this controller's pod affinity (by another "
                    "controller, or an older release, or while it was not needed): their pods "
                    "may run on different nodes, where the volume cannot attach (Multi-Attach). "
                    "Jobs this controller makes again (after a restart of the JobSet, or once "
                    "deleted) carry it; or use a ReadWriteMany class",
                )
            )
    if problems:
        reason = problems[0][0]
        text = "; ".join(t for _, t in problems)
        return Condition(CONDITION, "True", reason, text + found.note, "Warning")
    if found.groups:
        text = (
            "the pods that share ReadWriteOnce claims are kept on one node (a required pod "
            f"affinity of the Jobs this controller creates): {_reasons(found.groups, found.why)}"
        )
        if found.loose:
            text += f". Not kept together: {_reasons(found.loose, found.why)}"
        if found.switch != "true":
            text += f'. {COLOCATE_ANNOTATION}: "false" on the JobSet turns it off'
        return Condition(CONDITION, "False", REASON_COLOCATED, text + found.note, None)
    if found.off is not None:
        text = (
            "the pods that share ReadWriteOnce claims are not kept on one node, as "
            f"{found.off}: {_reasons(found.loose, found.why)}"
        )
        return Condition(CONDITION, "False", REASON_OFF, text + found.note, None)
    if found.loose:
        text = (
            "the pods that share ReadWriteOnce claims are not kept on one node, as their storage "
            "attaches nothing (several nodes mount its volumes): "
            + _reasons(found.loose, found.why)
        )
        return Condition(CONDITION, "False", REASON_ATTACH_NOT_REQUIRED, text + found.note, None)
    return None
