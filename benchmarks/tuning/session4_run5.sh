#!/usr/bin/env bash
# Fourth session, device call 5 (NVIDIA H200): call 4 found the extension's
# 128x256x8 at 4096^3 7% slower than in call 3 (2.995 vs 2.807 ms); the change
# between them made copy_in's 16-byte copies take a run-time byte count (the
# zero-filling cp.async form, LDGSTS...ZFILL in SASS) for every tile. Now only
# a tile past the operand's edge does. Standalone, old = 3519344:
#   mkdir -p benchmarks/tuning/blocked_variants/old && git archive 3519344 csrc/cuda | tar -x -C benchmarks/tuning/blocked_variants/old
#   OUT=$OUT bash benchmarks/tuning/session4_run5.sh
# Predicted: new_wide back to ~2.81 ms at 4096^3.
set -uo pipefail
cd "$(dirname "$0")/../.."
unset CC CXX
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
VARIANTS=variants_clip.txt timeout 300 bash benchmarks/tuning/blocked_variants/run.sh \
  2048,2048,2048 3072,3072,3072 4096,4096,4096 8192,8192,8192 1024,1024,1024
