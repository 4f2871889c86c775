"""lazyclient: the controller imports kubernetes_asyncio's transport, not its generated classes,
and every name of the real package still resolves (each check in a fresh interpreter)."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

from controller.runtime import lazyclient

ROOT = Path(__file__).resolve().parents[2]


def _client_dir() -> Path:
    spec = importlib.util.find_spec("kubernetes_asyncio")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations))) / "client"


def _real_all(init: Path) -> list[str]:
    """The ``__all__`` list of an ``__init__``, read without importing it."""
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list)
            return [str(v) for v in value]
    return []


def _run(code: str) -> object:
    """Runs ``code`` in a fresh interpreter from the repository; returns what it printed (JSON)."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_exports_name_every_public_name_of_the_real_package() -> None:
    for init in (_client_dir() / "__init__.py", _client_dir() / "models" / "__init__.py"):
        names = lazyclient.exports(init)
        assert len(names) > 500  # the generated APIs and models
        missing = [n for n in _real_all(init) if n not in names and not n.startswith("__")]
        # Names in __all__ that are submodules (``rest``...) import through __getattr__ too.
        assert all((init.parent / f"{n}.py").exists() for n in missing), missing


def test_the_controller_imports_no_generated_class() -> None:
    loaded = _run(
        "import sys, json\n"
        "import controller.app, controller.jobset.setup, controller.runtime.manager\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('kubernetes_asyncio'))))"
    )
    assert isinstance(loaded, list)
    assert "kubernetes_asyncio.client.api_client" in loaded
    assert "kubernetes_asyncio.config.kube_config" in loaded
    generated = [m for m in loaded if ".client.models." in m or ".client.api." in m]
    assert generated == []


def test_names_resolve_to_the_real_classes_on_first_use() -> None:
    found = _run(
        "import json\n"
        "import controller.runtime\n"
        "import kubernetes_asyncio.client as c\n"
        "from kubernetes_asyncio.client import ApiClient, Configuration\n"
        "from kubernetes_asyncio.client.exceptions import ApiException\n"
        "from kubernetes_asyncio.client.models.v1_job import V1Job\n"
        "from kubernetes_asyncio import config, watch\n"
        "print(json.dumps([\n"
        "    c.ApiClient is ApiClient, c.Configuration is Configuration,\n"
        "    c.ApiException is ApiException, c.V1Job is V1Job, c.models.V1Job is V1Job,\n"
        "    c.CoreV1Api.__module__, c.rest.__name__, hasattr(c, 'NoSuchThing'),\n"
        "    callable(ApiClient.deserialize), callable(config.load_kube_config),\n"
        "]))"
    )
    assert found == [
        True, True, True, True, True,
        "kubernetes_asyncio.client.api.core_v1_api", "kubernetes_asyncio.client.rest", False,
        True, True,
    ]  # fmt: skip


def test_nothing_changes_when_the_package_was_imported_first() -> None:
    found = _run(
        "import json, sys\n"
        "import kubernetes_asyncio.client as real\n"
        "from controller.runtime import lazyclient\n"
        "print(json.dumps([lazyclient.install(), sys.modules['kubernetes_asyncio.client'] is real,"
        " 'kubernetes_asyncio.client.models.v1_job' in sys.modules]))"
    )
    assert found == [False, True, True]
