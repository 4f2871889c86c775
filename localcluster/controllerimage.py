"""The controller's OCI image, built without a container engine: ``make image`` (issue 16).

The same image as the ``Dockerfile`` (same entrypoint, user, working directory, environment and
``/opt/venv``), assembled from pinned inputs so that the same inputs give the same digest:

- a base of Debian bookworm packages (its ``python3.11`` and the libraries the standard library's
  extension modules need), at the versions and SHA-256 of ``localcluster/controller-image.lock``,
  fetched with ``apt-get download`` and unpacked with ``dpkg-deb -x`` (no maintainer scripts run,
  nothing to run them with: the image has no shell, no dpkg, no pip, no compiler);
- the runtime dependencies at ``requirements.lock``'s versions, as wheels for CPython 3.11 on
  glibc <= 2.36 (bookworm's), installed by the host's pip into the image's ``/opt/venv`` (pip runs
  here, at build time, never in the image);
- the controller package, built into a wheel from a copy of what the Dockerfile copies;
- everything byte-compiled at build time by the image's own interpreter (unchecked-hash .pyc: the
  root filesystem is read-only and ``PYTHONDONTWRITEBYTECODE=1``, so nothing is written later);
- three layers (Debian, dependencies, controller; each reproducible: ``images.layer_tar``).

Writes an OCI image layout directory and the same as one tarball (what ``ctr images import``
reads; it also has ``docker save``'s ``manifest.json``), prints the digest and sizes.
``python -m localcluster.controllerimage lock`` refreshes the Debian lock from the candidates of
this machine's apt sources (after a Debian point release has replaced a locked version in the
mirror).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from localcluster import build, images

REPO = Path(__file__).resolve().parent.parent
LOCK = Path(__file__).resolve().parent / "controller-image.lock"
REPOSITORY = "stateful-jobset"
# The Dockerfile's final stage, which tests/unit/test_image_matches_dockerfile.py parses and
# compares with these.
VENV = "/opt/venv"
ENTRYPOINT = ("python", "-m", "controller")
USER = "65532:65532"
WORKDIR = "/app"
EXPOSED_PORTS = ("8443/tcp", "8081/tcp")
ENV = (
    f"PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "PYTHONDONTWRITEBYTECODE=1",
    "PYTHONUNBUFFERED=1",
)
PYTHON = "python3.11"
# The build backend of the controller's wheel (pyproject.toml asks setuptools>=68), pinned: its
# version is written into the wheel's metadata, so an unpinned one would change the digest.
SETUPTOOLS = "84.2.1"
# What the Dockerfile's builder stage copies from the build context.
BUILD_CONTEXT = ("pyproject.toml", "requirements.lock", "README.md", "controller")
# Wheels for bookworm: CPython 3.11 on x86_64 with glibc 2.36. pip does not expand an explicit
# --platform to the older manylinux tags it implies, so they are all listed.
WHEEL_PLATFORMS = (
    "manylinux2014_x86_64",
    *(f"manylinux_2_{minor}_x86_64" for minor in range(17, 37)),
)
# Never in the image: documentation and the package manager's own data.
PRUNED = ("usr/share/man", "usr/share/info", "usr/share/lintian", "usr/share/locale")
# Debian's merged /usr: these top-level directories are symlinks into usr/.
MERGED = ("bin", "sbin", "lib", "lib64")
PASSWD = (
    "root:x:0:0:root:/root:/usr/sbin/nologin\n"
    "nonroot:x:65532:65532:nonroot:/nonexistent:/usr/sbin/nologin\n"
)
GROUP = "root:x:0:\nnonroot:x:65532:\n"


class BuildError(RuntimeError):
    """The image could not be built; the message says what to do."""


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    sha256: str

    def cached(self, cache: Path) -> Path | None:
        """The .deb ``apt-get download`` left in ``cache`` (the epoch's colon escaped as %3a;
        architecture amd64 or all)."""
        version = self.version.replace(":", "%3a")
        found = sorted(cache.glob(f"{self.name}_{version}_*.deb"))
        return found[0] if found else None


def read_lock(path: Path = LOCK) -> list[Package]:
    packages = []
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, version, sha256 = line.split()
            packages.append(Package(name, version, sha256))
    return packages


def lock_names(path: Path = LOCK) -> list[str]:
    return [package.name for package in read_lock(path)]


def _run(
    argv: list[str], what: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> str:
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"{what} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.stdout


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch_debs(
    packages: Iterable[Package], cache: Path, report: Callable[[str], None]
) -> list[Path]:
    """Each locked package's .deb, from the cache or ``apt-get download``, checked by SHA-256."""
    cache.mkdir(parents=True, exist_ok=True)
    paths = []
    for package in packages:
        if package.cached(cache) is None:
            report(f"  apt-get download {package.name}={package.version}")
            proc = subprocess.run(
                ["apt-get", "download", f"{package.name}={package.version}"],
                cwd=cache,
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                raise BuildError(
                    f"apt-get download {package.name}={package.version} failed: "
                    f"{proc.stderr.strip()}\nIf the version left the mirror (a Debian point "
                    "release), refresh the lock: python -m localcluster.controllerimage lock "
                    "(after apt-get update)"
                )
        path = package.cached(cache)
        if path is None or _sha256(path) != package.sha256:
            raise BuildError(f"{package.name}={package.version}: SHA-256 differs from {LOCK.name}")
        paths.append(path)
    return paths


def write_lock(names: Iterable[str], cache: Path, path: Path = LOCK) -> None:
    """Lock each package at this machine's apt candidate version (downloaded and hashed)."""
    header = [line for line in path.read_text().splitlines() if line.startswith("#")]
    names = list(names)
    policy = _run(["apt-cache", "policy", *names], "apt-cache policy")
    # "name:\n  Installed: ...\n  Candidate: version" per package, in the order asked.
    candidates = dict(re.findall(r"^(\S+):\n(?:  .*\n)*?  Candidate: (\S+)", policy, re.M))
    lines = []
    cache.mkdir(parents=True, exist_ok=True)
    for name in names:
        version = candidates.get(name, "(none)")
        if version == "(none)":
            raise BuildError(f"no apt candidate for {name}: apt-get update?")
        package = Package(name, version, "")
        if package.cached(cache) is None:
            _run(["apt-get", "download", f"{name}={version}"], f"apt-get download {name}", cache)
        deb = package.cached(cache)
        assert deb is not None, f"apt-get download left no {name} .deb"
        lines.append(f"{name} {version} {_sha256(deb)}")
    path.write_text("\n".join(header + lines) + "\n")


def _move_into(source: Path, target: Path) -> None:
    """Move ``source``'s entries into the directory ``target``, merging directories both have."""
    target.mkdir(parents=True, exist_ok=True)
    for child in sorted(source.iterdir()):
        there = target / child.name
        if child.is_dir() and not child.is_symlink() and there.is_dir() and not there.is_symlink():
            _move_into(child, there)
        elif there.exists() or there.is_symlink():
            raise BuildError(f"{child} and {there} clash")
        else:
            child.rename(there)
    source.rmdir()


def _merge_usr(root: Path) -> None:
    """Move what the packages put in /bin, /lib ... under /usr and link the old names there, as
    a bookworm system has it (the dynamic loader's /lib64 path then resolves)."""
    for name in MERGED:
        top, usr = root / name, root / "usr" / name
        if top.is_dir() and not top.is_symlink():
            _move_into(top, usr)
        if usr.exists():
            (root / name).symlink_to(f"usr/{name}")


def _prune(root: Path) -> None:
    for relative in PRUNED:
        shutil.rmtree(root / relative, ignore_errors=True)
    doc = root / "usr" / "share" / "doc"
    if doc.is_dir():  # the copyright files stay: the licences of what the image ships
        for path in sorted(doc.rglob("*"), reverse=True):
            if path.is_dir() and not path.is_symlink():
                if not any(path.iterdir()):
                    path.rmdir()
            elif path.name != "copyright":
                path.unlink()


def debian_root(debs: Iterable[Path], root: Path) -> None:
    for deb in debs:
        _run(["dpkg-deb", "-x", str(deb), str(root)], f"dpkg-deb -x {deb.name}")
    _merge_usr(root)
    _prune(root)
    for path in root.rglob("__pycache__"):
        shutil.rmtree(path)


def base_files() -> list[images.Entry]:
    """What a base image has beyond the packages: the accounts, /tmp, the empty working
    directory (``python -m`` puts the current directory first on sys.path)."""
    return [
        images.file("etc/passwd", PASSWD.encode()),
        images.file("etc/group", GROUP.encode()),
        images.directory("tmp", 0o1777),
        images.directory("root", 0o700),
        images.directory(WORKDIR.lstrip("/")),
    ]


def build_wheel(work: Path, report: Callable[[str], None]) -> Path:
    """The controller's wheel, built from a copy of exactly what the Dockerfile copies, by a
    pinned setuptools (its version is written into the wheel's metadata)."""
    source = work / "source"
    for name in BUILD_CONTEXT:
        origin = REPO / name
        if origin.is_dir():
            shutil.copytree(origin, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            source.mkdir(parents=True, exist_ok=True)
            shutil.copy2(origin, source / name)
    # As the Dockerfile's GIT_COMMIT: the commit the package reports (--version, the first log
    # line, the build_info metric), always written so that a stray COMMIT file never names
    # another one. The commit is an input: the same commit builds the same image.
    (source / "controller" / "COMMIT").write_text(f"{git_commit()}\n")
    wheels = work / "wheel"
    constraint = work / "build-constraints.txt"
    constraint.write_text(f"setuptools=={SETUPTOOLS}\n")
    report(f"  building the controller's wheel (setuptools {SETUPTOOLS})")
    _run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(wheels), "."],
        "pip wheel",
        cwd=source,
        # pip's isolated build environment takes its constraints from the environment only.
        env=dict(os.environ, PIP_CONSTRAINT=str(constraint)),
    )
    (wheel,) = wheels.glob("stateful_jobset-*.whl")
    return wheel


def git_commit() -> str:
    """HEAD of the repository the image is built from ("" outside a git checkout)."""
    proc = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True
    )
    return proc.stdout.strip() if proc.returncode == 0 else ""


def version_of(wheel: Path) -> str:
    return wheel.name.split("-")[1]


def runtime_requirements() -> list[str]:
    """The project's runtime dependencies (pyproject.toml), without extras."""
    with (REPO / "pyproject.toml").open("rb") as handle:
        return list(tomllib.load(handle)["project"]["dependencies"])


def _pip_install(target: Path, requirements: list[str], *extra: str) -> None:
    """pip install --target for the image's interpreter: bookworm's CPython 3.11, wheels only."""
    platforms = [arg for p in WHEEL_PLATFORMS for arg in ("--platform", p)]
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-compile",
            "--no-warn-script-location",
            "--target",
            str(target),
            *platforms,
            "--python-version",
            "3.11",
            "--implementation",
            "cp",
            "--abi",
            "cp311",
            "--only-binary=:all:",
            "-c",
            str(REPO / "requirements.lock"),
            *extra,
            *requirements,
        ],
        "pip install --target",
    )
    # Console scripts name this machine's interpreter; direct_url.json the wheel's temporary path.
    shutil.rmtree(target / "bin", ignore_errors=True)
    for path in target.glob("*.dist-info/direct_url.json"):
        path.unlink()
        record = path.with_name("RECORD")
        kept = [r for r in record.read_text().splitlines() if "/direct_url.json," not in r]
        record.write_text("\n".join(kept) + "\n")
    for path in target.rglob("__pycache__"):
        shutil.rmtree(path)


def install_site_packages(wheel: Path, target: Path, report: Callable[[str], None]) -> None:
    """The locked runtime dependencies and the controller, as bookworm wheels, into ``target``
    (the image's site-packages) by the host's pip. The dependencies are cached by what decides
    them (requirements.lock, the declared dependencies, the wheel tags): a rebuild after a change
    of the controller alone asks no package index."""
    requirements = runtime_requirements()
    key = hashlib.sha256(
        json.dumps(
            [(REPO / "requirements.lock").read_text(), requirements, WHEEL_PLATFORMS]
        ).encode()
    ).hexdigest()[:16]
    cached = build.cache_root() / "image-dependencies" / key
    if cached.is_dir():
        report(f"  locked runtime dependencies from the cache ({cached})")
    else:
        report("  installing the locked runtime dependencies (wheels for cp311, glibc <= 2.36)")
        partial = cached.with_name(f".{key}.partial-{os.getpid()}")
        shutil.rmtree(partial, ignore_errors=True)
        _pip_install(partial, requirements)
        partial.rename(cached)
    shutil.copytree(cached, target, symlinks=True, dirs_exist_ok=True)
    # The controller alone: its dependencies are there already.
    _pip_install(target, [str(wheel)], "--no-deps")


def make_venv(root: Path) -> Path:
    """/opt/venv as ``python -m venv`` makes it (without pip): the interpreter's names on PATH
    and pyvenv.cfg, so that sys.prefix is the venv and its site-packages is on sys.path.
    Returns the site-packages directory."""
    venv = root / VENV.lstrip("/")
    site = venv / "lib" / PYTHON / "site-packages"
    site.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text(
        "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11\n"
    )
    (venv / "bin").mkdir()
    (venv / "bin" / PYTHON).symlink_to(f"/usr/bin/{PYTHON}")
    (venv / "bin" / "python3").symlink_to(PYTHON)
    (venv / "bin" / "python").symlink_to(PYTHON)
    (venv / "lib64").symlink_to("lib")
    return site


def precompile(root: Path, report: Callable[[str], None]) -> None:
    """Byte-compile the standard library and site-packages with the image's own interpreter
    (run from outside through the image's dynamic loader: no chroot, no root), as Debian's
    postinst would have: the read-only root filesystem cannot take the .pyc files later, and
    without them every start compiles every module again (seconds of CPU). Unchecked-hash .pyc
    files hold no source mtime, a fixed hash seed keeps sets' order: reproducible."""
    report("  byte-compiling (the image's python3.11, unchecked-hash .pyc)")
    usr = root / "usr"
    # PYTHONDONTWRITEBYTECODE: the modules compileall itself imports would otherwise get
    # timestamped .pyc files first (and -f so that none is kept).
    env = {
        "PYTHONHOME": str(usr),
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PATH": os.environ.get("PATH", ""),
    }
    proc = subprocess.run(
        [
            str(usr / "lib64" / "ld-linux-x86-64.so.2"),
            "--library-path",
            str(usr / "lib" / "x86_64-linux-gnu"),
            str(usr / "bin" / PYTHON),
            "-m",
            "compileall",
            "-q",
            "-f",
            "--invalidation-mode=unchecked-hash",
            "-s",
            str(root),
            "-p",
            "/",
            str(usr / "lib" / PYTHON),
            str(root / VENV.lstrip("/") / "lib" / PYTHON / "site-packages"),
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise BuildError(f"compileall failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")


def layer_of(path: str) -> int:
    """0: the Debian base, 1: the dependencies, 2: the controller (what changes most often last,
    so that a registry or node keeps the other two)."""
    site = f"{VENV.lstrip('/')}/lib/{PYTHON}/site-packages/"
    if path.startswith(site):
        top = path.removeprefix(site).split("/")[0]
        if top == "controller" or top.startswith("stateful_jobset-"):
            return 2
    return 1 if path == VENV.lstrip("/") or path.startswith(VENV.lstrip("/") + "/") else 0


@dataclass(frozen=True)
class Built:
    reference: str
    image: images.Image
    layout: Path
    archive: Path


def build_image(
    output: Path,
    reference: str | None = None,
    report: Callable[[str], None] = print,
) -> Built:
    began = time.monotonic()
    # Taken before the build reads its inputs (a file edited meanwhile then builds again next
    # time); without a name given, the name comes from the wheel, so after it.
    inputs = inputs_digest(reference) if reference else None
    with tempfile.TemporaryDirectory(prefix="controller-image-") as scratch:
        work = Path(scratch)
        report(f"==> Debian base ({LOCK.relative_to(REPO)})")
        debs = fetch_debs(read_lock(), build.cache_root() / "debs", report)
        root = work / "root"
        debian_root(debs, root)
        report(f"==> Python packages ({len(debs)} Debian packages unpacked)")
        wheel = build_wheel(work, report)
        install_site_packages(wheel, make_venv(root), report)
        precompile(root, report)
        layers: list[list[images.Entry]] = [base_files(), [], []]
        for entry in images.tree_entries(root):
            layers[layer_of(entry.path)].append(entry)
        version = version_of(wheel)
        reference = reference or f"{REPOSITORY}:{version}"
        report("==> layers")
        image = images.make_image(
            layers,
            entrypoint=ENTRYPOINT,
            env=ENV,
            user=USER,
            workdir=WORKDIR,
            exposed_ports=EXPOSED_PORTS,
            labels={
                "org.opencontainers.image.title": REPOSITORY,
                "org.opencontainers.image.version": version,
            },
            created_by="localcluster.controllerimage",
        )
    full = qualified(reference)
    layout = images.write_layout(_fresh(output / "oci"), {full: image})
    archive_name = re.sub(r"[/:]", "-", reference) + ".tar"
    archive = images.write_archive(output / archive_name, {full: image})
    inputs = inputs or inputs_digest(reference)
    (output / INPUTS_FILE).write_text(f"{inputs}  {archive_name}\n")
    sizes = ", ".join(f"{len(layer.data) / 2**20:.1f}" for layer in image.layers)
    unpacked = sum(len(e.data) for layer in layers for e in layer)
    report(f"image {full}")
    report(f"  manifest {image.manifest.digest}")
    report(f"  layers (Debian, dependencies, controller): {sizes} MiB compressed")
    report(
        f"  size {sum(len(b.data) for b in image.layers) / 2**20:.1f} MiB compressed, "
        f"{unpacked / 2**20:.1f} MiB unpacked"
    )
    report(f"  OCI layout {layout}, archive {archive}")
    report(f"built in {time.monotonic() - began:.0f}s")
    return Built(full, image, layout, archive)


# Written beside the layout and the archive: the digest of what decided them (inputs_digest), so
# that a release (localcluster/release.py) reuses an image built from the same inputs.
INPUTS_FILE = "inputs.sha256"


def inputs_digest(reference: str) -> str:
    """What decides the image's bytes: the files the build copies (controller/COMMIT aside: the
    build writes it), the commit it writes instead, the Debian lock, this module and the layer
    writer, the pinned setuptools and the name. Same digest, same image."""
    digest = hashlib.sha256()
    paths: list[Path] = []
    for name in BUILD_CONTEXT:
        origin = REPO / name
        paths += (
            sorted(p for p in origin.rglob("*") if p.is_file()) if origin.is_dir() else [origin]
        )
    paths += [LOCK, Path(__file__).resolve(), Path(images.__file__).resolve()]
    for path in paths:
        relative = path.relative_to(REPO).as_posix()
        if "__pycache__" in path.parts or relative == "controller/COMMIT":
            continue
        digest.update(f"{relative}\0{_sha256(path)}\n".encode())
    digest.update(f"commit {git_commit()}\nsetuptools {SETUPTOOLS}\nref {reference}\n".encode())
    return digest.hexdigest()


def qualified(reference: str) -> str:
    """The full name a container runtime gives ``reference``: ``stateful-jobset:0.1.0`` is
    ``docker.io/library/stateful-jobset:0.1.0``."""
    first = reference.split("/", 1)[0]
    if "/" in reference and ("." in first or ":" in first or first == "localhost"):
        return reference
    return f"docker.io/{reference if '/' in reference else 'library/' + reference}"


def _fresh(directory: Path) -> Path:
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    return directory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcluster.controllerimage")
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("build", help="build the image")
    make.add_argument("--output", type=Path, default=REPO / "build" / "image")
    make.add_argument("--tag", default=None, help="default: stateful-jobset:<version>")
    sub.add_parser("lock", help="lock the Debian packages at this machine's apt candidates")
    args = parser.parse_args(argv)
    try:
        if args.command == "lock":
            write_lock(lock_names(), build.cache_root() / "debs")
            print(f"wrote {LOCK}")
        else:
            build_image(args.output, args.tag)
    except BuildError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
