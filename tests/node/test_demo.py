"""`make demo` on the real node: A writes the model into the shared claim, each of B's four pods
reads it back (its log, printed by the demo, is A's line); in the second act a run saves a
checkpoint, the controller keeps it as a VolumeSnapshot (the real CSI stack) and deletes the
claim, and a second run of the same manifest, its claim restored from that snapshot, prints the
first run's checkpoint; and the demo leaves nothing running.

The demo starts its own real node, and one real node runs per host at a time (a host-wide lock):
``no_session_node`` orders this test before the tier's shared node and fails, rather than waits
forever, if that node is already up.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from localcluster.node import host_checks
from tests.support import leftovers
from tests.support.demo import assert_claim_mounted_where_asked, run_demo

# "    volume-sample-b-1-0-x7k2p: model weights v1 written by volume-sample-a-0-0 at <date>"
B_LOG = re.compile(r"^ {4}(volume-sample-b-[01]-[01]-\w+): (.*)$")
HOST_FILE = re.compile(r"^ {4}(/\S+/weights): (.*)$")
# The second act's lines (localcluster/demo.py, second_act).
SAVED = re.compile(r"^  A: started fresh, saved (checkpoint [0-9a-f]{16} written by \S+)$")
READY = re.compile(r"^  VolumeSnapshot (ckpt-snapshot-resume-[0-9a-f]{8}) readyToUse ")
RESTORED = re.compile(
    r"^  claim ckpt-snapshot-resume created from VolumeSnapshot (\S+) \(spec.dataSourceRef\)$"
)
RESUMED = re.compile(r"^  A: resumed from (.*)$")
READ = re.compile(r"^  B: (.*)$")


def _mounts_under(directory: Path) -> list[str]:
    prefix = str(directory.resolve()) + "/"
    with open("/proc/self/mounts") as table:
        return [line.split()[1] for line in table if line.split()[1].startswith(prefix)]


@pytest.mark.timeout(900)  # the real node may first wait for another run's node to stop
def test_demo_on_the_real_node_shows_b_reading_what_a_wrote(
    tmp_path_factory: pytest.TempPathFactory, no_session_node: None
) -> None:
    assert host_checks() == [], "this host cannot run containers (make tools installs it)"
    # Short: containerd's socket path under it must stay within 104 bytes.
    state_dir = tmp_path_factory.mktemp("demo")
    code, output = run_demo(state_dir, timeout=840)
    lines = output.splitlines()
    assert code == 0, output[-4000:]
    assert "running on a real node" in lines[0], output[:500]
    assert "JobSet volume-sample finished: Completed" in output

    host_files = [(m[1], m[2]) for m in map(HOST_FILE.match, lines) if m]
    assert len(host_files) == 1, output[-4000:]
    path, written = host_files[0]
    assert path.startswith(str(state_dir / "volumes")), path
    assert written.startswith("model weights v1 written by volume-sample-a-0-0 at "), written
    logs = {m[1]: m[2] for m in map(B_LOG.match, lines) if m}
    assert len(logs) == 4, output[-4000:]
    assert set(logs.values()) == {written}, logs
    assert_claim_mounted_where_asked(output)

    # The second act: run 1's checkpoint, its snapshot ready before the claim went (the order
    # of the demo's polls; tests/node/test_snapshot_checkpoints.py proves it from etcd's), run 2's
    # claim made from that snapshot, and run 2's A and B reading run 1's checkpoint.
    act = lines[next(i for i, line in enumerate(lines) if line.startswith("[act 2] ")) :]
    (saved,) = [m[1] for m in map(SAVED.match, act) if m]
    (snapshot,) = [m[1] for m in map(READY.match, act) if m]
    assert [m[1] for m in map(RESTORED.match, act) if m] == [snapshot], output[-3000:]
    assert [m[1] for m in map(RESUMED.match, act) if m] == [saved], output[-3000:]
    # B (held until the demo has read its log) printed the checkpoint in both runs.
    assert [m[1] for m in map(READ.match, act) if m] == [saved, saved], output[-3000:]
    deleted = (
        "  then the controller deleted claim ckpt-snapshot-resume: the checkpoint is the snapshot"
    )
    assert act.index(deleted) > next(i for i, line in enumerate(act) if READY.match(line))
    finished = [line for line in act if line.startswith("  JobSet snapshot-resume finished: ")]
    assert [line.split("(")[0] for line in finished] == [
        "  JobSet snapshot-resume finished: Completed "
    ] * 2
    assert f"  the second run read the first run's checkpoint, restored from {snapshot}" in act
    assert "demo succeeded" in output

    # Stopped: no process (kubelet, containerd, its shims) names the state directory, nothing
    # is mounted under it.
    assert leftovers.mentioning(str(state_dir)) == {}
    assert _mounts_under(state_dir) == []
