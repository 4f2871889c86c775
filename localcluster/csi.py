"""The real node's CSI stack (issue 37): the Kubernetes storage stack, run for real.

The ``node`` profile runs, beside its kubelet, as host processes:

- **our CSI driver** (``localcluster/csidriver``, Go): volumes are directories under
  ``<state>/node/csi/``, published into pods by bind mount; snapshots are copies; it registers
  itself with the kubelet (the kubelet's plugin registration API), so no node-driver-registrar;
- the **external-provisioner** (``csi-provisioner``), **external-resizer** (``csi-resizer``),
  **csi-snapshotter** and the **snapshot-controller**, built from the Go module proxy
  (``build.CSI_COMPONENTS``), each talking to the driver's unix socket and to the API server with
  a client certificate of its own, authorised by the ClusterRoles the releases ship
  (``deploy/kubernetes`` of each module), bound to that user instead of a ServiceAccount.
  Leader election is off: one replica each.

and installs the VolumeSnapshot and VolumeGroupSnapshot CRDs (from the external-snapshotter client
module), the ``CSIDriver`` object, the storage classes ``csi-immediate`` and ``csi-wffc`` (both
expandable) and the snapshot classes ``csi-snapshot``, ``csi-group-snapshot`` and
``csi-snapshot-failing`` (whose snapshots the driver refuses: a test knob). The hostPath
test provisioner and its classes (``standard``, ``wffc``, ...) stay as they are.

Takes a :class:`localcluster.controlplane.ControlPlane`; ``cluster.py`` starts it.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from localcluster import build
from localcluster import pki as pkimod
from localcluster.controlplane import ControlPlane
from localcluster.processes import LaunchError, ManagedProcess, free_port, https_get

Obj = dict[str, Any]

DRIVER_NAME = "csi.stateful-jobset.local"
# The Node label (set by the kubelet from NodeGetInfo) naming where a volume lives: a
# WaitForFirstConsumer volume's PV gets node affinity on it.
TOPOLOGY_KEY = "topology.csi.stateful-jobset.local/node"
IMMEDIATE_CLASS = "csi-immediate"
WFFC_CLASS = "csi-wffc"
SNAPSHOT_CLASS = "csi-snapshot"
GROUP_SNAPSHOT_CLASS = "csi-group-snapshot"
# A VolumeSnapshotClass whose snapshots always fail (the driver's test knob, below): what a
# failed snapshot does is proven with it.
FAILING_SNAPSHOT_CLASS = "csi-snapshot-failing"
# The class parameter that makes the driver's CreateSnapshot fail with FAILED_PRECONDITION
# (controller.go's FailSnapshotsParameter; the csi-snapshotter passes a class's parameters on).
FAIL_SNAPSHOTS_PARAMETER = "csi.stateful-jobset.local/fail-snapshots"
# At the root of every volume: its size in bytes, written again by NodeExpandVolume (the
# driver's CapacityFile).
CAPACITY_FILE = ".csi-capacity"
# What the driver prints once the kubelet accepted it (register.go's RegisteredLine).
REGISTERED_LINE = "registered with the kubelet"
# The driver's registration socket in the kubelet's plugins_registry directory (main.go): a unix
# socket's path is at most 107 bytes, so the name is short.
REGISTRATION_SOCKET = "sjs-csi.sock"
MAX_SOCKET_PATH = 107

_CSI = "github.com/kubernetes-csi"
PROVISIONER_MODULE = f"{_CSI}/external-provisioner/v5"
RESIZER_MODULE = f"{_CSI}/external-resizer"
SNAPSHOTTER_MODULE = f"{_CSI}/external-snapshotter/v8"
SNAPSHOT_CLIENT_MODULE = f"{_CSI}/external-snapshotter/client/v8"
CRD_DIR = "config/crd"


@dataclass(frozen=True)
class Sidecar:
    """One of the stack's Kubernetes-side processes: its binary, the identity it runs as and
    the release file with its RBAC (module, path in the module)."""

    name: str
    component: str
    module: str
    rbac: str
    # Whether it talks to the driver (the snapshot-controller does not).
    uses_driver: bool = True

    @property
    def identity(self) -> pkimod.ClientIdentity:
        return pkimod.ClientIdentity(f"csi-{self.name}", f"localcluster:{self.name}")


SIDECARS: tuple[Sidecar, ...] = (
    Sidecar(
        "snapshot-controller",
        "csi-snapshotter",
        SNAPSHOTTER_MODULE,
        "deploy/kubernetes/snapshot-controller/rbac-snapshot-controller.yaml",
        uses_driver=False,
    ),
    Sidecar(
        "csi-provisioner", "csi-provisioner", PROVISIONER_MODULE, "deploy/kubernetes/rbac.yaml"
    ),
    Sidecar("csi-resizer", "csi-resizer", RESIZER_MODULE, "deploy/kubernetes/rbac.yaml"),
    Sidecar(
        "csi-snapshotter",
        "csi-snapshotter",
        SNAPSHOTTER_MODULE,
        "deploy/kubernetes/csi-snapshotter/rbac-csi-snapshotter.yaml",
    ),
)


# ------------------------------------------------------------------------- the API objects


def csi_driver() -> Obj:
    """The CSIDriver object: no attach step (a directory needs none), the kubelet publishes
    persistent volumes only, and may change group ownership for a pod's fsGroup."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": DRIVER_NAME},
        "spec": {
            "attachRequired": False,
            "podInfoOnMount": False,
            "volumeLifecycleModes": ["Persistent"],
            "fsGroupPolicy": "File",
            "storageCapacity": False,
            "requiresRepublish": False,
        },
    }


def storage_classes() -> list[Obj]:
    """The driver's storage classes: one binds at once, one once its first pod is scheduled;
    both expandable."""

    def storage_class(name: str, binding: str) -> Obj:
        return {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name},
            "provisioner": DRIVER_NAME,
            "volumeBindingMode": binding,
            "allowVolumeExpansion": True,
            "reclaimPolicy": "Delete",
        }

    return [
        storage_class(IMMEDIATE_CLASS, "Immediate"),
        storage_class(WFFC_CLASS, "WaitForFirstConsumer"),
    ]


def snapshot_classes() -> list[Obj]:
    """A VolumeSnapshotClass and a VolumeGroupSnapshotClass of the driver (a snapshot's copy is
    deleted with its content object), and a VolumeSnapshotClass whose snapshots fail (a test
    knob: the driver refuses CreateSnapshot for it)."""
    return [
        {
            "apiVersion": "snapshot.storage.k8s.io/v1",
            "kind": "VolumeSnapshotClass",
            "metadata": {"name": SNAPSHOT_CLASS},
            "driver": DRIVER_NAME,
            "deletionPolicy": "Delete",
        },
        {
            "apiVersion": "snapshot.storage.k8s.io/v1",
            "kind": "VolumeSnapshotClass",
            "metadata": {"name": FAILING_SNAPSHOT_CLASS},
            "driver": DRIVER_NAME,
            "deletionPolicy": "Delete",
            "parameters": {FAIL_SNAPSHOTS_PARAMETER: "true"},
        },
        {
            "apiVersion": "groupsnapshot.storage.k8s.io/v1",
            "kind": "VolumeGroupSnapshotClass",
            "metadata": {"name": GROUP_SNAPSHOT_CLASS},
            "driver": DRIVER_NAME,
            "deletionPolicy": "Delete",
        },
    ]


def cluster_rbac(documents: list[Obj | None], user: str) -> list[Obj]:
    """The cluster-wide part of a release's RBAC file, bound to ``user`` instead of the
    release's ServiceAccount: its ClusterRoles as they are, its ClusterRoleBindings with that
    one subject. ServiceAccounts, Roles and RoleBindings (leader election, the provisioner's
    capacity tracking: both off here) are left out."""
    kept: list[Obj] = []
    for document in documents:
        if not document:
            continue
        kind = document.get("kind")
        if kind == "ClusterRole":
            kept.append(document)
        elif kind == "ClusterRoleBinding":
            binding = dict(document)
            binding["subjects"] = [
                {"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}
            ]
            kept.append(binding)
    return kept


# ------------------------------------------------------------------------ the release files


@functools.cache
def module_source(module: str) -> Path:
    """Where a release's module is in the module cache (downloaded if the cache was cleaned),
    at the version the CSI wrapper modules pin."""
    component = next(c for c in build.CSI_COMPONENTS if c.name == _component_pinning(module))
    return Path(build.module_download(component, module)["Dir"])


def _component_pinning(module: str) -> str:
    if module == PROVISIONER_MODULE:
        return "csi-provisioner"
    if module == RESIZER_MODULE:
        return "csi-resizer"
    return "csi-snapshotter"  # the snapshotter and its client module


def snapshot_crds() -> list[Path]:
    """The VolumeSnapshot and VolumeGroupSnapshot CRDs of the client module that the
    snapshot-controller and csi-snapshotter were built with."""
    directory = module_source(SNAPSHOT_CLIENT_MODULE) / CRD_DIR
    found = sorted(p for p in directory.glob("*.yaml") if p.name != "kustomization.yaml")
    if not found:
        raise LaunchError(f"no CRDs in {directory}")
    return found


def crd_name(path: Path) -> str:
    name: str = yaml.safe_load(path.read_text())["metadata"]["name"]
    return name


def rbac_objects() -> list[Obj]:
    objects: list[Obj] = []
    for sidecar in SIDECARS:
        text = (module_source(sidecar.module) / sidecar.rbac).read_text()
        documents = list(yaml.safe_load_all(text))
        objects += cluster_rbac(documents, sidecar.identity.user)
    return objects


# -------------------------------------------------------------------------------- the stack


def _log_says(process: ManagedProcess, line: str) -> tuple[int, str]:
    try:
        text = process.log_path.read_text(errors="replace")
    except FileNotFoundError:
        return 0, "no output yet"
    return (200, line) if line in text.rsplit("=== start", 1)[-1] else (0, "not yet")


@dataclass
class CsiStack:
    """The driver and the sidecars for one real node of ``cluster``."""

    cluster: ControlPlane
    node_name: str
    # The node's directory (the driver's state goes in ``csi/`` there) and its kubelet's
    # --root-dir (the registration directory is ``plugins_registry/`` in it).
    node_dir: Path
    kubelet_root: Path
    report: Callable[[str], None]

    @property
    def state_dir(self) -> Path:
        return self.node_dir / "csi"

    @property
    def socket(self) -> Path:
        return self.state_dir / "csi.sock"

    @property
    def registration_dir(self) -> Path:
        return self.kubelet_root / "plugins_registry"

    def install_api(self) -> None:
        """Before the node starts: the CRDs, the CSIDriver, the storage classes, the RBAC."""
        for crd in snapshot_crds():
            self.cluster.kubectl("create", "-f", str(crd))
        objects = [csi_driver(), *storage_classes(), *rbac_objects()]
        self.cluster.kubectl("create", "-f", "-", input_text=yaml.safe_dump_all(objects))

    def start(self, binaries: dict[str, Path]) -> None:
        """After the node's kubelet is up: the driver (until the kubelet registered it), the
        sidecars, then the snapshot classes (their CRDs are established by then)."""
        for path in (self.socket, self.registration_dir / REGISTRATION_SOCKET):
            if len(str(path)) > MAX_SOCKET_PATH:
                raise LaunchError(
                    f"the state directory's path is too long for the CSI driver's socket "
                    f"({len(str(path))} > {MAX_SOCKET_PATH} bytes: {path}); use a shorter "
                    "--state-dir"
                )
        began = time.monotonic()
        driver = ManagedProcess(
            "csi-driver",
            [
                str(binaries["sjs-csi-driver"]),
                f"--name={DRIVER_NAME}",
                f"--endpoint={self.socket}",
                f"--state-dir={self.state_dir}",
                f"--node-id={self.node_name}",
                f"--topology-key={TOPOLOGY_KEY}",
                f"--registration-dir={self.registration_dir}",
            ],
            self.cluster.state_dir / "logs" / "csi-driver.log",
        )
        self.cluster.start_process(driver, lambda: _log_says(driver, REGISTERED_LINE))
        for sidecar in SIDECARS:
            self._start_sidecar(sidecar, binaries[sidecar.name])
        names = [f"crd/{crd_name(path)}" for path in snapshot_crds()]
        self.cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)
        classes = yaml.safe_dump_all(snapshot_classes())
        self.cluster.kubectl("create", "-f", "-", input_text=classes)
        self.report(f"  CSI stack ({DRIVER_NAME}) ready in {time.monotonic() - began:.1f}s")

    def _start_sidecar(self, sidecar: Sidecar, binary: Path) -> None:
        kubeconfig = pkimod.issue_client(self.cluster.pki, sidecar.identity, self.cluster.server)
        port = free_port()
        argv = [
            str(binary),
            f"--kubeconfig={kubeconfig}",
            "--leader-election=false",
            f"--http-endpoint=127.0.0.1:{port}",
            "--v=2",
        ]
        if sidecar.uses_driver:
            argv.append(f"--csi-address={self.socket}")
        if sidecar.name == "csi-provisioner":
            # Pass the claim's name and namespace to CreateVolume (they are in the driver's log).
            argv.append("--extra-create-metadata")
        process = ManagedProcess(
            sidecar.name, argv, self.cluster.state_dir / "logs" / f"{sidecar.name}.log"
        )
        # The metrics endpoint serves once the sidecar has connected to the driver.
        self.cluster.start_process(process, lambda: https_get(f"http://127.0.0.1:{port}/metrics"))
