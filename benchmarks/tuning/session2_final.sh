#!/usr/bin/env bash
# The final device call of the second session (2026-11-21), on the committed
# table: build with ptxas -v (spill check over every kernel), the full test
# suite and every benchmark (benchmarks/run_all.sh), then compute-sanitizer
# memcheck and racecheck over the blocked and tensorcore rows.
#   OUT=$OUT bash benchmarks/tuning/session2_final.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
t_start=$(date +%s)
TILELAB_PTXAS_VERBOSE=1 OUT=$OUT BUILD=1 STEPS="test ab ab_auto tile_sweep ncu roofline model table" \
  AB_SHAPES=1000x1000x1000,1024x1024x1024,4096x4096x4096,4095x4095x4095,4097x4097x4097,333x777x555,8x4096x4096 \
  AB_DTYPES=fp32,bf16 \
  NCU_KERNELS="padded_32x32x32 padded_nopad_32x32x32 naive_32x32 tiled_32x32x32 blocked_wide_128x256x16 blocked_k16_64x64x16" \
  bash benchmarks/run_all.sh
echo "ptxas: $(grep -c 'bytes spill' "$OUT/build.log") kernels, $(grep -cE '[1-9][0-9]* bytes spill (stores|loads)' "$OUT/build.log") with spills" \
  | tee "$OUT/ptxas_summary.txt"
grep -B3 -E '[1-9][0-9]* bytes spill stores' "$OUT/build.log" | grep -oE "entry function '[^']*'" | tee -a "$OUT/ptxas_summary.txt"
unset CC CXX
for tool in memcheck racecheck; do
  for s in sanitize_blocked sanitize_tensorcore; do
    if [ $(( $(date +%s) - t_start )) -gt 520 ]; then echo "skipped $tool $s (time)"; continue; fi
    t0=$(date +%s)
    SANITIZE_SMALL=$([ $tool = racecheck ] && echo 1 || echo 0) \
      compute-sanitizer --tool $tool python3 benchmarks/tuning/$s.py >"$OUT/${tool}_$s.txt" 2>&1
    echo "$tool $s rc=$? ($(( $(date +%s) - t0 )) s): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/${tool}_$s.txt" | tail -1)" \
      | tee -a "$OUT/sanitizers.txt"
  done
done
echo "total: $(( $(date +%s) - t_start )) s"
