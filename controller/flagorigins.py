"""Where each flag's value came from, and the command-line conventions of upstream's manager.

A value comes from the command line, an environment variable (``STATEFUL_JOBSET_X``), upstream's
Configuration file (``--config``) or the default, and the first of these wins. A message about a
bad value names where it was set: ``STATEFUL_JOBSET_WORKERS (--workers)``, not only the flag the
user never typed.

Upstream's manager parses its flags with Go's ``flag`` package, which also accepts a single dash
(``-leader-elect``) and a boolean flag without a value (``--leader-elect``); ``single_dash``
rewrites the first, config.py's boolean flags take the second.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

DEFAULT, FILE, ENVIRONMENT, COMMAND_LINE = 0, 1, 2, 3


@dataclass(frozen=True)
class Origin:
    rank: int  # COMMAND_LINE > ENVIRONMENT > FILE > DEFAULT
    where: str  # the variable, or "<field> in <file>"; "" for the command line and the default


class Origins:
    """Each flag's origin, by its argparse ``dest``."""

    def __init__(self, flags: dict[str, str] | None = None) -> None:
        self.flags = dict(flags or {})  # dest → "--flag"
        self._origins: dict[str, Origin] = {}

    @classmethod
    def of(cls, parser: argparse.ArgumentParser) -> Origins:
        return cls(
            {
                action.dest: next(o for o in action.option_strings if o.startswith("--"))
                for action in parser._actions
                if any(o.startswith("--") for o in action.option_strings)
            }
        )

    def set(self, dest: str, rank: int, where: str = "") -> None:
        self._origins[dest] = Origin(rank, where)

    def rank(self, dest: str) -> int:
        return self._origins.get(dest, Origin(DEFAULT, "")).rank

    def flag(self, dest: str) -> str:
        return self.flags.get(dest, "--" + dest.replace("_", "-"))

    def name(self, dest: str) -> str:
        """How a message names the setting: ``--x``, ``STATEFUL_JOBSET_X (--x)`` or ``a.b in
        FILE (--x)``."""
        origin = self._origins.get(dest)
        flag = self.flag(dest)
        if origin is None or not origin.where:
            return flag
        return f"{origin.where} ({flag})"


def single_dash(argv: Sequence[str], parser: argparse.ArgumentParser) -> list[str]:
    """``-name`` and ``-name=value`` as ``--name...`` where ``--name`` is one of the parser's
    flags (Go's flag package takes one dash or two)."""
    long_options = {o for action in parser._actions for o in action.option_strings}
    rewritten = []
    for arg in argv:
        if arg.startswith("-") and not arg.startswith("--") and len(arg) > 2:
            name = "-" + arg.partition("=")[0]
            if name in long_options:
                arg = "-" + arg
        rewritten.append(arg)
    return rewritten


@contextmanager
def _defaults_suppressed(parser: argparse.ArgumentParser) -> Iterator[None]:
    saved = [(action, action.default) for action in parser._actions]
    try:
        for action, _ in saved:
            action.default = argparse.SUPPRESS
        yield
    finally:
        for action, default in saved:
            action.default = default


def given_on_command_line(parser: argparse.ArgumentParser, argv: Sequence[str]) -> set[str]:
    """The dests ``argv`` sets (even to their default value). ``argv`` must parse."""
    with _defaults_suppressed(parser):
        return set(vars(parser.parse_args(list(argv))))
