"""A canary beside upstream JobSet's real manager (v0.12.0), on the real node: upstream's JobSets
are treated as upstream treats them before, during and after a rollback.

Upstream runs as its install runs it: its CRD, its manager holding its Lease
(``6d4f6a47.jobset.x-k8s.io`` in ``jobset-system``), its JobSet and pod webhooks registered with
the API server (``upstreamjobset``'s ``webhooks=True``: upstream's own webhook manifests, called by
URL on the local process). The canary is installed with the overlay docs/operations.md shows
("Running beside upstream"), read from the page, plus one patch of the test's own: the
Deployment's replicas to 0, since the controller runs as a process here, with the
``--managed-by`` value the installed Deployment sets (and the installed policy holds). The
rollback is the page's command, read from it too.

The case: a change of ``spec.coordinator``. Upstream's webhook allows it (its coordinator checks
are on the new object only, and its CRD has no rule on it); this project's ``coordinator-
immutable`` refuses it. A change of ``spec.network`` is the other way round: upstream's CRD refuses
it, and so must the canary's admission policy for upstream's JobSets, since the canary's CRD
replaced upstream's.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import textwrap
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import yaml

from controller.api import specpolicy
from controller.jobset import api, volumes
from controller.jobset.volumes.model import OWNER_UID_ANNOTATION
from controller.runtime.client import CLAIMS, ApiError, KubeClient
from localcluster import audit, upstreamjobset
from localcluster.cluster import LocalCluster
from tests.helpers import Kube, wait_for
from tests.node.test_data import SECONDS, completed, shell_job
from tests.node.test_migration import install_upstream_crd, upstream_policy
from tests.support.crd import dry_run_refusal
from tests.support.jobsets import jobset
from tests.support.replicas import Replica, start_replica

Obj = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]
OPERATIONS = REPO / "docs" / "operations.md"
CANARY = "example.com/canary"
UPSTREAM_NAMESPACE = upstreamjobset.NAMESPACE
POLICIES = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies"
DEPLOYMENT = (
    "/apis/apps/v1/namespaces/stateful-jobset-system/deployments/stateful-jobset-controller"
)


def _fenced(language: str, containing: str) -> str:
    """The fenced block of docs/operations.md that contains ``containing``, dedented."""
    text = OPERATIONS.read_text()
    for block in re.finditer(rf"^( *)```{language}\n(.*?)^\1```", text, re.S | re.M):
        if containing in block.group(2):
            return textwrap.dedent(block.group(2))
    raise AssertionError(f"{OPERATIONS}: no ```{language} block with {containing!r}")


def canary_overlay(directory: Path) -> Path:
    """The page's canary overlay in ``directory``, its ``resources`` pointing at this checkout's
    manifests/ (kustomize takes relative paths only), and the Deployment at 0 replicas."""
    overlay: Obj = yaml.safe_load(_fenced("yaml", "canary-overlay/"))
    assert overlay["resources"] == ["../stateful-jobset/manifests"], overlay
    overlay["resources"] = [os.path.relpath(REPO / "manifests", directory)]
    overlay["patches"].append(
        {
            "target": {"kind": "Deployment", "name": "stateful-jobset-controller"},
            "patch": "- op: replace\n  path: /spec/replicas\n  value: 0\n",
        }
    )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "kustomization.yaml").write_text(json.dumps(overlay, indent=2))
    return directory


def rollback_command() -> list[str]:
    """The page's command that removes a canary but its CRD, as kubectl's arguments."""
    block = _fenced("sh", "-l app.kubernetes.io/part-of=stateful-jobset")
    words = shlex.split(block.replace("\\\n", " "))
    assert words[:2] == ["kubectl", "delete"], words
    return words[1:]


def coordinated(name: str, *, claim: bool = False, **spec: Any) -> Obj:
    """A JobSet of two one-pod Jobs that print and end, with a coordinator (``jobIndex`` 0),
    created suspended; not defaulted (upstream's webhook defaults it)."""
    mounts = {"data": "/data"} if claim else None
    body = jobset(
        name,
        shell_job("workers", "echo done", replicas=2, mounts=mounts),
        coordinator={"replicatedJob": "workers", "jobIndex": 0},
        suspend=True,
        **spec,
    )
    if claim:
        body["spec"]["volumeClaimPolicies"] = [upstream_policy("data", "Delete")]
    return body


async def change(client: KubeClient, ns: str, name: str, patch: Obj) -> str:
    """Apply a merge patch; the API server's refusal message, or "" when admitted."""
    try:
        await client.patch(api.JOBSETS, name, patch, ns)
    except ApiError as error:
        assert error.status in (400, 422), error
        return error.message
    return ""


COORDINATOR_CHANGE = {"spec": {"coordinator": {"jobIndex": 1}}}
NETWORK_CHANGE = {"spec": {"network": {"publishNotReadyAddresses": False}}}
RESUME = {"spec": {"suspend": False}}


async def upstream_treats_it_as_upstream(
    kube: Kube, client: KubeClient, ns: str, name: str, *, claim: bool = False, **spec: Any
) -> Obj:
    """An upstream JobSet (no ``managedBy``): the coordinator change admitted, the network change
    refused by upstream's CRD rule (or the policy's copy of it; a CRD just put back is served a
    moment later, hence the wait), resumed, run to completion by upstream's manager. Returns it,
    completed."""
    await client.create(api.JOBSETS, coordinated(name, claim=claim, **spec), ns)
    assert await change(client, ns, name, COORDINATOR_CHANGE) == ""
    await wait_for(
        lambda: dry_run_refusal(kube, ns, name, NETWORK_CHANGE),
        lambda refused: "network" in refused and "immutable" in refused,
        f"a change of {name}'s spec.network to be refused",
        seconds=30,
    )
    await client.patch(api.JOBSETS, name, RESUME, ns)
    done = await completed(client, ns, name)
    assert done["spec"]["coordinator"]["jobIndex"] == 1
    return done


@asynccontextmanager
async def replica(
    cluster: LocalCluster, ns: str, logs: Path, name: str, **flags: str
) -> AsyncIterator[Replica]:
    """This controller as a process named ``name`` (admin credentials), stopped on exit."""
    started = start_replica(
        cluster.kubeconfig,
        ns,
        name,
        logs,
        lease_name="stateful-jobset-canary",
        module="controller",
        extra=flags,
    )
    try:
        yield started
    finally:
        started.process.stop()


def said(started: Replica, level: str, *parts: str) -> list[str]:
    """The replica's log messages of ``level`` that contain every one of ``parts``."""
    return [
        str(line.get("msg"))
        for line in started.log_lines()
        if line.get("level") == level and all(p in str(line.get("msg")) for p in parts)
    ]


def writes_by_us(cluster: LocalCluster, ns: str, names: set[str]) -> list[str]:
    """The API server's record of this project's controller writing any of ``names`` in ``ns``."""
    return [
        f"{audit.write_key(entry)} {entry['objectRef'].get('name')}"
        for entry in audit.entries(cluster.audit_log, "stateful-jobset/")
        if str(entry.get("userAgent", "")).startswith("stateful-jobset/")
        and (entry.get("objectRef") or {}).get("namespace") == ns
        and (entry.get("objectRef") or {}).get("name") in names
    ]


async def test_a_canary_leaves_upstreams_jobsets_as_upstream_treats_them(
    node_cluster: LocalCluster,
    node_kube: Kube,
    node_client: KubeClient,
    node_namespace: str,
    tmp_path: Path,
) -> None:
    ns, client, cluster = node_namespace, node_client, node_cluster
    build = await install_upstream_crd(node_kube)
    try:
        async with upstreamjobset.running_async(
            cluster,
            build,
            install=False,
            webhooks=True,
            leader_election_namespace=UPSTREAM_NAMESPACE,
        ):
            # Before: upstream alone.
            await upstream_treats_it_as_upstream(node_kube, client, ns, "before")

            # This controller with the default --managed-by (upstream's value) refuses to start,
            # naming what it found.
            async with replica(cluster, ns, tmp_path, "default-managed-by") as refused:
                code = await asyncio.to_thread(refused.process.popen.wait, 60)  # type: ignore[union-attr]
                assert code == 1, refused.process.log_tail(20)
                errors = said(
                    refused,
                    "error",
                    "upstream JobSet's controller is running",
                    f"Lease {UPSTREAM_NAMESPACE}/6d4f6a47.jobset.x-k8s.io held by",
                    "validatingwebhookconfiguration/jobset-validating-webhook-configuration",
                    "mutatingwebhookconfiguration/jobset-mutating-webhook-configuration",
                    "--share-upstream-managed-by=true",
                )
                assert errors, refused.process.log_tail(20)

            # During: the canary, installed as the page says.
            overlay = canary_overlay(tmp_path / "canary-overlay")
            await asyncio.to_thread(
                cluster.kubectl, "apply", "--server-side", "--force-conflicts", "-k", str(overlay)
            )
            deployment = await node_kube.raw("GET", DEPLOYMENT)
            (container,) = deployment["spec"]["template"]["spec"]["containers"]
            env = {e["name"]: e.get("value") for e in container["env"]}
            serves = env["STATEFUL_JOBSET_MANAGED_BY"]
            policy = await node_kube.raw("GET", f"{POLICIES}/{specpolicy.POLICY_NAME}")
            assert serves == CANARY == specpolicy.managed_by_of(policy)
            await _until_policy_judges(node_kube, ns)
            async with replica(
                cluster, ns, tmp_path, "canary", **{"--managed-by": serves}
            ) as canary:
                await wait_for(
                    lambda: asyncio.to_thread(said, canary, "info", "runs beside this one"),
                    bool,
                    "the canary to log that upstream runs beside it",
                    seconds=SECONDS,
                )
                assert canary.process.running()

                # Upstream's JobSet, with a claim: judged and run as upstream does, untouched.
                during = await upstream_treats_it_as_upstream(
                    node_kube, client, ns, "during", claim=True
                )
                assert volumes.FINALIZER not in (during["metadata"].get("finalizers") or [])
                claim = await client.get(CLAIMS, "data-during", ns)
                assert OWNER_UID_ANNOTATION not in (claim["metadata"].get("annotations") or {})

                # The canary's JobSet: this project's rules, run here.
                await client.create(api.JOBSETS, coordinated("canary", managedBy=CANARY), ns)
                refused_change = await change(client, ns, "canary", COORDINATOR_CHANGE)
                assert "spec.coordinator: spec.coordinator is immutable" in refused_change
                await client.patch(api.JOBSETS, "canary", RESUME, ns)
                await completed(client, ns, "canary")
                assert writes_by_us(cluster, ns, {"canary"}), "the canary wrote nothing"
                assert writes_by_us(cluster, ns, {"during", "data-during"}) == []

                # Rolling back, as the page says: the canary's JobSets deleted while it runs.
                await client.delete(api.JOBSETS, "canary", ns)
                await wait_for(
                    lambda: _exists(client, ns, "canary"),
                    lambda there: not there,
                    "the canary's JobSet gone",
                    seconds=SECONDS,
                )
            assert canary.process.log_path.exists()
            await asyncio.to_thread(cluster.kubectl, *rollback_command())
            # Upstream's CRD back, as upstream's install applies it.
            await asyncio.to_thread(
                cluster.kubectl,
                "apply",
                "--server-side",
                "--force-conflicts",
                "-f",
                str(build.crd),
            )
            await asyncio.to_thread(
                cluster.kubectl, "wait", "--for=condition=Established", "--timeout=60s",
                "crd/jobsets.jobset.x-k8s.io",
            )  # fmt: skip
            missing = await node_kube.raw("GET", f"{POLICIES}/{specpolicy.POLICY_NAME}")
            assert missing.get("reason") == "NotFound", missing

            # After: upstream alone again.
            await upstream_treats_it_as_upstream(node_kube, client, ns, "after")
            assert writes_by_us(cluster, ns, {"before", "during", "after"}) == []
    finally:
        # Upstream's Lease goes with its namespace: a controller started next would otherwise
        # wait for it to run out.
        await asyncio.to_thread(
            cluster.kubectl, "delete", "namespace", UPSTREAM_NAMESPACE, "--ignore-not-found"
        )


async def _exists(client: KubeClient, ns: str, name: str) -> bool:
    try:
        await client.get(api.JOBSETS, name, ns)
    except ApiError as error:
        if error.not_found:
            return False
        raise
    return True


async def _until_policy_judges(kube: Kube, ns: str) -> None:
    """Wait until the API server enforces the canary's policy (it loads a policy and its binding
    asynchronously): the dry-run create of a JobSet of 10,001 child Jobs is refused by this
    project's ``child-jobs-bounded`` for the canary (upstream has no such bound) and admitted for
    upstream (the default policy, still loaded, would refuse it too)."""
    path = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets?dryRun=All"

    def huge(managed_by: str | None) -> Obj:
        body = jobset(
            "policy-probe",
            shell_job("a", "true", replicas=5001),
            shell_job("b", "true", replicas=5000),
            suspend=True,
        )
        if managed_by:
            body["spec"]["managedBy"] = managed_by
        return body

    async def refusals() -> tuple[str, str]:
        found = []
        for managed_by in (CANARY, None):
            answer = await kube.raw("POST", path, huge(managed_by))
            found.append(str(answer.get("message", "")) if answer.get("kind") == "Status" else "")
        return found[0], found[1]

    policy = f"ValidatingAdmissionPolicy '{specpolicy.POLICY_NAME}'"
    await wait_for(
        refusals,
        lambda found: policy in found[0] and found[1] == "",
        "the API server to enforce the canary's admission policy",
        seconds=30,
    )
