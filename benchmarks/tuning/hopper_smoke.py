"""One product per hopper row, dtype and layout on small odd shapes, with the error
against float64: a quick first check (run under `timeout`: a pipeline bug hangs)."""
import sys

import torch

import tilelab_torch

rows = [k.name for k in tilelab_torch.kernels("cuda") if k.family == "hopper"]
bad = 0
for config in rows:
    for dtype in (torch.bfloat16, torch.float16):
        for M, N, K in [(256, 512, 512), (129, 257, 1000), (5, 3, 7)]:
            for la in ("row", "col"):
                for lb in ("row", "col"):
                    a = torch.randn(M, K, device="cuda", dtype=dtype)
                    b = torch.randn(K, N, device="cuda", dtype=dtype)
                    if la == "col":
                        a = a.t().contiguous().t()
                    if lb == "col":
                        b = b.t().contiguous().t()
                    out = tilelab_torch.tiled_mm(a, b, variant=config)
                    torch.cuda.synchronize()
                    ref = a.double() @ b.double()
                    err = float((out.double() - ref).norm() / (a.double().abs() @ b.double().abs()).norm())
                    ok = err < 1e-2
                    bad += not ok
                    print(f"{config} {dtype} {M}x{N}x{K} {la}/{lb}: err {err:.2e} {'ok' if ok else 'FAIL'}", flush=True)
sys.exit(1 if bad else 0)
