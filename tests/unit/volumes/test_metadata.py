"""Volume policy fields declared in metadata: how the keys complete a policy (table tests).

The keys' values against the rule (the API server's CEL and the controller's words) are
tests/integration/test_volume_annotations.py's, on the real API server.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.api import fields, volumekeys
from controller.jobset.model import InvalidJobSet
from controller.jobset.volumes import model
from controller.jobset.volumes.spec import has_pod_scope, readable_policies
from tests.unit.volumes.factories import make, make_obj, mounting, tpl

Obj = dict[str, Any]
CKPT = f"ckpt{volumekeys.MARK}"
DATA = f"data{volumekeys.MARK}"
RJOBS = [mounting("workers", 2, ("ckpt", "data"))]


def policies(
    annotations: dict[str, str], vcp: list[Obj] | None = None, vp: Obj | None = None
) -> Any:
    js = make(
        vcp if vcp is not None else [{"templates": [tpl("ckpt")]}],
        vp,
        RJOBS,
        annotations=annotations,
    )
    return model(js).policies


@pytest.mark.parametrize(
    ("annotations", "spec", "read", "overrides"),
    [
        pytest.param({f"{CKPT}scope": "Job"}, {}, ("scope", "Job"), [], id="completes"),
        pytest.param({f"{CKPT}scope": "Job"}, {"scope": "JobSet"}, ("scope", "Job"), [],
                     id="the-spec-default-is-no-override"),
        pytest.param({f"{CKPT}scope": "Job"}, {"scope": "Pod"}, ("scope", "Job"),
                     [f"{CKPT}scope: Job overrides spec.volumeClaimPolicies[0].scope: Pod"],
                     id="override"),
        pytest.param({f"{CKPT}scope": "Job"}, {"scope": "Job"}, ("scope", "Job"), [],
                     id="the-same-value-is-no-override"),
        pytest.param({f"{CKPT}scope": ""}, {"scope": "Job"}, ("scope", "Job"), [],
                     id="empty-is-left-out"),
        pytest.param({f"{CKPT}targetReplicatedJobs": " workers "}, {}, ("targets", ("workers",)),
                     [], id="targets"),
        pytest.param({f"{CKPT}snapshotPolicy.historyLimit": "7"},
                     {"snapshotPolicy": {"historyLimit": 2}}, ("history", 7),
                     [f"{CKPT}snapshotPolicy.historyLimit: 7 overrides "
                      "spec.volumeClaimPolicies[0].snapshotPolicy.historyLimit: 2"],
                     id="int-override"),
        pytest.param({f"{CKPT}retentionPolicy.whenDeleted": "Snapshot"},
                     {"retentionPolicy": {"whenDeleted": "Retain"}}, ("deleted", "Snapshot"),
                     [f"{CKPT}retentionPolicy.whenDeleted: Snapshot overrides "
                      "spec.volumeClaimPolicies[0].retentionPolicy.whenDeleted: Retain"],
                     id="a-value-upstream-refuses"),
    ],
)  # fmt: skip
def test_keys_complete_the_policy_of_their_template(
    annotations: dict[str, str], spec: Obj, read: tuple[str, Any], overrides: list[str]
) -> None:
    (policy,) = policies(annotations, [{"templates": [tpl("ckpt")], **spec}])
    found = {
        "scope": policy.scope,
        "targets": policy.targets,
        "history": policy.snapshots.history_limit,
        "deleted": policy.retention.when_deleted,
    }
    assert found[read[0]] == read[1]
    assert list(policy.overrides) == overrides


def test_a_key_sets_its_templates_whole_policy_and_two_templates_must_agree() -> None:
    two = [{"templates": [tpl("ckpt"), tpl("data")]}]
    (policy,) = policies({f"{DATA}scope": "Job"}, two)
    assert policy.scope == "Job"
    assert len(policies({f"{DATA}scope": "Job", f"{CKPT}scope": "Job"}, two)) == 1
    with pytest.raises(InvalidJobSet) as refused:
        policies({f"{DATA}scope": "Job", f"{CKPT}scope": "Pod"}, two)
    assert str(refused.value) == (
        f"metadata.annotations[{CKPT}scope] and metadata.annotations[{DATA}scope] set scope of "
        "one volume claim policy (spec.volumeClaimPolicies[0]) to different values: set it on "
        "one template of the policy, or to the same value"
    )


def test_the_original_requests_spelling_is_always_jobset_scope() -> None:
    vp = {"volumeClaimTemplates": [tpl("ckpt")]}
    (policy,) = policies({f"{CKPT}targetReplicatedJobs": "workers"}, [], vp)
    assert policy.targets == ("workers",)
    assert len(policies({f"{CKPT}scope": "JobSet"}, [], vp)) == 1
    with pytest.raises(InvalidJobSet, match=r"spec\.volumePolicy is always JobSet scope"):
        policies({f"{CKPT}scope": "Job"}, [], vp)


def test_rules_across_fields_name_the_keys_that_completed_the_policy() -> None:
    with pytest.raises(InvalidJobSet) as refused:
        policies({f"{CKPT}retentionPolicy.whenSuspended": "Snapshot"})
    assert str(refused.value) == (
        f"spec: {fields.SUSPEND_SNAPSHOT_RESTORE_RULE} (as completed by the annotations {CKPT}*)"
    )
    # Completed by both: the rule holds.
    (policy,) = policies(
        {
            f"{CKPT}retentionPolicy.whenSuspended": "Snapshot",
            f"{CKPT}restorePolicy.source": "NewestSnapshot",
        }
    )
    assert policy.retention.when_suspended == "Snapshot"


def test_the_controllers_own_checks_name_the_keys_that_completed_the_policy() -> None:
    """Pod scope set by a key on a policy without targetReplicatedJobs: what admission cannot
    check (which replicated jobs mount the template) is refused naming the key, as the rules'
    refusals are; the spec alone says neither the scope nor the targets."""
    workers = mounting("workers", 2, ("ckpt",))
    workers["template"]["spec"]["completionMode"] = "NonIndexed"
    js = make([{"templates": [tpl("ckpt")]}], rjobs=[workers], annotations={f"{CKPT}scope": "Pod"})
    with pytest.raises(InvalidJobSet) as refused:
        model(js)
    assert str(refused.value) == (
        "spec.volumeClaimPolicies[0].scope: Pod scope needs completionMode Indexed (each pod "
        "finds its claim by its completion index), but spec.replicatedJobs[0].template.spec."
        f"completionMode of replicated job 'workers' is 'NonIndexed' (as completed by the "
        f"annotations {CKPT}*)"
    )
    # The same policy in the spec: the same words, without the keys.
    spec_only = make([{"templates": [tpl("ckpt")], "scope": "Pod"}], rjobs=[workers])
    with pytest.raises(InvalidJobSet) as refused:
        model(spec_only)
    assert str(refused.value).endswith("is 'NonIndexed'")
    (policy,) = policies({f"{CKPT}scope": "Job"})
    assert policy.declared_by == (f"{CKPT}scope",)


def test_a_refused_key_is_the_rules_message_and_spoils_only_its_policy_for_deletion() -> None:
    annotations = {
        f"{CKPT}retentionPolicy.whenDeleted": "Keep",
        f"{DATA}retentionPolicy.whenDeleted": "Retain",
    }
    vcp = [{"templates": [tpl("ckpt")]}, {"templates": [tpl("data")]}]
    with pytest.raises(InvalidJobSet) as refused:
        policies(annotations, vcp)
    assert str(refused.value) == (
        "metadata.annotations: invalid volume policy annotation: "
        f"{CKPT}retentionPolicy.whenDeleted: must be Retain, Delete or Snapshot, got 'Keep'"
    )
    # Deletion reads what it can: the data policy with its key; ckpt's is unreadable (its
    # claims are kept: nothing says Delete).
    obj = make_obj(vcp, None, RJOBS, annotations=annotations)
    found, problems = readable_policies(obj["spec"], obj["metadata"]["annotations"])
    assert [(p.templates[0].name, p.retention.when_deleted) for p in found] == [("data", "Retain")]
    assert problems == [
        f"spec.volumeClaimPolicies[0]: {CKPT}retentionPolicy.whenDeleted: must be Retain, "
        "Delete or Snapshot, got 'Keep'"
    ]


def test_pod_scope_from_a_key_is_pod_scope_for_the_admission_policy_watch() -> None:
    obj = make_obj([{"templates": [tpl("ckpt")]}], None, RJOBS)
    assert not has_pod_scope(obj)
    obj["metadata"]["annotations"] = {f"{CKPT}scope": "Pod"}
    assert has_pod_scope(obj)


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("ckpt.volumes.jobset.sigs.k8s.io/scope", "Job", ""),
        ("ckpt.volumes.jobset.sigs.k8s.io/scope", "", ""),
        ("ckpt.volumes.jobset.sigs.k8s.io/scope", "job", "must be JobSet, Job or Pod, got 'job'"),
        ("other.volumes.jobset.sigs.k8s.io/scope", "Job", "names no volume claim template"),
        ("ckpt.volumes.jobset.sigs.k8s.io/Scope", "Job", "is not a volume policy field"),
        ("ckpt.volumes.jobset.sigs.k8s.io/snapshotPolicy.historyLimit", "0", "from 1 to 100"),
        ("ckpt.volumes.jobset.sigs.k8s.io/snapshotPolicy.historyLimit", "100", ""),
        ("ckpt.volumes.jobset.sigs.k8s.io/snapshotPolicy.historyLimit", "+5", "from 1 to 100"),
        ("ckpt.volumes.jobset.sigs.k8s.io/snapshotPolicy.historyLimit", "٣", "from 1 to 100"),
        ("ckpt.volumes.jobset.sigs.k8s.io/targetReplicatedJobs", "a,b", ""),
        ("ckpt.volumes.jobset.sigs.k8s.io/targetReplicatedJobs", "a,", "comma-separated"),
        ("ckpt.volumes.jobset.sigs.k8s.io/restorePolicy.fromJobSet", "x" * 63, ""),
        ("ckpt.volumes.jobset.sigs.k8s.io/restorePolicy.fromJobSet", "x" * 64, "at most 63"),
    ],
)
def test_why_a_key_is_refused(key: str, value: str, why: str) -> None:
    found = volumekeys.why(key, value, {"ckpt"})
    assert (why in found) if why else found == ""


def test_every_policy_field_has_a_key_named_by_its_path() -> None:
    names = {k.name for k in volumekeys.KEYS}
    assert "scope" in names and "targetReplicatedJobs" in names
    policy_fields = {
        f.path for f in fields.ALL if f.path.split(".")[0] in (
            "retentionPolicy", "creationPolicy", "snapshotPolicy", "restorePolicy"
        )
    }  # fmt: skip
    assert policy_fields <= names
    assert set(volumekeys.IMMUTABLE) == {"scope", "targetReplicatedJobs"} | {
        n for n in names if n.startswith("retentionPolicy.")
    }
