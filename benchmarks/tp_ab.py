#!/usr/bin/env python3
"""Tensor-parallel A/B: tilelab (TiledLinear) vs cuBLAS (nn.Linear) under DTensor.

Two models, each sharded Megatron-style with torch's parallelize_module (torch
places the shards and runs every collective; tilelab only computes the local
products, through the sharding rules of tilelab_torch.distributed):

  mlp    fc1 (bias) -> GELU (tanh) -> fc2 (bias): fc1 ColwiseParallel, fc2 RowwiseParallel
  block  a Llama-style transformer block, self-made: RMSNorm -> attention (wq, wk, wv
         ColwiseParallel: each rank holds heads/world heads; causal SDPA; wo
         RowwiseParallel) -> RMSNorm -> SwiGLU MLP (w1, w3 ColwiseParallel, w2
         RowwiseParallel), residuals; no biases, no rotary embedding

For each model x implementation, the same weights ("cublas": nn.Linear; "tilelab":
every nn.Linear swapped for TiledLinear.from_linear before parallelize_module;
"tilelab_fused": also the MLPs' activation (GELU-tanh after fc1, SiLU after w1) in
that layer's epilogue, a column-parallel layer, so its output is sharded):

  correctness  the same model unsharded on this rank's device (same weights, same
               input): max |difference| of the output and of every parameter's
               gradient (gathered), absolute and relative to the reference's largest
               magnitude; tolerance 2e-2 relative in bf16 (the partial sums of a
               row-parallel layer are rounded to bf16 before the all-reduce, in a
               different order than one device sums), 1e-4 in fp32 (IEEE, no TF32);
               tilelab's output also against the unsharded cuBLAS model
  time         forward (no grad) and a training step (forward, backward, AdamW):
               median over --iters iterations after --warmup, CUDA events (perf_counter
               on the CPU), the slowest rank's median
  comm         the communication share of a step: the time in NCCL kernels (GPU) or gloo
               work (CPU) per step, from torch.profiler over --profile-steps steps, over
               the step's median time. Collective time includes waiting for the slower
               rank. The collectives per step (CommDebugMode) are listed too.

Writes <out>/tp_ab.json and prints a table (rank 0). NVLink multicast (NVLS) is
kept off: NCCL_NVLS_ENABLE=0 is set before NCCL starts.

    torchrun --nproc-per-node 2 benchmarks/tp_ab.py --out benchmarks/results/h200x2
    torchrun --nproc-per-node 2 benchmarks/tp_ab.py --device cpu --backend gloo --tiny --out /tmp/tp
"""
from __future__ import annotations

import argparse
import copy
import os
import sys
import warnings

os.environ["NCCL_NVLS_ENABLE"] = "0"  # before NCCL initialises; see the docstring

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import tilelab_torch  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
TOL = {"bf16": 2e-2, "fp32": 1e-4}  # relative to the reference's largest magnitude
IMPLS = ("cublas", "tilelab", "tilelab_fused")


# ------------------------------------------------------------------- models
class MLP(nn.Module):
    FUSE = ("fc1", "act", "gelu_tanh")  # (layer, activation module, tiled_linear's name for it)

    def __init__(self, d: int, ffn: int):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(d, ffn), nn.GELU(approximate="tanh"), nn.Linear(ffn, d)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class RMSNorm(nn.Module):
    def __init__(self, d: int, eps: float = 1e-5):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(d)), eps

    def forward(self, x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.square().mean(-1, keepdim=True) + self.eps)).to(x.dtype) * self.weight


class Attention(nn.Module):
    """Multi-head causal self-attention; the head count is read from the projections'
    local width, so a column-parallel rank runs its heads / world heads."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.head_dim = d // heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(d, d, bias=False) for _ in range(4))

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = (w(x).view(B, T, -1, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(B, T, -1))


class SwiGLU(nn.Module):
    FUSE = ("w1", "act", "silu")

    def __init__(self, d: int, ffn: int):
        super().__init__()
        self.w1, self.w3, self.w2 = (nn.Linear(d, ffn, bias=False), nn.Linear(d, ffn, bias=False),
                                     nn.Linear(ffn, d, bias=False))
        self.act = nn.SiLU()

    def forward(self, x):
        return self.w2(self.act(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, d: int, heads: int, ffn: int):
        super().__init__()
        self.attn_norm, self.attn = RMSNorm(d), Attention(d, heads)
        self.mlp_norm, self.mlp = RMSNorm(d), SwiGLU(d, ffn)

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.mlp(self.mlp_norm(x))


def build(kind: str, args) -> tuple[nn.Module, dict]:
    """The model (fp32 on the CPU, the same seed on every rank) and its TP plan."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel

    torch.manual_seed(0)
    if kind == "mlp":
        return MLP(args.hidden, args.ffn), {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()}
    plan = {f"attn.{w}": ColwiseParallel() for w in ("wq", "wk", "wv")}
    plan.update({"attn.wo": RowwiseParallel(), "mlp.w1": ColwiseParallel(), "mlp.w3": ColwiseParallel(),
                 "mlp.w2": RowwiseParallel()})
    return Block(args.hidden, args.heads, args.ffn), plan


def to_tilelab(model: nn.Module, fuse: bool) -> nn.Module:
    """Every nn.Linear of model replaced by TiledLinear.from_linear (weights shared);
    with fuse, the MLPs' activation runs in the epilogue of the layer before it."""
    for name, child in list(model.named_children()):
        if type(child) is nn.Linear:
            setattr(model, name, tilelab_torch.TiledLinear.from_linear(child))
        else:
            to_tilelab(child, fuse)
    if fuse and hasattr(model, "FUSE"):
        layer, act, activation = model.FUSE
        setattr(model, layer, tilelab_torch.TiledLinear.from_linear(getattr(model, layer), activation=activation))
        setattr(model, act, nn.Identity())
    return model


# ------------------------------------------------------------------ measure
def full(t):
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def loss_of(out, g):
    return (out.float() * g).sum() / g.numel()


def grads_and_output(model, x, g):
    """Output and {name: full gradient} of one forward/backward."""
    model.zero_grad(set_to_none=True)
    out = model(x)
    loss_of(out, g).backward()
    return out.detach(), {n: full(p.grad).float() for n, p in model.named_parameters()}


def max_diff(a, b) -> tuple[float, float]:
    """(max |a - b|, that over max |b|)."""
    d = (a.float() - b.float()).abs().max().item()
    return d, d / (b.float().abs().max().item() or 1.0)


def timed(fn, args, sync) -> float:
    """The median ms of fn() over args.iters after args.warmup, the slowest rank's."""
    for _ in range(args.warmup):
        fn()
    sync()
    return reduce_max(common.median_call_ms(fn, args.iters, args.device, sync_each=True), args)


def reduce_max(v: float, args) -> float:
    t = torch.tensor([v], dtype=torch.float64, device=args.dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def comm_time(fn, args, sync) -> float:
    """Collective ms per step (the slowest rank's), from torch.profiler over
    args.profile_steps steps: NCCL kernels on the GPU, gloo work on the CPU."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if args.device == "cuda" else [])
    fn()
    sync()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=acts) as prof:
            for _ in range(args.profile_steps):
                fn()
            sync()
    if args.device == "cuda":
        comm_us = sum(e.time_range.elapsed_us() for e in prof.events()
                      if e.device_type == torch.autograd.DeviceType.CUDA and "nccl" in e.name.lower())
    else:
        comm_us = sum(e.time_range.elapsed_us() for e in prof.events() if e.name.startswith("gloo:"))
    return reduce_max(comm_us / 1e3 / args.profile_steps, args)


def collectives(fn) -> dict:
    from torch.distributed.tensor.debug import CommDebugMode

    with warnings.catch_warnings(), CommDebugMode() as comm:
        warnings.simplefilter("ignore")  # its module tracker's backward-hook notes
        fn()
    return {str(k).rsplit(".", 1)[-1].strip("')>"): v for k, v in comm.get_comm_counts().items()}


def run_model(kind: str, args, mesh, sync) -> list[dict]:
    from torch.distributed.tensor.parallel import parallelize_module

    dtype = DTYPES[args.dtype]
    base, plan = build(kind, args)
    base = base.to(device=args.dev, dtype=dtype)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(args.batch, args.seq, args.hidden, generator=gen).to(args.dev, dtype)
    g = torch.randn(args.batch, args.seq, args.hidden, generator=gen).to(args.dev)
    with torch.no_grad():
        cublas_out = base(x)  # the unsharded nn.Linear model on this device
    rows = []
    for impl in args.impls:
        ref = copy.deepcopy(base)
        if impl != "cublas":
            to_tilelab(ref, fuse=impl == "tilelab_fused")
        ref_out, ref_grads = grads_and_output(ref, x, g)
        tp = parallelize_module(copy.deepcopy(ref), mesh, plan)
        out, grads = grads_and_output(tp, x, g)
        out_abs, out_rel = max_diff(out, ref_out)
        grad_abs = max(max_diff(grads[n], r)[0] for n, r in ref_grads.items())
        grad_rel = max(max_diff(grads[n], r)[1] for n, r in ref_grads.items())
        del ref, ref_grads
        # foreach=False: the block's norm weights stay plain tensors beside DTensor
        # parameters, and the foreach kernels refuse mixed lists.
        opt = torch.optim.AdamW(tp.parameters(), lr=1e-4, foreach=False)

        def forward():
            with torch.no_grad():
                out = tp(x)
            return out.wait() if hasattr(out, "wait") else out  # an async all-reduce: wait for it

        def train_step():
            opt.zero_grad(set_to_none=True)
            loss_of(tp(x), g).backward()
            opt.step()

        tokens = args.batch * args.seq
        for mode, fn in (("fwd", forward), ("train", train_step)):
            ms = timed(fn, args, sync)
            c_ms = comm_time(fn, args, sync)
            row = {
                "model": kind, "impl": impl, "mode": mode, "ms": ms, "tokens_per_s": tokens / ms * 1e3,
                "comm_ms": c_ms, "comm_share": c_ms / ms, "collectives": collectives(fn),
                "out_max_abs_diff": out_abs, "out_rel_diff": out_rel,
                "grad_max_abs_diff": grad_abs, "grad_rel_diff": grad_rel, "tol_rel": TOL[args.dtype],
                "status": "OK" if max(out_rel, grad_rel) <= TOL[args.dtype] else "CHECK",
            }
            if impl != "cublas":
                row["out_rel_diff_vs_cublas_1dev"] = max_diff(out, cublas_out)[1]
                base_ms = next((r["ms"] for r in rows if r["impl"] == "cublas" and r["mode"] == mode), None)
                row["ratio"] = base_ms / ms if base_ms else None  # cuBLAS ms / this ms: > 1, tilelab faster
            rows.append(row)
            if args.rank == 0:
                print(f"{kind} {impl} {mode}: {ms:.3f} ms, comm {100 * c_ms / ms:.1f}%, out rel {out_rel:.2g}, "
                      f"grad rel {grad_rel:.2g}", flush=True)
        del tp, opt
        if args.device == "cuda":
            torch.cuda.empty_cache()
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--backend", default=None, help="nccl (default on cuda) or gloo (default on cpu)")
    p.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    p.add_argument("--models", nargs="+", default=["mlp", "block"], choices=["mlp", "block"])
    p.add_argument("--impls", nargs="+", default=list(IMPLS), choices=list(IMPLS),
                   help="which to run (in this order; the ratios are against cublas)")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=2048)
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--ffn", type=int, default=14336)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--iters", type=int, default=50)
    p.add_argument("--profile-steps", type=int, default=3)
    p.add_argument("--tiny", action="store_true", help="CPU-sized models (smoke test): batch 2, seq 16, hidden 64")
    p.add_argument("--out", help="directory for tp_ab.json")
    args = p.parse_args(argv)
    if args.tiny:
        args.batch, args.seq, args.hidden, args.heads, args.ffn = 2, 16, 64, 4, 128
        args.warmup, args.iters, args.profile_steps = 2, 5, 2
    args.impls = [i for i in IMPLS if i in args.impls]
    args.backend = args.backend or ("nccl" if args.device == "cuda" else "gloo")
    if "RANK" not in os.environ:
        p.error("start it with torchrun, e.g. torchrun --nproc-per-node 2 benchmarks/tp_ab.py")
    args.rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    for name, v in (("--hidden", args.hidden), ("--heads", args.heads), ("--ffn", args.ffn)):
        if v % world:
            p.error(f"{name} {v} must be divisible by the world size {world}")
    if args.hidden % args.heads:
        p.error(f"--hidden {args.hidden} must be divisible by --heads {args.heads}")

    if args.device == "cuda":
        local = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local)
        args.dev = torch.device("cuda", local)
        sync = torch.cuda.synchronize
    else:
        args.dev = torch.device("cpu")
        sync = lambda: None  # noqa: E731
    torch.set_float32_matmul_precision("highest")  # fp32 is IEEE fp32 on both sides
    dist.init_process_group(args.backend, device_id=args.dev if args.device == "cuda" else None)
    try:
        import tilelab_torch.distributed  # noqa: F401  (registers the sharding rules)
        from torch.distributed.device_mesh import init_device_mesh

        mesh = init_device_mesh(args.device, (world,))
        rows = []
        for kind in args.models:
            rows += run_model(kind, args, mesh, sync)
        if args.rank == 0:
            report(rows, args, world)
    finally:
        dist.destroy_process_group()
    return 0


def report(rows, args, world) -> None:
    meta = common.metadata(str(args.dev), "fp32 highest (no TF32)" if args.dtype == "fp32" else args.dtype)
    meta.update({
        "world_size": world, "backend": args.backend, "dtype": args.dtype, "batch": args.batch, "seq": args.seq,
        "hidden": args.hidden, "heads": args.heads, "ffn": args.ffn, "warmup": args.warmup, "iters": args.iters,
        "NCCL_NVLS_ENABLE": os.environ.get("NCCL_NVLS_ENABLE"),
        "comm_share": "torch.profiler: NCCL kernel (GPU) or gloo work (CPU) ms per step over the median step ms",
        "command": "torchrun --nproc-per-node {} {}".format(world, " ".join(
            [os.path.relpath(sys.argv[0])] + sys.argv[1:])),
    })
    print(f"\n{world} ranks, {args.backend}, {args.dtype}, batch {args.batch} x seq {args.seq}, hidden "
          f"{args.hidden}, heads {args.heads}, ffn {args.ffn}, on {meta['device']}")
    common.print_table(rows, [
        ("model", "model", ""), ("impl", "impl", ""), ("mode", "mode", ""), ("ms", "ms", ".3f"),
        ("tok/s", "tokens_per_s", ".0f"), ("ratio", "ratio", ".3f"), ("comm %", "comm_share", ".1%"),
        ("out rel", "out_rel_diff", ".2g"), ("grad rel", "grad_rel_diff", ".2g"), ("tol", "tol_rel", "g"),
        ("", "status", ""),
    ])
    if args.out:
        path = os.path.join(args.out, "tp_ab.json")
        common.write_json(path, {"meta": meta, "rows": rows})
        print(f"\nwrote {path}")


if __name__ == "__main__":
    sys.exit(main())
