#!/usr/bin/env bash
# Device call 9 of the second session (2026-11-21): after the family launchers
# took over asking for the current CUDA stream (no stream parameter any more),
# the stream / CUDA-graph / torch.compile tests and the correctness suite.
#   OUT=$OUT bash benchmarks/tuning/session2_streams.sh
source "$(dirname "$0")/device_env.sh"
build
timeout 200 python3 -m pytest tests/test_correctness.py tests/test_model.py tests/test_api.py -q -p no:cacheprovider \
  >"$OUT/pytest.log" 2>&1
echo "pytest rc=$?"; tail -1 "$OUT/pytest.log"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head
python3 -m pytest tests -v -p no:cacheprovider -k "stream or graph or compile" 2>&1 | grep -E "PASSED|FAILED|ERROR" \
  | sed -e 's/ *\[.*%\]//' | tee "$OUT/pytest_streams.txt"
