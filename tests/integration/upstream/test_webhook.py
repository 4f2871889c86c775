"""Ports of upstream JobSet's webhook scenarios: defaulting and validation.

Upstream defaults and validates JobSets in a webhook server; here the CRD does it (OpenAPI
defaults and CEL rules), so each test talks to the API server alone: it creates the JobSet of
upstream's scenario, reads back the defaults or makes upstream's update, and checks that the API
server accepts it, or refuses it with a message that says what is wrong. No controller runs: none
of these scenarios needs one ("running" means not suspended).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import pytest

from controller.jobset import api
from controller.runtime.client import ApiError, KubeClient
from tests.integration.upstream.scenarios import scenario
from tests.support.jobsets import get_jobset, jobset, pod_template

Obj = dict[str, Any]

IMMUTABLE_WHILE_RUNNING = (
    "spec.replicatedJobs is immutable while the JobSet is not suspended, except replicas"
)


def rjob(name: str, pod: Obj | None = None, **job_spec: Any) -> Obj:
    """A replicated job as upstream's tests make one: a Job template with a pod template (a
    busybox container, restartPolicy Never unless ``pod`` says otherwise) and nothing else set
    unless given (no replicas, completions or completionMode)."""
    return {
        "name": name,
        "template": {"spec": {"template": pod or pod_template(), **job_spec}},
    }


def mounting(*volumes: str) -> Obj:
    """A pod template whose container mounts ``volumes`` (upstream's volume scenarios)."""
    pod = pod_template()
    pod["spec"]["containers"][0]["volumeMounts"] = [
        {"name": v, "mountPath": f"/test{i}"} for i, v in enumerate(volumes)
    ]
    return pod


def claim(name: str, **metadata: str) -> Obj:
    """A volume claim template. Upstream's carry only a name; ours must also say what Kubernetes
    requires of every claim (an access mode and a storage request), see
    ``test_volume_claim_policies_defaults``."""
    return {
        "metadata": {"name": name, **metadata},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }


def first_pod_spec(js: Obj) -> Obj:
    spec: Obj = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return spec


async def create(client: KubeClient, namespace: str, body: Obj) -> Obj:
    """Create the JobSet; return it as the API server stored it (defaults applied)."""
    await client.create(api.JOBSETS, body, namespace)
    return await get_jobset(client, namespace, body["metadata"]["name"])


async def refused(call: Awaitable[Obj]) -> str:
    """The message of the API server's 422 Invalid answer to ``call``."""
    with pytest.raises(ApiError) as raised:
        await call
    assert raised.value.status == 422, raised.value
    return raised.value.message


async def update(client: KubeClient, namespace: str, js: Obj) -> Obj:
    return await client.replace(api.JOBSETS, js, namespace)


# ------------------------------------------------------------------ defaults


@scenario("job.spec.completionMode defaults to indexed if unset")
async def test_completion_mode_defaults_to_indexed(client: KubeClient, namespace: str) -> None:
    """A Job template without completionMode gets Indexed."""
    body = jobset("completionmode-unset", rjob("rjob"), network={"enableDNSHostnames": True})
    stored = await create(client, namespace, body)
    assert stored["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] == "Indexed"


@scenario("job.spec.completionMode unchanged if already set")
async def test_completion_mode_kept(client: KubeClient, namespace: str) -> None:
    """A Job template's NonIndexed completionMode is kept (hostnames off, as upstream)."""
    body = jobset(
        "completionmode-nonindexed",
        rjob("rjob", completionMode="NonIndexed"),
        network={"enableDNSHostnames": False},
    )
    stored = await create(client, namespace, body)
    assert stored["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] == (
        "NonIndexed"
    )


@scenario("enableDNSHostnames defaults to true if unset")
async def test_dns_hostnames_default(client: KubeClient, namespace: str) -> None:
    """network.enableDNSHostnames is true when left out: in an empty network (upstream's input)
    and when network itself is left out."""
    indexed = rjob("rjob", completionMode="Indexed")
    empty = await create(client, namespace, jobset("empty-network", indexed, network={}))
    absent = await create(client, namespace, jobset("no-network", indexed))
    assert empty["spec"]["network"]["enableDNSHostnames"] is True
    assert absent["spec"]["network"]["enableDNSHostnames"] is True


@scenario("publishNotReadyAddresses defaults to true if unset")
async def test_publish_not_ready_addresses_default(client: KubeClient, namespace: str) -> None:
    """network.publishNotReadyAddresses is true when left out."""
    body = jobset(
        "publishnotready-unset",
        rjob("rjob", completionMode="Indexed"),
        network={"enableDNSHostnames": True},
    )
    stored = await create(client, namespace, body)
    assert stored["spec"]["network"]["publishNotReadyAddresses"] is True


@scenario("pod restart policy defaults to OnFailure if unset")
async def test_restart_policy_default(client: KubeClient, namespace: str) -> None:
    """A pod template without restartPolicy gets OnFailure."""
    pod = {"spec": {"containers": [{"name": "test-container", "image": "busybox:latest"}]}}
    body = jobset("restartpolicy-unset", rjob("rjob", pod, completionMode="Indexed"))
    stored = await create(client, namespace, body)
    assert first_pod_spec(stored)["restartPolicy"] == "OnFailure"


@scenario("success policy defaults to all")
async def test_success_policy_default(client: KubeClient, namespace: str) -> None:
    """Left out, the success policy is operator All with no target replicated jobs."""
    body = jobset("success-policy", rjob("rjob", completionMode="Indexed"))
    stored = await create(client, namespace, body)
    assert stored["spec"]["successPolicy"] == {"operator": "All"}


@scenario("FailurePolicy defaults are applied when empty")
async def test_failure_policy_defaults(client: KubeClient, namespace: str) -> None:
    """An empty failure policy gets restartStrategy Recreate."""
    body = jobset("failure-policy", rjob("rjob", completionMode="Indexed"), failurePolicy={})
    stored = await create(client, namespace, body)
    assert stored["spec"]["failurePolicy"]["restartStrategy"] == "Recreate"


@scenario("VolumeClaimPolicies defaults are applied when empty")
async def test_volume_claim_policies_defaults(client: KubeClient, namespace: str) -> None:
    """A volume claim policy without a retention policy gets whenDeleted Delete.

    Differs from upstream: upstream's template has only a name; here a template must also list
    an access mode and request storage, because Kubernetes refuses every claim without them (the
    JobSet would be admitted only to fail at its first claim). The bare template is refused."""
    pod = mounting("test-volume")
    bare = jobset(
        "bare-template",
        rjob("rjob", pod, completionMode="Indexed"),
        volumeClaimPolicies=[{"templates": [{"metadata": {"name": "test-volume"}}]}],
    )
    message = await refused(client.create(api.JOBSETS, bare, namespace))
    assert "a volume claim template must list at least one access mode" in message
    assert "a volume claim template must request storage" in message

    body = jobset(
        "volume-claim-policies",
        rjob("rjob", pod, completionMode="Indexed"),
        volumeClaimPolicies=[{"templates": [claim("test-volume")]}],
    )
    stored = await create(client, namespace, body)
    assert stored["spec"]["volumeClaimPolicies"][0]["retentionPolicy"]["whenDeleted"] == "Delete"


# ------------------------------------------------------------------ create: accepted or refused


@scenario("success policy with invalid replicatedJob name is rejected")
async def test_success_policy_unknown_target(client: KubeClient, namespace: str) -> None:
    """A success policy naming a replicated job that does not exist is refused."""
    body = jobset(
        "success-policy",
        rjob("rjob", completionMode="Indexed"),
        successPolicy={"operator": "All", "targetReplicatedJobs": ["does-not-exist"]},
    )
    message = await refused(client.create(api.JOBSETS, body, namespace))
    assert (
        "successPolicy.targetReplicatedJobs must name replicated jobs of this JobSet: "
        "does-not-exist" in message
    )


@scenario("negative replicated job replicas are rejected")
async def test_negative_replicas(client: KubeClient, namespace: str) -> None:
    """replicas -1 is refused."""
    negative = {**rjob("negative-replicas", completionMode="Indexed"), "replicas": -1}
    message = await refused(
        client.create(api.JOBSETS, jobset("negative-replicas", negative), namespace)
    )
    assert "spec.replicatedJobs[0].replicas: Invalid value: -1" in message
    assert "should be greater than or equal to 0" in message


@scenario("zero replicated job replicas are accepted")
async def test_zero_replicas(client: KubeClient, namespace: str) -> None:
    """replicas 0 is accepted (and kept: it is not replaced by the default 1)."""
    zero = {**rjob("zero-replicas", completionMode="Indexed"), "replicas": 0}
    stored = await create(client, namespace, jobset("zero-replicas", zero))
    assert stored["spec"]["replicatedJobs"][0]["replicas"] == 0


@scenario("DependsOn and StartupPolicy: AnyOrder can be set together")
async def test_depends_on_with_any_order(client: KubeClient, namespace: str) -> None:
    """dependsOn with startupPolicy AnyOrder is accepted."""
    second = {**rjob("rjob-2"), "dependsOn": [{"name": "rjob-1", "status": "Ready"}]}
    body = jobset(
        "depends-on", rjob("rjob-1"), second, startupPolicy={"startupPolicyOrder": "AnyOrder"}
    )
    stored = await create(client, namespace, body)
    assert stored["spec"]["replicatedJobs"][1]["dependsOn"] == [
        {"name": "rjob-1", "status": "Ready"}
    ]


@scenario("DependsOn and StartupPolicy: InOrder can't be set together")
async def test_depends_on_with_in_order(client: KubeClient, namespace: str) -> None:
    """dependsOn with startupPolicy InOrder is refused: the two start orders exclude each other."""
    second = {**rjob("rjob-2"), "dependsOn": [{"name": "rjob-1", "status": "Ready"}]}
    body = jobset(
        "depends-on", rjob("rjob-1"), second, startupPolicy={"startupPolicyOrder": "InOrder"}
    )
    message = await refused(client.create(api.JOBSETS, body, namespace))
    assert "startupPolicy InOrder and dependsOn cannot be combined: use dependsOn" in message


@scenario("DependsOn can't be set for the first ReplicatedJob")
async def test_depends_on_first(client: KubeClient, namespace: str) -> None:
    """The first replicated job cannot depend on anything (here: on itself)."""
    first = {**rjob("rjob-1"), "dependsOn": [{"name": "rjob-1", "status": "Ready"}]}
    message = await refused(client.create(api.JOBSETS, jobset("depends-on", first), namespace))
    assert "the first replicated job cannot have dependsOn: nothing starts before it: rjob-1" in (
        message
    )


@scenario("DependsOn list must contain valid ReplicatedJob status")
async def test_depends_on_status(client: KubeClient, namespace: str) -> None:
    """A dependsOn status other than Ready or Complete is refused."""
    second = {**rjob("rjob-2"), "dependsOn": [{"name": "rjob-1", "status": "Failed"}]}
    body = jobset("depends-on", rjob("rjob-1"), second)
    message = await refused(client.create(api.JOBSETS, body, namespace))
    assert 'spec.replicatedJobs[1].dependsOn[0].status: Unsupported value: "Failed"' in message
    assert '"Ready", "Complete"' in message


@scenario("JobSet can create with no replicated jobs")
async def test_no_replicated_jobs(client: KubeClient, namespace: str) -> None:
    """A JobSet without replicated jobs is accepted: an empty list (upstream's input) or none."""
    empty = await create(client, namespace, jobset("empty-list", network={}))
    bare = {"apiVersion": api.API_VERSION, "kind": api.KIND, "metadata": {"name": "no-list"}}
    absent = await create(client, namespace, {**bare, "spec": {}})
    assert empty["spec"]["replicatedJobs"] == []
    assert "replicatedJobs" not in absent["spec"]


@scenario(
    "spec that will lead to invalid coordinator label value (in this case too long due to long JobSet name) should be rejected"  # noqa: E501 (upstream's name, verbatim)
)
async def test_coordinator_label_too_long(client: KubeClient, namespace: str) -> None:
    """A coordinator whose address (<jobSet>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>,
    put in a label of every Job and pod) would be longer than a label value may be is refused."""
    body = jobset(
        "a" * 60,
        rjob("rjob-a"),
        coordinator={"replicatedJob": "rjob-a", "jobIndex": 0, "podIndex": 0},
    )
    message = await refused(client.create(api.JOBSETS, body, namespace))
    assert (
        "the coordinator's address (<jobSet>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>) "
        "must fit in a label value of at most 63 characters" in message
    )


@scenario("VolumeClaimPolicies template with namespace should be rejected")
async def test_volume_claim_template_namespace(client: KubeClient, namespace: str) -> None:
    """A volume claim template that sets metadata.namespace is refused."""
    body = jobset(
        "volume-claim-namespace",
        rjob("rjob", mounting("test-volume"), completionMode="Indexed"),
        volumeClaimPolicies=[{"templates": [claim("test-volume", namespace="invalid-namespace")]}],
    )
    message = await refused(client.create(api.JOBSETS, body, namespace))
    assert (
        "a volume claim template must not set metadata.namespace: claims are made in the "
        "JobSet's namespace: test-volume" in message
    )


@scenario("VolumeClaimPolicies exceeding MaxItems=50 should be rejected")
async def test_volume_claim_policies_max_items(client: KubeClient, namespace: str) -> None:
    """51 volume claim policies (one template each, all mounted) are refused; 50 are accepted."""
    names = [f"test-volume-{i}" for i in range(51)]
    pod = mounting(*names)
    policies = [{"templates": [claim(n)]} for n in names]
    over = jobset(
        "volume-claim-max-items",
        rjob("rjob", pod, completionMode="Indexed"),
        volumeClaimPolicies=policies,
    )
    message = await refused(client.create(api.JOBSETS, over, namespace))
    assert "spec.volumeClaimPolicies: Too many: 51: must have at most 50 items" in message

    pod["spec"]["containers"][0]["volumeMounts"].pop()
    at_limit = jobset(
        "volume-claim-at-limit",
        rjob("rjob", pod, completionMode="Indexed"),
        volumeClaimPolicies=policies[:50],
    )
    stored = await create(client, namespace, at_limit)
    assert len(stored["spec"]["volumeClaimPolicies"]) == 50


@scenario("VolumeClaimPolicies templates exceeding MaxItems=50 should be rejected")
async def test_volume_claim_templates_max_items(client: KubeClient, namespace: str) -> None:
    """51 templates in one volume claim policy (all mounted) are refused; 50 are accepted."""
    names = [f"test-volume-{i}" for i in range(51)]
    pod = mounting(*names)
    over = jobset(
        "volume-claim-templates-max-items",
        rjob("rjob", pod, completionMode="Indexed"),
        volumeClaimPolicies=[{"templates": [claim(n) for n in names]}],
    )
    message = await refused(client.create(api.JOBSETS, over, namespace))
    assert "spec.volumeClaimPolicies[0].templates: Too many: 51: must have at most 50 items" in (
        message
    )

    pod["spec"]["containers"][0]["volumeMounts"].pop()
    at_limit = jobset(
        "volume-claim-templates-at-limit",
        rjob("rjob", pod, completionMode="Indexed"),
        volumeClaimPolicies=[{"templates": [claim(n) for n in names[:50]]}],
    )
    stored = await create(client, namespace, at_limit)
    assert len(stored["spec"]["volumeClaimPolicies"][0]["templates"]) == 50


# ------------------------------------------------------------------ updates


@scenario("validate jobSet should not fail on NodeSelectors Update when jobset is suspended")
async def test_node_selector_update_while_suspended(client: KubeClient, namespace: str) -> None:
    """While suspended, a pod template's nodeSelector may change."""
    body = jobset(
        "js-hostnames-non-indexed",
        rjob("rjob", completionMode="Indexed"),
        suspend=True,
        network={"enableDNSHostnames": False, "publishNotReadyAddresses": True},
    )
    stored = await create(client, namespace, body)
    first_pod_spec(stored)["nodeSelector"] = {"test": "test"}
    updated = await update(client, namespace, stored)
    assert first_pod_spec(updated)["nodeSelector"] == {"test": "test"}


@scenario("validate jobSet should fail on NodeSelectors Update")
async def test_node_selector_update_while_running(client: KubeClient, namespace: str) -> None:
    """While running (not suspended), a pod template's nodeSelector may not change."""
    body = jobset(
        "js-hostnames-non-indexed",
        rjob("rjob", completionMode="Indexed"),
        network={"enableDNSHostnames": True},
    )
    stored = await create(client, namespace, body)
    first_pod_spec(stored)["nodeSelector"] = {"test": "test"}
    message = await refused(update(client, namespace, stored))
    assert IMMUTABLE_WHILE_RUNNING in message


@scenario(
    "validate jobSet immutable for fields over than NodeSelector when jobSet is not suspended"
)
async def test_pod_spec_update_while_running(client: KubeClient, namespace: str) -> None:
    """While running, other pod template fields (hostname, subdomain) may not change either."""
    body = jobset(
        "js-hostnames-non-indexed",
        rjob("rjob", completionMode="Indexed"),
        network={"enableDNSHostnames": True, "publishNotReadyAddresses": True},
    )
    stored = await create(client, namespace, body)
    first_pod_spec(stored).update(hostname="test", subdomain="test")
    message = await refused(update(client, namespace, stored))
    assert IMMUTABLE_WHILE_RUNNING in message


@scenario("suspend jobset")
async def test_suspend(client: KubeClient, namespace: str) -> None:
    """A running JobSet may be suspended."""
    body = jobset("suspend", rjob("rjob", completionMode="Indexed"))
    stored = await create(client, namespace, body)
    stored["spec"]["suspend"] = True
    updated = await update(client, namespace, stored)
    assert updated["spec"]["suspend"] is True


@scenario("resume jobset")
async def test_resume(client: KubeClient, namespace: str) -> None:
    """A suspended JobSet may be resumed."""
    body = jobset("resume", rjob("rjob", completionMode="Indexed"), suspend=True)
    stored = await create(client, namespace, body)
    stored["spec"]["suspend"] = False
    updated = await update(client, namespace, stored)
    assert updated["spec"]["suspend"] is False


@scenario("SuccessPolicy should be immutable")
async def test_success_policy_immutable(client: KubeClient, namespace: str) -> None:
    """The success policy cannot change (here: its target replicated jobs)."""
    stored = await create(client, namespace, jobset("success", rjob("rjob")))
    stored["spec"]["successPolicy"]["targetReplicatedJobs"] = ["test", "test2"]
    message = await refused(update(client, namespace, stored))
    assert "spec.successPolicy is immutable" in message


@scenario("FailurePolicy should be immutable")
async def test_failure_policy_immutable(client: KubeClient, namespace: str) -> None:
    """The failure policy cannot change (here: maxRestarts 3 to 21)."""
    body = jobset("failure", rjob("rjob"), failurePolicy={"maxRestarts": 3})
    stored = await create(client, namespace, body)
    stored["spec"]["failurePolicy"] = {"maxRestarts": 21}
    message = await refused(update(client, namespace, stored))
    assert "spec.failurePolicy is immutable" in message


@scenario("validate jobSet immutable for managedBy field")
async def test_managed_by_immutable(client: KubeClient, namespace: str) -> None:
    """managedBy cannot be set after creation, even while suspended. (Upstream's new value,
    new-manager, is not a domain-prefixed path either: refused for that too, as upstream.)"""
    body = jobset("managed-by", rjob("rjob", completionMode="Indexed"), suspend=True)
    stored = await create(client, namespace, body)
    stored["spec"]["managedBy"] = "new-manager"
    message = await refused(update(client, namespace, stored))
    assert "spec.managedBy is immutable" in message
    stored["spec"]["managedBy"] = "example.com/new-manager"
    message = await refused(update(client, namespace, stored))
    assert "spec.managedBy is immutable" in message


@scenario("updating pod template in suspended jobset is allowed")
async def test_pod_template_update_while_suspended(client: KubeClient, namespace: str) -> None:
    """While suspended, pod template annotations and scheduling gates may change."""
    body = jobset("suspended", rjob("rjob", pod_template(old="annotation")), suspend=True)
    stored = await create(client, namespace, body)
    pod = stored["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod["metadata"]["annotations"]["new"] = "annotation"
    pod["spec"]["schedulingGates"] = [{"name": "example.com/gate"}]
    updated = await update(client, namespace, stored)
    pod = updated["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["metadata"]["annotations"] == {"old": "annotation", "new": "annotation"}
    assert pod["spec"]["schedulingGates"] == [{"name": "example.com/gate"}]


@scenario("updating pod template in running jobset is not allowed")
async def test_pod_template_update_while_running(client: KubeClient, namespace: str) -> None:
    """While running, pod template annotations may not change."""
    body = jobset("running", rjob("rjob", pod_template(old="annotation")))
    stored = await create(client, namespace, body)
    pod = stored["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod["metadata"]["annotations"]["new"] = "annotation"
    message = await refused(update(client, namespace, stored))
    assert IMMUTABLE_WHILE_RUNNING in message


@scenario("DependsOn must be immutable")
async def test_depends_on_immutable(client: KubeClient, namespace: str) -> None:
    """A dependsOn entry cannot change (Ready to Complete), running or suspended."""
    second = {**rjob("rjob-2"), "dependsOn": [{"name": "rjob-1", "status": "Ready"}]}
    stored = await create(client, namespace, jobset("depends-on", rjob("rjob-1"), second))
    stored["spec"]["replicatedJobs"][1]["dependsOn"][0]["status"] = "Complete"
    message = await refused(update(client, namespace, stored))
    assert IMMUTABLE_WHILE_RUNNING in message

    suspended = await create(
        client, namespace, jobset("depends-on-suspended", rjob("rjob-1"), second, suspend=True)
    )
    suspended["spec"]["replicatedJobs"][1]["dependsOn"][0]["status"] = "Complete"
    message = await refused(update(client, namespace, suspended))
    assert "while the JobSet is suspended, only replicas and the labels" in message


@scenario("VolumeClaimPolicies must be immutable")
async def test_volume_claim_policies_immutable(client: KubeClient, namespace: str) -> None:
    """A volume claim policy's retention cannot change (whenDeleted Delete to Retain)."""
    body = jobset(
        "volume-claim-policies",
        rjob("rjob", mounting("test-volume"), completionMode="Indexed"),
        volumeClaimPolicies=[{"templates": [claim("test-volume")]}],
    )
    stored = await create(client, namespace, body)
    stored["spec"]["volumeClaimPolicies"][0]["retentionPolicy"]["whenDeleted"] = "Retain"
    message = await refused(update(client, namespace, stored))
    assert "spec.volumeClaimPolicies is immutable, except the templates' labels" in message
