"""controller-runtime's zap flags, which upstream's manager takes, mapped onto this controller's
logs (controller/runtime/logs.py).

- ``--zap-devel`` (boolean): true gives zap's development defaults, console lines, level debug,
  call stacks from warning; false its production ones, JSON, info, stacks from error. The flags
  below override them.
- ``--zap-encoder``: ``json`` or ``console``, the line format.
- ``--zap-log-level``: ``debug``, ``info``, ``error``, ``panic`` (logs nothing: nothing here
  panics), or an integer > 0, a debug verbosity, which is debug here.
- ``--zap-stacktrace-level``: ``info``, ``error`` or ``panic``: lines at that level and above
  carry their call stack (panic: none).
- ``--zap-time-encoding``: ``epoch``, ``millis``, ``nanos``, ``iso8601``, ``rfc3339``,
  ``rfc3339nano``: the ``ts`` field's format.

Values are case-insensitive, as there. Without any of them the controller's own defaults hold
(JSON lines, ``--log-level``, no call stacks, ISO 8601 times in UTC). Pure: values in, settings out.
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.runtime.logs import LogFormat

ENCODERS = ("json", "console")
LEVELS = ("debug", "info", "error", "panic")
STACKTRACE_LEVELS = ("info", "error", "panic")
TIME_ENCODINGS = ("epoch", "millis", "nanos", "iso8601", "rfc3339", "rfc3339nano")


class ZapFlagError(ValueError):
    """``flag`` has a value controller-runtime would refuse too."""

    def __init__(self, flag: str, message: str) -> None:
        super().__init__(message)
        self.flag = flag


@dataclass(frozen=True)
class ZapFlags:
    """The flags as given; None: not given."""

    devel: bool | None = None
    encoder: str | None = None
    log_level: str | None = None
    stacktrace_level: str | None = None
    time_encoding: str | None = None

    @property
    def given(self) -> bool:
        return any(v is not None for v in vars(self).values())


def level(value: str) -> str:
    """A ``--zap-log-level`` value as this controller's level."""
    lowered = value.strip().lower()
    if lowered in ("debug", "info", "error"):
        return lowered
    if lowered == "panic":
        return "critical"
    try:
        verbosity = int(lowered)
    except ValueError:
        verbosity = 0
    if verbosity > 0:
        return "debug"
    raise ZapFlagError(
        "--zap-log-level",
        f"invalid log level {value!r}: debug, info, error, panic or an integer > 0",
    )


def resolve(flags: ZapFlags) -> tuple[str | None, LogFormat]:
    """(the level the flags choose, None if none; the log format). The format's defaults are
    this controller's unless ``--zap-devel`` was given."""
    chosen = level(flags.log_level) if flags.log_level is not None else None
    encoder, stack = "json", None
    if flags.devel is not None:
        encoder = "console" if flags.devel else "json"
        stack = "warning" if flags.devel else "error"
        if chosen is None:
            chosen = "debug" if flags.devel else "info"
    if flags.encoder is not None:
        encoder = flags.encoder.strip().lower()
        if encoder not in ENCODERS:
            raise ZapFlagError(
                "--zap-encoder", f"invalid encoder value {flags.encoder!r}: json or console"
            )
    if flags.stacktrace_level is not None:
        wanted = flags.stacktrace_level.strip().lower()
        if wanted not in STACKTRACE_LEVELS:
            raise ZapFlagError(
                "--zap-stacktrace-level",
                f"invalid stacktrace level {flags.stacktrace_level!r}: info, error or panic",
            )
        stack = None if wanted == "panic" else wanted
    time_encoding = "iso"
    if flags.time_encoding is not None:
        time_encoding = flags.time_encoding.strip().lower()
        if time_encoding not in TIME_ENCODINGS:
            raise ZapFlagError(
                "--zap-time-encoding",
                f"invalid time-encoding value {flags.time_encoding!r}: "
                + ", ".join(TIME_ENCODINGS),
            )
    return chosen, LogFormat(encoder, time_encoding, stack)
