"""messagepatterns: failure-message patterns in Go's regexp dialect, matched in linear time by RE2.

The dialect table records what Go's ``regexp`` (go1.26.8, ``regexp.Compile`` and
``MatchString``, which upstream JobSet calls) answers for each case. The module was also compared
with that Go program on 110,000 random patterns and messages built from RE2's syntax elements,
with no difference.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Any

import pytest

from controller.jobset import api, failure, messagepatterns
from controller.jobset.children import ChildJob
from controller.jobset.children import views as job_views
from controller.jobset.model import InvalidJobSet, JobSet
from tests.unit.jobset_factories import at, make_job, make_jobset, rjob

BACKOFF_MESSAGE = "Job has reached the specified backoff limit"  # 43 characters

# (pattern, message, Go's answer): True/False = compiles and matches or not; None = refused.
GO_DIALECT = [
    # The examples: \z is Go syntax; lookbehind is not.
    (r"oom\z", "container killed: oom", True),
    (r"oom\z", "oom\n", False),
    (r"(?<=exit )137", "exit 137", None),
    (r"\C", "x", None),  # RE2 C++ accepts \C (any byte); Go refuses it
    (r"[\C]", "C", None),
    (r"\Q\C\E", r"a\Cb", True),  # inside \Q...\E it is literal text
    (r"\Q\\E\C", "x", None),  # \Q ends at the first \E: this is a literal \ then \C
    (r"\Z", "x", None),
    (r"(?=x)", "x", None),
    (r"(?!x)", "x", None),
    (r"(?<!a)b", "b", None),
    (r"(a)\1", "aa", None),
    (r"\8", "8", None),
    (r"(?P=n)", "x", None),
    (r"(?#comment)", "x", None),
    (r"(?x)a b", "ab", None),
    (r"(?-)", "x", None),
    (r"(?)", "x", True),
    (r"x**", "x", None),
    (r"a{1001}", "a", None),
    (r"(a{1000}){2}", "a", None),
    (r"a{2,1}", "aa", None),
    (r"a{,5}", "a{,5}", True),  # not a repetition: literal text
    (r"[z-a]", "a", None),
    (r"[[:foo:]]", "f", None),
    (r"\p{Foo}", "f", None),
    (r"\e", "\x1b", None),
    (r"(?P<name>exit) (?<code>\d+)", "exit 137", True),
    (r"(?P<n>a)(?P<n>b)", "ab", True),
    (r"\x{263a}|\x41", "A", True),
    (r"\012", "\n", True),
    # Semantics: unanchored search; ^ and $ at the ends of the text unless (?m); '.' without \n.
    (r"rule at index 1$", "matching FailJob rule at index 1", True),
    (r"rule at index 1$", "matching FailJob rule at index 1\n", False),
    (r"^exit", "code\nexit", False),
    (r"(?m)^exit", "code\nexit", True),
    (r"a.b", "a\nb", False),
    (r"(?s)a.b", "a\nb", True),
    (r"(?i)OOM", "oomkilled", True),
    (r"(?i)K", "\u212a", True),  # Kelvin sign: Unicode simple folding
    ("(?i)\u017f", "S", True),  # long s
    (r"\s", "\v", False),  # Perl \s is [\t\n\f\r ]
    (r"[[:space:]]", "\v", True),
    (r"\w", "é", False),  # ASCII word characters
    (r"\bx", "éx", True),  # ASCII word boundary
    (r"\d", "٣", False),
    (r"\pN", "٣", True),
    (r"\p{Greek}+", "λ", True),
    (r"(?U)a+", "a", True),
    (r"", "anything", True),
    (r"x*", "", True),
    (r"exit code 13[7-9]", "failed with exit code 137 matching", True),
    (r"(a+)+$", "a" * 26 + "!", False),
    (r"(\w*\s?)*X", BACKOFF_MESSAGE, False),
]


@pytest.mark.parametrize(("pattern", "message", "go"), GO_DIALECT)
def test_dialect_is_gos(pattern: str, message: str, go: bool | None) -> None:
    if go is None:
        with pytest.raises(messagepatterns.PatternError):
            messagepatterns.compile(pattern)
        return
    compiled = messagepatterns.compile(pattern)
    assert compiled.search(message) is go
    assert compiled.search(messagepatterns.encode(message)) is go


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        pytest.param(r"(\w*\s?)*X", BACKOFF_MESSAGE * 2000, id="word-space-star"),
        pytest.param(r"(a+)+$", "a" * 100_000 + "!", id="nested-plus"),
        pytest.param(r"(a|aa)+$", "a" * 100_000 + "!", id="alternation"),
        pytest.param(r"(x+x+)+y", "x" * 100_000, id="two-plus"),
    ],
)
def test_backtracking_patterns_are_linear(pattern: str, message: str) -> None:
    """Python's re needs 13 s for ``(a+)+$`` on 27 characters and minutes for the first on the
    43-character backoff message; RE2 answers for 86,000-100,000 characters (pytest-timeout is
    the backstop; the time is measured in bench/bench_reconcile_cost.py). RE2 matches in time
    bounded by its program's size times the message's length, and these programs are small."""
    compiled = messagepatterns.compile(pattern)
    assert compiled.search(message) is False
    assert 0 < compiled.size <= 64


def _js(patterns: list[str], **rule: Any) -> Any:
    return make_jobset(
        replicated_jobs=[rjob("workers", 2)],
        failure_policy={
            "maxRestarts": 3,
            "rules": [{"action": api.FAIL_JOBSET, "onJobFailureMessagePatterns": patterns, **rule}],
        },
    )


def test_failure_policy_with_backtracking_patterns_decides_at_once() -> None:
    """Through the failure policy: before RE2, this evaluate took 13 s (``(a+)+$``) and minutes
    (``(\\w*\\s?)*X`` on the Job controller's backoff-limit message)."""
    js = _js([r"(a+)+$", r"(\w*\s?)*X"])
    jobs = [
        make_job(js, "workers", 0, failed=("BackoffLimitExceeded", BACKOFF_MESSAGE, at(0))),
        make_job(js, "workers", 1, failed=("PodFailurePolicy", "a" * 26 + "!", at(1))),
    ]
    decision = failure.evaluate(js, job_views(jobs))
    assert decision is not None
    assert (decision.action, decision.rule) == (api.RESTART_JOBSET, None)


INVALID = "is not a valid regular expression"


@pytest.mark.parametrize(
    ("pattern", "refused"),
    [
        pytest.param(r"oom\z", None, id="go-end-of-text"),
        pytest.param(r"(?<=exit )137", INVALID, id="lookbehind"),
        pytest.param(r"\C", INVALID, id="any-byte"),
        pytest.param("x" * 1024, None, id="1024-characters"),
        # The CRD's maxLength for a pattern (fields.FAILURE_RULE_PATTERNS), read by the parser.
        pytest.param(
            "x" * 1025,
            r"^spec\.failurePolicy\.rules\[0\]\.onJobFailureMessagePatterns\[0\]: Too long: may "
            r"not be more than 1024 bytes",  # the API server's words: the parser runs its schema
            id="1025-characters",
        ),
        pytest.param(r"\pL{1000}", INVALID, id="program-too-large"),
    ],
)
def test_parse_validates_with_re2(pattern: str, refused: str | None) -> None:
    if refused is None:
        rule = _js([pattern]).failure_policy.rules[0]
        assert rule.compiled_patterns is not None
        assert [p.source for p in rule.compiled_patterns if p is not None] == [pattern]
        return
    with pytest.raises(InvalidJobSet, match=refused):
        _js([pattern])


def test_a_pattern_longer_than_the_crd_admits_is_not_compiled() -> None:
    """A rule not made by the parser compiles its patterns on first use: the same bound."""
    assert messagepatterns.compile("x" * 1024).source == "x" * 1024
    with pytest.raises(messagepatterns.PatternError, match="longer than 1024 characters"):
        messagepatterns.compile("x" * 1025)


def test_parse_refuses_patterns_too_large_together() -> None:
    big = messagepatterns.compile(r"[^a]{1000}").size  # about 8,000 instructions
    fits = messagepatterns.MAX_POLICY_PROGRAM // big
    _js([rf"[^a]{{1000}}{i}" for i in range(fits)])
    with pytest.raises(InvalidJobSet, match="together"):
        _js([rf"[^a]{{1000}}{i}" for i in range(fits + 1)])


def test_parse_of_the_most_expensive_policy_is_bounded() -> None:
    """32 rules x 16 distinct patterns, each too large to compile: the parser stops at the first,
    and patterns that fit stop at the policy's budget; compiling is cached by pattern. Counted
    as RE2 compilations (the cache's misses), not timed."""
    worst = {
        "rules": [
            {
                "action": api.FAIL_JOBSET,
                "onJobFailureMessagePatterns": [rf"(\pL|\pN){{400}}{r}-{p}" for p in range(16)],
            }
            for r in range(32)
        ]
    }
    fitting = {
        "rules": [
            {
                "action": api.FAIL_JOBSET,
                "onJobFailureMessagePatterns": [rf"[^a]{{1000}}{r}-{p}" for p in range(16)],
            }
            for r in range(32)
        ]
    }
    fitting_sources = [p for rule in fitting["rules"] for p in rule["onJobFailureMessagePatterns"]]
    sizes = [messagepatterns.compile(source).size for source in fitting_sources]
    # The parser compiles patterns in order until their sizes add up beyond the budget.
    within = next(
        k for k in range(len(sizes)) if sum(sizes[: k + 1]) > messagepatterns.MAX_POLICY_PROGRAM
    )
    for policy, compiles in ((worst, 1), (fitting, within + 1)):
        messagepatterns._compiled.cache_clear()
        with pytest.raises(InvalidJobSet):
            make_jobset(replicated_jobs=[rjob("w")], failure_policy=policy)
        assert messagepatterns._compiled.cache_info().misses == compiles
        with pytest.raises(InvalidJobSet):  # parsed again: nothing is compiled again
            make_jobset(replicated_jobs=[rjob("w")], failure_policy=policy)
        assert messagepatterns._compiled.cache_info().misses == compiles
    assert within < 16 * 32


def test_compiled_once_and_cached() -> None:
    first = messagepatterns.compile(r"exit code (137|143)")
    assert messagepatterns.compile(r"exit code (137|143)") is first
    rule = _js([r"exit code (137|143)"]).failure_policy.rules[0]
    assert rule.message_patterns() == (first,)


def test_lone_surrogates_are_matched_as_go_sees_them() -> None:
    """The API server never sends one; Go's JSON decoder would have turned it into U+FFFD."""
    assert messagepatterns.compile("\ufffd").search("a\ud800b")
    assert messagepatterns.compile("a\ud800b").search("a\ufffdb")


def test_invalid_pattern_on_a_hand_built_rule_never_matches() -> None:
    assert messagepatterns.compile_all(("(", "x")) == (None, messagepatterns.compile("x"))


# Patterns built to defeat RE2's DFA (it falls back to a simulation costing program size times
# message length), within the policy's budget, and many distinct messages: every Job of a JobSet
# failing at once through a podFailurePolicy, each message naming its pod.
HOSTILE = [r"(?s)(?:.*[0-9].{40}[a-z]){20}Q", r"(?s).*[0-9].{60}[a-z]Q"]


def _hostile_jobs(count: int) -> tuple[JobSet, list[ChildJob]]:
    import random

    rnd = random.Random(7)
    js = make_jobset(
        replicated_jobs=[rjob("workers", count)],
        failure_policy={
            "maxRestarts": 3,
            "rules": [{"action": api.FAIL_JOBSET, "onJobFailureMessagePatterns": HOSTILE}],
        },
    )
    jobs = []
    for i in range(count):
        pod = "".join(rnd.choice("ab0123456789xyz-") for _ in range(63))
        message = (
            f"Container {pod} for pod {pod}/{pod}-{i} failed with exit code 3 matching FailJob "
            "rule at index 0"
        )
        jobs.append(make_job(js, "workers", i, failed=("PodFailurePolicy", message, at(i))))
    return js, job_views(jobs)


class Gate:
    """Makes the matching thread wait until a coroutine on the event loop has run after the
    thread started: it returns only if the loop made progress while the matching was under way.

    A thread-side timeout turns "matched on the loop" (which would deadlock: the loop cannot run
    the coroutine while it is busy matching) into a failure instead of a hang.
    """

    TIMEOUT = 60.0  # seconds; only reached when the test fails

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.entered: asyncio.Future[None] = loop.create_future()
        self.opened = threading.Event()
        self.threads: list[int] = []

    def wrap(self, real: Callable[..., Any]) -> Callable[..., Any]:
        def gated(*args: Any) -> Any:
            self.threads.append(threading.get_ident())
            self.loop.call_soon_threadsafe(self.entered.set_result, None)
            if not self.opened.wait(self.TIMEOUT):
                raise AssertionError("the event loop did not run while the messages were matched")
            return real(*args)

        return gated

    async def open_when_entered(self) -> None:
        await self.entered
        self.opened.set()


async def test_matching_runs_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reconciler matches failure messages in a thread: while it matches, the event loop
    runs other coroutines (here, the one that lets the matching continue)."""
    js, jobs = _hostile_jobs(100)
    loop = asyncio.get_running_loop()
    gate = Gate(loop)
    monkeypatch.setattr(failure, "_match", gate.wrap(failure._match))
    opener = asyncio.create_task(gate.open_when_entered())
    table = await failure.match_messages_in_thread(js, jobs)
    await opener
    assert gate.threads != [] and threading.get_ident() not in gate.threads
    assert len(table) == len(jobs)  # one entry per distinct message
    assert failure.evaluate(js, jobs, table) == failure.evaluate(js, jobs)


async def test_the_gate_detects_matching_on_the_loop() -> None:
    """The control for the test above: the same gate, entered on the event loop itself, is never
    opened, because the coroutine that would open it cannot run meanwhile."""
    gate = Gate(asyncio.get_running_loop())
    gate.TIMEOUT = 0.05  # the outcome does not depend on it: the loop is blocked by construction
    opener = asyncio.create_task(gate.open_when_entered())
    with pytest.raises(AssertionError, match="did not run"):
        gate.wrap(lambda: None)()
    await opener  # once the loop is free, the opener runs
    assert gate.opened.is_set()


async def test_nothing_to_match_costs_no_thread() -> None:
    js, jobs = _hostile_jobs(2)
    healthy = [make_job(js, "workers", 0, active=1)]
    assert await failure.match_messages_in_thread(js, job_views(healthy)) == {}
    plain = make_jobset(replicated_jobs=[rjob("workers", 2)], failure_policy={"maxRestarts": 1})
    assert await failure.match_messages_in_thread(plain, jobs) == {}
    assert await failure.match_messages_in_thread(js, jobs) != {}
    finished = make_jobset(
        replicated_jobs=[rjob("workers", 2)],
        failure_policy=js.raw["spec"]["failurePolicy"],
        terminal_state=api.TERMINAL_FAILED,
    )
    assert await failure.match_messages_in_thread(finished, jobs) == {}
