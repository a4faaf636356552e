"""tiled_bmm, tiled_addmm and the model-code helpers (TiledLinear, swap, use_tiled),
autocast, CUDA graphs. swap on real model code: test_swap.py."""
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.testing._internal.optests import opcheck

import tilelab_torch
from conftest import TOL, cuda_kernels, kernel_tol, precision_for
from tilelab_torch import TiledLinear, swap, use_tiled

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
bmm = torch.ops.tilelab.tiled_bmm
addmm = torch.ops.tilelab.tiled_addmm
BIAS_SHAPES = [(), (1,), ("N",), (1, "N"), ("M", 1), ("M", "N"), (1, 1)]


def batched(B, rows, cols, layout, dtype, device):
    """(B, rows, cols), each matrix row-major or column-major (a transposed view)."""
    if layout == "row":
        return torch.randn(B, rows, cols, dtype=dtype, device=device)
    return torch.randn(B, cols, rows, dtype=dtype, device=device).transpose(1, 2)


def bias_of(shape, M, N, dtype, device):
    return torch.randn([M if s == "M" else N if s == "N" else s for s in shape], dtype=dtype, device=device)


def relerr(out, ref):
    ref = ref.double()
    den = ref.norm()
    return float((out.double() - ref).norm() / (den if den > 0 else 1))


# ----------------------------------------------------------- bmm / addmm math
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("la,lb", [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")])
def test_bmm_layouts(device, la, lb):
    a = batched(5, 17, 33, la, torch.float32, device)
    b = batched(5, 33, 9, lb, torch.float32, device)
    out = bmm(a, b)
    assert out.shape == (5, 17, 9) and out.is_contiguous()
    assert relerr(out, a.double() @ b.double()) < TOL[torch.float32]


@pytest.mark.parametrize("device", DEVICES)
def test_bmm_strided_broadcast_and_copy(device):
    big = torch.randn(8, 20, 30, device=device)
    a = big[::2, 3:14, 1:24]  # strided batch and rows: read in place
    b = torch.randn(23, 7, device=device).expand(4, 23, 7)  # stride-0 batch
    assert relerr(bmm(a, b), a.double() @ b.double()) < TOL[torch.float32]
    c = torch.randn(4, 11, 23, 2, device=device)[..., 0]  # neither layout: one copy
    assert relerr(bmm(c, b), c.double() @ b.double()) < TOL[torch.float32]
    # empty batch / K = 0
    assert bmm(torch.randn(0, 3, 4, device=device), torch.randn(0, 4, 5, device=device)).shape == (0, 3, 5)
    assert torch.equal(bmm(torch.randn(2, 3, 0, device=device), torch.randn(2, 0, 5, device=device)),
                       torch.zeros(2, 3, 5, device=device))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shape", BIAS_SHAPES, ids=str)
def test_addmm_bias_shapes(device, shape):
    M, N, K = 13, 21, 37
    a, b = torch.randn(M, K, device=device), torch.randn(N, K, device=device).t()
    bias = bias_of(shape, M, N, torch.float32, device)
    out = addmm(bias, a, b)
    ref = torch.addmm(bias.double(), a.double(), b.double())
    assert out.shape == (M, N) and relerr(out, ref) < TOL[torch.float32]
    assert torch.equal(addmm(bias, torch.randn(M, 0, device=device), torch.randn(0, N, device=device)),
                       bias.expand(M, N))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_dtypes(device, dtype):
    a, b = torch.randn(3, 19, 10, dtype=dtype, device=device), torch.randn(3, 10, 6, dtype=dtype, device=device)
    assert relerr(bmm(a, b), a.double() @ b.double()) < TOL[dtype]
    bias = torch.randn(6, dtype=dtype, device=device)
    assert relerr(addmm(bias, a[0], b[0]), torch.addmm(bias.double(), a[0].double(), b[0].double())) < TOL[dtype]


def test_errors():
    with pytest.raises(RuntimeError, match=r"tiled_bmm: expected 3-D tensors"):
        bmm(torch.randn(3, 4), torch.randn(4, 5))
    with pytest.raises(RuntimeError, match=r"tiled_bmm: batch sizes differ.*expand"):
        bmm(torch.randn(2, 3, 4), torch.randn(3, 4, 5))
    with pytest.raises(RuntimeError, match=r"tiled_bmm: inner dimensions differ"):
        bmm(torch.randn(2, 3, 4), torch.randn(2, 5, 5))
    with pytest.raises(RuntimeError, match=r"bias of shape \[4\] does not broadcast to the output's shape \[3, 5\]"):
        addmm(torch.randn(4), torch.randn(3, 4), torch.randn(4, 5))
    with pytest.raises(RuntimeError, match=r"bias must have the dtype"):
        addmm(torch.randn(5, dtype=torch.float64), torch.randn(3, 4), torch.randn(4, 5))
    with pytest.raises(RuntimeError, match=r"variant='tiled' is a CUDA kernel"):
        bmm(torch.randn(2, 3, 4), torch.randn(2, 4, 5), variant="tiled")


# --------------------------------------------------- opcheck, autograd, compile
@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for rg in (False, True):
        a = torch.randn(3, 9, 7, device=device, requires_grad=rg)
        b = torch.randn(3, 5, 7, device=device).transpose(1, 2).requires_grad_(rg)
        opcheck(bmm, (a, b), {})
        for shape in ((5,), (9, 1)):
            bias = torch.randn(shape, device=device, requires_grad=rg)
            opcheck(addmm, (bias, a[0].detach().requires_grad_(rg), b[0].detach().requires_grad_(rg)), {})


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck(device):
    kw = dict(device=device, dtype=torch.float64, requires_grad=True)
    a, b = torch.randn(2, 5, 4, **kw), torch.randn(2, 4, 3, **kw)
    assert torch.autograd.gradcheck(lambda x, y: bmm(x, y), (a, b))
    assert torch.autograd.gradgradcheck(lambda x, y: bmm(x, y), (a, b))
    a2, b2 = torch.randn(5, 4, **kw), torch.randn(4, 3, **kw)
    for shape in ((), (3,), (1, 3), (5, 1), (5, 3)):
        bias = torch.randn(shape, **kw)
        assert torch.autograd.gradcheck(lambda c, x, y: addmm(c, x, y), (bias, a2, b2))
    assert torch.autograd.gradgradcheck(lambda c, x, y: addmm(c, x, y), (bias, a2, b2))


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph(device):
    torch._dynamo.reset()

    @torch.compile(fullgraph=True)
    def f(x, y, bias, w):
        h = torch.ops.tilelab.tiled_bmm(x, y)
        return torch.relu(torch.ops.tilelab.tiled_addmm(bias, h.reshape(-1, h.shape[-1]), w))

    x, y = torch.randn(3, 11, 6, device=device), torch.randn(3, 6, 8, device=device)
    bias, w = torch.randn(5, device=device), torch.randn(8, 5, device=device)
    ref = torch.relu(torch.addmm(bias, (x @ y).reshape(-1, 8), w))
    torch.testing.assert_close(f(x, y, bias, w), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_backward(device):
    """AOTAutograd traces the C++ autograd rule (forward and backward) of all three ops."""
    torch._dynamo.reset()

    def f(x, y, bias, w):
        h = torch.ops.tilelab.tiled_bmm(x, y)
        return torch.ops.tilelab.tiled_addmm(bias, torch.ops.tilelab.tiled_mm(h.reshape(-1, 8), w), w.t()).sum()

    inputs = [torch.randn(3, 11, 6, device=device), torch.randn(3, 6, 8, device=device),
              torch.randn(8, device=device), torch.randn(8, 8, device=device)]
    eager = [t.clone().requires_grad_() for t in inputs]
    compiled = [t.clone().requires_grad_() for t in inputs]
    f(*eager).backward()
    torch.compile(f, fullgraph=True)(*compiled).backward()
    for e, c in zip(eager, compiled):
        torch.testing.assert_close(c.grad, e.grad, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- nn helpers
class Block(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d, bias=False)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        att = torch.softmax(q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5, dim=-1)
        x = x + self.proj(torch.matmul(att, v))
        return x + self.mlp(x)


def test_tiled_linear():
    lin = nn.Linear(12, 7)
    t = TiledLinear.from_linear(lin)
    assert t.state_dict().keys() == lin.state_dict().keys()
    assert t.weight is lin.weight and t.bias is lin.bias
    fresh = TiledLinear(12, 7, bias=False)
    assert fresh.state_dict().keys() == nn.Linear(12, 7, bias=False).state_dict().keys()
    for shape in ((12,), (5, 12), (2, 3, 12), (0, 12)):
        x = torch.randn(shape)
        torch.testing.assert_close(t(x), lin(x), rtol=1e-5, atol=1e-5)
    x = torch.randn(2, 3, 12, requires_grad=True)
    t(x).sum().backward()
    gw, gx = lin.weight.grad.clone(), x.grad.clone()
    lin.weight.grad = None
    x.grad = None
    lin(x).sum().backward()
    torch.testing.assert_close(gw, lin.weight.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gx, x.grad, rtol=1e-5, atol=1e-5)


def test_swap_and_use_tiled():
    torch.manual_seed(0)
    model = Block()
    x = torch.randn(2, 5, 16)
    ref = model(x)
    report = swap(model)
    assert report.swapped == ["qkv", "proj", "mlp.0", "mlp.2"] and report.fused == [("mlp.0", "gelu")]
    assert swap(model).swapped == []
    assert sum(isinstance(m, TiledLinear) for m in model.modules()) == 4
    torch.testing.assert_close(model(x), ref, rtol=1e-5, atol=1e-5)
    with use_tiled() as mode:
        out = model(x)  # q @ k^T and att @ v: batched matmuls
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)
    assert mode.routed_by["matmul"] == 2 and mode.routed == 2


def test_use_tiled_routes_and_passes():
    a, b, c3 = torch.randn(4, 6), torch.randn(6, 5), torch.randn(3, 6, 5)
    bias = torch.randn(5)
    with use_tiled() as mode:
        torch.testing.assert_close(a @ b, torch.mm(a, b).clone(), rtol=1e-5, atol=1e-5)
        torch.mm(a, b)
        torch.bmm(c3.transpose(1, 2), c3)
        torch.addmm(bias, a, b)
        F.linear(a, b.t(), bias)
        torch.matmul(a, c3)  # 2-D @ 3-D: broadcast batch (stride 0)
        torch.matmul(c3.transpose(1, 2), b)  # 3-D @ 2-D
        torch.addmm(bias, a, b, beta=2)  # not routed
        torch.mm(a.long(), b.long())  # not routed
        a @ torch.randn(6)  # 1-D: not routed
    assert mode.routed == 8
    assert mode.passed == 3
    assert dict(mode.routed_by) == {"matmul": 3, "mm": 2, "bmm": 1, "addmm": 1, "linear": 1}
    with use_tiled():
        y = torch.matmul(a, c3)
    torch.testing.assert_close(y, torch.matmul(a, c3), rtol=1e-5, atol=1e-5)


# -------------------------------------------------------------------- autocast
@pytest.mark.parametrize("device,dtype", [("cpu", torch.bfloat16),
                                          pytest.param("cuda", torch.float16, marks=pytest.mark.gpu),
                                          pytest.param("cuda", torch.bfloat16, marks=pytest.mark.gpu)])
def test_autocast(device, dtype):
    a, b = torch.randn(9, 8, device=device), torch.randn(8, 7, device=device)
    bias = torch.randn(7, device=device)
    with torch.autocast(device, dtype=dtype):
        outs = [torch.ops.tilelab.tiled_mm(a, b), addmm(bias, a, b), bmm(a[None], b[None]),
                TiledLinear.from_linear(nn.Linear(8, 7).to(device))(a)]
        assert all(o.dtype == dtype for o in outs)
        assert torch.mm(a, b).dtype == dtype  # same policy as torch.mm
        assert torch.ops.tilelab.tiled_mm(a.double(), b.double()).dtype == torch.float64
        with use_tiled() as mode:
            y = F.linear(a.to(dtype), b.t(), bias)  # mixed dtypes: cast by the autocast rule
        assert mode.routed == 1 and y.dtype == dtype
    ref = torch.mm(a.to(dtype).double(), b.to(dtype).double())
    assert relerr(outs[0], ref) < TOL[dtype]
    # gradients flow back to the fp32 leaves
    a.requires_grad_(True)
    with torch.autocast(device, dtype=dtype):
        addmm(bias, a, b).float().sum().backward()
    assert a.grad.dtype == torch.float32


# ------------------------------------------------------------- GPU-only tests
def _odd_layout_cases():
    return [(m, n, k, la, lb) for (m, n, k) in [(7, 5, 13), (65, 33, 129)]
            for la, lb in [("row", "row"), ("col", "col"), ("row", "col")]]


@pytest.mark.gpu
@pytest.mark.parametrize("config", [k.name for k in cuda_kernels()])
def test_every_config_bmm_addmm(config):
    info = next(k for k in cuda_kernels() if k.name == config)
    for dtype in info.dtypes:
        if dtype not in (torch.float32, torch.float16):
            continue
        tol = kernel_tol(info, dtype)
        # TF32 rows run only where TF32 is allowed; precision_for sets that for them.
        with precision_for(info):
            for M, N, K, la, lb in _odd_layout_cases():
                a, b = batched(3, M, K, la, dtype, "cuda"), batched(3, K, N, lb, dtype, "cuda")
                out = bmm(a, b, variant=config)
                assert relerr(out, a.double() @ b.double()) < tol, (config, dtype, M, N, K, la, lb)
                for shape in (("N",), ("M", 1), ("M", "N")):
                    bias = bias_of(shape, M, N, dtype, "cuda")
                    out = addmm(bias, a[1], b[1], variant=config)
                    ref = torch.addmm(bias.double(), a[1].double(), b[1].double())
                    assert relerr(out, ref) < tol, (config, dtype, shape, la, lb)


@pytest.mark.gpu
def test_bmm_grid_z_chunks():
    a, b = torch.randn(70000, 3, 5, device="cuda"), torch.randn(5, 4, device="cuda").expand(70000, 5, 4)
    out = bmm(a, b)
    torch.testing.assert_close(out, a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_cuda_graph_capture_replay():
    torch.manual_seed(0)
    model = Block(32).cuda()
    swap(model)
    x = torch.randn(4, 9, 32, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), use_tiled():
        for _ in range(2):
            model(x)  # warm up (allocator, chooser caches)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), use_tiled():
        y = model(x)
    for _ in range(2):
        x.copy_(torch.randn_like(x))
        g.replay()
        torch.cuda.synchronize()
        with use_tiled():
            torch.testing.assert_close(y, model(x), rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
def test_compile_reduce_overhead():
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Block(32).cuda()
    ref_model = Block(32).cuda()
    ref_model.load_state_dict(model.state_dict())
    swap(model)
    f = torch.compile(model, mode="reduce-overhead", fullgraph=True)
    for _ in range(3):
        x = torch.randn(4, 9, 32, device="cuda")
        torch.testing.assert_close(f(x), ref_model(x), rtol=1e-4, atol=1e-4)
