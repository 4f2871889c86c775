"""Every upstream integration scenario has exactly one port (issue 15).

The ports live in tests/integration/upstream/ and are tagged ``@scenario(<upstream's name>)``.
This reads the tags from the source (no cluster needed), so a scenario left out, or ported twice,
fails here in the unit tier instead of going unnoticed in a list of passing tests.
"""

from __future__ import annotations

import ast
import collections
from pathlib import Path

from tests.integration.upstream.scenarios import NAMES, SCENARIOS

PORTS = Path(__file__).resolve().parents[1] / "integration" / "upstream"


def _tags(path: Path) -> list[str]:
    """The names given to ``@scenario(...)`` on the test functions of one file."""
    tags = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for decorator in node.decorator_list:
            if (
                isinstance(decorator, ast.Call)
                and isinstance(decorator.func, ast.Name)
                and decorator.func.id == "scenario"
            ):
                (argument,) = decorator.args
                tags.append(ast.literal_eval(argument))
    return tags


def test_the_list_holds_upstreams_102_scenarios_once_each() -> None:
    assert len(SCENARIOS) == 102
    assert len(NAMES) == 102


def test_every_upstream_scenario_is_ported_exactly_once() -> None:
    files = sorted(PORTS.glob("test_*.py"))
    assert files, f"no ports found in {PORTS}"
    counts = collections.Counter(tag for path in files for tag in _tags(path))
    assert sorted(name for name in NAMES if counts[name] == 0) == []
    assert sorted(name for name, n in counts.items() if n > 1) == []
    assert sorted(set(counts) - NAMES) == []
