#!/usr/bin/env bash
# Device call 5 of the second session (2026-11-21): the GPT-2 A/B of the final
# run came out slower than the first session's (tilelab and cuBLAS both, but
# tilelab more). Repeat model_ab to see the run-to-run spread, and time every
# GEMM shape of GPT-2 small at batch 2 x 512 (1024 tokens, d = 768, vocab
# 50257; forward, grad-input and grad-weight shapes) with the candidate rows,
# so the chooser's thresholds are checked on model shapes, not only cubes.
#   OUT=$OUT bash benchmarks/tuning/session2_run5.sh
source "$(dirname "$0")/device_env.sh"
build
for i in 1 2; do
  python3 benchmarks/model_ab.py --out "$OUT/model_ab_$i" --batch 2 --seq 512 --rep-ms 100 --profile-top 0 2>&1 \
    | grep -E "ratio" | tee -a "$OUT/model_ab_repeat.txt"
done
S=1024x2304x768,1024x768x768,1024x3072x768,1024x768x3072,1024x50257x768
S=$S,1024x768x2304,1024x768x50257,2304x768x1024,768x768x1024,3072x768x1024,768x3072x1024,50257x768x1024
python3 benchmarks/ab.py --no-progress --dtypes bf16 --shapes $S --graph-max-mnk 0 \
  --kernels auto tensorcore_128x256x64 tensorcore_128x128x32 tensorcore_64x64x32 \
  --out "$OUT/ab_gpt2_bf16" >"$OUT/ab_gpt2_bf16.txt" 2>&1; echo "ab bf16 rc=$?"
python3 benchmarks/ab.py --no-progress --dtypes fp32 --shapes $S --graph-max-mnk 0 \
  --kernels auto blocked_wide_128x256x16 blocked_k16_64x64x16 \
  --out "$OUT/ab_gpt2_fp32" >"$OUT/ab_gpt2_fp32.txt" 2>&1; echo "ab fp32 rc=$?"
sed -n '/oracle/,$p' "$OUT/ab_gpt2_bf16.txt" "$OUT/ab_gpt2_fp32.txt"
