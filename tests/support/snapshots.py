"""Playing the snapshot controller in tests that run none (integration, KWOK end-to-end): the
VolumeSnapshots of a claim, and a status as external-snapshotter's controller would write it."""

from __future__ import annotations

import datetime
from typing import Any

from controller.runtime.client import VOLUME_SNAPSHOTS, KubeClient

Obj = dict[str, Any]


async def snapshots_of(client: KubeClient, namespace: str, claim: str) -> list[Obj]:
    """The VolumeSnapshots whose source is the claim named ``claim``."""
    listed = (await client.list(VOLUME_SNAPSHOTS, namespace))["items"]
    return [s for s in listed if s["spec"]["source"].get("persistentVolumeClaimName") == claim]


async def set_snapshot_status(client: KubeClient, namespace: str, name: str, status: Obj) -> None:
    """The snapshot controller's part: ``status`` (readyToUse, error) with a creationTime."""
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {"status": {"creationTime": now, **status}}
    await client.patch(VOLUME_SNAPSHOTS, name, body, namespace, subresource="status")
