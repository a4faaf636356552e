# Sourced by the second session's device scripts (session2_*.sh): repository
# root as the working directory, $OUT, the system compiler, the GPU line, and
# `build` (setup.py build_ext --inplace, log in $OUT/build.log; set
# TILELAB_PTXAS_VERBOSE=1 for ptxas' register/spill report).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
unset CC CXX  # the GPU machine's CXX links libstdc++ statically: see the README's pitfalls
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
build() {
  local t0
  t0=$(date +%s)
  MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} python3 setup.py build_ext --inplace \
    >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
  echo "build: $(( $(date +%s) - t0 )) s"
}
