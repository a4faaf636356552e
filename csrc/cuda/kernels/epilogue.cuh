#pragma once
// The epilogue every family ends with: accumulators -> (+ bias) -> output
// dtype -> global memory, predicated at the M/N edges. One store per
// accumulator layout, all through value() so the bias (and, later, an
// activation) is applied in one place:
//   store_output  one output (the textbook kernels, and every edge element);
//   store_pair    two adjacent columns (mma.sync and wgmma fragments: rows g
//                 and g + 8, columns 2t and 2t + 1), one 32-/64-bit store;
//   store_quad    four adjacent columns (the blocked SIMT tile), one float4.
// A vector store needs no bias and C rows aligned to the vector: vector_ok().
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "common.cuh"

namespace tilelab {

// The value stored for accumulator `acc` at (bz, m, n): acc (+ bias), rounded
// once to T by the caller.
template <typename T, typename Acc>
__device__ __forceinline__ Acc value(const GemmArgs<T>& p, int bz, int m, int n, Acc acc) {
  if (p.bias != nullptr) acc += static_cast<Acc>(p.bias[bz * p.sbias_b + m * p.sbias_m + n * p.sbias_n]);
  return acc;
}

// One output element of batch bz; the caller guarantees m < M and n < N.
template <typename T, typename Acc>
__device__ __forceinline__ void store_output(const GemmArgs<T>& p, int bz, int m, int n, Acc acc) {
  p.c[bz * p.sc_b + static_cast<int64_t>(m) * p.sc_m + n] = static_cast<T>(value(p, bz, m, n, acc));
}

// Whether kVec adjacent outputs may go out as one store: no bias, and every row
// (and batch) of C starts on a multiple of kVec elements.
template <int kVec, typename T>
__device__ __forceinline__ bool vector_ok(const GemmArgs<T>& p) {
  return p.bias == nullptr && p.sc_m % kVec == 0 && p.sc_b % kVec == 0 &&
         reinterpret_cast<uintptr_t>(p.c) % (kVec * sizeof(T)) == 0;
}

// Outputs (m, n) and (m, n + 1) of batch bz, m < M; `vec`: vector_ok<2>(p).
template <typename T>
__device__ __forceinline__ void store_pair(const GemmArgs<T>& p, int bz, int m, int n, float x, float y, bool vec) {
  if (vec && n + 1 < p.N) {
    T* dst = p.c + bz * p.sc_b + static_cast<int64_t>(m) * p.sc_m + n;
    if constexpr (std::is_same_v<T, float>) {
      *reinterpret_cast<float2*>(dst) = make_float2(x, y);
    } else if constexpr (std::is_same_v<T, c10::BFloat16>) {
      *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(x, y);
    } else {
      static_assert(std::is_same_v<T, c10::Half>, "store_pair: float, bfloat16 or half");
      *reinterpret_cast<__half2*>(dst) = __floats2half2_rn(x, y);
    }
  } else {
    if (n < p.N) store_output(p, bz, m, n, x);
    if (n + 1 < p.N) store_output(p, bz, m, n + 1, y);
  }
}

// Outputs (m, n..n+3) of batch bz (fp32), m < M, of which only the columns in
// [n_lo, N) are stored; `vec`: vector_ok<4>(p) and N % 4 == 0, so a float4
// never straddles N (nor n_lo, a multiple of 4 from N by the caller).
__device__ __forceinline__ void store_quad(const GemmArgs<float>& p, int bz, int m, int n, int n_lo, float v0,
                                           float v1, float v2, float v3, bool vec) {
  if (vec) {
    if (n < p.N && n >= n_lo)
      *reinterpret_cast<float4*>(p.c + bz * p.sc_b + static_cast<int64_t>(m) * p.sc_m + n) = make_float4(v0, v1, v2, v3);
  } else {
    if (n < p.N && n >= n_lo) store_output(p, bz, m, n, v0);
    if (n + 1 < p.N && n + 1 >= n_lo) store_output(p, bz, m, n + 1, v1);
    if (n + 2 < p.N && n + 2 >= n_lo) store_output(p, bz, m, n + 2, v2);
    if (n + 3 < p.N && n + 3 >= n_lo) store_output(p, bz, m, n + 3, v3);
  }
}

}  // namespace tilelab
