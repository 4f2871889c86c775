"""The oldest Kubernetes release the project claims to support, tested rather than assumed.

The session's other tests run on the suite's release (localcluster/gomod/kubernetes); these run on
a second API server, of the oldest supported release (localcluster/gomod/kubernetes-min, the
``oldest_apiserver_cluster`` fixture). There both CRDs must install (every CEL rule compiles with
that release's CEL libraries and within its cost budget: a new CRD is checked against the CEL
environment of the release before it, so a library that arrived in 1.34 needs a 1.35 server),
every rule must answer as on the suite's release (test_crd.py's tables, reused as they are), and
the controller must run a JobSet. Pod scope needs ``MutatingAdmissionPolicy`` v1 (1.36): here the
API is not served, and the controller says so on the JobSet instead of failing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import yaml

from controller.jobset import api
from controller.jobset.volumes import status as volume_status
from controller.jobset.volumes.admission import REASON_POLICY_MISSING
from controller.runtime.client import KubeClient
from localcluster.build import MIN_KUBERNETES, required_versions
from tests.helpers import Kube, create_namespace, wait_for
from tests.integration import test_spec_policy_scope as scope
from tests.integration.test_crd import (
    API,
    CREATE_CASES,
    UPDATE_CASES,
    Mutation,
    Obj,
    accepted,
    base,
    check_create,
    check_update,
    create,
    rejection,
)
from tests.support.crd import (
    ALPHA_CRD_FILE,
    CRD_FILE,
    CRD_PATH,
    DIGEST_ANNOTATION,
    install_crd,
    load_crd,
)
from tests.support.examples import EXAMPLES, SUPPORTED
from tests.support.jobsets import (
    complete_job,
    condition,
    get_jobset,
    jobs_of,
    jobset,
    replicated_job,
    running_controller,
    wait_condition,
    wait_jobs,
    with_mounts,
)
from tests.support.volumes_e2e import claim_template

# The release the wrapper module pins: what the docs claim as the minimum.
OLDEST = required_versions(MIN_KUBERNETES)["k8s.io/kubernetes"]
MAP_PATH = "/apis/admissionregistration.k8s.io/v1/mutatingadmissionpolicies"


@pytest.fixture
async def old_namespace(oldest_kube: Kube) -> AsyncIterator[str]:
    name = await create_namespace(oldest_kube, wait_for_service_account=False)
    yield name
    await oldest_kube.core.delete_namespace(name)


@pytest.fixture
async def old_client(oldest_kube: Kube) -> KubeClient:
    """An API client on the oldest supported API server, with the default JobSet CRD."""
    await install_crd(oldest_kube)
    return KubeClient(oldest_kube.api)


@pytest.fixture
def old_jobsets(old_client: KubeClient, old_namespace: str) -> str:
    """The namespace's jobsets collection path (the CRD installed)."""
    return f"{API}/namespaces/{old_namespace}/jobsets"


# ------------------------------------------------------------------ the server and the CRDs


async def test_the_api_server_is_the_oldest_supported_release(oldest_kube: Kube) -> None:
    """Not the suite's binary by mistake: /version reports the minor release the docs claim
    (the build stamps no gitVersion; major and minor come from the source of the release)."""
    version = await oldest_kube.raw("GET", "/version")
    major, minor = OLDEST.removeprefix("v").split(".")[:2]
    assert (version["major"], version["minor"]) == (major, minor), version
    assert (version["emulationMajor"], version["emulationMinor"]) == (major, minor), version


async def test_both_crds_install(oldest_kube: Kube) -> None:
    """The alpha CRD carries the most rules (every feature gate on); each one is accepted and
    Established (install_crd waits for it), the default one last, for the tests after this."""
    for path in (ALPHA_CRD_FILE, CRD_FILE):
        await install_crd(oldest_kube, path)
        installed = await oldest_kube.raw("GET", CRD_PATH)
        annotations = installed["metadata"]["annotations"]
        expected = load_crd(path)["metadata"]["annotations"][DIGEST_ANNOTATION]
        assert annotations[DIGEST_ANNOTATION] == expected, f"{path} is not the installed CRD"


@pytest.mark.parametrize("example", [p.name for p in SUPPORTED])
async def test_example_is_accepted(oldest_kube: Kube, old_jobsets: str, example: str) -> None:
    body = yaml.safe_load((EXAMPLES / example).read_text())
    stored = accepted(await create(oldest_kube, old_jobsets, body))
    assert stored["metadata"]["name"] == body["metadata"]["name"]


@pytest.mark.parametrize(
    ("mutation", "expected"),
    [pytest.param(m, e, id=i) for i, m, e in CREATE_CASES],
)
async def test_rule_on_create(
    oldest_kube: Kube, old_jobsets: str, mutation: Mutation, expected: str
) -> None:
    """test_crd.py's table of every rule on create, with the same expected messages."""
    await check_create(oldest_kube, old_jobsets, mutation, expected)


@pytest.mark.parametrize(
    ("before", "change", "expected"),
    [pytest.param(b, c, e, id=i) for i, b, c, e in UPDATE_CASES],
)
async def test_rule_on_update(
    oldest_kube: Kube, old_jobsets: str, before: Mutation, change: Mutation, expected: str
) -> None:
    """test_crd.py's table of every transition rule (oldSelf), with the same expected messages."""
    await check_update(oldest_kube, old_jobsets, before, change, expected)


async def test_a_bad_jobset_is_refused_with_the_rules_message(
    oldest_kube: Kube, old_jobsets: str
) -> None:
    """One rule built on the newest CEL libraries the CRD uses (lists' flatten and distinct,
    two-variable transformMapEntry in its messageExpression), stored for real, not dry-run."""
    body = base()
    body["spec"]["successPolicy"]["targetReplicatedJobs"] = ["workers", "missing"]
    message = rejection(await create(oldest_kube, old_jobsets, body))
    expected = (
        "successPolicy.targetReplicatedJobs must name replicated jobs of this JobSet: missing"
    )
    assert expected in message, message


async def test_the_policy_judges_the_jobsets_of_its_value_here_too(
    oldest_kube: Kube, old_client: KubeClient, old_namespace: str
) -> None:
    """The policy's ``managedBy`` variable (read by another variable) and its two validations
    on the oldest release: beside a canary, an upstream JobSet gets upstream CRD's rules only,
    the canary's this project's."""
    ns = old_namespace
    try:
        await scope.serving(oldest_kube, ns, scope.CANARY)
        theirs = scope.suspended("theirs")
        change = scope.COORDINATOR_CHANGE
        assert await scope.admission(oldest_kube, ns, theirs, change) == ""
        message = await scope.admission(oldest_kube, ns, theirs, scope.NETWORK_CHANGE)
        assert scope.NETWORK_IMMUTABLE in message
        ours = scope.suspended("ours", scope.CANARY)
        assert scope.COORDINATOR_IMMUTABLE in await scope.admission(oldest_kube, ns, ours, change)
    finally:
        await install_crd(oldest_kube)


# ------------------------------------------------------------------ the controller


async def test_the_controller_creates_the_jobs_and_completes_the_jobset(
    oldest_kube: Kube, old_namespace: str, old_client: KubeClient
) -> None:
    """No Job controller in this profile: the test marks the Jobs succeeded, as upstream does."""
    ns = old_namespace
    async with running_controller(oldest_kube, ns):
        body = jobset("old", replicated_job("leader"), replicated_job("workers", 2))
        await old_client.create(api.JOBSETS, body, ns)
        jobs = await wait_jobs(old_client, ns, "old", 3)
        assert [j["metadata"]["name"] for j in jobs] == [
            "old-leader-0",
            "old-workers-0",
            "old-workers-1",
        ]
        for job in jobs:
            await complete_job(old_client, ns, job)
        done = await wait_condition(old_client, ns, "old", "Completed")
        assert done["status"]["terminalState"] == "Completed", done["status"]


async def test_pod_scope_says_it_needs_a_newer_release(
    oldest_kube: Kube, old_namespace: str, old_client: KubeClient
) -> None:
    """MutatingAdmissionPolicy v1 is not served here: a Pod-scope JobSet gets VolumesReady=False
    naming the release it needs and nothing is created for it; a Job-scope one is unaffected."""
    missing = await oldest_kube.raw("GET", MAP_PATH)
    assert missing.get("code") == 404, missing
    ns = old_namespace
    workers = with_mounts(replicated_job("workers", 2, completions=3), "ckpt")
    workers["template"]["spec"]["completionMode"] = "Indexed"
    pod_scope = jobset(
        "per-pod",
        workers,
        volumeClaimPolicies=[{"scope": "Pod", "templates": [claim_template("ckpt")]}],
    )
    job_scope = jobset(
        "per-job",
        with_mounts(replicated_job("workers", 2), "ckpt"),
        volumeClaimPolicies=[{"scope": "Job", "templates": [claim_template("ckpt")]}],
    )
    async with running_controller(oldest_kube, ns):
        await old_client.create(api.JOBSETS, pod_scope, ns)
        await old_client.create(api.JOBSETS, job_scope, ns)

        def blocked(obj: Obj) -> bool:
            ready = condition(obj, volume_status.VOLUMES_READY) or {}
            return ready.get("status") == "False" and ready.get("reason") == REASON_POLICY_MISSING

        held = await wait_for(
            lambda: get_jobset(old_client, ns, "per-pod"), blocked, "Pod scope to be held"
        )
        message = (condition(held, volume_status.VOLUMES_READY) or {})["message"]
        assert "does not serve admissionregistration.k8s.io/v1" in message, message
        assert "Kubernetes 1.36 or later" in message, message
        jobs = await wait_jobs(old_client, ns, "per-job", 2)
        assert [j["metadata"]["name"] for j in jobs] == ["per-job-workers-0", "per-job-workers-1"]
        assert await jobs_of(old_client, ns, "per-pod") == []
