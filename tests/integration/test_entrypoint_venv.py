"""The Dockerfile, carried out without a container engine: its image runs the controller.

No container engine is available here, so this test executes the Dockerfile's own instructions in
a scratch root directory standing in for the image's filesystem (absolute paths such as
``/opt/venv`` are mapped into it; the base image's ``python`` is this machine's interpreter of the
same version): the builder stage's ``ENV``, ``ARG`` (with the ``--build-arg`` values the test
gives), ``WORKDIR``, ``COPY`` (of exactly what its lines name from the build context) and ``RUN``
lines, then the final stage's ``COPY --from=builder``, ``ENV``,
``WORKDIR``, ``USER`` and ``ENTRYPOINT``. Only the final stage's account creation
(``groupadd``/``useradd``) is not run; the ``USER``'s numeric uid and gid stand in for it.

The image is then used as the Deployment uses it: its files read-only (``readOnlyRootFilesystem``,
owned by root), the entrypoint run as the ``USER`` (when this test runs as root; otherwise as this
non-root user), from the empty working directory, with the image's environment and nothing else.
It must hold only the locked runtime dependencies (no test or dev tools, no pip, nothing from the
repository but the package), ``--help`` must list every flag and ``render`` must print for the
project's examples exactly what the in-repo code prints. Needs network access to the package
index (~30-60 s).
"""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import controller
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
    "mypy",
    "ruff",
    "types-pyyaml",
    "yamllint",
}
# Top-level folders of the machine running the test that an image path must not be mapped away
# from (the base image's system); every other absolute path lives in the scratch root.
SYSTEM = {"usr", "bin", "sbin", "lib", "lib64", "etc", "dev", "proc", "sys", "tmp", "var", "run"}
ACCOUNT_COMMANDS = {"groupadd", "useradd", "addgroup", "adduser"}


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# --------------------------------------------------------------------------- the Dockerfile


@dataclass
class Stage:
    image: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)


def _stages() -> list[Stage]:
    """The Dockerfile's stages, ``ARG`` defaults substituted into ``FROM``."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        keyword, _, rest = line.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name] = default
        elif keyword == "FROM":
            words = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], rest).split()
            alias = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], alias))
        else:
            assert stages, f"{line!r} before any FROM"
            stages[-1].instructions.append((keyword, rest))
    return stages


class Image:
    """Carries out a Dockerfile's instructions in ``root``, one stage after the other."""

    def __init__(self, scratch: Path, base_path: str, build_args: dict[str, str]) -> None:
        self.scratch = scratch
        self.build_args = build_args
        self.root = scratch / "rootfs"
        self.base_env = {"PATH": base_path}
        self.env: dict[str, str] = {}
        self.workdir = self.root
        self.user: tuple[int, int] | None = None
        self.entrypoint: list[str] = []
        self.stages: dict[str, Path] = {}

    def path(self, image_path: str) -> Path:
        """Where an absolute path of the image lives on this machine."""
        parts = Path(image_path).parts[1:]
        if parts and parts[0] in SYSTEM:
            return Path(image_path)
        return self.root.joinpath(*parts)

    def remap(self, text: str) -> str:
        """Absolute image paths in a command or value, mapped into the scratch root."""
        return re.sub(
            r"(?<![\w$.~-])(/[A-Za-z0-9_.-]+)+",
            lambda m: str(self.path(m.group(0))),
            text,
        )

    def expand(self, value: str) -> str:
        return re.sub(r"\$\{?(\w+)\}?", lambda m: self.env.get(m.group(1), ""), self.remap(value))

    def start(self, stage: Stage, previous: Stage | None) -> None:
        if previous is not None:
            # The finished stage keeps its files (for COPY --from) under its name; the next one
            # starts from an empty root at the same place, so absolute paths stay the same.
            kept = self.scratch / f"stage-{previous.name or len(self.stages)}"
            self.root.rename(kept)
            if previous.name:
                self.stages[previous.name] = kept
        self.root.mkdir()
        self.env = dict(self.base_env)
        self.workdir = self.root
        self.user = None
        self.entrypoint = []

    def run(self, keyword: str, rest: str, final: bool) -> None:
        if keyword == "ENV":
            for item in shlex.split(rest):
                name, _, value = item.partition("=")
                self.env[name] = self.expand(value)
        elif keyword == "ARG":
            # A stage's build argument: --build-arg's value, else the default (in RUN's env).
            name, _, default = rest.partition("=")
            self.env[name] = self.build_args.get(name, shlex.split(default)[0] if default else "")
        elif keyword == "WORKDIR":
            self.workdir = self.path(rest) if rest.startswith("/") else self.workdir / rest
            self.workdir.mkdir(parents=True, exist_ok=True)
        elif keyword == "COPY":
            self._copy(shlex.split(rest))
        elif keyword == "RUN":
            commands = {words[0] for part in re.split(r"&&|;", rest) if (words := part.split())}
            if final and commands <= ACCOUNT_COMMANDS:
                return  # the account: stood in for by USER's numeric ids
            done = subprocess.run(
                ["/bin/sh", "-c", self.remap(rest)],
                cwd=self.workdir, env=self.env, capture_output=True, text=True, timeout=900,
                check=False,
            )  # fmt: skip
            assert done.returncode == 0, f"RUN {rest}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        elif keyword == "USER":
            uid, _, gid = rest.partition(":")
            assert uid.isdigit() and gid.isdigit(), f"USER {rest}: numeric uid:gid expected"
            self.user = (int(uid), int(gid))
        elif keyword == "ENTRYPOINT":
            self.entrypoint = json.loads(rest)
        else:
            assert keyword == "EXPOSE", f"the test does not know how to carry out {keyword}"

    def _copy(self, words: list[str]) -> None:
        origin = REPO
        if words[0].startswith("--from="):
            origin = self.stages[words[0].removeprefix("--from=")]
            words = words[1:]
        *sources, destination = words
        target = (
            self.path(destination) if destination.startswith("/") else self.workdir / destination
        )
        for source in sources:
            found = (
                origin.joinpath(*Path(source).parts[1:])
                if source.startswith("/")
                else (origin / source)
            )
            assert found.exists(), f"COPY {source}: not in the build context"
            if found.is_dir():
                shutil.copytree(
                    found, target, symlinks=True, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                )  # fmt: skip
            else:
                into = destination.endswith("/") or len(sources) > 1
                (target if into else target.parent).mkdir(parents=True, exist_ok=True)
                shutil.copy2(found, target / found.name if into else target)


def _read_only(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            mode = path.stat().st_mode
            path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _writable(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


def _as(user: tuple[int, int] | None) -> dict[str, Any]:
    """subprocess.run arguments that run a command as ``user`` (None: as this process)."""
    if user is None:
        return {}
    return {"user": user[0], "group": user[1], "extra_groups": []}


def _base_python(version: str, user: tuple[int, int] | None) -> str:
    """An interpreter of the base image's Python version that the image's user can run (this
    process's own may live where only its owner can reach, e.g. under /root)."""
    found = [os.path.realpath(getattr(sys, "_base_executable", sys.executable))]
    found += [
        shutil.which(f"python{version}", path=p) or "" for p in ("/usr/local/bin", "/usr/bin")
    ]
    for candidate in dict.fromkeys(f for f in found if f):
        try:
            probe = subprocess.run(
                [candidate, "-c", "import ensurepip, platform, venv; print(platform.python_version())"],  # noqa: E501
                capture_output=True, text=True, timeout=60, check=False, **_as(user),
            )  # fmt: skip
        except OSError:
            continue
        if probe.returncode == 0 and probe.stdout.startswith(f"{version}."):
            return candidate
    pytest.fail(f"no Python {version} with venv here that uid:gid {user} can run: {found}")


@pytest.fixture
def scratch() -> Iterator[Path]:
    # Not under pytest's tmp_path: that is private to this user, and the image's user must be
    # able to reach the root directory.
    folder = Path(tempfile.mkdtemp(prefix="image-"))
    folder.chmod(0o755)
    yield folder
    _writable(folder)
    shutil.rmtree(folder, ignore_errors=True)


# -------------------------------------------------------------------------------- the test


# It installs the locked wheels into a fresh venv: minutes on a loaded 2-core machine.
@pytest.mark.timeout(1200)
def test_the_dockerfile_builds_an_image_that_runs_the_controller(scratch: Path) -> None:
    stages = _stages()
    assert len(stages) >= 2, "a builder stage and a final stage"
    # The base image's interpreter is played by this machine's: same version, and the venv's
    # python (a symlink to the base image's) stays valid only if every stage has that base.
    assert len({s.image for s in stages}) == 1, [s.image for s in stages]
    tag = re.match(r"python:(\d+\.\d+)", stages[0].image)
    assert tag, stages[0].image
    assert tag.group(1) == f"{sys.version_info.major}.{sys.version_info.minor}", (
        f"the base image is Python {tag.group(1)}; run this test with that version"
    )
    users = [rest for keyword, rest in stages[-1].instructions if keyword == "USER"]
    assert users, "the final stage sets no USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and gid.isdigit() and int(uid) != 0, f"USER {users[-1]}"
    as_user = (int(uid), int(gid)) if os.geteuid() == 0 else None
    base_bin = scratch / "base-bin"  # the base image's /usr/local/bin: its python, nothing else
    base_bin.mkdir()
    (base_bin / "python").symlink_to(_base_python(tag.group(1), as_user))
    # As `docker build --build-arg GIT_COMMIT=...` is documented to be run.
    commit = "0123456789abcdef0123456789abcdef01234567"
    image = Image(scratch, f"{base_bin}:/usr/bin:/bin", {"GIT_COMMIT": commit})

    # 1. Build: every instruction of every stage.
    previous = None
    for index, stage in enumerate(stages):
        image.start(stage, previous)
        for keyword, rest in stage.instructions:
            image.run(keyword, rest, final=index == len(stages) - 1)
        previous = stage

    # 2. Run it as the Deployment does: read-only files, the image's user and environment.
    assert image.user == (int(uid), int(gid))
    assert image.entrypoint, "the final stage has no exec-form ENTRYPOINT"
    _read_only(image.root)
    env = {**image.env, "HOME": str(image.path("/nonexistent"))}

    def run(*argv: str) -> str:
        """A command in the image, as its user, from its working directory, with its env."""
        done = subprocess.run(
            argv, cwd=image.workdir, env=env, capture_output=True, text=True, timeout=300,
            check=False, **_as(as_user),
        )  # fmt: skip
        assert done.returncode == 0, (
            f"{shlex.join(argv)} exited {done.returncode}\n"
            f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
        )
        stdout: str = done.stdout
        return stdout

    assert not any(image.workdir.iterdir()), "the working directory must be empty"
    python = shutil.which(image.entrypoint[0], path=env["PATH"])
    assert python is not None and Path(python).is_relative_to(image.root), (
        f"{image.entrypoint[0]} resolves to {python}, not to the image's own environment"
    )

    # 3. Only runtime dependencies, at the locked versions; the package from the image's venv.
    probe = run(
        python, "-c",
        "import importlib.metadata as m, importlib.util as u, json, os, controller;"
        " print(json.dumps(["
        "{d.metadata['Name']: d.version for d in m.distributions()}, controller.__file__,"
        " [n for n in ('tests', 'localcluster', 'bench') if u.find_spec(n)], os.getuid()]))",
    )  # fmt: skip
    installed_raw, controller_file, strays, ran_as = json.loads(probe)
    assert ran_as == (as_user[0] if as_user else os.getuid()) != 0, ran_as
    installed = {_normalize(name): version for name, version in installed_raw.items()}
    assert not DEV_AND_TEST_ONLY & installed.keys(), sorted(DEV_AND_TEST_ONLY & installed.keys())
    assert "stateful-jobset" in installed
    assert "pip" not in installed and "setuptools" not in installed, sorted(installed)
    assert strays == [], f"importable in the image but not the controller: {strays}"
    assert Path(controller_file).is_relative_to(image.root), controller_file
    assert not list(image.root.rglob("__pycache__")), "the image carries bytecode caches"
    locked = {}
    for line in (REPO / "requirements.lock").read_text().splitlines():
        if "==" in line and not line.lstrip().startswith("#"):
            name, _, version = line.partition("==")
            locked[_normalize(name.strip())] = version.strip()
    for name, version in installed.items():
        if name != "stateful-jobset":
            assert locked.get(name) == version, f"{name} {version} is not the locked version"

    # 4. The entrypoint is the controller: --help lists every flag.
    help_text = run(*image.entrypoint, "--help")
    flags = [
        option
        for action in build_parser(env={})._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]
    assert len(flags) >= 17
    missing = [flag for flag in flags if flag not in help_text]
    assert not missing, f"--help does not list {missing}:\n{help_text}"

    # 5. --version: the package's version and the commit given to the build.
    assert run(*image.entrypoint, "--version").startswith(
        f"stateful-jobset {controller.__version__} (commit {commit}, "
    )

    # 6. render on the examples admission accepts: the same output as the in-repo code.
    assert SUPPORTED, "no examples in manifests/examples"
    mounted = scratch / "examples"  # as a volume would bring them in, readable by the image's user
    mounted.mkdir(mode=0o755)
    for example in SUPPORTED:
        shutil.copy(example, mounted / example.name)
        printed = run(*image.entrypoint, "render", str(mounted / example.name))
        expected, errors = io.StringIO(), io.StringIO()
        in_repo = render_in_process([str(mounted / example.name)], out=expected, err=errors)
        assert in_repo == 0, errors.getvalue()
        assert printed == expected.getvalue(), f"render differs for {example.name}"
        assert "kind: Job" in printed
    assert not list(image.root.rglob("__pycache__")), "running the image wrote bytecode"
