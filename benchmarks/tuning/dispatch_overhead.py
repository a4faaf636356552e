"""Host-side cost per call: torch.mm against tilelab's op on a tiny product (the GPU
work is negligible, so the wall time per call is dispatch + launch), eager, with and
without autograd, per kernel family. Prints microseconds per call.

    python3 benchmarks/tuning/dispatch_overhead.py
"""
import time

import torch

import tilelab_torch

N_CALLS = 2000


def per_call_us(fn):
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(N_CALLS):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / N_CALLS * 1e6


print(f"# {torch.cuda.get_device_name()}, torch {torch.__version__}: microseconds per call, {N_CALLS} calls")
for dtype in (torch.bfloat16, torch.float32):
    a = torch.randn(64, 64, device="cuda", dtype=dtype)
    b = torch.randn(64, 64, device="cuda", dtype=dtype)
    w = torch.randn(64, 64, device="cuda", dtype=dtype)
    bias = torch.randn(64, device="cuda", dtype=dtype)
    ag = a.clone().requires_grad_()
    rows = {
        "torch.mm": lambda: torch.mm(a, b),
        "torch.ops.tilelab.tiled_mm (auto)": lambda: torch.ops.tilelab.tiled_mm(a, b),
        "tilelab_torch.tiled_mm (auto)": lambda: tilelab_torch.tiled_mm(a, b),
        "F.linear": lambda: torch.nn.functional.linear(a, w, bias),
        "torch.ops.tilelab.tiled_addmm": lambda: torch.ops.tilelab.tiled_addmm(bias, a, w.t()),
        "torch.mm, requires_grad": lambda: torch.mm(ag, b),
        "torch.ops.tilelab.tiled_mm, requires_grad": lambda: torch.ops.tilelab.tiled_mm(ag, b),
    }
    for k in tilelab_torch.kernels("cuda"):
        if dtype in k.dtypes and k.family in ("tensorcore", "hopper", "blocked") and not k.tf32:
            rows[f"torch.ops.tilelab.tiled_mm variant={k.name}"] = (lambda n: lambda: torch.ops.tilelab.tiled_mm(a, b, variant=n))(k.name)
    for name, fn in rows.items():
        print(f"{str(dtype):15s} {name:60s} {per_call_us(fn):8.1f}")
