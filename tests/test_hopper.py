"""The hopper family (wgmma + TMA, sm_90a): K tails and odd K, M/N edges of every
box, both layouts, misaligned views (copied to aligned rows), batches with a
broadcast operand, the bias epilogue, the TF32 rows (only by consent; operands
that are not K-major copied transposed), and the dispatcher's use of it on sm_90."""
import pytest
import torch

import tilelab_torch
from conftest import (ACT_REFS, HALF, LAYOUTS, TOL, TOL_TF32, Poisoned, check_misaligned_views, check_odd_shape,
                      fresh_seed, kernel_runs_here, rel_err)

pytestmark = pytest.mark.gpu

# The table's hopper rows (kernels() is the one source; a new row is tested without an edit here).
ROWS = [k for k in tilelab_torch.kernels("cuda") if k.family == "hopper"]
ROW_NAMES = [k.name for k in ROWS if not k.tf32]
TF32_NAMES = [k.name for k in ROWS if k.tf32]
# K = 1, 7 (tail inside one 64-wide k-tile), 64, 1000 (the 4- and 6-stage rings wrap several
# times), 4095/4097 (odd rows: copied to an aligned buffer first); M and N ragged against
# the 64-wide boxes and the 128/256-wide tiles; one multiple of every tile.
SHAPES = [(1, 1, 1), (5, 3, 7), (70, 33, 1), (129, 257, 64), (200, 300, 1000), (64, 65, 4095),
          (65, 127, 4097), (300, 520, 200), (256, 512, 512)]


@pytest.fixture(autouse=True)
def _need_hopper():
    if not ROWS:
        pytest.skip("the table has no hopper rows")
    why = kernel_runs_here(ROWS[0])
    if why:
        pytest.skip(why)


@pytest.mark.parametrize("la,lb", LAYOUTS, ids=lambda x: x)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "fp16"])
@pytest.mark.parametrize("config", ROW_NAMES)
def test_odd_shapes(config, dtype, shape, la, lb):
    check_odd_shape(config, dtype, shape, la, lb, TOL[dtype])


@pytest.mark.parametrize("la,lb", LAYOUTS, ids=lambda x: x)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("config", TF32_NAMES)
def test_tf32_odd_shapes(high, config, shape, la, lb):
    err = check_odd_shape(config, torch.float32, shape, la, lb, TOL_TF32)
    if shape[2] >= 64:
        assert err > 1e-6, f"{config} {shape}: error {err:.3g} is below TF32's level: not on TF32 tensor cores?"


def test_tf32_refused_at_default_precision():
    a = torch.randn(64, 64, device="cuda")
    assert torch.get_float32_matmul_precision() == "highest"
    with pytest.raises(RuntimeError, match=r'set_float32_matmul_precision\("high"\)'):
        tilelab_torch.tiled_mm(a, a, variant="hopper_tf32")


def test_auto_uses_hopper_tf32_under_high(high):
    a = torch.randn(2048, 1000, device="cuda")
    b = torch.randn(1000, 2048, device="cuda")
    assert tilelab_torch.explain(a, b).kernel.startswith("hopper_tf32_")
    err = rel_err(torch.ops.tilelab.tiled_mm(a, b), a, b)
    assert 1e-6 < err <= TOL_TF32, err


@pytest.mark.parametrize("config", ROW_NAMES + TF32_NAMES)
def test_misaligned_views(high, config):
    """Rows that start one element off 16-byte alignment and padded leading dimensions of every residue."""
    dtype = torch.float32 if config in TF32_NAMES else torch.bfloat16
    tol = TOL_TF32 if dtype == torch.float32 else TOL[dtype]
    check_misaligned_views(config, dtype, tol, offsets=(0, 1, 3, 7), lds=(300, 301, 304))


@pytest.mark.parametrize("config,dtype", [(c, d) for c in ROW_NAMES for d in HALF] +
                         [(c, torch.float32) for c in TF32_NAMES])
def test_bmm_broadcast_and_bias(high, config, dtype):
    """Batched operands (3-D tensor maps), a stride-0 batch, an odd batch stride, and addmm's bias."""
    seed = fresh_seed()
    tol = TOL_TF32 if dtype == torch.float32 else TOL[dtype]
    a = torch.randn(3, 130, 200, device="cuda", dtype=dtype)
    b = torch.randn(3, 200, 300, device="cuda", dtype=dtype)
    cases = {
        "dense": (a, b),
        "broadcast B": (a, torch.randn(200, 300, device="cuda", dtype=dtype).expand(3, 200, 300)),
        "broadcast A": (torch.randn(130, 200, device="cuda", dtype=dtype).expand(3, 130, 200), b),
        "column-major": (a.transpose(1, 2).contiguous().transpose(1, 2), b.transpose(1, 2).contiguous().transpose(1, 2)),
        # batch stride 130*201+1 elements: not a multiple of 16 bytes, copied first
        "odd batch stride": (torch.randn(3 * (130 * 201 + 1), device="cuda", dtype=dtype)
                             .as_strided((3, 130, 200), (130 * 201 + 1, 201, 1)), b),
    }
    for name, (x, y) in cases.items():
        out = torch.ops.tilelab.tiled_bmm(x, y, variant=config)
        ref = x.double() @ y.double()
        err = float((out.double() - ref).norm() / (x.double().abs() @ y.double().abs()).norm())
        assert err <= tol, f"{config} {name}: {err:.3g}, seed={seed}"
    bias = torch.randn(300, device="cuda", dtype=dtype)
    out = torch.ops.tilelab.tiled_addmm(bias, a[0], b[0], variant=config)
    ref = torch.addmm(bias.double(), a[0].double(), b[0].double())
    err = float((out.double() - ref).norm() / ref.norm())
    assert err <= tol, f"{config} addmm: {err:.3g}, seed={seed}"


@pytest.mark.parametrize("config", ROW_NAMES + TF32_NAMES)
def test_unaligned_output_rows(high, config):
    """C's rows not 16-byte aligned (N = 1001: half rows alternately on and off 4-byte alignment; 1002, 1004, 33,
    7: aligned to 4 or 8 bytes, one partial box) are written through shared memory a row at a time: each value
    bitwise the one the TMA store writes for the same columns of the product with N padded to a multiple of 8
    (the same tiles in the same k order; one K slice), into a poisoned output, with and without the column bias,
    both layouts of B, and a batch of 3. M = 300: boxes with fewer than 16 rows. A row bias (M, 1) stays on the
    stores from registers: checked against float64."""
    seed = fresh_seed()
    dtype = torch.float32 if config in TF32_NAMES else torch.bfloat16
    tol = TOL_TF32 if dtype == torch.float32 else TOL[dtype]
    M, K = 300, 200
    a = torch.randn(3, M, K, device="cuda", dtype=dtype)
    try:
        torch.ops.tilelab._set_split_k(1)
        for N in (1001, 1002, 1004, 33, 7):
            pad = (N + 7) // 8 * 8
            w = torch.randn(3, pad, K, device="cuda", dtype=dtype)
            w[:, N:] = 0
            bias = torch.randn(pad, device="cuda", dtype=dtype)
            for lb, b_pad in (("k-contiguous", w.transpose(1, 2)), ("n-contiguous", w.transpose(1, 2).contiguous())):
                b = b_pad[..., :N]
                cases = {
                    "mm": (lambda x, y: torch.ops.tilelab.tiled_mm(x, y, variant=config), a[0], b[0], b_pad[0]),
                    "bmm": (lambda x, y: torch.ops.tilelab.tiled_bmm(x, y, variant=config), a, b, b_pad),
                    "addmm": (lambda x, y: torch.ops.tilelab.tiled_addmm(bias[:y.shape[-1]], x, y, variant=config),
                              a[0], b[0], b_pad[0]),
                }
                for what, (op, x, y, y_pad) in cases.items():
                    poison = Poisoned(y.shape[-1] * x[..., 0].numel(), dtype, "cuda")
                    out = op(x, y)
                    assert what != "mm" or poison.reused(out), f"{config} N={N}: the output is not the poisoned block"
                    want = op(x, y_pad)[..., :N]
                    assert torch.equal(out, want), (
                        f"{config} {what} N={N} {lb} B: {int((out != want).sum())} values differ from the "
                        f"TMA-stored product (NaN: {int(out.isnan().sum())}), seed={seed}")
            row_bias = torch.randn(M, 1, device="cuda", dtype=dtype)
            out = torch.ops.tilelab.tiled_addmm(row_bias, a[0], b[0], variant=config)
            ref = torch.addmm(row_bias.double(), a[0].double(), b[0].double())
            err = float((out.double() - ref).norm() / ref.norm())
            assert err <= tol, f"{config} addmm with a row bias, N={N}: {err:.3g}, seed={seed}"
    finally:
        torch.ops.tilelab._set_split_k(None)


@pytest.mark.parametrize("config", ROW_NAMES + TF32_NAMES)
def test_persistent_many_tiles(high, config):
    """More work tiles than SMs: a block walks several tiles (an odd and an even count
    per block, so the ping-pong warpgroups end on either), the ring wraps across tile
    boundaries with a K tail, and batches and split-K slices share the one tile list."""
    seed = fresh_seed()
    dtype = torch.float32 if config in TF32_NAMES else torch.bfloat16
    tol = TOL_TF32 if dtype == torch.float32 else TOL[dtype]
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    # M x N tiles of 128 x 128: (2000 / 128 -> 16) x (2100 / 128 -> 17) = 272 > 2 x 132
    a = torch.randn(2000, 300, device="cuda", dtype=dtype)
    b = torch.randn(300, 2100, device="cuda", dtype=dtype)
    assert 16 * 9 > sms  # also more than one 128 x 256 tile per SM
    out = torch.full((2000, 2100), float("nan"), device="cuda", dtype=dtype)
    out.copy_(torch.ops.tilelab.tiled_mm(a, b, variant=config))
    assert rel_err(out, a, b) <= tol, f"{config} mm: seed={seed}"
    x = torch.randn(40, 300, 200, device="cuda", dtype=dtype)
    y = torch.randn(40, 200, 520, device="cuda", dtype=dtype).transpose(1, 2).contiguous().transpose(1, 2)
    got = torch.ops.tilelab.tiled_bmm(x, y, variant=config)
    ref = x.double() @ y.double()
    err = float((got.double() - ref).norm() / (x.double().abs() @ y.double().abs()).norm())
    assert err <= tol, f"{config} bmm 40 x (300x200x520): {err:.3g}, seed={seed}"
    bias = torch.randn(1000, device="cuda", dtype=dtype)
    p = torch.randn(1000, 1000, device="cuda", dtype=dtype)
    q = torch.randn(1000, 1000, device="cuda", dtype=dtype)
    ref = torch.addmm(bias.double(), p.double(), q.double())
    try:
        for splits in (3, 5):  # 8 x 8 (or 8 x 4) tiles x slices: several work tiles per block
            torch.ops.tilelab._set_split_k(splits)
            got = torch.ops.tilelab.tiled_addmm(bias, p, q, variant=config)
            err = float((got.double() - ref).norm() / ref.norm())
            assert err <= tol, f"{config} addmm, {splits} K slices: {err:.3g}, seed={seed}"
    finally:
        torch.ops.tilelab._set_split_k(None)


def _checked_linear(config, x, w, bias, act, tol, what, before=None):
    """tiled_linear(x, w, bias, activation=act, variant=config) into a poisoned block (every output written),
    against float64, error over |x| @ |W|^T (+ |bias|); `before` runs after the reference is computed, right
    before the product. Returns the output."""
    x64, w64 = x.double(), w.double()
    ref, scale = x64 @ w64.t(), x64.abs() @ w64.abs().t()
    if bias is not None:
        ref, scale = ref + bias.double(), scale + bias.double().abs()
    ref = ACT_REFS[act](ref)
    if before is not None:
        before()
    poison = Poisoned(x.shape[0] * w.shape[0], x.dtype, "cuda")
    got = torch.ops.tilelab.tiled_linear(x, w, bias, activation=act, variant=config)
    assert poison.reused(got), "the output did not reuse the poisoned block"
    err = float((got.double() - ref).norm() / scale.norm())
    assert err <= tol, f"{what}: {err:.3g}"
    return got


def _launched(fn):
    """fn()'s result and the names of the CUDA kernels it launched (torch.profiler)."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        out = fn()
        torch.cuda.synchronize()
    return out, {ev.name for ev in prof.events() if ev.device_type == torch.autograd.DeviceType.CUDA}


@pytest.mark.parametrize("config", ["hopper_m64_64x64x64", "hopper_128x128x64", "hopper_128x160x64"])
@pytest.mark.parametrize("bias_shape", [(256,), (1, 256)])
def test_one_row_bias_in_the_tma_epilogue(config, bias_shape):
    """One row's bias (F.linear's (N,), or (1, N)) is one value a column: a size-1 dimension's stride counts as 0,
    so the TMA-store epilogue adds it and applies the activation, all in the one kernel (expand() keeps (1, N)'s
    own stride, which made it a per-element bias: stored from registers, torch's GELU a pass of its own)."""
    seed = fresh_seed()
    x = torch.randn(1, 512, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(256, 512, device="cuda", dtype=torch.bfloat16)
    bias = torch.randn(bias_shape, device="cuda", dtype=torch.bfloat16)
    e = tilelab_torch.explain(x, w.t(), bias=bias, activation="gelu", variant=config)
    assert e.details["bias"] == "n", e
    got, kernels = _launched(lambda: torch.ops.tilelab.tiled_linear(x, w, bias.view(-1), activation="gelu",
                                                                   variant=config))
    assert kernels and all("hopper_kernel" in k for k in kernels), kernels
    _checked_linear(config, x, w, bias.view(-1), "gelu", TOL[torch.bfloat16], f"{config} one row, seed={seed}")
    ref = torch.nn.functional.gelu(x.double() @ w.double().t() + bias.view(-1).double())
    assert float((got.double() - ref).abs().max() / ref.abs().max()) < 1e-2, f"{config}, seed={seed}"


@pytest.mark.parametrize("config", ROW_NAMES)
def test_conv1d_layout_activation_in_the_epilogue(config):
    """x @ W with W (K, N) row-major, as a swapped transformers Conv1D runs it (tiled_linear(x, W.t(), b,
    activation=...)): the TMA-store epilogue applies the activation on x's k-contiguous rows against a row-major
    B too (a swap-AB row with the operands traded), in the one kernel (every activation's values in every layout:
    test_activation_in_every_layout)."""
    seed = fresh_seed()
    x = torch.randn(130, 136, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(136, 264, device="cuda", dtype=torch.bfloat16)  # Conv1D's (in, out)
    bias = torch.randn(264, device="cuda", dtype=torch.bfloat16)
    try:
        tilelab_torch.explain(x, w, bias=bias, activation="gelu_tanh", variant=config)
    except RuntimeError as e:
        pytest.skip(f"{config} cannot run x @ W here: {str(e).splitlines()[0]}")
    _, kernels = _launched(lambda: torch.ops.tilelab.tiled_linear(x, w.t(), bias, activation="gelu_tanh",
                                                                  variant=config))
    assert kernels and all("hopper_kernel" in k for k in kernels), kernels
    _checked_linear(config, x, w.t(), bias, "gelu_tanh", TOL[torch.bfloat16], f"{config} x @ W + b, seed={seed}")


# (M, K, N): K of 47 k-steps (no slice count below divides it), of 2 (fewer k-steps than the slices asked
# for), of 4097 (odd rows: copied to aligned ones first); whole 192 x 192 tiles.
IN_KERNEL_SHAPES = [(300, 3000, 264), (129, 100, 200), (200, 4097, 136), (384, 2048, 384)]


@pytest.mark.parametrize("how", ["kernel", "pass"])
@pytest.mark.parametrize("splits", [2, 3, 7])
@pytest.mark.parametrize("shape", IN_KERNEL_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("config", ROW_NAMES + TF32_NAMES)
def test_split_k_added_in_the_kernel(high, config, shape, splits, how):
    """Split-K whose slices the kernel adds itself (every slice a block of one wave, C through the TMA
    store), through global memory (forced by _set_split_reduce("kernel") where the cost would pick the
    second pass: slice 0's block waits for the others' sums and adds them in slice order); then bias and
    activation once. Against float64 with a poisoned output,
    with a column bias and an activation, a column-major A (dY^T) and a batch; two calls bitwise equal.
    The second pass ("pass") on the same cases."""
    M, K, N = shape
    seed = fresh_seed()
    dtype = torch.float32 if config in TF32_NAMES else torch.bfloat16
    tol = TOL_TF32 if dtype == torch.float32 else TOL[dtype]
    row = next(k for k in ROWS if k.name == config)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    x = torch.randn(M, K, device="cuda", dtype=dtype)
    w = torch.randn(N, K, device="cuda", dtype=dtype)
    bias = torch.randn(N, device="cuda", dtype=dtype)
    w64 = w.double()
    torch.ops.tilelab._set_split_k(splits)
    torch.ops.tilelab._set_split_reduce(how)
    try:
        e = tilelab_torch.explain(x, w.t(), variant=config)
        s = e.details["split_k"]
        assert s > 1, e
        bm, bn = row.block[:2]  # (swap-AB rows: in C's terms)
        one_wave = -(-M // bm) * -(-N // bn) * s <= sms
        added_here = one_wave and how == "kernel"
        assert ("added in the kernel" if added_here else "reduced by a second pass") in e.reason, e
        # The launch goes by the reason's decision: a second pass is a kernel of its own.
        _, kernels = _launched(lambda: torch.ops.tilelab.tiled_linear(x, w, bias, variant=config))
        passes = [k for k in kernels if "split_reduce_kernel" in k]
        assert bool(passes) != added_here, (e.reason, passes)
        for act in (None, "gelu"):
            got = _checked_linear(config, x, w, bias, act, tol,
                                  f"{config} {shape} {s} slices ({how}), {act}, seed={seed}")
            again = torch.ops.tilelab.tiled_linear(x, w, bias, activation=act, variant=config)
            assert torch.equal(got, again), f"{config} {shape} {s} slices ({how}), {act}: two calls differ"
        # A column-major A (dY^T in a weight gradient) and a batch of 2 sharing B.
        a = torch.randn(2, K, M, device="cuda", dtype=dtype).transpose(1, 2)
        got = torch.ops.tilelab.tiled_bmm(a, w.t().expand(2, K, N), variant=config)
        ref = a.double() @ w64.t()
        err = float((got.double() - ref).norm() / (a.double().abs() @ w64.abs().t()).norm())
        assert err <= tol, f"{config} bmm 2 x {shape} {s} slices ({how}): {err:.3g}, seed={seed}"
    finally:
        torch.ops.tilelab._set_split_k(None)
        torch.ops.tilelab._set_split_reduce(None)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=["bf16", "fp32"])
def test_aligned_copy_is_exact(high, dtype):
    """Operands whose rows are not 16-byte aligned are copied into aligned rows first (aligned_copy.h,
    pad_rows_kernel: 16-byte chunks shifted out of the source's aligned pairs; a row's tail element by element).
    Every start offset within 16 bytes, row lengths around the chunk size and the leading dimensions that
    make each row start elsewhere, a batch and a broadcast batch: A @ I on small integers (exact in bf16 and
    TF32, fp32 sums) returns A bitwise."""
    config = "hopper_128x128x64" if dtype == torch.bfloat16 else "hopper_tf32_128x128x32"
    vec = 16 // torch.empty((), dtype=dtype).element_size()
    for off in range(vec):
        for cont in (1, vec - 1, vec, vec + 1, 2 * vec + 3, 61, 64, 130):
            ld = cont + 1 + cont % 2  # odd: successive rows start at every offset within 16 bytes
            base = torch.randint(-8, 8, (3 * 40 * ld + 64,), device="cuda").to(dtype)
            a = base[off:off + 40 * ld].view(40, ld)[:, :cont]
            eye = torch.eye(cont, device="cuda", dtype=dtype)
            got = tilelab_torch.tiled_mm(a, eye, variant=config)
            assert torch.equal(got, a), f"{dtype} off={off} cont={cont} ld={ld}"
            ab = base[off:off + 3 * 40 * ld].view(3, 40, ld)[:, :, :cont]
            got = torch.ops.tilelab.tiled_bmm(ab, eye.expand(3, cont, cont), variant=config)
            assert torch.equal(got, ab), f"{dtype} batch off={off} cont={cont} ld={ld}"
            # A broadcast batch (stride 0), copied once and kept broadcast.
            got = torch.ops.tilelab.tiled_bmm(a.expand(2, 40, cont), eye.expand(2, cont, cont), variant=config)
            assert torch.equal(got, a.expand(2, 40, cont)), f"{dtype} broadcast off={off} cont={cont} ld={ld}"


@pytest.mark.parametrize("config", ROW_NAMES + TF32_NAMES)
def test_activation_in_every_layout(high, config):
    """tiled_linear with an activation where x or W is a transposed view (A m-contiguous, B n-contiguous). A
    half row's activation kernels are compiled where x's rows are k-contiguous (x @ W.t() and x @ W): where x is
    a transposed view the product goes through its TMA-store kernel without one and the host applies it after;
    TF32 copies its operands
    k-contiguous and applies it in the kernel. C's rows aligned (N = 264: the TMA store), tile edges in M and
    N; against float64 with a poisoned output."""
    seed = fresh_seed()
    dtype = torch.float32 if config in TF32_NAMES else torch.bfloat16
    tol = TOL_TF32 if dtype == torch.float32 else TOL[dtype]
    M, K, N = 300, 136, 264
    for x_t in (False, True):
        for w_t in (False, True):
            x = torch.randn(K, M, device="cuda", dtype=dtype).t() if x_t else torch.randn(M, K, device="cuda",
                                                                                         dtype=dtype)
            w = torch.randn(K, N, device="cuda", dtype=dtype).t() if w_t else torch.randn(N, K, device="cuda",
                                                                                         dtype=dtype)
            bias = torch.randn(N, device="cuda", dtype=dtype)
            for act in ("relu", "gelu", "gelu_tanh", "silu"):
                _checked_linear(config, x, w, bias, act, tol, f"{config} x^T {x_t} W^T {w_t} {act}, seed={seed}")


@pytest.mark.parametrize("config", ROW_NAMES + TF32_NAMES)
def test_fewer_rows_than_a_tile_after_nan_rows(high, config):
    """A product with fewer rows than the tile loads a k-contiguous A in a box of its rows rounded up to 8
    (hopper::a_box_rows): the stage's other rows keep whatever the previous kernel left in shared memory. Run
    right after a full-height product whose A is all NaN (its stages full of NaN rows), the short product's
    rows must still be exact and every one written (a poisoned output) -- bias, activation, split-K slices
    (each of the two reductions) and a batch included. (That no row past M is written is memcheck's part:
    benchmarks/tools/sanitize.py.)"""
    seed = fresh_seed()
    dtype = torch.float32 if config in TF32_NAMES else torch.bfloat16
    tol = TOL_TF32 if dtype == torch.float32 else TOL[dtype]
    K, N = 640, 264
    w = torch.randn(N, K, device="cuda", dtype=dtype)
    bias = torch.randn(N, device="cuda", dtype=dtype)
    nan_x = torch.full((256, K), float("nan"), device="cuda", dtype=dtype)
    w64 = w.double()
    try:
        for M in (1, 7, 9, 24, 63, 100):
            for splits, how in ((None, None), (3, "kernel"), (3, "pass")):
                torch.ops.tilelab._set_split_k(splits)
                torch.ops.tilelab._set_split_reduce(how)
                x = torch.randn(M, K, device="cuda", dtype=dtype)
                _checked_linear(config, x, w, bias, "gelu", tol, f"{config} M={M} splits={splits} {how}, seed={seed}",
                                before=lambda: torch.ops.tilelab.tiled_linear(nan_x, w, bias, variant=config))
                xb = torch.randn(2, M, K, device="cuda", dtype=dtype)
                refb = xb.double() @ w64.t()
                torch.ops.tilelab.tiled_linear(nan_x, w, bias, variant=config)
                poison = Poisoned(2 * M * N, dtype, "cuda")
                got = torch.ops.tilelab.tiled_bmm(xb, w.t().expand(2, K, N), variant=config)
                assert poison.reused(got), "the output did not reuse the poisoned block"
                err = float((got.double() - refb).norm() / (xb.double().abs() @ w64.abs().t()).norm())
                assert err <= tol, f"{config} bmm 2 x M={M} splits={splits} {how}: {err:.3g}, seed={seed}"
    finally:
        torch.ops.tilelab._set_split_k(None)
        torch.ops.tilelab._set_split_reduce(None)


@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "fp16"])
def test_auto_uses_hopper_for_large_half(dtype):
    """On sm_90 the dispatcher sends large half-precision products to wgmma, aligned or not."""
    for M, N, K in [(4096, 4096, 4096), (4095, 4095, 4095), (2048, 2048, 2048)]:
        a = torch.randn(M, K, device="cuda", dtype=dtype)
        b = torch.randn(K, N, device="cuda", dtype=dtype)
        e = tilelab_torch.explain(a, b)
        assert e.kernel.startswith("hopper_"), e
        assert rel_err(torch.ops.tilelab.tiled_mm(a, b), a, b) <= TOL[dtype]


@pytest.mark.parametrize("dtype", HALF, ids=["bf16", "fp16"])
def test_auto_picks_pingpong_for_projection_k(dtype):
    """The dispatcher's ping-pong rule: K of 8..48 steps of 64 with a wave of 128x128 tiles
    and an N that 128x256 tiles do not fit, and not for K = 4096 or for attention's K = 64;
    the 128x192 rule where its last wave is fuller. (4096 x 768 into 3072 columns, 4 waves of 128x128
    tiles, is the several-waves rule's ping-pong: test_dispatch.py.)"""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    def pick(M, K, N, B=None):
        a = torch.empty(*((B,) if B else ()), M, K, device="cuda", dtype=dtype)
        b = torch.empty(*((B,) if B else ()), K, N, device="cuda", dtype=dtype)
        return tilelab_torch.explain(a, b)
    e = pick(20000, 1024, 128)
    assert 157 >= sms and e.kernel == "hopper_pingpong_128x128x64", e
    assert "ping-pong" in e.reason, e
    assert pick(4096, 768, 2048).kernel == "hopper_128x256x64"  # where 128x256 fits N
    if 128 <= sms < 192:  # 4096 x 768: one round of 128x192 tiles against two of 128x128
        assert pick(4096, 3072, 768).kernel == "hopper_128x192x64"
    assert pick(4096, 4096, 4096).kernel == "hopper_128x256x64"
    assert pick(512, 64, 512, B=96).kernel == "hopper_128x256x64"
    assert pick(4096, 3072 + 64, 3072).kernel == "hopper_128x256x64"  # 49 steps


def test_refused_for_fp32():
    a = torch.randn(64, 64, device="cuda")
    with pytest.raises(RuntimeError, match="does not support torch.float32"):
        tilelab_torch.tiled_mm(a, a, variant="hopper")
