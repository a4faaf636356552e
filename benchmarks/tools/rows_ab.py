#!/usr/bin/env python3
"""Every row of the table at each split count on the problems of a chooser_picks.py listing, timed beside
the dispatcher's own pick and cuBLAS: the oracle a chooser rule is checked against.

    python3 benchmarks/tools/chooser_picks.py --training --out /tmp/picks.txt
    grep ' bf16 .* 1x1576x' /tmp/picks.txt > /tmp/vit8.txt       # ViT-B/16 at batch 8's products, say
    python3 benchmarks/tools/rows_ab.py /tmp/vit8.txt --out /tmp/rows.json
    python3 benchmarks/tools/rows_ab.py --models benchmarks/results/h200/models.json   # every model product

Each problem is the product the listing names, with its op's epilogue for a forward product (addmm and linear
+ bias, linear_gelu + bias + GELU, through the suite op's own call: chooser_picks.epilogue), its operands in
the layouts of chooser_picks.product_operands, B cold as picks_ab.py makes it (copies cycled past the L2, up
to --max-copies). Every row of the listed families that runs the problem (tilelab_torch.explain accepts it
forced) is tried at each --splits count the row takes (the split hook sets it; a count the row clamps is
skipped), checked against float64 (a row out of tolerance is listed, not timed) and timed as picks_ab.py
times: kernel durations (CUPTI) over a CUDA graph of one call per copy, µs a call, a second pass included.
--models takes the problems from a model_ab.py --breakdown file instead: each GEMM of each model config, its
forward, dX and dW products in the layouts autograd gives them (an nn.Linear's x @ W.t(), dY @ W and dY^T X; a
Conv1D's x @ W, dY @ W.t() and X^T dY), the forward with the module's bias (linear / addmm) and, where it is
the erf GELU, its activation (linear_gelu; the other activations are not ops of ab.py: left out). Prints a
line a problem: cuBLAS, the dispatcher's pick and the fastest rows; --out writes every measurement as JSON,
rewritten after each problem (a run cut short keeps what it measured). A problem listed under several names is
timed once.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import NamedTuple

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chooser_picks  # noqa: E402  (puts the repository and benchmarks/ on sys.path)
import common  # noqa: E402
import picks_ab  # noqa: E402
import tilelab_torch  # noqa: E402

# The textbook families (one thread an output, no tensor cores) only where asked for: on model-sized products
# they take milliseconds a call and never win.
DEFAULT_FAMILIES = ("hopper", "tensorcore", "blocked", "gemv", "gemv_mma", "gemv_split")


class Listed(NamedTuple):
    """One problem of a chooser_picks.py listing: dtype, product (fwd/dX/dW), the op whose layout a fwd
    product has, and B x M x K x N."""
    dtype: str
    product: str
    op: str
    shape: tuple[int, int, int, int]


def parse_listing(lines) -> list[Listed]:
    """The problems of chooser_picks.py listing lines ('<suite> <name> <op> <dtype> <product> <B>x<M>x<K>x<N>'
    and anything after), each product once (the first name's); blank and '#' lines are skipped."""
    out, seen = [], set()
    for line in lines:
        words = line.split()
        if len(words) < 6 or line.lstrip().startswith("#"):
            continue
        _suite, _name, op, dtype, product, shape = words[:6]
        if dtype not in common.DTYPES or product not in ("fwd", "dX", "dW"):
            raise ValueError(f"not a chooser_picks.py problem: {line.strip()!r}")
        dims = tuple(int(v) for v in shape.split("x"))
        kind = chooser_picks.kind(op, product)
        if (dtype, product, kind, dims) in seen:
            continue
        seen.add((dtype, product, kind, dims))
        out.append(Listed(dtype, product, op, dims))
    return out


def listing_from_models(data: dict) -> list[Listed]:
    """The products of a model_ab.py --breakdown file's GEMMs, each once: forward, dX and dW of every
    problem of every model config, in the layouts they run in (an nn.Linear's weight is (N, K), a Conv1D's
    (K, N), which makes its dX an x @ W.t() product)."""
    lines = []
    for entry in data.get("breakdown", []):
        for q in entry.get("problems", []):
            M, K, N, conv = q["M"], q["K"], q["N"], q["weight_layout"].startswith("KxN")
            where = f"{entry['model']} {q['modules'][0] if q.get('modules') else '-'}"
            bias, act = q.get("bias", False), q.get("activation")
            fwd_op = (("addmm" if bias else "mm") if conv else
                      "linear_gelu" if bias and act == "gelu" else "linear" if bias else "linear_nobias")
            lines += [f"{where} {fwd_op} {entry['dtype']} fwd 1x{M}x{K}x{N}",
                      f"{where} linear_nobias {entry['dtype']} fwd 1x{M}x{N}x{K}" if conv
                      else f"{where} linear {entry['dtype']} dX 1x{M}x{N}x{K}",
                      f"{where} linear {entry['dtype']} dW 1x{K}x{M}x{N}" if conv
                      else f"{where} linear {entry['dtype']} dW 1x{N}x{M}x{K}"]
    return parse_listing(lines)


def candidates(dtype: str, families: list[str]) -> list[str]:
    """The compiled CUDA rows of those families that take the dtype (fp32's TF32 rows only for tf32)."""
    dt = common.DTYPES[dtype]
    return [k.name for k in tilelab_torch.kernels("cuda")
            if k.compiled and k.family in families and dt in k.dtypes and (not k.tf32 or dtype == "tf32")]


def measure(p: Listed, rows: list[str], splits: list[int], b_mb: int, max_copies: int) -> dict:
    """cuBLAS, the dispatcher's pick and every row x split count that runs p, each checked first."""
    ops = picks_ab.cold_operands(p.dtype, p.op, p.product, p.shape, b_mb, max_copies)
    a, b = ops.a, ops.bs[0]
    pick = tilelab_torch.explain(a, b, **ops.epilogue)
    row = {"dtype": p.dtype, "product": p.product, "op": p.op, "shape": "x".join(map(str, p.shape)),
           "cublas_us": ops.cublas_us(), "pick_kernel": pick.kernel,
           "pick_splits": pick.details.get("split_k", 1), "pick_us": ops.tilelab_us(), "rows": []}
    for name in rows:
        for s in splits:
            torch.ops.tilelab._set_split_k(s)
            try:
                try:
                    got = tilelab_torch.explain(a, b, variant=name, **ops.epilogue).details.get("split_k", 1)
                except RuntimeError:  # the row cannot run this problem here (its reason says why)
                    break
                if got != s:  # the row clamps this count (one k-tile a slice, or no split-K at all)
                    continue
                err = common.rel_err(ops.tiled(a, b, variant=name), ops.ref)
                ok = common.status(err, p.dtype) == "OK"
                row["rows"].append({"kernel": name, "splits": s, "rel_err": err,
                                    "us": ops.tilelab_us(name) if ok else None})
            finally:
                torch.ops.tilelab._set_split_k(0)
    return row


def summary(row: dict, top: int = 4) -> str:
    timed = sorted((r for r in row["rows"] if r["us"] is not None), key=lambda r: r["us"])
    best = ", ".join(f"{r['kernel']} s{r['splits']} {r['us']:.2f}" for r in timed[:top])
    bad = [f"{r['kernel']} s{r['splits']}" for r in row["rows"] if r["us"] is None]
    return (f"{row['dtype']} {row['product']} {row['op']} {row['shape']}: cuBLAS {row['cublas_us']:.2f}  pick "
            f"{row['pick_kernel']} s{row['pick_splits']} {row['pick_us']:.2f}  fastest {best or '-'} us"
            + (f"  (out of tolerance: {', '.join(bad)})" if bad else ""))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("listing", nargs="?", help="chooser_picks.py output (or lines in its form), one problem a line")
    p.add_argument("--models", help="instead of a listing: a model_ab.py --breakdown JSON, every product of its GEMMs")
    p.add_argument("--families", nargs="+", default=list(DEFAULT_FAMILIES),
                   help=f"the families whose rows are tried (default: {' '.join(DEFAULT_FAMILIES)})")
    p.add_argument("--kernels", nargs="+", default=None,
                   help="only these rows (config names) of those families (default: every row)")
    p.add_argument("--splits", nargs="+", type=int, default=[1, 2, 3, 4],
                   help="split counts to try each row at (default 1 2 3 4)")
    p.add_argument("--b-mb", type=int, default=160, help="MB of B copies cycled per problem (picks_ab.py's)")
    p.add_argument("--max-copies", type=int, default=picks_ab.MAX_COPIES, help="at most this many copies of B")
    p.add_argument("--out", help="write every measurement as JSON here")
    args = p.parse_args(argv)
    if (args.listing is None) == (args.models is None):
        p.error("give a listing or --models FILE (one of them)")
    if args.models:
        with open(args.models) as f:
            listed = listing_from_models(json.load(f))
    else:
        with open(args.listing) as f:
            listed = parse_listing(f)
    if not listed:
        print(f"{args.listing or args.models}: no problems (chooser_picks.py listing lines, or a model_ab.py "
              "--breakdown file)", file=sys.stderr)
        return 1
    if any(s < 1 for s in args.splits):
        p.error("--splits: counts of at least 1")
    unknown = sorted(set(args.kernels or []) - {k.name for k in tilelab_torch.kernels("cuda")})
    if unknown:
        p.error(f"--kernels: not rows of the table: {', '.join(unknown)}")
    if not torch.cuda.is_available():
        p.error("needs a CUDA GPU (the rows run there)")
    out = []
    meta = common.metadata("cuda", "highest (fp32 rows) / high (tf32 rows)")
    with common.kept_precision():
        for prob in listed:
            rows = [k for k in candidates(prob.dtype, args.families) if args.kernels is None or k in args.kernels]
            r = measure(prob, rows, args.splits, args.b_mb, args.max_copies)
            out.append(r)
            print(summary(r), flush=True)
            if args.out:  # after every problem: a run cut short (a time limit) keeps what it measured
                common.write_json(args.out, {"meta": meta, "rows": out})
    near = sum(r["pick_us"] <= 1.03 * min([x["us"] for x in r["rows"] if x["us"]] or [r["pick_us"]]) for r in out)
    print(f"{len(out)} problems: the pick within 3% of the fastest row on {near}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
