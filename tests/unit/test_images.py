"""localcluster.images: OCI layers, configs, manifests and layouts, checked byte for byte."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from localcluster import images


def _sha(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _sample() -> images.Image:
    return images.make_image(
        [
            [
                images.file("bin/tool", b"#!/bin/sh\necho hi\n", 0o755),
                images.symlink("usr/bin/tool", "/bin/tool"),
                images.directory("tmp", 0o1777),
            ],
            [images.file("etc/motd", b"hello\n")],
        ],
        cmd=["sh"],
    )


def test_manifest_config_and_layers_are_named_by_their_digests() -> None:
    image = _sample()
    manifest = json.loads(image.manifest.data)
    assert manifest["schemaVersion"] == 2
    assert manifest["mediaType"] == images.MEDIA_MANIFEST
    assert manifest["config"] == {
        "mediaType": images.MEDIA_CONFIG,
        "digest": _sha(image.config.data),
        "size": len(image.config.data),
    }
    assert [layer["digest"] for layer in manifest["layers"]] == [_sha(b.data) for b in image.layers]
    assert all(layer["mediaType"] == images.MEDIA_LAYER_GZIP for layer in manifest["layers"])
    config = json.loads(image.config.data)
    # diff_ids are the digests of the *uncompressed* layers.
    assert config["rootfs"]["diff_ids"] == [_sha(gzip.decompress(b.data)) for b in image.layers]
    assert (config["architecture"], config["os"]) == ("amd64", "linux")
    assert config["config"]["Cmd"] == ["sh"]


def test_layers_are_reproducible_and_have_root_owned_sorted_entries() -> None:
    assert _sample().manifest.digest == _sample().manifest.digest
    tar_bytes = gzip.decompress(_sample().layers[0].data)
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names) == ["bin", "bin/tool", "tmp", "usr", "usr/bin", "usr/bin/tool"]
    assert all(m.mtime == 0 and m.uid == 0 and m.gid == 0 for m in members)
    by_name = {m.name: m for m in members}
    assert by_name["usr/bin/tool"].issym() and by_name["usr/bin/tool"].linkname == "/bin/tool"
    assert by_name["tmp"].mode == 0o1777
    assert by_name["bin/tool"].mode == 0o755


def test_an_entry_outside_the_root_is_refused() -> None:
    with pytest.raises(images.ImageError):
        images.layer_tar([images.file("../etc/passwd", b"")])
    with pytest.raises(images.ImageError):
        images.layer_tar([images.file("/etc/passwd", b"")])


def _check_layout(files: dict[str, bytes], refs: dict[str, images.Image]) -> None:
    assert json.loads(files["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    for name, data in files.items():
        if name.startswith("blobs/sha256/"):
            assert _sha(data) == "sha256:" + name.removeprefix("blobs/sha256/")
    index = json.loads(files["index.json"])
    assert index["mediaType"] == images.MEDIA_INDEX
    named = {m["annotations"][images.REF_NAME]: m for m in index["manifests"]}
    assert set(named) == set(refs)
    docker = {entry["RepoTags"][0]: entry for entry in json.loads(files["manifest.json"])}
    for ref, image in refs.items():
        assert named[ref]["digest"] == image.manifest.digest
        manifest = json.loads(files[f"blobs/sha256/{image.manifest.digest[7:]}"])
        for desc in [manifest["config"], *manifest["layers"]]:
            assert len(files[f"blobs/sha256/{desc['digest'][7:]}"]) == desc["size"]
        assert docker[ref]["Config"] == f"blobs/sha256/{image.config.digest[7:]}"


def test_layout_directory_holds_every_blob_by_digest(tmp_path: Path) -> None:
    refs = {"docker.io/library/sample:latest": _sample()}
    layout = images.write_layout(tmp_path / "layout", refs)
    dir_files = {
        str(p.relative_to(layout)): p.read_bytes() for p in layout.rglob("*") if p.is_file()
    }
    _check_layout(dir_files, refs)
