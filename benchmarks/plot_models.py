#!/usr/bin/env python3
"""Bar chart of benchmarks/model_ab.py's JSON: tilelab/cuBLAS throughput ratio per model
config and mode, one bar per routing, a line at 1.0 (above it tilelab is faster).
One panel per dtype (rows) and eager / CUDA graphs (columns); a routing whose
measurement failed is marked "failed" instead of a bar. A whisker spans the row's
per-round ratios (`ratio_rounds`, or its `*_ms_rounds` in files written before that key):
the run's own noise, wide on the host-bound eager steps of the small configs.

Examples:
    python benchmarks/plot_models.py                              # out/models.json -> out/models.png
    python benchmarks/plot_models.py results/models.json --out models.png
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Optional


def load(path: str) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        raise SystemExit(f"{path}: no such file (write it with benchmarks/model_ab.py --out {path})")
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise SystemExit(f"{path}: not a model_ab.py result (expected an object with 'rows')")
    return data


def ratios_by_round(cublas_ms: Optional[list], tilelab_ms: Optional[list]) -> Optional[list[float]]:
    """Each round's ratio, cuBLAS's time over tilelab's in that round (model_ab.py measures the two minutes
    apart at most), or None unless both sides have a time in every round. Their spread is the run's own noise:
    the eager steps of the small configs are host-bound, and one run's rounds have read 0.78 to 1.15 for one
    row. model_ab.py writes them into its rows as `ratio_rounds`."""
    if cublas_ms and tilelab_ms and len(cublas_ms) == len(tilelab_ms) and all(cublas_ms) and all(tilelab_ms):
        return [c / t for c, t in zip(cublas_ms, tilelab_ms)]
    return None


def round_ratios(row: dict) -> Optional[list[float]]:
    """The row's per-round ratios: `ratio_rounds`, else (files written before that key) from its rounds' times."""
    return row.get("ratio_rounds") or ratios_by_round(row.get("cublas_ms_rounds"), row.get("tilelab_ms_rounds"))


def plot(data: dict, out: str) -> str:
    """Write the chart of data["rows"] to `out` (PNG); returns the path."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("plot_models.py needs matplotlib: pip install matplotlib")
    rows = data["rows"]
    if not rows:
        raise SystemExit("no rows to plot")
    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    graphs = list(dict.fromkeys(r["graphs"] for r in rows))
    routings = list(dict.fromkeys(r["routing"] for r in rows))
    groups = list(dict.fromkeys((r["model"], r["batch"], r["seq"], r["mode"]) for r in rows))
    width = 0.8 / len(routings)
    fig, axes = plt.subplots(len(dtypes), len(graphs), squeeze=False, sharey=True,
                             figsize=(max(6.0, 0.75 * len(groups) * len(graphs) + 2), 3.6 * len(dtypes)))
    top = max([r["ratio"] for r in rows if r.get("ratio")] + [max(round_ratios(r) or [0]) for r in rows]
              + [1.0]) * 1.15
    for i, dt in enumerate(dtypes):
        for j, gr in enumerate(graphs):
            ax = axes[i][j]
            for k, rt in enumerate(routings):
                xs, ys, failed, spans = [], [], [], []
                for g, (model, b, s, mode) in enumerate(groups):
                    r = next((r for r in rows if (r["dtype"], r["graphs"], r["routing"], r["model"], r["batch"],
                                                  r["seq"], r["mode"]) == (dt, gr, rt, model, b, s, mode)), None)
                    if r is None:
                        continue
                    x = g - 0.4 + width * (k + 0.5)
                    if r.get("ratio") is None:
                        failed.append(x)
                    else:
                        xs.append(x)
                        ys.append(r["ratio"])
                        rr = round_ratios(r)
                        spans.append((r["ratio"] - min(rr), max(rr) - r["ratio"]) if rr else (0.0, 0.0))
                bars = ax.bar(xs, ys, width, label=rt, color=f"C{k}")
                ax.bar_label(bars, fmt="%.2f", fontsize=6, padding=1)
                if any(lo or hi for lo, hi in spans):
                    ax.errorbar(xs, ys, yerr=[[max(lo, 0.0) for lo, _ in spans], [max(hi, 0.0) for _, hi in spans]],
                                fmt="none", ecolor="black", elinewidth=0.6, capsize=1.5)
                for x in failed:
                    ax.text(x, 0.05, "failed", rotation=90, ha="center", va="bottom", fontsize=7, color=f"C{k}")
            ax.axhline(1.0, color="black", linewidth=0.8, linestyle="--")
            ax.set_xticks(range(len(groups)))
            ax.set_xticklabels([f"{m} {b}" + (f"x{s}" if s else "") + f"\n{mode}" for m, b, s, mode in groups],
                               fontsize=7)
            ax.set_ylim(0, top)
            ax.set_title(f"{dt}, {'CUDA graphs' if gr else 'eager'}", fontsize=9)
            if j == 0:
                ax.set_ylabel("tilelab/s / cuBLAS/s")
    axes[0][-1].legend(fontsize=7, loc="upper right")
    head = data.get("header", {})
    fig.suptitle(f"Models: tilelab vs cuBLAS ({head.get('gpu', '?')}, torch {head.get('torch', '?')}; "
                 f"> 1: tilelab faster)", fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fig.savefig(out, dpi=130)
    plt.close(fig)
    return out


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("json", nargs="?", default="out/models.json", help="model_ab.py's output")
    p.add_argument("--out", help="PNG path (default: the JSON's path with .png)")
    args = p.parse_args(argv)
    out = args.out or os.path.splitext(args.json)[0] + ".png"
    print(f"wrote {plot(load(args.json), out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
