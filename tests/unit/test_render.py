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
    assert kinds == [
        ("PersistentVolumeClaim", "pretrained-model-volume-sample"),
        ("Service", "volume-sample"),
        ("Job", "volume-sample-a-0"),
        ("Job", "volume-sample-b-0"),
        ("Job", "volume-sample-b-1"),
        ("Job", "volume-sample-workers-0"),
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
            "spec.replicatedJobs[0].template.spec.template.spec.containers must list at least one "
            "container",
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


def test_no_sample_pod_without_pod_scope() -> None:
    for example in SUPPORTED:
        if example.name.startswith("04-"):
            continue
        code, objects, err = _render(example)
        assert code == 0, err
        assert not [o for o in objects if o["kind"] == "Pod"], example.name
