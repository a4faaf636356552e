#!/usr/bin/env bash
# Fourth session, device call 3 (NVIDIA H200):
#  1. the standalone sweep of the small-shape tiles with the new main loop
#     (blocked_variants/variants_small.txt) against the old 64x64x16 and cuBLAS;
#  2. the extension with blocked_wide_128x256x8 (BK=8, 4 stages, copies over 2
#     k-steps; standalone: 2.814 ms at 4096^3 against 3.095 for the old 128x256x16):
#     build with ptxas -v, the fp32/blocked tests, ab.py fp32 against
#     torch.matmul, compute-sanitizer memcheck and racecheck on every blocked row.
# Predicted for ab.py: 4096^3 and 8192^3 at 0.95-0.97x cuBLAS; 4095^3 ~0.95;
# 4097^3 above its 0.80 (edge blocks take the predicated path).
#   mkdir -p benchmarks/tuning/blocked_variants/old && git archive 69119bd csrc/cuda | tar -x -C benchmarks/tuning/blocked_variants/old
#   OUT=$OUT bash benchmarks/tuning/session4_run3.sh
source "$(dirname "$0")/device_env.sh"
R=$OUT/run3; mkdir -p "$R/small"
VARIANTS=variants_small.txt OUT=$R/small timeout 150 bash benchmarks/tuning/blocked_variants/run.sh \
  512,512,512 1024,1024,1024 1536,1536,1536 2048,2048,2048 3072,3072,3072 4096,4096,4096 128,4096,4096 8,4096,4096 \
  > "$R/small.log" 2>&1; echo "small sweep rc=$?"
TILELAB_PTXAS_VERBOSE=1 build
mv "$OUT/build.log" "$R/"
echo "ptxas: $(grep -c 'bytes spill' "$R/build.log") kernels, $(grep -cE '[1-9][0-9]* bytes spill (stores|loads)' "$R/build.log") with spills" | tee "$R/ptxas_summary.txt"
timeout 200 python3 -m pytest tests -q -p no:cacheprovider -k "blocked or auto or strided or nan or fp32 or bmm or addmm" \
  >"$R/pytest.log" 2>&1; echo "pytest rc=$?"; tail -2 "$R/pytest.log"
S=4096x4096x4096,8192x8192x8192,4095x4095x4095,4097x4097x4097,2048x2048x2048,3072x3072x3072,1024x1024x1024,1023x1023x1023,1000x1000x1000,1536x1536x1536
timeout 150 python3 benchmarks/ab.py --no-progress --dtypes fp32 --shapes $S --graph-max-mnk 0 \
  --kernels auto blocked_wide_128x256x8 blocked_k16_64x64x16 --out "$R/ab_fp32" >"$R/ab_fp32.txt" 2>&1
echo "ab rc=$?"; grep -E "auto:" "$R/ab_fp32.txt"
unset CC CXX
SANITIZE_SMALL=0 timeout 120 compute-sanitizer --tool memcheck python3 benchmarks/tuning/sanitize_blocked.py >"$R/memcheck_blocked.txt" 2>&1
echo "memcheck rc=$?: $(grep -E 'ERROR SUMMARY' "$R/memcheck_blocked.txt" | tail -1)"
SANITIZE_SMALL=1 timeout 120 compute-sanitizer --tool racecheck python3 benchmarks/tuning/sanitize_blocked.py >"$R/racecheck_blocked.txt" 2>&1
echo "racecheck rc=$?: $(grep -E 'RACECHECK SUMMARY' "$R/racecheck_blocked.txt" | tail -1)"
cat "$R/small/variants.txt"
tar czf "$OUT/run3.tgz" -C "$OUT" run3
rm -rf "$R"
