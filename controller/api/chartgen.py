"""Copy the generated manifests the Helm chart needs into ``charts/stateful-jobset/files/``.

A chart can only read files inside its own folder, so the CRDs and their admission policies
(default and alpha-features) with the policy's binding, the Pod-scope admission policy and
binding, and the alert rules are copied there byte for byte; the
chart's templates add labels and annotations when they render them. ``make crd`` runs this after
regenerating the sources; a unit test fails when a copy is stale.

Command line::

    python -m controller.api.chartgen [--root DIR] [--check]

``--check`` compares instead of writing and exits 1 when a copy is out of date.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

CHART = Path("charts/stateful-jobset")
# Chart file (under CHART) -> its source (both relative to the repository's root).
COPIES: dict[Path, Path] = {
    Path("files/crd/jobsets.jobset.x-k8s.io.yaml"): Path(
        "manifests/crd/jobsets.jobset.x-k8s.io.yaml"
    ),
    Path("files/crd/policy.yaml"): Path("manifests/crd/policy.yaml"),
    Path("files/crd/binding.yaml"): Path("manifests/crd/binding.yaml"),
    Path("files/crd-alpha-features/jobsets.jobset.x-k8s.io.yaml"): Path(
        "manifests/components/alpha-features/jobsets.jobset.x-k8s.io.yaml"
    ),
    Path("files/crd-alpha-features/policy.yaml"): Path(
        "manifests/components/alpha-features/policy.yaml"
    ),
    Path("files/pod-scope/policy.yaml"): Path("manifests/pod-scope/policy.yaml"),
    Path("files/pod-scope/binding.yaml"): Path("manifests/pod-scope/binding.yaml"),
    Path("files/prometheus-rules.yaml"): Path("manifests/alerts/prometheus-rules.yaml"),
}


def stale(root: Path) -> list[Path]:
    """The chart files (relative to ``root``) whose content differs from their source."""
    out = []
    for copy, source in COPIES.items():
        target = root / CHART / copy
        wanted = (root / source).read_bytes()
        if not target.is_file() or target.read_bytes() != wanted:
            out.append(CHART / copy)
    return out


def write(root: Path) -> list[Path]:
    """Bring every stale copy up to date; returns what was written."""
    written = stale(root)
    for path in written:
        source = COPIES[path.relative_to(CHART)]
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes((root / source).read_bytes())
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m controller.api.chartgen",
        description="Copy (or --check) the generated manifests the Helm chart renders.",
    )
    parser.add_argument("--root", type=Path, default=Path("."), help="the repository's root")
    parser.add_argument("--check", action="store_true", help="compare; exit 1 when out of date")
    args = parser.parse_args(argv)
    if args.check:
        out_of_date = stale(args.root)
        if out_of_date:
            names = ", ".join(str(p) for p in out_of_date)
            print(f"out of date: {names} (run `make crd`)", file=sys.stderr)
            return 1
        return 0
    for path in write(args.root):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
