"""Structured JSON logs (structlog): one JSON object per line on stderr.

Context bound with ``structlog.contextvars`` (controller, reconcileID, namespace, object name) is
merged into every line logged inside a reconcile, including those of libraries we call.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import Any

import orjson
import structlog

LEVELS = ("debug", "info", "warning", "error")


def _dumps(obj: Any, default: Callable[[Any], Any] | None = None, **_: Any) -> str:
    """orjson for the JSON lines: every reconcile that writes logs one, and orjson encodes
    several times faster than the standard library (whose encoder was among the functions with
    the most CPU of their own in the scale benchmark's profile, shared with request bodies)."""
    return orjson.dumps(obj, default=default, option=orjson.OPT_NON_STR_KEYS).decode()


def configure(level: str = "info", *, json_output: bool = True) -> None:
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LEVELS)}")
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer(serializer=_dumps)
        if json_output
        else structlog.dev.ConsoleRenderer(colors=False)
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
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
