"""Drop tilelab under model code: swap/unswap, TiledLinear, TiledConv1D and use_tiled.

    report = swap(model)                  # nn.Linear, Conv1D -> tilelab, Linear+GELU/SiLU fused, q/k/v merged,
                                          # gated MLPs' gate and up products as one kernel
    print(report)                         # what was swapped, fused and left alone (and why)
    unswap(model)                         # the original modules back
    with use_tiled() as mode:             # torch.matmul/mm/bmm/addmm/F.linear/@ -> tilelab
        loss = model(x).sum()
    print(mode.routed, mode.routed_by)

``swap`` is the fast path: the swapped modules call the op from their forward, no
Python runs per call beyond it. ``use_tiled`` sees every torch call in its block
(a TorchFunctionMode), so it costs Python on each one, routed or not.
"""
from __future__ import annotations

import collections
import contextlib
import warnings
import weakref
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode

from .ops import ACTIVATIONS, SUPPORTED_DTYPES, bias_broadcasts, built_with_cuda

# The attribute on a replacement that holds the module it replaced (in __dict__,
# not registered as a submodule: state_dict and named_modules do not see it).
_ORIGINAL = "_tilelab_original"


def _check_activation(activation: Optional[str]) -> None:
    if activation is not None and activation not in ACTIVATIONS:
        raise ValueError(f"unknown activation {activation!r}; valid: "
                         + ", ".join(repr(a) for a in ACTIVATIONS) + " (or None)")


def _options_repr(m: nn.Module) -> str:
    """The part of a tiled layer's repr that says how it runs: activation, variant and tile."""
    s = ""
    if m.activation is not None:
        s += f", activation={m.activation!r}"
    if m.variant is not None or m.tile is not None:
        s += f", variant={m.variant!r}, tile={m.tile}"
    return s


class TiledLinear(nn.Linear):
    """``nn.Linear`` on tilelab: ``act(F.linear(x, W, b))`` in one ``tiled_linear`` call.

    Same parameters, ``state_dict`` keys and initialisation as :class:`torch.nn.Linear`
    (it is a subclass). Any leading batch dims; the bias add and ``activation``
    (``None``, ``"relu"``, ``"gelu"``, ``"gelu_tanh"``, ``"silu"``) run in the kernel's
    epilogue. ``variant``/``tile`` force a kernel as for :func:`tiled_mm`.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None,
                 variant: Optional[str] = None, tile: Optional[int] = None, activation: Optional[str] = None):
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        _check_activation(activation)
        self.variant, self.tile, self.activation = variant, tile, activation
        #: The :class:`MergedProjections` this layer belongs to (set by :func:`swap`), or None.
        self.merged: Optional[MergedProjections] = None

    @classmethod
    def from_linear(cls, linear: nn.Linear, *, variant: Optional[str] = None, tile: Optional[int] = None,
                    activation: Optional[str] = None) -> "TiledLinear":
        """A TiledLinear sharing ``linear``'s parameters (the same Parameter objects,
        so optimizer state and tied weights stay valid), computing ``activation(linear(x))``."""
        m = cls(linear.in_features, linear.out_features, bias=linear.bias is not None, device="meta",
                variant=variant, tile=tile, activation=activation)
        m.weight, m.bias = linear.weight, linear.bias
        m.train(linear.training)
        return m

    def forward(self, x: Tensor) -> Tensor:
        if self.merged is not None:
            y = self.merged.output(self, x)
            if y is not None:
                return y
        return torch.ops.tilelab.tiled_linear.default(x, self.weight, self.bias, activation=self.activation,
                                                      variant=self.variant, tile=self.tile)

    def extra_repr(self) -> str:
        merged = f", merged={'+'.join(self.merged.names)}" if self.merged is not None else ""
        return super().extra_repr() + _options_repr(self) + merged


class TiledConv1D(nn.Module):
    """transformers' ``Conv1D`` (GPT-2, GPT) on tilelab: ``act(x @ W + b)``.

    ``W`` is stored ``(nx, nf)`` = (in, out) as Conv1D stores it, so the state_dict
    keys and shapes are Conv1D's; the op reads ``W.t()`` (a column-major view) in place.
    """

    def __init__(self, nf: int, nx: int, device=None, dtype=None, variant: Optional[str] = None,
                 tile: Optional[int] = None, activation: Optional[str] = None):
        super().__init__()
        _check_activation(activation)
        self.nf, self.nx = nf, nx
        self.weight = nn.Parameter(torch.empty(nx, nf, device=device, dtype=dtype))
        self.bias = nn.Parameter(torch.zeros(nf, device=device, dtype=dtype))
        nn.init.normal_(self.weight, std=0.02)
        self.variant, self.tile, self.activation = variant, tile, activation

    @classmethod
    def from_conv1d(cls, conv: nn.Module, *, variant: Optional[str] = None, tile: Optional[int] = None,
                    activation: Optional[str] = None) -> "TiledConv1D":
        """A TiledConv1D sharing ``conv``'s ``weight`` and ``bias`` Parameter objects."""
        m = cls(conv.nf, conv.weight.shape[0], device="meta", variant=variant, tile=tile, activation=activation)
        m.weight, m.bias = conv.weight, conv.bias
        m.train(conv.training)
        return m

    def forward(self, x: Tensor) -> Tensor:
        return torch.ops.tilelab.tiled_linear.default(x, self.weight.t(), self.bias, activation=self.activation,
                                                      variant=self.variant, tile=self.tile)

    def extra_repr(self) -> str:
        return f"nf={self.nf}, nx={self.nx}" + _options_repr(self)


class FusedActivation(nn.Identity):
    """Stands where an activation was after :func:`swap` fused it into the linear
    layer before it (``fused_into``, as ``activation``); passes its input through."""

    def __init__(self, fused_into: str, activation: str):
        super().__init__()
        self.fused_into, self.activation = fused_into, activation

    def extra_repr(self) -> str:
        return f"fused into {self.fused_into} as {self.activation!r}"


# ------------------------------------------------------ merged projections
def _back_to_back(ts: list[Tensor]) -> Optional[Tensor]:
    """``torch.cat(ts)`` as a view, without a copy, when the tensors lie back to back in one
    buffer (contiguous, one dtype and device, each starting where the one before ends); else None.
    One buffer, not merely adjacent addresses: the caching allocator places separate tensors side by side."""
    t0 = ts[0]
    storage, end = t0.untyped_storage().data_ptr(), t0.storage_offset()
    for t in ts:
        if (t.dtype != t0.dtype or t.device != t0.device or t.shape[1:] != t0.shape[1:] or not t.is_contiguous()
                or t.untyped_storage().data_ptr() != storage or t.storage_offset() != end):
            return None
        end += t.numel()
    rows = sum(t.shape[0] for t in ts)
    return t0.detach().as_strided((rows, *t0.shape[1:]), t0.stride(), t0.storage_offset())


class _MergedProduct(torch.autograd.Function):
    """``F.linear(x, cat(weights), cat(biases))`` for weights (and biases) that lie back to back
    (one tiled_linear call on the view), with each weight's and bias's own gradient."""

    @staticmethod
    def forward(ctx, x, merged, variant, tile, n, *params):
        """``merged``: the (weight, bias) views of ``params`` (the n weights, then the n biases or none)."""
        ws = params[:n]
        ctx.save_for_backward(x, *ws)
        ctx.options, ctx.n, ctx.has_bias = (variant, tile), n, len(params) > n
        return torch.ops.tilelab.tiled_linear.default(x, merged[0], merged[1], variant=variant, tile=tile)

    @staticmethod
    def backward(ctx, dy):
        x, *ws = ctx.saved_tensors
        variant, tile = ctx.options
        sizes = [w.shape[0] for w in ws]
        mm = torch.ops.tilelab.tiled_mm.default
        dy2, x2 = dy.reshape(-1, dy.shape[-1]), x.reshape(-1, x.shape[-1])
        need = ctx.needs_input_grad
        dx = dws = dbs = None
        if need[0]:
            # Double backward (create_graph) needs W as a function of the weights: a copy, then.
            w = torch.cat(ws) if torch.is_grad_enabled() else _back_to_back(ws)
            dx = mm(dy2, w, variant=variant, tile=tile).reshape(x.shape)
        if any(need[5:5 + ctx.n]):
            dws = mm(dy2.t(), x2, variant=variant, tile=tile).split(sizes)
        if ctx.has_bias and any(need[5 + ctx.n:]):
            dbs = dy2.sum(0).split(sizes)
        return (dx, None, None, None, None, *(dws or [None] * ctx.n),
                *((dbs or [None] * ctx.n) if ctx.has_bias else ()))


class MergedProjections:
    """Linear layers of one block that read the same input (:data:`MERGEABLE`: an attention
    block's query, key and value projections), computed as one product.

    :func:`swap` lays their weights (and biases) back to back in one buffer (each Parameter
    object stays, now a view of it), so the product with all of them is one ``tiled_linear``
    call on ``N = sum of their outputs``: one launch where there were three, and, for few
    tokens, enough tiles to fill the GPU. The first member called on an input computes every
    member's output (column slices of one result) and keeps the others' for their own calls
    on that same input: the same tensor object, not modified since, in the same grad mode,
    weights unchanged. Any other call computes just that member. Under ``torch.compile``,
    under autocast, or when the weights no longer lie back to back (e.g. after ``model.to()``),
    each member computes its own output.

    Host cost (the H100 machine's host, products too small to count on the GPU, wall time a
    block of three calls, two runs): without grad 58.7 and 36.8 µs merged against 58.5 and 66.4
    for three tilelab calls, with forward and backward 793 and 659 against 739 and 794: within
    that host's spread. The checks above read the parameter dicts directly (nn.Module's
    ``__getattr__`` cost more than the saved calls). Under CUDA graphs none of it runs.
    """

    def __init__(self, names: list[str], members: list[TiledLinear]):
        self.names, self.members = list(names), list(members)
        self.index = {id(m): i for i, m in enumerate(self.members)}
        # The members' parameter dicts: read directly, the per-call checks skip nn.Module.__getattr__.
        self.slots = [m._parameters for m in self.members]
        self.sizes = [m.out_features for m in self.members]
        # (weakref to the input, its version, the parameters' versions, grad mode, {member index: output})
        self.pending: Optional[tuple] = None
        # (the parameters' addresses and shapes, their merged views): the views hold the buffers, so an
        # address seen again is the same buffer
        self.views: Optional[tuple] = None

    def __getstate__(self) -> dict:  # copy.deepcopy, pickle: without the outputs in flight and the views
        return {**self.__dict__, "pending": None, "views": None, "index": None, "slots": None}

    def __setstate__(self, state: dict) -> None:  # the members may not be built yet: slots are filled later
        self.__dict__.update(state)
        self.index = {id(m): i for i, m in enumerate(self.members)}

    def params(self) -> list[Tensor]:
        """The members' weights, then their biases (if they have them)."""
        if self.slots is None:
            self.slots = [m._parameters for m in self.members]
        ws = [d["weight"] for d in self.slots]
        b0 = self.slots[0].get("bias")
        return ws + [d.get("bias") for d in self.slots] if b0 is not None else ws

    def weights(self, params: Optional[list[Tensor]] = None) -> Optional[tuple[Tensor, Optional[Tensor]]]:
        """The merged (weight, bias) as views of the members' buffers, or None if not back to back."""
        params = self.params() if params is None else params
        key = tuple([(t.data_ptr(), t.shape) for t in params])
        if self.views is not None and self.views[0] == key:
            return self.views[1]
        self.views = None
        n = len(self.members)
        w = _back_to_back(params[:n])
        if w is None or len(params) == n:
            wb = None if w is None else (w, None)
        else:
            b = _back_to_back(params[n:])
            wb = None if b is None else (w, b)
        if wb is not None:
            self.views = (key, wb)
        return wb

    def output(self, member: TiledLinear, x: Tensor) -> Optional[Tensor]:
        """``member(x)``: kept from the merged product, or computed with the others'; None: compute it alone."""
        i = self.index[id(member)]
        grad = torch.is_grad_enabled()
        params = self.params()
        p = self.pending
        if p is not None and p[0]() is x and i in p[4] and p[1] == x._version and p[3] == grad \
                and p[2] == tuple([t._version for t in params]):
            y = p[4].pop(i)
            if not p[4]:
                self.pending = None
            return y
        if not isinstance(x, Tensor) or torch.compiler.is_compiling() or torch.is_autocast_enabled(x.device.type):
            return None
        wb = self.weights(params)
        if wb is None or x.dtype != wb[0].dtype or x.device != wb[0].device:
            return None
        versions = tuple([t._version for t in params])
        m0 = self.members[0]
        if grad and (x.requires_grad or any(t.requires_grad for t in params)):
            y = _MergedProduct.apply(x, wb, m0.variant, m0.tile, len(self.members), *params)
        else:
            y = torch.ops.tilelab.tiled_linear.default(x, wb[0], wb[1], variant=m0.variant, tile=m0.tile)
        outs = dict(enumerate(y.split(self.sizes, dim=-1)))
        y = outs.pop(i)
        self.pending = (weakref.ref(x), x._version, versions, grad, outs)
        return y


# -------------------------------------------------------------------- gated MLPs
_PLAIN = (Tensor, nn.Parameter)  # a weight's class when it is no tensor subclass


class _GatedBlock(nn.Module):
    """What the gated MLP replacements share: they hold the replaced block's own submodules under
    their names (``state_dict`` keys and parameters are the block's), read any other attribute from
    that block (:func:`unswap` puts it back), and compute ``activation``."""

    def __init__(self, block: nn.Module, names: tuple[str, ...], activation: str):
        super().__init__()
        self.names = names
        for n in names:
            setattr(self, n, getattr(block, n))
        self.activation = activation
        object.__setattr__(self, _ORIGINAL, block)
        self.train(block.training)

    def __getattr__(self, name: str) -> Any:  # the block's attributes (config, sizes) stay readable
        try:
            return super().__getattr__(name)
        except AttributeError:
            original = self.__dict__.get(_ORIGINAL)
            if original is None:
                raise
            return getattr(original, name)


class TiledGatedMLP(_GatedBlock):
    """Stands where a gated MLP block was after :func:`swap` (:data:`GATED`: Llama-style
    ``down(act(gate(x)) * up(x))``): ``down(tiled_gated_linear(x, gate.weight, up.weight))``,
    the gate and up products in one kernel that never writes them (see
    :func:`~tilelab_torch.tiled_gated_linear`; with a gradient to record, the same ops as before).

    An input or weight that is a tensor subclass (a DTensor under tensor parallelism, whose plans
    convert inputs and outputs in hooks on the gate and up layers themselves) takes the layers' own calls.
    """

    def __init__(self, block: nn.Module, names: tuple[str, str, str, str]):
        super().__init__(block, names, getattr(block, names[0]).activation)

    def forward(self, x: Tensor) -> Tensor:
        mods = self._modules
        gate, up, down = mods[self.names[0]], mods[self.names[1]], mods[self.names[2]]
        wg, wu = gate.weight, up.weight
        if x.__class__ is Tensor and wg.__class__ in _PLAIN and wu.__class__ in _PLAIN:
            h = torch.ops.tilelab.tiled_gated_linear.default(x, wg, wu, activation=self.activation)
        else:  # a tensor subclass (DTensor under tensor parallelism): the layers' own calls, as the block made them
            h = gate(x) * up(x)
        return down(h)

    def extra_repr(self) -> str:
        return f"{self.names[0]} and {self.names[1]} as one tiled_gated_linear (activation={self.activation!r})"


class TiledMergedGatedMLP(_GatedBlock):
    """Stands where a gated MLP with one gate-and-up layer was after :func:`swap`
    (:data:`GATED_MERGED`: Phi-3's and GLM's ``down(up * act(gate))`` for
    ``gate, up = gate_up(x).chunk(2, -1)``): without a gradient to record,
    ``down(tiled_gated_linear(x, W[:n], W[n:]))`` on the two halves of ``gate_up``'s weight, one
    kernel that never writes the 2n-wide product. With a gradient to record, or a tensor subclass,
    the block's own ops (one product, the activation and the multiply of its halves): its backward
    stays the block's.
    """

    def forward(self, x: Tensor) -> Tensor:
        mods = self._modules
        gate_up, down, act = mods[self.names[0]], mods[self.names[1]], mods[self.names[2]]
        w = gate_up.weight
        records = torch.is_grad_enabled() and (x.requires_grad or w.requires_grad)
        if x.__class__ is Tensor and w.__class__ in _PLAIN and not records:
            n = w.shape[0] // 2
            h = torch.ops.tilelab.tiled_gated_linear.default(x, w[:n], w[n:], activation=self.activation)
        else:
            gate, up = gate_up(x).chunk(2, dim=-1)
            h = up * act(gate)
        return down(h)

    def extra_repr(self) -> str:
        return f"{self.names[0]}'s halves as one tiled_gated_linear (activation={self.activation!r})"


def _bare(layer: Any) -> bool:
    """Whether ``layer`` is a swapped linear layer computing its product alone (no activation, not merged)."""
    return isinstance(layer, TiledLinear) and layer.activation is None and layer.merged is None


def _put(model: nn.Module, name: str, block: nn.Module, new: _GatedBlock, layer: TiledLinear, what: str) -> str:
    """Put ``new`` where ``block`` is (``name`` in ``model``) if the block's output stays the same on a probe
    into ``layer``'s input width; "" when it did, else why not (``what``: the change, for the message)."""
    if set(block._modules) != set(new.names):
        return "the block has submodules besides " + ", ".join(new.names)
    if layer.weight.device.type == "meta":
        return "meta tensors: the replacement cannot be checked"
    parent = model.get_submodule(name.rpartition(".")[0]) if "." in name else model
    cname = name.rpartition(".")[2]
    if parent._modules.get(cname) is not block:
        return "the block is not its parent's child of that name"
    x = _probe(5, layer.in_features, layer.weight)
    with _evaluating(block), torch.no_grad():
        why = _mismatch(new(x), block(x), None, None)
    if why is not None:
        return f"{what} changes the block's output: {why}"
    setattr(parent, cname, new)
    return ""


def _one_product_blocked(layers: dict[str, TiledLinear]) -> str:
    """Why the swapped linear layers of one gated MLP (by name) cannot run as one tiled_gated_linear, "" if
    they can: a bias, or a kernel forced on any of them."""
    if any(m.bias is not None for m in layers.values()):
        return " or ".join(layers) + " has a bias"
    if any(m.variant is not None or m.tile is not None for m in layers.values()):
        return "a kernel is forced (variant/tile): " + ("each layer keeps it" if len(layers) > 1 else
                                                         "the layer keeps it")
    return ""


def _gate(model: nn.Module, name: str, block: nn.Module, names: tuple[str, str, str, str]) -> tuple[bool, str]:
    """Replace the gated MLP ``block`` (at ``name`` in ``model``) by a :class:`TiledGatedMLP` if its gate and
    up layers can run as one tiled_gated_linear and the block's output stays the same on a probe.
    Returns (replaced, why not; "" where the activation was not fused: `left` has that reason)."""
    g, u, _, a = names
    gate, up = getattr(block, g, None), getattr(block, u, None)
    if not isinstance(getattr(block, a, None), FusedActivation) or not isinstance(gate, TiledLinear):
        return False, ""  # the activation was not fused: `left` says why
    if not _bare(up):
        return False, f"{u} is not a swapped linear layer without an activation"
    why = _one_product_blocked({g: gate, u: up})
    if why:
        return False, why
    if gate.weight.shape != up.weight.shape or gate.weight.dtype != up.weight.dtype \
            or gate.weight.device != up.weight.device:
        return False, f"{g} and {u} differ in shape, dtype or device"
    why = _put(model, name, block, TiledGatedMLP(block, names), gate, f"running {g} and {u} as one product")
    return not why, why


def _gate_merged(model: nn.Module, name: str, block: nn.Module, names: tuple[str, str, str]) -> tuple[bool, str]:
    """Replace the gated MLP ``block`` with one gate-and-up layer (at ``name`` in ``model``) by a
    :class:`TiledMergedGatedMLP` if that layer's halves can run as one tiled_gated_linear and the block's
    output stays the same on a probe. Returns (replaced, why not)."""
    gu, _, a = names
    gate_up = getattr(block, gu, None)
    if not _bare(gate_up):
        return False, f"{gu} is not a swapped linear layer without an activation"
    why = _one_product_blocked({gu: gate_up})
    if why:
        return False, why
    if gate_up.out_features % 2 != 0:
        return False, f"{gu} has an odd number of outputs: no two halves"
    activation, why = _identify(getattr(block, a, None))
    if activation is None:
        return False, why
    why = _put(model, name, block, TiledMergedGatedMLP(block, names, activation), gate_up,
               f"running {gu}'s halves as one tiled_gated_linear")
    return not why, why


# ---------------------------------------------------------------- swap / unswap
#: Known MLP blocks, by class name: (the linear layer, the activation applied to
#: its output and to nothing else). The activation can run in that layer's epilogue.
FUSABLE: dict[str, tuple[str, str]] = {
    "Mlp": ("fc1", "act"),  # timm: fc1 -> act -> drop1 -> norm -> fc2 -> drop2
    "NormMlp": ("fc1", "act"),  # timm (TinyViT): norm -> fc1 -> act -> drop1 -> fc2 -> drop2
    "SwiGLU": ("fc1_g", "act"),  # timm: fc2(norm(drop(act(fc1_g(x)) * fc1_x(x))))
    # transformers' MLPs of one linear layer, an activation and another (dropout after it, if any)
    "GPT2MLP": ("c_fc", "act"),  # c_fc -> act -> c_proj -> dropout
    **{name: ("c_fc", "act") for name in ("GPTNeoMLP", "GPTBigCodeMLP", "Starcoder2MLP")},
    **{name: ("fc_in", "act") for name in ("GPTJMLP", "CodeGenMLP")},
    **{name: ("dense_h_to_4h", "act") for name in ("GPTNeoXMLP", "PersimmonMLP")},
    **{name: ("fc1", "activation_fn") for name in ("PhiMLP", "CLIPMLP", "SiglipMLP")},
    "T5DenseActDense": ("wi", "act"),  # wi -> act -> dropout -> wo
    "T5DenseGatedActDense": ("wi_0", "act"),  # wo(dropout(act(wi_0(x)) * wi_1(x))): the activation only
    # BERT-style encoders' feed-forward first half: dense -> intermediate_act_fn
    **{name: ("dense", "intermediate_act_fn") for name in (
        "BertIntermediate", "RobertaIntermediate", "XLMRobertaIntermediate", "ElectraIntermediate",
        "DebertaV2Intermediate")},
    # transformers' gated MLPs: down_proj(act_fn(gate_proj(x)) * up_proj(x))
    **{name: ("gate_proj", "act_fn") for name in (
        "LlamaMLP", "MistralMLP", "Qwen2MLP", "Qwen3MLP", "GemmaMLP", "Gemma2MLP", "Gemma3MLP", "Olmo2MLP",
        "OlmoMLP", "GraniteMLP", "StableLmMLP", "CohereMLP", "SmolLM3MLP", "Glm4MoeMLP")},
}

#: Gated MLP blocks, by class name: (gate, up, down, activation) of ``down(act(gate(x)) * up(x))``. With
#: ``fuse``, once the activation is fused into the gate layer, swap runs gate and up as one
#: ``tiled_gated_linear`` (:class:`TiledGatedMLP`).
GATED: dict[str, tuple[str, str, str, str]] = {
    name: ("gate_proj", "up_proj", "down_proj", "act_fn") for name, (lin, _) in FUSABLE.items() if lin == "gate_proj"}

#: Gated MLP blocks with one gate-and-up layer, by class name: (gate_up, down, activation) of
#: ``down(up * act(gate))`` for ``gate, up = gate_up(x).chunk(2, -1)``. With ``fuse``, swap runs the
#: layer's two halves as one ``tiled_gated_linear`` (:class:`TiledMergedGatedMLP`).
GATED_MERGED: dict[str, tuple[str, str, str]] = {
    name: ("gate_up_proj", "down_proj", "activation_fn") for name in (
        "Phi3MLP", "Phi4MultimodalMLP", "GlmMLP", "Glm4MLP")}

#: Known attention blocks, by class name: the linear layers the block calls one after the
#: other on the same input (its query, key and value projections). With ``fuse``, swap runs
#: them as one product (:class:`MergedProjections`).
MERGEABLE: dict[str, tuple[str, ...]] = {
    **{name: ("q_proj", "k_proj", "v_proj") for name in (
        "LlamaAttention", "MistralAttention", "MixtralAttention", "Qwen2Attention", "Qwen3Attention",
        "GemmaAttention", "Gemma2Attention", "Gemma3Attention", "Olmo2Attention", "OlmoAttention",
        "GraniteAttention", "StableLmAttention", "CohereAttention", "SmolLM3Attention", "Starcoder2Attention",
        "PhiAttention", "OPTAttention", "GPTJAttention", "GPTNeoSelfAttention", "CLIPAttention",
        "SiglipAttention")},
    **{name: ("query", "key", "value") for name in (
        "BertSelfAttention", "RobertaSelfAttention", "XLMRobertaSelfAttention", "ElectraSelfAttention")},
}

#: Activation modules by class name -> the tiled_linear activation they compute
#: (torch's and timm's ``GELU`` by their ``approximate``). An identification is
#: checked on a probe tensor before it is used.
ACTIVATION_CLASSES: dict[str, str] = {
    "ReLU": "relu",
    "SiLU": "silu", "SiLUActivation": "silu",
    "GELU": "gelu", "GELUActivation": "gelu",
    "GELUTanh": "gelu_tanh", "NewGELUActivation": "gelu_tanh", "PytorchGELUTanh": "gelu_tanh",
    "FastGELUActivation": "gelu_tanh", "AccurateGELUActivation": "gelu_tanh",
}

#: Default ``(rtol, atol)`` of swap's checks, by dtype: an output ``y`` matches the
#: original's ``y0`` when ``max|y - y0| <= atol + rtol * max|y0|``. fp32 with TF32
#: allowed on CUDA (``torch.get_float32_matmul_precision() != "highest"``) uses the
#: fp16 row.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-7, 1e-10),
    torch.float32: (1e-4, 1e-5),
    torch.float16: (1e-2, 1e-3),
    torch.bfloat16: (3e-2, 1e-2),
}


@dataclass
class SwapReport:
    """What :func:`swap` did. ``swapped``: qualified names of the replaced modules;
    ``fused``: ``(linear layer, activation)`` pairs; ``merged``: the groups of linear
    layers that run as one product (:class:`MergedProjections`); ``gated``: the gated MLP
    blocks replaced by a :class:`TiledGatedMLP` or :class:`TiledMergedGatedMLP`; ``left``:
    ``(name, reason)`` for linear-like modules, activations, groups and blocks it left as they were."""

    swapped: list[str] = field(default_factory=list)
    fused: list[tuple[str, str]] = field(default_factory=list)
    merged: list[tuple[str, ...]] = field(default_factory=list)
    left: list[tuple[str, str]] = field(default_factory=list)
    gated: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        acts = collections.Counter(a for _, a in self.fused)
        s = (f"swapped {len(self.swapped)} modules, fused {len(self.fused)} activations"
             + (" (" + ", ".join(f"{a} x{n}" for a, n in acts.items()) + ")" if acts else "")
             + (f", merged {len(self.merged)} groups" if self.merged else "")
             + (f", gated {len(self.gated)} MLPs" if self.gated else "")
             + f", left {len(self.left)}")
        return "\n  ".join([s] + [f"left {name or '<root>'}: {why}" for name, why in self.left])


def _tolerance(dtype: torch.dtype, device: torch.device, rtol: Optional[float], atol: Optional[float]):
    if dtype == torch.float32 and device.type == "cuda" and torch.get_float32_matmul_precision() != "highest":
        dtype = torch.float16
    r, a = TOLERANCES.get(dtype, TOLERANCES[torch.float32])
    return (r if rtol is None else rtol), (a if atol is None else atol)


def _tensors(out: Any) -> list[Tensor]:
    """The floating-point tensors of a model's output (tensor, tuple/list, dict, ModelOutput)."""
    if isinstance(out, Tensor):
        return [out] if out.is_floating_point() else []
    if isinstance(out, dict):
        out = list(out.values())
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _tensors(o)]
    return []


def _mismatch(out: Any, ref: Any, rtol: Optional[float], atol: Optional[float]) -> Optional[str]:
    """None when every output tensor matches the reference's; else what differs and by how much."""
    outs, refs = _tensors(out), _tensors(ref)
    if len(outs) != len(refs):
        return f"{len(outs)} output tensors where the original gave {len(refs)}"
    for i, (o, r) in enumerate(zip(outs, refs)):
        if o.shape != r.shape:
            return f"output {i}: shape {list(o.shape)} where the original gave {list(r.shape)}"
        if r.numel() == 0:
            continue
        rt, at = _tolerance(r.dtype, r.device, rtol, atol)
        diff = float((o.double() - r.double()).abs().max())
        bound = at + rt * float(r.double().abs().max())
        if not diff <= bound:  # NaN fails too
            return (f"output {i} ({r.dtype}, shape {list(r.shape)}): max |difference| {diff:.3g} > "
                    f"atol + rtol * max|original| = {bound:.3g} (rtol={rt:g}, atol={at:g})")
    return None


@contextlib.contextmanager
def _evaluating(module: nn.Module) -> Iterator[None]:
    """eval() and no_grad inside; every submodule's training flag restored after."""
    flags = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        with torch.no_grad():
            yield
    finally:
        for m, t in flags:
            m.training = t


def _call(module: nn.Module, sample: Any) -> Any:
    if isinstance(sample, dict):
        return module(**sample)
    return module(*sample) if isinstance(sample, tuple) else module(sample)


def _probe(rows: int, features: int, like: Tensor) -> Tensor:
    """A fixed random (rows, features) input like ``like`` (the global RNG is left alone)."""
    g = torch.Generator().manual_seed(0)
    return torch.randn(rows, features, generator=g, dtype=torch.float64).to(like.device, like.dtype)


def _linear_like(module: nn.Module, parent: Optional[nn.Module]) -> tuple[Optional[str], str]:
    """What swap does with ``module``: ``("linear" | "conv1d", "")`` to replace it,
    ``(None, why)`` for a linear-like module it must leave, ``(None, "")`` for anything else."""
    if isinstance(module, (TiledLinear, TiledConv1D)):
        return None, ""
    if isinstance(module, nn.Linear):
        kind = "linear"
        if type(module).forward is not nn.Linear.forward:
            return None, f"{type(module).__name__} overrides nn.Linear.forward"
        if isinstance(parent, nn.MultiheadAttention):
            return None, "nn.MultiheadAttention reads its out_proj parameters directly"
    elif type(module).__name__ == "Conv1D":
        kind = "conv1d"
        w, b, nf = getattr(module, "weight", None), getattr(module, "bias", None), getattr(module, "nf", None)
        if not (isinstance(w, Tensor) and w.dim() == 2 and w.shape[1] == nf and isinstance(b, Tensor)
                and b.shape == (nf,)):
            return None, "named Conv1D but not shaped like transformers' (weight (nx, nf), bias (nf,), nf)"
    else:
        return None, ""
    w = module.weight
    if isinstance(w, nn.parameter.UninitializedParameter):
        return None, "uninitialized parameters (a lazy module): swap after its first forward"
    if w.dtype not in SUPPORTED_DTYPES:
        return None, f"dtype {w.dtype} (supported: " + ", ".join(str(d) for d in SUPPORTED_DTYPES) + ")"
    if w.device.type not in ("cpu", "cuda", "meta"):
        return None, f"device {w.device} (supported: cpu, cuda)"
    if w.device.type == "cuda" and not built_with_cuda():
        return None, "on CUDA, and this build has no CUDA kernels"
    return kind, ""


def _replacement(module: nn.Module, kind: str, variant, tile) -> tuple[Optional[nn.Module], str]:
    """The tilelab module for ``module`` (holding the original), or None and why not."""
    if kind == "linear":
        new = TiledLinear.from_linear(module, variant=variant, tile=tile)
    else:
        new = TiledConv1D.from_conv1d(module, variant=variant, tile=tile)
        if module.weight.device.type != "meta":  # duck-typed: check it computes x @ W + b
            x = _probe(3, module.weight.shape[0], module.weight)
            with _evaluating(module):
                try:
                    why = _mismatch(new(x), module(x), None, None)
                except Exception as e:
                    why = f"{type(e).__name__}: {e}"
            if why is not None:
                return None, f"named Conv1D but does not compute x @ weight + bias: {why}"
    object.__setattr__(new, _ORIGINAL, module)
    return new, ""


def _identify(act: Any) -> tuple[Optional[str], str]:
    """The tiled_linear activation that module ``act`` computes (checked on a probe), or None and why."""
    if not isinstance(act, nn.Module):
        return None, f"activation {act!r} is not a module"
    cls = type(act).__name__
    name = ACTIVATION_CLASSES.get(cls)
    if name is None:
        return None, f"unknown activation {cls}"
    if name == "gelu" and getattr(act, "approximate", "none") == "tanh":
        name = "gelu_tanh"
    if next(act.parameters(), None) is not None or next(act.buffers(), None) is not None:
        return None, f"activation {cls} has parameters or buffers"
    x = torch.cat([torch.linspace(-20, 20, 401, dtype=torch.float64), torch.randn(64, dtype=torch.float64)])
    with torch.no_grad():
        ours = torch.ops.tilelab.tiled_linear.default(x[:, None], torch.ones(1, 1, dtype=torch.float64), None,
                                                      activation=name)[:, 0]
        theirs = act(x.clone())  # a copy: the activation may work in place
    if not torch.allclose(ours, theirs, rtol=1e-6, atol=1e-9):
        return None, f"activation {cls} does not compute {name!r} (max |difference| {(ours - theirs).abs().max():.3g})"
    return name, ""


def _fusable(module: nn.Module) -> list[tuple[str, str, bool]]:
    """(linear layer, activation, whether to probe the whole block) pairs of ``module``
    to try: a known block's (:data:`FUSABLE`), or in an ``nn.Sequential`` each swapped
    linear layer followed by a known activation class (probed as that pair)."""
    if type(module).__name__ in FUSABLE:
        return [(*FUSABLE[type(module).__name__], True)]
    if type(module) is not nn.Sequential:
        return []
    items = list(module._modules.items())
    return [(k, k2, False) for (k, m), (k2, m2) in zip(items, items[1:])
            if isinstance(m, (TiledLinear, TiledConv1D)) and type(m2).__name__ in ACTIVATION_CLASSES]


def _fuse(block: nn.Module, lin_attr: str, act_attr: str, whole: bool) -> tuple[Optional[str], str]:
    """Fuse ``block.<act_attr>`` into the swapped linear layer ``block.<lin_attr>``, in
    place, if the output (of the block if ``whole``, else of the pair) stays the same
    on a probe input. Returns the activation, or None and why not ("" if fused already)."""
    lin, act = getattr(block, lin_attr, None), getattr(block, act_attr, None)
    if isinstance(act, FusedActivation):
        return None, ""
    if not isinstance(lin, (TiledLinear, TiledConv1D)) or lin.activation is not None:
        return None, f"{lin_attr} is not a swapped linear layer"
    activation, why = _identify(act)
    if activation is None:
        return None, why
    w = lin.weight
    if w.device.type == "meta":
        return None, "meta tensors: the fusion cannot be checked"
    x = _probe(5, w.shape[1] if isinstance(lin, TiledLinear) else w.shape[0], w)
    run = block if whole else (lambda t: getattr(block, act_attr)(lin(t)))
    with _evaluating(block):
        try:
            ref = run(x)
        except Exception as e:  # e.g. a block that needs more than one input
            return None, f"could not run {type(block).__name__} on a probe: {e}"
        lin.activation = activation
        setattr(block, act_attr, FusedActivation(lin_attr, activation))
        why = _mismatch(run(x), ref, None, None)
    if why is not None:
        lin.activation = None
        setattr(block, act_attr, act)
        return None, f"fusing {activation!r} into {lin_attr} changes the block's output: {why}"
    object.__setattr__(getattr(block, act_attr), _ORIGINAL, act)
    return activation, ""


def _merge(block: nn.Module, names: tuple[str, ...]) -> tuple[bool, str]:
    """Run ``block``'s swapped linear layers ``names`` as one product (:class:`MergedProjections`),
    in place, if they can and the outputs stay the same on a probe. Returns (merged, why not)
    ("" if merged already)."""
    members = [getattr(block, n, None) for n in names]
    if any(isinstance(m, TiledLinear) and m.merged is not None for m in members):
        return False, ""
    if not all(isinstance(m, TiledLinear) and m.activation is None for m in members):
        return False, "not all of " + ", ".join(names) + " are swapped linear layers without an activation"
    w0 = members[0].weight
    if (len({id(m.weight) for m in members}) < len(members)
            or any(m.in_features != members[0].in_features or m.weight.dtype != w0.dtype
                   or m.weight.device != w0.device or (m.bias is None) != (members[0].bias is None)
                   for m in members)):
        return False, "their weights are shared, or differ in input width, dtype, device or having a bias"
    if w0.device.type == "meta":
        return False, "meta tensors: the merge cannot be checked"
    x = _probe(5, members[0].in_features, w0)
    with torch.no_grad():
        ref = [m(x) for m in members]
        biases = [m.bias for m in members] if members[0].bias is not None else []
        for params in ([m.weight for m in members], biases):
            if params and _back_to_back(params) is None:  # one buffer, each Parameter a view of it
                for p, v in zip(params, torch.cat([p.detach() for p in params]).split(
                        [p.shape[0] for p in params])):
                    p.data = v
        group = MergedProjections(list(names), members)
        for m in members:
            m.merged = group
        for name, m, r in zip(names, members, ref):
            why = _mismatch(m(x), r, None, None)
            if why is not None:
                for mm in members:
                    mm.merged = None
                return False, f"merging changes {name}'s output: {why}"
    return True, ""


def swap(model: nn.Module, *, fuse: bool = True, variant: Optional[str] = None, tile: Optional[int] = None,
         sample: Any = None, rtol: Optional[float] = None, atol: Optional[float] = None) -> SwapReport:
    """Put tilelab under ``model``, in place: the fast path (no per-call Python beyond each module's forward).

    - every ``nn.Linear`` (or subclass that keeps its forward) becomes a :class:`TiledLinear`,
      every transformers ``Conv1D`` (recognised by its class name and shapes, checked
      on a probe) a :class:`TiledConv1D`; they share the original Parameter objects,
      so tied weights stay tied and optimizer state stays valid;
    - with ``fuse``, the activation of a known MLP block (:data:`FUSABLE`: timm's ``Mlp``,
      ``NormMlp`` and ``SwiGLU``; transformers' GPT-2-, GPT-J-, GPT-NeoX-, Phi-, CLIP- and T5-style MLPs,
      BERT-style intermediate layers and Llama-style gated MLPs), or one that follows
      a linear layer in an ``nn.Sequential``, moves into the epilogue of that linear
      layer when it is one tilelab computes (:data:`ACTIVATION_CLASSES`, checked on
      a probe tensor) and the block's output stays the same on a probe input; the
      activation's place holds a :class:`FusedActivation` (identity). Activations of
      known blocks that are not fused are reported in ``left``. Also with ``fuse``, the
      query, key and value projections of a known attention block (:data:`MERGEABLE`:
      self-attention that projects one input three ways, e.g. Llama's, Qwen's, Gemma's,
      Phi's, OPT's, GPT-J's, CLIP's, BERT's) run as one
      product on their weights laid back to back in one buffer (:class:`MergedProjections`;
      each Parameter object stays, as a view of that buffer, until :func:`unswap`). And a
      Llama-style gated MLP (:data:`GATED`) whose activation was fused becomes a
      :class:`TiledGatedMLP`: its gate and up products run as one ``tiled_gated_linear``;
      one with a single gate-and-up layer (:data:`GATED_MERGED`: Phi-3, GLM) becomes a
      :class:`TiledMergedGatedMLP`: that layer's two halves run as one ``tiled_gated_linear``.
    - state_dict keys do not change.
    - ``variant``/``tile`` force a kernel for every swapped module, as for :func:`tiled_mm`.
    - ``sample`` (a tensor, a tuple of positional inputs or a dict of keyword inputs):
      the model runs on it before and after (eval mode, no grad), and each output
      tensor must match: ``max|y - y0| <= atol + rtol * max|y0|`` with ``rtol``/``atol``
      from :data:`TOLERANCES` by dtype unless given (fp32 1e-4/1e-5, fp16 1e-2/1e-3,
      bf16 3e-2/1e-2; fp32 under TF32 as fp16). Otherwise the model is restored (:func:`unswap`) and a
      RuntimeError says by how much they differ.

    Modules already swapped are left as they are. Returns a :class:`SwapReport`
    (linear-like modules and activations left alone are in ``left``, with the reason).
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"swap: expected an nn.Module, got {type(model).__name__}")
    report = SwapReport()
    if sample is not None:
        with _evaluating(model):
            ref = _call(model, sample)
    if any(_linear_like(model, None)):
        report.left.append(("", "the root module cannot be replaced in place: use TiledLinear.from_linear "
                                "or TiledConv1D.from_conv1d"))
    done: dict[int, nn.Module] = {}  # original's id -> replacement: a module shared by two parents stays shared
    seen = set()

    def visit(parent: nn.Module, prefix: str) -> None:  # depth first: the report lists modules in model order
        for cname, child in list(parent.named_children()):
            name = prefix + cname
            if id(child) in done:
                setattr(parent, cname, done[id(child)])
                continue
            kind, why = _linear_like(child, parent)
            if kind is None and not why:
                if id(child) not in seen:
                    seen.add(id(child))
                    visit(child, name + ".")
            elif kind is None:
                report.left.append((name, why))
            else:
                new, why = _replacement(child, kind, variant, tile)
                if new is None:
                    report.left.append((name, why))
                    continue
                done[id(child)] = new
                setattr(parent, cname, new)
                report.swapped.append(name)

    visit(model, "")
    if fuse:
        for name, module in list(model.named_modules()):
            prefix = f"{name}." if name else ""
            for lin_attr, act_attr, whole in _fusable(module):
                activation, why = _fuse(module, lin_attr, act_attr, whole)
                if activation is not None:
                    report.fused.append((prefix + lin_attr, activation))
                elif why:
                    report.left.append((prefix + act_attr, why))
            names = MERGEABLE.get(type(module).__name__)
            if names is not None:
                merged, why = _merge(module, names)
                if merged:
                    report.merged.append(tuple(prefix + n for n in names))
                elif why:
                    report.left.append((prefix + names[0], why))
            for table, gate in ((GATED, _gate), (GATED_MERGED, _gate_merged)):
                names = table.get(type(module).__name__)
                if names is not None and name:
                    replaced, why = gate(model, name, module, names)
                    if replaced:
                        report.gated.append(name)
                    elif why:
                        report.left.append((name, why))
    if sample is not None:
        with _evaluating(model):
            why = _mismatch(_call(model, sample), ref, rtol, atol)
        if why is not None:
            unswap(model)
            raise RuntimeError(f"swap: the swapped model's output differs from the original's on the sample, "
                               f"so the model was restored: {why}")
    return report


def unswap(model: nn.Module) -> int:
    """Put back the modules :func:`swap` replaced (the original objects), in place.

    The originals get the replacements' current parameters and training mode; the
    parameters of merged projections get buffers of their own again (a copy).
    Returns how many modules it restored: the swapped layers, the fused activations and
    the gated MLP blocks (``len(report.swapped) + len(report.fused) + len(report.gated)``).
    """
    restored = set()
    # Gated MLP blocks first: their submodules go back into the block they came from, where the loop below
    # finds them.
    for _, parent in list(model.named_modules()):
        for cname, child in list(parent.named_children()):
            if isinstance(child, _GatedBlock):
                original = child.__dict__[_ORIGINAL]
                for n in child.names:
                    setattr(original, n, child._modules[n])
                original.train(child.training)
                setattr(parent, cname, original)
                restored.add(id(child))
    for _, parent in list(model.named_modules()):
        for cname, child in list(parent.named_children()):
            original = child.__dict__.get(_ORIGINAL)
            if original is None:
                continue
            if isinstance(child, TiledLinear) and child.merged is not None:
                with torch.no_grad():
                    for p in (child.weight, child.bias):
                        if p is not None:
                            p.data = p.data.clone()
                child.merged.pending = child.merged.views = None
                child.merged = None
            if isinstance(child, (TiledLinear, TiledConv1D)):
                original.weight, original.bias = child.weight, child.bias
            original.train(child.training)
            setattr(parent, cname, original)
            restored.add(id(child))
    return len(restored)


def swap_linear(model: nn.Module, *, variant: Optional[str] = None, tile: Optional[int] = None) -> int:
    """Deprecated: ``len(swap(model, fuse=False, variant=variant, tile=tile).swapped)``."""
    warnings.warn("swap_linear is deprecated; use tilelab_torch.swap(model), which also swaps transformers' "
                  "Conv1D, fuses activations and returns a SwapReport", DeprecationWarning, stacklevel=2)
    return len(swap(model, fuse=False, variant=variant, tile=tile).swapped)


# -------------------------------------------------------------------- use_tiled
_LOW = frozenset((torch.float16, torch.bfloat16, torch.float32))
_DTYPES = frozenset(SUPPORTED_DTYPES)
_STRIDED = torch.strided


def _ok(ts) -> bool:
    """Whether tilelab takes these tensors: strided, one CPU/CUDA device, one supported
    dtype (or fp16/bf16/fp32 mixed under that device's autocast)."""
    t0 = ts[0]
    if not isinstance(t0, Tensor):
        return False
    dev, dtype = t0.device, t0.dtype
    mixed = False
    for t in ts:
        if not isinstance(t, Tensor) or t.layout is not _STRIDED or t.device != dev:
            return False
        mixed = mixed or t.dtype is not dtype
    if dev.type not in ("cpu", "cuda"):
        return False
    if not mixed:
        return dtype in _DTYPES
    return torch.is_autocast_enabled(dev.type) and all(t.dtype in _LOW for t in ts)


class use_tiled(TorchFunctionMode):
    """Route matmuls to tilelab inside a ``with`` block (a TorchFunctionMode).

    Routed: ``torch.matmul``/``Tensor.matmul``/``@``, ``torch.mm``, ``torch.bmm``,
    ``torch.addmm`` (beta = alpha = 1) and ``F.linear``, for CPU or CUDA tensors of one
    device and one float dtype (under autocast for that device, mixed fp16/bf16/fp32
    inputs too: the ops' autocast rules cast them as torch.mm would). matmul takes 2-D
    and batched operands (any leading dims that flatten to one batch without a copy
    of the result shape, including a broadcast 2-D side); everything else (out=,
    1-D operands, other dtypes, ...) goes to torch unchanged.

    Every torch call in the block passes through this mode's Python (one dict
    lookup for a function it does not route); :func:`swap` is the fast path for a
    model's linear layers: no per-call Python beyond the module's forward.

    ``routed`` counts the calls sent to tilelab, ``routed_by`` per function name,
    ``passed`` those left to torch.
    """

    def __init__(self, variant: Optional[str] = None, tile: Optional[int] = None):
        super().__init__()
        self.variant, self.tile = variant, tile
        self.routed = 0
        self.passed = 0
        self.routed_by: collections.Counter = collections.Counter()
        ops = torch.ops.tilelab
        self._mm_op, self._bmm_op, self._addmm_op = ops.tiled_mm.default, ops.tiled_bmm.default, ops.tiled_addmm.default
        self._linear_op = ops.tiled_linear.default

    # ------------------------------------------------------------- handlers
    # Each returns NotImplemented for a call it does not take (torch then runs it).
    def _mm(self, a, b, *rest, **kw):
        if rest or kw or not _ok((a, b)) or a.dim() != 2 or b.dim() != 2:
            return NotImplemented
        return self._mm_op(a, b, variant=self.variant, tile=self.tile)

    def _bmm(self, a, b, *rest, **kw):
        if rest or kw or not _ok((a, b)) or a.dim() != 3 or b.dim() != 3 or a.shape[0] != b.shape[0]:
            return NotImplemented
        return self._bmm_op(a, b, variant=self.variant, tile=self.tile)

    def _addmm(self, bias, a, b, *rest, beta=1, alpha=1, **kw):
        if (rest or kw or beta != 1 or alpha != 1 or not _ok((bias, a, b)) or a.dim() != 2 or b.dim() != 2
                or not bias_broadcasts(bias, a.shape[0], b.shape[1])):
            return NotImplemented
        return self._addmm_op(bias, a, b, variant=self.variant, tile=self.tile)

    def _linear(self, x, weight, bias=None, *rest, **kw):
        if rest or kw or not _ok((x, weight) if bias is None else (x, weight, bias)) or x.dim() < 1 \
                or weight.dim() != 2 or (bias is not None and bias.dim() > 1):
            return NotImplemented
        # One op for any leading dims of x; weight.t() is read in place.
        return self._linear_op(x, weight, bias, variant=self.variant, tile=self.tile)

    def _matmul(self, a, b, *rest, **kw):
        if rest or kw or not _ok((a, b)):
            return NotImplemented
        da, db = a.dim(), b.dim()
        if da < 2 or db < 2:
            return NotImplemented
        if da == 2 and db == 2:
            return self._mm_op(a, b, variant=self.variant, tile=self.tile)
        if db == 2:
            # (..., M, K) @ (K, N): one 2-D product over the flattened rows.
            y = self._mm_op(a.reshape(-1, a.shape[-1]), b, variant=self.variant, tile=self.tile)
            return y.reshape(*a.shape[:-1], b.shape[-1])
        try:
            lead = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except RuntimeError:
            return NotImplemented
        # Broadcast batch dims become stride-0 views (read in place by the kernels).
        a3 = a.expand(*lead, *a.shape[-2:]).reshape(-1, *a.shape[-2:])
        b3 = b.expand(*lead, *b.shape[-2:]).reshape(-1, *b.shape[-2:])
        y = self._bmm_op(a3, b3, variant=self.variant, tile=self.tile)
        return y.reshape(*lead, a.shape[-2], b.shape[-1])

    # ------------------------------------------------------------ the mode
    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func not in _ROUTES:  # the common case: one dict lookup, no allocation
            return func(*args, **kwargs) if kwargs else func(*args)
        name, handler = _ROUTES[func]
        out = handler(self, *args, **kwargs) if kwargs else handler(self, *args)
        if out is NotImplemented:
            self.passed += 1
            return func(*args, **kwargs) if kwargs else func(*args)
        self.routed += 1
        self.routed_by[name] += 1
        return out


#: What use_tiled routes: torch function -> (name in ``routed_by``, handler).
_ROUTES = {
    torch.matmul: ("matmul", use_tiled._matmul),
    Tensor.matmul: ("matmul", use_tiled._matmul),
    Tensor.__matmul__: ("matmul", use_tiled._matmul),
    torch.mm: ("mm", use_tiled._mm),
    Tensor.mm: ("mm", use_tiled._mm),
    torch.bmm: ("bmm", use_tiled._bmm),
    Tensor.bmm: ("bmm", use_tiled._bmm),
    torch.addmm: ("addmm", use_tiled._addmm),
    Tensor.addmm: ("addmm", use_tiled._addmm),
    F.linear: ("linear", use_tiled._linear),
    torch._C._nn.linear: ("linear", use_tiled._linear),
}
