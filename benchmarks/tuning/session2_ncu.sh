#!/usr/bin/env bash
# Device call 7 of the second session (2026-11-21): Nsight Compute on the
# shipped 128x256 tensorcore rows at 4096^3 (bf16 and TF32), for the evidence
# of what limits them now (run3's profile was of the BK=32 predecessor).
#   OUT=$OUT bash benchmarks/tuning/session2_ncu.sh
source "$(dirname "$0")/device_env.sh"
build
for spec in "tensorcore_128x256x64 bfloat16" "tensorcore_tf32_128x256x32 float32"; do
  set -- $spec
  timeout 90 ncu --clock-control none --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats \
    --section SchedulerStats --launch-skip 1 --launch-count 1 -k regex:tensorcore \
    python3 benchmarks/tuning/ncu_tensorcore.py $1 $2 4096 4096 4096 >"$OUT/ncu_$1.txt" 2>&1
  echo "ncu $1 rc=$?"
  # the stall reasons behind "Warp Cycles Per Issued Instruction" (cycles per issued instruction each)
  m=""
  for r in barrier long_scoreboard short_scoreboard mio_throttle math_pipe_throttle wait not_selected \
           selected dispatch_stall no_instruction lg_throttle tex_throttle; do
    m="$m,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
  done
  timeout 60 ncu --clock-control none --metrics "${m#,}" --launch-skip 1 --launch-count 1 -k regex:tensorcore \
    python3 benchmarks/tuning/ncu_tensorcore.py $1 $2 4096 4096 4096 >"$OUT/ncu_stalls_$1.txt" 2>&1
  echo "ncu stalls $1 rc=$?"; grep -E "stalled" "$OUT/ncu_stalls_$1.txt" | sed -e 's/smsp__average_warps_issue_stalled_//' -e 's/_per_issue_active.ratio//'
  grep -E "Duration|SM Frequency|L2 Cache Throughput|Compute \(SM\) Throughput|Issue Slots Busy|No Eligible|Eligible Warps|Warp Cycles Per Issued|Registers Per|highest-utilized|Tensor" "$OUT/ncu_$1.txt" | head -14
done
