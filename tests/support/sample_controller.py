"""A minimal controller on the generic runtime, for testing the runtime as a real process.

It reconciles ConfigMaps labelled ``sample=yes``: the annotation ``sample.test/echo`` must equal
``data.v``. It writes only when they differ, so at steady state it writes nothing. Run it with the
controller's own flags: ``python -m tests.support.sample_controller --kubeconfig ...``.
"""

from __future__ import annotations

import sys

import structlog

from controller.app import main
from controller.config import Config
from controller.runtime.client import CONFIG_MAPS
from controller.runtime.controller import Result
from controller.runtime.informer import EventHandler
from controller.runtime.manager import Manager
from controller.runtime.store import Obj, object_key, split_key

ANNOTATION = "sample.test/echo"
log = structlog.get_logger("sample")


def setup(manager: Manager[Config]) -> None:
    cache = manager.cache(CONFIG_MAPS, label_selector="sample=yes")
    queue = manager.queue("sample")

    def enqueue(obj: Obj) -> None:
        queue.add(object_key(obj))

    cache.add_handler(
        EventHandler(on_add=enqueue, on_update=lambda _, new: enqueue(new), on_delete=enqueue)
    )

    async def reconcile(key: str) -> Result:
        namespace, name = split_key(key)
        obj = cache.get(namespace, name)
        if obj is None:
            return Result()
        want = (obj.get("data") or {}).get("v", "")
        have = (obj["metadata"].get("annotations") or {}).get(ANNOTATION)
        if have != want:
            log.info("echoing", value=want)
            await manager.client.patch(
                CONFIG_MAPS, name, {"metadata": {"annotations": {ANNOTATION: want}}}, namespace
            )
            manager.recorder.event(obj, "Normal", "Echoed", f"echoed v={want}")
        return Result()

    manager.controller("sample", queue, reconcile, object_label="configmap", workers=2)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], setup))
