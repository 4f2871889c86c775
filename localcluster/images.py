"""Small OCI images built locally, with no Docker engine and no registry on the internet.

The real node (issue 13) needs two images: ``busybox`` for workloads (from Debian's
busybox-static: ``/bin/busybox`` plus one symlink per applet) and the kubelet's sandbox image
``pause`` (``localcluster/pause``, a static Go binary from the standard library). This module
writes them as OCI images:

- deterministic layers (sorted entries, mtime 0, uid/gid 0, gzip with mtime 0): the same input
  gives the same digests on every machine, so a cache or a registry never holds two copies;
- an OCI image layout directory (``oci-layout``, ``index.json``, ``blobs/sha256/...``);
- a ``docker save``-style tarball (the same layout plus ``manifest.json``) that
  ``ctr images import`` reads;
- a push over the OCI distribution API (monolithic blob uploads, manifest PUT) with the standard
  library, so a local registry can serve them as a docker.io mirror.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localcluster import build

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
# What a client such as containerd sends when it resolves a tag.
PULL_ACCEPT = ", ".join(
    (
        MEDIA_MANIFEST,
        MEDIA_INDEX,
        "application/vnd.docker.distribution.manifest.v2+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
    )
)
REF_NAME = "org.opencontainers.image.ref.name"
PAUSE_SOURCE = Path(__file__).parent / "pause"


class ImageError(RuntimeError):
    """Building or pushing an image failed; the message says what and why."""


def sha256_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Blob:
    media_type: str
    data: bytes = field(repr=False)

    @property
    def digest(self) -> str:
        return sha256_digest(self.data)

    def descriptor(self, annotations: Mapping[str, str] | None = None) -> dict[str, Any]:
        desc: dict[str, Any] = {
            "mediaType": self.media_type,
            "digest": self.digest,
            "size": len(self.data),
        }
        if annotations:
            desc["annotations"] = dict(annotations)
        return desc


@dataclass(frozen=True)
class Entry:
    """One file system entry of a layer: a regular file, a directory or a symlink."""

    path: str  # relative, no leading slash: "bin/sh"
    kind: str  # "file", "dir" or "symlink"
    mode: int = 0o755
    data: bytes = field(default=b"", repr=False)
    target: str = ""  # symlink target


def file(path: str, data: bytes, mode: int = 0o644) -> Entry:
    return Entry(path, "file", mode, data)


def directory(path: str, mode: int = 0o755) -> Entry:
    return Entry(path, "dir", mode)


def symlink(path: str, target: str) -> Entry:
    return Entry(path, "symlink", 0o777, target=target)


def _parents(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def layer_tar(entries: Iterable[Entry]) -> bytes:
    """An uncompressed, reproducible tar of the entries; missing parent directories are added."""
    by_path: dict[str, Entry] = {}
    for entry in entries:
        if entry.path.startswith("/") or not entry.path or ".." in entry.path.split("/"):
            raise ImageError(f"layer entry path must be relative and inside the root: {entry.path}")
        by_path[entry.path] = entry
    for path in list(by_path):
        for parent in _parents(path):
            by_path.setdefault(parent, directory(parent))
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(by_path):
            entry = by_path[path]
            info = tarfile.TarInfo(path)
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = entry.mode
            if entry.kind == "file":
                info.type = tarfile.REGTYPE
                info.size = len(entry.data)
                tar.addfile(info, io.BytesIO(entry.data))
            elif entry.kind == "dir":
                info.type = tarfile.DIRTYPE
                tar.addfile(info)
            elif entry.kind == "symlink":
                info.type = tarfile.SYMTYPE
                info.linkname = entry.target
                tar.addfile(info)
            else:
                raise ImageError(f"unknown entry kind {entry.kind!r} for {path}")
    return out.getvalue()


def gzip_bytes(data: bytes) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, compresslevel=6) as gz:
        gz.write(data)
    return out.getvalue()


@dataclass(frozen=True)
class Image:
    """One single-platform (linux/amd64) image: a manifest, its config and its layers."""

    manifest: Blob
    config: Blob
    layers: tuple[Blob, ...]

    @property
    def blobs(self) -> tuple[Blob, ...]:
        return (*self.layers, self.config, self.manifest)


def tree_entries(root: Path, prefix: str = "") -> list[Entry]:
    """Every file, directory and symlink under ``root`` (not ``root`` itself), at ``prefix`` +
    its relative path. Modes are kept (permission bits only); owners are not (a layer's entries
    belong to root), nor hard links (each becomes a file of its own)."""
    entries = []
    for path in sorted(root.rglob("*")):
        name = prefix + path.relative_to(root).as_posix()
        mode = path.lstat().st_mode & 0o7777
        if path.is_symlink():
            entries.append(symlink(name, os.readlink(path)))
        elif path.is_dir():
            entries.append(directory(name, mode))
        elif path.is_file():
            entries.append(file(name, path.read_bytes(), mode))
        else:
            raise ImageError(f"{path}: neither a file, a directory nor a symlink")
    return entries


def make_image(
    layers: Sequence[Sequence[Entry]],
    *,
    entrypoint: Sequence[str] | None = None,
    cmd: Sequence[str] | None = None,
    env: Sequence[str] = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",),
    user: str | None = None,
    workdir: str | None = None,
    exposed_ports: Sequence[str] = (),
    labels: Mapping[str, str] | None = None,
    created_by: str = "localcluster.images",
) -> Image:
    tars = [layer_tar(entries) for entries in layers]
    layer_blobs = tuple(Blob(MEDIA_LAYER_GZIP, gzip_bytes(t)) for t in tars)
    container: dict[str, Any] = {"Env": list(env)}
    if entrypoint is not None:
        container["Entrypoint"] = list(entrypoint)
    if cmd is not None:
        container["Cmd"] = list(cmd)
    if user is not None:
        container["User"] = user
    if workdir is not None:
        container["WorkingDir"] = workdir
    if exposed_ports:
        container["ExposedPorts"] = {port: {} for port in exposed_ports}
    if labels:
        container["Labels"] = dict(labels)
    config_doc = {
        "created": "1970-01-01T00:00:00Z",
        "architecture": "amd64",
        "os": "linux",
        "config": container,
        "rootfs": {"type": "layers", "diff_ids": [sha256_digest(t) for t in tars]},
        "history": [{"created": "1970-01-01T00:00:00Z", "created_by": created_by}] * len(tars),
    }
    config = Blob(MEDIA_CONFIG, _canonical(config_doc))
    manifest_doc = {
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": config.descriptor(),
        "layers": [b.descriptor() for b in layer_blobs],
    }
    return Image(Blob(MEDIA_MANIFEST, _canonical(manifest_doc)), config, layer_blobs)


def _canonical(doc: Any) -> bytes:
    return json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()


# ---------------------------------------------------------------------------------------------
# Writing: an OCI image layout directory and a docker-save-style tarball


def _layout_files(images: Mapping[str, Image]) -> dict[str, bytes]:
    """File name -> content of an OCI layout holding the images, keyed by full reference."""
    files: dict[str, bytes] = {"oci-layout": _canonical({"imageLayoutVersion": "1.0.0"})}
    manifests = []
    docker_manifest = []
    for ref, image in sorted(images.items()):
        for blob in image.blobs:
            files[f"blobs/sha256/{blob.digest.removeprefix('sha256:')}"] = blob.data
        manifests.append(image.manifest.descriptor({REF_NAME: ref}))
        docker_manifest.append(
            {
                "Config": f"blobs/sha256/{image.config.digest.removeprefix('sha256:')}",
                "RepoTags": [ref],
                "Layers": [
                    f"blobs/sha256/{b.digest.removeprefix('sha256:')}" for b in image.layers
                ],
            }
        )
    files["index.json"] = _canonical(
        {"schemaVersion": 2, "mediaType": MEDIA_INDEX, "manifests": manifests}
    )
    files["manifest.json"] = _canonical(docker_manifest)
    return files


def write_layout(directory_path: Path, images: Mapping[str, Image]) -> Path:
    """Write an OCI image layout directory (plus ``manifest.json``, as ``docker save`` does)."""
    for name, data in _layout_files(images).items():
        target = directory_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return directory_path


def write_archive(path: Path, images: Mapping[str, Image]) -> Path:
    """The same files as :func:`write_layout`, as one reproducible tarball (sorted, mtime 0):
    what ``ctr images import`` and ``docker load`` read."""
    entries = [file(name, data) for name, data in _layout_files(images).items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(layer_tar(entries))
    return path


# ---------------------------------------------------------------------------------------------
# The two images of the real node


def busybox_entries(busybox: Path = Path("/bin/busybox")) -> list[Entry]:
    """``/bin/busybox`` (must be static: Debian's busybox-static) and a symlink per applet."""
    if not busybox.is_file():
        raise ImageError(
            f"{busybox} not found: install Debian's busybox-static (apt-get install busybox-static)"
        )
    described = subprocess.run(["file", "-bL", str(busybox)], capture_output=True, text=True)
    if described.returncode == 0 and "dynamically linked" in described.stdout:
        raise ImageError(f"{busybox} is dynamically linked: install busybox-static instead")
    listed = subprocess.run(
        [str(busybox), "--list-full"], capture_output=True, text=True, check=True
    ).stdout.split()
    entries = [file("bin/busybox", busybox.read_bytes(), 0o755)]
    for applet in listed:
        if applet != "bin/busybox":
            entries.append(symlink(applet, "/bin/busybox"))
    entries += [
        file("etc/passwd", b"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n"),
        file("etc/group", b"root:x:0:\nnobody:x:65534:\n"),
        directory("tmp", 0o1777),
        directory("root", 0o700),
        directory("proc"),
        directory("sys"),
        directory("dev"),
        directory("etc"),
    ]
    return entries


def busybox_image(busybox: Path = Path("/bin/busybox")) -> Image:
    return make_image([busybox_entries(busybox)], cmd=["sh"], created_by="busybox-static")


def build_pause(report: Any = None) -> Path:
    """Build ``localcluster/pause`` static, cached by its source and the Go version."""
    goversion = build.go_version()
    digest = hashlib.sha256(goversion.encode())
    for name in ("go.mod", "main.go"):
        digest.update((PAUSE_SOURCE / name).read_bytes())
    target = build.cache_root() / "bin" / f"pause-{digest.hexdigest()[:16]}" / "pause"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".pause.partial-{os.getpid()}")
    env = dict(os.environ, GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS="-buildvcs=false")
    go = shutil.which("go")
    if go is None:
        raise ImageError("Go not found on PATH: it builds the pause image's binary")
    proc = subprocess.run(
        [go, "build", "-trimpath", "-ldflags=-s -w", "-o", str(partial), "."],
        cwd=PAUSE_SOURCE,
        env=env,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        partial.unlink(missing_ok=True)
        raise ImageError(f"building the pause binary failed:\n{proc.stderr}")
    partial.rename(target)
    return target


def pause_image(binary: Path) -> Image:
    return make_image(
        [[file("pause", binary.read_bytes(), 0o755)]],
        entrypoint=["/pause"],
        user="65535:65535",
        created_by="localcluster/pause",
    )


# ---------------------------------------------------------------------------------------------
# The OCI distribution API: push to a registry and read back


def _request(
    method: str,
    url: str,
    data: bytes | None = None,
    headers: Mapping[str, str] | None = None,
) -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, dict(resp.headers.items()), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers.items()), err.read()


def verify_pull(registry: str, repository: str, tag: str) -> dict[str, Any]:
    """Pull as a client would: the manifest by tag, then every blob by digest, checking each.

    Returns the manifest document.
    """
    base = registry.rstrip("/")
    status, headers, body = _request(
        "GET", f"{base}/v2/{repository}/manifests/{tag}", headers={"Accept": PULL_ACCEPT}
    )
    if status != 200:
        raise ImageError(f"GET manifest {repository}:{tag} got {status}: {body!r}")
    digest = sha256_digest(body)
    if headers.get("Docker-Content-Digest", digest) != digest:
        raise ImageError(f"manifest digest header {headers['Docker-Content-Digest']} != {digest}")
    manifest: dict[str, Any] = json.loads(body)
    for desc in [manifest["config"], *manifest["layers"]]:
        status, _, blob = _request("GET", f"{base}/v2/{repository}/blobs/{desc['digest']}")
        if status != 200:
            raise ImageError(f"GET blob {desc['digest']} got {status}")
        if sha256_digest(blob) != desc["digest"] or len(blob) != desc["size"]:
            raise ImageError(f"blob {desc['digest']} came back with other content")
    return manifest
