#!/usr/bin/env bash
# Run every benchmark of benchmarks/ into one results folder:
#   benchmarks/results/<gpu-slug>-<yyyy-mm-dd>/   (or the folder given as $1)
# holding ab.{json,csv,txt}, tile_sweep.*, ncu.*, roofline.* (+ roofline.png),
# results.md (make_readme_table.py) and gpu.txt. Steps print their tables and
# their wall time. Sized to take about 5 minutes on an H100/H200 (textbook +
# any new families); QUICK=1 shrinks every step for a smoke test (~1-2 min).
#
# Environment:
#   OUT=DIR        also write run_all.log, results.md, roofline.png and
#                  results.tgz (the whole results folder) there: 4-5 files
#   BUILD=1        build the extension in place first (system compiler, log in $OUT/build.log)
#   QUICK=1        small sizes everywhere (validation, not results)
#   STEPS="ab tile_sweep ncu roofline table"   which steps (default: these five); also
#                  test (the pytest suite), ab_auto (dispatcher's choice on the headline
#                  shapes, into auto/), model (benchmarks/model_ab.py, into model_ab/)
#   AB_SHAPES, AB_DTYPES, AB_KERNELS, SWEEP_SIZES, NCU_SHAPE, NCU_KERNELS, ROOF_SIZE, ROOF_DTYPES,
#   AUTO_SHAPES, AUTO_DTYPES, MODEL_ARGS: override sizes
# Usage (from the repository root, on the GPU machine):
#   OUT=$OUT BUILD=1 bash benchmarks/run_all.sh
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
STEPS=${STEPS:-ab tile_sweep ncu roofline table}
LOGDIR=${OUT:-}
[ -n "$LOGDIR" ] && mkdir -p "$LOGDIR"
t_start=$(date +%s)

if [ "${BUILD:-0}" = 1 ]; then
  # The GPU machine's CC/CXX link libstdc++ statically, which crashes every
  # TORCH_CHECK message; the system compiler links the one torch uses.
  ( unset CC CXX; MAX_JOBS=${MAX_JOBS:-16} TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} \
      python3 setup.py build_ext --inplace ) >"${LOGDIR:-/tmp}/build.log" 2>&1 \
    || { tail -40 "${LOGDIR:-/tmp}/build.log"; echo "build failed"; exit 1; }
  echo "build: $(( $(date +%s) - t_start )) s"
fi

slug=$( (nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1) \
        || python3 -c "import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu')")
[ -z "$slug" ] && slug=$(python3 -c "import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu')")
# "NVIDIA H200" -> h200, "NVIDIA H100 80GB HBM3" -> h100
slug=$(echo "$slug" | tr 'A-Z' 'a-z' | sed -e 's/^nvidia //' -e 's/geforce //' | awk '{print $1}' | tr -cd 'a-z0-9-')
RES=${1:-benchmarks/results/${slug:-gpu}-$(date +%Y-%m-%d)}
mkdir -p "$RES"
# The log lives in the results folder (so results.tgz carries it; the device
# machine returns a handful of files per call) and is copied to $OUT at the end.
LOG=$RES/run_all.log
: >"$LOG"
[ "${BUILD:-0}" = 1 ] && cp "${LOGDIR:-/tmp}/build.log" "$RES/build.log"
say() { echo "$@" | tee -a "$LOG"; }
say "# results: $RES"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv 2>&1 | tee "$RES/gpu.txt" | tee -a "$LOG"
python3 -c "import torch, tilelab_torch as t; print('torch', torch.__version__, 'cuda', torch.version.cuda); print('configs:', ' '.join(k.name for k in t.kernels('cuda')))" 2>&1 | tee -a "$LOG"

if [ "${QUICK:-0}" = 1 ]; then
  AB_SHAPES=${AB_SHAPES:-256x256x256,1000x1000x1000,2048x2048x2048,333x777x555,8x2048x2048}
  AB_DTYPES=${AB_DTYPES:-fp32,bf16}
  SWEEP_SIZES=${SWEEP_SIZES:-512,1024}
  NCU_SHAPE=${NCU_SHAPE:-1024x1024x1024}
  NCU_KERNELS=${NCU_KERNELS:-padded_32x32x32 padded_nopad_32x32x32 naive_32x32 tiled_32x32x32}
  ROOF_SIZE=${ROOF_SIZE:-2048}; PEAK_SIZE=${PEAK_SIZE:-4096}; COPY_GIB=${COPY_GIB:-0.5}
  REP=${REP:-50}; WARMUP=${WARMUP:-10}
fi
# every config x 3 dtypes x these shapes is the longest step (~0.3 s a row); 8192^3 and the
# rest of ab.py's default list are left to a separate `ab.py --kernels auto` run
AB_SHAPES=${AB_SHAPES:-256x256x256,1024x1024x1024,2048x2048x2048,4096x4096x4096,1000x1000x1000,4097x4097x4097,333x777x555,8x4096x4096,4096x11008x4096}
AB_DTYPES=${AB_DTYPES:-fp32,bf16,fp16}
AB_KERNELS=${AB_KERNELS:-all}
SWEEP_SIZES=${SWEEP_SIZES:-1024,2048,4096}
NCU_SHAPE=${NCU_SHAPE:-2048x2048x2048}
NCU_KERNELS=${NCU_KERNELS:-}
ROOF_SIZE=${ROOF_SIZE:-4096}; ROOF_DTYPES=${ROOF_DTYPES:-fp32,bf16}
PEAK_SIZE=${PEAK_SIZE:-8192}; COPY_GIB=${COPY_GIB:-2}
REP=${REP:-40}; WARMUP=${WARMUP:-10}
# ab_auto: the dispatcher's choice only, on the headline shapes (8192^3 too) and every dtype
AUTO_SHAPES=${AUTO_SHAPES:-4096x4096x4096,8192x8192x8192,4095x4095x4095,4097x4097x4097,1000x1000x1000}
AUTO_DTYPES=${AUTO_DTYPES:-fp32,tf32,bf16,fp16}
MODEL_ARGS=${MODEL_ARGS:---batch 2 --seq 512 --rep-ms 100 --profile-top 8}
TIMING="--rep $REP --warmup $WARMUP"

step() {  # name, then the command; its output to $RES/<name>.txt and the log
  local name=$1; shift
  local t0=$(date +%s)
  say ""; say "## $name: $*"
  "$@" >"$RES/$name.txt" 2>&1
  local rc=$?
  cat "$RES/$name.txt" >>"$LOG"
  say "## $name: rc=$rc, $(( $(date +%s) - t0 )) s"
}

for s in $STEPS; do
  case $s in
    ab) step ab python3 benchmarks/ab.py --no-progress --out "$RES" --kernels $AB_KERNELS \
          --shapes "$AB_SHAPES" --dtypes "$AB_DTYPES" $TIMING ;;
    tile_sweep) step tile_sweep python3 benchmarks/tile_sweep.py --no-progress --out "$RES" \
          --sizes "$SWEEP_SIZES" $TIMING ;;
    ncu) step ncu python3 benchmarks/profile_ncu.py --no-progress --out "$RES" --shape "$NCU_SHAPE" \
          ${NCU_KERNELS:+--kernels $NCU_KERNELS} ;;
    roofline) ncu_json=""; [ -s "$RES/ncu.json" ] && ncu_json="--ncu-json $RES/ncu.json"
          step roofline python3 benchmarks/roofline.py --no-progress --out "$RES" --size "$ROOF_SIZE" \
          --dtypes "$ROOF_DTYPES" --peak-size "$PEAK_SIZE" --copy-gib "$COPY_GIB" $ncu_json $TIMING ;;
    test) step pytest python3 -m pytest tests -q -p no:cacheprovider ;;
    ab_auto) mkdir -p "$RES/auto"
          step ab_auto python3 benchmarks/ab.py --no-progress --out "$RES/auto" --kernels auto \
          --shapes "$AUTO_SHAPES" --dtypes "$AUTO_DTYPES" $TIMING ;;
    model) step model_ab python3 benchmarks/model_ab.py --out "$RES/model_ab" $MODEL_ARGS ;;
    table) step table python3 benchmarks/make_readme_table.py "$RES" --out "$RES/results.md" ;;
    *) say "unknown step $s" ;;
  esac
done
say ""; say "# total: $(( $(date +%s) - t_start )) s; results in $RES"
if [ -n "$LOGDIR" ]; then
  cp "$LOG" "$LOGDIR/run_all.log"
  cp "$RES/results.md" "$LOGDIR/" 2>/dev/null
  cp "$RES/roofline.png" "$LOGDIR/" 2>/dev/null
  tar czf "$LOGDIR/results.tgz" -C "$(dirname "$RES")" "$(basename "$RES")"
  echo "wrote $LOGDIR/{run_all.log,results.md,roofline.png,results.tgz}"
fi
