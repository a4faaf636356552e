#pragma once
// Host helper shared by the family launchers whose fast copy path needs
// 16-byte-aligned operand rows (tensorcore: always; blocked: its float4 path).
//
// An operand whose row starts are not 16-byte aligned (fp32 with a leading
// dimension not a multiple of 4 such as N = 4095, half with an odd one, a
// misaligned view like x[1:, 1:]) is copied into a fresh buffer whose rows
// are: one elementwise copy on the current stream, a bandwidth-bound pass over
// the operand (~2 x 64 MB for a 4095^2 fp32 operand: tens of microseconds
// against a multi-millisecond GEMM). The buffer comes from the PyTorch caching
// allocator and is released after the launch; the allocator's stream semantics
// keep the block alive until the GEMM on that stream has read it, and CUDA
// graph capture records it like any other allocation.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>

#include <cstdint>

#include "gemm_args.h"

namespace tilelab {

// Every row start (and every batch start) of the operand is 16-byte aligned.
inline bool rows_aligned16(const void* ptr, int64_t ld, int64_t batch_stride, int batch, size_t elem) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && (ld * static_cast<int64_t>(elem)) % 16 == 0 &&
         (batch == 1 || (batch_stride * static_cast<int64_t>(elem)) % 16 == 0);
}

// Copies operand `ptr` (batch x rows x cont in its stored orientation, unit
// stride along cont) into a fresh buffer with 16-byte-aligned rows; returns the
// buffer and sets ld / batch_stride to its strides.
inline at::Tensor aligned_copy(const void* ptr, c10::ScalarType dtype, int batch, int64_t rows, int64_t cont,
                               int64_t& ld, int64_t& batch_stride) {
  const int64_t vec = 16 / static_cast<int64_t>(c10::elementSize(dtype));
  const int64_t ld_pad = (cont + vec - 1) / vec * vec;
  const auto opts = at::TensorOptions().dtype(dtype).device(at::kCUDA, c10::cuda::current_device());
  const at::Tensor src = at::from_blob(const_cast<void*>(ptr), {batch, rows, cont},
                                       {batch == 1 ? rows * ld : batch_stride, ld, 1}, opts);
  at::Tensor dst = at::empty({batch, rows, ld_pad}, opts);
  dst.narrow(2, 0, cont).copy_(src);
  ld = ld_pad;
  batch_stride = rows * ld_pad;
  return dst;
}

// The 16-byte-copy launchers (tensorcore, hopper): copies A and/or B into
// aligned rows where rows_aligned16 fails, pointing p at the copies (kept alive
// in a_copy / b_copy until the launch is enqueued). a_kmajor / b_kmajor: the
// operand is stored k-contiguous (else m/n-contiguous). A broadcast operand
// (batch stride 0) is copied once and stays broadcast.
inline void align_operand_rows(GemmProblem& p, bool a_kmajor, bool b_kmajor, at::Tensor& a_copy,
                               at::Tensor& b_copy) {
  const size_t esz = c10::elementSize(p.dtype);
  auto fix = [&](const void*& ptr, int64_t& ld, int64_t& bstride, int64_t rows, int64_t cont, at::Tensor& keep) {
    const bool broadcast = p.batch > 1 && bstride == 0;
    const int batch = broadcast ? 1 : p.batch;
    if (rows_aligned16(ptr, ld, bstride, batch, esz)) return;
    keep = aligned_copy(ptr, p.dtype, batch, rows, cont, ld, bstride);
    ptr = keep.data_ptr();
    if (broadcast) bstride = 0;
  };
  fix(p.a, a_kmajor ? p.sa_m : p.sa_k, p.sa_b, a_kmajor ? p.M : p.K, a_kmajor ? p.K : p.M, a_copy);
  fix(p.b, b_kmajor ? p.sb_n : p.sb_k, p.sb_b, b_kmajor ? p.N : p.K, b_kmajor ? p.K : p.N, b_copy);
}

}  // namespace tilelab
