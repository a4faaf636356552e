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
// are: one pass over the operand on the current stream (pad_rows_kernel:
// 16-byte loads and stores; torch's copy_ into the padded view moved 1.7 TB/s,
// H200, bf16 4096 x 50257). The buffer comes from the PyTorch caching
// allocator and lives in the operand (Operand::keep) until the launch is
// enqueued; the allocator's stream semantics keep the block alive until the
// GEMM on that stream has read it, and CUDA graph capture records it like any
// other allocation. A broadcast operand (batch stride 0) is copied once and
// stays broadcast.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "../gemm.h"

namespace tilelab {

// dst[z][r][0, ld_dst) = src[z][r][0, cont) and zeros after: rows of `cont` elements at any element alignment
// into 16-byte aligned rows of ld_dst (a multiple of 16 bytes). A thread writes one 16-byte chunk, which it
// assembles from the two aligned 16-byte chunks of the source the chunk straddles (shifted into place as two
// 64-bit words), so both the loads and the stores are 16 bytes wide. A chunk whose aligned pair would pass the
// end of its source row (and the row's padding) is read element by element instead: no load leaves the row's
// bytes, except those before its start in the same aligned chunk (still inside the allocation, whose base is
// 16-byte aligned).
template <typename T>
__global__ void pad_rows_kernel(const T* __restrict__ src, T* __restrict__ dst, int64_t rows, int64_t cont,
                                int64_t ld_src, int64_t bs_src, int64_t ld_dst, int64_t bs_dst) {
  constexpr int kVec = 16 / static_cast<int>(sizeof(T));
  const int64_t chunks = ld_dst / kVec;  // a destination row's 16-byte chunks
  src += blockIdx.y * bs_src;
  dst += blockIdx.y * bs_dst;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < rows * chunks;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = i / chunks, c0 = (i - r * chunks) * kVec;
    const T* row = src + r * ld_src;
    const uintptr_t at = reinterpret_cast<uintptr_t>(row + c0), base = at & ~uintptr_t{15};
    uint4 out;
    if (c0 + kVec <= cont && base + 32 <= reinterpret_cast<uintptr_t>(row + cont)) {
      const uint4 lo = __ldg(reinterpret_cast<const uint4*>(base));
      const uint4 hi = __ldg(reinterpret_cast<const uint4*>(base + 16));
      const uint64_t y0 = lo.x | (uint64_t{lo.y} << 32), y1 = lo.z | (uint64_t{lo.w} << 32);
      const uint64_t y2 = hi.x | (uint64_t{hi.y} << 32), y3 = hi.z | (uint64_t{hi.w} << 32);
      const int off = static_cast<int>(at - base), sh = (off & 7) * 8;
      const uint64_t a0 = off >= 8 ? y1 : y0, a1 = off >= 8 ? y2 : y1, a2 = off >= 8 ? y3 : y2;
      const uint64_t o0 = sh == 0 ? a0 : (a0 >> sh) | (a1 << (64 - sh));
      const uint64_t o1 = sh == 0 ? a1 : (a1 >> sh) | (a2 << (64 - sh));
      out = make_uint4(static_cast<uint32_t>(o0), static_cast<uint32_t>(o0 >> 32), static_cast<uint32_t>(o1),
                       static_cast<uint32_t>(o1 >> 32));
    } else {
      T v[kVec];
#pragma unroll
      for (int e = 0; e < kVec; ++e) v[e] = c0 + e < cont ? row[c0 + e] : T(0.0f);
      memcpy(&out, v, 16);
    }
    *reinterpret_cast<uint4*>(dst + r * ld_dst + c0) = out;
  }
}

// `batch` matrices of `rows` x `cont` elements at `src` (row stride ld, batch stride bs) into `dst`, rows of
// ld_pad elements (16-byte aligned, zeros past cont), batch stride rows * ld_pad, on the current stream.
inline void pad_rows(const void* src, c10::ScalarType dtype, int64_t batch, int64_t rows, int64_t cont, int64_t ld,
                     int64_t bs, void* dst, int64_t ld_pad) {
  TORCH_CHECK(batch <= 65535, "tilelab: a batch of more than 65535 operands to copy into aligned rows");
  const int64_t vec = 16 / static_cast<int64_t>(c10::elementSize(dtype));
  const int64_t chunks = rows * (ld_pad / vec);
  constexpr int kThreads = 256;
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const dim3 grid(static_cast<unsigned>(std::max<int64_t>(1, std::min((chunks + kThreads - 1) / kThreads,
                                                                      sms * 2048 / kThreads))),
                  static_cast<unsigned>(batch));
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, "tilelab_pad_rows", [&] {
    pad_rows_kernel<scalar_t><<<grid, kThreads, 0, at::cuda::getCurrentCUDAStream().stream()>>>(
        static_cast<const scalar_t*>(src), static_cast<scalar_t*>(dst), rows, cont, ld, batch == 1 ? 0 : bs, ld_pad,
        rows * ld_pad);
  });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
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
  const int64_t ld_pad = padded16(cont, esz);
  const auto opts = at::TensorOptions().dtype(p.dtype).device(at::kCUDA, c10::cuda::current_device());
  at::Tensor dst = at::empty({batch, rows, ld_pad}, opts);
  pad_rows(o.data, p.dtype, batch, rows, cont, ld, o.s_batch, dst.data_ptr(), ld_pad);
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
  const int64_t ld_pad = padded16(rows, c10::elementSize(p.dtype));
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
