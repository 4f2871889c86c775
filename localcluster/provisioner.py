"""A tiny volume provisioner for the local control plane (stands in for a CSI driver).

kube-controller-manager's PV controller hands claims of our storage classes to an external
provisioner by annotating them with ``volume.kubernetes.io/storage-provisioner``. This process:

- makes a directory for each such claim under ``--volumes-dir`` (on this host, which is also the
  real node's host in the ``node`` profile) and creates a ``hostPath`` PersistentVolume for it,
  pre-bound to the claim (for WaitForFirstConsumer classes only once the scheduler picked a node,
  with node affinity to it), so the PV controller binds them and the kubelet mounts the
  directory;
- expands volumes when a bound claim's request grows and its class allows expansion (the job of
  the external-resizer): PV capacity first, then the claim's status capacity;
- deletes Released volumes whose reclaim policy is Delete: their directory (with its data) first,
  then the PV. A Retain volume, and its directory, are kept.

Run: ``python -m localcluster.provisioner --kubeconfig FILE --volumes-dir DIR``.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import sys
from pathlib import Path
from typing import Any, cast

import aiohttp
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
# A failed sync is tried again after 1 s, then twice as long each time, at most every 30 s.
RETRY_FIRST = 1.0
RETRY_CAP = 30.0

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


def volume_directory(volumes_dir: Path, claim_uid: str) -> Path:
    return volumes_dir / claim_uid


def desired_volume(claim: Obj, storage_class: Obj, volumes_dir: Path) -> Obj | None:
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
            "hostPath": {
                "path": str(volume_directory(volumes_dir, meta["uid"])),
                "type": "Directory",
            },
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


def owned_directory(volume: Obj, volumes_dir: Path) -> Path | None:
    """The directory of one of our volumes, only if it is inside ``volumes_dir`` (a PV edited to
    point elsewhere never makes us delete that path)."""
    path = ((volume.get("spec") or {}).get("hostPath") or {}).get("path")
    if not path:
        return None
    directory = Path(path).resolve()
    root = volumes_dir.resolve()
    return directory if directory.parent == root else None


def _make_directory(directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o777)  # any pod user may write, as on a fresh filesystem


def _said(err: BaseException) -> str:
    if isinstance(err, ApiException):
        return f"{err.status} {err.reason}"
    return f"{type(err).__name__}: {err}"


class Provisioner:
    def __init__(self, api: client.ApiClient, volumes_dir: Path) -> None:
        self.core = client.CoreV1Api(api)
        self.storage = client.StorageV1Api(api)
        self.api = api
        self.volumes_dir = volumes_dir
        # The objects whose sync failed, each tried again by a task of its own.
        self._retries: dict[tuple[str, str, str], asyncio.Task[None]] = {}

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
            volume = desired_volume(claim, storage_class, self.volumes_dir)
            if volume is None:
                return
            directory = volume_directory(self.volumes_dir, claim["metadata"]["uid"])
            await asyncio.to_thread(_make_directory, directory)
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
            directory = owned_directory(volume, self.volumes_dir)
            if directory is not None and directory.exists():
                await asyncio.to_thread(shutil.rmtree, directory)
                log.info("removed %s of released volume %s", directory, volume["metadata"]["name"])
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
        """Syncs ``obj``; a failure is tried again later, from a fresh read (``_retry``): the
        watch brings an object back only when it changes, and a claim nobody touches again
        would stay Pending for good."""
        try:
            await self._sync_once(kind, obj, classes)
        except (ApiException, aiohttp.ClientError, OSError, TimeoutError) as err:
            meta = obj["metadata"]
            key = (kind, meta.get("namespace") or "", meta["name"])
            log.warning("sync of %s %s/%s failed (%s); trying again", *key, _said(err))
            if key not in self._retries:
                task = asyncio.create_task(self._retry(*key))
                self._retries[key] = task
                task.add_done_callback(lambda _: self._retries.pop(key, None))

    async def _sync_once(self, kind: str, obj: Obj, classes: dict[str, Obj]) -> None:
        if kind == "claims":
            await self.sync_claim(obj, classes)
        else:
            await self.sync_volume(obj)

    async def _retry(self, kind: str, namespace: str, name: str) -> None:
        """Reads the object again and syncs it, with backoff, until that succeeds or it is
        gone."""
        delay = RETRY_FIRST
        while True:
            await asyncio.sleep(delay)
            delay = min(delay * 2, RETRY_CAP)
            try:
                if kind == "claims":
                    read: Any = await self.core.read_namespaced_persistent_volume_claim(
                        name, namespace, _preload_content=False
                    )
                else:
                    read = await self.core.read_persistent_volume(name, _preload_content=False)
                obj = await read.json()
                await self._sync_once(kind, obj, await self._classes())
            except ApiException as err:
                if err.status == 404:
                    return  # gone: nothing to do
                log.warning("retried sync of %s %s/%s failed (%s)", kind, namespace, name,
                            _said(err))  # fmt: skip
            except (aiohttp.ClientError, OSError, TimeoutError) as err:
                log.warning("retried sync of %s %s/%s failed (%s)", kind, namespace, name,
                            _said(err))  # fmt: skip
            else:
                log.info("retried sync of %s %s/%s done", kind, namespace, name)
                return

    async def run(self) -> None:
        await self._classes()  # fail fast if the API server is unreachable
        print(READY_LINE, flush=True)
        await asyncio.gather(self._watch("claims"), self._watch("volumes"))


async def _main(kubeconfig: str, volumes_dir: Path) -> None:
    api = await config.new_client_from_config(config_file=kubeconfig)
    async with api:
        await Provisioner(api, volumes_dir).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--volumes-dir", type=Path, required=True, help="one directory per volume")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(levelname)s %(message)s"
    )
    args.volumes_dir.mkdir(parents=True, exist_ok=True)
    try:
        asyncio.run(_main(args.kubeconfig, args.volumes_dir))
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
