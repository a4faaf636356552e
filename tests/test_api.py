"""The op as PyTorch sees it: errors, opcheck, autograd, torch.compile, and the
Python surface (kernels(), explain())."""
import os
import re
import shutil

import pytest
import torch
from torch.testing._internal.optests import opcheck

import tilelab_torch
from conftest import HAS_CUDA, cuda_kernels, kernel_by_name, precision_for, test_dtype

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
op = torch.ops.tilelab.tiled_mm


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("device", DEVICES)
def test_error_not_2d(device):
    with pytest.raises(RuntimeError, match=r"expected 2-D tensors.*\[2, 3, 4\]"):
        op(torch.randn(2, 3, 4, device=device), torch.randn(4, 5, device=device))
    with pytest.raises(RuntimeError, match="expected 2-D tensors"):
        op(torch.randn(3, device=device), torch.randn(3, 5, device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_error_inner_dims(device):
    with pytest.raises(RuntimeError, match=r"inner dimensions differ: a is \[3, 4\] and b is \[5, 6\]"):
        op(torch.randn(3, 4, device=device), torch.randn(5, 6, device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_error_dtype_mismatch(device):
    with pytest.raises(RuntimeError, match="same dtype, got torch.float32 and torch.float64"):
        op(torch.randn(3, 4, device=device), torch.randn(4, 5, device=device, dtype=torch.float64))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.complex64, torch.bool])
def test_error_unsupported_dtype(device, dtype):
    a = torch.ones(3, 4, device=device, dtype=dtype)
    b = torch.ones(4, 5, device=device, dtype=dtype)
    with pytest.raises(RuntimeError, match="unsupported dtype .*supported: torch.float32"):
        op(a, b)


@pytest.mark.gpu
def test_error_cpu_vs_cuda():
    with pytest.raises(RuntimeError, match="a is on cpu and b is on cuda:0"):
        op(torch.randn(3, 4), torch.randn(4, 5, device="cuda"))
    with pytest.raises(RuntimeError, match="a is on cuda:0 and b is on cpu"):
        op(torch.randn(3, 4, device="cuda"), torch.randn(4, 5))


@pytest.mark.gpu
@pytest.mark.skipif(HAS_CUDA and torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_error_two_gpus():
    with pytest.raises(RuntimeError, match="a is on cuda:0 and b is on cuda:1"):
        op(torch.randn(3, 4, device="cuda:0"), torch.randn(4, 5, device="cuda:1"))


@pytest.mark.gpu
def test_error_tile_too_large():
    a, b = torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda")
    with pytest.raises(RuntimeError, match=r"tile=64 needs 64x64 = 4096 threads.*at most 1024.*valid tiles for variant 'tiled': 8, 16, 32"):
        op(a, b, variant="tiled", tile=64)


@pytest.mark.gpu
def test_error_bad_tile_and_variant():
    a, b = torch.randn(8, 8, device="cuda"), torch.randn(8, 8, device="cuda")
    with pytest.raises(RuntimeError, match=r"tile=12 is not a valid tile for variant 'tiled'; valid tiles: 8, 16, 32"):
        op(a, b, variant="tiled", tile=12)
    with pytest.raises(RuntimeError, match=r"unknown variant 'fastest'; valid variants: 'naive', 'tiled'"):
        op(a, b, variant="fastest")
    with pytest.raises(RuntimeError, match=r"tile=16 needs a variant"):
        op(a, b, tile=16)
    with pytest.raises(RuntimeError, match=r"contradicts"):
        op(a, b, variant="tiled_16x16x16", tile=32)
    # explain() runs the same validation
    with pytest.raises(RuntimeError, match=r"unknown variant 'fastest'"):
        tilelab_torch.explain(a, b, variant="fastest")


def test_error_cpu_override():
    a, b = torch.randn(8, 8), torch.randn(8, 8)
    with pytest.raises(RuntimeError, match=r"variant='tiled' is a CUDA kernel; CPU tensors run the 'cpu' kernel"):
        op(a, b, variant="tiled")
    with pytest.raises(RuntimeError, match=r"tile=16 applies to CUDA kernels"):
        op(a, b, tile=16)
    assert torch.equal(op(a, b, variant="cpu"), op(a, b))


def test_fake_tensor_errors():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a, b = torch.randn(3, 4), torch.randn(5, 6)
        with pytest.raises(RuntimeError, match="inner dimensions differ"):
            op(a, b)
        out = op(torch.randn(3, 4), torch.randn(4, 6))
        assert out.shape == (3, 6) and out.is_contiguous()


# ------------------------------------------------------------ opcheck/autograd
def _opcheck_cases(device):
    cases = []
    for dtype in (torch.float32, torch.float64):
        for rg in (False, True):
            for la, lb in (("row", "row"), ("col", "col")):
                a = torch.randn(17, 9, device=device, dtype=dtype)
                b = torch.randn(9, 13, device=device, dtype=dtype)
                a = a if la == "row" else a.t().contiguous().t()
                b = b if lb == "row" else b.t().contiguous().t()
                cases.append(((a.requires_grad_(rg), b.requires_grad_(rg)), {}))
    return cases


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for args, kwargs in _opcheck_cases(device):
        opcheck(op, args, kwargs)


@pytest.mark.gpu
@pytest.mark.parametrize("config", [k.name for k in cuda_kernels()])
def test_opcheck_forced_variant(config):
    k = kernel_by_name(config)
    a = torch.randn(17, 9, device="cuda", dtype=test_dtype(k), requires_grad=True)
    b = torch.randn(9, 13, device="cuda", dtype=test_dtype(k), requires_grad=True)
    with precision_for(k):
        opcheck(op, (a, b), {"variant": config})


@pytest.mark.parametrize("device", DEVICES)
def test_gradcheck(device):
    a = torch.randn(7, 5, device=device, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, 3, device=device, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, y: op(x, y), (a, b))
    assert torch.autograd.gradgradcheck(lambda x, y: op(x, y), (a, b))


@pytest.mark.gpu
# gradcheck needs float64: variants without an fp64 config (the fp32-only blocked family) are out of scope.
@pytest.mark.parametrize("variant", sorted({k.variant for k in cuda_kernels(torch.float64)}))
def test_gradcheck_each_variant(variant):
    if not any(torch.float64 in k.dtypes for k in cuda_kernels() if k.variant == variant):
        pytest.skip(f"{variant} has no float64 kernel (gradcheck needs float64)")
    a = torch.randn(9, 6, device="cuda", dtype=torch.float64, requires_grad=True)
    b = torch.randn(6, 4, device="cuda", dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, y: op(x, y, variant=variant), (a, b))


@pytest.mark.parametrize("device", DEVICES)
def test_backward_matches_torch(device):
    a = torch.randn(33, 20, device=device, requires_grad=True)
    b = torch.randn(20, 11, device=device, requires_grad=True)
    g = torch.randn(33, 11, device=device)
    op(a, b).backward(g)
    ga, gb = a.grad.clone(), b.grad.clone()
    a.grad = b.grad = None
    torch.mm(a, b).backward(g)
    torch.testing.assert_close(ga, a.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(gb, b.grad, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("which", ["linear", "addmm", "mm_cols"])
def test_gradient_in_the_operand_layout(device, which):
    """A gradient arrives in its operand's layout, as torch.mm's does: nn.Linear's weight
    (read as the column-major weight.t()) gets a contiguous .grad, so AccumulateGrad keeps
    it rather than copying it; a column-major `a` gets a column-major gradient. Values
    as torch's, double backward through the transposed products."""
    x = torch.randn(37, 24, device=device, dtype=torch.float64, requires_grad=True)
    w = torch.randn(19, 24, device=device, dtype=torch.float64, requires_grad=True)  # (N, K)
    bias = torch.randn(19, device=device, dtype=torch.float64, requires_grad=True)
    g = torch.randn(37, 19, device=device, dtype=torch.float64)
    if which == "linear":
        ours = lambda x, w, bias: tilelab_torch.tiled_linear(x, w, bias)  # noqa: E731
        ref = lambda x, w, bias: torch.nn.functional.linear(x, w, bias)  # noqa: E731
    elif which == "addmm":
        ours = lambda x, w, bias: torch.ops.tilelab.tiled_addmm(bias, x, w.t())  # noqa: E731
        ref = lambda x, w, bias: torch.addmm(bias, x, w.t())  # noqa: E731
    else:  # both operands column-major
        x = x.detach().t().contiguous().t().requires_grad_()
        ours = lambda x, w, bias: op(x, w.t()) + bias  # noqa: E731
        ref = lambda x, w, bias: torch.mm(x, w.t()) + bias  # noqa: E731
    ours(x, w, bias).backward(g)
    got = (x.grad, w.grad, bias.grad)
    x.grad = w.grad = bias.grad = None
    ref(x, w, bias).backward(g)
    for mine, theirs in zip(got, (x.grad, w.grad, bias.grad)):
        torch.testing.assert_close(mine, theirs)
        assert mine.stride() == theirs.stride()
    assert got[1].is_contiguous()
    if which == "mm_cols":
        assert got[0].t().is_contiguous()
    assert torch.autograd.gradgradcheck(ours, (x, w, bias))


@pytest.mark.parametrize("device", DEVICES)
def test_autograd_records_only_what_needs_it(device):
    """The C++ autograd rule adds a node only when an input requires grad and grad
    mode is on; a gradient needed for one operand only saves the other operand."""
    a = torch.randn(6, 5, device=device)
    b = torch.randn(5, 4, device=device)
    assert op(a, b).grad_fn is None
    ag = a.clone().requires_grad_()
    with torch.no_grad():
        assert op(ag, b).grad_fn is None
    out = op(ag, b)
    assert out.grad_fn is not None and out.requires_grad
    (ga,) = torch.autograd.grad(out, ag, torch.ones_like(out))
    torch.testing.assert_close(ga, torch.ones(6, 4, device=device) @ b.t())
    bias = torch.randn(4, device=device, requires_grad=True)
    y = torch.ops.tilelab.tiled_addmm(bias, a, b)
    (gbias,) = torch.autograd.grad(y, bias, torch.ones_like(y))
    torch.testing.assert_close(gbias, torch.full((4,), 6.0, device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_torch_compile_fullgraph(device):
    torch._dynamo.reset()

    @torch.compile(fullgraph=True)
    def f(x, y, z):
        return torch.relu(torch.ops.tilelab.tiled_mm(x, y)) + z

    x = torch.randn(37, 29, device=device)
    y = torch.randn(29, 41, device=device)
    z = torch.randn(37, 41, device=device)
    torch.testing.assert_close(f(x, y, z), torch.relu(x @ y) + z, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------- Python surface
def test_kernels_table():
    ks = tilelab_torch.kernels()
    names = [k.name for k in ks]
    assert len(names) == len(set(names)), "config names must be unique"
    assert {"naive", "tiled", "padded", "padded_nopad", "cpu"} <= {k.variant for k in ks}
    tiled = sorted(k.tile for k in ks if k.variant == "tiled")
    assert tiled == [8, 16, 32]
    for k in ks:
        assert k.dtypes, k
        assert k.device in ("cpu", "cuda")
        if k.device == "cuda":
            assert k.threads <= 1024, k
            assert k.name.startswith(k.variant), k
    pads = {k.name: k.pad for k in ks if k.family == "padded"}
    assert any(p > 0 for p in pads.values()) and any(p == 0 for p in pads.values())
    assert tilelab_torch.kernels("cpu")[0].name == "cpu"


def test_kernels_table_columns():
    """The columns a kernel reads: names carry the block tile, warp grids fill the
    thread count, pipelines have stages, and the padding is what the kernels use."""
    for k in tilelab_torch.kernels("cuda"):
        bm, bn, bk = k.block
        assert k.name.endswith(f"{bm}x{bn}" + (f"x{bk}" if bk else "")), k
        wm, wn = k.warps
        if k.family == "hopper":  # a producer warpgroup and a consumer warpgroup per 64 rows of the tile
            # (cooperative: bm / 16 x 1 warps), or two that take turns with whole 128-row tiles (ping-pong: 4 x 1);
            # swap-AB rows name C's tile, bm x bn, and compute C^T's, bn x bm
            km = bn if k.variant == "hopper_swap" else bm
            assert k.threads == 128 * (1 + km // 64) and km in (64, 128, 192) and wn == 1, k
            assert wm == (4 if k.variant == "hopper_pingpong" else km // 16), k
        elif k.family == "gemv_mma":  # one warp tile covering the block tile: threads / 32 warps split K
            assert (wm, wn) == (1, 1) and k.threads % 32 == 0 and k.stages >= 2, k
        elif wm:  # MMA/FMA warps
            assert k.threads == 32 * wm * wn, k
        else:   # one thread per output
            assert k.threads == bm * bn, k
        if k.family in ("blocked", "tensorcore", "hopper"):
            assert k.stages >= 3, k
        # shared rows of 16 bytes (k-contiguous half and TF32 tiles), none for the swizzled hopper stages
        if k.family == "tensorcore":
            assert k.pad * (4 if k.tf32 else 2) == 16, k
        if k.family == "hopper":
            assert k.pad == 0, k


def test_cuda_kernels_were_compiled():
    """CI has nvcc and a CUDA build of torch but no GPU: the CUDA kernels must still be built."""
    want = (torch.version.cuda is not None
            and (shutil.which("nvcc") or os.environ.get("CUDA_HOME"))
            and os.environ.get("TILELAB_CPU_ONLY", "0") != "1")
    if not want:
        pytest.skip("no CUDA toolkit / CUDA torch: CPU-only build expected")
    assert tilelab_torch.built_with_cuda()
    assert all(k.compiled for k in tilelab_torch.kernels("cuda") if k.family != "hopper")
    # The hopper rows need sm_90a: setup.py builds a "9.0" arch list as "9.0a" unless told not to.
    archs = os.environ.get("TORCH_CUDA_ARCH_LIST", "").replace(";", " ").split()
    if any(a.startswith("9.0") for a in archs) and os.environ.get("TILELAB_NO_SM90A", "0") != "1":
        assert all(k.compiled for k in tilelab_torch.kernels("cuda") if k.family == "hopper")


def test_explain_cpu():
    e = tilelab_torch.explain(torch.randn(5, 4), torch.randn(4, 3))
    assert e.kernel == "cpu"
    assert "cpu" in str(e) and "5x3x4" in str(e)
    e = tilelab_torch.explain(torch.randn(6, 5, 4), torch.randn(6, 4, 3))  # tiled_bmm's choice
    assert e.kernel == "cpu" and e.details["batch"] == 6 and "6x5x3x4" in str(e)
    with pytest.raises(RuntimeError, match="batch sizes differ"):
        tilelab_torch.explain(torch.randn(6, 5, 4), torch.randn(2, 4, 3))
    # tiled_addmm's / tiled_linear's epilogue: validated as the ops validate it
    a, b = torch.randn(5, 4), torch.randn(4, 3)
    assert tilelab_torch.explain(a, b, bias=torch.randn(3), activation="gelu").kernel == "cpu"
    with pytest.raises(RuntimeError, match="does not broadcast"):
        tilelab_torch.explain(a, b, bias=torch.randn(4))
    with pytest.raises(RuntimeError, match="unknown activation 'tanh'"):
        tilelab_torch.explain(a, b, activation="tanh")
    with pytest.raises(RuntimeError, match="tiled_bmm takes neither"):
        tilelab_torch.explain(torch.randn(6, 5, 4), torch.randn(6, 4, 3), activation="relu")


@pytest.mark.gpu
def test_explain_cuda_matches_table():
    names = {k.name for k in cuda_kernels()}
    for M, N, K in [(1, 1, 1), (100, 100, 100), (4096, 4096, 256), (8, 4096, 4096)]:
        a = torch.empty(M, K, device="cuda")
        b = torch.empty(K, N, device="cuda")
        e = tilelab_torch.explain(a, b)
        assert e.kernel in names
        assert e.reason
    # tiled_bmm: the chooser counts the tiles of every matrix of the batch
    x, y = torch.empty(96, 512, 64, device="cuda", dtype=torch.bfloat16), torch.empty(96, 64, 512, device="cuda", dtype=torch.bfloat16)
    e = tilelab_torch.explain(x, y)
    assert e.details["batch"] == 96 and e.kernel == tilelab_torch.explain(x.reshape(-1, 64), y[0]).kernel
    # with tiled_linear's epilogue: the details name it
    x, w = torch.empty(16, 1024, device="cuda", dtype=torch.bfloat16), torch.empty(512, 1024, device="cuda",
                                                                                    dtype=torch.bfloat16)
    e = tilelab_torch.explain(x, w.t(), bias=torch.empty(512, device="cuda", dtype=torch.bfloat16),
                              activation="silu")
    assert e.kernel in names and (e.details["bias"], e.details["activation"]) == ("n", "silu")
    assert "+ bias(n) + silu" in str(e)
    e = tilelab_torch.explain(a, b, variant="tiled", tile=16)
    assert e.kernel == "tiled_16x16x16" and "override" in e.reason
    e = tilelab_torch.explain(a, b, variant="tiled")
    assert e.kernel == "tiled_32x32x32"
    assert re.search(r"cuda:0", str(e))


def test_public_api_documented():
    for name in tilelab_torch.__all__:
        obj = getattr(tilelab_torch, name)
        assert obj.__doc__, f"{name} has no docstring"
