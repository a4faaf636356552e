"""Shared pieces of the benchmark scripts: timing, ceilings, metadata, output.

Method (../shared/BENCHMARKING.md): tilelab and torch.matmul on the same random
inputs in one process; device-event timing, median of many runs after warm-up
(triton.testing.do_bench, return_mode="median", which flushes L2 between runs);
relative error of both against a float64 reference.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import sys
import time
from typing import Callable, Optional

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
try:
    import tilelab_torch  # noqa: E402
except ImportError as _err:  # not built: --help still works, any use says why
    class _NotBuilt:
        def __init__(self, err):
            self._err = err

        def __getattr__(self, name):
            raise ImportError(f"tilelab_torch is not importable ({self._err}); build the extension first "
                              f"(`python3 setup.py build_ext --inplace`, or BUILD=1 bash benchmarks/run_all.sh)")

    tilelab_torch = _NotBuilt(_err)

DTYPES = {
    "fp32": torch.float32,
    "tf32": torch.float32,  # fp32 inputs under torch.set_float32_matmul_precision("high")
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp64": torch.float64,
}

# Datasheet ceilings in TFLOP/s (leads, not measurements): dense, no sparsity.
PEAKS = {
    "H100": {"fp32": 67.0, "tf32": 495.0, "bf16": 990.0, "fp16": 990.0, "fp64": 67.0},
    "H200": {"fp32": 67.0, "tf32": 495.0, "bf16": 990.0, "fp16": 990.0, "fp64": 67.0},
}


def peak_tflops(device_name: str, dtype_key: str) -> Optional[float]:
    for key, table in PEAKS.items():
        if key in device_name:
            return table.get(dtype_key)
    return None


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    import platform

    return f"cpu ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"


def metadata(device: str, precision: str) -> dict:
    return {
        "device": device_name(device),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "precision": precision,
        "date": time.strftime("%Y-%m-%d"),
    }


@contextlib.contextmanager
def kept_precision():
    """torch's fp32 matmul precision as it was on entry, set back on exit (set_precision changes it per dtype)."""
    old = torch.get_float32_matmul_precision()
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(old)


def set_precision(dtype_key: str) -> str:
    """TF32 only for the 'tf32' rows; every other row runs at full fp32 ("highest")."""
    prec = "high" if dtype_key == "tf32" else "highest"
    torch.set_float32_matmul_precision(prec)
    return prec


def median_call_ms(fn: Callable[[], object], n: int, device: str, sync_each: bool = False) -> float:
    """Median ms of n calls of fn(), each timed on its own: wall clock on the CPU, a pair of
    CUDA events around each call on a GPU (recorded back to back, read after one
    synchronize; with sync_each, the host waits for each call before the next)."""
    if not device.startswith("cuda"):
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for s, e in ev:
        s.record()
        fn()
        e.record()
        if sync_each:
            e.synchronize()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in ev)


def bench(fn: Callable[[], object], device: str, warmup_ms: int = 25, rep_ms: int = 100, rounds: int = 1) -> float:
    """Median milliseconds of fn(); with rounds > 1, the median of that many such medians (a single
    measurement's spike, a clock dip or a neighbour's burst, then moves none of a row's numbers)."""
    return statistics.median(_bench_once(fn, device, warmup_ms, rep_ms) for _ in range(max(1, rounds)))


def _bench_once(fn: Callable[[], object], device: str, warmup_ms: int, rep_ms: int) -> float:
    if device.startswith("cuda"):
        try:
            import triton.testing

            return float(triton.testing.do_bench(fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))
        except ImportError:
            pass
        fn()
        torch.cuda.synchronize()
        return median_call_ms(fn, max(3, int(rep_ms / 10)), device, sync_each=True)
    fn()
    times = []
    deadline = time.perf_counter() + rep_ms / 1000
    while len(times) < 3 or (time.perf_counter() < deadline and len(times) < 50):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def capture_graph(fn: Callable[[], object], warmup: int = 3) -> Callable[[], None]:
    """Capture fn into a CUDA graph, after `warmup` calls on a side stream (one-time allocations and
    attribute calls stay out of the graph); returns its replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph.replay


def bench_graph(fn: Callable[[], object], rep_ms: int = 100) -> Optional[float]:
    """Median ms of CUDA-graph replay (launch overhead removed), or None."""
    try:
        import triton.testing

        return float(triton.testing.do_bench_cudagraph(fn, rep=rep_ms, return_mode="median"))
    except Exception:  # noqa: BLE001 - graph capture is best effort for the report
        return None


def rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    den = ref.norm().item()
    num = (out.double() - ref).norm().item()
    if math.isnan(num):
        return float("nan")
    return num / den if den else num


def tflops(M: int, N: int, K: int, ms: float) -> float:
    return 2.0 * M * N * K / (ms * 1e-3) / 1e12


TOL = {"fp32": 1e-5, "tf32": 2e-3, "bf16": 1e-2, "fp16": 1e-2, "fp64": 1e-12}


def status(err: float, dtype_key: str) -> str:
    return "OK" if err == err and err <= TOL[dtype_key] else "CHECK"


def progress(iterable, total: int, desc: str, enabled: bool = True):
    if not enabled:
        return iterable
    try:
        from tqdm import tqdm

        return tqdm(iterable, total=total, desc=desc, file=sys.stderr, leave=False)
    except ImportError:
        return iterable


def geomean(values) -> float:
    """Geometric mean of positive numbers (nan for none)."""
    logs = [math.log(v) for v in values]
    return math.exp(sum(logs) / len(logs)) if logs else float("nan")


def print_table(rows: list[dict], columns: list[tuple[str, str, str]], file=sys.stdout,
                skip_empty: bool = False) -> None:
    """columns: (header, key, format); skip_empty leaves out the columns no row has a value for."""
    if skip_empty:
        columns = [c for c in columns if any(r.get(c[1]) is not None for r in rows)]
    cells = [[h for h, _, _ in columns]]
    for r in rows:
        line = []
        for _, k, fmt in columns:
            v = r.get(k)
            line.append("-" if v is None else (format(v, fmt) if fmt else str(v)))
        cells.append(line)
    widths = [max(len(c[i]) for c in cells) for i in range(len(columns))]
    for j, c in enumerate(cells):
        print("  ".join(x.rjust(w) for x, w in zip(c, widths)), file=file)
        if j == 0:
            print("  ".join("-" * w for w in widths), file=file)


def write_json(path: str, payload) -> None:
    """payload as JSON at path, written whole or not at all (a temporary file renamed over it), so a tool killed
    while it rewrites its file after every measurement leaves the last complete one."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(payload, f, indent=1)
    os.replace(tmp, path)


def write_csv(path: str, rows: list[dict]) -> None:
    import csv

    if not rows:
        return
    keys = list(rows[0].keys())
    for r in rows:
        for k in r:
            if k not in keys:
                keys.append(k)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
