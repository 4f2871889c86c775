"""Bad input to the real node ends with one clear message before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from localcluster.cluster import LocalCluster
from localcluster.node import NodeBinaries, RealNode
from localcluster.processes import LaunchError


def test_a_state_directory_too_long_for_containerds_socket_is_named(tmp_path: Path) -> None:
    directory = tmp_path / ("d" * 120)
    cluster = LocalCluster(tmp_path / "cluster", profile="node")
    nowhere = Path("/nonexistent")
    node = RealNode(cluster, NodeBinaries(nowhere, nowhere, nowhere), directory, report=print)
    with pytest.raises(LaunchError, match="too long for containerd's socket") as raised:
        node.start()
    assert "use a shorter --state-dir" in str(raised.value)
    assert node.processes == []
    assert not directory.exists()
