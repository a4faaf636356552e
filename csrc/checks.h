#pragma once
// Argument validation shared by the CPU and CUDA implementations. Every
// failure is a TORCH_CHECK (a Python RuntimeError) whose message names the op
// and shows what was passed.
#include <ATen/ATen.h>

#include <cstdint>
#include <limits>

#include "cuda/configs.h"

namespace tilelab {

inline bool is_supported_dtype(c10::ScalarType t) { return dtype_bit(t) != 0; }

inline void check_mm_inputs(const at::Tensor& a, const at::Tensor& b, const char* op) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "tilelab::", op, ": expected 2-D tensors, got a of shape ",
              a.sizes(), " and b of shape ", b.sizes());
  TORCH_CHECK(a.size(1) == b.size(0), "tilelab::", op, ": inner dimensions differ: a is ",
              a.sizes(), " and b is ", b.sizes(), " (a.size(1)=", a.size(1),
              " must equal b.size(0)=", b.size(0), ")");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "tilelab::", op,
              ": a and b must have the same dtype, got ", dtype_str(a.scalar_type()), " and ",
              dtype_str(b.scalar_type()));
  TORCH_CHECK(is_supported_dtype(a.scalar_type()), "tilelab::", op, ": unsupported dtype ",
              dtype_str(a.scalar_type()),
              "; supported: torch.float32, torch.float64, torch.float16, torch.bfloat16");
  TORCH_CHECK(a.device() == b.device(), "tilelab::", op, ": a is on ", a.device(), " and b is on ",
              b.device(), "; both operands must be on the same device");
  TORCH_CHECK(a.layout() == c10::kStrided && b.layout() == c10::kStrided, "tilelab::", op,
              ": only dense (strided) tensors are supported");
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  TORCH_CHECK(a.size(0) <= kMax && a.size(1) <= kMax && b.size(1) <= kMax, "tilelab::", op,
              ": each of M, N, K must be below 2^31, got a ", a.sizes(), " and b ", b.sizes());
}

// An operand as the kernels read it: element (r, c) at data[r * s_row + c * s_col].
// Row-major and column-major tensors (also with a padded leading dimension,
// e.g. a slice or a transposed view) are used in place; anything else gets one
// contiguous copy.
struct Operand {
  at::Tensor t;
  int64_t s_row, s_col;
  bool row_major;  // s_col == 1: consecutive columns are adjacent
};

inline Operand as_operand(const at::Tensor& x) {
  // A dimension of size 1 is never stepped along, so its stride is free:
  // pick the value that makes the operand look contiguous.
  const int64_t s_row = x.size(0) == 1 ? x.size(1) : x.stride(0);
  const int64_t s_col = x.size(1) == 1 ? 1 : x.stride(1);
  if (s_col == 1) return {x, s_row, 1, true};
  if (s_row == 1) return {x, 1, s_col, false};
  at::Tensor y = x.contiguous();
  return {y, y.size(1), 1, true};
}

}  // namespace tilelab
