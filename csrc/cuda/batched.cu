// Host side of tiled_bmm and tiled_addmm on CUDA: the same kernels as
// tiled_mm, with the batch as blockIdx.z (per-operand batch strides, 0 for a
// broadcast batch) and the addmm bias added in the kernels' epilogue.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <string>
#include <string_view>

#include "../batched_checks.h"
#include "configs.h"
#include "host.h"

namespace tilelab {
namespace {

// CUDA's limit on gridDim.z: larger batches run in chunks of this many.
constexpr int64_t kMaxGridZ = 65535;

at::Tensor tiled_bmm_cuda(const at::Tensor& a, const at::Tensor& b,
                          std::optional<c10::string_view> variant, std::optional<int64_t> tile) {
  check_bmm_inputs(a, b);
  const c10::cuda::CUDAGuard guard(a.device());
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  at::Tensor out = at::empty({B, M, N}, a.options());
  const BatchedOperand A = as_batched_operand(a), Bo = as_batched_operand(b);
  const Problem pr = make_problem(M, N, K, a.scalar_type(), A.row_major, Bo.row_major);
  // Validate an override even when there is nothing to compute.
  const Choice choice = choose_for(pr, a.get_device(), variant, tile);
  if (B == 0 || M == 0 || N == 0) return out;
  if (K == 0) return out.zero_();

  GemmProblem p;
  p.dtype = pr.dtype;
  p.M = static_cast<int>(M);
  p.N = static_cast<int>(N);
  p.K = static_cast<int>(K);
  p.sa_m = A.s_row;
  p.sa_k = A.s_col;
  p.sa_b = A.s_batch;
  p.sb_k = Bo.s_row;
  p.sb_n = Bo.s_col;
  p.sb_b = Bo.s_batch;
  p.sc_m = N;
  p.sc_b = M * N;
  const int64_t esize = static_cast<int64_t>(at::elementSize(pr.dtype));
  const auto* a0 = static_cast<const char*>(A.t.data_ptr());
  const auto* b0 = static_cast<const char*>(Bo.t.data_ptr());
  auto* c0 = static_cast<char*>(out.data_ptr());
  for (int64_t z0 = 0; z0 < B; z0 += kMaxGridZ) {
    p.batch = static_cast<int>(std::min(kMaxGridZ, B - z0));
    p.a = a0 + z0 * A.s_batch * esize;
    p.b = b0 + z0 * Bo.s_batch * esize;
    p.c = c0 + z0 * p.sc_b * esize;
    launch(*choice.cfg, p);
  }
  return out;
}

at::Tensor tiled_addmm_cuda(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b,
                            std::optional<c10::string_view> variant, std::optional<int64_t> tile) {
  check_addmm_inputs(bias, a, b);
  const c10::cuda::CUDAGuard guard(a.device());
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  const Operand A = as_operand(a), Bo = as_operand(b);
  const Problem pr = make_problem(M, N, K, a.scalar_type(), A.row_major, Bo.row_major);
  const Choice choice = choose_for(pr, a.get_device(), variant, tile);
  at::Tensor out = at::empty({M, N}, a.options());
  if (M == 0 || N == 0) return out;
  const at::Tensor bv = bias_view(bias, M, N);
  if (K == 0) return out.copy_(bv);

  GemmProblem p = gemm_problem(pr, A, Bo, out);
  p.bias = bv.data_ptr();
  p.sbias_m = bv.stride(0);
  p.sbias_n = bv.stride(1);
  launch(*choice.cfg, p);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(tilelab, CUDA, m) {
  m.impl("tiled_bmm", &tiled_bmm_cuda);
  m.impl("tiled_addmm", &tiled_addmm_cuda);
}

}  // namespace tilelab
