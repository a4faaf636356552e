#!/usr/bin/env bash
# Device call 8 of the second session (2026-11-21): ncu (run7) put the 128x256x64
# bf16 kernel's stalls mostly on "wait" (fixed-latency dependencies, 2.1 of 5.6
# cycles per issued instruction) with 2 warps per scheduler. Candidate: the same
# 128x256x64 block with 16 warps of 64x32 (<= 128 registers, 4 warps per
# scheduler; 50% more ldmatrix per MMA). Tests of the row, then A/B.
#   OUT=$OUT bash benchmarks/tuning/session2_w16.sh
source "$(dirname "$0")/device_env.sh"
TILELAB_PTXAS_VERBOSE=1 build
grep -A3 "tensorcore_kernel.*Li512\|Li256ELi64ELi2ELi8" "$OUT/build.log" | grep -E "registers|spill" | sort | uniq -c
python3 -m pytest tests/test_tensorcore.py tests/test_correctness.py -q -p no:cacheprovider -k "w16" >"$OUT/pytest.log" 2>&1
echo "pytest rc=$?"; tail -1 "$OUT/pytest.log"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -5
python3 benchmarks/ab.py --no-progress --dtypes bf16,fp16 --graph-max-mnk 0 \
  --kernels tensorcore_128x256x64 tensorcore_w16_128x256x64 \
  --shapes 4096x4096x4096,8192x8192x8192,2048x2048x2048,4097x4097x4097 \
  --out "$OUT/ab_w16" >"$OUT/ab_w16.txt" 2>&1; echo "ab rc=$?"
grep -E "^ *(bf16|fp16) " "$OUT/ab_w16.txt" | cut -c1-110
