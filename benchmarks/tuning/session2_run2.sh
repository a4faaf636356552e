#!/usr/bin/env bash
# Device call 2 of the second session (2026-11-21): the fp32 chooser with the
# BK=32 row and the aligned copy (tests, compute-sanitizer memcheck incl. the
# copy path, A/B), and the half-precision BK=64 row measured again: 8192^3
# twice in alternation (run 1 saw +-10% between identical kernels there) and
# 128x256 against 128x128 below 3 waves.
#   OUT=$OUT bash benchmarks/tuning/session2_run2.sh
source "$(dirname "$0")/device_env.sh"
build
python3 -m pytest tests/test_blocked.py tests/test_api.py -q -p no:cacheprovider >"$OUT/pytest.log" 2>&1
echo "pytest rc=$?"; tail -2 "$OUT/pytest.log"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head
t0=$(date +%s)
compute-sanitizer --tool memcheck python3 benchmarks/tuning/sanitize_blocked.py >"$OUT/memcheck.txt" 2>&1
echo "memcheck rc=$? ($(( $(date +%s) - t0 )) s)"; tail -3 "$OUT/memcheck.txt"
python3 benchmarks/ab.py --no-progress --dtypes fp32 --kernels auto \
  --shapes 4096x4096x4096,4097x4097x4097,4095x4095x4095,2048x2048x2048,1023x1023x1023 \
  --out "$OUT/ab_fp32_auto" >"$OUT/ab_fp32_auto.txt" 2>&1; echo "ab fp32 rc=$?"
for i in 1 2; do
  for k in tensorcore_128x256x32 tensorcore_128x256x64; do
    python3 benchmarks/ab.py --no-progress --dtypes bf16,fp16 --kernels $k --shapes 8192x8192x8192 \
      >>"$OUT/ab_half_8192.txt" 2>&1
  done
done
python3 benchmarks/ab.py --no-progress --dtypes bf16,fp16 \
  --kernels tensorcore_128x128x32 tensorcore_128x256x32 tensorcore_128x256x64 \
  --shapes 1536x1536x1536,2048x2048x2048,3072x3072x3072,4096x4096x4096,4097x4097x4097,1000x1000x1000 \
  --out "$OUT/ab_half" >"$OUT/ab_half.txt" 2>&1; echo "ab half rc=$?"
grep -E "^ *(fp32|bf16|fp16) " "$OUT/ab_fp32_auto.txt" "$OUT/ab_half_8192.txt" "$OUT/ab_half.txt" | cut -c1-140
