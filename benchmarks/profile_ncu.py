#!/usr/bin/env python3
"""Nsight Compute counters for chosen tilelab kernels: why one kernel is faster than another.

For each config (and shape, dtype) it starts one small Python child process
under `ncu --clock-control none --launch-count 1 --csv --page raw --metrics ...`.
The child builds its random normal inputs on the CPU and copies them to the GPU
(a memcpy, not a kernel), so the first kernel it launches, the one ncu
profiles, is tilelab's: tilelab_torch.tiled_mm(a, b, variant=NAME). The child
then checks that output against a float64 reference (rel_err, status) and
reports which kernel ran. Tabulated per kernel:
  smem ld/st conflicts   l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum / _op_st.sum
  gld sectors            l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum (32-byte sectors)
  DRAM read/write        dram__bytes_read.sum, dram__bytes_write.sum (ncu flushes caches first)
  occupancy %            sm__warps_active.avg.pct_of_peak_sustained_active
  regs                   launch__registers_per_thread
  duration               gpu__time_duration.sum (one launch, clocks left alone)
The default set shows the padded kernel vs its unpadded twin (32 and 16 tiles:
conflict counts and time) and naive vs tiled (global load sectors: tiled about T
times fewer), plus the largest config of every other family in the table.
Writes ncu.json / ncu.csv (--out; --no-csv: the JSON only); roofline.py --ncu-json takes ncu.json.

Needs ncu (PATH, /opt/nvidia/nsight-compute/*/ncu or /usr/local/cuda/bin/ncu,
or --ncu PATH) with permission to read GPU performance counters; without one it
says so and exits 3 (writing an ncu.json that records why).

Examples:
    python benchmarks/profile_ncu.py --out out/ncu
    python benchmarks/profile_ncu.py --kernels tiled_32x32x32 padded_32x32x32 --shape 4096x4096x4096
"""
from __future__ import annotations

import argparse
import csv
import glob
import io
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from common import tilelab_torch  # noqa: E402

METRICS = {
    "smem_ld_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "smem_st_conflicts": "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "gld_sectors": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "dram_read": "dram__bytes_read.sum",
    "dram_write": "dram__bytes_write.sum",
    "occupancy_pct": "sm__warps_active.avg.pct_of_peak_sustained_active",
    "registers": "launch__registers_per_thread",
    "duration_ns": "gpu__time_duration.sum",
}
UNIT = {"byte": 1, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "nsecond": 1, "usecond": 1e3,
        "msecond": 1e6, "second": 1e9}
TEXTBOOK = ["padded_32x32x32", "padded_nopad_32x32x32", "padded_16x16x16", "padded_nopad_16x16x16",
            "naive_32x32", "tiled_32x32x32", "naive_16x16", "tiled_16x16x16"]

CHILD = r"""
import json, sys, torch
sys.path.insert(0, sys.argv[1])
import tilelab_torch
name, dkey, M, N, K = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
dtype = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16,
         "fp64": torch.float64}[dkey]
torch.set_float32_matmul_precision("high" if dkey == "tf32" else "highest")
g = torch.Generator().manual_seed(0)
# inputs made on the CPU and copied (no kernel): tilelab's launch is the process's first kernel
a = torch.randn(M, K, generator=g, dtype=torch.float32).to(dtype).to("cuda")
b = torch.randn(K, N, generator=g, dtype=torch.float32).to(dtype).to("cuda")
variant = None if name == "auto" else name
ran = tilelab_torch.explain(a, b, variant=variant).kernel
out = tilelab_torch.tiled_mm(a, b, variant=variant)
torch.cuda.synchronize()
ref = a.double() @ b.double()
rel = ((out.double() - ref).norm() / ref.norm()).item()
print("TILELAB_CHILD " + json.dumps({"ran": ran, "rel_err": rel}), flush=True)
"""


def find_ncu(explicit: str | None) -> str | None:
    if explicit:
        return explicit if os.path.exists(explicit) else None
    cands = [shutil.which("ncu")] + sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True) + [
        "/usr/local/cuda/bin/ncu"]
    return next((c for c in cands if c and os.path.exists(c)), None)


def parse_csv(text: str) -> list[dict]:
    """Rows of ncu's `--csv --page raw` output, values scaled to base units (bytes, ns)."""
    lines = text.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        return []
    body = [l for l in lines[start:] if l.startswith('"')]
    table = list(csv.reader(io.StringIO("\n".join(body))))
    header, rest = table[0], table[1:]
    units = {}
    if rest and rest[0][0] == "":  # the units row
        units = dict(zip(header, rest[0]))
        rest = rest[1:]
    out = []
    for r in rest:
        d = dict(zip(header, r))
        row = {"kernel_function": d.get("Kernel Name", "")}
        for key, metric in METRICS.items():
            v = d.get(metric)
            try:
                val = float(str(v).replace(",", ""))
            except (TypeError, ValueError):
                val = None
            if val is not None:
                val *= UNIT.get(units.get(metric, "").lower(), 1)
            row[key] = val
        out.append(row)
    return out


def default_set(dkey_default: str) -> list[tuple[str, str]]:
    table = tilelab_torch.kernels("cuda")
    names = {k.name for k in table}
    chosen = [(n, dkey_default) for n in TEXTBOOK if n in names]
    for fam in dict.fromkeys(k.family for k in table):
        if fam in ("naive", "tiled", "padded"):
            continue
        rows = [k for k in table if k.family == fam]
        k = max(rows, key=lambda k: (k.block[0] * k.block[1], k.name))
        dt = common.DTYPES[dkey_default]
        chosen.append((k.name, dkey_default if dt in k.dtypes else "bf16"))
    return chosen


def profile_one(ncu: str, name: str, dkey: str, shape, args) -> dict:
    M, N, K = shape
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [ncu, "--clock-control", "none", "--launch-count", "1", "--csv", "--page", "raw",
           "--print-units", "base", "--metrics", ",".join(METRICS.values())]
    if args.kernel_regex:
        cmd += ["--kernel-name", f"regex:{args.kernel_regex}"]
    cmd += [sys.executable, "-c", CHILD, root, name, dkey, str(M), str(N), str(K)]
    row = {"config": name, "dtype": dkey, "M": M, "N": N, "K": K}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return dict(row, status=f"SKIP: ncu took more than {args.timeout}s")
    text = p.stdout + "\n" + p.stderr
    child = next((l for l in p.stdout.splitlines() if l.startswith("TILELAB_CHILD ")), None)
    if "ERR_NVGPUCTRPERM" in text or "permission" in text.lower() and "counter" in text.lower():
        return dict(row, status="SKIP: no permission to read GPU performance counters (ERR_NVGPUCTRPERM)",
                    log=text[-2000:])
    if child is None:
        return dict(row, status=f"SKIP: child failed (rc={p.returncode}): "
                                f"{(p.stderr.strip().splitlines() or ['?'])[-1][:200]}", log=text[-2000:])
    info = json.loads(child.split(" ", 1)[1])
    row.update(config=info["ran"], requested=name, rel_err=info["rel_err"])
    parsed = parse_csv(p.stdout)
    if not parsed:
        return dict(row, status="SKIP: no ncu rows in the output", log=text[-2000:])
    row.update(parsed[0])
    if row.get("dram_read") is not None and row.get("dram_write") is not None:
        row["dram_bytes"] = row["dram_read"] + row["dram_write"]
    if row.get("duration_ns"):
        row["duration_ms"] = row["duration_ns"] * 1e-6
        row["tflops"] = 2.0 * M * N * K / (row["duration_ns"] * 1e-9) / 1e12
    row["status"] = common.status(info["rel_err"], dkey)
    return row


COLUMNS = [
    ("kernel", "config", ""), ("dtype", "dtype", ""), ("shape", "shape", ""),
    ("smem ld confl", "smem_ld_conflicts", ".0f"), ("smem st confl", "smem_st_conflicts", ".0f"),
    ("gld sectors", "gld_sectors", ".3e"), ("DRAM rd MB", "dram_read_mb", ".1f"),
    ("DRAM wr MB", "dram_write_mb", ".1f"), ("occup %", "occupancy_pct", ".1f"), ("regs", "registers", ".0f"),
    ("ms", "duration_ms", ".3f"), ("TFLOP/s", "tflops", ".2f"), ("rel_err", "rel_err", ".1e"),
    ("status", "status", ""),
]


def comparisons(rows: list[dict]) -> list[str]:
    by = {(r["config"], r["dtype"]): r for r in rows if r.get("duration_ns")}
    lines = []
    for (name, dkey), r in sorted(by.items()):
        if name.startswith("padded_") and not name.startswith("padded_nopad_"):
            twin = by.get((name.replace("padded_", "padded_nopad_", 1), dkey))
            if twin:
                pc = (r["smem_ld_conflicts"] or 0) + (r["smem_st_conflicts"] or 0)
                tc = (twin["smem_ld_conflicts"] or 0) + (twin["smem_st_conflicts"] or 0)
                lines.append(f"{name} vs {twin['config']} ({dkey}): bank conflicts ld+st {pc:.0f} vs {tc:.0f} "
                             f"(st {r['smem_st_conflicts'] or 0:.0f} vs {twin['smem_st_conflicts'] or 0:.0f}); "
                             f"time {r['duration_ms']:.3f} vs {twin['duration_ms']:.3f} ms "
                             f"({twin['duration_ms'] / r['duration_ms']:.2f}x)")
        if name.startswith("tiled_"):
            t = int(name.split("_")[1].split("x")[0])
            nv = by.get((f"naive_{t}x{t}", dkey))
            if nv and r.get("gld_sectors") and nv.get("gld_sectors"):
                lines.append(f"naive_{t}x{t} vs {name} ({dkey}): global load sectors {nv['gld_sectors']:.3e} vs "
                             f"{r['gld_sectors']:.3e} = {nv['gld_sectors'] / r['gld_sectors']:.1f}x fewer "
                             f"(model: T = {t}x); time {nv['duration_ms']:.3f} vs {r['duration_ms']:.3f} ms")
    return lines


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--kernels", nargs="+", help="config names (or 'auto'); default: the padded pairs, "
                                                "naive/tiled pairs, and the largest config of every other family")
    p.add_argument("--shape", default="2048x2048x2048", help="MxNxK (default 2048^3)")
    p.add_argument("--dtype", default="fp32", help="fp32, tf32, bf16, fp16 or fp64 (default fp32; "
                                                  "families without it in the default set use bf16)")
    p.add_argument("--ncu", help="path of the ncu binary (default: PATH, /opt/nvidia/nsight-compute/*/ncu, "
                                 "/usr/local/cuda/bin/ncu)")
    p.add_argument("--kernel-regex", help="also pass --kernel-name regex:THIS to ncu")
    p.add_argument("--timeout", type=int, default=180, help="seconds per ncu child")
    p.add_argument("--out", help="directory for ncu.json / ncu.csv")
    p.add_argument("--no-csv", action="store_true", help="write ncu.json only")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    import torch

    meta = common.metadata("cuda" if torch.cuda.is_available() else "cpu",
                           "highest" if args.dtype != "tf32" else "high")
    shape = tuple(int(x) for x in args.shape.lower().split("x"))
    ncu = find_ncu(args.ncu)
    err = None
    if not torch.cuda.is_available():
        err = "no CUDA device: Nsight Compute profiles CUDA kernels only"
    elif ncu is None:
        err = ("ncu (Nsight Compute) not found on PATH, under /opt/nvidia/nsight-compute/*/ "
               "or /usr/local/cuda/bin; install it or pass --ncu PATH")
    if err:
        print(f"profile_ncu.py: {err}", file=sys.stderr)
        if args.out:
            common.write_json(os.path.join(args.out, "ncu.json"), {"meta": meta, "error": err, "rows": []})
        return 3
    meta["ncu"] = ncu
    try:
        meta["ncu_version"] = subprocess.run([ncu, "--version"], capture_output=True, text=True,
                                             timeout=60).stdout.strip().splitlines()[-1]
    except Exception:  # noqa: BLE001
        pass
    jobs = [(k, args.dtype) for k in args.kernels] if args.kernels else default_set(args.dtype)
    rows = []
    for name, dkey in common.progress(jobs, len(jobs), "ncu", not args.no_progress):
        r = profile_one(ncu, name, dkey, shape, args)
        r["shape"] = f"{shape[0]}x{shape[1]}x{shape[2]}"
        for k in ("dram_read", "dram_write"):
            if r.get(k) is not None:
                r[k + "_mb"] = r[k] / 1e6
        rows.append(dict(meta, **r))
        if r["status"].startswith("SKIP: no permission"):
            break  # every other kernel would fail the same way
    print(f"# {meta['device']} | torch {meta['torch']} | CUDA {meta['cuda']} | {meta.get('ncu_version', ncu)} | "
          f"ncu --clock-control none, one launch per kernel, caches flushed (ncu default)")
    common.print_table(rows, COLUMNS)
    for line in comparisons(rows):
        print(line)
    print("Notes: gld sectors are 32-byte L1 sectors requested by global loads; naive's A load is one sector "
          "broadcast to a whole warp, so its count is below the 'two loads per FMA' model and tiled's saving "
          "is less than T x in sectors. DRAM writes can read ~0: C stays in the L2 (write-back) when the "
          "kernel ends.")
    for r in rows:
        if r.get("log") and r["status"].startswith("SKIP"):
            print(f"\n--- {r['config']}: {r['status']}\n{r['log'][-800:]}", file=sys.stderr)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        common.write_json(os.path.join(args.out, "ncu.json"),
                          {"meta": meta, "rows": rows, "comparisons": comparisons(rows)})
        if not args.no_csv:
            common.write_csv(os.path.join(args.out, "ncu.csv"), [{k: v for k, v in r.items() if k != "log"}
                                                                for r in rows])
    if any(r["status"].startswith("SKIP: no permission") for r in rows):
        print("profile_ncu.py: no permission to read GPU performance counters "
              "(see https://developer.nvidia.com/ERR_NVGPUCTRPERM)", file=sys.stderr)
        return 3
    return 1 if any(r["status"] == "CHECK" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
