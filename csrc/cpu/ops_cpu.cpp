// The ops on CPU tensors: the one host path of ../gemm.h (validate, build the
// problem) and the cache-tiled cpu_mm kernel (cpu_mm.h).
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <sstream>

#include "../gated.h"
#include "../gemm.h"
#include "cpu_mm.h"

namespace tilelab {
namespace {

at::Tensor gemm_cpu(const char* op, const at::Tensor* bias, const at::Tensor& a, const at::Tensor& b, bool batched,
                    Activation act, Variant variant, Tile tile) {
  check_gemm_inputs(op, bias, a, b, batched);
  cpu::check_cpu_override(variant, tile);
  GemmCall call = make_gemm(bias, a, b, act);
  if (finish_without_product(call)) return call.out;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "tilelab_cpu_mm",
                                  [&] { cpu::cpu_mm<scalar_t>(call.problem); });
  return call.out;
}

std::string explain_cpu(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias,
                        std::optional<c10::string_view> activation, Variant variant, Tile tile) {
  const bool batched = a.dim() == 3;
  check_explain_inputs("explain", bias_ptr(bias), activation, a, b);
  cpu::check_cpu_override(variant, tile);
  std::ostringstream os;
  os << "{\"kernel\": \"cpu\", \"variant\": \"cpu\", \"tile\": null, \"device\": \"cpu\", "
     << "\"device_name\": \"cpu\", \"batch\": " << (batched ? a.size(0) : 1) << ", \"M\": " << a.size(-2)
     << ", \"N\": " << b.size(-1) << ", \"K\": " << a.size(-1)
     << ", \"dtype\": \"" << dtype_str(a.scalar_type()) << "\", \"reason\": \"CPU tensors run the cache-tiled CPU kernel ("
     << cpu::kMC << "x" << cpu::kNC << " tiles of C over " << at::get_num_threads() << " threads, K in slices of "
     << cpu::kKC << ")\"}";
  return os.str();
}

// CPU: the composed form (gated.h), tiled_linear's CPU kernel twice.
at::Tensor gated_linear_cpu(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up,
                            std::optional<c10::string_view> activation) {
  check_gated_inputs(x, w_gate, w_up, activation);
  return gated_composite(x, w_gate, w_up, activation);
}

}  // namespace

TORCH_LIBRARY_IMPL(tilelab, CPU, m) {
  using Ops = GemmOps<gemm_cpu>;
  m.impl("tiled_mm", &Ops::mm);
  m.impl("tiled_addmm", &Ops::addmm);
  m.impl("tiled_bmm", &Ops::bmm);
  m.impl("tiled_linear", &Ops::linear);
  m.impl("_tiled_linear_pre", &Ops::linear_pre);
  m.impl("tiled_gated_linear", &gated_linear_cpu);
  m.impl("_explain", &explain_cpu);
}

}  // namespace tilelab
