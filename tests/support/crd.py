"""Install the committed JobSet CRD into a test cluster (idempotent, safe to call concurrently)."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import Kube, wait_for

REPO = Path(__file__).resolve().parents[2]
CRD_FILE = REPO / "manifests" / "crd" / "jobsets.jobset.x-k8s.io.yaml"
# The CRD with every alpha feature gate on (controller/features.py): install_crd(kube, this)
# switches the session's API server to it until the next test's `client` fixture switches back.
ALPHA_CRD_FILE = REPO / "manifests/components/alpha-features/jobsets.jobset.x-k8s.io.yaml"
CRD_NAME = "jobsets.jobset.x-k8s.io"
CRD_PATH = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}"
FIELD_MANAGER = "stateful-jobset-tests"
# The applied file's digest, so that a later install of the same content skips the apply (the API
# server re-checks every CEL rule's cost on each write of the CRD, which takes about a second).
DIGEST_ANNOTATION = "tests.stateful-jobset/crd-sha256"


def load_crd(path: Path = CRD_FILE) -> dict[str, Any]:
    text = path.read_text()
    crd = yaml.safe_load(text)
    assert isinstance(crd, dict), f"{path} is not a YAML mapping"
    annotations = crd["metadata"].setdefault("annotations", {})
    annotations[DIGEST_ANNOTATION] = hashlib.sha256(text.encode()).hexdigest()
    return crd


async def _apply(kube: Kube, crd: dict[str, Any]) -> tuple[int, str]:
    """Server-side apply: creates the CRD or brings it to the committed content; no-op if equal."""
    response = await kube.api.call_api(
        CRD_PATH,
        "PATCH",
        query_params=[("fieldManager", FIELD_MANAGER), ("force", "true")],
        header_params={
            "Content-Type": "application/apply-patch+yaml",
            "Accept": "application/json",
        },
        body=crd,
        auth_settings=["BearerToken"],
        _preload_content=False,
        _return_http_data_only=True,
    )
    async with response:
        return int(response.status), await response.text()


def _established(crd: Any) -> bool:
    status = crd.get("status") if isinstance(crd, dict) else None
    conditions = (status or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


async def install_crd(kube: Kube, path: Path = CRD_FILE) -> None:
    """Apply ``path`` (by default manifests/crd/jobsets.jobset.x-k8s.io.yaml) and wait until it is
    Established.

    Use the admin client (the ``kube`` fixture): CRDs are cluster-scoped and shared by every test
    of the session. Concurrent or earlier installs of the same content are harmless; a conflict
    (two appliers racing) is retried.
    """
    crd = load_crd(path)
    current = await kube.raw("GET", CRD_PATH)
    digest = crd["metadata"]["annotations"][DIGEST_ANNOTATION]
    installed = (current.get("metadata") or {}).get("annotations") or {}
    if installed.get(DIGEST_ANNOTATION) == digest and _established(current):
        return
    for attempt in range(5):
        status, text = await _apply(kube, crd)
        if 200 <= status < 300:
            break
        if status != 409 or attempt == 4:
            raise AssertionError(f"applying {path} failed: {status} {text}")
        await asyncio.sleep(0.2)
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
