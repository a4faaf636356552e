"""One tensorcore launch for ncu: python3 benchmarks/tuning/ncu_tensorcore.py CONFIG DTYPE M N K (the first call warms up;
profile with --launch-skip 1 --launch-count 1 -k regex:tensorcore)."""
import sys

import torch

import tilelab_torch

config, dtype, M, N, K = sys.argv[1], getattr(torch, sys.argv[2]), *map(int, sys.argv[3:6])
torch.set_float32_matmul_precision("high")
a = torch.randn(M, K, dtype=dtype, device="cuda")
b = torch.randn(K, N, dtype=dtype, device="cuda")
for _ in range(2):
    tilelab_torch.tiled_mm(a, b, variant=config)
torch.cuda.synchronize()
print("ncu_one: ok", config, dtype, M, N, K)
