"""Plot how the scale benchmark's measurements grow with N (bench/results/scale.json → PNG).

.venv/bin/python bench/plot_scale.py [--results bench/results/scale.json]
                                     [--out docs/performance-scale.png]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # no display: write a file
import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parent.parent


def plot(report: dict[str, Any], out: Path) -> None:
    results = sorted(report["results"], key=lambda r: r["n"])
    ns = [r["n"] for r in results]
    fig, axes = plt.subplots(2, 2, figsize=(11, 8))
    fig.suptitle(f"Scale benchmark: N JobSets at once — {report['machine']}", fontsize=10)

    ax = axes[0][0]
    ax.plot(ns, [r["children_exist_seconds"] for r in results], "o-", label="all Jobs exist")
    ax.plot(ns, [r["all_completed_seconds"] for r in results], "s-", label="all Completed")
    ax.set(title="Time after creating N JobSets", xlabel="N", ylabel="seconds")
    ax.legend()

    ax = axes[0][1]
    ax.plot(ns, [r["controller_writes_per_jobset_total"] for r in results], "o-",
            label="measured (audit log)")  # fmt: skip
    ax.plot(ns, [r["derived_minimum_per_jobset_total"] for r in results], "s--",
            label="derived minimum")  # fmt: skip
    steady = [r["steady_state_writes"]["audit_log"] for r in results]
    ax.plot(ns, steady, "x:", label="steady-state writes (total)")
    ax.set(title="Controller writes per JobSet", xlabel="N", ylabel="writes")
    ax.set_ylim(bottom=0)
    ax.legend()

    ax = axes[1][0]
    ax.plot(ns, [r["processes"]["controller"]["peak_rss_mib"] for r in results], "o-",
            label="controller peak RSS")  # fmt: skip
    ax.axhline(300, color="red", linestyle="--", label="target 300 MiB")
    ax.set(title="Controller memory", xlabel="N", ylabel="MiB")
    ax.set_ylim(bottom=0)
    ax.legend()

    ax = axes[1][1]
    for name, style in (("controller", "o-"), ("kube-apiserver", "s-"), ("etcd", "^-"),
                        ("kube-controller-manager", "d-")):  # fmt: skip
        ax.plot(ns, [r["processes"][name].get("peak_cores_5s", 0) for r in results], style,
                label=f"{name} (peak, 5 s)")  # fmt: skip
    ax.axhline(0.5, color="red", linestyle="--", label="controller target 0.5 core")
    ax.set(title="CPU use while the JobSets run", xlabel="N", ylabel="cores")
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)

    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=90)
    print(f"written to {out}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results" / "scale.json")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "performance-scale.png")
    args = parser.parse_args()
    plot(json.loads(args.results.read_text()), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
