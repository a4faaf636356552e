#!/usr/bin/env python3
"""Markdown results table from a results folder (the README's numbers come from here).

Reads the files benchmarks/run_all.sh writes into a results folder: DIR/ab.json (ab.py
--kernels all) and, where present, DIR/ab_auto.json (ab.py --kernels auto --name ab_auto),
DIR/suite_*.json (ab.py --suite NAME), DIR/tile_sweep.json, DIR/ncu.json and
DIR/roofline.json (each file: DIR/NAME, or DIR/*/NAME when DIR has none; ab.json may be
absent when a suite file is there), and prints markdown:
  - from ab_auto.json, the headline: the dispatcher's choice per shape (rows) and
    dtype (columns), ratio to cuBLAS and tilelab's TFLOP/s;
  - per shape and dtype: the fastest verified tilelab kernel, its TFLOP/s,
    cuBLAS (torch.matmul) TFLOP/s, ratio (cuBLAS ms / tilelab ms, > 1 means
    tilelab is faster), and the dispatcher's choice with its own ratio;
  - per suite file, the geometric mean of the ratio per (op, dtype) over the dispatcher's
    verified rows, with the peers' (--peer triton / pad: peer ms / tilelab ms) where run;
    with --suite-tables also every row: op, name, M×K×N (B for bmm), dtype, torch ms,
    tilelab ms, ratio, the peers' ms and ratio, and the kernel the dispatcher picked;
  - headline lines from the tile sweep (best speedup of tiled over naive), the
    ncu profile (padded vs unpadded bank conflicts, naive vs tiled global load
    sectors) and the roofline's measured ceilings.
With --readme PATH it replaces the text between the lines
`<!-- results:begin -->` and `<!-- results:end -->` in that file (both markers
must exist) instead of only printing.

Examples:
    python benchmarks/make_readme_table.py benchmarks/results/h200
    python benchmarks/make_readme_table.py benchmarks/results/h200 --readme README.md
    python benchmarks/make_readme_table.py benchmarks/results/h200 --suite-tables --out /tmp/results.md
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def find(directory: str, name: str) -> list[str]:
    """DIR/name if it exists (a run_all.sh folder), else DIR/*/name."""
    top = os.path.join(directory, name)
    return [top] if os.path.exists(top) else sorted(glob.glob(os.path.join(directory, "*", name)))


def find_glob(directory: str, pattern: str) -> list[str]:
    """DIR/pattern's files if there are any, else DIR/*/pattern's."""
    top = sorted(glob.glob(os.path.join(directory, pattern)))
    return top or sorted(glob.glob(os.path.join(directory, "*", pattern)))


DTYPE_ORDER = {"fp32": 0, "tf32": 1, "bf16": 2, "fp16": 3, "fp64": 4}
DTYPE_HEAD = {"fp32": "fp32 (IEEE)", "tf32": "TF32", "bf16": "bf16", "fp16": "fp16", "fp64": "fp64"}


def shape_str(M: int, N: int, K: int) -> str:
    return f"{M}³" if M == N == K else f"{M}×{N}×{K}"


def load(path: str):
    with open(path) as f:
        return json.load(f)


def rows_of(data) -> list[dict]:
    return data["rows"] if isinstance(data, dict) else data


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def ab_table(rows: list[dict]) -> list[str]:
    groups = {}
    for r in rows:
        groups.setdefault((r["dtype"], r["M"], r["N"], r["K"]), []).append(r)
    out = ["| dtype | M×N×K | best tilelab kernel | TFLOP/s | cuBLAS TFLOP/s | ratio | dispatcher's choice | "
           "its TFLOP/s | its ratio |", "|---|---|---|---:|---:|---:|---|---:|---:|"]
    for key in sorted(groups, key=lambda k: (DTYPE_ORDER.get(k[0], 9), k[1] * k[2] * k[3], k[1:])):
        g = [r for r in groups[key] if r.get("ms") and r.get("status") == "OK"]
        if not g:
            continue
        best = min(g, key=lambda r: r["ms"])
        ch = [r for r in g if r.get("chosen") or str(r["kernel"]).startswith("auto:")]
        c = min(ch, key=lambda r: r["ms"]) if ch else None
        bname = best["kernel"].replace("auto:", "")
        cname = c["kernel"].replace("auto:", "") if c else None
        out.append(f"| {key[0]} | {key[1]}×{key[2]}×{key[3]} | `{bname}` | {best['tflops']:.2f} | "
                   f"{best['cublas_tflops']:.2f} | {best['ratio']:.3f} | "
                   f"{'`' + cname + '`' if cname else '-'} | {fmt(c and c['tflops'], '.2f')} | "
                   f"{fmt(c and c['ratio'], '.3f')} |")
    return out


def auto_table(rows: list[dict]) -> list[str]:
    """The dispatcher's choice: shapes as rows (in file order), dtypes as columns."""
    rows = [r for r in rows if str(r["kernel"]).startswith("auto:") and r.get("ms") and r.get("status") == "OK"]
    if not rows:
        return []
    dtypes = sorted({r["dtype"] for r in rows}, key=lambda d: DTYPE_ORDER.get(d, 9))
    shapes = list(dict.fromkeys((r["M"], r["N"], r["K"]) for r in rows))
    cell = {(r["dtype"], r["M"], r["N"], r["K"]): r for r in rows}
    out = ["The dispatcher's choice (`ab_auto.json`): ratio = cuBLAS ms / tilelab ms (> 1: tilelab faster), "
           "tilelab's TFLOP/s in parentheses.", "",
           "| shape | " + " | ".join(DTYPE_HEAD.get(d, d) for d in dtypes) + " |",
           "|---|" + "---:|" * len(dtypes)]
    for s in shapes:
        cells = []
        for d in dtypes:
            r = cell.get((d,) + s)
            cells.append("-" if r is None else f"{r['ratio']:.3f} ({r['tflops']:.1f})")
        out.append(f"| {shape_str(*s)} | " + " | ".join(cells) + " |")
    picks = []
    for d in dtypes:
        names = dict.fromkeys(r["kernel"].replace("auto:", "") for r in rows if r["dtype"] == d)
        picks.append(f"{DTYPE_HEAD.get(d, d)}: " + ", ".join(f"`{n}`" for n in names))
    out += ["", "Kernels the dispatcher picked: " + "; ".join(picks) + "."]
    return out


def suite_summary(data: dict) -> list[str]:
    """The geometric means ab.py stored in a suite file's "summary"."""
    rows = data.get("summary") or []
    if not rows:
        return []
    peers = [p for p in ("triton", "pad") if any(r.get(f"geomean_{p}_ratio") for r in rows)]
    head = ["op", "dtype", "rows", "geomean ratio"] + [f"geomean {p} ratio (rows)" for p in peers]
    out = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    for r in rows:  # ab.py's order: op, then dtype
        cells = [r["op"], r["dtype"], str(r["n"]), f"{r['geomean_ratio']:.3f}"]
        cells += [f"{r[f'geomean_{p}_ratio']:.3f} ({r[f'n_{p}']})" if r.get(f"n_{p}") else "-" for p in peers]
        out.append("| " + " | ".join(cells) + " |")
    return out


def suite_table(rows: list[dict]) -> list[str]:
    """Every dispatcher row of a suite file, in file order (op, dtype, the suite's order)."""
    rows = [r for r in rows if str(r.get("kernel", "")).startswith("auto:")]
    batched = any("B" in r for r in rows)
    peers = [p for p in ("triton", "pad") if any(f"{p}_status" in r for r in rows)]
    head = ["op", "name"] + (["B"] if batched else []) + ["M", "K", "N", "dtype", "torch ms", "tilelab ms", "ratio"]
    for p in peers:
        head += [f"{p} ms", f"{p} ratio"]
    head += ["kernel picked", "status"]
    text = ("op", "name", "dtype", "kernel picked", "status")
    out = ["| " + " | ".join(head) + " |", "|" + "".join("---|" if h in text else "---:|" for h in head)]
    for r in rows:
        cells = [r["op"], r.get("name", "-")] + ([str(r.get("B", "-"))] if batched else [])
        cells += [str(r["M"]), str(r["K"]), str(r["N"]), r["dtype"], fmt(r.get("cublas_ms"), ".4f"),
                  fmt(r.get("ms"), ".4f"), fmt(r.get("ratio"), ".3f")]
        for p in peers:
            failed = str(r.get(f"{p}_status", "")).startswith("FAIL")
            cells += ["fail" if failed else fmt(r.get(f"{p}_ms"), ".4f"), fmt(r.get(f"{p}_ratio"), ".3f")]
        cells += [f"`{r['kernel'].replace('auto:', '')}`", r.get("status", "-")]
        out.append("| " + " | ".join(cells) + " |")
    return out


def suites(directory: str, tables: bool) -> list[str]:
    md = []
    for path in find_glob(directory, "suite_*.json"):
        data = load(path)
        suite = (data.get("meta") or {}).get("suite") or os.path.basename(path)[len("suite_"):-len(".json")]
        md += ["", f"Suite `{suite}` (`{os.path.basename(path)}`, shapes M×K×N as the model reads them): "
                   "geometric mean of the ratio over the dispatcher's verified rows.", ""]
        md += suite_summary(data)
        if tables:
            md += [""] + suite_table(rows_of(data))
    return md


def headlines(directory: str) -> list[str]:
    lines = []
    for path in find(directory, "tile_sweep.json")[:1]:
        rs = [r for r in rows_of(load(path)) if r.get("speedup")]
        if rs:
            b = max(rs, key=lambda r: r["speedup"])
            lines.append(f"- Tile sweep ({b['dtype']}): best speedup of `tiled` over `naive` "
                         f"{b['speedup']:.2f}× at N={b['N']}, T={b['tile']} "
                         f"({b['naive_ms']:.3f} → {b['tiled_ms']:.3f} ms; cuBLAS {b['cublas_ms']:.3f} ms).")
    for path in find(directory, "ncu.json")[:1]:
        data = load(path)
        for c in data.get("comparisons", []) if isinstance(data, dict) else []:
            lines.append(f"- ncu: {c}")
    for path in find(directory, "roofline.json")[:1]:
        m = load(path).get("meta", {})
        if m.get("bandwidth_tbs"):
            lines.append(f"- Measured ceilings: copy {m['bandwidth_tbs']:.2f} TB/s (read+write); "
                         + ", ".join(f"{d} matmul {v:.1f} TFLOP/s" for d, v in m.get("compute_tflops", {}).items())
                         + ".")
    return lines


def build(directory: str, suite_tables: bool = False) -> str:
    abs_ = find(directory, "ab.json")
    suite_files = find_glob(directory, "suite_*.json")
    if not abs_ and not suite_files:
        raise SystemExit(f"no ab.json or suite_*.json in {directory} or its subfolders")
    rows = []
    for p in abs_:
        rows += rows_of(load(p))
    first = rows or [r for p in suite_files for r in rows_of(load(p))]
    if not first:
        raise SystemExit(f"{(abs_ or suite_files)[0]} has no rows")
    auto_rows = []
    for p in find(directory, "ab_auto.json"):
        auto_rows += rows_of(load(p))
    r0 = first[0]
    md = [f"Measured on **{r0['device']}**, torch {r0['torch']}, CUDA {r0['cuda']}; "
          f"fp32 at precision 'highest' (IEEE) and TF32 at 'high', against cuBLAS at the same setting; median of "
          f"`triton.testing.do_bench`; ratio = cuBLAS ms / tilelab ms (> 1: tilelab faster). "
          f"Source: `{os.path.normpath(directory)}` "
          f"(generated by `benchmarks/make_readme_table.py`).", ""]
    a = auto_table(auto_rows)
    if a:
        md += a + ["", "Every kernel of the table (`ab.json`): the fastest one per shape and the dispatcher's choice.", ""]
    if rows:
        md += ab_table(rows)
    md += suites(directory, suite_tables)
    h = headlines(directory)
    if h:
        md += [""] + h
    return "\n".join(md) + "\n"


def replace_between(text: str, body: str) -> str:
    i, j = text.find(BEGIN), text.find(END)
    if i < 0 or j < 0 or j < i:
        raise SystemExit(f"README must contain {BEGIN} followed by {END}")
    return text[: i + len(BEGIN)] + "\n" + body + text[j:]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", help="results folder (with ab.json and/or suite_*.json, optionally ab_auto.json, "
                                   "tile_sweep.json, ncu.json, roofline.json)")
    p.add_argument("--readme", help="replace the text between the results markers in this file")
    p.add_argument("--out", help="also write the table to this file (e.g. DIR/results.md)")
    p.add_argument("--suite-tables", action="store_true",
                   help="also every row of the suite files (long: one line per op x shape x dtype)")
    args = p.parse_args(argv)
    md = build(args.results, args.suite_tables)
    print(md, end="")
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(md)
    if args.readme:
        with open(args.readme) as f:
            text = f.read()
        new = replace_between(text, md)
        with open(args.readme, "w") as f:
            f.write(new)
        print(f"updated {args.readme}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
