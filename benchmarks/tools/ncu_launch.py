#!/usr/bin/env python3
"""One product of one kernel config, to profile with Nsight Compute (full sections, source
view, stall reasons: what benchmarks/profile_ncu.py's counter table does not show).

The inputs are made on the CPU and copied to the GPU (no kernel launches), then
tiled_mm(a, b, variant=NAME) runs --warmup times (first-call set-up: shared-memory
attributes, TMA descriptors, lazy module loading) and once more inside the NVTX range
"tilelab_profiled". The output of the last call is checked against float64.

Profile only that last call (its kernels: the product, and the copy of an operand the
launcher copies first, e.g. misaligned rows), clocks left alone (ncu locks them to base
by default, which makes durations incomparable with benchmarks/ab.py):
    ncu --clock-control none --nvtx --nvtx-include "tilelab_profiled/" --set full -o prof \\
        python3 benchmarks/tools/ncu_launch.py --kernel blocked_64x128x8 --shape 4096x4096x4096
or by kernel name (each family's kernel function is <family>_kernel; an operand that
has to be copied first, e.g. misaligned, adds copy kernels of other names):
    ncu --clock-control none -k regex:hopper_kernel --launch-skip 1 --launch-count 1 --set full -o prof \\
        python3 benchmarks/tools/ncu_launch.py --kernel hopper_128x256x64 --shape 4096x4096x4096 --dtype bf16
Without ncu it runs as a plain check of one product.
"""
from __future__ import annotations

import argparse
import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sanitize import operand  # noqa: E402  (the same operand views as the sanitizer's)

DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16,
          "fp64": torch.float64}
RANGE = "tilelab_profiled"


def parse_shape(text: str) -> tuple[int, int, int]:
    dims = [int(x) for x in text.lower().replace("×", "x").split("x")]
    if len(dims) != 3:
        raise argparse.ArgumentTypeError(f"bad shape {text!r}: expected MxNxK")
    return dims[0], dims[1], dims[2]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernel", required=True,
                   help="a config name from tilelab_torch.kernels() (or a variant, or 'auto': the dispatcher's choice)")
    p.add_argument("--shape", type=parse_shape, default=(4096, 4096, 4096), help="MxNxK (default 4096x4096x4096)")
    p.add_argument("--dtype", choices=sorted(DTYPES),
                   help="default: tf32 for TF32 rows, fp32 if the row supports it, else bf16")
    p.add_argument("--layout", default="rr", choices=["rr", "rc", "cr", "cc"],
                   help="A then B: r = row-major, c = column-major (a transposed view); default rr")
    p.add_argument("--misaligned", action="store_true", help="use x[1:, 1:] views (odd pointer and leading dimension)")
    p.add_argument("--warmup", type=int, default=1, help="calls before the profiled one (default 1)")
    p.add_argument("--no-check", action="store_true", help="skip the float64 check (large shapes: it runs cuBLAS in fp64)")
    args = p.parse_args(argv)

    if not torch.cuda.is_available():
        print("ncu_launch.py: no CUDA device", file=sys.stderr)
        return 2
    import tilelab_torch

    table = {k.name: k for k in tilelab_torch.kernels("cuda")}
    row = table.get(args.kernel)
    dkey = args.dtype
    if dkey is None:
        if row is not None and row.tf32:
            dkey = "tf32"
        elif row is None or torch.float32 in row.dtypes:
            dkey = "fp32"
        else:
            dkey = "bf16"
    dtype = DTYPES[dkey]
    torch.set_float32_matmul_precision("high" if dkey == "tf32" else "highest")
    M, N, K = args.shape
    gen = torch.Generator().manual_seed(0)
    layout = {"r": "row", "c": "col"}
    a = operand(M, K, layout[args.layout[0]], args.misaligned, dtype, gen)
    b = operand(K, N, layout[args.layout[1]], args.misaligned, dtype, gen)
    variant = None if args.kernel == "auto" else args.kernel
    try:
        ex = tilelab_torch.explain(a, b, variant=variant)
    except RuntimeError as e:
        print(f"ncu_launch.py: {str(e).splitlines()[0]}", file=sys.stderr)
        return 2
    for _ in range(args.warmup):
        tilelab_torch.tiled_mm(a, b, variant=variant)
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(RANGE)
    out = tilelab_torch.tiled_mm(a, b, variant=variant)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    msg = f"{ex.kernel} {dkey} {M}x{N}x{K} layout {args.layout}{' misaligned' if args.misaligned else ''}"
    if args.no_check:
        print(msg)
        return 0
    ref = a.double() @ b.double()
    err = float((out.double() - ref).norm() / (a.double().abs() @ b.double().abs()).norm())
    tol = {"fp32": 1e-5, "tf32": 5e-3, "bf16": 1e-2, "fp16": 1e-2, "fp64": 1e-12}[dkey]
    print(f"{msg}: error {err:.2e}")
    return 0 if err <= tol else 1


if __name__ == "__main__":
    sys.exit(main())
