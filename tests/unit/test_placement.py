"""Exclusive placement: which annotations apply where, and the constraints each Job's pods get."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from controller.jobset import api, construct, placement
from controller.jobset.model import InvalidJobSet, parse
from controller.jobset.placement import EXCLUSIVE_TOPOLOGY as EXCL
from controller.jobset.placement import NAMESPACED_JOB, NO_SCHEDULE_TAINT, Placement
from controller.jobset.placement import NODE_SELECTOR_STRATEGY as NS


def job_objects(js: Any) -> list[dict[str, Any]]:
    """The objects of the JobSet's desired Jobs (``construct.desired_jobs``)."""
    return [job.object for job in construct.desired_jobs(js)]


RACK = "example.com/rack"
BAD_CHARACTER = "the name part has a character other than letters, digits, '-', '_', '.'"
POOL = "cloud.google.com/gke-nodepool"


@pytest.mark.parametrize(
    ("jobset_level", "template_level", "expected"),
    [
        ({}, {}, None),
        ({NS: "true"}, {}, None),  # the flag alone does nothing
        ({}, {NS: "true"}, None),
        ({EXCL: RACK}, {}, Placement(RACK, node_selector=False)),
        ({}, {EXCL: RACK}, Placement(RACK, node_selector=False)),
        # The replicated job's key wins over the JobSet's.
        ({EXCL: RACK}, {EXCL: POOL}, Placement(POOL, node_selector=False)),
        ({EXCL: RACK, NS: "true"}, {}, Placement(RACK, node_selector=True)),
        ({}, {EXCL: POOL, NS: ""}, Placement(POOL, node_selector=True)),
        # The JobSet's flag is read with the JobSet's key, the template's whenever present.
        ({NS: "true"}, {EXCL: POOL}, Placement(POOL, node_selector=False)),
        ({EXCL: RACK}, {NS: "true"}, Placement(RACK, node_selector=True)),
        ({EXCL: RACK, NS: "true"}, {EXCL: POOL}, Placement(POOL, node_selector=True)),
    ],
)
def test_placement_from_annotations(
    jobset_level: dict[str, str], template_level: dict[str, str], expected: Placement | None
) -> None:
    assert placement.placement(jobset_level, template_level) == expected


@pytest.mark.parametrize(
    ("jobset_level", "template_level", "expected"),
    [
        ({}, {}, {}),
        ({NS: "true"}, {}, {}),
        ({EXCL: RACK}, {}, {EXCL: RACK}),
        ({EXCL: RACK, NS: "true"}, {}, {EXCL: RACK, NS: "true"}),
        ({EXCL: RACK, NS: "true"}, {EXCL: POOL}, {EXCL: POOL, NS: "true"}),
        ({EXCL: RACK}, {EXCL: POOL, NS: "x"}, {EXCL: POOL, NS: "x"}),
    ],
)
def test_child_annotations(
    jobset_level: dict[str, str], template_level: dict[str, str], expected: dict[str, str]
) -> None:
    assert placement.child_annotations(jobset_level, template_level) == expected


@pytest.mark.parametrize(
    ("key", "error"),
    [
        ("rack", None),
        (RACK, None),
        ("topology.kubernetes.io/zone", None),
        ("Rack_1.a", None),
        ("a" * 63, None),
        ("", "'': the name part is empty"),
        ("example.com/", "'example.com/': the name part is empty"),
        ("/rack", "'/rack' has an empty prefix before '/'"),
        ("a/b/c", "'a/b/c' has more than one '/'"),
        ("Example.com/rack", "'Example.com/rack': the prefix must be a lower-case DNS subdomain"),
        ("a" * 64, f"'{'a' * 64}': the name part is longer than 63 characters"),
        ("-rack", f"'-rack': {BAD_CHARACTER}"),
        ("rack rows", f"'rack rows': {BAD_CHARACTER}"),
    ],
)  # fmt: skip
def test_qualified_name_error(key: str, error: str | None) -> None:
    assert placement.qualified_name_error(key) == error


def test_annotation_error_names_the_annotation_and_the_rule() -> None:
    assert placement.annotation_error({}, "metadata.annotations") is None
    assert placement.annotation_error({EXCL: RACK}, "metadata.annotations") is None
    assert placement.annotation_error({EXCL: ""}, "metadata.annotations") == (
        f"metadata.annotations[{EXCL}] must be a node label key (a qualified name: an optional "
        "DNS subdomain prefix and '/', then at most 63 letters, digits, '-', '_' or '.', starting "
        "and ending with a letter or digit): '': the name part is empty"
    )


def test_affinity_terms_pull_own_job_and_push_other_jobs() -> None:
    together, apart = placement.affinity_terms(RACK, "k1")
    own = {"key": api.JOB_KEY, "operator": "In", "values": ["k1"]}
    assert together == {
        "labelSelector": {"matchExpressions": [own]},
        "topologyKey": RACK,
        "namespaceSelector": {},
    }
    assert apart == {
        "labelSelector": {
            "matchExpressions": [
                {"key": api.JOB_KEY, "operator": "Exists"},
                {"key": api.JOB_KEY, "operator": "NotIn", "values": ["k1"]},
            ]
        },
        "topologyKey": RACK,
        "namespaceSelector": {},
    }


USER_AFFINITY = {
    "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []},
    "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": "zone"}]},
}


@pytest.mark.parametrize(
    ("pod_spec", "where", "expected"),
    [
        (
            {"containers": []},
            Placement(RACK, node_selector=False),
            {
                "containers": [],
                "affinity": {
                    "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [0]},
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [1]},
                },
            },
        ),
        (
            {"affinity": USER_AFFINITY},
            Placement(RACK, node_selector=False),
            {
                "affinity": {
                    "nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []},
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {"topologyKey": "zone"},
                            0,
                        ]
                    },
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [1]},
                },
            },
        ),
        (
            {"containers": []},
            Placement(RACK, node_selector=True),
            {
                "containers": [],
                "nodeSelector": {NAMESPACED_JOB: "ml_train-w-0"},
                "tolerations": [
                    {"key": NO_SCHEDULE_TAINT, "operator": "Exists", "effect": "NoSchedule"}
                ],
            },
        ),
        (
            {"nodeSelector": {"gpu": "a100"}, "tolerations": [{"key": "t", "operator": "Exists"}]},
            Placement(RACK, node_selector=True),
            {
                "nodeSelector": {"gpu": "a100", NAMESPACED_JOB: "ml_train-w-0"},
                "tolerations": [
                    {"key": "t", "operator": "Exists"},
                    {"key": NO_SCHEDULE_TAINT, "operator": "Exists", "effect": "NoSchedule"},
                ],
            },
        ),
    ],
)
def test_constrained_pod_spec(pod_spec: dict[str, Any], where: Placement, expected: Any) -> None:
    """Terms appended to the user's; 0 and 1 stand for the affinity and anti-affinity terms."""
    terms = placement.affinity_terms(RACK, "k1")
    before = copy.deepcopy(pod_spec)
    got = placement.constrained(pod_spec, where, "ml", "train-w-0", "k1")
    assert pod_spec == before  # the template shared by every Job is left alone
    want = copy.deepcopy(expected)
    for section in ("podAffinity", "podAntiAffinity"):
        required = want.get("affinity", {}).get(section, {})
        listed = required.get("requiredDuringSchedulingIgnoredDuringExecution", [])
        required["requiredDuringSchedulingIgnoredDuringExecution"] = [
            terms[t] if isinstance(t, int) else t for t in listed
        ]
    assert got == want


def test_node_selector_error_when_label_value_is_too_long() -> None:
    assert placement.node_selector_error("ml", "train-w-0", "spec.replicatedJobs[0]") is None
    long_job = "j" * 61
    assert placement.node_selector_error("ml", long_job, "spec.replicatedJobs[0]") == (
        f"spec.replicatedJobs[0]: the node-selector strategy selects the node label "
        f"{NAMESPACED_JOB}=<namespace>_<job name>, and 'ml_{long_job}' is longer than 63 "
        "characters: shorten the namespace, JobSet or replicated job name"
    )


# ---------------------------------------------------------------- through parse and construct


def _jobset(
    annotations: dict[str, str] | None = None,
    template_annotations: dict[str, dict[str, str]] | None = None,
    namespace: str = "ml",
    replicas: int = 2,
) -> Any:
    rjobs = []
    for name in ("leader", "workers"):
        template: dict[str, Any] = {
            "spec": {
                "completions": 2,
                "parallelism": 2,
                "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
            }
        }
        if template_annotations and name in template_annotations:
            template["metadata"] = {"annotations": template_annotations[name]}
        rjobs.append({"name": name, "replicas": replicas, "template": template})
    return parse(
        {
            "metadata": {
                "name": "train",
                "namespace": namespace,
                "uid": "u",
                "generation": 1,
                "annotations": annotations or {},
            },
            "spec": {"replicatedJobs": rjobs},
        }
    )


def _pod_spec(job: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["template"]["spec"]
    return spec


def test_jobset_level_constrains_every_job_with_its_own_job_key() -> None:
    js = _jobset({EXCL: RACK})
    jobs = job_objects(js)
    assert len(jobs) == 4
    keys = set()
    for job in jobs:
        key = job["metadata"]["labels"][api.JOB_KEY]
        keys.add(key)
        together, apart = placement.affinity_terms(RACK, key)
        affinity = _pod_spec(job)["affinity"]
        assert affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
            together
        ]
        assert affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
            apart
        ]
        assert job["metadata"]["annotations"][EXCL] == RACK
        assert job["spec"]["template"]["metadata"]["annotations"][EXCL] == RACK
        assert job["spec"]["template"]["metadata"]["labels"][api.JOB_KEY] == key
    assert len(keys) == 4


def test_replicated_job_level_applies_to_that_replicated_job_only() -> None:
    js = _jobset(template_annotations={"workers": {EXCL: POOL, NS: "true"}})
    by_name = {j["metadata"]["name"]: j for j in job_objects(js)}
    for name in ("train-leader-0", "train-leader-1"):
        assert "affinity" not in _pod_spec(by_name[name])
        assert "nodeSelector" not in _pod_spec(by_name[name])
        assert EXCL not in by_name[name]["metadata"]["annotations"]
    for index in (0, 1):
        job = by_name[f"train-workers-{index}"]
        assert _pod_spec(job)["nodeSelector"] == {NAMESPACED_JOB: f"ml_train-workers-{index}"}
        assert _pod_spec(job)["tolerations"] == [
            {"key": NO_SCHEDULE_TAINT, "operator": "Exists", "effect": "NoSchedule"}
        ]
        assert "affinity" not in _pod_spec(job)
        assert job["spec"]["template"]["metadata"]["annotations"][NS] == "true"


def test_replicated_job_level_overrides_jobset_level_key() -> None:
    js = _jobset({EXCL: RACK}, template_annotations={"workers": {EXCL: POOL}})
    by_name = {j["metadata"]["name"]: j for j in job_objects(js)}
    leader = _pod_spec(by_name["train-leader-0"])["affinity"]["podAffinity"]
    workers = _pod_spec(by_name["train-workers-0"])["affinity"]["podAffinity"]
    assert leader["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == RACK
    assert workers["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == POOL
    assert by_name["train-workers-0"]["metadata"]["annotations"][EXCL] == POOL


def test_without_annotations_the_pod_spec_is_the_template_s() -> None:
    js = _jobset()
    for job in job_objects(js):
        assert _pod_spec(job) == {
            "containers": [{"name": "c", "image": "i"}],
            "restartPolicy": "OnFailure",
            "subdomain": "train",
        }


@pytest.mark.parametrize(
    ("annotations", "template_annotations", "namespace", "message"),
    [
        (
            {EXCL: ""},
            None,
            "ml",
            f"metadata.annotations[{EXCL}] {placement.TOPOLOGY_KEY_RULE}: '': the name part is "
            "empty",
        ),
        (
            None,
            {"workers": {EXCL: "bad key"}},
            "ml",
            f"spec.replicatedJobs[1].template.metadata.annotations[{EXCL}] "
            f"{placement.TOPOLOGY_KEY_RULE}: 'bad key': the name part has a character other "
            "than letters, digits, '-', '_', '.'",
        ),
        (
            {EXCL: RACK, NS: "true"},
            None,
            "n" * 50,
            f"spec.replicatedJobs[0]: the node-selector strategy selects the node label "
            f"{NAMESPACED_JOB}=<namespace>_<job name>, and '{'n' * 50}_train-leader-1' is longer "
            "than 63 characters: shorten the namespace, JobSet or replicated job name",
        ),
    ],
)
def test_parse_refuses_placement_kubernetes_would_refuse(
    annotations: dict[str, str] | None,
    template_annotations: dict[str, dict[str, str]] | None,
    namespace: str,
    message: str,
) -> None:
    with pytest.raises(InvalidJobSet) as caught:
        _jobset(annotations, template_annotations, namespace)
    assert str(caught.value) == message


def test_long_namespace_is_fine_without_the_node_selector_strategy() -> None:
    js = _jobset({EXCL: RACK}, namespace="n" * 50)
    assert len(job_objects(js)) == 4
