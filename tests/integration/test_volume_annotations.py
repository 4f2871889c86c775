"""Volume policy fields declared in metadata (``controller.api.volumekeys``) on the real API server.

One rule, one message: what the admission policy refuses, it refuses in the words the controller
uses for the same JobSet (``volumekeys.message``), which the parser raises and ``render``'s
contract (``controller.api.validation``) prints too. The keys of scope, targets and retention are
immutable, as the spec's fields; an annotation-only update (``kubectl annotate``) is judged. And the
controller, on a JobSet whose keys complete its spec: claims as the keys say, the override
reported, and a rule only the controller can check (across fields) a SpecInvalid JobSet whose
Jobs wait.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

import pytest

from controller.api import volumekeys
from controller.api.validation import Contract
from controller.jobset import api, volumes
from controller.jobset.model import InvalidJobSet, parse
from controller.jobset.volumes.status import POLICY_OVERRIDDEN
from controller.runtime.client import CLAIMS, KubeClient
from tests.helpers import Kube, wait_for
from tests.integration.test_crd import (
    accepted,
    base,
    create,
    rejection,
    replace,
)
from tests.support.crd import CRD_FILE, dry_run_refusal, install_crd, load_crd
from tests.support.jobsets import (
    RunningController,
    condition,
    get_jobset,
    jobs_of,
    settled,
    wait_condition,
)

Obj = dict[str, Any]
CKPT = f"ckpt{volumekeys.MARK}"  # the Job-scope template of test_crd's base JobSet
DATA = f"data{volumekeys.MARK}"  # its JobSet-scope template
DENIED = (
    'jobsets.jobset.x-k8s.io "train" is forbidden: ValidatingAdmissionPolicy '
    "'jobsets.jobset.x-k8s.io' with binding 'jobsets.jobset.x-k8s.io' denied request: "
)

# (id, annotations, what the message must say after "invalid volume policy annotation: ")
REFUSED = [
    ("enum", {f"{CKPT}scope": "Pods"}, f"{CKPT}scope: must be JobSet, Job or Pod, got 'Pods'"),
    (
        "unknown-template",
        {f"model{volumekeys.MARK}scope": "Job"},
        f"model{volumekeys.MARK}scope: names no volume claim template of "
        "spec.volumeClaimPolicies or spec.volumePolicy",
    ),
    ("unknown-field", {f"{CKPT}colour": "red"}, f"{CKPT}colour: is not a volume policy field"),
    (
        "integer",
        {f"{CKPT}snapshotPolicy.historyLimit": "three"},
        f"{CKPT}snapshotPolicy.historyLimit: must be an integer from 1 to 100, got 'three'",
    ),
    (
        "integer-bound",
        {f"{CKPT}snapshotPolicy.historyLimit": "101"},
        f"{CKPT}snapshotPolicy.historyLimit: must be an integer from 1 to 100, got '101'",
    ),
    (
        "length",
        {f"{CKPT}restorePolicy.volumeSnapshotName": "s" * 254},
        f"{CKPT}restorePolicy.volumeSnapshotName: must be at most 253 characters",
    ),
    (
        "targets",
        {f"{DATA}targetReplicatedJobs": "init,,workers"},
        f"{DATA}targetReplicatedJobs: must be a comma-separated list of at most 100 replicated "
        "job names of 1 to 63 characters, got 'init,,workers'",
    ),
    (
        "two",
        {f"{CKPT}scope": "Pods", f"{DATA}retentionPolicy.whenDeleted": "Keep"},
        f"{CKPT}scope: must be JobSet, Job or Pod, got 'Pods' (and 1 more)",
    ),
]
# Every field, with a value the rules admit on the base JobSet.
VALID = {
    f"{CKPT}scope": "Job",
    f"{CKPT}targetReplicatedJobs": "workers",
    f"{CKPT}retentionPolicy.whenDeleted": "Snapshot",
    f"{CKPT}retentionPolicy.whenCompleted": "Snapshot",
    f"{CKPT}retentionPolicy.whenFailed": "Retain",
    f"{CKPT}retentionPolicy.whenScaled": "Delete",
    f"{CKPT}retentionPolicy.whenSuspended": "Snapshot",
    f"{CKPT}creationPolicy.whenSuspended": "WaitForResume",
    f"{CKPT}snapshotPolicy.volumeSnapshotClassName": "csi-snapclass",
    f"{CKPT}snapshotPolicy.volumeGroupSnapshotClassName": "csi-group-snapclass",
    f"{CKPT}snapshotPolicy.historyLimit": "3",
    f"{CKPT}restorePolicy.source": "NewestSnapshot",
    f"{CKPT}restorePolicy.whenMissing": "CreateEmpty",
    f"{CKPT}restorePolicy.fromJobSet": "train-1",
    f"{DATA}restorePolicy.volumeSnapshotName": "",  # empty: as if left out
}


@pytest.fixture
async def jobsets(kube: Kube, namespace: str) -> str:
    """The CRD and its admission policy installed; the namespace's jobsets collection path."""
    await install_crd(kube)
    return f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{namespace}/jobsets"


def annotated(annotations: dict[str, str]) -> Obj:
    body = base()
    body["metadata"]["annotations"] = dict(annotations)
    return body


def parser_refusal(body: Obj) -> str | None:
    """What the controller's parser says of ``body`` as the cache would hold it."""
    stored = copy.deepcopy(body)
    stored["metadata"].update(namespace="ns", uid="00000000-0000-0000-0000-000000000001")
    try:
        volumes.model(parse(stored))
    except InvalidJobSet as err:
        return str(err)
    return None


@functools.cache
def contract() -> Contract:
    """What ``render`` checks against (the committed CRD and policy)."""
    return Contract.from_crd(load_crd(CRD_FILE))


@pytest.mark.parametrize(("annotations", "says"), [pytest.param(a, s, id=i) for i, a, s in REFUSED])
async def test_the_api_server_refuses_in_the_controllers_words(
    kube: Kube, jobsets: str, annotations: dict[str, str], says: str
) -> None:
    body = annotated(annotations)
    ours = volumekeys.message(body)
    assert ours is not None and ours.startswith(
        f"metadata.annotations: invalid volume policy annotation: {says}"
    ), ours
    assert rejection(await create(kube, jobsets, body, dry_run=True)) == DENIED + ours
    assert parser_refusal(body) == ours
    refusal = contract().refusal(body)
    assert refusal is not None and refusal.message == DENIED + ours


async def test_every_field_with_a_value_it_admits_is_accepted_and_read(
    kube: Kube, jobsets: str
) -> None:
    body = annotated(VALID)
    accepted(await create(kube, jobsets, body, dry_run=True))
    assert contract().refusal(body) is None
    assert parser_refusal(body) is None
    stored = copy.deepcopy(body)
    stored["metadata"].update(namespace="ns", uid="u")
    ckpt = next(p for p in volumes.model(parse(stored)).policies if p.templates[0].name == "ckpt")
    assert (ckpt.scope, ckpt.targets, ckpt.retention.when_deleted) == (
        "Job",
        ("workers",),
        "Snapshot",
    )
    assert ckpt.snapshots.group_class_name == "csi-group-snapclass"
    assert ckpt.snapshots.history_limit == 3
    assert ckpt.restore is not None and ckpt.restore.from_jobset == "train-1"


async def test_immutable_keys_cannot_change_and_the_others_can(kube: Kube, jobsets: str) -> None:
    stored = accepted(
        await create(kube, jobsets, annotated({f"{CKPT}retentionPolicy.whenCompleted": "Delete"}))
    )
    for change, key in (
        ({f"{CKPT}retentionPolicy.whenCompleted": "Snapshot"}, "retentionPolicy.whenCompleted"),
        ({}, "retentionPolicy.whenCompleted"),  # removed
        (
            {f"{CKPT}retentionPolicy.whenCompleted": "Delete", f"{DATA}scope": "Job"},
            f"{DATA}scope",
        ),  # added
    ):
        updated = copy.deepcopy(stored)
        updated["metadata"]["annotations"] = change
        message = rejection(await replace(kube, jobsets, updated))
        assert message.startswith(
            DENIED + f"metadata.annotations: {volumekeys.IMMUTABLE_MESSAGE}: "
        )
        assert message.endswith(key), message
        refusal = contract().refusal(updated, stored)
        assert refusal is not None and refusal.message == message
    mutable = copy.deepcopy(stored)
    mutable["metadata"]["annotations"][f"{CKPT}snapshotPolicy.historyLimit"] = "5"
    accepted(await replace(kube, jobsets, mutable))


async def test_an_annotation_only_change_is_judged(
    kube: Kube, jobsets: str, namespace: str
) -> None:
    accepted(await create(kube, jobsets, base()))
    patch = {"metadata": {"annotations": {f"{CKPT}restorePolicy.whenMissing": "Maybe"}}}
    message = await dry_run_refusal(kube, namespace, "train", patch)
    assert message == DENIED + (
        "metadata.annotations: invalid volume policy annotation: "
        f"{CKPT}restorePolicy.whenMissing: must be Wait or CreateEmpty, got 'Maybe'"
    )
    patch = {"metadata": {"annotations": {f"{CKPT}restorePolicy.whenMissing": "Wait"}}}
    assert await dry_run_refusal(kube, namespace, "train", patch) == ""


# ----------------------------------------------------------------------- the controller


def checkpoints(name: str, annotations: dict[str, str], scope: str = "JobSet") -> Obj:
    """Two Jobs of one replicated job mounting ``ckpt``, its policy's scope ``scope`` in the
    spec; ``annotations`` on the JobSet."""
    body = base()
    body["metadata"] = {"name": name, "annotations": annotations}
    body["spec"] = {
        "replicatedJobs": [base()["spec"]["replicatedJobs"][1]],
        "volumeClaimPolicies": [
            {
                "scope": scope,
                "templates": [base()["spec"]["volumeClaimPolicies"][1]["templates"][0]],
                "retentionPolicy": {"whenDeleted": "Delete"},
            }
        ],
    }
    body["spec"]["replicatedJobs"][0].pop("dependsOn")
    body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0][
        "volumeMounts"
    ] = [{"name": "ckpt", "mountPath": "/ckpt"}]
    return body


async def claim_names(client: KubeClient, namespace: str) -> list[str]:
    listed = await client.list(CLAIMS, namespace)
    return sorted(c["metadata"]["name"] for c in listed["items"])


async def test_the_keys_complete_the_spec_and_an_override_is_reported(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """Scope Job from a key (the spec's JobSet is the default: no override); whenDeleted Delete
    from a key over the spec's Retain: reported, and it is what deletion does."""
    body = checkpoints(
        "keys", {f"{CKPT}scope": "Job", f"{CKPT}retentionPolicy.whenDeleted": "Delete"}
    )
    body["spec"]["volumeClaimPolicies"][0]["retentionPolicy"]["whenDeleted"] = "Retain"
    await client.create(api.JOBSETS, body, namespace)
    found = await wait_condition(client, namespace, "keys", POLICY_OVERRIDDEN)
    reported = condition(found, POLICY_OVERRIDDEN)
    assert reported is not None and reported["reason"] == "AnnotationOverridesSpec"
    assert reported["message"] == (
        f"{CKPT}retentionPolicy.whenDeleted: Delete overrides "
        "spec.volumeClaimPolicies[0].retentionPolicy.whenDeleted: Retain (the annotation "
        "counts: docs/volumes.md)"
    ), reported
    await settled(controller, client)
    # Job scope, as the key says: one claim per child Job, mounted by it.
    assert await claim_names(client, namespace) == ["ckpt-keys-workers-0", "ckpt-keys-workers-1"]
    jobs = await jobs_of(client, namespace, "keys")
    mounted = {
        j["metadata"]["name"]: [
            v["persistentVolumeClaim"]["claimName"]
            for v in j["spec"]["template"]["spec"].get("volumes") or []
        ]
        for j in jobs
    }
    assert mounted == {
        "keys-workers-0": ["ckpt-keys-workers-0"],
        "keys-workers-1": ["ckpt-keys-workers-1"],
    }
    # whenDeleted Delete, as the key says: the claims go with the JobSet (deleted; this tier
    # has no controller that takes their protection finalizer off).
    await client.delete(api.JOBSETS, "keys", namespace)
    listed = await wait_for(
        lambda: client.list(CLAIMS, namespace),
        lambda found: all(c["metadata"].get("deletionTimestamp") for c in found["items"]),
        "the claims deleted",
    )
    assert len(listed["items"]) == 2


async def test_a_rule_across_fields_makes_the_jobset_wait_with_the_keys_named(
    controller: RunningController, client: KubeClient, namespace: str
) -> None:
    """The admission policy checks each value; the rules across a policy's fields (here: a
    restore from a VolumeSnapshot it does not name) are the controller's: SpecInvalid, no Job,
    no claim."""
    body = checkpoints("across", {f"{CKPT}restorePolicy.source": "VolumeSnapshot"})
    await client.create(api.JOBSETS, body, namespace)
    found = await wait_condition(client, namespace, "across", api.SPEC_INVALID)
    invalid = condition(found, api.SPEC_INVALID)
    assert invalid is not None and invalid["message"] == (
        "spec: restorePolicy.volumeSnapshotName is required when "
        "restorePolicy.source is VolumeSnapshot, and must be left out otherwise (as completed by "
        f"the annotations {CKPT}*)"
    )
    await settled(controller, client)
    assert await jobs_of(client, namespace, "across") == []
    assert await claim_names(client, namespace) == []
    # Mended by its annotation alone: it runs.
    js = await get_jobset(client, namespace, "across")
    js["metadata"]["annotations"][f"{CKPT}restorePolicy.source"] = "NewestSnapshot"
    js["metadata"]["annotations"][f"{CKPT}restorePolicy.whenMissing"] = "CreateEmpty"
    await client.replace(api.JOBSETS, js, namespace)
    await wait_condition(client, namespace, "across", api.SPEC_INVALID, "False")
