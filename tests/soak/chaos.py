"""The soak's moving parts: controller replicas (real OS processes), leader kills, the API server
restart, RSS sampling, and reading the audit log as it grows."""

from __future__ import annotations

import asyncio
import datetime
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from localcluster import pki as pkimod
from localcluster.cluster import LocalCluster
from localcluster.processes import LaunchError, https_get
from tests.soak.model import AuditEntry, parse_audit_line
from tests.soak.scenarios import FAIL_AFTER, RUN_DURATION
from tests.support.replicas import Replica, start_replica


@dataclass(frozen=True)
class Kill:
    at: float
    identity: str


@dataclass(frozen=True)
class Exit:
    at: float
    identity: str
    code: int | None
    reason: str  # the last error the replica logged


def last_error(replica: Replica) -> str:
    errors = [line for line in replica.log_lines() if line.get("level") == "error"]
    if not errors:
        return "no error logged"
    line = errors[-1]
    return f"{line.get('msg')}: {line.get('error', '')}"[:300]


def rss_bytes(pid: int) -> int | None:
    """VmRSS of a process from /proc; None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None


@dataclass
class Replicas:
    """Two controller replicas, always: one that dies (killed or exited) is replaced at once."""

    kubeconfig: Path
    namespace: str
    log_dir: Path
    lease: str
    running: dict[str, Replica] = field(default_factory=dict)
    every: list[Replica] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    exits: list[Exit] = field(default_factory=list)
    rss_peak: dict[str, int] = field(default_factory=dict)

    def start(self) -> Replica:
        identity = f"replica-{len(self.every)}"
        replica = start_replica(
            self.kubeconfig,
            self.namespace,
            identity,
            self.log_dir,
            lease_name=self.lease,
            module="controller",
        )
        self.running[identity] = replica
        self.every.append(replica)
        return replica

    def kill(self, identity: str) -> Replica:
        """kill -9 one replica and start its replacement."""
        self.running.pop(identity).process.kill()
        self.kills.append(Kill(time.time(), identity))
        return self.start()

    def supervise(self) -> list[Exit]:
        """Replace replicas that exited by themselves (e.g. leadership lost: exit 1)."""
        ended = []
        for identity, replica in list(self.running.items()):
            popen = replica.process.popen
            if popen is not None and popen.poll() is None:
                continue
            code = popen.returncode if popen else None
            ended.append(Exit(time.time(), identity, code, last_error(replica)))
            del self.running[identity]
            self.start()
        self.exits.extend(ended)
        return ended

    def sample_rss(self) -> dict[str, int]:
        now = {}
        for identity, replica in self.running.items():
            pid = replica.process.pid
            value = rss_bytes(pid) if pid is not None else None
            if value is not None:
                now[identity] = value
                self.rss_peak[identity] = max(self.rss_peak.get(identity, 0), value)
        return now

    def stop(self) -> None:
        for replica in self.running.values():
            replica.process.kill()
        self.running.clear()


@dataclass
class ApiserverRestart:
    stopping_at: float = 0.0
    stopped_at: float = 0.0
    started_at: float = 0.0
    ready_at: float = 0.0

    @property
    def done(self) -> bool:
        return self.ready_at > 0


async def restart_apiserver(
    cluster: LocalCluster, down_seconds: float, record: ApiserverRestart
) -> None:
    """Stop kube-apiserver, stay down, start it again and wait until it is ready.

    Unlike ``LocalCluster.restart_apiserver`` this does not block the event loop: the driver and
    the checks keep running (and failing, then retrying) meanwhile. ``start`` runs on the main
    thread (the event loop's), as ManagedProcess requires.
    """
    process = cluster.process("kube-apiserver")
    record.stopping_at = time.time()
    await asyncio.to_thread(process.stop)
    record.stopped_at = time.time()
    await asyncio.sleep(down_seconds)  # the outage's length
    process.start()
    record.started_at = time.time()
    pki = cluster.pki
    cert = (pki.client_cert(pkimod.ADMIN), pki.client_key(pkimod.ADMIN))
    deadline = time.monotonic() + 120
    while True:
        status, body = await asyncio.to_thread(
            https_get, f"{cluster.server}/readyz", ca=pki.ca_cert, cert=cert
        )
        if status == 200:
            record.ready_at = time.time()
            return
        if not process.running() or time.monotonic() > deadline:
            raise LaunchError(
                f"kube-apiserver did not come back after the restart ({status} {body[:200]!r}):\n"
                f"{process.log_tail()}"
            )
        await asyncio.sleep(0.3)


@dataclass
class AuditTail:
    """The audit log's new entries about one namespace, across rotations."""

    path: Path
    namespace: str
    handle: IO[str] | None = None
    partial: str = ""

    def read(self) -> list[AuditEntry]:
        if self.handle is None:
            if not self.path.exists():
                return []
            self.handle = self.path.open(errors="replace")
        found = self._drain()
        try:
            inode = os.stat(self.path).st_ino
        except FileNotFoundError:
            return found
        if inode != os.fstat(self.handle.fileno()).st_ino:  # rotated: the rest is in a new file
            self.handle.close()
            self.handle = self.path.open(errors="replace")
            self.partial = ""
            found += self._drain()
        return found

    def _drain(self) -> list[AuditEntry]:
        assert self.handle is not None
        lines = (self.partial + self.handle.read()).split("\n")
        self.partial = lines.pop()
        marker = f'"namespace":"{self.namespace}"'
        found = []
        for line in lines:
            if marker not in line:
                continue
            entry = parse_audit_line(line, self.namespace)
            if entry is not None:
                found.append(entry)
        return found

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()
            self.handle = None


# ------------------------------------------------------------------------------- KWOK's pods

# KWOK plays a Pod's stages (Pending → Running → Succeeded/Failed) as the kubelet would, but it
# drops a stage whose status patch fails with anything but a network error it knows (a connection
# reset while the API server shuts down, a 403 of an admission plugin not ready after its start):
# that pod then stays where it was for good (kubernetes-sigs/kwok#816). A kubelet would retry. The
# soak nudges such a pod (an annotation: a MODIFIED event, and KWOK plays the stage again) once it
# is this many seconds past the time KWOK should have moved it on. Only pods on a node: an
# unscheduled pod is the scheduler's, and the controller's placement, to explain.
KWOK_STUCK_AFTER = 20.0
NUDGE_ANNOTATION = "soak.localcluster.test/nudged"


def _seconds(duration: object) -> float | None:
    """A Go duration of the form KWOK's annotations take here ("12s", "2m"); None otherwise."""
    if not isinstance(duration, str) or len(duration) < 2 or duration[-1] not in "sm":
        return None
    try:
        value = float(duration[:-1])
    except ValueError:
        return None
    return value * (60 if duration[-1] == "m" else 1)


def _epoch(timestamp: object) -> float | None:
    if not isinstance(timestamp, str):
        return None
    moment = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    return moment.timestamp()


def stuck_pods(pods: Iterable[dict[str, Any]], now: float) -> list[str]:
    """The names of the pods KWOK should have moved on more than ``KWOK_STUCK_AFTER`` seconds
    ago: bound to a node yet Pending since their creation, or Running past their run duration
    (or fail-after)."""
    found = []
    for pod in pods:
        meta, spec, status = (
            pod.get("metadata") or {},
            pod.get("spec") or {},
            pod.get("status") or {},
        )
        if meta.get("deletionTimestamp") or not spec.get("nodeName"):
            continue
        phase, annotations = status.get("phase"), meta.get("annotations") or {}
        due: float | None = None
        if phase == "Pending":
            due = _epoch(meta.get("creationTimestamp"))
        elif phase == "Running":
            started = _epoch(status.get("startTime"))
            runs = [_seconds(annotations.get(k)) for k in (RUN_DURATION, FAIL_AFTER)]
            known = [r for r in runs if r is not None]
            if started is not None and known:
                due = started + min(known)
        if due is not None and now > due + KWOK_STUCK_AFTER:
            found.append(str(meta.get("name")))
    return sorted(found)
