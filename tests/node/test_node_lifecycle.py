"""The ``node`` profile leaves nothing on the host when its launcher stops: not after SIGINT, not
after SIGTERM, not after ``kill -9`` (the node's guardian cleans up at once), and a start on a host
that lacks something ends with one message and no process.

"Nothing" is what a real node can leave: a process naming the state directory (containerd, the
kubelet, shims naming our containerd socket), a process in a ``kubepods`` cgroup (the containers
themselves: ``sleep 3600`` names no directory), a mount under the state directory, the bridge, the
``kubepods`` cgroups, ``KUBE-*`` iptables chains that were not there before, and a host sysctl the
kubelet or the bridge plugin changed. The host-wide parts are checked while this test holds the
host lock (``node.HOST_LOCK``): no other real node runs then, so what is there is ours.

These tests start real nodes of their own: ``conftest.py`` runs them before any test that uses the
session's ``node_cluster`` (whose node holds the host lock until the session ends).
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from localcluster.build import ensure_binaries
from localcluster.cluster import LocalCluster
from localcluster.node import (
    BRIDGE,
    GUARDIAN,
    HOST_LOCK,
    HOST_SYSCTLS,
    RealNode,
    node_binaries,
)
from localcluster.processes import die_with_parent
from tests.support import leftovers

pytestmark = [pytest.mark.own_node, pytest.mark.timeout(900)]

SLEEPER = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "sleeper", "namespace": "default"},
    # No nodeName, no toleration: the real node is the profile's only node.
    "spec": {"containers": [{"name": "sleep", "image": "busybox", "command": ["sleep", "3600"]}]},
}


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ what the host holds


@dataclass(frozen=True)
class HostState:
    """The host-wide things a real node changes, as they were before it started."""

    chains: frozenset[str]
    sysctls: dict[str, str]


def _kube_chains() -> set[str]:
    found = set()
    for tool in ("iptables", "ip6tables"):
        for table in ("filter", "nat", "mangle"):
            listing = subprocess.run(
                [tool, "-w", "-t", table, "-S"], capture_output=True, text=True, check=True
            ).stdout
            for line in listing.splitlines():
                words = line.split()
                if len(words) == 2 and words[0] == "-N" and words[1].startswith("KUBE-"):
                    found.add(f"{tool} -t {table} {words[1]}")
    return found


def _sysctls() -> dict[str, str]:
    return {name: (Path("/proc/sys") / name).read_text().strip() for name in HOST_SYSCTLS}


def host_state() -> HostState:
    return HostState(frozenset(_kube_chains()), _sysctls())


def _kubepods_processes() -> dict[int, str]:
    """Processes in a kubepods cgroup (containers and sandboxes), with their command lines."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cgroups = (entry / "cgroup").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue  # gone meanwhile
        if ":/kubepods" in cgroups and cmdline:
            found[int(entry.name)] = cmdline.replace(b"\0", b" ").decode(errors="replace")
    return found


def _mounts_under(directory: Path) -> list[str]:
    prefix = str(directory.resolve()) + "/"
    with open("/proc/self/mounts") as table:
        targets = [line.split()[1].replace("\\040", " ") for line in table]
    return [target for target in targets if target.startswith(prefix)]


def host_leftovers(state_dir: Path, before: HostState) -> list[str]:
    """Everything a real node rooted at ``state_dir`` left on the host, one line each."""
    left = [
        f"process {pid} naming the state directory: {command[:200]}"
        for pid, command in sorted(leftovers.mentioning(str(state_dir)).items())
    ]
    left += [
        f"process {pid} in a kubepods cgroup: {command[:200]}"
        for pid, command in sorted(_kubepods_processes().items())
    ]
    left += [f"mount {target}" for target in _mounts_under(state_dir)]
    if Path("/sys/class/net", BRIDGE).exists():
        left.append(f"network link {BRIDGE}")
    cgroups = [h / "kubepods" for h in Path("/sys/fs/cgroup").iterdir()]
    left += [f"cgroup {cgroup}" for cgroup in cgroups if cgroup.is_dir()]
    left += [f"iptables chain {chain}" for chain in sorted(_kube_chains() - before.chains)]
    now = _sysctls()
    left += [
        f"sysctl {name}: {value} before, {now[name]} now"
        for name, value in before.sysctls.items()
        if now[name] != value
    ]
    return left


@contextmanager
def _host_lock(ours: Path | None = None, seconds: float = 0) -> Iterator[bool]:
    """Hold the host lock (True), polling for it. Another engineer's node may hold it for as
    long as it runs (the test's timeout bounds that wait); a node of ours (the lock file names
    ``ours``: the launcher or its guardian) gets ``seconds``, then this gives up (False)."""
    fd = os.open(HOST_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        ours_waited = 0.0
        next_report = time.monotonic() + 10
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
            if ours is not None and str(ours) in holder:
                ours_waited += 0.2
                if ours_waited > seconds:
                    yield False
                    return
            if time.monotonic() > next_report:
                next_report += 10
                _say(f"  waiting for the host lock ({holder})")
            time.sleep(0.2)
        yield True
    finally:
        os.close(fd)


def settled_leftovers(state_dir: Path, before: HostState, seconds: float) -> list[str]:
    """What is left once no real node runs (the host lock is free: a guardian holds it until
    its cleanup is done); if our node holds the lock for ``seconds``, what is left then."""
    with _host_lock(state_dir, seconds) as held:
        left = host_leftovers(state_dir, before)
        if not held:
            holder = HOST_LOCK.read_text().strip()
            left.append(f"the host lock is still held after {seconds:.0f}s ({holder})")
        return left


# ------------------------------------------------------------------ the launcher


@dataclass
class NodeLauncher:
    """``python -m localcluster run --profile node`` in the background."""

    process: subprocess.Popen[bytes]
    state_dir: Path
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self, seconds: float = 600) -> None:
        state = self.state_dir / "cluster.json"
        began = time.monotonic()
        next_report = began + 15
        while not state.exists():
            if self.process.poll() is not None:
                pytest.fail(f"the launcher exited before it was ready:\n{self.output()}")
            if time.monotonic() - began > seconds:
                pytest.fail(f"the launcher was not ready within {seconds:.0f}s:\n{self.output()}")
            if time.monotonic() > next_report:
                next_report += 15
                _say(f"  waiting for the node profile ({time.monotonic() - began:.0f}s)")
            time.sleep(0.5)

    def cluster(self) -> LocalCluster:
        """A handle on the running control plane, for kubectl."""
        return LocalCluster(self.state_dir, profile="node", binaries=ensure_binaries(_say))


def _launch(state_dir: Path, env: dict[str, str] | None = None) -> NodeLauncher:
    state_dir.mkdir(parents=True, exist_ok=True)
    # A killed launcher leaves its cluster.json: ready means a new one (as `up` waits).
    (state_dir / "cluster.json").unlink(missing_ok=True)
    log = state_dir.parent / f"{state_dir.name}.log"
    with log.open("ab") as out:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "localcluster",
                "run",
                "--profile=node",
                f"--state-dir={state_dir}",
            ],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=die_with_parent,  # if this test dies, so does the launcher
        )
    return NodeLauncher(process, state_dir, log)


def _clean_up_after(launcher: NodeLauncher) -> None:
    """Whatever the test did: no launcher, and nothing of its node left on the host."""
    if launcher.process.poll() is None:
        launcher.process.kill()
    launcher.process.wait()
    # RealNode.recover takes the host lock, so it waits for a guardian still at work; it
    # cleans up only what a node left (its host-state.json says so).
    cluster = LocalCluster(launcher.state_dir, profile="node")
    RealNode(cluster, node_binaries(_say), launcher.state_dir / "node", report=_say).recover()
    leftovers.kill(leftovers.mentioning(str(launcher.state_dir)))


@pytest.fixture
def state_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # Short: containerd's ttrpc socket (<state>/node/containerd/run/containerd.sock.ttrpc) must
    # fit in 104 bytes, and a test's own tmp_path (named after the test) is too long.
    return tmp_path_factory.mktemp("nl") / "s"


@pytest.fixture
def before() -> HostState:
    """The host as it is while no real node runs (taken under the host lock)."""
    with _host_lock():
        return host_state()


@pytest.fixture
def running(state_dir: Path, before: HostState) -> Iterator[NodeLauncher]:
    """A node profile with a ``sleep 3600`` pod Running on the real node."""
    launcher = _launch(state_dir)
    try:
        launcher.wait_ready()
        cluster = launcher.cluster()
        cluster.kubectl("create", "-f", "-", input_text=json.dumps(SLEEPER))
        deadline = time.monotonic() + 180
        phase = ""
        while phase != "Running":
            assert time.monotonic() < deadline, f"pod sleeper not Running after 180s: {phase!r}"
            time.sleep(0.5)
            phase = cluster.kubectl("get", "pod", "sleeper", "-o", "jsonpath={.status.phase}")
        # The check sees a running node: without this, an empty list would prove nothing.
        during = host_leftovers(state_dir, before)
        assert any("sleep 3600" in line and "kubepods" in line for line in during), during
        assert any("containerd-shim" in line for line in during), during
        assert f"network link {BRIDGE}" in during, during
        yield launcher
    finally:
        _clean_up_after(launcher)


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_stopped_launcher_leaves_nothing(
    running: NodeLauncher, before: HostState, how: signal.Signals
) -> None:
    running.process.send_signal(how)
    try:
        code = running.process.wait(timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the launcher ignored {how.name} for 120 s", pytrace=False)
    assert code == 0, running.output()
    # At once: a clean stop is over when the launcher exits (the lock is free unless another
    # engineer's node took it meanwhile, and then that one cleans up after itself).
    left = settled_leftovers(running.state_dir, before, 120)
    assert left == [], "left on the host:\n  " + "\n  ".join(left)


def test_killed_launcher_leaves_nothing(running: NodeLauncher, before: HostState) -> None:
    """``kill -9``: containerd, the kubelet, CoreDNS and the registry die with the launcher
    (PR_SET_PDEATHSIG); shims and containers are re-parented, so the node's guardian must kill
    them and undo the rest, without waiting for the next start."""
    os.kill(running.process.pid, signal.SIGKILL)
    running.process.wait(timeout=30)
    left = settled_leftovers(running.state_dir, before, 120)
    assert left == [], "left on the host:\n  " + "\n  ".join(left)


def test_host_without_a_tool_is_one_message_and_no_process(state_dir: Path) -> None:
    """A host without the ``ip``, ``iptables``, ``umount`` the node uses (here: a PATH without
    them): the launcher says what is missing and how to get it, before it starts anything."""
    env = dict(os.environ, PATH=str(Path(sys.executable).parent))
    launcher = _launch(state_dir, env=env)
    try:
        code = launcher.process.wait(timeout=120)
        output = launcher.output()
        errors = [line for line in output.splitlines() if line.startswith("error:")]
        assert code == 1, output
        assert errors == [
            "error: this host cannot run containers; missing: ip (apt-get install iproute2), "
            "iptables (apt-get install iptables), ip6tables (apt-get install iptables), "
            "umount (apt-get install mount)"
        ], output
        assert leftovers.mentioning(str(state_dir)) == {}
        assert _mounts_under(state_dir) == []
    finally:
        _clean_up_after(launcher)


def test_next_start_cleans_up_after_a_killed_guardian(
    running: NodeLauncher, before: HostState, state_dir: Path
) -> None:
    """Even the guardian killed (``kill -9`` of both): the next start on the same state
    directory cleans up first (``RealNode.recover``), before it deletes the directory."""
    guardian = json.loads((state_dir / "cluster.json").read_text())["pids"][GUARDIAN]
    # Stopped first, so that it cannot notice its guardian's death and stop cleanly.
    os.kill(running.process.pid, signal.SIGSTOP)
    os.kill(guardian, signal.SIGKILL)
    os.kill(running.process.pid, signal.SIGKILL)
    running.process.wait(timeout=30)
    containers = [line for line in host_leftovers(state_dir, before) if "sleep 3600" in line]
    assert containers, "the container should outlive a launcher and a guardian both killed"
    again = _launch(state_dir)
    try:
        again.wait_ready()
        left = [line for line in host_leftovers(state_dir, before) if line in containers]
        assert left == [], "the start did not clean up first:\n  " + "\n  ".join(left)
        again.process.send_signal(signal.SIGINT)
        assert again.process.wait(timeout=120) == 0, again.output()
        left = settled_leftovers(state_dir, before, 120)
        assert left == [], "left on the host:\n  " + "\n  ".join(left)
    finally:
        _clean_up_after(again)
