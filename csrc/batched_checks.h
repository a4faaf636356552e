#pragma once
// Validation and operand views for tiled_bmm and tiled_addmm, shared by the
// CPU and CUDA implementations (the 2-D pieces are in checks.h).
#include <ATen/ATen.h>

#include <cstdint>
#include <limits>

#include "checks.h"

namespace tilelab {

inline void check_bmm_inputs(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() == 3 && b.dim() == 3, "tilelab::tiled_bmm: expected 3-D tensors, got a of shape ",
              a.sizes(), " and b of shape ", b.sizes());
  TORCH_CHECK(a.size(0) == b.size(0), "tilelab::tiled_bmm: batch sizes differ: a is ", a.sizes(),
              " and b is ", b.sizes(), " (expand a size-1 batch explicitly, e.g. b.expand(",
              a.size(0), ", -1, -1): a stride-0 batch is read in place)");
  TORCH_CHECK(a.size(2) == b.size(1), "tilelab::tiled_bmm: inner dimensions differ: a is ", a.sizes(),
              " and b is ", b.sizes(), " (a.size(2)=", a.size(2), " must equal b.size(1)=", b.size(1), ")");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "tilelab::tiled_bmm: a and b must have the same dtype, got ",
              dtype_str(a.scalar_type()), " and ", dtype_str(b.scalar_type()));
  TORCH_CHECK(is_supported_dtype(a.scalar_type()), "tilelab::tiled_bmm: unsupported dtype ",
              dtype_str(a.scalar_type()),
              "; supported: torch.float32, torch.float64, torch.float16, torch.bfloat16");
  TORCH_CHECK(a.device() == b.device(), "tilelab::tiled_bmm: a is on ", a.device(), " and b is on ",
              b.device(), "; both operands must be on the same device");
  TORCH_CHECK(a.layout() == c10::kStrided && b.layout() == c10::kStrided,
              "tilelab::tiled_bmm: only dense (strided) tensors are supported");
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  TORCH_CHECK(a.size(0) <= kMax && a.size(1) <= kMax && a.size(2) <= kMax && b.size(2) <= kMax,
              "tilelab::tiled_bmm: each of batch, M, N, K must be below 2^31, got a ", a.sizes(),
              " and b ", b.sizes());
}

// torch.addmm's rule: bias broadcasts to (M, N) (shapes (), (N,), (1, N), (M, 1), (M, N), ...).
inline void check_addmm_inputs(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b) {
  check_mm_inputs(a, b, "tiled_addmm");
  const int64_t M = a.size(0), N = b.size(1);
  bool ok = bias.dim() <= 2;
  if (ok && bias.dim() >= 1) ok = bias.size(-1) == N || bias.size(-1) == 1;
  if (ok && bias.dim() == 2) ok = bias.size(0) == M || bias.size(0) == 1;
  TORCH_CHECK(ok, "tilelab::tiled_addmm: bias of shape ", bias.sizes(),
              " does not broadcast to the output's shape [", M, ", ", N, "]");
  TORCH_CHECK(bias.scalar_type() == a.scalar_type(), "tilelab::tiled_addmm: bias must have the dtype of a and b (",
              dtype_str(a.scalar_type()), "), got ", dtype_str(bias.scalar_type()));
  TORCH_CHECK(bias.device() == a.device(), "tilelab::tiled_addmm: bias is on ", bias.device(),
              " and a is on ", a.device(), "; all operands must be on the same device");
  TORCH_CHECK(bias.layout() == c10::kStrided, "tilelab::tiled_addmm: only dense (strided) tensors are supported");
}

// The bias as an (M, N) view: broadcast dimensions get stride 0, so the
// epilogue reads it in place whatever its shape.
inline at::Tensor bias_view(const at::Tensor& bias, int64_t M, int64_t N) {
  return bias.expand({M, N});
}

// A batched operand as the kernels read it: element (z, r, c) at
// data[z * s_batch + r * s_row + c * s_col]. Each matrix row- or column-major
// (any batch stride, 0 for a broadcast batch) is used in place; anything else
// gets one contiguous copy.
struct BatchedOperand {
  at::Tensor t;
  int64_t s_batch, s_row, s_col;
  bool row_major;
};

inline BatchedOperand as_batched_operand(const at::Tensor& x) {
  const int64_t s_b = x.size(0) == 1 ? 0 : x.stride(0);
  const int64_t s_row = x.size(1) == 1 ? x.size(2) : x.stride(1);
  const int64_t s_col = x.size(2) == 1 ? 1 : x.stride(2);
  if (s_col == 1) return {x, s_b, s_row, 1, true};
  if (s_row == 1) return {x, s_b, 1, s_col, false};
  at::Tensor y = x.contiguous();
  return {y, y.size(1) * y.size(2), y.size(2), 1, true};
}

}  // namespace tilelab
