"""Shared helpers for the tilelab tests.

GPU tests carry the `gpu` marker and are skipped when torch sees no CUDA device.
"""
import contextlib
import functools
import os

import pytest
import torch

import tilelab_torch

HAS_CUDA = torch.cuda.is_available()

# Error allowed against a float64 reference, as a fraction of ||A|·|B||_F (see
# rel_err); the levels of ../shared/BENCHMARKING.md: fp32 IEEE 1e-5, half types
# with fp32 accumulation 1e-2.
TOL = {
    torch.float32: 1e-5,
    torch.float64: 1e-12,
    torch.float16: 1e-2,
    torch.bfloat16: 1e-2,
}
# fp32 on TF32 tensor cores (10-bit mantissa, fp32 accumulation), only under
# torch.set_float32_matmul_precision("high"): the tensorcore_tf32 rows.
TOL_TF32 = 2e-3
DTYPE_ID = {torch.float32: "fp32", torch.float64: "fp64", torch.float16: "fp16", torch.bfloat16: "bf16"}

# (M, N, K). "1x1x4097" is a dot product; "33x31x10007" has K > 10000; 256x128x64
# is a multiple of every tile, so it takes the unpredicated even-shape path.
SHAPES = [
    (1, 1, 1),
    (1, 1, 4097),
    (7, 5, 13),
    (17, 65, 129),
    (127, 129, 128),
    (256, 128, 64),
    (1000, 1000, 1000),
    (33, 31, 10007),
]
LAYOUTS = [("row", "row"), ("row", "col"), ("col", "row"), ("col", "col")]
HALF = [torch.bfloat16, torch.float16]


@functools.lru_cache(maxsize=None)
def kernel_runs_here(kernel) -> str:
    """Why a CUDA config cannot run on this machine's GPU 0, or "" if it can: the
    dispatcher's own answer (chooser.cpp: cannot_run), asked through explain()."""
    x = torch.empty(1, 1, device="cuda", dtype=kernel.dtypes[0])
    try:
        with precision_for(kernel):
            tilelab_torch.explain(x, x, variant=kernel.name)
    except RuntimeError as e:
        return str(e).splitlines()[0]
    return ""


def pytest_collection_modifyitems(config, items):
    if not HAS_CUDA:
        skip = pytest.mark.skip(reason="needs a CUDA device")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)
        return
    # A test parametrized over the table's configs skips the rows this GPU (or
    # this build) cannot run: the hopper rows anywhere but compute capability 9.0.
    by_name = {k.name: k for k in tilelab_torch.kernels("cuda")}
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        k = by_name.get(params.get("config"))
        why = kernel_runs_here(k) if k is not None else ""
        if why:
            item.add_marker(pytest.mark.skip(reason=why))


# tiled_linear's activations, written here from torch's functions (independently of
# tilelab_torch.ops.TORCH_ACTIVATIONS, the mapping under test): the references of
# test_linear.py and test_fuzz.py.
ACT_REFS = {
    None: lambda z: z,
    "relu": torch.relu,
    "gelu": torch.nn.functional.gelu,
    "gelu_tanh": lambda z: torch.nn.functional.gelu(z, approximate="tanh"),
    "silu": torch.nn.functional.silu,
}


def fresh_seed() -> int:
    """A new seed per call (fresh random data every run), returned so a failure can name it."""
    seed = int.from_bytes(os.urandom(4), "little")
    torch.manual_seed(seed)
    return seed


def make_operand(rows: int, cols: int, layout: str, dtype, device) -> torch.Tensor:
    """A random (rows, cols) tensor, row-major or column-major (a transposed view)."""
    if layout == "row":
        return torch.randn(rows, cols, dtype=dtype, device=device)
    return torch.randn(cols, rows, dtype=dtype, device=device).t()


def rel_err(out: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> float:
    """Error of `out` against the float64 product, relative to ||A|·|B||_F.

    Rounding error in a dot product scales with sum_k |a_ik||b_kj|, not with the
    result: when random terms cancel (a 1x1x4097 dot product, say), ||ref|| can
    be arbitrarily small and ||out-ref||/||ref|| says nothing about the kernel.
    |A|·|B| is the scale of the standard error bound |fl(AB) - AB| <= g_K |A||B|.
    For the square random cases of the suite it is ~sqrt(K) * 0.64 times ||ref||,
    and any real bug (a dropped or doubled k-term, a wrong element, an unwritten
    NaN) is still orders of magnitude above the tolerances.
    """
    a64, b64 = a.double(), b.double()
    ref = a64 @ b64
    num = (out.double() - ref).norm()
    den = (a64.abs() @ b64.abs()).norm()
    if den == 0:
        return float(num)
    return float(num / den)


def cuda_kernels(dtype=None):
    """The CUDA configs of the table (what the tests parametrize over)."""
    return [k for k in tilelab_torch.kernels("cuda") if dtype is None or dtype in k.dtypes]


class Poisoned:
    """Make the next CUDA allocation of `numel` elements of `dtype` start NaN-filled.

    Fills a block of the caching allocator with NaN and frees it; the op's output
    of the same size then reuses that block (checked by `reused`), so any output
    element the kernel fails to write stays NaN and fails the comparison.
    """

    def __init__(self, numel: int, dtype, device):
        block = torch.full((max(numel, 1),), float("nan"), dtype=dtype, device=device)
        self.ptr = block.data_ptr()
        del block

    def reused(self, out: torch.Tensor) -> bool:
        return out.data_ptr() == self.ptr


def kernel_tol(kernel, dtype) -> float:
    """The error a config may have for dtype: TF32 rows get the TF32 tolerance for fp32."""
    return TOL_TF32 if (kernel.tf32 and dtype == torch.float32) else TOL[dtype]


def test_dtype(kernel):
    """A dtype the config runs (fp32 where it can, else its first dtype)."""
    return torch.float32 if torch.float32 in kernel.dtypes else kernel.dtypes[0]


test_dtype.__test__ = False  # a helper, not a test


@contextlib.contextmanager
def precision_for(kernel):
    """TF32 rows run only under precision "high"; everything else at the current setting."""
    old = torch.get_float32_matmul_precision()
    if kernel.tf32:
        torch.set_float32_matmul_precision("high")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(old)


def _precision(value):
    old = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(value)
    yield
    torch.set_float32_matmul_precision(old)


@pytest.fixture
def highest():
    """fp32 at IEEE precision (TF32 refused) for the test."""
    yield from _precision("highest")


@pytest.fixture
def high():
    """TF32 allowed for the test."""
    yield from _precision("high")


def check_odd_shape(config, dtype, shape, la, lb, tol) -> float:
    """One forced-config product into a NaN-poisoned output, against float64; returns the error."""
    M, N, K = shape
    seed = fresh_seed()
    a = make_operand(M, K, la, dtype, "cuda")
    b = make_operand(K, N, lb, dtype, "cuda")
    poison = Poisoned(M * N, dtype, "cuda")
    out = tilelab_torch.tiled_mm(a, b, variant=config)
    assert poison.reused(out)
    assert not torch.isnan(out).any(), f"{config} {shape} {la}{lb}: unwritten output, seed={seed}"
    err = rel_err(out, a, b)
    assert err <= tol, f"{config} {dtype} {shape} {la}A {lb}B: rel err {err:.3g}, seed={seed}"
    return err


def check_misaligned_views(config, dtype, tol, offsets, lds):
    """Row-major views whose rows start `off` elements past 16-byte alignment, leading
    dimensions `lds`, and their transposes (column-major): each unaligned operand is
    copied to aligned rows by the launcher."""
    seed = fresh_seed()
    for off in offsets:
        for ld in lds:
            base = torch.randn(310 * ld + 16, dtype=dtype, device="cuda")
            a = base[off:off + 300 * ld].view(300, ld)[:, : 290 - off]          # row-major, offset
            b = torch.randn(ld, 270, dtype=dtype, device="cuda")[1:, 3:200][: a.shape[1]]  # offset, ld 270
            for x, y, what in ((a, b, "row-major"), (b.t(), a.t(), "column-major")):
                out = tilelab_torch.tiled_mm(x, y, variant=config)
                err = rel_err(out, x, y)
                assert err <= tol, f"{config} {what} off={off} ld={ld}: {err:.3g}, seed={seed}"


def kernel_by_name(name):
    return next(k for k in tilelab_torch.kernels("cuda") if k.name == name)
