"""Exclusive placement against a real API server: the Jobs the controller creates carry the
scheduling constraints (the API server validates them on create), and bad keys are refused.

Where the pods then land is proven with kube-scheduler in tests/e2e/test_exclusive_placement.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller.jobset import api, placement
from controller.jobset.placement import EXCLUSIVE_TOPOLOGY, NODE_SELECTOR_STRATEGY
from controller.runtime.client import EVENTS, KubeClient
from tests.helpers import wait_for
from tests.support.jobsets import (
    condition,
    jobs_of,
    jobset,
    replicated_job,
    wait_condition,
    wait_jobs,
)

RACK = "example.com/rack"
POOL = "example.com/pool"

pytestmark = pytest.mark.usefixtures("controller")


def _annotated(body: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    body["metadata"]["annotations"] = dict(annotations)
    return body


def _template_annotated(rjob: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    rjob["template"]["metadata"] = {"annotations": dict(annotations)}
    return rjob


def _required(job: dict[str, Any], section: str) -> list[Any]:
    affinity = job["spec"]["template"]["spec"]["affinity"]
    terms: list[Any] = affinity[section]["requiredDuringSchedulingIgnoredDuringExecution"]
    return terms


async def test_jobset_annotation_gives_every_job_its_own_exclusive_affinity(
    client: KubeClient, namespace: str
) -> None:
    body = _annotated(
        jobset("excl", replicated_job("leader", 1), replicated_job("workers", 2, completions=2)),
        {EXCLUSIVE_TOPOLOGY: RACK},
    )
    await client.create(api.JOBSETS, body, namespace)
    jobs = await wait_jobs(client, namespace, "excl", 3)
    keys = set()
    for job in jobs:
        key = job["metadata"]["labels"][api.JOB_KEY]
        keys.add(key)
        together, apart = placement.affinity_terms(RACK, key)
        assert _required(job, "podAffinity") == [together]
        assert _required(job, "podAntiAffinity") == [apart]
        # The pods carry the key the terms select on, and upstream's annotation.
        pod_meta = job["spec"]["template"]["metadata"]
        assert pod_meta["labels"][api.JOB_KEY] == key
        assert pod_meta["annotations"][EXCLUSIVE_TOPOLOGY] == RACK
        assert job["metadata"]["annotations"][EXCLUSIVE_TOPOLOGY] == RACK
    assert len(keys) == 3  # one domain-owning key per Job


async def test_template_annotations_override_and_node_selector_strategy(
    client: KubeClient, namespace: str
) -> None:
    workers = _template_annotated(
        replicated_job("workers", 2, completions=2),
        {EXCLUSIVE_TOPOLOGY: POOL, NODE_SELECTOR_STRATEGY: "true"},
    )
    body = _annotated(
        jobset("mixed", replicated_job("leader", 1), workers), {EXCLUSIVE_TOPOLOGY: RACK}
    )
    await client.create(api.JOBSETS, body, namespace)
    jobs = {j["metadata"]["name"]: j for j in await wait_jobs(client, namespace, "mixed", 3)}
    leader = jobs["mixed-leader-0"]
    assert _required(leader, "podAffinity")[0]["topologyKey"] == RACK
    for index in (0, 1):
        job = jobs[f"mixed-workers-{index}"]
        pod_spec = job["spec"]["template"]["spec"]
        assert pod_spec["nodeSelector"] == {
            placement.NAMESPACED_JOB: f"{namespace}_mixed-workers-{index}"
        }
        assert {
            "key": placement.NO_SCHEDULE_TAINT,
            "operator": "Exists",
            "effect": "NoSchedule",
        } in pod_spec["tolerations"]
        assert "affinity" not in pod_spec
        assert job["spec"]["template"]["metadata"]["annotations"][EXCLUSIVE_TOPOLOGY] == POOL


async def _spec_invalid_events(client: KubeClient, namespace: str, name: str) -> list[Any]:
    listed = (await client.list(EVENTS, namespace))["items"]
    return [
        e
        for e in listed
        if (e.get("involvedObject") or e.get("regarding") or {}).get("name") == name
        and e.get("reason") == api.REASON_SPEC_INVALID
    ]


async def test_bad_jobset_topology_key_is_refused_until_fixed(
    client: KubeClient, namespace: str
) -> None:
    """CEL cannot read the root's metadata: the controller reports it (condition + Event) and
    creates nothing; fixing the annotation (no new generation) lets the JobSet proceed."""
    body = _annotated(jobset("badkey", replicated_job("a", 2)), {EXCLUSIVE_TOPOLOGY: ""})
    await client.create(api.JOBSETS, body, namespace)
    invalid = await wait_condition(client, namespace, "badkey", api.SPEC_INVALID)
    expected = (
        f"metadata.annotations[{EXCLUSIVE_TOPOLOGY}] {placement.TOPOLOGY_KEY_RULE}: '': the name "
        "part is empty"
    )
    assert condition(invalid, api.SPEC_INVALID)["message"] == expected  # type: ignore[index]
    events = await wait_for(
        lambda: _spec_invalid_events(client, namespace, "badkey"), bool, "the SpecInvalid Event"
    )
    assert [(e["type"], e.get("message") or e.get("note")) for e in events] == [
        ("Warning", expected)
    ]
    assert await jobs_of(client, namespace, "badkey") == []

    patch = {"metadata": {"annotations": {EXCLUSIVE_TOPOLOGY: RACK}}}
    await client.patch(api.JOBSETS, "badkey", patch, namespace)
    jobs = await wait_jobs(client, namespace, "badkey", 2)
    assert all(_required(j, "podAffinity")[0]["topologyKey"] == RACK for j in jobs)
    await wait_condition(client, namespace, "badkey", api.SPEC_INVALID, status="False")


async def test_template_key_that_passes_cel_but_is_no_label_key_is_refused(
    client: KubeClient, namespace: str
) -> None:
    """The CRD checks only the length (a syntax check exceeds the CEL budget); the controller
    refuses the rest with the replicated job's path."""
    rjob = _template_annotated(replicated_job("a", 1), {EXCLUSIVE_TOPOLOGY: "a/b/c"})
    await client.create(api.JOBSETS, jobset("slashes", rjob), namespace)
    invalid = await wait_condition(client, namespace, "slashes", api.SPEC_INVALID)
    assert condition(invalid, api.SPEC_INVALID)["message"] == (  # type: ignore[index]
        f"spec.replicatedJobs[0].template.metadata.annotations[{EXCLUSIVE_TOPOLOGY}] "
        f"{placement.TOPOLOGY_KEY_RULE}: 'a/b/c' has more than one '/'"
    )
    assert await jobs_of(client, namespace, "slashes") == []
