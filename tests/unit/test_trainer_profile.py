"""Pure parts of the ``trainer`` profile (localcluster/trainer.py): what is built, the webhook
configurations made from Trainer's manifests as its kustomization makes them, its configuration,
the repository's runtime. The profile runs in tests/node/queued/test_trainer.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from localcluster import build, kueue, trainer
from localcluster.processes import LaunchError


def test_trainer_is_built_only_on_demand(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []

    def fake_build(component: build.Component, goversion: str, report: object) -> Path:
        built.append(component.name)
        return Path("/nowhere") / component.name

    monkeypatch.setattr(build, "go_version", lambda: "go1.26.8")
    monkeypatch.setattr(build, "build_component", fake_build)
    build.ensure_binaries(lambda _: None)
    assert "trainer" not in built
    assert build.ensure_trainer(lambda _: None) == Path(
        "/nowhere/trainer/trainer-controller-manager"
    )
    assert build.required_versions(build.TRAINER) == {trainer.MODULE: "v2.3.0"}


def test_the_wrapper_needs_no_replace() -> None:
    """Trainer's module requires sigs.k8s.io/jobset (upstream's Go API); the proxy serves it."""
    gomod = (build.TRAINER.module_dir / "go.mod").read_text()
    assert "replace" not in gomod
    assert "sigs.k8s.io/jobset v0.12.0" in gomod


def _hook(name: str, path: str) -> dict[str, object]:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": {
            "service": {"name": "webhook-service", "namespace": "system", "path": path}
        },
        "failurePolicy": "Fail",
        "rules": [{"apiGroups": [trainer.GROUP], "resources": ["trainjobs"]}],
        "sideEffects": "None",
    }


def _release(tmp_path: Path, validating_patch: list[dict[str, object]]) -> Path:
    directory = tmp_path / "manifests/base/webhook"
    directory.mkdir(parents=True)
    docs = [
        {
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "mutating-webhook-configuration"},
            "webhooks": [_hook("defaulter.trainjob.trainer.kubeflow.org", "/mutate-trainjob")],
        },
        {
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "validating-webhook-configuration"},
            "webhooks": [
                _hook("validator.clustertrainingruntime.trainer.kubeflow.org", "/validate-ctr"),
                _hook("validator.trainjob.trainer.kubeflow.org", "/validate-trainjob"),
            ],
        },
    ]
    (directory / "manifests.yaml").write_text(yaml.safe_dump_all(docs))
    mutating_patch = [
        {"op": "replace", "path": "/webhooks/0/clientConfig/service/name", "value": "trainer"},
        {"op": "replace", "path": "/metadata/name", "value": trainer.MUTATING},
    ]
    (directory / "patch_mutating.yaml").write_text(yaml.safe_dump(mutating_patch))
    (directory / "patch_validating.yaml").write_text(yaml.safe_dump(validating_patch))
    return tmp_path


SELECTOR = {
    "matchExpressions": [
        {
            "key": "trainer.kubeflow.org/webhook-validation",
            "operator": "NotIn",
            "values": ["disabled"],
        }
    ]
}


def test_webhooks_are_renamed_and_selected_as_the_release_patches_them_and_called_by_url(
    tmp_path: Path,
) -> None:
    source = _release(
        tmp_path,
        [
            {"op": "replace", "path": "/metadata/name", "value": trainer.VALIDATING},
            {"op": "add", "path": "/webhooks/0/objectSelector", "value": SELECTOR},
        ],
    )
    mutating, validating = trainer.webhook_configurations(source, "https://127.0.0.1:9443", "Q0E=")
    assert mutating["metadata"] == {"name": trainer.MUTATING}
    assert validating["metadata"] == {"name": trainer.VALIDATING}
    runtime_hook, trainjob_hook = validating["webhooks"]
    assert runtime_hook["objectSelector"] == SELECTOR
    assert "objectSelector" not in trainjob_hook
    assert trainjob_hook["clientConfig"] == {
        "url": "https://127.0.0.1:9443/validate-trainjob",
        "caBundle": "Q0E=",
    }
    assert mutating["webhooks"][0]["clientConfig"]["url"].endswith("/mutate-trainjob")


def test_a_release_whose_webhooks_are_named_otherwise_is_refused(tmp_path: Path) -> None:
    source = _release(tmp_path, [{"op": "add", "path": "/webhooks/0/objectSelector", "value": {}}])
    with pytest.raises(LaunchError, match="not as expected"):
        trainer.webhook_configurations(source, "https://127.0.0.1:9443", "Q0E=")


def test_a_patch_operation_not_handled_is_refused(tmp_path: Path) -> None:
    source = _release(tmp_path, [{"op": "remove", "path": "/webhooks/0"}])
    with pytest.raises(LaunchError, match="not handled"):
        trainer.webhook_configurations(source, "https://127.0.0.1:9443", "Q0E=")


def test_only_the_crds_of_the_release_directory_are_applied(tmp_path: Path) -> None:
    crds = tmp_path / "manifests/base/crds"
    crds.mkdir(parents=True)
    (crds / "kustomization.yaml").write_text("kind: Kustomization\nresources: [a.yaml]\n")
    (crds / "a.yaml").write_text("kind: CustomResourceDefinition\nmetadata: {name: a}\n")
    assert [c["metadata"]["name"] for c in trainer.crds(tmp_path)] == ["a"]


def test_configuration_turns_off_what_needs_a_cluster() -> None:
    config = trainer.configuration(9443, 8081)
    assert config["certManagement"] == {"enable": False}
    assert config["webhook"] == {"port": 9443, "host": "127.0.0.1"}
    assert config["metrics"] == {"bindAddress": "0"}
    assert "leaderElection" not in config  # off when left out


def test_kueue_integrates_trainjobs_only_with_trainer() -> None:
    assert kueue.configuration(1, 2, Path("/c"))["integrations"]["frameworks"] == [
        kueue.JOBSET_FRAMEWORK
    ]
    assert kueue.configuration(1, 2, Path("/c"), trainer=True)["integrations"]["frameworks"] == [
        kueue.JOBSET_FRAMEWORK,
        kueue.TRAINJOB_FRAMEWORK,
    ]


def test_the_repositorys_runtime_has_the_shape_trainer_validates() -> None:
    """Trainer's runtime webhook: each replicated job labelled with an ancestor step has one
    replica and a container of that step's name (the trainer's is ``node``); the initializers
    mount the volume ``initializer``, as its TrainJob webhook requires of a TrainJob that sets
    ``spec.initializer``."""
    runtime = trainer.runtime()
    assert runtime["kind"] == "ClusterTrainingRuntime"
    spec = runtime["spec"]["template"]["spec"]
    [policy] = spec["volumeClaimPolicies"]
    assert [t["metadata"]["name"] for t in policy["templates"]] == ["initializer"]
    containers = {
        "dataset-initializer": "dataset-initializer",
        "model-initializer": "model-initializer",
        "trainer": "node",
    }
    for rjob in spec["replicatedJobs"]:
        step = rjob["template"]["metadata"]["labels"][trainer.ANCESTOR_LABEL]
        [container] = rjob["template"]["spec"]["template"]["spec"]["containers"]
        assert container["name"] == containers[step]
        assert rjob.get("replicas", 1) == 1
        assert {m["name"] for m in container["volumeMounts"]} == {"initializer"}
