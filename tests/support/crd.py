"""Install the committed JobSet CRD and its admission policy into a test cluster (idempotent, safe
to call concurrently)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import hashlib
import json
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import yaml

from controller.api import specpolicy
from tests.helpers import Kube, wait_for

REPO = Path(__file__).resolve().parents[2]
CRD_FILE = REPO / "manifests" / "crd" / "jobsets.jobset.x-k8s.io.yaml"
# The CRD with every alpha feature gate on (controller/features.py): install_crd(kube, this)
# switches the session's API server to it until the next test's `client` fixture switches back.
ALPHA_CRD_FILE = REPO / "manifests/components/alpha-features/jobsets.jobset.x-k8s.io.yaml"
# The spec's cross-field and immutability rules (controller/api/specpolicy.py), per CRD variant,
# and the binding both share.
POLICY_FILES = {
    CRD_FILE: REPO / "manifests" / "crd" / "policy.yaml",
    ALPHA_CRD_FILE: REPO / "manifests/components/alpha-features/policy.yaml",
}
BINDING_FILE = REPO / "manifests" / "crd" / "binding.yaml"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
CRD_NAME = "jobsets.jobset.x-k8s.io"
CRD_PATH = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}"
FIELD_MANAGER = "stateful-jobset-tests"
# The applied file's digest, so that a later install of the same content skips the apply (the API
# server re-checks every CEL rule's cost on each write of the CRD, which takes about a second).
DIGEST_ANNOTATION = "tests.stateful-jobset/crd-sha256"


def load_crd(path: Path = CRD_FILE) -> dict[str, Any]:
    """The object in ``path``, its content's digest in an annotation."""
    text = path.read_text()
    crd = yaml.safe_load(text)
    assert isinstance(crd, dict), f"{path} is not a YAML mapping"
    annotations = crd["metadata"].setdefault("annotations", {})
    annotations[DIGEST_ANNOTATION] = hashlib.sha256(text.encode()).hexdigest()
    return crd


async def _patch(
    kube: Kube, path: str, body: dict[str, Any], content_type: str, query: list[tuple[str, str]]
) -> tuple[int, str]:
    """A PATCH of ``path`` sent as is: the answer's status and text, whatever they are."""
    response = await kube.api.call_api(
        path,
        "PATCH",
        query_params=query,
        header_params={"Content-Type": content_type, "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    async with response:
        return int(response.status), await response.text()


async def _apply(kube: Kube, crd: dict[str, Any], path: str = CRD_PATH) -> tuple[int, str]:
    """Server-side apply: creates the object or brings it to the committed content; no-op if
    equal."""
    query = [("fieldManager", FIELD_MANAGER), ("force", "true")]
    return await _patch(kube, path, crd, "application/apply-patch+yaml", query)


def _established(crd: Any) -> bool:
    status = crd.get("status") if isinstance(crd, dict) else None
    conditions = (status or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


async def install_crd(kube: Kube, path: Path = CRD_FILE) -> None:
    """Apply ``path`` (by default manifests/crd/jobsets.jobset.x-k8s.io.yaml) and its admission
    policy and binding, and wait until the CRD is Established and the policy in force.

    Use the admin client (the ``kube`` fixture): CRDs are cluster-scoped and shared by every test
    of the session. Concurrent or earlier installs of the same content are harmless; a conflict
    (two appliers racing) is retried.
    """
    await _install_crd(kube, path)
    await _install_policy(kube, POLICY_FILES[path])


async def install_crd_only(kube: Kube, path: Path) -> None:
    """Apply the CRD in ``path`` alone, no admission policy (upstream JobSet's CRD, in the
    migration tests): applied by the same field manager as ``install_crd``, it replaces the
    installed CRD field for field, as ``kubectl apply --server-side --force-conflicts`` does."""
    await _install_crd(kube, path)


async def install_other_crds(kube: Kube, paths: list[Path]) -> None:
    """Apply other projects' CRDs as they are (say, the VolumeSnapshot CRDs of
    external-snapshotter's client module) and wait until each is Established."""
    for path in paths:
        crd = yaml.safe_load(path.read_text())
        url = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
        await _apply_retrying(kube, crd, url, path)
        await wait_for(
            lambda url=url: kube.raw("GET", url),  # type: ignore[misc]
            _established,
            f"CRD {crd['metadata']['name']} to be Established",
            seconds=30,
        )


async def wait_policy_gone(kube: Kube) -> None:
    """Wait until the API server no longer enforces this project's rules on JobSets (its
    admission policy's binding deleted, or upstream's CRD in place of ours): it drops them
    asynchronously, and a JobSet created meanwhile is still judged by them."""
    await wait_for(
        lambda: _probe_policy(kube),
        lambda message: message == "",
        "the API server to stop enforcing this project's JobSet rules",
        seconds=30,
    )


async def _apply_retrying(kube: Kube, obj: dict[str, Any], path: str, what: Path) -> None:
    """Apply, again after a conflict (another writer), and after an API server too loaded to
    answer in time (429, or 5xx: a 504 "context deadline exceeded" came from the admission
    policy's CEL being type-checked while four test groups saturated the machine; the apply is
    idempotent, so the next one finds it done or does it)."""
    for attempt in range(5):
        status, text = await _apply(kube, obj, path)
        if 200 <= status < 300:
            return
        transient = status == 409 or status == 429 or status >= 500
        if not transient or attempt == 4:
            raise AssertionError(f"applying {what} failed: {status} {text}")
        await asyncio.sleep(0.2 if status == 409 else 2.0)


POLICIES_PATH = f"{ADMISSION}/validatingadmissionpolicies"


def policy_serving(managed_by: str, policy_file: Path = POLICY_FILES[CRD_FILE]) -> dict[str, Any]:
    """The committed policy with its ``managedBy`` variable set to ``managed_by``, as an install
    for a controller serving it has it; its digest annotation says so, so that the next
    ``install_crd`` puts the committed one back."""
    policy = load_crd(policy_file)
    (variable,) = [v for v in policy["spec"]["variables"] if v["name"] == specpolicy.MANAGED_BY]
    variable["expression"] = specpolicy.managed_by_literal(managed_by)
    policy["metadata"]["annotations"][DIGEST_ANNOTATION] = f"serving {managed_by}"
    return policy


async def install_policy_serving(kube: Kube, managed_by: str) -> None:
    """Apply ``policy_serving(managed_by)`` (the API server loads it a moment later)."""
    policy = policy_serving(managed_by)
    path = f"{POLICIES_PATH}/{policy['metadata']['name']}"
    await _apply_retrying(kube, policy, path, POLICY_FILES[CRD_FILE])


async def _install_policy(kube: Kube, policy_file: Path) -> None:
    """The policy and the binding, then a probe until the API server enforces this policy (it
    loads policies asynchronously, about a second)."""
    policy = load_crd(policy_file)
    binding = load_crd(BINDING_FILE)
    policies = f"{ADMISSION}/validatingadmissionpolicies"
    bindings = f"{ADMISSION}/validatingadmissionpolicybindings"
    for obj, path, source in (
        (policy, f"{policies}/{policy['metadata']['name']}", policy_file),
        (binding, f"{bindings}/{binding['metadata']['name']}", BINDING_FILE),
    ):
        # Applied only when it differs: most tests find it installed (a 70 KB apply is not free).
        current = await kube.raw("GET", path)
        installed = (current.get("metadata") or {}).get("annotations") or {}
        if installed.get(DIGEST_ANNOTATION) != obj["metadata"]["annotations"][DIGEST_ANNOTATION]:
            await _apply_retrying(kube, obj, path, source)
    # The suspended-update rule's message (the alpha variant's says more), as the policy's one
    # message expression quotes it.
    quoted = re.search(
        r"'(spec\.replicatedJobs: while the JobSet is suspended[^']*)'",
        policy["spec"]["validations"][0]["messageExpression"],
    )
    assert quoted, f"{policy_file}: no suspended-update rule"
    expected = quoted.group(1)
    await wait_for(
        lambda: _probe_policy(kube),
        lambda message: message.endswith(expected) or f"{expected};" in message,
        f"the API server to enforce {policy_file.relative_to(REPO)}",
        seconds=30,
    )


# A suspended JobSet another controller manages (no controller of the tests touches it), created,
# changed by a dry run, deleted: which of the two policies' suspended-update rules refuses it.
PROBE_JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"
PROBE: dict[str, Any] = {
    "apiVersion": "jobset.x-k8s.io/v1alpha2",
    "kind": "JobSet",
    "metadata": {"generateName": "policy-probe-"},
    "spec": {
        "suspend": True,
        "managedBy": "tests.stateful-jobset/policy-probe",
        "replicatedJobs": [
            {
                "name": "probe",
                "template": {
                    "spec": {
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [{"name": "probe", "image": "before"}],
                            }
                        }
                    }
                },
            }
        ],
    },
}


async def _probe_policy(kube: Kube) -> str:
    """The message of the dry-run refusal of a suspended JobSet's image change ("" if none)."""
    created = await kube.raw("POST", PROBE_JOBSETS, PROBE)
    name = (created.get("metadata") or {}).get("name")
    if created.get("kind") != "JobSet" or not name:
        return ""
    try:
        changed = copy.deepcopy(created)
        pod = changed["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        pod["containers"][0]["image"] = "after"
        refused = await kube.raw("PUT", f"{PROBE_JOBSETS}/{name}?dryRun=All", changed)
        return str(refused.get("message", "")) if refused.get("kind") == "Status" else ""
    finally:
        await kube.raw("DELETE", f"{PROBE_JOBSETS}/{name}")


async def _install_crd(kube: Kube, path: Path) -> None:
    crd = load_crd(path)
    current = await kube.raw("GET", CRD_PATH)
    digest = crd["metadata"]["annotations"][DIGEST_ANNOTATION]
    installed = (current.get("metadata") or {}).get("annotations") or {}
    if installed.get(DIGEST_ANNOTATION) == digest and _established(current):
        return
    await _apply_retrying(kube, crd, CRD_PATH, path)
    await wait_for(
        lambda: kube.raw("GET", CRD_PATH),
        _established,
        f"CRD {CRD_NAME} to be Established",
        seconds=30,
    )
    # Established means the API server serves the resource; a first list proves it to clients.
    await wait_for(
        lambda: kube.raw("GET", "/apis/jobset.x-k8s.io/v1alpha2/jobsets?limit=1"),
        lambda listed: isinstance(listed, dict) and listed.get("kind") == "JobSetList",
        "the jobsets resource to be served",
        seconds=30,
    )


@contextlib.asynccontextmanager
async def alpha_crd_installed(kube: Kube) -> AsyncIterator[None]:
    """The CRD with every alpha gate on (``ALPHA_CRD_FILE``) for the body of the ``async with``;
    the default CRD again after it, even when the body fails. The CRD is the session's, shared by
    every test: other tests never see the alpha one (their ``client`` fixture installs the
    default one too, should a test end without this)."""
    await install_crd(kube, ALPHA_CRD_FILE)
    try:
        yield
    finally:
        await install_crd(kube, CRD_FILE)


async def dry_run_refusal(kube: Kube, ns: str, name: str, patch: dict[str, Any]) -> str:
    """The API server's refusal of a merge patch of the JobSet ``name`` applied with ``dryRun``
    ("" when admitted): nothing is stored either way."""
    path = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/{ns}/jobsets/{name}"
    _, text = await _patch(kube, path, patch, "application/merge-patch+json", [("dryRun", "All")])
    answer = json.loads(text)
    return str(answer.get("message", "")) if answer.get("kind") == "Status" else ""
