"""Desired Jobs and Service: names, labels, annotations, hostnames, coordinator, indexes."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from controller.jobset import api, construct
from controller.jobset.model import parse


def job_objects(js: Any) -> list[dict[str, Any]]:
    """The objects of the JobSet's desired Jobs (``construct.desired_jobs``)."""
    return [job.object for job in construct.desired_jobs(js)]


def jobset(**spec: Any) -> Any:
    base: dict[str, Any] = {
        "replicatedJobs": [
            {"name": "driver", "replicas": 1, "template": _template()},
            {"name": "workers", "replicas": 3, "template": _template(completions=2)},
        ]
    }
    base.update(spec)
    return parse(
        {
            "apiVersion": api.API_VERSION,
            "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "ml", "uid": "uid-1", "generation": 1},
            "spec": base,
            "status": {"restarts": 2},
        }
    )


def _template(completions: int | None = None, **pod: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "template": {"spec": {"containers": [{"name": "c", "image": "i"}], **pod}}
    }
    if completions:
        spec["completions"] = completions
        spec["parallelism"] = completions
    return {"metadata": {"labels": {"team": "ml"}}, "spec": spec}


def _job(js: Any, rjob: str, index: int) -> dict[str, Any]:
    return next(j for j in job_objects(js) if j["metadata"]["name"] == f"train-{rjob}-{index}")


def test_one_job_per_replica_with_upstream_names() -> None:
    names = [j["metadata"]["name"] for j in job_objects(jobset())]
    assert names == ["train-driver-0", "train-workers-0", "train-workers-1", "train-workers-2"]


@pytest.mark.parametrize(
    ("rjob", "index", "expected"),
    [
        ("driver", 0, {"job-index": "0", "job-global-index": "0", "replicatedjob-replicas": "1"}),
        ("workers", 0, {"job-index": "0", "job-global-index": "1", "replicatedjob-replicas": "3"}),
        ("workers", 2, {"job-index": "2", "job-global-index": "3", "replicatedjob-replicas": "3"}),
    ],
    ids=["first", "second-rjob-offset", "last"],
)
def test_indexes_and_counts(rjob: str, index: int, expected: dict[str, str]) -> None:
    job = _job(jobset(), rjob, index)
    labels = job["metadata"]["labels"]
    for key, value in expected.items():
        assert labels[f"jobset.sigs.k8s.io/{key}"] == value
    assert labels[api.GLOBAL_REPLICAS] == "4"
    assert labels[api.JOBSET_NAME] == "train"
    assert labels[api.JOBSET_UID] == "uid-1"
    assert labels[api.REPLICATED_JOB_NAME] == rjob
    assert labels[api.RESTART_ATTEMPT] == "2"
    assert labels[api.JOB_KEY] == hashlib.sha1(f"ml/train-{rjob}-{index}".encode()).hexdigest()
    assert labels["team"] == "ml"  # the template's own labels are kept


def test_labels_are_also_annotations_and_on_the_pod_template() -> None:
    job = _job(jobset(), "workers", 1)
    ours = {
        k: v for k, v in job["metadata"]["labels"].items() if k.startswith("jobset.sigs.k8s.io/")
    }
    pod_meta = job["spec"]["template"]["metadata"]
    for source in (job["metadata"]["annotations"], pod_meta["labels"], pod_meta["annotations"]):
        assert {k: source[k] for k in ours} == ours


def test_groups() -> None:
    js = jobset(
        replicatedJobs=[
            {"name": "a", "replicas": 2, "groupName": "g1", "template": _template()},
            {"name": "b", "replicas": 3, "template": _template()},
            {"name": "c", "replicas": 1, "groupName": "g1", "template": _template()},
        ]
    )
    c0 = _job(js, "c", 0)["metadata"]["labels"]
    assert c0[api.GROUP_NAME] == "g1"
    assert c0[api.GROUP_REPLICAS] == "3"
    assert c0[api.JOB_GROUP_INDEX] == "2"
    b1 = _job(js, "b", 1)["metadata"]["labels"]
    assert (b1[api.GROUP_NAME], b1[api.GROUP_REPLICAS], b1[api.JOB_GROUP_INDEX]) == (
        "default",
        "3",
        "1",
    )


def test_dns_hostnames_set_the_subdomain_and_the_service() -> None:
    js = jobset()
    assert _job(js, "driver", 0)["spec"]["template"]["spec"]["subdomain"] == "train"
    service = construct.desired_service(js)
    assert service is not None
    assert service["metadata"]["name"] == "train"
    assert service["spec"] == {
        "clusterIP": "None",
        "selector": {api.JOBSET_NAME: "train"},
        "publishNotReadyAddresses": True,
    }
    assert service["metadata"]["ownerReferences"][0]["uid"] == "uid-1"


def test_custom_subdomain_and_dns_off() -> None:
    custom = jobset(network={"subdomain": "net", "publishNotReadyAddresses": False})
    assert _job(custom, "driver", 0)["spec"]["template"]["spec"]["subdomain"] == "net"
    service = construct.desired_service(custom)
    assert service is not None and service["metadata"]["name"] == "net"
    assert service["spec"]["publishNotReadyAddresses"] is False
    off = jobset(network={"enableDNSHostnames": False})
    assert "subdomain" not in _job(off, "driver", 0)["spec"]["template"]["spec"]
    assert construct.desired_service(off) is None


def test_coordinator_endpoint_on_every_job_and_pod() -> None:
    js = jobset(coordinator={"replicatedJob": "workers", "jobIndex": 1, "podIndex": 0})
    for job in job_objects(js):
        assert job["metadata"]["annotations"][api.COORDINATOR] == "train-workers-1-0.train"
        assert (
            job["spec"]["template"]["metadata"]["labels"][api.COORDINATOR]
            == "train-workers-1-0.train"
        )


def test_upstream_defaults_and_ownership() -> None:
    job = _job(jobset(), "driver", 0)
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert job["spec"]["suspend"] is False
    owner = job["metadata"]["ownerReferences"][0]
    assert owner == {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "name": "train",
        "uid": "uid-1",
        "controller": True,
        "blockOwnerDeletion": True,
    }


def test_suspended_jobset_creates_suspended_jobs() -> None:
    assert all(j["spec"]["suspend"] is True for j in job_objects(jobset(suspend=True)))


def test_construction_never_mutates_the_parsed_template() -> None:
    js = jobset()
    before = repr(js.replicated_jobs[1].template)
    job_objects(js)
    job_objects(js)
    assert repr(js.replicated_jobs[1].template) == before


def test_capitalised_replicated_job_names_give_valid_job_names() -> None:
    js = jobset(
        replicatedJobs=[{"name": "A", "replicas": 2, "template": _template()}],
        coordinator={"replicatedJob": "A", "jobIndex": 1},
    )
    jobs = job_objects(js)
    assert [j["metadata"]["name"] for j in jobs] == ["train-a-0", "train-a-1"]
    assert jobs[0]["metadata"]["labels"][api.REPLICATED_JOB_NAME] == "A"
    assert jobs[0]["metadata"]["labels"][api.COORDINATOR] == "train-a-1-0.train"


def test_empty_metadata_in_templates_gets_our_labels() -> None:
    # `metadata:` with nothing after it is YAML for null: a user's file (render) can carry it.
    template = _template()
    template["metadata"] = None
    template["spec"]["template"]["metadata"] = None
    js = parse(
        {
            "apiVersion": api.API_VERSION,
            "kind": "JobSet",
            "metadata": {"name": "train", "namespace": "ml", "uid": "uid-1", "generation": 1},
            "spec": {"replicatedJobs": [{"name": "driver", "template": template}]},
        }
    )
    (job,) = job_objects(js)
    pod_meta = job["spec"]["template"]["metadata"]
    assert pod_meta["labels"][api.JOBSET_NAME] == "train"
    assert pod_meta["annotations"][api.JOB_INDEX] == "0"
    assert job["metadata"]["labels"][api.JOBSET_NAME] == "train"


def test_a_desired_job_carries_its_replicated_job_and_index() -> None:
    """Made for a replicated job and an index, not read back from its own labels."""
    for job in construct.desired_jobs(jobset()):
        labels = job.object["metadata"]["labels"]
        assert (job.replicated_job, job.index) == (
            labels[api.REPLICATED_JOB_NAME],
            int(labels[api.JOB_INDEX]),
        )
        assert job.name == job.object["metadata"]["name"]


def test_no_pod_webhook_no_priority_label_and_exclusive_terms_on_every_pod() -> None:
    """Upstream's pod webhook labels each JobSet pod with its priority
    (``jobset.sigs.k8s.io/priority``) and puts exclusive placement's terms on each Job's first pod
    only, the anti-affinity limited to that priority. Here the Job's pod template, so every pod of
    the Job, carries both terms, and nothing carries the priority."""
    template = _template(completions=2, priorityClassName="high")
    template["metadata"]["annotations"] = {"alpha.jobset.sigs.k8s.io/exclusive-topology": "rack"}
    js = jobset(replicatedJobs=[{"name": "workers", "replicas": 2, "template": template}])
    for job in job_objects(js):
        pod = job["spec"]["template"]
        assert "jobset.sigs.k8s.io/priority" not in job["metadata"]["labels"]
        assert "jobset.sigs.k8s.io/priority" not in pod["metadata"]["labels"]
        affinity = pod["spec"]["affinity"]
        (together,) = affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        (apart,) = affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert together["topologyKey"] == apart["topologyKey"] == "rack"
        keys = {e["key"] for e in apart["labelSelector"]["matchExpressions"]}
        assert keys == {api.JOB_KEY}
