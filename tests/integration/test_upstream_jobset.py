"""Upstream JobSet's manager (the Go module proxy's release, ``localcluster/upstream.py``) on the
local control plane, run by ``localcluster/upstreamjobset.py``: the starting point of migrating
JobSets from upstream to this controller.

Its build is never skipped (CI=true or not): a manager that cannot be built or started fails
the test with the reason (``make upstream-jobset`` builds it ahead, with progress). The cluster is
one of its own (etcd and kube-apiserver): upstream's CRD replaces the JobSet CRD, and its manager
reconciles the JobSets of every namespace, so no other test may share it. Upstream creates its
Jobs and claims itself; nothing runs them.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import config

from controller.jobset import api
from controller.runtime.client import CLAIMS, JOBS, NAMESPACES, KubeClient
from localcluster import upstream, upstreamjobset
from localcluster.build import BuildError
from localcluster.cluster import LocalCluster
from localcluster.processes import LaunchError
from tests.helpers import wait_for

Obj = dict[str, Any]

NAMESPACE = "migrating"
CLAIM = "data"


@pytest.fixture(scope="module")
def upstream_build() -> upstream.UpstreamBuild:
    try:
        return upstream.ensure_upstream()
    except BuildError as err:
        pytest.fail(f"upstream JobSet's manager could not be built: {err}", pytrace=False)


@pytest.fixture(scope="module")
def upstream_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("upstream-cluster"), profile="apiserver")
    try:
        cluster.start()
    except (BuildError, LaunchError) as err:
        pytest.fail(f"the local control plane could not start: {err}", pytrace=False)
    yield cluster
    cluster.stop()


@pytest.fixture
async def client(upstream_cluster: LocalCluster) -> AsyncIterator[KubeClient]:
    api_client = await config.new_client_from_config(config_file=str(upstream_cluster.kubeconfig))
    async with api_client:
        yield KubeClient(api_client)


def claimed_jobset(name: str) -> Obj:
    """Two replicated jobs of one Job each, a JobSet-scope claim every container mounts, as a
    user writes it for upstream; what its webhook would default is added by ``defaulted``."""

    def rjob(rname: str) -> Obj:
        container = {
            "name": "main",
            "image": "busybox",
            "volumeMounts": [{"name": CLAIM, "mountPath": f"/{CLAIM}"}],
        }
        return {
            "name": rname,
            "replicas": 1,
            "template": {"spec": {"template": {"spec": {"containers": [container]}}}},
        }

    claim_spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    return {
        "apiVersion": api.API_VERSION,
        "kind": api.KIND,
        "metadata": {"name": name},
        "spec": {
            "replicatedJobs": [rjob("leader"), rjob("workers")],
            "volumeClaimPolicies": [
                {
                    "templates": [{"metadata": {"name": CLAIM}, "spec": claim_spec}],
                    "retentionPolicy": {"whenDeleted": "Delete"},
                }
            ],
        },
    }


def test_defaulted_spells_out_what_upstreams_webhook_sets() -> None:
    js = upstreamjobset.defaulted(claimed_jobset("js"))
    spec = js["spec"]
    assert spec["successPolicy"] == {"operator": "All"}
    assert spec["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    assert spec["network"] == {"enableDNSHostnames": True, "publishNotReadyAddresses": True}
    for rjob in spec["replicatedJobs"]:
        job_spec = rjob["template"]["spec"]
        assert job_spec["completionMode"] == "Indexed"
        assert job_spec["template"]["spec"]["restartPolicy"] == "OnFailure"
    assert spec["volumeClaimPolicies"][0]["retentionPolicy"] == {"whenDeleted": "Delete"}
    # What is given is kept; the input is not changed.
    kept = claimed_jobset("js")
    kept["spec"]["network"] = {"enableDNSHostnames": False}
    assert upstreamjobset.defaulted(kept)["spec"]["network"]["enableDNSHostnames"] is False
    assert "successPolicy" not in kept["spec"]


async def test_upstream_creates_its_claim_and_jobs(
    upstream_cluster: LocalCluster, upstream_build: upstream.UpstreamBuild, client: KubeClient
) -> None:
    async with upstreamjobset.running_async(upstream_cluster, upstream_build) as manager:
        log = manager.process.log_path.read_text()
        # Its version and commit are linked in, as upstream's own build does.
        assert upstream_build.ref in log and upstream_build.commit in log, log[-2000:]
        await client.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
        name = "from-upstream"
        created = await client.create(
            api.JOBSETS, upstreamjobset.defaulted(claimed_jobset(name)), NAMESPACE
        )
        uid = created["metadata"]["uid"]

        claim = await wait_for(
            lambda: client.get(CLAIMS, f"{CLAIM}-{name}", NAMESPACE),
            lambda _: True,
            f"upstream's claim {CLAIM}-{name}",
        )
        assert claim["metadata"]["labels"][api.JOBSET_NAME] == name
        owners = claim["metadata"].get("ownerReferences") or []
        assert [(o["kind"], o["name"], o["uid"], o.get("controller")) for o in owners] == [
            (api.KIND, name, uid, True)
        ], owners

        jobs = await wait_for(
            lambda: client.list(JOBS, NAMESPACE, label_selector=f"{api.JOBSET_NAME}={name}"),
            lambda found: len(found["items"]) == 2,
            f"upstream's two Jobs of JobSet {name}",
        )
        assert sorted(j["metadata"]["name"] for j in jobs["items"]) == [
            f"{name}-leader-0",
            f"{name}-workers-0",
        ]
        for job in jobs["items"]:
            owner = job["metadata"]["ownerReferences"][0]
            assert (owner["uid"], owner.get("controller")) == (uid, True)
            volumes = job["spec"]["template"]["spec"].get("volumes") or []
            claims = [v["persistentVolumeClaim"]["claimName"] for v in volumes]
            assert claims == [f"{CLAIM}-{name}"], volumes
        assert manager.running()
    assert not manager.running()


def test_a_manager_that_exits_fails_the_start_with_its_log(
    upstream_cluster: LocalCluster, upstream_build: upstream.UpstreamBuild, tmp_path: Path
) -> None:
    """A config file that is not there (a later --config wins): the manager exits at once, and
    the start says so with its log."""
    missing = tmp_path / "missing.yaml"
    with (
        pytest.raises(LaunchError, match="exited") as refused,
        upstreamjobset.running(
            upstream_cluster,
            upstream_build,
            directory=tmp_path / "bad",
            args=[f"--config={missing}"],
            install=False,
        ),
    ):
        pytest.fail("started")
    assert str(missing) in str(refused.value)
