// The CPU tiled_mm op; the kernel itself (cpu_mm) is in cpu_mm.h, shared with
// tiled_bmm and tiled_addmm (batched_cpu.cpp).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "../checks.h"
#include "cpu_mm.h"

namespace tilelab {
namespace {

using cpu::check_cpu_override;
using cpu::cpu_mm;
using cpu::kKC;
using cpu::kMC;
using cpu::kNC;

at::Tensor tiled_mm_cpu(const at::Tensor& a, const at::Tensor& b,
                        std::optional<c10::string_view> variant, std::optional<int64_t> tile) {
  check_mm_inputs(a, b, "tiled_mm");
  check_cpu_override(variant, tile);
  const int64_t M = a.size(0), N = b.size(1), K = a.size(1);
  at::Tensor out = at::empty({M, N}, a.options());
  if (M == 0 || N == 0) return out;
  if (K == 0) return out.zero_();
  const Operand A = as_operand(a), B = as_operand(b);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "tilelab_cpu_mm", [&] {
    cpu_mm<scalar_t>(A.t.const_data_ptr<scalar_t>(), A.s_row, A.s_col, B.t.const_data_ptr<scalar_t>(),
                     B.s_row, B.s_col, out.mutable_data_ptr<scalar_t>(), M, N, K);
  });
  return out;
}

std::string explain_cpu(const at::Tensor& a, const at::Tensor& b,
                        std::optional<c10::string_view> variant, std::optional<int64_t> tile) {
  check_mm_inputs(a, b, "explain");
  check_cpu_override(variant, tile);
  std::ostringstream os;
  os << "{\"kernel\": \"cpu\", \"variant\": \"cpu\", \"tile\": null, \"device\": \"cpu\", "
     << "\"device_name\": \"cpu\", \"M\": " << a.size(0) << ", \"N\": " << b.size(1)
     << ", \"K\": " << a.size(1) << ", \"dtype\": \"" << dtype_str(a.scalar_type())
     << "\", \"reason\": \"CPU tensors run the cache-tiled CPU kernel (" << kMC << "x" << kNC
     << " tiles of C over " << at::get_num_threads() << " threads, K in slices of " << kKC
     << ")\"}";
  return os.str();
}

}  // namespace

TORCH_LIBRARY_IMPL(tilelab, CPU, m) {
  m.impl("tiled_mm", &tiled_mm_cpu);
  m.impl("_explain", &explain_cpu);
}

}  // namespace tilelab
