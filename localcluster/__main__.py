"""Command line of the local control plane.

python -m localcluster build [--node]     build (or find cached) binaries, print versions;
                                          --node: also the real node's (containerd, kubelet,
                                          CoreDNS, the pause image's binary); --min-apiserver:
                                          also the oldest supported release's kube-apiserver;
                                          --kueue: also Kueue's manager and the kube-apiserver
                                          of the kueue profile; --csi: also the real node's CSI
                                          stack (the sidecars, snapshot-controller, our driver);
                                          --trainer: also Kubeflow Trainer's manager
python -m localcluster run                start in the foreground; Ctrl-C stops everything;
                                          --profile apiserver --min-apiserver: with the oldest
                                          supported Kubernetes release's kube-apiserver
python -m localcluster up                 start in the background, print the kubeconfig path;
                                          --profile kueue: with Kueue (JobSet integration, queues)
                                          --profile trainer: the real node with Kubeflow Trainer
python -m localcluster down               stop what `up` started
python -m localcluster status             is it running, and what
python -m localcluster smoke              start, run a Job and a claim on it, stop
python -m localcluster demo [--profile P] the narrated demo: on a real node when this host can
                                          run containers (node), else on KWOK's nodes (full)
python -m localcluster crd [--check]      regenerate the JobSet CRD and its admission policy
                                          from the OpenAPI of a local apiserver-profile control
                                          plane (make crd); --check: compare, exit 1 if stale
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from localcluster.build import (
    KUEUE,
    MIN_KUBERNETES,
    TRAINER,
    VERSIONED_APISERVER,
    BuildError,
    describe,
    ensure_binaries,
    ensure_csi,
    ensure_kueue,
    ensure_min_apiserver,
    ensure_node_binaries,
    ensure_trainer,
    ensure_versioned_apiserver,
    required_versions,
)
from localcluster.cluster import PROFILES, LocalCluster, Profile
from localcluster.processes import LaunchError, StopSignal, pid_alive, stop_on_signals

DEFAULT_STATE_DIR = Path(".cluster")


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def cmd_build(args: argparse.Namespace) -> int:
    binaries = ensure_binaries(_say)
    for line in describe():
        print(line)
    directories = dict(binaries.directories)
    if args.node:
        from localcluster.images import build_pause

        directories.update(ensure_node_binaries(report=_say))
        directories["pause"] = build_pause().parent
    if args.csi:
        for binary, path in ensure_csi(_say).items():
            directories[binary] = path.parent
    if args.kueue:
        directories[KUEUE.name] = ensure_kueue(_say).parent
        directories[VERSIONED_APISERVER.name] = ensure_versioned_apiserver(_say).parent
        for module, version in required_versions(KUEUE).items():
            print(f"{KUEUE.name}: {module} {version}")
    if args.trainer:
        directories[TRAINER.name] = ensure_trainer(_say).parent
        for module, version in required_versions(TRAINER).items():
            print(f"{TRAINER.name}: {module} {version}")
    if args.min_apiserver:
        directories[MIN_KUBERNETES.name] = ensure_min_apiserver(_say).parent
        for module, version in required_versions(MIN_KUBERNETES).items():
            print(f"{MIN_KUBERNETES.name}: {module} {version}")
    for name, directory in sorted(directories.items()):
        print(f"{name} binaries: {directory}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    state_dir: Path = args.state_dir.resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "launcher.pid").write_text(str(os.getpid()))
    profile: Profile = args.profile
    cluster = LocalCluster(
        state_dir,
        profile=profile,
        apiserver_port=args.apiserver_port,
        kube_apiserver=ensure_min_apiserver(_say) if args.min_apiserver else None,
    )
    try:
        cluster.start()
        for line in cluster.describe():
            _say(line)
        _say(f"export KUBECONFIG={cluster.kubeconfig}")
        _say("running; Ctrl-C (or `make cluster-down`) stops every process")
        while True:
            time.sleep(1)
            node_processes = cluster.node.processes if cluster.node is not None else []
            for process in cluster.processes + node_processes:
                if not process.running():
                    _say(f"{process.name} exited; last lines:\n{process.log_tail()}")
                    return 1
    except (KeyboardInterrupt, StopSignal):
        _say("stopping the control plane ...")
        return 0
    finally:
        cluster.stop()
        (state_dir / "launcher.pid").unlink(missing_ok=True)
        _say("stopped")


def _running_pid(state_dir: Path) -> int | None:
    pid_file = state_dir / "launcher.pid"
    if not pid_file.exists():
        return None
    pid = int(pid_file.read_text().strip() or 0)
    return pid if pid and pid_alive(pid) else None


def cmd_up(args: argparse.Namespace) -> int:
    state_dir: Path = args.state_dir.resolve()
    pid = _running_pid(state_dir)
    if pid is not None:
        _say(f"already running (launcher pid {pid})")
        print(state_dir / "kubeconfig")
        return 0
    # Build in the foreground first so progress is visible on this terminal.
    ensure_binaries(_say)
    if args.min_apiserver:
        ensure_min_apiserver(_say)
    if args.profile == "kueue":
        ensure_kueue(_say)
        ensure_versioned_apiserver(_say)
    if args.profile in ("node", "trainer"):
        ensure_csi(_say)
    if args.profile == "trainer":
        ensure_trainer(_say)
    state_dir.mkdir(parents=True, exist_ok=True)
    log_path = state_dir / "launcher.log"
    (state_dir / "cluster.json").unlink(missing_ok=True)
    with log_path.open("w") as log:
        launcher = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "localcluster",
                "run",
                f"--state-dir={state_dir}",
                f"--profile={args.profile}",
                f"--apiserver-port={args.apiserver_port}",
                *(["--min-apiserver"] if args.min_apiserver else []),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    _say(f"starting in the background (launcher pid {launcher.pid}, log {log_path}) ...")
    shown = 0
    try:
        while not (state_dir / "cluster.json").exists():
            lines = log_path.read_text().splitlines()
            for line in lines[shown:]:
                _say(line)
            shown = len(lines)
            if launcher.poll() is not None:
                _say(f"the launcher exited with code {launcher.returncode}; see {log_path}")
                return 1
            time.sleep(0.5)
    except (KeyboardInterrupt, StopSignal):
        # Interrupted while it starts: it runs in a session of its own, so stop it here.
        launcher.terminate()
        launcher.wait()
        raise
    for line in log_path.read_text().splitlines()[shown:]:
        _say(line)
    print(state_dir / "kubeconfig")
    return 0


def cmd_down(args: argparse.Namespace) -> int:
    state_dir: Path = args.state_dir.resolve()
    pid = _running_pid(state_dir)
    if pid is None:
        _say("not running")
        return 0
    guardian = _guardian_pid(state_dir)
    os.kill(pid, signal.SIGTERM)
    _wait_gone(pid, 60)
    if pid_alive(pid):
        # Children die with it (PR_SET_PDEATHSIG); the real node's guardian cleans up the rest.
        _say(f"the launcher (pid {pid}) did not stop within 60s; killing it")
        os.kill(pid, signal.SIGKILL)
    if guardian is not None and pid_alive(guardian):
        _say(f"waiting for the real node's guardian (pid {guardian}) to clean up the host")
        _wait_gone(guardian, 60)
        if pid_alive(guardian):
            _say(f"the guardian (pid {guardian}) still runs; see {state_dir / 'node' / 'logs'}")
            return 1
    _say("stopped")
    return 0


def _guardian_pid(state_dir: Path) -> int | None:
    """The real node's guardian (``node`` profile): it outlives the launcher on purpose."""
    from localcluster.node import GUARDIAN

    try:
        pids = json.loads((state_dir / "cluster.json").read_text())["pids"]
    except (OSError, ValueError, KeyError):
        return None
    return int(pids[GUARDIAN]) if GUARDIAN in pids else None


def _wait_gone(pid: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.2)


def cmd_status(args: argparse.Namespace) -> int:
    state_dir: Path = args.state_dir.resolve()
    pid = _running_pid(state_dir)
    state_file = state_dir / "cluster.json"
    if pid is None or not state_file.exists():
        print("not running")
        return 1
    state = json.loads(state_file.read_text())
    print(f"running (launcher pid {pid}), profile {state['profile']}")
    print(f"kubeconfig: {state['kubeconfig']}")
    for name, child in state["pids"].items():
        print(f"  {name:<24} pid {child} {'alive' if pid_alive(child) else 'DEAD'}")
    return 0


def cmd_smoke(args: argparse.Namespace) -> int:
    from localcluster.smoke import run_smoke

    state_dir: Path = args.state_dir.resolve()
    with LocalCluster(state_dir, profile="full") as cluster:
        for line in cluster.describe():
            _say(line)
        run_smoke(cluster, _say)
    _say("control plane stopped; every process it started has exited")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from localcluster.demo import main as demo

    profile: Profile | None = args.profile
    return demo(args.state_dir.resolve(), profile)


def cmd_crd(args: argparse.Namespace) -> int:
    import asyncio
    import tempfile

    from controller.api import crdgen

    with (
        tempfile.TemporaryDirectory(prefix="crdgen-") as tmp,
        LocalCluster(Path(tmp), profile="apiserver") as cluster,
    ):
        outputs = asyncio.run(crdgen.generate(cluster.kubeconfig))
    return crdgen.write(outputs, args.check)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcluster", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, func in (
        ("build", cmd_build),
        ("run", cmd_run),
        ("up", cmd_up),
        ("down", cmd_down),
        ("status", cmd_status),
        ("smoke", cmd_smoke),
        ("demo", cmd_demo),
        ("crd", cmd_crd),
    ):
        command = sub.add_parser(name)
        command.set_defaults(func=func)
        command.add_argument("--state-dir", type=Path, default=DEFAULT_STATE_DIR)
        if name == "demo":
            # Default: the real node when this host can run containers, else KWOK's nodes.
            command.add_argument("--profile", choices=["node", "full"], default=None)
        else:
            command.add_argument("--profile", choices=PROFILES, default="full")
        command.add_argument(
            "--apiserver-port", type=int, default=0, help="0 picks a free port (default)"
        )
        if name == "crd":
            command.add_argument(
                "--check", action="store_true", help="compare with the committed files"
            )
        if name == "build":
            command.add_argument("--node", action="store_true", help="the real node's too")
            command.add_argument("--kueue", action="store_true", help="Kueue's (kueue profile) too")
            command.add_argument(
                "--csi", action="store_true", help="the real node's CSI stack (issue 37) too"
            )
            command.add_argument(
                "--trainer", action="store_true", help="Kubeflow Trainer's (trainer profile) too"
            )
        if name in ("build", "run", "up"):
            command.add_argument(
                "--min-apiserver",
                action="store_true",
                help="build: also the oldest supported Kubernetes release's kube-apiserver; "
                "run/up (apiserver profile only): run that one instead of the suite's",
            )
    args = parser.parse_args(argv)
    stop_on_signals()
    try:
        return int(args.func(args))
    except (BuildError, LaunchError) as err:
        _say(f"error: {err}")
        return 1
    except (KeyboardInterrupt, StopSignal):
        _say("interrupted; everything started has been stopped")
        return 130


if __name__ == "__main__":
    sys.exit(main())
