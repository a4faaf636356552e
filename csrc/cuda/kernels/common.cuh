#pragma once
// Pieces every kernel family shares: the accumulator type and the epilogue.
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include "../gemm_args.h"

namespace tilelab {

// Half types accumulate in fp32 (like torch.mm); fp32 in fp32; fp64 in fp64.
template <typename T> struct AccOf { using type = float; };
template <> struct AccOf<double> { using type = double; };
template <typename T> using acc_t = typename AccOf<T>::type;

// Write one output element of batch `bz`: C = acc (+ bias), rounded once to T.
// The caller guarantees m < M and n < N.
template <typename T, typename Acc>
__device__ __forceinline__ void store_output(const GemmArgs<T>& p, int bz, int m, int n, Acc acc) {
  if (p.bias != nullptr) {
    acc += static_cast<Acc>(p.bias[bz * p.sbias_b + m * p.sbias_m + n * p.sbias_n]);
  }
  p.c[bz * p.sc_b + static_cast<int64_t>(m) * p.sc_m + n] = static_cast<T>(acc);
}

}  // namespace tilelab
