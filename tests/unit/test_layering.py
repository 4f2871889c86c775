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


def test_one_condition_type_for_the_jobsets_conditions() -> None:
    """The JobSet's conditions are one frozen type, ``jobsetstatus.Condition``, wherever they are
    built (the decision code), set, compared and written (the status); the other condition type
    is a child Job's (``children.JobCondition``), read, never written."""
    defining = []
    for path in sorted((REPO / "controller").rglob("*.py")):
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, ast.ClassDef) and node.name.endswith("Condition"):
                defining.append(f"{path.relative_to(REPO)}: {node.name}")
    assert defining == [
        "controller/jobset/children.py: JobCondition",
        "controller/jobset/jobsetstatus.py: Condition",
    ]


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


VOLUMES = "controller.jobset.volumes"
# The one module outside the package that reads a module of it: the generator of
# manifests/pod-scope/ (``make crd``), which writes the package's own shipped admission policy
# (``admission.policy``, ``binding``) as YAML. It is tooling the running controller never imports.
VOLUMES_GENERATORS = {("controller/api/admissiongen.py", f"{VOLUMES}.admission")}


def volumes_reached(path: Path) -> set[str]:
    """What a file takes of the volumes package: ``controller.jobset.volumes.<name>`` for each
    name it imports from it or reads as an attribute of it (``volumes.storage``), and each
    module of it it imports (``controller.jobset.volumes.io``, however imported)."""
    found: set[str] = set()
    bound: set[str] = set()  # local names of the package itself
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(f"{VOLUMES}."):
                    found.add(alias.name)
                elif alias.name == VOLUMES and alias.asname:
                    bound.add(alias.asname)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                if node.module == "controller.jobset" and alias.name == "volumes":
                    bound.add(alias.asname or alias.name)
                elif node.module == VOLUMES:
                    found.add(f"{VOLUMES}.{alias.name}")
                elif node.module.startswith(f"{VOLUMES}."):
                    found.add(node.module)
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in bound
        ):
            found.add(f"{VOLUMES}.{node.attr}")
    return found


def test_the_volumes_package_is_reached_only_through_its_interface() -> None:
    """Outside ``controller/jobset/volumes/`` the product takes of the package only the names it
    exports (``__all__``): no module of it (``volumes.suspension``, ``volumes.io``, however
    imported), no other name. What the rest of the controller needs to know of the volumes is
    asked of those (``Storage``'s methods, ``VolumeIO``'s), so the package's modules can change
    without the controller noticing. (Tests of the package's internals may read its modules.)"""
    from controller.jobset import volumes

    exported = {f"{VOLUMES}.{name}" for name in volumes.__all__}
    package = REPO / "controller/jobset/volumes"
    offending, reached = [], {}
    for path in sorted((REPO / "controller").rglob("*.py")):
        if path.is_relative_to(package):
            continue
        where = str(path.relative_to(REPO))
        reached[where] = volumes_reached(path)
        for name in sorted(reached[where] - exported):
            if (where, name) not in VOLUMES_GENERATORS:
                offending.append(f"{where} takes {name}")
    assert offending == []
    # The walk sees the real uses: decide asks ``volumes.storage``, the reconciler holds a
    # ``VolumeIO``, and the generator is still the one exception.
    assert f"{VOLUMES}.storage" in reached["controller/jobset/decide.py"]
    assert f"{VOLUMES}.VolumeIO" in reached["controller/jobset/reconciler.py"]
    assert {(w, n) for w, names in reached.items() for n in names - exported} == VOLUMES_GENERATORS


def test_what_a_file_takes_of_the_volumes_package(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(
        "import controller.jobset.volumes.io\n"
        "import controller.jobset.volumes as v\n"
        "from controller.jobset import api, volumes\n"
        "from controller.jobset.volumes import Storage, deletion\n"
        "from controller.jobset.volumes.suspension import RUNNING\n"
        "def f(jobset):\n"
        "    from controller.jobset.volumes import podscope as p\n"
        "    return volumes.storage, v.snapshots, jobset.status.volumes, api.FINALIZER\n"
    )
    assert volumes_reached(path) == {
        f"{VOLUMES}.{name}"
        for name in ("io", "Storage", "deletion", "suspension", "podscope", "storage", "snapshots")
    }


def test_the_volumes_package_exports_a_narrow_interface() -> None:
    """What the rest of the controller uses of ``controller.jobset.volumes`` is its ``__all__``
    (12 names, from 90; the test above keeps the rest of the controller to them). The number
    grows only with a new kind of input. ``decide`` asks one object (``volumes.Storage``)
    everything it needs to know of the volumes in a pass, the suspended JobSet's releases
    included (``storage(..., jobs=, now=)``); the reconciler reads the caches, plans a deleted
    JobSet's retention and writes through ``VolumeIO``, and setup makes and watches the volumes'
    informers through it too. The uids of the claims a pass creates are recorded through
    ``VolumeIO.claim_creates``, ``VolumePlan.claim_uids_with`` and the status value, without
    the claims' slots leaving the package."""
    from controller.jobset import volumes

    assert len(volumes.__all__) <= 12
    assert all(hasattr(volumes, name) for name in volumes.__all__)
