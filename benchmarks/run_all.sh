#!/usr/bin/env bash
# Run the benchmarks of benchmarks/ into one results folder:
#   benchmarks/results/<gpu-slug>/   (e.g. benchmarks/results/h200; or the folder given as $1)
# which receives the curated files only (see benchmarks/results/h200/README.md):
#   gpu.txt; ab.json/ab.csv (ab); ab_auto.json/ab_auto.csv (ab_auto); fp32_squares.json/.csv
#   (fp32_squares); suite_transformer.json/.csv (transformer); suite_skinny.json/.csv (skinny);
#   suite_unaligned.json/.csv (unaligned);
#   tile_sweep.json (tile_sweep); ncu.json (ncu); roofline.json, roofline.png (roofline);
#   models.json (model).
# Each step's printed table, the build log, the pytest output, the run's log and the
# markdown table (make_readme_table.py) go to the log folder: $OUT, or a new temporary
# folder whose name is printed at the end. A README.md already in the results folder is
# left alone. Sized to take a few minutes on an H100/H200; QUICK=1 shrinks every step
# for a smoke test (~1-2 min).
#
# Environment:
#   OUT=DIR        the log folder; also gets results.tgz (the results folder) and a copy
#                  of roofline.png
#   BUILD=1        build the extension in place first, with the system compiler (see below);
#                  TILELAB_PTXAS_VERBOSE=1 adds ptxas' register/spill report to the build log
#   QUICK=1        small sizes everywhere (validation, not results)
#   STEPS="ab transformer skinny tile_sweep ncu roofline table"   which steps (default: these
#                  seven; transformer and skinny are ab.py --suite, every op on model shapes); also
#                  test (the pytest suite, PYTEST_ARGS), ab_auto (the dispatcher's choice on
#                  AUTO_SHAPES x AUTO_DTYPES), fp32_squares (fp32: the dispatcher and every
#                  blocked row on SQUARE_SHAPES), unaligned (ab.py --suite unaligned: GPT-2's lm_head
#                  and squares one off a multiple of 8, read beside PEERS' pad), model (benchmarks/model_ab.py)
#   AB_SHAPES, AB_DTYPES, AB_KERNELS, SWEEP_SIZES, NCU_SHAPE, NCU_KERNELS, ROOF_SIZE, ROOF_DTYPES,
#   PEAK_SIZE, COPY_GIB, AUTO_SHAPES, AUTO_DTYPES, SQUARE_SHAPES, SQUARE_TIMING, MODEL_ARGS, REP, WARMUP:
#   override sizes and timing
#   SUITE_DTYPES   dtypes of the suite steps (default fp32,tf32,bf16,fp16)
#   PEERS          peer columns of the suite steps (ab.py --peer; default "pad"; "triton pad" adds
#                  torch.compile max-autotune, one compile per op x shape x dtype: tens of minutes)
#   SUITE_ARGS     more ab.py arguments for the suite steps (QUICK=1: --smoke)
# Usage (from the repository root, on a machine with the GPU):
#   OUT=/tmp/out BUILD=1 bash benchmarks/run_all.sh
# The command that produced benchmarks/results/h200 is in its README.md.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
STEPS=${STEPS:-ab transformer skinny tile_sweep ncu roofline table}
LOGDIR=${OUT:-$(mktemp -d /tmp/tilelab_run_all.XXXXXX)}
mkdir -p "$LOGDIR"
LOG=$LOGDIR/run_all.log
: >"$LOG"
say() { echo "$@" | tee -a "$LOG"; }
t_start=$(date +%s)

if [ "${BUILD:-0}" = 1 ]; then
  # The system compiler: a CC/CXX that links libstdc++ statically into the extension
  # (some GPU machines' toolchains do) gives it a private C++ runtime that crashes in
  # std::ostringstream, i.e. in every TORCH_CHECK message.
  ( unset CC CXX; MAX_JOBS=${MAX_JOBS:-16} TORCH_CUDA_ARCH_LIST=${TORCH_CUDA_ARCH_LIST:-9.0} \
      python3 setup.py build_ext --inplace ) >"$LOGDIR/build.log" 2>&1 \
    || { tail -40 "$LOGDIR/build.log"; say "build failed (log: $LOGDIR/build.log)"; exit 1; }
  say "build: $(( $(date +%s) - t_start )) s"
  if [ "${TILELAB_PTXAS_VERBOSE:-0}" = 1 ]; then
    say "ptxas: $(grep -c 'bytes spill' "$LOGDIR/build.log") kernels, $(grep -cE '[1-9][0-9]* bytes spill (stores|loads)' "$LOGDIR/build.log") with spills"
  fi
fi

slug=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
[ -z "$slug" ] && slug=$(python3 -c "import torch; print(torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu')")
# "NVIDIA H200" -> h200, "NVIDIA H100 80GB HBM3" -> h100
slug=$(echo "$slug" | tr 'A-Z' 'a-z' | sed -e 's/^nvidia //' -e 's/geforce //' | awk '{print $1}' | tr -cd 'a-z0-9-')
RES=${1:-benchmarks/results/${slug:-gpu}}
mkdir -p "$RES"
say "# results: $RES; logs: $LOGDIR"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv 2>&1 | tee "$RES/gpu.txt" | tee -a "$LOG"
python3 -c "import torch, tilelab_torch as t; print('torch', torch.__version__, 'cuda', torch.version.cuda); print('configs:', ' '.join(k.name for k in t.kernels('cuda')))" 2>&1 | tee -a "$LOG"

if [ "${QUICK:-0}" = 1 ]; then
  AB_SHAPES=${AB_SHAPES:-256x256x256,1000x1000x1000,2048x2048x2048,333x777x555,8x2048x2048}
  AB_DTYPES=${AB_DTYPES:-fp32,bf16}
  SWEEP_SIZES=${SWEEP_SIZES:-512,1024}
  NCU_SHAPE=${NCU_SHAPE:-1024x1024x1024}
  NCU_KERNELS=${NCU_KERNELS:-padded_32x32x32 padded_nopad_32x32x32 naive_32x32 tiled_32x32x32}
  ROOF_SIZE=${ROOF_SIZE:-2048}; PEAK_SIZE=${PEAK_SIZE:-4096}; COPY_GIB=${COPY_GIB:-0.5}
  AUTO_SHAPES=${AUTO_SHAPES:-1024x1024x1024,1000x1000x1000}
  SQUARE_SHAPES=${SQUARE_SHAPES:-1024x1024x1024,2048x2048x2048,1023x1023x1023}; SQUARE_TIMING=${SQUARE_TIMING:---rep 50 --warmup 10}
  MODEL_ARGS=${MODEL_ARGS:---quick}
  REP=${REP:-50}; WARMUP=${WARMUP:-10}
  SUITE_ARGS=${SUITE_ARGS:---smoke}
fi
# every config x 3 dtypes x these shapes is the longest step (~0.3 s a row); 8192^3 and the
# rest of ab.py's default list are left to ab_auto
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
AUTO_SHAPES=${AUTO_SHAPES:-4096x4096x4096,8192x8192x8192,4095x4095x4095,4097x4097x4097,1000x1000x1000,2048x2048x2048}
AUTO_DTYPES=${AUTO_DTYPES:-fp32,tf32,bf16,fp16}
# fp32_squares: fp32 squares 1024..8192, odd, skinny and model-like shapes, at ab.py's default
# timing unless SQUARE_TIMING="--rep MS --warmup MS"
SQUARE_SHAPES=${SQUARE_SHAPES:-1024x1024x1024,1536x1536x1536,2048x2048x2048,3072x3072x3072,4096x4096x4096,5120x5120x5120,6144x6144x6144,8192x8192x8192,1000x1000x1000,1023x1023x1023,4095x4095x4095,4097x4097x4097,8x4096x4096,128x4096x4096,4096x11008x4096}
MODEL_ARGS=${MODEL_ARGS:---breakdown}
# the suites: every op of ab.py --suite (mm, linear, linear_gelu, bmm; skinny: also the decode set)
SUITE_DTYPES=${SUITE_DTYPES:-fp32,tf32,bf16,fp16}
PEERS=${PEERS-pad}
SUITE_ARGS=${SUITE_ARGS:-}
TIMING="--rep $REP --warmup $WARMUP"

step() {  # name, then the command; its output to $LOGDIR/<name>.txt and the log
  local name=$1; shift
  local t0=$(date +%s)
  say ""; say "## $name: $*"
  "$@" >"$LOGDIR/$name.txt" 2>&1
  local rc=$?
  cat "$LOGDIR/$name.txt" >>"$LOG"
  say "## $name: rc=$rc, $(( $(date +%s) - t0 )) s"
}

for s in $STEPS; do
  case $s in
    ab) step ab python3 benchmarks/ab.py --no-progress --out "$RES" --kernels $AB_KERNELS \
          --shapes "$AB_SHAPES" --dtypes "$AB_DTYPES" $TIMING ;;
    ab_auto) step ab_auto python3 benchmarks/ab.py --no-progress --out "$RES" --name ab_auto --kernels auto \
          --shapes "$AUTO_SHAPES" --dtypes "$AUTO_DTYPES" $TIMING ;;
    fp32_squares)
          blocked=$(python3 -c "import tilelab_torch as t; print(' '.join(k.name for k in t.kernels('cuda') if k.family == 'blocked'))")
          step fp32_squares python3 benchmarks/ab.py --no-progress --out "$RES" --name fp32_squares \
          --kernels auto $blocked --shapes "$SQUARE_SHAPES" --dtypes fp32 --graph-max-mnk 0 ${SQUARE_TIMING:-} ;;
    transformer|skinny|unaligned) step suite_$s python3 benchmarks/ab.py --no-progress --out "$RES" --suite $s \
          --dtypes "$SUITE_DTYPES" ${PEERS:+--peer $PEERS} $SUITE_ARGS $TIMING ;;
    tile_sweep) step tile_sweep python3 benchmarks/tile_sweep.py --no-progress --out "$RES" --no-csv \
          --sizes "$SWEEP_SIZES" $TIMING ;;
    ncu) step ncu python3 benchmarks/profile_ncu.py --no-progress --out "$RES" --no-csv --shape "$NCU_SHAPE" \
          ${NCU_KERNELS:+--kernels $NCU_KERNELS} ;;
    roofline) ncu_json=""; [ -s "$RES/ncu.json" ] && ncu_json="--ncu-json $RES/ncu.json"
          step roofline python3 benchmarks/roofline.py --no-progress --out "$RES" --no-csv --size "$ROOF_SIZE" \
          --dtypes "$ROOF_DTYPES" --peak-size "$PEAK_SIZE" --copy-gib "$COPY_GIB" $ncu_json $TIMING ;;
    test) step pytest python3 -m pytest tests -q -p no:cacheprovider ${PYTEST_ARGS:-}
          grep -E "passed|failed|error" "$LOGDIR/pytest.txt" | tail -1 | tee -a "$LOG"
          grep -E "^(FAILED|ERROR)" "$LOGDIR/pytest.txt" | head -20 | tee -a "$LOG" ;;
    model) step model_ab python3 benchmarks/model_ab.py --out "$RES" $MODEL_ARGS ;;
    table) step table python3 benchmarks/make_readme_table.py "$RES" --suite-tables --out "$LOGDIR/results.md" ;;
    *) say "unknown step $s" ;;
  esac
done
say ""; say "# total: $(( $(date +%s) - t_start )) s; results in $RES, logs in $LOGDIR"
if [ -n "${OUT:-}" ]; then
  cp "$RES/roofline.png" "$LOGDIR/" 2>/dev/null
  tar czf "$LOGDIR/results.tgz" -C "$(dirname "$RES")" "$(basename "$RES")"
  echo "wrote $LOGDIR/{run_all.log,results.md,roofline.png,results.tgz} and the step logs"
fi
