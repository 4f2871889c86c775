"""A release: ``make release VERSION=x.y.z`` writes ``dist/`` (issue 16).

- ``stateful-jobset-<v>.yaml``: the single install manifest, ``kubectl kustomize`` of manifests/
  with the image pinned to ``stateful-jobset:<v>`` (``REGISTRY=host/path`` prefixes it);
- ``stateful-jobset-pod-scope-<v>.yaml``: the optional Pod-scope admission policy and binding
  (manifests/pod-scope/, Kubernetes >= 1.36), kept out of the default install as in manifests/;
- ``stateful-jobset-<v>.tgz``: the Helm chart, ``helm package`` with version and appVersion <v>
  (and the registry as the default ``image.repository``);
- ``stateful-jobset-image-<v>.tar``: the controller's image as ``make image`` builds it, an OCI
  image layout in one tar (``ctr images import``, ``skopeo copy oci-archive:...``); an image
  already built from the same inputs (``build/image/inputs.sha256``) is reused;
- ``SHA256SUMS``: ``sha256sum -c`` reads it.

The version has one source, ``__version__`` in controller/__init__.py: VERSION must equal it and
CHANGELOG.md must have its entry, else nothing is written (a release is made by editing those two,
committing, then ``make release``). Reproducible: the same commit and inputs give the same bytes
(kustomize's output is ordered, the chart's archive is rewritten with mtime 0, the image is).
"""

from __future__ import annotations

import argparse
import ast
import gzip
import hashlib
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

import yaml

from localcluster import build, controllerimage

REPO = Path(__file__).resolve().parent.parent
NAME = "stateful-jobset"
SEMVER = re.compile(r"\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?")
SUMS = "SHA256SUMS"


class ReleaseError(RuntimeError):
    """The release cannot be made; the message says why and what to do."""


def declared_version(repo: Path = REPO) -> str:
    """``__version__`` as written in controller/__init__.py (read, not imported: the installed
    package may be another checkout's)."""
    tree = ast.parse((repo / "controller" / "__init__.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets
        ):
            value = ast.literal_eval(node.value)
            if isinstance(value, str):
                return value
    raise ReleaseError("controller/__init__.py has no __version__ = '...'")


def changelog_versions(text: str) -> list[str]:
    """The versions CHANGELOG.md has an entry for (``## [x.y.z] - date``), in order."""
    return re.findall(r"^## \[([^\]]+)\] - \S+$", text, re.MULTILINE)


def check_version(requested: str, declared: str, changelog: list[str]) -> None:
    """Refuse a release whose version is not the one source's."""
    if not SEMVER.fullmatch(requested):
        raise ReleaseError(f"VERSION={requested!r} is not a semantic version (x.y.z)")
    if requested != declared:
        raise ReleaseError(
            f"VERSION={requested} but controller/__init__.py says __version__ = {declared!r}: "
            "the version is written only there. To release another version, edit __version__ "
            "and move CHANGELOG.md's Unreleased entries under the new version, commit, then run "
            "make release VERSION=<the new version>"
        )
    if requested not in changelog:
        raise ReleaseError(f"CHANGELOG.md has no entry '## [{requested}] - <date>'")


def image_reference(version: str, registry: str = "") -> str:
    """``stateful-jobset:<v>``, or behind the registry prefix (``host[:port]/path``)."""
    registry = registry.strip().rstrip("/")
    if registry and not re.fullmatch(r"[a-z0-9]([a-z0-9.:_/-]*[a-z0-9])?", registry):
        raise ReleaseError(f"REGISTRY={registry!r} is not a registry/repository prefix")
    return f"{registry}/{NAME}:{version}" if registry else f"{NAME}:{version}"


def split_reference(reference: str) -> tuple[str, str]:
    """(repository, tag): the tag is after the last colon that follows the last slash."""
    repository, _, tag = reference.rpartition(":")
    return repository, tag


def kustomize(kubectl: Path, resources: list[str], images: list[dict[str, str]]) -> str:
    """``kubectl kustomize`` of an overlay with these resources (folders of the repository)."""
    with tempfile.TemporaryDirectory(prefix="release-overlay-") as scratch:
        folder = Path(scratch)
        overlay: dict[str, object] = {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            # Kustomize refuses absolute paths in resources.
            "resources": [os.path.relpath(REPO / r, folder) for r in resources],
        }
        if images:
            overlay["images"] = images
        (folder / "kustomization.yaml").write_text(yaml.safe_dump(overlay))
        done = subprocess.run(
            [str(kubectl), "kustomize", str(folder)], capture_output=True, text=True, timeout=120
        )
    if done.returncode != 0:
        raise ReleaseError(f"kubectl kustomize {resources}: {done.stderr.strip()}")
    return done.stdout


def manifest_text(rendered: str, header: str) -> str:
    """The rendered objects behind a comment that says what they are and how to apply them."""
    lines = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    return f"{lines}---\n{rendered}"


def install_manifest(kubectl: Path, version: str, reference: str) -> str:
    repository, tag = split_reference(reference)
    rendered = kustomize(
        kubectl, ["manifests"], [{"name": NAME, "newName": repository, "newTag": tag}]
    )
    images = re.findall(r"^\s+image: (\S+)$", rendered, re.MULTILINE)
    if images != [reference]:
        raise ReleaseError(f"the install manifest names the images {images}, not [{reference}]")
    return manifest_text(
        rendered,
        f"Stateful JobSet {version}: CRD, namespace, RBAC, Deployment ({reference}), PDB,\n"
        'metrics Service. Install (docs/operations.md, "Install from a release"):\n'
        f"  kubectl apply --server-side -f {NAME}-{version}.yaml",
    )


def pod_scope_manifest(kubectl: Path, version: str) -> str:
    return manifest_text(
        kustomize(kubectl, ["manifests/pod-scope"], []),
        f"Stateful JobSet {version}: the Pod-scope volumes' MutatingAdmissionPolicy and binding\n"
        '(optional, Kubernetes >= 1.36; docs/operations.md, "Pod-scope volumes"):\n'
        f"  kubectl apply --server-side -f {NAME}-pod-scope-{version}.yaml",
    )


def chart_values(values: str, repository: str) -> str:
    """values.yaml with ``image.repository`` set (a text edit: the comments stay)."""
    line = re.compile(rf"^(  repository: ){re.escape(NAME)}$", re.MULTILINE)
    edited, count = line.subn(rf"\g<1>{repository}", values)
    if count != 1:
        raise ReleaseError("charts/stateful-jobset/values.yaml: no single 'repository:' line")
    return edited


def normalised_tgz(data: bytes) -> bytes:
    """The archive with its members in order, mtime 0, owner root, gzip without a timestamp:
    ``helm package`` writes the packaging time into both."""
    out = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as source,
        tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as target,
    ):
        members = sorted(source.getmembers(), key=lambda m: m.name)
        for member in members:
            content = source.extractfile(member) if member.isfile() else None
            member.mtime = 0
            member.uid = member.gid = 0
            member.uname = member.gname = ""
            member.pax_headers = {}
            target.addfile(member, content)
    return gzip.compress(out.getvalue(), compresslevel=9, mtime=0)


def package_chart(helm: Path, version: str, repository: str, output: Path) -> Path:
    """``helm package`` of a copy of the chart (version, appVersion, default image.repository)."""
    with tempfile.TemporaryDirectory(prefix="release-chart-") as scratch:
        chart = Path(scratch) / NAME
        shutil.copytree(REPO / "charts" / NAME, chart)
        values = chart / "values.yaml"
        values.write_text(chart_values(values.read_text(), repository))
        packaged = Path(scratch) / "packaged"
        done = subprocess.run(
            [str(helm), "package", str(chart), "--version", version, "--app-version", version,
             "-d", str(packaged)],
            capture_output=True, text=True, timeout=120,
            env=dict(os.environ, HELM_CACHE_HOME=scratch, HELM_CONFIG_HOME=scratch,
                     HELM_DATA_HOME=scratch),
        )  # fmt: skip
        if done.returncode != 0:
            raise ReleaseError(f"helm package: {done.stderr.strip()}")
        (tgz,) = packaged.glob("*.tgz")
        target = output / f"{NAME}-{version}.tgz"
        target.write_bytes(normalised_tgz(tgz.read_bytes()))
    return target


def image_archive(
    reference: str, image_dir: Path, output: Path, report: Callable[[str], None]
) -> Path:
    """The image's archive, copied from ``image_dir`` when it was built from the same inputs,
    else built there first."""
    stamp = image_dir / controllerimage.INPUTS_FILE
    wanted = controllerimage.inputs_digest(reference)
    recorded = stamp.read_text().split() if stamp.is_file() else []
    if len(recorded) == 2 and recorded[0] == wanted and (image_dir / recorded[1]).is_file():
        report(f"==> image: reusing {image_dir / recorded[1]} (same inputs)")
        archive = image_dir / recorded[1]
    else:
        report(f"==> image: building {reference} into {image_dir} (make image)")
        archive = controllerimage.build_image(image_dir, reference, report).archive
    target = output / f"{NAME}-image-{split_reference(reference)[1]}.tar"
    shutil.copyfile(archive, target)
    return target


def sha256sums(paths: list[Path]) -> str:
    """``sha256sum``'s format, sorted by name."""
    lines = []
    for path in sorted(paths, key=lambda p: p.name):
        lines.append(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  {path.name}\n")
    return "".join(lines)


def release(
    version: str,
    output: Path,
    registry: str = "",
    image_dir: Path = REPO / "build" / "image",
    report: Callable[[str], None] = print,
) -> list[Path]:
    """Write the release into ``output`` (emptied first); returns its files."""
    changelog = changelog_versions((REPO / "CHANGELOG.md").read_text())
    check_version(version, declared_version(), changelog)
    reference = image_reference(version, registry)
    repository = split_reference(reference)[0]
    report(f"==> release {version} into {output} (image {reference})")
    kubectl = build.ensure_binaries(report).path("kubectl")
    helm = build.ensure_helm(report)
    shutil.rmtree(output, ignore_errors=True)
    output.mkdir(parents=True)
    files = []
    report(f"==> install manifest (kubectl kustomize manifests/, image {reference})")
    install = output / f"{NAME}-{version}.yaml"
    install.write_text(install_manifest(kubectl, version, reference))
    pod_scope = output / f"{NAME}-pod-scope-{version}.yaml"
    pod_scope.write_text(pod_scope_manifest(kubectl, version))
    files += [install, pod_scope]
    report("==> Helm chart (helm package charts/stateful-jobset)")
    files.append(package_chart(helm, version, repository, output))
    files.append(image_archive(reference, image_dir, output, report))
    (output / SUMS).write_text(sha256sums(files))
    for path in [*files, output / SUMS]:
        report(f"  {path.stat().st_size / 2**20:8.2f} MiB  {path.relative_to(output.parent)}")
    return [*files, output / SUMS]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcluster.release")
    parser.add_argument("--version", required=True, help="must equal controller.__version__")
    parser.add_argument("--output", type=Path, default=REPO / "dist")
    parser.add_argument("--registry", default="", help="image prefix, e.g. registry.example.com")
    parser.add_argument("--image-dir", type=Path, default=REPO / "build" / "image")
    args = parser.parse_args(argv)
    try:
        release(args.version, args.output, args.registry, args.image_dir)
    except (ReleaseError, controllerimage.BuildError, build.BuildError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
