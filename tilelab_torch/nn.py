"""Drop tilelab under model code: TiledLinear, swap_linear and use_tiled.

    model = swap_linear(model)            # nn.Linear -> TiledLinear, in place
    with use_tiled() as mode:             # torch.matmul/mm/bmm/addmm/F.linear/@ -> tilelab
        loss = model(x).sum()
    print(mode.routed, mode.routed_by)
"""
from __future__ import annotations

import collections
from typing import Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from .ops import SUPPORTED_DTYPES, bias_broadcasts


class TiledLinear(nn.Linear):
    """``nn.Linear`` whose product runs on tilelab: ``tiled_addmm(bias, x, W.t())``.

    Same parameters, ``state_dict`` keys and initialisation as :class:`torch.nn.Linear`
    (it is a subclass). Any leading batch dims: the input is viewed as 2-D
    ``(-1, in_features)``; the bias add is fused into the kernel's epilogue.
    ``variant``/``tile`` force a kernel as for :func:`tiled_mm`.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None,
                 variant: Optional[str] = None, tile: Optional[int] = None):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.variant = variant
        self.tile = tile

    @classmethod
    def from_linear(cls, linear: nn.Linear, *, variant: Optional[str] = None,
                    tile: Optional[int] = None) -> "TiledLinear":
        """A TiledLinear sharing ``linear``'s parameters (the same Parameter objects,
        so optimizer state and tied weights stay valid)."""
        m = torch.nn.utils.skip_init(cls, linear.in_features, linear.out_features, bias=linear.bias is not None,
                                     device=linear.weight.device, dtype=linear.weight.dtype)
        m.weight = linear.weight
        m.bias = linear.bias
        m.variant, m.tile = variant, tile
        m.train(linear.training)
        return m

    def forward(self, x: Tensor) -> Tensor:
        lead = x.shape[:-1]
        x2 = x.reshape(-1, self.in_features)
        w = self.weight.t()  # column-major view: read in place
        if self.bias is None:
            y = torch.ops.tilelab.tiled_mm.default(x2, w, variant=self.variant, tile=self.tile)
        else:
            y = torch.ops.tilelab.tiled_addmm.default(self.bias, x2, w, variant=self.variant, tile=self.tile)
        return y.reshape(*lead, self.out_features)

    def extra_repr(self) -> str:
        s = super().extra_repr()
        if self.variant is not None:
            s += f", variant={self.variant!r}, tile={self.tile}"
        return s


def swap_linear(model: nn.Module, *, variant: Optional[str] = None, tile: Optional[int] = None) -> int:
    """Replace every ``nn.Linear`` submodule of ``model`` by a :class:`TiledLinear`, in place.

    Parameters are shared, not copied. Returns how many modules were swapped
    (``model`` itself is not replaced if it is an ``nn.Linear``; wrap it or use
    ``TiledLinear.from_linear``). Modules that are already TiledLinear are left alone.
    """
    count = 0
    for name, child in list(model.named_children()):
        if isinstance(child, nn.Linear) and not isinstance(child, TiledLinear):
            setattr(model, name, TiledLinear.from_linear(child, variant=variant, tile=tile))
            count += 1
        else:
            count += swap_linear(child, variant=variant, tile=tile)
    return count


_LOW = (torch.float16, torch.bfloat16, torch.float32)


class use_tiled(TorchFunctionMode):
    """Route matmuls to tilelab inside a ``with`` block (a TorchFunctionMode).

    Routed: ``torch.matmul``/``Tensor.matmul``/``@``, ``torch.mm``, ``torch.bmm``,
    ``torch.addmm`` (beta = alpha = 1) and ``F.linear``, for CPU or CUDA tensors of one
    device and one float dtype (under autocast for that device, mixed fp16/bf16/fp32
    inputs too: the ops' autocast rules cast them as torch.mm would). matmul takes 2-D
    and batched operands (any leading dims that flatten to one batch without a copy
    of the result shape, including a broadcast 2-D side); everything else (out=,
    1-D operands, other dtypes, ...) goes to torch unchanged.

    ``routed`` counts the calls sent to tilelab, ``routed_by`` per function name,
    ``passed`` those left to torch.
    """

    def __init__(self, variant: Optional[str] = None, tile: Optional[int] = None):
        super().__init__()
        self.variant, self.tile = variant, tile
        self.routed = 0
        self.passed = 0
        self.routed_by: collections.Counter = collections.Counter()
        self._handlers = {
            torch.matmul: ("matmul", self._matmul),
            Tensor.matmul: ("matmul", self._matmul),
            Tensor.__matmul__: ("matmul", self._matmul),
            torch.mm: ("mm", self._mm),
            Tensor.mm: ("mm", self._mm),
            torch.bmm: ("bmm", self._bmm),
            Tensor.bmm: ("bmm", self._bmm),
            torch.addmm: ("addmm", self._addmm),
            Tensor.addmm: ("addmm", self._addmm),
            F.linear: ("linear", self._linear),
            torch._C._nn.linear: ("linear", self._linear),
        }

    # -------------------------------------------------------------- helpers
    def _ok(self, *ts) -> bool:
        if not all(isinstance(t, Tensor) and t.layout == torch.strided for t in ts):
            return False
        dev = ts[0].device
        if dev.type not in ("cpu", "cuda") or any(t.device != dev for t in ts):
            return False
        dtypes = {t.dtype for t in ts}
        if len(dtypes) == 1:
            return next(iter(dtypes)) in SUPPORTED_DTYPES
        return torch.is_autocast_enabled(dev.type) and dtypes <= set(_LOW)

    def _kw(self):
        return {"variant": self.variant, "tile": self.tile}

    def _mm(self, a, b, *rest, **kw):
        if rest or kw or not self._ok(a, b) or a.dim() != 2 or b.dim() != 2:
            return NotImplemented
        return torch.ops.tilelab.tiled_mm.default(a, b, **self._kw())

    def _bmm(self, a, b, *rest, **kw):
        if rest or kw or not self._ok(a, b) or a.dim() != 3 or b.dim() != 3 or a.shape[0] != b.shape[0]:
            return NotImplemented
        return torch.ops.tilelab.tiled_bmm.default(a, b, **self._kw())

    def _addmm(self, bias, a, b, *rest, beta=1, alpha=1, **kw):
        if rest or kw or beta != 1 or alpha != 1 or not self._ok(bias, a, b) or a.dim() != 2 or b.dim() != 2:
            return NotImplemented
        if not bias_broadcasts(bias, a.shape[0], b.shape[1]):
            return NotImplemented
        return torch.ops.tilelab.tiled_addmm.default(bias, a, b, **self._kw())

    def _linear(self, x, weight, bias=None, *rest, **kw):
        ts = (x, weight) if bias is None else (x, weight, bias)
        if rest or kw or not self._ok(*ts) or x.dim() < 1 or weight.dim() != 2 or (
                bias is not None and bias.dim() > 1):
            return NotImplemented
        lead = x.shape[:-1]
        x2 = x.reshape(-1, x.shape[-1])
        if bias is None:
            y = torch.ops.tilelab.tiled_mm.default(x2, weight.t(), **self._kw())
        else:
            y = torch.ops.tilelab.tiled_addmm.default(bias, x2, weight.t(), **self._kw())
        return y.reshape(*lead, weight.shape[0])

    def _matmul(self, a, b, *rest, **kw):
        if rest or kw or not self._ok(a, b) or a.dim() < 2 or b.dim() < 2:
            return NotImplemented
        if a.dim() == 2 and b.dim() == 2:
            return torch.ops.tilelab.tiled_mm.default(a, b, **self._kw())
        if b.dim() == 2:
            # (..., M, K) @ (K, N): one 2-D product over the flattened rows.
            y = torch.ops.tilelab.tiled_mm.default(a.reshape(-1, a.shape[-1]), b, **self._kw())
            return y.reshape(*a.shape[:-1], b.shape[-1])
        try:
            lead = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except RuntimeError:
            return NotImplemented
        # Broadcast batch dims become stride-0 views (read in place by the kernels).
        a3 = a.expand(*lead, *a.shape[-2:]).reshape(-1, *a.shape[-2:])
        b3 = b.expand(*lead, *b.shape[-2:]).reshape(-1, *b.shape[-2:])
        y = torch.ops.tilelab.tiled_bmm.default(a3, b3, **self._kw())
        return y.reshape(*lead, a.shape[-2], b.shape[-1])

    # ------------------------------------------------------------ the mode
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        h = self._handlers.get(func)
        if h is not None:
            name, fn = h
            out = fn(*args, **kwargs)
            if out is not NotImplemented:
                self.routed += 1
                self.routed_by[name] += 1
                return out
            self.passed += 1
        return func(*args, **kwargs)
