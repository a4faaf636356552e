#!/usr/bin/env bash
# Fourth session, device call 4 (NVIDIA H200): the extension with the shifted
# edge blocks (edge blocks of a column-copied operand work on the last whole
# tile, so they take the unpredicated copy path too), the new row
# blocked_64x128x8 and the estimated-time chooser of configs.h. Build with
# ptxas -v, the fp32/blocked tests, ab.py fp32 over the squares 1024..8192 and
# the odd shapes against torch.matmul, compute-sanitizer memcheck and racecheck.
# Predicted: 1023^3 from 0.74 to ~0.9 (edge blocks no longer on the predicated
# path), 3072^3 from 0.81 to ~0.95 (64x128), 4097^3 ~0.85-0.9, 1000^3 ~0.9.
#   OUT=$OUT bash benchmarks/tuning/session4_run4.sh
source "$(dirname "$0")/device_env.sh"
R=$OUT/run4; mkdir -p "$R"
TILELAB_PTXAS_VERBOSE=1 build
mv "$OUT/build.log" "$R/"
echo "ptxas: $(grep -c 'bytes spill' "$R/build.log") kernels, $(grep -cE '[1-9][0-9]* bytes spill (stores|loads)' "$R/build.log") with spills" | tee "$R/ptxas_summary.txt"
timeout 200 python3 -m pytest tests -q -p no:cacheprovider -k "blocked or auto or strided or nan or fp32 or bmm or addmm" \
  >"$R/pytest.log" 2>&1; echo "pytest rc=$?"; tail -2 "$R/pytest.log"
S=1024x1024x1024,1536x1536x1536,2048x2048x2048,3072x3072x3072,4096x4096x4096,5120x5120x5120,6144x6144x6144,8192x8192x8192
S=$S,1000x1000x1000,1023x1023x1023,4095x4095x4095,4097x4097x4097,8x4096x4096,128x4096x4096
timeout 200 python3 benchmarks/ab.py --no-progress --dtypes fp32 --shapes $S --graph-max-mnk 0 \
  --kernels auto blocked_wide_128x256x8 blocked_64x128x8 blocked_k16_64x64x16 --out "$R/ab_fp32" >"$R/ab_fp32.txt" 2>&1
echo "ab rc=$?"; grep -E "auto:" "$R/ab_fp32.txt"; sed -n '/oracle/,$p' "$R/ab_fp32.txt"
unset CC CXX
SANITIZE_SMALL=0 timeout 120 compute-sanitizer --tool memcheck python3 benchmarks/tuning/sanitize_blocked.py >"$R/memcheck_blocked.txt" 2>&1
echo "memcheck rc=$?: $(grep -E 'ERROR SUMMARY' "$R/memcheck_blocked.txt" | tail -1)"
SANITIZE_SMALL=1 timeout 120 compute-sanitizer --tool racecheck python3 benchmarks/tuning/sanitize_blocked.py >"$R/racecheck_blocked.txt" 2>&1
echo "racecheck rc=$?: $(grep -E 'RACECHECK SUMMARY' "$R/racecheck_blocked.txt" | tail -1)"
tar czf "$OUT/run4.tgz" -C "$OUT" run4 && rm -rf "$R"
