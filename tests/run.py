"""Every tier at once: the test suite in a few pytest processes side by side (``make test``).

The tiers mostly wait (for a controller process, an API server, a pod), so on two cores they run
faster side by side than one after the other. The suite is cut into groups, each one pytest
process with its own local control planes (their ports are free ports, their state in the
process's own temporary directory):

- ``real-node``: ``tests/node`` (one real node per host: its lock), one test after the other;
- ``group-<i>``: ``--groups`` more, the unit tier in the first;

and the files of ``tests/integration`` and ``tests/e2e`` (whose control planes have KWOK's fake
nodes, no real one) spread over all of them, each group's own tier counted, so that the groups
end about together (the durations of the last run, kept in the user cache, over the committed
ones; the number of tests in a file the first time).

Each process writes its log to ``--log-dir`` (default ``.test-logs``). While they run, a line
every ``--progress`` seconds says where each one is; at the end, each group's result, the counts
per tier (from the JUnit reports), and the plain closing line ``N passed, N failed, N skipped``.
The exit status is pytest's: 0 only when every group passed and tests ran (no tests is a
failure, as pytest's exit 5 is). Arguments after ``--`` go to every pytest process.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIERS = ("unit", "integration", "e2e", "node")
DURATIONS = (
    Path(os.environ.get("XDG_CACHE_HOME", str(Path.home() / ".cache")))
    / "stateful-jobset"
    / "test-durations.json"
)
_TEST_DEF = re.compile(r"^(async )?def test_", re.MULTILINE)


@dataclass
class Group:
    name: str
    paths: list[str]
    log: Path = field(init=False)
    junit: Path = field(init=False)
    process: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    ended: float = 0.0

    def command(self, extra: Sequence[str]) -> list[str]:
        return [
            sys.executable, "-m", "pytest", *self.paths, "-p", "no:cacheprovider",
            f"--junitxml={self.junit}", *extra,
        ]  # fmt: skip

    @property
    def returncode(self) -> int | None:
        return None if self.process is None else self.process.poll()


def _files(tier: str) -> list[str]:
    return sorted(str(p.relative_to(REPO)) for p in (REPO / "tests" / tier).rglob("test_*.py"))


# Seconds per test file as committed (a fresh machine's first run balances its groups with them).
SEED_DURATIONS = REPO / "tests" / "durations.json"


def _recorded() -> dict[str, float]:
    """Seconds per file of the last run on this machine, over the committed ones."""
    recorded: dict[str, float] = {}
    for path in (SEED_DURATIONS, DURATIONS):
        try:
            loaded = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(loaded, dict):
            recorded.update(
                {str(k): float(v) for k, v in loaded.items() if isinstance(v, int | float)}
            )
    return recorded


def _weights(files: Sequence[str]) -> dict[str, float]:
    """Seconds per file from the last run (or the committed ones), else the number of its tests
    (the same unit for all: a file without a recorded duration gets the mean seconds per test of
    those with one)."""
    recorded = _recorded()
    counts = {f: max(1, len(_TEST_DEF.findall((REPO / f).read_text()))) for f in files}
    known = [f for f in files if f in recorded]
    per_test = sum(recorded[f] for f in known) / sum(counts[f] for f in known) if known else 1.0
    return {f: float(recorded[f]) if f in known else counts[f] * per_test for f in files}


def split(
    files: Sequence[str],
    parts: int,
    weights: dict[str, float],
    start: Sequence[float] = (),
) -> list[list[str]]:
    """``files`` in ``parts`` lists of about equal weight (longest first into the lightest),
    each in the files' own order. ``start``: the weight each list already has (what its process
    runs besides); with it, every list is returned, empty or not, in its place."""
    bins: list[list[str]] = [[] for _ in range(max(1, parts))]
    load = [*start, *[0.0] * (len(bins) - len(start))][: len(bins)]
    for f in sorted(files, key=lambda f: -weights[f]):
        lightest = load.index(min(load))
        bins[lightest].append(f)
        load[lightest] += weights[f]
    order = {f: i for i, f in enumerate(files)}
    return [sorted(b, key=order.__getitem__) for b in bins if b or start]


def groups(parts: int) -> list[Group]:
    """The real node's group (the node tier) and ``parts`` more, the unit tier in the first; the
    other files are spread over all of them, each group's own tier counted, so that they end
    about together. Tests that start Kueue's manager may run beside each other: the metrics
    certificate it reads from a fixed path is written once, under a lock
    (``kueue.ensure_metrics_cert``)."""
    shared = _files("integration") + _files("e2e")
    recorded = _recorded()
    own = [
        sum(recorded.get(f, 0.0) for f in _files("node")),
        sum(recorded.get(f, 0.0) for f in _files("unit")),
    ]
    cut = split(shared, parts + 1, _weights(shared), start=own)
    found = [Group("real-node", ["tests/node", *cut[0]])]
    for i, part in enumerate(cut[1:]):
        paths = (["tests/unit"] if i == 0 else []) + part
        found.append(Group(f"group-{i + 1}", paths))
    return found


def _last_line(path: Path) -> str:
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - 4096))
            lines = [ln for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][-90:] if lines else ""


def _junit(group: Group) -> tuple[Counter[str], dict[str, float]]:
    """Counts per tier and outcome, and seconds per test file, from the group's JUnit report."""
    counts: Counter[str] = Counter()
    seconds: dict[str, float] = {}
    try:
        root = ET.parse(group.junit).getroot()
    except (OSError, ET.ParseError):
        return counts, seconds
    for case in root.iter("testcase"):
        classname = case.get("classname", "")
        parts = classname.split(".")
        tier = parts[1] if len(parts) > 1 and parts[0] == "tests" else "other"
        at = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
        module = "/".join(parts[: at + 1]) + ".py"
        seconds[module] = seconds.get(module, 0.0) + float(case.get("time") or 0.0)
        if case.find("failure") is not None or case.find("error") is not None:
            counts[f"{tier} failed"] += 1
        elif case.find("skipped") is not None:
            counts[f"{tier} skipped"] += 1
        else:
            counts[f"{tier} passed"] += 1
    return counts, seconds


def _save_durations(seconds: dict[str, float]) -> None:
    try:
        recorded = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        recorded = {}
    recorded.update({f: round(s, 1) for f, s in seconds.items() if f.startswith("tests/")})
    DURATIONS.parent.mkdir(parents=True, exist_ok=True)
    DURATIONS.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")


def run(found: list[Group], extra: Sequence[str], log_dir: Path, progress: float) -> int:
    log_dir.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    for group in found:
        group.log = log_dir / f"{group.name}.log"
        group.junit = log_dir / f"{group.name}.xml"
        group.junit.unlink(missing_ok=True)
        with group.log.open("wb") as out:
            # A process group of its own (for Ctrl-C), in this session: a group alone in a
            # session of its own is orphaned, and the kernel sends SIGCONT to every stopped
            # member when one of them exits, which thawed the SIGSTOPped kube-apiserver of
            # test_apiserver_outage (its request was answered) in the first runs side by side.
            group.process = subprocess.Popen(
                group.command(extra), cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, process_group=0,
            )  # fmt: skip
        group.started = time.monotonic()
        print(f"==> {group.name}: {' '.join(group.paths)} (log: {group.log})", flush=True)
    next_report = time.monotonic() + progress
    try:
        while any(g.returncode is None for g in found):
            time.sleep(1)
            now = time.monotonic()
            for group in found:
                if group.returncode is not None and not group.ended:
                    group.ended = now
                    print(
                        f"==> {group.name} finished in {now - group.started:.0f}s, exit "
                        f"{group.returncode}: {_last_line(group.log)}",
                        flush=True,
                    )
            if now >= next_report and any(g.returncode is None for g in found):
                next_report = now + progress
                running = [f"{g.name}: {_last_line(g.log)}" for g in found if g.returncode is None]
                print(f"... {now - began:.0f}s; " + " | ".join(running), flush=True)
    except KeyboardInterrupt:
        for group in found:
            if group.process is not None and group.returncode is None:
                os.killpg(group.process.pid, signal.SIGINT)
        for group in found:
            if group.process is not None:
                group.process.wait()
        raise
    return _report(found, time.monotonic() - began)


MAX_FAILURE_LINES = 600


def failure_report(lines: Sequence[str]) -> list[str]:
    """What a failed group's log says about its failures: pytest's tracebacks (its FAILURES and
    ERRORS sections, the first ``MAX_FAILURE_LINES`` lines) and the FAILED/ERROR lines, or the
    log's end when there are none (a crash). CI deletes the logs with the clone, so this is all
    that is left of them."""
    sections = [i for i, ln in enumerate(lines) if re.match(r"^=+ (FAILURES|ERRORS) =+$", ln)]
    summary = [ln for ln in lines if ln.startswith(("FAILED", "ERROR"))]
    if not sections and not summary:
        return list(lines[-60:])
    start = sections[0] if sections else len(lines)
    end = next(
        (i for i, ln in enumerate(lines) if i > start and "short test summary info" in ln),
        len(lines),
    )
    tracebacks = lines[start:end][:MAX_FAILURE_LINES]
    return [*tracebacks, *summary[:80]]


def _report(found: list[Group], elapsed: float) -> int:
    totals: Counter[str] = Counter()
    durations: dict[str, float] = {}
    failed_groups = []
    for group in found:
        counts, seconds = _junit(group)
        totals.update(counts)
        durations.update(seconds)
        if group.returncode != 0:
            failed_groups.append(group)
    print("\n==================== tiers (all groups) ====================", flush=True)
    for tier in TIERS:
        print(
            f"{tier}: {totals[f'{tier} passed']} passed, {totals[f'{tier} failed']} failed, "
            f"{totals[f'{tier} skipped']} skipped"
        )
    for group in failed_groups:
        print(f"\n---- {group.name} exited {group.returncode}; its summary ({group.log}):")
        print("\n".join(failure_report(group.log.read_text(errors="replace").splitlines())))
    _save_durations(durations)  # the next run's balance, whatever this one's outcome
    passed = sum(totals[f"{t} passed"] for t in TIERS)
    failed = sum(totals[f"{t} failed"] for t in TIERS)
    skipped = sum(totals[f"{t} skipped"] for t in TIERS)
    print(f"\nwall time {elapsed / 60:.1f} min, {len(found)} pytest processes side by side")
    print(f"{passed} passed, {failed} failed, {skipped} skipped", flush=True)
    if failed_groups:
        return max(g.returncode or 1 for g in failed_groups)
    return 0 if passed else 5


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in args:
        at = args.index("--")
        args, extra = args[:at], args[at + 1 :]
    parser = argparse.ArgumentParser(prog="python -m tests.run", description=__doc__)
    parser.add_argument("--groups", type=int, default=3, help="processes beside the real node's")
    parser.add_argument("--log-dir", type=Path, default=REPO / ".test-logs")
    parser.add_argument("--progress", type=float, default=60.0, help="seconds between lines")
    options = parser.parse_args(args)
    return run(groups(options.groups), extra, options.log_dir, options.progress)


if __name__ == "__main__":
    sys.exit(main())
