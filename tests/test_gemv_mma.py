"""gemv_mma, the decode family (x @ W.t(), and x @ B with B row-major on the gemv_mma_rowb
row, with few rows on the tensor cores): what the table-wide tests (test_correctness,
test_linear, test_fuzz) do not reach -- the K tail inside a 16-byte piece, N not a multiple
of a row-major B's 4-column runs, rows above 8 (the second MMA column block) and above 16,
blocks that run several tiles (persistent), a batch with a broadcast W, the copied
layouts, and bitwise determinism."""
import pytest
import torch
import torch.nn.functional as F

import tilelab_torch
from conftest import HALF, TOL, Poisoned, fresh_seed, rel_err

ROWS = [k.name for k in tilelab_torch.kernels("cuda") if k.name.startswith("gemv_mma_")]
pytestmark = pytest.mark.gpu


def test_the_family_has_rows():
    assert ROWS, "no gemv_mma row in the table"


def _linear_operands(M, K, N, dtype, k_pad=0):
    """x (M, K) and W.t() for W (N, K), both k-contiguous; with k_pad, K is a column slice
    of wider rows (16-byte aligned row starts, K not a multiple of 8: the partial piece)."""
    x = torch.randn(M, K + k_pad, device="cuda", dtype=dtype)[:, :K]
    w = torch.randn(N, K + k_pad, device="cuda", dtype=dtype)[:, :K]
    return x, w


def _row_major_b(K, N, dtype):
    """B (K, N) n-contiguous, a column slice of rows padded to 8 elements (16-byte aligned row
    starts, read in place by gemv_mma_rowb; N not a multiple of 4: a partial last run)."""
    return torch.randn(K, (N + 7) // 8 * 8, device="cuda", dtype=dtype)[:, :N]


def _native_b(row, K, N, dtype):
    """B in the layout `row` reads in place: W.t() (gemv_mma) or row-major (gemv_mma_rowb)."""
    if row.startswith("gemv_mma_rowb"):
        return _row_major_b(K, N, dtype)
    return torch.randn(N, K, device="cuda", dtype=dtype).t()


@pytest.mark.parametrize("row", ROWS)
@pytest.mark.parametrize("dtype", HALF, ids=str)
@pytest.mark.parametrize("M", [1, 3, 8, 9, 16, 17, 40])
@pytest.mark.parametrize("K,N,k_pad", [(5, 7, 3), (31, 33, 1), (32, 32, 0), (1000, 300, 8), (4099, 129, 5)])
@pytest.mark.parametrize("layout", ["x @ W.t()", "x @ B"])
def test_shapes(row, dtype, M, K, N, k_pad, layout):
    """Both B layouts on every row: the one it reads in place and the one its launcher copies."""
    seed = fresh_seed()
    x, w = _linear_operands(M, K, N, dtype, k_pad)
    b = w.t() if layout == "x @ W.t()" else _row_major_b(K, N, dtype)
    poison = Poisoned(M * N, dtype, "cuda")
    out = tilelab_torch.tiled_mm(x, b, variant=row)
    assert poison.reused(out)
    assert not torch.isnan(out).any(), f"unwritten output, seed={seed}"
    err = rel_err(out, x, b)
    assert err <= TOL[dtype], f"{row} {layout} {M}x{K}x{N}: {err:.3g}, seed={seed}"


@pytest.mark.parametrize("row", ROWS)
def test_blocks_with_several_tiles(row):
    """More tiles than resident blocks: every block runs several, its ring running on across them."""
    x = torch.randn(5, 264, device="cuda", dtype=torch.bfloat16)
    b = _native_b(row, 264, 20000, torch.bfloat16)
    out = tilelab_torch.tiled_mm(x, b, variant=row)
    assert rel_err(out, x, b) <= TOL[torch.bfloat16]


@pytest.mark.parametrize("row", ROWS)
def test_deterministic(row):
    """The warps' sums are added in a fixed order: the same inputs give bitwise the same output."""
    x = torch.randn(12, 8192, device="cuda", dtype=torch.bfloat16)
    b = _native_b(row, 8192, 4096, torch.bfloat16)
    first = tilelab_torch.tiled_mm(x, b, variant=row)
    for _ in range(3):
        assert torch.equal(tilelab_torch.tiled_mm(x, b, variant=row), first)


@pytest.mark.parametrize("row", ROWS)
@pytest.mark.parametrize("la,lb", [("col", "col"), ("row", "row"), ("col", "row")])
def test_other_layouts_are_copied(row, la, lb):
    """A column-major x or a W stored (K, N) (transformers' Conv1D) is copied k-contiguous first."""
    M, K, N = 6, 300, 77
    x = torch.randn(M, K, device="cuda", dtype=torch.float16)
    if la == "col":
        x = x.t().contiguous().t()
    b = torch.randn(N, K, device="cuda", dtype=torch.float16).t() if lb == "col" else torch.randn(K, N, device="cuda", dtype=torch.float16)
    out = tilelab_torch.tiled_mm(x, b, variant=row)
    assert rel_err(out, x, b) <= TOL[torch.float16]


@pytest.mark.parametrize("row", ROWS)
def test_batch_with_a_broadcast_weight(row):
    x = torch.randn(3, 4, 520, device="cuda", dtype=torch.bfloat16)
    b = _native_b(row, 520, 96, torch.bfloat16)
    out = tilelab_torch.tiled_bmm(x, b.expand(3, -1, -1), variant=row)
    assert rel_err(out, x, b) <= TOL[torch.bfloat16]


@pytest.mark.parametrize("row", ROWS)
def test_bias_once_and_activation(row):
    """F.linear's bias, added once per output, then the activation, in the epilogue."""
    x = torch.randn(2, 7, 1000, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(333, 1000, device="cuda", dtype=torch.bfloat16)
    b = torch.full((333,), 100.0, device="cuda", dtype=torch.bfloat16)
    out = tilelab_torch.tiled_linear(x, w, b, activation="relu", variant=row)
    ref = F.relu(F.linear(x.double(), w.double(), b.double()))
    scale = (x.double().abs() @ w.double().abs().t()).max() + 100
    assert float((out.double() - ref).abs().max() / scale) <= TOL[torch.bfloat16]
    # Conv1D's form, x @ B + b with B (K, N) row-major: the bias once per output here too.
    bk = _row_major_b(1000, 333, torch.bfloat16)
    out = tilelab_torch.tiled_addmm(b, x[0], bk, variant=row)
    ref = torch.addmm(b.double(), x[0].double(), bk.double())
    scale = (x[0].double().abs() @ bk.double().abs()).max() + 100
    assert float((out.double() - ref).abs().max() / scale) <= TOL[torch.bfloat16]


@pytest.mark.parametrize("row", ROWS)
@pytest.mark.parametrize("shape", ["(N,)", "(1, N)", "(M, 1)", "(M, N)", "()"])
def test_bias_of_every_broadcast(row, shape):
    """addmm's bias in each shape that broadcasts to (M, N), a column one and a full one among them
    (each output its own element), on two column tiles of 9 to 16 rows: the epilogue loads a thread's
    biases before its stores, each at its own output's row and column."""
    M, K, N = 13, 520, 200
    x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
    b = _native_b(row, K, N, torch.bfloat16)
    size = {"(N,)": (N,), "(1, N)": (1, N), "(M, 1)": (M, 1), "(M, N)": (M, N), "()": ()}[shape]
    bias = 10 * torch.randn(size, device="cuda", dtype=torch.bfloat16)
    poison = Poisoned(M * N, torch.bfloat16, "cuda")
    out = tilelab_torch.tiled_addmm(bias, x, b, variant=row)
    assert poison.reused(out)
    ref = torch.addmm(bias.double(), x.double(), b.double())
    scale = (x.double().abs() @ b.double().abs()).max() + bias.double().abs().max()
    assert float((out.double() - ref).abs().max() / scale) <= TOL[torch.bfloat16], shape


def test_decode_picks_it():
    x, w = _linear_operands(4, 4096, 4096, torch.bfloat16)
    e = tilelab_torch.explain(x, w.t())
    assert e.kernel in ROWS and "swap-AB" in e.reason, e
    assert torch.equal(tilelab_torch.tiled_mm(x, w.t()), tilelab_torch.tiled_mm(x, w.t(), variant=e.kernel))
