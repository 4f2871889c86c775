"""`make demo` on the real node: A writes the model into the shared claim, each of B's four pods
reads it back (its log, printed by the demo, is A's line), and the demo leaves nothing running.

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
    assert "demo succeeded" in output

    # Stopped: no process (kubelet, containerd, its shims) names the state directory, nothing
    # is mounted under it.
    assert leftovers.mentioning(str(state_dir)) == {}
    assert _mounts_under(state_dir) == []
