"""HTTP endpoints for operators: ``/metrics`` (Prometheus text), ``/healthz``, ``/readyz``.

Readiness checks are named callables; ``/readyz`` answers 200 only when all pass and lists them
(``?verbose``), like the API server's own endpoints.
"""

from __future__ import annotations

from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

Check = Callable[[], bool]


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


class OperatorServer:
    """Serves metrics and health on one or two addresses; start/stop with ``async with``."""

    def __init__(
        self,
        registry: CollectorRegistry,
        *,
        metrics_address: tuple[str, int] | None,
        health_address: tuple[str, int] | None,
    ) -> None:
        self.registry = registry
        self.metrics_address = metrics_address
        self.health_address = health_address
        self.liveness: dict[str, Check] = {"ping": lambda: True}
        self.readiness: dict[str, Check] = {}
        self._runners: list[web.AppRunner] = []
        self.bound: dict[str, tuple[str, int]] = {}

    async def _metrics(self, request: web.Request) -> web.Response:
        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, request: web.Request) -> web.Response:
        return _report(self.liveness, "verbose" in request.query)

    async def _readyz(self, request: web.Request) -> web.Response:
        return _report(self.readiness, "verbose" in request.query)

    async def _serve(self, name: str, address: tuple[str, int], routes: list[web.RouteDef]) -> None:
        app = web.Application()
        app.add_routes(routes)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, address[0], address[1])
        await site.start()
        self._runners.append(runner)
        server = site._server  # the bound port, also when 0 was asked for
        sockets = getattr(server, "sockets", None) or []
        port = sockets[0].getsockname()[1] if sockets else address[1]
        self.bound[name] = (address[0], int(port))

    async def __aenter__(self) -> OperatorServer:
        health = [web.get("/healthz", self._healthz), web.get("/readyz", self._readyz)]
        metrics = [web.get("/metrics", self._metrics)]
        if self.metrics_address and self.metrics_address == self.health_address:
            await self._serve("metrics", self.metrics_address, metrics + health)
            self.bound["health"] = self.bound["metrics"]
            return self
        if self.metrics_address:
            await self._serve("metrics", self.metrics_address, metrics)
        if self.health_address:
            await self._serve("health", self.health_address, health)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for runner in self._runners:
            await runner.cleanup()
        self._runners.clear()
