"""Typed wrappers and fake (meta) kernels for torch.ops.tilelab.

The CPU/CUDA kernels are registered by the extension (csrc/cpu/ops_cpu.cpp,
csrc/cuda/ops_cuda.cpp), the autograd rules by csrc/autograd.cpp, the autocast
rules (cast as for torch.mm) by csrc/autocast.cpp.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

SUPPORTED_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
#: torch's own function for each ``tiled_linear`` activation (``None``: none): what
#: ``tiled_linear(x, w, b, activation=a)`` equals, ``TORCH_ACTIVATIONS[a](F.linear(x, w, b))``.
TORCH_ACTIVATIONS = {
    None: lambda y: y,
    "relu": torch.relu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda y: torch.nn.functional.gelu(y, approximate="tanh"),
    "silu": torch.nn.functional.silu,
}
#: What ``tiled_linear(..., activation=)`` accepts besides ``None``.
ACTIVATIONS = tuple(a for a in TORCH_ACTIVATIONS if a is not None)


def tiled_mm(a: Tensor, b: Tensor, *, variant: Optional[str] = None, tile: Optional[int] = None) -> Tensor:
    """Matrix product ``a @ b`` with tilelab's kernels; the semantics of :func:`torch.mm`.

    Args:
        a: ``(M, K)`` tensor, float32, float64, float16 or bfloat16.
        b: ``(K, N)`` tensor of the same dtype and device.
        variant: force a kernel family (``"naive"``, ``"tiled"``, ``"padded"``,
            ``"padded_nopad"``, ...) or a full config name from :func:`kernels`;
            ``None`` (or ``"auto"``) lets the dispatcher choose. CPU tensors
            always run the ``"cpu"`` kernel.
        tile: the tile size of the forced variant (e.g. 8, 16, 32); ``None``
            takes the variant's largest tile that runs on the device.

    Returns:
        A new contiguous ``(M, N)`` tensor in the inputs' dtype. Half types
        accumulate in fp32; fp32 uses IEEE FMA arithmetic (no TF32).

    Either operand may be row-major or column-major (e.g. ``x.t()``) and is used
    in place; any other strides cost one contiguous copy. Differentiable.
    """
    return torch.ops.tilelab.tiled_mm.default(a, b, variant=variant, tile=tile)


def tiled_bmm(a: Tensor, b: Tensor, *, variant: Optional[str] = None, tile: Optional[int] = None) -> Tensor:
    """Batched product ``a @ b`` with tilelab's kernels; the semantics of :func:`torch.bmm`.

    Args:
        a: ``(B, M, K)`` tensor, float32, float64, float16 or bfloat16.
        b: ``(B, K, N)`` tensor of the same dtype and device.
        variant, tile: as for :func:`tiled_mm`.

    Returns:
        A new contiguous ``(B, M, N)`` tensor. Each matrix may be row- or
        column-major with any batch stride, including 0 (``x.expand(B, -1, -1)``):
        such operands are read in place, anything else costs one contiguous copy.
        Differentiable.
    """
    return torch.ops.tilelab.tiled_bmm.default(a, b, variant=variant, tile=tile)


def tiled_addmm(bias: Tensor, a: Tensor, b: Tensor, *, variant: Optional[str] = None,
                tile: Optional[int] = None) -> Tensor:
    """``a @ b + bias`` with the bias added in the kernel's epilogue; :func:`torch.addmm` with beta = alpha = 1.

    Args:
        bias: broadcastable to ``(M, N)`` like torch.addmm's input: ``()``, ``(N,)``,
            ``(1, N)``, ``(M, 1)``, ``(M, N)``; same dtype and device as ``a``.
        a: ``(M, K)``; b: ``(K, N)``.
        variant, tile: as for :func:`tiled_mm`.

    Returns:
        A new contiguous ``(M, N)`` tensor; the sum is rounded once (accumulator
        plus bias, then to the dtype). Differentiable.
    """
    return torch.ops.tilelab.tiled_addmm.default(bias, a, b, variant=variant, tile=tile)


def tiled_linear(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, *, activation: Optional[str] = None,
                 variant: Optional[str] = None, tile: Optional[int] = None) -> Tensor:
    """``act(F.linear(x, weight, bias))``: the bias in the kernel's epilogue, the activation too
    where the kernel applies it (see ``activation``).

    Args:
        x: ``(..., K)``, any leading dims (viewed as ``(rows, K)``; a copy only
            when they cannot be flattened without one, as in F.linear).
        weight: ``(N, K)``, as ``nn.Linear`` stores it; read in place as the
            column-major ``weight.t()``.
        bias: ``(N,)`` or ``None``.
        activation: ``None``, ``"relu"``, ``"gelu"`` (F.gelu), ``"gelu_tanh"``
            (F.gelu(approximate="tanh"), transformers' ``gelu_new``) or ``"silu"``.
            Where the kernel applies it (CPU, ``gemv``, ``gemv_mma``,
            ``gemv_split``, the textbook kernels, split-K's reduction, the
            ``hopper`` rows' TMA-store epilogue) it is
            computed in fp32 (fp64 for float64) on accumulator + bias, then
            rounded once to the dtype; after the ``blocked`` and ``tensorcore``
            rows (and a hopper output stored from registers) torch's op applies
            it to the rounded product, as ``F.gelu(F.linear(...))`` does.
        variant, tile: as for :func:`tiled_mm`.

    Returns:
        A new ``(..., N)`` tensor. Differentiable: with no gradient to record the
        fused kernel runs. With one, the product and its pre-activation ``y`` come
        out of one call (on CUDA one kernel stores both, where a ``hopper`` row
        with the TMA-store epilogue runs ``x @ W.t()`` in one slice of K; else the
        product, then torch's activation), ``y`` is saved for the activation's
        backward as ``F.gelu(F.linear(...))`` saves it (``x`` only if ``weight``
        needs a gradient, ``weight`` only if ``x`` does), and the activation's own
        pass over the output is gone; double backward works (through the saved ``y``).
        Under autocast, cast like ``F.linear``.
    """
    return torch.ops.tilelab.tiled_linear.default(x, weight, bias, activation=activation, variant=variant, tile=tile)


def tiled_gated_linear(x: Tensor, w_gate: Tensor, w_up: Tensor, *, activation: Optional[str] = "silu") -> Tensor:
    """``act(F.linear(x, w_gate)) * F.linear(x, w_up)``: the first half of a gated MLP
    (Llama's ``act_fn(gate_proj(x)) * up_proj(x)``; ``"silu"``: SwiGLU, ``"gelu"``/``"gelu_tanh"``: GeGLU).

    Args:
        x: ``(..., K)``, any leading dims (viewed as ``(rows, K)``).
        w_gate, w_up: ``(N, K)`` each, of one shape, dtype and device (``nn.Linear`` weights, no bias).
        activation: applied to the gate product, as for :func:`tiled_linear` (``None``: the bilinear GLU).

    Returns:
        A new ``(..., N)`` tensor. On an H100/H200 (an sm_90a build) with float16/bfloat16
        operands whose rows are 16-byte aligned and k-contiguous (row-major x and weights, K and N
        multiples of 8), one kernel computes both products: each stage of its pipeline holds the
        same rows of both weights, one wgmma per k-step multiplies x by both, and the epilogue
        takes ``act(gate) * up`` in fp32 and rounds once. The
        ``(..., N)`` gate and up products are never written. Elsewhere it runs composed: two
        :func:`tiled_linear` calls (the activation fused into the first) and their product, each
        rounded to the dtype, as the unfused MLP computes it. :func:`explain_gated` says which.
        Differentiable: with a gradient to record it always runs composed (each product saves
        what its backward needs, as ``nn.Linear`` does), so training gains nothing from the
        fused kernel and loses nothing to it; double backward works. Under autocast, cast like
        ``F.linear``.
    """
    return torch.ops.tilelab.tiled_gated_linear.default(x, w_gate, w_up, activation=activation)


def explain_gated(x: Tensor, w_gate: Tensor, w_up: Tensor, *, activation: Optional[str] = "silu",
                  sm: Optional[int] = None, num_sms: Optional[int] = None) -> Explanation:
    """Whether :func:`tiled_gated_linear` runs the fused kernel on these operands (and on which
    tiles) or the composed form, and why. CUDA tensors: on their device. CPU tensors: the CPU's
    composed form, or with ``sm`` and ``num_sms`` the choice on such a GPU (``torch.empty`` operands
    describe it, as for :func:`explain_described`). Needs a CUDA build of tilelab."""
    if not built_with_cuda():
        raise RuntimeError("tilelab: explain_gated needs a CUDA build of tilelab (this one is CPU-only)")
    d = json.loads(torch.ops.tilelab._explain_gated(x, w_gate, w_up, activation=activation, sm=sm,
                                                    num_sms=num_sms))
    return Explanation(kernel=d["kernel"], reason=d["reason"], details=d)


# ---------------------------------------------------------------- fake kernels
# The same rules, in the same words, as check_gemm_inputs in csrc/gemm.h: one
# helper per rule, shared by the three ops.
def _check_operands(op: str, a: Tensor, b: Tensor, batched: bool) -> None:
    d = 3 if batched else 2
    torch._check(a.dim() == d and b.dim() == d,
                 lambda: f"tilelab::{op}: expected {d}-D tensors, got a of shape {list(a.shape)} "
                         f"and b of shape {list(b.shape)}")
    if batched:
        torch._check(a.shape[0] == b.shape[0],
                     lambda: f"tilelab::{op}: batch sizes differ: a is {list(a.shape)} and b is {list(b.shape)}")
    torch._check(a.shape[-1] == b.shape[-2],
                 lambda: f"tilelab::{op}: inner dimensions differ: a is {list(a.shape)} and b is {list(b.shape)}")
    torch._check(a.dtype == b.dtype,
                 lambda: f"tilelab::{op}: a and b must have the same dtype, got {a.dtype} and {b.dtype}")
    torch._check(a.dtype in SUPPORTED_DTYPES,
                 lambda: f"tilelab::{op}: unsupported dtype {a.dtype}; supported: "
                         + ", ".join(str(d) for d in SUPPORTED_DTYPES))
    torch._check(a.device == b.device,
                 lambda: f"tilelab::{op}: a is on {a.device} and b is on {b.device}; both operands "
                         "must be on the same device")


def bias_broadcasts(bias: Tensor, M: int, N: int) -> bool:
    """torch.addmm's rule: the bias broadcasts to ``(M, N)``."""
    if bias.dim() > 2:
        return False
    if bias.dim() >= 1 and bias.shape[-1] not in (1, N):
        return False
    return bias.dim() < 2 or bias.shape[0] in (1, M)


def _check_bias(op: str, bias: Tensor, a: Tensor, M: int, N: int) -> None:
    torch._check(bias_broadcasts(bias, M, N),
                 lambda: f"tilelab::{op}: bias of shape {list(bias.shape)} does not broadcast to the "
                         f"output's shape [{M}, {N}]")
    torch._check(bias.dtype == a.dtype,
                 lambda: f"tilelab::{op}: bias must have the dtype of a and b ({a.dtype}), got {bias.dtype}")
    torch._check(bias.device == a.device,
                 lambda: f"tilelab::{op}: bias is on {bias.device} and a is on {a.device}")


# The real kernels always return a fresh contiguous tensor.
@torch.library.register_fake("tilelab::tiled_mm")
def _tiled_mm_fake(a: Tensor, b: Tensor, *, variant: Optional[str] = None, tile: Optional[int] = None) -> Tensor:
    _check_operands("tiled_mm", a, b, batched=False)
    return a.new_empty((a.shape[0], b.shape[1]))


@torch.library.register_fake("tilelab::tiled_bmm")
def _tiled_bmm_fake(a: Tensor, b: Tensor, *, variant: Optional[str] = None, tile: Optional[int] = None) -> Tensor:
    _check_operands("tiled_bmm", a, b, batched=True)
    return a.new_empty((a.shape[0], a.shape[1], b.shape[2]))


@torch.library.register_fake("tilelab::tiled_addmm")
def _tiled_addmm_fake(bias: Tensor, a: Tensor, b: Tensor, *, variant: Optional[str] = None,
                      tile: Optional[int] = None) -> Tensor:
    _check_operands("tiled_addmm", a, b, batched=False)
    M, N = a.shape[0], b.shape[1]
    _check_bias("tiled_addmm", bias, a, M, N)
    return a.new_empty((M, N))


@torch.library.register_fake("tilelab::tiled_linear")
def _tiled_linear_fake(x: Tensor, weight: Tensor, bias: Optional[Tensor] = None, *, activation: Optional[str] = None,
                       variant: Optional[str] = None, tile: Optional[int] = None) -> Tensor:
    torch._check(activation is None or activation in ACTIVATIONS,
                 lambda: f"tilelab::tiled_linear: unknown activation {activation!r}; valid: "
                         + ", ".join(repr(a) for a in ACTIVATIONS) + " (or None)")
    torch._check(weight.dim() == 2, lambda: "tilelab::tiled_linear: weight must be 2-D (out_features, in_features), "
                                            f"got shape {list(weight.shape)}")
    torch._check(x.dim() >= 1, lambda: "tilelab::tiled_linear: x must have at least 1 dimension")
    torch._check(x.shape[-1] == weight.shape[1],
                 lambda: f"tilelab::tiled_linear: x has {x.shape[-1]} features but weight of shape "
                         f"{list(weight.shape)} expects {weight.shape[1]}")
    torch._check(x.dtype == weight.dtype,
                 lambda: f"tilelab::tiled_linear: x and weight must have the same dtype, got {x.dtype} and "
                         f"{weight.dtype}")
    torch._check(x.dtype in SUPPORTED_DTYPES, lambda: f"tilelab::tiled_linear: unsupported dtype {x.dtype}")
    torch._check(x.device == weight.device,
                 lambda: f"tilelab::tiled_linear: x is on {x.device} and weight is on {weight.device}")
    N = weight.shape[0]
    if bias is not None:
        torch._check(bias.dim() == 0 or (bias.dim() == 1 and bias.shape[0] in (1, N)),
                     lambda: f"tilelab::tiled_linear: bias must have shape ({N},), got {list(bias.shape)}")
        _check_bias("tiled_linear", bias, x, 1, N)
    return x.new_empty((*x.shape[:-1], N))


@torch.library.register_fake("tilelab::_tiled_linear_pre")
def _tiled_linear_pre_fake(x: Tensor, weight: Tensor, bias: Optional[Tensor], *, activation: str,
                           variant: Optional[str] = None, tile: Optional[int] = None) -> tuple[Tensor, Tensor]:
    y = _tiled_linear_fake(x, weight, bias, activation=activation, variant=variant, tile=tile)
    return y, torch.empty_like(y)


@torch.library.register_fake("tilelab::tiled_gated_linear")
def _tiled_gated_linear_fake(x: Tensor, w_gate: Tensor, w_up: Tensor, *, activation: Optional[str] = "silu") -> Tensor:
    torch._check(activation is None or activation in ACTIVATIONS,
                 lambda: f"tilelab::tiled_gated_linear: unknown activation {activation!r}; valid: "
                         + ", ".join(repr(a) for a in ACTIVATIONS) + " (or None)")
    torch._check(w_gate.dim() == 2 and w_up.dim() == 2 and w_gate.shape == w_up.shape,
                 lambda: "tilelab::tiled_gated_linear: w_gate and w_up must be 2-D (out_features, in_features) of "
                         f"one shape, got {list(w_gate.shape)} and {list(w_up.shape)}")
    torch._check(w_gate.dtype == w_up.dtype and w_gate.device == w_up.device,
                 lambda: "tilelab::tiled_gated_linear: w_gate and w_up must have one dtype and device")
    return _tiled_linear_fake(x, w_gate)


# Autograd is registered in C++ (csrc/autograd.cpp, the Autograd dispatch key):
# a Python rule would run Python on every call.


@dataclass(frozen=True)
class KernelInfo:
    """One row of the kernel config table (``csrc/cuda/table.h``), or the CPU kernel."""

    name: str  #: unique config name, e.g. ``"tiled_16x16x16"``; also usable as ``variant=``
    variant: str  #: what ``variant=`` selects, e.g. ``"tiled"``
    family: str  #: kernel family (one header under ``csrc/cuda/kernels/``)
    tile: Optional[int]  #: what ``tile=`` selects (``None`` for the CPU kernel)
    device: str  #: ``"cuda"`` or ``"cpu"``
    block: tuple  #: block tile (BM, BN, BK)
    threads: int  #: threads per block
    pad: int  #: shared-memory padding ``kPad`` (elements per row of a k-contiguous tile)
    min_sm: int  #: lowest compute capability, major*10 + minor
    dtypes: tuple  #: supported dtypes
    compiled: bool  #: whether this build contains the kernel
    summary: str
    #: fp32 runs on TF32 tensor cores: usable only under
    #: ``torch.set_float32_matmul_precision("high")`` (or ``"medium"``)
    tf32: bool = False
    warps: tuple = (0, 0)  #: the (m, n) grid of MMA/FMA warps over the block tile; (0, 0): one thread per output
    stages: int = 0  #: shared-memory pipeline depth


@functools.lru_cache(maxsize=None)
def _table() -> dict:
    return json.loads(torch.ops.tilelab._kernel_table())


def built_with_cuda() -> bool:
    """Whether the extension was compiled with its CUDA kernels."""
    return bool(_table()["built_with_cuda"])


@functools.lru_cache(maxsize=None)
def _kernels() -> tuple:
    table = _table()
    rows = [
        KernelInfo(
            name=c["name"], variant=c["variant"], family=c["family"], tile=c["tile"], device="cuda",
            block=(c["bm"], c["bn"], c["bk"]), threads=c["threads"], pad=c["pad"], min_sm=c["min_sm"],
            dtypes=tuple(getattr(torch, d.split(".")[1]) for d in c["dtypes"]),
            compiled=bool(c["compiled"]), summary=c["summary"], tf32=bool(c["tf32"]),
            warps=tuple(c["warps"]), stages=c["stages"],
        )
        for c in table["configs"]
    ]
    rows.append(KernelInfo(
        name="cpu", variant="cpu", family="cpu", tile=None, device="cpu", block=(64, 256, 256),
        threads=torch.get_num_threads(), pad=0, min_sm=0, dtypes=SUPPORTED_DTYPES, compiled=True,
        summary="cache-tiled, multi-threaded CPU kernel (at::parallel_for)",
    ))
    return tuple(rows)


def kernels(device: Optional[str] = None) -> list[KernelInfo]:
    """The kernels tilelab has: every CUDA config of the table, then the CPU kernel.

    Args:
        device: ``"cuda"`` or ``"cpu"`` to list only that device's kernels.
    """
    return [k for k in _kernels() if device is None or k.device == device]


@dataclass(frozen=True)
class Explanation:
    """What :func:`explain` returns: the kernel the dispatcher picks and why."""

    kernel: str
    reason: str
    details: dict

    def __str__(self) -> str:
        d = self.details
        where = d.get("device_name", d.get("device"))
        batch = f"{d['batch']}x" if d.get("batch", 1) > 1 else ""
        way = f" ({d['split_reduce']})" if d.get("split_reduce") else ""
        split = f" split-K x{d['split_k']}{way}" if d.get("split_k", 1) > 1 else ""
        epilogue = (f" + bias({d['bias']})" if d.get("bias") else "") + \
                   (f" + {d['activation']}" if d.get("activation") else "")
        return (f"{batch}{d['M']}x{d['N']}x{d['K']}{epilogue} {d['dtype']} on {d.get('device')} ({where}): "
                f"{self.kernel}{split} -- {self.reason}")


def explain(a: Tensor, b: Tensor, *, bias: Optional[Tensor] = None, activation: Optional[str] = None,
            variant: Optional[str] = None, tile: Optional[int] = None) -> Explanation:
    """Which kernel ``tiled_mm(a, b, variant=variant, tile=tile)`` (or, for 3-D operands,
    ``tiled_bmm``) would run, and why.

    With ``bias`` (broadcast to the output's ``(M, N)`` as ``torch.addmm``'s) and/or
    ``activation`` (``"relu"``, ``"gelu"``, ``"gelu_tanh"``, ``"silu"``): the kernel of
    ``tiled_addmm(bias, a, b)`` or ``tiled_linear(x, weight, bias, activation=...)`` (``a = x``
    and ``b = weight.t()``), whose epilogue is part of the problem the dispatcher decides on
    (2-D operands only). ``details["bias"]`` says which dimensions the bias varies along
    (``"n"`` for ``F.linear``'s, ``"m"``, ``"mn"``, ``"scalar"``; ``None`` without one) and
    ``details["activation"]`` names the activation.

    Runs the same selection code as the op (including the validation of an
    override, so a bad ``variant``/``tile`` raises the same error) without
    launching anything.

    Example (what ``tiled_linear(x, w, b, activation="gelu")`` runs)::

        x = torch.randn(1, 8192, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(8192, device="cuda", dtype=torch.bfloat16)
        print(tilelab_torch.explain(x, w.t(), bias=b, activation="gelu"))
    """
    d = json.loads(torch.ops.tilelab._explain(a, b, bias=bias, activation=activation, variant=variant, tile=tile))
    return Explanation(kernel=d["kernel"], reason=d["reason"], details=d)


def explain_described(a: Tensor, b: Tensor, *, sm: int, num_sms: int, bias: Optional[Tensor] = None,
                      activation: Optional[str] = None, variant: Optional[str] = None,
                      tile: Optional[int] = None, mem_gbps: Optional[float] = None) -> Explanation:
    """Which CUDA kernel the dispatcher would pick for ``tiled_mm(a, b)`` (3-D: ``tiled_bmm``;
    with ``bias`` / ``activation``: ``tiled_addmm`` / ``tiled_linear``, as for :func:`explain`)
    on a GPU of compute capability ``sm`` (major*10 + minor, e.g. 90) with ``num_sms`` SMs
    and ``mem_gbps`` GB/s of peak DRAM bandwidth (the split-K estimate's bound; ``None``: an
    H200's, 4800; an H100 SXM has 3352), and why: :func:`explain` without that GPU. ``a``,
    ``b`` (and ``bias``) are CPU tensors whose shapes, strides, dtype and alignment describe the
    problem (``torch.empty`` is enough); the
    TF32 consent is torch's current setting, as for the op. Needs a CUDA build of tilelab
    (the dispatcher is part of it), not a GPU: the tests check the rules with it.

    Example::

        a, b = torch.empty(4096, 768, dtype=torch.bfloat16), torch.empty(768, 2304, dtype=torch.bfloat16)
        tilelab_torch.explain_described(a, b, sm=90, num_sms=132).kernel  # 'hopper_128x192x64'
    """
    if not built_with_cuda():
        raise RuntimeError("tilelab: explain_described needs a CUDA build of tilelab (this one is CPU-only)")
    d = json.loads(torch.ops.tilelab._explain_described(a, b, sm, num_sms, bias=bias, activation=activation,
                                                         variant=variant, tile=tile, mem_gbps=mem_gbps))
    return Explanation(kernel=d["kernel"], reason=d["reason"], details=d)
