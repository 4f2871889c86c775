"""``python -m controller render``: offline, same functions as the reconciler, clear errors."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.render import main
from tests.support.examples import EXAMPLES, SUPPORTED


def _render(path: Path) -> tuple[int, list[dict[str, object]], str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(path)], out=out, err=err)
    return code, [d for d in yaml.safe_load_all(out.getvalue()) if d], err.getvalue()


def test_seed_example_renders_claim_service_and_mounted_jobs() -> None:
    code, objects, _ = _render(EXAMPLES / "01-seed-volume-policy.yaml")
    assert code == 0
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objects]  # type: ignore[index]
    # In the controller's order: the claim and the Service, the Job that mounts nothing, A's once
    # the claim is bound, B's once A completed (dependsOn Complete).
    assert kinds == [
        ("PersistentVolumeClaim", "pretrained-model-volume-sample"),
        ("Service", "volume-sample"),
        ("Job", "volume-sample-workers-0"),
        ("Job", "volume-sample-a-0"),
        ("Job", "volume-sample-b-0"),
        ("Job", "volume-sample-b-1"),
    ]
    volumes = {
        o["metadata"]["name"]: o["spec"]["template"]["spec"].get("volumes")  # type: ignore[index]
        for o in objects
        if o["kind"] == "Job"
    }
    mounted = [
        {
            "name": "pretrained-model",
            "persistentVolumeClaim": {"claimName": "pretrained-model-volume-sample"},
        }
    ]
    assert volumes["volume-sample-a-0"] == mounted
    assert volumes["volume-sample-b-1"] == mounted
    assert volumes["volume-sample-workers-0"] is None


def test_job_scope_example_renders_one_claim_per_job() -> None:
    code, objects, _ = _render(EXAMPLES / "03-per-job-checkpoints-retained.yaml")
    assert code == 0
    claims = sorted(o["metadata"]["name"] for o in objects if o["kind"] == "PersistentVolumeClaim")  # type: ignore[index]
    assert claims == ["ckpt-resumable-workers-0", "ckpt-resumable-workers-1", "dataset-resumable"]


@pytest.mark.parametrize("example", SUPPORTED, ids=lambda p: p.name)
def test_every_example_renders_its_jobs(example: Path) -> None:
    code, objects, err = _render(example)
    assert code == 0, err
    replicas = sum(
        r.get("replicas", 1) for r in yaml.safe_load(example.read_text())["spec"]["replicatedJobs"]
    )
    assert sum(o["kind"] == "Job" for o in objects) == replicas


def test_invalid_input_is_a_clear_message_and_exit_1(tmp_path: Path) -> None:
    cases = {
        "not-yaml.yaml": ("a: [b", "is not valid YAML"),
        "wrong-kind.yaml": (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
            "is a Pod, not a JobSet",
        ),
        "no-containers.yaml": (
            "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: x}\nspec:\n"
            "  replicatedJobs: [{name: a, template: {}}]\n",
            # The API server admits a Job template without a pod spec; the parser reads none.
            "spec.replicatedJobs[0].template.spec.template.spec.containers must have at least 1 "
            "item, got 0",
        ),
    }
    for name, (text, message) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        code, _, err = _render(path)
        assert code == 1, name
        assert message in err, (name, err)
    code, _, err = _render(tmp_path / "missing.yaml")
    assert code == 1 and "cannot read" in err


def test_no_replicated_jobs_renders_only_the_service(tmp_path: Path) -> None:
    """Upstream accepts a JobSet without replicated jobs; it gets its headless Service only."""
    path = tmp_path / "no-jobs.yaml"
    path.write_text(
        "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: x}\nspec: {}\n"
    )
    code, objects, err = _render(path)
    assert code == 0, err
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [("Service", "x")]  # type: ignore[index]


def test_pod_scope_example_renders_per_pod_claims_and_a_sample_pod() -> None:
    """Six claims (2 Jobs x 3 completion indexes), Jobs mounting the placeholder, and one sample
    pod per Pod-scope replicated job showing the claim the admission policy gives index 0."""
    code, objects, err = _render(EXAMPLES / "04-per-pod-rank-checkpoints.yaml")
    assert code == 0, err
    claims = sorted(o["metadata"]["name"] for o in objects if o["kind"] == "PersistentVolumeClaim")  # type: ignore[index]
    assert claims == [f"ckpt-ranks-trainer-{j}-{p}" for j in range(2) for p in range(3)] + [
        "shared-ranks"
    ]
    jobs = [o for o in objects if o["kind"] == "Job"]
    for job in jobs:
        template = job["spec"]["template"]  # type: ignore[index]
        assert template["metadata"]["labels"]["jobset.sigs.k8s.io/pod-scope-volumes"] == "true"
        named = {
            v["name"]: v["persistentVolumeClaim"]["claimName"] for v in template["spec"]["volumes"]
        }
        index = job["metadata"]["labels"]["jobset.sigs.k8s.io/job-index"]  # type: ignore[index]
        assert named == {"ckpt": f"ckpt-ranks-trainer-{index}-POD-INDEX", "shared": "shared-ranks"}
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert len(pods) == 1
    (sample,) = pods
    assert sample["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] == "0"  # type: ignore[index]
    listed: Any = sample["spec"]["volumes"]  # type: ignore[index]
    volumes = {v["name"]: v["persistentVolumeClaim"]["claimName"] for v in listed}
    assert volumes == {"ckpt": "ckpt-ranks-trainer-0-0", "shared": "shared-ranks"}


def test_pod_scope_on_a_replicated_job_of_no_pods_is_refused_as_the_controller_does(
    tmp_path: Path,
) -> None:
    """``parallelism: 0`` runs no pod, yet Pod scope would make a claim per completion index:
    render refuses it with the message the controller's SpecInvalid condition carries."""
    example = (EXAMPLES / "04-per-pod-rank-checkpoints.yaml").read_text()
    assert "parallelism: 3" in example
    path = tmp_path / "paused.yaml"
    path.write_text(example.replace("parallelism: 3", "parallelism: 0"))
    code, objects, err = _render(path)
    assert (code, objects) == (1, []), err
    assert "Pod scope makes a claim for each completion index before the Job starts" in err
    assert "parallelism of replicated job 'trainer' is 0" in err


def test_no_sample_pod_without_pod_scope() -> None:
    for example in SUPPORTED:
        if example.name.startswith("04-"):
            continue
        code, objects, err = _render(example)
        assert code == 0, err
        assert not [o for o in objects if o["kind"] == "Pod"], example.name


def test_a_jobset_apply_would_refuse_is_refused_with_the_api_servers_message(
    tmp_path: Path,
) -> None:
    """render checks what the API server checks on create (the CRD's schema and rules, the
    admission policy), with the same message, before planning anything."""
    base = (
        "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: train}\nspec:\n"
        "  replicatedJobs:\n"
        "  - name: init\n    template: {spec: {template: {spec: {containers: "
        "[{name: c, image: busybox}]}}}}\n"
    )
    cases = {
        "policy.yaml": (
            base.replace(
                "- name: init\n", "- name: init\n    dependsOn: [{name: x, status: Ready}]\n"
            ),
            'jobsets.jobset.x-k8s.io "train" is forbidden: ValidatingAdmissionPolicy '
            "'jobsets.jobset.x-k8s.io' with binding 'jobsets.jobset.x-k8s.io' denied request: "
            "spec.replicatedJobs: the first replicated job cannot have dependsOn: nothing starts "
            "before it: init",
        ),
        "schema.yaml": (
            base.replace("- name: init\n", "- name: init\n    replicas: -1\n"),
            'JobSet.jobset.x-k8s.io "train" is invalid: spec.replicatedJobs[0].replicas: Invalid '
            "value: -1: spec.replicatedJobs[0].replicas in body should be greater than or equal "
            "to 0",
        ),
    }
    for name, (text, message) in cases.items():
        path = tmp_path / name
        path.write_text(text)
        code, objects, err = _render(path)
        assert (code, objects) == (1, []), name
        assert f"document 1: {message}\n" in err, (name, err)
        # Without the API server's checks, the controller's parser runs the same rules: the same
        # words, without kubectl's prefix.
        out, errors = io.StringIO(), io.StringIO()
        assert main([str(path), "--no-validate"], out=out, err=errors) == 1, name
        words = message.split("denied request: ")[-1].split(" is invalid: ")[-1]
        assert f"document 1: {words}" not in errors.getvalue()
        assert f": {words}\n" in errors.getvalue(), (name, errors.getvalue())
    (tmp_path / "base.yaml").write_text(base)
    code, objects, err = _render(tmp_path / "base.yaml")
    assert code == 0, err
    job = next(o for o in objects if o["kind"] == "Job")
    # The schema's defaults, as the API server stores them, reach the Jobs.
    assert job["spec"]["completionMode"] == "Indexed"  # type: ignore[index]


def test_render_validates_against_the_crd_it_is_given(tmp_path: Path) -> None:
    """The alpha-features CRD admits the RestartJob action that the default CRD refuses."""
    path = tmp_path / "restart-job.yaml"
    path.write_text(
        "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: train}\nspec:\n"
        "  failurePolicy: {maxRestarts: 1, rules: [{action: RestartJob}]}\n"
        "  replicatedJobs:\n"
        "  - name: init\n    template: {spec: {template: {spec: {containers: "
        "[{name: c, image: busybox}]}}}}\n"
    )
    code, _, err = _render(path)
    assert code == 1 and "RestartJob feature gate is disabled" in err
    alpha = Path(__file__).resolve().parents[2] / "manifests/components/alpha-features"
    out, errors = io.StringIO(), io.StringIO()
    code = main([str(path), "--crd", str(alpha / "jobsets.jobset.x-k8s.io.yaml")], out, errors)
    assert code == 0, errors.getvalue()
    code = main([str(path), "--crd", str(alpha / "policy.yaml")], out, errors)
    assert code == 1 and "is not a CustomResourceDefinition" in errors.getvalue()


def _two_rjobs(spec_extra: str, second_extra: str = "") -> str:
    container = "{spec: {template: {spec: {containers: [{name: c, image: busybox}]}}}}"
    return (
        "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: train}\nspec:\n"
        f"{spec_extra}"
        "  replicatedJobs:\n"
        f"  - name: first\n    replicas: 2\n    template: {container}\n"
        f"  - name: second\n{second_extra}    template: {container}\n"
    )


def test_render_runs_the_controllers_own_passes(tmp_path: Path) -> None:
    """render is decide, pass after pass, on a cluster that runs every Job: InOrder and
    dependsOn Ready unfold as the Jobs become ready, in the controller's order."""
    cases = {
        "in-order": _two_rjobs("  startupPolicy: {startupPolicyOrder: InOrder}\n"),
        "ready": _two_rjobs("", "    dependsOn: [{name: first, status: Ready}]\n"),
    }
    for name, text in cases.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(text)
        code, objects, err = _render(path)
        assert code == 0, err
        assert [o["metadata"]["name"] for o in objects] == [  # type: ignore[index]
            "train",
            "train-first-0",
            "train-first-1",
            "train-second-0",
        ], name
        assert "note:" not in err


def test_a_replicated_job_the_success_policy_makes_needless_gets_a_note(tmp_path: Path) -> None:
    """With success policy Any on the first replicated job, the JobSet completes when its Jobs
    succeed: the second, waiting for that, never gets a Job, and render says so."""
    path = tmp_path / "any.yaml"
    path.write_text(
        _two_rjobs(
            "  successPolicy: {operator: Any, targetReplicatedJobs: [first]}\n",
            "    dependsOn: [{name: first, status: Complete}]\n",
        )
    )
    code, objects, err = _render(path)
    assert code == 0, err
    assert [o["metadata"]["name"] for o in objects] == [  # type: ignore[index]
        "train",
        "train-first-0",
        "train-first-1",
    ]
    assert "note: train: replicated job second gets no Job here" in err


SHARED = """\
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: gpus}
spec:
  volumeClaimPolicies:
  - templates:
    - metadata: {name: data}
      spec:
        storageClassName: CLASS
        accessModes: [ReadWriteOnce]
        resources: {requests: {storage: 1Gi}}
  replicatedJobs:
  - name: workers
    replicas: 4
    template:
      spec:
        template:
          spec:
            containers:
            - name: c
              image: busybox
              volumeMounts: [{name: data, mountPath: /data}]
"""
# A cluster as `kubectl get storageclasses,csidrivers -o yaml` prints it: a List.
STORAGE = """\
apiVersion: v1
kind: List
items:
- apiVersion: storage.k8s.io/v1
  kind: StorageClass
  metadata: {name: nfs}
  provisioner: nfs.csi.k8s.io
- apiVersion: storage.k8s.io/v1
  kind: StorageClass
  metadata: {name: block}
  provisioner: block.csi.example
- apiVersion: storage.k8s.io/v1
  kind: CSIDriver
  metadata: {name: nfs.csi.k8s.io}
  spec: {attachRequired: false}
- apiVersion: storage.k8s.io/v1
  kind: CSIDriver
  metadata: {name: block.csi.example}
  spec: {attachRequired: true}
"""


@pytest.mark.parametrize(
    ("storage_class", "flags", "pinned", "said"),
    [
        pytest.param("nfs", ["--storage", "STORAGE"], False,
                     "gpus: MultiAttachRisk False (AttachNotRequired): the pods that share "
                     "ReadWriteOnce claims are not kept on one node, as their storage attaches "
                     "nothing", id="attach-less-storage-runs-across-nodes"),
        pytest.param("block", ["--storage", "STORAGE"], True,
                     "gpus: MultiAttachRisk False (Colocated): the pods that share ReadWriteOnce "
                     "claims are kept on one node", id="attaching-storage-kept-on-one-node"),
        pytest.param("block", ["--storage", "STORAGE", "--colocate-claims", "never"], False,
                     "gpus: MultiAttachRisk False (ColocationOff): the pods that share "
                     "ReadWriteOnce claims are not kept on one node, as the controller's "
                     "--colocate-claims is never", id="never"),
        pytest.param("nfs", [], True,
                     "gpus: MultiAttachRisk False (Colocated): the pods that share ReadWriteOnce "
                     "claims are kept on one node (a required pod affinity of the Jobs this "
                     "controller creates): claim data-gpus: the storage classes are not known: "
                     "assumed to attach", id="storage-not-given-assumed-and-said"),
    ],
)  # fmt: skip
def test_render_says_whether_pods_that_share_a_claim_are_kept_on_one_node(
    tmp_path: Path, storage_class: str, flags: list[str], pinned: bool, said: str
) -> None:
    path, storage = tmp_path / "js.yaml", tmp_path / "storage.yaml"
    path.write_text(SHARED.replace("CLASS", storage_class))
    storage.write_text(STORAGE)
    out, err = io.StringIO(), io.StringIO()
    argv = [str(path), *(str(storage) if f == "STORAGE" else f for f in flags)]
    assert main(argv, out=out, err=err) == 0, err.getvalue()
    jobs = [d for d in yaml.safe_load_all(out.getvalue()) if d and d["kind"] == "Job"]
    assert len(jobs) == 4
    for job in jobs:
        pod = job["spec"]["template"]["spec"]
        assert ("affinity" in pod) == pinned, job["metadata"]["name"]
    (note,) = [line for line in err.getvalue().splitlines() if "MultiAttachRisk" in line]
    assert note.startswith(f"note: {said}"), note
    assert ("pass --storage" in note) == (not flags)


def test_render_refuses_a_storage_file_of_other_objects(tmp_path: Path) -> None:
    path, storage = tmp_path / "js.yaml", tmp_path / "storage.yaml"
    path.write_text(SHARED.replace("CLASS", "nfs"))
    storage.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    out, err = io.StringIO(), io.StringIO()
    assert main([str(path), "--storage", str(storage)], out=out, err=err) == 1
    assert err.getvalue() == (
        f"error: --storage {storage}: document 1 holds a ConfigMap, not a StorageClass or "
        "CSIDriver\n"
    )


def test_volume_policy_annotations_are_judged_and_rendered_as_the_controller_would(
    tmp_path: Path,
) -> None:
    """render refuses the keys the admission policy refuses, and the combinations the controller
    refuses, in the same words; valid keys shape the claims it prints."""
    key = "ckpt.volumes.jobset.sigs.k8s.io"
    body: dict[str, Any] = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "ft", "annotations": {}},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "node",
                    "replicas": 2,
                    "template": {"spec": {"template": {"spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "node", "image": "busybox",
                                        "volumeMounts": [{"name": "ckpt", "mountPath": "/c"}]}],
                    }}}},
                }
            ],
            "volumeClaimPolicies": [{"templates": [{
                "metadata": {"name": "ckpt"},
                "spec": {"accessModes": ["ReadWriteOnce"],
                         "resources": {"requests": {"storage": "1Gi"}}},
            }]}],
        },
    }  # fmt: skip
    cases = {
        "value": (
            {f"{key}/scope": "Pods"},
            "denied request: metadata.annotations: invalid volume policy annotation: "
            f"{key}/scope: must be JobSet, Job or Pod, got 'Pods'",
        ),
        "combination": (
            {f"{key}/restorePolicy.source": "VolumeSnapshot"},
            "spec: restorePolicy.volumeSnapshotName is required when restorePolicy.source is "
            f"VolumeSnapshot, and must be left out otherwise (as completed by the annotations "
            f"{key}/*)",
        ),
    }
    for name, (keys, message) in cases.items():
        body["metadata"]["annotations"] = keys
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(body))
        code, _, err = _render(path)
        assert code == 1, (name, err)
        assert message in err, (name, err)
    body["metadata"]["annotations"] = {f"{key}/scope": "Job"}
    path = tmp_path / "job-scope.yaml"
    path.write_text(yaml.safe_dump(body))
    code, objects, err = _render(path)
    assert code == 0, err
    claims = sorted(
        str(o["metadata"]["name"])  # type: ignore[index]
        for o in objects
        if o["kind"] == "PersistentVolumeClaim"
    )
    assert claims == ["ckpt-ft-node-0", "ckpt-ft-node-1"]
