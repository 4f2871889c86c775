"""The manager: builds the shared parts, runs caches, controllers, leader election and endpoints.

Lifecycle:
1. Endpoints up (``/healthz`` live at once, ``/readyz`` false).
2. Every cache lists and watches; ``/readyz`` turns true once all have synced — on the leader and
   on standbys alike, so a standby is warm when it takes over. Meanwhile the start checks run
   (``start_checks``, e.g. the API server's version); one that refuses ends the manager with
   exit status 1 before any controller runs.
3. With leader election, controllers run only while this replica leads. Every write passes the
   leader fence (see leaderelection.py). Losing the lease stops the controllers at once and ends
   the manager with exit status 1 (the process restarts as a clean standby, as with
   controller-runtime).
4. On SIGTERM/SIGINT: the queues stop handing out keys, in-flight reconciles get
   ``shutdown_timeout`` seconds, pending Events are flushed, the lease is released (a standby takes
   over at once), caches stop, endpoints close.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

import structlog
from kubernetes_asyncio import client as k8s_client
from kubernetes_asyncio import config as k8s_config
from kubernetes_asyncio.client import ApiClient
from kubernetes_asyncio.config.incluster_config import InClusterConfigLoader
from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector

from controller.runtime.client import ClientMetrics, KubeClient, Resource
from controller.runtime.config import RuntimeConfig
from controller.runtime.controller import Controller, ControllerMetrics, Reconcile
from controller.runtime.events import EventRecorder
from controller.runtime.httpserver import OperatorServer
from controller.runtime.informer import EventHandler, Informer
from controller.runtime.leaderelection import LeaderElectionConfig, LeaderElector
from controller.runtime.metricsauth import MetricsAuthorizer
from controller.runtime.metricstls import SelfSigned, TlsFiles, TlsOptions, certificate_source
from controller.runtime.store import Indexer, Obj
from controller.runtime.workqueue import WorkQueue, WorkqueueMetrics

log = structlog.get_logger("manager")

C = TypeVar("C", bound=RuntimeConfig)

USER_AGENT = "stateful-jobset"


class LeadershipLost(Exception):
    """This replica lost the leader lease while running."""


async def api_client_for(config: RuntimeConfig) -> ApiClient:
    """An ApiClient from a kubeconfig, or from the in-cluster service-account files."""
    if config.kubeconfig:
        api = await k8s_config.new_client_from_config(config_file=config.kubeconfig)
    else:
        configuration = k8s_client.Configuration()
        InClusterConfigLoader(
            token_filename=f"{config.service_account_dir}/token",
            cert_filename=f"{config.service_account_dir}/ca.crt",
        ).load_and_set(configuration)
        api = ApiClient(configuration)
    # The identity in the User-Agent lets an audit log tell the replicas' writes apart.
    api.user_agent = f"{USER_AGENT}/{config.identity}"
    return api


class Cache:
    """One resource's informers, one per watched namespace (or one for all namespaces)."""

    def __init__(self, informers: dict[str | None, Informer]) -> None:
        self.informers = informers

    def _for(self, namespace: str | None) -> list[Informer]:
        if None in self.informers:
            return [self.informers[None]]
        if namespace is None:
            return list(self.informers.values())
        informer = self.informers.get(namespace)
        return [informer] if informer else []

    def get(self, namespace: str | None, name: str) -> Obj | None:
        for informer in self._for(namespace):
            found = informer.store.get_by(namespace, name)
            if found is not None:
                return found
        return None

    def items(self, namespace: str | None = None) -> list[Obj]:
        items: list[Obj] = []
        for informer in self._for(namespace):
            items.extend(
                o for o in informer.store if namespace is None
                or (o.get("metadata") or {}).get("namespace") == namespace
            )  # fmt: skip
        return items

    def by_index(self, index: str, value: str) -> list[Obj]:
        return [o for i in self.informers.values() for o in i.store.by_index(index, value)]

    def add_handler(self, handler: EventHandler) -> None:
        for informer in self.informers.values():
            informer.add_handler(handler)

    def has_synced(self) -> bool:
        return all(i.has_synced() for i in self.informers.values())

    def unavailable(self) -> int | None:
        """The status (404, 403) with which an optional resource could not be listed, if any."""
        return next((i.unavailable for i in self.informers.values() if i.unavailable), None)

    def resync(self) -> None:
        for informer in self.informers.values():
            informer.resync()


def standard_collectors(registry: CollectorRegistry) -> None:
    """``process_*`` (CPU, memory, file descriptors, start time), ``python_info`` and
    ``python_gc_*``: what Go's client exports as ``process_*`` / ``go_*`` by default. (The
    app's ``stateful_jobset_build_info`` is the app's to register: ``jobset.setup``.)"""
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)


class Manager(Generic[C]):
    """Informers, queues, controllers, leader election and the operator's HTTP servers of one
    process. ``C``: the configuration it is made with (``RuntimeConfig`` or more: the app's
    controllers read their own settings from ``manager.config``)."""

    def __init__(
        self, config: C, api: ApiClient, *, registry: CollectorRegistry | None = None
    ) -> None:
        self.config = config
        self.api = api
        self.registry = registry or CollectorRegistry()
        standard_collectors(self.registry)
        client_metrics = ClientMetrics(self.registry)
        self.elector: LeaderElector | None = None
        if config.leader_elect:
            # The elector's own client is not fenced: it must write to renew or release.
            lease_client = KubeClient(
                api, qps=config.kube_api_qps, burst=config.kube_api_burst,
                field_manager=USER_AGENT, metrics=client_metrics,
            )  # fmt: skip
            self.elector = LeaderElector(
                lease_client,
                LeaderElectionConfig(
                    lease_name=config.leader_election_id,
                    namespace=config.leader_election_namespace,
                    identity=config.identity,
                    lease_duration=config.lease_duration,
                    renew_deadline=config.renew_deadline,
                    retry_period=config.retry_period,
                ),
                registry=self.registry,
            )
        self.client = KubeClient(
            api,
            qps=config.kube_api_qps,
            burst=config.kube_api_burst,
            field_manager=USER_AGENT,
            metrics=client_metrics,
            write_guard=self.elector.is_leader if self.elector else None,
        )
        self.queue_metrics = WorkqueueMetrics(self.registry)
        self.controller_metrics = ControllerMetrics(self.registry)
        self.recorder = EventRecorder(self.client, USER_AGENT, registry=self.registry)
        self.caches: list[Cache] = []
        self.controllers: list[Controller] = []
        # Checks that must pass before any controller runs (e.g. the API server's version):
        # each answers None, or why this process must not run (it then exits with status 1).
        # They run while the caches sync, with the endpoints up; each retries what fails.
        self.start_checks: list[Callable[[], Awaitable[str | None]]] = []
        auth = None
        if config.metrics_auth:
            # Not fenced: the reviews are POSTs, and a standby's metrics are read too.
            review_client = KubeClient(
                api, qps=config.kube_api_qps, burst=config.kube_api_burst,
                field_manager=USER_AGENT, metrics=client_metrics,
            )  # fmt: skip
            auth = MetricsAuthorizer(review_client)
        tls = None
        if config.metrics_secure:
            tls = certificate_source(
                config.metrics_cert_path, config.metrics_cert_name, config.metrics_cert_key
            )
        self.server = OperatorServer(
            self.registry,
            metrics_address=config.address(config.metrics_bind_address),
            health_address=config.address(config.health_probe_bind_address),
            tls=tls,
            auth=auth,
            tls_options=TlsOptions(config.tls_min_version, config.tls_cipher_suites),
        )
        self.server.readiness["informers-synced"] = self.caches_synced

    # ------------------------------------------------------------- building

    def cache(
        self,
        resource: Resource,
        *,
        label_selector: str | None = None,
        indexers: dict[str, Indexer] | None = None,
        transform: Callable[[Obj], Obj] | None = None,
        optional: bool = False,
    ) -> Cache:
        """An informer per watched namespace (one for a cluster-scoped resource). ``optional``:
        a resource the API server may not serve or the controller may not read (404, 403)
        counts as synced and empty rather than holding every controller back."""
        namespaces: list[str | None] = list(self.config.namespaces) or [None]
        if not resource.namespaced:
            namespaces = [None]
        kwargs: dict[str, Any] = {
            "label_selector": label_selector,
            "indexers": indexers,
            "optional": optional,
        }
        if transform is not None:
            kwargs["transform"] = transform
        cache = Cache(
            {ns: Informer(self.client, resource, namespace=ns, **kwargs) for ns in namespaces}
        )
        self.caches.append(cache)
        return cache

    def queue(self, name: str) -> WorkQueue[str]:
        return WorkQueue(name, metrics=self.queue_metrics)

    def controller(
        self,
        name: str,
        queue: WorkQueue[str],
        reconcile: Reconcile,
        *,
        object_label: str = "name",
        workers: int | None = None,
    ) -> Controller:
        """Create a controller wired to this manager's metrics and register it."""
        controller = Controller(
            name,
            queue,
            reconcile,
            workers=workers or self.config.workers,
            metrics=self.controller_metrics,
            object_label=object_label,
        )
        self.controllers.append(controller)
        return controller

    def caches_synced(self) -> bool:
        return all(c.has_synced() for c in self.caches)

    # -------------------------------------------------------------- running

    async def _run_controllers(self) -> None:
        async with asyncio.TaskGroup() as group:
            for controller in self.controllers:
                group.create_task(controller.run(), name=f"controller-{controller.name}")

    async def run(self, stop: asyncio.Event) -> int:
        """Run until ``stop`` is set (exit 0) or leadership is lost (exit 1)."""
        async with self.server:
            for name, address in self.server.bound.items():
                details: dict[str, object] = {"address": f"{address[0]}:{address[1]}"}
                if name == "metrics":
                    details.update(scheme=self.server.scheme, auth=self.server.auth is not None)
                    if isinstance(self.server.tls, SelfSigned):
                        details.update(certificate="self-signed")
                    elif isinstance(self.server.tls, TlsFiles):
                        details.update(certificate=str(self.server.tls.cert))
                log.info("serving", endpoint=name, **details)
            if self.server.auth is not None and self.server.tls is None:
                log.warning("--metrics-auth without --metrics-secure: tokens cross the network "
                            "in clear text")  # fmt: skip
            elif self.server.metrics_address and self.server.tls is None:
                log.warning("--metrics-secure=false: /metrics is plain HTTP without "
                            "authentication; anyone who reaches the port reads it")  # fmt: skip
            background = [
                asyncio.create_task(i.run(), name=f"informer-{i.resource.plural}")
                for c in self.caches
                for i in c.informers.values()
            ]
            background.append(asyncio.create_task(self.recorder.run(), name="event-recorder"))
            stopping = asyncio.create_task(stop.wait(), name="stop-signal")
            leading: asyncio.Task[None] | None = None
            try:
                ready = asyncio.create_task(self._ready())
                await asyncio.wait({ready, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if stopping.done():
                    ready.cancel()
                    await asyncio.gather(ready, return_exceptions=True)
                    return 0
                refused = ready.result()
                if refused is not None:
                    log.error("cannot start", error=refused)
                    return 1
                log.info("caches synced")
                work = (
                    self.elector.run(self._run_controllers)
                    if self.elector
                    else self._run_controllers()
                )
                leading = asyncio.create_task(work, name="leading")
                await asyncio.wait({leading, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if not stopping.done():
                    exc = None if leading.cancelled() else leading.exception()
                    if exc is not None:
                        log.error("controllers failed", error=repr(exc))
                    else:
                        log.error("leadership lost; exiting so this replica restarts as a standby")
                    return 1
                log.info("shutting down")
                await self._drain()
                return 0
            finally:
                if leading is not None and not leading.done():
                    leading.cancel()  # releases the lease (LeaderElector.run's finally)
                    await asyncio.gather(leading, return_exceptions=True)
                for task in [*background, stopping]:
                    task.cancel()
                await asyncio.gather(*background, stopping, return_exceptions=True)
                log.info("stopped")

    async def _ready(self) -> str | None:
        """The start checks' first refusal (at once, whether or not the caches sync), else
        None once they passed and every cache synced."""
        synced = asyncio.create_task(self._wait_synced())
        try:
            for refused in await asyncio.gather(*(check() for check in self.start_checks)):
                if refused is not None:
                    return refused
            await synced
            return None
        finally:
            synced.cancel()
            await asyncio.gather(synced, return_exceptions=True)

    async def _wait_synced(self) -> None:
        await asyncio.gather(*(i.synced.wait() for c in self.caches for i in c.informers.values()))

    async def _drain(self) -> None:
        """Stop handing out work; give in-flight reconciles the shutdown timeout; flush Events."""
        timeout = self.config.shutdown_timeout
        drained = await asyncio.gather(
            *(c.queue.shut_down_with_drain(timeout) for c in self.controllers)
        )
        if not all(drained):
            log.warning("in-flight reconciles did not finish within the shutdown timeout")
        await self.recorder.close()
