"""The container's entrypoint works from a venv holding only the locked runtime dependencies.

No container engine is available here, so this builds what the Dockerfile's builder stage builds,
outside a container: the files its ``COPY`` lines copy, a fresh venv, ``pip install -c
requirements.lock .`` (no ``[test,dev]`` extras), pip and setuptools removed again. Then it runs
the Dockerfile's ``ENTRYPOINT`` with that venv first on PATH (as the image's ``ENV PATH`` does),
from an empty working directory (so nothing is imported from the repository): ``--help`` lists
every flag, and ``render`` prints for the project's examples exactly what the in-repo code prints.
Needs network access to PyPI (~30-60 s).
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from controller.config import build_parser
from controller.render import main as render_in_process
from tests.support.examples import SUPPORTED

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"
DEV_AND_TEST_ONLY = {
    "pytest",
    "pytest-asyncio",
    "pytest-timeout",
    "hypothesis",
    "cryptography",
    "mypy",
    "ruff",
    "types-pyyaml",
    "yamllint",
}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _builder_copies() -> list[tuple[list[str], str]]:
    """(sources, destination) of each ``COPY`` in the builder stage (not ``--from``)."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    stages = re.split(r"^FROM\s", text, flags=re.MULTILINE)[1:]
    builder = stages[0]
    copies = []
    for line in builder.splitlines():
        words = shlex.split(line)
        if words[:1] == ["COPY"] and not any(w.startswith("--from") for w in words):
            copies.append((words[1:-1], words[-1]))
    assert copies, "the Dockerfile's builder stage copies nothing"
    return copies


def _entrypoint() -> list[str]:
    match = re.search(r"^ENTRYPOINT\s+(\[.*\])\s*$", DOCKERFILE.read_text(), re.MULTILINE)
    assert match, "the Dockerfile has no exec-form ENTRYPOINT"
    command: list[str] = json.loads(match.group(1))
    return command


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 300) -> str:
    done = subprocess.run(
        argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, (
        f"{shlex.join(argv)} exited {done.returncode}\n"
        f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
    )
    return done.stdout


def test_entrypoint_runs_from_a_runtime_only_venv(tmp_path: Path) -> None:
    # 1. The builder stage's build context: only what its COPY lines copy.
    src = tmp_path / "src"
    src.mkdir()
    for sources, destination in _builder_copies():
        target = src / destination.removeprefix("./").rstrip("/")
        for source in sources:
            origin = REPO / source
            if origin.is_dir():
                shutil.copytree(
                    origin, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
                )
            else:
                target.mkdir(parents=True, exist_ok=True)
                shutil.copy2(origin, target / origin.name)

    # 2. A fresh venv with the locked runtime dependencies, as in the builder stage.
    venv = tmp_path / "venv"
    base_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, base_env)
    python = venv / "bin" / "python"
    pip = [str(python), "-m", "pip"]
    _run([*pip, "install", "--no-cache-dir", "-c", "requirements.lock", "."], src, base_env, 600)
    _run([*pip, "uninstall", "--yes", "pip", "setuptools"], src, base_env)

    # The image's environment: the venv first on PATH, an empty working directory.
    image_env = {
        "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
    }
    workdir = tmp_path / "app"
    workdir.mkdir()

    # 3. Only runtime dependencies, at the locked versions; the package comes from the venv.
    listing = _run(
        [str(python), "-c",
         "import importlib.metadata as m, json, controller; print(json.dumps(["
         "{d.metadata['Name']: d.version for d in m.distributions()}, controller.__file__]))"],
        workdir, image_env,
    )  # fmt: skip
    installed_raw, controller_file = json.loads(listing)
    installed = {_normalize(name): version for name, version in installed_raw.items()}
    assert not DEV_AND_TEST_ONLY & installed.keys(), sorted(DEV_AND_TEST_ONLY & installed.keys())
    assert "stateful-jobset" in installed
    assert "pip" not in installed
    assert Path(controller_file).resolve().is_relative_to(venv.resolve()), controller_file
    locked = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        if "==" in line and not line.lstrip().startswith("#"):
            name, _, version = line.partition("==")
            locked[_normalize(name.strip())] = version.strip()
    for name, version in installed.items():
        if name != "stateful-jobset":
            assert locked.get(name) == version, f"{name} {version} is not the locked version"

    # 4. The entrypoint: --help lists every flag.
    entrypoint = _entrypoint()
    assert entrypoint == ["python", "-m", "controller"]
    assert shutil.which(entrypoint[0], path=image_env["PATH"]) == str(venv / "bin" / "python")
    help_text = _run([*entrypoint, "--help"], workdir, image_env)
    flags = [
        option
        for action in build_parser(env={})._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]
    assert len(flags) >= 17
    missing = [flag for flag in flags if flag not in help_text]
    assert not missing, f"--help does not list {missing}:\n{help_text}"

    # 5. render on the examples admission accepts: the same output as the in-repo code.
    assert SUPPORTED, "no examples in manifests/examples"
    for example in SUPPORTED:
        printed = _run([*entrypoint, "render", str(example)], workdir, image_env)
        expected, errors = io.StringIO(), io.StringIO()
        assert render_in_process([str(example)], out=expected, err=errors) == 0, errors.getvalue()
        assert printed == expected.getvalue(), f"render differs for {example.name}"
        assert "kind: Job" in printed
