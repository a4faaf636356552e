"""tilelab ops on DTensors: the sharding rules that let tensor parallelism use them.

    import tilelab_torch.distributed          # registers the rules (idempotent)
    parallelize_module(model, mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})

PyTorch's distributed engine (DTensor) decides placements and runs every
collective; tilelab only computes the local products. Each rule below says, for
one mesh dimension, which input placements an op can take and the output
placement it then gives (DTensor expands the rules to every dimension of a
mesh, and for inputs that match no rule redistributes them to the cheapest one
that does). ``P`` is ``Partial()`` (a sum over the mesh dimension still to be
done), ``R`` is ``Replicate()``, ``S(d)`` is ``Shard(d)``; inputs -> output:

    tiled_mm     a (M, K) @ b (K, N)
                   a S(0), b R     -> S(0)   row-parallel
                   a R, b S(1)     -> S(1)   column-parallel
                   a S(1), b S(0)  -> P      K sharded: partial sums
                   a P, b R;  a R, b P -> P  (the product is linear in each)
                   a R, b R        -> R
    tiled_addmm  tiled_mm's rules; the bias follows the output after broadcasting:
                 sharded with it, replicated along its broadcast dims, P for P
    tiled_bmm    a S(0), b S(0) -> S(0) (batch), then tiled_mm's rules one dim later
    tiled_linear x (..., K), weight (N, K), bias (N,) or None
                   x S(d), W R, bias R       -> S(d)   any leading dim d (batch, sequence)
                   x R, W S(0), bias S(0)    -> S(-1)  column-parallel
                   x S(-1), W S(1), bias P   -> P      row-parallel        } activation
                   x P, W R;  x R, W P; bias P -> P                        } None only
                   all R                     -> R
    tiled_gated_linear  x (..., K), w_gate and w_up (N, K): act(x @ w_gate.t()) * (x @ w_up.t())
                   x S(d), both W R         -> S(d)   any leading dim d
                   x R, both W S(0)         -> S(-1)  column-parallel (the same rows of both weights)
                   all R                    -> R      (no Partial: the activation and the product are
                                                       nonlinear in the sums)

A bias on a ``Partial`` output is itself ``Partial``: DTensor turns the
replicated bias into ``bias / n`` on each of the n ranks (its Replicate ->
Partial rule, also what ``torch.addmm`` on DTensors does; exact for n a power of
two), so the sum over the ranks adds it once. A nonlinear activation cannot run on a partial sum, so
``tiled_linear`` with an activation has no ``Partial`` output: given row-parallel
inputs, DTensor redistributes them first (in a tensor-parallel MLP the activation
belongs to the column-parallel layer, whose output is sharded, so this does not
arise). With a gradient to record, ``tiled_linear`` runs on x flattened to 2-D
(csrc/autograd.cpp): as ``tiled_addmm`` without an activation, and with one as
``_tiled_linear_pre`` (the activation's output and its input from one call), whose
rules are ``tiled_linear``'s with an activation for both outputs, so DTensor
finishes a partial sum first; as for ``F.linear``, DTensor refuses to flatten an x
sharded on a leading dim other than the first (SequenceParallel on a 3-D input;
without a gradient ``tiled_linear`` runs it).

Inputs that match no rule are redistributed, so every placement is served (the
all-Replicate rule always applies); what raises is what DTensor refuses for any
op (a DTensor mixed with a plain tensor, operands on different meshes) and the
op's own errors (shapes, dtypes, activation, variant), with the op's message.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Sequence, Tuple

import torch

if not torch.distributed.is_available():
    raise ImportError("tilelab_torch.distributed needs torch.distributed, which this torch build does not have")

from torch.distributed.tensor import DTensor, Partial, Replicate, Shard  # noqa: E402
from torch.distributed.tensor._op_schema import RuntimeSchemaInfo  # noqa: E402
from torch.distributed.tensor.experimental import register_sharding  # noqa: E402

__all__ = ["register", "rules"]

# A rule: ([output placement], [one placement per argument; None for a non-tensor]).
Rule = Tuple[list, list]
R, P = Replicate(), Partial()


def _mm_rules(ndim: int, batched: bool) -> List[tuple]:
    """(a, b, out) placements of a (..., M, K) @ (..., K, N) product of ndim-D operands."""
    row, col = ndim - 2, ndim - 1  # the two matrix dims of each operand (and of the output)
    rows = [(Shard(row), R, Shard(row)),  # row-parallel
            (R, Shard(col), Shard(col)),  # column-parallel
            (Shard(col), Shard(row), P),  # K sharded: partial sums
            (P, R, P), (R, P, P),  # the product is linear in each operand
            (R, R, R)]
    if batched:
        rows.insert(0, (Shard(0), Shard(0), Shard(0)))
    return rows


def _bias_for(out, bias, out_shape: Sequence[int]):
    """The bias's placement for an output placement: it follows the output after
    broadcasting (right-aligned); a broadcast (size-1 or missing) dim is replicated."""
    if not isinstance(out, Shard):
        return out  # Replicate -> Replicate, Partial -> Partial (bias / n per rank)
    d = out.dim - (len(out_shape) - bias.ndim)  # the output dim in the bias's own dims
    if d >= 0 and bias.shape[d] == out_shape[out.dim] and bias.shape[d] > 1:
        return Shard(d)
    return R


def _out_shape(a, b) -> List[int]:
    return [*a.shape[:-1], b.shape[-1]]


def _tiled_mm(a, b, *, variant: Optional[str] = None, tile: Optional[int] = None) -> List[Rule]:
    return [([o], [pa, pb]) for pa, pb, o in _mm_rules(2, batched=False)]


def _tiled_bmm(a, b, *, variant: Optional[str] = None, tile: Optional[int] = None) -> List[Rule]:
    return [([o], [pa, pb]) for pa, pb, o in _mm_rules(3, batched=True)]


def _tiled_addmm(bias, a, b, *, variant: Optional[str] = None, tile: Optional[int] = None) -> List[Rule]:
    shape = _out_shape(a, b)
    return [([o], [_bias_for(o, bias, shape), pa, pb]) for pa, pb, o in _mm_rules(2, batched=False)]


def _tiled_linear(x, weight, bias=None, *, activation: Optional[str] = None, variant: Optional[str] = None,
                  tile: Optional[int] = None) -> List[Rule]:
    last = x.ndim - 1
    shape = [*x.shape[:-1], weight.shape[0]]
    rows = [(Shard(d), R, Shard(d)) for d in range(last)]  # batch / sequence: any leading dim
    rows += [(R, Shard(0), Shard(last)), (R, R, R)]  # column-parallel; replicated
    if activation is None:  # a partial sum takes no nonlinear activation
        rows += [(Shard(last), Shard(1), P), (P, R, P), (R, P, P)]
    if bias is None:
        return [([o], [px, pw, None]) for px, pw, o in rows]
    return [([o], [px, pw, _bias_for(o, bias, shape)]) for px, pw, o in rows]


def _tiled_linear_pre(x, weight, bias=None, *, activation: str, variant: Optional[str] = None,
                      tile: Optional[int] = None) -> List[Rule]:
    """tiled_linear's training path with an activation (csrc/autograd.cpp): act(y) and y, both placed as
    tiled_linear's output with that activation (never Partial)."""
    return [([o, o], ins) for [o], ins in _tiled_linear(x, weight, bias, activation=activation)]


def _tiled_gated_linear(x, w_gate, w_up, *, activation: Optional[str] = "silu") -> List[Rule]:
    last = x.ndim - 1
    rows = [(Shard(d), R, Shard(d)) for d in range(last)]  # batch / sequence: any leading dim
    rows += [(R, Shard(0), Shard(last)), (R, R, R)]  # column-parallel; replicated
    return [([o], [px, pw, pw]) for px, pw, o in rows]


_RULES: dict = {
    "tiled_mm": _tiled_mm,
    "tiled_bmm": _tiled_bmm,
    "tiled_addmm": _tiled_addmm,
    "tiled_linear": _tiled_linear,
    "_tiled_linear_pre": _tiled_linear_pre,
    "tiled_gated_linear": _tiled_gated_linear,
}


def rules() -> dict:
    """The rule functions by op name: each takes the op's arguments (tensors as
    DTensor specs, with ``.shape``/``.ndim``) and returns ``(output placements,
    input placements)`` pairs for one mesh dimension, as ``register_sharding`` expects."""
    return dict(_RULES)


def _register_one(op: torch._ops.OpOverload, fn: Callable[..., List[Rule]]) -> None:
    register_sharding(op)(fn)
    # register_sharding hashes only the int kwargs into DTensor's cache of sharding
    # decisions; the str ones (activation, which changes the rules, and variant)
    # must be part of the key too, or a decision made for activation=None would be
    # reused for "relu".
    keys = [a.name for a in op._schema.arguments if a.kwarg_only]
    propagator = DTensor._op_dispatcher.sharding_propagator
    propagator.register_op_strategy(op, propagator.op_strategy_funcs[op],
                                    RuntimeSchemaInfo(static_kwargkey=keys, needs_pytree=True))


def register() -> List[str]:
    """Register the sharding rules of every tilelab op with DTensor; returns the op names.

    Called on import of this module; calling it again re-registers (harmless).
    """
    for name, fn in _RULES.items():
        _register_one(getattr(torch.ops.tilelab, name).default, fn)
    return list(_RULES)


register()
