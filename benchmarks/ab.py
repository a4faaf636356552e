#!/usr/bin/env python3
"""A/B tilelab against cuBLAS (torch) in one run, on whatever device is present.

For every op x shape x dtype: time torch's call and the chosen tilelab kernels on the
same random-normal inputs (median of device-event timings after warm-up; --rounds N:
the median of N such medians), and
report ms, TFLOP/s, ratio to cuBLAS (cuBLAS time / tilelab time: > 1 means
tilelab is faster), % of the device's peak, and the relative error of both
against a float64 reference (torch's call on the inputs cast to float64). With
--kernels all it also names the fastest tilelab kernel per shape ("oracle")
beside the dispatcher's choice.

--op picks the operation (W is (N, K), row-major, as nn.Linear stores it):
  mm             tiled_mm(a, b)                              vs torch.matmul(a, b)
  addmm          tiled_addmm(bias, a, b), bias (N,)          vs torch.addmm(bias, a, b)
  linear         tiled_linear(x, W, b)                       vs F.linear(x, W, b)
  linear_nobias  tiled_linear(x, W)                          vs F.linear(x, W)
  linear_gelu    tiled_linear(x, W, b, activation="gelu")    vs F.gelu(F.linear(x, W, b))
  bmm            tiled_bmm(a, b), shapes BxMxNxK             vs torch.bmm(a, b)
  all            (with --suite only) every op but addmm
--shapes are written MxNxK (BxMxNxK for bmm). Rows carry an `op` key, and `B` for bmm.

--suite NAME replaces --shapes by a named set of model shapes (see SUITES), written
the way a model reads them, M x K x N (x (M, K) times a (K, N) weight; B x M x K x N
for bmm); rows carry `suite`, `name` (e.g. "gpt2.c_attn") and `shape`
("MxKxN=4096x768x2304"), beside the usual M, N, K keys. Each suite entry lists the ops
it runs; --op (default with a suite: all) keeps those of one op. A suite's dtypes
default to fp32, tf32, bf16, fp16. At the end, the geometric mean of the ratio per
(op, dtype) over the dispatcher's verified rows (JSON: "summary").
  transformer  GPT-2 small, Llama-3-8B (4096 tokens) and BERT-large/ViT-L MLP (8192
               tokens) projections for mm/addmm/linear/linear_gelu; attention score and
               context products for bmm
  skinny       K-heavy, gemv-like and odd shapes (mm/addmm/linear/linear_gelu), the decode
               set M in 1..128 against Llama-3-8B weights and 1 and 16 rows into GPT-2's and
               a Llama-2-7B-sized vocabulary (linear_nobias), and 1024 fp32 dot products of
               length 128 (bmm)
  unaligned    GPT-2's lm_head (N = 50257) at 4096 and 128 tokens, and 4095^3, 4097^3, 6143^3
               (mm): dimensions not a multiple of 8, for --peer pad
Rows with M <= 16 also carry the achieved weight bandwidth: weight_gbps = bytes of
the second operand (W or b) / tilelab's time, cublas_weight_gbps the same for torch.

Peer columns (off by default; per op x shape x dtype, the same inputs):
  --peer triton  torch.compile(torch's call, mode="max-autotune-no-cudagraphs", dynamic=False,
                 fullgraph=True) with Inductor's GEMM backends set to Triton templates
                 only (max_autotune_gemm_backends="TRITON"; Inductor may fuse the bias and
                 activation into the template's epilogue). "max-autotune" without its CUDA graphs: launched
                 like the other columns (graph replay is what graph_ms measures for
                 tilelab and cuBLAS). Compiled and autotuned on a first call, which is
                 verified and not timed; triton_ms, triton_ratio = triton_ms / tilelab ms
                 (> 1: tilelab faster), triton_rel_err, triton_status ("OK", "CHECK" for an
                 out-of-tolerance result, or "FAIL: <why>" when compilation failed; the run
                 goes on with triton_ms = None). A CPU has no Triton templates: its GEMM rows
                 say FAIL.
  --peer pad     for bf16/fp16 shapes with M, N or K (other than 1) not a multiple of 8,
                 "pad-then-cuBLAS" as Inductor's pad_mm does at run time. Timed: F.pad of every
                 operand with such a dimension to a new zero-filled tensor whose M, N, K are
                 rounded up to multiples of 8 (a dimension of 1 and the batch are kept; aligned
                 operands are used as they are), torch's call on the padded operands, and the
                 slice [..., :M, :N] of its result (a view, no copy). pad_ms, pad_ratio =
                 pad_ms / tilelab ms, pad_rel_err, pad_status. Other shapes and dtypes have no
                 pad columns.

For small shapes (B*M*N*K <= --graph-max-mnk) it also times CUDA-graph replay of
both sides (columns 'graph ms' / 'cuBLAS graph ms', JSON keys graph_ms /
cublas_graph_ms), so launch overhead is visible and separate.

On a machine without a GPU it compares the CPU kernel against torch's CPU ops.

Examples:
    python benchmarks/ab.py                                  # dispatcher's choice, default sweep
    python benchmarks/ab.py --kernels all --dtypes fp32 --out out/ab
    python benchmarks/ab.py --shapes 4096x4096x4096,1000x1000x1000 --kernels tiled_32x32x32 padded_32x32x32
    python benchmarks/ab.py --op linear --shapes 12608x2304x768 --dtypes bf16   # ViT-B qkv with bias
    python benchmarks/ab.py --suite transformer --out out/ab      # writes suite_transformer.json/.csv
    python benchmarks/ab.py --suite skinny --dtypes bf16 --peer triton pad
    python benchmarks/ab.py --suite unaligned --dtypes bf16,fp16,tf32 --peer pad --rounds 3
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Callable, NamedTuple, Optional

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


class Op(NamedTuple):
    """One benchmarked operation: its operands' dimensions (by letter, in order; a third, "N", is
    the bias), torch's call and tilelab's call on those operands (tilelab's takes variant=/tile=),
    and the activation tilelab's call fuses (None: none)."""
    operands: tuple[str, ...]
    torch: Callable
    tilelab: Callable
    activation: Optional[str] = None


OPS = {
    "mm": Op(("MK", "KN"), lambda a, b: torch.matmul(a, b),
             lambda a, b, **kw: tilelab_torch.tiled_mm(a, b, **kw)),
    "addmm": Op(("MK", "KN", "N"), lambda a, b, bias: torch.addmm(bias, a, b),
                lambda a, b, bias, **kw: tilelab_torch.tiled_addmm(bias, a, b, **kw)),
    "linear": Op(("MK", "NK", "N"), lambda x, w, bias: F.linear(x, w, bias),
                 lambda x, w, bias, **kw: tilelab_torch.tiled_linear(x, w, bias, **kw)),
    "linear_nobias": Op(("MK", "NK"), lambda x, w: F.linear(x, w),
                        lambda x, w, **kw: tilelab_torch.tiled_linear(x, w, **kw)),
    "linear_gelu": Op(("MK", "NK", "N"), lambda x, w, bias: F.gelu(F.linear(x, w, bias)),
                      lambda x, w, bias, **kw: tilelab_torch.tiled_linear(x, w, bias, activation="gelu", **kw),
                      "gelu"),
    "bmm": Op(("BMK", "BKN"), lambda a, b: torch.bmm(a, b),
              lambda a, b, **kw: tilelab_torch.tiled_bmm(a, b, **kw)),
}
ALL_OPS = ("mm", "linear", "linear_nobias", "linear_gelu", "bmm")  # what --op all selects


class Entry(NamedTuple):
    """A suite shape, written M x K x N as a model reads it; B > 1 only for bmm."""
    name: str
    B: int
    M: int
    K: int
    N: int
    ops: tuple[str, ...]
    dtypes: Optional[tuple[str, ...]] = None  # None: the run's --dtypes


GEMM = ("mm", "addmm", "linear", "linear_gelu")
_LLAMA_DECODE = (("o_proj", 4096, 4096), ("mlp_up", 4096, 14336), ("mlp_down", 14336, 4096))
SUITES = {
    "transformer": [
        Entry("gpt2.c_attn", 1, 4096, 768, 2304, GEMM),
        Entry("gpt2.attn_c_proj", 1, 4096, 768, 768, GEMM),
        Entry("gpt2.c_fc", 1, 4096, 768, 3072, GEMM),
        Entry("gpt2.mlp_c_proj", 1, 4096, 3072, 768, GEMM),
        Entry("gpt2.lm_head", 1, 4096, 768, 50257, GEMM),
        Entry("llama3-8b.qkv", 1, 4096, 4096, 6144, GEMM),
        Entry("llama3-8b.o_proj", 1, 4096, 4096, 4096, GEMM),
        Entry("llama3-8b.gate_up", 1, 4096, 4096, 28672, GEMM),
        Entry("llama3-8b.mlp_down", 1, 4096, 14336, 4096, GEMM),
        Entry("bert-large.mlp_up", 1, 8192, 1024, 4096, GEMM),
        Entry("bert-large.mlp_down", 1, 8192, 4096, 1024, GEMM),
        # batch x heads, sequence, head dim: GPT-2 small (8 x 12 heads, 512 tokens, d 64) and
        # Llama-3-8B (32 heads, 2048 tokens, d 128)
        Entry("gpt2.attn.scores", 96, 512, 64, 512, ("bmm",)),
        Entry("gpt2.attn.context", 96, 512, 512, 64, ("bmm",)),
        Entry("llama3-8b.attn.scores", 32, 2048, 128, 2048, ("bmm",)),
    ],
    "skinny": [
        Entry("k_heavy.m64", 1, 64, 65536, 64, GEMM),
        Entry("k_heavy.m128", 1, 128, 131072, 128, GEMM),
        Entry("k_heavy.m256", 1, 256, 32768, 256, GEMM),
        Entry("gemv.m1", 1, 1, 8192, 8192, GEMM),
        Entry("gemv.m16", 1, 16, 4096, 4096, GEMM),
        Entry("odd.2x3x100003", 1, 2, 3, 100003, GEMM),
        Entry("odd.5x5x5", 1, 5, 5, 5, GEMM),
        Entry("odd.1x1x1", 1, 1, 1, 1, GEMM),
        *(Entry(f"llama3-8b.decode.{layer}", 1, m, k, n, ("linear_nobias",))
          for layer, k, n in _LLAMA_DECODE for m in (1, 2, 4, 8, 16, 32, 64, 128)),
        # One and 16 rows into a language model's vocabulary: GPT-2's head (50257 columns, not a multiple of 8)
        # and a Llama-2-7B-sized one (4096 -> 32000).
        *(Entry(f"lm_head.decode.{model}", 1, m, k, n, ("linear_nobias",))
          for model, k, n in (("gpt2", 768, 50257), ("llama2-7b", 4096, 32000)) for m in (1, 16)),
        Entry("bmm.dot128", 1024, 1, 128, 1, ("bmm",), ("fp32",)),
    ],
    # A dimension not a multiple of 8 (16-bit rows not 16-byte aligned), to be read beside --peer pad: GPT-2's
    # vocabulary at 4096 and 128 tokens, squares one off a multiple of 8 (a copy of each unaligned operand, C's
    # rows stored through shared memory).
    "unaligned": [
        Entry("gpt2.lm_head", 1, 4096, 768, 50257, GEMM),
        Entry("gpt2.lm_head.t128", 1, 128, 768, 50257, ("mm", "linear", "linear_nobias")),
        Entry("square.4095", 1, 4095, 4095, 4095, ("mm",)),
        Entry("square.4097", 1, 4097, 4097, 4097, ("mm",)),
        Entry("square.6143", 1, 6143, 6143, 6143, ("mm",)),
    ],
}
SUITE_DTYPES = "fp32,tf32,bf16,fp16"
SMOKE_MAX = 64


class Case(NamedTuple):
    """One measured problem: op, sizes (ab.py's order), dtype, and its suite entry if any."""
    op: str
    B: int
    M: int
    N: int
    K: int
    dtype: str
    suite: Optional[str] = None
    name: Optional[str] = None


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


def smoke_size(d: int) -> int:
    """--smoke: a dimension above SMOKE_MAX becomes 32 + d % 32, tiny but as (un)aligned as d."""
    return d if d <= SMOKE_MAX else 32 + d % 32


def suite_cases(suite: str, ops: tuple[str, ...], dtypes: list[str], smoke: bool = False) -> list[Case]:
    """The cases of a suite for the selected ops, grouped by op, then dtype, in the suite's order."""
    s = smoke_size if smoke else (lambda d: d)
    return [Case(op, s(e.B), s(e.M), s(e.N), s(e.K), d, suite, e.name)
            for op in ops for d in dtypes for e in SUITES[suite]
            if op in e.ops and (e.dtypes is None or d in e.dtypes)]


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


def make_inputs(op: str, sizes: dict, dtype, device: str) -> list[torch.Tensor]:
    """Random-normal operands of op, shaped by OPS[op].operands (e.g. "NK": (N, K))."""
    return [torch.randn(*[sizes[c] for c in dims], device=device, dtype=dtype) for dims in OPS[op].operands]


def explain_operands(op: str, inputs: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    """(a, b) of the product tilelab computes, for explain(): W.t() for the linear ops."""
    a, b = inputs[0], inputs[1]
    return (a, b.t()) if OPS[op].operands[1] == "NK" else (a, b)


def op_epilogue(op: str) -> tuple[bool, Optional[str]]:
    """(whether op's call has a bias, the activation it fuses): its product's epilogue."""
    return len(OPS[op].operands) > 2, OPS[op].activation


def explain_epilogue(op: str, inputs: list[torch.Tensor]) -> dict:
    """explain()'s bias= and activation= for op's call on inputs: the epilogue the dispatcher decides with."""
    has_bias, act = op_epilogue(op)
    return {"bias": inputs[2] if has_bias else None, "activation": act}


def _peer_columns(prefix: str, fn: Callable, ref: torch.Tensor, dkey: str, device: str, timing) -> dict:
    """Verify fn() (its first call: any compilation happens here, untimed), then time it."""
    err = common.rel_err(fn(), ref)
    return {f"{prefix}_ms": common.bench(fn, device, *timing), f"{prefix}_rel_err": err,
            f"{prefix}_status": common.status(err, dkey)}


def _failed(prefix: str, e: Exception) -> dict:
    why = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
    return {f"{prefix}_ms": None, f"{prefix}_rel_err": None, f"{prefix}_status": f"FAIL: {type(e).__name__}: {why}"}


def peer_triton(op: str, inputs, ref, dkey: str, device: str, timing) -> dict:
    """torch.compile(max-autotune without CUDA graphs, Triton GEMM templates only) of torch's
    call: triton_* columns."""
    import torch._dynamo
    from torch._inductor import config as inductor_config

    torch._dynamo.reset()  # a fresh compile per case: no recompile limit, no stale precision
    try:
        with inductor_config.patch(max_autotune_gemm_backends="TRITON"):
            fn = torch.compile(OPS[op].torch, mode="max-autotune-no-cudagraphs", dynamic=False,
                               fullgraph=True)
            return _peer_columns("triton", lambda: fn(*inputs), ref, dkey, device, timing)
    except Exception as e:  # noqa: BLE001 - a compile failure is a result of the row, not the run's end
        return _failed("triton", e)
    finally:
        torch._dynamo.reset()


def padded_sizes(sizes: dict) -> dict:
    """Inductor's pad_mm rule for 16-bit dtypes: M, N, K rounded up to a multiple of 8,
    except a dimension of 1 (it can be squeezed away); the batch is kept."""
    return {c: (v + 7) // 8 * 8 if c in ("M", "N", "K") and v > 1 else v for c, v in sizes.items()}


def needs_padding(sizes: dict, dkey: str) -> bool:
    """Whether --peer pad applies: a 16-bit dtype and a dimension pad_mm would pad."""
    return dkey in ("bf16", "fp16") and padded_sizes(sizes) != sizes


def peer_pad(op: str, inputs, sizes: dict, ref, dkey: str, device: str, timing) -> dict:
    """Pad-then-cuBLAS (see the module docstring for what is timed): pad_* columns."""
    up = padded_sizes(sizes)

    def padded(t, dims):
        pads = [p for c in reversed(dims) for p in (0, up[c] - sizes[c])]  # F.pad: last dim first
        return F.pad(t, pads) if any(pads) else t

    def fn():
        out = OPS[op].torch(*[padded(t, dims) for t, dims in zip(inputs, OPS[op].operands)])
        return out[..., : sizes["M"], : sizes["N"]]

    try:
        return _peer_columns("pad", fn, ref, dkey, device, timing)
    except RuntimeError as e:
        return _failed("pad", e)


def run(args) -> list[dict]:
    device = args.device
    rows = []
    timing = (args.warmup, args.rep, args.rounds)
    for case in common.progress(args.cases, len(args.cases), "ab", not args.no_progress):
        op, B, M, N, K, dkey = case.op, case.B, case.M, case.N, case.K, case.dtype
        precision = common.set_precision(dkey)
        meta = common.metadata(device, precision)
        peak = common.peak_tflops(meta["device"], dkey) if device != "cpu" else None
        dtype = common.DTYPES[dkey]
        sizes = dict(B=B, M=M, N=N, K=K)
        torch.manual_seed(0)
        inputs = make_inputs(op, sizes, dtype, device)
        ref = OPS[op].torch(*[t.double() for t in inputs])
        baseline = lambda: OPS[op].torch(*inputs)  # noqa: E731
        cublas_ms = common.bench(baseline, device, *timing)
        cublas_err = common.rel_err(baseline(), ref)
        graph = device.startswith("cuda") and B * M * N * K <= args.graph_max_mnk
        cublas_graph_ms = common.bench_graph(baseline, args.rep) if graph else None
        chosen = tilelab_torch.explain(*explain_operands(op, inputs), **explain_epilogue(op, inputs)).kernel
        weight_bytes = inputs[1].numel() * inputs[1].element_size() if M <= 16 else None
        peers = {}
        if "triton" in args.peer:
            peers.update(peer_triton(op, inputs, ref, dkey, device, timing))
        if "pad" in args.peer and needs_padding(sizes, dkey):
            peers.update(peer_pad(op, inputs, sizes, ref, dkey, device, timing))
        head = dict(meta, op=op, **({"B": B} if op == "bmm" else {}))
        if case.suite:
            shape = f"BxMxKxN={B}x{M}x{K}x{N}" if op == "bmm" else f"MxKxN={M}x{K}x{N}"
            head.update(suite=case.suite, name=case.name, shape=shape)
        for name in candidate_kernels(args.kernels, device, dtype):
            kname = f"auto:{chosen}" if name is None else name
            fn = lambda n=name: OPS[op].tilelab(*inputs, variant=n)  # noqa: E731
            row = dict(head, dtype=dkey, M=M, N=N, K=K, kernel=kname, chosen=(name is None or name == chosen),
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
            ms = common.bench(fn, device, *timing)
            if graph:
                # CUDA-graph replay: the same kernels with the CPU launch path removed, so a
                # small shape's launch overhead is visible as ms - graph_ms.
                row.update(graph_ms=common.bench_graph(fn, args.rep), cublas_graph_ms=cublas_graph_ms)
            row.update(ms=ms, tflops=common.tflops(B * M, N, K, ms), ratio=cublas_ms / ms,
                       pct_peak=(100 * common.tflops(B * M, N, K, ms) / peak) if peak else None,
                       status=common.status(row["rel_err"], dkey))
            if weight_bytes is not None:
                row.update(weight_gbps=weight_bytes / (ms * 1e6), cublas_weight_gbps=weight_bytes / (cublas_ms * 1e6))
            row.update(peers)
            for p in ("triton", "pad"):
                if peers.get(f"{p}_ms") is not None:
                    row[f"{p}_ratio"] = peers[f"{p}_ms"] / ms
            rows.append(row)
        del inputs, baseline, ref
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    return rows


def oracle_rows(rows: list[dict]) -> list[dict]:
    """Per (op, shape, dtype): the fastest verified tilelab kernel vs the dispatcher's choice."""
    out = []
    def key_of(r):
        return r["op"], r["dtype"], r.get("B", 1), r["M"], r["N"], r["K"]

    keys = sorted({key_of(r) for r in rows}, key=lambda k: (k[0], k[1], k[2] * k[3] * k[4] * k[5]))
    for key in keys:
        group = [r for r in rows if key_of(r) == key and r.get("ms") and r["status"] == "OK"]
        if not group:
            continue
        best = min(group, key=lambda r: r["ms"])
        chosen = [r for r in group if r["chosen"]]
        ch = min(chosen, key=lambda r: r["ms"]) if chosen else None
        out.append(dict(op=key[0], dtype=key[1], shape=(f"{key[2]}x" if key[2] > 1 else "") + f"{key[3]}x{key[4]}x{key[5]}",
                        oracle=best["kernel"].replace("auto:", ""),
                        oracle_ms=best["ms"], chosen=ch["kernel"].replace("auto:", "") if ch else None,
                        chosen_ms=ch["ms"] if ch else None,
                        chosen_vs_oracle=(best["ms"] / ch["ms"]) if ch else None,
                        cublas_ms=best["cublas_ms"]))
    return out


def summary_rows(rows: list[dict]) -> list[dict]:
    """Geometric means per (suite, op, dtype) over the dispatcher's verified rows: ratio, and
    triton_ratio / pad_ratio where the peer ran (n_triton / n_pad of them)."""
    groups: dict = {}
    for r in rows:
        if str(r["kernel"]).startswith("auto:") and r.get("status") == "OK" and r.get("ratio"):
            groups.setdefault((r.get("suite"), r["op"], r["dtype"]), []).append(r)
    out = []
    for (suite, op, dkey), g in groups.items():
        s = dict(suite=suite, op=op, dtype=dkey, n=len(g), geomean_ratio=common.geomean(r["ratio"] for r in g))
        for p in ("triton", "pad"):
            vals = [r[f"{p}_ratio"] for r in g if r.get(f"{p}_ratio") and r.get(f"{p}_status") == "OK"]
            if vals:
                s.update({f"n_{p}": len(vals), f"geomean_{p}_ratio": common.geomean(vals)})
        out.append(s)
    return out


COLUMNS = [
    ("op", "op", ""), ("name", "name", ""), ("dtype", "dtype", ""), ("B", "B", ""), ("M", "M", ""), ("N", "N", ""),
    ("K", "K", ""), ("kernel", "kernel", ""),
    ("ms", "ms", ".3f"), ("TFLOP/s", "tflops", ".2f"), ("cuBLAS ms", "cublas_ms", ".3f"),
    ("cuBLAS TFLOP/s", "cublas_tflops", ".2f"), ("ratio", "ratio", ".3f"), ("%peak", "pct_peak", ".1f"),
    ("weight GB/s", "weight_gbps", ".0f"), ("cuBLAS weight GB/s", "cublas_weight_gbps", ".0f"),
    ("triton ms", "triton_ms", ".3f"), ("triton ratio", "triton_ratio", ".3f"),
    ("pad ms", "pad_ms", ".3f"), ("pad ratio", "pad_ratio", ".3f"),
    ("graph ms", "graph_ms", ".4f"), ("cuBLAS graph ms", "cublas_graph_ms", ".4f"),
    ("rel_err", "rel_err", ".1e"), ("cuBLAS rel_err", "cublas_rel_err", ".1e"), ("status", "status", ""),
]
# Suite tables read M x K x N, as the suites are written.
SUITE_COLUMNS = COLUMNS[:5] + [("K", "K", ""), ("N", "N", "")] + COLUMNS[7:]
SUMMARY_COLUMNS = [("suite", "suite", ""), ("op", "op", ""), ("dtype", "dtype", ""), ("n", "n", ""),
                   ("geomean ratio", "geomean_ratio", ".3f"), ("n triton", "n_triton", ""),
                   ("geomean triton ratio", "geomean_triton_ratio", ".3f"), ("n pad", "n_pad", ""),
                   ("geomean pad ratio", "geomean_pad_ratio", ".3f")]


def build_cases(p: argparse.ArgumentParser, args) -> list[Case]:
    """Validate the shape/op/suite arguments and turn them into the run's cases."""
    dtypes = [d.strip() for d in (args.dtypes or (SUITE_DTYPES if args.suite else "fp32,bf16,fp16")).split(",")]
    for d in dtypes:
        if d not in common.DTYPES:
            p.error(f"unknown dtype {d!r}; choose from {', '.join(common.DTYPES)}")
    if args.rounds < 1:
        p.error(f"--rounds must be at least 1, got {args.rounds}")
    if not args.suite:
        if args.op == "all":
            p.error("--op all needs --suite (it runs each op on the suite's shapes for that op)")
        if args.smoke:
            p.error("--smoke scales a suite's shapes down; it needs --suite")
        op = args.op or "mm"
        shapes = parse_shapes(args.shapes or (CPU_SHAPES if args.device == "cpu" else DEFAULT_SHAPES),
                              batched=op == "bmm")
        return [Case(op, *s, d) for d in dtypes for s in shapes]
    ops = ALL_OPS if args.op in (None, "all") else (args.op,)
    cases = suite_cases(args.suite, ops, dtypes, args.smoke)
    if not cases:
        has = sorted({o for e in SUITES[args.suite] for o in e.ops})
        p.error(f"suite {args.suite!r} has no {args.op} shapes for dtypes {','.join(dtypes)}; "
                f"its ops: {', '.join(has)}")
    return cases


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    which = p.add_mutually_exclusive_group()
    which.add_argument("--shapes", help="comma-separated MxNxK list (BxMxNxK for --op bmm; default: a sweep of "
                                        "squares, odd, skinny and model-like shapes)")
    which.add_argument("--suite", choices=sorted(SUITES), help="a named set of model shapes (and their ops) "
                                                                "instead of --shapes; see above")
    p.add_argument("--dtypes", help="comma-separated from fp32 (full IEEE precision), tf32, bf16, fp16, fp64 "
                                    f"(default: fp32,bf16,fp16; with --suite: {SUITE_DTYPES})")
    p.add_argument("--kernels", nargs="+", default=["auto"],
                   help="'auto' (the dispatcher's choice), 'all' (every config of the table), "
                        "or config names / variants")
    p.add_argument("--op", choices=(*OPS, "all"),
                   help="the operation, see above (default: mm; with --suite: all, i.e. every op but addmm)")
    p.add_argument("--peer", nargs="+", action="extend", default=[], choices=("triton", "pad"),
                   help="extra columns: triton (torch.compile max-autotune, Triton templates), "
                        "pad (pad-then-cuBLAS for unaligned 16-bit shapes); see above")
    p.add_argument("--smoke", action="store_true",
                   help=f"with --suite: every dimension above {SMOKE_MAX} becomes 32 + d %% 32 (tiny shapes "
                        "with the same alignment; validates the pipeline, measures nothing)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--warmup", type=int, default=25, help="warm-up per measurement, ms")
    p.add_argument("--rep", type=int, default=100, help="timed repetitions per measurement, ms")
    p.add_argument("--rounds", type=int, default=1,
                   help="take every do_bench time (tilelab's, cuBLAS's, the peers') this many times and keep the "
                        "median (the graph columns stay one measurement)")
    p.add_argument("--max-call-s", type=float, default=1.0, help="skip a kernel whose single call takes longer")
    p.add_argument("--graph-max-mnk", type=float, default=1024 ** 3,
                   help="also time CUDA-graph replay (columns 'graph ms', 'cuBLAS graph ms') for shapes "
                        "with B*M*N*K at most this (default 1024^3; 0 turns it off)")
    p.add_argument("--out", help="directory for NAME.json / NAME.csv")
    p.add_argument("--name", help="base name of the --out files (default: ab; with --suite: suite_SUITE)")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    args.cases = build_cases(p, args)

    rows = run(args)
    meta = dict(common.metadata(args.device, "highest (fp32 rows) / high (tf32 rows)"),
                suite=args.suite, smoke=args.smoke, peers=sorted(set(args.peer)), rounds=args.rounds)
    print(f"# {meta['device']} | torch {meta['torch']} | CUDA {meta['cuda']} | "
          f"fp32 rows at precision 'highest' (IEEE), tf32 rows at 'high' | median of do_bench"
          + (f" (median of {args.rounds} rounds)" if args.rounds > 1 else "") + "; "
          f"graph ms = median CUDA-graph replay" + (f" | suite {args.suite}, shapes M x K x N" if args.suite else ""))
    common.print_table(rows, SUITE_COLUMNS if args.suite else COLUMNS, skip_empty=True)
    peer_notes = dict.fromkeys(f"{p} peer, {r['op']} {r.get('shape') or 'MxNxK=%dx%dx%d' % (r['M'], r['N'], r['K'])} "
                               f"{r['dtype']}: {r[p + '_status']}" for r in rows for p in ("triton", "pad")
                               if r.get(p + "_status", "OK") != "OK")
    if peer_notes:
        print("\n# peers without a verified time (CHECK: out of tolerance; FAIL: did not run)")
        print("\n".join(peer_notes))
    orc = oracle_rows(rows)
    if any(r["chosen"] for r in rows) and len({r["kernel"] for r in rows}) > 1 and args.kernels != ["auto"]:
        print("\n# dispatcher's choice vs the fastest tilelab kernel (oracle)")
        common.print_table(orc, [("op", "op", ""), ("dtype", "dtype", ""), ("shape (MxNxK)", "shape", ""),
                                 ("oracle", "oracle", ""), ("oracle ms", "oracle_ms", ".3f"), ("chosen", "chosen", ""),
                                 ("chosen ms", "chosen_ms", ".3f"), ("oracle/chosen", "chosen_vs_oracle", ".3f"),
                                 ("cuBLAS ms", "cublas_ms", ".3f")])
    summary = summary_rows(rows)
    if args.suite:
        print("\n# geometric mean of the ratio (cuBLAS ms / tilelab ms; peers: peer ms / tilelab ms), "
              "dispatcher's verified rows")
        common.print_table(summary, SUMMARY_COLUMNS, skip_empty=True)
    if args.out:
        name = args.name or (f"suite_{args.suite}" if args.suite else "ab")
        os.makedirs(args.out, exist_ok=True)
        common.write_json(os.path.join(args.out, f"{name}.json"),
                          {"meta": meta, "rows": rows, "oracle": orc, "summary": summary})
        common.write_csv(os.path.join(args.out, f"{name}.csv"), rows)
    bad = [r for r in rows if r.get("status") == "CHECK"]
    if bad:
        print(f"\n{len(bad)} row(s) out of tolerance (status CHECK)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
