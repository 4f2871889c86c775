"""A read-only OCI registry over an image layout directory: the pull half of the API, no build.

An experiment for issue 13 next to ``localcluster.registry`` (the distribution project's
registry, a 14-minute cold build): a node only pulls, and pulling needs four routes of the OCI
distribution API, ``GET /v2/``, ``GET``/``HEAD`` a manifest by tag or digest, ``GET``/``HEAD`` a
blob by digest. This serves them from a directory written by ``images.write_layout``, whose
``index.json`` names each manifest by its full reference (``docker.io/library/busybox:latest``);
a request for repository ``library/busybox``, tag ``latest`` (what containerd asks a docker.io
mirror) finds it with the registry host left off.

``python -m localcluster.miniregistry LAYOUT PORT`` serves on 127.0.0.1 until SIGTERM.
"""

from __future__ import annotations

import json
import re
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import FrameType

from localcluster import images

_MANIFEST = re.compile(r"^/v2/(?P<name>.+)/manifests/(?P<ref>[^/]+)$")
_BLOB = re.compile(r"^/v2/(?P<name>.+)/blobs/(?P<digest>sha256:[0-9a-f]{64})$")


def repository_and_tag(reference: str) -> tuple[str, str]:
    """``docker.io/library/busybox:latest`` -> (``library/busybox``, ``latest``)."""
    name, _, tag = reference.rpartition(":")
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        name = rest
    return name, tag


class Layout:
    def __init__(self, root: Path) -> None:
        self.root = root
        index = json.loads((root / "index.json").read_text())
        self.tags: dict[tuple[str, str], str] = {}
        for desc in index["manifests"]:
            ref = desc.get("annotations", {}).get(images.REF_NAME)
            if ref:
                self.tags[repository_and_tag(ref)] = desc["digest"]

    def blob(self, digest: str) -> bytes | None:
        path = self.root / "blobs" / "sha256" / digest.removeprefix("sha256:")
        return path.read_bytes() if path.is_file() else None


def handler_for(layout: Layout) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:
            sys.stderr.write(f"{self.address_string()} {format % args}\n")

        def _send(self, status: int, body: bytes, content_type: str, digest: str = "") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Docker-Distribution-API-Version", "registry/2.0")
            if digest:
                self.send_header("Docker-Content-Digest", digest)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _unknown(self, code: str) -> None:
            body = json.dumps({"errors": [{"code": code, "message": self.path}]}).encode()
            self._send(404, body, "application/json")

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]  # containerd adds ?ns=docker.io for a mirror
            if path in ("/v2", "/v2/"):
                self._send(200, b"{}", "application/json")
                return
            if match := _MANIFEST.match(path):
                ref = match["ref"]
                digest = ref if ref.startswith("sha256:") else None
                if digest is None:
                    digest = layout.tags.get((match["name"], ref))
                body = layout.blob(digest) if digest else None
                if body is None or digest is None:
                    self._unknown("MANIFEST_UNKNOWN")
                    return
                media_type = json.loads(body).get("mediaType", images.MEDIA_MANIFEST)
                self._send(200, body, media_type, digest)
                return
            if match := _BLOB.match(path):
                body = layout.blob(match["digest"])
                if body is None:
                    self._unknown("BLOB_UNKNOWN")
                    return
                self._send(200, body, "application/octet-stream", match["digest"])
                return
            self._unknown("NAME_UNKNOWN")

        do_HEAD = do_GET

    return Handler


def _stop(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def main(argv: list[str]) -> int:
    layout_dir, port = Path(argv[0]), int(argv[1])
    signal.signal(signal.SIGTERM, _stop)
    server = ThreadingHTTPServer(("127.0.0.1", port), handler_for(Layout(layout_dir)))
    print(f"serving {layout_dir} on 127.0.0.1:{port}", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
