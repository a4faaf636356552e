#!/usr/bin/env python3
"""Host-side cost per call: torch.mm against tilelab's ops on a tiny product.

The GPU work of a --size x --size product is negligible, so the wall time per eager call
(--calls back-to-back calls, then one synchronize) is Python dispatch + the op's host code
+ the launch. Rows: torch.mm, torch.ops.tilelab.tiled_mm (dispatcher's choice),
tilelab_torch.tiled_mm (the typed wrapper), F.linear vs torch.ops.tilelab.tiled_addmm,
the same on inputs that require grad (forward only, and forward + backward: the
autograd registration's cost), torch.bmm vs tiled_bmm, a Python torch.autograd.Function
around tiled_mm (the candidate between today's C++ rule and a Python one), and tiled_mm
with variant=NAME for every config of the selected families that runs here.
Prints microseconds per call.

--shapes M,K,N ... adds the host cost of x @ W.t() at those sizes, whose GPU time is not
negligible: a sleep kernel first holds the GPU busy, so each loop of --shape-calls calls only
queues work and its wall time is the host's (the least of 5 loops). Rows: torch.mm /
F.linear against tiled_mm / tiled_linear, with and without an input that requires grad,
tilelab's with its cache of picks on and off (torch.ops.tilelab._set_choice_cache).

    python3 benchmarks/tools/dispatch_overhead.py
    python3 benchmarks/tools/dispatch_overhead.py --dtypes bf16 --families hopper tensorcore --calls 5000
    python3 benchmarks/tools/dispatch_overhead.py --dtypes bf16 --families --shapes 128,3072,768 128,2048,5632
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


class PythonFunctionMM(torch.autograd.Function):
    """tiled_mm under a Python autograd.Function: a candidate autograd rule, for comparison."""

    @staticmethod
    def forward(ctx, a, b):
        ctx.save_for_backward(a if b.requires_grad else None, b if a.requires_grad else None)
        return torch.ops.tilelab.tiled_mm(a, b)

    @staticmethod
    def backward(ctx, grad):
        a, b = ctx.saved_tensors
        ga = torch.ops.tilelab.tiled_mm(grad, b.t()) if ctx.needs_input_grad[0] else None
        gb = torch.ops.tilelab.tiled_mm(a.t(), grad) if ctx.needs_input_grad[1] else None
        return ga, gb


def per_call_us(fn, calls: int) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / calls * 1e6


def host_us(fn, calls: int, rounds: int = 5) -> float:
    """Host microseconds per call of fn with the GPU held busy (its queue never drains during a loop)."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(rounds):
        torch.cuda._sleep(250_000 * calls)  # ~125 us of GPU time a call at H100/H200 clocks: longer than the loop
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return best


def shape_rows(dkey: str, shapes: list[tuple[int, int, int]], calls: int) -> None:
    """--shapes: x @ W.t() at each M x K x N, torch's op against tilelab's with the cache of picks on / off."""
    dtype, F = DTYPES[dkey], torch.nn.functional
    tl, tm = torch.ops.tilelab.tiled_linear.default, torch.ops.tilelab.tiled_mm.default
    for M, K, N in shapes:
        x = torch.randn(M, K, device="cuda", dtype=dtype)
        w = torch.randn(N, K, device="cuda", dtype=dtype)
        bias = torch.randn(N, device="cuda", dtype=dtype)
        xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
        wt = w.t()
        pairs = [("mm", lambda: torch.mm(x, wt), lambda: tm(x, wt)),
                 ("linear + bias", lambda: F.linear(x, w, bias), lambda: tl(x, w, bias)),
                 ("linear + bias, requires_grad", lambda: F.linear(xg, wg, bias), lambda: tl(xg, wg, bias))]
        for what, torch_fn, tilelab_fn in pairs:
            theirs = host_us(torch_fn, calls)
            ours = {}
            for on in (False, True):
                torch.ops.tilelab._set_choice_cache(on)
                ours[on] = host_us(tilelab_fn, calls)
            torch.ops.tilelab._set_choice_cache(True)
            print(f"{dkey:5s} {M}x{K}x{N} {what:30s} torch {theirs:6.1f}  tilelab: cache off {ours[False]:6.1f}, "
                  f"on {ours[True]:6.1f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dtypes", nargs="+", default=["bf16", "fp32"], choices=sorted(DTYPES))
    p.add_argument("--size", type=int, default=64, help="M = N = K of the product (default 64)")
    p.add_argument("--calls", type=int, default=2000, help="timed calls per row (default 2000)")
    p.add_argument("--families", nargs="*", default=None,
                   help="families whose configs get a variant=NAME row (default: every family; "
                        "none: pass the flag without names)")
    p.add_argument("--shapes", nargs="*", default=[], metavar="M,K,N",
                   help="x @ W.t() sizes whose host cost to measure with the GPU held busy (see above)")
    p.add_argument("--shape-calls", type=int, default=200, help="calls per timed loop of --shapes (default 200)")
    args = p.parse_args(argv)
    try:
        shapes = [tuple(int(v) for v in s.split(",")) for s in args.shapes]
    except ValueError:
        p.error(f"--shapes takes M,K,N integers, got {args.shapes}")
    if any(len(s) != 3 or min(s) < 1 for s in shapes):
        p.error(f"--shapes takes M,K,N with three positive integers, got {args.shapes}")
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
        wg = w.clone().requires_grad_()
        biasg = bias.clone().requires_grad_()
        g = torch.randn(n, n, device="cuda", dtype=dtype)
        a3, b3 = a.expand(4, n, n).contiguous(), b.expand(4, n, n).contiguous()
        F = torch.nn.functional
        rows = {
            "torch.mm": lambda: torch.mm(a, b),
            "torch.ops.tilelab.tiled_mm (auto)": lambda: torch.ops.tilelab.tiled_mm(a, b),
            "tilelab_torch.tiled_mm (auto)": lambda: tilelab_torch.tiled_mm(a, b),
            "torch.bmm (4 x)": lambda: torch.bmm(a3, b3),
            "torch.ops.tilelab.tiled_bmm (4 x)": lambda: torch.ops.tilelab.tiled_bmm(a3, b3),
            "F.linear": lambda: F.linear(a, w, bias),
            "torch.ops.tilelab.tiled_addmm": lambda: torch.ops.tilelab.tiled_addmm(bias, a, w.t()),
            "torch.mm, requires_grad": lambda: torch.mm(ag, b),
            "torch.ops.tilelab.tiled_mm, requires_grad": lambda: torch.ops.tilelab.tiled_mm(ag, b),
            "Python autograd.Function(tiled_mm), requires_grad": lambda: PythonFunctionMM.apply(ag, b),
            "F.linear, requires_grad": lambda: F.linear(ag, wg, biasg),
            "torch.ops.tilelab.tiled_addmm, requires_grad": lambda: torch.ops.tilelab.tiled_addmm(biasg, ag, wg.t()),
            "torch.mm, forward + backward": lambda: torch.mm(ag, b).backward(g),
            "torch.ops.tilelab.tiled_mm, forward + backward": lambda: torch.ops.tilelab.tiled_mm(ag, b).backward(g),
            "Python autograd.Function(tiled_mm), forward + backward": lambda: PythonFunctionMM.apply(ag, b).backward(g),
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
    if shapes:
        print(f"# host microseconds per call with the GPU held busy, least of 5 loops of {args.shape_calls}")
        for dkey in args.dtypes:
            shape_rows(dkey, shapes, args.shape_calls)
    return 0


if __name__ == "__main__":
    sys.exit(main())
