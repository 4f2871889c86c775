"""Which JobSets the spec's admission policy judges, on a real API server: the value its
variable ``managedBy`` holds (docs/operations.md, "Which JobSets the admission policy judges").

The probe for this project's rules is a change of ``spec.coordinator`` (``coordinator-
immutable``: upstream's webhook and CRD allow it); for upstream CRD's rules, a change of
``spec.network`` and ``startupPolicy: InOrder`` with ``dependsOn``. Every request is a dry run
or a real write of a suspended JobSet no controller runs. The policy is the session's
(``install_crd``, upstream's reserved value): each test puts the committed one back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from controller.jobset import api
from controller.runtime.client import KubeClient
from tests.helpers import Kube, wait_for
from tests.support.crd import dry_run_refusal, install_crd, install_policy_serving
from tests.support.jobsets import jobset, replicated_job

Obj = dict[str, Any]
CANARY = "example.com/canary"
OTHER = "example.com/other"
COORDINATOR_IMMUTABLE = "spec.coordinator: spec.coordinator is immutable"
NETWORK_IMMUTABLE = "spec.network: is immutable"


def suspended(name: str, managed_by: str | None = None, **spec: Any) -> Obj:
    """Two Jobs of an Indexed replicated job, a coordinator at Job 0, suspended."""
    rjob = replicated_job("workers", replicas=2)
    rjob["template"]["spec"]["completionMode"] = "Indexed"
    body = jobset(
        name,
        rjob,
        coordinator={"replicatedJob": "workers", "jobIndex": 0},
        suspend=True,
        **spec,
    )
    if managed_by is not None:
        body["spec"]["managedBy"] = managed_by
    return body


async def admission(kube: Kube, ns: str, body: Obj, changed: Obj | None = None) -> str:
    """Create ``body`` (a dry run without ``changed``), else create it and apply ``changed`` to
    it as a merge patch with a dry run: the refusal's message, "" when admitted."""
    path = f"/apis/{api.GROUP}/{api.VERSION}/namespaces/{ns}/jobsets"
    if changed is None:
        answer = await kube.raw("POST", f"{path}?dryRun=All", body)
        return str(answer.get("message", "")) if answer.get("kind") == "Status" else ""
    made = await kube.raw("POST", path, body)
    assert made.get("kind") == "JobSet", made
    name = made["metadata"]["name"]
    answer = await dry_run_refusal(kube, ns, name, changed)
    await kube.raw("DELETE", f"{path}/{name}")
    return answer


async def serving(kube: Kube, ns: str, managed_by: str) -> None:
    """The policy holds ``managed_by``, and the API server judges by it (it loads a policy a
    moment later): a JobSet of another value than ``managed_by`` and upstream's is judged only
    with upstream's reserved value."""
    await install_policy_serving(kube, managed_by)
    probe = suspended("probe", "example.com/probe")
    judged = managed_by == api.CONTROLLER_NAME
    await wait_for(
        lambda: admission(kube, ns, probe, COORDINATOR_CHANGE),
        lambda message: (COORDINATOR_IMMUTABLE in message) is judged,
        f"the policy to judge the JobSets of {managed_by}",
        seconds=30,
    )


COORDINATOR_CHANGE = {"spec": {"coordinator": {"jobIndex": 1}}}
NETWORK_CHANGE = {"spec": {"network": {"publishNotReadyAddresses": False}}}


@pytest.fixture
async def policy_restored(kube: Kube, client: KubeClient) -> AsyncIterator[None]:
    """The session's policy (upstream's reserved value) back after the test."""
    try:
        yield
    finally:
        await install_crd(kube)


@pytest.mark.parametrize("managed_by", [None, api.CONTROLLER_NAME, CANARY, OTHER])
async def test_with_upstreams_value_every_jobset_is_judged(
    kube: Kube, namespace: str, policy_restored: None, managed_by: str | None
) -> None:
    """The drop-in (the default): every JobSet, whichever value it names, as upstream's webhook
    judges every JobSet."""
    await serving(kube, namespace, api.CONTROLLER_NAME)
    body = suspended("drop-in", managed_by)
    assert COORDINATOR_IMMUTABLE in await admission(kube, namespace, body, COORDINATOR_CHANGE)


async def test_a_canarys_policy_judges_its_jobsets_by_this_projects_rules(
    kube: Kube, namespace: str, policy_restored: None
) -> None:
    await serving(kube, namespace, CANARY)
    body = suspended("canary", CANARY)
    assert COORDINATOR_IMMUTABLE in await admission(kube, namespace, body, COORDINATOR_CHANGE)
    # A change of managedBy is judged when either side names the canary (managed-by-immutable).
    for before, after in ((CANARY, None), (None, CANARY)):
        changed = {"spec": {"managedBy": after}}
        message = await admission(kube, namespace, suspended("moved", before), changed)
        assert "spec.managedBy is immutable" in message, (before, after, message)


@pytest.mark.parametrize("managed_by", [None, api.CONTROLLER_NAME, OTHER])
async def test_beside_a_canary_other_jobsets_get_upstream_crds_rules_only(
    kube: Kube, namespace: str, policy_restored: None, managed_by: str | None
) -> None:
    """Upstream's JobSets (and a third controller's): this project's rules do not judge them;
    the rules upstream's own CRD had do (its CRD is replaced by this project's)."""
    await serving(kube, namespace, CANARY)
    body = suspended("theirs", managed_by)
    assert await admission(kube, namespace, body, COORDINATOR_CHANGE) == ""
    assert NETWORK_IMMUTABLE in await admission(kube, namespace, body, NETWORK_CHANGE)
    both = suspended("both", managed_by, startupPolicy={"startupPolicyOrder": "InOrder"})
    both["spec"]["replicatedJobs"].append(
        {**replicated_job("after"), "dependsOn": [{"name": "workers", "status": "Complete"}]}
    )
    message = await admission(kube, namespace, both)
    assert "spec: startupPolicy InOrder and dependsOn cannot be combined" in message
    # ... and nothing else: a change of managedBy between two values nobody here serves is
    # upstream's webhook's to refuse (the policy lets it through, as upstream's CRD does).
    if managed_by == OTHER:
        assert await admission(kube, namespace, body, {"spec": {"managedBy": None}}) == ""
