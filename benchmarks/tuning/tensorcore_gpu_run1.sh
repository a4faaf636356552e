#!/usr/bin/env bash
# One device call for the tensorcore family: build (ptxas -v), sanitizers, tests, A/B.
set -uo pipefail
unset CC CXX
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
t0=$(date +%s)
TILELAB_PTXAS_VERBOSE=1 MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0 python3 setup.py build_ext --inplace >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "build: $(( $(date +%s) - t0 )) s"
grep -A3 "entry function '_ZN7tilelab17tensorcore" "$OUT/build.log" | grep -E "entry|registers|spill" > "$OUT/ptxas_tensorcore.txt"
timeout 120 compute-sanitizer --tool memcheck python3 benchmarks/tuning/sanitize_tensorcore.py > "$OUT/memcheck.log" 2>&1; echo "memcheck rc=$?"; tail -3 "$OUT/memcheck.log"
timeout 150 compute-sanitizer --tool racecheck python3 benchmarks/tuning/sanitize_tensorcore.py > "$OUT/racecheck.log" 2>&1; echo "racecheck rc=$?"; tail -3 "$OUT/racecheck.log"
timeout 170 python3 -m pytest -q -p no:cacheprovider -x tests/test_tensorcore.py tests/test_correctness.py tests/test_api.py -k "tensorcore or auto or tf32" > "$OUT/pytest.log" 2>&1; echo "pytest rc=$?"; tail -3 "$OUT/pytest.log"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head
timeout 200 python3 benchmarks/ab.py --no-progress --warmup 10 --rep 40 --out "$OUT" --dtypes bf16,fp16,tf32 \
  --shapes 4096x4096x4096,8192x8192x8192,4095x4095x4095,4097x4097x4097,1000x1000x1000,8x4096x4096,128x4096x4096,4096x11008x4096,2048x2048x2048 \
  --kernels auto tensorcore_128x128x32 tensorcore_64x64x32 tensorcore_tf32_128x128x16 tensorcore_tf32_64x64x16 > "$OUT/ab.txt" 2>&1
echo "ab rc=$?"
grep -vE "^\s*$" "$OUT/ab.txt" | cut -c1-200 | tail -75
