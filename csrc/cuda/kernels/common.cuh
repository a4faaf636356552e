#pragma once
// Pieces every kernel family shares: the accumulator type, shared-memory
// addresses and the stage ring. The tile scheduler is in scheduler.cuh, the
// epilogue in epilogue.cuh.
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>

#include "../gemm_args.h"

namespace tilelab {

// Half types accumulate in fp32 (like torch.mm); fp32 in fp32; fp64 in fp64.
template <typename T> struct AccOf { using type = float; };
template <> struct AccOf<double> { using type = double; };
template <typename T> using acc_t = typename AccOf<T>::type;

// A generic pointer into shared memory as a 32-bit shared-window address (what
// cp.async, ldmatrix, TMA and mbarrier instructions take).
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The next slot of a ring of kStages pipeline stages kStride apart (a stage
// index with kStride 1, or a byte offset).
template <int kStages, int kStride = 1>
__device__ __forceinline__ int next_stage(int s) {
  return s == (kStages - 1) * kStride ? 0 : s + kStride;
}

}  // namespace tilelab
