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


def module_graph(package: Path) -> dict[str, set[str]]:
    """The modules of ``package`` (a directory), each with the modules of the package it imports:
    every ``import`` and ``from ... import`` anywhere in it (in functions, under ``TYPE_CHECKING``);
    ``from p import x`` is module ``p.x`` when there is one, else ``p``; relative imports resolved.
    """
    modules: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.add(sub if sub in modules else base)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` as the path around it (first node again at the end), or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for target in sorted(graph.get(node, ())):
            cycle = visit(target)
            if cycle:
                return cycle
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        cycle = visit(start)
        if cycle:
            return cycle
    return None


def test_the_tooling_has_no_import_circle() -> None:
    """``localcluster``'s modules import one way: what starts a part (``cluster.py`` starts the
    real node, Kueue, the JobSet API) imports it, never the reverse; the parts take a
    ``controlplane.ControlPlane``."""
    graph = module_graph(REPO / "localcluster")
    assert "localcluster.node" in graph["localcluster.cluster"]  # the graph is the real one
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_the_product_has_no_import_circle() -> None:
    """``controller``'s modules import one way too, type-only imports included: a module that
    needs another's types is placed after it (``volumes.rejections`` reads the claims' lifecycle,
    which reads the annotations, never the reverse)."""
    graph = module_graph(REPO / "controller")
    assert "controller.jobset.volumes.storage" in graph["controller.jobset.volumes"]
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_a_circle_is_found_through_any_import(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def f():\n    from pkg.sub import X\n")
    (package / "sub" / "__init__.py").write_text("from .c import X\n")
    (package / "sub" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import A\nX = 1\n"
    )
    graph = module_graph(package)
    assert graph == {
        "pkg": set(),
        "pkg.a": {"pkg.b"},
        "pkg.b": {"pkg.sub"},
        "pkg.sub": {"pkg.sub.c"},
        "pkg.sub.c": {"pkg.a"},
    }
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.sub", "pkg.sub.c", "pkg.a"]
    (package / "sub" / "c.py").write_text("X = 1\n")
    assert find_cycle(module_graph(package)) is None


def defined_in(name: str) -> list[str]:
    """The product's modules that assign ``name`` at their top level."""
    defining = []
    for path in sorted((REPO / "controller").rglob("*.py")):
        for node in ast.parse(path.read_text(), str(path)).body:
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, ast.AnnAssign):
                targets = [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                defining.append(str(path.relative_to(REPO)))
    return defining


def test_one_obj_alias_at_the_io_edge() -> None:
    """``Obj`` (a raw object as the API server sends it) is defined once, by the runtime's store;
    the rest of the product imports it, so one can find every place that still handles raw
    objects."""
    assert defined_in("Obj") == ["controller/runtime/store.py"]


def test_one_schema_alias() -> None:
    """``Schema`` (a node of the CRD's structural schema) is defined once, beside the records
    that make the nodes of the JobSet's fields; the rest of ``controller.api`` imports it."""
    assert defined_in("Schema") == ["controller/api/fields.py"]


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


def test_the_volumes_package_exports_a_narrow_interface() -> None:
    """What the rest of the controller uses of ``controller.jobset.volumes`` is its ``__all__``
    (11 names, from 90; ``Snapshots`` is what a pass reads of the VolumeSnapshots); the rest is
    reached through the submodule that defines it. The number grows only with a new kind of
    input. ``decide`` asks one object (``volumes.Storage``) everything it needs to know of the
    volumes in a pass; the uids of the claims a pass creates are recorded through
    ``VolumeIO.claim_creates``, ``VolumePlan.claim_uids_with`` and the status value, without
    the claims' slots leaving the package."""
    from controller.jobset import volumes

    assert len(volumes.__all__) <= 11
    assert all(hasattr(volumes, name) for name in volumes.__all__)
