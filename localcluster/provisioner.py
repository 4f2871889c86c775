"""A tiny volume provisioner for the local control plane (stands in for a CSI driver).

kube-controller-manager's PV controller hands claims of our storage classes to an external
provisioner by annotating them with ``volume.kubernetes.io/storage-provisioner``. This process:

- creates a PersistentVolume pre-bound to each such claim (for WaitForFirstConsumer classes only
  once the scheduler picked a node, with node affinity to it), so the PV controller binds them;
- expands volumes when a bound claim's request grows and its class allows expansion (the job of
  the external-resizer): PV capacity first, then the claim's status capacity;
- deletes Released volumes whose reclaim policy is Delete.

Run: ``python -m localcluster.provisioner --kubeconfig FILE``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any, cast

from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.exceptions import ApiException

PROVISIONER_NAME = "localcluster.test/hostpath"
READY_LINE = "provisioner ready"
_PROVISIONER_ANNOTATIONS = (
    "volume.kubernetes.io/storage-provisioner",
    "volume.beta.kubernetes.io/storage-provisioner",
)
_SELECTED_NODE = "volume.kubernetes.io/selected-node"

log = logging.getLogger("provisioner")

Obj = dict[str, Any]


def _quantity_bytes(value: str) -> int:
    """Parse a Kubernetes quantity of bytes (enough for storage requests)."""
    suffixes = {
        "Ki": 2**10,
        "Mi": 2**20,
        "Gi": 2**30,
        "Ti": 2**40,
        "Pi": 2**50,
        "Ei": 2**60,
        "k": 10**3,
        "M": 10**6,
        "G": 10**9,
        "T": 10**12,
        "P": 10**15,
        "E": 10**18,
    }
    for suffix, factor in suffixes.items():
        if value.endswith(suffix):
            return int(float(value[: -len(suffix)]) * factor)
    return int(float(value))


def desired_volume(claim: Obj, storage_class: Obj) -> Obj | None:
    """The PV to create for a claim, or None if it must wait (WaitForFirstConsumer, no node)."""
    meta = claim["metadata"]
    spec = claim["spec"]
    annotations = meta.get("annotations") or {}
    volume: Obj = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"pvc-{meta['uid']}",
            "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER_NAME},
        },
        "spec": {
            "capacity": {"storage": spec["resources"]["requests"]["storage"]},
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "volumeMode": spec.get("volumeMode") or "Filesystem",
            "storageClassName": storage_class["metadata"]["name"],
            "persistentVolumeReclaimPolicy": storage_class.get("reclaimPolicy") or "Delete",
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
            "hostPath": {"path": f"/tmp/localcluster-volumes/{meta['uid']}"},
        },
    }
    if storage_class.get("volumeBindingMode") == "WaitForFirstConsumer":
        node = annotations.get(_SELECTED_NODE)
        if not node:
            return None
        volume["spec"]["nodeAffinity"] = {
            "required": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                        ]
                    }
                ]
            }
        }
    return volume


class Provisioner:
    def __init__(self, api: client.ApiClient) -> None:
        self.core = client.CoreV1Api(api)
        self.storage = client.StorageV1Api(api)
        self.api = api

    async def _classes(self) -> dict[str, Obj]:
        listed: Any = await self.storage.list_storage_class(_preload_content=False)
        items = (await listed.json())["items"]
        return {c["metadata"]["name"]: c for c in items if c["provisioner"] == PROVISIONER_NAME}

    async def sync_claim(self, claim: Obj, classes: dict[str, Obj]) -> None:
        annotations = claim["metadata"].get("annotations") or {}
        if not any(annotations.get(a) == PROVISIONER_NAME for a in _PROVISIONER_ANNOTATIONS):
            return
        storage_class = classes.get(claim["spec"].get("storageClassName") or "")
        if storage_class is None or claim["metadata"].get("deletionTimestamp"):
            return
        phase = (claim.get("status") or {}).get("phase")
        if phase == "Pending" and not claim["spec"].get("volumeName"):
            volume = desired_volume(claim, storage_class)
            if volume is None:
                return
            try:
                await self.core.create_persistent_volume(cast(Any, volume))
                log.info(
                    "provisioned %s for %s/%s",
                    volume["metadata"]["name"],
                    claim["metadata"]["namespace"],
                    claim["metadata"]["name"],
                )
            except ApiException as err:
                if err.status != 409:
                    raise
        elif phase == "Bound" and storage_class.get("allowVolumeExpansion"):
            await self._expand(claim)

    async def _expand(self, claim: Obj) -> None:
        requested = claim["spec"]["resources"]["requests"]["storage"]
        capacity = ((claim.get("status") or {}).get("capacity") or {}).get("storage", "0")
        if _quantity_bytes(requested) <= _quantity_bytes(capacity):
            return
        name = claim["spec"]["volumeName"]
        await self.core.patch_persistent_volume(
            name, {"spec": {"capacity": {"storage": requested}}}
        )
        await self.core.patch_namespaced_persistent_volume_claim_status(
            claim["metadata"]["name"],
            claim["metadata"]["namespace"],
            {
                "status": {
                    "capacity": {"storage": requested},
                    "allocatedResources": {"storage": requested},
                    "conditions": None,
                }
            },
        )
        log.info(
            "expanded %s/%s to %s",
            claim["metadata"]["namespace"],
            claim["metadata"]["name"],
            requested,
        )

    async def sync_volume(self, volume: Obj) -> None:
        annotations = volume["metadata"].get("annotations") or {}
        if annotations.get("pv.kubernetes.io/provisioned-by") != PROVISIONER_NAME:
            return
        released = (volume.get("status") or {}).get("phase") in ("Released", "Failed")
        if released and volume["spec"].get("persistentVolumeReclaimPolicy") == "Delete":
            try:
                await self.core.delete_persistent_volume(volume["metadata"]["name"])
                log.info("deleted released volume %s", volume["metadata"]["name"])
            except ApiException as err:
                if err.status != 404:
                    raise

    async def _watch(self, kind: str) -> None:
        """List then watch one kind forever; on any error, back off and start over."""
        lister: Any = (
            self.core.list_persistent_volume_claim_for_all_namespaces
            if kind == "claims"
            else self.core.list_persistent_volume
        )
        while True:
            try:
                classes = await self._classes()
                listed: Any = await lister(_preload_content=False)
                body = await listed.json()
                for item in body["items"]:
                    await self._sync(kind, item, classes)
                stream = watch.Watch()
                async with stream.stream(
                    lister,
                    resource_version=body["metadata"]["resourceVersion"],
                    timeout_seconds=300,
                ) as events:
                    async for event in events:
                        if event["type"] in ("ADDED", "MODIFIED"):
                            obj = event["raw_object"]
                            if kind == "claims":
                                classes = await self._classes()
                            await self._sync(kind, obj, classes)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # keep provisioning whatever went wrong
                log.warning("%s watch restarting after error: %s", kind, err)
                await asyncio.sleep(1)

    async def _sync(self, kind: str, obj: Obj, classes: dict[str, Obj]) -> None:
        try:
            if kind == "claims":
                await self.sync_claim(obj, classes)
            else:
                await self.sync_volume(obj)
        except ApiException as err:
            log.warning(
                "sync of %s %s failed: %s %s",
                kind,
                obj["metadata"].get("name"),
                err.status,
                err.reason,
            )

    async def run(self) -> None:
        await self._classes()  # fail fast if the API server is unreachable
        print(READY_LINE, flush=True)
        await asyncio.gather(self._watch("claims"), self._watch("volumes"))


async def _main(kubeconfig: str) -> None:
    api = await config.new_client_from_config(config_file=kubeconfig)
    async with api:
        await Provisioner(api).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(levelname)s %(message)s"
    )
    try:
        asyncio.run(_main(args.kubeconfig))
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
