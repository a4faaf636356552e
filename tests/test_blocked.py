"""The blocked (fp32 register-tiled, cp.async) kernels on operands that defeat
their 16-byte fast path: storage offsets that break 16-byte alignment, leading
dimensions that are not multiples of 4, both layouts, ragged edges in M, N, K.
The generic suite (test_correctness.py) covers the table rows on aligned data."""
import pytest
import torch

import tilelab_torch
from conftest import LAYOUTS, TOL, Poisoned, check_odd_shape, cuda_kernels, fresh_seed, rel_err

BLOCKED = [k.name for k in cuda_kernels(torch.float32) if k.family == "blocked"]
BLOCK = {k.name: k.block for k in cuda_kernels(torch.float32) if k.family == "blocked"}


def _operand(rows, cols, layout, offset, lead_pad):
    """A (rows, cols) fp32 view, `offset` elements into its storage, leading
    dimension padded by `lead_pad` elements, row- or column-major."""
    if layout == "row":
        base = torch.randn(rows * (cols + lead_pad) + offset, device="cuda")
        return base[offset:].view(rows, cols + lead_pad)[:, :cols]
    base = torch.randn(cols * (rows + lead_pad) + offset, device="cuda")
    return base[offset:].view(cols, rows + lead_pad)[:, :rows].t()


def test_table_has_blocked_configs():
    names = [k.name for k in tilelab_torch.kernels("cuda")]
    assert any(n.startswith("blocked_") for n in names)


@pytest.mark.gpu
@pytest.mark.parametrize("config", BLOCKED)
@pytest.mark.parametrize("la", ["row", "col"])
@pytest.mark.parametrize("lb", ["row", "col"])
@pytest.mark.parametrize("offset,lead_pad", [(0, 0), (1, 0), (0, 1), (3, 2), (4, 4)])
@pytest.mark.parametrize("M,N,K", [(129, 67, 33), (64, 128, 16), (1, 5, 3), (200, 131, 257)])
def test_blocked_misaligned(config, la, lb, offset, lead_pad, M, N, K):
    seed = fresh_seed()
    a = _operand(M, K, la, offset, lead_pad)
    b = _operand(K, N, lb, (offset * 3) % 5, lead_pad)
    out = tilelab_torch.tiled_mm(a, b, variant=config)
    err = rel_err(out, a, b)
    assert err <= TOL[torch.float32], f"{config} {la}/{lb} off={offset} pad={lead_pad}: {err:.3g}, seed={seed}"


@pytest.mark.gpu
@pytest.mark.parametrize("config", BLOCKED)
@pytest.mark.parametrize("la,lb", LAYOUTS)
@pytest.mark.parametrize("shape", ["tiles", "ragged"])
def test_blocked_interior_path(config, la, lb, shape):
    """Shapes sized from the row's own block tile, so the main loop's two paths
    both run in one product: interior blocks copy whole tiles unpredicated
    (TileCopy::copy_in) until the last stages' worth of K; edge blocks, the K
    tail and the tiles past the end take the predicated path. "tiles": whole
    2 x 2 block tiles, K a multiple of BK; "ragged": one row/column/k more than
    that plus odd remainders."""
    bm, bn, bk = BLOCK[config]
    dims = (2 * bm, 2 * bn, 8 * bk) if shape == "tiles" else (2 * bm + 3, 2 * bn + 5, 9 * bk + 3)
    check_odd_shape(config, torch.float32, dims, la, lb, TOL[torch.float32])


@pytest.mark.gpu
@pytest.mark.parametrize("config", BLOCKED)
def test_blocked_slices(config):
    """x[1:, 1:] views: the storage offset is one row plus one element."""
    seed = fresh_seed()
    for M, N, K in [(300, 200, 100), (128, 128, 128), (65, 257, 1000)]:
        a = torch.randn(M + 1, K + 1, device="cuda")[1:, 1:]
        b = torch.randn(K + 1, N + 1, device="cuda")[1:, 1:]
        out = tilelab_torch.tiled_mm(a, b, variant=config)
        assert rel_err(out, a, b) <= TOL[torch.float32], f"{config} {M}x{N}x{K} seed={seed}"
        out = tilelab_torch.tiled_mm(b.t(), a.t(), variant=config)
        assert rel_err(out, b.t(), a.t()) <= TOL[torch.float32], f"{config} transposed seed={seed}"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_blocked_rejects_other_dtypes(dtype):
    a = torch.randn(8, 8, device="cuda", dtype=dtype)
    with pytest.raises(RuntimeError, match="does not support"):
        tilelab_torch.tiled_mm(a, a, variant=BLOCKED[0])


@pytest.mark.gpu
@pytest.mark.parametrize("config", BLOCKED)
@pytest.mark.parametrize("splits", [1, 3])
def test_blocked_scalar_store_epilogue(config, splits):
    """Outputs whose rows are not 16-byte aligned (N % 4 != 0) and split-K slabs take the epilogue's
    scalar stores: every column residue, rows and columns past a tile's edge, a column bias (addmm) and a
    row bias, a batch, into NaN-poisoned outputs, bitwise the same on a second call."""
    seed = fresh_seed()
    bm, bn, _ = BLOCK[config]
    torch.ops.tilelab._set_split_k(splits)
    try:
        for M, N, K in [(bm + 3, bn + 1, 67), (2 * bm - 1, 2 * bn + 2, 131), (5, 3 * bn + 3, 40), (bm, 7, 9)]:
            a = torch.randn(M, K, device="cuda")
            b = torch.randn(N, K, device="cuda").t()  # F.linear's layout
            for bias in (None, torch.randn(N, device="cuda"), torch.randn(M, 1, device="cuda")):
                ref = a.double() @ b.double() + (0 if bias is None else bias.double())
                def run():
                    if bias is None:
                        return tilelab_torch.tiled_mm(a, b, variant=config)
                    return tilelab_torch.tiled_addmm(bias, a, b, variant=config)

                poison = Poisoned(M * N, torch.float32, "cuda")
                out, again = run(), run()
                what = f"{config} {M}x{K}x{N} splits={splits} bias={None if bias is None else tuple(bias.shape)}"
                assert poison.reused(out), what
                assert not torch.isnan(out).any(), f"{what}: unwritten output, seed={seed}"
                scale = (a.double().abs() @ b.double().abs()).norm() + (0 if bias is None else bias.double().norm())
                err = float((out.double() - ref).norm() / scale)
                assert err <= TOL[torch.float32], f"{what}: {err:.3g}, seed={seed}"
                assert torch.equal(out, again), f"{what}: two calls differ, seed={seed}"
        # A batch whose matrices start at another misalignment each (N * M % 4 != 0).
        a = torch.randn(3, bm + 1, 37, device="cuda")
        b = torch.randn(3, 37, bn + 3, device="cuda")
        poison = Poisoned(a.shape[0] * a.shape[1] * b.shape[2], torch.float32, "cuda")
        out = tilelab_torch.tiled_bmm(a, b, variant=config)
        assert poison.reused(out) and not torch.isnan(out).any(), f"{config} bmm: unwritten output, seed={seed}"
        err = rel_err(out, a, b)
        assert err <= TOL[torch.float32], f"{config} bmm splits={splits}: {err:.3g}, seed={seed}"
    finally:
        torch.ops.tilelab._set_split_k(None)


@pytest.mark.gpu
@pytest.mark.parametrize("config", BLOCKED)
def test_blocked_aligned_copy_path(config):
    """Above the launcher's size threshold (M*N*K*batch >= 2^29), an operand that
    is unit-stride along m (A) / n (B) but not 16-byte aligned is first copied
    into an aligned buffer (launch_blocked.cu): row-major B with odd N, a
    column-major A with odd M, x[1:, 1:] views, and a broadcast (stride-0) batch
    of B in tiled_bmm. The output buffer is poisoned with NaN."""
    seed = fresh_seed()
    cases = [
        (torch.randn(1024, 1024, device="cuda"), torch.randn(1024, 1023, device="cuda")),  # B: N = 1023
        (torch.randn(1024, 1023, device="cuda").t(), torch.randn(1024, 1024, device="cuda")),  # A col-major, M = 1023
        (torch.randn(1025, 1025, device="cuda")[1:, 1:], torch.randn(1025, 1025, device="cuda")[1:, 1:]),
        (torch.randn(1025, 1023, device="cuda")[1:, :].t(), torch.randn(1024, 1025, device="cuda")[:, 1:]),
    ]
    for a, b in cases:
        assert a.shape[0] * a.shape[1] * b.shape[1] >= 2**29
        poison = Poisoned(a.shape[0] * b.shape[1], torch.float32, "cuda")
        out = tilelab_torch.tiled_mm(a, b, variant=config)
        assert poison.reused(out)
        err = rel_err(out, a, b)
        assert err <= TOL[torch.float32], f"{config} {tuple(a.shape)} @ {tuple(b.shape)}: {err:.3g}, seed={seed}"
    a = torch.randn(2, 1024, 512, device="cuda")
    b = torch.randn(512, 1023, device="cuda").expand(2, 512, 1023)
    out = tilelab_torch.tiled_bmm(a, b, variant=config)
    ref = a.double() @ b.double()
    scale = (a.double().abs() @ b.double().abs()).norm()
    assert float((out.double() - ref).norm() / scale) <= TOL[torch.float32], f"{config} bmm seed={seed}"


@pytest.mark.gpu
def test_auto_fp32_uses_blocked_by_estimated_time(highest):
    """At full fp32 precision the dispatcher picks among the blocked rows by its
    estimate (chooser.cpp: each row at its best split count and measured rate) and says so; a
    skinny product (above gemv_split_rowb's 8 rows) goes to 64x128 tiles with K split over the SMs
    on any GPU with at least 64 SMs (the same padded work as 64x64 tiles in twice the slices, at a
    higher rate)."""
    for M, N, K in [(4096, 4096, 4096), (1000, 1000, 1000), (16, 4096, 4096), (3072, 3072, 64)]:
        a = torch.randn(M, K, device="cuda")
        b = torch.randn(K, N, device="cuda")
        e = tilelab_torch.explain(a, b)
        assert e.kernel in BLOCKED and "estimated time" in e.reason, e
        assert rel_err(torch.ops.tilelab.tiled_mm(a, b), a, b) <= TOL[torch.float32]
    if torch.cuda.get_device_properties(0).multi_processor_count >= 64:
        x = torch.randn(16, 4096, device="cuda")
        e = tilelab_torch.explain(x, torch.randn(4096, 4096, device="cuda"))
        assert e.kernel == "blocked_64x128x8" and e.details["split_k"] > 1, e
    x8, b = torch.randn(8, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda")
    assert tilelab_torch.explain(x8, b).kernel == "gemv_split_rowb_16x1024x64"


@pytest.mark.gpu
def test_auto_fp32_decode_uses_gemv(highest):
    """fp32 x @ W.t() with M <= 24 goes to the gemv rows (chooser.cpp: one row to gemv, more to
    gemv_split where its blocks fill the SMs, else gemv up to 8 rows, 16 where K <= 1024), 25 to 48 rows
    over K and N >= 4096 to the 32-row blocked tiles; half precision to gemv_mma."""
    w = torch.randn(4096, 4096, device="cuda")
    for M in (1, 7, 16, 24, 32):
        x = torch.randn(M, 4096, device="cuda")
        e = tilelab_torch.explain(x, w.t())
        assert e.kernel == ("gemv_16x8" if M == 1 else "blocked_m32_32x128x16" if M == 32
                            else "gemv_split_16x128x256"), e
        out = torch.ops.tilelab.tiled_mm(x, w.t())
        assert rel_err(out, x, w.t()) <= TOL[torch.float32]
    assert not tilelab_torch.explain(torch.randn(33, 4096, device="cuda"), w.t()).kernel.startswith("gemv")
    w = torch.randn(333, 1000, device="cuda")  # 3 column tiles: too few gemv_split blocks
    for M, kernel in ((7, "gemv_16x8"), (16, "gemv_16x8"), (32, "blocked_")):
        x = torch.randn(M, 1000, device="cuda")
        assert tilelab_torch.explain(x, w.t()).kernel.startswith(kernel), M
        assert rel_err(torch.ops.tilelab.tiled_mm(x, w.t()), x, w.t()) <= TOL[torch.float32]
    xh, wh = torch.randn(4, 1000, device="cuda", dtype=torch.bfloat16), torch.randn(333, 1000, device="cuda", dtype=torch.bfloat16)
    assert tilelab_torch.explain(xh, wh.t()).kernel.startswith("gemv_mma_")
    assert tilelab_torch.explain(xh[:1], wh.t()).kernel.startswith("gemv_mma_")
