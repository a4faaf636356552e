"""tilelab: tiled matmul kernels as PyTorch custom ops.

    import torch, tilelab_torch
    c = torch.ops.tilelab.tiled_mm(a, b)                 # like torch.mm
    c = tilelab_torch.tiled_mm(a, b, variant="tiled", tile=16)
    tilelab_torch.kernels()                              # the config table
    print(tilelab_torch.explain(a, b))                   # what the dispatcher picks, and why
"""
import torch  # noqa: F401  (loads libtorch before our extension)

from . import _C  # noqa: F401  (registers torch.ops.tilelab.*)
from .ops import Explanation, KernelInfo, built_with_cuda, explain, kernels, tiled_mm

__all__ = [
    "tiled_mm",
    "kernels",
    "explain",
    "built_with_cuda",
    "KernelInfo",
    "Explanation",
]
