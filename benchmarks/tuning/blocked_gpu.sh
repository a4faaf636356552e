#!/usr/bin/env bash
# One device call for the blocked family (issue 4): build with ptxas -v, the
# blocked/auto tests, compute-sanitizer memcheck + racecheck on small odd
# shapes, and the fp32 A/B over the default sweep. Logs under $OUT.
#   STEPS="build test sanitize ab"   AB_KERNELS="auto blocked_wide_128x256x16 ..."
set -uo pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
STEPS=${STEPS:-build test sanitize ab}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
unset CC CXX  # see gpu_session.sh: the device's CXX links libstdc++ statically
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
for step in $STEPS; do
  t0=$(date +%s)
  case $step in
    build)
      TILELAB_PTXAS_VERBOSE=1 MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0 python3 setup.py build_ext --inplace \
        >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
      # ptxas lines of the blocked kernels only (the mangled name carries blocked_kernel)
      grep -A3 "blocked_kernel" "$OUT/build.log" | grep -E "Compiling|registers|spill" >"$OUT/ptxas_blocked.txt"
      grep -E "registers|spill" "$OUT/ptxas_blocked.txt" | sort | uniq -c
      ;;
    test)
      python3 -m pytest tests -q -p no:cacheprovider -k "blocked or auto or strided or nan" >"$OUT/pytest.log" 2>&1
      echo "pytest rc=$?"; tail -2 "$OUT/pytest.log"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head -10
      ;;
    sanitize)
      for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool python3 benchmarks/tuning/sanitize_blocked.py >"$OUT/sanitizer_$tool.txt" 2>&1
        echo "$tool rc=$? $(tail -1 "$OUT/sanitizer_$tool.txt")"
      done
      ;;
    ab)
      python3 benchmarks/ab.py --no-progress --dtypes fp32 --kernels ${AB_KERNELS:-all} ${AB_ARGS:-} \
        --out "$OUT" >"$OUT/ab.txt" 2>&1
      echo "ab rc=$?"
      ;;
  esac
  echo "[$step: $(( $(date +%s) - t0 )) s]"
done
