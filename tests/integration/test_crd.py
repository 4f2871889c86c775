"""The JobSet CRD against the real API server: drift, examples, every CEL rule, defaults, pruning.

Rejections are checked with the exact message the API server returns. Creates that are expected to
fail use ``dryRun=All`` (validation runs in full, nothing is stored).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from controller import features
from controller.api import crdgen, schema
from controller.api.validation import Contract
from controller.jobset.placement import EXCLUSIVE_TOPOLOGY as EXCLUSIVE
from controller.jobset.placement import NODE_SELECTOR_STRATEGY as NODE_SELECTOR
from localcluster import gotypes
from localcluster.cluster import LocalCluster
from tests.helpers import Kube, wait_for
from tests.support.crd import CRD_FILE, REPO, install_crd
from tests.support.examples import EXAMPLES, SUPPORTED

Obj = dict[str, Any]
Mutation = Callable[[Obj], None]
API = "/apis/jobset.x-k8s.io/v1alpha2"


# ------------------------------------------------------------------ manifests


def pvc(name: str, storage: str = "1Gi", **metadata: Any) -> Obj:
    return {
        "metadata": {"name": name, **metadata},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}},
    }


def rjob(name: str, replicas: int = 1, completions: int = 1, mounts: tuple[str, ...] = ()) -> Obj:
    return {
        "name": name,
        "replicas": replicas,
        "template": {
            "spec": {
                "completions": completions,
                "parallelism": completions,
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox",
                                "volumeMounts": [{"name": m, "mountPath": f"/{m}"} for m in mounts],
                            }
                        ],
                    }
                },
            }
        },
    }


RESTORE_SNAPSHOT_NAME = (
    "restorePolicy.volumeSnapshotName is required when restorePolicy.source is VolumeSnapshot, "
    "and must be left out otherwise"
)
SUSPEND_SNAPSHOT_RESTORES = (
    "retentionPolicy.whenSuspended: Snapshot requires restorePolicy.source: NewestSnapshot (the "
    "claims it deletes are made again from their snapshots when the JobSet is resumed)"
)
SUSPEND_SNAPSHOT_NOT_CREATED = (
    "retentionPolicy.whenSuspended: Snapshot cannot be used with creationPolicy.whenSuspended: "
    "Create (the claims it deletes would be made again at once, while the JobSet is suspended)"
)


def base() -> Obj:
    """A valid JobSet that uses most features, so a mutation breaks exactly one rule."""
    workers = rjob("workers", replicas=2, completions=2, mounts=("data", "ckpt"))
    workers["dependsOn"] = [{"name": "init", "status": "Complete"}]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "train"},
        "spec": {
            "replicatedJobs": [rjob("init", mounts=("data",)), workers],
            "successPolicy": {"operator": "All", "targetReplicatedJobs": ["workers"]},
            "failurePolicy": {
                "maxRestarts": 1,
                "rules": [
                    {
                        "name": "fatal",
                        "action": "FailJobSet",
                        "onJobFailureReasons": ["PodFailurePolicy"],
                        "targetReplicatedJobs": ["workers"],
                    }
                ],
            },
            "coordinator": {"replicatedJob": "workers", "jobIndex": 1, "podIndex": 1},
            "volumeClaimPolicies": [
                {"templates": [pvc("data")], "targetReplicatedJobs": ["init", "workers"]},
                {"scope": "Job", "templates": [pvc("ckpt")], "targetReplicatedJobs": ["workers"]},
            ],
        },
    }


def spec(js: Obj) -> Obj:
    result: Obj = js["spec"]
    return result


def rj(js: Obj, index: int) -> Obj:
    result: Obj = js["spec"]["replicatedJobs"][index]
    return result


def pod(js: Obj, index: int) -> Obj:
    result: Obj = rj(js, index)["template"]["spec"]["template"]["spec"]
    return result


def container(js: Obj, index: int) -> Obj:
    result: Obj = pod(js, index)["containers"][0]
    return result


def policy(js: Obj, index: int) -> Obj:
    result: Obj = js["spec"]["volumeClaimPolicies"][index]
    return result


def without_volumes(js: Obj) -> None:
    del js["spec"]["volumeClaimPolicies"]
    for index in range(len(js["spec"]["replicatedJobs"])):
        container(js, index)["volumeMounts"] = []


# ------------------------------------------------------------------ API helpers


@pytest.fixture
async def jobsets(kube: Kube, namespace: str) -> str:
    """Install the CRD; return the namespace's jobsets collection path."""
    await install_crd(kube)
    return f"{API}/namespaces/{namespace}/jobsets"


async def create(kube: Kube, path: str, body: Obj, *, dry_run: bool = False) -> Obj:
    query = "?dryRun=All" if dry_run else ""
    result: Obj = await kube.raw("POST", path + query, body)
    return result


async def replace(kube: Kube, path: str, body: Obj) -> Obj:
    result: Obj = await kube.raw("PUT", f"{path}/{body['metadata']['name']}", body)
    return result


def accepted(response: Obj) -> Obj:
    assert response.get("kind") == "JobSet", f"expected the JobSet to be accepted: {response}"
    return response


def rejection(response: Obj) -> str:
    assert response.get("kind") == "Status", f"expected a rejection, got {response.get('kind')}"
    assert response.get("code") == 422, response
    message: str = response["message"]
    return message


# ------------------------------------------------------------------ (a) drift


async def test_committed_crd_matches_the_generator(apiserver_cluster: LocalCluster) -> None:
    generated = await crdgen.generate(apiserver_cluster.kubeconfig)
    assert set(generated) == {
        crdgen.DEFAULT_OUT,
        crdgen.DEFAULT_POLICY_OUT,
        crdgen.BINDING_OUT,
        crdgen.ALPHA_OUT,
        crdgen.ALPHA_POLICY_OUT,
        crdgen.API_DOCS,
        crdgen.EMBEDDED_OUT,
    }
    for path, text in generated.items():
        committed = (REPO / path).read_text()
        assert text == committed, (
            f"{path} is out of date with controller/api/schema.py or the Kubernetes OpenAPI: "
            "run `make crd` and commit the result"
        )
        size = len(committed.encode())
        assert size < 1024 * 1024, f"{path} is {size} bytes; etcd's object limit is 1.5 MiB"


def test_committed_go_field_table_matches_the_go_types() -> None:
    """controller/api/gofields.py (which values the immutability rules treat as absent) is what
    the Go tool reads from upstream JobSet's and Kubernetes' Go types today."""
    assert gotypes.OUT.read_text() == gotypes.render(gotypes.read()), (
        f"{gotypes.OUT} is out of date with the Go types: run `make crd` and commit the result"
    )


async def test_render_reads_the_crd_a_cluster_serves(kube: Kube) -> None:
    """``render --crd`` with the CRD as the API server serves it (``kubectl get crd -o yaml``:
    status, managed fields and all): the contract is built from it and answers as the server."""
    await install_crd(kube)
    path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{schema.CRD_NAME}"
    served = await kube.raw("GET", path)
    contract = Contract.from_crd(served)
    assert contract.refusal(base()) is None
    body = base()
    spec(body)["replicatedJobs"][0]["replicas"] = -1
    refusal = contract.refusal(body)
    assert refusal is not None and "should be greater than or equal to 0" in refusal.message


async def test_crd_is_established_with_printer_columns(
    kube: Kube, jobsets: str, namespace: str
) -> None:
    accepted(await create(kube, jobsets, base()))
    table = await kube.api.call_api(
        jobsets,
        "GET",
        header_params={"Accept": "application/json;as=Table;v=v1;g=meta.k8s.io"},
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    listed = await table.json()
    assert [c["name"] for c in listed["columnDefinitions"]] == [
        "Name",
        "TerminalState",
        "Restarts",
        "Completed",
        "Suspended",
        "Age",
    ]
    assert listed["rows"][0]["cells"][0] == "train"


# ------------------------------------------------------------------ (b) examples


@pytest.mark.parametrize("example", [p.name for p in SUPPORTED])
async def test_example_is_accepted(kube: Kube, jobsets: str, example: str) -> None:
    body = yaml.safe_load((EXAMPLES / example).read_text())
    stored = accepted(await create(kube, jobsets, body))
    assert stored["metadata"]["name"] == body["metadata"]["name"]
    assert [r["name"] for r in stored["spec"]["replicatedJobs"]] == [
        r["name"] for r in body["spec"]["replicatedJobs"]
    ]


# ------------------------------------------------------------------ (c) rules on create


def _set(path: Callable[[Obj], Obj], key: str, value: Any) -> Mutation:
    def mutate(js: Obj) -> None:
        path(js)[key] = value

    return mutate


def _all(*mutations: Mutation) -> Mutation:
    def mutate(js: Obj) -> None:
        for m in mutations:
            m(js)

    return mutate


def _add_rjob(new: Obj) -> Mutation:
    def mutate(js: Obj) -> None:
        js["spec"]["replicatedJobs"].append(new)

    return mutate


def _deps(*entries: str) -> list[Obj]:
    """dependsOn entries from "name:status" strings."""
    return [dict(zip(("name", "status"), e.split(":"), strict=True)) for e in entries]


def _with_earlier_and_last(extra: int, depends: int) -> Mutation:
    """Add ``extra`` replicated jobs, then one that depends on the first ``depends`` of all."""

    def mutate(js: Obj) -> None:
        for i in range(extra):
            js["spec"]["replicatedJobs"].append(rjob(f"step{i}"))
        names = [r["name"] for r in js["spec"]["replicatedJobs"]][:depends]
        js["spec"]["replicatedJobs"].append(
            rjob("last") | {"dependsOn": [{"name": n, "status": "Complete"} for n in names]}
        )

    return mutate


def _add_template(index: int, template: Obj) -> Mutation:
    def mutate(js: Obj) -> None:
        policy(js, index)["templates"].append(template)

    return mutate


def _add_mount(index: int, name: str) -> Mutation:
    def mutate(js: Obj) -> None:
        container(js, index)["volumeMounts"].append({"name": name, "mountPath": f"/x{name}"})

    return mutate


def _rename(name: str) -> Mutation:
    return _set(lambda js: js["metadata"], "name", name)


def _volume_policy(js: Obj) -> None:
    """Use the volumePolicy spelling for the shared template instead of volumeClaimPolicies."""
    del js["spec"]["volumeClaimPolicies"][0]
    js["spec"]["volumePolicy"] = {
        "replicatedJobs": [{"name": "init"}, {"name": "workers"}],
        "volumeClaimTemplates": [pvc("data")],
    }


def _template(index: int, change: Callable[[Obj], None]) -> Mutation:
    """Change the first template of volume claim policy ``index``."""

    def mutate(js: Obj) -> None:
        change(policy(js, index)["templates"][0])

    return mutate


def _modes(*modes: str) -> Mutation:
    return _template(1, lambda t: t["spec"].update(accessModes=list(modes)))


def _storage_request(value: Any) -> Mutation:
    return _template(1, lambda t: t["spec"]["resources"]["requests"].update(storage=value))


def _meta(key: str, value: Obj) -> Mutation:
    return _template(1, lambda t: t["metadata"].update({key: value}))


TEMPLATE_MESSAGES = {
    "modes-required": "a volume claim template must list at least one access mode in "
    "spec.accessModes: ckpt",
    "modes-valid": "spec.accessModes of a volume claim template may contain only ReadWriteOnce, "
    "ReadOnlyMany, ReadWriteMany, ReadWriteOncePod: ckpt",
    "rwop": "spec.accessModes of a volume claim template cannot combine ReadWriteOncePod with "
    "other access modes: ckpt",
    "storage-required": "a volume claim template must request storage in "
    "spec.resources.requests.storage: ckpt",
    "storage-positive": "spec.resources.requests.storage of a volume claim template must be "
    "greater than zero: ckpt",
    "label-keys": "metadata.labels keys of a volume claim template must be qualified names: an "
    "optional DNS subdomain prefix and '/', then at most 63 letters, digits, '-', '_' or '.', "
    "starting and ending with a letter or digit",
    "label-values": "metadata.labels values of a volume claim template must be empty or letters, "
    "digits, '-', '_' or '.', starting and ending with a letter or digit",
    "annotation-keys": "metadata.annotations keys of a volume claim template must be qualified "
    "names (as label keys, but letters of either case)",
    "annotations-size": "metadata.annotations of a volume claim template must not exceed 262144 "
    "bytes in all (keys and values): ckpt",
}

# What Kubernetes refuses in a PersistentVolumeClaim (ValidatePersistentVolumeClaimSpec, label and
# annotation syntax), refused in the claim templates of both spellings; "" = accepted.
CLAIM_TEMPLATE_CASES: list[tuple[str, Mutation, str]] = [
    ("template-access-modes-required", _modes(), TEMPLATE_MESSAGES["modes-required"]),
    (
        "template-access-modes-required-absent",
        _template(1, lambda t: t["spec"].pop("accessModes")),
        "spec.volumeClaimPolicies[1].templates[0].spec.accessModes: Required value: "
        + TEMPLATE_MESSAGES["modes-required"],
    ),
    (
        "template-access-modes-required-no-spec",
        _template(1, lambda t: t.pop("spec")),
        TEMPLATE_MESSAGES["modes-required"],
    ),
    (
        "template-access-modes-valid",
        _modes("ReadWriteOnce", "ReadWriteSometimes"),
        "spec.volumeClaimPolicies[1].templates[0].spec.accessModes: Invalid value: "
        + TEMPLATE_MESSAGES["modes-valid"],
    ),
    (
        "template-access-modes-valid-all-four",
        _modes("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadOnlyMany"),
        "",
    ),
    (
        "template-access-modes-bounded",
        _modes(*["ReadWriteOnce"] * 5),
        "spec.volumeClaimPolicies[1].templates[0].spec.accessModes: Too many: 5: must have at "
        "most 4 items",
    ),
    (
        "template-read-write-once-pod-alone",
        _modes("ReadWriteOnce", "ReadWriteOncePod"),
        (TEMPLATE_MESSAGES["rwop"]),
    ),
    ("template-read-write-once-pod-alone-accepted", _modes("ReadWriteOncePod"), ""),
    (
        "template-read-write-once-pod-alone-twice",
        _modes("ReadWriteOncePod", "ReadWriteOncePod"),
        "",
    ),
    (
        "template-read-write-once-pod-alone-volume-policy",
        _all(
            _volume_policy,
            lambda js: spec(js)["volumePolicy"]["volumeClaimTemplates"][0]["spec"].update(
                accessModes=["ReadWriteOncePod", "ReadWriteMany"]
            ),
        ),
        "spec.volumePolicy.volumeClaimTemplates[0].spec.accessModes: Invalid value: "
        "spec.accessModes of a volume claim template cannot combine ReadWriteOncePod with other "
        "access modes: data",
    ),
    (
        "template-storage-required",
        _template(1, lambda t: t["spec"]["resources"].update(requests={"cpu": "1"})),
        "spec.volumeClaimPolicies[1].templates[0].spec.resources: Required value: "
        + TEMPLATE_MESSAGES["storage-required"],
    ),
    (
        "template-storage-required-no-resources",
        _template(1, lambda t: t["spec"].pop("resources")),
        TEMPLATE_MESSAGES["storage-required"],
    ),
    (
        "template-storage-required-volume-policy",
        _all(
            _volume_policy,
            lambda js: spec(js)["volumePolicy"]["volumeClaimTemplates"][0]["spec"].pop("resources"),
        ),
        "spec.volumePolicy.volumeClaimTemplates[0].spec.resources: Required value: a volume "
        "claim template must request storage in spec.resources.requests.storage: data",
    ),
    (
        "template-storage-positive",
        _storage_request("0"),
        "spec.volumeClaimPolicies[1].templates[0].spec.resources.requests: Invalid value: "
        + TEMPLATE_MESSAGES["storage-positive"],
    ),
    (
        "template-storage-positive-zero-int",
        _storage_request(0),
        (TEMPLATE_MESSAGES["storage-positive"]),
    ),
    (
        "template-storage-positive-zero-gi",
        _storage_request("0Gi"),
        (TEMPLATE_MESSAGES["storage-positive"]),
    ),
    (
        "template-storage-positive-negative",
        _storage_request("-1Gi"),
        (TEMPLATE_MESSAGES["storage-positive"]),
    ),
    ("template-storage-positive-one-byte", _storage_request("1"), ""),
    ("template-storage-positive-milli", _storage_request("1m"), ""),
    (
        "template-label-keys",
        _meta("labels", {"tier": "hot", "bad key": "x"}),
        "spec.volumeClaimPolicies[1].templates[0].metadata.labels: Invalid value: "
        + TEMPLATE_MESSAGES["label-keys"]
        + ": bad key",
    ),
    (
        "template-label-keys-prefix",
        _meta("labels", {"Example.com/tier": "hot"}),
        TEMPLATE_MESSAGES["label-keys"] + ": Example.com/tier",
    ),
    (
        "template-label-keys-name-length",
        _meta("labels", {"example.com/" + "n" * 64: "x"}),
        TEMPLATE_MESSAGES["label-keys"] + ": example.com/" + "n" * 64,
    ),
    (
        "template-label-keys-accepted",
        _meta("labels", {"example.com/Tier_1.a": "Hot_1.b", "app": "", "a" * 63: "b" * 63}),
        "",
    ),
    (
        "template-label-values",
        _meta("labels", {"tier": "hot!"}),
        "spec.volumeClaimPolicies[1].templates[0].metadata.labels[tier]: Invalid value: "
        '"hot!": ' + TEMPLATE_MESSAGES["label-values"] + ": hot!",
    ),
    (
        "template-label-values-edge",
        _meta("labels", {"tier": "-hot"}),
        TEMPLATE_MESSAGES["label-values"] + ": -hot",
    ),
    (
        "template-label-values-length",
        _meta("labels", {"tier": "v" * 64}),
        "spec.volumeClaimPolicies[1].templates[0].metadata.labels.tier: Too long: may not be "
        "more than 63 bytes",
    ),
    (
        "template-labels-bounded",
        _meta("labels", {f"l{i}": "x" for i in range(33)}),
        "spec.volumeClaimPolicies[1].templates[0].metadata.labels: Too many: 33: must have at "
        "most 32 items",
    ),
    (
        "template-label-keys-volume-policy",
        _all(
            _volume_policy,
            lambda js: spec(js)["volumePolicy"]["volumeClaimTemplates"][0]["metadata"].update(
                labels={"/x": "y"}
            ),
        ),
        "spec.volumePolicy.volumeClaimTemplates[0].metadata.labels: Invalid value: "
        + TEMPLATE_MESSAGES["label-keys"]
        + ": /x",
    ),
    (
        "template-annotation-keys",
        _meta("annotations", {"note": "x", "a note": "x"}),
        "spec.volumeClaimPolicies[1].templates[0].metadata.annotations: Invalid value: "
        + TEMPLATE_MESSAGES["annotation-keys"]
        + ": a note",
    ),
    (
        "template-annotation-keys-accepted",
        _meta("annotations", {"Example.COM/Note": "any value: at all!", "X_y.Z": ""}),
        "",
    ),
    (
        "template-annotations-size",
        _meta("annotations", {"a": "x" * (256 * 1024)}),
        "spec.volumeClaimPolicies[1].templates[0].metadata.annotations: Invalid value: "
        + TEMPLATE_MESSAGES["annotations-size"],
    ),
    ("template-annotations-size-at-limit", _meta("annotations", {"a": "x" * (256 * 1024 - 1)}), ""),
]


def _job_scope_collision(replicas: int, rjob_name: str = "train-workers") -> Mutation:
    """Job-scope templates ckpt and ckpt-train (JobSet train): replicated job workers' claim of
    ckpt-train and replicated job train-workers' claim of ckpt are both
    ckpt-train-train-workers-<jobIndex> once train-workers has a Job."""

    def mutate(js: Obj) -> None:
        policy(js, 1)["templates"].append(pvc("ckpt-train"))
        policy(js, 1)["targetReplicatedJobs"].append(rjob_name)
        container(js, 1)["volumeMounts"].append({"name": "ckpt-train", "mountPath": "/c2"})
        spec(js)["replicatedJobs"].append(
            rjob(rjob_name, replicas=replicas, mounts=("ckpt", "ckpt-train"))
        )

    return mutate


def _jobset_scope_collision(name: str, replicas: int) -> Mutation:
    """JobSet-scope template ckpt-<name>-w and Job-scope template ckpt of replicated job w-run:
    with the JobSet named run-<i>, ckpt-run-<i>-w-run-<i> is both the shared claim and the claim
    of Job <i> of w-run (there when replicas > <i>)."""

    def mutate(js: Obj) -> None:
        js["metadata"]["name"] = name
        shared = f"ckpt-{name}-w"
        policy(js, 0)["templates"].append(pvc(shared))
        container(js, 0)["volumeMounts"].append({"name": shared, "mountPath": "/shared"})
        policy(js, 1)["targetReplicatedJobs"].append("w-run")
        spec(js)["replicatedJobs"].append(rjob("w-run", replicas=replicas, mounts=("ckpt",)))

    return mutate


CLAIM_COLLISION = (
    "two volume claim templates could make claims of the same name "
    "(<template>-<jobSet>-<replicatedJob>-<jobIndex> for scope Job, <template>-<jobSet> for scope "
    "JobSet, the replicated job name in lower case): rename a template or a replicated job"
)

CLAIM_COLLISION_CASES: list[tuple[str, Mutation, str]] = [
    (
        "claim-names-unique",
        _job_scope_collision(1),
        f"spec: {CLAIM_COLLISION}: template ckpt-train",
    ),
    (
        "claim-names-unique-upper-case",
        _job_scope_collision(3, "Train-Workers"),
        f"{CLAIM_COLLISION}: template ckpt-train",
    ),
    # the same names, but train-workers has no Job: no claim of ckpt for it
    ("claim-names-unique-no-replicas", _job_scope_collision(0), ""),
    (
        "claim-names-unique-jobset-scope",
        _jobset_scope_collision("run-0", 1),
        f"{CLAIM_COLLISION}: template ckpt-run-0-w",
    ),
    # run-1: the claim of Job 1 of w-run would collide, but w-run has only Job 0
    ("claim-names-unique-jobset-scope-index-beyond", _jobset_scope_collision("run-1", 1), ""),
    (
        # template names that extend each other are fine when no replicated job name completes
        # them: ckpt-train-workers-<i> and ckpt-meta-train-workers-<i>, data-train and
        # data-x-train
        "claim-names-unique-prefixes-allowed",
        _all(
            _add_template(1, pvc("ckpt-meta")),
            _add_mount(1, "ckpt-meta"),
            _add_template(0, pvc("data-x")),
            _add_mount(0, "data-x"),
        ),
        "",
    ),
]

CREATE_CASES: list[tuple[str, Mutation, str]] = [
    # No replicated jobs is accepted, as upstream (test_jobset_without_replicated_jobs_*).
    (
        "no-replicated-jobs-accepted",
        lambda js: js.update(spec={"replicatedJobs": []}),
        "",
    ),
    (
        "child-jobs-bounded",
        _all(
            _set(lambda js: rj(js, 0), "replicas", 6000),
            _set(lambda js: rj(js, 1), "replicas", 6000),
        ),
        "the replicas of all replicated jobs must add up to at most 10000 child Jobs",
    ),
    (
        "replicated-job-names-unique",
        _add_rjob(rjob("Workers")),
        "replicatedJob names must be unique, also when compared without case (child Job names "
        "use the lower-case form): workers",
    ),
    (
        "success-policy-targets",
        _set(lambda js: spec(js)["successPolicy"], "targetReplicatedJobs", ["workers", "nope"]),
        "successPolicy.targetReplicatedJobs must name replicated jobs of this JobSet: nope",
    ),
    (
        "failure-rule-targets",
        _set(lambda js: spec(js)["failurePolicy"]["rules"][0], "targetReplicatedJobs", ["gone"]),
        "failurePolicy.rules[].targetReplicatedJobs must name replicated jobs of this JobSet: gone",
    ),
    (
        "failure-rule-names-unique",
        lambda js: spec(js)["failurePolicy"]["rules"].append(
            {"name": "fatal", "action": "RestartJobSet"}
        ),
        "failurePolicy rule names must be unique (a rule without a name is called "
        "failurePolicyRule<index>): fatal",
    ),
    (
        "failure-rule-names-unique-default",
        _all(
            lambda js: spec(js)["failurePolicy"]["rules"].append({"action": "RestartJobSet"}),
            _set(lambda js: spec(js)["failurePolicy"]["rules"][0], "name", "failurePolicyRule1"),
        ),
        "failurePolicy rule names must be unique (a rule without a name is called "
        "failurePolicyRule<index>): failurePolicyRule1",
    ),
    (
        "failure-rule-name-format",
        _set(lambda js: spec(js)["failurePolicy"]["rules"][0], "name", "1st:rule"),
        "a failure policy rule name must start with a letter, contain only letters, digits, "
        "'_', ',' and ':', and end with a letter, digit or '_': 1st:rule",
    ),
    (
        "failure-rule-name-length",
        _set(lambda js: spec(js)["failurePolicy"]["rules"][0], "name", "r" * 129),
        "spec.failurePolicy.rules[0].name: Too long: may not be more than 128 bytes",
    ),
    (
        "failure-rule-reasons",
        _set(
            lambda js: spec(js)["failurePolicy"]["rules"][0],
            "onJobFailureReasons",
            ["PodFailurePolicy", "OOMKilled"],
        ),
        "onJobFailureReasons may contain only BackoffLimitExceeded, DeadlineExceeded, "
        "FailedIndexes, MaxFailedIndexesExceeded, PodFailurePolicy: OOMKilled",
    ),
    (
        "failure-rule-action",
        _set(lambda js: spec(js)["failurePolicy"]["rules"][0], "action", "Ignore"),
        'spec.failurePolicy.rules[0].action: Unsupported value: "Ignore"',
    ),
    (
        "restart-job-gated",
        _set(lambda js: spec(js)["failurePolicy"]["rules"][0], "action", "RestartJob"),
        "RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not allowed "
        "when RestartJob feature gate is disabled",
    ),
    (
        "restart-job-gated-ignore-max",
        _set(
            lambda js: spec(js)["failurePolicy"]["rules"][0],
            "action",
            "RestartJobAndIgnoreMaxRestarts",
        ),
        "RestartJob and RestartJobAndIgnoreMaxRestarts failure policy actions are not allowed "
        "when RestartJob feature gate is disabled",
    ),
    (
        "restart-strategy",
        _set(lambda js: spec(js)["failurePolicy"], "restartStrategy", "InPlace"),
        'spec.failurePolicy.restartStrategy: Unsupported value: "InPlace"',
    ),
    (
        # upstream's, behind its InPlaceRestart gate
        "restart-strategy-in-place-restart",
        _set(lambda js: spec(js)["failurePolicy"], "restartStrategy", "InPlaceRestart"),
        'spec.failurePolicy.restartStrategy: Unsupported value: "InPlaceRestart"',
    ),
    (
        "depends-on-first",
        _set(lambda js: rj(js, 0), "dependsOn", [{"name": "workers", "status": "Ready"}]),
        "the first replicated job cannot have dependsOn: nothing starts before it: init",
    ),
    (
        "depends-on-earlier",
        _all(
            _add_rjob(rjob("eval")),
            _set(lambda js: rj(js, 1), "dependsOn", [{"name": "eval", "status": "Ready"}]),
        ),
        "dependsOn must name a replicated job listed before this one: workers depends on eval",
    ),
    (
        "depends-on-earlier-second-entry",
        _add_rjob(rjob("eval") | {"dependsOn": _deps("init:Ready", "ghost:Complete")}),
        "dependsOn must name a replicated job listed before this one: eval depends on ghost",
    ),
    (
        "depends-on-itself",
        _add_rjob(rjob("eval") | {"dependsOn": _deps("init:Ready", "eval:Ready")}),
        "dependsOn must name a replicated job listed before this one: eval depends on eval",
    ),
    (
        "depends-on-two",
        _add_rjob(rjob("eval") | {"dependsOn": _deps("init:Ready", "workers:Ready")}),
        "",
    ),
    ("depends-on-five", _with_earlier_and_last(3, 5), ""),
    (
        "depends-on-six",
        _with_earlier_and_last(4, 6),
        "spec.replicatedJobs[6].dependsOn: Too many: 6: must have at most 5 items",
    ),
    (
        "depends-on-duplicate",
        _add_rjob(rjob("eval") | {"dependsOn": _deps("init:Ready", "init:Complete")}),
        'spec.replicatedJobs[2].dependsOn[1]: Duplicate value: {"name":"init"}',
    ),
    (
        "depends-on-status",
        _set(lambda js: rj(js, 1), "dependsOn", [{"name": "init", "status": "Started"}]),
        'spec.replicatedJobs[1].dependsOn[0].status: Unsupported value: "Started"',
    ),
    (
        "startup-policy-or-depends-on",
        _set(spec, "startupPolicy", {"startupPolicyOrder": "InOrder"}),
        "startupPolicy InOrder and dependsOn cannot be combined: use dependsOn",
    ),
    (
        "coordinator-replicated-job",
        _set(spec, "coordinator", {"replicatedJob": "leader"}),
        "coordinator.replicatedJob must name a replicated job of this JobSet: leader",
    ),
    (
        "coordinator-job-index",
        _set(lambda js: spec(js)["coordinator"], "jobIndex", 2),
        "coordinator.jobIndex must be less than the replicas of the coordinator's replicated "
        "job: workers",
    ),
    (
        "coordinator-pod-index",
        _set(lambda js: spec(js)["coordinator"], "podIndex", 2),
        "coordinator.podIndex must be less than the completions of the coordinator's "
        "replicated job: workers",
    ),
    # Upstream's webhook refuses a coordinator whose replicated job has no completions; here the
    # Job API refuses its Indexed Jobs (completions is required), which the JobSet reports.
    (
        "coordinator-pod-index-without-completions",
        lambda js: rj(js, 1)["template"]["spec"].pop("completions"),
        "",
    ),
    (
        "coordinator-indexed",
        _set(lambda js: rj(js, 1)["template"]["spec"], "completionMode", "NonIndexed"),
        "the coordinator's replicated job must use completionMode Indexed: workers",
    ),
    (
        "coordinator-address",
        _set(spec, "network", {"subdomain": "s" * 46}),
        "the coordinator's address (<jobSet>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>) "
        "must fit in a label value of at most 63 characters: shorten the JobSet, replicated job "
        "or subdomain name",
    ),
    # train-workers-1-1.<45 characters>: 63, the longest label value
    ("coordinator-address-fits", _set(spec, "network", {"subdomain": "s" * 45}), ""),
    (
        "child-job-names-length",
        _rename("a" * 54),
        "child Job names (<jobSet>-<replicatedJob>-<jobIndex>) must be DNS-1035 labels: the "
        "JobSet name must start with a letter, both names may contain only letters, digits and "
        "'-' (the replicated job name is used in lower case), and the longest Job name must fit "
        "in 63 characters: replicatedJob workers",
    ),
    (
        "child-job-names-jobset-start",
        _rename("1train"),
        "child Job names (<jobSet>-<replicatedJob>-<jobIndex>) must be DNS-1035 labels",
    ),
    (
        "child-job-names-characters",
        _add_rjob(rjob("my_job")),
        "the longest Job name must fit in 63 characters: replicatedJob my_job",
    ),
    (
        "pod-names",
        _rename("a" * 46),
        "pod names (<jobSet>-<replicatedJob>-<jobIndex>-<podIndex>-<suffix>) must be DNS-1035 "
        "labels of at most 63 characters: shorten the JobSet or replicated job name: "
        "replicatedJob workers",
    ),
    (
        "subdomain-format",
        _set(spec, "network", {"subdomain": "Train_Net"}),
        "spec.network.subdomain must be a DNS-1035 label of at most 63 characters: a DNS-1035 "
        "label must consist of lower case alphanumeric characters or '-'",
    ),
    (
        "subdomain-length",
        _set(spec, "network", {"subdomain": "s" * 64}),
        "spec.network.subdomain must be a DNS-1035 label of at most 63 characters: must be no "
        "more than 63 characters",
    ),
    (
        "replicas-times-parallelism",
        _all(
            _set(lambda js: rj(js, 0), "replicas", 3),
            _set(lambda js: rj(js, 0)["template"]["spec"], "parallelism", 1_000_000_000),
        ),
        "replicas times the template's parallelism must not exceed 2147483647: init",
    ),
    (
        "group-name-format",
        _set(lambda js: rj(js, 0), "groupName", "Group_1"),
        "groupName must be a DNS-1035 label of at most 63 characters: a DNS-1035 label must "
        "consist of lower case alphanumeric characters or '-'",
    ),
    (
        "exclusive-topology-key-empty",
        _set(lambda js: rj(js, 0)["template"], "metadata", {"annotations": {EXCLUSIVE: ""}}),
        f"the {EXCLUSIVE} annotation of a replicated job's template must name a node label key "
        "(1 to 317 characters): init",
    ),
    (
        "exclusive-topology-key-long",
        _set(lambda js: rj(js, 1)["template"], "metadata", {"annotations": {EXCLUSIVE: "a" * 318}}),
        f"the {EXCLUSIVE} annotation of a replicated job's template must name a node label key "
        "(1 to 317 characters): workers",
    ),
    (
        "exclusive-topology-key-accepted",
        _set(
            lambda js: rj(js, 1)["template"],
            "metadata",
            {"annotations": {EXCLUSIVE: "topology.kubernetes.io/zone", NODE_SELECTOR: "true"}},
        ),
        "",
    ),
    (
        "managed-by-format",
        _set(spec, "managedBy", "kueue"),
        "spec.managedBy must be a domain-prefixed path (e.g. example.com/name) of at most 63 "
        "characters: kueue",
    ),
    (
        "managed-by-length",
        _set(spec, "managedBy", "example.com/" + "x" * 60),
        "spec.managedBy must be a domain-prefixed path (e.g. example.com/name) of at most 63 "
        "characters",
    ),
    (
        "ttl-minimum",
        _set(spec, "ttlSecondsAfterFinished", -1),
        "spec.ttlSecondsAfterFinished: Invalid value: -1: spec.ttlSecondsAfterFinished in body "
        "should be greater than or equal to 0",
    ),
    (
        "replicas-minimum",
        _set(lambda js: rj(js, 0), "replicas", -1),
        "should be greater than or equal to 0",
    ),
    (
        "template-name",
        _all(_add_template(0, pvc("Scratch")), _add_mount(0, "Scratch")),
        "a volume claim template's metadata.name must be a DNS-1123 label (it names the pod "
        "volume): Scratch",
    ),
    (
        "volume-policy-template-name",
        _all(
            _volume_policy,
            lambda js: spec(js)["volumePolicy"]["volumeClaimTemplates"].append(pvc("a.b")),
            _add_mount(0, "a.b"),
        ),
        "a volume claim template's metadata.name must be a DNS-1123 label (it names the pod "
        "volume): a.b",
    ),
    (
        "template-name-required",
        _set(lambda js: policy(js, 0)["templates"][0], "metadata", {"labels": {"a": "b"}}),
        "spec.volumeClaimPolicies[0].templates[0].metadata.name: Required value",
    ),
    (
        "template-namespace",
        _set(lambda js: policy(js, 0)["templates"][0]["metadata"], "namespace", "other"),
        "a volume claim template must not set metadata.namespace: claims are made in the "
        "JobSet's namespace: data",
    ),
    (
        "volume-policy-template-namespace",
        _all(
            _volume_policy,
            lambda js: spec(js)["volumePolicy"]["volumeClaimTemplates"][0]["metadata"].update(
                namespace="other"
            ),
        ),
        "a volume claim template must not set metadata.namespace: claims are made in the "
        "JobSet's namespace: data",
    ),
    (
        "template-names-unique",
        _add_template(1, pvc("data")),
        "volume claim template names must be unique across volumeClaimPolicies and "
        "volumePolicy: data",
    ),
    (
        "template-names-unique-spellings",
        lambda js: spec(js).update(
            volumePolicy={"volumeClaimTemplates": [pvc("ckpt")]},
        ),
        "volume claim template names must be unique across volumeClaimPolicies and "
        "volumePolicy: ckpt",
    ),
    (
        "volume-targets",
        _set(lambda js: policy(js, 1), "targetReplicatedJobs", ["workers", "trainer"]),
        "volume claim policies must target replicated jobs of this JobSet: trainer",
    ),
    (
        "volume-targets-volume-policy",
        _all(
            _volume_policy,
            lambda js: spec(js)["volumePolicy"]["replicatedJobs"].append({"name": "trainer"}),
        ),
        "volume claim policies must target replicated jobs of this JobSet: trainer",
    ),
    (
        "template-mounted",
        _add_template(1, pvc("scratch")),
        "every volume claim template must be mounted by a replicated job it targets (a "
        "volumeMount with the template's name): scratch",
    ),
    (
        "template-mounted-by-init-container",
        _all(
            _add_template(1, pvc("scratch")),
            lambda js: pod(js, 1).update(
                initContainers=[
                    {
                        "name": "fetch",
                        "image": "busybox",
                        "volumeMounts": [{"name": "scratch", "mountPath": "/s"}],
                    }
                ]
            ),
            _rename("accepted"),
        ),
        "",
    ),
    (
        "untargeted-mount",
        _add_mount(0, "ckpt"),
        "a replicated job that a volume claim policy does not target must not mount its "
        "templates, unless its pod template defines a volume of that name itself: init",
    ),
    (
        "untargeted-mount-volume-policy",
        _all(
            _volume_policy,
            lambda js: spec(js)["volumePolicy"].update(replicatedJobs=[{"name": "workers"}]),
        ),
        "a replicated job that a volume claim policy does not target must not mount its "
        "templates, unless its pod template defines a volume of that name itself: init",
    ),
    (
        "template-volume-name-free",
        lambda js: pod(js, 1).update(volumes=[{"name": "data", "emptyDir": {}}]),
        "a replicated job that gets a volume claim template must not define a pod volume of "
        "the same name: workers",
    ),
    (
        "template-volume-name-free-default-targets",
        _all(
            lambda js: policy(js, 0).pop("targetReplicatedJobs"),
            lambda js: pod(js, 0).update(volumes=[{"name": "data", "emptyDir": {}}]),
        ),
        "a replicated job that gets a volume claim template must not define a pod volume of "
        "the same name: init",
    ),
    (
        # init is not targeted by ckpt's policy and defines its own volume "ckpt": its pods
        # start (the volume is theirs), so mounting it is allowed
        "untargeted-mount-own-volume-allowed",
        _all(
            lambda js: pod(js, 0).update(volumes=[{"name": "ckpt", "emptyDir": {}}]),
            _add_mount(0, "ckpt"),
        ),
        "",
    ),
    (
        "untargeted-mount-other-volume",
        _all(
            lambda js: pod(js, 0).update(volumes=[{"name": "cache", "emptyDir": {}}]),
            _add_mount(0, "ckpt"),
        ),
        "a replicated job that a volume claim policy does not target must not mount its "
        "templates, unless its pod template defines a volume of that name itself: init",
    ),
    # workers is Indexed (the default) with completions: Pod scope is accepted.
    ("pod-scope-accepted", _set(lambda js: policy(js, 1), "scope", "Pod"), ""),
    (
        "pod-scope-indexed",
        _all(
            _set(lambda js: policy(js, 1), "scope", "Pod"),
            lambda js: rj(js, 1)["template"]["spec"].update(completionMode="NonIndexed"),
        ),
        "a scope Pod policy needs completionMode Indexed and completions in every replicated "
        "job it targets",
    ),
    (
        "restore-snapshot-name",
        _set(lambda js: policy(js, 1), "restorePolicy", {"source": "VolumeSnapshot"}),
        f"spec: {RESTORE_SNAPSHOT_NAME}",
    ),
    (
        "restore-from-jobset",
        _set(
            lambda js: policy(js, 1),
            "restorePolicy",
            {"source": "VolumeSnapshot", "volumeSnapshotName": "ckpt-7", "fromJobSet": "run-1"},
        ),
        "spec: restorePolicy.fromJobSet may be set only with restorePolicy.source: NewestSnapshot",
    ),
    (
        "restore-from-jobset-accepted",
        _set(
            lambda js: policy(js, 1),
            "restorePolicy",
            {"source": "NewestSnapshot", "fromJobSet": "run-1", "whenMissing": "CreateEmpty"},
        ),
        "",
    ),
    (
        "restore-snapshot-name-forbidden",
        _set(
            lambda js: policy(js, 1),
            "restorePolicy",
            {"source": "NewestSnapshot", "volumeSnapshotName": "ckpt-7"},
        ),
        f"spec: {RESTORE_SNAPSHOT_NAME}",
    ),
    (
        "restore-snapshot-name-volume-policy",
        _all(
            _volume_policy,
            lambda js: spec(js)["volumePolicy"].update(
                restorePolicy={"source": "VolumeSnapshot", "volumeSnapshotName": ""}
            ),
        ),
        f"spec: {RESTORE_SNAPSHOT_NAME}",
    ),
    (
        "restore-snapshot-name-accepted",
        _all(
            _volume_policy,
            lambda js: spec(js)["volumePolicy"].update(
                restorePolicy={"source": "VolumeSnapshot", "volumeSnapshotName": "ckpt-7"},
                snapshotPolicy={"volumeSnapshotClassName": "csi-snapclass", "historyLimit": 5},
                retentionPolicy={"whenDeleted": "Snapshot", "whenCompleted": "Snapshot"},
            ),
            _set(
                lambda js: policy(js, 0),
                "restorePolicy",
                {"source": "NewestSnapshot", "whenMissing": "CreateEmpty"},
            ),
            _set(
                lambda js: policy(js, 0),
                "retentionPolicy",
                {"whenFailed": "Snapshot", "whenScaled": "Snapshot"},
            ),
        ),
        "",
    ),
    # retentionPolicy.whenSuspended: Snapshot deletes claims while the JobSet waits: only with a
    # restore from their snapshots, and only if nothing makes them again while it waits.
    (
        "suspend-snapshot-restores",
        _set(lambda js: policy(js, 1), "retentionPolicy", {"whenSuspended": "Snapshot"}),
        f"spec: {SUSPEND_SNAPSHOT_RESTORES}",
    ),
    (
        "suspend-snapshot-restores-named-snapshot",
        _all(
            _set(lambda js: policy(js, 1), "retentionPolicy", {"whenSuspended": "Snapshot"}),
            _set(
                lambda js: policy(js, 1),
                "restorePolicy",
                {"source": "VolumeSnapshot", "volumeSnapshotName": "golden"},
            ),
        ),
        f"spec: {SUSPEND_SNAPSHOT_RESTORES}",
    ),
    (
        "suspend-snapshot-restores-volume-policy",
        _all(
            _volume_policy,
            lambda js: spec(js)["volumePolicy"].update(
                retentionPolicy={"whenSuspended": "Snapshot"}
            ),
        ),
        f"spec: {SUSPEND_SNAPSHOT_RESTORES}",
    ),
    (
        "suspend-snapshot-not-created",
        _all(
            _set(lambda js: policy(js, 1), "retentionPolicy", {"whenSuspended": "Snapshot"}),
            _set(lambda js: policy(js, 1), "restorePolicy", {"source": "NewestSnapshot"}),
            _set(lambda js: policy(js, 1), "creationPolicy", {"whenSuspended": "Create"}),
        ),
        f"spec: {SUSPEND_SNAPSHOT_NOT_CREATED}",
    ),
    (
        "suspend-snapshot-not-created-volume-policy",
        _all(
            _volume_policy,
            lambda js: spec(js)["volumePolicy"].update(
                retentionPolicy={"whenSuspended": "Snapshot"},
                restorePolicy={"source": "NewestSnapshot"},
                creationPolicy={"whenSuspended": "Create"},
            ),
        ),
        f"spec: {SUSPEND_SNAPSHOT_NOT_CREATED}",
    ),
    (
        "suspend-snapshot-accepted",
        _all(
            _volume_policy,
            lambda js: spec(js)["volumePolicy"].update(
                retentionPolicy={"whenSuspended": "Snapshot"},
                restorePolicy={"source": "NewestSnapshot"},
                snapshotPolicy={"volumeGroupSnapshotClassName": "csi-group-snapshot"},
            ),
            _set(lambda js: policy(js, 0), "retentionPolicy", {"whenSuspended": "Snapshot"}),
            _set(
                lambda js: policy(js, 0),
                "restorePolicy",
                {"source": "NewestSnapshot", "whenMissing": "CreateEmpty"},
            ),
            _set(lambda js: policy(js, 0), "creationPolicy", {"whenSuspended": "WaitForResume"}),
        ),
        "",
    ),
    (
        "retention-when-suspended-enum",
        _set(lambda js: policy(js, 1), "retentionPolicy", {"whenSuspended": "Delete"}),
        'spec.volumeClaimPolicies[1].retentionPolicy.whenSuspended: Unsupported value: "Delete"',
    ),
    (
        "restore-source-required",
        _set(lambda js: policy(js, 1), "restorePolicy", {"whenMissing": "Wait"}),
        "spec.volumeClaimPolicies[1].restorePolicy.source: Required value",
    ),
    (
        "restore-source-enum",
        _set(lambda js: policy(js, 1), "restorePolicy", {"source": "Latest"}),
        'spec.volumeClaimPolicies[1].restorePolicy.source: Unsupported value: "Latest"',
    ),
    (
        "snapshot-history-limit-bounds",
        _set(lambda js: policy(js, 1), "snapshotPolicy", {"historyLimit": 0}),
        "spec.volumeClaimPolicies[1].snapshotPolicy.historyLimit in body should be greater than "
        "or equal to 1",
    ),
    (
        "retention-snapshot-enum",
        _set(lambda js: policy(js, 1), "retentionPolicy", {"whenCompleted": "snapshot"}),
        'spec.volumeClaimPolicies[1].retentionPolicy.whenCompleted: Unsupported value: "snapshot"',
    ),
    (
        "scope-enum",
        _set(lambda js: policy(js, 1), "scope", "Node"),
        'spec.volumeClaimPolicies[1].scope: Unsupported value: "Node"',
    ),
    # A JobSet-scope claim name of 66 characters (upstream refuses more than 63): an object name.
    (
        "claim-names-jobset-scope-over-63",
        _all(_add_template(0, pvc("d" * 60)), _add_mount(0, "d" * 60)),
        "",
    ),
    (
        "claim-names",
        _rename("c" * 250),
        "claim names (<template>-<jobSet>, <template>-<jobSet>-<replicatedJob>-<jobIndex> for "
        "scope Job, and <template>-<jobSet>-<replicatedJob>-<jobIndex>-<podIndex> for scope "
        "Pod) must be at most 253 characters",
    ),
    *CLAIM_TEMPLATE_CASES,
    *CLAIM_COLLISION_CASES,
    (
        "volume-targets-set",
        _set(lambda js: policy(js, 1), "targetReplicatedJobs", ["workers", "workers"]),
        'spec.volumeClaimPolicies[1].targetReplicatedJobs[1]: Duplicate value: "workers"',
    ),
]


def expect(response: dict[str, Any], expected: str) -> None:
    """``response`` accepted when ``expected`` is empty, else refused with it in the message."""
    if not expected:
        accepted(response)
        return
    message = rejection(response)
    assert expected in message, f"expected {expected!r} in the rejection:\n{message}"


async def check_create(kube: Kube, jobsets: str, mutation: Mutation, expected: str) -> None:
    """One row of CREATE_CASES against the CRD installed at ``jobsets`` (a dry-run create)."""
    body = base()
    mutation(body)
    expect(await create(kube, jobsets, body, dry_run=True), expected)


async def check_update(
    kube: Kube, jobsets: str, before: Mutation, change: Mutation, expected: str
) -> None:
    """One row of UPDATE_CASES: a stored JobSet (``before``) replaced with ``change``."""
    body = base()
    before(body)
    stored = accepted(await create(kube, jobsets, body))
    updated = copy.deepcopy(stored)
    change(updated)
    expect(await replace(kube, jobsets, updated), expected)


@pytest.mark.parametrize(
    ("mutation", "expected"),
    [pytest.param(m, e, id=i) for i, m, e in CREATE_CASES],
)
async def test_rule_on_create(kube: Kube, jobsets: str, mutation: Mutation, expected: str) -> None:
    await check_create(kube, jobsets, mutation, expected)


async def test_base_and_uppercase_names_are_accepted(kube: Kube, jobsets: str) -> None:
    accepted(await create(kube, jobsets, base(), dry_run=True))
    upper = base()
    for index, name in enumerate(("Init", "Workers")):
        rj(upper, index)["name"] = name
    rj(upper, 1)["dependsOn"] = [{"name": "Init", "status": "Complete"}]
    spec(upper)["successPolicy"]["targetReplicatedJobs"] = ["Workers"]
    spec(upper)["failurePolicy"]["rules"][0]["targetReplicatedJobs"] = ["Workers"]
    spec(upper)["coordinator"]["replicatedJob"] = "Workers"
    policy(upper, 0)["targetReplicatedJobs"] = ["Init", "Workers"]
    policy(upper, 1)["targetReplicatedJobs"] = ["Workers"]
    accepted(await create(kube, jobsets, upper, dry_run=True))


@pytest.mark.parametrize("replicated_jobs", [None, []], ids=["absent", "empty"])
async def test_jobset_without_replicated_jobs_is_accepted(
    kube: Kube, jobsets: str, replicated_jobs: list[Obj] | None
) -> None:
    """Upstream accepts a JobSet without replicated jobs; no rule may fail to evaluate on it."""
    body = base()
    body["spec"] = {"failurePolicy": {"maxRestarts": 1}}
    if replicated_jobs is not None:
        body["spec"]["replicatedJobs"] = replicated_jobs
    stored = accepted(await create(kube, jobsets, body))
    assert stored["spec"].get("replicatedJobs", []) == []
    # Updates run the update rules too, with and without replicated jobs on either side.
    stored["spec"]["suspend"] = True
    accepted(await replace(kube, jobsets, stored))


async def test_template_without_replicated_jobs_is_unmounted_not_an_error(
    kube: Kube, jobsets: str
) -> None:
    """template-mounted must not read spec.replicatedJobs when it is absent (an evaluation
    error would be added to the response): the template is simply not mounted."""
    empty: list[Obj] = []
    for replicated_jobs in (None, empty):
        body = base()
        body["spec"] = {"volumeClaimPolicies": [{"templates": [pvc("data")]}]}
        if replicated_jobs is not None:
            body["spec"]["replicatedJobs"] = replicated_jobs
        message = rejection(await create(kube, jobsets, body, dry_run=True))
        assert message == (
            'jobsets.jobset.x-k8s.io "train" is forbidden: ValidatingAdmissionPolicy '
            "'jobsets.jobset.x-k8s.io' with binding 'jobsets.jobset.x-k8s.io' denied request: "
            "spec: every volume claim template must be mounted by a replicated job it targets (a "
            "volumeMount with the template's name): data"
        ), message


def test_every_rule_has_a_case() -> None:
    """Each CEL rule of the schema is exercised by a create or an update case."""
    covered = {case for case, _, _ in CREATE_CASES} | {case for case, *_ in UPDATE_CASES}
    job_template, claim = _embedded()
    ids = {r.id for r in schema.rules(job_template, claim)}
    missing = {i for i in ids if not any(c == i or c.startswith(i + "-") for c in covered)}
    assert not missing, f"rules without a test case: {sorted(missing)}"


@pytest.mark.parametrize("gates", [features.DEFAULT, features.ALPHA], ids=["default", "alpha"])
def test_docs_list_every_rule(gates: features.FeatureGates) -> None:
    """docs/api.md names every rule with its exact message, also the alpha CRD's."""
    docs = (CRD_FILE.parents[2] / "docs" / "api.md").read_text()
    job_template, claim = _embedded()
    for rule in schema.rules(job_template, claim, gates):
        assert f"`{rule.id}`" in docs, f"docs/api.md does not list rule {rule.id}"
        assert f"`{rule.message}`" in docs, f"docs/api.md lacks the message of {rule.id}"


def test_replicated_job_update_rules_cover_every_field() -> None:
    """A field added to replicated jobs is compared on update unless it is declared mutable."""
    rjob_schema = _rjob_schema()
    compared = {f.removeprefix("?") for f in schema.REPLICATED_JOB_FIELDS}
    assert compared | set(schema.MUTABLE_REPLICATED_JOB_FIELDS) == set(rjob_schema["properties"])
    assert not compared & set(schema.MUTABLE_REPLICATED_JOB_FIELDS)


def _rjob_schema() -> Obj:
    crd = yaml.safe_load(CRD_FILE.read_text())
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    result: Obj = root["properties"]["spec"]["properties"]["replicatedJobs"]["items"]
    return result


def _embedded() -> tuple[Obj, Obj]:
    crd = yaml.safe_load(CRD_FILE.read_text())
    root = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    rjob_schema = root["properties"]["spec"]["properties"]["replicatedJobs"]["items"]
    claim = root["properties"]["spec"]["properties"]["volumeClaimPolicies"]["items"]
    return rjob_schema["properties"]["template"], claim["properties"]["templates"]["items"]


# ------------------------------------------------------------------ (c) rules on update


def _suspended(js: Obj) -> None:
    spec(js)["suspend"] = True


def _pod_placement(js: Obj) -> None:
    template = rj(js, 1)["template"]["spec"]["template"]
    template.setdefault("metadata", {})["labels"] = {"kueue.x-k8s.io/queue": "q"}
    template["metadata"]["annotations"] = {"placed": "yes"}
    template["spec"]["nodeSelector"] = {"pool": "gpu"}
    template["spec"]["tolerations"] = [{"key": "gpu", "operator": "Exists"}]
    template["spec"]["schedulingGates"] = [{"name": "example.com/gate"}]


def _helm_template(js: Obj) -> None:
    """What Helm templates often write: empty lists, false and empty values, quantities as
    written by hand (upstream's Go types decode all of these as absent or as the same value)."""
    pod(js, 1)["hostNetwork"] = False
    pod(js, 1)["imagePullSecrets"] = []
    pod(js, 1)["initContainers"] = [{"name": "init", "image": "busybox", "args": []}]
    first = container(js, 1)
    first.update(env=[], envFrom=[], workingDir="", stdin=False)
    first["resources"] = {"requests": {"cpu": "0.5", "memory": "1024Mi"}, "limits": {}}


def _round_tripped(js: Obj) -> None:
    """The same pod template as upstream's Go types write it back (Kueue's admission patch):
    empty lists and zero values left out, ``resources: {}`` added, quantities canonical."""
    pod(js, 1).pop("hostNetwork")
    pod(js, 1).pop("imagePullSecrets")
    pod(js, 1)["initContainers"] = [{"name": "init", "image": "busybox", "resources": {}}]
    first = container(js, 1)
    for key in ("env", "envFrom", "workingDir", "stdin"):
        first.pop(key)
    first["resources"] = {"requests": {"cpu": "500m", "memory": "1Gi"}}


def _storage(index: int, value: str) -> Mutation:
    def mutate(js: Obj) -> None:
        policy(js, index)["templates"][0]["spec"]["resources"]["requests"]["storage"] = value

    return mutate


def _vp_storage(value: str) -> Mutation:
    def mutate(js: Obj) -> None:
        template = spec(js)["volumePolicy"]["volumeClaimTemplates"][0]
        template["spec"]["resources"]["requests"]["storage"] = value

    return mutate


def _noop(js: Obj) -> None:
    return None


def _replicas(index: int, value: int) -> Mutation:
    return _set(lambda js: rj(js, index), "replicas", value)


# Field path, reason and message, as the API server words a forbidden change.
REPLICATED_JOBS_IMMUTABLE = (
    "spec.replicatedJobs: spec.replicatedJobs is immutable while the JobSet is not "
    "suspended, except replicas"
)
REPLICATED_JOBS_SUSPENDED_CHANGES = (
    "spec.replicatedJobs: while the JobSet is suspended, only replicas and the "
    "labels, annotations, nodeSelector, tolerations and schedulingGates of the pod templates in "
    "spec.replicatedJobs may change"
)


# (id, mutation before create, mutation of the update, expected message; "" = accepted)
UPDATE_CASES: list[tuple[str, Mutation, Mutation, str]] = [
    (
        "network-immutable",
        _noop,
        _set(spec, "network", {"subdomain": "other"}),
        "spec.network is immutable",
    ),
    (
        "successPolicy-immutable",
        _noop,
        _set(lambda js: spec(js)["successPolicy"], "operator", "Any"),
        "spec.successPolicy is immutable",
    ),
    (
        "failurePolicy-immutable",
        _noop,
        _set(lambda js: spec(js)["failurePolicy"], "maxRestarts", 5),
        "spec.failurePolicy is immutable",
    ),
    (
        "startupPolicy-immutable",
        lambda js: rj(js, 1).pop("dependsOn"),
        _set(spec, "startupPolicy", {"startupPolicyOrder": "InOrder"}),
        "spec.startupPolicy is immutable",
    ),
    (
        "coordinator-immutable",
        _noop,
        _set(lambda js: spec(js)["coordinator"], "jobIndex", 0),
        "spec.coordinator is immutable",
    ),
    (
        "managed-by-immutable",
        _noop,
        _set(spec, "managedBy", "kueue.x-k8s.io/multikueue"),
        "spec.managedBy is immutable",
    ),
    (
        "replicated-jobs-immutable",
        _noop,
        _set(lambda js: container(js, 1), "image", "python"),
        REPLICATED_JOBS_IMMUTABLE,
    ),
    (
        "replicated-jobs-immutable-placement",
        _noop,
        _pod_placement,
        REPLICATED_JOBS_IMMUTABLE,
    ),
    (
        "replicated-jobs-immutable-replicas-raised",
        _noop,
        _all(_replicas(0, 3), _replicas(1, 5)),
        "",
    ),
    (
        "replicated-jobs-immutable-replicas-lowered",
        _replicas(1, 4),
        _all(_replicas(0, 0), _replicas(1, 2)),
        "",
    ),
    (
        "replicated-jobs-immutable-replicas-and-image",
        _noop,
        _all(_replicas(1, 3), _set(lambda js: container(js, 1), "image", "python")),
        REPLICATED_JOBS_IMMUTABLE,
    ),
    (
        "replicated-jobs-immutable-group-name",
        _noop,
        _set(lambda js: rj(js, 1), "groupName", "other"),
        REPLICATED_JOBS_IMMUTABLE,
    ),
    (
        "replicated-jobs-immutable-added",
        _noop,
        _add_rjob(rjob("eval")),
        REPLICATED_JOBS_IMMUTABLE,
    ),
    (
        # the other rules still apply to the new replicas: here the Job name length
        "replicated-jobs-immutable-replicas-job-names",
        _all(
            lambda js: spec(js).pop("coordinator"),
            _set(lambda js: rj(js, 0)["template"]["spec"], "completionMode", "NonIndexed"),
            _set(lambda js: rj(js, 1)["template"]["spec"], "completionMode", "NonIndexed"),
            _rename("a" * 53),
        ),
        _replicas(1, 11),
        "the longest Job name must fit in 63 characters: replicatedJob workers",
    ),
    (
        "replicated-jobs-immutable-replicas-pod-names",
        # a short subdomain keeps the coordinator's address within its 63 characters
        _all(_rename("a" * 45), _set(spec, "network", {"subdomain": "s"})),
        _replicas(1, 11),
        "pod names (<jobSet>-<replicatedJob>-<jobIndex>-<podIndex>-<suffix>) must be DNS-1035 "
        "labels of at most 63 characters: shorten the JobSet or replicated job name: "
        "replicatedJob workers",
    ),
    (
        "replicated-jobs-immutable-replicas-coordinator",
        _noop,
        _replicas(1, 1),
        "coordinator.jobIndex must be less than the replicas of the coordinator's replicated "
        "job: workers",
    ),
    (
        "replicated-jobs-suspended-changes-allowed",
        _suspended,
        _pod_placement,
        "",
    ),
    (
        "replicated-jobs-suspended-changes-being-suspended",
        _noop,
        _all(_suspended, _pod_placement),
        "",
    ),
    (
        "replicated-jobs-suspended-changes-resumed",
        _suspended,
        _all(_pod_placement, lambda js: spec(js).update(suspend=False)),
        "",
    ),
    (
        "replicated-jobs-suspended-changes-image",
        _suspended,
        _set(lambda js: container(js, 1), "image", "python"),
        REPLICATED_JOBS_SUSPENDED_CHANGES,
    ),
    (
        "replicated-jobs-suspended-changes-replicas",
        _suspended,
        _all(_replicas(1, 4), _pod_placement),
        "",
    ),
    (
        "replicated-jobs-suspended-changes-replicas-and-image",
        _suspended,
        _all(_replicas(1, 4), _set(lambda js: container(js, 1), "image", "python")),
        REPLICATED_JOBS_SUSPENDED_CHANGES,
    ),
    (
        # Kueue's admission patch of a JobSet templated by Helm: the same pod template to
        # upstream's Go types, so accepted (upstream's webhook compares semantically too)
        "replicated-jobs-suspended-changes-go-round-trip",
        _all(_suspended, _helm_template),
        _all(_round_tripped, _pod_placement, lambda js: spec(js).update(suspend=False)),
        "",
    ),
    (
        "replicated-jobs-immutable-go-round-trip",
        _helm_template,
        _round_tripped,
        "",
    ),
    (
        # a pointer's false is not absence: automountServiceAccountToken defaults to true
        "replicated-jobs-suspended-changes-pointer-false",
        _all(_suspended, lambda js: pod(js, 1).update(automountServiceAccountToken=False)),
        lambda js: pod(js, 1).pop("automountServiceAccountToken"),
        REPLICATED_JOBS_SUSPENDED_CHANGES,
    ),
    (
        "replicated-jobs-suspended-changes-quantity",
        _all(_suspended, _helm_template),
        lambda js: container(js, 1)["resources"]["requests"].update(cpu="1"),
        REPLICATED_JOBS_SUSPENDED_CHANGES,
    ),
    (
        "replicated-jobs-immutable-empty-dir",
        lambda js: pod(js, 1).setdefault("volumes", []).append({"name": "s", "emptyDir": {}}),
        # emptyDir: {} is a volume source (a pointer), not absence
        lambda js: pod(js, 1)["volumes"][-1].pop("emptyDir"),
        REPLICATED_JOBS_IMMUTABLE,
    ),
    (
        "volume-claim-policies-storage-raised",
        _noop,
        _all(_storage(0, "2Gi"), _storage(1, "1500Mi")),
        "",
    ),
    (
        "volume-claim-policies-labels-changed",
        _noop,
        lambda js: policy(js, 0)["templates"][0]["metadata"].update(
            labels={"tier": "hot"}, annotations={"note": "x"}
        ),
        "",
    ),
    (
        "volume-claim-policies-storage-not-lowered",
        _noop,
        _storage(1, "512Mi"),
        "a volume claim template's storage request cannot be lowered: ckpt",
    ),
    (
        "volume-claim-policies-immutable-access-modes",
        _noop,
        lambda js: policy(js, 0)["templates"][0]["spec"].update(accessModes=["ReadWriteMany"]),
        "spec.volumeClaimPolicies is immutable, except the templates' labels and annotations "
        "and raising a template's storage request",
    ),
    (
        "volume-claim-policies-immutable-retention",
        _noop,
        _set(lambda js: policy(js, 1), "retentionPolicy", {"whenDeleted": "Retain"}),
        "spec.volumeClaimPolicies is immutable",
    ),
    (
        "volume-claim-policies-immutable-retention-snapshot",
        _noop,
        _set(lambda js: policy(js, 1), "retentionPolicy", {"whenCompleted": "Snapshot"}),
        "spec.volumeClaimPolicies is immutable",
    ),
    (
        # like creationPolicy, snapshotPolicy and restorePolicy may change at any time
        "volume-claim-policies-snapshot-and-restore-changed",
        _all(
            _set(lambda js: policy(js, 0), "snapshotPolicy", {"historyLimit": 2}),
            _set(lambda js: policy(js, 1), "restorePolicy", {"source": "NewestSnapshot"}),
        ),
        _all(
            _set(lambda js: policy(js, 0), "snapshotPolicy", {"volumeSnapshotClassName": "b"}),
            _set(
                lambda js: policy(js, 1),
                "restorePolicy",
                {"source": "VolumeSnapshot", "volumeSnapshotName": "ckpt-7"},
            ),
            _set(lambda js: policy(js, 0), "restorePolicy", {"source": "NewestSnapshot"}),
        ),
        "",
    ),
    (
        "volume-policy-snapshot-and-restore-changed",
        _volume_policy,
        lambda js: spec(js)["volumePolicy"].update(
            snapshotPolicy={"historyLimit": 100},
            restorePolicy={"source": "NewestSnapshot", "whenMissing": "CreateEmpty"},
        ),
        "",
    ),
    (
        "restore-snapshot-name-on-update",
        _noop,
        _set(lambda js: policy(js, 1), "restorePolicy", {"source": "VolumeSnapshot"}),
        f"spec: {RESTORE_SNAPSHOT_NAME}",
    ),
    (
        "volume-claim-policies-immutable-other-request",
        _noop,
        lambda js: policy(js, 0)["templates"][0]["spec"]["resources"]["requests"].update(
            {"example.com/iops": "100"}
        ),
        "spec.volumeClaimPolicies is immutable",
    ),
    (
        "claim-names-unique-replicas-raised",
        _job_scope_collision(0),
        _replicas(2, 1),
        f"spec: {CLAIM_COLLISION}: template ckpt-train",
    ),
    (
        "claim-names-unique-replicas-raised-jobset-scope",
        _jobset_scope_collision("run-1", 1),
        _replicas(2, 2),
        f"{CLAIM_COLLISION}: template ckpt-run-1-w",
    ),
    (
        "claim-names-unique-replicas-raised-elsewhere",
        _jobset_scope_collision("run-1", 1),
        _replicas(1, 4),
        "",
    ),
    (
        "volume-policy-storage-raised",
        _volume_policy,
        _vp_storage("10Gi"),
        "",
    ),
    (
        "volume-policy-storage-not-lowered",
        _volume_policy,
        _vp_storage("100Mi"),
        "a volume claim template's storage request cannot be lowered: data",
    ),
    (
        "volume-policy-immutable",
        _volume_policy,
        lambda js: spec(js)["volumePolicy"]["volumeClaimTemplates"][0]["spec"].update(
            storageClassName="fast"
        ),
        "spec.volumePolicy is immutable, except the templates' labels and annotations and "
        "raising a template's storage request",
    ),
    (
        # what an update (not a patch) from a client that knows only upstream's types does
        "volume-policy-kept",
        _volume_policy,
        lambda js: spec(js).pop("volumePolicy"),
        "spec.volumePolicy: spec.volumePolicy cannot be removed (a client that knows only "
        "upstream JobSet's types drops it when it writes the whole object: patch instead)",
    ),
]


@pytest.mark.parametrize(
    ("before", "change", "expected"),
    [pytest.param(b, c, e, id=i) for i, b, c, e in UPDATE_CASES],
)
async def test_rule_on_update(
    kube: Kube, jobsets: str, before: Mutation, change: Mutation, expected: str
) -> None:
    await check_update(kube, jobsets, before, change, expected)


async def test_status_update_does_not_trip_spec_rules(kube: Kube, jobsets: str) -> None:
    stored = accepted(await create(kube, jobsets, base()))
    stored["status"] = {
        "restarts": 1,
        "terminalState": "Completed",
        "volumes": {"anything": {"the": ["volume", "status"]}},
        "replicatedJobsStatus": [
            {"name": "init", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
        ],
    }
    path = f"{jobsets}/train/status"
    updated = accepted(await kube.raw("PUT", path, stored))
    assert updated["status"]["volumes"] == {"anything": {"the": ["volume", "status"]}}
    assert updated["status"]["terminalState"] == "Completed"


async def test_a_jobset_stored_breaking_a_rule_can_still_change_its_spec(
    kube: Kube, jobsets: str
) -> None:
    """The policy forgives a rule the stored JobSet already breaks (created while the policy was
    not bound, or before the rule existed): without that, nothing could flip its ``suspend`` (as
    Kueue does) or change its replicas. A rule the update newly breaks is still refused."""
    binding = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"
    broken = base()
    spec(broken)["suspend"] = True
    spec(broken)["coordinator"] = {"replicatedJob": "gone"}
    try:
        await kube.raw("DELETE", f"{binding}/jobsets.jobset.x-k8s.io")
        await wait_for(
            lambda: create(kube, jobsets, broken, dry_run=True),
            lambda response: response.get("kind") == "JobSet",
            "the API server to stop enforcing the unbound policy",
            seconds=30,
        )
        stored = accepted(await create(kube, jobsets, broken))
    finally:
        await install_crd(kube)
    stored["spec"]["suspend"] = False
    resumed = accepted(await replace(kube, jobsets, stored))
    assert resumed["spec"]["coordinator"] == {"replicatedJob": "gone"}
    rj(resumed, 1)["replicas"] = 3
    scaled = accepted(await replace(kube, jobsets, resumed))
    rj(scaled, 1)["replicas"] = 10000
    message = rejection(await replace(kube, jobsets, scaled))
    assert message.endswith(
        "denied request: spec.replicatedJobs: the replicas of all replicated jobs must add up to "
        "at most 10000 child Jobs"
    ), message


# ------------------------------------------------------------------ (d) defaults


async def test_defaults_applied_by_the_api_server(kube: Kube, jobsets: str) -> None:
    minimal = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "defaults"},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "work",
                    "template": {
                        "spec": {
                            "template": {
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "main",
                                            "image": "busybox",
                                            "ports": [{"containerPort": 8080}],
                                            "volumeMounts": [{"name": "data", "mountPath": "/d"}],
                                        }
                                    ]
                                }
                            }
                        }
                    },
                }
            ],
            "failurePolicy": {"maxRestarts": 2, "rules": [{"action": "RestartJobSet"}]},
            "volumeClaimPolicies": [{"templates": [pvc("data")]}],
        },
    }
    stored = accepted(await create(kube, jobsets, minimal))["spec"]
    assert stored["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    assert stored["successPolicy"] == {"operator": "All"}
    assert stored["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    assert stored["failurePolicy"]["restartStrategy"] == "Recreate"
    assert "name" not in stored["failurePolicy"]["rules"][0], "rule names: the controller's job"
    work = stored["replicatedJobs"][0]
    assert work["replicas"] == 1
    assert work["groupName"] == "default"
    assert work["template"]["spec"]["completionMode"] == "Indexed"
    pod_spec = work["template"]["spec"]["template"]["spec"]
    assert pod_spec["restartPolicy"] == "OnFailure"
    assert pod_spec["containers"][0]["ports"] == [{"containerPort": 8080, "protocol": "TCP"}]
    claims = stored["volumeClaimPolicies"][0]
    assert claims["scope"] == "JobSet"
    assert claims["retentionPolicy"] == {
        "whenDeleted": "Delete",
        "whenCompleted": "Retain",
        "whenFailed": "Retain",
        "whenScaled": "Retain",
        "whenSuspended": "Retain",
    }
    assert "suspend" not in stored and "coordinator" not in stored


async def test_a_default_an_update_leaves_out_comes_back(kube: Kube, jobsets: str) -> None:
    """Upstream's webhook defaults a JobSet on create only: an update without successPolicy
    stores none. Here the defaults are the schema's, written on every write (so the immutable
    fields compare equal)."""
    body = base()
    spec(body)["successPolicy"] = {"operator": "All"}
    stored = accepted(await create(kube, jobsets, body))
    rules = stored["spec"]["failurePolicy"]["rules"]
    del stored["spec"]["successPolicy"], stored["spec"]["startupPolicy"]
    del stored["spec"]["volumeClaimPolicies"][1]["retentionPolicy"]["whenScaled"]
    updated = accepted(await replace(kube, jobsets, stored))["spec"]
    assert updated["successPolicy"] == {"operator": "All"}
    assert updated["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    assert updated["volumeClaimPolicies"][1]["retentionPolicy"]["whenScaled"] == "Retain"
    assert updated["failurePolicy"]["rules"] == rules


async def test_defaults_do_not_override_what_is_set(kube: Kube, jobsets: str) -> None:
    body = base()
    spec(body)["network"] = {"enableDNSHostnames": False}
    rj(body, 0)["template"]["spec"]["completionMode"] = "NonIndexed"
    policy(body, 1)["retentionPolicy"] = {"whenDeleted": "Retain"}
    stored = accepted(await create(kube, jobsets, body))["spec"]
    assert stored["network"] == {"enableDNSHostnames": False, "publishNotReadyAddresses": True}
    assert stored["replicatedJobs"][0]["template"]["spec"]["completionMode"] == "NonIndexed"
    assert stored["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["restartPolicy"] == (
        "Never"
    )
    assert stored["volumeClaimPolicies"][1]["retentionPolicy"]["whenDeleted"] == "Retain"
    assert stored["volumeClaimPolicies"][1]["retentionPolicy"]["whenCompleted"] == "Retain"


# ------------------------------------------------------------------ (e) pruning


async def test_unknown_fields_are_pruned(kube: Kube, jobsets: str) -> None:
    body = base()
    spec(body)["colour"] = "blue"
    rj(body, 0)["priority"] = 3
    rj(body, 0)["template"]["metadata"] = {
        "labels": {"keep": "yes"},
        "generateName": "dropped-",
        "ownerReferences": [],
    }
    pod(body, 0)["notAPodField"] = True
    container(body, 0)["colour"] = "red"
    policy(body, 0)["templates"][0]["status"] = {"phase": "Bound"}
    policy(body, 0)["templates"][0]["metadata"]["uid"] = "123"
    stored = accepted(await create(kube, jobsets, body))
    s = stored["spec"]
    assert "colour" not in s
    first = s["replicatedJobs"][0]
    assert "priority" not in first
    assert first["template"]["metadata"] == {"labels": {"keep": "yes"}}
    pod_spec = first["template"]["spec"]["template"]["spec"]
    assert "notAPodField" not in pod_spec
    assert "colour" not in pod_spec["containers"][0]
    template = s["volumeClaimPolicies"][0]["templates"][0]
    # A claim template's status is declared, as upstream's CRD declares it (and ignored).
    assert template["status"] == {"phase": "Bound"}
    assert template["metadata"] == {"name": "data"}


async def apply(kube: Kube, path: str, body: Obj, manager: str) -> Obj:
    """Server-side apply of ``body`` by field manager ``manager``, forced, as controller-runtime's
    ``client.Apply`` sends it."""
    response = await kube.api.call_api(
        f"{path}/{body['metadata']['name']}",
        "PATCH",
        query_params=[("fieldManager", manager), ("force", "true")],
        body=body,
        header_params={
            "Content-Type": "application/apply-patch+yaml",
            "Accept": "application/json",
        },
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    result: Obj = await response.json()
    return result


async def test_typed_claim_templates_are_accepted_by_server_side_apply(
    kube: Kube, jobsets: str
) -> None:
    """A client that builds the JobSet from Go types and applies it (Kubeflow Trainer: field
    manager ``trainer``) sends every claim template with ``status: {}``. Server-side apply turns
    the patch into a typed object first, so an undeclared field fails the whole apply (it did:
    ``.spec.volumeClaimPolicies[0].templates[0].status: field not declared in schema``), where
    create and update only prune it."""
    body = base()
    for entry in spec(body)["volumeClaimPolicies"]:
        for template in entry["templates"]:
            template["status"] = {}
    stored = accepted(await apply(kube, jobsets, body, "trainer"))
    assert [
        t["metadata"]["name"] for p in stored["spec"]["volumeClaimPolicies"] for t in p["templates"]
    ] == ["data", "ckpt"]
    # The other spelling, and a second apply of the same body changes nothing.
    spelled = base()
    spelled["metadata"]["name"] = "train-spelled"
    spec(spelled)["volumePolicy"] = {
        "volumeClaimTemplates": [{**pvc("shared"), "status": {}}],
        "replicatedJobs": [{"name": "init"}],
    }
    container(spelled, 0)["volumeMounts"].append({"name": "shared", "mountPath": "/shared"})
    first = accepted(await apply(kube, jobsets, spelled, "trainer"))
    again = accepted(await apply(kube, jobsets, spelled, "trainer"))
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]


# ------------------------------------------------------------------ (f) the CEL runtime budget


def _largest_volume_spec(count: int) -> Obj:
    """A JobSet where the volume rules do much work: ``count`` Job-scope templates (16 per
    policy) whose names split at every other character into shorter templates' names, 32
    replicated jobs whose names extend each other, labels and annotations."""
    # a, j-a, j-j-a, ...: with the JobSet j, every pair of these makes a suffix that a template
    # name could end with to collide (claim-names-unique), 24 of them
    rjob_names = ["j-" * i + "a" for i in range(25)] + [f"b{i}" for i in range(7)]
    rjobs = [rjob(name, mounts=()) for name in rjob_names]
    names: list[str] = []
    stem = 0
    while len(names) < count:
        base_name = f"t{stem:02d}"
        for length in range(len(base_name), 64, 2):
            name = (base_name + "-a" * 32)[:length]
            if not name.endswith("-") and name not in names and len(names) < count:
                names.append(name)
        stem += 1
    # Every label and annotation on every template would pass the API server's 3 MiB request limit.
    full = 60
    templates = [
        {
            "metadata": {
                "name": name,
                "labels": {f"example.com/l{i}": "v" * 63 for i in range(32 if n < full else 2)},
                "annotations": {f"a{i}": "x" * 20 for i in range(32 if n < full else 2)},
            },
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
        for n, name in enumerate(names)
    ]
    mounts = [{"name": name, "mountPath": f"/m/{name}"} for name in names]
    first = rjobs[0]["template"]["spec"]["template"]["spec"]
    first["containers"] = [
        {"name": f"c{i}", "image": "busybox", "volumeMounts": mounts[i * 64 : (i + 1) * 64]}
        for i in range((count + 63) // 64)
    ]
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "j"},
        "spec": {
            "replicatedJobs": rjobs,
            "volumeClaimPolicies": [
                {
                    "scope": "Job",
                    "templates": templates[i * 16 : (i + 1) * 16],
                    "targetReplicatedJobs": rjob_names,
                }
                for i in range((count + 15) // 16)
            ],
        },
    }


async def test_large_volume_spec_fits_the_cel_runtime_budget(kube: Kube, jobsets: str) -> None:
    """The API server stops a rule that costs more than 1M at run time and refuses the object with
    a cost error instead of a rule's message. Estimated costs do not bound the real ones (the
    estimator takes a flattened list to be as long as its outer list), so the rules are run on a
    large JobSet: 300 Job-scope templates whose names extend each other, targeting 32 replicated
    jobs whose names make 24 suffixes for claim-names-unique to try. (Beyond about 300 such
    templates, untargeted-mount, which predates claim-names-unique, runs out of budget.)"""
    response = await create(kube, jobsets, _largest_volume_spec(300), dry_run=True)
    assert response.get("kind") == "JobSet", response.get("message")
