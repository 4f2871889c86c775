"""A release made for tests: ``localcluster.release`` into a temporary ``dist/``, its image the
``make image`` build kept in the cache per inputs digest (a new commit builds it again, ~50 s)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import controller
from localcluster import build, controllerimage, release

VERSION = controller.__version__
REFERENCE = f"stateful-jobset:{VERSION}"


def cached_image() -> Path:
    """``make image``'s output for this release's inputs, in the cache: one folder per inputs
    digest, built aside and renamed into place (two test runs at once never share a half-written
    archive); folders of other inputs older than a day are removed."""
    root = build.cache_root() / "release-test-image"
    key = controllerimage.inputs_digest(REFERENCE)[:16]
    ready = root / key
    if not ready.is_dir():
        partial = root / f".{key}.partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        controllerimage.build_image(partial, REFERENCE, lambda _: None)
        try:
            partial.rename(ready)
        except OSError:  # another run put the same image there first
            shutil.rmtree(partial)
    for other in root.iterdir():
        if other != ready and time.time() - other.stat().st_mtime > 86400:
            shutil.rmtree(other, ignore_errors=True)
    return ready


def make_release(output: Path) -> Path:
    """The release of the current version into ``output``; returns it."""
    release.release(VERSION, output, image_dir=cached_image(), report=lambda _: None)
    return output
