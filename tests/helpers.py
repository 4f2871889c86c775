"""Helpers for tests against the real API server: waiting with clear messages, namespaces, and
reading a controller's progress from its metrics."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from prometheus_client import Metric

from controller.runtime.client import ApiError
from localcluster.cluster import LocalCluster

T = TypeVar("T")


@dataclass
class Kube:
    """An API client bound to one local cluster."""

    api: client.ApiClient
    cluster: LocalCluster

    @property
    def core(self) -> client.CoreV1Api:
        return client.CoreV1Api(self.api)

    @property
    def batch(self) -> client.BatchV1Api:
        return client.BatchV1Api(self.api)

    async def raw(self, method: str, path: str, body: object | None = None) -> Any:
        """Call an API path and return the decoded JSON (dicts, not models)."""
        response = await self.api.call_api(
            path,
            method,
            body=body,
            header_params={"Content-Type": "application/json", "Accept": "application/json"},
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
        )
        return await response.json()


async def wait_for(
    observe: Callable[[], Awaitable[T]],
    done: Callable[[T], bool],
    what: str,
    seconds: float = 60.0,
    interval: float = 0.25,
) -> T:
    """Poll ``observe`` until ``done`` holds; on timeout fail naming what and the last value."""
    deadline = time.monotonic() + seconds
    last: T | None = None
    last_error: ApiException | ApiError | None = None
    while time.monotonic() < deadline:
        try:
            last = await observe()
            last_error = None
            if done(last):
                return last
        except (ApiException, ApiError) as err:
            last_error = err
        await asyncio.sleep(interval)
    detail = (
        f"last error: {last_error.status} {last_error.reason}" if last_error else f"last: {last!r}"
    )
    raise AssertionError(f"timed out after {seconds:.0f}s waiting for {what}; {detail}")


def current(read: Callable[[], T]) -> Callable[[], Awaitable[T]]:
    """Turn a plain getter into something ``wait_for`` can poll."""

    async def observe() -> T:
        return read()

    return observe


async def create_namespace(kube: Kube, *, wait_for_service_account: bool) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    body: Any = {"metadata": {"name": name}}  # a plain dict where the stubs name V1Namespace
    await kube.core.create_namespace(body)
    if wait_for_service_account:
        # Pods need the namespace's default ServiceAccount, made by kube-controller-manager.
        await wait_for(
            lambda: kube.core.list_namespaced_service_account(name),
            lambda accounts: any(a.metadata.name == "default" for a in accounts.items),
            f"the default ServiceAccount in namespace {name}",
        )
    return name


@dataclass(frozen=True)
class Progress:
    """One controller's work as its metrics tell it, at one instant (one scrape or collect).

    ``idle``: nothing queued (``workqueue_depth`` 0, which counts a key added again while it is
    being reconciled) and nothing being reconciled (``controller_runtime_active_workers`` 0).
    A worker takes a key off the queue and marks itself active without yielding to the event loop,
    and finishes the same way, so no key is between the two at any instant a scrape can see.
    Delayed adds (requeue-after) are not in the queue yet and do not count."""

    reconciles: float
    writes: float
    idle: bool


def progress(families: Iterable[Metric], controller: str) -> Progress:
    """``families``: ``registry.collect()`` in the same process, or a parsed ``/metrics`` text."""
    reconciles = writes = depth = active = 0.0
    for family in families:
        for sample in family.samples:
            labels = sample.labels
            if sample.name == "controller_runtime_reconcile_total":
                if labels.get("controller") == controller:
                    reconciles += sample.value
            elif sample.name == "workqueue_depth" and labels.get("name") == controller:
                depth += sample.value
            elif sample.name == "controller_runtime_active_workers":
                if labels.get("controller") == controller:
                    active += sample.value
            elif sample.name == "rest_client_requests_total" and labels.get("method") != "GET":
                writes += sample.value
    return Progress(reconciles, writes, depth == 0 and active == 0)
