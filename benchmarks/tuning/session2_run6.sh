#!/usr/bin/env bash
# Device call 6 of the second session (2026-11-21), on the committed table
# after the 128x128 tensorcore threshold moved to 3/4 of a tile per SM (run 5):
# the chooser and tensorcore tests, GPT-2 GEMM shapes in bf16 (dispatcher only)
# and the GPT-2 model A/B twice (the spread between runs is ~5%).
#   OUT=$OUT bash benchmarks/tuning/session2_run6.sh
source "$(dirname "$0")/device_env.sh"
build
python3 -m pytest tests/test_api.py tests/test_tensorcore.py tests/test_model.py -q -p no:cacheprovider >"$OUT/pytest.log" 2>&1
echo "pytest rc=$?"; tail -1 "$OUT/pytest.log"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head
S=1024x2304x768,1024x768x768,1024x3072x768,1024x768x3072,1024x50257x768
S=$S,1024x768x2304,1024x768x50257,2304x768x1024,768x768x1024,3072x768x1024,768x3072x1024,50257x768x1024
python3 benchmarks/ab.py --no-progress --dtypes bf16 --shapes $S --graph-max-mnk 0 --kernels auto \
  --out "$OUT/ab_gpt2_bf16_auto" >"$OUT/ab_gpt2_bf16_auto.txt" 2>&1; echo "ab rc=$?"
grep -E "^ *bf16 " "$OUT/ab_gpt2_bf16_auto.txt" | cut -c1-110
python3 benchmarks/model_ab.py --out "$OUT/model_ab" --batch 2 --seq 512 --rep-ms 100 --profile-top 8 >"$OUT/model_ab.txt" 2>&1
echo "model rc=$?"; grep ratio "$OUT/model_ab.txt"
python3 benchmarks/model_ab.py --out "$OUT/model_ab_2" --batch 2 --seq 512 --rep-ms 100 --profile-top 0 2>&1 | grep ratio | tee "$OUT/model_ab_repeat.txt"
