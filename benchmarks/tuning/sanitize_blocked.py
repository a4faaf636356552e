#!/usr/bin/env python3
"""A few small odd-shape calls of every blocked config, for compute-sanitizer:

    compute-sanitizer --tool memcheck  python3 benchmarks/tuning/sanitize_blocked.py
    compute-sanitizer --tool racecheck python3 benchmarks/tuning/sanitize_blocked.py

Small shapes on purpose (the sanitizers are slow); covers both layouts of each
operand, a misaligned x[1:, 1:] view (scalar copies) and aligned data (16-byte
copies), ragged M, N, K, and a shape with interior blocks (the unpredicated copy path);
plus one product above the launcher's aligned-copy
threshold (M*N*K >= 2^29) with a misaligned B and a column-major, misaligned A,
so the copy into aligned rows is checked too (skipped with SANITIZE_SMALL=1: racecheck
is slow on them, and the copy involves no shared memory). Prints the worst relative error and exits 1 above 1e-5."""
import os
import sys

import torch

import tilelab_torch

rows = [k for k in tilelab_torch.kernels("cuda") if k.family == "blocked"]
names = [k.name for k in rows]
worst = 0.0
for row in rows:
    name = row.name
    bm, bn, bk = row.block
    # The last shape has interior blocks, so the unpredicated copy path (copy_in) runs too.
    for M, N, K in [(1, 1, 1), (7, 5, 13), (129, 67, 33), (65, 131, 40), (33, 70, 200), (2 * bm + 3, 2 * bn + 5, 9 * bk + 3)]:
        for la in ("row", "col"):
            for lb in ("row", "col"):
                for sliced in (False, True):
                    extra = 1 if sliced else 0
                    a = torch.randn(M + extra, K + extra, device="cuda")
                    b = torch.randn(K + extra, N + extra, device="cuda")
                    if la == "col":
                        a = torch.randn(K + extra, M + extra, device="cuda").t()
                    if lb == "col":
                        b = torch.randn(N + extra, K + extra, device="cuda").t()
                    a, b = a[extra:, extra:], b[extra:, extra:]
                    out = tilelab_torch.tiled_mm(a, b, variant=name)
                    ref = a.double() @ b.double()
                    err = float((out.double() - ref).norm() / max(float(ref.norm()), 1e-30))
                    worst = max(worst, err)
    if os.environ.get("SANITIZE_SMALL") == "1":
        continue
    # Above the threshold: B row-major with N = 1023 (copied), A column-major with M = 1023 (copied).
    for a, b in [(torch.randn(1024, 1024, device="cuda"), torch.randn(1024, 1023, device="cuda")),
                 (torch.randn(1024, 1023, device="cuda").t(), torch.randn(1024, 1025, device="cuda")[:, 1:])]:
        out = tilelab_torch.tiled_mm(a, b, variant=name)
        ref = a.double() @ b.double()
        worst = max(worst, float((out.double() - ref).norm() / max(float(ref.norm()), 1e-30)))
torch.cuda.synchronize()
print(f"{len(names)} blocked configs, worst rel err {worst:.3g}")
sys.exit(0 if worst <= 1e-5 else 1)
