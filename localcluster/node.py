"""A real node next to the local control plane: containerd 2.x + runc + a kubelet (issue 13).

What :class:`RealNode` does (the ``node`` profile of :class:`LocalCluster` starts one after the
control plane, instead of KWOK's nodes, and stops it first):

- takes the host lock (``HOST_LOCK``: one real node per host), saves the host sysctls and the
  kubelet's iptables chains (``host-state.json``) and starts the guardian;
- makes the CNI bridge with the pods' gateway address, starts the local image registry
  (``localcluster.registry``: the locally built busybox and pause images; containerd's
  ``certs.d`` sends every docker.io and registry.k8s.io pull there, so unchanged manifests and the
  ``Always`` pull policy work) and CoreDNS on the gateway (``localcluster.dns``: the JobSets'
  headless Service names);
- writes a containerd 2.x configuration (version 3) with its own root, state and socket under the
  node's directory, the Debian ``runc`` as the only runtime (cgroupfs, no systemd), the Debian CNI
  plugins (``/usr/lib/cni``) and a conflist of ours (bridge + host-local + loopback);
- issues a ``system:node:<name>`` client certificate from the control plane's CA and starts the
  kubelet (cgroup v1 allowed with ``failCgroupV1: false``, cgroupfs, swap tolerated, webhook
  authentication/authorization, ``clusterDNS`` = the gateway, no host search domains);
- stops everything it started: the kubelet, every task and container in containerd's ``k8s.io``
  namespace, containerd, the registry and CoreDNS, then :func:`clean_host`: any shim naming our
  socket and any process in a ``kubepods`` cgroup killed, what is left under the node's directory
  unmounted (pods' netns included), the CNI bridge and the kubelet's ``kubepods`` cgroups and
  iptables chains deleted, the host sysctls the kubelet and the bridge plugin change restored.

If the launcher dies without stopping the node (``kill -9``), its children die with it
(``PR_SET_PDEATHSIG``) but shims and containers are re-parented and run on: the node's guardian
(``localcluster/guardian.py``, outliving the launcher on purpose) runs :func:`clean_host` at once.
If the guardian was killed too, the next start on the same state directory does
(:meth:`RealNode.recover`), before it deletes the directory. Proven by
``tests/node/test_node_lifecycle.py``.

``python -m localcluster.node`` builds what is missing (:func:`node_binaries`: containerd, the
kubelet and CoreDNS, in ``build.NODE_COMPONENTS``), starts the ``node`` profile, runs one busybox
``echo hello`` pod, prints its log, checks pod-to-pod traffic by IP (``--pods N``: start latency
over N pods, RSS) and stops it all. Docs: docs/development.md, "The real node".
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from localcluster import dns, registry
from localcluster import pki as pkimod
from localcluster.build import ensure_node_binaries
from localcluster.processes import (
    LaunchError,
    ManagedProcess,
    free_port,
    https_get,
    pid_alive,
    run_tool,
    stop_all,
    stop_on_signals,
    wait_ready,
)

if TYPE_CHECKING:
    from localcluster.cluster import LocalCluster

NODE_NAME = "real-node-0"
CNI_BIN_DIR = Path("/usr/lib/cni")
RUNC = Path("/usr/sbin/runc")
BUSYBOX = Path("/bin/busybox")
POD_SUBNET = "10.88.0.0/16"
BRIDGE = "sjs-cni0"
# The bridge's own address (the pods' gateway): made before anything starts, so CoreDNS can bind
# to it; pods reach it over their veth (a pod's 127.0.0.1 is its own).
GATEWAY = "10.88.0.1"
# The ``kubernetes`` Service's port: what the kubelet puts in pods' KUBERNETES_SERVICE_PORT.
API_SERVICE_PORT = 443
# One real node per host: kubepods cgroups, the bridge, sysctls and iptables chains are
# host-wide. A second node (another test run, a demo) waits for this lock instead of breaking
# the first.
HOST_LOCK = Path("/run/lock/stateful-jobset-real-node.lock")
MAX_SOCKET_PATH = 98
# Host settings the kubelet (setupKernelTunables, unless protectKernelDefaults, which then
# refuses to start) and the bridge plugin (isGateway turns forwarding on) change: saved at
# start, restored at stop. kernel.panic_on_oops=1 on a shared CI machine is not acceptable.
HOST_SYSCTLS = (
    "vm/overcommit_memory",
    "vm/panic_on_oom",
    "kernel/panic",
    "kernel/panic_on_oops",
    "kernel/keys/root_maxkeys",
    "kernel/keys/root_maxbytes",
    "net/ipv4/ip_forward",
)
# Chains the kubelet makes whatever its configuration (KUBE-FIREWALL also hooks INPUT and OUTPUT
# with a DROP of non-loopback sources to 127.0.0.0/8): removed at stop unless they were there.
KUBELET_CHAINS = ("KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT")
# Tools the node runs by name (the bridge, the cleanup): without them a stop cannot clean up.
HOST_TOOLS = (
    ("ip", "iproute2"),
    ("iptables", "iptables"),
    ("ip6tables", "iptables"),
    ("umount", "mount"),
)
# The process that cleans up the host if the one that started the node dies without stopping it.
GUARDIAN = "node-guardian"


def _tcp_probe(host: str, port: int) -> tuple[int, str]:
    try:
        socket.create_connection((host, port), timeout=2).close()
    except OSError as err:
        return 0, str(err)
    return 200, "ok"


def host_checks() -> list[str]:
    """What the host lacks to run containers (empty when nothing is missing)."""
    missing = []
    for path, package in ((RUNC, "runc"), (BUSYBOX, "busybox-static")):
        if not path.is_file():
            missing.append(f"{path} (apt-get install {package})")
    for plugin in ("bridge", "host-local", "loopback"):
        if not (CNI_BIN_DIR / plugin).is_file():
            missing.append(f"{CNI_BIN_DIR / plugin} (apt-get install containernetworking-plugins)")
    for tool, package in HOST_TOOLS:
        if shutil.which(tool) is None:
            missing.append(f"{tool} (apt-get install {package})")
    if os.geteuid() != 0:
        missing.append("root (containerd and the kubelet need it)")
    return missing


def require_host() -> None:
    """``LaunchError`` naming everything the host lacks, and how to get it."""
    missing = host_checks()
    if missing:
        raise LaunchError("this host cannot run containers; missing: " + ", ".join(missing))


def host_ip() -> str:
    """The address of the default route's interface: the kubelet refuses a loopback node IP."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.connect(("203.0.113.1", 9))  # a UDP connect sends no packet
        return str(sock.getsockname()[0])


def _kubelet_chains() -> set[tuple[str, str, str]]:
    found = set()
    for tool in ("iptables", "ip6tables"):
        for table in ("filter", "nat", "mangle"):
            listing = subprocess.run(
                [tool, "-w", "-t", table, "-S"], capture_output=True, text=True
            ).stdout
            for line in listing.splitlines():
                words = line.split()
                if len(words) == 2 and words[0] == "-N" and words[1] in KUBELET_CHAINS:
                    found.add((tool, table, words[1]))
    return found


def _remove_chain(tool: str, table: str, chain: str) -> None:
    """Delete the rules that jump to ``chain``, then the chain itself."""
    listing = subprocess.run([tool, "-w", "-t", table, "-S"], capture_output=True, text=True)
    for line in listing.stdout.splitlines():
        words = shlex.split(line)
        if words[:1] == ["-A"] and words[-2:] == ["-j", chain]:
            subprocess.run([tool, "-w", "-t", table, "-D", *words[1:]], capture_output=True)
    subprocess.run([tool, "-w", "-t", table, "-F", chain], capture_output=True)
    subprocess.run([tool, "-w", "-t", table, "-X", chain], capture_output=True)


# ------------------------------------------------------------------- host cleanup
# What a node leaves on the host, undone without containerd: by RealNode.stop (containerd is
# stopped by then), by the guardian (the launcher died and took containerd along) and by
# RealNode.recover (even the guardian was killed).

HOST_STATE_FILE = "host-state.json"


@dataclass(frozen=True)
class HostState:
    """The host settings a node changes, as they were before it started. Saved in the node's
    directory before anything changes: while that file exists the host may hold our changes."""

    sysctls: dict[str, str]
    chains: frozenset[tuple[str, str, str]]

    @staticmethod
    def capture() -> HostState:
        sysctls = {name: (Path("/proc/sys") / name).read_text().strip() for name in HOST_SYSCTLS}
        return HostState(sysctls, frozenset(_kubelet_chains()))

    def save(self, path: Path) -> None:
        path.write_text(json.dumps({"sysctls": self.sysctls, "chains": sorted(self.chains)}))

    @staticmethod
    def load(path: Path) -> HostState:
        saved = json.loads(path.read_text())
        chains = frozenset((tool, table, chain) for tool, table, chain in saved["chains"])
        return HostState(dict(saved["sysctls"]), chains)

    def restore(self, report: Callable[[str], None]) -> None:
        """Write the sysctls back; remove the kubelet's chains that were not there before."""
        for name, value in self.sysctls.items():
            try:
                (Path("/proc/sys") / name).write_text(value)
            except OSError as err:
                report(f"  warning: could not restore {name} = {value}: {err}")
        for tool, table, chain in sorted(_kubelet_chains() - self.chains):
            _remove_chain(tool, table, chain)


def _pids_naming(needles: Collection[str]) -> set[int]:
    """Processes whose command line contains one of ``needles``."""
    encoded = [needle.encode() for needle in needles]
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        if any(needle in cmdline for needle in encoded):
            pids.add(int(entry.name))
    return pids


def _kubepods_pids() -> set[int]:
    """Processes in the kubelet's ``kubepods`` cgroups (any v1 hierarchy): the containers."""
    pids: set[int] = set()
    for hierarchy in Path("/sys/fs/cgroup").iterdir():
        top = hierarchy / "kubepods"
        if not top.is_dir():
            continue
        for procs in top.rglob("cgroup.procs"):
            try:
                pids.update(int(pid) for pid in procs.read_text().split())
            except OSError:
                continue  # removed meanwhile
    return pids


def _node_marks(directory: Path) -> tuple[str, ...]:
    """What only the node's runtime processes have on their command line: containerd and the
    kubelet their configurations, the shims our containerd socket (not the whole directory: a
    ``tail -f`` of a log there is not ours to kill)."""
    return (
        str(directory / "containerd" / "run" / "containerd.sock"),
        str(directory / "containerd" / "config.toml"),
        str(directory / "kubelet" / "config.yaml"),
    )


def kill_node_processes(
    directory: Path, report: Callable[[str], None], spare: Collection[int] = ()
) -> None:
    """SIGKILL containerd, the kubelet, the shims and every process in a ``kubepods`` cgroup
    (the containers: re-parented when their shim dies, they would run on), until none is left.
    The kubelet first of all: alive, it would make cgroups and chains again."""
    spared = set(spare) | {os.getpid()}
    marks = _node_marks(directory.resolve())
    deadline = time.monotonic() + 10
    while True:
        pids = {p for p in (_pids_naming(marks) | _kubepods_pids()) - spared if pid_alive(p)}
        if not pids:
            return
        if time.monotonic() > deadline:
            report(f"  warning: still running after SIGKILL: {sorted(pids)}")
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def unmount_under(directory: Path) -> None:
    """Unmount whatever is still mounted under the node's directory, deepest first."""
    prefix = str(directory.resolve()) + "/"
    mounts = []
    with open("/proc/self/mounts") as table:
        for line in table:
            target = line.split()[1].replace("\\040", " ")
            if target.startswith(prefix):
                mounts.append(target)
    for target in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", target], capture_output=True)


def remove_bridge_and_cgroups(report: Callable[[str], None]) -> None:
    """What outlives the processes on the host: the CNI bridge and the kubelet's cgroups
    (``kubepods/...`` in every v1 hierarchy; pods the kubelet had no time to clean up)."""
    subprocess.run(["ip", "link", "delete", BRIDGE], capture_output=True)
    for hierarchy in Path("/sys/fs/cgroup").iterdir():
        top = hierarchy / "kubepods"
        if not top.is_dir():
            continue
        directories = [d for d in top.rglob("*") if d.is_dir()] + [top]
        for directory in sorted(directories, key=lambda d: len(d.parts), reverse=True):
            try:
                directory.rmdir()
            except OSError as err:
                report(f"  warning: cgroup {directory} not removed: {err}")


def clean_host(directory: Path, report: Callable[[str], None], spare: Collection[int] = ()) -> None:
    """Undo what the node in ``directory`` left on the host, whether or not containerd runs.
    Only under the host lock: the bridge, cgroups, sysctls and chains are host-wide."""
    kill_node_processes(directory, report, spare)
    unmount_under(directory)
    saved = directory / HOST_STATE_FILE
    if not saved.is_file():
        return  # the node changed nothing on the host (or it was undone already)
    remove_bridge_and_cgroups(report)
    HostState.load(saved).restore(report)
    saved.unlink()


# ------------------------------------------------------------------- node


@dataclass
class RealNode:
    """containerd + kubelet for one real node, registered to a running :class:`LocalCluster`."""

    cluster: LocalCluster
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
                f"--root-dir={self.directory / 'kubelet' / 'root'}",
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
            env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent)),
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
            env=dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent)),
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


ECHO_POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "hello", "namespace": "default"},
    "spec": {
        "restartPolicy": "Never",
        # untagged: pull policy Always, pulled from the local registry every time
        "containers": [{"name": "echo", "image": "busybox", "command": ["echo", "hello"]}],
    },
}


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcluster.node", description=__doc__)
    parser.add_argument("--state-dir", type=Path, default=Path("/tmp/localcluster-node"))
    parser.add_argument("--pods", type=int, default=0, help="measure start latency over N pods")
    args = parser.parse_args(argv)
    stop_on_signals()
    from localcluster.cluster import LocalCluster  # here: cluster.py imports this module

    cluster = LocalCluster(args.state_dir.resolve(), profile="node")
    return hello(cluster, args.pods)


def measure(cluster: LocalCluster, node: RealNode, pods: int) -> None:
    """Pod start latency (create -> Running, polled every 0.1 s, one pod at a time) and the
    RSS of the kubelet and containerd afterwards."""
    latencies = []
    for i in range(pods):
        pod = json.loads(json.dumps(ECHO_POD))
        pod["metadata"]["name"] = f"latency-{i}"
        pod["spec"]["containers"][0]["command"] = ["sleep", "3600"]
        began = time.monotonic()
        cluster.kubectl("create", "-f", "-", input_text=json.dumps(pod))
        while True:
            phase = cluster.kubectl("get", "pod", f"latency-{i}", "-o", "jsonpath={.status.phase}")
            if phase == "Running":
                latencies.append(time.monotonic() - began)
                break
            if time.monotonic() - began > 120:
                raise LaunchError(f"pod latency-{i} not Running after 120s ({phase!r})")
            time.sleep(0.1)
    latencies.sort()
    print(
        f"pod start latency over {pods} pods: median {latencies[len(latencies) // 2]:.2f}s, "
        f"max {latencies[-1]:.2f}s"
    )
    for process in node.processes:
        rss = next(
            line.split()[1]
            for line in Path(f"/proc/{process.pid}/status").read_text().splitlines()
            if line.startswith("VmRSS:")
        )
        print(f"RSS {process.name}: {int(rss) // 1024} MiB")


def _pod(name: str, command: list[str]) -> str:
    pod = json.loads(json.dumps(ECHO_POD))
    pod["metadata"]["name"] = name
    pod["spec"]["containers"][0]["command"] = command
    return json.dumps(pod)


def _wait_phase(cluster: LocalCluster, name: str, phases: tuple[str, ...]) -> str:
    began = time.monotonic()
    phase = ""
    while time.monotonic() - began < 120 and phase not in phases:
        phase = cluster.kubectl("get", "pod", name, "-o", "jsonpath={.status.phase}")
        time.sleep(0.2)
    return phase


def pod_to_pod(cluster: LocalCluster) -> bool:
    """A busybox httpd pod and a wget pod on the bridge: does one reach the other by pod IP?"""
    serve = "echo from-server > /tmp/index.html && exec httpd -f -p 8080 -h /tmp"
    cluster.kubectl("create", "-f", "-", input_text=_pod("server", ["sh", "-c", serve]))
    if _wait_phase(cluster, "server", ("Running", "Failed")) != "Running":
        print("pod-to-pod: server not Running")
        return False
    ip = cluster.kubectl("get", "pod", "server", "-o", "jsonpath={.status.podIP}")
    # No "-T": Debian busybox-static 1.35 wget segfaults (exit 139) with a timeout option.
    fetch = ["wget", "-qO-", f"http://{ip}:8080/index.html"]
    cluster.kubectl("create", "-f", "-", input_text=_pod("client", fetch))
    phase = _wait_phase(cluster, "client", ("Succeeded", "Failed"))
    log = cluster.kubectl("logs", "client").strip()
    print(f"pod-to-pod: client {phase}, fetched from {ip}: {log!r}")
    return phase == "Succeeded" and log == "from-server"


def hello(cluster: LocalCluster, pods: int = 0) -> int:
    """Start the ``node`` profile, run the echo pod, print its log, stop it all."""
    try:
        cluster.start()
        node = cluster.node
        if node is None:
            raise LaunchError("the node profile started no node")
        print(cluster.kubectl("get", "nodes", "-o", "wide"))
        began = time.monotonic()
        cluster.kubectl("create", "-f", "-", input_text=json.dumps(ECHO_POD))
        phase = _wait_phase(cluster, "hello", ("Succeeded", "Failed"))
        print(f"pod hello: {phase} after {time.monotonic() - began:.1f}s")
        print(cluster.kubectl("get", "pod", "hello", "-o", "wide"))
        print("log:", cluster.kubectl("logs", "hello").strip())
        reached = pod_to_pod(cluster)
        if phase == "Succeeded" and pods:
            measure(cluster, node, pods)
        return 0 if phase == "Succeeded" and reached else 1
    except LaunchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    finally:
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
