"""Failure-message patterns (``onJobFailureMessagePatterns``): Go's regexp dialect, run by RE2.

Upstream matches each pattern with Go's ``regexp.MatchString(pattern, message)``: RE2 syntax
(https://golang.org/s/re2syntax), an unanchored search, in time linear in the message. Python's
``re`` is neither that dialect nor linear (``(a+)+$`` backtracks for seconds on 27 characters,
blocking the event loop), so patterns are compiled by RE2 (``google-re2``) with the options that
give Go's semantics:

- Perl syntax (not POSIX): Perl classes (``\\d \\s \\w``), ``\\b``, ``(?flags)``, non-greedy
  repetitions, ``\\Q...\\E``, ``(?P<name>)`` and ``(?<name>)``; ``^``/``$`` match at the ends of
  the text only unless ``(?m)``; ``.`` does not match ``\\n`` unless ``(?s)``; case-sensitive
  unless ``(?i)``; leftmost-first (not longest) matching; UTF-8. No lookaround, no
  backreferences, no ``\\Z`` — refused by both.
- What RE2 C++ accepts and Go refuses is refused here too: ``\\C`` (any byte).
- RE2 C++ compiles Unicode classes to byte-level programs, so its program size is bounded by
  memory (``PATTERN_MAX_MEM``): a pattern whose program does not fit (``\\pL{1000}``) is refused,
  where Go would accept it; so is a failure policy whose patterns together exceed
  ``MAX_POLICY_PROGRAM`` instructions. These bounds keep compiling and matching cheap.

Compiled patterns are cached by their text: the parser compiles every pattern of every JobSet on
every reconcile, and a cache hit costs a dictionary lookup.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, cast

import re2

from controller.api import bounds

# RE2's memory budget for one pattern (program + DFA cache). 256 KiB fits about 8,000
# instructions (e.g. ``[^a]{1000}``); compiling a pattern that does not fit stops after ~10 ms.
PATTERN_MAX_MEM = 256 << 10
# The patterns of one failure policy together: compiling them all costs at most ~30 ms once.
MAX_POLICY_PROGRAM = 20_000
# Compiled patterns kept (each holds at most PATTERN_MAX_MEM).
CACHE_SIZE = 512


class PatternError(ValueError):
    """The pattern is not a regular expression upstream (Go's regexp) would accept here."""


def _options() -> re2.Options:
    options = re2.Options()
    # UTF-8, Perl syntax, leftmost-first, case-sensitive, '.' not matching '\n': RE2's defaults,
    # which are Go's. With posix_syntax off, perl_classes, word_boundary and one_line are always
    # on (re2.h), as in Go's syntax.Perl flags.
    options.posix_syntax = False
    options.longest_match = False
    options.case_sensitive = True
    options.dot_nl = False
    options.never_nl = False
    options.never_capture = True  # only "does it match" is asked; groups need not be tracked
    options.max_mem = PATTERN_MAX_MEM
    options.log_errors = False  # errors are reported through the exception, not to stderr
    return options


_OPTIONS = _options()


def _go_only_error(source: str) -> str | None:
    """What Go's parser refuses but RE2 C++ accepts: the ``\\C`` escape (outside ``\\Q...\\E``).

    The scan follows Go's: a backslash escapes the next character; ``\\Q`` starts literal text
    that ends at the next ``\\E`` or at the end of the pattern.
    """
    i = 0
    while i < len(source) - 1:
        if source[i] != "\\":
            i += 1
            continue
        escaped = source[i + 1]
        if escaped == "C":
            return "invalid escape sequence: `\\C`"
        if escaped == "Q":
            end = source.find("\\E", i + 2)
            if end < 0:
                return None
            i = end + 2
            continue
        i += 2
    return None


def _utf8(text: str) -> str:
    """``text`` with lone surrogates replaced by U+FFFD, as Go's JSON decoder leaves them.

    (The API server never sends them; a Python string can hold them and RE2 cannot encode them.)
    """
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


@dataclass(frozen=True, eq=False)
class Pattern:
    """One compiled pattern. ``search`` is Go's ``regexp.MatchString``: match anywhere."""

    source: str
    size: int  # RE2 program instructions
    _regexp: re2._Regexp[str]

    def search(self, message: str | bytes) -> bool:
        """Whether the pattern matches somewhere in ``message`` (UTF-8 bytes are fastest)."""
        text = message if isinstance(message, bytes) else encode(message)
        return self._regexp.search(text) is not None


def encode(message: str) -> bytes:
    """A failure message as the UTF-8 bytes patterns are matched against."""
    return _utf8(message).encode()


@functools.lru_cache(maxsize=CACHE_SIZE)
def _compiled(source: str) -> Pattern | str:
    """The compiled pattern, or why it is refused (cached either way)."""
    # The CRD's maxLength for one pattern, checked here too for objects stored under an older CRD.
    if len(source) > bounds.MAX_PATTERN:
        return f"longer than {bounds.MAX_PATTERN} characters"
    refused = _go_only_error(source)
    if refused is not None:
        return refused
    try:
        regexp = re2.compile(_utf8(source), options=_OPTIONS)
    except re2.error as err:
        # pybind11 hands RE2's message over as bytes.
        text = err.args[0] if err.args else err
        return text.decode(errors="replace") if isinstance(text, bytes) else str(text)
    size: int = cast(Any, regexp).programsize  # not in the type stubs
    return Pattern(source, size, regexp)


def compile(source: str) -> Pattern:
    """``source`` compiled as upstream's controller would; raises ``PatternError``."""
    result = _compiled(source)
    if isinstance(result, str):
        raise PatternError(result)
    return result


def compile_all(sources: tuple[str, ...]) -> tuple[Pattern | None, ...]:
    """Each pattern compiled, or None where it is invalid (then it never matches, as upstream's
    controller skips a pattern it cannot compile)."""
    return tuple(p if isinstance(p := _compiled(s), Pattern) else None for s in sources)
