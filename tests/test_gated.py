"""tiled_gated_linear: act(x @ w_gate.t()) * (x @ w_up.t()) -- values against a float64
reference, errors, opcheck, autograd (a recorded composition), autocast, torch.compile,
which form runs (explain_gated, on described GPUs), swap's TiledGatedMLP; on an H100/H200
the fused kernel on both tile sizes, edges, views, poisoned outputs, determinism and
CUDA graphs."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing._internal.optests import opcheck

import tilelab_torch
from conftest import ACT_REFS, HAS_CUDA, TOL, Poisoned, fresh_seed
from tilelab_torch import TiledLinear, swap, unswap
from tilelab_torch.nn import TiledGatedMLP

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
gated = torch.ops.tilelab.tiled_gated_linear


def reference(x, wg, wu, act):
    x64 = x.double()
    return ACT_REFS[act](x64 @ wg.double().t()) * (x64 @ wu.double().t())


def gated_err(out, x, wg, wu, act):
    """max |out - ref| over max(|x||Wg|^T) * max(|x||Wu|^T): each product's error bound times the other
    product's scale (the activations' slopes are below 1.13)."""
    x64 = x.double().abs()
    scale = (x64 @ wg.double().abs().t()).max() * (x64 @ wu.double().abs().t()).max()
    return float((out.double() - reference(x, wg, wu, act)).abs().max() / scale.clamp_min(1e-30))


def operands(lead, K, N, dtype, device):
    x = torch.randn(*lead, K, device=device, dtype=dtype)
    wg = torch.randn(N, K, device=device, dtype=dtype) / K ** 0.5
    wu = torch.randn(N, K, device=device, dtype=dtype) / K ** 0.5
    return x, wg, wu


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("act", list(ACT_REFS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_matches_reference(device, act, dtype):
    seed = fresh_seed()
    for lead, K, N in (((5,), 7, 3), ((2, 9), 33, 17), ((), 16, 8), ((4, 1, 3), 65, 130)):
        x, wg, wu = operands(lead, K, N, dtype, device)
        out = tilelab_torch.tiled_gated_linear(x, wg, wu, activation=act)
        assert out.shape == (*lead, N) and out.dtype == dtype and out.is_contiguous()
        err = gated_err(out, x, wg, wu, act)
        assert err <= 3 * TOL[dtype], f"seed {seed} {lead} K={K} N={N} act={act}: {err:.3g}"


def test_default_activation_is_silu():
    x, wg, wu = operands((4,), 8, 6, torch.float64, "cpu")
    torch.testing.assert_close(gated(x, wg, wu), F.silu(F.linear(x, wg)) * F.linear(x, wu))


@pytest.mark.parametrize("device", DEVICES)
def test_errors(device):
    x, w = torch.randn(4, 5, device=device), torch.randn(3, 5, device=device)
    with pytest.raises(RuntimeError, match="unknown activation 'tanh'"):
        gated(x, w, w, activation="tanh")
    with pytest.raises(RuntimeError, match="of one shape"):
        gated(x, w, torch.randn(4, 5, device=device))
    with pytest.raises(RuntimeError, match="of one shape"):
        gated(x, torch.randn(5, device=device), torch.randn(5, device=device))
    with pytest.raises(RuntimeError, match="one dtype and device"):
        gated(x, w, w.double())
    with pytest.raises(RuntimeError, match="x has 5 features"):
        gated(x, torch.randn(3, 4, device=device), torch.randn(3, 4, device=device))
    with pytest.raises(RuntimeError, match="same dtype"):
        gated(x.double(), w, w)
    # The same rules without a kernel (torch.compile's fake tensors).
    with torch._subclasses.fake_tensor.FakeTensorMode():
        fx, fw = torch.empty(4, 5, device=device), torch.empty(3, 5, device=device)
        with pytest.raises(RuntimeError, match="of one shape"):
            gated(fx, fw, torch.empty(3, 4, device=device))
        assert gated(fx, fw, fw).shape == (4, 3)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for act in (None, "silu"):
        for rg in (False, True):
            x = torch.randn(2, 6, 9, device=device, dtype=torch.float64, requires_grad=rg)
            wg = torch.randn(5, 9, device=device, dtype=torch.float64, requires_grad=rg)
            wu = torch.randn(5, 9, device=device, dtype=torch.float64, requires_grad=rg)
            opcheck(gated, (x, wg, wu), {"activation": act})


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("act", list(ACT_REFS))
def test_gradcheck(device, act):
    torch.manual_seed(1)
    x = torch.randn(3, 4, 5, device=device, dtype=torch.float64, requires_grad=True)
    wg = torch.randn(6, 5, device=device, dtype=torch.float64, requires_grad=True)
    wu = torch.randn(6, 5, device=device, dtype=torch.float64, requires_grad=True)
    f = lambda x, wg, wu: gated(x, wg, wu, activation=act)  # noqa: E731
    assert torch.autograd.gradcheck(f, (x, wg, wu))
    assert torch.autograd.gradgradcheck(f, (x, wg, wu))


@pytest.mark.parametrize("device", DEVICES)
def test_composed_with_grad(device):
    """No gradient to record: one op, no autograd node. With one: the recorded composition, whose
    gradients match the unfused MLP's."""
    x = torch.randn(8, 16, device=device)
    wg = torch.randn(12, 16, device=device, requires_grad=True)
    wu = torch.randn(12, 16, device=device, requires_grad=True)
    with torch.no_grad():
        assert gated(x, wg, wu).grad_fn is None
    y = gated(x, wg, wu)
    assert y.grad_fn is not None and "Mul" in type(y.grad_fn).__name__
    g = torch.randn_like(y)
    got = torch.autograd.grad(y, (wg, wu), g)
    want = torch.autograd.grad(F.silu(F.linear(x, wg)) * F.linear(x, wu), (wg, wu), g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_autocast(device):
    x, wg, wu = operands((4,), 8, 16, torch.float32, device)
    with torch.autocast(device, dtype=torch.bfloat16):
        out = gated(x, wg, wu, activation="gelu")
        ref = F.gelu(F.linear(x, wg)) * F.linear(x, wu)
    assert out.dtype == ref.dtype == torch.bfloat16
    torch.testing.assert_close(out, ref, rtol=3e-2, atol=3e-2)


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph(device):
    torch._dynamo.reset()

    @torch.compile(fullgraph=True)
    def f(x, wg, wu):
        return gated(x, wg, wu, activation="gelu_tanh") + 1

    x, wg, wu = operands((3, 5), 24, 16, torch.float32, device)
    want = F.gelu(F.linear(x, wg), approximate="tanh") * F.linear(x, wu) + 1
    torch.testing.assert_close(f(x, wg, wu), want, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------- which form runs
needs_cuda_build = pytest.mark.skipif(not tilelab_torch.built_with_cuda(), reason="needs a CUDA build of tilelab")


def described(M, K, N, dtype=torch.bfloat16, sm=90, num_sms=132, x=None):
    x = torch.empty(M, K, dtype=dtype) if x is None else x
    w = torch.empty(N, K, dtype=dtype)
    return tilelab_torch.explain_gated(x, w, w, sm=sm, num_sms=num_sms)


@needs_cuda_build
def test_explain_gated_rules():
    # A wave or more of 128 x 128 output tiles: the 128-row tiles (Llama-style 4 x 1024 tokens).
    e = described(4096, 2048, 5632)
    assert e.kernel == "hopper_gated_128x128x64" and "1408 tiles for 132 SMs" in e.reason
    # Fewer: 64 x 64 output tiles (1 x 128 tokens: 176 of them).
    e = described(128, 2048, 5632)
    assert e.kernel == "hopper_gated_64x64x64" and "176 tiles" in e.reason
    assert described(4096, 2048, 5632, dtype=torch.float16).kernel == "hopper_gated_128x128x64"
    for why, e in (("multiple of 8", described(64, 64, 60)),
                   ("float16/bfloat16 only", described(64, 64, 64, dtype=torch.float32)),
                   ("compute capability 9.0", described(64, 64, 64, sm=80)),
                   ("16-byte aligned", described(64, 60, 64)),
                   ("16-byte aligned", described(64, 64, 64, x=torch.empty(64, 65, dtype=torch.bfloat16)[:, 1:])),
                   ("16-byte aligned", described(64, 64, 64, x=torch.empty(64, 64, dtype=torch.bfloat16).t())),
                   ("not broadcast",
                    described(64, 64, 64, x=torch.empty(1, 64, dtype=torch.bfloat16).expand(64, 64))),
                   ("nothing to multiply", described(0, 64, 64))):
        assert e.kernel == "composed" and why in e.reason, (why, e.reason)
    cpu = tilelab_torch.explain_gated(torch.empty(4, 8), torch.empty(3, 8), torch.empty(3, 8))
    assert cpu.kernel == "composed" and "CPU" in cpu.reason
    with pytest.raises(RuntimeError, match="give both sm"):
        tilelab_torch.explain_gated(torch.empty(4, 8), torch.empty(3, 8), torch.empty(3, 8), sm=90)


# ------------------------------------------------------------------------ swap
class LlamaMLP(nn.Module):
    """transformers' gated MLP, under its class name (swap recognises it by name)."""

    def __init__(self, d, ff, bias=False):
        super().__init__()
        self.hidden_size, self.intermediate_size = d, ff
        self.gate_proj, self.up_proj = nn.Linear(d, ff, bias=bias), nn.Linear(d, ff, bias=bias)
        self.down_proj, self.act_fn = nn.Linear(ff, d, bias=bias), nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


def mlp_model(bias=False, dtype=torch.float32, device="cpu"):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), LlamaMLP(32, 64, bias), nn.Linear(32, 8)).to(device, dtype).eval()


@pytest.mark.parametrize("device", DEVICES)
def test_swap_gates_llama_mlp(device):
    model = mlp_model(device=device)
    keys, params = list(model.state_dict()), list(model.parameters())
    block = model[1]
    x = torch.randn(3, 5, 16, device=device)
    with torch.no_grad():
        ref = model(x)
    report = swap(model)
    assert report.gated == ["1"] and report.fused == [("1.gate_proj", "silu")] and report.left == []
    assert "gated 1 MLPs" in str(report)
    new = model[1]
    assert isinstance(new, TiledGatedMLP) and new.gate_proj is block.gate_proj is not None
    assert isinstance(new.gate_proj, TiledLinear) and new.activation == "silu"
    assert new.hidden_size == 32 and new.intermediate_size == 64  # the block's own attributes
    assert list(model.state_dict()) == keys and all(p is q for p, q in zip(model.parameters(), params))
    with torch.no_grad():
        torch.testing.assert_close(model(x), ref, rtol=1e-5, atol=1e-5)
    # Training through it: the gradients of the unfused MLP.
    y = model(x)
    y.sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    assert unswap(model) == len(report.swapped) + len(report.fused) + len(report.gated)
    assert model[1] is block and type(block.gate_proj) is nn.Linear and type(block.act_fn) is nn.SiLU
    model.zero_grad()
    model(x).sum().backward()
    for g, p in zip(grads, model.parameters()):
        torch.testing.assert_close(g, p.grad, rtol=1e-5, atol=1e-5)
    # Again after unswap; twice changes nothing the second time.
    assert swap(model).gated == ["1"]
    again = swap(model)
    assert again.swapped == [] and again.gated == [] and again.left == []


def test_tensor_subclass_takes_the_layers():
    """A tensor subclass (DTensor under tensor parallelism, which has no rule for the gated op) runs the
    layers' own calls."""
    class Sub(torch.Tensor):
        pass

    model = mlp_model()
    x = torch.randn(6, 16)
    with torch.no_grad():
        ref = model(x)
        swap(model)
        seen = []

        class Ops(torch.utils._python_dispatch.TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                seen.append(func)
                return func(*args, **(kwargs or {}))

        for inp, gated_calls in ((x, 1), (x.as_subclass(Sub), 0)):
            seen.clear()
            with Ops():
                out = model[1](model[0](inp))
            assert seen.count(torch.ops.tilelab.tiled_gated_linear.default) == gated_calls
            torch.testing.assert_close(model[2](out).as_subclass(torch.Tensor), ref, rtol=1e-5, atol=1e-5)


def test_swap_leaves_gated_mlp_with_bias_or_forced_kernel():
    report = swap(mlp_model(bias=True))
    assert report.gated == [] and report.left == [("1", "gate_proj or up_proj has a bias")]
    report = swap(mlp_model(), variant="cpu")
    assert report.gated == [] and report.left == [("1", "a kernel is forced (variant/tile): each layer keeps it")]
    report = swap(mlp_model(), fuse=False)
    assert report.gated == [] and report.left == []


# --------------------------------------------------------------------- CUDA only
def fused_here() -> bool:
    if not HAS_CUDA or not tilelab_torch.built_with_cuda():
        return False
    x = torch.empty(128, 64, device="cuda", dtype=torch.bfloat16)
    return tilelab_torch.explain_gated(x, x, x).kernel != "composed"


needs_fused = pytest.mark.skipif(not fused_here(), reason="the fused kernel needs an H100/H200 and an sm_90a build")


@pytest.mark.gpu
@needs_fused
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
@pytest.mark.parametrize("act", list(ACT_REFS))
def test_fused_kernel(dtype, act):
    seed = fresh_seed()
    # Both tile sizes (a wave of 128 x 128 output tiles, or fewer); edges in M, N and K; K below one stage.
    for M, K, N, tiles in ((2048, 512, 1160, "128x128"), (4096, 256, 2048, "128x128"), (128, 2048, 5632, "64x64"),
                           (1, 72, 8, "64x64"), (7, 8, 24, "64x64"), (200, 136, 136, "64x64"),
                           (1000, 520, 264, "64x64")):
        x, wg, wu = operands((M,), K, N, dtype, "cuda")
        assert tilelab_torch.explain_gated(x, wg, wu, activation=act).kernel == f"hopper_gated_{tiles}x64"
        poison = Poisoned(M * N, dtype, "cuda")
        out = gated(x, wg, wu, activation=act)
        assert poison.reused(out), "the output did not reuse the poisoned block"
        err = gated_err(out, x, wg, wu, act)
        assert err <= 2 * TOL[dtype], f"seed {seed} {M}x{K}x{N} act={act}: {err:.3g}"
        assert torch.equal(out, gated(x, wg, wu, activation=act))  # the same inputs, bitwise the same output


@pytest.mark.gpu
@needs_fused
def test_fused_views_and_fallbacks():
    seed = fresh_seed()
    dtype = torch.bfloat16
    big = torch.randn(3, 40, 264, device="cuda", dtype=dtype)
    x = big[..., 8:264]  # rows 16-byte aligned, not contiguous: read in place
    wg, wu = (torch.randn(96, 256, device="cuda", dtype=dtype) / 16 for _ in range(2))
    assert tilelab_torch.explain_gated(x, wg, wu).kernel != "composed"
    out = gated(x, wg, wu)
    assert out.shape == (3, 40, 96)
    assert gated_err(out, x, wg, wu, "silu") <= 2 * TOL[dtype], seed
    # Views the TMA cannot read in place, N off 8, fp32: the composed form, still right.
    for xx, g, u in ((big[..., 1:257], wg, wu), (x, wg[:90], wu[:90]), (x.float(), wg.float(), wu.float()),
                     (x, wg.t().contiguous().t(), wu)):
        e = tilelab_torch.explain_gated(xx, g, u)
        assert e.kernel == "composed", e.reason
        assert gated_err(gated(xx, g, u), xx, g, u, "silu") <= 3 * TOL[xx.dtype], (seed, e.reason)


@pytest.mark.gpu
@needs_fused
def test_fused_under_cuda_graph():
    x, wg, wu = operands((256,), 512, 1024, torch.bfloat16, "cuda")
    want = gated(x, wg, wu)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        gated(x, wg, wu)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = gated(x, wg, wu)
    x.normal_()
    g.replay()
    torch.cuda.synchronize()
    assert not torch.equal(out, want)
    assert torch.equal(out, gated(x, wg, wu))


@pytest.mark.gpu
@needs_fused
def test_swapped_llama_mlp_on_gpu():
    model = mlp_model(dtype=torch.bfloat16, device="cuda")
    x = torch.randn(4, 100, 16, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        ref = model(x)
        assert swap(model).gated == ["1"]
        out = model(x)
    torch.testing.assert_close(out, ref, rtol=3e-2, atol=3e-2)
