"""Structured JSON logs (structlog): one JSON object per line on stderr.

Context bound with ``structlog.contextvars`` (controller, reconcileID, namespace, object name) is
merged into every line logged inside a reconcile, including those of libraries we call.

``LogFormat`` holds what controller-runtime's zap flags choose besides the level (upstream's
``--zap-encoder``, ``--zap-time-encoding``, ``--zap-stacktrace-level``; controller/zapflags.py).
"""

from __future__ import annotations

import datetime
import logging
import sys
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import orjson
import structlog

LEVELS = ("debug", "info", "warning", "error")
# Levels in order, for "this level and above" (critical: zap's panic level, never logged here).
_ORDER = ("debug", "info", "warning", "error", "critical")
ENCODERS = ("json", "console")
# zap's time encodings; "iso" (this controller's own default) is ISO 8601 in UTC with microseconds.
TIME_ENCODINGS = ("iso", "epoch", "millis", "nanos", "iso8601", "rfc3339", "rfc3339nano")


@dataclass(frozen=True)
class LogFormat:
    encoder: str = "json"
    time_encoding: str = "iso"
    # Lines at this level and above carry the call stack (``stack``); None: no line does.
    stacktrace_level: str | None = None


def _dumps(obj: Any, default: Callable[[Any], Any] | None = None, **_: Any) -> str:
    """orjson for the JSON lines: every reconcile that writes logs one, and orjson encodes
    several times faster than the standard library (whose encoder was among the functions with
    the most CPU of their own in the scale benchmark's profile, shared with request bodies)."""
    return orjson.dumps(obj, default=default, option=orjson.OPT_NON_STR_KEYS).decode()


def _utc(nanoseconds: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(nanoseconds // 1_000_000_000, datetime.UTC)


def format_time(encoding: str, nanoseconds: int) -> str | float | int:
    """The ``ts`` value of a line logged at ``nanoseconds`` since the epoch, as zap's encoder of
    that name writes it (in UTC; zap's ISO 8601 and RFC 3339 use the local zone, which in a
    container is UTC)."""
    seconds = _utc(nanoseconds)
    fraction = nanoseconds % 1_000_000_000
    if encoding == "epoch":
        return nanoseconds / 1e9
    if encoding == "millis":
        return nanoseconds / 1e6
    if encoding == "nanos":
        return nanoseconds
    if encoding == "iso8601":  # zap: 2006-01-02T15:04:05.000Z0700
        return f"{seconds:%Y-%m-%dT%H:%M:%S}.{fraction // 1_000_000:03d}Z"
    if encoding == "rfc3339":  # 2006-01-02T15:04:05Z07:00
        return f"{seconds:%Y-%m-%dT%H:%M:%S}Z"
    if encoding == "rfc3339nano":  # 2006-01-02T15:04:05.999999999Z07:00: trailing zeros cut
        digits = f"{fraction:09d}".rstrip("0")
        return f"{seconds:%Y-%m-%dT%H:%M:%S}{'.' + digits if digits else ''}Z"
    raise ValueError(f"unknown time encoding {encoding!r}")


def _timestamper(encoding: str) -> structlog.typing.Processor:
    if encoding == "iso":
        return structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts")

    def stamp(_: Any, __: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        event["ts"] = format_time(encoding, time.time_ns())
        return event

    return stamp


def _stack_from(level: str) -> structlog.typing.Processor:
    """Ask StackInfoRenderer for the call stack on lines at ``level`` and above."""
    wanted = set(_ORDER[_ORDER.index(level) :])

    def mark(_: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        if event.get("level", method) in wanted:
            event.setdefault("stack_info", True)
        return event

    return mark


def configure(
    level: str = "info", *, json_output: bool = True, log_format: LogFormat | None = None
) -> None:
    fmt = log_format or LogFormat(encoder="json" if json_output else "console")
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LEVELS)}")
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer(serializer=_dumps)
        if fmt.encoder == "json"
        else structlog.dev.ConsoleRenderer(colors=False, event_key="msg", timestamp_key="ts")
    )
    stack: list[structlog.typing.Processor] = (
        [_stack_from(fmt.stacktrace_level)] if fmt.stacktrace_level else []
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            _timestamper(fmt.time_encoding),
            *stack,
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            structlog.processors.EventRenamer("msg"),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        # Each module-level logger is built on its first call, not again on every call.
        cache_logger_on_first_use=True,
    )
    # Libraries that use the standard logging module: same stream, same level.
    logging.basicConfig(
        level=numeric, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s"
    )
