"""The host a real node runs on: what it must have, and what a node leaves on it, undone.

:func:`host_checks` / :func:`require_host`: what the host lacks to run containers (runc, busybox,
the CNI plugins, ``ip``/``iptables``/``umount``, root). :class:`HostState`: the host sysctls and
the kubelet's iptables chains as they were before the node started (``host-state.json``).
:func:`clean_host`: a node's processes, containers and mounts gone, the CNI bridge and the
``kubepods`` cgroups deleted, the host as it was; run by ``RealNode.stop``, by the guardian
(``localcluster/guardian.py``) and by ``RealNode.recover``. Nothing here needs a control plane.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path

from localcluster.processes import LaunchError, pid_alive

CNI_BIN_DIR = Path("/usr/lib/cni")
RUNC = Path("/usr/sbin/runc")
BUSYBOX = Path("/bin/busybox")
BRIDGE = "sjs-cni0"
# One real node per host: kubepods cgroups, the bridge, sysctls and iptables chains are
# host-wide. A second node (another test run, a demo) waits for this lock instead of breaking
# the first.
HOST_LOCK = Path("/run/lock/stateful-jobset-real-node.lock")
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
