"""Tiny tensorcore runs for compute-sanitizer (memcheck / racecheck): odd shapes,
both layouts, aligned rows (16-byte cp.async in place) and unaligned ones (K or N
not a multiple of 8 half / 4 fp32: copied to an aligned buffer first)."""
import torch

import tilelab_torch

torch.set_float32_matmul_precision("high")
for config, dtype in [("tensorcore_128x128x32", torch.bfloat16), ("tensorcore_128x256x32", torch.float16), ("tensorcore_64x64x32", torch.float16),
                      ("tensorcore_tf32_128x128x16", torch.float32), ("tensorcore_tf32_64x64x16", torch.float32)]:
    for M, N, K in [(1, 1, 1), (33, 17, 7), (130, 67, 45), (64, 64, 64)]:
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
