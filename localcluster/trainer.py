"""Kubeflow Trainer on the local control plane (the ``trainer`` profile; issue 38).

Trainer v2 turns each TrainJob into a JobSet: its runtimes (ClusterTrainingRuntime,
TrainingRuntime) are JobSet templates, which it server-side applies as field manager
``trainer``. Its controller manager is built from the Go module proxy (``build.ensure_trainer``,
wrapper module ``gomod/trainer``) and runs as a local process like Kueue's (``kueue.py``):

- its CRDs come from the built release's ``manifests/base/crds`` (no conversion webhooks);
- its webhooks are the release's ``manifests/base/webhook`` as its kustomization makes them
  (the two configurations renamed, the runtime validators' objectSelector), each with ``url:``
  to the local manager and the cluster CA as ``caBundle``;
- its own certificate management is off. The webhook server then reads its certificate from
  controller-runtime's default directory, ``$TMPDIR/k8s-webhook-server/serving-certs`` (Trainer
  has no setting for it): the launcher gives the process a ``TMPDIR`` of its own and issues the
  certificate there, from the cluster's CA;
- it needs the JobSet CRD (this project's) and its own CRDs before it starts: it sets up its
  caches' indexes first, and exits when a kind is missing.

Kueue's TrainJob integration (``kueue.py``, ``trainer=True``) needs Trainer's CRDs before Kueue
starts, so the cluster starts Trainer first.

``stop`` (and the cluster's) deletes the webhook configurations before the manager goes: a
webhook with ``failurePolicy: Fail`` and nobody answering would refuse every later TrainJob write.
Two ERROR lines at every start are expected ("PodGroup CRDs must be installed in advance", from
the coscheduling and volcano plugins): the scheduler plugins' CRDs are optional and not installed.
"""

from __future__ import annotations

import base64
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import yaml

from localcluster import build
from localcluster import pki as pkimod
from localcluster.processes import LaunchError, ManagedProcess, free_port, https_get
from localcluster.webhooked import WebhookedManager

MODULE = build.TRAINER_MODULE
GROUP = "trainer.kubeflow.org"
API = f"{GROUP}/v1alpha1"
# The names Trainer's kustomization gives its webhook configurations (patch_*.yaml).
MUTATING = "defaulter.trainer.kubeflow.org"
VALIDATING = "validator.trainer.kubeflow.org"
IDENTITY = pkimod.ClientIdentity("trainer", "trainer-manager", ("system:masters",))
# The runtime of this repository's own (the shape of Trainer's LLM fine-tuning runtimes, with
# busybox for the initializers and the trainer nodes), installed with the manager.
RUNTIME_FILE = Path(__file__).parent.parent / "manifests/examples/trainer/runtime.yaml"
# Trainer's field manager when it applies a TrainJob's JobSet.
FIELD_MANAGER = "trainer"
# The label Trainer sets on each replicated job's template: which step of the runtime it is.
ANCESTOR_LABEL = f"{GROUP}/trainjob-ancestor-step"


def module_dir(report: Callable[[str], None]) -> Path:
    """The built release's source in the module cache (downloaded again if it was cleaned)."""
    directory = Path(build.module_download(build.TRAINER, MODULE)["Dir"])
    report(f"  Trainer {version()}: manifests from {directory}")
    return directory


def version() -> str:
    return build.required_versions(build.TRAINER)[MODULE]


def configuration(webhook_port: int, health_port: int) -> dict[str, Any]:
    """Trainer's Configuration (decoded strictly: an unknown field stops the manager)."""
    return {
        "apiVersion": "config.trainer.kubeflow.org/v1alpha1",
        "kind": "Configuration",
        "webhook": {"port": webhook_port, "host": "127.0.0.1"},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        # Leader election is off when left out.
        "certManagement": {"enable": False},
        "clientConnection": {"qps": 50, "burst": 100},
    }


def crds(source: Path) -> list[dict[str, Any]]:
    """Trainer's CRDs (TrainJob, TrainingRuntime, ClusterTrainingRuntime)."""
    loaded = [
        yaml.safe_load(path.read_text())
        for path in sorted((source / "manifests/base/crds").glob("*.yaml"))
    ]
    # The directory holds its kustomization.yaml too.
    return [doc for doc in loaded if doc.get("kind") == "CustomResourceDefinition"]


def _json_patch(document: dict[str, Any], operations: Sequence[dict[str, Any]]) -> None:
    """The ``add`` and ``replace`` operations of a JSON patch (what Trainer's kustomize patches
    use), applied in place."""
    for operation in operations:
        if operation["op"] not in ("add", "replace"):
            raise LaunchError(f"Trainer's webhook patch has an operation not handled: {operation}")
        *parents, last = operation["path"].strip("/").split("/")
        node: Any = document
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = operation["value"]
        else:
            node[last] = operation["value"]


def webhook_configurations(source: Path, base_url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """Trainer's webhook configurations as its kustomization makes them, calling ``base_url``."""
    directory = source / "manifests/base/webhook"
    patches = {
        "MutatingWebhookConfiguration": yaml.safe_load(
            (directory / "patch_mutating.yaml").read_text()
        ),
        "ValidatingWebhookConfiguration": yaml.safe_load(
            (directory / "patch_validating.yaml").read_text()
        ),
    }
    out = []
    for doc in yaml.safe_load_all((directory / "manifests.yaml").read_text()):
        if not doc:
            continue
        _json_patch(doc, patches[doc["kind"]])
        for hook in doc["webhooks"]:
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"{base_url}{path}", "caBundle": ca_bundle}
        out.append(doc)
    names = {doc["metadata"]["name"] for doc in out}
    if names != {MUTATING, VALIDATING}:
        raise LaunchError(f"Trainer's webhook configurations are {sorted(names)}, not as expected")
    return out


def runtime() -> dict[str, Any]:
    """This repository's ClusterTrainingRuntime (``manifests/examples/trainer/runtime.yaml``)."""
    loaded: dict[str, Any] = yaml.safe_load(RUNTIME_FILE.read_text())
    return loaded


@dataclass
class Trainer(WebhookedManager):
    """Trainer's manager for one local cluster: ``start`` after the cluster's API server, kube
    controllers and nodes (and before Kueue, whose TrainJob integration reads its CRDs);
    ``stop`` while the API server still runs."""

    MUTATING: ClassVar[str] = MUTATING
    VALIDATING: ClassVar[str] = VALIDATING

    @property
    def directory(self) -> Path:
        return self.cluster.state_dir / "trainer"

    def install_api(self, jobset_api: Sequence[Path]) -> Path:
        """The JobSet CRD (this project's, with its admission policy) and Trainer's CRDs, each
        Established; returns the release's source directory."""
        source = module_dir(self.report)
        self.cluster.kubectl("apply", "--server-side", *(f"--filename={f}" for f in jobset_api))
        # Server-side: the runtime CRDs (900 KB each) are too large for the last-applied
        # annotation of a client-side apply.
        self.apply(crds(source))
        self.cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        return source

    def start(self, jobset_api: Sequence[Path]) -> ManagedProcess:
        began = time.monotonic()
        binary = build.ensure_trainer(self.report)
        source = self.install_api(jobset_api)
        self.webhook_port, self.health_port = free_port(), free_port()
        base_url = f"https://127.0.0.1:{self.webhook_port}"
        pki = self.cluster.pki
        ca_bundle = base64.b64encode(pki.ca_cert.read_bytes()).decode()
        # controller-runtime's default certificate directory, under the process's own TMPDIR.
        tmp = self.directory / "tmp"
        pkimod.issue_serving(pki, tmp / "k8s-webhook-server" / "serving-certs", "trainer-webhook")
        kubeconfig = pkimod.issue_client(pki, IDENTITY, self.cluster.server)
        config_file = self.directory / "config.yaml"
        config_file.write_text(yaml.safe_dump(configuration(self.webhook_port, self.health_port)))
        env = dict(os.environ, KUBECONFIG=str(kubeconfig), TMPDIR=str(tmp))
        self.process = ManagedProcess(
            "trainer",
            [str(binary), f"--config={config_file}", "--zap-log-level=2"],
            self.cluster.state_dir / "logs" / "trainer.log",
            env=env,
        )
        health = self.health_port
        # readyz: the webhook server listens (and its certificate was read).
        self.cluster.start_process(
            self.process, lambda: https_get(f"http://127.0.0.1:{health}/readyz")
        )
        self.apply(webhook_configurations(source, base_url, ca_bundle))
        # Through Trainer's runtime validator: it answers, or this fails.
        self.apply([runtime()])
        self.report(
            f"  Trainer {version()} ready in {time.monotonic() - began:.1f}s: "
            f"ClusterTrainingRuntime {runtime()['metadata']['name']}"
        )
        return self.process
