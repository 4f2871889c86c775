"""The side-by-side benchmark's pure parts: the ratio table, the audit counting it relies on, the
workload's spelling (bench/bench_compare.py runs them against real control planes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from localcluster import audit
from tests.support.compare import (
    FIGURES,
    Progress,
    compare_jobset,
    completed,
    finished,
    markdown_table,
    parse_queue_work,
    queue_work_delta,
    ratio,
    ratio_rows,
    reduced,
    request_deltas,
    spread_table,
)

Obj = dict[str, Any]


def _run(row: str, variant: str = "a", n: int = 100, **figures: Any) -> Obj:
    run: Obj = {key: 1.0 for key, _ in FIGURES}
    run.update(row=row, variant=variant, n=n, **figures)
    return run


def test_ratio_is_ours_over_upstream_and_undefined_when_upstream_is_zero() -> None:
    assert ratio(5.0, 10.0) == 0.5
    assert ratio(0.0, 4.0) == 0.0
    assert ratio(3.0, 0.0) is None
    assert ratio(0.0, 0.0) is None


def test_ratio_rows_compare_each_of_our_rows_with_upstream_of_the_same_variant_and_size() -> None:
    results = [
        _run("upstream", writes_per_jobset=20.0, failed_writes=8),
        _run("ours", writes_per_jobset=10.0, failed_writes=0),
        _run("ours-qps500", writes_per_jobset=12.0, failed_writes=0),
        # Another size: compared with its own upstream row only.
        _run("upstream", n=500, writes_per_jobset=40.0),
        _run("ours", n=500, writes_per_jobset=10.0),
    ]
    rows = ratio_rows(results)
    assert len(rows) == 2 * len(FIGURES)
    writes = [r for r in rows if r["figure"] == "writes per JobSet"]
    assert [(r["n"], r["values"], r["ratios"]) for r in writes] == [
        (
            100,
            {"upstream": 20.0, "ours": 10.0, "ours-qps500": 12.0},
            {"ours": 0.5, "ours-qps500": 0.6},
        ),
        (500, {"upstream": 40.0, "ours": 10.0}, {"ours": 0.25}),
    ]
    failed = next(r for r in rows if r["figure"] == "failed writes (all)" and r["n"] == 100)
    assert failed["ratios"] == {"ours": 0.0, "ours-qps500": 0.0}


def test_a_dict_figure_counts_as_its_sum() -> None:
    rows = ratio_rows(
        [
            _run("upstream", steady_state_writes={"update jobsets/status": 2, "create events": 2}),
            _run("ours", steady_state_writes={"update jobsets/status": 1}),
        ]
    )
    steady = next(r for r in rows if r["figure"] == "steady-state writes")
    assert steady["values"] == {"upstream": 4.0, "ours": 1.0}
    assert steady["ratios"] == {"ours": 0.25}


def test_markdown_table_one_block_per_variant_and_size_and_zero_over_zero_is_shown_as_equal() -> (
    None
):
    table = markdown_table(
        [
            _run("upstream", variant="b", steady_state_writes=0, controller_peak_rss_mib=96.5),
            _run("ours", variant="b", steady_state_writes=0, controller_peak_rss_mib=48.25),
            _run("upstream", variant="a", steady_state_writes=3),
            _run("ours", variant="a", steady_state_writes=0),
        ]
    )
    lines = table.splitlines()
    headings = [line for line in lines if line.startswith("Variant")]
    assert headings == [
        "Variant a (no volumes), N=100",
        "Variant b (one shared claim (volumeClaimPolicies)), N=100",
    ]
    steady = [line for line in lines if line.startswith("| steady-state writes |")]
    assert steady == [
        "| steady-state writes | 3 | 0 | 0.00 |",
        "| steady-state writes | 0 | 0 | = (0) |",
    ]
    assert "| controller peak RSS MiB | 96.5 | 48.2 | 0.50 |" in lines
    assert "| figure | upstream | ours | ours / upstream |" in lines


def test_repeated_runs_are_compared_within_their_repetition_and_get_one_block_each() -> None:
    results = [
        _run("upstream", all_completed_seconds=100.0),
        _run("ours", all_completed_seconds=104.0),
        _run("ours", all_completed_seconds=90.0, repeat=1),
        _run("upstream", all_completed_seconds=100.0, repeat=1),
        _run("upstream", all_completed_seconds=80.0, repeat=2),
        _run("ours", all_completed_seconds=80.0, repeat=2),
    ]
    completed = [r for r in ratio_rows(results) if r["figure"] == "s until all Completed"]
    assert [(r["repeat"], r["ratios"]["ours"]) for r in completed] == [
        (0, 1.04),
        (1, 0.9),
        (2, 1.0),
    ]
    headings = [line for line in markdown_table(results).splitlines() if line.startswith("Var")]
    assert headings == [f"Variant a (no volumes), N=100, run {k}" for k in (1, 2, 3)]
    spread = spread_table(results).splitlines()
    assert "| s until all Completed | a, 100 | 1.04, 0.90, 1.00 | 1.00 |" in spread
    assert "| writes per JobSet | a, 100 | 1.00, 1.00, 1.00 | 1.00 |" in spread


def test_the_spread_table_is_empty_without_repetitions_and_skips_undefined_ratios() -> None:
    assert spread_table([_run("upstream"), _run("ours")]) == ""
    results = [
        _run("upstream", failed_writes=0),
        _run("ours", failed_writes=0),
        _run("upstream", failed_writes=4, repeat=1),
        _run("ours", failed_writes=0, repeat=1),
    ]
    assert "| failed writes (all) | a, 100 | -, 0.00 | 0.00 |" in spread_table(results)


def test_a_figure_missing_from_older_runs_is_shown_as_a_dash() -> None:
    old_upstream = _run("upstream")
    del old_upstream["median_completed_seconds"]
    rows = ratio_rows([old_upstream, _run("ours", median_completed_seconds=30.0)])
    median = next(r for r in rows if r["figure"] == "s to Completed, median JobSet")
    assert median["values"] == {"ours": 30.0}
    assert median["ratios"] == {}
    table = markdown_table([old_upstream, _run("ours", median_completed_seconds=30.0)])
    assert "| s to Completed, median JobSet | - | 30 | - |" in table.splitlines()


def test_without_an_upstream_row_no_ratio_is_computed() -> None:
    rows = ratio_rows([_run("ours"), _run("ours-qps500")])
    assert all(r["ratios"] == {} for r in rows)
    assert "| writes per JobSet | 1 |" in markdown_table([_run("ours")])
    both = markdown_table([_run("ours"), _run("ours-qps500")]).splitlines()
    assert "| figure | ours | ours-qps500 | ours / upstream | ours-qps500 / upstream |" in both
    assert "| writes per JobSet | 1 | 1 | - | - |" in both


def test_request_deltas_are_per_jobset_and_only_the_workloads_resources() -> None:
    before = {("LIST", "jobs"): 10.0, ("WATCH", "pods"): 5.0}
    after = {
        ("LIST", "jobs"): 210.0,
        ("WATCH", "pods"): 5.0,  # no change: left out
        ("POST", "jobs"): 400.0,
        ("PUT", "jobsets/status"): 300.0,
        ("GET", "leases"): 999.0,  # not the workload's: left out
    }
    assert request_deltas(before, after, 100) == {
        "LIST jobs": 2.0,
        "POST jobs": 4.0,
        "PUT jobsets/status": 3.0,
    }


def _entry(user_agent: str, verb: str, resource: str, code: int, at: str, **ref: str) -> str:
    return json.dumps(
        {
            "stage": "ResponseComplete",
            "verb": verb,
            "userAgent": user_agent,
            "objectRef": {"resource": resource, **ref},
            "responseStatus": {"code": code},
            "stageTimestamp": at,
        }
    )


def test_failed_writes_are_counted_by_user_agent_key_and_code(tmp_path: Path) -> None:
    upstream_ua = "jobset/v0.12.0 (linux/amd64) f22e565"
    ours_ua = "stateful-jobset/abc"
    log = tmp_path / "audit.log"
    lines = [
        _entry(upstream_ua, "update", "jobsets", 409, "2026-01-01T00:00:01Z", subresource="status"),
        _entry(upstream_ua, "update", "jobsets", 409, "2026-01-01T00:00:02Z", subresource="status"),
        _entry(upstream_ua, "create", "jobs", 409, "2026-01-01T00:00:03Z"),
        _entry(upstream_ua, "create", "jobs", 201, "2026-01-01T00:00:03Z"),
        _entry(upstream_ua, "create", "events", 201, "2026-01-01T00:00:09Z"),
        _entry(ours_ua, "update", "jobsets", 409, "2026-01-01T00:00:04Z", subresource="status"),
        json.dumps({"stage": "ResponseStarted", "verb": "create", "userAgent": upstream_ua}),
    ]
    log.write_text("\n".join(lines) + "\n")
    assert audit.count_failed_writes(log, "jobset") == {
        "update jobsets/status 409": 2,
        "create jobs 409": 1,
    }
    # "jobset" does not match "stateful-jobset/": only the prefix before the first "/" counts.
    assert audit.count_failed_writes(log, "stateful-jobset") == {"update jobsets/status 409": 1}
    before_two = audit.count_failed_writes(
        log, "jobset", lambda e: str(e["stageTimestamp"]) < "2026-01-01T00:00:02Z"
    )
    assert before_two == {"update jobsets/status 409": 1}
    # Every write, refused or not, is a write the API server received.
    assert audit.count_writes(log, "jobset") == {
        "update jobsets/status": 2,
        "create jobs": 2,
        "create events": 1,
    }


def test_the_workload_spells_out_what_upstreams_defaulting_webhook_would_set() -> None:
    plain = compare_jobset("js-0001", shared_claim=False)
    spec = plain["spec"]
    assert spec["successPolicy"] == {"operator": "All"}
    assert spec["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    assert spec["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    assert "volumeClaimPolicies" not in spec
    assert [(r["name"], r["replicas"]) for r in spec["replicatedJobs"]] == [
        ("leader", 2),
        ("workers", 2),
    ]
    for rjob in spec["replicatedJobs"]:
        job = rjob["template"]["spec"]
        assert job["completionMode"] == "Indexed"
        assert job["template"]["spec"]["restartPolicy"] == "Never"
        assert "volumeMounts" not in job["template"]["spec"]["containers"][0]

    shared = compare_jobset("js-0002", shared_claim=True)["spec"]
    (policy,) = shared["volumeClaimPolicies"]
    assert [t["metadata"]["name"] for t in policy["templates"]] == ["shared"]
    assert policy["retentionPolicy"] == {"whenDeleted": "Delete"}
    assert "scope" not in policy  # upstream's spelling: no extension field
    for rjob in shared["replicatedJobs"]:
        mounts = rjob["template"]["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
        assert mounts == [{"name": "shared", "mountPath": "/shared"}]


_KCM_METRICS = """\
# HELP workqueue_adds_total [ALPHA] Total number of adds handled by workqueue
# TYPE workqueue_adds_total counter
workqueue_adds_total{name="endpoint"} 120
workqueue_adds_total{name="job"} 40
workqueue_adds_total{name="idle"} 3
# HELP workqueue_retries_total [ALPHA] Total number of retries handled by workqueue
# TYPE workqueue_retries_total counter
workqueue_retries_total{name="endpoint"} 30
# HELP workqueue_work_duration_seconds [ALPHA] How long processing an item takes.
# TYPE workqueue_work_duration_seconds histogram
workqueue_work_duration_seconds_bucket{name="endpoint",le="+Inf"} 150
workqueue_work_duration_seconds_sum{name="endpoint"} 4.5
workqueue_work_duration_seconds_count{name="endpoint"} 150
# HELP rest_client_requests_total Number of HTTP requests
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",method="GET"} 99
"""


def test_queue_work_reads_adds_retries_and_work_seconds_per_queue_and_nothing_else() -> None:
    assert parse_queue_work(_KCM_METRICS) == {
        "endpoint": {"adds": 120.0, "retries": 30.0, "work_seconds": 4.5},
        "job": {"adds": 40.0},
        "idle": {"adds": 3.0},
    }


def test_queue_work_delta_is_per_jobset_and_leaves_out_queues_that_did_nothing() -> None:
    before = {"endpoint": {"adds": 20.0, "work_seconds": 0.5}, "idle": {"adds": 3.0}}
    after = parse_queue_work(_KCM_METRICS)
    assert queue_work_delta(before, after, n=10) == {
        "endpoint": {"adds": 10.0, "retries": 3.0, "work_seconds": 0.4},
        "job": {"adds": 4.0},
    }


def _jobset(name: str, version: int, **status: Any) -> Obj:
    return {"metadata": {"name": name, "namespace": "b", "resourceVersion": str(version)},
            "spec": {"replicatedJobs": []}, "status": status}  # fmt: skip


COMPLETED = [{"type": "Completed", "status": "True"}]


def _times(progress: Progress) -> tuple[float | None, float | None]:
    return progress.children_at, progress.completed_at


def test_progress_times_the_moment_each_count_is_reached_once() -> None:
    now = [0.0]
    seen = Progress(jobs_wanted=2, jobsets_wanted=2, done=completed, clock=lambda: now[0])
    job = {"metadata": {"name": "js-0-w-0"}}
    now[0] = 1.0
    seen.on_job(job)
    seen.on_job(job)  # seen twice (a relist): still one Job
    assert seen.children_at is None and not seen.all_jobs.is_set()
    now[0] = 2.0
    seen.on_job({"metadata": {"name": "js-0-w-1"}})
    assert seen.children_at == 2.0 and seen.all_jobs.is_set()
    now[0] = 3.0
    seen.on_jobset(_jobset("js-0", 1))  # not done yet
    seen.on_jobset(_jobset("js-0", 2, conditions=COMPLETED))
    seen.on_jobset(_jobset("js-0", 3, conditions=COMPLETED))  # its next write: one JobSet
    assert seen.completed_at is None and seen.jobsets_done == {"js-0"}
    now[0] = 4.0
    seen.on_jobset(_jobset("js-1", 1, conditions=COMPLETED))
    now[0] = 5.0
    seen.on_job({"metadata": {"name": "js-1-w-0"}})
    seen.on_jobset(_jobset("js-2", 1, conditions=COMPLETED))
    assert _times(seen) == (2.0, 4.0)  # the first time, kept


def test_done_means_completed_for_the_comparison_and_any_terminal_state_for_scale() -> None:
    failed = _jobset("f", 1, terminalState="Failed",
                     conditions=[{"type": "Failed", "status": "True"}])  # fmt: skip
    done = _jobset("c", 1, terminalState="Completed", conditions=COMPLETED)
    running = _jobset("r", 1, conditions=[{"type": "Completed", "status": "False"}])
    assert [completed(j) for j in (failed, done, running)] == [False, True, False]
    assert [finished(j) for j in (failed, done, running)] == [True, True, False]


def test_the_watched_objects_keep_only_identity_version_and_status() -> None:
    job = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "j", "namespace": "b", "resourceVersion": "7",
                        "managedFields": [{"manager": "x"}], "labels": {"a": "b"}},
           "spec": {"template": {}}, "status": {"active": 1}}  # fmt: skip
    assert reduced(job) == {
        "metadata": {"name": "j", "namespace": "b", "resourceVersion": "7"},
        "status": {"active": 1},
    }
