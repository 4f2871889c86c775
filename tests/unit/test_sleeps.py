"""No bare sleep in the tests: a test that sleeps and then asserts that something did not
happen passes on a slow machine for the wrong reason (the thing had no time to happen) and
fails on a fast one for none. A negative assertion waits for the controller to have settled
(``tests.support.settling.settled``) or reads what was recorded (the audit log, the metrics).

So every ``asyncio.sleep``/``time.sleep`` under tests/ is one of:
- a yield to the event loop (``sleep(0)``);
- the interval of a loop that polls or retries (inside a ``while``/``for``);
- a deliberate pause (an outage's length, a kill in the middle of the work), said so in a
  comment on its line or the line before it.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _is_sleep(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "sleep"
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id in ("asyncio", "time")
    )


def _bare_sleeps(source: str) -> list[int]:
    """Lines of the sleeps that are none of the allowed kinds."""
    tree = ast.parse(source)
    lines = source.splitlines()
    looped: set[int] = set()
    for loop in ast.walk(tree):
        if isinstance(loop, ast.While | ast.For | ast.AsyncFor):
            looped.update(id(node) for node in ast.walk(loop))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not _is_sleep(node):
            continue
        if node.args and isinstance(node.args[0], ast.Constant) and node.args[0].value == 0:
            continue
        if id(node) in looped:
            continue
        line = node.lineno
        said = "#" in lines[line - 1] or lines[line - 2].strip().startswith("#")
        if not said:
            found.append(line)
    return found


def test_the_check_tells_the_kinds_apart() -> None:
    source = """
import asyncio, time
async def f():
    await asyncio.sleep(0)
    while True:
        await asyncio.sleep(0.5)
    for _ in range(3):
        time.sleep(1)
    await asyncio.sleep(2)  # the outage lasts this long
    # a kill in the middle of the work
    await asyncio.sleep(1)
    await asyncio.sleep(6)
    assert nothing_happened()
"""
    assert _bare_sleeps(source) == [12]


def test_no_bare_sleep_in_the_tests() -> None:
    files = [p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts]
    assert len(files) > 100, "the test tree was not found"
    bare = [
        f"{path.relative_to(TESTS)}:{line}"
        for path in files
        for line in _bare_sleeps(path.read_text())
    ]
    assert bare == [], "sleeps that neither poll nor say why they pause (see this module)"
