#!/usr/bin/env bash
# Device call 3 of the second session (2026-11-21): a 128x256 TF32 row
# (8 warps of 64x64, BK=32 = 128 bytes of K, like the half 128x256x64 row)
# against the two TF32 rows, plus the tensorcore and API tests on this table.
#   OUT=$OUT bash benchmarks/tuning/session2_run3.sh
source "$(dirname "$0")/device_env.sh"
TILELAB_PTXAS_VERBOSE=1 build
grep -A3 "tensorcore_kernel" "$OUT/build.log" | grep -E "registers|spill" | sort | uniq -c >"$OUT/ptxas_tensorcore.txt"
cat "$OUT/ptxas_tensorcore.txt"
python3 -m pytest tests/test_tensorcore.py tests/test_api.py -q -p no:cacheprovider >"$OUT/pytest.log" 2>&1
echo "pytest rc=$?"; tail -2 "$OUT/pytest.log"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head
python3 benchmarks/ab.py --no-progress --dtypes tf32 \
  --kernels auto tensorcore_tf32_128x128x16 tensorcore_tf32_128x256x32 tensorcore_tf32_64x64x16 \
  --shapes 8192x8192x8192,4096x4096x4096,4095x4095x4095,4097x4097x4097,2048x2048x2048,1536x1536x1536,1000x1000x1000 \
  --out "$OUT/ab_tf32" >"$OUT/ab_tf32.txt" 2>&1; echo "ab tf32 rc=$?"
grep -E "^ *tf32 " "$OUT/ab_tf32.txt" | cut -c1-150
for tool in memcheck racecheck; do
  for s in sanitize_tensorcore sanitize_blocked; do
    t0=$(date +%s)
    SANITIZE_SMALL=$([ $tool = racecheck ] && echo 1 || echo 0) compute-sanitizer --tool $tool python3 benchmarks/tuning/$s.py >"$OUT/${tool}_$s.txt" 2>&1
    echo "$tool $s rc=$? ($(( $(date +%s) - t0 )) s): $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/${tool}_$s.txt" | tail -1)"
  done
done
