"""spec (and quantity): both spellings of the volume claim policies parsed into one model,
validated with messages naming the field; claim names; the example manifests; property tests over
random valid JobSets (claims, mounts, ownership and the uid record agree)."""

from __future__ import annotations

import copy
import re
from decimal import Decimal
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.api import bounds
from controller.jobset import api, construct, volumes
from controller.jobset.model import InvalidJobSet, parse
from controller.jobset.quantity import parse_quantity
from controller.jobset.volumes import StorageClasses, podscope
from controller.jobset.volumes import desired as volume_desired
from controller.jobset.volumes import lifecycle as volume_lifecycle
from controller.jobset.volumes import spec as volume_spec
from controller.jobset.volumes import status as volume_status
from controller.jobset.volumes.desired import claim_name as volume_claim_name
from controller.jobset.volumes.desired import claims_for_job, pod_indexes, targeted
from controller.jobset.volumes.lifecycle import ClaimState, claims_to_delete, lifecycle
from controller.jobset.volumes.model import (
    CLAIM_SCOPE_LABEL,
    CLAIM_TEMPLATE_LABEL,
    OWNER_UID_ANNOTATION,
    POD_SCOPE_LABEL,
    REPLACE_LOST_ANNOTATION,
    ClaimTemplate,
    RestorePolicy,
    Retention,
    SnapshotPolicy,
)
from controller.jobset.volumes.ownership import classify, compatible, update_patch
from controller.jobset.volumes.record import ClaimRecord, parse_record, uid_prefix
from controller.jobset.volumes.spec import claim_count
from controller.runtime.store import Obj
from tests.support.examples import EXAMPLES
from tests.unit.jobset_factories import make_jobset, make_jobset_obj
from tests.unit.volumes.factories import (
    claim,
    created,
    make,
    mounting,
    only,
    owner,
    tpl,
    uid_of,
    views,
)

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

# ----------------------------------------------------------------------------- the examples


def load(file: str) -> Obj:
    obj: Obj = yaml.safe_load((EXAMPLES / file).read_text())
    obj["metadata"].update(namespace="ml", uid="uid-ex")
    return obj


def request_spelling(obj: Obj) -> Obj:
    """JobSet-scope volumeClaimPolicies rewritten as the original request's volumePolicy."""
    obj = copy.deepcopy(obj)
    spec = obj["spec"]
    policies = spec.pop("volumeClaimPolicies")
    keep = [p for p in policies if p.get("scope", "JobSet") != "JobSet"]
    (shared,) = [p for p in policies if p.get("scope", "JobSet") == "JobSet"]
    request: Obj = {"volumeClaimTemplates": shared["templates"]}
    if "retentionPolicy" in shared:
        request["retentionPolicy"] = shared["retentionPolicy"]
    if "targetReplicatedJobs" in shared:
        request["replicatedJobs"] = [{"name": n} for n in shared["targetReplicatedJobs"]]
    spec["volumePolicy"] = request
    if keep:  # Job scope has no spelling in volumePolicy: both spellings side by side
        spec["volumeClaimPolicies"] = keep
    return obj


def upstream_spelling(obj: Obj) -> Obj:
    obj = copy.deepcopy(obj)
    spec = obj["spec"]
    request = spec.pop("volumePolicy")
    policy: Obj = {"templates": request["volumeClaimTemplates"]}
    if "replicatedJobs" in request:
        policy["targetReplicatedJobs"] = [r["name"] for r in request["replicatedJobs"]]
    if "retentionPolicy" in request:
        policy["retentionPolicy"] = request["retentionPolicy"]
    spec["volumeClaimPolicies"] = [policy]
    return obj


EXPECTED = {
    "01-seed-volume-policy.yaml": (
        {"pretrained-model-volume-sample"},
        {"A": {"pretrained-model"}, "B": {"pretrained-model"}, "workers": set()},
    ),
    "02-upstream-shared-initializer.yaml": (
        {"initializer-trainjob-shared"},
        {"model-initializer": {"initializer"}, "node": {"initializer"}},
    ),
    "03-per-job-checkpoints-retained.yaml": (
        {"ckpt-resumable-workers-0", "ckpt-resumable-workers-1", "dataset-resumable"},
        {"workers": {"ckpt", "dataset"}},
    ),
}


def both_spellings(file: str) -> list[Obj]:
    original = load(file)
    if "volumePolicy" in original["spec"]:
        return [original, upstream_spelling(original)]
    return [original, request_spelling(original)]


@pytest.mark.parametrize("spelling", [0, 1], ids=["as-written", "other-spelling"])
@pytest.mark.parametrize("file", sorted(EXPECTED))
def test_examples_give_the_expected_claims_and_mounts(file: str, spelling: int) -> None:
    js = parse(both_spellings(file)[spelling])
    model = volumes.model(js)
    claims, mounts = EXPECTED[file]
    assert {c.name for c in model.desired} == claims
    assert len(model.desired) == len(claims)
    for r in js.replicated_jobs:
        for index in range(r.replicas):
            job = volume_desired.mount(
                construct.desired_job(js, r, index), js, model.policies, r.name, index
            )
            pod_volumes = job["spec"]["template"]["spec"].get("volumes", [])
            assert {v["name"] for v in pod_volumes} == mounts[r.name]
            for v in pod_volumes:
                assert v["persistentVolumeClaim"]["claimName"] in claims


def test_example_01_claim_object() -> None:
    js = parse(load("01-seed-volume-policy.yaml"))
    desired = only(js)
    assert desired.object == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "pretrained-model-volume-sample",
            "namespace": "ml",
            "labels": {
                api.JOBSET_NAME: "volume-sample",
                CLAIM_TEMPLATE_LABEL: "pretrained-model",
                CLAIM_SCOPE_LABEL: "JobSet",
            },
            "annotations": {OWNER_UID_ANNOTATION: "uid-ex"},
            "ownerReferences": [js.owner_reference()],
        },
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "my-storage-class",
            "resources": {"requests": {"storage": "1000Gi"}},
        },
    }
    assert desired.policy.targets == ("A", "B")
    assert targeted(desired.policy, js) == ("A", "B")


def test_example_02_template_labels_copied() -> None:
    desired = only(parse(load("02-upstream-shared-initializer.yaml")))
    assert desired.template.labels == {"content-type": "model"}
    assert desired.object["metadata"]["labels"]["content-type"] == "model"
    assert desired.policy.targets is None


def test_example_03_job_scope_claims_retained_and_labelled() -> None:
    js = parse(load("03-per-job-checkpoints-retained.yaml"))
    model = volumes.model(js)
    policies = model.policies
    assert [p.scope for p in policies] == ["Job", "JobSet"]
    assert policies[0].retention == Retention(when_deleted="Retain")
    assert policies[1].retention == Retention(when_completed="Delete")
    by_name = {c.name: c for c in model.desired}
    ckpt = by_name["ckpt-resumable-workers-1"]
    assert (ckpt.replicated_job, ckpt.job_index) == ("workers", 1)
    assert ckpt.slot == ("ckpt", "workers", 1, None)
    assert by_name["dataset-resumable"].slot == ("dataset", None, None, None)
    assert "ownerReferences" not in ckpt.object["metadata"]
    assert ckpt.object["metadata"]["labels"] == {
        api.JOBSET_NAME: "resumable",
        CLAIM_TEMPLATE_LABEL: "ckpt",
        CLAIM_SCOPE_LABEL: "Job",
        api.REPLICATED_JOB_NAME: "workers",
        api.JOB_INDEX: "1",
    }
    assert by_name["dataset-resumable"].object["metadata"]["ownerReferences"] == [
        js.owner_reference()
    ]
    assert model.job_claims.for_job("workers", 1) == {
        "ckpt": "ckpt-resumable-workers-1",
        "dataset": "dataset-resumable",
    }


# ----------------------------------------------------------------------------- parsing


def test_no_policies() -> None:
    js = make_jobset()
    model = volumes.model(js)
    assert volume_spec.policies(js) == () == model.policies
    assert model.desired == []
    assert model.job_claims.for_job("workers", 0) == {}


def test_defaults() -> None:
    (policy,) = volume_spec.policies(make([{"templates": [tpl("data")]}]))
    assert policy.scope == "JobSet"
    assert policy.targets is None
    assert policy.retention == Retention("Delete", "Retain", "Retain", "Retain")
    assert policy.where == "spec.volumeClaimPolicies[0]"
    assert policy.templates == (ClaimTemplate("data", {}, {}, tpl("data")["spec"]),)
    assert policy.snapshots == SnapshotPolicy(class_name=None, history_limit=1)
    assert policy.restore is None


def test_all_retention_fields_and_empty_scope() -> None:
    retention = {
        "whenDeleted": "Retain",
        "whenCompleted": "Delete",
        "whenFailed": "Delete",
        "whenScaled": "Delete",
    }
    (policy,) = volume_spec.policies(
        make([{"templates": [tpl("data")], "retentionPolicy": retention}])
    )
    assert policy.retention == Retention("Retain", "Delete", "Delete", "Delete")
    assert policy.scope == "JobSet"
    # An empty scope is not "left out": the schema's enum refuses it, and so does the parser
    # (it used to read it as JobSet).
    with pytest.raises(InvalidJobSet) as err:
        make([{"templates": [tpl("data")], "retentionPolicy": retention, "scope": ""}])
    assert str(err.value).startswith(
        f'{P}.scope: Unsupported value: "": supported values: "JobSet", "Job", "Pod"'
    )


def test_when_suspended_snapshot_in_both_spellings() -> None:
    """retentionPolicy.whenSuspended: Retain when left out; Snapshot, with a restore from the
    newest snapshot, read the same from either spelling."""
    asked = {"retentionPolicy": {"whenSuspended": "Snapshot"},
             "restorePolicy": {"source": "NewestSnapshot"}}  # fmt: skip
    (upstream,) = volume_spec.policies(make([{"templates": [tpl("data")], **asked}]))
    (request,) = volume_spec.policies(make(vp={"volumeClaimTemplates": [tpl("data")], **asked}))
    assert upstream.retention.when_suspended == request.retention.when_suspended == "Snapshot"
    assert upstream.retention.snapshots  # VolumeSnapshotsReady is reported for it
    (default,) = volume_spec.policies(make([{"templates": [tpl("data")]}]))
    assert default.retention.when_suspended == "Retain"


@pytest.mark.parametrize("key", ["whenDeleted", "whenCompleted", "whenFailed", "whenScaled"])
def test_snapshot_is_a_retention_value_of_every_retention_field(key: str) -> None:
    retention = {key: "Snapshot"}
    (upstream,) = volume_spec.policies(
        make([{"templates": [tpl("data")], "retentionPolicy": retention}])
    )
    (request,) = volume_spec.policies(
        make(vp={"volumeClaimTemplates": [tpl("data")], "retentionPolicy": retention})
    )
    field = {
        "whenDeleted": "when_deleted",
        "whenCompleted": "when_completed",
        "whenFailed": "when_failed",
        "whenScaled": "when_scaled",
    }[key]
    assert getattr(upstream.retention, field) == "Snapshot"
    assert upstream.retention == request.retention
    # the other fields keep their defaults
    others = {f: v for f, v in vars(upstream.retention).items() if f != field}
    assert others == {f: v for f, v in vars(Retention()).items() if f != field}


# snapshotPolicy and restorePolicy, as written in a policy (either spelling), and what they parse
# to: (snapshotPolicy, restorePolicy) written, (SnapshotPolicy, RestorePolicy | None) parsed.
SNAPSHOT_AND_RESTORE = [
    pytest.param(None, None, SnapshotPolicy(), None, id="left-out"),
    pytest.param({}, None, SnapshotPolicy(None, 1), None, id="empty-snapshot-policy"),
    pytest.param(
        {"volumeSnapshotClassName": "csi-snapclass", "historyLimit": 3},
        None,
        SnapshotPolicy("csi-snapclass", 3),
        None,
        id="class-and-history",
    ),
    pytest.param(
        {"volumeSnapshotClassName": ""}, None, SnapshotPolicy(None, 1), None, id="empty-class"
    ),
    pytest.param({"historyLimit": 1}, None, SnapshotPolicy(None, 1), None, id="history-min"),
    pytest.param({"historyLimit": 100}, None, SnapshotPolicy(None, 100), None, id="history-max"),
    pytest.param(
        {"volumeSnapshotClassName": "c" * 253},
        None,
        SnapshotPolicy("c" * 253, 1),
        None,
        id="class-253",
    ),
    pytest.param(
        None,
        {"source": "NewestSnapshot"},
        SnapshotPolicy(),
        RestorePolicy("NewestSnapshot", "", "Wait"),
        id="newest-defaults",
    ),
    pytest.param(
        None,
        {"source": "NewestSnapshot", "volumeSnapshotName": "", "whenMissing": "CreateEmpty"},
        SnapshotPolicy(),
        RestorePolicy("NewestSnapshot", "", "CreateEmpty"),
        id="newest-empty-name-create-empty",
    ),
    pytest.param(
        None,
        {"source": "VolumeSnapshot", "volumeSnapshotName": "ckpt-7"},
        SnapshotPolicy(),
        RestorePolicy("VolumeSnapshot", "ckpt-7", "Wait"),
        id="named",
    ),
    pytest.param(
        {"historyLimit": 5},
        {"source": "VolumeSnapshot", "volumeSnapshotName": "s" * 253, "whenMissing": "Wait"},
        SnapshotPolicy(None, 5),
        RestorePolicy("VolumeSnapshot", "s" * 253, "Wait"),
        id="both",
    ),
]


@pytest.mark.parametrize(("snapshots", "restore", "parsed", "restored"), SNAPSHOT_AND_RESTORE)
@pytest.mark.parametrize("spelling", ["volumeClaimPolicies", "volumePolicy"])
def test_snapshot_and_restore_policies(
    spelling: str,
    snapshots: Obj | None,
    restore: Obj | None,
    parsed: SnapshotPolicy,
    restored: RestorePolicy | None,
) -> None:
    written: Obj = {}
    if snapshots is not None:
        written["snapshotPolicy"] = snapshots
    if restore is not None:
        written["restorePolicy"] = restore
    if spelling == "volumeClaimPolicies":
        js = make([{"templates": [tpl("data")], **written}])
    else:
        js = make(vp={"volumeClaimTemplates": [tpl("data")], **written})
    (policy,) = volume_spec.policies(js)
    assert (policy.snapshots, policy.restore) == (parsed, restored)


def test_request_spelling_defaults() -> None:
    (policy,) = volume_spec.policies(make(vp={"volumeClaimTemplates": [tpl("data")]}))
    assert (policy.scope, policy.targets, policy.where) == ("JobSet", None, "spec.volumePolicy")


def test_both_spellings_together() -> None:
    js = make(
        [{"templates": [tpl("ckpt")], "scope": "Job"}],
        {"volumeClaimTemplates": [tpl("data")], "replicatedJobs": [{"name": "workers"}]},
        rjobs=[mounting("workers", 2, ("data", "ckpt"))],
    )
    names = [c.name for c in volumes.model(js).desired]
    assert names == ["ckpt-js-workers-0", "ckpt-js-workers-1", "data-js"]


def test_template_spec_is_a_copy() -> None:
    js = make([{"templates": [tpl("data")]}])
    desired = only(js)
    desired.object["spec"]["accessModes"].append("ReadWriteMany")
    assert desired.template.spec["accessModes"] == ["ReadWriteOnce"]
    assert js.raw["spec"]["volumeClaimPolicies"][0]["templates"][0]["spec"]["accessModes"] == [
        "ReadWriteOnce"
    ]


def test_init_container_mount_counts() -> None:
    js = make([{"templates": [tpl("data")]}], rjobs=[mounting("w", 1, init_mounts=("data",))])
    (policy,) = volume_spec.policies(js)
    assert targeted(policy, js) == ("w",)


def test_template_without_spec_and_metadata_extras() -> None:
    # A template without a spec asks for no storage: the rules template-access-modes and
    # template-storage refuse it (the parser used to make a claim of an empty spec).
    with pytest.raises(InvalidJobSet) as err:
        make([{"templates": [{"metadata": {"name": "data"}}]}])
    assert str(err.value) == (
        f"{P}.templates[0].spec.accessModes: Required value: a volume claim template must list "
        f"at least one access mode in spec.accessModes: data; {P}.templates[0].spec.resources: "
        "Required value: a volume claim template must request storage in "
        "spec.resources.requests.storage: data"
    )
    template = tpl("data")
    template["metadata"].update(
        namespace="", labels={"a": "1", api.JOBSET_NAME: "spoof"}, annotations={"note": "x"}
    )
    desired = only(make([{"templates": [template]}]))
    assert desired.object["spec"] == tpl("data")["spec"]
    assert desired.object["metadata"]["labels"][api.JOBSET_NAME] == "js"  # ours win
    assert desired.object["metadata"]["labels"]["a"] == "1"
    assert desired.object["metadata"]["annotations"] == {
        "note": "x",
        OWNER_UID_ANNOTATION: "uid-js",
    }


def test_policy_without_templates_is_harmless() -> None:
    js = make([{"targetReplicatedJobs": ["workers"]}])
    model = volumes.model(js)
    (policy,) = model.policies
    assert policy.templates == ()
    assert model.desired == []
    assert model.job_claims.for_job("workers", 0) == {}


LONG = "a" * 63

# snapshotPolicy and restorePolicy values the schema refuses, with the parser's message (for an
# object stored under an older CRD): in volumeClaimPolicies[0] ...
P = "spec.volumeClaimPolicies[0]"
UNTARGETED = (
    "spec: a replicated job that a volume claim policy does not target must not mount its "
    "templates, unless its pod template defines a volume of that name itself: "
)
# In the API server's words: the parser runs its schema and rules (controller.api.validation).
SNAPSHOT_NAME_RULE = (
    "spec: restorePolicy.volumeSnapshotName is required when restorePolicy.source is "
    "VolumeSnapshot, and must be left out otherwise"
)
BAD_SNAPSHOT_OR_RESTORE: list[tuple[Obj, str]] = [
    (
        {"snapshotPolicy": "x"},
        f'{P}.snapshotPolicy: Invalid value: "string": {P}.snapshotPolicy in body must be of '
        'type object: "string"',
    ),
    (
        {"snapshotPolicy": {"historyLimit": 0}},
        f"{P}.snapshotPolicy.historyLimit: Invalid value: 0: {P}.snapshotPolicy.historyLimit in "
        "body should be greater than or equal to 1",
    ),
    (
        {"snapshotPolicy": {"historyLimit": 101}},
        f"{P}.snapshotPolicy.historyLimit: Invalid value: 101: {P}.snapshotPolicy.historyLimit in "
        "body should be less than or equal to 100",
    ),
    (
        {"snapshotPolicy": {"historyLimit": "2"}},
        f'{P}.snapshotPolicy.historyLimit: Invalid value: "string": ',
    ),
    (
        {"snapshotPolicy": {"historyLimit": True}},
        f'{P}.snapshotPolicy.historyLimit: Invalid value: "boolean": ',
    ),
    (
        {"snapshotPolicy": {"volumeSnapshotClassName": 7}},
        f'{P}.snapshotPolicy.volumeSnapshotClassName: Invalid value: "integer": ',
    ),
    (
        {"snapshotPolicy": {"volumeSnapshotClassName": "c" * 254}},
        f"{P}.snapshotPolicy.volumeSnapshotClassName: Too long: may not be more than 253 bytes",
    ),
    ({"restorePolicy": []}, f'{P}.restorePolicy: Invalid value: "array": '),
    ({"restorePolicy": {}}, f"{P}.restorePolicy.source: Required value"),
    (
        {"restorePolicy": {"source": ""}},
        f'{P}.restorePolicy.source: Unsupported value: "": supported values: "NewestSnapshot", '
        '"VolumeSnapshot"',
    ),
    (
        {"restorePolicy": {"source": "Latest"}},
        f'{P}.restorePolicy.source: Unsupported value: "Latest": supported values: ',
    ),
    (
        {"restorePolicy": {"source": "NewestSnapshot", "whenMissing": "Skip"}},
        f'{P}.restorePolicy.whenMissing: Unsupported value: "Skip": supported values: "Wait", '
        '"CreateEmpty"',
    ),
    # An empty whenMissing is not "left out" (the parser used to read it as Wait).
    (
        {"restorePolicy": {"source": "NewestSnapshot", "whenMissing": ""}},
        f'{P}.restorePolicy.whenMissing: Unsupported value: "": supported values: "Wait", '
        '"CreateEmpty"',
    ),
    (
        {"restorePolicy": {"source": "VolumeSnapshot", "volumeSnapshotName": "s" * 254}},
        f"{P}.restorePolicy.volumeSnapshotName: Too long: may not be more than 253 bytes",
    ),
    # restore-snapshot-name (schema.py), the rule across the fields (the admission policy's):
    ({"restorePolicy": {"source": "VolumeSnapshot"}}, SNAPSHOT_NAME_RULE),
    ({"restorePolicy": {"source": "VolumeSnapshot", "volumeSnapshotName": ""}}, SNAPSHOT_NAME_RULE),
    (
        {"restorePolicy": {"source": "NewestSnapshot", "volumeSnapshotName": "ckpt-7"}},
        SNAPSHOT_NAME_RULE,
    ),
]
# ... and the same in volumePolicy.
BAD_SNAPSHOT_OR_RESTORE_REQUEST = [
    (written, message.replace(P, "spec.volumePolicy"))
    for written, message in BAD_SNAPSHOT_OR_RESTORE
]


@pytest.mark.parametrize(
    ("vcp", "vp", "rjobs", "message"),
    [
        ({"x": 1}, None, None, 'spec.volumeClaimPolicies: Invalid value: "object": '),
        (["x"], None, None, 'spec.volumeClaimPolicies[0]: Invalid value: "string": '),
        ([{"templates": "x"}], None, None, f'{P}.templates: Invalid value: "string": '),
        ([{"templates": ["x"]}], None, None, f'{P}.templates[0]: Invalid value: "string": '),
        (
            [{"templates": [{"metadata": "x"}]}],
            None,
            None,
            'spec.volumeClaimPolicies[0].templates[0].metadata: Invalid value: "string": ',
        ),
        (
            [{"templates": [{"spec": {}}]}],
            None,
            None,
            "spec.volumeClaimPolicies[0].templates[0].metadata: Required value",
        ),
        (
            [{"templates": [tpl("Data")]}],
            None,
            None,
            f"{P}: Invalid value: a volume claim template's metadata.name must be a DNS-1123 "
            "label (it names the pod volume): Data",
        ),
        (
            [{"templates": [tpl(LONG + "b")]}],
            None,
            None,
            "spec.volumeClaimPolicies[0].templates[0].metadata.name: Too long: may not be more "
            "than 63 bytes",
        ),
        (
            [{"templates": [{"metadata": {"name": "data", "namespace": "other"}}]}],
            None,
            None,
            "spec.volumeClaimPolicies[0]: Invalid value: a volume claim template must not set "
            "metadata.namespace: claims are made in the JobSet's namespace: data",
        ),
        (
            [{"templates": [{"metadata": {"name": "data"}, "spec": []}]}],
            None,
            None,
            'templates[0].spec: Invalid value: "array": ',
        ),
        (
            [{"templates": [tpl("data", "ten gigs")]}],
            None,
            None,
            'templates[0].spec.resources.requests.storage: Invalid value: "ten gigs": ',
        ),
        (
            [{"templates": [{"metadata": {"name": "data", "labels": []}}]}],
            None,
            None,
            'templates[0].metadata.labels: Invalid value: "array": ',
        ),
        (
            [{"templates": [{"metadata": {"name": "data", "annotations": {"a": 1}}}]}],
            None,
            None,
            'templates[0].metadata.annotations.a: Invalid value: "integer": ',
        ),
        (
            [{"templates": [tpl("data")], "retentionPolicy": "x"}],
            None,
            None,
            'spec.volumeClaimPolicies[0].retentionPolicy: Invalid value: "string": ',
        ),
        (
            [{"templates": [tpl("data")], "retentionPolicy": {"whenDeleted": "Keep"}}],
            None,
            None,
            'retentionPolicy.whenDeleted: Unsupported value: "Keep": supported values: "Retain", '
            '"Delete", "Snapshot"',
        ),
        (
            [{"templates": [tpl("data")], "retentionPolicy": {"whenScaled": "Never"}}],
            None,
            None,
            'retentionPolicy.whenScaled: Unsupported value: "Never": ',
        ),
        (
            [{"templates": [tpl("data")], "targetReplicatedJobs": "workers"}],
            None,
            None,
            'spec.volumeClaimPolicies[0].targetReplicatedJobs: Invalid value: "string": ',
        ),
        (
            [{"templates": [tpl("data")], "targetReplicatedJobs": [3]}],
            None,
            None,
            'spec.volumeClaimPolicies[0].targetReplicatedJobs[0]: Invalid value: "integer": ',
        ),
        *(
            ([{"templates": [tpl("data")], **written}], None, None, message)
            for written, message in BAD_SNAPSHOT_OR_RESTORE
        ),
        *(
            (None, {"volumeClaimTemplates": [tpl("data")], **written}, None, message)
            for written, message in BAD_SNAPSHOT_OR_RESTORE_REQUEST
        ),
        (
            [{"templates": [tpl("data")], "scope": "Node"}],
            None,
            None,
            'spec.volumeClaimPolicies[0].scope: Unsupported value: "Node": supported values: '
            '"JobSet", "Job", "Pod"',
        ),
        (None, "x", None, 'spec.volumePolicy: Invalid value: "string": '),
        (
            None,
            {"volumeClaimTemplates": [tpl("data")], "replicatedJobs": "workers"},
            None,
            'spec.volumePolicy.replicatedJobs: Invalid value: "string": ',
        ),
        (
            None,
            {"volumeClaimTemplates": [tpl("data")], "replicatedJobs": [{}]},
            None,
            "spec.volumePolicy.replicatedJobs[0].name: Required value",
        ),
        (
            None,
            {"volumeClaimTemplates": [{"metadata": {}}]},
            None,
            "spec.volumePolicy.volumeClaimTemplates[0].metadata.name: Required value",
        ),
        (
            [{"templates": [tpl("data")]}],
            {"volumeClaimTemplates": [tpl("data")]},
            None,
            "spec: volume claim template names must be unique across volumeClaimPolicies and "
            "volumePolicy: data",
        ),
        (
            [{"templates": [tpl("data"), tpl("data")]}],
            None,
            None,
            "volume claim template names must be unique across volumeClaimPolicies and "
            "volumePolicy: data",
        ),
        (
            [{"templates": [tpl("data")], "targetReplicatedJobs": ["workers", "ghost"]}],
            None,
            None,
            "spec: volume claim policies must target replicated jobs of this JobSet: ghost",
        ),
        (
            None,
            {"volumeClaimTemplates": [tpl("data")], "replicatedJobs": [{"name": "ghost"}]},
            None,
            "spec: volume claim policies must target replicated jobs of this JobSet: ghost; ",
        ),
        (
            [{"templates": [tpl("data"), tpl("unused")]}],
            None,
            None,
            "spec: every volume claim template must be mounted by a replicated job it targets (a "
            "volumeMount with the template's name): unused",
        ),
        (
            None,
            {"volumeClaimTemplates": [tpl("other")]},
            None,
            "every volume claim template must be mounted by a replicated job it targets (a "
            "volumeMount with the template's name): other",
        ),
        (
            [{"templates": [tpl("data")], "targetReplicatedJobs": []}],
            None,
            None,
            UNTARGETED + "workers",
        ),
        (
            [{"templates": [tpl("data")], "targetReplicatedJobs": ["leader"]}],
            None,
            [mounting("leader", 1, ("data",)), mounting("workers", 1, ("data",))],
            UNTARGETED + "workers",
        ),
        (
            None,
            {"volumeClaimTemplates": [tpl("data")], "replicatedJobs": [{"name": "leader"}]},
            [mounting("leader", 1, ("data",)), mounting("workers", 1, ("data",))],
            UNTARGETED + "workers",
        ),
        (
            [{"templates": [tpl("data")]}],
            None,
            [mounting("workers", 1, ("data",), volumes_=("data",))],
            "spec: a replicated job that gets a volume claim template must not define a pod volume "
            "of the same name: workers",
        ),
        (
            [{"templates": [tpl("data")], "scope": "Job"}],
            None,
            [mounting("W_1", 1, ("data",))],
            "spec.replicatedJobs: child Job names (<jobSet>-<replicatedJob>-<jobIndex>) must be "
            "DNS-1035 labels",
        ),
        (
            [{"templates": [tpl("data")], "scope": "Job"}],
            None,
            [mounting("A", 1, ("data",)), mounting("a", 1, ("data",))],
            "spec.replicatedJobs: replicatedJob names must be unique, also when compared without "
            "case (child Job names use the lower-case form): A",
        ),
        # The admission rules of whenSuspended: Snapshot, for an object stored without them.
        (
            [{"templates": [tpl("data")], "retentionPolicy": {"whenSuspended": "Snapshot"}}],
            None,
            None,
            "spec: retentionPolicy.whenSuspended: Snapshot requires restorePolicy.source: "
            "NewestSnapshot (the claims it deletes are made again",
        ),
        (
            None,
            {"volumeClaimTemplates": [tpl("data")],
             "retentionPolicy": {"whenSuspended": "Snapshot"},
             "restorePolicy": {"source": "VolumeSnapshot", "volumeSnapshotName": "golden"}},
            None,
            "spec: retentionPolicy.whenSuspended: Snapshot requires restorePolicy.source: "
            "NewestSnapshot (the claims it deletes are made again",
        ),
        (
            [{"templates": [tpl("data")], "retentionPolicy": {"whenSuspended": "Snapshot"},
              "restorePolicy": {"source": "NewestSnapshot"},
              "creationPolicy": {"whenSuspended": "Create"}}],
            None,
            None,
            "spec: retentionPolicy.whenSuspended: Snapshot cannot be used with "
            "creationPolicy.whenSuspended: Create (the claims it deletes would be made again",
        ),
        (
            [{"templates": [tpl("data")], "retentionPolicy": {"whenSuspended": "Delete"}}],
            None,
            None,
            f'{P}.retentionPolicy.whenSuspended: Unsupported value: "Delete": supported values: '
            '"Retain", "Snapshot"',
        ),
    ],
)  # fmt: skip
def test_invalid_policies(vcp: Any, vp: Any, rjobs: list[Obj] | None, message: str) -> None:
    """Refused by the parse, in the API server's words: the schema and the rules run there
    (model.parse), so no policy of such a JobSet is read, nor its model built."""
    with pytest.raises(InvalidJobSet) as err:
        volumes.model(make(vcp, vp, rjobs))
    assert message in str(err.value)


def test_untargeted_replicated_job_may_mount_its_own_volume_of_a_template_name() -> None:
    """Its pods mount the volume their template defines (an emptyDir here), so they start: the
    replicated job is not given the claim, and the JobSet is valid (issue 12, item 9)."""
    js = make(
        [{"templates": [tpl("data")], "targetReplicatedJobs": ["leader"]}],
        None,
        [mounting("leader", 1, ("data",)), mounting("workers", 2, ("data",), volumes_=("data",))],
    )
    model = volumes.model(js)
    assert targeted(model.policies[0], js) == ("leader",)
    assert model.job_claims.for_job("workers", 1) == {}
    assert model.job_claims.for_job("leader", 0) == {"data": "data-js"}


CLAIM_NAMES_RULE = (
    "spec: claim names (<template>-<jobSet>, <template>-<jobSet>-<replicatedJob>-<jobIndex> for "
    "scope Job, and <template>-<jobSet>-<replicatedJob>-<jobIndex>-<podIndex> for scope Pod) must "
    "be at most 253 characters"
)
CHILD_JOB_NAMES_RULE = (
    "spec.replicatedJobs: child Job names (<jobSet>-<replicatedJob>-<jobIndex>) must be DNS-1035 "
    "labels"
)
CHILD_JOB_NAMES_DETAIL = (
    ": the JobSet name must start with a letter, both names may contain only letters, digits and "
    "'-' (the replicated job name is used in lower case), and the longest Job name must fit in 63 "
    "characters"
)


def test_claim_name_too_long() -> None:
    """The rule claim-names refuses a claim name of 254 characters, not one of 253; the JobSet
    name that long breaks child-job-names as well, so no JobSet the parser admits comes near
    the bound (the controller no longer checks it itself; the property test checks every
    claim name of random valid JobSets)."""
    spec = [{"templates": [tpl(LONG)]}]
    with pytest.raises(InvalidJobSet) as err:
        make(spec, rjobs=[mounting("w", 1, (LONG,))], name="j" * 190)
    assert CLAIM_NAMES_RULE in str(err.value)
    with pytest.raises(InvalidJobSet) as err:
        make(spec, rjobs=[mounting("w", 1, (LONG,))], name="j" * 189)
    assert CLAIM_NAMES_RULE not in str(err.value)
    assert str(err.value).startswith(CHILD_JOB_NAMES_RULE)


def test_job_scope_name_length_checks_last_index() -> None:
    """The last Job's index counts: <jobset>-w-9 is the 63 characters of a child Job name (its
    Job-scope claim d-<jobset>-w-9 is far below a claim name's 253), index 10 one too many."""
    spec = [{"templates": [tpl("d")], "scope": "Job"}]
    name = "j" * (63 - len("-w-9"))
    found = volumes.model(make(spec, rjobs=[mounting("w", 10, ("d",))], name=name)).desired
    assert max(len(c.name) for c in found) == len(f"d-{name}-w-9")
    with pytest.raises(InvalidJobSet) as err:
        make(spec, rjobs=[mounting("w", 11, ("d",))], name=name)
    assert str(err.value) == f"{CHILD_JOB_NAMES_RULE}{CHILD_JOB_NAMES_DETAIL}: replicatedJob w"


def test_claim_count() -> None:
    js = make(
        [{"templates": [tpl("ckpt"), tpl("logs")], "scope": "Job"}, {"templates": [tpl("data")]}],
        rjobs=[mounting("workers", 3, ("ckpt", "logs", "data")), mounting("idle", 2)],
    )
    model = volumes.model(js)
    assert claim_count(js, model.policies) == 2 * 3 + 1 == len(model.desired)


# ----------------------------------------------------------------------------- the model


@pytest.mark.parametrize(
    ("annotation", "accepted"),
    [
        pytest.param(None, frozenset(), id="none"),
        # Read as record.accepted_losses reads it (tabled in test_record).
        pytest.param(" data-js@1a2b3c4d ,x", {("data-js", "1a2b3c4d")}, id="one"),
    ],
)
def test_model_reads_the_accepted_losses(annotation: str | None, accepted: Any) -> None:
    notes = {} if annotation is None else {REPLACE_LOST_ANNOTATION: annotation}
    assert volumes.model(
        make([{"templates": [tpl("data")]}], annotations=notes)
    ).accepted_losses == (frozenset(accepted))


def test_model_reads_the_stored_record() -> None:
    raw = make_jobset_obj(
        replicated_jobs=[mounting("workers", 2, ("data", "ckpt"))],
        spec={
            "volumeClaimPolicies": [
                {"templates": [tpl("ckpt")], "scope": "Job"},
                {"templates": [tpl("data")]},
            ]
        },
    )
    raw["status"]["volumes"] = {
        "templates": [],
        "claimUIDs": [
            {"template": "ckpt", "replicatedJob": "workers", "uids": "aaaaaaaa,bbbbbbbb"},
            {"template": "data", "uids": "cccccccc"},
        ],
    }
    model = volumes.model(parse(raw))
    assert model.record == ClaimRecord(
        {
            ("ckpt", "workers", 0, None): "aaaaaaaa",
            ("ckpt", "workers", 1, None): "bbbbbbbb",
            ("data", None, None, None): "cccccccc",
        }
    )
    assert model.slot_name(("ckpt", "workers", 1, None)) == "ckpt-js-workers-1"
    assert model.slot_name(("data", None, None, None)) == "data-js"
    assert [d.slot for d in model.desired] == [
        ("ckpt", "workers", 0, None),
        ("ckpt", "workers", 1, None),
        ("data", None, None, None),
    ]
    assert model.desired is model.desired  # built once, whatever asks for it
    assert volumes.model(make([{"templates": [tpl("data")]}])).record == ClaimRecord()


# ----------------------------------------------------------------------------- names


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("data", "js", "JobSet"), "data-js"),
        (("data", "js", "JobSet", "workers", 3), "data-js"),
        (("data", "js", "Job", "workers", 3), "data-js-workers-3"),
        (("model", "volume-sample", "Job", "A", 0), "model-volume-sample-a-0"),
        (("ckpt", "js", "Pod", "Workers", 1, 2), "ckpt-js-workers-1-2"),
        (("ckpt", "js", "Job", "workers", 1, 2), "ckpt-js-workers-1"),  # Job scope: per Job
    ],
)
def test_claim_name(args: tuple[Any, ...], expected: str) -> None:
    assert volume_claim_name(*args) == expected


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("data", "js", "Job"), "needs a replicated job and index"),
        (("data", "js", "Job", "w"), "needs a replicated job and index"),
        (("data", "js", "Pod", "w", 0), "needs a replicated job, a job index and a pod index"),
        (("data", "js", "Pod", None, 0, 1), "needs a replicated job, a job index and a pod index"),
    ],
)
def test_claim_name_errors(args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(InvalidJobSet, match=message):
        volume_claim_name(*args)


def test_claims_and_policies_are_frozen_values() -> None:
    # Computed twice from equal specs: distinct objects, equal as values, one element in a set
    # (hashable although templates hold dicts); a different retention is a different value.
    desired = only(make([{"templates": [tpl("data")]}]))
    again = only(make([{"templates": [tpl("data")]}]))
    assert desired is not again and desired.policy is not again.policy
    assert desired == again and hash(desired) == hash(again)
    assert {desired, again} == {desired} and {desired.policy, again.policy} == {desired.policy}
    retained = only(
        make([{"templates": [tpl("data")], "retentionPolicy": {"whenScaled": "Delete"}}])
    )
    assert retained != desired and retained.policy != desired.policy
    assert len({desired, retained}) == 2
    with pytest.raises(AttributeError):
        desired.name = "other"  # type: ignore[misc]


# ----------------------------------------------------------------------------- quantities


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", Decimal(0)),
        ("10", Decimal(10)),
        ("1.5", Decimal("1.5")),
        (".5", Decimal("0.5")),
        ("5.", Decimal(5)),
        ("+3", Decimal(3)),
        ("-3", Decimal(-3)),
        ("1Ki", Decimal(1024)),
        ("1Mi", Decimal(2**20)),
        ("10Gi", Decimal(10 * 2**30)),
        ("1.5Gi", Decimal(3 * 2**29)),
        ("1Ti", Decimal(2**40)),
        ("1Pi", Decimal(2**50)),
        ("1Ei", Decimal(2**60)),
        ("1k", Decimal(1000)),
        ("1M", Decimal(10**6)),
        ("1G", Decimal(10**9)),
        ("2T", Decimal(2 * 10**12)),
        ("1P", Decimal(10**15)),
        ("1E", Decimal(10**18)),
        ("250m", Decimal("0.25")),
        ("5u", Decimal("0.000005")),
        ("7n", Decimal("0.000000007")),
        ("1e3", Decimal(1000)),
        ("1E3", Decimal(1000)),
        ("1.5e-3", Decimal("0.0015")),
        ("2e+2", Decimal(200)),
        # Kubernetes accepts any int32 exponent (admission's isQuantity agrees).
        ("1e1000", Decimal("1e1000")),
    ],
)
def test_parse_quantity(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text",
    ["", "Gi", "1 Gi", "1gi", "1KI", "1e", "1.2.3", "--1", "1Gi ", "abc", "1e2147483648", "1Zi"],
)
def test_parse_quantity_rejects(text: str) -> None:
    with pytest.raises(InvalidJobSet, match="quantity"):
        parse_quantity(text)


def test_parse_quantity_rejects_non_strings() -> None:
    with pytest.raises(InvalidJobSet):
        parse_quantity(5)  # type: ignore[arg-type]


def test_numeric_storage_in_template_is_accepted() -> None:
    js = make([{"templates": [tpl("data", 1073741824)]}])  # type: ignore[arg-type]
    desired = only(js)
    assert compatible(claim("data-js")["spec"], desired.template.spec) == (True, "")


# ----------------------------------------------------------------------------- properties

RJOB_NAMES = ["leader", "workers", "A", "node-x", "eval"]
TEMPLATE_NAMES = ["data", "ckpt", "model", "scratch-1", "logs", "cache"]


@st.composite
def valid_jobsets(draw: st.DrawFn) -> Obj:
    names = draw(st.lists(st.sampled_from(RJOB_NAMES), min_size=1, max_size=4, unique=True))
    replicas = {n: draw(st.integers(0, 3)) for n in names}
    completions = {n: draw(st.one_of(st.none(), st.integers(0, 3))) for n in names}
    templates = draw(st.lists(st.sampled_from(TEMPLATE_NAMES), max_size=6, unique=True))
    count = draw(st.integers(0, min(3, len(templates))))
    groups: list[list[str]] = [[] for _ in range(count)]
    for i, template in enumerate(templates[: max(count, 0) * 2]):
        if count:
            groups[i % count].append(template)
    mounts: dict[str, set[str]] = {n: set() for n in names}
    # The replicated jobs a Pod-scope policy lists: the rule pod-scope-indexed wants completions.
    pod_targets: set[str] = set()
    policies: list[Obj] = []
    request: Obj | None = None
    for group in groups:
        if not group:
            continue
        explicit = draw(st.booleans())
        targets = (
            draw(st.lists(st.sampled_from(names), min_size=1, unique=True)) if explicit else None
        )
        eligible = targets if targets is not None else names
        for template in group:
            for user in draw(st.lists(st.sampled_from(eligible), min_size=1, unique=True)):
                mounts[user].add(template)
        retention = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "whenDeleted": st.sampled_from(["Delete", "Retain"]),
                    "whenScaled": st.sampled_from(["Delete", "Retain"]),
                },
            )
        )
        scope = draw(st.sampled_from(["JobSet", "Job", "Pod"]))
        if scope == "Pod" and targets is not None:
            pod_targets.update(targets)
        if scope == "JobSet" and request is None and draw(st.booleans()):
            request = {"volumeClaimTemplates": [tpl(t) for t in group]}
            if targets is not None:
                request["replicatedJobs"] = [{"name": n} for n in targets]
            if retention:
                request["retentionPolicy"] = retention
            continue
        policy: Obj = {"templates": [tpl(t) for t in group], "scope": scope}
        if targets is not None:
            policy["targetReplicatedJobs"] = targets
        if retention:
            policy["retentionPolicy"] = retention
        policies.append(policy)
    rjobs = [
        mounting(
            n,
            replicas[n],
            (*sorted(mounts[n]), "own"),
            volumes_=("own",),
        )
        for n in names
    ]
    for n in pod_targets:
        if completions[n] is None:
            completions[n] = draw(st.integers(0, 3))
    for entry in rjobs:
        if completions[entry["name"]] is not None:
            entry["template"]["spec"]["completions"] = completions[entry["name"]]
    spec: Obj = {}
    if policies:
        spec["volumeClaimPolicies"] = policies
    if request is not None:
        spec["volumePolicy"] = request
    name = draw(st.sampled_from(["js", "train-7", "a" * 40]))
    return make_jobset_obj(name=name, replicated_jobs=rjobs, spec=spec)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(valid_jobsets(), st.sampled_from(["", "Pending", "Bound"]))
def test_properties_of_claims_and_mounts(obj: Obj, phase: str) -> None:
    js = parse(obj)
    model = volumes.model(js)
    policies = model.policies
    desired = model.desired
    names = [c.name for c in desired]
    assert len(names) == len(set(names))
    for name in names:
        assert len(name) <= 253 and DNS_SUBDOMAIN.match(name)
    by_name = {c.name: c for c in desired}
    # Every desired claim, as the API server returns it once created.
    existing = [created(c, phase or None) for c in desired]
    found = views(existing)
    for claim_ in desired:
        view = found[claim_.name]
        assert update_patch(view, claim_) is None
        assert classify(view, claim_, js) == "owned"
        assert compatible(claim_.object["spec"], claim_.template.spec) == (True, "")
        has_ref = "ownerReferences" in claim_.object["metadata"]
        assert has_ref is (claim_.policy.retention.when_deleted == "Delete")
        assert (owner(js.uid, js.name) in claim_.object["metadata"].get("ownerReferences", [])) is (
            has_ref
        )
    in_use = {"": ClaimState.PENDING, "Pending": ClaimState.PENDING, "Bound": ClaimState.BOUND}
    # Not recorded yet: ours, but not mountable; the pass records every one of them ...
    states = lifecycle(model, found, StorageClasses())
    assert [(s.name, s.state, s.mountable) for s in states] == [
        (n, in_use[phase], False) for n in names
    ]
    first = volume_lifecycle.plan(model, found, StorageClasses(), terminal_state="")
    assert (first.create, first.patch, first.deleted, first.mountable) == ([], [], [], set())
    assert first.record.uids == {c.slot: uid_prefix(uid_of(c.name)) for c in desired}
    assert parse_record({"claimUIDs": first.record.render()}) == first.record
    # ... and once that record is stored, every one is mountable and the pass writes no claim.
    raw = copy.deepcopy(js.raw)
    raw["status"]["volumes"] = volume_status.volumes_status(model, first).to_dict()
    stored = volumes.model(parse(raw))
    second = volume_lifecycle.plan(stored, found, StorageClasses(), terminal_state="")
    assert second.mountable == set(names)
    assert (second.create, second.patch, second.deleted) == ([], [], [])
    assert second.record == stored.record
    assert claims_to_delete(js, policies, found.values(), deleting=False, terminal_state="") == []
    mounted_claims: set[str] = set()
    for r in js.replicated_jobs:
        for index in range(r.replicas):
            job = construct.desired_job(js, r, index)
            mounted = volume_desired.mount(job, js, policies, r.name, index)
            assert volume_desired.mount(mounted, js, policies, r.name, index) == mounted
            pod_volumes = mounted["spec"]["template"]["spec"]["volumes"]
            volume_names = [v["name"] for v in pod_volumes]
            assert len(volume_names) == len(set(volume_names))
            claims = {
                v["name"]: v["persistentVolumeClaim"]["claimName"]
                for v in pod_volumes
                if "persistentVolumeClaim" in v
            }
            assert claims == claims_for_job(js, policies, r.name, index)
            assert claims == model.job_claims.for_job(r.name, index)
            # Pod scope: the template mounts placeholders, labelled for the admission policy.
            placeholders = [c for c in claims.values() if podscope.is_placeholder(c)]
            labels = (mounted["spec"]["template"].get("metadata") or {}).get("labels") or {}
            assert (labels.get(POD_SCOPE_LABEL) == "true") is bool(placeholders)
            needed = model.job_claims.needed(r.name, index)
            assert len(needed) == len(claims) - len(placeholders) + len(placeholders) * (
                pod_indexes(r)
            )
            mounts = {
                m["name"]
                for c in mounted["spec"]["template"]["spec"]["containers"]
                for m in c.get("volumeMounts", [])
            }
            assert mounts <= set(volume_names)  # every mount has its volume
            for claim_name in needed:
                assert claim_name in by_name
            mounted_claims.update(needed)
            assert set(needed) <= second.mountable  # no Job waits once recorded
    # Every desired claim is mounted by some Job, unless its replicated jobs have no replicas.
    used = {
        c.name
        for c in desired
        if any(js.replicated_job(r).replicas for r in targeted(c.policy, js))  # type: ignore[union-attr]
    }
    assert mounted_claims == used


# ----------------------------------------------------------------------------- Pod scope

POD = {"templates": [tpl("ckpt")], "scope": "Pod"}


def indexed(name: str = "workers", replicas: int = 2, **job_spec: Any) -> Obj:
    """A replicated job mounting ``ckpt``, ``data`` and ``T63``, with these Job spec fields."""
    entry = mounting(name, replicas, ("ckpt", "data", T63))
    entry["template"]["spec"].update(job_spec)
    return entry


def test_pod_scope_is_a_valid_spec_whatever_the_cluster_has() -> None:
    """Whether the admission policy is installed is the reconciler's question, not the spec's."""
    js = make([POD], rjobs=[indexed(completions=3)])
    accepted = volumes.model(js)
    assert [p.scope for p in accepted.policies] == ["Pod"]
    assert accepted.pod_scope
    assert len(accepted.desired) == 6
    assert not volumes.model(make([{**POD, "scope": "Job"}], rjobs=[indexed()])).pod_scope


T63 = "t" * 63
TARGETED = {**POD, "targetReplicatedJobs": ["workers"]}
POD_SCOPE_INDEXED_RULE = (
    "spec.volumeClaimPolicies: a scope Pod policy needs completionMode Indexed and completions in "
    "every replicated job it targets: an Indexed Job has one pod, and one claim, per completion "
    "index"
)


@pytest.mark.parametrize(
    ("vcp", "rjobs", "message"),
    [
        # Without targetReplicatedJobs (CEL cannot tell who mounts a template): the controller's.
        pytest.param(
            [POD], [indexed(completionMode="NonIndexed", completions=3)],
            r"spec.volumeClaimPolicies\[0\].scope: Pod scope needs completionMode Indexed .*"
            r"spec.replicatedJobs\[0\].template.spec.completionMode of replicated job 'workers' "
            "is 'NonIndexed'",
            id="not-indexed",
        ),
        pytest.param(
            [POD], [mounting("leader", 1, ("x",)), indexed(parallelism=2)],
            r"Pod scope needs spec.replicatedJobs\[1\].template.spec.completions for replicated "
            "job 'workers'",
            id="parallelism-without-completions",
        ),
        # With it: the rule pod-scope-indexed, in the API server's words (it wants completions
        # even without parallelism).
        pytest.param(
            [TARGETED], [indexed(completionMode="NonIndexed", completions=3)],
            re.escape(POD_SCOPE_INDEXED_RULE) + "$",
            id="targeted-not-indexed",
        ),
        pytest.param(
            [TARGETED], [indexed()], re.escape(POD_SCOPE_INDEXED_RULE) + "$",
            id="targeted-without-completions",
        ),
        # Whatever the targets: beyond the API server's rules (the Job's schema has no bounds).
        pytest.param(
            [POD], [indexed(completions=2, parallelism=0)],
            r"spec.volumeClaimPolicies\[0\].scope: Pod scope makes a claim for each completion "
            r"index before the Job starts, but spec.replicatedJobs\[0\].template.spec.parallelism "
            "of replicated job 'workers' is 0",
            id="parallelism-zero",
        ),
        pytest.param(
            [TARGETED], [indexed(completions=2, parallelism=0)], "parallelism of replicated job "
            "'workers' is 0", id="targeted-parallelism-zero",
        ),
        pytest.param(
            [POD], [indexed(completions="3")],
            re.escape(
                'spec.replicatedJobs[0].template.spec.completions: Invalid value: "string": '
                "spec.replicatedJobs[0].template.spec.completions in body must be of type "
                'integer: "string"'
            ),
            id="completions-not-a-number",
        ),
        pytest.param(
            [POD], [indexed(completions=-1)], "must be a non-negative integer, got -1",
            id="completions-negative",
        ),
        pytest.param(
            [TARGETED], [indexed(completions=-1)], "must be a non-negative integer, got -1",
            id="targeted-completions-negative",
        ),
        pytest.param(
            [POD], [indexed(replicas=101, completions=100)],
            "ask for 10100 claims; at most 10000 .* Pod-scope ones once per completion index",
            id="too-many-claims",
        ),
    ],
)  # fmt: skip
def test_pod_scope_invalid(vcp: list[Obj], rjobs: list[Obj], message: str) -> None:
    with pytest.raises(InvalidJobSet, match=message):
        volume_spec.policies(make(vcp, rjobs=rjobs))


def test_pod_scope_longest_claim_name() -> None:
    """A Pod-scope claim name cannot reach a claim name's 253 characters: the rule pod-names
    bounds <jobSet>-<replicatedJob>-<jobIndex>-<podIndex> and a pod's suffix to 63 characters
    and templates have at most 63, so the controller does not check its length (it did)."""
    name = "j" * (63 - len("-workers-0-9") - bounds.POD_NAME_SUFFIX)
    template = {"templates": [tpl(T63)], "scope": "Pod"}
    model = volumes.model(make([template], rjobs=[indexed(replicas=1, completions=10)], name=name))
    assert max(len(c.name) for c in model.desired) == len(f"{T63}-{name}-workers-0-9") < 253
    assert len(model.desired) == 10
    with pytest.raises(InvalidJobSet) as err:
        make([template], rjobs=[indexed(replicas=1, completions=10)], name=name + "j")
    assert str(err.value) == (
        "spec.replicatedJobs: pod names (<jobSet>-<replicatedJob>-<jobIndex>-<podIndex>-<suffix>) "
        "must be DNS-1035 labels of at most 63 characters: shorten the JobSet or replicated job "
        "name: replicatedJob workers"
    )


@pytest.mark.parametrize(
    ("rjobs", "expected"),
    [
        pytest.param([indexed(replicas=2, completions=3, parallelism=1)], 6, id="2x3"),
        pytest.param([indexed(replicas=3)], 3, id="one-pod-each"),
        pytest.param([indexed(replicas=0, completions=3)], 0, id="no-jobs"),
        pytest.param([indexed(replicas=2, completions=0)], 0, id="no-completions"),
        pytest.param(
            [indexed(replicas=2, completions=3), indexed("b", replicas=1, completions=4)],
            10,
            id="two-replicated-jobs",
        ),
    ],
)
def test_pod_scope_claim_count(rjobs: list[Obj], expected: int) -> None:
    js = make([POD, {"templates": [tpl("data")]}], rjobs=rjobs)
    model = volumes.model(js)
    # The JobSet-scope template adds one, whoever mounts it.
    assert claim_count(js, model.policies) == len(model.desired) == expected + 1


def test_pod_scope_checks_only_the_replicated_jobs_it_targets() -> None:
    other = mounting("other", 1)
    other["template"]["spec"]["completionMode"] = "NonIndexed"
    js = make([POD], rjobs=[indexed(completions=2), other])
    model = volumes.model(js)
    assert [c.name for c in model.desired] == [
        f"ckpt-js-workers-{j}-{p}" for j in range(2) for p in range(2)
    ]
    assert model.job_claims.for_job("other", 0) == {}
