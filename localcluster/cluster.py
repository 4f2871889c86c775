"""The local control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, KWOK and
a test volume provisioner, all on 127.0.0.1 with free ports.

Profiles:
- ``full``: everything; pods really get scheduled onto fake KWOK nodes and run to completion,
  claims really bind, garbage collection really collects (the end-to-end tier and the demo).
- ``node``: the control plane and the test provisioner with one real node instead of the KWOK
  nodes: containerd 2.x + runc + a kubelet, a local image registry and CoreDNS
  (``localcluster/node``). Containers really run and volumes are real directories on this
  host, so every pod, from unchanged manifests, runs there (the node tier and the demo). Beside
  the test provisioner's classes, the CSI stack (``localcluster/csi.py``: our CSI driver, the
  external-provisioner, -resizer, -snapshotter and the snapshot-controller) serves the classes
  ``csi-immediate`` and ``csi-wffc`` and VolumeSnapshots.
- ``apiserver``: etcd and kube-apiserver only; nothing but the test changes object status, as in
  upstream's integration tests (the integration tier).
- ``kueue``: ``full`` plus Kueue's manager with its JobSet integration, its webhooks and CRDs,
  the JobSet CRD, and a ClusterQueue/LocalQueue whose GPU quota is the KWOK nodes'
  (``localcluster/kueue.py``; issue 18).
- ``trainer``: ``node`` plus Kubeflow Trainer's manager with its webhooks and CRDs, the JobSet
  CRD and the repository's ClusterTrainingRuntime (``localcluster/trainer.py``; issue 38).
  With ``with_kueue``, Kueue's TrainJob integration too.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import yaml

from localcluster import pki as pkimod
from localcluster.build import Binaries, ensure_binaries, ensure_csi, ensure_versioned_apiserver
from localcluster.controlplane import Ports
from localcluster.csi import CsiStack
from localcluster.jobsetapi import FILES as JOBSET_API
from localcluster.kueue import Kueue
from localcluster.node import RealNode, node_binaries, require_host
from localcluster.processes import (
    LaunchError,
    ManagedProcess,
    https_get,
    run_apply,
    run_tool,
    stop_all,
    wait_ready,
)
from localcluster.provisioner import PROVISIONER_NAME, READY_LINE
from localcluster.trainer import Trainer

Profile = Literal["full", "apiserver", "node", "kueue", "trainer"]
PROFILES: tuple[Profile, ...] = ("full", "apiserver", "node", "kueue", "trainer")
STAGES_FILE = Path(__file__).parent / "kwok" / "stages.yaml"
NODE_LABEL = "localcluster.test/kwok-node"
NODE_COUNT = 4
LAUNCHER_FILES = ("launcher.pid", "launcher.log")
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
# Services' ClusterIPs; the first, the ``kubernetes`` Service's, is pki.KUBERNETES_SERVICE_IP.
SERVICE_CIDR = "10.96.0.0/16"

# Claims' writes and the controller's writes are what tests audit; reads are not logged.
_AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Metadata",
            "verbs": ["create", "update", "patch", "delete", "deletecollection"],
        },
        {"level": "None"},
    ],
}


def _storage_classes() -> list[dict[str, object]]:
    def storage_class(
        name: str, binding: str, expandable: bool, default: bool = False, reclaim: str = "Delete"
    ) -> dict[str, object]:
        annotations = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
        return {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": name, "annotations": annotations},
            "provisioner": PROVISIONER_NAME,
            "volumeBindingMode": binding,
            "allowVolumeExpansion": expandable,
            "reclaimPolicy": reclaim,
        }

    return [
        storage_class("standard", "Immediate", False, default=True),
        storage_class("wffc", "WaitForFirstConsumer", False),
        storage_class("expandable", "Immediate", True),
        storage_class("wffc-expandable", "WaitForFirstConsumer", True),
        storage_class("fixed", "Immediate", False),
        # The volume (and, on the real node, its directory) outlives its claim.
        storage_class("retain", "Immediate", False, reclaim="Retain"),
    ]


def _nodes(count: int) -> list[dict[str, object]]:
    capacity = {"cpu": "32", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "8"}
    return [
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": f"kwok-node-{i}",
                "labels": {
                    NODE_LABEL: "true",
                    "kubernetes.io/hostname": f"kwok-node-{i}",
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                },
                "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
            },
            "status": {"capacity": capacity, "allocatable": capacity},
        }
        for i in range(count)
    ]


def _log_says(process: ManagedProcess, line: str) -> tuple[int, str]:
    """A readiness probe for processes that announce readiness on their output."""
    try:
        text = process.log_path.read_text(errors="replace")
    except FileNotFoundError:
        return 0, "no output yet"
    started = text.rsplit("=== start", 1)[-1]
    return (200, line) if line in started else (0, "not announced yet")


@dataclass
class LocalCluster:
    """A running (or startable) local control plane rooted at ``state_dir``."""

    state_dir: Path
    profile: Profile = "full"
    apiserver_port: int = 0
    # Client-side QPS of kube-controller-manager's controllers (its default is 20): benchmarks
    # raise it so that the API server, not the Job controller's own limiter, is the bottleneck.
    controller_manager_qps: int | None = None
    report: Callable[[str], None] = field(
        default=lambda msg: print(msg, file=sys.stderr, flush=True)
    )
    binaries: Binaries | None = None
    # Another kube-apiserver binary instead of the suite's (``apiserver`` profile only): the
    # oldest supported release's (build.ensure_min_apiserver), to test the CRD and a JobSet there.
    # The ``kueue`` profile sets it itself (build.ensure_versioned_apiserver).
    kube_apiserver: Path | None = None
    # The suite's kube-apiserver built with its release as its version (instead of
    # v0.0.0-master): for what reads the server's version, e.g. a Helm chart's kubeVersion.
    versioned_apiserver: bool = False
    processes: list[ManagedProcess] = field(default_factory=list)
    # The real node of the ``node`` profile, and its CSI stack.
    node: RealNode | None = None
    csi: CsiStack | None = None
    # Kueue on the ``node`` profile too (the ``kueue`` profile is ``full`` with it): the
    # real-node tier's preemption test.
    with_kueue: bool = False
    # Kueue's manager of the ``kueue`` profile (or of ``with_kueue``).
    kueue: Kueue | None = None
    # Trainer's manager of the ``trainer`` profile.
    trainer: Trainer | None = None
    ports: Ports | None = None
    started_seconds: float = 0.0

    # ----------------------------------------------------------------- paths

    @property
    def kubeconfig(self) -> Path:
        return self.state_dir / "kubeconfig"

    @property
    def pki(self) -> pkimod.Pki:
        return pkimod.Pki(self.state_dir / "pki")

    @property
    def audit_log(self) -> Path:
        return self.state_dir / "logs" / "audit.log"

    @property
    def server(self) -> str:
        assert self.ports is not None
        return f"https://127.0.0.1:{self.ports.apiserver}"

    @property
    def etcd_url(self) -> str:
        assert self.ports is not None
        return f"http://127.0.0.1:{self.ports.etcd_client}"

    # -------------------------------------------------------------- building

    def _process(self, name: str, argv: list[str]) -> ManagedProcess:
        return ManagedProcess(name, argv, self.state_dir / "logs" / f"{name}.log")

    def _etcd(self) -> ManagedProcess:
        assert self.binaries and self.ports
        peer = f"http://127.0.0.1:{self.ports.etcd_peer}"
        return self._process(
            "etcd",
            [
                str(self.binaries.path("etcd")),
                "--name=local",
                f"--data-dir={self.state_dir / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=local={peer}",
                "--log-level=warn",
                # Tests do not need durability across power loss; fsync would dominate latency.
                "--unsafe-no-fsync",
                "--quota-backend-bytes=8589934592",
            ],
        )

    def _apiserver(self) -> ManagedProcess:
        assert self.binaries and self.ports
        pki = self.pki
        policy = self.state_dir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(_AUDIT_POLICY))
        kubelet_client = pkimod.APISERVER_KUBELET_CLIENT
        return self._process(
            "kube-apiserver",
            [
                str(self.kube_apiserver or self.binaries.path("kube-apiserver")),
                f"--etcd-servers={self.etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.ports.apiserver}",
                f"--tls-cert-file={pki.serving_cert}",
                f"--tls-private-key-file={pki.serving_key}",
                f"--client-ca-file={pki.ca_cert}",
                f"--kubelet-client-certificate={pki.client_cert(kubelet_client)}",
                f"--kubelet-client-key={pki.client_key(kubelet_client)}",
                # A real node's name does not resolve; reach its kubelet by its InternalIP.
                "--kubelet-preferred-address-types=InternalIP,Hostname",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=Node,RBAC",
                "--allow-privileged=true",
                # The built-in "kubernetes" Endpoints cannot point at a loopback address.
                "--endpoint-reconciler-type=none",
                # ConfigMaps bypass the watch cache, so compacting etcd really makes a watch from
                # an old resourceVersion fail with 410 Gone (informer tests force it that way).
                "--watch-cache-sizes=configmaps#0",
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-maxsize=200",
                "--audit-log-maxbackup=1",
                "--profiling=false",
                "--v=1",
            ],
        )

    def _controller_manager(self) -> ManagedProcess:
        assert self.binaries and self.ports
        pki = self.pki
        kubeconfig = pki.kubeconfig(pkimod.CONTROLLER_MANAGER)
        return self._process(
            "kube-controller-manager",
            [
                str(self.binaries.path("kube-controller-manager")),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.ports.controller_manager}",
                f"--cert-dir={self.state_dir / 'kcm-certs'}",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki.sa_key}",
                f"--root-ca-file={pki.ca_cert}",
                f"--cluster-signing-cert-file={pki.ca_cert}",
                f"--cluster-signing-key-file={pki.ca_key}",
                *(
                    [
                        f"--kube-api-qps={self.controller_manager_qps}",
                        f"--kube-api-burst={2 * self.controller_manager_qps}",
                    ]
                    if self.controller_manager_qps
                    else []
                ),
                "--v=1",
            ],
        )

    def _scheduler(self) -> ManagedProcess:
        assert self.binaries and self.ports
        kubeconfig = self.pki.kubeconfig(pkimod.SCHEDULER)
        return self._process(
            "kube-scheduler",
            [
                str(self.binaries.path("kube-scheduler")),
                f"--kubeconfig={kubeconfig}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.ports.scheduler}",
                "--leader-elect=false",
                "--v=1",
            ],
        )

    def _kwok(self) -> ManagedProcess:
        assert self.binaries and self.ports
        return self._process(
            "kwok",
            [
                str(self.binaries.path("kwok")),
                f"--kubeconfig={self.pki.kubeconfig(pkimod.KWOK)}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-label-selector={NODE_LABEL}=true",
                f"--config={STAGES_FILE}",
                f"--server-address=127.0.0.1:{self.ports.kwok}",
                "--cidr=10.244.0.1/16",
                "--node-ip=10.0.0.1",
            ],
        )

    def _provisioner(self) -> ManagedProcess:
        return self._process(
            "provisioner",
            [
                sys.executable,
                "-m",
                "localcluster.provisioner",
                f"--kubeconfig={self.pki.kubeconfig(pkimod.PROVISIONER)}",
                f"--volumes-dir={self.volumes_dir}",
            ],
        )

    # ------------------------------------------------------------- lifecycle

    def _probe_apiserver(self) -> tuple[int, str]:
        admin = pkimod.ADMIN
        return https_get(
            f"{self.server}/readyz",
            ca=self.pki.ca_cert,
            cert=(self.pki.client_cert(admin), self.pki.client_key(admin)),
        )

    def start_process(self, process: ManagedProcess, probe: Callable[[], tuple[int, str]]) -> None:
        """Start one more process of this cluster (stopped with it) and wait for ``probe``."""
        self._start(process, probe)

    def _start(self, process: ManagedProcess, probe: Callable[[], tuple[int, str]]) -> None:
        started = time.monotonic()
        process.start()
        self.processes.append(process)
        wait_ready(process, probe, timeout=90, report=self.report)
        self.report(
            f"  {process.name} ready in {time.monotonic() - started:.1f}s (pid {process.pid})"
        )

    def kubectl(self, *args: str, input_text: str | None = None) -> str:
        assert self.binaries is not None
        argv = [str(self.binaries.path("kubectl")), f"--kubeconfig={self.kubeconfig}", *args]
        run = run_apply if args[:1] == ("apply",) else run_tool
        return run(argv, what=f"kubectl {' '.join(args)}", timeout=90, input_text=input_text)

    def start(self) -> None:
        """Start every process of the profile and wait until the cluster is usable.

        On any failure everything already started is stopped before the error propagates.
        """
        began = time.monotonic()
        try:
            self._start_processes()
        except BaseException:
            self.stop()
            raise
        self.started_seconds = time.monotonic() - began
        self._write_state()
        self.report(f"control plane ({self.profile}) ready in {self.started_seconds:.1f}s")

    def _start_processes(self) -> None:
        if self.real_node:
            # Before anything is built or started: one message for what the host lacks.
            require_host()
        versioned = self.runs_kueue or self.versioned_apiserver  # the suite's own release
        if self.kube_apiserver is not None and self.profile != "apiserver" and not versioned:
            # The other profiles' controller-manager, scheduler and kubelet are of the suite's
            # release, and Kubernetes supports them only against an API server at least as new.
            raise LaunchError(
                f"another kube-apiserver ({self.kube_apiserver}) works with the apiserver profile "
                f"only, not {self.profile!r}"
            )
        if self.binaries is None:
            self.binaries = ensure_binaries(self.report)
        if versioned and self.kube_apiserver is None:
            # Kueue and a chart's kubeVersion need a server version that parses.
            self.kube_apiserver = ensure_versioned_apiserver(self.report)
        csi_binaries: dict[str, Path] = {}
        if self.real_node:
            # Before the state directory is deleted: if a killed launcher's guardian was killed
            # too, containers may still run with their root filesystems mounted in it.
            self._new_node().recover()
            csi_binaries = ensure_csi(self.report)
        self._clean_state_dir()
        self.ports = Ports.allocate(self.apiserver_port)
        pki = pkimod.generate(self.pki.directory, self.server)
        shutil.copyfile(pki.kubeconfig(pkimod.ADMIN), self.kubeconfig)
        self.kubeconfig.chmod(0o600)

        self._start(self._etcd(), lambda: https_get(f"{self.etcd_url}/health"))
        self._start(self._apiserver(), self._probe_apiserver)
        if self.profile == "apiserver":
            return
        cm_port = self.ports.controller_manager
        self._start(
            self._controller_manager(),
            lambda: https_get(f"https://127.0.0.1:{cm_port}/healthz"),
        )
        sched_port = self.ports.scheduler
        self._start(self._scheduler(), lambda: https_get(f"https://127.0.0.1:{sched_port}/healthz"))
        provisioner = self._provisioner()
        self._start(provisioner, lambda: _log_says(provisioner, READY_LINE))
        if self.real_node:
            self.kubectl("create", "-f", "-", input_text=yaml.safe_dump_all(_storage_classes()))
            self.node = self._new_node()
            self.csi = CsiStack(
                self, self.node.name, self.node.directory, self.node.kubelet_root, self.report
            )
            self.csi.install_api()
            self.node.start()
            self.csi.start(csi_binaries)
            self._wait_usable(0)
            if self.profile == "trainer":
                # Before Kueue: its TrainJob integration needs Trainer's CRDs at its start.
                self.trainer = Trainer(self, self.report)
                self.trainer.start(JOBSET_API)
            if self.runs_kueue:
                # A small default quota (the host runs the control plane beside the pods);
                # no flavor node labels: every pod lands on the one real node anyway.
                self.kueue = Kueue(self, self.report, trainer=self.trainer is not None)
                self.kueue.start(JOBSET_API, gpus=0, cpu=1, memory_gi=4, node_labels={})
            return
        kwok_port = self.ports.kwok
        self._start(self._kwok(), lambda: https_get(f"http://127.0.0.1:{kwok_port}/healthz"))
        objects = _storage_classes() + _nodes(NODE_COUNT)
        self.kubectl("create", "-f", "-", input_text=yaml.safe_dump_all(objects))
        self._wait_usable(NODE_COUNT)
        if self.runs_kueue:
            self.kueue = Kueue(self, self.report)
            self.kueue.start(JOBSET_API)

    def _new_node(self) -> RealNode:
        return RealNode(
            self, node_binaries(self.report), self.state_dir / "node", report=self.report
        )

    @property
    def volumes_dir(self) -> Path:
        """Where the test provisioner makes each volume's directory (hostPath)."""
        return self.state_dir / "volumes"

    def _clean_state_dir(self) -> None:
        """Start from nothing, but keep the files of a launcher that runs us in the background."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        for entry in self.state_dir.iterdir():
            if entry.name in LAUNCHER_FILES:
                continue
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()

    def _wait_usable(self, kwok_nodes: int) -> None:
        """KWOK's nodes Ready and the default ServiceAccount exists (pods can be made). The real
        node of the ``node`` profile waited for its own Ready."""
        deadline = time.monotonic() + 90
        while True:
            ready = self.kubectl(
                "get",
                "nodes",
                "-l",
                f"{NODE_LABEL}=true",
                "-o",
                "jsonpath={range .items[*]}{.status.conditions[?(@.type=='Ready')].status}{'\\n'}",
            ).split()
            accounts = self.kubectl("get", "serviceaccounts", "-n", "default", "-o", "name")
            if ready.count("True") == kwok_nodes and "serviceaccount/default" in accounts:
                return
            if time.monotonic() > deadline:
                raise LaunchError(
                    f"nodes Ready: {ready.count('True')}/{kwok_nodes}, default ServiceAccount: "
                    f"{'serviceaccount/default' in accounts}, after 90s. See the kwok and "
                    f"kube-controller-manager logs in {self.state_dir / 'logs'}."
                )
            self._check_alive()
            time.sleep(0.3)

    def _check_alive(self) -> None:
        for process in self.processes:
            if not process.running():
                raise LaunchError(
                    f"{process.name} exited unexpectedly. Last lines of {process.log_path}:\n"
                    f"{process.log_tail()}"
                )

    def stop(self) -> None:
        for manager in (self.trainer, self.kueue):
            # While the API server runs: a failurePolicy=Fail webhook whose server is gone would
            # refuse every later write of what it covers (JobSets, for Kueue's).
            if manager is not None and manager.process is not None and self._apiserver_up():
                try:
                    manager.remove_webhooks()
                except LaunchError as err:
                    name = type(manager).__name__
                    self.report(f"  could not delete {name}'s webhook configurations: {err}")
        self.trainer = None
        self.kueue = None
        if self.node is not None:
            self.node.stop()
            self.node = None
        self.csi = None
        stop_all(self.processes)
        self.processes.clear()
        state = self.state_dir / "cluster.json"
        if state.exists():
            state.unlink()

    @property
    def runs_kueue(self) -> bool:
        return self.profile == "kueue" or self.with_kueue

    @property
    def real_node(self) -> bool:
        """The profile runs the real node (``node``, and ``trainer`` on top of it)."""
        return self.profile in ("node", "trainer")

    def _apiserver_up(self) -> bool:
        try:
            apiserver = self.process("kube-apiserver")
        except KeyError:
            return False
        return apiserver.running()

    def process(self, name: str) -> ManagedProcess:
        for candidate in self.processes:
            if candidate.name == name:
                return candidate
        raise KeyError(name)

    def restart_apiserver(self, down_seconds: float = 0.0) -> None:
        """Stop kube-apiserver, optionally stay down a while, start it again and wait for it."""
        process = self.process("kube-apiserver")
        process.stop()
        time.sleep(down_seconds)
        process.start()
        wait_ready(process, self._probe_apiserver, timeout=90, report=self.report)

    def pids(self) -> dict[str, int]:
        node_processes = self.node.processes if self.node is not None else []
        return {p.name: p.pid for p in self.processes + node_processes if p.pid is not None}

    def _write_state(self) -> None:
        assert self.ports is not None
        state = {
            "profile": self.profile,
            "kubeconfig": str(self.kubeconfig),
            "server": self.server,
            "etcd": self.etcd_url,
            "pids": self.pids(),
            "logs": str(self.state_dir / "logs"),
        }
        (self.state_dir / "cluster.json").write_text(json.dumps(state, indent=2))

    def describe(self) -> list[str]:
        assert self.ports is not None
        lines = [f"kubeconfig: {self.kubeconfig}", f"kube-apiserver: {self.server}"]
        lines += [f"etcd: {self.etcd_url}"]
        node_processes = self.node.processes if self.node is not None else []
        for process in self.processes + node_processes:
            lines.append(f"  {process.name:<24} pid {process.pid}  log {process.log_path}")
        return lines

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
