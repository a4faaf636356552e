"""Typed wrappers, fake (meta) kernels and autograd rules for torch.ops.tilelab."""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

SUPPORTED_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)


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


def _check_mm_args(a: Tensor, b: Tensor) -> None:
    torch._check(a.dim() == 2 and b.dim() == 2,
                 lambda: f"tilelab::tiled_mm: expected 2-D tensors, got a of shape {list(a.shape)} "
                         f"and b of shape {list(b.shape)}")
    torch._check(a.shape[1] == b.shape[0],
                 lambda: f"tilelab::tiled_mm: inner dimensions differ: a is {list(a.shape)} and b is "
                         f"{list(b.shape)}")
    check_same_kind(a, b, "tiled_mm")


def check_same_kind(a: Tensor, b: Tensor, op: str) -> None:
    """The checks every op shares: one supported dtype, one device (fake kernels)."""
    torch._check(a.dtype == b.dtype,
                 lambda: f"tilelab::{op}: a and b must have the same dtype, got {a.dtype} and {b.dtype}")
    torch._check(a.dtype in SUPPORTED_DTYPES,
                 lambda: f"tilelab::{op}: unsupported dtype {a.dtype}; supported: "
                         + ", ".join(str(d) for d in SUPPORTED_DTYPES))
    torch._check(a.device == b.device,
                 lambda: f"tilelab::{op}: a is on {a.device} and b is on {b.device}; both operands "
                         "must be on the same device")


@torch.library.register_fake("tilelab::tiled_mm")
def _tiled_mm_fake(a: Tensor, b: Tensor, *, variant: Optional[str] = None, tile: Optional[int] = None) -> Tensor:
    _check_mm_args(a, b)
    # The real kernels always return a fresh contiguous (M, N) tensor.
    return a.new_empty((a.shape[0], b.shape[1]))


def save_operands_setup_context(ctx, inputs, keyword_only_inputs, output) -> None:
    """setup_context of the two-operand products (tiled_mm, tiled_bmm): the
    override (variant, tile) and each operand only where the other's gradient needs it."""
    a, b = inputs
    ctx.variant = keyword_only_inputs.get("variant")
    ctx.tile = keyword_only_inputs.get("tile")
    ctx.save_for_backward(a if ctx.needs_input_grad[1] else None, b if ctx.needs_input_grad[0] else None)


def _tiled_mm_backward(ctx, grad: Tensor):
    a, b = ctx.saved_tensors
    grad_a = grad_b = None
    # b.t() and a.t() are column-major views: the kernels read them in place.
    if ctx.needs_input_grad[0]:
        grad_a = torch.ops.tilelab.tiled_mm.default(grad, b.t(), variant=ctx.variant, tile=ctx.tile)
    if ctx.needs_input_grad[1]:
        grad_b = torch.ops.tilelab.tiled_mm.default(a.t(), grad, variant=ctx.variant, tile=ctx.tile)
    return grad_a, grad_b


torch.library.register_autograd(
    "tilelab::tiled_mm", _tiled_mm_backward, setup_context=save_operands_setup_context
)


@dataclass(frozen=True)
class KernelInfo:
    """One row of the kernel config table (``csrc/cuda/configs.h``), or the CPU kernel."""

    name: str  #: unique config name, e.g. ``"tiled_16x16x16"``; also usable as ``variant=``
    variant: str  #: what ``variant=`` selects, e.g. ``"tiled"``
    family: str  #: kernel family (one header under ``csrc/cuda/kernels/``)
    tile: Optional[int]  #: what ``tile=`` selects (``None`` for the CPU kernel)
    device: str  #: ``"cuda"`` or ``"cpu"``
    block: tuple  #: block tile (BM, BN, BK)
    threads: int  #: threads per block
    pad: int  #: shared-memory padding ``kPad`` (elements per row)
    min_sm: int  #: lowest compute capability, major*10 + minor
    dtypes: tuple  #: supported dtypes
    compiled: bool  #: whether this build contains the kernel
    summary: str
    #: fp32 runs on TF32 tensor cores: usable only under
    #: ``torch.set_float32_matmul_precision("high")`` (or ``"medium"``)
    tf32: bool = False


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
            compiled=bool(c.get("compiled", table["built_with_cuda"])), summary=c["summary"], tf32=bool(c.get("tf32", False)),
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
        return (f"{d['M']}x{d['N']}x{d['K']} {d['dtype']} on {d.get('device')} ({where}): "
                f"{self.kernel} -- {self.reason}")


def explain(a: Tensor, b: Tensor, *, variant: Optional[str] = None, tile: Optional[int] = None) -> Explanation:
    """Which kernel ``tiled_mm(a, b, variant=variant, tile=tile)`` would run, and why.

    Runs the same selection code as the op (including the validation of an
    override, so a bad ``variant``/``tile`` raises the same error) without
    launching anything.
    """
    d = json.loads(torch.ops.tilelab._explain(a, b, variant=variant, tile=tile))
    return Explanation(kernel=d["kernel"], reason=d["reason"], details=d)
