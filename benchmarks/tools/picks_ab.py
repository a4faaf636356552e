#!/usr/bin/env python3
"""The GPU side of chooser_picks.py: for every problem a chooser change moved, the old pick and the new
pick, each forced (variant and split count), timed beside cuBLAS in one process.

    python3 benchmarks/tools/chooser_picks.py --diff /tmp/before.txt /tmp/after.txt > /tmp/moved.txt
    python3 benchmarks/tools/picks_ab.py /tmp/moved.txt --out /tmp/moved.json

Each problem is the product chooser_picks explained, with its op's epilogue for a forward product
(chooser_picks.epilogue: addmm and linear + bias, linear_gelu + bias + GELU, through the suite op's own call;
the gradients' products bare), its operands in the layouts of chooser_picks.product_operands, B cold: copies
of B, cycled, hold more than the L2 (--b-mb), up to --max-copies of them (a weight gradient's B over a decode
batch is a few KB: past the L2 it would take tens of thousands of calls a graph, minutes to capture; at the
cap such a B is read from L2). Every output is checked against float64 before it is timed. Times are the
kernels' durations (CUPTI, through torch.profiler) over a CUDA graph of one call per copy, µs a call, the
least of 3 replays' means; a split pick's second pass counts. A problem listed under several names (suites,
ops with the same layout and epilogue) is timed once. Prints one line a problem and the sums; --out writes
them as JSON.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
from typing import Callable, NamedTuple

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chooser_picks  # noqa: E402  (puts the repository and benchmarks/ on sys.path)
import ab  # noqa: E402
import common  # noqa: E402
import tilelab_torch  # noqa: E402


class Moved(NamedTuple):
    """One problem of a --diff listing: the product (dtype, fwd/dX/dW, the op whose layout a fwd product
    has, B x M x K x N) and its two picks as (kernel, split count, way: how the slices are added, None
    where the listing does not say)."""
    dtype: str
    product: str
    op: str
    shape: tuple[int, int, int, int]
    old: tuple[str, int, str | None]
    new: tuple[str, int, str | None]


WAYS = chooser_picks.WAYS


def _pick(text: str) -> tuple[str, int, str | None]:
    kernel, splits = text.split()
    count, _, way = splits.partition("/")
    if not count.startswith("s") or (way and way not in WAYS):
        raise ValueError(f"not a pick: {text!r}")
    return kernel, int(count[1:]), way or None


def parse_diff(lines) -> list[Moved]:
    """The moved problems of chooser_picks.py --diff output, each product once (the first name's)."""
    moved, seen = [], set()
    for line in lines:
        if " -> " not in line:
            continue
        left, right = line.split("  ", 1)
        _suite, _name, op, dtype, product, shape = left.split()
        old, new = (_pick(t) for t in right.strip().split(" -> "))
        dims = tuple(int(v) for v in shape.split("x"))
        kind = chooser_picks.kind(op, product)
        if (dtype, product, kind, dims) in seen:
            continue
        seen.add((dtype, product, kind, dims))
        moved.append(Moved(dtype, product, op, dims, old, new))
    return moved


def kernel_us(fn: Callable[[], object], calls: int, replays: int = 3) -> float:
    """µs of kernel time per call: CUPTI durations over a CUDA graph of fn (which makes `calls` calls)."""
    replay = common.capture_graph(fn, warmup=2)
    replay()
    torch.cuda.synchronize()
    best = math.inf
    for _ in range(2):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            for _ in range(replays):
                replay()
            torch.cuda.synchronize()
        total = sum(e.device_time_total for e in prof.key_averages() if e.device_time_total > 0)
        best = min(best, total / replays / calls)
    return best


MAX_COPIES = 256


def copies_of(b: torch.Tensor, b_mb: int, max_copies: int = MAX_COPIES) -> int:
    """How many copies of B to cycle: enough to hold b_mb MB, at least 2, at most max_copies."""
    return max(2, min(max_copies, -(-b_mb * 2**20 // (b.numel() * b.element_size()))))


class Operands(NamedTuple):
    """One problem's operands on the GPU: A, B's copies (bs[0] is B), the float64 reference of A @ B (with the
    epilogue), the tilelab op and torch op that compute it (the bmm ones for 3-D operands; where there is an
    epilogue, the suite op's own calls), and explain()'s bias= and activation= for it."""
    a: torch.Tensor
    bs: list
    ref: torch.Tensor
    tiled: Callable
    torch_op: Callable
    epilogue: dict = {"bias": None, "activation": None}

    def tilelab_us(self, variant=None) -> float:
        """µs a call of the tilelab op (forced to `variant`; None: the dispatcher's pick), B's copies cycled."""
        def calls():
            for b in self.bs:
                self.tiled(self.a, b, variant=variant)
        return kernel_us(calls, len(self.bs))

    def cublas_us(self) -> float:
        """µs a call of torch's op (cuBLAS), B's copies cycled."""
        def calls():
            for b in self.bs:
                self.torch_op(self.a, b)
        return kernel_us(calls, len(self.bs))


def cold_operands(dtype: str, op: str, product: str, shape: tuple[int, int, int, int], b_mb: int,
                  max_copies: int = MAX_COPIES) -> Operands:
    """The operands of a listed product (chooser_picks.product_operands' layouts, random normal) in the dtype's
    precision setting, with copies_of(B) copies of B to cycle past the L2."""
    common.set_precision(dtype)
    dt = common.DTYPES[dtype]
    B, M, K, N = shape

    def make(*shape):
        return torch.randn(*shape, device="cuda", dtype=dt)

    a, b = chooser_picks.product_operands(op, product, B, M, K, N, make)
    # B's copies in B's own layout (W.t() stays a transposed view), without remaking A for each
    bs = [b] + [torch.empty_strided(b.shape, b.stride(), dtype=dt, device="cuda").normal_()
                for _ in range(copies_of(b, b_mb, max_copies) - 1)]
    has_bias, act = chooser_picks.epilogue(op, product)
    if has_bias or act:  # the suite op's own calls (ab.OPS), on W = b.t() for the F.linear ops
        o = ab.OPS[op]
        nk = o.operands[1] == "NK"
        extra = [make(N)] if has_bias else []

        def tiled(a, b, variant=None):
            return o.tilelab(a, b.t() if nk else b, *extra, variant=variant)

        def torch_op(a, b):
            return o.torch(a, b.t() if nk else b, *extra)

        ref = o.torch(a.double(), (b.t() if nk else b).double(), *[e.double() for e in extra])
        return Operands(a, bs, ref, tiled, torch_op, {"bias": extra[0] if extra else None, "activation": act})
    batched = a.dim() == 3
    return Operands(a, bs, a.double() @ b.double(), tilelab_torch.tiled_bmm if batched else tilelab_torch.tiled_mm,
                    torch.bmm if batched else torch.mm)


def measure(m: Moved, b_mb: int, max_copies: int = MAX_COPIES) -> dict:
    """The old pick, the new pick and cuBLAS on m, each verified against float64 first."""
    ops = cold_operands(m.dtype, m.op, m.product, m.shape, b_mb, max_copies)
    row = {"dtype": m.dtype, "product": m.product, "op": m.op, "shape": "x".join(map(str, m.shape))}
    for side, (kernel, splits, way) in (("old", m.old), ("new", m.new)):
        torch.ops.tilelab._set_split_k(splits)
        torch.ops.tilelab._set_split_reduce(way)  # None: by cost
        try:
            err = common.rel_err(ops.tiled(ops.a, ops.bs[0], variant=kernel), ops.ref)
            if common.status(err, m.dtype) != "OK":
                raise RuntimeError(f"{kernel} s{splits} on {row['shape']} ({m.dtype} {m.product}): error {err:.3g}")
            row.update({f"{side}_kernel": kernel, f"{side}_splits": splits, f"{side}_way": way,
                        f"{side}_us": ops.tilelab_us(kernel), f"{side}_rel_err": err})
        finally:
            torch.ops.tilelab._set_split_k(0)
            torch.ops.tilelab._set_split_reduce(None)
    row["cublas_us"] = ops.cublas_us()
    row["new_over_old"] = row["new_us"] / row["old_us"]
    return row


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("diff", help="chooser_picks.py --diff output")
    p.add_argument("--b-mb", type=int, default=160, help="MB of B copies cycled per problem (default 160: past "
                                                          "an H100's or H200's 50 MB L2)")
    p.add_argument("--max-copies", type=int, default=MAX_COPIES,
                   help=f"at most this many copies of B (default {MAX_COPIES}; each is a call of the graph)")
    p.add_argument("--limit", type=int, default=0, help="time only the first N problems (0: all)")
    p.add_argument("--out", help="write the rows and sums as JSON here")
    args = p.parse_args(argv)
    with open(args.diff) as f:
        moved = parse_diff(f)
    if args.limit > 0:
        moved = moved[:args.limit]
    if not moved:
        print(f"{args.diff}: no moved problems (lines 'KEY  OLD sK -> NEW sK')", file=sys.stderr)
        return 1
    if not torch.cuda.is_available():
        p.error("needs a CUDA GPU (the forced rows run there)")
    rows = []
    with common.kept_precision():
        for m in moved:
            r = measure(m, args.b_mb, args.max_copies)
            rows.append(r)
            old_way, new_way = (f"/{r[k]}" if r[k] else "" for k in ("old_way", "new_way"))
            print(f"{r['dtype']} {r['product']} {r['op']} {r['shape']}: old {r['old_kernel']} s{r['old_splits']}"
                  f"{old_way} {r['old_us']:.2f}  new {r['new_kernel']} s{r['new_splits']}{new_way} {r['new_us']:.2f}  cuBLAS "
                  f"{r['cublas_us']:.2f} us  ({r['new_over_old']:.3f})", flush=True)
    sums = {"problems": len(rows), "old_us": sum(r["old_us"] for r in rows),
            "new_us": sum(r["new_us"] for r in rows), "faster": sum(r["new_over_old"] < 0.98 for r in rows),
            "slower": sum(r["new_over_old"] > 1.02 for r in rows)}
    print(f"{sums['problems']} problems: old {sums['old_us']:.1f} us, new {sums['new_us']:.1f} us in all; "
          f"{sums['faster']} faster and {sums['slower']} slower by more than 2%")
    if args.out:
        meta = common.metadata("cuda", "highest (fp32 rows) / high (tf32 rows)")
        common.write_json(args.out, {"meta": meta, "rows": rows, "sums": sums})
    return 0


if __name__ == "__main__":
    sys.exit(main())
