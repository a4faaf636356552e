#!/usr/bin/env python3
"""The dispatcher's pick (row and split count) for every problem of the benchmark suites on a
described GPU, without one: what a chooser change moves, before a GPU run measures it.

    python3 benchmarks/tools/chooser_picks.py --training --rows 1,4,16,24,32,48,64 --out /tmp/before.txt
    # edit csrc/cuda/chooser.cpp, rebuild, then the same command with --out /tmp/after.txt
    python3 benchmarks/tools/chooser_picks.py --diff /tmp/before.txt /tmp/after.txt

Problems: every entry of benchmarks/ab.py's SUITES (transformer, skinny) for each of its ops and dtypes (tf32:
fp32 under torch's "high" precision), with the operand layouts ab.py's ops pass and, for a forward product,
the op's epilogue (linear: + bias; linear_gelu: + bias + GELU; explain()'s bias= and activation=: the
dispatcher decides with them); with --training also the two products tiled_linear's backward runs for each
linear op (dX = dY @ W with W row-major, dW = dY^T @ X with dY^T a transposed view); with --rows also every
(K, N) of the suites' x @ W.t() products at those row counts (decode batches, as the ops of --rows-ops:
linear_nobias unless told; a weight two suites share is listed under the first). One line a problem:

    <suite> <name> <op> <dtype> <product> <B>x<M>x<K>x<N> <kernel> s<splits>[/<way>]

M x K x N as the suites write them, the product's own (dW: N x M x K); a split pick names the way its
slices are added (explain's details["split_reduce"]): /kernel (in the kernel, through global memory) or
/pass (a second pass). --diff prints the problems whose pick differs and a count per dtype, product and
kind of change (row, split count, or the way only).
Needs a CUDA build of tilelab (the dispatcher is part of it), not a GPU.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
from typing import Callable, Iterator, NamedTuple

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import tilelab_torch  # noqa: E402
import ab  # noqa: E402
import common  # noqa: E402

LINEAR_OPS = ("linear", "linear_nobias", "linear_gelu")


class Problem(NamedTuple):
    suite: str
    name: str
    op: str
    dtype: str
    product: str  # fwd, dX or dW
    a: torch.Tensor
    b: torch.Tensor
    bias: torch.Tensor | None = None  # the op's epilogue (epilogue()), explain()'s bias= and activation=
    activation: str | None = None

    def key(self) -> str:
        B = self.a.shape[0] if self.a.dim() == 3 else 1
        M, K = self.a.shape[-2:]
        N = self.b.shape[-1]
        return f"{self.suite} {self.name} {self.op} {self.dtype} {self.product} {B}x{M}x{K}x{N}"


def product_operands(op: str, product: str, B: int, M: int, K: int, N: int,
                     make: Callable[..., torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(a, b) of one product in the layouts the suites' ops give it, B x M x K x N the product's own;
    make(*shape) makes a row-major tensor. fwd: as ab.py's op passes it (W.t() for the linear ops); dX =
    dY @ W, both row-major; dW = dY^T @ X, dY^T a transposed view."""
    if product == "dW":
        return make(K, M).t(), make(K, N)
    if product == "dX":
        return make(M, K), make(K, N)
    sizes = {"B": B, "M": M, "N": N, "K": K}
    return ab.explain_operands(op, [make(*[sizes[c] for c in dims]) for dims in ab.OPS[op].operands[:2]])


def epilogue(op: str, product: str) -> tuple[bool, str | None]:
    """(a bias?, the activation) of a listed product: a forward product has its op's (ab.OPS: linear's bias,
    linear_gelu's bias and GELU), the gradients' products none."""
    return ab.op_epilogue(op) if product == "fwd" else (False, None)


def kind(op: str, product: str) -> tuple:
    """What besides dtype, product and sizes tells two listed problems apart: a forward product's layout (the
    linear ops share x @ W.t()) and epilogue; nothing for the gradients' products (one layout each, bare)."""
    if product != "fwd":
        return ()
    return ("linear" if op in LINEAR_OPS else op, *epilogue(op, product))


def problems(suites: list[str], dtypes: list[str], training: bool, rows: list[int],
             rows_ops: tuple[str, ...] = ("linear_nobias",)) -> Iterator[Problem]:
    decoded: set = set()  # (op, dtype, M, K, N) of the decode batches listed so far: a weight two suites share once
    for suite in suites:
        cases = ab.suite_cases(suite, ab.ALL_OPS, dtypes)
        if rows:  # decode batches over every x @ W.t() weight of the suite
            weights = sorted({(c.K, c.N) for c in cases if c.op in LINEAR_OPS and c.B == 1})
            added = [(o, d, m, k, n) for o in rows_ops for d in dtypes for k, n in weights for m in rows
                     if (o, d, m, k, n) not in decoded]
            decoded.update(added)
            cases = cases + [ab.Case(o, 1, m, n, k, d, suite, f"rows.{m}x{k}x{n}") for o, d, m, k, n in added]
        for c in cases:
            dtype = common.DTYPES[c.dtype]

            def make(*shape):
                return torch.empty(*shape, dtype=dtype)

            has_bias, act = epilogue(c.op, "fwd")
            yield Problem(suite, c.name, c.op, c.dtype, "fwd", *product_operands(c.op, "fwd", c.B, c.M, c.K, c.N, make),
                          make(c.N) if has_bias else None, act)
            if training and c.op in LINEAR_OPS:  # dX = dY (M x N) @ W (N x K), dW = dY^T (N x M) @ X (M x K)
                yield Problem(suite, c.name, c.op, c.dtype, "dX", *product_operands(c.op, "dX", 1, c.M, c.N, c.K, make))
                yield Problem(suite, c.name, c.op, c.dtype, "dW", *product_operands(c.op, "dW", 1, c.N, c.M, c.K, make))


WAYS = ("kernel", "pass")  # how a split pick's slices are added: _set_split_reduce's values


def split_way(details: dict) -> str:
    """How a split pick's slices are added (explain's details["split_reduce"]): one of WAYS."""
    way = details.get("split_reduce")
    if way not in WAYS:
        raise ValueError(f"a split pick whose details do not say how its slices are added: {details!r}")
    return way


def pick(p: Problem, gpu: dict) -> str:
    common.set_precision(p.dtype)
    e = tilelab_torch.explain_described(p.a, p.b, bias=p.bias, activation=p.activation, **gpu)
    splits = e.details.get("split_k", 1)
    return f"{e.kernel} s{splits}" + (f"/{split_way(e.details)}" if splits > 1 else "")


def read(path: str) -> dict[str, str]:
    picks = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 8:
                picks[" ".join(parts[:6])] = " ".join(parts[6:])
    return picks


def diff(old_path: str, new_path: str, out=None) -> int:
    """Prints the changed picks and their counts (to out, default stdout); returns how many changed."""
    out = out or sys.stdout
    old, new = read(old_path), read(new_path)
    counts: collections.Counter = collections.Counter()
    changed = 0
    for key in old.keys() & new.keys():
        if old[key] == new[key]:
            continue
        changed += 1
        (ok, os_), (nk, ns) = old[key].split(), new[key].split()
        kind = "row" if ok != nk else "split count" if os_.split("/")[0] != ns.split("/")[0] else "way"
        _, _, _, dtype, product, _ = key.split()
        counts[(dtype, product, kind)] += 1
        print(f"{key}  {old[key]} -> {new[key]}", file=out)
    for key in sorted(old.keys() ^ new.keys()):
        print(f"{key}  only in {'the first' if key in old else 'the second'} file", file=out)
    print(f"{changed} of {len(old.keys() & new.keys())} problems changed their pick", file=out)
    for (dtype, product, kind), n in sorted(counts.items()):
        print(f"  {dtype} {product}: {n} {kind}", file=out)
    return changed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--suites", nargs="+", default=list(ab.SUITES), choices=list(ab.SUITES))
    p.add_argument("--dtypes", default=ab.SUITE_DTYPES, help=f"comma-separated (default {ab.SUITE_DTYPES})")
    p.add_argument("--training", action="store_true", help="also each linear op's dX and dW products")
    p.add_argument("--rows", default="", help="comma-separated row counts for every x @ W.t() weight (decode)")
    p.add_argument("--rows-ops", default="linear_nobias",
                   help="comma-separated ops the --rows products are listed as (default linear_nobias; linear adds "
                        "a bias, linear_gelu a bias and GELU)")
    p.add_argument("--sm", type=int, default=90, help="compute capability, major*10 + minor (default 90)")
    p.add_argument("--sms", type=int, default=132, help="SMs (default 132: an H100 SXM or H200)")
    p.add_argument("--mem-gbps", type=float, default=None,
                   help="peak DRAM bandwidth, GB/s (default: explain_described's, an H200's)")
    p.add_argument("--out", help="write the picks here (default: stdout)")
    p.add_argument("--diff", nargs=2, metavar=("OLD", "NEW"), help="compare two files this tool wrote")
    args = p.parse_args(argv)
    if args.diff:
        diff(*args.diff)
        return 0
    if not tilelab_torch.built_with_cuda():
        p.error("needs a CUDA build of tilelab (the dispatcher is part of it)")
    dtypes = [d for d in args.dtypes.split(",") if d]
    unknown = [d for d in dtypes if d not in common.DTYPES or d == "fp64"]
    if unknown:
        p.error(f"unknown dtypes {unknown}; choose from fp32, tf32, bf16, fp16")
    try:
        rows = [int(r) for r in args.rows.split(",") if r]
    except ValueError:
        p.error(f"--rows takes comma-separated integers, got {args.rows!r}")
    if any(r < 1 for r in rows):
        p.error("--rows must be positive")
    rows_ops = tuple(o for o in args.rows_ops.split(",") if o)
    if not rows_ops or any(o not in LINEAR_OPS for o in rows_ops):
        p.error(f"--rows-ops takes comma-separated ops of {', '.join(LINEAR_OPS)}, got {args.rows_ops!r}")
    gpu = {"sm": args.sm, "num_sms": args.sms, "mem_gbps": args.mem_gbps}
    out = open(args.out, "w") if args.out else sys.stdout
    try:
        with common.kept_precision():
            for prob in problems(args.suites, dtypes, args.training, rows, rows_ops):
                print(f"{prob.key()} {pick(prob, gpu)}", file=out)
    finally:
        if args.out:
            out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
