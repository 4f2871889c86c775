"""The release's pure parts (localcluster/release.py): the one-source version rule, the image
reference, the chart's values edit, the reproducible chart archive and SHA256SUMS. The release
itself, with kubectl, helm and the image, runs in tests/integration/test_release.py."""

from __future__ import annotations

import gzip
import io
import subprocess
import tarfile
import time
from pathlib import Path

import pytest

import controller
from localcluster import release

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("requested", "declared", "changelog", "refused"),
    [
        ("0.1.0", "0.1.0", ["0.1.0"], None),
        ("0.2.0-rc.1", "0.2.0-rc.1", ["0.2.0-rc.1", "0.1.0"], None),
        ("0.2.0", "0.1.0", ["0.1.0"], "controller/__init__.py says __version__ = '0.1.0'"),
        ("0.2.0", "0.2.0", ["0.1.0"], "CHANGELOG.md has no entry '## [0.2.0] - <date>'"),
        ("v0.1.0", "0.1.0", ["0.1.0"], "is not a semantic version"),
        ("", "0.1.0", ["0.1.0"], "is not a semantic version"),
    ],
)
def test_version_rule(
    requested: str, declared: str, changelog: list[str], refused: str | None
) -> None:
    if refused is None:
        release.check_version(requested, declared, changelog)
    else:
        with pytest.raises(release.ReleaseError, match=refused.replace("[", r"\[")):
            release.check_version(requested, declared, changelog)


def test_the_declared_version_is_the_package_version() -> None:
    assert release.declared_version() == controller.__version__
    changelog = release.changelog_versions((REPO / "CHANGELOG.md").read_text())
    assert changelog[0] == controller.__version__
    release.check_version(controller.__version__, release.declared_version(), changelog)


def test_another_version_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output = tmp_path / "dist"
    assert release.main(["--version", "99.0.0", "--output", str(output)]) == 1
    assert not output.exists()
    err = capsys.readouterr().err
    assert "VERSION=99.0.0 but controller/__init__.py says" in err
    assert "edit __version__" in err


@pytest.mark.parametrize(
    ("registry", "reference"),
    [
        ("", "stateful-jobset:1.2.3"),
        ("registry.example.com", "registry.example.com/stateful-jobset:1.2.3"),
        ("localhost:5000/team/", "localhost:5000/team/stateful-jobset:1.2.3"),
    ],
)
def test_image_reference(registry: str, reference: str) -> None:
    assert release.image_reference("1.2.3", registry) == reference
    repository, tag = release.split_reference(reference)
    assert (repository, tag) == (reference.rsplit(":", 1)[0], "1.2.3")


def test_a_registry_that_is_no_prefix_is_refused() -> None:
    with pytest.raises(release.ReleaseError, match="not a registry"):
        release.image_reference("1.2.3", "Registry Example")


def test_chart_values_take_the_registry_and_keep_the_comments() -> None:
    values = (REPO / "charts" / "stateful-jobset" / "values.yaml").read_text()
    edited = release.chart_values(values, "registry.example.com/stateful-jobset")
    assert "  repository: registry.example.com/stateful-jobset\n" in edited
    assert edited.replace("registry.example.com/stateful-jobset", "stateful-jobset") == values
    with pytest.raises(release.ReleaseError, match="no single 'repository:' line"):
        release.chart_values("image:\n  tag: ''\n", "x/stateful-jobset")


def _tgz(mtime: float, names: list[str]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for name in names:
            info = tarfile.TarInfo(name)
            data = f"content of {name}\n".encode()
            info.size, info.mtime, info.uid, info.uname = len(data), int(mtime), 1000, "me"
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(out.getvalue(), mtime=mtime)


def test_chart_archive_is_normalised_to_the_same_bytes() -> None:
    """helm package writes the packaging time into the tar headers and the gzip header."""
    names = ["c/Chart.yaml", "c/values.yaml", "c/templates/a.yaml"]
    first = _tgz(time.time() - 3600, names)
    second = _tgz(time.time(), list(reversed(names)))
    assert first != second
    assert release.normalised_tgz(first) == release.normalised_tgz(second)
    with tarfile.open(fileobj=io.BytesIO(release.normalised_tgz(first)), mode="r:gz") as tar:
        members = tar.getmembers()
        assert [m.name for m in members] == sorted(names)
        assert {(m.mtime, m.uid, m.uname) for m in members} == {(0, 0, "")}
        content = tar.extractfile("c/values.yaml")
        assert content is not None and content.read() == b"content of c/values.yaml\n"


def test_sha256sums_is_what_sha256sum_checks(tmp_path: Path) -> None:
    for name, data in [("b.yaml", b"b\n"), ("a.tgz", b"a"), ("c.tar", b"")]:
        (tmp_path / name).write_bytes(data)
    sums = release.sha256sums([tmp_path / "b.yaml", tmp_path / "c.tar", tmp_path / "a.tgz"])
    assert [line.split("  ")[1] for line in sums.splitlines()] == ["a.tgz", "b.yaml", "c.tar"]
    (tmp_path / "SHA256SUMS").write_text(sums)
    done = subprocess.run(
        ["sha256sum", "-c", "SHA256SUMS"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(": OK") == 3
