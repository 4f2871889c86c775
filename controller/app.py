"""Process entry: flags → logging → API client → manager with controllers → run until signalled."""

from __future__ import annotations

import asyncio
import signal
import sys
from collections.abc import Callable, Sequence

import structlog

from controller import config as configmod
from controller import kubeversion
from controller.runtime import logs
from controller.runtime.client import KubeClient
from controller.runtime.manager import Manager, api_client_for
from controller.version import build_info

Setup = Callable[[Manager[configmod.Config]], None]

log = structlog.get_logger("main")


async def run(config: configmod.Config, setup: Setup) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    api = await api_client_for(config)
    async with api:
        manager = Manager(config, api)
        setup(manager)
        manager.start_checks.append(lambda: check_server_version(manager.client))
        log.info(
            "starting",
            identity=config.identity,
            namespaces=list(config.namespaces) or "all",
            leader_elect=config.leader_elect,
            log_level=config.log_level,
            controllers=[c.name for c in manager.controllers],
            event_loop=loop_name(loop),
        )
        return await manager.run(stop)


async def check_server_version(
    client: KubeClient, minimum: tuple[int, int] = kubeversion.MINIMUM
) -> str | None:
    """Why the API server's Kubernetes version is too old (kubeversion.py), or None. Asked until
    the API server answers (as the informers retry), every 1 s doubling to 30 s."""
    delay = 1.0
    while True:
        try:
            info = await client.get_path("/version")
            break
        except Exception as err:  # unreachable, TLS, a proxy's error page
            log.warning(
                "cannot read the API server's version; retrying",
                error=f"{type(err).__name__}: {err}",
                retry_in=delay,
            )
            await asyncio.sleep(delay)
            delay = min(delay * 2, 30.0)
    version = kubeversion.server_version(info)
    refused = kubeversion.refusal(version, minimum)
    if refused is None:
        details = {"gitVersion": version.git_version, "minimum": f"{minimum[0]}.{minimum[1]}"}
        if version.minor is None:
            log.warning("cannot tell the API server's Kubernetes version; starting anyway",
                        **details)  # fmt: skip
        else:
            major, minor = version.minor
            log.info("API server version", version=f"{major}.{minor}", **details)
    return refused


def loop_name(loop: asyncio.AbstractEventLoop) -> str:
    """``uvloop`` or ``asyncio``: the package whose loop ``loop`` is."""
    return type(loop).__module__.partition(".")[0]


def event_loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """The event loop ``--event-loop`` names. uvloop (libuv) runs the same coroutines with less
    CPU per request and per watch event than the standard library's loop: its transports, TLS
    included, and its scheduling are C (bench/HISTORY.md, "The event loop (uvloop)")."""
    if name == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return asyncio.new_event_loop


def main(argv: Sequence[str] | None, setup: Setup) -> int:
    try:
        config = configmod.parse(argv)
    except configmod.ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    logs.configure(config.log_level, log_format=config.log_format)
    # The first line: which build this is, before anything can fail.
    build = build_info()
    log.info(
        "stateful-jobset",
        version=build.version,
        commit=build.commit,
        python_version=build.python_version,
    )
    if config.config_file:
        log.info("read the configuration file", file=config.config_file)
    for ignored in config.ignored_settings:
        log.info("ignored in the configuration file", field=ignored.field, reason=ignored.reason)
    try:
        with asyncio.Runner(loop_factory=event_loop_factory(config.event_loop)) as runner:
            return runner.run(run(config, setup))
    except Exception as err:  # configuration the API client rejects, e.g. a broken kubeconfig
        log.error("cannot start", error=f"{type(err).__name__}: {err}")
        return 1
