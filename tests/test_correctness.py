"""Every kernel against a float64 reference: all configs of the table x dtypes x
odd shapes x both layouts of each operand, on fresh random data."""
import pytest
import torch

import tilelab_torch
from conftest import (
    DTYPE_ID, HAS_CUDA, LAYOUTS, SHAPES, TOL, TOL_TF32, Poisoned, cuda_kernels, fresh_seed, kernel_by_name, kernel_tol,
    make_operand, precision_for, rel_err, test_dtype,
)

DTYPES = list(TOL)


def _shape_id(s):
    return "x".join(map(str, s))


def _check(out, a, b, dtype, seed, what, tol=None):
    tol = TOL[dtype] if tol is None else tol
    M, N = a.shape[0], b.shape[1]
    assert out.shape == (M, N), what
    assert out.dtype == dtype, what
    assert out.is_contiguous(), what
    assert not torch.isnan(out).any(), f"{what}: NaN in output (unwritten element?), seed={seed}"
    err = rel_err(out, a, b)
    if tol == TOL_TF32 and out.numel() < 64:
        # A handful of TF32 dot products: one output's relative error is dominated
        # by cancellation in the reference (measured 2.1e-3 and 3.8e-3 for 1x1x4097 on
        # an H200). Judge it by the forward-error bound's scale, || |A| |B| ||.
        err = float((out.double() - a.double() @ b.double()).norm() / (a.double().abs() @ b.double().abs()).norm())
    assert err <= tol, f"{what}: rel err {err:.3g} > {tol:.1g}, seed={seed}"


# ---------------------------------------------------------------- CUDA kernels
CUDA_CASES = [
    pytest.param(k.name, dtype, shape, la, lb,
                 id=f"{k.name}-{DTYPE_ID[dtype]}-{_shape_id(shape)}-{la}A-{lb}B")
    for k in cuda_kernels()
    for dtype in DTYPES if dtype in k.dtypes
    for shape in SHAPES
    for la, lb in LAYOUTS
]


@pytest.mark.gpu
@pytest.mark.parametrize("config,dtype,shape,la,lb", CUDA_CASES)
def test_cuda_kernel(config, dtype, shape, la, lb):
    M, N, K = shape
    seed = fresh_seed()
    a = make_operand(M, K, la, dtype, "cuda")
    b = make_operand(K, N, lb, dtype, "cuda")
    k = kernel_by_name(config)
    poison = Poisoned(M * N, dtype, "cuda")
    with precision_for(k):  # TF32 rows run (and are judged) at precision "high"
        out = tilelab_torch.tiled_mm(a, b, variant=config)
    assert poison.reused(out), "the poisoned block was not reused: this test could not see unwritten outputs"
    _check(out, a, b, dtype, seed, f"{config} {dtype} {shape} {la}A {lb}B", kernel_tol(k, dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_ID.get)
@pytest.mark.parametrize("shape", SHAPES, ids=_shape_id)
def test_cuda_auto(dtype, shape):
    """The dispatcher's choice, and that it equals forcing the config it names."""
    M, N, K = shape
    seed = fresh_seed()
    a = torch.randn(M, K, dtype=dtype, device="cuda")
    b = torch.randn(K, N, dtype=dtype, device="cuda")
    out = torch.ops.tilelab.tiled_mm(a, b)
    _check(out, a, b, dtype, seed, f"auto {dtype} {shape}")
    chosen = tilelab_torch.explain(a, b).kernel
    assert torch.equal(out, tilelab_torch.tiled_mm(a, b, variant=chosen))


@pytest.mark.gpu
@pytest.mark.parametrize("config", [k.name for k in cuda_kernels()])
def test_cuda_strided_views(config):
    """Sliced views (offset storage, padded leading dimension), general strides
    (one contiguous copy) and a broadcast (stride-0) operand."""
    seed = fresh_seed()
    k = kernel_by_name(config)
    dt = test_dtype(k)
    base = torch.randn(130, 140, device="cuda", dtype=dt)
    cases = {
        # row-major A and column-major B, both with an offset and a padded leading dimension
        "slice": (base[1:, 1:][:, :67], torch.randn(34, 68, device="cuda", dtype=dt)[1:, 1:].t()),
        "step": (base[::2, ::3], torch.randn(47, 29, device="cuda", dtype=dt)),
        "broadcast": (base[:9, :47], torch.randn(1, 29, device="cuda", dtype=dt).expand(47, 29)),
    }
    for name, (a, b) in cases.items():
        if a.shape[1] != b.shape[0]:
            b = torch.randn(a.shape[1], 21, device="cuda", dtype=dt)
        with precision_for(k):
            out = tilelab_torch.tiled_mm(a, b, variant=config)
        _check(out, a, b, dt, seed, f"{config} {name}", kernel_tol(k, dt))


@pytest.mark.gpu
def test_cuda_nondefault_stream():
    a = torch.randn(300, 200, device="cuda")
    b = torch.randn(200, 100, device="cuda")
    s = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(s):
        out = torch.ops.tilelab.tiled_mm(a, b)
    s.synchronize()
    assert rel_err(out, a, b) < TOL[torch.float32]


@pytest.mark.gpu
@pytest.mark.skipif(HAS_CUDA and torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_cuda_second_device():
    a = torch.randn(100, 70, device="cuda:1")
    b = torch.randn(70, 50, device="cuda:1")
    with torch.cuda.device(0):
        out = torch.ops.tilelab.tiled_mm(a, b)
    assert out.device == a.device
    assert rel_err(out, a, b) < TOL[torch.float32]


# ------------------------------------------------------------------ CPU kernel
CPU_CASES = [
    pytest.param(dtype, shape, la, lb, id=f"cpu-{DTYPE_ID[dtype]}-{_shape_id(shape)}-{la}A-{lb}B")
    for dtype in DTYPES
    for shape in SHAPES
    for la, lb in LAYOUTS
]


@pytest.mark.parametrize("dtype,shape,la,lb", CPU_CASES)
def test_cpu_kernel(dtype, shape, la, lb):
    M, N, K = shape
    seed = fresh_seed()
    a = make_operand(M, K, la, dtype, "cpu")
    b = make_operand(K, N, lb, dtype, "cpu")
    out = torch.ops.tilelab.tiled_mm(a, b)
    _check(out, a, b, dtype, seed, f"cpu {dtype} {shape} {la}A {lb}B")


def test_cpu_strided_views():
    seed = fresh_seed()
    base = torch.randn(130, 140)
    for a, b in [
        (base[1:, 1:][:, :67], torch.randn(34, 68)[1:, 1:].t()),
        (base[::2, ::3], torch.randn(47, 29)),
        (base[:9, :47], torch.randn(1, 29).expand(47, 29)),
    ]:
        out = torch.ops.tilelab.tiled_mm(a, b)
        _check(out, a, b, torch.float32, seed, "cpu strided view")


# ------------------------------------------------------- semantics of torch.mm
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("M,N,K", [(0, 5, 3), (4, 0, 3), (0, 0, 0), (4, 5, 0)])
def test_empty_shapes(device, M, N, K):
    a = torch.randn(M, K, device=device)
    b = torch.randn(K, N, device=device)
    out = torch.ops.tilelab.tiled_mm(a, b)
    assert out.shape == (M, N)
    assert torch.equal(out, torch.zeros(M, N, device=device))


@pytest.mark.parametrize("device", DEVICES)
def test_nan_inf_propagate_like_torch_mm(device):
    a = torch.randn(20, 30, device=device)
    b = torch.randn(30, 10, device=device)
    a[3, 4] = float("nan")
    a[7, 2] = float("inf")
    b[5, 6] = float("-inf")
    b[:, 8] = 0.0
    out = torch.ops.tilelab.tiled_mm(a, b)
    ref = a.double() @ b.double()
    assert torch.equal(torch.isnan(out), torch.isnan(ref))
    assert torch.equal(torch.isinf(out), torch.isinf(ref))
    finite = torch.isfinite(ref)
    assert torch.allclose(out[finite].double(), ref[finite], rtol=1e-5, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("config", [k.name for k in cuda_kernels()])
def test_cuda_nan_inf_every_config(config):
    k = kernel_by_name(config)
    a = torch.randn(40, 50, device="cuda", dtype=test_dtype(k))
    b = torch.randn(50, 37, device="cuda", dtype=test_dtype(k))
    a[3, 4] = float("nan")
    b[5, 6] = float("inf")
    with precision_for(k):
        out = tilelab_torch.tiled_mm(a, b, variant=config)
    ref = a.double() @ b.double()
    assert torch.equal(torch.isnan(out), torch.isnan(ref))
    assert torch.equal(torch.isinf(out), torch.isinf(ref))
