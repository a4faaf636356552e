"""Property-based fuzzing (hypothesis) of tiled_mm, tiled_addmm, tiled_bmm and
tiled_linear: the safety net for refactors of the dispatcher, the launchers and the kernels.

Each example draws a shape (tile edges such as 1, 15, 17, 127, 129, 257 half the time),
a layout per operand (row-major, column-major, padded leading dimension, storage offset
of one element; for bmm also a stride-0 or a strided batch), a bias for addmm (every
shape torch.addmm broadcasts, and strided, column-major, offset and expanded views), a
variant (CPU: None/"auto"/"cpu"; CUDA: None and every row of the config table that runs
on this GPU for the dtype), on CUDA a split-K count (the estimate, or forced to 2, 3, 5 or
17 slices through torch.ops.tilelab._set_split_k: counts that do not divide K, and K
shorter than the split), for tiled_linear the leading dims of x, the bias and the
activation, and the data's seed. It checks the output's shape, dtype and
contiguity, that it holds no NaN (it lands in a NaN-poisoned block, asserted on CUDA),
its error against float64, normwise as conftest.rel_err and per element (both relative
to |A||B| + |bias|, at conftest's tolerances), and that a second call is bitwise equal.

Profiles, chosen by TILELAB_FUZZ_PROFILE unless --hypothesis-profile names one (that
profile must be registered before this file is imported, e.g. in a conftest):
  ci (default)  60 examples per test; M, N <= 300, K now and then up to 4100; ~10 s on 2 cores.
  gpu           400 examples per test; on CUDA also M, N of 1000..1100 now and then:
                TILELAB_FUZZ_PROFILE=gpu python3 -m pytest tests/test_fuzz.py
A failure prints the case (op, dtype, device, shape, layouts, variant, seed) and a
@reproduce_failure blob. Under a CI environment hypothesis derandomizes (fixed examples).
"""
import contextlib
import math
import os

import pytest
import torch
from hypothesis import HealthCheck, given, note, settings, strategies as st

import tilelab_torch
from conftest import ACT_REFS, DTYPE_ID, TOL, Poisoned, kernel_runs_here, kernel_tol, precision_for, rel_err

PROFILE = os.environ.get("TILELAB_FUZZ_PROFILE", "ci")
# Built on the current settings, so --hypothesis-verbosity/--hypothesis-seed etc. still apply.
_COMMON = dict(parent=settings.default, deadline=None, database=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("tilelab-ci", max_examples=60, **_COMMON)
settings.register_profile("tilelab-gpu", max_examples=400, **_COMMON)
# "default" or hypothesis' own "ci" (loaded under a CI environment), possibly with the pytest
# plugin's "-with-<option>" suffix: no profile was named, so take ours.
if settings.get_current_profile_name().split("-with-")[0] in ("default", "ci"):
    settings.load_profile(f"tilelab-{PROFILE}")

NASTY = [1, 2, 3, 7, 8, 15, 16, 17, 31, 33, 63, 64, 65, 127, 128, 129, 255, 257]
BIG_MN = 1100 if PROFILE == "gpu" else 0  # M, N of 1000..BIG_MN: GPU profile only
BIG_K = 4100  # M, N <= 300 on CPU, so a long K stays cheap there
DTYPES = list(TOL)
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
LAYOUTS = ["row", "col", "row_ld", "col_ld", "row_off", "col_off"]
BATCH_MODES = ["dense", "stride0", "step"]  # batch stride M*K, 0 (expand), 2*M*K ([::2])
BIASES = {  # name -> bias for an (M, N) output, from rand(*shape)
    "()": lambda r, M, N: r(), "(1,)": lambda r, M, N: r(1), "(N,)": lambda r, M, N: r(N),
    "(1,N)": lambda r, M, N: r(1, N), "(M,1)": lambda r, M, N: r(M, 1), "(M,N)": lambda r, M, N: r(M, N),
    "(1,1)": lambda r, M, N: r(1, 1),
    "(N,)step2": lambda r, M, N: r(2 * N)[::2],
    "(M,N)col": lambda r, M, N: r(N, M).t(),
    "(M,N)off1": lambda r, M, N: r(M * N + 1)[1:].view(M, N),
    "(M,1)ld": lambda r, M, N: r(M, 3)[:, 1:2],
    "(N,)->(M,N)": lambda r, M, N: r(N).expand(M, N),
    "(M,1)->(M,N)": lambda r, M, N: r(M, 1).expand(M, N),
    "()->(M,N)": lambda r, M, N: r().expand(M, N),
}


@st.composite
def dim(draw, big):
    """A size: a tile edge (NASTY) half the time, else 1..300, or 1000..big (about 1 in 10).
    Each branch is two choices, the NASTY one first, so a failure shrinks towards size 1."""
    branch = draw(st.integers(0, 15))
    if branch < 8:
        return NASTY[draw(st.integers(0, len(NASTY) - 1))]
    if branch < 15 or not big:
        return draw(st.integers(1, 300))
    return draw(st.integers(1000, big))


def operand(rows, cols, layout, rand, batch=()):
    """A random (*batch, rows, cols) tensor with each matrix in the given layout:
    row/col-major (col: a transposed view), _ld: a slice of a 3-element wider
    tensor (padded leading dimension), _off: storage offset of one element."""
    col = layout.startswith("col")
    r, c = (cols, rows) if col else (rows, cols)
    if layout.endswith("_ld"):
        x = rand(*batch, r, c + 3)[..., :c]
    elif layout.endswith("_off"):
        x = rand(math.prod(batch) * r * c + 1)[1:].view(*batch, r, c)
    else:
        x = rand(*batch, r, c)
    return x.transpose(-1, -2) if col else x


def batched(B, rows, cols, layout, mode, rand):
    if mode == "stride0":
        return operand(rows, cols, layout, rand).expand(B, rows, cols)
    if mode == "step":
        return operand(rows, cols, layout, rand, batch=(2 * B,))[::2]
    return operand(rows, cols, layout, rand, batch=(B,))


def errors(out, ref, scale):
    """rel_err's measure for any reference, scale = |A||B| (+ |bias|): ||out - ref|| / ||scale||
    per matrix (the worst of a batch); then the same per element, max |out - ref| / scale, and
    where. The bound |fl(AB) - AB| <= g_K |A||B| holds per element, and a normwise measure
    misses a few wrong elements of a large output: one zero in place of a ~17 of a 300^3
    product is 3e-4 of || |A||B| || (under the half tolerance) but 0.09 of its own |A||B|."""
    diff = (out.double() - ref).abs()
    if diff.dim() == 1:  # tiled_linear of a 1-D x: one row
        diff, scale = diff[None], scale[None]
    num, den = diff.flatten(-2).norm(dim=-1), scale.flatten(-2).norm(dim=-1)
    normwise = float(torch.where(den > 0, num / den, num).max())
    # Below the dtype's smallest normal number its spacing is absolute (fp16: a K=1 product of 1e-6).
    elem = diff / scale.clamp_min(torch.finfo(out.dtype).tiny)
    worst = elem.argmax()
    return normwise, float(elem.flatten()[worst]), tuple(int(i) for i in torch.unravel_index(worst, elem.shape))


def variants(device, dtype):
    if device == "cpu":
        return [None, "auto", "cpu"]
    rows = [k.name for k in tilelab_torch.kernels("cuda") if dtype in k.dtypes and not kernel_runs_here(k)]
    return [None] + rows


@contextlib.contextmanager
def precision(kernel):
    """IEEE fp32 ("highest"), except under a TF32 row (precision_for sets "high")."""
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    try:
        with precision_for(kernel) if kernel is not None else contextlib.nullcontext():
            yield
    finally:
        torch.set_float32_matmul_precision(old)


SPLITS = [None, None, None, 2, 3, 5, 17]  # None: the chooser's estimate


@contextlib.contextmanager
def split_k(splits):
    """Force the split-K count on CUDA (None: the estimate), restored afterwards."""
    if splits is None:
        yield
        return
    torch.ops.tilelab._set_split_k(splits)
    try:
        yield
    finally:
        torch.ops.tilelab._set_split_k(None)


def draw_case(data, device, dtype):
    """The variant, M, N, K, the layouts of A and B and a seeded `rand(*shape)` (the seed is
    drawn, so hypothesis replays the data too)."""
    variant = data.draw(st.sampled_from(variants(device, dtype)), label="variant")
    if device == "cuda":
        variant = (variant, data.draw(st.sampled_from(SPLITS), label="split-K"))
    big_mn = BIG_MN if device == "cuda" else 0
    mnk = data.draw(st.tuples(dim(big_mn), dim(big_mn), dim(BIG_K)), label="M, N, K")
    lay = data.draw(st.tuples(st.sampled_from(LAYOUTS), st.sampled_from(LAYOUTS)), label="layouts of A, B")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    gen = torch.Generator(device=device).manual_seed(seed)
    return variant, mnk, lay, seed, lambda *shape: torch.randn(shape, generator=gen, dtype=dtype, device=device)


def run_and_check(op, args, ref, scale, device, dtype, variant, what, norm_err=None, **kw):
    """Run op twice, the first time into a NaN-poisoned block; check the output's shape,
    dtype, layout, NaNs, error against float64 and bitwise determinism. On CUDA `variant`
    is (variant, split-K count)."""
    variant, splits = variant if isinstance(variant, tuple) else (variant, None)
    kernel = next((k for k in tilelab_torch.kernels("cuda") if k.name == variant), None)
    tol = kernel_tol(kernel, dtype) if kernel is not None else TOL[dtype]
    what = f"{op} {DTYPE_ID[dtype]} {device} {what} variant={variant} split_k={splits}"
    note(what)
    fn = getattr(torch.ops.tilelab, op)
    with precision(kernel), split_k(splits):
        poison = Poisoned(ref.numel(), dtype, device)
        out = fn(*args, variant=variant, **kw)
        again = fn(*args, variant=variant, **kw)
    # CUDA's caching allocator gives the freed block to the next allocation of its size: the
    # output, which every op allocates before it copies an operand (csrc/gemm.h, make_gemm).
    # On CPU (malloc) reuse is luck (about half the cases), so unasserted; an unwritten
    # element there is caught by the error check.
    if device == "cuda":
        assert poison.reused(out), f"{what}: the output did not reuse the poisoned block"
    assert out.shape == ref.shape and out.dtype == dtype, f"{what}: got {tuple(out.shape)} {out.dtype}"
    assert out.is_contiguous(), f"{what}: output strides {out.stride()}"
    assert not torch.isnan(out).any(), f"{what}: NaN in the output (an unwritten element?)"
    normwise, elem, where = errors(out, ref, scale)
    if norm_err is not None:
        normwise = norm_err(out)  # tiled_mm: conftest's rel_err itself
    assert normwise <= tol, f"{what}: error {normwise:.3g} > {tol:.1g} (normwise, as rel_err)"
    assert elem <= tol, f"{what}: error {elem:.3g} > {tol:.1g} at element {where}"
    assert torch.equal(out, again), f"{what}: two calls differ (max {float((out - again).abs().max()):.3g})"


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_ID.get)
@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_fuzz_mm(device, dtype, data):
    variant, (M, N, K), (la, lb), seed, rand = draw_case(data, device, dtype)
    a, b = operand(M, K, la, rand), operand(K, N, lb, rand)
    a64, b64 = a.double(), b.double()
    ref, scale = a64 @ b64, a64.abs() @ b64.abs()
    run_and_check("tiled_mm", (a, b), ref, scale, device, dtype, variant, f"{M}x{N}x{K} A={la} B={lb} seed={seed}",
                  norm_err=lambda out: rel_err(out, a, b))


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_ID.get)
@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_fuzz_addmm(device, dtype, data):
    variant, (M, N, K), (la, lb), seed, rand = draw_case(data, device, dtype)
    kind = data.draw(st.sampled_from(list(BIASES)), label="bias")
    a, b, bias = operand(M, K, la, rand), operand(K, N, lb, rand), BIASES[kind](rand, M, N)
    a64, b64, bias64 = a.double(), b.double(), bias.double()
    ref, scale = a64 @ b64 + bias64, a64.abs() @ b64.abs() + bias64.abs()
    run_and_check("tiled_addmm", (bias, a, b), ref, scale, device, dtype, variant,
                  f"{M}x{N}x{K} A={la} B={lb} bias={kind}: {tuple(bias.shape)}/{bias.stride()} seed={seed}")


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_ID.get)
@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_fuzz_bmm(device, dtype, data):
    variant, (M, N, K), (la, lb), seed, rand = draw_case(data, device, dtype)
    B = data.draw(st.integers(1, 5), label="batch")
    ma, mb = data.draw(st.tuples(st.sampled_from(BATCH_MODES), st.sampled_from(BATCH_MODES)), label="batch of A, B")
    a, b = batched(B, M, K, la, ma, rand), batched(B, K, N, lb, mb, rand)
    a64, b64 = a.double(), b.double()
    ref, scale = a64 @ b64, a64.abs() @ b64.abs()
    run_and_check("tiled_bmm", (a, b), ref, scale, device, dtype, variant,
                  f"{B}x{M}x{N}x{K} A={la}/{ma} B={lb}/{mb} seed={seed}")


# tiled_linear's activations and their float64 references (conftest).
ACTS = ACT_REFS


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_ID.get)
@pytest.mark.parametrize("device", DEVICES)
@given(data=st.data())
def test_fuzz_linear(device, dtype, data):
    """act(F.linear(x, W, b)) against float64: x with 1 to 3 dims (F.linear's leading dims), W (N, K)
    as nn.Linear stores it (or a padded / offset view of it), bias (N,) or None."""
    variant, (M, N, K), (lx, lw), seed, rand = draw_case(data, device, dtype)
    lw = lw.replace("col", "row")  # W is (N, K) row-major-like: W.t() is the column-major B
    lead = data.draw(st.sampled_from([(), (M,), (1, M), (2, max(1, M // 2))]), label="leading dims of x")
    act = data.draw(st.sampled_from(list(ACTS)), label="activation")
    has_bias = data.draw(st.booleans(), label="bias")
    rows = math.prod(lead) if lead else 1
    x = operand(rows, K, lx, rand).reshape(*lead, K)
    w = operand(N, K, lw, rand)
    bias = rand(N) if has_bias else None
    x64, w64 = x.double(), w.double()
    z = x64 @ w64.t() + (bias.double() if has_bias else 0)
    # |act(z) - act(z')| <= 1.13 |z - z'| for these activations (gelu's steepest slope).
    scale = 1.13 * (x64.abs() @ w64.abs().t() + (bias.double().abs() if has_bias else 0))
    ref = ACTS[act](z)
    run_and_check("tiled_linear", (x, w, bias), ref, scale.expand_as(ref), device, dtype, variant,
                  f"x={tuple(x.shape)}/{lx} W=({N}, {K})/{lw} bias={has_bias} act={act} seed={seed}",
                  activation=act)
