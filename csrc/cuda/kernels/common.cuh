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

// Grouped rasterization of the (gridDim.x M tiles x gridDim.y N tiles) grid:
// consecutive block ids walk a group of kGroupM tile rows column by column, so
// the blocks resident at one time share A and B panels in L2. Sets the block's
// tile coordinates (tm, tn).
constexpr int kGroupM = 8;
__device__ __forceinline__ void grouped_tile(int& tm, int& tn) {
  const int gm = gridDim.x, gn = gridDim.y;
  const int pid = blockIdx.x + blockIdx.y * gm;
  const int per_group = kGroupM * gn;
  const int first_m = (pid / per_group) * kGroupM;
  const int rows = min(gm - first_m, kGroupM);
  tm = first_m + (pid % per_group) % rows;
  tn = (pid % per_group) / rows;
}

}  // namespace tilelab
