"""Running ``python -m localcluster demo`` as ``make demo`` does, for the e2e and node tiers.

A demo that runs too long is sent SIGTERM, not SIGKILL: it then stops everything it started (on
the real node: containers, shims, mounts, the bridge), which a kill would leave behind.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

JOBS_WITH_THE_CLAIM = ("volume-sample-a-0", "volume-sample-b-0", "volume-sample-b-1")
CLAIM = "pretrained-model-volume-sample"


def run_demo(state_dir: Path, *args: str, timeout: float) -> tuple[int, str]:
    """Exit status and output (stdout, then stderr) of the demo."""
    process = subprocess.Popen(
        [sys.executable, "-m", "localcluster", "demo", f"--state-dir={state_dir}", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=180)
        raise AssertionError(f"the demo ran over {timeout:.0f}s; its output:\n{out}{err}") from None
    return process.returncode, out + err


def assert_claim_mounted_where_asked(output: str) -> None:
    """The summary: the claim Bound, mounted into A's and B's Jobs, not into workers'."""
    assert f"{CLAIM}   Bound" in output, output[-3000:]
    lines = output.splitlines()
    for job in JOBS_WITH_THE_CLAIM:
        line = next(line for line in lines if line.startswith(job))
        assert line.endswith(CLAIM), line
    workers = next(line for line in lines if line.startswith("volume-sample-workers-0"))
    assert workers.endswith("<none>"), workers
