#pragma once
// The argument block every CUDA kernel receives by value (CUTLASS's "Params"):
// the typed, device-side view of a GemmProblem (../gemm.h), made in one place,
// device_args() in launch.h.
//
// C[b, m, n] = act(sum_k A[b, m, k] * B[b, k, n] (+ bias[b, m, n]))
//
// Operands are addressed through element strides, so a row-major tensor, a
// column-major one (a transposed view such as x.t()) and a strided or
// broadcast (stride 0) batch are all used in place. Offsets are int64_t: M *
// lda alone passes 2^31 for an 8192 x 300000 operand. The sizes themselves fit
// in int (the host checks), so loop counters stay 32-bit. `bias` is nullptr
// when absent and broadcast through its strides (a stride of 0 repeats it).
//
// Split-K: with `partial` set, the work covers splits x batch layers (the
// grid's z, or the persistent tile list), a block computes the k-tiles of its
// split (scheduler.cuh) and stores its raw fp32
// sums into slab (split * batch + b) of `partial` (each slab M x N,
// contiguous); bias and act are then unset and applied by the reduction.
#include <cstdint>

#include "../activation.h"

namespace tilelab {

template <typename T>
struct GemmArgs {
  const T* __restrict__ a;
  const T* __restrict__ b;
  T* __restrict__ c;
  const T* __restrict__ bias;
  int M, N, K;
  int64_t sa_m, sa_k, sa_b;
  int64_t sb_k, sb_n, sb_b;
  int64_t sc_m, sc_b;
  int64_t sbias_m, sbias_n, sbias_b;
  Activation act;
  int batch;               // matrices in this launch (batch * splits layers of work)
  int splits;              // slices of K (1: none)
  float* __restrict__ partial;  // the split-K slabs, nullptr when splits == 1
};

}  // namespace tilelab
