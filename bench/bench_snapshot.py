"""Checkpoint snapshot benchmark: how long retention ``Snapshot`` and ``restorePolicy`` take with
real bytes, on the real node's CSI stack (``node`` profile: our CSI driver, the
external-provisioner, the csi-snapshotter and the snapshot-controller; docs/development.md, "The
CSI stack").

For each claim size (MiB), a few rounds of:

1. **Keep.** A JobSet whose one pod writes SIZE MiB (``dd`` from /dev/zero, then ``sync``) into its
   claim (class ``csi-immediate``; ``retentionPolicy.whenCompleted: Snapshot``, VolumeSnapshotClass
   ``csi-snapshot``). Measured from the moment the JobSet's ``Completed`` condition arrives: the
   controller's VolumeSnapshot created, readyToUse, the claim's deletion requested (it has a
   ``deletionTimestamp``) and the claim gone (released).
2. **Restore.** The JobSet deleted (and its pods gone), the same manifest applied again
   (``restorePolicy: NewestSnapshot``): its new claim is made from the snapshot (``dataSourceRef``;
   the driver copies the snapshot into a new volume). Measured from the moment the create was sent:
   the claim created, Bound, the reader pod Running (it checks that the claim holds SIZE MiB and
   the JobSet completes only if it does), the JobSet Completed.
3. The round's JobSet and snapshots are deleted and waited for (nothing left for the next round).

Every moment is when a watch event arrived here (one watch each on JobSets, claims,
VolumeSnapshots and pods, opened before the round), so they share this machine's clock and have a
resolution of milliseconds, unlike the objects' own second-resolution timestamps. Results:
min/median/max per size and figure, with the machine, in bench/results/snapshot-<date>.json.

    .venv/bin/python bench/bench_snapshot.py [--sizes 1 64 512] [--rounds 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Obj = dict[str, Any]

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kubernetes_asyncio import config  # noqa: E402

from controller.jobset import api  # noqa: E402
from controller.runtime.client import (  # noqa: E402
    CLAIMS,
    LEASES,
    PODS,
    VOLUME_SNAPSHOTS,
    ApiError,
    KubeClient,
    Resource,
)
from localcluster import csi, jobsetapi  # noqa: E402
from localcluster.cluster import LocalCluster  # noqa: E402
from tests.support.jobsets import jobset  # noqa: E402
from tests.support.replicas import start_replica  # noqa: E402

NAMESPACE = "bench-snapshot"
LEASE = "bench-snapshot"
STEP_TIMEOUT = 600.0  # seconds for any one step (512 MiB copies on a busy 2-core machine)

# The figures of one round, in the order they are printed: (key, what it measures).
FIGURES = (
    ("completed_to_snapshot_created", "Completed -> VolumeSnapshot created"),
    ("completed_to_snapshot_ready", "Completed -> snapshot readyToUse"),
    ("completed_to_claim_deleting", "Completed -> claim deletion requested"),
    ("completed_to_claim_released", "Completed -> claim gone (released)"),
    ("restore_to_claim_created", "re-applied -> restored claim created"),
    ("restore_to_claim_bound", "re-applied -> restored claim Bound"),
    ("restore_to_pod_running", "re-applied -> reader pod Running"),
    ("restore_to_completed", "re-applied -> JobSet Completed"),
)


def say(line: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {line}", flush=True)


# ----------------------------------------------------------------------------- pure parts


def script(size_mib: int) -> str:
    """Write SIZE MiB into /data/blob when the claim is empty; else check that it holds that many
    bytes (exit 1 otherwise) and stay Running for a second."""
    size = size_mib * 1024 * 1024
    return (
        'if [ -f /data/blob ]; then n=$(wc -c < /data/blob); echo "read $n bytes"; '
        f'[ "$n" -eq {size} ] || exit 1; sleep 1; '
        f"else dd if=/dev/zero of=/data/blob bs=1M count={size_mib} 2>&1 | tail -n 1; sync; "
        'echo "wrote"; fi'
    )


def manifest(name: str, size_mib: int) -> Obj:
    """One replicated job of one pod with the claim ``data``: kept as a snapshot on completion,
    restored from the newest one."""
    container = {
        "name": "main",
        "image": "busybox",
        "command": ["sh", "-c", script(size_mib)],
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
    }
    rjob = {
        "name": "ckpt",
        "replicas": 1,
        "template": {
            "spec": {
                "backoffLimit": 0,
                "template": {"spec": {"restartPolicy": "Never", "containers": [container]}},
            }
        },
    }
    template = {
        "metadata": {"name": "data"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": csi.IMMEDIATE_CLASS,
            "resources": {"requests": {"storage": f"{max(size_mib * 2, 16)}Mi"}},
        },
    }
    return jobset(
        name,
        rjob,
        volumeClaimPolicies=[
            {
                "templates": [template],
                "retentionPolicy": {"whenCompleted": "Snapshot"},
                "snapshotPolicy": {"volumeSnapshotClassName": csi.SNAPSHOT_CLASS},
                "restorePolicy": {"source": "NewestSnapshot", "whenMissing": "CreateEmpty"},
            }
        ],
    )


@dataclass(frozen=True)
class Event:
    at: float  # when it arrived here (time.time())
    kind: str  # JobSet, PersistentVolumeClaim, VolumeSnapshot, Pod
    type: str  # ADDED, MODIFIED, DELETED
    obj: Obj

    @property
    def name(self) -> str:
        return str((self.obj.get("metadata") or {}).get("name") or "")

    @property
    def uid(self) -> str:
        return str((self.obj.get("metadata") or {}).get("uid") or "")


def first(events: Iterable[Event], holds: Callable[[Event], bool]) -> Event | None:
    return next((e for e in events if holds(e)), None)


def completed(event: Event) -> bool:
    conditions = (event.obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Completed" and c.get("status") == "True" for c in conditions)


def failed(event: Event) -> bool:
    conditions = (event.obj.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Failed" and c.get("status") == "True" for c in conditions)


def ready(event: Event) -> bool:
    return (event.obj.get("status") or {}).get("readyToUse") is True


def phase(event: Event) -> str:
    return str((event.obj.get("status") or {}).get("phase") or "")


def deleting(event: Event) -> bool:
    return bool((event.obj.get("metadata") or {}).get("deletionTimestamp"))


def snapshot_of(event: Event, claim: str, claim_uid: str) -> bool:
    """The controller's VolumeSnapshot of exactly that claim object."""
    source = ((event.obj.get("spec") or {}).get("source") or {}).get("persistentVolumeClaimName")
    annotations = (event.obj.get("metadata") or {}).get("annotations") or {}
    return (
        event.kind == "VolumeSnapshot"
        and source == claim
        and annotations.get("jobset.sigs.k8s.io/snapshot-of-claim-uid") == claim_uid
    )


def since(start: float, moment: Event | None) -> float | None:
    return None if moment is None else round(moment.at - start, 3)


def keep_figures(events: list[Event], jobset_name: str, claim: str, claim_uid: str) -> Obj:
    """Phase 1's figures from the recorded events (None for a moment that never came)."""
    done = first(events, lambda e: e.kind == "JobSet" and e.name == jobset_name and completed(e))
    if done is None:
        return {key: None for key, _ in FIGURES[:4]}
    of_claim = [e for e in events if e.kind == "PersistentVolumeClaim" and e.uid == claim_uid]
    snaps = [e for e in events if snapshot_of(e, claim, claim_uid)]
    return {
        "completed_to_snapshot_created": since(done.at, first(snaps, lambda e: True)),
        "completed_to_snapshot_ready": since(done.at, first(snaps, ready)),
        "completed_to_claim_deleting": since(
            done.at, first(of_claim, lambda e: deleting(e) or e.type == "DELETED")
        ),
        "completed_to_claim_released": since(
            done.at, first(of_claim, lambda e: e.type == "DELETED")
        ),
    }


def restore_figures(
    events: list[Event], jobset_name: str, claim: str, old_uid: str, sent: float
) -> Obj:
    """Phase 2's figures: from ``sent`` (the re-applied JobSet's create) on."""
    later = [e for e in events if e.at >= sent]
    restored = [
        e
        for e in later
        if e.kind == "PersistentVolumeClaim" and e.name == claim and e.uid != old_uid
    ]
    pods = [
        e
        for e in later
        if e.kind == "Pod"
        and ((e.obj.get("metadata") or {}).get("labels") or {}).get(api.JOBSET_NAME) == jobset_name
    ]
    return {
        "restore_to_claim_created": since(sent, first(restored, lambda e: True)),
        "restore_to_claim_bound": since(sent, first(restored, lambda e: phase(e) == "Bound")),
        "restore_to_pod_running": since(sent, first(pods, lambda e: phase(e) == "Running")),
        "restore_to_completed": since(
            sent,
            first(later, lambda e: e.kind == "JobSet" and e.name == jobset_name and completed(e)),
        ),
    }


def distribution(values: Iterable[float | None]) -> Obj:
    found = sorted(v for v in values if v is not None)
    if not found:
        return {"n": 0}
    return {
        "n": len(found),
        "min": round(found[0], 3),
        "median": round(statistics.median(found), 3),
        "max": round(found[-1], 3),
    }


def summarize(runs: list[Obj]) -> Obj:
    """Per size (MiB, as a string key) and figure: min, median, max over the rounds."""
    sizes = sorted({int(r["size_mib"]) for r in runs})
    return {
        str(size): {
            key: distribution(r.get(key) for r in runs if r["size_mib"] == size)
            for key, _ in FIGURES
        }
        for size in sizes
    }


def table(summary: Mapping[str, Obj]) -> str:
    """The headline as a Markdown table: a row per figure, median (min-max) per size."""
    sizes = list(summary)
    lines = [
        "| seconds, median (min-max) | " + " | ".join(f"{s} MiB" for s in sizes) + " |",
        "|---|" + "---|" * len(sizes),
    ]
    for key, label in FIGURES:
        cells = []
        for size in sizes:
            d = summary[size].get(key) or {}
            cells.append(
                f"{d['median']:.2f} ({d['min']:.2f}-{d['max']:.2f})" if d.get("n") else "—"
            )
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def describe_machine() -> Obj:
    cpu = "unknown CPU"
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    kib = next(
        int(line.split()[1])
        for line in Path("/proc/meminfo").read_text().splitlines()
        if line.startswith("MemTotal:")
    )
    return {
        "cpu_model": cpu,
        "cores": os.cpu_count(),
        "memory_gib": round(kib / 1024 / 1024, 1),
        "kernel": f"{platform.system()} {platform.release()}",
    }


# ----------------------------------------------------------------------------- the run


@dataclass
class Recorder:
    """Every watch event of the namespace's JobSets, claims, VolumeSnapshots and pods."""

    client: KubeClient
    namespace: str
    events: list[Event] = field(default_factory=list)

    async def follow(self, resource: Resource, kind: str, since: str) -> None:
        async with self.client.watch(
            resource, self.namespace, resource_version=since, timeout_seconds=3600
        ) as lines:
            async for line in lines:
                event = json.loads(line)
                if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    self.events.append(Event(time.time(), kind, event["type"], event["object"]))

    async def until(self, holds: Callable[[list[Event]], Any], what: str) -> Any:
        deadline = time.monotonic() + STEP_TIMEOUT
        while True:
            found = holds(self.events)
            if found:
                return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} within {STEP_TIMEOUT:.0f}s")
            await asyncio.sleep(0.05)


@contextlib.asynccontextmanager
async def recording(client: KubeClient, namespace: str) -> AsyncIterator[Recorder]:
    recorder = Recorder(client, namespace)
    kinds = (
        (api.JOBSETS, "JobSet"),
        (CLAIMS, "PersistentVolumeClaim"),
        (VOLUME_SNAPSHOTS, "VolumeSnapshot"),
        (PODS, "Pod"),
    )
    tasks = []
    for resource, kind in kinds:
        version = (await client.list(resource, namespace))["metadata"]["resourceVersion"]
        tasks.append(asyncio.create_task(recorder.follow(resource, kind, version)))
    try:
        yield recorder
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


def _jobset_done(name: str) -> Callable[[list[Event]], Event | None]:
    def done(events: list[Event]) -> Event | None:
        found = first(
            events, lambda e: e.kind == "JobSet" and e.name == name and (completed(e) or failed(e))
        )
        if found is not None and failed(found):
            raise RuntimeError(f"JobSet {name} failed: {found.obj.get('status')}")
        return found

    return done


async def _gone(client: KubeClient, resource: Resource, name: str, what: str) -> None:
    deadline = time.monotonic() + STEP_TIMEOUT
    while True:
        try:
            await client.get(resource, name, NAMESPACE)
        except ApiError as err:
            if err.not_found:
                return
            raise
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} still there after {STEP_TIMEOUT:.0f}s")
        await asyncio.sleep(0.2)


async def _pods_gone(client: KubeClient, name: str) -> None:
    deadline = time.monotonic() + STEP_TIMEOUT
    selector = f"{api.JOBSET_NAME}={name}"
    while (await client.list(PODS, NAMESPACE, label_selector=selector))["items"]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the pods of {name} still there after {STEP_TIMEOUT:.0f}s")
        await asyncio.sleep(0.2)


async def one_round(client: KubeClient, size_mib: int, round_no: int) -> Obj:
    name = f"ckpt-{size_mib}m-{round_no}"
    claim = f"data-{name}"
    body = manifest(name, size_mib)
    began = time.monotonic()
    async with recording(client, NAMESPACE) as recorder:
        # 1. Keep: write, complete, snapshot, release.
        await client.create(api.JOBSETS, body, NAMESPACE)
        made = await recorder.until(
            lambda ev: first(ev, lambda e: e.kind == "PersistentVolumeClaim" and e.name == claim),
            f"claim {claim}",
        )
        old_uid = made.uid
        await recorder.until(_jobset_done(name), f"JobSet {name} Completed")
        say(f"  {size_mib} MiB #{round_no}: written, Completed; waiting for the snapshot")
        await recorder.until(
            lambda ev: first(ev, lambda e: snapshot_of(e, claim, old_uid) and ready(e)),
            f"a ready snapshot of {claim}",
        )
        await recorder.until(
            lambda ev: first(
                ev,
                lambda e: (
                    e.kind == "PersistentVolumeClaim" and e.uid == old_uid and e.type == "DELETED"
                ),
            ),
            f"claim {claim} gone",
        )
        keep = keep_figures(recorder.events, name, claim, old_uid)
        say(
            f"  {size_mib} MiB #{round_no}: snapshot ready {keep['completed_to_snapshot_ready']}s, "
            f"claim released {keep['completed_to_claim_released']}s after Completed"
        )
        # 2. Restore: the JobSet deleted and applied again; its claim comes from the snapshot.
        await client.delete(api.JOBSETS, name, NAMESPACE)
        await _gone(client, api.JOBSETS, name, f"JobSet {name}")
        await _pods_gone(client, name)
        sent = time.time()
        await client.create(api.JOBSETS, body, NAMESPACE)

        def rerun_done(events: list[Event]) -> Event | None:
            return _jobset_done(name)([e for e in events if e.at >= sent])

        await recorder.until(rerun_done, f"the re-applied JobSet {name} Completed")
        restore = restore_figures(recorder.events, name, claim, old_uid, sent)
        restored = first(
            (e for e in recorder.events if e.at >= sent),
            lambda e: e.kind == "PersistentVolumeClaim" and e.name == claim and e.uid != old_uid,
        )
        source = ((restored.obj.get("spec") or {}).get("dataSourceRef") or {}) if restored else {}
        say(
            f"  {size_mib} MiB #{round_no}: restored from {source.get('name')}: Bound "
            f"{restore['restore_to_claim_bound']}s, reader Running "
            f"{restore['restore_to_pod_running']}s after the re-apply"
        )
        # 3. Clean up: the JobSet (its second claim goes through a snapshot too), the snapshots.
        await client.delete(api.JOBSETS, name, NAMESPACE)
        await _gone(client, api.JOBSETS, name, f"JobSet {name}")
        selector = f"{api.JOBSET_NAME}={name}"
        for snapshot in (await client.list(VOLUME_SNAPSHOTS, NAMESPACE, label_selector=selector))[
            "items"
        ]:
            snap = snapshot["metadata"]["name"]
            await client.delete(VOLUME_SNAPSHOTS, snap, NAMESPACE)
            await _gone(client, VOLUME_SNAPSHOTS, snap, f"VolumeSnapshot {snap}")
    return {
        "size_mib": size_mib,
        "round": round_no,
        "restored_from": source.get("name"),
        **keep,
        **restore,
        "round_seconds": round(time.monotonic() - began, 1),
    }


async def _wait_leader(client: KubeClient, identity: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            lease = await client.get(LEASES, LEASE, NAMESPACE)
            if (lease.get("spec") or {}).get("holderIdentity") == identity:
                return
        except ApiError:
            pass
        await asyncio.sleep(0.3)
    raise TimeoutError("the controller did not become leader within 120 s")


async def run(cluster: LocalCluster, sizes: list[int], rounds: int, logs: Path) -> list[Obj]:
    api_client = await config.new_client_from_config(config_file=str(cluster.kubeconfig))
    async with api_client:
        client = KubeClient(api_client)
        replica = start_replica(
            cluster.kubeconfig,
            NAMESPACE,
            "bench-controller",
            logs,
            lease_name=LEASE,
            module="controller",
        )
        try:
            await _wait_leader(client, replica.identity)
            say(f"controller leading (log {replica.process.log_path})")
            results = []
            for size in sizes:
                for round_no in range(rounds):
                    say(f"{size} MiB, round {round_no + 1} of {rounds}")
                    results.append(await one_round(client, size, round_no))
            return results
        finally:
            replica.process.kill()


def _create_namespace(cluster: LocalCluster) -> None:
    cluster.kubectl("create", "namespace", NAMESPACE)
    deadline = time.monotonic() + 60
    while "serviceaccount/default" not in cluster.kubectl(
        "get", "serviceaccounts", "-n", NAMESPACE, "-o", "name"
    ):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no default ServiceAccount in namespace {NAMESPACE} within 60 s")
        time.sleep(0.3)


def _commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
            check=True,
        ).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 64, 512], help="MiB")
    parser.add_argument("--rounds", type=int, default=3, help="repetitions per size")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    today = datetime.datetime.now(datetime.UTC).date().isoformat()
    out = args.out or ROOT / "bench" / "results" / f"snapshot-{today}.json"
    began = time.monotonic()
    # A short state directory: the CSI driver's socket path must fit in 108 bytes.
    with tempfile.TemporaryDirectory(prefix="sjs-snap-") as tmp:
        say("starting the node profile (a real node, the CSI stack); it waits for the host lock")
        with LocalCluster(Path(tmp) / "c", profile="node", report=say) as cluster:
            jobsetapi.install(cluster)
            _create_namespace(cluster)
            runs = asyncio.run(run(cluster, args.sizes, args.rounds, Path(tmp)))
    summary = summarize(runs)
    report = {
        "benchmark": "snapshot",
        "date": today,
        "commit": _commit(),
        "machine": describe_machine(),
        "sizes_mib": args.sizes,
        "rounds": args.rounds,
        "figures": dict(FIGURES),
        "summary": summary,
        "runs": runs,
        "wall_seconds": round(time.monotonic() - began, 1),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(table(summary), flush=True)
    say(f"written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
