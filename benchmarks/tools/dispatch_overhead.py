#!/usr/bin/env python3
"""Host-side cost per call: torch.mm against tilelab's ops on a tiny product.

The GPU work of a --size x --size product is negligible, so the wall time per eager call
(--calls back-to-back calls, then one synchronize) is Python dispatch + the op's host code
+ the launch. Rows: torch.mm, torch.ops.tilelab.tiled_mm (dispatcher's choice),
tilelab_torch.tiled_mm (the typed wrapper), F.linear vs torch.ops.tilelab.tiled_addmm,
torch.mm vs tiled_mm on an input that requires grad (the autograd registration's cost),
and tiled_mm with variant=NAME for every config of the selected families that runs here.
Prints microseconds per call.

    python3 benchmarks/tools/dispatch_overhead.py
    python3 benchmarks/tools/dispatch_overhead.py --dtypes bf16 --families hopper tensorcore --calls 5000
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "fp64": torch.float64}


def per_call_us(fn, calls: int) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtypes", nargs="+", default=["bf16", "fp32"], choices=sorted(DTYPES))
    p.add_argument("--size", type=int, default=64, help="M = N = K of the product (default 64)")
    p.add_argument("--calls", type=int, default=2000, help="timed calls per row (default 2000)")
    p.add_argument("--families", nargs="*", default=None,
                   help="families whose configs get a variant=NAME row (default: every family; "
                        "none: pass the flag without names)")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("dispatch_overhead.py: no CUDA device", file=sys.stderr)
        return 2
    import tilelab_torch

    table = tilelab_torch.kernels("cuda")
    fams = set(k.family for k in table) if args.families is None else set(args.families)
    n = args.size
    print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: microseconds per call, "
          f"{args.calls} calls, {n}x{n}x{n}")
    for dkey in args.dtypes:
        dtype = DTYPES[dkey]
        torch.set_float32_matmul_precision("highest")
        a = torch.randn(n, n, device="cuda", dtype=dtype)
        b = torch.randn(n, n, device="cuda", dtype=dtype)
        w = torch.randn(n, n, device="cuda", dtype=dtype)
        bias = torch.randn(n, device="cuda", dtype=dtype)
        ag = a.clone().requires_grad_()
        rows = {
            "torch.mm": lambda: torch.mm(a, b),
            "torch.ops.tilelab.tiled_mm (auto)": lambda: torch.ops.tilelab.tiled_mm(a, b),
            "tilelab_torch.tiled_mm (auto)": lambda: tilelab_torch.tiled_mm(a, b),
            "F.linear": lambda: torch.nn.functional.linear(a, w, bias),
            "torch.ops.tilelab.tiled_addmm": lambda: torch.ops.tilelab.tiled_addmm(bias, a, w.t()),
            "torch.mm, requires_grad": lambda: torch.mm(ag, b),
            "torch.ops.tilelab.tiled_mm, requires_grad": lambda: torch.ops.tilelab.tiled_mm(ag, b),
        }
        for k in table:
            if k.family not in fams or k.tf32 or dtype not in k.dtypes:
                continue
            try:
                tilelab_torch.explain(a, b, variant=k.name)
            except RuntimeError:
                continue  # cannot run here (compute capability, build)
            rows[f"torch.ops.tilelab.tiled_mm variant={k.name}"] = (
                lambda name: lambda: torch.ops.tilelab.tiled_mm(a, b, variant=name))(k.name)
        for name, fn in rows.items():
            print(f"{dkey:5s} {name:60s} {per_call_us(fn, args.calls):8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
