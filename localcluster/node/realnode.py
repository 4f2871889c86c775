"""The real node's processes: :class:`RealNode` starts and stops containerd, the kubelet, the
local image registry, CoreDNS, the API server's relay for pods and the guardian, registered to a
running control plane (:class:`localcluster.controlplane.ControlPlane`); :func:`node_binaries`
builds what it runs. What it changes on the host is undone by ``host.clean_host``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from localcluster import dns, registry
from localcluster import pki as pkimod
from localcluster.build import ensure_node_binaries
from localcluster.controlplane import ControlPlane
from localcluster.node.host import (
    BRIDGE,
    CNI_BIN_DIR,
    HOST_LOCK,
    HOST_STATE_FILE,
    RUNC,
    HostState,
    clean_host,
    host_ip,
    require_host,
)
from localcluster.processes import (
    LaunchError,
    ManagedProcess,
    free_port,
    https_get,
    run_tool,
    stop_all,
    wait_ready,
)

NODE_NAME = "real-node-0"
POD_SUBNET = "10.88.0.0/16"
# The bridge's own address (the pods' gateway): made before anything starts, so CoreDNS can bind
# to it; pods reach it over their veth (a pod's 127.0.0.1 is its own).
GATEWAY = "10.88.0.1"
# The ``kubernetes`` Service's port: what the kubelet puts in pods' KUBERNETES_SERVICE_PORT.
API_SERVICE_PORT = 443
MAX_SOCKET_PATH = 98
# The repository, on the PYTHONPATH of the Python processes the node starts (guardian, relay).
REPO = Path(__file__).resolve().parents[2]
# The process that cleans up the host if the one that started the node dies without stopping it.
GUARDIAN = "node-guardian"


def _tcp_probe(host: str, port: int) -> tuple[int, str]:
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError as err:
        return 0, str(err)
    return 200, "ok"


@dataclass
class RealNode:
    """containerd + kubelet for one real node, registered to a running control plane."""

    cluster: ControlPlane
    binaries: NodeBinaries
    directory: Path
    name: str = NODE_NAME
    report: Callable[[str], None] = field(
        default=lambda msg: print(msg, file=sys.stderr, flush=True)
    )
    processes: list[ManagedProcess] = field(default_factory=list)
    _lock: int | None = None
    # Our end of the pipe to the guardian: "stopped" on it means a clean stop, nothing to do.
    _guardian_pipe: int | None = None

    @property
    def bin_dir(self) -> Path:
        return self.binaries.containerd_dir

    def _take_host_lock(self) -> None:
        """Wait for any other real node on this host to stop (see ``HOST_LOCK``)."""
        HOST_LOCK.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(HOST_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            self.report(f"  another real node runs on this host ({holder}); waiting for it to stop")
            fcntl.flock(fd, fcntl.LOCK_EX)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()}, {self.directory}\n".encode(), 0)
        self._lock = fd

    def _release_host_lock(self) -> None:
        if self._lock is not None:
            os.close(self._lock)  # closing the descriptor releases the flock
            self._lock = None

    @property
    def _host_file(self) -> Path:
        return self.directory / HOST_STATE_FILE

    def recover(self) -> None:
        """Clean up after a node whose launcher and guardian both died without cleaning up (its
        ``host-state.json`` is still there): its shims and containers may still run and its
        mounts are still there, so the state directory must not simply be deleted."""
        if not self._host_file.is_file():
            return
        self._take_host_lock()
        try:
            # A guardian that was still at work held the lock: it may have finished meanwhile.
            if self._host_file.is_file():
                self.report(f"  cleaning up a previous node in {self.directory}")
                clean_host(self.directory, self.report)
        finally:
            self._release_host_lock()

    @property
    def socket(self) -> Path:
        return self.directory / "containerd" / "run" / "containerd.sock"

    @property
    def kubelet_root(self) -> Path:
        """The kubelet's --root-dir (pods' volumes; plugins register in its plugins_registry)."""
        return self.directory / "kubelet" / "root"

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        # containerd finds containerd-shim-runc-v2 on PATH; ours must win over Debian's 1.6 one.
        env["PATH"] = f"{self.bin_dir}:{env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"
        return env

    def ctr(self, *args: str) -> str:
        argv = [str(self.bin_dir / "ctr"), f"--address={self.socket}", "-n", "k8s.io", *args]
        return run_tool(argv, what=f"ctr {' '.join(args)}", timeout=120)

    def _containerd_config(self) -> Path:
        base = self.directory / "containerd"
        cni_conf = self.directory / "cni" / "net.d"
        cni_conf.mkdir(parents=True, exist_ok=True)
        conflist = {
            "cniVersion": "1.0.0",
            "name": "localcluster",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": BRIDGE,
                    "isGateway": True,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": POD_SUBNET}]],
                        # Pods have no default route; the kubernetes Service's address (the
                        # API server, relayed on the bridge: _start_api_relay) goes via the
                        # gateway.
                        "routes": [{"dst": f"{pkimod.KUBERNETES_SERVICE_IP}/32"}],
                        "dataDir": str(self.directory / "cni" / "ipam"),
                    },
                },
                {"type": "loopback"},
            ],
        }
        (cni_conf / "10-localcluster.conflist").write_text(json.dumps(conflist, indent=2))
        cri_images = "plugins.'io.containerd.cri.v1.images'"
        cri_runtime = "plugins.'io.containerd.cri.v1.runtime'"
        runc = f"{cri_runtime}.containerd.runtimes.runc"
        config = f"""version = 3
root = '{base / "root"}'
state = '{base / "state"}'
disabled_plugins = ['io.containerd.nri.v1.nri']

[grpc]
  address = '{self.socket}'

[{cri_images}]
  snapshotter = 'overlayfs'
[{cri_images}.pinned_images]
  sandbox = '{registry.SANDBOX_IMAGE}'
[{cri_images}.registry]
  # docker.io and registry.k8s.io resolve at the local registry only (certs.d/*/hosts.toml)
  config_path = '{self._certs_d}'

[{cri_runtime}]
  # These hosts lack CAP_SYS_RESOURCE: runc cannot lower oom_score_adj (the kubelet asks -998
  # for a sandbox; runc 1.1.5 then fails with "can't get final child's PID from pipe: EOF").
  # Clamp the kubelet's values to containerd's own, as for rootless.
  restrict_oom_score_adj = true
  # Pods' network namespaces under our state directory (not /var/run/netns), so that stopping
  # unmounts them with the rest and their veths go with them.
  netns_mounts_under_state_dir = true
[{cri_runtime}.containerd]
  default_runtime_name = 'runc'
[{runc}]
  runtime_type = 'io.containerd.runc.v2'
[{runc}.options]
  BinaryName = '{RUNC}'
  # runc's own state, else /run/containerd/runc, shared with any other containerd
  Root = '{base / "runc"}'
  SystemdCgroup = false
[{cri_runtime}.cni]
  bin_dirs = ['{CNI_BIN_DIR}']
  conf_dir = '{cni_conf}'
"""
        path = base / "config.toml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(config)
        return path

    def _containerd(self) -> ManagedProcess:
        config = self._containerd_config()
        self.socket.parent.mkdir(parents=True, exist_ok=True)
        return ManagedProcess(
            "containerd",
            [str(self.bin_dir / "containerd"), f"--config={config}", "--log-level=info"],
            self.directory / "logs" / "containerd.log",
            env=self._env(),
        )

    def _kubelet(self, healthz_port: int) -> ManagedProcess:
        pki = self.cluster.pki
        who = pkimod.ClientIdentity(
            f"kubelet-{self.name}", f"system:node:{self.name}", ("system:nodes",)
        )
        kubeconfig = pkimod.issue_client(pki, who, self.cluster.server)
        resolv_conf = self.directory / "kubelet" / "resolv.conf"
        resolv_conf.parent.mkdir(parents=True, exist_ok=True)
        resolv_conf.write_text("# no host resolver: pods use the cluster DNS only\n")
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "containerRuntimeEndpoint": f"unix://{self.socket}",
            "cgroupDriver": "cgroupfs",
            # The hosts this runs on have cgroup v1; kubelet >= 1.35 refuses it unless told.
            "failCgroupV1": False,
            "failSwapOn": False,
            "address": host_ip(),
            "port": free_port(),
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": healthz_port,
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": True},
                "x509": {"clientCAFile": str(pki.ca_cert)},
            },
            "authorization": {"mode": "Webhook"},
            "clusterDomain": dns.CLUSTER_DOMAIN,
            "clusterDNS": [GATEWAY],
            # Not the host's resolv.conf: its search domains would be appended to every pod's,
            # and the cluster DNS answers only cluster names.
            "resolvConf": str(resolv_conf),
            # Nothing here should be evicted because the shared disk is fuller than a default.
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%"},
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "serializeImagePulls": False,
            "staticPodPath": "",
            "podPidsLimit": -1,
            # How often the kubelet syncs each pod again (each time plus up to half as much
            # jitter); default 1 min. Online expansion's node step (NodeExpandVolume) waits for
            # the next sync of a pod using the volume: 10 s makes that 10-15 s, not 60-90 s.
            "syncFrequency": "10s",
        }
        path = self.directory / "kubelet" / "config.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config))
        return ManagedProcess(
            "kubelet",
            [
                str(self.binaries.kubelet),
                f"--config={path}",
                f"--kubeconfig={kubeconfig}",
                f"--root-dir={self.kubelet_root}",
                f"--cert-dir={self.directory / 'kubelet' / 'pki'}",
                f"--hostname-override={self.name}",
                f"--node-ip={host_ip()}",
                "--v=2",
            ],
            self.directory / "logs" / "kubelet.log",
            env=self._env(),
        )

    @property
    def _certs_d(self) -> Path:
        return self.directory / "certs.d"

    def start(self) -> None:
        require_host()
        # containerd refuses a socket path longer than a unix socket address allows (with its
        # ".ttrpc" suffix): say so before anything starts.
        if len(str(self.socket)) > MAX_SOCKET_PATH:
            raise LaunchError(
                f"the state directory's path is too long for containerd's socket "
                f"({len(str(self.socket))} > {MAX_SOCKET_PATH} bytes: {self.socket}); "
                "use a shorter --state-dir"
            )
        try:
            self._take_host_lock()
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        # On disk, before anything changes: the guardian (or recover) restores from it.
        HostState.capture().save(self._host_file)
        self._start_guardian()
        began = time.monotonic()
        self._make_bridge()
        # Images: unchanged manifests name docker.io/library/busybox (pull policy Always when
        # untagged); containerd asks the local registry for every docker.io and registry.k8s.io
        # name, so a pull never leaves this machine and always finds the locally built image.
        mirror = registry.start(self.directory, report=self.report)
        self.processes.append(mirror.process)
        registry.write_containerd_hosts(self._certs_d, mirror.url)
        self.report(f"  image registry serving busybox and pause at {mirror.url}")
        self._start_api_relay()
        coredns = dns.start(
            self.binaries.coredns,
            self.directory,
            self.cluster.kubeconfig,
            port=53,
            bind=GATEWAY,
            report=self.report,
        )
        self.processes.append(coredns.process)
        self.report(f"  cluster DNS (CoreDNS) on {GATEWAY}:53")
        containerd = self._containerd()
        containerd.start()
        self.processes.append(containerd)
        wait_ready(containerd, self._containerd_ready, timeout=60, report=self.report)
        self.report(f"  containerd ready in {time.monotonic() - began:.1f}s")
        healthz = free_port()
        kubelet = self._kubelet(healthz)
        kubelet.start()
        self.processes.append(kubelet)
        wait_ready(
            kubelet,
            lambda: https_get(f"http://127.0.0.1:{healthz}/healthz"),
            timeout=90,
            report=self.report,
        )
        self.report(f"  kubelet healthy in {time.monotonic() - began:.1f}s")
        self._wait_node_ready(began)

    def _start_guardian(self) -> None:
        """A process that outlives us: if we die without stopping the node (``kill -9``, an
        OOM kill), it cleans up the host at once. It holds the host lock (inherited) until then,
        so that no other node starts on a dirty host. Our children die with us
        (``PR_SET_PDEATHSIG``), but shims and containers are re-parented and would run on."""
        assert self._lock is not None
        their_end, our_end = os.pipe()  # both close-on-exec: only the guardian gets its end
        guardian = ManagedProcess(
            GUARDIAN,
            [
                sys.executable,
                "-m",
                "localcluster.guardian",
                f"--launcher={os.getpid()}",
                f"--stop-fd={their_end}",
                f"--lock-fd={self._lock}",
                str(self.directory.resolve()),
            ],
            self.directory / "logs" / f"{GUARDIAN}.log",
            env=dict(os.environ, PYTHONPATH=str(REPO)),
            outlives_us=True,
            pass_fds=(their_end, self._lock),
        )
        try:
            guardian.start()
        finally:
            os.close(their_end)
        self._guardian_pipe = our_end
        self.processes.append(guardian)

    def _dismiss_guardian(self) -> None:
        """Tell the guardian that the node stopped cleanly and wait for it to exit (it holds
        the host lock until then)."""
        if self._guardian_pipe is not None:
            with contextlib.suppress(OSError):  # it died already: EPIPE
                os.write(self._guardian_pipe, b"stopped")
            os.close(self._guardian_pipe)
            self._guardian_pipe = None
        for guardian in [p for p in self.processes if p.name == GUARDIAN]:
            if guardian.popen is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    guardian.popen.wait(timeout=10)
            guardian.stop()

    def _make_bridge(self) -> None:
        """The CNI bridge with the gateway address, before the first pod (the bridge plugin
        finds and keeps it)."""
        subprocess.run(["ip", "link", "delete", BRIDGE], capture_output=True)
        prefix = POD_SUBNET.split("/")[1]
        for argv in (
            ["ip", "link", "add", BRIDGE, "type", "bridge"],
            ["ip", "addr", "add", f"{GATEWAY}/{prefix}", "dev", BRIDGE],
            ["ip", "link", "set", BRIDGE, "up"],
        ):
            run_tool(argv, what=" ".join(argv), timeout=30)

    def _start_api_relay(self) -> None:
        """The API server at the ``kubernetes`` Service's address, for pods (a controller in a
        pod, issue 16): that address on the bridge, relayed to the API server's loopback port
        (``localcluster/apirelay.py``)."""
        assert self.cluster.ports is not None
        address = pkimod.KUBERNETES_SERVICE_IP
        argv = ["ip", "addr", "add", f"{address}/32", "dev", BRIDGE]
        run_tool(argv, what=" ".join(argv), timeout=30)
        relay = ManagedProcess(
            "apirelay",
            [
                sys.executable,
                "-m",
                "localcluster.apirelay",
                address,
                str(API_SERVICE_PORT),
                str(self.cluster.ports.apiserver),
            ],
            self.directory / "logs" / "apirelay.log",
            env=dict(os.environ, PYTHONPATH=str(REPO)),
        )
        relay.start()
        self.processes.append(relay)
        wait_ready(relay, lambda: _tcp_probe(address, API_SERVICE_PORT), 30, self.report)
        self.report(f"  API server for pods at {address}:{API_SERVICE_PORT} (kubernetes Service)")

    def _containerd_ready(self) -> tuple[int, str]:
        if not self.socket.exists():
            return 0, "no socket yet"
        try:
            self.ctr("version")
        except LaunchError as err:
            return 0, str(err)
        return 200, "ok"

    def _wait_node_ready(self, began: float) -> None:
        deadline = time.monotonic() + 120
        status = ""
        while time.monotonic() < deadline:
            try:
                status = self.cluster.kubectl(
                    "get",
                    "node",
                    self.name,
                    "-o",
                    "jsonpath={.status.conditions[?(@.type=='Ready')].status}",
                )
            except LaunchError as err:
                status = str(err)
            if status == "True":
                self.report(f"  node {self.name} Ready in {time.monotonic() - began:.1f}s")
                return
            for process in self.processes:
                if not process.running():
                    raise LaunchError(f"{process.name} exited:\n{process.log_tail()}")
            time.sleep(0.5)
        raise LaunchError(f"node {self.name} not Ready after 120s (last: {status!r})")

    # ------------------------------------------------------------------- stop

    def stop(self) -> None:
        """Stop the kubelet, the containers through containerd, containerd and the rest, then
        undo what is left on the host (:func:`clean_host`); the guardian last, told that all is
        done. Interrupted half-way, the guardian finishes the work when we exit."""
        by_name = {p.name: p for p in self.processes}
        if "kubelet" in by_name:
            by_name["kubelet"].stop()
        containerd = by_name.get("containerd")
        if containerd is not None and containerd.running():
            self._remove_containers()
        if containerd is not None:
            containerd.stop()
        stop_all([p for p in self.processes if p.name not in ("kubelet", "containerd", GUARDIAN)])
        if self._lock is not None:  # without the lock, another node's host state is not ours
            guardians = {p.pid for p in self.processes if p.name == GUARDIAN and p.pid}
            clean_host(self.directory, self.report, spare=guardians)
        self._dismiss_guardian()
        self.processes.clear()
        self._release_host_lock()

    def _remove_containers(self) -> None:
        """Kill and delete every task and container (the sandboxes' too) of the k8s.io namespace."""
        try:
            tasks = self.ctr("tasks", "list", "-q").split()
            for task in tasks:
                subprocess.run(
                    [
                        str(self.bin_dir / "ctr"),
                        f"--address={self.socket}",
                        "-n",
                        "k8s.io",
                        "tasks",
                        "delete",
                        "--force",
                        task,
                    ],
                    capture_output=True,
                    timeout=30,
                )
            containers = self.ctr("containers", "list", "-q").split()
            if containers:
                self.ctr("containers", "delete", *containers)
        except (LaunchError, subprocess.TimeoutExpired) as err:
            self.report(f"  warning: removing containers: {err}")


@dataclass(frozen=True)
class NodeBinaries:
    # containerd, containerd-shim-runc-v2 and ctr: one directory (the shim is found on PATH)
    containerd_dir: Path
    kubelet: Path
    coredns: Path


def node_binaries(report: Callable[[str], None] | None = None) -> NodeBinaries:
    """containerd, the kubelet and CoreDNS, built on demand (``build.ensure_node_binaries``),
    never by ``ensure_binaries``, which the KWOK tiers use."""
    directories = ensure_node_binaries(("containerd", "kubelet", "coredns"), report)
    return NodeBinaries(
        directories["containerd"],
        directories["kubelet"] / "kubelet",
        directories["coredns"] / "coredns",
    )
