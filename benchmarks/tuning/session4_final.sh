#!/usr/bin/env bash
# The final device call of the fourth session (2026-11-21, NVIDIA H200), on the
# committed table: build with ptxas -v, the full suite and every benchmark
# (benchmarks/run_all.sh, results at the top of benchmarks/results/h200-2026-11-21/),
# the fp32 squares 1024..8192 and odd shapes against torch.matmul
# (fp32_squares*), compute-sanitizer memcheck and racecheck over the blocked rows.
#   OUT=$OUT bash benchmarks/tuning/session4_final.sh
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
  NCU_KERNELS="padded_32x32x32 padded_nopad_32x32x32 naive_32x32 tiled_32x32x32 blocked_wide_128x256x8 blocked_64x128x8 blocked_k16_64x64x16" \
  bash benchmarks/run_all.sh "$RES"
echo "ptxas: $(grep -c 'bytes spill' "$OUT/build.log") kernels, $(grep -cE '[1-9][0-9]* bytes spill (stores|loads)' "$OUT/build.log") with spills" \
  | tee "$RES/ptxas_summary.txt"
unset CC CXX
Q=1024x1024x1024,1536x1536x1536,2048x2048x2048,3072x3072x3072,4096x4096x4096,5120x5120x5120,6144x6144x6144,8192x8192x8192
Q=$Q,1000x1000x1000,1023x1023x1023,4095x4095x4095,4097x4097x4097,8x4096x4096,128x4096x4096,4096x11008x4096
timeout 240 python3 benchmarks/ab.py --no-progress --dtypes fp32 --shapes $Q --graph-max-mnk 0 \
  --kernels auto blocked_wide_128x256x8 blocked_64x128x8 blocked_k16_64x64x16 \
  --out "$RES/fp32_squares" >"$RES/fp32_squares.txt" 2>&1; echo "fp32 squares rc=$?"
grep -E "auto:" "$RES/fp32_squares.txt"; sed -n '/oracle/,$p' "$RES/fp32_squares.txt"
SANITIZE_SMALL=0 timeout 120 compute-sanitizer --tool memcheck python3 benchmarks/tuning/sanitize_blocked.py >"$RES/sanitizer_memcheck_blocked.txt" 2>&1
echo "memcheck blocked rc=$?: $(grep -E 'ERROR SUMMARY' "$RES/sanitizer_memcheck_blocked.txt" | tail -1)" | tee "$RES/sanitizers.txt"
SANITIZE_SMALL=1 timeout 120 compute-sanitizer --tool racecheck python3 benchmarks/tuning/sanitize_blocked.py >"$RES/sanitizer_racecheck_blocked.txt" 2>&1
echo "racecheck blocked rc=$?: $(grep -E 'RACECHECK SUMMARY' "$RES/sanitizer_racecheck_blocked.txt" | tail -1)" | tee -a "$RES/sanitizers.txt"
echo "total: $(( $(date +%s) - t_start )) s" | tee -a "$RES/run_all.log"
tar czf "$OUT/results.tgz" --exclude=session2_final --exclude=session3_final --exclude=blocked --exclude=hopper \
  --exclude=tensorcore --exclude=foundation_sweep --exclude=streams --exclude=dispatch \
  -C "$(dirname "$RES")" "$(basename "$RES")"
