"""tilelab: tiled matmul kernels as PyTorch custom ops.

    import torch, tilelab_torch
    c = torch.ops.tilelab.tiled_mm(a, b)                 # like torch.mm
    c = tilelab_torch.tiled_mm(a, b, variant="tiled", tile=16)
    tilelab_torch.kernels()                              # the config table
    print(tilelab_torch.explain(a, b))                   # what the dispatcher picks, and why
    tilelab_torch.tiled_bmm(x, y); tilelab_torch.tiled_addmm(bias, a, b)
    y = tilelab_torch.tiled_linear(x, w, b, activation="gelu")   # act(F.linear(x, w, b)), one kernel
    h = tilelab_torch.tiled_gated_linear(x, w_gate, w_up)         # silu(x @ w_gate.t()) * (x @ w_up.t())
    report = tilelab_torch.swap(model)                   # Linear/Conv1D -> tilelab, activations fused
    tilelab_torch.unswap(model)                          # the original modules back
    with tilelab_torch.use_tiled() as mode: model(x)     # route matmuls; mode.routed
    tilelab_torch.tune(model, x)                         # time every kernel on the model's GEMMs, keep the winners
"""
import torch  # noqa: F401  (loads libtorch before our extension)

from . import _C  # noqa: F401  (registers torch.ops.tilelab.*)
from .ops import (Explanation, KernelInfo, built_with_cuda, explain, explain_described, explain_gated, kernels,
                  tiled_addmm, tiled_bmm, tiled_gated_linear, tiled_linear, tiled_mm)
from .nn import SwapReport, TiledConv1D, TiledLinear, swap, swap_linear, unswap, use_tiled
from .tuning import TuneReport, clear_tuned, load_tuned, tune

__all__ = [
    "tiled_mm",
    "tiled_bmm",
    "tiled_addmm",
    "tiled_linear",
    "tiled_gated_linear",
    "swap",
    "unswap",
    "SwapReport",
    "TiledLinear",
    "TiledConv1D",
    "use_tiled",
    "swap_linear",
    "tune",
    "load_tuned",
    "clear_tuned",
    "TuneReport",
    "kernels",
    "explain",
    "explain_described",
    "explain_gated",
    "built_with_cuda",
    "KernelInfo",
    "Explanation",
]
