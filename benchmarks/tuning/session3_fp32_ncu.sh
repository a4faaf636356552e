#!/usr/bin/env bash
# Device call of the third session (2026-11-21): why the interior copy path
# (blocked/run5/interior_copy_path.diff: ~5% fewer issued instructions in SASS)
# made blocked_wide_128x256x16 3% slower. Stall reasons and instruction counts at
# 4096^3, first on HEAD (the shipped kernel), then with the diff applied.
#   OUT=$OUT bash benchmarks/tuning/session3_fp32_ncu.sh
# (In the session's call the first build was skipped by a stale build folder, so the
# "shipped" report there is of the patched kernel; blocked/run5/ncu_shipped.txt comes
# from a follow-up call that touched the sources first, as this script now does.)
source "$(dirname "$0")/device_env.sh"
m="smsp__inst_executed.sum,sm__cycles_elapsed.avg,smsp__issue_active.avg.pct_of_peak_sustained_active"
for r in barrier long_scoreboard short_scoreboard mio_throttle math_pipe_throttle wait not_selected \
         selected dispatch_stall no_instruction lg_throttle drain membar sleeping branch_resolving; do
  m="$m,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio"
done
for v in shipped interior; do
  [ $v = interior ] && { git apply benchmarks/results/h200-2026-11-21/blocked/run5/interior_copy_path.diff || patch -p1 < benchmarks/results/h200-2026-11-21/blocked/run5/interior_copy_path.diff; }
  # The device keeps build outputs between calls: force the blocked TU to rebuild.
  touch csrc/cuda/kernels/blocked.cuh csrc/cuda/launch_blocked.cu
  build
  timeout 90 ncu --clock-control none --metrics "$m" --launch-skip 0 --launch-count 1 -k regex:blocked \
    python3 benchmarks/tuning/ncu_blocked.py blocked_wide_128x256x16 4096 4096 4096 >"$OUT/ncu_$v.txt" 2>&1
  echo "== $v rc=$?"; grep -E "stalled|inst_executed|cycles_elapsed|issue_active" "$OUT/ncu_$v.txt" \
    | sed -e 's/smsp__average_warps_issue_stalled_//' -e 's/_per_issue_active.ratio//' | awk '{print $1, $NF}'
done
