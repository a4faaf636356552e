#!/usr/bin/env bash
# Standalone sweep of blocked_kernel variants (fp32, row-major A and B, 8 x TN
# thread tile) against cublasSgemm, without building the
# extension: each variant is its own translation unit, compiled in parallel.
#   OUT=dir bash benchmarks/tuning/blocked_variants/run.sh [M,N,K ...]
# Variants are listed in a file (VARIANTS, default variants.txt: name BM BN BK
# stages copy_steps [threads]); a
# name starting with "old" builds the kernel of the previous commit, which the
# caller extracts beforehand into old/ (git show, see variants.txt), so the old
# and new main loops are timed in the same run (OLD_FLAGS=-DV_OLD_NO_COPY_STEPS
# for an old/ before 3519344).
set -euo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-out}; mkdir -p "$OUT"; rm -rf build; mkdir build
[[ $# -gt 0 ]] || set -- 2048,2048,2048 4096,4096,4096 8192,8192,8192
TI=$(python3 -c "from torch.utils.cpp_extension import include_paths; print(' '.join('-I'+p for p in include_paths()))")
FLAGS="-O3 -std=c++17 --expt-relaxed-constexpr -gencode=arch=compute_90,code=sm_90 $TI"
pids=()
while read -r name bm bn bk st cs thr; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  extra=""; [[ "$name" == old* ]] && extra="-DV_OLD ${OLD_FLAGS:-}"
  nvcc -c variant.cu -o "build/$name.o" $FLAGS -Xptxas=-v $extra -DV_NAME="\"$name\"" \
    -DV_BM=$bm -DV_BN=$bn -DV_BK=$bk -DV_ST=$st -DV_CS=$cs -DV_THREADS=${thr:-256} 2>"build/$name.ptxas" &
  pids+=($!)
done < "${VARIANTS:-variants.txt}"
for p in "${pids[@]}"; do wait "$p"; done
for f in build/*.ptxas; do
  echo "$(basename "$f" .ptxas): $(grep -oE 'Used [0-9]+ registers' "$f" | tail -1), $(grep -oE '[0-9]+ bytes spill stores' "$f" | tail -1)"
done | tee "$OUT/variants_ptxas.txt"
nvcc main.cu build/*.o -o build/variants $FLAGS -lcublas
./build/variants "$@" | tee "$OUT/variants.txt"
