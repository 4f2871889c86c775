"""Kueue on the local control plane (the ``kueue`` profile; issue 18).

Kueue's manager is built from the Go module proxy (``build.ensure_kueue``, wrapper module
``gomod/kueue``) and runs as a local process like the other components:

- its CRDs come from the module's ``config/components/crd/bases`` (the release that was built),
  with the conversion webhook of the CRDs that have one pointed at the local manager;
- its webhooks are Kueue's own ``config/components/webhook/manifests.yaml``, reduced to the ones
  of Kueue's API and of JobSet (the only integration enabled), each with ``url:`` to the local
  manager and the cluster CA as ``caBundle``; the serving certificate is issued by the launcher
  from that CA (``pki.issue_serving``), Kueue's internal certificate management is off;
- its configuration enables the JobSet integration only, with ``manageJobsWithoutQueueName:
  false``: a JobSet without ``kueue.x-k8s.io/queue-name`` is not Kueue's business;
- a ResourceFlavor, a ClusterQueue whose quota is the KWOK nodes' capacity (4 x 8
  ``nvidia.com/gpu``, 32 cpu, 256Gi) with preemption of lower priorities, and a LocalQueue in
  ``default``.

``stop`` (and the cluster's) deletes the webhook configurations before the manager goes: a
webhook with ``failurePolicy: Fail`` and nobody answering would refuse every later JobSet write.
"""

from __future__ import annotations

import base64
import datetime
import fcntl
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from localcluster import build
from localcluster import pki as pkimod
from localcluster.processes import LaunchError, ManagedProcess, free_port, https_get
from localcluster.webhooked import WebhookedManager

MODULE = "sigs.k8s.io/kueue"
NAMESPACE = "kueue-system"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
API = "kueue.x-k8s.io/v1beta2"
FLAVOR = "default-flavor"
CLUSTER_QUEUE = "cluster-queue"
LOCAL_QUEUE = "user-queue"
GPU = "nvidia.com/gpu"
FLAVOR_NODE_LABELS = {"type": "kwok"}
JOBSET_FRAMEWORK = "jobset.x-k8s.io/jobset"
# Kubeflow Trainer's TrainJobs (the ``trainer`` profile): Kueue runs Trainer's runtime framework
# itself to size a TrainJob's workload, so Trainer's CRDs must exist before Kueue starts.
TRAINJOB_FRAMEWORK = "trainer.kubeflow.org/trainjob"
MUTATING = "kueue-mutating-webhook-configuration"
VALIDATING = "kueue-validating-webhook-configuration"
IDENTITY = pkimod.ClientIdentity("kueue", "kueue-manager", ("system:masters",))
# Kueue reads its metrics serving certificate from this fixed path whenever its internal
# certificate management is off (cmd/kueue/main.go of v0.17.0), and exits when it is missing,
# even with the metrics server disabled. The launcher writes a self-signed one there.
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
# The webhooks kept from Kueue's manifest: those of its own API and of the JobSet integration
# (and of the TrainJob integration, when it is on).
_WEBHOOK_GROUPS = frozenset({"kueue.x-k8s.io", "jobset.x-k8s.io"})
_TRAINER_GROUP = "trainer.kubeflow.org"
# CRDs Kueue's kustomization gives a conversion webhook (config/components/crd/patches).
_CONVERTED = frozenset(
    {"localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters"}
)


def module_dir(report: Callable[[str], None]) -> Path:
    """The built release's source in the module cache (downloaded again if it was cleaned)."""
    directory = Path(build.module_download(build.KUEUE, MODULE)["Dir"])
    report(f"  Kueue {version()}: manifests from {directory}")
    return directory


def version() -> str:
    return build.required_versions(build.KUEUE)[MODULE]


def configuration(
    webhook_port: int, health_port: int, cert_dir: Path, trainer: bool = False
) -> dict[str, Any]:
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "manageJobsWithoutQueueName": False,
        "integrations": {
            "frameworks": [JOBSET_FRAMEWORK, *([TRAINJOB_FRAMEWORK] if trainer else [])]
        },
        # The visibility API is an aggregated API server of its own (a fixed port, delegated
        # authentication): nothing here uses it.
        "featureGates": {"VisibilityOnDemand": False},
        "clientConnection": {"qps": 50, "burst": 100},
    }


def _client_config(url: str, ca_bundle: str) -> dict[str, str]:
    return {"url": url, "caBundle": ca_bundle}


def crds(source: Path, base_url: str, ca_bundle: str) -> list[dict[str, Any]]:
    """Kueue's CRDs, the conversion webhook of those that have one pointed at ``base_url``."""
    out = []
    for path in sorted((source / "config/components/crd/bases").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        if crd["spec"]["names"]["plural"] in _CONVERTED:
            crd["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": _client_config(f"{base_url}/convert", ca_bundle),
                    "conversionReviewVersions": ["v1"],
                },
            }
        out.append(crd)
    return out


def webhook_configurations(
    source: Path, base_url: str, ca_bundle: str, trainer: bool = False
) -> list[dict[str, Any]]:
    """Kueue's webhook configurations, reduced to Kueue's and JobSet's (and TrainJob's, with
    ``trainer``), calling ``base_url``."""
    manifest = source / "config/components/webhook/manifests.yaml"
    wanted = _WEBHOOK_GROUPS | ({_TRAINER_GROUP} if trainer else set())
    out = []
    for doc in yaml.safe_load_all(manifest.read_text()):
        if not doc:
            continue
        kept = []
        for hook in doc["webhooks"]:
            groups = {g for rule in hook["rules"] for g in rule["apiGroups"]}
            if not groups <= wanted:
                continue
            path = hook["clientConfig"]["service"]["path"]
            kept.append({**hook, "clientConfig": _client_config(f"{base_url}{path}", ca_bundle)})
        kind = doc["kind"]
        name = MUTATING if kind == "MutatingWebhookConfiguration" else VALIDATING
        out.append({**doc, "metadata": {"name": name}, "webhooks": kept})
    return out


def queues(
    gpus: int, cpu: int, memory_gi: int, node_labels: dict[str, str] | None = None
) -> list[dict[str, Any]]:
    """A ResourceFlavor of the nodes (by default the KWOK nodes' labels), a ClusterQueue with
    that quota (lower priorities are preempted), and a LocalQueue in ``default`` pointing at it."""
    labels = dict(FLAVOR_NODE_LABELS if node_labels is None else node_labels)
    return [
        # Its node labels are what Kueue injects as nodeSelector into an admitted JobSet's pod
        # templates: the KWOK nodes' (cluster._nodes).
        {
            "apiVersion": API,
            "kind": "ResourceFlavor",
            "metadata": {"name": FLAVOR},
            "spec": {"nodeLabels": labels} if labels else {},
        },
        cluster_queue(CLUSTER_QUEUE, gpus=gpus, cpu=cpu, memory_gi=memory_gi),
        local_queue(LOCAL_QUEUE, "default", CLUSTER_QUEUE),
    ]


def cluster_queue(name: str, *, gpus: int, cpu: int, memory_gi: int) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "memory", GPU],
                    "flavors": [
                        {
                            "name": FLAVOR,
                            "resources": [
                                {"name": "cpu", "nominalQuota": str(cpu)},
                                {"name": "memory", "nominalQuota": f"{memory_gi}Gi"},
                                {"name": GPU, "nominalQuota": str(gpus)},
                            ],
                        }
                    ],
                }
            ],
        },
    }


def local_queue(name: str, namespace: str, cluster_queue_name: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster_queue_name},
    }


def _valid_cert(cert_file: Path, key_file: Path, now: datetime.datetime) -> bool:
    if not (cert_file.is_file() and key_file.is_file()):
        return False
    try:
        existing = x509.load_pem_x509_certificate(cert_file.read_bytes())
    except ValueError:
        return False
    return existing.not_valid_after_utc > now + datetime.timedelta(days=1)


def ensure_metrics_cert(directory: Path = METRICS_CERT_DIR) -> None:
    """A self-signed certificate where Kueue insists on reading one (see METRICS_CERT_DIR),
    written when missing or expiring within a day; nothing scrapes Kueue's metrics here. Two
    local clusters with Kueue may start at once (test groups side by side): the pair is written
    under a lock, by the first of them."""
    cert_file, key_file = directory / "tls.crt", directory / "tls.key"
    now = datetime.datetime.now(datetime.UTC)
    if _valid_cert(cert_file, key_file, now):
        return
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except PermissionError as err:
        raise LaunchError(
            f"Kueue reads a metrics certificate from {directory} (a fixed path when its own "
            f"certificate management is off) and this user cannot create it: {err}. Create it "
            f"once as root: `sudo mkdir -p {directory} && sudo chown $(id -u) {directory}`."
        ) from err
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _valid_cert(cert_file, key_file, now):
            _write_metrics_cert(cert_file, key_file, now)


def _write_metrics_cert(cert_file: Path, key_file: Path, now: datetime.datetime) -> None:
    directory = cert_file.parent
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kueue-metrics (local)")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=365))
        .sign(key, hashes.SHA256())
    )
    # Each file replaced atomically: a running Kueue's certificate watcher never reads half.
    for path, data in (
        (
            key_file,
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
        ),
        (cert_file, cert.public_bytes(serialization.Encoding.PEM)),
    ):
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)


@dataclass
class Kueue(WebhookedManager):
    """Kueue's manager for one local cluster: ``start`` after the cluster's API server, kube
    controllers and nodes; ``stop`` while the API server still runs."""

    MUTATING: ClassVar[str] = MUTATING
    VALIDATING: ClassVar[str] = VALIDATING

    # Its TrainJob integration on (Trainer's CRDs installed before ``start``).
    trainer: bool = False

    @property
    def directory(self) -> Path:
        return self.cluster.state_dir / "kueue"

    def start(
        self,
        jobset_api: Sequence[Path],
        *,
        gpus: int = 4 * 8,
        cpu: int = 4 * 32,
        memory_gi: int = 4 * 256,
        node_labels: dict[str, str] | None = None,
    ) -> ManagedProcess:
        """Start Kueue; the default queues' quota is the KWOK nodes' capacity unless given."""
        began = time.monotonic()
        binary = build.ensure_kueue(self.report)
        source = module_dir(self.report)
        self.webhook_port, self.health_port = free_port(), free_port()
        base_url = f"https://127.0.0.1:{self.webhook_port}"
        pki = self.cluster.pki
        ca_bundle = base64.b64encode(pki.ca_cert.read_bytes()).decode()
        cert_dir = self.directory / "serving-certs"
        pkimod.issue_serving(pki, cert_dir, "kueue-webhook")
        ensure_metrics_cert()
        kubeconfig = pkimod.issue_client(pki, IDENTITY, self.cluster.server)
        config_file = self.directory / "config.yaml"
        config_file.write_text(
            yaml.safe_dump(
                configuration(self.webhook_port, self.health_port, cert_dir, self.trainer)
            )
        )
        # Kueue's JobSet integration needs the JobSet CRD (this project's, the drop-in, with its
        # admission policy), and its own CRDs before its caches start; server-side apply, like
        # `kubectl apply`.
        self.cluster.kubectl("apply", "--server-side", *(f"--filename={f}" for f in jobset_api))
        self.apply(crds(source, base_url, ca_bundle))
        self.apply([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}])
        self.cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        env = dict(os.environ, KUBECONFIG=str(kubeconfig))
        self.process = ManagedProcess(
            "kueue",
            [str(binary), f"--config={config_file}", "--zap-log-level=2"],
            self.cluster.state_dir / "logs" / "kueue.log",
            env=env,
        )
        health = self.health_port
        self.cluster.start_process(
            self.process, lambda: https_get(f"http://127.0.0.1:{health}/readyz")
        )
        self.apply(webhook_configurations(source, base_url, ca_bundle, self.trainer))
        # Through Kueue's webhooks: they answer, or this fails.
        self.apply(queues(gpus=gpus, cpu=cpu, memory_gi=memory_gi, node_labels=node_labels))
        self.report(
            f"  Kueue {version()} ready in {time.monotonic() - began:.1f}s: ClusterQueue "
            f"{CLUSTER_QUEUE}, LocalQueue default/{LOCAL_QUEUE} (label {QUEUE_LABEL})"
        )
        return self.process
