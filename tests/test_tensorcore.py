"""The tensorcore family (mma.sync): odd and unaligned shapes, both layouts,
misaligned views, batch-free edge cases, and the TF32 consent switch."""
import pytest
import torch

import tilelab_torch
from conftest import HALF, LAYOUTS, TOL, TOL_TF32, check_misaligned_views, check_odd_shape, rel_err

pytestmark = pytest.mark.gpu

# The table's tensorcore rows (kernels() is the one source; a new row is tested without an edit here).
_TC = [k for k in tilelab_torch.kernels("cuda") if k.family == "tensorcore"]
HALF_ROWS = [k.name for k in _TC if not k.tf32]
TF32_ROWS = [k.name for k in _TC if k.tf32]
# K = 1, 7 (tail inside one k-tile), 4095/4097 (odd rows: copied to an aligned buffer first);
# odd N; a few shapes smaller than one tile.
SHAPES = [(1, 1, 1), (5, 3, 7), (70, 33, 1), (129, 257, 7), (64, 65, 4095), (65, 127, 4097),
          (200, 131, 96), (256, 256, 4096)]


def _sm80():
    return torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 0)


@pytest.fixture(autouse=True)
def _need_sm80():
    if not _sm80():
        pytest.skip("tensor-core kernels need compute capability 8.0")


@pytest.mark.parametrize("la,lb", LAYOUTS, ids=lambda x: x)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "fp16"])
@pytest.mark.parametrize("config", HALF_ROWS)
def test_half_odd_shapes(config, dtype, shape, la, lb):
    check_odd_shape(config, dtype, shape, la, lb, TOL[dtype])


@pytest.mark.parametrize("la,lb", LAYOUTS, ids=lambda x: x)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("config", TF32_ROWS)
def test_tf32_odd_shapes(high, config, shape, la, lb):
    check_odd_shape(config, torch.float32, shape, la, lb, TOL_TF32)


@pytest.mark.parametrize("dtype", HALF + [torch.float32], ids=["bf16", "fp16", "tf32"])
def test_misaligned_views(high, dtype):
    """Views whose rows start 2 bytes (half) off 16-byte alignment, padded leading
    dimensions of every residue: each unaligned one is copied to an aligned buffer first."""
    config = "tensorcore_128x128x32" if dtype != torch.float32 else "tensorcore_tf32_128x128x16"
    tol = TOL_TF32 if dtype == torch.float32 else TOL[dtype]
    check_misaligned_views(config, dtype, tol, offsets=range(8), lds=(300, 301, 302, 304))


def test_tf32_refused_at_highest(highest):
    a = torch.randn(64, 64, device="cuda")
    with pytest.raises(RuntimeError, match=r'set_float32_matmul_precision\("high"\)'):
        tilelab_torch.tiled_mm(a, a, variant="tensorcore_tf32")


def test_default_precision_never_tf32(highest):
    """At "highest" the chooser keeps fp32 on IEEE kernels: error at the fp32 level."""
    for M, N, K in [(4096, 4096, 256), (1000, 1000, 1000), (333, 777, 4095)]:
        a = torch.randn(M, K, device="cuda")
        b = torch.randn(K, N, device="cuda")
        e = tilelab_torch.explain(a, b)
        assert "tf32" not in e.kernel
        err = rel_err(torch.ops.tilelab.tiled_mm(a, b), a, b)
        assert err < 1e-5, f"{M}x{N}x{K}: {err:.3g} is not IEEE fp32 accuracy"


def test_high_precision_uses_tf32(high):
    a = torch.randn(4096, 512, device="cuda")
    b = torch.randn(512, 4096, device="cuda")
    e = tilelab_torch.explain(a, b)
    assert e.kernel.startswith(("tensorcore_tf32", "hopper_tf32")), e
    err = rel_err(torch.ops.tilelab.tiled_mm(a, b), a, b)
    assert 1e-5 < err < TOL_TF32, f"{err:.3g}: expected TF32 error level"


@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "fp16"])
def test_auto_picks_tensor_cores_for_half(dtype):
    """Half precision lands on tensor cores: mma.sync, or wgmma (the hopper family) where it runs, or
    for 8 rows against a row-major B the decode row (gemv_mma_rowb, mma.sync) where it runs; a tiny
    product whose rows are not 16-byte aligned (K = 5) takes the one-launch gemv row."""
    family = {k.name: k.family for k in tilelab_torch.kernels("cuda")}
    for M, N, K, families in [(4095, 4095, 4095, ("tensorcore", "hopper")),
                              (8, 4096, 4096, ("tensorcore", "hopper", "gemv_mma")),
                              (17, 9, 5, ("gemv",))]:
        a = torch.randn(M, K, device="cuda", dtype=dtype)
        b = torch.randn(K, N, device="cuda", dtype=dtype)
        assert family[tilelab_torch.explain(a, b).kernel] in families, (M, N, K)
        assert rel_err(torch.ops.tilelab.tiled_mm(a, b), a, b) <= TOL[dtype]


def test_kernel_table_tf32_field():
    ks = {k.name: k for k in tilelab_torch.kernels("cuda")}
    assert all(ks[n].tf32 for n in TF32_ROWS)
    assert not any(ks[n].tf32 for n in HALF_ROWS)
    assert all(ks[n].min_sm == 80 for n in HALF_ROWS + TF32_ROWS)
