"""Plot the side-by-side benchmark (bench/results/compare.json → PNG): per figure, each row's
value for every variant and N, upstream JobSet first.

.venv/bin/python bench/plot_compare.py [--results bench/results/compare.json]
                                       [--out docs/performance-compare.png]
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
sys.path.insert(0, str(ROOT))

from tests.support.compare import FIGURES, ROWS, ratio_rows  # noqa: E402

COLORS = {"upstream": "#888888", "ours": "#1f77b4", "ours-qps500": "#2ca02c"}


def plot(report: dict[str, Any], out: Path) -> None:
    table = ratio_rows(report["results"])
    groups = sorted({(line["variant"], line["n"]) for line in table})
    columns = 3
    fig, axes = plt.subplots(-(-len(FIGURES) // columns), columns, figsize=(13, 10))
    fig.suptitle(
        f"Upstream JobSet {(report.get('upstream') or {}).get('ref', '?')} vs this controller, "
        f"fresh control plane per run — {report['machine']}",
        fontsize=10,
    )
    rows = [r for r in ROWS if any(run["row"] == r.name for run in report["results"])]
    width = 0.8 / len(rows)
    for ax in axes.flat[len(FIGURES) :]:
        ax.set_visible(False)
    # One bar per row and (variant, N): with repeated runs, the first repetition's.
    for ax, (_, label) in zip(axes.flat, FIGURES, strict=False):
        for i, row in enumerate(rows):
            xs, ys = [], []
            for g, (variant, n) in enumerate(groups):
                line = next(
                    x for x in table if (x["variant"], x["n"], x["figure"]) == (variant, n, label)
                )
                if row.name in line["values"]:  # absent: a figure older runs did not record
                    xs.append(g + (i - (len(rows) - 1) / 2) * width)
                    ys.append(line["values"][row.name])
            ax.bar(xs, ys, width, label=row.name, color=COLORS[row.name])
        ax.set_xticks(range(len(groups)), [f"{v}\nN={n}" for v, n in groups], fontsize=8)
        ax.set_title(label, fontsize=9)
        ax.set_ylim(bottom=0)
    axes.flat[0].legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=80)
    print(f"written to {out}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results" / "compare.json")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "performance-compare.png")
    args = parser.parse_args()
    plot(json.loads(args.results.read_text()), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
