"""What happened in a namespace, in etcd order: every watch event of some resources from a
moment on. One etcd's revisions count every write of every resource, so the resourceVersion an
object had when first seen in a state orders it against any other write the test recorded."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

from controller.runtime.client import KubeClient, Resource

Obj = dict[str, Any]


@asynccontextmanager
async def watch_events(
    client: KubeClient, namespace: str, resources: Iterable[Resource]
) -> AsyncIterator[list[Obj]]:
    """Every watch event of the namespace's ``resources`` from now on, in the order each stream
    delivered them (the streams' lists are read before this yields)."""
    seen: list[Obj] = []
    starts = {
        resource: (await client.list(resource, namespace))["metadata"]["resourceVersion"]
        for resource in resources
    }

    async def follow(resource: Resource, since: str) -> None:
        async with client.watch(
            resource, namespace, resource_version=since, timeout_seconds=900
        ) as lines:
            async for line in lines:
                event = json.loads(line)
                if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                    seen.append(event)
        raise AssertionError(f"the watch of {resource.plural} ended before the test did")

    tasks = [asyncio.create_task(follow(r, rv)) for r, rv in starts.items()]
    try:
        yield seen
    finally:
        for task in tasks:
            task.cancel()
        ended = await asyncio.gather(*tasks, return_exceptions=True)
    # A stream that broke before the end would leave the record short: say so.
    broken = [e for e in ended if isinstance(e, Exception)]
    assert not broken, f"a watch of the test's recording ended early: {broken}"


def first_revision(
    seen: list[Obj], kind: str, name: str | None, holds: Callable[[Obj], bool]
) -> int | None:
    """The resourceVersion (an etcd revision) of the first event of ``kind``/``name`` (None: of
    any name) whose object satisfies ``holds``."""
    revisions = [
        int(e["object"]["metadata"]["resourceVersion"])
        for e in seen
        if e["object"].get("kind") == kind
        and (name is None or e["object"]["metadata"]["name"] == name)
        and holds(e["object"])
    ]
    return min(revisions) if revisions else None
