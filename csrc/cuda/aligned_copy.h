#pragma once
// Operand copies the launchers make before a kernel: aligned rows
// (align_operand) and the other dimension contiguous (flip_contiguity).
//
// Aligned rows, for the launchers whose fast copy path needs them (tensorcore
// and hopper: always; blocked: its float4 path, above a size).
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
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>

#include <cstdint>

#include "../gemm.h"

namespace tilelab {

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

// out[z][c][r] = in[z][r][c] through 32 x 32 shared-memory tiles (padded by one
// column against bank conflicts), so both the reads and the writes coalesce.
// (torch's copy_ of a transposed view reads with a stride and ran at about half
// this speed.)
template <typename T>
__global__ void transpose_kernel(const T* __restrict__ in, T* __restrict__ out, int rows, int cols, int64_t ld_in,
                                 int64_t bs_in, int64_t ld_out, int64_t bs_out) {
  __shared__ T tile[32][33];
  const int c0 = blockIdx.x * 32, r0 = blockIdx.y * 32;
  in += blockIdx.z * bs_in;
  out += blockIdx.z * bs_out;
  for (int i = threadIdx.y; i < 32; i += 8) {
    const int r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[i][threadIdx.x] = in[r * ld_in + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += 8) {
    const int c = c0 + i, r = r0 + threadIdx.x;
    if (r < rows && c < cols) out[c * ld_out + r] = tile[threadIdx.x][i];
  }
}

// An operand `o` of p (A if is_a) copied transposed into a fresh buffer with
// 16-byte aligned rows, so that its other dimension becomes the contiguous
// one: k-contiguous <-> m/n-contiguous (TF32 wgmma and gemv_mma read only
// k-contiguous operands; the blocked kernels' fast path wants an
// m/n-contiguous B). One bandwidth-bound pass; a broadcast batch (stride 0) is
// copied once and stays broadcast.
inline void flip_contiguity(GemmProblem& p, Operand& o, bool is_a) {
  TORCH_CHECK(p.dtype == at::kFloat || p.dtype == at::kHalf || p.dtype == at::kBFloat16,
              "tilelab: flip_contiguity copies fp32, fp16 and bf16 operands");
  const int64_t mn = is_a ? p.M : p.N;
  // Stored as [batch][rows][cont], unit stride along cont, `ld` between rows.
  const int64_t rows = o.k_contiguous ? mn : p.K, cont = o.k_contiguous ? p.K : mn;
  const int64_t ld = o.k_contiguous ? o.s_mn : o.s_k;
  const bool broadcast = p.batch > 1 && o.s_batch == 0;
  const int64_t batch = broadcast ? 1 : p.batch;
  TORCH_CHECK(rows < (int64_t{1} << 31) && cont < (int64_t{1} << 31) && batch <= 65535,
              "tilelab: operand too large to transpose");
  const int64_t vec = 16 / static_cast<int64_t>(c10::elementSize(p.dtype));
  const int64_t ld_pad = (rows + vec - 1) / vec * vec;
  const auto opts = at::TensorOptions().dtype(p.dtype).device(at::kCUDA, c10::cuda::current_device());
  at::Tensor dst = at::empty({batch, cont, ld_pad}, opts);
  const dim3 grid((cont + 31) / 32, (rows + 31) / 32, batch), block(32, 8);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, p.dtype, "tilelab_flip_contiguity", [&] {
    transpose_kernel<scalar_t><<<grid, block, 0, at::cuda::getCurrentCUDAStream().stream()>>>(
        static_cast<const scalar_t*>(o.data), dst.data_ptr<scalar_t>(), static_cast<int>(rows),
        static_cast<int>(cont), ld, batch == 1 ? 0 : o.s_batch, ld_pad, cont * ld_pad);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  o.keep = dst;
  o.data = dst.data_ptr();
  // Now stored [batch][cont][rows]: the dimension that was rows is contiguous.
  if (o.k_contiguous) {
    o.s_k = ld_pad, o.s_mn = 1;
  } else {
    o.s_mn = ld_pad, o.s_k = 1;
  }
  o.k_contiguous = !o.k_contiguous;
  o.s_batch = broadcast ? 0 : cont * ld_pad;
}

// Both operands of p in aligned rows.
inline void align_operand_rows(GemmProblem& p) {
  align_operand(p, p.a, true);
  align_operand(p, p.b, false);
}

}  // namespace tilelab
