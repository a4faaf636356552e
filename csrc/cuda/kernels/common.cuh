#pragma once
// Pieces every kernel family shares: the accumulator type, shared-memory
// addresses and the stage ring. The tile scheduler is in scheduler.cuh, the
// epilogue in epilogue.cuh.
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>
#include <type_traits>

#include "../gemm_args.h"

namespace tilelab {

// Dynamic shared memory a block may opt into: 227 KB on sm_90, 163 KB on sm_80 (the CUDA programming
// guide's per-architecture limits; the rows that need more than 48 KB check their rings against these).
constexpr int kSm90SmemBytes = 227 * 1024, kSm80SmemBytes = 163 * 1024;

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

// D += A B on the tensor cores (sm_80+): mma.sync m16n8k16, bf16 or fp16
// inputs, fp32 accumulators, in the PTX fragment layouts (lane (g, t) =
// (lane / 4, lane % 4): A rows g, g + 8 at k 2t, 2t + 1, 2t + 8, 2t + 9; B
// column g at the same k; D rows g, g + 8 at columns 2t, 2t + 1).
template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

}  // namespace tilelab
