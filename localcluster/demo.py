"""``make demo``: the whole thing on the local control plane, narrated.

0. pick the profile: ``node`` (a real node: containerd, runc, kubelet) when this host can run
   containers, else ``full`` (KWOK's simulated nodes, where pods run nothing), saying why in one
   line; ``--profile`` overrides;
1. start the control plane (etcd, kube-apiserver, controller-manager, scheduler, test
   provisioner, and the real node or the KWOK nodes);
2. install the JobSet CRD and its admission policy;
3. start the controller (two replicas with leader election, as in a cluster);
4. apply the demo JobSet (A writes a "model" into the shared claim, B reads it) and follow it
   until it finishes, printing progress;
5. on the real node, show the data: each B pod's log, the claim's directory on this host and the
   file A wrote there; then a summary (objects, Events, a few metrics);
6. on the real node, a second act, checkpoints as VolumeSnapshots through its CSI stack
   (``manifests/examples/snapshot-checkpoints.yaml``, run twice): the first run saves a
   checkpoint, the controller snapshots the claim and deletes it once the snapshot is ready; the
   JobSet is deleted and applied again, its new claim is restored from that snapshot and the
   second run reads the first run's checkpoint. On KWOK's nodes (no CSI driver, pods run
   nothing) one line says it is skipped and why. Then stop everything.

The exit status is non-zero when the JobSet did not complete or, on the real node, when a B pod's
log is not what A wrote, or the second act's second run did not read the first run's checkpoint.
"""

from __future__ import annotations

import json
import signal
import ssl
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import yaml

from localcluster import jobsetapi
from localcluster.build import BuildError
from localcluster.cluster import LocalCluster, Profile
from localcluster.node import host_checks, node_binaries
from localcluster.processes import LaunchError, ManagedProcess, free_port

ROOT = Path(__file__).resolve().parent.parent
DEMO_JOBSET = ROOT / "manifests" / "examples" / "seed-volume-policy.yaml"
DEMO_NAME = "volume-sample"
CLAIM = "pretrained-model-volume-sample"
NAMESPACE = "demo"
# The label the controller puts on its Jobs' pods (controller.jobset.api.REPLICATED_JOB_NAME).
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
# What A's command writes (see the demo manifest); B's logs must show it.
MODEL_LINE = "model weights v1 written by"
B_PODS = 4  # 2 Jobs x 2 pods
# The second act (real node only): checkpoints kept as VolumeSnapshots, a second run restored.
SNAPSHOT_EXAMPLE = ROOT / "manifests" / "examples" / "snapshot-checkpoints.yaml"
SNAPSHOT_NAMESPACE = "demo-snapshots"
SNAPSHOT_JOBSET = "snapshot-resume"
SNAPSHOT_CLAIM = "ckpt-snapshot-resume"
# The label the controller puts on its snapshots (controller.jobset.volumes.model).
SNAPSHOT_CLAIM_LABEL = "jobset.sigs.k8s.io/volume-claim"
SAVED = "started fresh, saved "  # what the first run's A logs before its checkpoint


class _Interrupted(Exception):
    pass


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise _Interrupted(signal.Signals(signum).name)


def _controller(cluster: LocalCluster, identity: str) -> tuple[ManagedProcess, int]:
    port = free_port()
    argv = [
        sys.executable,
        "-m",
        "controller",
        f"--kubeconfig={cluster.kubeconfig}",
        f"--identity={identity}",
        "--leader-election-namespace=kube-system",
        f"--metrics-bind-address=127.0.0.1:{port}",
        f"--health-probe-bind-address=127.0.0.1:{free_port()}",
    ]
    process = ManagedProcess(identity, argv, cluster.state_dir / "logs" / f"{identity}.log")
    process.start()
    return process, port


READER_ROLE = ROOT / "manifests" / "rbac" / "metrics-reader-role.yaml"
READER = "demo-metrics-reader"


def _metrics_reader(cluster: LocalCluster) -> None:
    """A ServiceAccount that may read /metrics (the shipped reader role), as a Prometheus is
    given: /metrics is HTTPS and checks every scraper's bearer token."""
    cluster.kubectl("apply", "--server-side", "-f", str(READER_ROLE))
    cluster.kubectl("create", "serviceaccount", READER, "-n", "kube-system")
    cluster.kubectl(
        "create", "clusterrolebinding", READER, "--clusterrole=stateful-jobset-metrics-reader",
        f"--serviceaccount=kube-system:{READER}",
    )  # fmt: skip


def _metrics(cluster: LocalCluster, port: int, prefixes: tuple[str, ...]) -> list[str]:
    """Lines of a replica's /metrics, read with the reader's token over HTTPS (the replica's
    certificate is self-signed: not verified, as upstream's ServiceMonitor has it)."""
    token = cluster.kubectl("create", "token", READER, "-n", "kube-system").strip()
    request = urllib.request.Request(f"https://127.0.0.1:{port}/metrics")
    request.add_header("Authorization", f"Bearer {token}")
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            text = response.read().decode()
    except OSError:
        return []
    return [line for line in text.splitlines() if line.startswith(prefixes)]


def _progress(
    cluster: LocalCluster, name: str = DEMO_NAME, claim: str = CLAIM, namespace: str = NAMESPACE
) -> tuple[str, str]:
    js = json.loads(cluster.kubectl("get", "jobset", name, "-n", namespace, "-o", "json"))
    status = js.get("status") or {}
    per_rjob = ", ".join(
        f"{r['name']}: {r.get('succeeded', 0)} succeeded/{r.get('active', 0)} active"
        for r in status.get("replicatedJobsStatus") or []
    )
    pods = cluster.kubectl(
        "get",
        "pods",
        "-n",
        namespace,
        "--no-headers",
        "-o",
        "custom-columns=N:.metadata.name,P:.status.phase",
    ).split()
    phases: dict[str, int] = {}
    for phase in pods[1::2]:
        phases[phase] = phases.get(phase, 0) + 1
    claim_phase = cluster.kubectl(
        "get", "pvc", claim, "-n", namespace, "--ignore-not-found", "-o", "jsonpath={.status.phase}"
    ).strip()
    pod_summary = ", ".join(f"{n} {p}" for p, n in sorted(phases.items())) or "none"
    line = f"  claim {claim_phase or 'none'} | {per_rjob or 'no jobs yet'} | pods {pod_summary}"
    return line, str(status.get("terminalState") or "")


def choose_profile(requested: Profile | None, say: Callable[[str], None]) -> Profile:
    """The real node when this host can run containers and its binaries build, else KWOK's
    simulated nodes; one line says which and why."""
    if requested is not None:
        where = "a real node" if requested == "node" else "KWOK's simulated nodes"
        say(f"profile {requested} (--profile): running on {where}")
        return requested
    missing = host_checks()
    if missing:
        say(
            f"this host cannot run containers (missing: {'; '.join(missing)}): running on "
            "KWOK's simulated nodes; pods run nothing (make tools installs what is missing)"
        )
        return "full"
    try:
        node_binaries(say)
    except BuildError as err:
        say(
            f"the real node's binaries could not be built ({err}): running on KWOK's "
            "simulated nodes; pods run nothing"
        )
        return "full"
    say("this host can run containers: running on a real node (containerd, runc, kubelet)")
    return "node"


def _wait_leader(cluster: LocalCluster) -> str:
    deadline = time.monotonic() + 60
    holder = ""
    while not holder:
        holder = cluster.kubectl(
            "get",
            "lease",
            "stateful-jobset-controller",
            "-n",
            "kube-system",
            "-o",
            "jsonpath={.spec.holderIdentity}",
            "--ignore-not-found",
        ).strip()
        if time.monotonic() > deadline:
            raise LaunchError("no controller replica became leader within 60 s")
        time.sleep(0.5)
    return holder


def _follow(
    cluster: LocalCluster,
    say: Callable[[str], None],
    timeout: float,
    name: str = DEMO_NAME,
    claim: str = CLAIM,
    namespace: str = NAMESPACE,
    tick: Callable[[], None] = lambda: None,
) -> str:
    """Print a progress line whenever it changes, calling ``tick`` each time round; return the
    JobSet's terminal state."""
    last, state = "", ""
    deadline = time.monotonic() + timeout
    while not state:
        if time.monotonic() > deadline:
            raise LaunchError(f"the demo JobSet {name} did not finish within {timeout:.0f}s")
        tick()
        line, state = _progress(cluster, name, claim, namespace)
        if line != last:
            say(line)
            last = line
        time.sleep(1)
    return state


def _b_pod_logs(cluster: LocalCluster) -> list[tuple[str, str]]:
    """(name, log) of each pod of replicated job B, by name."""
    names = cluster.kubectl(
        "get",
        "pods",
        "-n",
        NAMESPACE,
        "-l",
        f"{REPLICATED_JOB_LABEL}=B",
        "-o",
        "jsonpath={range .items[*]}{.metadata.name}{'\\n'}{end}",
    ).split()
    return [
        (name, cluster.kubectl("logs", "-n", NAMESPACE, name).strip()) for name in sorted(names)
    ]


def _claim_on_host(cluster: LocalCluster) -> tuple[str, Path | None]:
    """The claim's PV and its directory on this host (the test provisioner's hostPath)."""
    volume = cluster.kubectl(
        "get", "pvc", CLAIM, "-n", NAMESPACE, "-o", "jsonpath={.spec.volumeName}"
    ).strip()
    if not volume:
        return "", None
    path = cluster.kubectl("get", "pv", volume, "-o", "jsonpath={.spec.hostPath.path}").strip()
    return volume, Path(path) if path else None


def show_data(cluster: LocalCluster, say: Callable[[str], None]) -> bool:
    """What A wrote, on the host and as each B pod read it; True when every B pod read it."""
    volume, directory = _claim_on_host(cluster)
    weights = directory / "weights" if directory is not None else None
    written = weights.read_text().strip() if weights is not None and weights.is_file() else ""
    say(f"  claim {CLAIM} -> volume {volume or '(none)'}, a directory on this host:")
    say(f"    {weights}: {written or '(missing)'}")
    logs = _b_pod_logs(cluster)
    say(f"  B's {len(logs)} pods read /model/weights from the same claim (kubectl logs):")
    for name, log in logs:
        say(f"    {name}: {log or '(empty log)'}")
    good = bool(written.startswith(MODEL_LINE)) and len(logs) == B_PODS
    good = good and all(log == written for _, log in logs)
    if good:
        say(f"  every B pod read what A wrote ({B_PODS} of {B_PODS})")
    else:
        say(f"  B's pods did NOT all read what A wrote (expected {B_PODS} logs equal to the file)")
    return good


def _poll(what: str, probe: Callable[[], str], timeout: float) -> str:
    """Call ``probe`` every half second until it returns something; that."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found:
            return found
        if time.monotonic() > deadline:
            raise LaunchError(f"{what} did not happen within {timeout:.0f}s")
        time.sleep(0.5)


def _pods_of(cluster: LocalCluster, rjob: str) -> list[dict[str, Any]]:
    listed = json.loads(
        cluster.kubectl(
            "get",
            "pods",
            "-n",
            SNAPSHOT_NAMESPACE,
            "-l",
            f"{REPLICATED_JOB_LABEL}={rjob}",
            "-o",
            "json",
        )
    )
    items: list[dict[str, Any]] = listed["items"]
    return items


def _log_of(cluster: LocalCluster, rjob: str) -> str:
    """The log of the second act's one pod of replicated job ``rjob`` ("" if there is none)."""
    pods = _pods_of(cluster, rjob)
    if len(pods) != 1:
        return ""
    name = str(pods[0]["metadata"]["name"])
    return cluster.kubectl("logs", "-n", SNAPSHOT_NAMESPACE, name).strip()


def held_manifest() -> str:
    """The example with B held after printing: it waits for a file in an emptyDir of its own
    (``gate``), which the demo writes on this host once it has read B's log. When a run
    completes, retention releases its claim and the controller deletes the finished Jobs that
    mount it (their pods, and the logs with them) within about a second of B's exit."""
    body = yaml.safe_load(SNAPSHOT_EXAMPLE.read_text())
    (reader,) = [r for r in body["spec"]["replicatedJobs"] if r["name"] == "B"]
    spec = reader["template"]["spec"]["template"]["spec"]
    container = spec["containers"][0]
    script = container["command"][-1]
    container["command"] = ["sh", "-c", f"{script}\nwhile [ ! -f /gate/open ]; do sleep 0.2; done"]
    container["volumeMounts"].append({"name": "gate", "mountPath": "/gate"})
    spec.setdefault("volumes", []).append({"name": "gate", "emptyDir": {}})
    return str(yaml.safe_dump(body, sort_keys=False))


class _Reader:
    """``tick`` for ``_follow``: once B's pod runs and has printed, read A's and B's logs and
    open B's gate."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.cluster = cluster
        self.logs: dict[str, str] = {}

    def __call__(self) -> None:
        if self.logs:
            return
        pods = _pods_of(self.cluster, "B")
        running = [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]
        if len(running) != 1:
            return
        read = _log_of(self.cluster, "B")
        if not read:
            return
        self.logs = {"A": _log_of(self.cluster, "A"), "B": read}
        node = self.cluster.node
        assert node is not None
        uid = str(running[0]["metadata"]["uid"])
        gate = node.kubelet_root / "pods" / uid / "volumes" / "kubernetes.io~empty-dir" / "gate"
        (gate / "open").write_text("")


def _ready_snapshot(cluster: LocalCluster) -> str:
    """The name of the ready VolumeSnapshot the controller took of the claim, or ""."""
    listed = json.loads(
        cluster.kubectl(
            "get",
            "volumesnapshots",
            "-n",
            SNAPSHOT_NAMESPACE,
            "-l",
            f"{SNAPSHOT_CLAIM_LABEL}={SNAPSHOT_CLAIM}",
            "-o",
            "json",
        )
    )
    ready = [
        s["metadata"]["name"]
        for s in listed["items"]
        if (s.get("status") or {}).get("readyToUse") is True
    ]
    return ready[0] if len(ready) == 1 else ""


def _claim_field(cluster: LocalCluster, jsonpath: str) -> str:
    return cluster.kubectl(
        "get",
        "pvc",
        SNAPSHOT_CLAIM,
        "-n",
        SNAPSHOT_NAMESPACE,
        "--ignore-not-found",
        "-o",
        f"jsonpath={jsonpath}",
    ).strip()


def _snapshot_run(
    cluster: LocalCluster, say: Callable[[str], None], timeout: float, applied: float
) -> tuple[str, str, str]:
    """Follow the second act's JobSet, applied at ``applied`` (monotonic), to its end; its
    terminal state and A's and B's logs."""
    reader = _Reader(cluster)
    state = _follow(
        cluster, say, timeout, SNAPSHOT_JOBSET, SNAPSHOT_CLAIM, SNAPSHOT_NAMESPACE, reader
    )
    took = time.monotonic() - applied
    say(f"  JobSet {SNAPSHOT_JOBSET} finished: {state} ({took:.0f}s)")
    return state, reader.logs.get("A", ""), reader.logs.get("B", "")


def second_act(cluster: LocalCluster, say: Callable[[str], None], timeout: float) -> bool:
    """Checkpoints as VolumeSnapshots on the real node's CSI stack: run the example, let the
    controller snapshot its claim, delete it, apply it again; True when the second run read the
    first run's checkpoint from a claim restored from that snapshot."""
    say(
        f"\n[act 2] checkpoints as VolumeSnapshots: {SNAPSHOT_EXAMPLE.relative_to(ROOT)} twice, "
        f"in namespace {SNAPSHOT_NAMESPACE}"
    )
    say(
        "  claim class csi-immediate (our CSI driver); whenCompleted: Snapshot (class "
        "csi-snapshot); restorePolicy: NewestSnapshot"
    )
    say(
        "  (B waits after printing until the demo has read its log: a completed run's Jobs, "
        "pods and logs go when the controller releases the claim)"
    )
    manifest = held_manifest()
    cluster.kubectl("create", "namespace", SNAPSHOT_NAMESPACE)
    say("  run 1: no snapshot yet, the claim starts empty; A saves a checkpoint, B prints it")
    cluster.kubectl("apply", "-n", SNAPSHOT_NAMESPACE, "-f", "-", input_text=manifest)
    state, saved, printed = _snapshot_run(cluster, say, timeout, time.monotonic())
    say(f"  A: {saved or '(no log)'}")
    say(f"  B: {printed or '(no log)'}")
    if state != "Completed" or not saved.startswith(SAVED):
        say("  run 1 did NOT save a checkpoint")
        return False
    checkpoint = saved.removeprefix(SAVED)
    began = time.monotonic()
    snapshot = _poll("a ready VolumeSnapshot of the claim", lambda: _ready_snapshot(cluster), 120)
    say(
        f"  VolumeSnapshot {snapshot} readyToUse ({time.monotonic() - began:.0f}s after "
        "completion; the snapshot-controller and csi-snapshotter made it)"
    )
    _poll(
        f"claim {SNAPSHOT_CLAIM} deleted",
        lambda: "gone" if not _claim_field(cluster, "{.metadata.name}") else "",
        120,
    )
    say(f"  then the controller deleted claim {SNAPSHOT_CLAIM}: the checkpoint is the snapshot")

    say(f"  deleting JobSet {SNAPSHOT_JOBSET}, then run 2: the same manifest applied again")
    cluster.kubectl("delete", "jobset", SNAPSHOT_JOBSET, "-n", SNAPSHOT_NAMESPACE)
    _poll(
        "the first run's pods gone",
        lambda: (
            "" if cluster.kubectl("get", "pods", "-n", SNAPSHOT_NAMESPACE, "-o", "name") else "gone"
        ),
        120,
    )
    cluster.kubectl("apply", "-n", SNAPSHOT_NAMESPACE, "-f", "-", input_text=manifest)
    applied = time.monotonic()
    source = _poll(
        f"claim {SNAPSHOT_CLAIM} created",
        lambda: (
            _claim_field(cluster, "{.metadata.uid}")
            and (_claim_field(cluster, "{.spec.dataSourceRef.name}") or "(none)")
        ),
        120,
    )
    say(f"  claim {SNAPSHOT_CLAIM} created from VolumeSnapshot {source} (spec.dataSourceRef)")
    state, resumed, read = _snapshot_run(cluster, say, timeout, applied)
    say(f"  A: {resumed or '(no log)'}")
    say(f"  B: {read or '(no log)'}")
    good = (
        state == "Completed"
        and source == snapshot
        and read == checkpoint
        and resumed == f"resumed from {checkpoint}"
    )
    if good:
        say(f"  the second run read the first run's checkpoint, restored from {snapshot}")
    else:
        say("  the second run did NOT read the first run's checkpoint from its snapshot")
    return good


def _summary(cluster: LocalCluster, say: Callable[[str], None]) -> None:
    for args in (
        ("get", "jobset", "-n", NAMESPACE),
        ("get", "pvc", "-n", NAMESPACE),
        (
            "get",
            "jobs",
            "-n",
            NAMESPACE,
            "-o",
            "custom-columns=JOB:.metadata.name,COMPLETIONS:.status.succeeded,"
            "VOLUMES:.spec.template.spec.volumes[*].persistentVolumeClaim.claimName",
        ),
    ):
        say(cluster.kubectl(*args).rstrip())
    events = cluster.kubectl(
        "get",
        "events",
        "-n",
        NAMESPACE,
        "--field-selector",
        "involvedObject.kind=JobSet",
        "-o",
        "custom-columns=TYPE:.type,REASON:.reason,MESSAGE:.message",
    )
    say(events.rstrip())


def run(
    say: Callable[[str], None], state_dir: Path, profile: Profile = "full", timeout: float = 300
) -> int:
    started = time.monotonic()
    with LocalCluster(state_dir, profile=profile, report=say) as cluster:
        say(
            f"\n[2/5] installing the JobSet CRD and its admission policy "
            f"({jobsetapi.CRD_DIR.relative_to(ROOT)}/)"
        )
        jobsetapi.install(cluster)
        _metrics_reader(cluster)
        say("\n[3/5] starting two controller replicas (leader election on a Lease)")
        replicas = [_controller(cluster, name) for name in ("controller-a", "controller-b")]
        try:
            holder = _wait_leader(cluster)
            say(f"  leader: {holder} (the other replica is a warm standby)")

            say(f"\n[4/5] applying {DEMO_JOBSET.relative_to(ROOT)} in namespace {NAMESPACE}")
            say("  A writes the model into the claim; B (2 Jobs x 2 pods) waits for A, reads it")
            cluster.kubectl("create", "namespace", NAMESPACE)
            cluster.kubectl("apply", "-n", NAMESPACE, "-f", str(DEMO_JOBSET))
            applied = time.monotonic()
            state = _follow(cluster, say, timeout)
            say(f"  JobSet {DEMO_NAME} finished: {state} ({time.monotonic() - applied:.0f}s)")

            say("\n[5/5] what happened")
            if profile == "node":
                data_ok = show_data(cluster, say)
            else:
                data_ok = True
                say("  on KWOK's simulated nodes the pods ran nothing: no logs, no file to show")
            _summary(cluster, say)
            leader_port = next(port for p, port in replicas if p.name == holder)
            for metric in _metrics(
                cluster,
                leader_port,
                ("jobset_completed_total{", "controller_runtime_reconcile_total{"),
            ):
                say(f"  {metric}")
            if profile == "node":
                restored_ok = second_act(cluster, say, timeout)
            else:
                restored_ok = True
                say(
                    "\n[act 2] skipped: checkpoints as VolumeSnapshots need the real node's CSI "
                    "stack (a CSI driver, the snapshot controller); KWOK's simulated nodes have "
                    "neither, and their pods run nothing"
                )
            ok = state == "Completed" and data_ok and restored_ok
            outcome = (
                "succeeded"
                if ok
                else f"failed (JobSet {state}, data read back: {data_ok}, "
                f"restored from a snapshot: {restored_ok})"
            )
            took = time.monotonic() - started
            say(f"\ndemo {outcome} in {took:.0f}s; logs in {cluster.state_dir / 'logs'}")
            return 0 if ok else 1
        finally:
            for process, _ in replicas:
                process.stop()


def main(state_dir: Path, profile: Profile | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupt)

    def say(message: str) -> None:
        print(message, flush=True)

    try:
        chosen = choose_profile(profile, say)
        nodes = "a real node" if chosen == "node" else "KWOK nodes"
        say(
            f"[1/5] starting the local control plane with {nodes} "
            "(first run builds it from source: ~20 min)"
        )
        return run(say, state_dir, chosen)
    except (BuildError, LaunchError, _Interrupted, KeyboardInterrupt) as err:
        say(f"demo stopped: {err}; every process it started has been stopped")
        return 1
