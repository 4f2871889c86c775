"""The chaos soak for 60 seconds (``make soak`` runs the same engine for 5 minutes).

Its own control plane (the API server is restarted, so it cannot share the session's), two
controller replicas, the leader killed at random, JobSets of every scope (Pod scope with the
admission policy installed) and retention setting (Snapshot too: the driver plays the snapshot
controller, and fails some snapshots) created, failed, restarted, suspended, scaled and deleted.
Every invariant of tests/soak must hold, and the run must really have done that work.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from localcluster.build import BuildError
from localcluster.processes import LaunchError
from tests.soak.engine import Options, run_soak, summary_of

SECONDS = 60.0


@pytest.mark.timeout(420)
def test_soak_for_a_minute_keeps_every_invariant(tmp_path: Path) -> None:
    lines: list[str] = []

    def say(line: str) -> None:
        lines.append(line)
        print(line, flush=True)

    options = Options(
        seconds=SECONDS,
        state_dir=tmp_path / "cluster",
        report_path=tmp_path / "soak.json",
        quiesce_seconds=120,
        seed=7,
    )
    try:
        report = run_soak(options, say)
    except (BuildError, LaunchError) as err:
        pytest.fail(f"the soak's control plane could not start: {err}", pytrace=False)
    summary = summary_of(report)
    print(summary)
    # The first violation heads the message: the short summary of a long run shows its first line.
    violated = report.violations
    assert violated == [], f"{violated[0]} (first of {len(violated)} violations)\n{summary}"
    assert (tmp_path / "soak.json").exists()
    jobsets = report.jobsets
    assert jobsets["created"] >= 15, summary
    assert jobsets["completed"] >= 5 and jobsets["failed"] >= 2, summary
    assert jobsets["deleted"] >= 4 and jobsets["restarts"] >= 2 and jobsets["scaled"] >= 1, summary
    assert len(report.leader_kills) >= 1, summary
    assert report.apiserver_restart.get("ready_at", 0) > 0, summary
    assert report.writes.get("persistentvolumeclaims create", 0) >= 2 * jobsets["created"], summary
    assert report.writes.get("persistentvolumeclaims delete", 0) >= 1, summary
    assert report.converged, summary
    # A replica may exit by itself only as a leader that could not renew within its renew
    # deadline while the API server was away; anything else (a crash) is a bug.
    crashes = [e for e in report.replica_exits if "leadership lost" not in e["reason"]]
    assert crashes == [], summary
    assert report.checked["continuous_rounds"] >= 10, summary
    assert report.checked["claim_deletes_judged"] >= 1, summary
    # An impostor claim (a copied name label) and a claim deleted out of band, then accepted.
    assert report.checked["impostor_claims"] >= 1, summary
    assert report.checked["claims_lost"] >= 1 and report.checked["losses_accepted"] >= 1, summary
    # Pod scope: JobSets with a claim per Job x completion index, whose pods were checked to
    # mount their own index's claim.
    assert report.checked["pod_scope_jobsets"] >= 5, summary
    assert report.checked["pod_scope_claims_created"] >= 4 * 5, summary
    assert report.checked["pod_scope_pods_checked"] >= 4, summary
    # Retention Snapshot: snapshots made ready and failed on purpose (their claims seen kept), and
    # claim deletes checked against a ready snapshot of exactly that claim.
    checked = report.checked
    assert checked["snapshot_jobsets"] >= 5 and checked["snapshots_ready"] >= 4, summary
    assert checked["snapshots_failed"] >= 1, summary
    assert checked["failed_snapshot_claims_kept"] == checked["snapshots_failed"], summary
    assert checked["snapshot_claim_deletes_checked"] >= 2, summary
    assert report.rss_peak_mib and max(report.rss_peak_mib.values()) > 0, summary
