"""One version everywhere, and the git commit found wherever the controller runs.

``controller.__version__`` is the only place the version is written: the package metadata reads
it, and every other mention (the image tag in manifests/, the Dockerfile's and the docs' build
commands, CHANGELOG.md's top entry) must equal it. The commit lookup is run on real git
repositories made in a temporary folder.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

import controller
from controller import config as configmod
from controller import version
from controller.runtime.httpserver import exposition

REPO = Path(__file__).resolve().parents[2]
SEMVER = r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?"
# Where a version may be written besides controller/__init__.py: each must be the current one.
MENTIONS = [
    REPO / "Dockerfile",
    REPO / "README.md",
    *sorted((REPO / "docs").glob("*.md")),
    *sorted(p for p in (REPO / "manifests").rglob("*.yaml") if "crd" not in p.parts),
]
# The image named with a tag (`stateful-jobset:1.2.3`, also behind a registry) and kustomize's
# `newTag: 1.2.3`.
TAGGED = re.compile(rf"stateful-jobset:(?P<v>{SEMVER})\b|newTag: *\"?(?P<t>{SEMVER})\b")


def _git() -> str:
    found = shutil.which("git")
    if found is None:
        pytest.fail("git is missing: the commit lookup is tested on real repositories")
    return found


def _repo(folder: Path) -> str:
    """A git repository with controller/ committed; returns HEAD."""
    git = _git()
    (folder / "controller").mkdir(parents=True)
    (folder / "controller" / "__init__.py").write_text("")
    env = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    for args in (["init", "-q"], ["add", "."], [*env, "commit", "-q", "-m", "one"]):
        subprocess.run([git, "-C", str(folder), *args], check=True, timeout=60)
    head = subprocess.run(
        [git, "-C", str(folder), "rev-parse", "HEAD"],
        check=True, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return head.stdout.strip()


# ---------------------------------------------------------------------------------- one version


def test_the_package_version_is_read_from_controller() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in project["project"], "write the version only in controller/__init__"
    assert "version" in project["project"]["dynamic"]
    dynamic = project["tool"]["setuptools"]["dynamic"]["version"]
    assert dynamic == {"attr": "controller.__version__"}
    assert re.fullmatch(SEMVER, controller.__version__)


def test_every_mention_of_a_version_is_the_current_one() -> None:
    found: dict[str, list[str]] = {}
    for path in MENTIONS:
        for match in TAGGED.finditer(path.read_text()):
            found.setdefault(match.group("v") or match.group("t"), []).append(
                str(path.relative_to(REPO))
            )
    assert found, "no image tag found in manifests/, Dockerfile or docs"
    others = {v: paths for v, paths in found.items() if v != controller.__version__}
    assert not others, f"version {controller.__version__} expected, found {others}"
    # The installed image tag itself: the Deployment and the kustomization's images entry.
    manager = yaml.safe_load((REPO / "manifests" / "manager.yaml").read_text())
    [container] = manager["spec"]["template"]["spec"]["containers"]
    assert container["image"] == f"stateful-jobset:{controller.__version__}"
    kust = yaml.safe_load((REPO / "manifests" / "kustomization.yaml").read_text())
    assert [i["newTag"] for i in kust["images"]] == [controller.__version__]
    # The Dockerfile's documented build command tags the image with the version.
    assert f"-t stateful-jobset:{controller.__version__} ." in (REPO / "Dockerfile").read_text()


def test_changelog_top_release_is_the_current_version() -> None:
    text = (REPO / "CHANGELOG.md").read_text()
    headings = re.findall(r"^## \[([^\]]+)\](?: - (\S+))?$", text, re.MULTILINE)
    assert headings and headings[0][0] == "Unreleased", "Keep a Changelog: Unreleased first"
    released = [(v, date) for v, date in headings if v != "Unreleased"]
    assert released, "no entry for a version"
    top, date = released[0]
    assert top == controller.__version__, f"CHANGELOG.md's top entry is {top}"
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", date), f"{top}: no ISO date ({date!r})"


# ---------------------------------------------------------------------------------- the commit


def test_commit_from_a_checkout_then_dirty(tmp_path: Path) -> None:
    head = _repo(tmp_path)
    package = tmp_path / "controller"
    # A COMMIT file left in a checkout never hides the checkout's own commit.
    (package / "COMMIT").write_text("f" * 40 + "\n")
    assert version.find_commit(package) == head
    (package / "__init__.py").write_text("# changed\n")
    assert version.find_commit(package) == f"{head}-dirty"


def test_commit_from_the_file_an_image_build_writes(tmp_path: Path) -> None:
    package = tmp_path / "site-packages" / "controller"
    package.mkdir(parents=True)
    assert version.find_commit(package) == version.UNKNOWN
    (package / "COMMIT").write_text("0123456789abcdef0123456789abcdef01234567\n")
    assert version.find_commit(package) == "0123456789abcdef0123456789abcdef01234567"
    # The Dockerfile writes the file also without --build-arg (empty): that is unknown too.
    (package / "COMMIT").write_text("\n")
    assert version.find_commit(package) == version.UNKNOWN
    (package / "COMMIT").write_text('x"} 1\n')  # never exported as a label value
    assert version.find_commit(package) == version.UNKNOWN


def test_a_package_inside_another_repository_is_not_its_checkout(tmp_path: Path) -> None:
    """An installed package under a project's .venv is not that project's code."""
    _repo(tmp_path)
    package = tmp_path / ".venv" / "lib" / "site-packages" / "controller"
    package.mkdir(parents=True)
    assert version.find_commit(package) == version.UNKNOWN


# ------------------------------------------------------------------ --version, log, build_info


def test_version_flag_prints_version_and_commit(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        configmod.parse(["--version"], env={})
    assert exited.value.code == 0
    build = version.build_info()
    assert capsys.readouterr().out == (
        f"stateful-jobset {controller.__version__} (commit {build.commit}, "
        f"Python {build.python_version})\n"
    )


def test_build_info_metric() -> None:
    registry = CollectorRegistry()
    version.register_build_info(registry)
    [family] = text_string_to_metric_families(exposition(registry).decode())
    [sample] = family.samples
    build = version.build_info()
    assert sample.name == "stateful_jobset_build_info"
    assert sample.value == 1.0
    assert sample.labels == {
        "version": controller.__version__,
        "commit": build.commit,
        "python_version": build.python_version,
    }


def test_first_log_line_names_the_build() -> None:
    """The process's first line, even when it cannot start (no in-cluster configuration)."""
    done = subprocess.run(
        [sys.executable, "-m", "controller", "--kubeconfig=", "--service-account-dir=/nonexistent"],
        capture_output=True, text=True, timeout=120, check=False, cwd=REPO,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    lines = [json.loads(line) for line in done.stderr.splitlines()]
    first = lines[0]
    assert first["msg"] == "stateful-jobset"
    assert first["version"] == controller.__version__
    assert first["commit"] == version.build_info().commit
    assert lines[-1]["msg"] == "cannot start"
