"""Tiny tensorcore runs for compute-sanitizer (memcheck / racecheck): odd shapes,
both layouts, aligned rows (16-byte cp.async in place) and unaligned ones (K or N
not a multiple of 8 half / 4 fp32: copied to an aligned buffer first)."""
import torch

import tilelab_torch

torch.set_float32_matmul_precision("high")
# Every tensorcore row of the table: half rows alternate bf16 / fp16, TF32 rows take fp32.
rows = [k for k in tilelab_torch.kernels("cuda") if k.family == "tensorcore"]
cases = [(k.name, torch.float32 if k.tf32 else (torch.bfloat16, torch.float16)[i % 2]) for i, k in enumerate(rows)]
for config, dtype in cases:
    for M, N, K in [(1, 1, 1), (33, 17, 7), (130, 67, 45), (64, 64, 64), (200, 300, 130)]:
        for ta in (False, True):
            for tb in (False, True):
                a = torch.randn(K, M, dtype=dtype, device="cuda").t() if ta else torch.randn(M, K, dtype=dtype, device="cuda")
                b = torch.randn(N, K, dtype=dtype, device="cuda").t() if tb else torch.randn(K, N, dtype=dtype, device="cuda")
                out = tilelab_torch.tiled_mm(a, b, variant=config)
                ref = a.double() @ b.double()
                err = float((out.double() - ref).norm() / ref.norm().clamp_min(1e-30))
                assert err < 1e-2, (config, M, N, K, ta, tb, err)
torch.cuda.synchronize()
print("sanitize_tc: ok")
