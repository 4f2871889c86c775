"""Writes controller/api/gofields.py: how upstream JobSet's Go types hold each field of a
replicated job, read by the project's Go tool (localcluster/gofields, built and cached like the
other binaries) from the types themselves.

The immutability rules compare replicated jobs as those types decode them
(:mod:`controller.api.semantic`); this keeps the table in step with the Go module versions the
tool pins (its go.mod: Kubernetes' ``k8s.io/api`` and upstream JobSet's API).

Command line (``make crd`` runs it first)::

    python -m localcluster.gotypes [--check]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from localcluster.build import ensure_gofields

OUT = Path(__file__).resolve().parents[1] / "controller" / "api" / "gofields.py"

_HEADER = '''"""How upstream JobSet's Go types hold each field of a replicated job (generated).

Written by ``python -m localcluster.gotypes`` (``make crd``) from the output of the Go tool
localcluster/gofields, which reads the types themselves (``sigs.k8s.io/jobset``'s
``ReplicatedJob``, Kubernetes' ``JobTemplateSpec`` inside). Keys are ``<parent>.<field>``, the
JSON names of a field and of the field holding its object (``<field>.*``: the values of a map);
values are classes (:mod:`controller.api.semantic`):

- ``s``: a scalar, not a pointer: its zero value decodes as absence does;
- ``t``: a struct, not a pointer: ``{}`` decodes as absence does;
- ``m``: a map: ``{}`` decodes as absence does;
- ``Q``: a quantity, compared by value.

Fields left out (pointers, IntOrString, times, a name two types hold differently) are compared as
they are. Do not edit: run ``make crd``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

CLASSES: Final[Mapping[str, str]] = {
'''


def render(pairs: Sequence[tuple[str, str]]) -> str:
    """The module's text for the tool's output (sorted (field, class) pairs)."""
    body = "".join(f"    {json.dumps(name)}: {json.dumps(kind)},\n" for name, kind in pairs)
    return _HEADER + body + "}\n"


def read() -> list[tuple[str, str]]:
    """Run the tool (building it once) and return its pairs."""
    binary = ensure_gofields()
    out = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout
    return [(str(name), str(kind)) for name, kind in json.loads(out)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localcluster.gotypes", description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare, exit 1 if out of date")
    args = parser.parse_args(argv)
    text = render(read())
    if args.check:
        if OUT.read_text() != text:
            print(f"{OUT} is out of date: run `make crd`", file=sys.stderr)
            return 1
        print(f"{OUT} is up to date")
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(text.encode())} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
