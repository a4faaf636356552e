"""tiled_linear: act(F.linear(x, W, b)) in one op -- values against torch, errors,
opcheck, autograd (the fused kernel without a gradient, a recorded composition
with one), autocast and torch.compile; on CUDA every activation through every
row that runs, and split-K (forced slice counts, the estimate, determinism)."""
import pytest
import torch
import torch.nn.functional as F
from torch.testing._internal.optests import opcheck

import tilelab_torch
from conftest import ACT_REFS, HALF, TOL, cuda_kernels, kernel_tol, precision_for

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
linear = torch.ops.tilelab.tiled_linear
ACTS = ACT_REFS


def reference(x, w, b, act):
    z = F.linear(x.double(), w.double(), None if b is None else b.double())
    return ACTS[act](z)


def scaled_err(out, x, w, b):
    """max |out - ref| over max(|x||W|^T + |b|): the product's error bound, times the
    activations' largest slope (< 1.13)."""
    scale = x.double().abs() @ w.double().abs().t()
    if b is not None:
        scale = scale + b.double().abs()
    return scale.max().clamp_min(1e-30)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("act", list(ACTS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
def test_matches_torch(device, act, dtype):
    torch.manual_seed(0)
    for lead, K, N, bias in (((5,), 7, 3, True), ((2, 9), 33, 17, False), ((), 16, 8, True), ((4, 1, 3), 65, 130, True)):
        x = torch.randn(*lead, K, device=device, dtype=dtype)
        w = torch.randn(N, K, device=device, dtype=dtype)
        b = torch.randn(N, device=device, dtype=dtype) if bias else None
        out = tilelab_torch.tiled_linear(x, w, b, activation=act)
        assert out.shape == (*lead, N) and out.dtype == dtype and out.is_contiguous()
        err = float((out.double() - reference(x, w, b, act)).abs().max() / scaled_err(out, x, w, b))
        assert err <= TOL[dtype], f"{lead} K={K} N={N} bias={bias} act={act}: {err:.3g}"


@pytest.mark.parametrize("device", DEVICES)
def test_relu_keeps_nan_and_k0(device):
    """torch.relu(NaN) is NaN; K = 0 gives act(bias)."""
    x = torch.tensor([[float("nan"), 1.0]], device=device)
    w = torch.ones(3, 2, device=device)
    assert torch.isnan(linear(x, w, None, activation="relu")).all()
    b = torch.tensor([-1.0, 0.5, 2.0], device=device)
    out = linear(torch.empty(4, 0, device=device), torch.empty(3, 0, device=device), b, activation="gelu")
    torch.testing.assert_close(out, F.gelu(b).expand(4, 3))


@pytest.mark.parametrize("device", DEVICES)
def test_errors(device):
    x, w = torch.randn(4, 5, device=device), torch.randn(3, 5, device=device)
    with pytest.raises(RuntimeError, match="unknown activation 'tanh'"):
        linear(x, w, None, activation="tanh")
    with pytest.raises(RuntimeError, match="weight must be 2-D"):
        linear(x, torch.randn(5, device=device))
    with pytest.raises(RuntimeError, match="x has 5 features"):
        linear(x, torch.randn(3, 4, device=device))
    with pytest.raises(RuntimeError, match=r"bias must have shape \(3,\)"):
        linear(x, w, torch.randn(4, device=device))
    with pytest.raises(RuntimeError, match="same dtype"):
        linear(x, w.double())
    # The same rules without a kernel (torch.compile's fake tensors).
    with torch._subclasses.fake_tensor.FakeTensorMode():
        fx, fw = torch.empty(4, 5, device=device), torch.empty(3, 4, device=device)
        with pytest.raises(RuntimeError, match="features"):
            linear(fx, fw)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for act in (None, "gelu_tanh"):
        for bias in (True, False):
            for rg in (False, True):
                x = torch.randn(2, 6, 9, device=device, dtype=torch.float64, requires_grad=rg)
                w = torch.randn(5, 9, device=device, dtype=torch.float64, requires_grad=rg)
                b = torch.randn(5, device=device, dtype=torch.float64, requires_grad=rg) if bias else None
                opcheck(linear, (x, w, b), {"activation": act})


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("act", list(ACTS))
def test_gradcheck(device, act):
    torch.manual_seed(1)
    x = torch.randn(3, 4, 5, device=device, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, 5, device=device, dtype=torch.float64, requires_grad=True)
    b = torch.randn(6, device=device, dtype=torch.float64, requires_grad=True)
    f = lambda x, w, b: linear(x, w, b, activation=act)  # noqa: E731
    assert torch.autograd.gradcheck(f, (x, w, b))
    assert torch.autograd.gradgradcheck(f, (x, w, b))


@pytest.mark.parametrize("device", DEVICES)
def test_fused_only_without_grad(device):
    """No gradient to record: one op, no autograd node. With one: one node whose forward
    saved the pre-activation (_tiled_linear_pre) and whose gradients match F's, for every
    activation and each input that requires grad; without an activation, tiled_addmm's."""
    x0 = torch.randn(2, 8, 16, device=device)
    w0, b0 = torch.randn(12, 16, device=device), torch.randn(12, device=device)
    with torch.no_grad():
        assert linear(x0, w0.requires_grad_(), b0, activation="silu").grad_fn is None
    for act in ACTS:
        for wrt in ((0, 1, 2), (0,), (1,), (2,)):
            x, w, b = (t.detach().requires_grad_(i in wrt) for i, t in enumerate((x0, w0, b0)))
            y = linear(x, w, b, activation=act)
            node = y.grad_fn.next_functions[0][0]  # under the view back to x's leading dims
            assert ("LinearActFunction" if act else "Addmm") in node.name(), node.name()
            g = torch.randn_like(y)
            ins = [t for i, t in enumerate((x, w, b)) if i in wrt]
            got = torch.autograd.grad(y, ins, g)
            want = torch.autograd.grad(ACTS[act](F.linear(x, w, b)), ins, g)
            for a, r in zip(got, want):
                torch.testing.assert_close(a, r, rtol=1e-5, atol=1e-5, msg=lambda m: f"{act} {wrt}: {m}")


@pytest.mark.parametrize("device", DEVICES)
def test_training_path_saves_what_gradients_need(device):
    """With an activation and a gradient to record, autograd keeps y (the pre-activation) and, as F.linear does,
    x only where the weight needs a gradient and the weight only where x does: a frozen weight keeps no input
    alive. Gradients and double backward (through the saved y, with one operand frozen) as F's."""
    torch.manual_seed(4)
    x0 = torch.randn(2, 8, 16, device=device, dtype=torch.float64)
    w0, b0 = torch.randn(12, 16, device=device, dtype=torch.float64), torch.randn(12, device=device, dtype=torch.float64)
    for x_grad, w_grad in ((True, False), (False, True), (True, True)):
        x, w = x0.clone().requires_grad_(x_grad), w0.clone().requires_grad_(w_grad)
        saved = []

        def pack(t):
            saved.append((t.data_ptr(), tuple(t.shape)))
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            y = linear(x, w, b0, activation="gelu")
        ptrs = [p for p, _ in saved]
        assert (x.data_ptr() in ptrs) == w_grad, (x_grad, w_grad, saved)
        assert (w.data_ptr() in ptrs) == x_grad, (x_grad, w_grad, saved)
        assert (16, 12) in [shape for _, shape in saved], saved  # y, x's rows by 12 columns
        ins = [t for t, g in ((x, x_grad), (w, w_grad)) if g]
        g = torch.randn_like(y)
        got = torch.autograd.grad(y, ins, g)
        want = torch.autograd.grad(F.gelu(F.linear(x, w, b0)), ins, g)
        for a, r in zip(got, want):
            torch.testing.assert_close(a, r)
    for act in ("gelu", "silu"):
        assert torch.autograd.gradgradcheck(lambda x: linear(x, w0, b0, activation=act), (x0.clone().requires_grad_(),))
        assert torch.autograd.gradgradcheck(lambda w: linear(x0, w, None, activation=act), (w0.clone().requires_grad_(),))


def test_pre_activation_op_cpu():
    """_tiled_linear_pre (the training path's forward): (act(y), y), y = F.linear(x, w, b)."""
    x, w, b = torch.randn(3, 5, 9, dtype=torch.float64), torch.randn(4, 9, dtype=torch.float64), None
    for act in ("relu", "gelu", "gelu_tanh", "silu"):
        out, pre = torch.ops.tilelab._tiled_linear_pre(x, w, b, activation=act)
        torch.testing.assert_close(pre, F.linear(x, w))
        torch.testing.assert_close(out, ACTS[act](F.linear(x, w)))
    with pytest.raises(RuntimeError, match="unknown activation 'tanh'"):
        torch.ops.tilelab._tiled_linear_pre(x, w, b, activation="tanh")


@pytest.mark.parametrize("device", DEVICES)
def test_autocast(device):
    dtype = torch.bfloat16
    x, w, b = torch.randn(4, 8, device=device), torch.randn(3, 8, device=device), torch.randn(3, device=device)
    with torch.autocast(device, dtype=dtype):
        out = linear(x, w, b, activation="gelu")
        ref = F.gelu(F.linear(x, w, b))
    assert out.dtype == ref.dtype == dtype
    torch.testing.assert_close(out, ref, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph(device):
    torch._dynamo.reset()

    @torch.compile(fullgraph=True)
    def f(x, w, b):
        return linear(x, w, b, activation="gelu_tanh") * 2

    x, w, b = torch.randn(3, 5, 24, device=device), torch.randn(10, 24, device=device), torch.randn(10, device=device)
    torch.testing.assert_close(f(x, w, b), 2 * F.gelu(F.linear(x, w, b), approximate="tanh"), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------- CUDA only
@pytest.mark.gpu
@pytest.mark.parametrize("config", [k.name for k in cuda_kernels()])
def test_every_row_every_activation(config):
    """The epilogue of each row applies bias then activation once (a tile edge in M): odd N
    (C's rows not 16-byte aligned: the hopper rows store from registers and the host applies
    the activation) and N = 264 (aligned: the hopper rows' TMA-store epilogue applies it)."""
    k = next(k for k in cuda_kernels() if k.name == config)
    for dtype in k.dtypes:
        for N in (47, 264):
            x = torch.randn(2, 65, 131, device="cuda", dtype=dtype)
            w = torch.randn(N, 131, device="cuda", dtype=dtype)
            b = torch.randn(N, device="cuda", dtype=dtype)
            with precision_for(k):
                for act in ACTS:
                    out = linear(x, w, b, activation=act, variant=config)
                    err = float((out.double() - reference(x, w, b, act)).abs().max() / scaled_err(out, x, w, b))
                    assert err <= kernel_tol(k, dtype), f"{config} {dtype} N={N} act={act}: {err:.3g}"


@pytest.mark.gpu
@pytest.mark.parametrize("config", [k.name for k in cuda_kernels()])
def test_activation_extremes(config):
    """Pre-activations across [-200, 200] (the bias spans it): where exp overflows (the hopper
    epilogue's SiLU and GELUs use the SFU's exponential and reciprocal for half outputs) the
    result is the activation's limit (0 or z), never NaN or inf."""
    k = next(k for k in cuda_kernels() if k.name == config)
    for dtype in k.dtypes:
        x = torch.randn(65, 16, device="cuda", dtype=dtype) * 0.1
        w = torch.randn(264, 16, device="cuda", dtype=dtype) * 0.1
        b = torch.linspace(-200, 200, 264, device="cuda").to(dtype)
        with precision_for(k):
            for act in ACTS:
                out = linear(x, w, b, activation=act, variant=config)
                assert torch.isfinite(out).all(), f"{config} {dtype} act={act}: non-finite output"
                err = float((out.double() - reference(x, w, b, act)).abs().max() / scaled_err(out, x, w, b))
                assert err <= kernel_tol(k, dtype), f"{config} {dtype} act={act}: {err:.3g}"


HOPPER_HALF = [k.name for k in cuda_kernels(torch.bfloat16) if k.family == "hopper"]


@pytest.mark.gpu
@pytest.mark.parametrize("config", HOPPER_HALF)
def test_pre_activation_output(config):
    """The training path's forward on every half hopper row: all but swap-AB store the pre-activation from their
    TMA-store epilogue beside act(.) (96- and 160-wide tiles through a second tail map); swap-AB composes it,
    as does every row where C's rows are not 16-byte aligned or K is split. Both outputs against
    float64, tile edges in M and N, K tails; fresh operands every call and NaN-filled free blocks before it, so
    an element left unwritten holds NaN or another problem's value (which block the caching allocator hands
    out is its business: two adjacent free blocks merge)."""
    for dtype in HALF:
        for M, K, N in ((300, 136, 520), (1, 8, 64), (1000, 520, 1152)):
            for act in ("relu", "gelu", "gelu_tanh", "silu"):
                x = torch.randn(M, K, device="cuda", dtype=dtype)
                w = torch.randn(N, K, device="cuda", dtype=dtype) / K ** 0.5
                b = torch.randn(N, device="cuda", dtype=dtype)
                blocks = [torch.full((M * N,), float("nan"), device="cuda", dtype=dtype) for _ in range(2)]
                del blocks
                out, pre = torch.ops.tilelab._tiled_linear_pre(x, w, b, activation=act, variant=config)
                scale = scaled_err(out, x, w, b)
                err = float((pre.double() - reference(x, w, b, None)).abs().max() / scale)
                assert err <= TOL[dtype], f"{config} {dtype} {M}x{K}x{N} {act}: pre-activation {err:.3g}"
                err = float((out.double() - reference(x, w, b, act)).abs().max() / scale)
                assert err <= TOL[dtype], f"{config} {dtype} {M}x{K}x{N} {act}: output {err:.3g}"


@pytest.mark.gpu
def test_training_path_gradients_on_gpu():
    """A product the hopper rows store with its pre-activation (x @ W.t(), 1024 columns): gradients as F's."""
    torch.manual_seed(3)
    x = torch.randn(4, 96, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = (torch.randn(1024, 256, device="cuda", dtype=torch.bfloat16) / 16).requires_grad_()
    b = torch.randn(1024, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    for act in ("gelu", "silu"):
        y = linear(x, w, b, activation=act)
        ref = ACTS[act](F.linear(x, w, b))
        torch.testing.assert_close(y, ref, rtol=2e-2, atol=2e-2)
        g = torch.randn_like(y)
        for a, r in zip(torch.autograd.grad(y, (x, w, b), g), torch.autograd.grad(ref, (x, w, b), g)):
            err = float((a.double() - r.double()).abs().max() / r.double().abs().max())
            assert err <= 2e-2, f"{act}: {err:.3g}"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "fp16"])
def test_gradients_through_unaligned_rows(dtype):
    """An output whose rows are not 16-byte aligned (N = 1001, as GPT-2's lm_head's 50257): its gradient is copied
    into aligned rows once for both products (autograd.cpp, rows_aligned_once), which read the padded view in
    place; dX, dW and the bias's gradient as F.linear's, a double backward reading the copy, and a gradient
    that requires grad itself (its copy recorded by autograd)."""
    torch.manual_seed(5)
    x = torch.randn(3, 50, 256, device="cuda", dtype=dtype, requires_grad=True)
    w = (torch.randn(1001, 256, device="cuda", dtype=dtype) / 16).requires_grad_()
    b = torch.randn(1001, device="cuda", dtype=dtype, requires_grad=True)
    for bias in (None, b):
        inputs = (x, w) if bias is None else (x, w, b)
        y = linear(x, w, bias)
        g = torch.randn_like(y)
        got = torch.autograd.grad(y, inputs, g, create_graph=True)
        x64, w64, g64 = x.double(), w.double(), g.double()
        ref = [g64 @ w64, g64.flatten(0, 1).t() @ x64.flatten(0, 1), g64.sum((0, 1))]
        scale = [g64.abs() @ w64.abs(), g64.abs().flatten(0, 1).t() @ x64.abs().flatten(0, 1),
                 g64.abs().sum((0, 1))]
        for name, a, r, sc in zip(("dX", "dW", "db"), got, ref, scale):
            err = float((a.double() - r).abs().max() / sc.max())
            assert err <= TOL[dtype], f"bias={bias is not None} {name}: {err:.3g}"
        # Double backward: <dX, v> with dX = g @ W has the gradient g^T v in W.
        v = torch.randn_like(x)
        (gg,) = torch.autograd.grad((got[0] * v).sum(), w)
        g2, v2 = g64.flatten(0, 1), v.double().flatten(0, 1)
        err = float((gg.double() - g2.t() @ v2).abs().max() / (g2.abs().t() @ v2.abs()).max())
        assert err <= TOL[dtype], f"bias={bias is not None} double backward: {err:.3g}"
        # A gradient that requires grad itself: its copy is recorded (torch's copy_), and <dW, u> with
        # dW = g^T x has the gradient x u^T in g.
        gr = g.detach().requires_grad_()
        dw = torch.autograd.grad(y, (x, w), gr, create_graph=True)[1]  # both: the one copy for both products
        u = torch.randn_like(dw)
        (dg,) = torch.autograd.grad((dw * u).sum(), gr)
        x2, u64 = x64.flatten(0, 1), u.double()
        err = float((dg.double().flatten(0, 1) - x2 @ u64.t()).abs().max() / (x2.abs() @ u64.abs().t()).max())
        assert err <= TOL[dtype], f"bias={bias is not None} gradient of the gradient: {err:.3g}"


@pytest.fixture
def split_k():
    """Force the split-K count; restored to the estimate afterwards."""
    yield torch.ops.tilelab._set_split_k
    torch.ops.tilelab._set_split_k(None)


SPLIT_ROWS = [k.name for k in cuda_kernels() if k.family in ("hopper", "tensorcore", "blocked", "gemv_split")]


@pytest.mark.gpu
@pytest.mark.parametrize("config", SPLIT_ROWS)
def test_split_k_forced(config, split_k):
    """Slice counts that do not divide K's k-tiles, more slices than k-tiles, a K tail
    inside the last slice, bias added once, an activation after the sum; bitwise equal
    calls."""
    k = next(k for k in cuda_kernels() if k.name == config)
    dtype = k.dtypes[0]
    for K in (k.block[2] * 7 + 3, 5, 1000):
        for splits in (2, 3, 64):
            split_k(splits)
            x = torch.randn(37, K, device="cuda", dtype=dtype)
            w = torch.randn(70, K, device="cuda", dtype=dtype)
            b = torch.randn(70, device="cuda", dtype=dtype)
            with precision_for(k):
                e = tilelab_torch.explain(x, w.t(), variant=config)
                kt = -(-K // k.block[2])  # k-tiles; slices of ceil(kt / splits), none empty
                per = -(-kt // min(splits, kt))
                assert e.details["split_k"] == -(-kt // per), e
                out = linear(x, w, b, activation="gelu", variant=config)
                again = linear(x, w, b, activation="gelu", variant=config)
            err = float((out.double() - reference(x, w, b, "gelu")).abs().max() / scaled_err(out, x, w, b))
            assert err <= kernel_tol(k, dtype), f"{config} K={K} splits={splits}: {err:.3g}"
            assert torch.equal(out, again), f"{config} K={K} splits={splits}: two calls differ"


@pytest.mark.gpu
def test_split_k_estimate_k_heavy():
    """A K-heavy product with one output tile is split by the estimate, and explain() says so."""
    for dtype in (torch.float32, torch.bfloat16):
        a = torch.randn(64, 65536, device="cuda", dtype=dtype)
        b = torch.randn(65536, 64, device="cuda", dtype=dtype)
        e = tilelab_torch.explain(a, b)
        assert e.details["split_k"] > 1 and "split-K" in e.reason, e
        out = tilelab_torch.tiled_mm(a, b)
        err = float((out.double() - a.double() @ b.double()).abs().max() / (a.double().abs() @ b.double().abs()).max())
        assert err <= TOL[dtype]
        assert torch.equal(out, tilelab_torch.tiled_mm(a, b))
    # A full wave of tiles is never split.
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    assert tilelab_torch.explain(a, a).details["split_k"] == 1


@pytest.mark.gpu
def test_split_k_under_cuda_graph(split_k):
    """Split-K's workspace and second pass are captured and replayed. 48 rows: a tile row (16 would
    take gemv_mma, which does not split K)."""
    split_k(4)
    x = torch.randn(48, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(256, 4096, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(256, device="cuda", dtype=torch.bfloat16)
    assert tilelab_torch.explain(x, w.t()).details["split_k"] == 4
    eager = linear(x, w, b, activation="relu")
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        linear(x, w, b, activation="relu")  # warm-up on the capture stream
        with torch.cuda.graph(g):
            out = linear(x, w, b, activation="relu")
    torch.cuda.current_stream().wait_stream(s)
    g.replay()
    torch.cuda.synchronize()
    assert torch.equal(out, eager)

