"""tiled_bmm and tiled_addmm: typed wrappers, fake (meta) kernels and autograd rules.

The CPU/CUDA kernels are in csrc/cpu/batched_cpu.cpp and csrc/cuda/batched.cu,
the autocast rules (cast as for torch.mm) in csrc/autocast.cpp.
"""
from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

from .ops import check_same_kind, save_operands_setup_context


def tiled_bmm(a: Tensor, b: Tensor, *, variant: Optional[str] = None, tile: Optional[int] = None) -> Tensor:
    """Batched product ``a @ b`` with tilelab's kernels; the semantics of :func:`torch.bmm`.

    Args:
        a: ``(B, M, K)`` tensor, float32, float64, float16 or bfloat16.
        b: ``(B, K, N)`` tensor of the same dtype and device.
        variant, tile: as for :func:`tiled_mm`.

    Returns:
        A new contiguous ``(B, M, N)`` tensor. The batch is the kernels' grid z
        (run in chunks of 65535). Each matrix may be row- or column-major with
        any batch stride, including 0 (``x.expand(B, -1, -1)``): such operands
        are read in place, anything else costs one contiguous copy. Differentiable.
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


@torch.library.register_fake("tilelab::tiled_bmm")
def _tiled_bmm_fake(a: Tensor, b: Tensor, *, variant: Optional[str] = None, tile: Optional[int] = None) -> Tensor:
    torch._check(a.dim() == 3 and b.dim() == 3,
                 lambda: f"tilelab::tiled_bmm: expected 3-D tensors, got a of shape {list(a.shape)} "
                         f"and b of shape {list(b.shape)}")
    torch._check(a.shape[0] == b.shape[0],
                 lambda: f"tilelab::tiled_bmm: batch sizes differ: a is {list(a.shape)} and b is {list(b.shape)}")
    torch._check(a.shape[2] == b.shape[1],
                 lambda: f"tilelab::tiled_bmm: inner dimensions differ: a is {list(a.shape)} and b is "
                         f"{list(b.shape)}")
    check_same_kind(a, b, "tiled_bmm")
    return a.new_empty((a.shape[0], a.shape[1], b.shape[2]))


@torch.library.register_fake("tilelab::tiled_addmm")
def _tiled_addmm_fake(bias: Tensor, a: Tensor, b: Tensor, *, variant: Optional[str] = None,
                      tile: Optional[int] = None) -> Tensor:
    torch._check(a.dim() == 2 and b.dim() == 2,
                 lambda: f"tilelab::tiled_addmm: expected 2-D tensors, got a of shape {list(a.shape)} "
                         f"and b of shape {list(b.shape)}")
    torch._check(a.shape[1] == b.shape[0],
                 lambda: f"tilelab::tiled_addmm: inner dimensions differ: a is {list(a.shape)} and b is "
                         f"{list(b.shape)}")
    check_same_kind(a, b, "tiled_addmm")
    M, N = a.shape[0], b.shape[1]
    torch._check(bias.dim() <= 2, lambda: f"tilelab::tiled_addmm: bias of shape {list(bias.shape)} "
                                          f"does not broadcast to the output's shape [{M}, {N}]")
    if bias.dim() >= 1:
        torch._check(bias.shape[-1] == N or bias.shape[-1] == 1,
                     lambda: f"tilelab::tiled_addmm: bias of shape {list(bias.shape)} does not broadcast "
                             f"to the output's shape [{M}, {N}]")
    if bias.dim() == 2:
        torch._check(bias.shape[0] == M or bias.shape[0] == 1,
                     lambda: f"tilelab::tiled_addmm: bias of shape {list(bias.shape)} does not broadcast "
                             f"to the output's shape [{M}, {N}]")
    torch._check(bias.dtype == a.dtype,
                 lambda: f"tilelab::tiled_addmm: bias must have the dtype of a and b ({a.dtype}), got {bias.dtype}")
    torch._check(bias.device == a.device,
                 lambda: f"tilelab::tiled_addmm: bias is on {bias.device} and a is on {a.device}")
    return a.new_empty((M, N))


# ------------------------------------------------------------------ autograd
def _bmm_backward(ctx, grad: Tensor):
    a, b = ctx.saved_tensors
    grad_a = grad_b = None
    # Transposed views are column-major per matrix: read in place.
    if ctx.needs_input_grad[0]:
        grad_a = torch.ops.tilelab.tiled_bmm.default(grad, b.transpose(1, 2), variant=ctx.variant, tile=ctx.tile)
    if ctx.needs_input_grad[1]:
        grad_b = torch.ops.tilelab.tiled_bmm.default(a.transpose(1, 2), grad, variant=ctx.variant, tile=ctx.tile)
    return grad_a, grad_b


torch.library.register_autograd("tilelab::tiled_bmm", _bmm_backward, setup_context=save_operands_setup_context)


def _addmm_setup_context(ctx, inputs, keyword_only_inputs, output) -> None:
    bias, a, b = inputs
    ctx.variant = keyword_only_inputs.get("variant")
    ctx.tile = keyword_only_inputs.get("tile")
    ctx.bias_shape = bias.shape
    ctx.save_for_backward(a if ctx.needs_input_grad[2] else None, b if ctx.needs_input_grad[1] else None)


def _addmm_backward(ctx, grad: Tensor):
    a, b = ctx.saved_tensors
    grad_bias = grad_a = grad_b = None
    if ctx.needs_input_grad[0]:
        # The bias was broadcast to (M, N): its gradient sums over the broadcast dims.
        grad_bias = grad.sum_to_size(ctx.bias_shape) if len(ctx.bias_shape) else grad.sum()
    if ctx.needs_input_grad[1]:
        grad_a = torch.ops.tilelab.tiled_mm.default(grad, b.t(), variant=ctx.variant, tile=ctx.tile)
    if ctx.needs_input_grad[2]:
        grad_b = torch.ops.tilelab.tiled_mm.default(a.t(), grad, variant=ctx.variant, tile=ctx.tile)
    return grad_bias, grad_a, grad_b


torch.library.register_autograd("tilelab::tiled_addmm", _addmm_backward, setup_context=_addmm_setup_context)
