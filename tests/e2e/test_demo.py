"""`make demo` itself: the narrated run of the original request's example must succeed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_demo_runs_the_seed_example_to_completion(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "localcluster", "demo", f"--state-dir={tmp_path / 'demo'}"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "JobSet volume-sample finished: Completed" in output
    assert "pretrained-model-volume-sample   Bound" in output
    for job in ("volume-sample-a-0", "volume-sample-b-0", "volume-sample-b-1"):
        line = next(line for line in output.splitlines() if line.startswith(job))
        assert line.endswith("pretrained-model-volume-sample"), line
    workers = next(
        line for line in output.splitlines() if line.startswith("volume-sample-workers-0")
    )
    assert workers.endswith("<none>"), workers
    assert "demo succeeded" in output
