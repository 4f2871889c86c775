"""Shared single-node claims (volumes/singlenode.py): which Jobs' pods must share a node, the pod
template that keeps them there, and the MultiAttachRisk condition. One table per question."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import pytest

from controller.jobset import api, children, construct, volumes
from controller.jobset.model import InvalidJobSet, JobSet
from controller.jobset.placement import EXCLUSIVE_TOPOLOGY
from controller.jobset.volumes import StorageClasses, singlenode
from controller.jobset.volumes.model import (
    COLOCATE_ANNOTATION,
    SELECTED_NODE_ANNOTATION,
    SINGLE_NODE_LABEL,
)
from controller.jobset.volumes.observed import views as claim_views
from controller.jobset.volumes.singlenode import Group
from controller.runtime.store import Obj
from tests.unit.jobset_factories import make_job
from tests.unit.volumes.factories import claim, make, mounting, tpl

RWO = ["ReadWriteOnce"]


def user(
    name: str,
    replicas: int = 1,
    *,
    pods: int = 1,
    after: tuple[tuple[str, str], ...] = (),
    mounts: tuple[str, ...] = ("data",),
    exclusive: bool = False,
) -> Obj:
    """A replicated job of ``replicas`` Jobs of ``pods`` pods each, mounting ``mounts``,
    depending on ``after`` ((name, Ready|Complete)), with exclusive placement if asked."""
    entry = mounting(name, replicas, mounts)
    spec = entry["template"]["spec"]
    if pods > 1:
        spec["parallelism"] = spec["completions"] = pods
    if after:
        entry["dependsOn"] = [{"name": n, "status": s} for n, s in after]
    if exclusive:  # on the Job template, as upstream reads it
        entry["template"]["metadata"] = {"annotations": {EXCLUSIVE_TOPOLOGY: "rack"}}
    return entry


def policy(*templates: str, scope: str = "JobSet", modes: list[str] | None = None) -> Obj:
    entry: Obj = {"templates": [tpl(t, accessModes=modes or RWO) for t in templates]}
    if scope != "JobSet":
        entry["scope"] = scope
    return entry


def found(js: JobSet) -> singlenode.Colocation:
    return volumes.model(js).colocation


def summary(colocation: singlenode.Colocation) -> dict[str, Any]:
    return {
        "groups": [
            (g.key, g.claims, sorted(g.rjobs) if g.job is None else g.job)
            for g in colocation.groups
        ],
        "conflicts": [(claim, reason) for claim, reason, _ in colocation.conflicts],
    }


NONE: dict[str, Any] = {"groups": [], "conflicts": []}

ROWS = [
    pytest.param(
        [policy("data")],
        [user("init"), user("train")],
        {"groups": [("data-js", ("data-js",), ["init", "train"])], "conflicts": []},
        id="two-replicated-jobs-at-once-share-one-node",
    ),
    pytest.param(
        [policy("data")],
        [user("workers", 2)],
        {"groups": [("data-js", ("data-js",), ["workers"])], "conflicts": []},
        id="two-jobs-of-one-replicated-job",
    ),
    pytest.param(
        [policy("data")],
        [user("workers", pods=2)],
        {"groups": [("data-js", ("data-js",), ["workers"])], "conflicts": []},
        id="two-pods-of-one-job",
    ),
    pytest.param([policy("data")], [user("solo")], NONE, id="one-pod-alone-shares-nothing"),
    pytest.param(
        [policy("data", modes=["ReadWriteMany"])],
        [user("init"), user("train", 2)],
        NONE,
        id="read-write-many-attaches-anywhere",
    ),
    pytest.param(
        [policy("data", modes=["ReadWriteOnce", "ReadWriteMany"])],
        [user("init"), user("train")],
        {"groups": [("data-js", ("data-js",), ["init", "train"])], "conflicts": []},
        id="read-write-once-among-modes-still-one-node",
    ),
    pytest.param(
        [policy("data")],
        [user("init"), user("train", after=(("init", "Complete"),))],
        NONE,
        id="one-after-the-other-share-nothing-at-once",
    ),
    pytest.param(
        [policy("data")],
        [user("init"), user("train", after=(("init", "Ready"),))],
        {"groups": [("data-js", ("data-js",), ["init", "train"])], "conflicts": []},
        id="started-after-ready-runs-at-once",
    ),
    pytest.param(
        [policy("data")],
        [
            user("a"),
            user("b", after=(("a", "Ready"),)),
            user("c", after=(("b", "Complete"),)),
        ],
        {"groups": [("data-js", ("data-js",), ["a", "b", "c"])], "conflicts": []},
        id="ready-then-complete-still-overlaps-the-first",
    ),
    pytest.param(
        # Kubeflow Trainer's LLM runtimes: two initializers at once, then the trainer nodes.
        [policy("initializer")],
        [
            user("dataset-initializer", mounts=("initializer",)),
            user("model-initializer", mounts=("initializer",)),
            user(
                "node",
                pods=2,
                mounts=("initializer",),
                after=(("dataset-initializer", "Complete"), ("model-initializer", "Complete")),
            ),
        ],
        {
            "groups": [
                (
                    "initializer-js",
                    ("initializer-js",),
                    ["dataset-initializer", "model-initializer", "node"],
                )
            ],
            "conflicts": [],
        },
        id="trainer-runtime-shape",
    ),
    pytest.param(
        [policy("data", "model")],
        [user("init", mounts=("data", "model")), user("train", 2, mounts=("model",))],
        {"groups": [("data-js", ("data-js", "model-js"), ["init", "train"])], "conflicts": []},
        id="claims-mounted-together-are-one-group",
    ),
    pytest.param(
        [policy("ckpt", scope="Job")],
        [user("workers", 2, pods=2, mounts=("ckpt",))],
        {
            "groups": [
                ("ckpt-js-workers-0", ("ckpt-js-workers-0",), ("workers", 0)),
                ("ckpt-js-workers-1", ("ckpt-js-workers-1",), ("workers", 1)),
            ],
            "conflicts": [],
        },
        id="job-scope-claim-shared-by-its-jobs-pods",
    ),
    pytest.param(
        [policy("ckpt", scope="Job")],
        [user("workers", 2, mounts=("ckpt",))],
        NONE,
        id="job-scope-claim-of-a-one-pod-job",
    ),
    pytest.param(
        [policy("data"), policy("ckpt", scope="Job")],
        [user("workers", 2, pods=2, mounts=("data", "ckpt"))],
        {"groups": [("data-js", ("data-js",), ["workers"])], "conflicts": []},
        id="job-scope-claim-follows-the-jobset-group",
    ),
    pytest.param(
        [policy("rank", scope="Pod")],
        [user("workers", 2, pods=4, mounts=("rank",))],
        NONE,
        id="pod-scope-is-a-claim-per-pod",
    ),
    pytest.param(
        [policy("data")],
        [user("a", exclusive=True), user("b")],
        {
            "groups": [("data-js", ("data-js",), ["a", "b"])],
            "conflicts": [("data-js", "ExclusivePlacement")],
        },
        id="exclusive-placement-cannot-share-a-node",
    ),
    pytest.param(
        [policy("data")],
        [user("a", pods=2, exclusive=True)],
        {"groups": [("data-js", ("data-js",), ["a"])], "conflicts": []},
        id="exclusive-placement-of-one-job-keeps-its-pods-together",
    ),
    pytest.param(
        [policy("data", modes=["ReadWriteOncePod"])],
        [user("init"), user("train")],
        {"groups": [], "conflicts": [("data-js", "ReadWriteOncePodShared")]},
        id="read-write-once-pod-shared-at-once",
    ),
    pytest.param(
        [policy("data", modes=["ReadWriteOncePod"])],
        [user("init"), user("train", after=(("init", "Complete"),))],
        NONE,
        id="read-write-once-pod-one-after-the-other",
    ),
    pytest.param(
        [policy("ckpt", scope="Job", modes=["ReadWriteOncePod"])],
        [user("workers", 2, pods=2, mounts=("ckpt",))],
        {"groups": [], "conflicts": [("ckpt-js-workers-0", "ReadWriteOncePodShared")]},
        id="read-write-once-pod-job-scope-several-pods",
    ),
    pytest.param(
        [policy("rank", scope="Pod", modes=["ReadWriteOncePod"])],
        [user("workers", 2, pods=4, mounts=("rank",))],
        NONE,
        id="read-write-once-pod-per-pod-as-the-mode-says",
    ),
]


@pytest.mark.parametrize(("policies", "rjobs", "expected"), ROWS)
def test_colocation(policies: list[Obj], rjobs: list[Obj], expected: dict[str, Any]) -> None:
    assert summary(found(make(policies, rjobs=rjobs))) == expected


def test_finished_before_follows_complete_dependencies_through_ready_ones() -> None:
    js = make(
        [policy("data")],
        rjobs=[
            user("a"),
            user("b", after=(("a", "Complete"),)),
            user("c", after=(("b", "Ready"),)),
            user("d", after=(("c", "Complete"),)),
        ],
    )
    assert singlenode.finished_before(js) == {
        "a": frozenset(),
        "b": frozenset({"a"}),
        "c": frozenset({"a"}),
        "d": frozenset({"a", "c"}),
    }


@pytest.mark.parametrize(
    "claim",
    ["data-js", "x" * 63, "a" * 200, "long." * 40 + "end"],
)
def test_group_key_is_a_label_value(claim: str) -> None:
    key = singlenode.group_key(claim)
    assert len(key) <= 63
    assert key[0].isalnum() and key[-1].isalnum()
    assert key == claim or key.endswith(singlenode.group_key(claim)[-16:])
    assert singlenode.group_key(claim) == key  # the same for the same claim


def test_long_claims_get_different_keys() -> None:
    assert singlenode.group_key("a" * 80 + "1") != singlenode.group_key("a" * 80 + "2")


GROUP = Group("data-js", ("data-js",), frozenset({"workers"}))


def job_object(affinity: Obj | None = None) -> Obj:
    pod: Obj = {"containers": [{"name": "main"}]}
    if affinity is not None:
        pod["affinity"] = affinity
    return {
        "metadata": {"name": "js-workers-0"},
        "spec": {"template": {"metadata": {"labels": {"mine": "x"}}, "spec": pod}},
    }


# The group's pods by the labels any JobSet controller writes, so also those of Jobs made
# without the group's label.
TOGETHER = {
    "labelSelector": {
        "matchLabels": {api.JOBSET_NAME: "js"},
        "matchExpressions": [
            {"key": api.REPLICATED_JOB_NAME, "operator": "In", "values": ["workers"]}
        ],
    },
    "topologyKey": "kubernetes.io/hostname",
}


def test_colocated_pods_carry_the_label_and_a_required_pod_affinity() -> None:
    job = job_object()
    before = copy.deepcopy(job)
    placed = singlenode.colocated(job, GROUP, None, "js")
    assert job == before  # not changed in place
    template = placed["spec"]["template"]
    assert template["metadata"]["labels"] == {"mine": "x", SINGLE_NODE_LABEL: "data-js"}
    assert template["spec"]["affinity"] == {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [TOGETHER]}
    }


def test_a_jobs_own_group_selects_that_jobs_pods() -> None:
    """A Job-scope claim shared by the pods of one Job: its pods, by JobSet, replicated job and
    Job index."""
    own = Group("ckpt-js-workers-1", ("ckpt-js-workers-1",), frozenset(), ("workers", 1))
    assert singlenode.group_pods(own, "js") == {
        "matchLabels": {
            api.JOBSET_NAME: "js",
            api.REPLICATED_JOB_NAME: "workers",
            api.JOB_INDEX: "1",
        }
    }


def test_the_users_own_affinity_is_kept_and_the_selected_node_preferred() -> None:
    """A template with a required pod affinity of its own keeps it; the group's term is only
    preferred beside it: the scheduler counts a pod for required terms only if it matches all
    of them, so a required term of ours would make the user's match no pod."""
    own_term = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}
    own_node = {"weight": 5, "preference": {"matchExpressions": []}}
    job = job_object(
        {
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [own_term]},
            "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [own_node]},
        }
    )
    placed = singlenode.colocated(job, replace(GROUP, required=False), "node-3", "js")
    affinity = placed["spec"]["template"]["spec"]["affinity"]
    assert affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [own_term]
    assert affinity["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == [
        {"weight": 100, "podAffinityTerm": TOGETHER}
    ]
    there = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In",
                                   "values": ["node-3"]}]}  # fmt: skip
    assert affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == [
        own_node,
        {"weight": 100, "preference": there},
    ]


CACHE = {
    "labelSelector": {"matchLabels": {"app": "cache"}},
    "topologyKey": "kubernetes.io/hostname",
}


def near_cache(rjob: Obj) -> Obj:
    """``rjob`` whose pods require to run next to a cache pod (the user's own pod affinity)."""
    pod = rjob["template"]["spec"]["template"]["spec"]
    pod["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [CACHE]}}
    return rjob


@pytest.mark.parametrize(
    ("rjobs", "required", "conflicts"),
    [
        pytest.param([user("a"), user("b", 2)], [True], [], id="nothing-of-their-own"),
        pytest.param([user("a"), near_cache(user("b", 2))], [False], ["RequiredPodAffinity"],
                     id="the-users-own-pod-affinity"),
        pytest.param([user("a", exclusive=True), user("b")], [False], ["ExclusivePlacement"],
                     id="exclusive-placement-over-several-jobs"),
        # Exclusive placement's term (the Job's own pods) is matched by every pod of one Job.
        pytest.param([user("a", pods=2, exclusive=True)], [True], [],
                     id="exclusive-placement-of-one-job"),
    ],
)  # fmt: skip
def test_a_required_term_of_ours_only_beside_terms_the_groups_pods_all_match(
    rjobs: list[Obj], required: list[bool], conflicts: list[str]
) -> None:
    """The scheduler counts a pod for required terms only if it matches all of them: beside a
    required pod affinity the group's pods do not all match, the group's term is preferred
    only (a required one would leave the pods unschedulable, or void), and the condition says
    so before any Job exists."""
    js = make([policy("data")], rjobs=rjobs)
    colocation = found(js)
    assert [g.required for g in colocation.groups] == required
    assert [reason for _, reason, _ in colocation.conflicts] == conflicts
    said = singlenode.condition(colocation, js, [])
    assert said is not None
    assert said.reason == (conflicts[0] if conflicts else "Colocated")
    if conflicts == ["RequiredPodAffinity"]:
        assert said.event_type == "Warning"
        assert "claim data-js" in said.message and "replicated job b " in said.message


def test_a_jobs_own_claim_beside_its_own_pod_affinity_is_preferred_and_named() -> None:
    rjob = near_cache(user("w", 2, pods=2, mounts=("ckpt",)))
    colocation = found(make([policy("ckpt", scope="Job")], rjobs=[rjob]))
    groups = [(g.job, g.required) for g in colocation.groups]
    assert groups == [(("w", 0), False), (("w", 1), False)]
    assert [reason for _, reason, _ in colocation.conflicts] == ["RequiredPodAffinity"] * 2


def test_selected_node_is_the_first_claim_of_the_group_that_has_one() -> None:
    group = Group("a-js", ("a-js", "b-js"), frozenset({"w"}))
    assert singlenode.selected_node(group, {}) is None
    assert singlenode.selected_node(group, {"b-js": "n2", "other": "n9"}) == "n2"
    assert singlenode.selected_node(group, {"a-js": "n1", "b-js": "n2"}) == "n1"


# ----------------------------------------------------------------------------- condition


def shared() -> JobSet:
    return make([policy("data")], rjobs=[user("init"), user("workers", 2)])


def jobs_of(js: JobSet, labelled: set[str], **kw: Any) -> list[children.ChildJob]:
    made = []
    for rjob, index in (("init", 0), ("workers", 0), ("workers", 1)):
        name = f"js-{rjob}-{index}"
        labels = {SINGLE_NODE_LABEL: "data-js"} if name in labelled else None
        made.append(make_job(js, rjob, index, active=1, pod_labels=labels, **kw.get(name, {})))
    return [children.view(j) for j in made]


def test_no_condition_without_shared_single_node_claims() -> None:
    js = make([policy("data", modes=["ReadWriteMany"])], rjobs=[user("a"), user("b")])
    assert singlenode.condition(found(js), js, []) is None


def test_jobs_made_by_this_controller_are_colocated() -> None:
    js = shared()
    jobs = jobs_of(js, {"js-init-0", "js-workers-0", "js-workers-1"})
    found_condition = singlenode.condition(found(js), js, jobs)
    assert found_condition is not None
    assert (found_condition.status, found_condition.reason) == ("False", "Colocated")
    assert "data-js" in found_condition.message


def test_running_jobs_made_without_the_affinity_are_named() -> None:
    """Two running Jobs made without the affinity (by upstream JobSet, say) may already run on
    two nodes: named. A finished one holds the volume no more."""
    js = shared()
    jobs = jobs_of(js, set())
    found_condition = singlenode.condition(found(js), js, jobs)
    assert found_condition is not None
    assert (found_condition.status, found_condition.reason) == ("True", "JobsNotColocated")
    assert found_condition.event_type == "Warning"
    assert "Jobs js-init-0, js-workers-0, js-workers-1 that mount it" in found_condition.message
    assert "Multi-Attach" in found_condition.message
    finished = jobs_of(js, {"js-workers-0"}, **{"js-workers-1": {"complete": True}})
    assert singlenode.condition(found(js), js, finished).reason == "Colocated"  # type: ignore[union-attr]


def test_one_pod_made_without_the_affinity_is_followed_and_no_risk() -> None:
    """A scale-up made the claim shared: the first Job (one pod) has no label, the new Jobs'
    pods follow it by the JobSet's own labels, wherever it runs."""
    js = shared()
    jobs = jobs_of(js, {"js-workers-0", "js-workers-1"})
    found_condition = singlenode.condition(found(js), js, jobs)
    assert found_condition is not None
    assert (found_condition.status, found_condition.reason) == ("False", "Colocated")


def test_conflicts_are_reported_with_the_claim() -> None:
    js = make([policy("data", modes=["ReadWriteOncePod"])], rjobs=[user("a"), user("b")])
    found_condition = singlenode.condition(found(js), js, [])
    assert found_condition is not None
    assert (found_condition.status, found_condition.reason) == ("True", "ReadWriteOncePodShared")
    assert found_condition.message == (
        "claim data-js is ReadWriteOncePod and mounted by the pods of replicated jobs a, b, "
        "which run at once: one pod at a time can use it, the others stay Pending"
    )


def test_new_jobs_are_mounted_colocated_and_prefer_the_node_the_scheduler_chose() -> None:
    js = shared()
    placed = claim("data-js", annotations={SELECTED_NODE_ANNOTATION: "node-2"})
    store = volumes.storage(
        volumes.model(js),
        {"data-js": claim_views([placed])["data-js"]},
        StorageClasses(),
        terminal_state="",
        pods_in_use=None,
        blocked=None,
    )
    made = {j.name: store.mounted(j, js) for j in construct.desired_jobs(js)}
    for name, obj in made.items():
        template = obj["spec"]["template"]
        assert template["metadata"]["labels"][SINGLE_NODE_LABEL] == "data-js", name
        affinity = template["spec"]["affinity"]
        [term] = affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        # Every pod of the replicated jobs that share the claim (init and workers run at once).
        assert term["labelSelector"]["matchExpressions"][0]["values"] == ["init", "workers"]
        assert term["topologyKey"] == TOGETHER["topologyKey"]
        [preferred] = affinity["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        assert preferred["preference"]["matchExpressions"][0]["values"] == ["node-2"]
        assert {"name": "data", "persistentVolumeClaim": {"claimName": "data-js"}} in template[
            "spec"
        ]["volumes"]


def test_jobs_that_share_nothing_are_mounted_as_before() -> None:
    js = make([policy("data", modes=["ReadWriteMany"])], rjobs=[user("a"), user("b")])
    store = volumes.storage(
        volumes.model(js), {}, StorageClasses(), terminal_state="", pods_in_use=None, blocked=None
    )
    for job in construct.desired_jobs(js):
        template = store.mounted(job, js)["spec"]["template"]
        assert SINGLE_NODE_LABEL not in (template.get("metadata") or {}).get("labels", {})
        assert "affinity" not in template["spec"]


# ----------------------------------------------------------------------------- pinning


def cluster(attach: bool | None, mode: str = "auto") -> StorageClasses:
    """A cluster whose default class "fast" is provisioned by a CSI driver with this
    ``attachRequired`` (None: no CSIDriver object), under ``--colocate-claims`` ``mode``."""
    fast = {
        "metadata": {
            "name": "fast",
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": "csi.example",
    }
    drivers = (
        []
        if attach is None
        else [{"metadata": {"name": "csi.example"}, "spec": {"attachRequired": attach}}]
    )
    return StorageClasses.of([fast], drivers, mode)  # fmt: skip


FAST = "class fast (the default), provisioner csi.example"
ATTACHES = f"{FAST}: CSIDriver csi.example has attachRequired: true"
ATTACHES_NOTHING = (
    f"{FAST}: CSIDriver csi.example has attachRequired: false, its volumes are never attached"
)
OFF_TAIL = f'. {COLOCATE_ANNOTATION}: "false" on the JobSet turns it off'
KEPT = (
    "the pods that share ReadWriteOnce claims are kept on one node (a required pod affinity of "
    "the Jobs this controller creates): claim data-js: "
)
NOT_KEPT = "the pods that share ReadWriteOnce claims are not kept on one node, as "


@pytest.mark.parametrize(
    ("annotation", "mode", "attach", "pinned", "reason", "message"),
    [
        pytest.param(None, "auto", True, True, "Colocated", KEPT + ATTACHES + OFF_TAIL,
                     id="auto-storage-attaches-kept-together"),
        pytest.param(None, "auto", False, False, "AttachNotRequired",
                     NOT_KEPT + "their storage attaches nothing (several nodes mount its "
                     "volumes): claim data-js: " + ATTACHES_NOTHING,
                     id="auto-storage-attaches-nothing-runs-across-nodes"),
        pytest.param(None, "auto", None, True, "Colocated",
                     KEPT + f"{FAST}: no CSIDriver csi.example, so its volumes are taken to "
                     "attach, as Kubernetes does (annotate the class "
                     f'{COLOCATE_ANNOTATION}: "false" if several nodes can mount its volumes)'
                     + OFF_TAIL, id="auto-no-csidriver-assumed-and-said"),
        pytest.param(None, "never", True, False, "ColocationOff",
                     NOT_KEPT + "the controller's --colocate-claims is never: claim data-js: "
                     + ATTACHES, id="never-not-kept-even-where-it-attaches"),
        pytest.param(None, "always", False, True, "Colocated",
                     KEPT + "the controller's --colocate-claims is always" + OFF_TAIL,
                     id="always-kept-even-where-nothing-attaches"),
        pytest.param("true", "never", False, True, "Colocated",
                     KEPT + f'the JobSet\'s annotation {COLOCATE_ANNOTATION} is "true"',
                     id="annotation-true-overrides-the-controller"),
        pytest.param("false", "always", True, False, "ColocationOff",
                     NOT_KEPT + f'the JobSet\'s annotation {COLOCATE_ANNOTATION} is "false": '
                     "claim data-js: " + ATTACHES, id="annotation-false-overrides-the-controller"),
        pytest.param("off", "auto", False, False, "AttachNotRequired",
                     NOT_KEPT + "their storage attaches nothing (several nodes mount its "
                     "volumes): claim data-js: " + ATTACHES_NOTHING
                     + f' (annotation {COLOCATE_ANNOTATION}: "off" is not "true" or "false", so '
                     "the controller's --colocate-claims=auto decides)",
                     id="annotation-unread-the-controller-decides-and-says-so"),
    ],
)  # fmt: skip
def test_pinning_follows_the_annotation_then_the_controller_then_the_storage(
    annotation: str | None, mode: str, attach: bool | None, pinned: bool, reason: str, message: str
) -> None:
    notes = {} if annotation is None else {COLOCATE_ANNOTATION: annotation}
    js = make([policy("data")], rjobs=[user("a"), user("b")], annotations=notes)
    store = volumes.storage(
        volumes.model(js), {}, cluster(attach, mode), terminal_state="", pods_in_use=None,
        blocked=None,
    )  # fmt: skip
    for job in construct.desired_jobs(js):
        template = store.mounted(job, js)["spec"]["template"]
        labels = (template.get("metadata") or {}).get("labels", {})
        assert (SINGLE_NODE_LABEL in labels) == pinned
        assert ("affinity" in template["spec"]) == pinned
    report = store.report([])
    assert report is not None and report.colocation is not None
    said = report.colocation
    assert (said.status, said.reason, said.event_type) == ("False", reason, None)
    assert said.message == message


def test_conflicts_of_a_group_not_kept_together_are_dropped_but_read_write_once_pod_stays() -> None:
    """Exclusive placement cannot share a node, but pods on storage that attaches nothing need
    not: no risk. A ReadWriteOncePod claim is the scheduler's to enforce, whatever attaches."""
    js = make(
        [policy("data"), policy("solo", modes=["ReadWriteOncePod"])],
        rjobs=[
            user("a", exclusive=True, mounts=("data", "solo")),
            user("b", mounts=("data", "solo")),
        ],
    )
    attaching = singlenode.pinning(found(js), cluster(True))
    assert [reason for _, reason, _ in attaching.conflicts] == [
        "ExclusivePlacement",
        "ReadWriteOncePodShared",
    ]
    apart = singlenode.pinning(found(js), cluster(False))
    assert apart.groups == () and [g.key for g in apart.loose] == ["data-js"]
    assert [reason for _, reason, _ in apart.conflicts] == ["ReadWriteOncePodShared"]
    said = singlenode.condition(apart, js, [])
    assert said is not None and (said.status, said.reason) == ("True", "ReadWriteOncePodShared")


def test_a_group_is_kept_together_when_any_of_its_claims_attaches() -> None:
    """Two claims mounted together, one on attaching storage, one on NFS: one node for both,
    and the message names the one that needs it."""
    classes = StorageClasses.of(
        [{"metadata": {"name": "block"}, "provisioner": "blk.csi"},
         {"metadata": {"name": "nfs"}, "provisioner": "nfs.csi"}],
        [{"metadata": {"name": "blk.csi"}, "spec": {"attachRequired": True}},
         {"metadata": {"name": "nfs.csi"}, "spec": {"attachRequired": False}}],
    )  # fmt: skip
    templates = [tpl("data", storageClassName="nfs"), tpl("model", storageClassName="block")]
    entry: Obj = {"templates": templates}
    js = make([entry], rjobs=[user("a", mounts=("data", "model")), user("b", mounts=("data",))])
    kept = singlenode.pinning(found(js), classes)
    assert [(g.claims, g.classes) for g in kept.groups] == [
        (("data-js", "model-js"), ("nfs", "block"))
    ]
    assert kept.why[kept.groups[0].key] == (
        "class block, provisioner blk.csi: CSIDriver blk.csi has attachRequired: true"
    )
    said = singlenode.condition(kept, js, [])
    assert said is not None and "claims data-js, model-js: class block" in said.message


def test_jobs_made_while_not_needed_are_named_once_it_is() -> None:
    """Jobs made while the storage attached nothing carry no affinity; once it attaches (a
    CSIDriver changed, or the switch), the running Jobs are named, not rewritten: the Jobs made
    from then on are kept together."""
    js = shared()
    jobs = jobs_of(js, set())
    loose = singlenode.pinning(found(js), cluster(False))
    quiet = singlenode.condition(loose, js, jobs)
    assert quiet is not None and (quiet.status, quiet.reason) == ("False", "AttachNotRequired")
    kept = singlenode.pinning(found(js), cluster(True))
    named = singlenode.condition(kept, js, jobs)
    assert named is not None and (named.status, named.reason) == ("True", "JobsNotColocated")
    assert "or while it was not needed" in named.message


def test_a_job_scope_group_per_job_is_judged_once_per_class() -> None:
    """Job-scope claims of many Jobs: a group each, all of one class, each with its why."""
    js = make([policy("ckpt", scope="Job")], rjobs=[user("w", 3, pods=2, mounts=("ckpt",))])
    kept = singlenode.pinning(found(js), cluster(False))
    assert kept.groups == () and len(kept.loose) == 3
    said = singlenode.condition(kept, js, [])
    assert said is not None and said.message.endswith(
        "claims ckpt-js-w-0, ckpt-js-w-1, ckpt-js-w-2: " + ATTACHES_NOTHING
    )


@pytest.mark.parametrize("size", ["two", [2], True, 2.5])
def test_sizes_that_are_not_integers_are_refused_in_the_api_servers_words(size: object) -> None:
    """A JobSet stored under an older schema with sizes that are not integers: the parser runs
    the Job template's schema, as the API server does, and refuses it (never a crash)."""
    workers = user("workers", 2)
    workers["template"]["spec"]["parallelism"] = size
    workers["template"]["spec"]["completions"] = size
    with pytest.raises(InvalidJobSet) as refused:
        make([policy("data")], rjobs=[workers])
    assert str(refused.value).startswith(
        "spec.replicatedJobs[0].template.spec.completions: Invalid value: "
    )
    assert "in body must be of type integer" in str(refused.value)


def test_sizes_left_null_count_as_the_defaults() -> None:
    """``parallelism:`` and ``completions:`` left empty (null): the API server drops them, and
    the colocation reads the defaults."""
    workers = user("workers", 2)
    workers["template"]["spec"]["parallelism"] = None
    workers["template"]["spec"]["completions"] = None
    assert summary(found(make([policy("data")], rjobs=[workers]))) == {
        "groups": [("data-js", ("data-js",), ["workers"])],
        "conflicts": [],
    }


def test_a_claim_that_exists_is_judged_by_the_class_it_was_made_with() -> None:
    """A template without a class got the default class of its day: once the default moves to
    storage that attaches nothing, the claim still attaches (its class is its own), so the new
    Jobs still keep its pods together."""
    classes = StorageClasses.of(
        [{"metadata": {"name": "block"}, "provisioner": "blk.csi"},
         {"metadata": {"name": "nfs", "annotations": {
             "storageclass.kubernetes.io/is-default-class": "true"}}, "provisioner": "nfs.csi"}],
        [{"metadata": {"name": "blk.csi"}, "spec": {"attachRequired": True}},
         {"metadata": {"name": "nfs.csi"}, "spec": {"attachRequired": False}}],
    )  # fmt: skip
    js = shared()
    assert singlenode.pinning(found(js), classes).groups == ()  # the default now: nfs
    made = claim("data-js", spec={"storageClassName": "block", "accessModes": RWO})
    store = volumes.storage(
        volumes.model(js), claim_views([made]), classes, terminal_state="", pods_in_use=None,
        blocked=None,
    )  # fmt: skip
    assert [g.classes for g in store.colocation.groups] == [("block",)]
    for job in construct.desired_jobs(js):
        labels = store.mounted(job, js)["spec"]["template"]["metadata"]["labels"]
        assert labels[SINGLE_NODE_LABEL] == "data-js"
