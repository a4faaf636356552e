#!/usr/bin/env bash
# One device-machine call: build, test, benchmark; logs under $OUT.
#   STEPS="build test ab"   which steps to run (default: all three)
#   AB_ARGS="..."           arguments for benchmarks/ab.py
#   PYTEST_ARGS="..."       extra pytest arguments
set -uo pipefail
OUT=${OUT:-out}
mkdir -p "$OUT"
STEPS=${STEPS:-build test ab}
export PYTHONUNBUFFERED=1
# The GPU machine's environment sets CC/CXX to a toolchain in /opt/gcc whose
# g++ links libstdc++ statically into the extension. That private copy of the
# C++ runtime crashes in std::ostringstream (so in every TORCH_CHECK message).
# The system compiler links the system libstdc++ that torch itself uses.
unset CC CXX
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
for step in $STEPS; do
  case $step in
    build)
      t0=$(date +%s)
      MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} \
        python3 -m pip install --no-build-isolation --no-deps -e . >"$OUT/build.log" 2>&1 \
        || { tail -50 "$OUT/build.log"; exit 1; }
      echo "build: $(( $(date +%s) - t0 )) s"
      ;;
    test)
      python3 -m pytest tests -q -p no:cacheprovider ${PYTEST_ARGS:-} >"$OUT/pytest.log" 2>&1
      echo "pytest rc=$?"; grep -E "passed|failed|error" "$OUT/pytest.log" | tail -3
      grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -20
      ;;
    ab)
      python3 benchmarks/ab.py --no-progress --out "$OUT" ${AB_ARGS:-} >"$OUT/ab.txt" 2>&1
      echo "ab rc=$?"
      ;;
  esac
done
