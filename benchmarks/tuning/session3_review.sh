#!/usr/bin/env bash
# Device call after the third session's review refactor (shared layout dispatch,
# aligned-rows step, grouped rasterization; tests moved into conftest): the tests
# of every tensor-core row and the chooser, and the dispatcher's speed on the
# headline half/TF32 shapes (should be unchanged: the kernels are the same).
#   OUT=$OUT bash benchmarks/tuning/session3_review.sh
source "$(dirname "$0")/device_env.sh"
build
timeout 300 python3 -m pytest tests -q -p no:cacheprovider -k "hopper or tensorcore or tf32 or auto or strided or bmm or addmm" \
  >"$OUT/pytest.log" 2>&1; echo "pytest rc=$?"; tail -2 "$OUT/pytest.log"
timeout 120 python3 benchmarks/ab.py --no-progress --dtypes bf16,tf32 --graph-max-mnk 0 \
  --shapes 4096x4096x4096,4095x4095x4095 --kernels auto --out "$OUT/ab" >"$OUT/ab.txt" 2>&1
echo "ab rc=$?"; grep -E "auto:" "$OUT/ab.txt"
