// tiled_bmm and tiled_addmm on CPU: the cpu_mm kernel with its batch loop and
// its bias add on write-out (cpu_mm.h).
#include <ATen/ATen.h>
#include <torch/library.h>

#include "../batched_checks.h"
#include "cpu_mm.h"

namespace tilelab {
namespace {

at::Tensor tiled_bmm_cpu(const at::Tensor& a, const at::Tensor& b,
                         std::optional<c10::string_view> variant, std::optional<int64_t> tile) {
  check_bmm_inputs(a, b);
  cpu::check_cpu_override(variant, tile);
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  at::Tensor out = at::empty({B, M, N}, a.options());
  if (B == 0 || M == 0 || N == 0) return out;
  if (K == 0) return out.zero_();
  const BatchedOperand A = as_batched_operand(a), Bo = as_batched_operand(b);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "tilelab_cpu_bmm", [&] {
    cpu::cpu_mm<scalar_t>(A.t.const_data_ptr<scalar_t>(), A.s_row, A.s_col,
                          Bo.t.const_data_ptr<scalar_t>(), Bo.s_row, Bo.s_col,
                          out.mutable_data_ptr<scalar_t>(), M, N, K, B, A.s_batch, Bo.s_batch);
  });
  return out;
}

at::Tensor tiled_addmm_cpu(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b,
                           std::optional<c10::string_view> variant, std::optional<int64_t> tile) {
  check_addmm_inputs(bias, a, b);
  cpu::check_cpu_override(variant, tile);
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  at::Tensor out = at::empty({M, N}, a.options());
  if (M == 0 || N == 0) return out;
  const at::Tensor bv = bias_view(bias, M, N);
  if (K == 0) return out.copy_(bv);
  const Operand A = as_operand(a), Bo = as_operand(b);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "tilelab_cpu_addmm", [&] {
    cpu::cpu_mm<scalar_t>(A.t.const_data_ptr<scalar_t>(), A.s_row, A.s_col,
                          Bo.t.const_data_ptr<scalar_t>(), Bo.s_row, Bo.s_col,
                          out.mutable_data_ptr<scalar_t>(), M, N, K, 1, 0, 0,
                          bv.const_data_ptr<scalar_t>(), bv.stride(0), bv.stride(1), 0);
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(tilelab, CPU, m) {
  m.impl("tiled_bmm", &tiled_bmm_cpu);
  m.impl("tiled_addmm", &tiled_addmm_cpu);
}

}  // namespace tilelab
