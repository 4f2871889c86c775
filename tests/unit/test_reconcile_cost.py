"""One reconcile must not block the event loop, whatever a tenant writes within admission's rules.

A JobSet may have 10,000 child Jobs and a pod template of tens of kilobytes (here 1,000
environment variables, 74 KB). Planning used to deep-copy the template once per child Job on every
reconcile, also when every Job existed: 2,000 such Jobs cost ~9 s of event-loop time per pass.
"""

from __future__ import annotations

import datetime
import time
from typing import Any

from controller.jobset import api, construct, volumes
from controller.jobset.decide import decide
from tests.unit.jobset_factories import make_jobset, rjob

NOW = datetime.datetime(2025, 1, 1, tzinfo=datetime.UTC)
REPLICAS = 2000
BUDGET = 1.0  # seconds; the copying version took 4-5 s per 1,000 Jobs here


def _big_pod(**extra: Any) -> dict[str, Any]:
    env = [{"name": f"VAR_{i}", "value": "x" * 40} for i in range(1000)]
    return {"containers": [{"name": "main", "image": "busybox", "env": env, **extra}]}


def _timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - started


def test_creating_many_jobs_from_a_large_template() -> None:
    js = make_jobset(replicated_jobs=[rjob("workers", REPLICAS, pod_spec=_big_pod())])
    plan, took = _timed(decide, js, [], None, NOW)
    assert took < BUDGET
    assert len(plan.create_jobs) == REPLICAS
    first, second = plan.create_jobs[0], plan.create_jobs[1]
    pod = first["spec"]["template"]
    assert pod["metadata"]["labels"][api.JOB_INDEX] == "0"
    assert second["spec"]["template"]["metadata"]["labels"][api.JOB_INDEX] == "1"
    assert pod["spec"]["subdomain"] == js.subdomain
    assert pod["spec"]["containers"] == _big_pod()["containers"]
    # The template itself is untouched: no Job's labels leaked into it.
    template_pod = js.replicated_jobs[0].template["spec"]["template"]
    assert api.JOB_INDEX not in (template_pod.get("metadata") or {}).get("labels", {})
    assert "subdomain" not in template_pod["spec"]


def test_steady_state_builds_no_job() -> None:
    js = make_jobset(replicated_jobs=[rjob("workers", REPLICAS, pod_spec=_big_pod())])
    existing = decide(js, [], None, NOW).create_jobs
    plan, took = _timed(decide, js, existing, None, NOW)
    assert plan.create_jobs == []
    assert took < BUDGET


def test_mounting_claims_into_many_jobs_from_a_large_template() -> None:
    mounts = [{"name": "data", "mountPath": "/data"}]
    js = make_jobset(
        replicated_jobs=[rjob("workers", REPLICAS, pod_spec=_big_pod(volumeMounts=mounts))],
        spec={
            "volumeClaimPolicies": [
                {
                    "templates": [
                        {
                            "metadata": {"name": "data"},
                            "spec": {
                                "accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": "1Gi"}},
                            },
                        }
                    ]
                }
            ]
        },
    )
    policies = volumes.policies(js)
    rj = js.replicated_jobs[0]

    def build_and_mount() -> list[Any]:
        return [
            volumes.mount(construct.desired_job(js, rj, i), js, policies, rj.name, i)
            for i in range(REPLICAS)
        ]

    jobs, took = _timed(build_and_mount)
    assert took < BUDGET
    pod_volumes = jobs[7]["spec"]["template"]["spec"]["volumes"]
    assert [v["name"] for v in pod_volumes] == ["data"]
    assert "volumes" not in rj.template["spec"]["template"]["spec"]


def _job_scope(replicas: int, templates: int, **claim_spec: Any) -> Any:
    names = [f"d{i}" for i in range(templates)]
    mounts = [{"name": n, "mountPath": f"/{n}"} for n in names]
    pod = {"containers": [{"name": "main", "image": "busybox", "volumeMounts": mounts}]}
    return make_jobset(
        replicated_jobs=[rjob("workers", replicas, pod_spec=pod)],
        spec={
            "volumeClaimPolicies": [
                {
                    "scope": "Job",
                    "templates": [
                        {
                            "metadata": {"name": n},
                            "spec": {
                                "accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": "1Gi"}},
                                **claim_spec,
                            },
                        }
                        for n in names
                    ],
                }
            ]
        },
    )


def test_claims_per_jobset_are_bounded() -> None:
    """16 Job-scope templates on 10,000 Jobs (160,000 claims; admission allows both numbers) took
    over a minute per reconcile. The parser refuses more claims than child Jobs allowed."""
    import pytest

    from controller.jobset.model import InvalidJobSet

    largest = _job_scope(api.MAX_CHILD_JOBS, 1)
    assert volumes.claim_count(largest, volumes.policies(largest)) == volumes.MAX_CLAIMS
    too_many = _job_scope(api.MAX_CHILD_JOBS, 16)
    started = time.perf_counter()
    with pytest.raises(InvalidJobSet, match="160000 claims; at most 10000"):
        volumes.policies(too_many)
    assert time.perf_counter() - started < 0.5
    with pytest.raises(InvalidJobSet, match="claims"):
        decide(_job_scope(5001, 2), [], None, NOW)


def test_desired_claims_build_objects_only_when_asked() -> None:
    expressions = [{"key": f"k{i}", "operator": "In", "values": ["a", "b"]} for i in range(10)]
    js = _job_scope(1000, 10, selector={"matchExpressions": expressions})
    policies = volumes.policies(js)
    desired, took = _timed(volumes.desired_claims, js, policies)
    assert len(desired) == 10_000
    assert took < 0.5  # each claim object deep-copied: 2 s here, and a reconcile lists them 5 times
    claim = desired[3]
    assert claim.object["metadata"]["name"] == claim.name
    assert claim.object is claim.object


def _many_policies(replicas: int) -> Any:
    """50 JobSet-scope policies of 16 templates, 32 replicated jobs whose pods have 16 containers
    of 64 volumeMounts, each container mounting a different share of the 800 templates: every
    number at admission's bound."""
    names = [f"t{p}-{i}" for p in range(50) for i in range(16)]

    def pod(r: int) -> dict[str, Any]:
        containers = []
        for c in range(16):
            mounts = [
                {"name": names[(r * 1024 + c * 64 + m) % len(names)], "mountPath": f"/{c}/{m}"}
                for m in range(64)
            ]
            containers.append({"name": f"c{c}", "image": "busybox", "volumeMounts": mounts})
        return {"containers": containers}

    policies = [
        {
            "templates": [
                {
                    "metadata": {"name": f"t{p}-{i}"},
                    "spec": {"resources": {"requests": {"storage": "1Gi"}}},
                }
                for i in range(16)
            ]
        }
        for p in range(50)
    ]
    return make_jobset(
        replicated_jobs=[rjob(f"r{r}", replicas, pod_spec=pod(r)) for r in range(32)],
        spec={"volumeClaimPolicies": policies},
    )


def test_many_policies_and_mounts_validate_quickly() -> None:
    """Each template's users were found by re-reading every container's mounts: 11.6 s."""
    js = _many_policies(1)
    policies, took = _timed(volumes.policies, js)
    assert len(policies) == 50
    assert took < BUDGET


def test_planning_jobs_whose_shared_claims_are_pending() -> None:
    """Each child Job worked out its 800 shared claims and every policy's targets anew: 3,200
    Jobs took ~9 s per reconcile while the claims were being provisioned."""
    js = _many_policies(100)
    policies = volumes.policies(js)
    plan, took = _timed(decide, js, [], None, NOW, policies=policies)
    assert took < BUDGET
    assert plan.create_jobs == []  # they wait for their claims
    assert plan.volume is not None
    assert len(plan.volume.create) == 800


def test_mounting_hundreds_of_claims_is_linear() -> None:
    """The pod's volumes were searched once per claim: quadratic in the claims a pod mounts."""
    js = _many_policies(1)
    policies = volumes.policies(js)
    rj = js.replicated_jobs[0]
    wanted = volumes.claims_for_job(js, policies, rj.name, 0)
    assert len(wanted) == 800
    job = construct.desired_job(js, rj, 0)

    def mount_many() -> Any:
        return [volumes.mount(job, js, policies, rj.name, 0) for _ in range(100)]

    mounted, took = _timed(mount_many)
    assert took < BUDGET
    names = [v["name"] for v in mounted[0]["spec"]["template"]["spec"]["volumes"]]
    assert names == list(wanted)
    assert volumes.mount(mounted[0], js, policies, rj.name, 0) == mounted[0]
