"""Tiny tensor-core runs for compute-sanitizer (memcheck / racecheck): odd shapes,
both layouts, aligned rows (16-byte cp.async / TMA in place) and unaligned ones (K
or N not a multiple of 8 half / 4 fp32: copied to an aligned buffer first), K
long enough to wrap the stage ring, a batch with a broadcast operand.

    compute-sanitizer --tool memcheck python3 benchmarks/tuning/sanitize_tensorcore.py [family]

family: tensorcore (default) or hopper (the wgmma/TMA rows; sm_90 only)."""
import sys

import torch

import tilelab_torch

torch.set_float32_matmul_precision("high")
family = sys.argv[1] if len(sys.argv) > 1 else "tensorcore"
# Every row of the family: half rows alternate bf16 / fp16, TF32 rows take fp32.
rows = [k for k in tilelab_torch.kernels("cuda") if k.family == family]
assert rows, f"no {family} rows in the table"
cases = [(k.name, torch.float32 if k.tf32 else (torch.bfloat16, torch.float16)[i % 2]) for i, k in enumerate(rows)]
for config, dtype in cases:
    for M, N, K in [(1, 1, 1), (33, 17, 7), (130, 67, 45), (64, 64, 64), (200, 300, 130), (129, 260, 600)]:
        for ta in (False, True):
            for tb in (False, True):
                a = torch.randn(K, M, dtype=dtype, device="cuda").t() if ta else torch.randn(M, K, dtype=dtype, device="cuda")
                b = torch.randn(N, K, dtype=dtype, device="cuda").t() if tb else torch.randn(K, N, dtype=dtype, device="cuda")
                out = tilelab_torch.tiled_mm(a, b, variant=config)
                ref = a.double() @ b.double()
                err = float((out.double() - ref).norm() / ref.norm().clamp_min(1e-30))
                assert err < 1e-2, (config, M, N, K, ta, tb, err)
    a = torch.randn(3, 70, 90, dtype=dtype, device="cuda")
    b = torch.randn(90, 50, dtype=dtype, device="cuda").expand(3, 90, 50)  # stride-0 batch
    out = torch.ops.tilelab.tiled_bmm(a, b, variant=config)
    err = float((out.double() - a.double() @ b.double()).norm() / (a.double() @ b.double()).norm())
    assert err < 1e-2, (config, "bmm", err)
torch.cuda.synchronize()
print(f"sanitize {family}: ok")
