"""The informer against a real API server: list+watch, resume, 410 re-list, restarts, transform."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import aiohttp
from kubernetes_asyncio.client import ApiClient

from controller.runtime.client import CONFIG_MAPS, ApiError, KubeClient, Resource
from controller.runtime.informer import Backoff, EventHandler, Informer
from controller.runtime.store import Obj
from tests.helpers import Kube, current, wait_for

SELECTOR = "informer-test=yes"
MARKER = "marker-"
Event = tuple[str, str]


@dataclass
class Recorder:
    events: list[tuple[str, str]] = field(default_factory=list)

    def handler(self) -> EventHandler:
        return EventHandler(
            on_add=lambda o: self.events.append(("add", o["metadata"]["name"])),
            on_update=lambda old, new: self.events.append(("update", new["metadata"]["name"])),
            on_delete=lambda o: self.events.append(("delete", o["metadata"]["name"])),
        )

    def take(self) -> list[tuple[str, str]]:
        taken, self.events = self.events, []
        return taken


def _client(api: ApiClient, **kwargs: object) -> KubeClient:
    return KubeClient(api, **kwargs)  # type: ignore[arg-type]


@asynccontextmanager
async def running(informer: Informer) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(informer.run())
    try:
        await asyncio.wait_for(informer.synced.wait(), 30)
        yield task
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _cm(kube: KubeClient, ns: str, name: str, value: str = "0") -> Obj:
    body = {"metadata": {"name": name, "labels": {"informer-test": "yes"}}, "data": {"v": value}}
    return await kube.create(CONFIG_MAPS, body, ns)


async def _delivered(client: KubeClient, namespace: str, recorder: Recorder) -> list[Event]:
    """Every event delivered for what was written so far, taken from the recorder.

    A marker ConfigMap is written and its add awaited: the watch delivers events in
    resourceVersion order and the informer emits them as they come (it has no timer here), so
    nothing written before the marker can still arrive. The marker's own add is left out."""
    marker = f"{MARKER}{uuid.uuid4().hex[:6]}"
    await _cm(client, namespace, marker)
    await wait_for(
        current(lambda: list(recorder.events)),
        lambda events: ("add", marker) in events,
        f"the marker {marker} to be delivered",
        seconds=30,
    )
    return [e for e in recorder.take() if e != ("add", marker)]


def _keys(informer: Informer) -> list[str]:
    """The cache's keys, markers left out."""
    return sorted(k for k in informer.store.keys() if MARKER not in k)  # noqa: SIM118 (iterating a Store yields objects)


async def test_list_then_watch(kube: Kube, namespace: str) -> None:
    client = _client(kube.api)
    for i in range(3):
        await _cm(client, namespace, f"pre-{i}")
    await client.create(CONFIG_MAPS, {"metadata": {"name": "unlabelled"}}, namespace)
    informer = Informer(client, CONFIG_MAPS, namespace=namespace, label_selector=SELECTOR)
    recorder = Recorder()
    informer.add_handler(recorder.handler())
    async with running(informer):
        assert sorted(recorder.take()) == [("add", f"pre-{i}") for i in range(3)]
        await _cm(client, namespace, "live")
        await client.patch(CONFIG_MAPS, "pre-0", {"data": {"v": "1"}}, namespace)
        await client.delete(CONFIG_MAPS, "pre-1", namespace)
        delivered = await _delivered(client, namespace, recorder)
        assert delivered == [("add", "live"), ("update", "pre-0"), ("delete", "pre-1")]
        assert _keys(informer) == [f"{namespace}/{n}" for n in ("live", "pre-0", "pre-2")]
        assert informer.store.get(f"{namespace}/pre-0")["data"] == {"v": "1"}  # type: ignore[index]


async def test_a_big_object_and_a_burst_of_small_ones_arrive_whole(
    kube: Kube, namespace: str
) -> None:
    """The watch stream's events are cut out of its chunks (``LineSplitter``): an object near a
    ConfigMap's 1 MiB limit spans many chunks, a burst of small ones shares them."""
    client = _client(kube.api)
    informer = Informer(client, CONFIG_MAPS, namespace=namespace, label_selector=SELECTOR)
    recorder = Recorder()
    informer.add_handler(recorder.handler())
    big = "".join(chr(ord("a") + i % 26) for i in range(1_000_000))
    async with running(informer):
        await _cm(client, namespace, "big", big)
        await asyncio.gather(*(_cm(client, namespace, f"small-{i}", str(i)) for i in range(50)))
        delivered = await _delivered(client, namespace, recorder)
        assert sorted(delivered) == sorted(
            [("add", "big")] + [("add", f"small-{i}") for i in range(50)]
        )
        assert informer.store.get(f"{namespace}/big")["data"] == {"v": big}  # type: ignore[index]
        for i in range(50):
            small = informer.store.get(f"{namespace}/small-{i}")
            assert small is not None and small["data"] == {"v": str(i)}


async def test_changes_while_disconnected_are_seen_on_resume(kube: Kube, namespace: str) -> None:
    client = _client(kube.api)
    await _cm(client, namespace, "a")
    await _cm(client, namespace, "b")
    informer = Informer(client, CONFIG_MAPS, namespace=namespace, label_selector=SELECTOR)
    recorder = Recorder()
    informer.add_handler(recorder.handler())
    async with running(informer):
        recorder.take()
    # Disconnected: the informer keeps its cache and resourceVersion.
    await _cm(client, namespace, "c")
    await client.patch(CONFIG_MAPS, "a", {"data": {"v": "2"}}, namespace)
    await client.delete(CONFIG_MAPS, "b", namespace)
    async with running(informer):
        delivered = await _delivered(client, namespace, recorder)
    assert delivered == [("add", "c"), ("update", "a"), ("delete", "b")]
    assert informer.relists == 1  # resumed from the resourceVersion, no re-list needed


async def _compact(etcd_url: str, revision: str) -> None:
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            f"{etcd_url}/v3/kv/compaction", json={"revision": revision, "physical": True}
        ) as response,
    ):
        assert response.status == 200, await response.text()


async def test_gone_relists_and_emits_exactly_the_missed_changes(
    kube: Kube, namespace: str
) -> None:
    client = _client(kube.api)
    for name in ("keep", "change", "remove"):
        await _cm(client, namespace, name)
    informer = Informer(client, CONFIG_MAPS, namespace=namespace, label_selector=SELECTOR)
    recorder = Recorder()
    informer.add_handler(recorder.handler())
    async with running(informer):
        recorder.take()
    await _cm(client, namespace, "new")
    await client.patch(CONFIG_MAPS, "change", {"data": {"v": "9"}}, namespace)
    await client.delete(CONFIG_MAPS, "remove", namespace)
    latest = (await client.list(CONFIG_MAPS, namespace))["metadata"]["resourceVersion"]
    await _compact(kube.cluster.etcd_url, latest)
    async with running(informer):
        await wait_for(current(lambda: informer.relists), lambda n: n == 2, "a second list")
        delivered = await _delivered(client, namespace, recorder)
    assert sorted(delivered) == [("add", "new"), ("delete", "remove"), ("update", "change")]
    assert informer.relists == 2
    assert informer.store.get(f"{namespace}/change")["data"] == {"v": "9"}  # type: ignore[index]


async def test_recovers_from_api_server_restart_without_spurious_events(
    kube: Kube, namespace: str
) -> None:
    client = _client(kube.api)
    for i in range(5):
        await _cm(client, namespace, f"stable-{i}")
    informer = Informer(
        client,
        CONFIG_MAPS,
        namespace=namespace,
        label_selector=SELECTOR,
        backoff=Backoff(initial=0.2, cap=1.0),
    )
    recorder = Recorder()
    informer.add_handler(recorder.handler())
    async with running(informer):
        recorder.take()
        apiserver = kube.cluster.process("kube-apiserver")
        apiserver.stop()
        await asyncio.sleep(2)  # the informer keeps trying meanwhile
        apiserver.start()
        # A change after the restart proves the watch is back.
        await wait_for(
            lambda: _try_create(client, namespace, "after-restart"),
            lambda ok: ok,
            "the API server to accept writes again",
        )
        delivered = await _delivered(client, namespace, recorder)
    assert delivered == [("add", "after-restart")]
    assert len(_keys(informer)) == 6


async def _try_create(client: KubeClient, ns: str, name: str) -> bool:
    try:
        await _cm(client, ns, name)
    except Exception:
        return False
    return True


async def test_transform_drops_managed_fields_by_default(kube: Kube, namespace: str) -> None:
    client = _client(kube.api)
    await _cm(client, namespace, "m")
    stripped = Informer(client, CONFIG_MAPS, namespace=namespace)
    kept = Informer(client, CONFIG_MAPS, namespace=namespace, transform=None)
    async with running(stripped), running(kept):
        key = f"{namespace}/m"
        assert "managedFields" not in stripped.store.get(key)["metadata"]  # type: ignore[index]
        assert kept.store.get(key)["metadata"]["managedFields"]  # type: ignore[index]


async def test_client_side_qps_limit_holds(kube: Kube, namespace: str) -> None:
    # 5 qps, burst 2: 12 requests cannot finish in less than (12 - 2) / 5 = 2 seconds.
    client = _client(kube.api, qps=5.0, burst=2)
    started = time.monotonic()
    await asyncio.gather(*(client.list(CONFIG_MAPS, namespace) for _ in range(12)))
    elapsed = time.monotonic() - started
    assert elapsed >= 2.0 - 0.05, f"12 requests at 5 qps took only {elapsed:.2f}s"


CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
    namespaced=False,
)  # fmt: skip


async def test_an_optional_resource_not_served_is_synced_empty_until_it_is(kube: Kube) -> None:
    """What the Pod-scope policies need on an API server older than 1.36: the informer of a
    resource the server does not serve (404) counts as synced and empty, says why, and lists
    again until the resource appears (a cluster upgraded, here a CRD created)."""
    client = _client(kube.api)
    group = f"optional-{uuid.uuid4().hex[:8]}.example.com"
    widgets = Resource(group, "v1", "widgets", "Widget", namespaced=False)
    informer = Informer(client, widgets, optional=True, unavailable_retry=0.5)
    recorder = Recorder()
    informer.add_handler(recorder.handler())
    async with running(informer):
        assert informer.unavailable == 404
        assert list(informer.store) == []
        crd = {
            "metadata": {"name": f"widgets.{group}"},
            "spec": {
                "group": group,
                "scope": "Cluster",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{
                    "name": "v1", "served": True, "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object"}},
                }],
            },
        }  # fmt: skip
        await client.create(CRDS, crd)
        try:

            async def created() -> bool:
                try:
                    await client.create(
                        widgets,
                        {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": "w1"}},
                    )
                except ApiError as err:
                    if err.status == 404:  # the CRD is not established yet
                        return False
                    raise
                return True

            await wait_for(created, lambda done: done, "the CRD to serve widgets", seconds=30)
            await wait_for(
                current(lambda: list(recorder.events)),
                lambda events: ("add", "w1") in events,
                "the informer to list the resource once served",
                seconds=30,
            )
            assert informer.unavailable is None
        finally:
            await client.delete(CRDS, f"widgets.{group}")
