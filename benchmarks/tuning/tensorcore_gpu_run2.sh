#!/usr/bin/env bash
# Second device call: rebuild, the tensorcore tests, A/B at the target shapes.
set -uo pipefail
unset CC CXX
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
TILELAB_PTXAS_VERBOSE=1 MAX_JOBS=16 TORCH_CUDA_ARCH_LIST=9.0 python3 setup.py build_ext --inplace >"$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
grep -A3 "entry function '_ZN7tilelab17tensorcore" "$OUT/build.log" | grep -E "entry|registers|spill" > "$OUT/ptxas_tensorcore.txt"; rm -f "$OUT/build.log"
timeout 150 python3 -m pytest -q -p no:cacheprovider tests/test_tensorcore.py tests/test_correctness.py tests/test_api.py -k "tensorcore or auto or tf32 or explain or kernels" > "$OUT/pytest.log" 2>&1; echo "pytest rc=$?"; tail -2 "$OUT/pytest.log"; grep -E "^(FAILED|ERROR)" "$OUT/pytest.log" | head
timeout 150 python3 benchmarks/ab.py --no-progress --warmup 10 --rep 40 --out "$OUT" --dtypes bf16,fp16,tf32 \
  --shapes 4096x4096x4096,8192x8192x8192,4095x4095x4095,4097x4097x4097,1000x1000x1000 --kernels auto > "$OUT/ab.txt" 2>&1
echo "ab rc=$?"; grep -vE "^\s*$" "$OUT/ab.txt" | cut -c1-170 | head -20
