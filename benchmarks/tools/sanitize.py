#!/usr/bin/env python3
"""Small edge-case products of selected kernel configs, checked against float64: the
driver for compute-sanitizer (and a quick first check of a new build).

For every selected row of tilelab_torch.kernels() that runs on this GPU:
  - odd shapes (1x1x1 up to a few blocks, ragged M, N, K), and one with whole
    interior blocks (2 block tiles + a ragged edge in M and N, 9 k-tiles + 3 in K);
  - each operand row-major and column-major (4 layout pairs);
  - aligned data and misaligned views x[1:, 1:] (odd pointer and leading dimension);
  - a K that wraps a pipeline ring of up to 16 stages (16 k-tiles + 7);
  - a batch with a stride-0 operand (tiled_bmm with b.expand(B, K, N));
  - a bias in the epilogue (tiled_addmm, bias of shape (N,) and (M, 1));
  - half-precision hopper rows: tiled_linear's training path (_tiled_linear_pre: the product
    and its pre-activation, both stored by the epilogue where the row can), and
    tiled_gated_linear (the gated kernel on both its tile sizes) once per family run;
  - with --large (fp32 rows): two products above the aligned-copy threshold of the
    blocked launcher (M*N*K >= 2^29) with misaligned rows (a row-major B with N = 1023,
    a column-major, misaligned A with M = 1023), so the copy into aligned rows runs too.
Every product's error is |out - ref| / (|a| @ |b|) in Frobenius norm against a float64
reference; above the dtype's tolerance the case is reported and the exit status is 1.
Rows that cannot run on this GPU or build (dtype, compute capability, sm_90a) are
skipped with the reason when selected by --family, an error when named by --kernels.

Run it under compute-sanitizer (small shapes on purpose: the tools are slow):
    compute-sanitizer --tool memcheck  python3 benchmarks/tools/sanitize.py --family hopper
    compute-sanitizer --tool memcheck  python3 benchmarks/tools/sanitize.py --family blocked --large
    compute-sanitizer --tool racecheck python3 benchmarks/tools/sanitize.py --family blocked
    compute-sanitizer --tool synccheck python3 benchmarks/tools/sanitize.py --kernels tensorcore_64x64x32
or alone, under `timeout` (a pipeline bug hangs rather than fails):
    timeout 300 python3 benchmarks/tools/sanitize.py --family hopper --all-dtypes -v
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16,
          "fp64": torch.float64}
# Tolerances on |out - ref| / (|a| @ |b|): accumulation in fp32 (fp64 for fp64), output rounded
# to the dtype; TF32 inputs keep a 10-bit mantissa.
TOL = {"fp32": 1e-5, "tf32": 5e-3, "bf16": 1e-2, "fp16": 1e-2, "fp64": 1e-12}


def dtype_keys(row, all_dtypes: bool, index: int) -> list[str]:
    """The dtypes a row is checked in: every one it supports with --all-dtypes, else one."""
    if row.tf32:
        return ["tf32"]
    keys = [k for k in ("fp32", "bf16", "fp16", "fp64") if DTYPES[k] in row.dtypes]
    if all_dtypes or not keys:
        return keys
    if "fp32" in keys:
        return ["fp32"]
    return [keys[index % len(keys)]]  # half-precision rows alternate bf16 / fp16


def operand(rows: int, cols: int, layout: str, misaligned: bool, dtype, gen) -> torch.Tensor:
    """A rows x cols operand, row- or column-major, optionally a misaligned [1:, 1:] view."""
    e = 1 if misaligned else 0
    if layout == "row":
        x = torch.randn(rows + e, cols + e, generator=gen).to(dtype).cuda()
    else:
        x = torch.randn(cols + e, rows + e, generator=gen).to(dtype).cuda().t()
    return x[e:, e:]


def rel_err(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor, bias=None) -> float:
    ref = a.double() @ b.double()
    scale = a.double().abs() @ b.double().abs()
    if bias is not None:
        ref = ref + bias.double()
        scale = scale + bias.double().abs()
    return float((out.double() - ref).norm() / scale.norm().clamp_min(1e-300))


def cases(row, large: bool):
    """(label, M, N, K, layout A, layout B, misaligned) of one row."""
    bm, bn, bk = row.block
    bk = max(bk, 1)  # the naive rows have no k-tile
    shapes = [(1, 1, 1), (7, 5, 13), (33, 17, 7), (129, 67, 33), (65, 131, 40), (200, 300, 130),
              (2 * bm + 3, 2 * bn + 5, 9 * bk + 3)]
    for M, N, K in shapes:
        for la in ("row", "col"):
            for lb in ("row", "col"):
                for mis in (False, True):
                    yield (f"{M}x{N}x{K}", M, N, K, la, lb, mis)
    ring = 16 * bk + 7
    for la in ("row", "col"):
        yield (f"ring K={ring}", 129, 67, ring, la, "row", False)
    if large:
        yield ("large, misaligned B rows", 1024, 1023, 1024, "row", "row", False)
        yield ("large, column-major misaligned A", 1023, 1024, 1024, "col", "row", True)


def runnable(tilelab_torch, name: str, dtype) -> str:
    """'' if the config runs this dtype here, else the reason."""
    probe = torch.zeros(8, 8, dtype=dtype, device="cuda")
    try:
        tilelab_torch.explain(probe, probe, variant=name)
    except RuntimeError as e:
        return str(e).splitlines()[0]
    return ""


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sel = p.add_mutually_exclusive_group(required=True)
    sel.add_argument("--family", nargs="+", metavar="FAMILY",
                     help="every row of these families (tilelab_torch.kernels() 'family': naive, tiled, "
                          "padded, blocked, tensorcore, hopper, ...), or 'all'")
    sel.add_argument("--kernels", nargs="+", metavar="NAME", help="these config names")
    p.add_argument("--all-dtypes", action="store_true",
                   help="every dtype a row supports (default: fp32 where supported, else bf16/fp16 alternating)")
    p.add_argument("--large", action="store_true",
                   help="add two 1024-sized fp32 products with misaligned rows (the blocked launcher's "
                        "aligned-copy path; slow under racecheck)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-v", "--verbose", action="store_true", help="print every case with its error")
    args = p.parse_args(argv)

    if not torch.cuda.is_available():
        print("sanitize.py: no CUDA device", file=sys.stderr)
        return 2
    import tilelab_torch

    table = [k for k in tilelab_torch.kernels("cuda")]
    if args.kernels:
        known = {k.name: k for k in table}
        unknown = [n for n in args.kernels if n not in known]
        if unknown:
            p.error(f"unknown config(s) {', '.join(unknown)}; names: {', '.join(known)}")
        rows = [known[n] for n in args.kernels]
    else:
        fams = set(args.family)
        rows = [k for k in table if "all" in fams or k.family in fams]
        if not rows:
            p.error(f"no rows of family {', '.join(sorted(fams))}; families: "
                    f"{', '.join(dict.fromkeys(k.family for k in table))}")

    gen = torch.Generator().manual_seed(args.seed)
    failures, checked, skipped = [], 0, 0
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}")
    for i, row in enumerate(rows):
        for dkey in dtype_keys(row, args.all_dtypes, i):
            dtype = DTYPES[dkey]
            torch.set_float32_matmul_precision("high" if dkey == "tf32" else "highest")
            why = runnable(tilelab_torch, row.name, dtype)
            if why:
                if args.kernels:
                    print(f"{row.name} {dkey}: cannot run here: {why}", file=sys.stderr)
                    return 2
                print(f"{row.name} {dkey}: skipped ({why})")
                skipped += 1
                continue
            worst, n = 0.0, 0

            def check(label, out, a, b, bias=None):
                nonlocal worst, n
                err = rel_err(out, a, b, bias)
                worst, n = max(worst, err), n + 1
                bad = not (err <= TOL[dkey])
                if bad:
                    failures.append(f"{row.name} {dkey} {label}: error {err:.3g} > {TOL[dkey]:g}")
                if args.verbose or bad:
                    print(f"  {row.name} {dkey} {label}: error {err:.2e}{'  FAIL' if bad else ''}", flush=True)

            for label, M, N, K, la, lb, mis in cases(row, args.large):
                if label.startswith("large") and dkey != "fp32":
                    continue  # the aligned-copy threshold is the fp32 kernels' rule
                a = operand(M, K, la, mis, dtype, gen)
                b = operand(K, N, lb, mis, dtype, gen)
                out = tilelab_torch.tiled_mm(a, b, variant=row.name)
                check(f"{label} A {la} B {lb}{' misaligned' if mis else ''}", out, a, b)
            # stride-0 batch: one B for every matrix of the batch, read in place
            a = torch.randn(3, 70, 90, generator=gen).to(dtype).cuda()
            b = torch.randn(90, 50, generator=gen).to(dtype).cuda().expand(3, 90, 50)
            check("bmm, stride-0 B", tilelab_torch.tiled_bmm(a, b, variant=row.name), a, b)
            # bias in the epilogue: (N,) broadcast over rows, (M, 1) over columns
            a = operand(67, 45, "row", False, dtype, gen)
            b = operand(45, 131, "col", False, dtype, gen)
            for bias in (torch.randn(131, generator=gen).to(dtype).cuda(),
                         torch.randn(67, 1, generator=gen).to(dtype).cuda()):
                out = tilelab_torch.tiled_addmm(bias, a, b, variant=row.name)
                check(f"addmm, bias {tuple(bias.shape)}", out, a, b, bias)
            if row.family == "hopper" and dkey in ("bf16", "fp16"):
                # tiled_linear's training path: y = x @ W.t() + bias and act(y) (relu: |act(y) - act(ref)|
                # <= |y - ref|, so the product's bound holds for both)
                for M, N, K in ((67, 131, 45), (2 * row.block[0] + 3, 2 * row.block[1], 9 * row.block[2] + 3)):
                    x = operand(M, K, "row", False, dtype, gen)
                    w = operand(N, K, "row", False, dtype, gen)
                    bias = torch.randn(N, generator=gen).to(dtype).cuda()
                    act, pre = torch.ops.tilelab._tiled_linear_pre(x, w, bias, activation="relu", variant=row.name)
                    check(f"training path {M}x{N}x{K}, pre-activation", pre, x, w.t(), bias)
                    ref = x.double() @ w.double().t() + bias.double()  # relu(y) against relu(ref), as a product
                    check(f"training path {M}x{N}x{K}, relu", act.double() - ref.relu() + ref, x, w.t(), bias)
            torch.cuda.synchronize()
            checked += 1
            print(f"{row.name} {dkey}: {n} products, worst error {worst:.2e}", flush=True)

    if any(r.family == "hopper" for r in rows):
        # tiled_gated_linear: both tile sizes (a wave of 128 x 128 output tiles, and fewer), edges in M, N, K
        for dkey in ("bf16", "fp16"):
            dtype = DTYPES[dkey]
            for M, N, K in ((1700, 1352, 136), (7, 24, 8), (130, 200, 72)):
                x = operand(M, K, "row", False, dtype, gen)
                wg, wu = operand(N, K, "row", False, dtype, gen), operand(N, K, "row", False, dtype, gen)
                kernel = tilelab_torch.explain_gated(x, wg, wu).kernel
                out = torch.ops.tilelab.tiled_gated_linear(x, wg, wu, activation=None)
                x64 = x.double()
                g, u = x64 @ wg.double().t(), x64 @ wu.double().t()
                scale = (x64.abs() @ wg.double().abs().t()) * (x64.abs() @ wu.double().abs().t())
                err = float((out.double() - g * u).norm() / scale.norm().clamp_min(1e-300))
                bad = not (err <= 2 * TOL[dkey])
                if bad:
                    failures.append(f"tiled_gated_linear {kernel} {dkey} {M}x{N}x{K}: error {err:.3g}")
                print(f"tiled_gated_linear {kernel} {dkey} {M}x{N}x{K}: error {err:.2e}{'  FAIL' if bad else ''}",
                      flush=True)
        torch.cuda.synchronize()
    print(f"{checked} config/dtype pair(s) checked, {skipped} skipped, {len(failures)} failure(s)")
    for f in failures:
        print("FAIL", f)
    if checked == 0:
        print("nothing ran", file=sys.stderr)
        return 2
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
