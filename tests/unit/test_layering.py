"""The layers, as the imports have them: the product never imports the development tooling, and
the runtime (``controller/runtime``: client, informers, work queue, manager) imports nothing of
the app built on it. Every import counts, those under ``TYPE_CHECKING`` and inside functions too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def imported(path: Path) -> set[str]:
    """The modules a file imports (absolute names; relative imports are not used here)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def offenders(folder: str, forbidden: tuple[str, ...], allowed: tuple[str, ...] = ()) -> list[str]:
    result = []
    files = sorted((REPO / folder).rglob("*.py"))
    assert files, f"no Python files under {folder}"
    for path in files:
        for name in sorted(imported(path)):
            top = name.startswith(forbidden)
            if top and not name.startswith(allowed):
                result.append(f"{path.relative_to(REPO)} imports {name}")
    return result


def test_the_product_never_imports_the_tooling_or_the_tests() -> None:
    assert offenders("controller", ("localcluster", "tests", "bench")) == []


def test_the_runtime_imports_nothing_of_the_app() -> None:
    found = offenders("controller/runtime", ("controller",), allowed=("controller.runtime",))
    assert found == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import localcluster.cluster", {"localcluster.cluster"}),
        (
            "from controller.config import Config",
            {"controller.config", "controller.config.Config"},
        ),
        (
            "def f():\n    from localcluster import build\n",
            {"localcluster", "localcluster.build"},
        ),
        ("from . import sibling", set()),
    ],
)
def test_imports_are_found_wherever_they_are(
    tmp_path: Path, source: str, expected: set[str]
) -> None:
    path = tmp_path / "m.py"
    path.write_text(source)
    assert imported(path) == expected


def test_one_obj_alias_at_the_io_edge() -> None:
    """``Obj`` (a raw object as the API server sends it) is defined once, by the runtime's store;
    the rest of the product imports it, so one can find every place that still handles raw
    objects."""
    defining = []
    for path in sorted((REPO / "controller").rglob("*.py")):
        for node in ast.parse(path.read_text(), str(path)).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            if any(isinstance(t, ast.Name) and t.id == "Obj" for t in targets):
                defining.append(str(path.relative_to(REPO)))
    assert defining == ["controller/runtime/store.py"]


def test_the_reconciler_reads_no_clock_of_its_own() -> None:
    """Its clocks are injected (``clock``, ``wall_clock``): no call of ``time.monotonic()``,
    ``time.time()`` or ``datetime.now()`` in it."""
    path = REPO / "controller/jobset/reconciler.py"
    calls = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("monotonic", "time", "now", "perf_counter")
        ):
            calls.append(f"line {node.lineno}: {ast.unparse(node)}")
    # The default of ``wall_clock`` is the one reading of the wall clock, at the I/O edge.
    assert calls == [f"line {_default_wall_line(path)}: datetime.datetime.now(datetime.UTC)"]


def _default_wall_line(path: Path) -> int:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if "wall_clock: Callable" in line:
            return number
    raise AssertionError("no wall_clock parameter")
