#!/usr/bin/env bash
# Device call for the tensorcore rewrite (64x64 warp tiles, 16-byte cp.async only + aligned copy of
# unaligned operands). MODE=profile: build, tests, ncu, A/B. MODE=final: build, sanitizer, tests, A/B.
set -uo pipefail
unset CC CXX
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
MODE=${MODE:-profile}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
t0=$(date +%s)
TILELAB_PTXAS_VERBOSE=1 MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0 python3 setup.py build_ext --inplace >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
grep -A3 "entry function '_ZN7tilelab17tensorcore" "$OUT/build.log" | grep -E "entry|registers|spill" > "$OUT/ptxas_tensorcore.txt"; rm -f "$OUT/build.log"
grep -E "registers|spill" "$OUT/ptxas_tensorcore.txt" | sed 's/.*Used/Used/' | sort | uniq -c | head -20
if [ "$MODE" = final ]; then
  timeout 90 compute-sanitizer --tool memcheck python3 benchmarks/tuning/sanitize_tensorcore.py > "$OUT/memcheck.log" 2>&1; echo "memcheck rc=$?"; tail -2 "$OUT/memcheck.log"
  timeout 120 compute-sanitizer --tool racecheck python3 benchmarks/tuning/sanitize_tensorcore.py > "$OUT/racecheck.log" 2>&1; echo "racecheck rc=$?"; tail -2 "$OUT/racecheck.log"
fi
timeout 150 python3 -m pytest -q -p no:cacheprovider -x tests/test_tensorcore.py tests/test_correctness.py tests/test_api.py -k "tensorcore or auto or tf32" > "$OUT/pytest.log" 2>&1; echo "pytest rc=$?"; tail -2 "$OUT/pytest.log"; grep -E "^(FAILED|ERROR)|Error" "$OUT/pytest.log" | head -5
if [ "$MODE" = profile ]; then
  for cfg in tensorcore_128x128x32 tensorcore_128x256x32; do
    timeout 60 ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
      --section MemoryWorkloadAnalysis --section WarpStateStats --section ComputeWorkloadAnalysis \
      --launch-skip 1 --launch-count 1 -k regex:tensorcore python3 benchmarks/tuning/ncu_tensorcore.py $cfg bfloat16 4096 4096 4096 > "$OUT/ncu_$cfg.txt" 2>&1
    echo "ncu $cfg rc=$?"
  done
fi
timeout 150 python3 benchmarks/ab.py --no-progress --warmup 10 --rep 40 --out "$OUT" --dtypes bf16,fp16,tf32 \
  --shapes 4096x4096x4096,8192x8192x8192,4095x4095x4095,4097x4097x4097,1000x1000x1000,8x4096x4096 \
  --kernels auto tensorcore_128x128x32 tensorcore_128x256x32 tensorcore_64x64x32 tensorcore_tf32_128x128x16 tensorcore_tf32_64x64x16 > "$OUT/ab.txt" 2>&1
echo "ab rc=$?"
grep -vE "^\s*$" "$OUT/ab.txt" | cut -c1-150 | head -60
