"""tilelab: tiled matmul kernels as PyTorch custom ops.

    import torch, tilelab_torch
    c = torch.ops.tilelab.tiled_mm(a, b)                 # like torch.mm
    c = tilelab_torch.tiled_mm(a, b, variant="tiled", tile=16)
    tilelab_torch.kernels()                              # the config table
    print(tilelab_torch.explain(a, b))                   # what the dispatcher picks, and why
    tilelab_torch.tiled_bmm(x, y); tilelab_torch.tiled_addmm(bias, a, b)
    tilelab_torch.swap_linear(model)                     # nn.Linear -> TiledLinear
    with tilelab_torch.use_tiled() as mode: model(x)     # route matmuls; mode.routed
"""
import torch  # noqa: F401  (loads libtorch before our extension)

from . import _C  # noqa: F401  (registers torch.ops.tilelab.*)
from .ops import Explanation, KernelInfo, built_with_cuda, explain, kernels, tiled_addmm, tiled_bmm, tiled_mm
from .nn import TiledLinear, swap_linear, use_tiled

__all__ = [
    "tiled_mm",
    "tiled_bmm",
    "tiled_addmm",
    "TiledLinear",
    "swap_linear",
    "use_tiled",
    "kernels",
    "explain",
    "built_with_cuda",
    "KernelInfo",
    "Explanation",
]
