#!/usr/bin/env python3
"""Model A/B: real models with cuBLAS vs with tilelab's kernels, end to end and per GEMM.

Models (random weights, nothing is downloaded):
  gpt2   transformers GPT2LMHeadModel(GPT2Config()), 124M parameters
  llama  transformers LlamaForCausalLM: 8 layers, hidden 2048, MLP 5632, 16 heads, vocab 32000
  vit    timm vit_base_patch16_224 (pretrained=False)
Without transformers (timm) a self-contained block stack of the same style stands in;
the row's `model` names it and its `note` says why (--fallback forces it).

Routings, on the same module and weights: `cublas` (the untouched model), then
`tilelab_torch.swap(model, fuse=False)` (every nn.Linear / Conv1D on tilelab) and
`swap(model, fuse=True)` (also the known Linear+activation pairs fused into one
kernel's epilogue, and the query/key/value projections of known attention blocks,
Llama's among them, merged into one product), measured in that order, each undone by `unswap` before the next.
Modes: `forward` (eval, no grad) and `train` (forward + backward + AdamW(foreach)
step; the weights are restored from a snapshot and a fresh AdamW is made before each
routing, so all routings start from the same parameters and share no optimizer
state). Each runs eager and under CUDA graphs: torch.cuda.graph captures the whole
step (forward; or forward, backward and AdamW(capturable=True).step()) on static
inputs and the timed steps replay it. The step time is the median over repeated
steps of CUDA-event time after warm-up, measured in --rounds interleaved rounds
(cuBLAS, each tilelab routing, then again; default 3), of which the median is kept:
a drift of the machine during one routing's steps no longer decides its ratio (the
small configs' eager steps are host-bound and moved 10-30% between runs measured
once each). With --interleave steps the eager steps of the routings alternate one by one
within each round (on two swapped copies of the model beside the original, each from the
snapshot with its own AdamW; each step timed alone, the host waiting for it): the host's
pace, which moved by up to 25% from one round to the next, then reaches every routing alike.
fp32 is IEEE fp32 on both sides (no TF32).
The attention products stay in torch's SDPA on both sides (swap replaces modules).

One row per model, dtype, mode, graphs, routing (the tilelab ones) and batch x seq:
tilelab_per_s and cublas_per_s (tokens/s; images/s for vit), ratio =
tilelab_per_s / cublas_per_s (> 1: tilelab faster), ratio_rounds (each round's own
ratio: their spread, printed as `rounds` and drawn as whiskers by plot_models.py, is the
run's noise; the small configs' eager steps are host-bound and their rounds can straddle
1.0), and max_abs_diff / bitwise_equal: the routing's logits against the untouched
model's, eval forward, same inputs. --breakdown adds, per model config, every unique GEMM of a forward
(the routed modules' problems: M, K, N, op, the kernel tilelab_torch.explain picks),
timed in isolation (act(F.linear) vs tiled_linear with the same bias and activation;
forward and forward+backward), its count per step and its share of the step's GEMM time;
with the train mode also the backward's two products alone (dx_*, dw_*: torch.mm vs
tiled_mm in autograd's layouts, and the row the dispatcher picks for each). The problems
are each module's own (as swap(fuse=False) runs them); `merged` lists the projections
swap(fuse=True) runs as one product, timed apart and merged on both sides; `gated` the
gated MLPs it runs as one tiled_gated_linear, against cuBLAS's two products, activation
and multiply (and against tilelab's products apart). Every tilelab product it times is first
checked against float64 on its first 256 rows (rel_err, dx_rel_err, dw_rel_err: max |error| /
max |reference|); above the dtype's tolerance the breakdown raises.
--profile adds the products as the model runs them (`profile` in the JSON): eager steps of
every routing under torch.profiler, each GEMM problem (B, M, K, N) with its calls a step and
the time a call of the kernels launched under its outermost GEMM op (aten::linear / addmm /
mm / bmm on the cuBLAS side, the tilelab ops on the other; CPU time on the CPU), beside the
step's time in all kernels. swap(fuse=True)'s products include the activations they fuse,
which the cuBLAS routing runs as kernels of their own. A product can take longer in the model
than alone, behind the model's other kernels: the breakdown's isolated times missed this on
ViT-B/16 at batch 8 (results/h200/README.md).

Examples:
    python benchmarks/model_ab.py                        # GPU: the default set (~4 min a round on an H200)
    python benchmarks/model_ab.py --quick --breakdown    # one config per model, with the GEMM breakdown
    python benchmarks/model_ab.py --models vit --configs vit=8 --dtypes bf16 --graphs eager --profile
    python benchmarks/model_ab.py --models llama --configs llama=2x2048 --dtypes bf16
    python benchmarks/model_ab.py --device cpu --smoke   # tiny models on the CPU (seconds)
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import tilelab_torch  # noqa: E402
from tilelab_torch.nn import TiledGatedMLP  # noqa: E402
from plot_models import ratios_by_round  # noqa: E402  (the one computation of a round's ratio)

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
MODELS = ("gpt2", "llama", "vit")
# (batch, seq) per model; vit's seq is None (images/s). The first is --quick's.
CONFIGS = {"gpt2": [(8, 512), (1, 128)], "llama": [(4, 1024), (1, 128)], "vit": [(64, None), (8, None)]}
SMOKE_CONFIGS = {"gpt2": [(2, 16)], "llama": [(2, 16)], "vit": [(2, None)]}
ROUTINGS = ("cublas", "swap(fuse=False)", "swap(fuse=True)")
ACTIVATIONS = tilelab_torch.ops.TORCH_ACTIVATIONS  # torch's function per tiled_linear activation
GRAPHS_METHOD = ("torch.cuda.graph capture of the whole step (forward; or forward, backward and "
                 "AdamW(foreach, capturable=True).step()) on static inputs, timed by replay")


# ------------------------------------------------------------------ models
class Mlp(nn.Module):
    """fc1 -> act -> fc2, under the class name swap knows (timm's): its activation can be fused."""

    def __init__(self, d: int, ff: int, act: nn.Module):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(d, ff), act, nn.Linear(ff, d)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(x)))


class LlamaMLP(nn.Module):
    """down_proj(act_fn(gate_proj(x)) * up_proj(x)), under the class name swap knows (transformers')."""

    def __init__(self, d: int, ff: int):
        super().__init__()
        self.gate_proj, self.up_proj = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False)
        self.down_proj, self.act_fn = nn.Linear(ff, d, bias=False), nn.SiLU()

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class _Block(nn.Module):
    """Pre-norm transformer block: SDPA attention, then an MLP (GELU, or Llama's gated SiLU)."""

    def __init__(self, d: int, heads: int, ff: int, style: str):
        super().__init__()
        self.heads, self.causal = heads, style != "vit"
        norm = nn.RMSNorm if style == "llama" else nn.LayerNorm
        self.ln1, self.ln2 = norm(d), norm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=style != "llama"), nn.Linear(d, d, bias=style != "llama")
        self.mlp = LlamaMLP(d, ff) if style == "llama" else Mlp(d, ff, nn.GELU("tanh" if style == "gpt2" else "none"))

    def forward(self, x: Tensor) -> Tensor:
        B, T, D = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        x = x + self.proj(a.transpose(1, 2).reshape(B, T, D))
        return x + self.mlp(self.ln2(x))


class Stack(nn.Module):
    """Self-contained stand-in: token (or patch) embedding, blocks, norm, linear head."""

    def __init__(self, style: str, d: int, heads: int, layers: int, ff: int, out: int, patch: int = 0,
                 positions: int = 4096):
        super().__init__()
        self.patch = patch
        self.embed = nn.Linear(3 * patch * patch, d) if patch else nn.Embedding(out, d)
        self.pos = nn.Parameter(0.02 * torch.randn(positions, d))
        self.blocks = nn.ModuleList(_Block(d, heads, ff, style) for _ in range(layers))
        self.norm = nn.RMSNorm(d) if style == "llama" else nn.LayerNorm(d)
        self.head = nn.Linear(d, out, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        if self.patch:  # (B, 3, H, W) -> (B, patches, 3*p*p)
            x = F.unfold(x, self.patch, stride=self.patch).transpose(1, 2)
        x = self.embed(x)
        x = x + self.pos[: x.shape[1]]
        for b in self.blocks:
            x = b(x)
        x = self.norm(x)
        return self.head(x.mean(1) if self.patch else x)


@dataclass
class Model:
    key: str  #: gpt2 / llama / vit; the rows' `model`, with " (stand-in)" for a self-contained one
    name: str  #: what runs, e.g. "transformers GPT2LMHeadModel (124M)"
    note: str  #: "" or why a stand-in runs
    module: nn.Module
    unit: str  #: "tokens" or "images"
    inputs: Callable[[int, Optional[int]], tuple]  #: (batch, seq) -> (input, target), fixed
    logits: Callable[[Tensor], Tensor]

    @property
    def row_name(self) -> str:
        return self.key + (" (stand-in)" if self.name.startswith("self-contained") else "")


def _text(key, module, vocab, name, note, device, call):
    def inputs(batch, seq):
        g = torch.Generator().manual_seed(1)
        ids = torch.randint(0, vocab, (batch, seq + 1), generator=g).to(device)
        return ids[:, :-1].contiguous(), ids[:, 1:].contiguous()

    return Model(key, name, note, module, "tokens", inputs, call)


def build(key: str, smoke: bool, fallback: bool, device: str, dtype: torch.dtype) -> Model:
    """The model `key` in `dtype` on `device`, weights from seed 0."""
    torch.manual_seed(0)
    lib = "timm" if key == "vit" else "transformers"
    note = "self-contained stand-in (--fallback)" if fallback else ""
    mod = None
    with torch.device(device):
        if not fallback:
            try:
                mod, name, extra = _build_library(key, smoke)
            except ImportError:
                note = f"{lib} is not installed: a self-contained {key}-style stack stands in"
        if mod is None:
            name, extra = f"self-contained {key}-style stack", {}
            d, heads, layers, ff, vocab = {
                "gpt2": (768, 12, 12, 3072, 50257), "llama": (2048, 16, 8, 5632, 32000),
                "vit": (768, 12, 12, 3072, 1000)}[key]
            if smoke:
                d, heads, layers, ff, vocab = 64, 4, 2, 176, 512
            if key == "vit":
                vocab = 10 if smoke else vocab
                mod = Stack(key, d, heads, layers, ff, vocab, patch=8 if smoke else 16)
                extra = {"image": 32 if smoke else 224, "classes": vocab}
            else:
                mod = Stack(key, d, heads, layers, ff, vocab)
                extra = {"vocab": vocab}
    mod = mod.to(device=device, dtype=dtype)
    name += f" ({sum(p.numel() for p in mod.parameters()) / 1e6:.0f}M)" if not smoke else " (smoke size)"
    if key == "vit":
        size, classes = extra["image"], extra["classes"]

        def inputs(batch, seq):
            g = torch.Generator().manual_seed(1)
            x = torch.randn(batch, 3, size, size, generator=g).to(device=device, dtype=dtype)
            return x, torch.randint(0, classes, (batch,), generator=g).to(device)

        return Model(key, name, note, mod, "images", inputs, mod)
    if name.startswith("transformers"):
        return _text(key, mod, extra["vocab"], name, note, device, lambda ids: _hf_logits(mod, ids))
    return _text(key, mod, extra["vocab"], name, note, device, mod)


def _hf_logits(mod: nn.Module, ids: Tensor) -> Tensor:
    """A transformers causal LM's logits (no KV cache)."""
    with _unpacked_sequences():
        return mod(input_ids=ids, use_cache=False).logits


def with_module(m: Model, module: nn.Module) -> Model:
    """`m` running `module` (a copy of m.module) in its place."""
    logits = module if m.logits is m.module else (lambda ids: _hf_logits(module, ids))
    return dataclasses.replace(m, module=module, logits=logits)


@contextlib.contextmanager
def _unpacked_sequences():
    """transformers reads the position ids back to the host to see whether they pack several
    sequences; under CUDA-graph capture it cannot, and builds an explicit causal mask instead
    of SDPA's is_causal, so a captured step would run another attention kernel than an eager
    one. The inputs here are single sequences (positions 0..T-1), for which the check says
    "not packed": that answer is given directly, in both."""
    try:
        import transformers.masking_utils as mu
    except ImportError:  # a transformers without it has no such check
        mu = None
    saved = getattr(mu, "find_packed_sequence_indices", None)
    if saved is not None:
        mu.find_packed_sequence_indices = lambda position_ids: None
    try:
        yield
    finally:
        if saved is not None:
            mu.find_packed_sequence_indices = saved


def _build_library(key: str, smoke: bool):
    if key == "vit":
        import timm

        kw = dict(img_size=32, patch_size=8, embed_dim=64, depth=2, num_heads=4, num_classes=10) if smoke else {}
        mod = timm.create_model("vit_base_patch16_224", pretrained=False, **kw)
        return mod, "timm vit_base_patch16_224", {"image": 32 if smoke else 224, "classes": mod.num_classes}
    import transformers

    transformers.logging.set_verbosity_error()
    if key == "gpt2":
        cfg = (transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=512, n_positions=64) if smoke
               else transformers.GPT2Config())
        return transformers.GPT2LMHeadModel(cfg), "transformers GPT2LMHeadModel", {"vocab": cfg.vocab_size}
    size = (dict(num_hidden_layers=2, hidden_size=64, intermediate_size=176, num_attention_heads=4,
                 num_key_value_heads=4, vocab_size=512) if smoke else
            dict(num_hidden_layers=8, hidden_size=2048, intermediate_size=5632, num_attention_heads=16,
                 num_key_value_heads=16, vocab_size=32000))
    cfg = transformers.LlamaConfig(**size)
    return transformers.LlamaForCausalLM(cfg), "transformers LlamaForCausalLM", {"vocab": cfg.vocab_size}


# ----------------------------------------------------------------- routing
@contextlib.contextmanager
def routed(module: nn.Module, routing: str):
    """The model under `routing` for the block (swap ... unswap); yields the SwapReport or None."""
    if routing == "cublas":
        yield None
        return
    report = tilelab_torch.swap(module, fuse=routing == "swap(fuse=True)")
    try:
        yield report
    finally:
        tilelab_torch.unswap(module)


def loss_of(logits: Tensor, target: Tensor) -> Tensor:
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), target.reshape(-1))


def make_step(m: Model, mode: str, x: Tensor, y: Tensor, opt) -> Callable[[], Tensor]:
    """One step: eval forward without grad, or forward + backward + optimizer step."""
    if mode == "forward":
        def step():
            with torch.no_grad():
                return m.logits(x)
    else:
        def step():
            opt.zero_grad(set_to_none=True)
            loss = loss_of(m.logits(x), y)
            loss.backward()
            opt.step()
            return loss
    return step


def first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [""])[0][:200]


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def time_steps(fn: Callable, device: str, rep_ms: float, min_steps: int, max_steps: int = 50) -> float:
    """Median ms of fn() over repeated steps: one warm-up step, then as many timed steps as fit
    in rep_ms (at least min_steps); CUDA events around each step on CUDA."""
    fn()
    sync(device)
    t0 = time.perf_counter()
    fn()
    sync(device)
    return common.median_call_ms(fn, step_count((time.perf_counter() - t0) * 1e3, rep_ms, min_steps, max_steps),
                                 device)


def step_count(est_ms: float, rep_ms: float, min_steps: int, max_steps: int = 50) -> int:
    """How many steps of about est_ms to time: as many as fit in rep_ms, at least min_steps, at most max_steps."""
    return int(min(max_steps, max(min_steps, rep_ms / max(est_ms, 1e-3))))


def fresh_optimizer(module: nn.Module, mode: str, capturable: bool = False) -> Optional[torch.optim.Optimizer]:
    """A new AdamW over module's parameters for the training step (no state shared between routings); None
    for the forward."""
    if mode != "train":
        return None
    return torch.optim.AdamW(module.parameters(), lr=1e-4, foreach=True, capturable=capturable)


def failure(routing: str, e: Exception) -> str:
    """A failed routing's note."""
    return f"{routing} failed: {type(e).__name__}: {first_line(e)}"


def restore(module: nn.Module, snapshot: list[Tensor]) -> None:
    with torch.no_grad():
        for p, s in zip(module.parameters(), snapshot):
            p.copy_(s)


@contextlib.contextmanager
def routed_step(m: Model, routing: str, mode: str, x: Tensor, y: Tensor, snapshot: list, args,
                capturable: bool = False) -> Iterator[Callable[[], Tensor]]:
    """The model's step under `routing` for the block: a training step starts from the snapshot's weights with
    a fresh AdamW (every routing the same start, no shared optimizer state); afterwards the gradients are
    dropped and, on CUDA, the cached memory freed."""
    m.module.train(mode == "train")
    if mode == "train":
        restore(m.module, snapshot)
    opt = fresh_optimizer(m.module, mode, capturable)
    try:
        with routed(m.module, routing):
            yield make_step(m, mode, x, y, opt)
    finally:
        del opt  # the optimizer state (the caller drops the step, which holds it, inside the block)
        m.module.zero_grad(set_to_none=True)
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()


def measure(m: Model, routing: str, mode: str, graphs: bool, x: Tensor, y: Tensor, snapshot: list,
            args) -> float:
    """Median ms per step of the model under `routing`."""
    with routed_step(m, routing, mode, x, y, snapshot, args, capturable=graphs) as step:
        fn = common.capture_graph(step) if graphs else step
        del step
        try:
            return time_steps(fn, args.device, args.rep_ms, args.min_steps)
        finally:
            del fn  # the graph and its memory pool, the step and its optimizer: before routed_step frees the cache


def measure_alternating(m: Model, mode: str, x: Tensor, y: Tensor, snapshot: list, args, failed: dict) -> dict:
    """Median ms per eager step of every routing not in `failed` (--interleave steps), their steps alternated
    one by one: each step timed alone (CUDA events around it, the host waiting for it before the next), the
    routings' order rotated every step, so a drift of the host's pace reaches every routing alike. cuBLAS runs
    m.module, each tilelab routing a swapped copy of it; all start from the snapshot's weights, each with its
    own AdamW. A routing that raises goes into `failed` (routing -> message) and out of the rest."""
    m.module.zero_grad(set_to_none=True)  # a copy carries no gradients
    steps: dict = {}
    try:
        for r in ROUTINGS:
            if r in failed:
                continue
            try:
                mod = m.module if r == "cublas" else copy.deepcopy(m.module)
                restore(mod, snapshot)
                mod.train(mode == "train")
                if r != "cublas":
                    tilelab_torch.swap(mod, fuse=r == "swap(fuse=True)")
                steps[r] = make_step(with_module(m, mod), mode, x, y, fresh_optimizer(mod, mode))
                for _ in range(2):  # untimed
                    steps[r]()
            except Exception as e:  # noqa: BLE001 - one failed routing must not end the sweep
                failed[r] = failure(r, e)
                steps.pop(r, None)
        sync(args.device)
        t0 = time.perf_counter()
        for step in steps.values():
            step()
        sync(args.device)
        est = (time.perf_counter() - t0) * 1e3 / max(len(steps), 1)
        times: dict = {r: [] for r in steps}
        for i in range(step_count(est, args.rep_ms, args.min_steps)):
            order = [r for r in steps if r not in failed]
            for r in order[i % len(order):] + order[:i % len(order)] if order else []:
                try:
                    times[r].append(common.median_call_ms(steps[r], 1, args.device))
                except Exception as e:  # noqa: BLE001
                    failed[r] = failure(r, e)
        return {r: statistics.median(v) for r, v in times.items() if r not in failed}
    finally:
        steps.clear()  # the copies, their optimizers and gradients: before the cache is freed
        m.module.zero_grad(set_to_none=True)
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()


# ------------------------------------------------------- in-model profile
# The products as the model runs them: the outermost GEMM op of each call (aten::linear over its aten::addmm,
# tiled_linear over the tiled_addmm its autograd node calls) with every kernel launched under it.
GEMM_OPS = {"aten::linear", "aten::matmul", "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm",
            "tilelab::tiled_mm", "tilelab::tiled_addmm", "tilelab::tiled_bmm", "tilelab::tiled_linear",
            "tilelab::_tiled_linear_pre", "tilelab::tiled_gated_linear"}


def gemm_key(name: str, shapes: list) -> Optional[tuple]:
    """(B, M, K, N, gated) of a GEMM op from its recorded input shapes; None if they do not read as one."""
    s = [list(x) for x in shapes]
    try:
        if name in ("aten::addmm", "aten::baddbmm", "tilelab::tiled_addmm"):
            s = s[1:]  # the bias first
        if name in ("aten::linear", "tilelab::tiled_linear", "tilelab::_tiled_linear_pre",
                    "tilelab::tiled_gated_linear"):
            x, w = s[0], s[1]  # x (..., K), weight (N, K)
            return (1, math.prod(x[:-1]), x[-1], w[0], name == "tilelab::tiled_gated_linear")
        a, b = s[0], s[1]
        if len(a) < 2 or len(b) < 2:  # a product with a vector: not one of the model's GEMMs
            return None
        if len(b) == 2:  # a (..., M, K) @ b (K, N): the leading dims fold into M
            return (1, math.prod(a[:-1]), a[-1], b[1], False)
        return (math.prod(a[:-2]), a[-2], a[-1], b[-1], False)
    except (IndexError, TypeError):
        return None


def gemm_times(events, steps: int, on_device: bool) -> tuple[list[dict], float, float]:
    """Per GEMM problem of a profiled run of `steps` steps: its calls and time per step, with the op names that
    ran it; and the time per step of every GEMM and of everything. Time: the kernels' durations (CUDA; each
    op's kernels and its children's), or the CPU's (each op's own and its children's)."""
    from torch.autograd import DeviceType

    def total(e):  # an op's time with its children's (CUDA: its kernels' and its children's kernels')
        return e.device_time_total if on_device else e.cpu_time_total

    def own(e):  # each unit of time once: on CUDA the kernels' own events (an op's count its kernels again)
        if on_device:
            return e.device_time_total if e.device_type != DeviceType.CPU else 0.0
        return e.self_cpu_time_total

    def under_gemm(e):
        p = e.cpu_parent
        while p is not None:
            if p.name in GEMM_OPS:
                return True
            p = p.cpu_parent
        return False

    groups: dict = {}
    everything = 0.0
    for e in events:
        everything += own(e)
        if e.name not in GEMM_OPS or under_gemm(e):
            continue
        key = gemm_key(e.name, e.input_shapes)
        if key is None:
            continue
        g = groups.setdefault(key, {"B": key[0], "M": key[1], "K": key[2], "N": key[3], "gated": key[4],
                                    "ops": [], "calls": 0, "us": 0.0})
        g["calls"] += 1
        g["us"] += total(e)
        if e.name not in g["ops"]:
            g["ops"].append(e.name)
    rows = [{**{k: g[k] for k in ("B", "M", "K", "N", "gated", "ops")}, "calls_per_step": g["calls"] / steps,
             "us_per_call": g["us"] / g["calls"], "us_per_step": g["us"] / steps}
            for g in sorted(groups.values(), key=lambda g: -g["us"])]
    return rows, sum(r["us_per_step"] for r in rows), everything / steps


def in_model(m: Model, routing: str, mode: str, x: Tensor, y: Tensor, snapshot: list, args) -> dict:
    """Eager steps of the model under `routing` in torch.profiler (record_shapes): each GEMM problem's calls and
    time per step as the model runs them, beside its other kernels (gemm_times)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = args.device.startswith("cuda")
    steps = 1 if args.smoke else 3
    with routed_step(m, routing, mode, x, y, snapshot, args) as step:
        for _ in range(2):
            step()
        sync(args.device)
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=acts, record_shapes=True) as prof:
            for _ in range(steps):
                step()
            sync(args.device)
        del step  # and its optimizer, before routed_step frees the cache
    rows, gemm_us, all_us = gemm_times(prof.events(), steps, cuda)
    return {"mode": mode, "routing": routing, "steps": steps, "gemms": rows, "gemm_us_per_step": gemm_us,
            "all_us_per_step": all_us}


def joined_profile(entries: list[dict], mode: str) -> list[dict]:
    """One row per GEMM problem of `mode` across the routings' in-model entries: each routing's calls and µs a
    call, and cuBLAS's time a step over each tilelab routing's (ratio_*; > 1: tilelab faster)."""
    by = {e["routing"]: {(g["B"], g["M"], g["K"], g["N"], g["gated"]): g for g in e["gemms"]}
          for e in entries if e["mode"] == mode}
    keys = list(dict.fromkeys(k for r in ROUTINGS for k in by.get(r, {})))
    out = []
    for k in keys:
        row = {"B": k[0], "M": k[1], "K": k[2], "N": k[3], "gated": k[4]}
        for r, tag in zip(ROUTINGS, ("cublas", "apart", "fused")):
            g = by.get(r, {}).get(k)
            row[f"{tag}_calls"] = g and g["calls_per_step"]
            row[f"{tag}_us"] = g and g["us_per_call"]
        for tag in ("apart", "fused"):
            c, t = row["cublas_us"], row[f"{tag}_us"]
            same = c and t and row["cublas_calls"] == row[f"{tag}_calls"]
            row[f"ratio_{tag}"] = c / t if same else None
        out.append(row)
    return out


def print_profile(entry: dict) -> None:
    unit = "µs of kernels" if entry["timing"] == "device" else "µs of CPU"
    for mode in dict.fromkeys(e["mode"] for e in entry["entries"]):
        es = {e["routing"]: e for e in entry["entries"] if e["mode"] == mode}
        print(f"\nGEMMs of {entry['model']} {entry['dtype']} B={entry['batch']} T={entry['seq']} {mode}, "
              f"in the model ({unit} a call; eager steps under torch.profiler):")
        common.print_table(joined_profile(entry["entries"], mode), [
            ("B", "B", "d"), ("M", "M", "d"), ("K", "K", "d"), ("N", "N", "d"), ("gated", "gated", ""),
            ("x/step", "cublas_calls", ".3g"), ("cuBLAS", "cublas_us", ".2f"),
            ("fuse=False x/step", "apart_calls", ".3g"), ("fuse=False", "apart_us", ".2f"),
            ("ratio", "ratio_apart", ".3f"), ("fuse=True x/step", "fused_calls", ".3g"),
            ("fuse=True", "fused_us", ".2f"), ("ratio", "ratio_fused", ".3f")])
        print("  a step: " + "; ".join(f"{r} GEMMs {e['gemm_us_per_step']:.1f}, everything {e['all_us_per_step']:.1f}"
                                      for r, e in es.items()))


# --------------------------------------------------------------- breakdown
def _is_linear(mod: nn.Module) -> bool:
    return isinstance(mod, nn.Linear) or type(mod).__name__ == "Conv1D"


def gemm_problems(m: Model, x: Tensor) -> tuple[list[dict], list[dict], list[dict]]:
    """Every Linear/Conv1D call of one eval forward of the untouched model, grouped by
    problem (M, K, N, bias, activation after swap(fuse=True), weight layout), in call order;
    the groups of projections swap(fuse=True) merges, grouped by shape (M, K, parts, bias);
    and the gated MLPs whose gate and up products it runs as one tiled_gated_linear, by shape (M, K, N)."""
    calls = []
    hooks = [mod.register_forward_pre_hook(lambda mod, a, name=name: calls.append((name, a[0].shape)))
             for name, mod in m.module.named_modules() if _is_linear(mod)]
    m.module.eval()
    try:
        with torch.no_grad():
            m.logits(x)
    finally:
        for h in hooks:
            h.remove()
    mods = dict(m.module.named_modules())
    with routed(m.module, "swap(fuse=True)"):
        acts = {n: getattr(mod, "activation", None) for n, mod in m.module.named_modules()}
        # each merged group once (its members share it): the members' qualified names
        merged = {id(mod.merged): [name.rpartition(".")[0] + "." * ("." in name) + n for n in mod.merged.names]
                  for name, mod in m.module.named_modules() if getattr(mod, "merged", None) is not None}
        # each gated MLP: its gate and up layers' qualified names, and the activation
        gated = [([f"{name}.{n}" for n in mod.names[:2]], mod.activation)
                 for name, mod in m.module.named_modules() if isinstance(mod, TiledGatedMLP)]
    groups: dict = {}
    rows: dict = {}  # each called module's M
    for name, shape in calls:
        mod = mods[name]
        conv1d = not isinstance(mod, nn.Linear)
        w = mod.weight.t() if conv1d else mod.weight  # as F.linear's weight: (N, K)
        M = rows[name] = shape[:-1].numel()
        act = acts.get(name)
        key = (M, w.shape[1], w.shape[0], mod.bias is not None, act, conv1d)
        g = groups.setdefault(key, {"modules": [], "weight": w, "bias": mod.bias})
        g["modules"].append(name)
    problems = [{"M": k[0], "K": k[1], "N": k[2], "bias": k[3], "activation": k[4],
                 "op": "linear+act" if k[4] else "linear", "weight_layout": "KxN (Conv1D)" if k[5] else "NxK (Linear)",
                 "count": len(g["modules"]), "modules": g["modules"], "_w": g["weight"], "_b": g["bias"]}
                for k, g in groups.items()]
    shapes: dict = {}
    for names in merged.values():
        if names[0] not in rows:  # not called in the forward
            continue
        lins = [mods[n] for n in names]  # the original modules: the same Parameters
        has_bias = lins[0].bias is not None
        key = (rows[names[0]], lins[0].in_features, tuple(lin.out_features for lin in lins), has_bias)
        e = shapes.setdefault(key, {"M": key[0], "K": key[1], "parts": list(key[2]), "bias": has_bias, "count": 0,
                                    "modules": [], "_w": [lin.weight for lin in lins],
                                    "_b": [lin.bias for lin in lins] if has_bias else None})
        e["count"] += 1
        e["modules"].append("+".join(names))
    gshapes: dict = {}
    for names, act in gated:
        if names[0] not in rows:
            continue
        gate, up = mods[names[0]], mods[names[1]]
        key = (rows[names[0]], gate.in_features, gate.out_features, act)
        e = gshapes.setdefault(key, {"M": key[0], "K": key[1], "N": key[2], "activation": act, "count": 0,
                                     "modules": [], "_w": (gate.weight, up.weight)})
        e["count"] += 1
        e["modules"].append("+".join(names))
    return problems, list(shapes.values()), list(gshapes.values())


def paired_ms(fns: dict[str, Callable[[], object]], device: str, rep_ms: int) -> dict[str, float]:
    """Median ms of each of fns (common.bench), measured in the order given and then in reverse, each the
    mean of its two. A long product heats the GPU toward its power cap, so whichever is measured second runs
    slower: on an H100, x @ W.t() 4096x2048x32000 for 200 ms each, cuBLAS first took 0.766 ms a call and
    tilelab after it 0.831, while each alone for 3 s settled at 0.858-0.868 ms, the two alike (SM clock
    ~1450 MHz and ~690 W either way)."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for order in (list(fns), list(fns)[::-1]):
        for k in order:
            times[k].append(common.bench(fns[k], device, warmup_ms=10, rep_ms=rep_ms))
    return {k: sum(v) / len(v) for k, v in times.items()}


def checked_err(got: Tensor, ref64: Tensor, what: str) -> float:
    """max |got - ref| / max |ref| over the rows given (the caller's first 256), against a float64 reference;
    above the dtype's tolerance it raises: a breakdown times only products that are right."""
    err = float((got.double() - ref64).abs().max() / ref64.abs().max().clamp_min(1e-30)) if got.numel() else 0.0
    tol = 3e-2 if got.dtype in (torch.float16, torch.bfloat16) else 1e-4
    if not err <= tol:
        raise RuntimeError(f"{what}: error {err:.3g} against float64 exceeds {tol:g}")
    return err


def breakdown(m: Model, x: Tensor, modes: list[str], args) -> dict:
    """Time each unique GEMM problem of the model in isolation: act(F.linear(x, W, b)) (cuBLAS)
    vs tiled_linear(x, W, b, activation=act), forward and (train in modes) forward+backward,
    and then the backward's two products alone (dX, dW: torch.mm vs tiled_mm, with the row picked);
    each pair in both orders (paired_ms). Each of tilelab's products is checked against float64 first
    (checked_err; `rel_err`, `dx_rel_err`, `dw_rel_err`).
    Returns {"problems": [...], "<side>_<fwd|train>_gemm_ms_per_step": sum of count x time}."""
    dev, rep = args.device, args.gemm_rep_ms
    out = []
    problems, merged, gated = gemm_problems(m, x)
    for p in problems:
        w, b, act = p.pop("_w"), p.pop("_b"), p["activation"]
        a = torch.randn(p["M"], p["K"], device=dev, dtype=w.dtype)
        e = tilelab_torch.explain(a, w.t(), bias=b, activation=act)
        p.update(dtype=str(w.dtype).replace("torch.", ""), kernel=e.kernel, reason=e.reason)
        ref = lambda a: ACTIVATIONS[act](F.linear(a, w, b))  # noqa: E731
        til = lambda a: tilelab_torch.tiled_linear(a, w, b, activation=act)  # noqa: E731
        with torch.no_grad():
            a64 = a[:256].double()
            ref64 = ACTIVATIONS[act](F.linear(a64, w.double(), None if b is None else b.double()))
            p["rel_err"] = checked_err(til(a)[:256], ref64, f"tiled_linear {p['M']}x{p['K']}x{p['N']} ({e.kernel})")
        fwd = {"cublas": lambda: ref(a), "tilelab": lambda: til(a)}
        if act:  # the same product with the activation left to torch (what swap(fuse=False) runs)
            fwd["tilelab_unfused"] = lambda: ACTIVATIONS[act](tilelab_torch.tiled_linear(a, w, b))
        with torch.no_grad():
            p.update({f"{k}_fwd_ms": v for k, v in paired_ms(fwd, dev, rep).items()})
        p["fwd_ratio"] = p["cublas_fwd_ms"] / p["tilelab_fwd_ms"]
        if "train" in modes:
            ag = a.detach().requires_grad_()
            wrt = [ag, w] + ([b] if b is not None else [])
            gy = torch.randn(p["M"], p["N"], device=dev, dtype=w.dtype)
            train = {side: (lambda f=f: torch.autograd.grad(f(ag), wrt, gy))
                     for side, f in (("cublas", ref), ("tilelab", til))}
            p.update({f"{k}_train_ms": v for k, v in paired_ms(train, dev, rep).items()})
            p["train_ratio"] = p["cublas_train_ms"] / p["tilelab_train_ms"]
            # The backward's two products alone, in the layouts autograd hands them over, with the row
            # the dispatcher picks: dX = dY @ W, and dW = dY^T @ X (Linear) or X^T @ dY (Conv1D).
            conv1d = p["weight_layout"].startswith("KxN")
            for g, (lhs, rhs) in (("dx", (gy, w)), ("dw", (a.t(), gy) if conv1d else (gy.t(), a))):
                p[f"{g}_kernel"] = tilelab_torch.explain(lhs, rhs).kernel
                with torch.no_grad():
                    p[f"{g}_rel_err"] = checked_err(tilelab_torch.tiled_mm(lhs, rhs)[:256],
                                                    lhs[:256].double() @ rhs.double(),
                                                    f"{g} {tuple(lhs.shape)} @ {tuple(rhs.shape)} ({p[f'{g}_kernel']})")
                    ms = paired_ms({"cublas": lambda: torch.mm(lhs, rhs),
                                    "tilelab": lambda: tilelab_torch.tiled_mm(lhs, rhs)}, dev, rep)
                p.update({f"{k}_{g}_ms": v for k, v in ms.items()})
                p[f"{g}_ratio"] = p[f"cublas_{g}_ms"] / p[f"tilelab_{g}_ms"]
        out.append(p)
    for what in ("fwd", "train"):
        for side in ("cublas", "tilelab"):
            total = sum(p[f"{side}_{what}_ms"] * p["count"] for p in out if f"{side}_{what}_ms" in p)
            for p in out:
                if f"{side}_{what}_ms" in p:
                    p[f"share_{what}_{side}"] = p[f"{side}_{what}_ms"] * p["count"] / total
    totals = {f"{side}_{what}_gemm_ms_per_step": sum(p[f"{side}_{what}_ms"] * p["count"] for p in out)
              for side in ("cublas", "tilelab") for what in ("fwd", "train") if f"{side}_{what}_ms" in out[0]}
    return {"problems": sorted(out, key=lambda p: -p["share_fwd_tilelab"]), "merged": merged_products(merged, args),
            "gated": gated_products(gated, args), **totals}


def merged_products(groups: list[dict], args) -> list[dict]:
    """The projections swap(fuse=True) merges (MergedProjections; gemm_problems' groups), one entry per
    shape: the members' products apart (what cuBLAS and swap(fuse=False) run) against the one merged
    product, forward; the merged product is checked against float64 first (checked_err, `rel_err`)."""
    out, rep = [], args.gemm_rep_ms
    for e in groups:
        ws, bs = e.pop("_w"), e.pop("_b")
        a = torch.randn(e["M"], e["K"], device=args.device, dtype=ws[0].dtype)
        bi = bs if bs is not None else [None] * len(ws)
        with torch.no_grad():
            w, b = torch.cat(ws), (torch.cat(bs) if bs is not None else None)  # the merged weights, a copy
            e.update(N=int(w.shape[0]), kernel=tilelab_torch.explain(a, w.t(), bias=b).kernel)
            ref64 = F.linear(a[:256].double(), w.double(), None if b is None else b.double())
            e["rel_err"] = checked_err(tilelab_torch.tiled_linear(a, w, b)[:256], ref64,
                                       f"merged tiled_linear {e['M']}x{e['K']}x{e['N']} ({e['kernel']})")
            fns = {}
            for side, f in (("cublas", F.linear), ("tilelab", tilelab_torch.tiled_linear)):
                fns[f"{side}_apart"] = lambda f=f: [f(a, wi, bj) for wi, bj in zip(ws, bi)]
                fns[f"{side}_merged"] = lambda f=f: f(a, w, b)
            e.update({f"{k}_fwd_ms": v for k, v in paired_ms(fns, args.device, rep).items()})
        e["ratio"] = e["cublas_apart_fwd_ms"] / e["tilelab_merged_fwd_ms"]
        out.append(e)
    return out


def gated_products(groups: list[dict], args) -> list[dict]:
    """The gated MLPs swap(fuse=True) runs as one tiled_gated_linear (TiledGatedMLP; gemm_problems' groups),
    one entry per shape, forward: act(x @ Wg^T) * (x @ Wu^T) as cuBLAS's two products with torch's activation
    and multiply, as swap(fuse=False)'s and swap(fuse=True)'s tilelab products (the activation fused into the
    first) with torch's multiply, and as the one op. The op's output is checked against float64 first (its
    first 256 rows; `rel_err`: max |error| / max |reference|), and an error above the dtype's tolerance raises."""
    out, rep = [], args.gemm_rep_ms
    for e in groups:
        wg, wu = e.pop("_w")
        act, f_act = e["activation"], ACTIVATIONS[e["activation"]]
        a = torch.randn(e["M"], e["K"], device=args.device, dtype=wg.dtype)
        e["kernel"] = tilelab_torch.explain_gated(a, wg, wu, activation=act).kernel
        with torch.no_grad():
            a64 = a[:256].double()
            ref = f_act(a64 @ wg.double().t()) * (a64 @ wu.double().t())
            e["rel_err"] = checked_err(tilelab_torch.tiled_gated_linear(a, wg, wu, activation=act)[:256], ref,
                                       f"tiled_gated_linear {e['M']}x{e['K']}x{e['N']} ({e['kernel']})")
        til = tilelab_torch.tiled_linear
        fns = {"cublas": lambda: f_act(F.linear(a, wg)) * F.linear(a, wu),
               "tilelab_unfused": lambda: f_act(til(a, wg)) * til(a, wu),
               "tilelab_apart": lambda: til(a, wg, activation=act) * til(a, wu),
               "tilelab_gated": lambda: tilelab_torch.tiled_gated_linear(a, wg, wu, activation=act)}
        with torch.no_grad():
            e.update({f"{k}_fwd_ms": v for k, v in paired_ms(fns, args.device, rep).items()})
        e["ratio"] = e["cublas_fwd_ms"] / e["tilelab_gated_fwd_ms"]
        out.append(e)
    return out


# -------------------------------------------------------------------- main
def logit_check(m: Model, x: Tensor) -> dict:
    """Per tilelab routing: max |logits - cuBLAS logits|, bitwise equality, the SwapReport's
    counts (eval forward, no grad, the same inputs), or the error."""
    m.module.eval()
    out = {}
    with torch.no_grad():
        ref = m.logits(x)
        for r in ROUTINGS[1:]:
            try:
                with routed(m.module, r) as rep:
                    y = m.logits(x)
                    counts = {k: len(getattr(rep, k)) for k in ("swapped", "fused", "merged", "gated", "left")}
                out[r] = {"max_abs_diff": (y.float() - ref.float()).abs().max().item(),
                          "bitwise_equal": torch.equal(y, ref), **counts}
                del y
            except Exception as e:  # noqa: BLE001 - reported in the row
                out[r] = {"max_abs_diff": None, "bitwise_equal": None, "error": f"{type(e).__name__}: {first_line(e)}"}
    return out


def config_rows(m: Model, dkey: str, batch: int, seq: Optional[int], x: Tensor, y: Tensor, snapshot: list,
                graph_opts: list[bool], args) -> Iterator[dict]:
    """The rows of one model config: per mode and graphs, `args.rounds` interleaved rounds of cuBLAS
    then each tilelab routing (why: the module docstring), each routing's time the median of its
    rounds; `*_ms_rounds` keep every round's time, `ratio_rounds` each round's ratio. A routing that fails in
    any round has no time."""
    check = logit_check(m, x)
    per_step = batch * (seq or 1)
    for mode in args.modes:
        for graphs in graph_opts:
            times, failed = {r: [] for r in ROUTINGS}, {}
            for _ in range(args.rounds):
                if not graphs and args.interleave == "steps":
                    for r, t in measure_alternating(m, mode, x, y, snapshot, args, failed).items():
                        times[r].append(t)
                    continue
                for r in ROUTINGS:
                    if r in failed:
                        continue
                    try:
                        times[r].append(measure(m, r, mode, graphs, x, y, snapshot, args))
                    except Exception as e:  # noqa: BLE001 - one failed routing must not end the sweep
                        failed[r] = failure(r, e)
            ms = {r: None if r in failed else statistics.median(v) for r, v in times.items()}
            c = ms["cublas"]
            for r in ROUTINGS[1:]:
                t, chk = ms[r], dict(check[r])
                err = chk.pop("error", None)
                note = "; ".join(filter(None, [m.note, failed.get("cublas"), failed.get(r),
                                               err and f"logit check failed: {err}"]))
                yield {"model": m.row_name, "dtype": dkey, "mode": mode, "graphs": graphs, "routing": r,
                       "batch": batch, "seq": seq,
                       "tilelab_per_s": per_step / t * 1e3 if t else None,
                       "cublas_per_s": per_step / c * 1e3 if c else None,
                       "ratio": c / t if (c and t) else None, **chk, "note": note,
                       "unit": m.unit, "name": m.name, "tilelab_ms": t, "cublas_ms": c,
                       "tilelab_ms_rounds": times[r], "cublas_ms_rounds": times["cublas"],
                       "ratio_rounds": ratios_by_round(times["cublas"], times[r])}


def parse_configs(specs: list[str]) -> dict:
    """'gpt2=8x512,1x128' 'vit=64,8' -> {model: [(batch, seq or None), ...]}."""
    out = {}
    for spec in specs:
        key, _, rest = spec.partition("=")
        if key not in MODELS or not rest:
            raise SystemExit(f"--configs: expected MODEL=BxT[,BxT...] (vit: MODEL=B[,B...]) with MODEL in "
                             f"{', '.join(MODELS)}, got {spec!r}")
        try:
            out[key] = [(int(c.split("x")[0]), int(c.split("x")[1]) if "x" in c else None) for c in rest.split(",")]
        except (ValueError, IndexError):
            raise SystemExit(f"--configs: bad batch x seq in {spec!r} (e.g. gpt2=8x512,1x128 or vit=64,8)")
        if any((s is None) != (key == "vit") for _, s in out[key]):
            raise SystemExit(f"--configs: {key} takes {'a batch only' if key == 'vit' else 'BxT'}, got {spec!r}")
    return out


def out_path(out: str) -> str:
    return os.path.join(out, "models.json") if os.path.isdir(out) or not out.endswith(".json") else out


def rounds_span(row: dict) -> Optional[str]:
    """'lo-hi' of a row's per-round ratios (ratio_rounds), for the printed table."""
    rr = row.get("ratio_rounds")
    return f"{min(rr):.2f}-{max(rr):.2f}" if rr else None


def print_rows(rows: list[dict]) -> None:
    rows = [{**r, "rounds_span": rounds_span(r)} for r in rows]
    common.print_table(rows, [
        ("model", "model", ""), ("dtype", "dtype", ""), ("mode", "mode", ""), ("graphs", "graphs", ""),
        ("routing", "routing", ""), ("B", "batch", ""), ("T", "seq", ""), ("tilelab/s", "tilelab_per_s", ".4g"),
        ("cuBLAS/s", "cublas_per_s", ".4g"), ("ratio", "ratio", ".3f"), ("rounds", "rounds_span", ""),
        ("max|dlogit|", "max_abs_diff", ".3g"),
        ("bitwise", "bitwise_equal", ""), ("note", "note", "")])


def print_breakdown(entry: dict) -> None:
    print(f"\nGEMMs of {entry['model']} {entry['dtype']} B={entry['batch']} T={entry['seq']} "
          f"(per problem in isolation; share = count x time / the step's GEMM time):")
    common.print_table([dict(p, first_module=p["modules"][0]) for p in entry["problems"]], [
        ("op", "op", ""), ("M", "M", "d"), ("K", "K", "d"), ("N", "N", "d"), ("x/step", "count", "d"),
        ("kernel", "kernel", ""), ("cuBLAS ms", "cublas_fwd_ms", ".4f"), ("tilelab ms", "tilelab_fwd_ms", ".4f"),
        ("fwd ratio", "fwd_ratio", ".3f"), ("fwd share", "share_fwd_tilelab", ".1%"),
        ("train ratio", "train_ratio", ".3f"), ("train share", "share_train_tilelab", ".1%"),
        ("dX ratio", "dx_ratio", ".3f"), ("dW ratio", "dw_ratio", ".3f"), ("dW kernel", "dw_kernel", ""),
        ("first module", "first_module", "")])
    if entry.get("merged"):
        print("\nMerged projections (swap(fuse=True); ratio = cuBLAS apart / tilelab merged):")
        common.print_table([dict(e, parts="+".join(map(str, e["parts"])), first=e["modules"][0])
                            for e in entry["merged"]], [
            ("M", "M", "d"), ("K", "K", "d"), ("N", "parts", ""), ("x/step", "count", "d"), ("kernel", "kernel", ""),
            ("cuBLAS apart", "cublas_apart_fwd_ms", ".4f"), ("cuBLAS merged", "cublas_merged_fwd_ms", ".4f"),
            ("tilelab apart", "tilelab_apart_fwd_ms", ".4f"), ("tilelab merged", "tilelab_merged_fwd_ms", ".4f"),
            ("ratio", "ratio", ".3f"), ("first", "first", "")])
    if entry.get("gated"):
        print("\nGated MLPs (swap(fuse=True); ratio = cuBLAS / tilelab gated):")
        common.print_table([dict(e, first=e["modules"][0]) for e in entry["gated"]], [
            ("M", "M", "d"), ("K", "K", "d"), ("N", "N", "d"), ("act", "activation", ""), ("x/step", "count", "d"),
            ("kernel", "kernel", ""), ("cuBLAS", "cublas_fwd_ms", ".4f"),
            ("tilelab unfused", "tilelab_unfused_fwd_ms", ".4f"), ("tilelab apart", "tilelab_apart_fwd_ms", ".4f"),
            ("tilelab gated", "tilelab_gated_fwd_ms", ".4f"), ("ratio", "ratio", ".3f"), ("first", "first", "")])


def main(argv: Optional[list[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                   help="cuda (the default where torch sees a GPU) or cpu")
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    p.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=list(DTYPES))
    p.add_argument("--modes", nargs="+", default=["forward", "train"], choices=["forward", "train"])
    p.add_argument("--graphs", default="both", choices=["both", "eager", "graphs"],
                   help="eager steps, CUDA-graph replay, or both (CUDA only; the CPU runs eager)")
    p.add_argument("--configs", nargs="+", default=[], metavar="MODEL=BxT,...",
                   help="batch x seq per model, replacing its defaults: gpt2=8x512,1x128 llama=4x1024,1x128 "
                        "vit=64,8 (vit: batch only)")
    p.add_argument("--quick", action="store_true", help="only the first config of each model")
    p.add_argument("--smoke", action="store_true", help="tiny models and configs, few steps (checks the script)")
    p.add_argument("--fallback", action="store_true", help="the self-contained stand-ins even where "
                                                           "transformers/timm are installed")
    p.add_argument("--breakdown", action="store_true", help="per-GEMM breakdown of each model config")
    p.add_argument("--profile", action="store_true", help="each model config's GEMMs as the model runs them: "
                                                           "eager steps of every routing under torch.profiler")
    p.add_argument("--rep-ms", type=float, default=200, help="timed steps per measurement: as many as fit "
                                                              "in this time, at least --min-steps")
    p.add_argument("--min-steps", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds of every routing per mode and "
                                                         "graphs setting; each time is the median of its rounds")
    p.add_argument("--interleave", default="routings", choices=["routings", "steps"],
                   help="eager steps: each routing's steps in a block of their own within a round (routings), or "
                        "every routing's steps alternated one by one on copies of the model (steps: a drift of the "
                        "host's pace reaches all alike; three copies' memory)")
    p.add_argument("--gemm-rep-ms", type=int, default=40, help="timing budget per GEMM of the breakdown")
    p.add_argument("--out", default="out/models.json", help="JSON file (or folder: <folder>/models.json); "
                                                             "rewritten after every model config")
    args = p.parse_args(argv)
    cuda = args.device.startswith("cuda")
    if cuda and not torch.cuda.is_available():
        raise SystemExit("--device cuda: torch sees no CUDA device (use --device cpu --smoke)")
    if not hasattr(tilelab_torch, "swap"):
        raise SystemExit("tilelab_torch.swap is missing: this script needs the swap/unswap API")
    configs = dict(SMOKE_CONFIGS if args.smoke else CONFIGS)
    configs.update(parse_configs(args.configs))
    if args.quick:
        configs = {k: v[:1] for k, v in configs.items()}
    if args.rounds < 1:
        raise SystemExit(f"--rounds must be >= 1, got {args.rounds}")
    if args.smoke:
        args.rep_ms, args.min_steps, args.gemm_rep_ms = min(args.rep_ms, 20), min(args.min_steps, 2), 5
        args.rounds = min(args.rounds, 2)
    graph_opts = {"both": [False, True], "eager": [False], "graphs": [True]}[args.graphs] if cuda else [False]
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 rows: IEEE fp32 on both sides
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")

    path = out_path(args.out)
    header = common.metadata(args.device, "fp32 highest (no TF32)")
    header.update(gpu=header["device"], command=" ".join(["python3", "benchmarks/model_ab.py"] + sys.argv[1:]
                                                           if argv is None else ["model_ab.py"] + list(argv)),
                  graphs=GRAPHS_METHOD if cuda else "not measured on the CPU",
                  timing="median ms per step (CUDA events on CUDA) after two untimed steps (graphs: and three "
                         "warm-up steps before the capture); the median of --rounds interleaved rounds of every "
                         "routing (cuBLAS, then each tilelab routing, then again)"
                         + ("; eager steps alternated one by one, routings on copies of the model, each step timed "
                            "alone, the order rotated every step" if args.interleave == "steps" else ""),
                  rounds=args.rounds, interleave=args.interleave,
                  logits="max_abs_diff/bitwise_equal: eval forward of the routing vs the untouched model")
    if args.breakdown:
        header["breakdown_timing"] = ("each product alone, do_bench median (L2 flushed) per call, the sides "
                                      "measured in turn and then in reverse order, each the mean of its two")
    if args.profile:
        header["profile_timing"] = ("eager steps under torch.profiler (record_shapes) after two untimed ones; a "
                                    "product's time is its outermost GEMM op's with everything launched under it: "
                                    + ("the kernels' durations (CUPTI)" if cuda else "CPU time"))
    rows, bd, prof = [], [], []
    t_start = time.perf_counter()

    def save(complete: bool) -> None:
        common.write_json(path, {"header": dict(header, complete=complete), "rows": rows, "breakdown": bd,
                                 "profile": prof})

    for key in args.models:
        for dkey in args.dtypes:
            m = build(key, args.smoke, args.fallback, args.device, DTYPES[dkey])
            snapshot = [q.detach().clone() for q in m.module.parameters()]
            for batch, seq in configs[key]:
                x, y = m.inputs(batch, seq)
                for row in config_rows(m, dkey, batch, seq, x, y, snapshot, graph_opts, args):
                    rows.append(row)
                    print(f"[{time.perf_counter() - t_start:6.1f}s] {m.row_name} {dkey} B={batch} T={seq} "
                          f"{row['mode']} {'graphs' if row['graphs'] else 'eager'} {row['routing']}: ratio "
                          f"{'-' if row['ratio'] is None else format(row['ratio'], '.3f')}"
                          f"{'  ' + row['note'] if row['note'] else ''}", flush=True)
                restore(m.module, snapshot)  # the weights as built, for the breakdown and the next config
                if args.breakdown:
                    entry = {"model": m.row_name, "dtype": dkey, "batch": batch, "seq": seq}
                    try:
                        entry.update(breakdown(m, x, args.modes, args))
                        print_breakdown(entry)
                    except Exception as e:  # noqa: BLE001 - the model rows are worth keeping
                        entry["error"] = f"{type(e).__name__}: {first_line(e)}"
                        print(f"breakdown of {key} {dkey} B={batch} T={seq} failed: {entry['error']}")
                    bd.append(entry)
                if args.profile:
                    entry = {"model": m.row_name, "dtype": dkey, "batch": batch, "seq": seq,
                             "timing": "device" if cuda else "cpu", "entries": []}
                    try:
                        for mode in args.modes:
                            for r in ROUTINGS:
                                entry["entries"].append(in_model(m, r, mode, x, y, snapshot, args))
                        print_profile(entry)
                    except Exception as e:  # noqa: BLE001 - the model rows are worth keeping
                        entry["error"] = f"{type(e).__name__}: {first_line(e)}"
                        print(f"profile of {key} {dkey} B={batch} T={seq} failed: {entry['error']}")
                    restore(m.module, snapshot)
                    prof.append(entry)
                save(complete=False)
            del m, snapshot
            if cuda:
                torch.cuda.empty_cache()
    save(complete=True)
    print(f"\n{header['gpu']}, torch {header['torch']}, fp32 without TF32; graphs: "
          f"{header['graphs']}\nratio = tilelab/s / cuBLAS/s (> 1: tilelab faster)\n")
    print_rows(rows)
    print(f"\nwrote {path} ({time.perf_counter() - t_start:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
