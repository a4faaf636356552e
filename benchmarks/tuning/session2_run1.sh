#!/usr/bin/env bash
# Device call 1 of the second session (2026-11-21): build (ptxas -v), the full
# test suite, the mma.sync ceiling microbenchmark, and A/B of the candidate
# rows: fp32 blocked with BK=32 and the aligned copy of misaligned operands
# (issue 4); bf16/fp16 tensorcore with BK=64 (issue 5).
#   OUT=$OUT bash benchmarks/tuning/session2_run1.sh
source "$(dirname "$0")/device_env.sh"
TILELAB_PTXAS_VERBOSE=1 build
grep -E "Used [0-9]+ registers|bytes spill" "$OUT/build.log" | grep -B1 -E "[1-9][0-9]* bytes spill" | head -20
echo "spill lines with non-zero bytes: $(grep -cE '[1-9][0-9]* bytes spill (stores|loads)' "$OUT/build.log")"
nvcc -O3 -arch=sm_90 -o /tmp/mma_ceiling benchmarks/tuning/mma_ceiling.cu && /tmp/mma_ceiling | tee "$OUT/mma_ceiling.txt"
t0=$(date +%s)
python3 -m pytest tests -q -p no:cacheprovider >"$OUT/pytest.log" 2>&1
echo "pytest rc=$? ($(( $(date +%s) - t0 )) s)"; tail -3 "$OUT/pytest.log"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -20
python3 benchmarks/ab.py --no-progress --dtypes fp32 \
  --kernels auto blocked_wide_128x256x16 blocked_wide_128x256x32 blocked_k16_64x64x16 \
  --shapes 4096x4096x4096,8192x8192x8192,4095x4095x4095,4097x4097x4097,2048x2048x2048,1024x1024x1024,1000x1000x1000,1023x1023x1023,333x777x555 \
  --out "$OUT/ab_fp32" >"$OUT/ab_fp32.txt" 2>&1; echo "ab fp32 rc=$?"
python3 benchmarks/ab.py --no-progress --dtypes bf16,fp16 \
  --kernels auto tensorcore_128x256x32 tensorcore_128x256x64 \
  --shapes 4096x4096x4096,8192x8192x8192,4095x4095x4095,2048x2048x2048 \
  --out "$OUT/ab_half" >"$OUT/ab_half.txt" 2>&1; echo "ab half rc=$?"
grep -E "blocked|tensorcore|auto" "$OUT/ab_fp32.txt" "$OUT/ab_half.txt" | grep -vE "^\s*$" | tail -60
