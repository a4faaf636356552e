#!/usr/bin/env bash
# The final device call of the third session (2026-11-21), on the committed
# table: build with ptxas -v (spill check over every kernel), the full test
# suite and every benchmark (benchmarks/run_all.sh, results at the top of
# benchmarks/results/h200-2026-11-21/), compute-sanitizer memcheck and racecheck
# over the hopper rows, and a TF32 A/B of skinny and small shapes that checks the
# chooser's rule for the transposed copy of the hopper TF32 rows.
#   OUT=$OUT bash benchmarks/tuning/session3_final.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
t_start=$(date +%s)
RES=benchmarks/results/h200-2026-11-21
S=1000x1000x1000,1024x1024x1024,4096x4096x4096,4095x4095x4095,4097x4097x4097,333x777x555,8x4096x4096
S=$S,256x256x256,2048x2048x2048
TILELAB_PTXAS_VERBOSE=1 OUT=$OUT BUILD=1 STEPS="test ab ab_auto tile_sweep ncu roofline model table" \
  AB_SHAPES=$S AB_DTYPES=fp32,bf16 \
  AUTO_SHAPES=4096x4096x4096,8192x8192x8192,4095x4095x4095,4097x4097x4097,1000x1000x1000,2048x2048x2048 \
  NCU_KERNELS="padded_32x32x32 padded_nopad_32x32x32 naive_32x32 tiled_32x32x32 blocked_wide_128x256x16 blocked_k16_64x64x16" \
  bash benchmarks/run_all.sh "$RES"
echo "ptxas: $(grep -c 'bytes spill' "$OUT/build.log") kernels, $(grep -cE '[1-9][0-9]* bytes spill (stores|loads)' "$OUT/build.log") with spills" \
  | tee "$RES/ptxas_summary.txt"
unset CC CXX
T=8x4096x4096,128x4096x4096,512x512x512,1000x1000x1000,1024x768x3072,2304x768x1024,4096x4096x4096
python3 benchmarks/ab.py --no-progress --dtypes tf32 --shapes $T --graph-max-mnk 0 \
  --kernels auto hopper_tf32_128x128x32 tensorcore_tf32_64x64x16 tensorcore_tf32_128x128x16 \
  --out "$RES/tf32_small" >"$RES/tf32_small.txt" 2>&1; echo "tf32 small rc=$?"
sed -n '/oracle/,$p' "$RES/tf32_small.txt"
for tool in memcheck racecheck; do
  t0=$(date +%s)
  compute-sanitizer --tool $tool python3 benchmarks/tuning/sanitize_tensorcore.py hopper >"$RES/sanitizer_${tool}_hopper.txt" 2>&1
  echo "$tool hopper rc=$? ($(( $(date +%s) - t0 )) s): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$RES/sanitizer_${tool}_hopper.txt" | tail -1)" \
    | tee -a "$RES/sanitizers.txt"
done
echo "total: $(( $(date +%s) - t_start )) s" | tee -a "$RES/run_all.log"
tar czf "$OUT/results.tgz" -C "$(dirname "$RES")" "$(basename "$RES")"
