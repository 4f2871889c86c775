"""podscope: the Pod-scope placeholder claim name, its resolution, and the shipped policy's file.

What the API server does with the policy is tested in tests/integration/test_pod_scope_policy.py;
here the pure functions, and that the policy file selects what the module's constants say.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.jobset.volumes import podscope
from controller.jobset.volumes.model import POD_SCOPE_LABEL

POLICY_DIR = Path(__file__).resolve().parents[3] / "manifests" / "pod-scope"
# A PersistentVolumeClaim's name: a lowercase DNS-1123 subdomain (the API server's own regex).
_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
CLAIM_NAME = re.compile(rf"{_LABEL}(\.{_LABEL})*")

# (template, jobset, replicated job, job index, placeholder, pod index, resolved)
TABLE = [
    ("ckpt", "train", "workers", 0, "ckpt-train-workers-0-POD-INDEX", 0, "ckpt-train-workers-0-0"),
    ("ckpt", "train", "workers", 1, "ckpt-train-workers-1-POD-INDEX", 2, "ckpt-train-workers-1-2"),
    ("ckpt", "train", "Workers", 3, "ckpt-train-workers-3-POD-INDEX", 17,
     "ckpt-train-workers-3-17"),
    ("a.b", "js", "r", 10, "a.b-js-r-10-POD-INDEX", 100000, "a.b-js-r-10-100000"),
    # A lowercase "pod-index" is part of a name, not the placeholder's suffix.
    ("pod-index", "js", "pod-index", 0, "pod-index-js-pod-index-0-POD-INDEX", 5,
     "pod-index-js-pod-index-0-5"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("template", "jobset", "rjob", "job", "placeholder", "pod", "resolved"), TABLE
)
def test_placeholder_and_resolution(
    template: str, jobset: str, rjob: str, job: int, placeholder: str, pod: int, resolved: str
) -> None:
    assert podscope.placeholder_claim_name(template, jobset, rjob, job) == placeholder
    assert podscope.is_placeholder(placeholder)
    assert podscope.resolved_claim_name(placeholder, pod) == resolved
    assert podscope.pod_claim_name(template, jobset, rjob, job, pod) == resolved
    # Fail closed: the placeholder can never be a claim's name; what it resolves to always is.
    assert not CLAIM_NAME.fullmatch(placeholder)
    assert CLAIM_NAME.fullmatch(resolved)


def test_distinct_indexes_give_distinct_claims() -> None:
    placeholder = podscope.placeholder_claim_name("ckpt", "train", "workers", 1)
    names = {podscope.resolved_claim_name(placeholder, i) for i in range(1000)}
    assert len(names) == 1000
    # ... and never the claim of another Job's pod: "-1-" + "10" is not "-11-" + "0".
    other = podscope.placeholder_claim_name("ckpt", "train", "workers", 11)
    assert not names & {podscope.resolved_claim_name(other, i) for i in range(1000)}


@pytest.mark.parametrize(
    "name", ["ckpt-train-workers-0", "ckpt-train-workers-0-pod-index", "POD-INDEX", ""]
)
def test_not_a_placeholder_is_refused(name: str) -> None:
    assert not podscope.is_placeholder(name)
    with pytest.raises(ValueError, match="not a Pod-scope placeholder"):
        podscope.resolved_claim_name(name, 0)


@pytest.mark.parametrize("index", [-1, True])
def test_a_bad_index_is_refused(index: int) -> None:
    with pytest.raises(ValueError, match="not a non-negative integer"):
        podscope.resolved_claim_name("x-POD-INDEX", index)
    with pytest.raises(ValueError, match="negative"):
        podscope.placeholder_claim_name("x", "js", "r", -1)


def _policy_objects() -> dict[str, dict[str, Any]]:
    kust = yaml.safe_load((POLICY_DIR / "kustomization.yaml").read_text())
    objects = [yaml.safe_load((POLICY_DIR / f).read_text()) for f in kust["resources"]]
    return {o["kind"]: o for o in objects}


def test_the_policy_file_selects_what_the_module_says() -> None:
    objects = _policy_objects()
    policy = objects["MutatingAdmissionPolicy"]
    binding = objects["MutatingAdmissionPolicyBinding"]
    assert set(objects) == {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}
    assert policy["apiVersion"] == binding["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert policy["metadata"]["name"] == binding["metadata"]["name"] == podscope.POLICY_NAME
    assert binding["spec"]["policyName"] == podscope.POLICY_NAME
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    ]
    assert spec["matchConstraints"]["objectSelector"] == {"matchLabels": {POD_SCOPE_LABEL: "true"}}
    cel = yaml.safe_dump(spec)
    assert podscope.COMPLETION_INDEX_ANNOTATION in cel
    assert f"'-{podscope.PLACEHOLDER_SUFFIX}'" in cel


def _pod(*claims: str, **meta: object) -> dict[str, object]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "5", **meta},
        "spec": {
            "containers": [{"name": "c", "env": [{"name": "TOKEN", "value": "secret"}]}],
            "volumes": [
                {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
                for i, c in enumerate(claims)
            ]
            + [{"name": "scratch", "emptyDir": {}}],
        },
        "status": {"phase": "Pending"},
    }


def test_admitted_pod_mounts_its_completion_indexs_claims() -> None:
    """A pod of a Pod-scope Job as the policy admits it: every placeholder resolved to the claim
    of its completion index, other volumes as they were, the index as label and annotation; a
    Job whose template lacks the label of Pod scope has none."""
    placeholder = podscope.placeholder_claim_name("ckpt", "train", "workers", 1)
    volumes: list[dict[str, Any]] = [
        {"name": "ckpt", "persistentVolumeClaim": {"claimName": placeholder}},
        {"name": "shared", "persistentVolumeClaim": {"claimName": "shared-train"}},
        {"name": "tmp", "emptyDir": {}},
    ]
    template: dict[str, Any] = {"metadata": {"labels": {POD_SCOPE_LABEL: "true", "team": "a"}},
                "spec": {"volumes": volumes}}  # fmt: skip
    job = {"metadata": {"name": "train-workers-1", "namespace": "ns"},
           "spec": {"template": template}}  # fmt: skip
    pod = podscope.admitted_pod(job, 2, "train-workers-1-2-x")
    assert pod is not None
    index = {podscope.COMPLETION_INDEX_ANNOTATION: "2"}
    assert pod["metadata"] == {
        "name": "train-workers-1-2-x",
        "namespace": "ns",
        "labels": {POD_SCOPE_LABEL: "true", "team": "a", **index},
        "annotations": index,
    }
    assert [
        v.get("persistentVolumeClaim", {}).get("claimName") for v in pod["spec"]["volumes"]
    ] == [
        "ckpt-train-workers-1-2",
        "shared-train",
        None,
    ]
    assert volumes[0]["persistentVolumeClaim"]["claimName"] == placeholder  # the Job is unchanged
    template["metadata"]["labels"] = {"team": "a"}
    assert podscope.admitted_pod(job, 2, "train-workers-1-2-x") is None


def test_placeholders_are_the_claims_the_policy_left_unresolved() -> None:
    pod = _pod("ckpt-js-w-0-POD-INDEX", "ckpt-js-w-0-1", "shared-js")
    assert podscope.placeholders(pod) == ["ckpt-js-w-0-POD-INDEX"]
    assert podscope.placeholders(_pod("ckpt-js-w-0-1")) == []
    for junk in ({}, {"spec": None}, {"spec": {"volumes": 3}}, {"spec": {"volumes": [1, None]}}):
        assert podscope.placeholders(junk) == []


def test_pod_view_keeps_only_identity_labels_and_placeholders() -> None:
    """What the informer caches of a pod: nothing of its containers (env may hold secrets)."""
    pod = _pod(
        "ckpt-js-w-0-POD-INDEX", "shared-js", labels={"jobset.sigs.k8s.io/jobset-name": "js"}
    )
    view = podscope.pod_view(pod)
    assert view == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "resourceVersion": "5",
            "labels": {"jobset.sigs.k8s.io/jobset-name": "js"},
        },
        "spec": {"volumes": [{"persistentVolumeClaim": {"claimName": "ckpt-js-w-0-POD-INDEX"}}]},
    }
    assert podscope.placeholders(view) == ["ckpt-js-w-0-POD-INDEX"]


JOB_REF = {"apiVersion": "batch/v1", "kind": "Job", "name": "js-w-0", "uid": "job-1",
           "controller": True, "blockOwnerDeletion": True}  # fmt: skip


def test_pod_view_keeps_the_controller_reference() -> None:
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "c", "uid": "c-1"}
    view = podscope.pod_view(_pod("ckpt-js-w-0-POD-INDEX", ownerReferences=[other, JOB_REF]))
    assert view["metadata"]["ownerReferences"] == [
        {"kind": "Job", "name": "js-w-0", "uid": "job-1", "controller": True}
    ]


@pytest.mark.parametrize(
    ("refs", "counted"),
    [
        pytest.param([JOB_REF], True, id="the-jobsets-job"),
        # Only the JobSet's labels (made by hand, another controller's): not the JobSet's pod, and
        # suspending and resuming the JobSet would never clear it.
        pytest.param(None, False, id="no-owner"),
        pytest.param([{**JOB_REF, "uid": "job-of-someone-else"}], False, id="another-job"),
        pytest.param([{**JOB_REF, "controller": False}], False, id="not-the-controller"),
        pytest.param([{**JOB_REF, "kind": "ReplicaSet"}], False, id="not-a-job"),
    ],
)
def test_unresolved_pods_are_only_those_of_the_jobsets_jobs(
    refs: list[dict[str, object]] | None, counted: bool
) -> None:
    meta = {} if refs is None else {"ownerReferences": refs}
    stuck = podscope.pod_view(_pod("ckpt-js-w-0-POD-INDEX", **meta))
    resolved = podscope.pod_view(_pod("ckpt-js-w-0-1", ownerReferences=[JOB_REF]))
    found = podscope.unresolved_pods([podscope.pod(stuck), podscope.pod(resolved)], {"job-1"})
    assert found == ({"p": ["ckpt-js-w-0-POD-INDEX"]} if counted else {})
    whole = _pod("ckpt-js-w-0-POD-INDEX", **meta)  # the view reads a whole pod the same way
    assert podscope.pod(whole) == podscope.pod(stuck)
