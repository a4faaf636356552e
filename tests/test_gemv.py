"""The gemv family (a warp per output column): what the table-wide tests do not reach -- a batch of
products with fewer columns than a block's warps (the launcher's flat grid of (matrix, column)
pairs, gemv.cuh), a single row or column read with 16-byte loads whatever layout its strides name,
and the any-stride path on misaligned bases."""
import pytest
import torch

import tilelab_torch
from conftest import TOL, Poisoned, fresh_seed, rel_err

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
pytestmark = pytest.mark.gpu


def _check(out, a, b, dtype, what):
    assert not torch.isnan(out).any(), f"unwritten output: {what}"
    err = rel_err(out, a, b)
    assert err <= TOL[dtype], f"{what}: {err:.3g}"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("batch", [2, 9, 1025])
@pytest.mark.parametrize("N", [1, 2, 7, 8, 9])
@pytest.mark.parametrize("K", [1, 5, 128, 300])
@pytest.mark.parametrize("b_layout", ["row", "col"])
def test_batched_few_columns(dtype, batch, N, K, b_layout):
    """bmm of M = 1 (and 3) rows against N <= 9 columns: every (matrix, column) pair once, with B
    row-major (K, N) or column-major (a transposed (N, K))."""
    seed = fresh_seed()
    for M in (1, 3):
        a = torch.randn(batch, M, K, device="cuda", dtype=dtype)
        if b_layout == "row":
            b = torch.randn(batch, K, N, device="cuda", dtype=dtype)
        else:
            b = torch.randn(batch, N, K, device="cuda", dtype=dtype).transpose(1, 2)
        poison = Poisoned(batch * M * N, dtype, "cuda")
        out = torch.ops.tilelab.tiled_bmm(a, b, variant="gemv_16x8")
        assert poison.reused(out)
        _check(out, a, b, dtype, f"{batch}x({M}x{K}x{N}) B {b_layout}, seed={seed}")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("offset", [0, 1, 4])
def test_batched_dot_products_misaligned_and_broadcast(dtype, offset):
    """Dot products whose bases are `offset` elements into their storage (16-byte loads only where
    aligned), and a broadcast (stride-0) batch of one column."""
    seed = fresh_seed()
    batch, K = 300, 129
    a = torch.randn(batch * K + offset, device="cuda", dtype=dtype)[offset:].view(batch, 1, K)
    b = torch.randn(batch * K + offset, device="cuda", dtype=dtype)[offset:].view(batch, K, 1)
    _check(torch.ops.tilelab.tiled_bmm(a, b, variant="gemv_16x8"), a, b, dtype, f"offset {offset}, seed={seed}")
    w = torch.randn(1, K, 1, device="cuda", dtype=dtype).expand(batch, K, 1)
    _check(torch.ops.tilelab.tiled_bmm(a, w, variant="gemv_16x8"), a, w, dtype, f"broadcast, seed={seed}")


def test_dot_products_auto(highest):
    """1024 fp32 dot products of 128 (the skinny suite's bmm) on the dispatcher's pick, against float64."""
    a = torch.randn(1024, 1, 128, device="cuda")
    b = torch.randn(1024, 128, 1, device="cuda")
    _check(torch.ops.tilelab.tiled_bmm(a, b), a, b, torch.float32, tilelab_torch.explain(a, b).kernel)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("M", [1, 3, 16])
@pytest.mark.parametrize("K,N", [(4096, 1024), (1024, 4096), (1023, 4096), (4099, 64)])
def test_x_sliced_along_k(dtype, M, K, N):
    """x @ W.t() with x's rows starting one element past 16-byte boundaries (a view sliced along K), W
    aligned: against a large W (K >= 1024, N * K >= 2^22) x is copied into aligned rows first, else read in
    place one element a load (every row's load made, rows past M repeating the last); W with K not a
    multiple of 8 (rows not aligned either) stays in place. A batch of two, the second x sliced too."""
    seed = fresh_seed()
    x = torch.randn(2, M, K + 1, device="cuda", dtype=dtype)[..., 1:]
    w = torch.randn(N, K, device="cuda", dtype=dtype)
    out = tilelab_torch.tiled_mm(x[0], w.t(), variant="gemv_16x8")
    _check(out, x[0], w.t(), dtype, f"{M}x{K}x{N}, seed={seed}")
    out = torch.ops.tilelab.tiled_bmm(x, w.t().expand(2, -1, -1), variant="gemv_16x8")
    _check(out, x, w.t(), dtype, f"batch of 2, {M}x{K}x{N}, seed={seed}")
    out = tilelab_torch.tiled_mm(x[1], w.t())  # the dispatcher's pick (fp32: gemv_split copies x too)
    _check(out, x[1], w.t(), dtype, f"{tilelab_torch.explain(x[1], w.t()).kernel} {M}x{K}x{N}, seed={seed}")
