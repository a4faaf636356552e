"""One call of a blocked config for ncu: python3 benchmarks/tuning/ncu_blocked.py CONFIG M N K"""
import sys

import torch

import tilelab_torch

cfg = sys.argv[1]
M, N, K = (int(x) for x in sys.argv[2:5])
a = torch.randn(M, K, device="cuda")
b = torch.randn(K, N, device="cuda")
tilelab_torch.tiled_mm(a, b, variant=cfg)
torch.cuda.synchronize()
