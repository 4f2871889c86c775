"""``python -m tests.soak --seconds 300``: the chaos soak; exit 1 when an invariant failed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from localcluster.build import BuildError
from localcluster.processes import LaunchError, StopSignal, stop_on_signals
from tests.soak.engine import ROOT, Options, run_soak, summary_of


def main(argv: list[str]) -> int:
    defaults = Options()
    parser = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__)
    parser.add_argument(
        "--seconds",
        type=float,
        default=defaults.seconds,
        help="how long the chaos lasts (quiescing and checks come on top)",
    )
    parser.add_argument(
        "--report",
        type=Path,
        default=ROOT / "bench" / "results" / "soak.json",
        help="where the JSON report goes",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=defaults.state_dir,
        help="the soak's own control plane (wiped at start)",
    )
    parser.add_argument(
        "--interval", type=float, default=defaults.interval, help="seconds between JobSet creations"
    )
    parser.add_argument(
        "--rss-limit-mib",
        type=float,
        default=defaults.rss_limit_mib,
        help="a replica's RSS above this fails the run",
    )
    parser.add_argument("--seed", type=int, default=None, help="random seed (kills, pauses)")
    args = parser.parse_args(argv)  # fmt: skip
    if args.seconds < 20:
        parser.error("--seconds must be at least 20 (the API server restart is half-way)")
    options = Options(
        seconds=args.seconds,
        state_dir=args.state_dir.resolve(),
        report_path=args.report,
        interval=args.interval,
        rss_limit_mib=args.rss_limit_mib,
        seed=args.seed,
    )
    stop_on_signals()
    try:
        report = run_soak(options)
    except (BuildError, LaunchError) as err:
        print(f"soak: the local control plane failed: {err}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, StopSignal) as why:
        print(f"soak: stopped by {why or 'SIGINT'}; every process it started has been stopped")
        return 130
    print(summary_of(report), flush=True)
    print(f"report: {args.report}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
