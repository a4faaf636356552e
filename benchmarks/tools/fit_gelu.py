"""The coefficients of the Hopper epilogue's erf GELU (csrc/cuda/kernels/hopper.cuh,
activate_fast<Gelu>), and their error, on the CPU (numpy only).

The epilogue computes gelu(x) = x * Phi(x) from the tail q = erfc(z) / 2, z = |x| / sqrt 2:
    t = 1 / (1 + p z),   q = t * 2^(P(t) - z^2 log2 e - 1),   Phi = 1 - q (x >= 0), q (x < 0)
with one reciprocal and one exponential from the SFU and a degree-`deg` polynomial P. This
script fits P (least squares on log erfc, i.e. erfc's relative error, reweighted towards
minimax) for z in [0, zmax], prints P's coefficients in log2 units as the kernel writes them
(highest degree first, the constant minus 1 for the halving), and evaluates the formula in
float32 against float64 over x in [-12, 12]:

    python3 benchmarks/tools/fit_gelu.py            # p = 0.35, degree 6: relative error <= 2.3e-7
"""
import argparse
import math

import numpy as np

LOG2E = 1.0 / math.log(2.0)
erfc = np.vectorize(math.erfc)
erf = np.vectorize(math.erf)


def fit(p: float, deg: int, zmax: float, n: int = 20001) -> tuple[np.ndarray, float]:
    z = np.linspace(0.0, zmax, n)
    t = 1.0 / (1.0 + p * z)
    target = np.log(erfc(z) / t) + z * z  # ln(erfc(z) / t) + z^2 = P(t) in natural-log units
    v = np.vander(t, deg + 1)
    w = np.ones_like(t)
    for _ in range(60):  # iteratively reweighted least squares: weight where the error is largest
        c, *_ = np.linalg.lstsq(v * w[:, None], target * w, rcond=None)
        err = np.abs(v @ c - target)
        w *= 1.0 + 3.0 * err / err.max()
        w /= w.mean()
    return c, float(err.max())


def gelu_f32(x: np.ndarray, p: float, coef: np.ndarray) -> np.ndarray:
    f = np.float32
    x = x.astype(f)
    t = f(1.0) / (np.abs(x) * f(p / math.sqrt(2.0)) + f(1.0))
    acc = coef[0]
    for c in coef[1:]:
        acc = acc * t + c
    q = t * np.exp2(x * x * f(-LOG2E / 2.0) + acc).astype(f)
    return x * np.where(x >= 0, f(1.0) - q, q)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--p", type=float, default=0.35)
    ap.add_argument("--deg", type=int, default=6)
    ap.add_argument("--zmax", type=float, default=4.5)
    args = ap.parse_args()
    c, err = fit(args.p, args.deg, args.zmax)
    coef = (c * LOG2E).astype(np.float32)
    coef[-1] -= np.float32(1.0)
    print(f"p / sqrt 2 = {float(np.float32(args.p / math.sqrt(2.0)))!r}f")
    print("P(t), log2 units, highest degree first:", ", ".join(f"{float(v)!r}f" for v in coef))
    print(f"fit: max relative error of erfc on [0, {args.zmax}]: {err:.2e}")
    x = np.linspace(-12.0, 12.0, 400001)
    exact = 0.5 * x * (1.0 + erf(np.float32(x).astype(np.float64) / math.sqrt(2.0)))
    got = gelu_f32(x, args.p, coef).astype(np.float64)
    print(f"float32: max |gelu error| / (|x| + 1) = {np.max(np.abs(got - exact) / (np.abs(x) + 1.0)):.2e}")


if __name__ == "__main__":
    main()
