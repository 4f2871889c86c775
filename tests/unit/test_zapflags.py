"""controller-runtime's --zap-* flags mapped onto this controller's logs, and the line formats
they choose, written by the real logger."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest
import structlog

from controller.config import parse
from controller.runtime import logs
from controller.runtime.logs import LogFormat, format_time
from controller.zapflags import ZapFlagError, ZapFlags, level, resolve


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("debug", "debug"),
        ("INFO", "info"),
        ("error", "error"),
        ("panic", "critical"),
        ("1", "debug"),
        ("2", "debug"),
        ("10", "debug"),
    ],
)
def test_zap_levels(value: str, expected: str) -> None:
    assert level(value) == expected


@pytest.mark.parametrize("value", ["0", "-1", "warn", "warning", "loud", ""])
def test_zap_refuses_what_controller_runtime_refuses(value: str) -> None:
    with pytest.raises(ZapFlagError, match="invalid log level"):
        level(value)


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (ZapFlags(), (None, LogFormat("json", "iso", None))),
        (ZapFlags(devel=True), ("debug", LogFormat("console", "iso", "warning"))),
        (ZapFlags(devel=False), ("info", LogFormat("json", "iso", "error"))),
        (
            ZapFlags(devel=True, encoder="JSON", log_level="error", stacktrace_level="panic"),
            ("error", LogFormat("json", "iso", None)),
        ),
        (ZapFlags(encoder="console"), (None, LogFormat("console", "iso", None))),
        (ZapFlags(stacktrace_level="info"), (None, LogFormat("json", "iso", "info"))),
        (ZapFlags(time_encoding="Millis"), (None, LogFormat("json", "millis", None))),
        (ZapFlags(log_level="2"), ("debug", LogFormat())),
    ],
)
def test_resolve(flags: ZapFlags, expected: tuple[str | None, LogFormat]) -> None:
    assert resolve(flags) == expected


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        ([], {}, "info"),
        (["--zap-log-level=2"], {}, "debug"),
        (["--zap-devel"], {}, "debug"),
        (["--zap-devel", "--log-level=warning"], {}, "warning"),  # an explicit level wins
        (["--zap-devel", "--zap-log-level=error"], {}, "error"),
        (["--log-level=error", "--zap-log-level=error"], {}, "error"),  # agreeing is fine
        # The command line beats the environment, whichever of the two flags each sets.
        (["--zap-log-level=error"], {"STATEFUL_JOBSET_LOG_LEVEL": "debug"}, "error"),
        (["--log-level=warning"], {"STATEFUL_JOBSET_ZAP_LOG_LEVEL": "debug"}, "warning"),
    ],
)
def test_log_level_and_zap_log_level(argv: list[str], env: dict[str, str], expected: str) -> None:
    assert parse(argv, env=env).log_level == expected


NS = 1_700_000_000_123_456_789  # 2023-11-14T22:13:20.123456789Z


@pytest.mark.parametrize(
    ("encoding", "expected"),
    [
        ("epoch", 1_700_000_000.123_456_7),
        ("millis", 1_700_000_000_123.456_8),
        ("nanos", NS),
        ("iso8601", "2023-11-14T22:13:20.123Z"),
        ("rfc3339", "2023-11-14T22:13:20Z"),
        ("rfc3339nano", "2023-11-14T22:13:20.123456789Z"),
    ],
)
def test_time_encodings(encoding: str, expected: object) -> None:
    found = format_time(encoding, NS)
    if isinstance(expected, float):
        assert found == pytest.approx(expected)
    else:
        assert found == expected


def test_rfc3339nano_cuts_trailing_zeros_as_go_does() -> None:
    assert format_time("rfc3339nano", 1_700_000_000_120_000_000) == "2023-11-14T22:13:20.12Z"
    assert format_time("rfc3339nano", 1_700_000_000_000_000_000) == "2023-11-14T22:13:20Z"


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    out = io.StringIO()
    yield out
    structlog.reset_defaults()


def _configure(out: io.StringIO, level_name: str, fmt: LogFormat) -> structlog.BoundLogger:
    logs.configure(level_name, log_format=fmt)
    structlog.configure(logger_factory=structlog.PrintLoggerFactory(out))
    logger: structlog.BoundLogger = structlog.get_logger("test")
    return logger


def test_json_lines_with_zap_times_and_stacks(captured: io.StringIO) -> None:
    log = _configure(captured, "info", LogFormat("json", "nanos", "warning"))
    log.debug("hidden")
    log.info("plain", a=1)
    log.warning("with a stack")
    lines = [json.loads(line) for line in captured.getvalue().splitlines()]
    assert [line["msg"] for line in lines] == ["plain", "with a stack"]
    assert isinstance(lines[0]["ts"], int) and lines[0]["a"] == 1
    assert "stack" not in lines[0]
    assert "test_json_lines_with_zap_times_and_stacks" in lines[1]["stack"]


def test_console_lines(captured: io.StringIO) -> None:
    log = _configure(captured, "debug", LogFormat("console", "rfc3339", None))
    log.debug("shown", key="value")
    (line,) = captured.getvalue().splitlines()
    assert not line.startswith("{")
    assert "shown" in line and "key=value" in line and "debug" in line
