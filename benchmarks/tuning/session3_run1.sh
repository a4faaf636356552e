#!/usr/bin/env bash
# Device call 1 of the third session (2026-11-21): first run of the hopper family
# (wgmma + TMA, sm_90a). Build with ptxas -v, a smoke test under a timeout (a
# pipeline bug hangs rather than fails), the hopper tests, then bf16/fp16 A/B of
# the hopper rows against the mma.sync rows and cuBLAS.
#   OUT=$OUT bash benchmarks/tuning/session3_run1.sh
source "$(dirname "$0")/device_env.sh"
TILELAB_PTXAS_VERBOSE=1 build
grep -A2 "hopper_kernel" "$OUT/build.log" | grep -E "registers|spill" | sort | uniq -c | tee "$OUT/ptxas_hopper.txt"
SO=$(ls tilelab_torch/_C*.so)
cuobjdump -sass "$SO" 2>/dev/null | grep -oE "HGMMA[.A-Z0-9x]*" | sort | uniq -c | tee -a "$OUT/ptxas_hopper.txt"
timeout 120 python3 benchmarks/tuning/hopper_smoke.py >"$OUT/smoke.txt" 2>&1; rc=$?
echo "smoke rc=$rc"; grep -c ok "$OUT/smoke.txt"; grep -E "FAIL|Error|error" "$OUT/smoke.txt" | head -20
[ $rc -eq 0 ] || { tail -5 "$OUT/smoke.txt"; exit 1; }
timeout 300 python3 -m pytest tests/test_hopper.py -q -x -p no:cacheprovider >"$OUT/pytest_hopper.log" 2>&1
echo "pytest hopper rc=$?"; tail -3 "$OUT/pytest_hopper.log"
S=4096x4096x4096,8192x8192x8192,4095x4095x4095,4097x4097x4097,2048x2048x2048,1024x1024x1024
timeout 240 python3 benchmarks/ab.py --no-progress --dtypes bf16,fp16 --shapes $S --graph-max-mnk 0 \
  --kernels hopper_128x256x64 hopper_128x128x64 tensorcore_128x256x64 \
  --out "$OUT/ab_half" >"$OUT/ab_half.txt" 2>&1; echo "ab rc=$?"
cat "$OUT/ab_half.txt" | grep -v "^$" | tail -45
