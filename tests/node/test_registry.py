"""The node tier's image path (issue 13): a local registry serves the locally built images.

Not collected by ``make test`` yet (tests/node is outside pyproject's testpaths): the registry's
cold build takes minutes. Run with ``pytest tests/node``.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from localcluster import build, images, processes, registry


def test_pushed_images_pull_back_by_tag_and_digest(tmp_path: Path) -> None:
    binary = build.ensure_node_binaries(("registry",))["registry"] / "registry"
    served = registry.start(binary, tmp_path, report=lambda _: None)
    pid = served.process.pid
    assert pid is not None
    try:
        built = registry.publish(served.url)
        # Pushing again is a no-op: every blob is already there, the manifest is the same.
        registry.publish(served.url)
        for (repository, tag), image in built.items():
            manifest = images.verify_pull(served.url, repository, tag)
            assert (
                images.sha256_digest(
                    json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
                )
                == image.manifest.digest
            )
            # By digest too, as containerd fetches after resolving the tag.
            request = urllib.request.Request(
                f"{served.url}/v2/{repository}/manifests/{image.manifest.digest}",
                headers={"Accept": images.PULL_ACCEPT},
            )
            with urllib.request.urlopen(request, timeout=10) as response:
                assert response.headers["Content-Type"] == images.MEDIA_MANIFEST
                assert response.read() == image.manifest.data
        with urllib.request.urlopen(f"{served.url}/v2/_catalog", timeout=10) as response:
            catalog = json.load(response)
        assert sorted(catalog["repositories"]) == ["library/busybox", "pause"]
        hosts = registry.write_containerd_hosts(tmp_path / "certs.d", served.url)
        assert [p.parent.name for p in hosts] == ["docker.io", "registry.k8s.io"]
        assert f'server = "{served.url}"' in hosts[0].read_text()
    finally:
        served.stop()
    assert not processes.pid_alive(pid)


def test_the_python_miniregistry_serves_the_same_pull(tmp_path: Path) -> None:
    served = registry.start_mini(tmp_path, report=lambda _: None)
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
