"""tilelab under tensor parallelism (DTensor): the sharding rules of tilelab_torch.distributed.

Two processes on the CPU, a gloo world, spawned once for the module: every check
below runs on both ranks, and each pytest test reports one check. A rule check
shards full tensors (the same seed on every rank) as the rule's inputs, asserts
that the op keeps them as they are (the expected output placement, no
collective) and compares the output and the inputs' gradients, gathered, with
the unsharded op. Then TiledLinear under parallelize_module (column-, row-wise,
sequence parallel, an MLP, an optimizer step) against nn.Linear under the same
plan, and the errors for what cannot be served.
"""
import datetime
import json
import os
import sys
import time
import traceback
from types import SimpleNamespace

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

import tilelab_torch

WORLD = 2
TIMEOUT_S = 240  # the whole spawned run; a collective waits at most 60 s
HAS_GLOO = dist.is_available() and dist.is_gloo_available()
pytestmark = pytest.mark.skipif(not HAS_GLOO, reason="needs torch.distributed with the gloo backend")

if HAS_GLOO:
    import torch.multiprocessing as mp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard, distribute_tensor
    from torch.distributed.tensor.debug import CommDebugMode
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel, SequenceParallel,
                                                   parallelize_module)

    import tilelab_torch.distributed as tl_dist

    R, P = Replicate(), Partial()
    S0, S1, S2 = Shard(0), Shard(1), Shard(2)

CHECKS = {}


def check(fn):
    """Registers a check: fn(mesh) runs on every rank and raises on failure."""
    CHECKS[fn.__name__[len("check_"):]] = fn
    return fn


# ------------------------------------------------------------------ helpers
def full(*shape, dtype=torch.float64):
    return torch.randn(shape, dtype=dtype)


def close(got, want, what, tol=1e-10):
    got = got.full_tensor() if isinstance(got, DTensor) else got
    torch.testing.assert_close(got, want, atol=tol, rtol=tol, msg=lambda m: f"{what}: {m}")


def check_rule(mesh, op, tensors, placements, expected, kwargs=None, what="", grad=True):
    """Run op on the tensors sharded as `placements`; assert the output placement is
    `expected` and that no collective ran, then compare output and gradients with
    the unsharded op."""
    kwargs = kwargs or {}
    what = f"{op} {what} inputs {placements}"
    dts = [None if t is None else distribute_tensor(t, mesh, [p], src_data_rank=None).requires_grad_(grad)
           for t, p in zip(tensors, placements)]
    with CommDebugMode() as comm:
        out = op(*dts, **kwargs)
    assert out.placements == (expected,), f"{what}: output {out.placements}, expected ({expected},)"
    assert comm.get_total_counts() == 0, f"{what}: the op ran collectives {dict(comm.get_comm_counts())}"
    refs = [None if t is None else t.clone().requires_grad_(grad) for t in tensors]
    want = op(*refs, **kwargs)
    close(out, want, f"{what}: output")
    if not grad:
        return
    g = torch.randn_like(want)
    (out.full_tensor() * g).sum().backward()
    (want * g).sum().backward()
    for i, (d, r) in enumerate(zip(dts, refs)):
        if d is not None:
            close(d.grad, r.grad, f"{what}: gradient of input {i}")


# --------------------------------------------------------------- the rules
def mm_cases():
    """(a placement, b placement, output placement) of the 2-D rules."""
    return [(S0, R, S0), (R, S1, S1), (S1, S0, P), (P, R, P), (R, P, P), (R, R, R)]


@check
def check_tiled_mm_rules(mesh):
    torch.manual_seed(1)
    for M, K, N in ((6, 10, 4), (7, 5, 3)):  # even and uneven shards
        a, b = full(M, K), full(K, N)
        for pa, pb, out in mm_cases():
            check_rule(mesh, torch.ops.tilelab.tiled_mm.default, [a, b], [pa, pb], out, what=f"{M}x{N}x{K}")


@check
def check_forced_kernel(mesh):
    """variant/tile pass through DTensor to the local op: "cpu" runs, a CUDA kernel
    forced on CPU shards raises the op's own error."""
    torch.manual_seed(2)
    a, b = full(8, 6), full(6, 4)
    for pa, pb, out in mm_cases():
        check_rule(mesh, torch.ops.tilelab.tiled_mm.default, [a, b], [pa, pb], out, {"variant": "cpu"})
    da = distribute_tensor(a, mesh, [S0], src_data_rank=None)
    db = distribute_tensor(b, mesh, [R], src_data_rank=None)
    with pytest.raises(RuntimeError, match="variant='tiled' is a CUDA kernel"):
        torch.ops.tilelab.tiled_mm.default(da, db, variant="tiled", tile=16)


@check
def check_tiled_addmm_rules(mesh):
    """The bias follows the output: sharded with it, replicated along broadcast dims,
    Partial (bias / n per rank, so added once) with a Partial output."""
    torch.manual_seed(3)
    M, K, N = 6, 8, 4
    a, b = full(M, K), full(K, N)
    for bias_shape in ((N,), (1, N), (M, 1), (M, N), ()):
        bias = full(*bias_shape)
        for pa, pb, out in mm_cases():
            check_rule(mesh, torch.ops.tilelab.tiled_addmm.default, [bias, a, b], [R, pa, pb], out,
                       what=f"bias {list(bias_shape)}")
        # A bias already sharded like the output is taken as it is.
        if bias_shape == (M, N):
            check_rule(mesh, torch.ops.tilelab.tiled_addmm.default, [bias, a, b], [S0, S0, R], S0)
            check_rule(mesh, torch.ops.tilelab.tiled_addmm.default, [bias, a, b], [S1, R, S1], S1)


@check
def check_tiled_bmm_rules(mesh):
    torch.manual_seed(4)
    cases = [(S0, S0, S0), (S1, R, S1), (R, S2, S2), (S2, S1, P), (P, R, P), (R, P, P), (R, R, R)]
    for B, M, K, N in ((4, 6, 8, 2), (3, 5, 7, 3)):
        a, b = full(B, M, K), full(B, K, N)
        for pa, pb, out in cases:
            check_rule(mesh, torch.ops.tilelab.tiled_bmm.default, [a, b], [pa, pb], out, what=f"B={B}")


def linear_cases(ndim):
    """(x, weight, output placement) of tiled_linear's rules for an ndim-D x."""
    last = ndim - 1
    lead = [(Shard(d), R, Shard(d)) for d in range(last)]
    return lead + [(R, S0, Shard(last)), (Shard(last), S1, P), (P, R, P), (R, P, P), (R, R, R)]


@check
def check_tiled_linear_rules(mesh):
    """Without a gradient (the fused kernel) and with one (tiled_addmm + torch's
    activation): the rules, the bias (N,) following the output, every activation."""
    torch.manual_seed(5)
    op = torch.ops.tilelab.tiled_linear.default
    for lead in ((6,), (4, 6), (2, 4, 6)):
        K, N = 8, 4
        x, w, bias = full(*lead, K), full(N, K), full(N)
        for px, pw, out in linear_cases(len(lead) + 1):
            for grad in (False, True):
                if grad and isinstance(px, Shard) and 0 < px.dim < len(lead):
                    check_flatten_refused(mesh, op, x, w, px)
                    continue
                for b in (None, bias):
                    what = f"x {list(x.shape)} bias={b is not None} grad={grad}"
                    acts = [None] if isinstance(out, Partial) else [None, "relu", "gelu", "gelu_tanh", "silu"]
                    for act in acts:
                        check_rule(mesh, op, [x, w, b], [px, pw, R], out, {"activation": act}, grad=grad,
                                   what=f"{what} activation={act}")


@check
def check_tiled_gated_linear_rules(mesh):
    """act(x @ w_gate.t()) * (x @ w_up.t()): rows sharded on any leading dim, or both weights on the same rows
    (column-parallel), without a gradient (the op's kernel) and with one (two tiled_linear calls and their
    product); uneven shards."""
    torch.manual_seed(10)
    op = torch.ops.tilelab.tiled_gated_linear.default
    for lead, K, N in (((6,), 8, 4), ((4, 5), 6, 3)):
        x, wg, wu = full(*lead, K), full(N, K), full(N, K)
        last = len(lead)
        cases = [(Shard(d), R, Shard(d)) for d in range(last)] + [(R, S0, Shard(last)), (R, R, R)]
        for px, pw, out in cases:
            for grad in (False, True):
                if grad and isinstance(px, Shard) and 0 < px.dim < last:
                    continue  # with a gradient tiled_linear flattens x, as F.linear: refused (check_flatten_refused)
                for act in ("silu", "gelu_tanh"):
                    check_rule(mesh, op, [x, wg, wu], [px, pw, pw], out, {"activation": act}, grad=grad,
                               what=f"x {list(x.shape)} grad={grad} activation={act}")


def check_flatten_refused(mesh, op, x, w, px):
    """With a gradient to record, tiled_linear flattens x's leading dims, as F.linear
    does; DTensor refuses to flatten a sharded inner dim for both (SequenceParallel
    on a 3-D input fails for nn.Linear too). Should tiled_linear learn to keep the
    dims, this check turns into a value check."""
    dx = distribute_tensor(x, mesh, [px], src_data_rank=None).requires_grad_()
    dw = distribute_tensor(w, mesh, [R], src_data_rank=None).requires_grad_()
    with pytest.raises(RuntimeError, match="Attempted to flatten"):
        F.linear(dx, dw)
    try:
        out = op(dx, dw)
    except RuntimeError as e:
        assert "Attempted to flatten" in str(e), e
        return
    close(out, F.linear(x, w), f"x {list(x.shape)} sharded {px} with a gradient")


@check
def check_activation_never_on_partial_sums(mesh):
    """Row-parallel inputs with an activation: DTensor must finish the sum first.
    The same placements with activation=None (Partial output) run first, so a
    sharding decision cached without the activation in its key would be reused."""
    torch.manual_seed(6)
    op = torch.ops.tilelab.tiled_linear.default
    x, w, b = full(3, 6, 8), full(4, 8), full(4)
    dx = distribute_tensor(x, mesh, [S2], src_data_rank=None)
    dw = distribute_tensor(w, mesh, [S1], src_data_rank=None)
    db = distribute_tensor(b, mesh, [R], src_data_rank=None)
    for grad in (False, True):
        with torch.set_grad_enabled(grad):
            gx, gw = dx.detach().requires_grad_(grad), dw.detach().requires_grad_(grad)
            for act, fn in ((None, lambda z: z), ("relu", torch.relu), ("silu", F.silu), (None, lambda z: z)):
                out = op(gx, gw, db, activation=act)
                assert act is None or not any(isinstance(p, Partial) for p in out.placements), \
                    f"activation {act} on a Partial output: {out.placements}"
                close(out, fn(F.linear(x, w, b)), f"row-parallel inputs, activation {act}, grad={grad}")


@check
def check_partial_max_input(mesh):
    """A Partial that is not a sum matches no rule: DTensor reduces it first."""
    torch.manual_seed(7)
    a, b = full(4, 6), full(6, 3)
    da = DTensor.from_local(a - dist.get_rank(), mesh, [Partial("max")])  # max over the ranks: a
    db = distribute_tensor(b, mesh, [R], src_data_rank=None)
    close(torch.ops.tilelab.tiled_mm.default(da, db), a @ b, "Partial(max) @ Replicate")


@check
def check_errors(mesh):
    """What cannot be served raises, and says why."""
    a, b = full(4, 6), full(6, 3)
    da = distribute_tensor(a, mesh, [S0], src_data_rank=None)
    with pytest.raises(RuntimeError, match="mixed torch.Tensor and DTensor"):
        torch.ops.tilelab.tiled_mm.default(da, b)
    db = distribute_tensor(full(5, 3), mesh, [R], src_data_rank=None)
    with pytest.raises(RuntimeError, match=r"tilelab::tiled_mm: inner dimensions differ: a is \[4, 6\] and b is "
                                           r"\[5, 3\]"):
        torch.ops.tilelab.tiled_mm.default(da, db)
    bias = distribute_tensor(full(5), mesh, [R], src_data_rank=None)
    with pytest.raises(RuntimeError, match=r"tilelab::tiled_addmm: bias of shape \[5\] does not broadcast"):
        torch.ops.tilelab.tiled_addmm.default(bias, da, distribute_tensor(b, mesh, [R], src_data_rank=None))
    w = distribute_tensor(full(3, 6), mesh, [S0], src_data_rank=None)
    with pytest.raises(RuntimeError, match="unknown activation 'tanh'"):
        torch.ops.tilelab.tiled_linear.default(da, w, None, activation="tanh")


# ---------------------------------------------------- modules, through plans
def plan_input(x, plan_name, rank):
    """The local input a plan expects on this rank (x is the full input)."""
    if plan_name in ("rowwise", "rowwise_sp_out"):
        return x.chunk(WORLD, -1)[rank]
    if plan_name in ("sequence", "colwise_sp_in"):
        return x.chunk(WORLD, 1)[rank]
    if plan_name == "sequence_2d":
        return x.chunk(WORLD, 0)[rank]
    return x


def plans():
    return {
        "colwise": ColwiseParallel(),
        "rowwise": RowwiseParallel(),
        "colwise_sp_in": ColwiseParallel(input_layouts=Shard(1)),
        "rowwise_sp_out": RowwiseParallel(output_layouts=Shard(1)),
        "sequence_2d": SequenceParallel(sequence_dim=0),
        "sequence": SequenceParallel(),
    }


def local(t):
    return t.to_local() if isinstance(t, DTensor) else t


def run_plan(mesh, module, plan_name, x, grad):
    """(local output, local input grad, full param grads, collectives) of a parallelized copy."""
    rank = dist.get_rank()
    tp = parallelize_module(module, mesh, plans()[plan_name])
    xin = plan_input(x, plan_name, rank).detach().requires_grad_(grad)
    with torch.set_grad_enabled(grad), CommDebugMode() as comm:
        y = local(tp(xin))
    grads = {}
    if grad:
        y.square().sum().backward()
        grads = {n: (p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad)
                 for n, p in tp.named_parameters()}
    return y.detach(), (local(xin.grad) if grad else None), grads, dict(comm.get_comm_counts())


@check
def check_tiled_linear_module_under_plans(mesh):
    """TiledLinear runs every plan nn.Linear runs, with the same values, gradients and
    collectives. SequenceParallel on a 3-D input fails for nn.Linear (DTensor cannot
    flatten the sharded sequence dim, which F.linear does) and for TiledLinear with a
    gradient (tiled_linear's autograd flattens too); without one TiledLinear runs it."""
    for plan_name in plans():
        for grad in (True, False):
            torch.manual_seed(8)
            lin = nn.Linear(8, 6)
            x = torch.randn(2, 4, 8) if plan_name != "sequence_2d" else torch.randn(4, 8)
            results = {}
            for impl in ("torch", "tilelab"):
                m = nn.Linear(8, 6)
                m.load_state_dict(lin.state_dict())
                if impl == "tilelab":
                    m = tilelab_torch.TiledLinear.from_linear(m)
                try:
                    results[impl] = run_plan(mesh, m, plan_name, x, grad)
                except RuntimeError as e:
                    results[impl] = e
            want, got = results["torch"], results["tilelab"]
            what = f"{plan_name} grad={grad}"
            if plan_name == "sequence":
                assert isinstance(want, Exception), f"{what}: nn.Linear now runs; compare TiledLinear with it"
                if not grad:  # tiled_linear keeps x 3-D: no flattening to refuse
                    close(got[0], F.linear(x, lin.weight, lin.bias).chunk(WORLD, 1)[dist.get_rank()],
                          f"{what}: TiledLinear output", tol=1e-5)
                continue
            assert not isinstance(want, Exception), f"{what}: nn.Linear raised {want!r}"
            assert not isinstance(got, Exception), f"{what}: nn.Linear runs, TiledLinear raised {got!r}"
            close(got[0], want[0], f"{what}: output", tol=1e-5)
            if grad:
                close(got[1], want[1], f"{what}: input gradient", tol=1e-5)
                for n in want[2]:
                    close(got[2][n], want[2][n], f"{what}: gradient of {n}", tol=1e-5)
            assert got[3] == want[3], f"{what}: collectives {got[3]}, nn.Linear's {want[3]}"


class MLP(nn.Module):
    def __init__(self, d, hidden, act):
        super().__init__()
        self.fc1, self.act, self.fc2 = nn.Linear(d, hidden), act, nn.Linear(hidden, d)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


@check
def check_mlp_colwise_rowwise(mesh):
    """An MLP of TiledLinear, fc1 column-parallel -> fc2 row-parallel (one all-reduce
    forward, as with nn.Linear), and the Megatron sequence-parallel layout
    (sequence-sharded input and output), with the activation as a module or fused
    into fc1 (what swap() does): output, input and parameter gradients, one AdamW
    step and the output without a gradient (the fused kernel) against the unsharded model."""
    funcol = torch.ops.c10d_functional
    layouts = {
        "tp": ({"fc1": ColwiseParallel(), "fc2": RowwiseParallel()}, {funcol.all_reduce: 1}),
        "tp_sp": ({"fc1": ColwiseParallel(input_layouts=Shard(1)), "fc2": RowwiseParallel(output_layouts=Shard(1))},
                  {funcol.all_gather_into_tensor: 1, funcol.reduce_scatter_tensor: 1}),
    }
    rank = dist.get_rank()
    for name, (plan, expected) in layouts.items():
        mine = (lambda t: t.chunk(WORLD, 1)[rank]) if name == "tp_sp" else (lambda t: t)  # noqa: E731
        for act, act_name in ((nn.GELU(), "gelu"), (nn.ReLU(), "relu"), (nn.SiLU(), "silu")):
            for fused in (False, True):
                what = f"{name} {act_name} fused={fused}"
                torch.manual_seed(9)
                ref = MLP(8, 32, act)
                tiled = MLP(8, 32, act)
                tiled.load_state_dict(ref.state_dict())
                assert tilelab_torch.swap_linear(tiled) == 2
                if fused:
                    tiled.fc1 = tilelab_torch.TiledLinear.from_linear(tiled.fc1, activation=act_name)
                    tiled.act = nn.Identity()
                tp = parallelize_module(tiled, mesh, plan)
                x = torch.randn(2, 6, 8)
                xin, xr = mine(x).clone().requires_grad_(), x.clone().requires_grad_()
                with CommDebugMode() as comm:
                    y = local(tp(xin))
                want = ref(xr)
                counts = dict(comm.get_comm_counts())
                assert counts == expected, f"{what}: forward collectives {counts}, expected {expected}"
                close(y, mine(want), f"{what}: output", tol=1e-5)
                g = torch.randn_like(want)
                (y * mine(g)).sum().backward()
                (want * g).sum().backward()
                close(local(xin.grad), mine(xr.grad), f"{what}: input gradient", tol=1e-5)
                params = dict(tp.named_parameters())
                for n, p in ref.named_parameters():
                    close(params[n].grad, p.grad, f"{what}: gradient of {n}", tol=1e-5)
                for model in (tp, ref):
                    torch.optim.AdamW(model.parameters(), lr=1e-2).step()
                for n, p in ref.named_parameters():
                    close(params[n], p, f"{what}: {n} after an AdamW step", tol=1e-5)
                with torch.no_grad(), CommDebugMode() as comm:
                    y = local(tp(xin.detach()))
                assert dict(comm.get_comm_counts()) == expected, f"{what}: collectives without grad"
                close(y, mine(ref(x)), f"{what}: output without grad", tol=1e-5)


# ------------------------------------------------------ the spawned world
def _worker(rank, store, out_dir):
    if sys.platform == "linux":  # both ranks are local: loopback, whatever the hostname resolves to
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD,
                            timeout=datetime.timedelta(seconds=60))
    results = {}
    try:
        mesh = init_device_mesh("cpu", (WORLD,))
        for name, fn in CHECKS.items():
            try:
                fn(mesh)
                results[name] = ""
            except Exception:  # noqa: BLE001  (reported by the test of that name)
                results[name] = traceback.format_exc()
            dist.barrier()
    finally:
        dist.destroy_process_group()
        with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
            json.dump(results, f)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Spawns the world once; returns each rank's {check: "" (passed) or its traceback}."""
    d = tmp_path_factory.mktemp("tp")
    ctx = mp.start_processes(_worker, args=(str(d / "store"), str(d)), nprocs=WORLD, join=False,
                             start_method="spawn")
    deadline = time.monotonic() + TIMEOUT_S
    try:
        while not ctx.join(timeout=1):
            if time.monotonic() > deadline:
                pytest.fail(f"the {WORLD}-process world did not finish in {TIMEOUT_S} s")
    finally:
        for p in ctx.processes:
            if p.is_alive():
                p.terminate()
    results = []
    for r in range(WORLD):
        path = d / f"rank{r}.json"
        assert path.exists(), f"rank {r} wrote no results"
        results.append(json.loads(path.read_text()))
    return results


@pytest.mark.parametrize("name", list(CHECKS))
def test_tensor_parallel(world, name):
    outcomes = [res.get(name, "not run") for res in world]
    failed = [f"rank {r}:\n{o}" for r, o in enumerate(outcomes) if o]
    assert not failed, "\n".join(failed)


# --------------------------------------------- the rules alone (no world)
def spec(*shape):
    return SimpleNamespace(shape=shape, ndim=len(shape))


def test_registered():
    ops = ["tiled_mm", "tiled_bmm", "tiled_addmm", "tiled_linear", "_tiled_linear_pre", "tiled_gated_linear"]
    assert tl_dist.register() == ops
    strategies = DTensor._op_dispatcher.sharding_propagator.op_strategy_funcs
    assert all(getattr(torch.ops.tilelab, op).default in strategies for op in ops)


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh", "silu"])
def test_linear_rules_no_partial_with_activation(activation):
    fn = tl_dist.rules()["tiled_linear"]
    for x in (spec(8), spec(4, 8), spec(2, 4, 8)):
        for bias in (None, spec(4)):
            rules = fn(x, spec(4, 8), bias, activation=activation)
            assert rules and not [r for r in rules if isinstance(r[0][0], Partial)], rules
            assert any(isinstance(r[0][0], Partial) for r in fn(x, spec(4, 8), bias))
            # the training path's (act(y), y): both placed as the output with the activation
            pre = tl_dist.rules()["_tiled_linear_pre"](x, spec(4, 8), bias, activation=activation)
            assert pre == [([o, o], ins) for [o], ins in rules]


@pytest.mark.parametrize("bias_shape, out, expected", [
    ((4,), (Shard(1),), Shard(0)), ((4,), (Shard(0),), Replicate()), ((1, 4), (Shard(1),), Shard(1)),
    ((6, 1), (Shard(0),), Shard(0)), ((6, 1), (Shard(1),), Replicate()), ((), (Shard(0),), Replicate()),
    ((6, 4), (Partial(),), Partial()), ((4,), (Replicate(),), Replicate()),
])
def test_addmm_bias_follows_output(bias_shape, out, expected):
    rules = tl_dist.rules()["tiled_addmm"](spec(*bias_shape), spec(6, 8), spec(8, 4))
    got = [inputs[0] for outputs, inputs in rules if tuple(outputs) == out]
    assert got and all(g == expected for g in got), (bias_shape, out, got)
