"""Reading the local control plane's audit log: who wrote what, as the API server recorded it.

The launcher's audit policy (cluster.py) records every write at the Metadata level. Tests and
benchmarks count a client's writes from here rather than from the client's own metrics.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

Entry = dict[str, Any]


def entries(audit_log: Path, needle: str = "") -> Iterator[Entry]:
    """Completed requests from the log and its rotated files, oldest file first; ``needle`` is a
    cheap substring filter applied before parsing."""
    for path in sorted(audit_log.parent.glob(f"{audit_log.stem}*{audit_log.suffix}")):
        with path.open(errors="replace") as lines:
            for line in lines:
                if needle not in line:
                    continue
                entry: Entry = json.loads(line)
                if entry.get("stage") == "ResponseComplete":
                    yield entry


def write_key(entry: Entry) -> str:
    """``<verb> <resource>[/<subresource>]``, e.g. ``update jobsets/status``."""
    ref = entry.get("objectRef") or {}
    resource = str(ref.get("resource", ""))
    if ref.get("subresource"):
        resource += "/" + str(ref["subresource"])
    return f"{entry.get('verb')} {resource}"


def count_writes(
    audit_log: Path, user_agent: str, keep: Callable[[Entry], bool] = lambda _: True
) -> Counter[str]:
    """Writes by clients whose User-Agent starts with ``user_agent/``, by ``write_key``."""
    counts: Counter[str] = Counter()
    for entry in entries(audit_log, user_agent):
        if str(entry.get("userAgent", "")).startswith(user_agent + "/") and keep(entry):
            counts[write_key(entry)] += 1
    return counts


def count_failed_writes(
    audit_log: Path, user_agent: str, keep: Callable[[Entry], bool] = lambda _: True
) -> Counter[str]:
    """Writes by clients whose User-Agent starts with ``user_agent/`` that the API server answered
    with a code of 400 or more, by ``<write_key> <code>`` (e.g. ``update jobsets/status 409``)."""
    counts: Counter[str] = Counter()
    for entry in entries(audit_log, user_agent):
        if not str(entry.get("userAgent", "")).startswith(user_agent + "/") or not keep(entry):
            continue
        code = int((entry.get("responseStatus") or {}).get("code", 0))
        if code >= 400:
            counts[f"{write_key(entry)} {code}"] += 1
    return counts
