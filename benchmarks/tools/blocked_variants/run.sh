#!/usr/bin/env bash
# Standalone sweep of fp32 blocked_kernel variants (csrc/cuda/kernels/blocked.cuh)
# against cublasSgemm, without building the extension: each variant is its own
# translation unit (variant.cu), compiled in parallel, then linked with main.cu,
# which checks every variant against cuBLAS and times them in interleaved rounds
# (row-major A, B and C; IEEE fp32, no TF32).
#
# Usage: bash benchmarks/tools/blocked_variants/run.sh [-v VARIANTS] [--old REV] [--arch SM] [-o DIR] [M,N,K ...]
#   M,N,K ...     shapes (default: 2048,2048,2048 4096,4096,4096 8192,8192,8192); N must be a
#                 multiple of 4 (B is copied with 16-byte copies)
#   -v VARIANTS   a file of variants, one per line: name BM BN BK stages copy_steps [threads]
#                 ('#' starts a comment; threads default 256; 8 x TN thread tiles with
#                 TN = BM*BN / (threads*8) a multiple of 4). Default: the blocked rows of
#                 csrc/cuda/table.h with their stages, copies spread over 2 k-steps as
#                 csrc/cuda/launch_blocked.cu does.
#   --old REV     also build every variant from the blocked.cuh of git revision REV (named
#                 old_<name>), to time two revisions of the main loop in one run; REV's
#                 blocked_kernel must take the same template parameters
#   --arch SM     compute capability without the dot (default: the GPU's, from nvidia-smi; else 90)
#   -o DIR        also write variants.txt (timings), variants_ptxas.txt (registers, spills) and
#                 variants_sass.txt (each main loop's instructions and same-bank FFMAs) there
# Environment: BUILD_DIR (default: a new temporary directory), VARIANTS_CHECK_ONLY=1 (check
# each variant once, no timing: for ncu), NVCC (default nvcc).
# Example: variants of the 128x256 row at BK=16 against the table's rows, old main loop too:
#   printf 'wide_bk16_s3 128 256 16 3 2 256\n' >/tmp/v.txt
#   bash benchmarks/tools/blocked_variants/run.sh -v /tmp/v.txt --old HEAD~1 4096,4096,4096
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
usage() { sed -n '8,26p' "$0" | sed 's/^# \{0,1\}//'; }

VARIANTS="" OLD="" ARCH="" OUTDIR="" shapes=()
while [[ $# -gt 0 ]]; do
  case $1 in
    -v|--variants) VARIANTS=$(cd "$(dirname "$2")" && pwd)/$(basename "$2"); shift 2 ;;
    --old) OLD=$2; shift 2 ;;
    --arch) ARCH=$2; shift 2 ;;
    -o|--out) OUTDIR=$2; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "unknown option $1" >&2; usage >&2; exit 2 ;;
    *) shapes+=("$1"); shift ;;
  esac
done
[[ ${#shapes[@]} -gt 0 ]] || shapes=(2048,2048,2048 4096,4096,4096 8192,8192,8192)
if [[ -z "$ARCH" ]]; then
  ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  ARCH=${ARCH:-90}
fi
NVCC=${NVCC:-nvcc}
BUILD=${BUILD_DIR:-$(mktemp -d /tmp/blocked_variants.XXXXXX)}
mkdir -p "$BUILD"
[[ -n "$OUTDIR" ]] && mkdir -p "$OUTDIR"

# The variant list: the given file, or the table's blocked rows.
LIST=$BUILD/variants.list
if [[ -n "$VARIANTS" ]]; then
  cp "$VARIANTS" "$LIST"
else
  python3 - "$ROOT/csrc/cuda/table.h" >"$LIST" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
# {name, variant, Family::Blocked, tile, bm, bn, bk, warps_m, warps_n, threads, stages, ...}
num = r",\s*(\d+)"
row = re.compile(r'\{\s*"([^"]+)",\s*"[^"]*",\s*Family::Blocked' + num * 8)
rows = row.findall(text)
if not rows:
    sys.exit("no Family::Blocked rows found in " + sys.argv[1] + "; pass -v VARIANTS")
for name, tile, bm, bn, bk, wm, wn, thr, st in rows:
    print(name, bm, bn, bk, st, 2, thr)
EOF
fi
if [[ -n "$OLD" ]]; then
  mkdir -p "$BUILD/old"
  git -C "$ROOT" archive "$OLD" csrc | tar -x -C "$BUILD/old"  # csrc/cuda includes ../activation.h
  awk '!/^[[:space:]]*(#|$)/ { $1 = "old_" $1; print }' "$LIST" >"$LIST.old"
  cat "$LIST.old" >>"$LIST"
fi
echo "# variants (name BM BN BK stages copy_steps threads), build in $BUILD:"
grep -vE '^[[:space:]]*(#|$)' "$LIST"

TI=$(python3 -c "from torch.utils.cpp_extension import include_paths; print(' '.join('-I'+p for p in include_paths()))")
FLAGS="-O3 -std=c++17 --expt-relaxed-constexpr -gencode=arch=compute_$ARCH,code=sm_$ARCH -I$BUILD $TI"
pids=()
while read -r name bm bn bk st cs thr; do
  [[ -z "$name" || "$name" == \#* ]] && continue
  extra=""; [[ "$name" == old_* ]] && extra="-DV_OLD"
  $NVCC -c "$HERE/variant.cu" -o "$BUILD/$name.o" $FLAGS -Xptxas=-v $extra -DV_NAME="\"$name\"" \
    -DV_BM="$bm" -DV_BN="$bn" -DV_BK="$bk" -DV_ST="$st" -DV_CS="$cs" -DV_THREADS="${thr:-256}" \
    2>"$BUILD/$name.ptxas" &
  pids+=($!)
done <"$LIST"
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
if [[ $fail != 0 ]]; then
  for f in "$BUILD"/*.ptxas; do grep -q -i error "$f" && { echo "== $f"; grep -i -B2 -A5 error "$f" | head -40; }; done
  echo "compilation failed" >&2; exit 1
fi
for f in "$BUILD"/*.ptxas; do
  echo "$(basename "$f" .ptxas): $(grep -oE 'Used [0-9]+ registers' "$f" | tail -1), $(grep -oE '[0-9]+ bytes spill stores' "$f" | tail -1)"
done | tee "${OUTDIR:-$BUILD}/variants_ptxas.txt"
# Each variant's main loops from its SASS: instructions, and the FFMAs reading two operands from one
# register bank (benchmarks/tools/sass_loops.py; needs the toolkit's cuobjdump, no GPU).
if command -v cuobjdump >/dev/null; then
  python3 "$HERE/../sass_loops.py" --kernel blocked_kernel "$BUILD"/*.o >"${OUTDIR:-$BUILD}/variants_sass.txt" ||
    echo "sass_loops.py failed (see ${OUTDIR:-$BUILD}/variants_sass.txt)" >&2
fi
$NVCC "$HERE/main.cu" "$BUILD"/*.o -o "$BUILD/variants" $FLAGS -lcublas
"$BUILD/variants" "${shapes[@]}" | tee "${OUTDIR:-$BUILD}/variants.txt"
