"""The busybox image is built from Debian's busybox-static, a node-tier prerequisite (the tier
fails, never skips, without busybox-static: ``make tools`` installs it)."""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

from localcluster import images


def test_busybox_image_has_the_binary_and_a_shell_symlink() -> None:
    assert Path("/bin/busybox").is_file(), (
        "busybox-static is not installed (apt-get install busybox-static)"
    )
    image = images.busybox_image()
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(image.layers[0].data))) as tar:
        members = {m.name: m for m in tar.getmembers()}
        binary = tar.extractfile(members["bin/busybox"])
        assert binary is not None
        assert binary.read() == Path("/bin/busybox").read_bytes()
    assert members["bin/sh"].issym() and members["bin/sh"].linkname == "/bin/busybox"
    assert "usr/bin/env" in members
    assert members["tmp"].mode == 0o1777
