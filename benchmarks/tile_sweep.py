#!/usr/bin/env python3
"""The classic experiment: naive vs shared-memory tiled kernel, per matrix size and tile.

For N in --sizes and T in --tiles, square N x N x N products on random normal
inputs: the naive kernel (variant="naive", tile=T: one thread per output, the
same T x T thread block) against the tiled kernel (variant="tiled", tile=T:
T x T shared-memory tiles), with cuBLAS (torch.matmul) beside them. Every timed
output is first checked against a float64 reference: max_diff (largest absolute
difference) and rel_err (Frobenius); status is OK, CHECK (error out of
tolerance: fp32 1e-5, bf16/fp16 1e-2) or 'SKIP: <reason>' when the config
cannot run (e.g. T=64 needs 64x64 = 4096 threads per block, more than 1024).

Needs a CUDA device: the naive and tiled kernels are CUDA kernels (a CPU tensor
always runs tilelab's single CPU kernel, so there is nothing to sweep). On a
machine without CUDA it prints a message and exits 0.

Examples:
    python benchmarks/tile_sweep.py --out out/tile_sweep
    python benchmarks/tile_sweep.py --sizes 1024,2048 --tiles 8,16,32,64 --dtype bf16
"""
from __future__ import annotations

import argparse
import os
import re
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import tilelab_torch  # noqa: E402

NOTE = """\
Why the naive kernel's time changes with T: its arithmetic is the same for every
T, but the T x T block shape sets the memory access pattern. A warp is 32
consecutive threads of the block; for T < 32 a warp spans 32/T rows of C, so its
B loads cover T consecutive floats (T*4 bytes, a partial 128-byte line) in each
of 32/T rows, and its A loads touch 32/T different rows of A. Larger T means
wider, better-coalesced B accesses, and the T rows of A and T columns of B a
block reads get reused from L1/L2 by the block's other warps. So 'naive' is
only naive in the code: the caches do part of the tiling. The tiled kernel makes
that reuse explicit (each A/B element loaded once per block into shared memory
and read T times), cutting global loads by about T x (see profile_ncu.py)."""

COLUMNS = [
    ("dtype", "dtype", ""), ("N", "N", ""), ("T", "tile", ""),
    ("naive ms", "naive_ms", ".3f"), ("naive TFLOP/s", "naive_tflops", ".2f"),
    ("tiled ms", "tiled_ms", ".3f"), ("tiled TFLOP/s", "tiled_tflops", ".2f"),
    ("speedup", "speedup", ".2f"), ("cuBLAS ms", "cublas_ms", ".3f"),
    ("cuBLAS TFLOP/s", "cublas_tflops", ".2f"), ("tiled/cuBLAS", "tiled_vs_cublas", ".3f"),
    ("naive max_diff", "naive_max_diff", ".1e"), ("tiled max_diff", "tiled_max_diff", ".1e"),
    ("status", "status", ""),
]


def one_kernel(variant: str, tile: int, a, b, ref, dkey: str, args) -> dict:
    """Time one (variant, tile) after verifying it; a dict of <variant>_* keys."""
    try:
        out = tilelab_torch.tiled_mm(a, b, variant=variant, tile=tile)
        torch.cuda.synchronize()
    except RuntimeError as e:
        msg = str(e).splitlines()[0].split("tilelab: ")[-1]
        # the table keeps the first clause without its asides; the JSON keeps the whole message
        short = re.sub(r" \([^)]*\)", "", msg.split(";")[0])
        return {f"{variant}_status": f"SKIP: {short}", f"{variant}_error": msg}
    diff = (out.double() - ref).abs().max().item()
    err = common.rel_err(out, ref)
    del out
    st = common.status(err, dkey)
    row = {f"{variant}_max_diff": diff, f"{variant}_rel_err": err, f"{variant}_status": st,
           f"{variant}_kernel": tilelab_torch.explain(a, b, variant=variant, tile=tile).kernel}
    if st != "OK":  # never time wrong output
        return row
    ms = common.bench(lambda: tilelab_torch.tiled_mm(a, b, variant=variant, tile=tile), "cuda",
                      args.warmup, args.rep)
    N = a.shape[0]
    row.update({f"{variant}_ms": ms, f"{variant}_tflops": common.tflops(N, N, N, ms)})
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1024,2048,4096", help="comma-separated N (N x N x N products)")
    p.add_argument("--tiles", default="8,16,32,64", help="comma-separated tile sizes T")
    p.add_argument("--dtype", default="fp32", choices=[k for k in common.DTYPES if k != "tf32"],
                   help="fp32 runs at full IEEE precision (cuBLAS at 'highest')")
    p.add_argument("--warmup", type=int, default=25, help="warm-up per measurement, ms")
    p.add_argument("--rep", type=int, default=100, help="timed repetitions per measurement, ms")
    p.add_argument("--out", help="directory for tile_sweep.json / tile_sweep.csv")
    p.add_argument("--no-csv", action="store_true", help="write tile_sweep.json only")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("tile_sweep.py needs a CUDA device (the naive and tiled kernels are CUDA kernels); "
              "none is available here, nothing to do.")
        return 0
    sizes = [int(x) for x in args.sizes.split(",")]
    tiles = [int(x) for x in args.tiles.split(",")]
    dkey = args.dtype
    precision = common.set_precision(dkey)
    meta = common.metadata("cuda", precision)
    dtype = common.DTYPES[dkey]
    rows = []
    cases = [(n, t) for n in sizes for t in tiles]
    cache = {}
    for n, t in common.progress(cases, len(cases), "tile_sweep", not args.no_progress):
        if n not in cache:
            cache.clear()
            torch.cuda.empty_cache()
            torch.manual_seed(0)
            a = torch.randn(n, n, device="cuda", dtype=dtype)
            b = torch.randn(n, n, device="cuda", dtype=dtype)
            ref = a.double() @ b.double()
            cms = common.bench(lambda: torch.matmul(a, b), "cuda", args.warmup, args.rep)
            cache[n] = (a, b, ref, cms, common.rel_err(torch.matmul(a, b), ref))
        a, b, ref, cms, cerr = cache[n]
        row = dict(meta, dtype=dkey, N=n, tile=t, cublas_ms=cms, cublas_tflops=common.tflops(n, n, n, cms),
                   cublas_rel_err=cerr)
        row.update(one_kernel("naive", t, a, b, ref, dkey, args))
        row.update(one_kernel("tiled", t, a, b, ref, dkey, args))
        sts = [row["naive_status"], row["tiled_status"]]
        skips = [s for s in sts if s.startswith("SKIP")]
        row["status"] = skips[0] if skips else ("OK" if sts == ["OK", "OK"] else "CHECK")
        if row.get("naive_ms") and row.get("tiled_ms"):
            row["speedup"] = row["naive_ms"] / row["tiled_ms"]
            row["tiled_vs_cublas"] = cms / row["tiled_ms"]
        rows.append(row)

    print(f"# {meta['device']} | torch {meta['torch']} | CUDA {meta['cuda']} | {dkey}, "
          f"precision '{precision}' | median of do_bench | speedup = naive ms / tiled ms, "
          f"tiled/cuBLAS = cuBLAS ms / tiled ms")
    common.print_table(rows, COLUMNS)
    print()
    print(NOTE)
    ok = [r for r in rows if r.get("speedup")]
    if ok:
        best = max(ok, key=lambda r: r["speedup"])
        fastest = min(ok, key=lambda r: r["tiled_ms"] / r["cublas_ms"])
        print(f"\nbest speedup of tiled over naive: {best['speedup']:.2f}x at N={best['N']}, T={best['tile']}; "
              f"closest to cuBLAS: tiled T={fastest['tile']} at N={fastest['N']}, "
              f"{fastest['tiled_vs_cublas']:.3f} of cuBLAS's speed")
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        common.write_json(os.path.join(args.out, "tile_sweep.json"), {"meta": meta, "rows": rows, "note": NOTE})
        if not args.no_csv:
            common.write_csv(os.path.join(args.out, "tile_sweep.csv"), rows)
    return 1 if any(r["status"] == "CHECK" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
