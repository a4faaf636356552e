#pragma once
// cp.async (sm_80+) helpers: global -> shared copies that bypass registers, in
// groups the pipeline can wait on. Every copy takes a source size (bytes that
// are really read, 0..cp-size); the rest of the destination is zero-filled,
// which is how out-of-range rows and the K tail become zeros without a branch
// around the copy. A source of size 0 reads nothing, but the address must
// still be a valid global pointer: callers pass the operand's base.
#include <cstdint>

#include "common.cuh"

namespace tilelab {
namespace async_copy {

// 16 bytes, L2 only (.cg): the operand tiles are reused from shared memory, not
// L1. The shared destination is a 32-bit shared-window address
// (smem_u32) computed once per thread by the caller instead of converted per copy.
__device__ __forceinline__ void cp16_u32(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
// 8 and 4 bytes (only .ca exists below 16 bytes).
__device__ __forceinline__ void cp8_u32(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp4_u32(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}

__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::); }

// Wait until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace async_copy
}  // namespace tilelab
