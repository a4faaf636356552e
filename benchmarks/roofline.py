#!/usr/bin/env python3
"""Roofline: where each tilelab kernel sits against the device's two ceilings.

1. Measures the ceilings in this run: memory bandwidth from a large
   device-to-device copy (bytes read + bytes written over the median time), and
   compute per dtype from a large torch.matmul (cuBLAS; fp32 at full IEEE
   precision, 'tf32' at precision 'high').
2. Times every kernel of tilelab_torch.kernels("cuda") that supports the dtype
   on one N x N x N product (verified against a float64 reference first; a
   kernel out of tolerance is reported, not timed) and places its achieved
   TFLOP/s against its arithmetic intensity (FLOP per byte of global traffic):
     - analytic model, from the config table (KernelInfo.block, dtype size s):
         naive (no K-tile, bk == 0): every FMA loads one A and one B element,
             2 FLOP / (2 s) = 1/s FLOP/B (0.25 for fp32);
         tiled / padded / blocked / tensorcore (block tile BM x BN, BK of K per
             step): 2*BM*BN*BK / ((BM + BN)*BK*s) = 2*BM*BN / ((BM + BN)*s)
             (T/4 for a T x T fp32 tile);
     - measured, when --ncu-json names the JSON of profile_ncu.py: FLOPs over
       the DRAM bytes (read + write) ncu counted for that kernel and dtype (its
       own shape; its TFLOP/s from its own duration if the shape differs).
   The roof is min(compute ceiling, intensity x bandwidth). The analytic
   intensity counts traffic into the SM (mostly L2 hits); DRAM intensity is
   higher because L2 absorbs the re-reads.
3. Prints the table and draws a log-log PNG (matplotlib, Agg backend).

Needs a CUDA device; on a machine without CUDA it prints a message and exits 0.

Examples:
    python benchmarks/roofline.py --out out/roofline
    python benchmarks/roofline.py --size 2048 --dtypes fp32,bf16 --ncu-json out/ncu/ncu.json --out out/roofline
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import tilelab_torch  # noqa: E402


def analytic_intensity(k, elem_bytes: int) -> tuple[float, str]:
    bm, bn, bk = k.block
    if not bk:  # no K tile: operands straight from global memory
        return 1.0 / elem_bytes, "2 FLOP / (2 loads x s)"
    return 2.0 * bm * bn / ((bm + bn) * elem_bytes), f"2*{bm}*{bn}/(({bm}+{bn})*{elem_bytes})"


def measure_bandwidth(nbytes: int, args) -> float:
    """TB/s of a device-to-device copy, counting bytes read and written."""
    n = nbytes // 4
    src = torch.randn(n, device="cuda")
    dst = torch.empty_like(src)
    ms = common.bench(lambda: dst.copy_(src), "cuda", args.warmup, args.rep)
    assert torch.equal(dst, src), "device-to-device copy is wrong"
    del src, dst
    torch.cuda.empty_cache()
    return 2 * n * 4 / (ms * 1e-3) / 1e12


def measure_compute(dkey: str, n: int, args) -> float:
    common.set_precision(dkey)
    torch.manual_seed(0)
    a = torch.randn(n, n, device="cuda", dtype=common.DTYPES[dkey])
    b = torch.randn(n, n, device="cuda", dtype=common.DTYPES[dkey])
    ms = common.bench(lambda: torch.matmul(a, b), "cuda", args.warmup, args.rep)
    del a, b
    torch.cuda.empty_cache()
    return common.tflops(n, n, n, ms)


def load_ncu(path: str) -> dict:
    """(kernel name, dtype) -> ncu row from profile_ncu.py's JSON."""
    with open(path) as f:
        data = json.load(f)
    out = {}
    for r in data.get("rows", data if isinstance(data, list) else []):
        if r.get("dram_bytes") is not None and r.get("config"):
            out.setdefault((r["config"], r["dtype"]), r)
    return out


COLUMNS = [
    ("dtype", "dtype", ""), ("kernel", "kernel", ""), ("block", "block", ""),
    ("AI model FLOP/B", "ai_model", ".2f"), ("roof@model TFLOP/s", "roof_model", ".2f"),
    ("AI DRAM FLOP/B", "ai_dram", ".1f"), ("roof@DRAM", "roof_dram", ".1f"),
    ("ms", "ms", ".3f"), ("TFLOP/s", "tflops", ".2f"), ("% of roof@model", "pct_roof_model", ".1f"),
    ("% of compute", "pct_compute", ".1f"), ("rel_err", "rel_err", ".1e"), ("status", "status", ""),
]


def plot(rows, ceilings, bw, path, meta):
    """One log-log panel per dtype: its roof, each kernel at its model intensity (filled) and,
    where ncu measured it, at its DRAM intensity (hollow, dotted line between the two)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no PNG", file=sys.stderr)
        return False
    dkeys = list(ceilings)
    fig, axes = plt.subplots(1, len(dkeys), figsize=(7.5 * len(dkeys), 6.5), squeeze=False)
    xs = [10 ** (i / 20) for i in range(-40, 81)]  # 0.01 .. 10^4 FLOP/B
    markers = ["o", "s", "^", "D", "v", "P", "X", "*"]
    fams = sorted({r["family"] for r in rows})
    cmap = plt.get_cmap("tab10")
    for ax, dkey in zip(axes[0], dkeys):
        peak = ceilings[dkey]
        ax.plot(xs, [min(peak, x * bw) for x in xs], color="k", lw=1.5,
                label=f"roof: cuBLAS {peak:.0f} TFLOP/s, copy {bw:.2f} TB/s (measured)")
        for r in rows:
            if r["dtype"] != dkey or not r.get("tflops"):
                continue
            i = fams.index(r["family"])
            c, m = cmap(i % 10), markers[i % len(markers)]
            ax.scatter([r["ai_model"]], [r["tflops"]], color=c, marker=m, s=40, zorder=3)
            ax.annotate(r["kernel"], (r["ai_model"], r["tflops"]), fontsize=6, xytext=(4, -3),
                        textcoords="offset points")
            if r.get("ai_dram"):
                y = r.get("tflops_dram_shape") or r["tflops"]
                ax.scatter([r["ai_dram"]], [y], facecolors="none", edgecolors=c, marker=m, s=40, zorder=3)
                ax.plot([r["ai_model"], r["ai_dram"]], [r["tflops"], y], color=c, lw=0.6, ls=":")
        for i, f in enumerate(fams):
            ax.scatter([], [], color=cmap(i % 10), marker=markers[i % len(markers)], label=f"{f} (model intensity)")
        ax.scatter([], [], facecolors="none", edgecolors="k", label="DRAM intensity measured by ncu")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("arithmetic intensity (FLOP / byte)")
        ax.set_ylabel("TFLOP/s")
        ax.set_title(f"{dkey}, {rows[0]['N'] if rows else '?'}^3", fontsize=10)
        ax.grid(True, which="both", lw=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"tilelab roofline on {meta['device']} (torch {meta['torch']}, CUDA {meta['cuda']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--size", type=int, default=4096, help="N of the N x N x N product the kernels run")
    p.add_argument("--dtypes", default="fp32,bf16", help="comma-separated from fp32, tf32, bf16, fp16, fp64")
    p.add_argument("--peak-size", type=int, default=8192, help="N of the torch.matmul that measures compute")
    p.add_argument("--copy-gib", type=float, default=2.0, help="size of the copied buffer, GiB")
    p.add_argument("--kernels", nargs="+", default=["all"], help="'all' or config names")
    p.add_argument("--ncu-json", help="ncu.json from profile_ncu.py: adds measured DRAM intensity")
    p.add_argument("--max-call-s", type=float, default=1.0, help="skip a kernel whose single call takes longer")
    p.add_argument("--warmup", type=int, default=25, help="warm-up per measurement, ms")
    p.add_argument("--rep", type=int, default=100, help="timed repetitions per measurement, ms")
    p.add_argument("--out", help="directory for roofline.json / roofline.csv / roofline.png")
    p.add_argument("--no-csv", action="store_true", help="write roofline.json and roofline.png only")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("roofline.py needs a CUDA device (it measures the GPU's ceilings and CUDA kernels); "
              "none is available here, nothing to do.")
        return 0
    import time

    dkeys = [d.strip() for d in args.dtypes.split(",")]
    for d in dkeys:
        if d not in common.DTYPES:
            p.error(f"unknown dtype {d!r}")
    meta = common.metadata("cuda", "highest (fp32), high (tf32)")
    bw = measure_bandwidth(int(args.copy_gib * 2 ** 30), args)
    ceilings = {d: measure_compute(d, args.peak_size, args) for d in dkeys}
    meta.update(bandwidth_tbs=bw, compute_tflops=ceilings, size=args.size, peak_size=args.peak_size)
    ncu = load_ncu(args.ncu_json) if args.ncu_json and os.path.exists(args.ncu_json) else {}
    if args.ncu_json and not ncu:
        print(f"note: no usable rows in {args.ncu_json}: measured DRAM intensity left out", file=sys.stderr)

    n = args.size
    table = tilelab_torch.kernels("cuda")
    if args.kernels != ["all"]:
        table = [k for k in table if k.name in args.kernels or k.variant in args.kernels]
    cases = [(d, k) for d in dkeys for k in table if common.DTYPES[d] in k.dtypes]
    rows, inputs = [], {}
    for dkey, k in common.progress(cases, len(cases), "roofline", not args.no_progress):
        precision = common.set_precision(dkey)
        if dkey not in inputs:
            inputs.clear()
            torch.cuda.empty_cache()
            torch.manual_seed(0)
            a = torch.randn(n, n, device="cuda", dtype=common.DTYPES[dkey])
            b = torch.randn(n, n, device="cuda", dtype=common.DTYPES[dkey])
            inputs[dkey] = (a, b, a.double() @ b.double())
        a, b, ref = inputs[dkey]
        s = a.element_size()
        ai, formula = analytic_intensity(k, s)
        row = dict(meta, precision=precision, dtype=dkey, N=n, kernel=k.name, family=k.family,
                   block="x".join(map(str, k.block)), ai_model=ai, ai_formula=formula,
                   roof_model=min(ceilings[dkey], ai * bw), compute_ceiling=ceilings[dkey])
        fn = lambda name=k.name: tilelab_torch.tiled_mm(a, b, variant=name)  # noqa: E731
        try:
            t0 = time.perf_counter()
            out = fn()
            torch.cuda.synchronize()
            once = time.perf_counter() - t0
        except RuntimeError as e:
            rows.append(dict(row, status=f"SKIP: {str(e).splitlines()[0]}"))
            continue
        row["rel_err"] = common.rel_err(out, ref)
        del out
        row["status"] = common.status(row["rel_err"], dkey)
        if row["status"] == "OK" and once <= args.max_call_s:
            ms = common.bench(fn, "cuda", args.warmup, args.rep)
            row.update(ms=ms, tflops=common.tflops(n, n, n, ms))
            row["pct_roof_model"] = 100 * row["tflops"] / row["roof_model"]
            row["pct_compute"] = 100 * row["tflops"] / ceilings[dkey]
        elif row["status"] == "OK":
            row["status"] = f"SKIP: one call took {once:.1f}s > --max-call-s"
        nr = ncu.get((k.name, dkey))
        if nr:
            flops = 2.0 * nr["M"] * nr["N"] * nr["K"]
            row["ai_dram"] = flops / nr["dram_bytes"]
            row["roof_dram"] = min(ceilings[dkey], row["ai_dram"] * bw)
            row["ncu_shape"] = f"{nr['M']}x{nr['N']}x{nr['K']}"
            if (nr["M"], nr["N"], nr["K"]) != (n, n, n) and nr.get("duration_ns"):
                row["tflops_dram_shape"] = flops / (nr["duration_ns"] * 1e-9) / 1e12
        rows.append(row)

    print(f"# {meta['device']} | torch {meta['torch']} | CUDA {meta['cuda']} | N={n} | "
          f"measured ceilings: copy {bw:.2f} TB/s (read+write), "
          + ", ".join(f"{d} matmul {c:.1f} TFLOP/s" for d, c in ceilings.items())
          + f" at {args.peak_size}^3 | fp32 at 'highest' (IEEE)")
    common.print_table(rows, COLUMNS)
    print("\nAI model: FLOP per byte moved from global memory into the SM by the kernel's tiling "
          "(mostly L2 hits); AI DRAM: FLOP per DRAM byte counted by ncu (L2 absorbs the re-reads). "
          "roof = min(compute ceiling, AI x bandwidth). Above 100% of roof@model: the caches give reuse "
          "the model does not count (naive's T x T block rereads its rows from L1).")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        common.write_json(os.path.join(args.out, "roofline.json"), {"meta": meta, "rows": rows})
        if not args.no_csv:
            common.write_csv(os.path.join(args.out, "roofline.csv"), rows)
        png = os.path.join(args.out, "roofline.png")
        if plot(rows, ceilings, bw, png, meta):
            print(f"wrote {png}")
    return 1 if any(r.get("status") == "CHECK" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
