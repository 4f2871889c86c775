"""The node's image path: the local registry serves the locally built images as a client (and
containerd, as a docker.io mirror) pulls them: by tag, by digest, unknown names 404."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from localcluster import images, processes, registry


def test_the_registry_serves_the_node_images_by_tag_and_digest(tmp_path: Path) -> None:
    served = registry.start(tmp_path, report=lambda _: None)
    pid = served.process.pid
    assert pid is not None
    try:
        for key, image in registry.node_images().items():
            manifest = images.verify_pull(served.url, *key)
            assert manifest["config"]["digest"] == image.config.digest
        request = urllib.request.Request(
            f"{served.url}/v2/library/busybox/manifests/latest?ns=docker.io", method="HEAD"
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["Docker-Content-Digest"] == (
                registry.node_images()[registry.BUSYBOX].manifest.digest
            )
        missing = urllib.request.Request(f"{served.url}/v2/library/alpine/manifests/latest")
        try:
            urllib.request.urlopen(missing, timeout=10)
            raise AssertionError("alpine should be unknown")
        except urllib.error.HTTPError as err:
            assert err.code == 404
            assert json.load(err)["errors"][0]["code"] == "MANIFEST_UNKNOWN"
    finally:
        served.stop()
    assert not processes.pid_alive(pid)
