#!/usr/bin/env bash
# Last device call of the third session (2026-11-21): the committed HEAD (after the
# 1/16-wave floor of the hopper 128x128 rule): the tests that touch the chooser and
# the tensor-core families, and the dispatcher on the small half-precision shapes
# around the floor (256^3: 4 tiles, 384^3: 9, 512^3: 16).
#   OUT=$OUT bash benchmarks/tuning/session3_verify.sh
source "$(dirname "$0")/device_env.sh"
build
timeout 300 python3 -m pytest tests -q -p no:cacheprovider -k "hopper or tensorcore or tf32 or auto or explain" \
  >"$OUT/pytest.log" 2>&1; echo "pytest rc=$?"; tail -2 "$OUT/pytest.log"
timeout 120 python3 benchmarks/ab.py --no-progress --dtypes bf16 --graph-max-mnk 0 \
  --shapes 256x256x256,384x384x384,512x512x512,8x4096x4096,4096x4096x4096 \
  --kernels auto hopper_128x128x64 tensorcore_64x64x32 --out "$OUT/ab_floor" >"$OUT/ab_floor.txt" 2>&1
echo "ab rc=$?"; sed -n '/oracle/,$p' "$OUT/ab_floor.txt"
