#pragma once
// The argument block every CUDA kernel family takes.
//
// C[b, m, n] = sum_k A[b, m, k] * B[b, k, n] (+ bias[b, m, n])
//
// Operands are addressed through element strides, so a row-major tensor, a
// column-major one (a transposed view such as x.t()) and a strided batch are
// all used in place without a copy. Offsets are int64_t: M * lda alone passes
// 2^31 for an 8192 x 300000 operand. The sizes themselves fit in int (the host
// side checks), so loop counters stay 32-bit.
//
// `bias` is optional (nullptr when absent) and broadcast through its strides
// (a stride of 0 repeats it), which is how an addmm epilogue is fused later.
#include <c10/core/ScalarType.h>
#include <cstdint>

namespace tilelab {

// Type-erased, filled by the host code in tiled_mm.cu.
struct GemmProblem {
  c10::ScalarType dtype;
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  const void* bias = nullptr;
  int M = 0, N = 0, K = 0, batch = 1;
  int64_t sa_m = 0, sa_k = 0, sa_b = 0;
  int64_t sb_k = 0, sb_n = 0, sb_b = 0;
  int64_t sc_m = 0, sc_b = 0;  // C is always unit-stride along n
  int64_t sbias_m = 0, sbias_n = 0, sbias_b = 0;
};

// The typed view a kernel receives by value.
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

  static GemmArgs from(const GemmProblem& p) {
    return GemmArgs{static_cast<const T*>(p.a), static_cast<const T*>(p.b),
                    static_cast<T*>(p.c), static_cast<const T*>(p.bias),
                    p.M, p.N, p.K,
                    p.sa_m, p.sa_k, p.sa_b,
                    p.sb_k, p.sb_n, p.sb_b,
                    p.sc_m, p.sc_b,
                    p.sbias_m, p.sbias_n, p.sbias_b};
  }
};

}  // namespace tilelab
