#!/usr/bin/env bash
# Device call of the third session (2026-11-21): the blocked (fp32) family with a
# straight-line copy path for interior tiles (blocked.cuh: 332 -> ~200 non-FFMA
# instructions per k-tile in the 128x256 main loop, SASS). Predicted: ~5% fewer
# issued instructions, 4096^3 from 3.09 to ~2.93 ms if the kernel stays issue-bound.
# Build (ptxas spills), the fp32 tests, the A/B against cuBLAS, memcheck.
#   OUT=$OUT bash benchmarks/tuning/session3_fp32.sh
source "$(dirname "$0")/device_env.sh"
TILELAB_PTXAS_VERBOSE=1 build
echo "ptxas: $(grep -c 'bytes spill' "$OUT/build.log") kernels, $(grep -cE '[1-9][0-9]* bytes spill (stores|loads)' "$OUT/build.log") with spills" | tee "$OUT/ptxas_summary.txt"
timeout 300 python3 -m pytest tests -q -p no:cacheprovider -k "blocked or auto or strided or nan or fp32 or bmm or addmm" \
  >"$OUT/pytest.log" 2>&1; echo "pytest rc=$?"; tail -2 "$OUT/pytest.log"
S=4096x4096x4096,8192x8192x8192,4095x4095x4095,4097x4097x4097,2048x2048x2048,1024x1024x1024,1023x1023x1023,1000x1000x1000
timeout 200 python3 benchmarks/ab.py --no-progress --dtypes fp32 --shapes $S --graph-max-mnk 0 \
  --kernels auto blocked_wide_128x256x16 blocked_k16_64x64x16 --out "$OUT/ab_fp32" >"$OUT/ab_fp32.txt" 2>&1
echo "ab rc=$?"; grep -E "auto:" "$OUT/ab_fp32.txt"
unset CC CXX
SANITIZE_SMALL=0 timeout 150 compute-sanitizer --tool memcheck python3 benchmarks/tuning/sanitize_blocked.py >"$OUT/memcheck_blocked.txt" 2>&1
echo "memcheck rc=$?: $(grep -E 'ERROR SUMMARY' "$OUT/memcheck_blocked.txt" | tail -1)"
