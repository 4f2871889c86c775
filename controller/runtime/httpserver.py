"""HTTP endpoints for operators: ``/metrics`` (Prometheus text), ``/healthz``, ``/readyz``.

Readiness checks are named callables; ``/readyz`` answers 200 only when all pass and lists them
(``?verbose``), like the API server's own endpoints.

``/metrics`` can be served over HTTPS (``tls``: certificate and key files, re-read when they
change, as controller-runtime's certificate watcher does, or a self-signed certificate made at
start; see metricstls.py) and behind the API server's authentication and authorization (``auth``,
see metricsauth.py). Health endpoints are always plain HTTP without authentication: the kubelet
probes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
from collections.abc import Callable, Iterable

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from controller.runtime.metricsauth import MetricsAuthorizer
from controller.runtime.metricstls import SelfSigned as SelfSigned
from controller.runtime.metricstls import TlsFiles as TlsFiles
from controller.runtime.metricstls import TlsOptions, self_signed_context

Check = Callable[[], bool]

log = structlog.get_logger("httpserver")

# controller-runtime's certificate watcher also polls (besides inotify) every 10 s.
CERT_POLL_INTERVAL = 10.0


class WithoutCreated(Collector):
    """A registry's metrics without the ``<name>_created`` samples.

    prometheus_client adds one to every counter, histogram and summary series unless
    ``disable_created_metrics()`` switches it off for the whole process. Go's client (upstream's)
    exports none in the text format; filtering at exposition keeps it per registry.
    """

    def __init__(self, registry: Collector) -> None:
        self.registry = registry

    def collect(self) -> Iterable[Metric]:
        for metric in self.registry.collect():
            created = metric.name + "_created"
            if any(s.name == created for s in metric.samples):
                clone = Metric(metric.name, metric.documentation, metric.type, metric.unit)
                clone.samples = [s for s in metric.samples if s.name != created]
                metric = clone
            yield metric


def exposition(registry: Collector) -> bytes:
    """The text format (0.0.4) of ``registry``, as ``/metrics`` serves it."""
    return generate_latest(WithoutCreated(registry))


def _report(checks: dict[str, Check], verbose: bool) -> web.Response:
    results = {name: check() for name, check in checks.items()}
    ok = all(results.values())
    if verbose or not ok:
        lines = [
            f"[{'+' if passed else '-'}]{name} {'ok' if passed else 'failed'}"
            for name, passed in results.items()
        ]
        lines.append("ok" if ok else "check failed")
        text = "\n".join(lines) + "\n"
    else:
        text = "ok"
    return web.Response(status=200 if ok else 503, text=text)


class ReloadingTls:
    """A server ``SSLContext`` whose certificate is re-read when its files change.

    A Secret mounted in a pod is updated in place (cert-manager renewals, a replaced Secret);
    new connections get the new certificate, open ones keep theirs. A pair that does not load
    (a key that does not match the certificate half-way through a manual copy) is reported and
    the previous certificate stays in use; the next poll tries again.

    Each load builds a new context, and every handshake switches to the newest one from the
    listener's context (its SNI callback runs for every ClientHello, with or without a server
    name). Loading into the listener's context itself would not do: a key that does not match
    leaves OpenSSL with the new certificate and the old key, and every handshake fails.
    """

    def __init__(self, files: TlsFiles, options: TlsOptions | None = None) -> None:
        self.files = files
        self.options = options or TlsOptions()
        self._seen = self._signature()
        self._refused: tuple[tuple[int, int, int], ...] | None = None
        # The first load must succeed: a missing or broken pair stops the process at start.
        self._current = self._load()
        self.context = self._load()
        self.context.sni_callback = self._select
        self.loads = 1

    def _load(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.options.apply(context)
        context.load_cert_chain(self.files.cert, self.files.key)
        return context

    def _select(self, connection: ssl.SSLObject, server_name: str | None, _: object) -> None:
        connection.context = self._current

    def _signature(self) -> tuple[tuple[int, int, int], ...] | None:
        try:
            stats = [os.stat(p) for p in (self.files.cert, self.files.key)]
        except OSError:
            return None
        return tuple((s.st_ino, s.st_size, s.st_mtime_ns) for s in stats)

    def reload_if_changed(self) -> bool:
        """Load the files again if they changed since the last successful load."""
        signature = self._signature()
        if signature is None or signature in (self._seen, self._refused):
            return False
        try:
            self._current = self._load()
        except (OSError, ssl.SSLError) as err:
            self._refused = signature  # reported once; tried again when the files change
            log.warning(
                "cannot load the new metrics certificate; keeping the previous one",
                cert=str(self.files.cert),
                error=str(err),
            )
            return False
        self._seen = signature
        self.loads += 1
        log.info("reloaded the metrics certificate", cert=str(self.files.cert))
        return True

    async def watch(self, interval: float = CERT_POLL_INTERVAL) -> None:
        while True:
            await asyncio.sleep(interval)
            self.reload_if_changed()


class OperatorServer:
    """Serves metrics and health on one or two addresses; start/stop with ``async with``."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        metrics_address: tuple[str, int] | None,
        health_address: tuple[str, int] | None,
        tls: TlsFiles | SelfSigned | None = None,
        auth: MetricsAuthorizer | None = None,
        cert_poll_interval: float = CERT_POLL_INTERVAL,
        tls_options: TlsOptions | None = None,
    ) -> None:
        self.shared = bool(
            metrics_address and metrics_address == health_address and metrics_address[1] != 0
        )
        if tls is not None and self.shared:
            raise ValueError("HTTPS metrics need their own address: health probes stay plain")
        self.registry = registry
        self.metrics_address = metrics_address
        self.health_address = health_address
        self.tls = tls
        self.tls_options = tls_options or TlsOptions()
        self.auth = auth
        self.cert_poll_interval = cert_poll_interval
        self.liveness: dict[str, Check] = {"ping": lambda: True}
        self.readiness: dict[str, Check] = {}
        self._runners: list[web.AppRunner] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.certificate: ReloadingTls | None = None
        self.bound: dict[str, tuple[str, int]] = {}

    async def _metrics(self, request: web.Request) -> web.Response:
        if self.auth is not None:
            decision = await self.auth.check(
                request.headers.get("Authorization"), request.method, request.path
            )
            if not decision.allowed:
                headers = {"WWW-Authenticate": "Bearer"} if decision.status == 401 else None
                return web.Response(
                    status=decision.status, text=decision.message + "\n", headers=headers
                )
        body = exposition(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, request: web.Request) -> web.Response:
        return _report(self.liveness, "verbose" in request.query)

    async def _readyz(self, request: web.Request) -> web.Response:
        return _report(self.readiness, "verbose" in request.query)

    async def _serve(
        self,
        name: str,
        address: tuple[str, int],
        routes: list[web.RouteDef],
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        app = web.Application()
        app.add_routes(routes)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, address[0], address[1], ssl_context=ssl_context)
        await site.start()
        self._runners.append(runner)
        server = site._server  # the bound port, also when 0 was asked for
        sockets = getattr(server, "sockets", None) or []
        port = sockets[0].getsockname()[1] if sockets else address[1]
        self.bound[name] = (address[0], int(port))

    async def __aenter__(self) -> OperatorServer:
        try:
            await self._start()
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def _start(self) -> None:
        health = [web.get("/healthz", self._healthz), web.get("/readyz", self._readyz)]
        metrics = [web.get("/metrics", self._metrics)]
        if self.metrics_address and self.shared:
            await self._serve("metrics", self.metrics_address, metrics + health)
            self.bound["health"] = self.bound["metrics"]
            return
        if self.metrics_address:
            context = None
            if isinstance(self.tls, SelfSigned):
                context = self_signed_context(self.tls_options)
            elif self.tls is not None:
                self.certificate = ReloadingTls(self.tls, self.tls_options)
                context = self.certificate.context
                self._tasks.append(
                    asyncio.create_task(
                        self.certificate.watch(self.cert_poll_interval), name="metrics-cert-watch"
                    )
                )
            await self._serve("metrics", self.metrics_address, metrics, context)
        if self.health_address:
            await self._serve("health", self.health_address, health)

    async def __aexit__(self, *exc: object) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"
