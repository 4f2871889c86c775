"""`make demo` on KWOK's simulated nodes (``--profile full``, what a host that cannot run containers
gets): the narrated run of the original request's example must succeed. The real node's run is
``tests/node/test_demo.py``."""

from __future__ import annotations

from pathlib import Path

from tests.support.demo import assert_claim_mounted_where_asked, run_demo


def test_demo_runs_the_seed_example_to_completion(tmp_path: Path) -> None:
    code, output = run_demo(tmp_path / "demo", "--profile=full", timeout=280)
    assert code == 0, output[-3000:]
    assert "running on KWOK's simulated nodes" in output.splitlines()[0], output[:500]
    assert "JobSet volume-sample finished: Completed" in output
    assert_claim_mounted_where_asked(output)
    # One line says why there is nothing to read back, and no pod log is printed.
    assert "the pods ran nothing: no logs" in output
    assert "model weights v1 written by" not in output
    # The leader's metrics, read over HTTPS with a reader's token as a Prometheus would.
    assert '  jobset_completed_total{jobset_name="volume-sample"' in output, output[-3000:]
    # The second act (a run restored from a snapshot) needs the real node's CSI stack: skipped,
    # saying why, and nothing of it applied.
    assert "[act 2] skipped: checkpoints as VolumeSnapshots need the real node's CSI" in output
    assert "snapshot-resume" not in output
    assert "demo succeeded" in output
