#pragma once
// Operands whose rows are not 16-byte aligned, for the launchers whose fast
// copy path needs them (tensorcore and hopper: always; blocked: its float4
// path, above a size).
//
// An operand whose row starts are not 16-byte aligned (fp32 with a leading
// dimension not a multiple of 4 such as N = 4095, half with an odd one, a
// misaligned view like x[1:, 1:]) is copied into a fresh buffer whose rows
// are: one elementwise copy on the current stream, a bandwidth-bound pass over
// the operand (~2 x 64 MB for a 4095^2 fp32 operand: tens of microseconds
// against a multi-millisecond GEMM). The buffer comes from the PyTorch caching
// allocator and lives in the operand (Operand::keep) until the launch is
// enqueued; the allocator's stream semantics keep the block alive until the
// GEMM on that stream has read it, and CUDA graph capture records it like any
// other allocation. A broadcast operand (batch stride 0) is copied once and
// stays broadcast.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>

#include <cstdint>

#include "../gemm.h"

namespace tilelab {

// Every row start (and every batch start) of the operand is 16-byte aligned.
inline bool rows_aligned16(const void* ptr, int64_t ld, int64_t batch_stride, int64_t batch, size_t elem) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && (ld * static_cast<int64_t>(elem)) % 16 == 0 &&
         (batch == 1 || (batch_stride * static_cast<int64_t>(elem)) % 16 == 0);
}

// Operand `o` of p (A if is_a) in aligned rows: copied where its rows are not.
inline void align_operand(GemmProblem& p, Operand& o, bool is_a) {
  const size_t esz = c10::elementSize(p.dtype);
  const int64_t mn = is_a ? p.M : p.N;
  // Stored as [batch][rows][cont], unit stride along cont, `ld` between rows.
  int64_t& ld = o.k_contiguous ? o.s_mn : o.s_k;
  const int64_t rows = o.k_contiguous ? mn : p.K, cont = o.k_contiguous ? p.K : mn;
  const bool broadcast = p.batch > 1 && o.s_batch == 0;
  const int64_t batch = broadcast ? 1 : p.batch;
  if (rows_aligned16(o.data, ld, o.s_batch, batch, esz)) return;
  const int64_t vec = 16 / static_cast<int64_t>(esz);
  const int64_t ld_pad = (cont + vec - 1) / vec * vec;
  const auto opts = at::TensorOptions().dtype(p.dtype).device(at::kCUDA, c10::cuda::current_device());
  const at::Tensor src = at::from_blob(const_cast<void*>(o.data), {batch, rows, cont},
                                       {batch == 1 ? rows * ld : o.s_batch, ld, 1}, opts);
  at::Tensor dst = at::empty({batch, rows, ld_pad}, opts);
  dst.narrow(2, 0, cont).copy_(src);
  o.keep = dst;
  o.data = dst.data_ptr();
  ld = ld_pad;
  o.s_batch = broadcast ? 0 : rows * ld_pad;
}

// Operand `o` of p (A if is_a), k-contiguous, copied into an m/n-contiguous
// buffer with 16-byte-aligned rows ([batch][K][m or n, rounded up]): one
// bandwidth-bound pass (torch's copy_ of the transposed view), for a family
// whose m/n-contiguous path is the faster one.
inline void mn_contiguous_copy(GemmProblem& p, Operand& o, bool is_a) {
  const size_t esz = c10::elementSize(p.dtype);
  const int64_t mn = is_a ? p.M : p.N;
  const bool broadcast = p.batch > 1 && o.s_batch == 0;
  const int64_t batch = broadcast ? 1 : p.batch;
  const int64_t vec = 16 / static_cast<int64_t>(esz);
  const int64_t ld_pad = (mn + vec - 1) / vec * vec;
  const auto opts = at::TensorOptions().dtype(p.dtype).device(at::kCUDA, c10::cuda::current_device());
  const at::Tensor src = at::from_blob(const_cast<void*>(o.data), {batch, mn, p.K},
                                       {batch == 1 ? mn * o.s_mn : o.s_batch, o.s_mn, 1}, opts);
  at::Tensor dst = at::empty({batch, p.K, ld_pad}, opts);
  dst.narrow(2, 0, mn).copy_(src.transpose(1, 2));
  o.keep = dst;
  o.data = dst.data_ptr();
  o.s_k = ld_pad;
  o.s_mn = 1;
  o.s_batch = broadcast ? 0 : p.K * ld_pad;
  o.k_contiguous = false;
}

// Both operands of p in aligned rows.
inline void align_operand_rows(GemmProblem& p) {
  align_operand(p, p.a, true);
  align_operand(p, p.b, false);
}

}  // namespace tilelab
