#!/usr/bin/env bash
# Device call 2 of the third session (2026-11-21): the hopper TF32 rows (first
# run), the tests that touch hopper and tensorcore rows, then A/B: TF32 hopper vs
# tensorcore_tf32 vs cuBLAS (TF32), and half-precision small / GPT-2 shapes to set
# the 128x128 hopper rule against the mma.sync 64x64 and 128x128 rows.
#   OUT=$OUT bash benchmarks/tuning/session3_run2.sh
source "$(dirname "$0")/device_env.sh"
TILELAB_PTXAS_VERBOSE=1 build
grep -A2 "hopper_kernel" "$OUT/build.log" | grep -E "spill" | sort | uniq -c | tee "$OUT/ptxas_hopper.txt"
timeout 400 python3 -m pytest tests -q -p no:cacheprovider -k "hopper or tensorcore or tf32 or auto" \
  >"$OUT/pytest.log" 2>&1; echo "pytest rc=$?"; tail -4 "$OUT/pytest.log"
S=4096x4096x4096,8192x8192x8192,4095x4095x4095,4097x4097x4097,2048x2048x2048,1024x1024x1024
timeout 200 python3 benchmarks/ab.py --no-progress --dtypes tf32 --shapes $S --graph-max-mnk 0 \
  --kernels auto hopper_tf32_128x256x32 hopper_tf32_128x128x32 tensorcore_tf32_128x256x32 \
  --out "$OUT/ab_tf32" >"$OUT/ab_tf32.txt" 2>&1; echo "ab tf32 rc=$?"
S=512x512x512,768x768x768,1000x1000x1000,1024x1024x1024,1536x1536x1536,8x4096x4096,128x4096x4096
S=$S,1024x2304x768,1024x768x768,1024x3072x768,1024x768x3072,1024x50257x768
S=$S,1024x768x2304,1024x768x50257,2304x768x1024,768x768x1024,3072x768x1024,768x3072x1024,50257x768x1024
timeout 300 python3 benchmarks/ab.py --no-progress --dtypes bf16 --shapes $S --graph-max-mnk 0 \
  --kernels auto hopper_128x256x64 hopper_128x128x64 tensorcore_128x128x32 tensorcore_64x64x32 \
  --out "$OUT/ab_small" >"$OUT/ab_small.txt" 2>&1; echo "ab small rc=$?"
sed -n '/oracle/,$p' "$OUT/ab_tf32.txt" "$OUT/ab_small.txt"
grep -E "tf32 +(4096|8192)" "$OUT/ab_tf32.txt"
