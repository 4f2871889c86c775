"""tests/run.py, the side-by-side runner of ``make test-parallel``: how it cuts the suite into
groups and what it reads back from each group's JUnit report."""

from __future__ import annotations

from pathlib import Path

from tests import run


def test_split_balances_by_weight_and_keeps_the_files_order() -> None:
    files = ["a", "b", "c", "d", "e"]
    weights = {"a": 10.0, "b": 1.0, "c": 9.0, "d": 2.0, "e": 3.0}
    parts = run.split(files, 2, weights)
    assert sorted(f for p in parts for f in p) == files
    assert sorted(sum(weights[f] for f in p) for p in parts) == [12.0, 13.0]
    assert all(p == sorted(p) for p in parts)
    assert run.split(files, 1, weights) == [files]
    assert run.split(["a"], 3, weights) == [["a"]]  # no empty group
    # A list's own weight counts: the heavy one gets less; every list keeps its place.
    heavy, light = run.split(files, 2, weights, start=[20.0, 0.0])
    assert (20.0 + sum(weights[f] for f in heavy), sum(weights[f] for f in light)) == (23.0, 22.0)
    assert run.split(["b"], 3, weights, start=[5.0, 0.0, 0.0]) == [[], ["b"], []]
    assert run.split(["a", "b"], 2, weights, start=[5.0, 0.0]) == [["b"], ["a"]]


def test_the_real_node_has_a_group_and_unit_rides_with_the_first() -> None:
    found = run.groups(3)
    assert [g.name for g in found] == ["real-node", "group-1", "group-2", "group-3"]
    assert found[0].paths[0] == "tests/node"
    assert found[1].paths[0] == "tests/unit"
    shared = [p for g in found for p in g.paths if p not in ("tests/unit", "tests/node")]
    # The end-to-end tests that start Kueue too: the metrics certificate it reads from a fixed
    # path is written under a lock (kueue.ensure_metrics_cert).
    assert sorted(shared) == sorted(run._files("integration") + run._files("e2e"))
    assert len(shared) == len(set(shared))  # each file in one group
    assert "tests/integration/upstream/test_webhook.py" in shared  # subfolders too


JUNIT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest">
<testcase classname="tests.unit.volumes.test_record" name="test_a" time="0.5"/>
<testcase classname="tests.unit.volumes.test_record" name="test_b" time="0.25">
  <skipped message="no"/></testcase>
<testcase classname="tests.integration.test_crd.TestX" name="test_c" time="2.0">
  <failure message="boom"/></testcase>
<testcase classname="tests.node.test_data" name="test_d" time="30"/>
</testsuite></testsuites>
"""


def test_junit_counts_per_tier_and_seconds_per_file(tmp_path: Path) -> None:
    group = run.Group("g", [])
    group.junit = tmp_path / "g.xml"
    group.junit.write_text(JUNIT)
    counts, seconds = run._junit(group)
    assert counts == {
        "unit passed": 1,
        "unit skipped": 1,
        "integration failed": 1,
        "node passed": 1,
    }
    assert seconds == {
        "tests/unit/volumes/test_record.py": 0.75,
        "tests/integration/test_crd.py": 2.0,
        "tests/node/test_data.py": 30.0,
    }


def test_a_missing_report_counts_nothing(tmp_path: Path) -> None:
    group = run.Group("g", [])
    group.junit = tmp_path / "missing.xml"
    assert run._junit(group) == ({}, {})


def test_a_failed_groups_report_has_its_tracebacks() -> None:
    """CI deletes the logs with the clone: the report carries the tracebacks themselves."""
    log = [
        "tests/x.py .F",
        "=================================== FAILURES ===================================",
        "____ test_b ____",
        "E   assert 1 == 2",
        "=========================== short test summary info ============================",
        "FAILED tests/x.py::test_b - assert 1 == 2",
        "1 failed, 1 passed",
    ]
    report = run.failure_report(log)
    assert "E   assert 1 == 2" in report
    assert report[-1] == "FAILED tests/x.py::test_b - assert 1 == 2"
    assert "1 failed, 1 passed" not in report
    crashed = ["collecting ...", "Fatal Python error: Aborted"]
    assert run.failure_report(crashed) == crashed
