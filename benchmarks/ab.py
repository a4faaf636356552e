#!/usr/bin/env python3
"""A/B tilelab against cuBLAS (torch.matmul) in one run, on whatever device is present.

For every shape x dtype: time torch.matmul and the chosen tilelab kernels on the
same random-normal inputs (median of device-event timings after warm-up), and
report ms, TFLOP/s, ratio to cuBLAS (cuBLAS time / tilelab time: > 1 means
tilelab is faster), % of the device's peak, and the relative error of both
against a float64 reference. With --kernels all it also names the fastest
tilelab kernel per shape ("oracle") beside the dispatcher's choice.

--op picks the operation: mm (tiled_mm vs torch.matmul), addmm (tiled_addmm vs
torch.addmm, a bias of shape (N,)) or linear (y = x @ W.t() + b with W of shape
(N, K), row-major as nn.Linear stores it: tiled_addmm(b, x, W.t()) vs F.linear) or
bmm (tiled_bmm vs torch.bmm, shapes written BxMxNxK). Rows carry an `op` key, and
`B` for bmm.

For small shapes (M*N*K <= --graph-max-mnk) it also times CUDA-graph replay of
both sides (columns 'graph ms' / 'cuBLAS graph ms', JSON keys graph_ms /
cublas_graph_ms), so launch overhead is visible and separate.

On a machine without a GPU it compares the CPU kernel against torch's CPU matmul.

Examples:
    python benchmarks/ab.py                                  # dispatcher's choice, default sweep
    python benchmarks/ab.py --kernels all --dtypes fp32 --out out/ab
    python benchmarks/ab.py --shapes 4096x4096x4096,1000x1000x1000 --kernels tiled_32x32x32 padded_32x32x32
    python benchmarks/ab.py --op linear --shapes 12608x2304x768 --dtypes bf16   # ViT-B qkv with bias
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import tilelab_torch  # noqa: E402

DEFAULT_SHAPES = (
    # squares
    "256x256x256,512x512x512,1024x1024x1024,2048x2048x2048,4096x4096x4096,8192x8192x8192,"
    # odd
    "1000x1000x1000,4095x4095x4095,4097x4097x4097,333x777x555,"
    # skinny (M small: decode-like) and model-like (LLaMA-7B MLP up-projection, 4096 tokens)
    "8x4096x4096,128x4096x4096,4096x11008x4096"
)
CPU_SHAPES = "128x128x128,256x256x256,512x512x512,1000x1000x1000,333x777x555,8x1024x1024"


def parse_shapes(text: str, batched: bool = False) -> list[tuple[int, int, int, int]]:
    """MxNxK (batch 1) or, for --op bmm, BxMxNxK: (B, M, N, K) tuples."""
    shapes = []
    for part in text.split(","):
        dims = [int(x) for x in part.lower().replace("×", "x").split("x")]
        if len(dims) == 3:
            dims = [1] + dims
        if len(dims) != 4 or (dims[0] != 1 and not batched):
            raise SystemExit(f"bad shape {part!r}: expected MxNxK" + (" or BxMxNxK" if batched else ""))
        shapes.append(tuple(dims))
    return shapes


def candidate_kernels(which: list[str], device: str, dtype: torch.dtype) -> list[str | None]:
    """None stands for the dispatcher's choice."""
    if device == "cpu":
        return [None]
    table = [k for k in tilelab_torch.kernels("cuda") if dtype in k.dtypes]
    if which == ["auto"]:
        return [None]
    if which == ["all"]:
        return [None] + [k.name for k in table]
    names = {k.name for k in table} | {k.variant for k in table}
    for w in which:
        if w != "auto" and w not in {k.name for k in tilelab_torch.kernels("cuda")} | {k.variant for k in tilelab_torch.kernels("cuda")}:
            raise SystemExit(f"unknown kernel {w!r}; see tilelab_torch.kernels()")
    return [None if w == "auto" else w for w in which if w == "auto" or w in names]


def operands(op: str, B: int, M: int, N: int, K: int, dtype, device: str):
    """(a, b, bias, baseline) of one op: tilelab computes a @ b (+ bias), baseline is torch's call."""
    if op == "bmm":
        a = torch.randn(B, M, K, device=device, dtype=dtype)
        b = torch.randn(B, K, N, device=device, dtype=dtype)
        return a, b, None, lambda: torch.bmm(a, b)
    a = torch.randn(M, K, device=device, dtype=dtype)
    if op == "linear":
        w = torch.randn(N, K, device=device, dtype=dtype)  # nn.Linear's weight: (out, in), row-major
        bias = torch.randn(N, device=device, dtype=dtype)
        return a, w.t(), bias, lambda: F.linear(a, w, bias)
    b = torch.randn(K, N, device=device, dtype=dtype)
    if op == "addmm":
        bias = torch.randn(N, device=device, dtype=dtype)
        return a, b, bias, lambda: torch.addmm(bias, a, b)
    return a, b, None, lambda: torch.matmul(a, b)


def run(args) -> list[dict]:
    device = args.device
    rows = []
    cases = [(s, d) for d in args.dtypes for s in args.shapes]
    for (B, M, N, K), dkey in common.progress(cases, len(cases), "ab", not args.no_progress):
        precision = common.set_precision(dkey)
        meta = common.metadata(device, precision)
        peak = common.peak_tflops(meta["device"], dkey) if device != "cpu" else None
        dtype = common.DTYPES[dkey]
        torch.manual_seed(0)
        a, b, bias, baseline = operands(args.op, B, M, N, K, dtype, device)
        ref = a.double() @ b.double()
        if bias is not None:
            ref += bias.double()
        cublas_ms = common.bench(baseline, device, args.warmup, args.rep)
        cublas_err = common.rel_err(baseline(), ref)
        graph = device.startswith("cuda") and B * M * N * K <= args.graph_max_mnk
        cublas_graph_ms = common.bench_graph(baseline, args.rep) if graph else None
        chosen = tilelab_torch.explain(a, b).kernel
        for name in candidate_kernels(args.kernels, device, dtype):
            kname = f"auto:{chosen}" if name is None else name
            if args.op == "bmm":
                fn = lambda n=name: tilelab_torch.tiled_bmm(a, b, variant=n)  # noqa: E731
            elif bias is None:
                fn = lambda n=name: tilelab_torch.tiled_mm(a, b, variant=n)  # noqa: E731
            else:
                fn = lambda n=name: tilelab_torch.tiled_addmm(bias, a, b, variant=n)  # noqa: E731
            row = dict(meta, op=args.op, **({"B": B} if args.op == "bmm" else {}), dtype=dkey, M=M, N=N, K=K,
                       kernel=kname, chosen=(name is None or name == chosen),
                       cublas_ms=cublas_ms, cublas_tflops=common.tflops(B * M, N, K, cublas_ms),
                       cublas_rel_err=cublas_err)
            try:
                t0 = time.perf_counter()
                out = fn()
                if device.startswith("cuda"):
                    torch.cuda.synchronize()
                once = time.perf_counter() - t0
            except RuntimeError as e:  # e.g. a config that cannot run this dtype/device
                rows.append(dict(row, status=f"SKIP: {str(e).splitlines()[0]}"))
                continue
            row["rel_err"] = common.rel_err(out, ref)
            del out
            if once > args.max_call_s:
                rows.append(dict(row, status=f"SKIP: one call took {once:.1f}s > --max-call-s"))
                continue
            ms = common.bench(fn, device, args.warmup, args.rep)
            if graph:
                # CUDA-graph replay: the same kernels with the CPU launch path removed, so a
                # small shape's launch overhead is visible as ms - graph_ms.
                row.update(graph_ms=common.bench_graph(fn, args.rep), cublas_graph_ms=cublas_graph_ms)
            row.update(ms=ms, tflops=common.tflops(B * M, N, K, ms), ratio=cublas_ms / ms,
                       pct_peak=(100 * common.tflops(B * M, N, K, ms) / peak) if peak else None,
                       status=common.status(row["rel_err"], dkey))
            rows.append(row)
        del a, b, bias, baseline, ref
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    return rows


def oracle_rows(rows: list[dict]) -> list[dict]:
    """Per (shape, dtype): the fastest verified tilelab kernel vs the dispatcher's choice."""
    out = []
    def key_of(r):
        return r["dtype"], r.get("B", 1), r["M"], r["N"], r["K"]

    keys = sorted({key_of(r) for r in rows}, key=lambda k: (k[0], k[1] * k[2] * k[3] * k[4]))
    for key in keys:
        group = [r for r in rows if key_of(r) == key and r.get("ms") and r["status"] == "OK"]
        if not group:
            continue
        best = min(group, key=lambda r: r["ms"])
        chosen = [r for r in group if r["chosen"]]
        ch = min(chosen, key=lambda r: r["ms"]) if chosen else None
        out.append(dict(dtype=key[0], shape=(f"{key[1]}x" if key[1] > 1 else "") + f"{key[2]}x{key[3]}x{key[4]}", oracle=best["kernel"].replace("auto:", ""),
                        oracle_ms=best["ms"], chosen=ch["kernel"].replace("auto:", "") if ch else None,
                        chosen_ms=ch["ms"] if ch else None,
                        chosen_vs_oracle=(best["ms"] / ch["ms"]) if ch else None,
                        cublas_ms=best["cublas_ms"]))
    return out


COLUMNS = [
    ("op", "op", ""), ("dtype", "dtype", ""), ("B", "B", ""), ("M", "M", ""), ("N", "N", ""), ("K", "K", ""), ("kernel", "kernel", ""),
    ("ms", "ms", ".3f"), ("TFLOP/s", "tflops", ".2f"), ("cuBLAS ms", "cublas_ms", ".3f"),
    ("cuBLAS TFLOP/s", "cublas_tflops", ".2f"), ("ratio", "ratio", ".3f"), ("%peak", "pct_peak", ".1f"),
    ("graph ms", "graph_ms", ".4f"), ("cuBLAS graph ms", "cublas_graph_ms", ".4f"),
    ("rel_err", "rel_err", ".1e"), ("cuBLAS rel_err", "cublas_rel_err", ".1e"), ("status", "status", ""),
]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shapes", help="comma-separated MxNxK list (default: a sweep of squares, odd, "
                                    "skinny and model-like shapes)")
    p.add_argument("--dtypes", default="fp32,bf16,fp16",
                   help="comma-separated from fp32 (full IEEE precision), tf32, bf16, fp16, fp64")
    p.add_argument("--kernels", nargs="+", default=["auto"],
                   help="'auto' (the dispatcher's choice), 'all' (every config of the table), "
                        "or config names / variants")
    p.add_argument("--op", choices=("mm", "addmm", "linear", "bmm"), default="mm",
                   help="mm: tiled_mm vs torch.matmul; addmm: tiled_addmm vs torch.addmm (bias (N,)); "
                        "linear: tiled_addmm(b, x, W.t()) vs F.linear(x, W, b), W (N, K) row-major; "
                        "bmm: tiled_bmm vs torch.bmm, shapes BxMxNxK")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--warmup", type=int, default=25, help="warm-up per measurement, ms")
    p.add_argument("--rep", type=int, default=100, help="timed repetitions per measurement, ms")
    p.add_argument("--max-call-s", type=float, default=1.0, help="skip a kernel whose single call takes longer")
    p.add_argument("--graph-max-mnk", type=float, default=1024 ** 3,
                   help="also time CUDA-graph replay (columns 'graph ms', 'cuBLAS graph ms') for shapes "
                        "with M*N*K at most this (default 1024^3; 0 turns it off)")
    p.add_argument("--out", help="directory for NAME.json / NAME.csv")
    p.add_argument("--name", default="ab", help="base name of the --out files (default: ab)")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    args.shapes = parse_shapes(args.shapes or (CPU_SHAPES if args.device == "cpu" else DEFAULT_SHAPES),
                               batched=args.op == "bmm")
    args.dtypes = [d.strip() for d in args.dtypes.split(",")]
    for d in args.dtypes:
        if d not in common.DTYPES:
            p.error(f"unknown dtype {d!r}; choose from {', '.join(common.DTYPES)}")

    rows = run(args)
    meta = common.metadata(args.device, "highest (fp32 rows) / high (tf32 rows)")
    print(f"# {meta['device']} | torch {meta['torch']} | CUDA {meta['cuda']} | "
          f"fp32 rows at precision 'highest' (IEEE), tf32 rows at 'high' | median of do_bench; "
          f"graph ms = median CUDA-graph replay")
    common.print_table(rows, COLUMNS)
    orc = oracle_rows(rows)
    if any(r["chosen"] for r in rows) and len({r["kernel"] for r in rows}) > 1:
        print("\n# dispatcher's choice vs the fastest tilelab kernel (oracle)")
        common.print_table(orc, [("dtype", "dtype", ""), ("shape", "shape", ""), ("oracle", "oracle", ""),
                                 ("oracle ms", "oracle_ms", ".3f"), ("chosen", "chosen", ""),
                                 ("chosen ms", "chosen_ms", ".3f"), ("oracle/chosen", "chosen_vs_oracle", ".3f"),
                                 ("cuBLAS ms", "cublas_ms", ".3f")])
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        common.write_json(os.path.join(args.out, f"{args.name}.json"), {"meta": meta, "rows": rows, "oracle": orc})
        common.write_csv(os.path.join(args.out, f"{args.name}.csv"), rows)
    bad = [r for r in rows if r.get("status") == "CHECK"]
    if bad:
        print(f"\n{len(bad)} row(s) out of tolerance (status CHECK)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
