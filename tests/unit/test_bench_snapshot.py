"""The snapshot benchmark's pure parts (bench/bench_snapshot.py runs them on the real node): the
workload's spelling, the figures read from recorded watch events, the distributions and the
table."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

Obj = dict[str, Any]
ROOT = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "bench_snapshot", ROOT / "bench" / "bench_snapshot.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_snapshot", module)
    spec.loader.exec_module(module)
    return module


bench = _load()
T0 = 1_800_000_000.0
CLAIM, UID, NEW_UID = "data-js", "u-1", "u-2"


def event(
    at: float, kind: str, name: str, uid: str = "", type_: str = "MODIFIED", **obj: Any
) -> Any:
    metadata = {"name": name, "uid": uid, **obj.pop("metadata", {})}
    return bench.Event(T0 + at, kind, type_, {"metadata": metadata, **obj})


def completed_jobset(at: float) -> Any:
    status = {"conditions": [{"type": "Completed", "status": "True"}]}
    return event(at, "JobSet", "js", status=status)


def snapshot(at: float, ready: bool, of: str = UID) -> Any:
    return event(
        at,
        "VolumeSnapshot",
        f"{CLAIM}-{of}",
        metadata={"annotations": {"jobset.sigs.k8s.io/snapshot-of-claim-uid": of}},
        spec={"source": {"persistentVolumeClaimName": CLAIM}},
        status={"readyToUse": ready},
    )


def test_the_workload_keeps_its_claim_as_a_snapshot_and_restores_from_the_newest() -> None:
    body = bench.manifest("ckpt-64m-0", 64)
    (policy,) = body["spec"]["volumeClaimPolicies"]
    assert policy["retentionPolicy"] == {"whenCompleted": "Snapshot"}
    assert policy["snapshotPolicy"] == {"volumeSnapshotClassName": "csi-snapshot"}
    assert policy["restorePolicy"] == {"source": "NewestSnapshot", "whenMissing": "CreateEmpty"}
    (template,) = policy["templates"]
    assert template["spec"]["storageClassName"] == "csi-immediate"
    (rjob,) = body["spec"]["replicatedJobs"]
    (container,) = rjob["template"]["spec"]["template"]["spec"]["containers"]
    command = container["command"][-1]
    assert "count=64" in command and f"-eq {64 * 1024 * 1024} ]" in command
    assert container["volumeMounts"] == [{"name": "data", "mountPath": "/data"}]


def test_the_keep_figures_count_from_completed_and_only_that_claims_snapshot() -> None:
    events = [
        event(0, "PersistentVolumeClaim", CLAIM, UID, "ADDED"),
        event(5, "JobSet", "js"),
        completed_jobset(10),
        snapshot(10.5, False, of="u-0"),  # an earlier claim's: not counted
        snapshot(11, False),
        snapshot(13.25, True),
        event(13.5, "PersistentVolumeClaim", CLAIM, UID, metadata={"deletionTimestamp": "t"}),
        event(14, "PersistentVolumeClaim", CLAIM, UID, "DELETED"),
    ]
    assert bench.keep_figures(events, "js", CLAIM, UID) == {
        "completed_to_snapshot_created": 1.0,
        "completed_to_snapshot_ready": 3.25,
        "completed_to_claim_deleting": 3.5,
        "completed_to_claim_released": 4.0,
    }
    assert set(bench.keep_figures(events[:2], "js", CLAIM, UID).values()) == {None}


def test_the_restore_figures_count_from_the_create_and_only_the_new_claim() -> None:
    sent = T0 + 100
    pod_labels = {"labels": {"jobset.sigs.k8s.io/jobset-name": "js"}}
    events = [
        event(90, "PersistentVolumeClaim", CLAIM, UID, status={"phase": "Bound"}),
        event(101, "PersistentVolumeClaim", CLAIM, NEW_UID, "ADDED", status={"phase": "Pending"}),
        event(103, "PersistentVolumeClaim", CLAIM, NEW_UID, status={"phase": "Bound"}),
        event(104, "Pod", "js-ckpt-0-0-x", "p", metadata=pod_labels, status={"phase": "Pending"}),
        event(106.5, "Pod", "js-ckpt-0-0-x", "p", metadata=pod_labels, status={"phase": "Running"}),
        completed_jobset(109),
    ]
    assert bench.restore_figures(events, "js", CLAIM, UID, sent) == {
        "restore_to_claim_created": 1.0,
        "restore_to_claim_bound": 3.0,
        "restore_to_pod_running": 6.5,
        "restore_to_completed": 9.0,
    }


def test_the_summary_is_a_distribution_per_size_and_figure() -> None:
    runs = [
        {"size_mib": 1, "completed_to_snapshot_ready": 1.0},
        {"size_mib": 1, "completed_to_snapshot_ready": 3.0},
        {"size_mib": 1, "completed_to_snapshot_ready": 2.0},
        {"size_mib": 512, "completed_to_snapshot_ready": None},
    ]
    summary = bench.summarize(runs)
    assert summary["1"]["completed_to_snapshot_ready"] == {
        "n": 3,
        "min": 1.0,
        "median": 2.0,
        "max": 3.0,
    }
    assert summary["512"]["completed_to_snapshot_ready"] == {"n": 0}
    lines = bench.table(summary).splitlines()
    assert lines[0] == "| seconds, median (min-max) | 1 MiB | 512 MiB |"
    assert "| Completed -> snapshot readyToUse | 2.00 (1.00-3.00) | — |" in lines
