#!/usr/bin/env bash
# Fourth session, device call 1: the CUTLASS-style main loop of blocked.cuh
# (barrier before the last k-step, next tile's fragments loaded under its FMAs,
# copies spread over k-steps) against the previous kernel and cuBLAS, standalone
# (blocked_variants/), then ncu stall counts of each variant at 4096^3.
# Prediction: short-scoreboard stalls 0.12 -> ~0.05 per issued instruction and
# 3-5% off the 4096^3 time (3.09 ms -> ~2.97, 0.90x cuBLAS).
#   mkdir -p benchmarks/tuning/blocked_variants/old && git archive 69119bd csrc/cuda | tar -x -C benchmarks/tuning/blocked_variants/old
#   OUT=$OUT bash benchmarks/tuning/session4_run1.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
unset CC CXX
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
timeout 400 bash benchmarks/tuning/blocked_variants/run.sh 2048,2048,2048 4096,4096,4096 8192,8192,8192 4096,4096,1024
M="sm__cycles_elapsed.avg,smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active"
for r in barrier dispatch_stall long_scoreboard math_pipe_throttle mio_throttle no_instruction not_selected short_scoreboard wait; do
  M="$M,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
VARIANTS_CHECK_ONLY=1 timeout 150 ncu --kernel-name regex:blocked --launch-skip 0 --launch-count 20 --metrics "$M" \
  benchmarks/tuning/blocked_variants/build/variants 4096,4096,4096 > "$OUT/variants_ncu.txt" 2>&1
echo "ncu rc=$?"
