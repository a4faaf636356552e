"""gemv_split, few rows against a large B with K split over blocks: what the table-wide tests
(test_correctness, test_linear, test_fuzz) do not reach -- each row on the layout it reads in
place and on the one it copies, the K tail inside a 16-byte load, columns past N inside a
lane's four, rows above 16 (several row tiles), the chooser's split counts (bitwise equal
calls), a batch with a broadcast B, and bias and activation added once after the slices."""
import pytest
import torch
import torch.nn.functional as F

import tilelab_torch
from conftest import ACT_REFS, TOL, Poisoned, fresh_seed, rel_err

KERNELS = {k.name: k for k in tilelab_torch.kernels("cuda") if k.family == "gemv_split"}
ROWS = list(KERNELS)
DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# (row, dtype) for each dtype a row runs (gemv_split_m32 is fp32 only)
ROW_DTYPES = [pytest.param(r, d, id=f"{r}-{d}") for r in ROWS for d in DTYPES if d in KERNELS[r].dtypes]
pytestmark = pytest.mark.gpu


def test_the_family_has_rows():
    assert ROWS, "no gemv_split row in the table"


def _operands(M, K, N, dtype, layout, k_pad=0):
    """x (M, K) k-contiguous and B (K, N): W.t() for W (N, K) ("lin") or row-major ("rowb"); with
    k_pad the rows are slices of wider ones (16-byte aligned starts, K not a multiple of the load)."""
    x = torch.randn(M, K + k_pad, device="cuda", dtype=dtype)[:, :K]
    if layout == "lin":
        b = torch.randn(N, K + k_pad, device="cuda", dtype=dtype)[:, :K].t()
    else:
        b = torch.randn(K, N + k_pad, device="cuda", dtype=dtype)[:, :N]
    return x, b


@pytest.mark.parametrize("row,dtype", ROW_DTYPES)
@pytest.mark.parametrize("layout", ["lin", "rowb"])
# 9..16 rows of a 16-row block, 17..32 of a 32-row one: no per-row branch
@pytest.mark.parametrize("M", [1, 3, 8, 9, 16, 17, 31, 40, 70])
@pytest.mark.parametrize("K,N,k_pad", [(5, 7, 3), (31, 33, 1), (64, 1030, 0), (1000, 300, 8), (4099, 129, 5)])
def test_shapes(row, dtype, layout, M, K, N, k_pad):
    seed = fresh_seed()
    x, b = _operands(M, K, N, dtype, layout, k_pad)
    poison = Poisoned(M * N, dtype, "cuda")
    out = tilelab_torch.tiled_mm(x, b, variant=row)
    assert poison.reused(out)
    assert not torch.isnan(out).any(), f"unwritten output, seed={seed}"
    err = rel_err(out, x, b)
    assert err <= TOL[dtype], f"{row} {layout} {M}x{K}x{N}: {err:.3g}, seed={seed}"


@pytest.mark.parametrize("row,dtype", [p for p in ROW_DTYPES if p.values[1] is not torch.float16])
def test_chosen_split_deterministic(row, dtype):
    """A long K over few column blocks is split by the chooser (explain() says so); the slices are
    added in a fixed order: the same inputs give bitwise the same output."""
    layout = "rowb" if "rowb" in row else "lin"
    x, b = _operands(12, 8192, 2048, dtype, layout)
    e = tilelab_torch.explain(x, b, variant=row)
    assert e.details["split_k"] > 1 and "split-K" in e.reason, e
    first = tilelab_torch.tiled_mm(x, b, variant=row)
    assert rel_err(first, x, b) <= TOL[dtype]
    for _ in range(3):
        assert torch.equal(tilelab_torch.tiled_mm(x, b, variant=row), first)


@pytest.mark.parametrize("row", ROWS)
@pytest.mark.parametrize("act", [None, "gelu_tanh", "silu"])
def test_linear_bias_activation_once(row, act):
    """F.linear's layout with a bias and an activation, split and unsplit: the bias is added
    once, after the slices' sums, and the activation after it."""
    seed = fresh_seed()
    x = torch.randn(7, 6144, device="cuda")
    w = torch.randn(1000, 6144, device="cuda")
    bias = torch.randn(1000, device="cuda") * 10
    ref = ACT_REFS[act](F.linear(x.double(), w.double(), bias.double()))
    scale = float((x.double().abs() @ w.double().abs().t()).norm())
    for splits in (None, 1, 5):
        try:
            if splits is not None:
                torch.ops.tilelab._set_split_k(splits)
            out = tilelab_torch.tiled_linear(x, w, bias, activation=act, variant=row)
        finally:
            torch.ops.tilelab._set_split_k(None)
        err = float((out.double() - ref).norm()) / scale
        assert err <= TOL[torch.float32], f"{row} act={act} splits={splits}: {err:.3g}, seed={seed}"


@pytest.mark.parametrize("row", ROWS)
@pytest.mark.parametrize("batch_stride", [6000, 6001])
def test_batch_with_broadcast_b(row, batch_stride):
    """tiled_bmm over a batch whose B is one matrix expanded (batch stride 0), split over K. With x's
    matrices 6001 floats apart every other one starts off a 16-byte boundary although its rows are 2000
    floats apart: the bulk prefetch of x and the 16-byte loads must not take its rows as aligned."""
    x = torch.randn(6 * batch_stride, device="cuda").as_strided((6, 3, 2000), (batch_stride, 2000, 1))
    w = torch.randn(2000, 700, device="cuda")
    b = (w if "rowb" in row else w.t().contiguous().t()).expand(6, -1, -1)
    out = tilelab_torch.tiled_bmm(x, b, variant=row)
    ref = x.double() @ b.double()
    err = float((out.double() - ref).norm() / (x.double().abs() @ b.double().abs()).norm())
    assert err <= TOL[torch.float32], err
