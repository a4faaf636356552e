// Every schema of the tilelab library, in one place. Backends register only
// implementations: csrc/cpu/ops_cpu.cpp (CPU), csrc/cuda/ops_cuda.cpp (CUDA),
// csrc/autograd.cpp (autograd), csrc/autocast.cpp (autocast); the fake (meta)
// kernels live in tilelab_torch/ops.py.
#include <Python.h>
#include <torch/library.h>

#include <sstream>
#include <string>

#include "cuda/table.h"
#include "gemm.h"
#include "tune_key.h"

// `import tilelab_torch._C` loads this library, which runs the registrations
// below. No Python bindings: the ops are reached through torch.ops.tilelab.
extern "C" {
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}
}

namespace tilelab {
namespace {

// The config table as JSON, for tilelab_torch.kernels().
std::string kernel_table_json() {
  std::ostringstream os;
  os << "{\"built_with_cuda\": " << (kBuiltWithCuda ? "true" : "false") << ", \"configs\": [";
  for (int i = 0; i < kNumConfigs; ++i) {
    const KernelConfig& c = kConfigs[i];
    os << (i ? ", " : "") << "{\"name\": \"" << c.name << "\", \"variant\": \"" << c.variant
       << "\", \"family\": \"" << family_name(c.family) << "\", \"tile\": " << c.tile
       << ", \"bm\": " << c.bm << ", \"bn\": " << c.bn << ", \"bk\": " << c.bk
       << ", \"warps\": [" << c.warps_m << ", " << c.warps_n << "], \"threads\": " << c.threads
       << ", \"stages\": " << c.stages << ", \"pad\": " << c.pad << ", \"min_sm\": " << c.min_sm
       << ", \"dtypes\": [";
    bool first = true;
    for (auto t : {c10::ScalarType::Float, c10::ScalarType::Double, c10::ScalarType::Half,
                   c10::ScalarType::BFloat16}) {
      if (!(c.dtypes & dtype_bit(t))) continue;
      os << (first ? "" : ", ") << "\"" << dtype_str(t) << "\"";
      first = false;
    }
    const bool compiled = family_compiled(c.family);
    os << "], \"tf32\": " << (c.tf32 ? "true" : "false") << ", \"compiled\": " << (compiled ? "true" : "false")
       << ", \"summary\": \"" << c.summary
       << "\"}";
  }
  os << "]}";
  return os.str();
}

// The tune-cache key of a product (tune_key.h): a, b as for
// tiled_mm (2-D) or tiled_bmm (3-D), the bias and activation as the op has them.
std::string tune_key_op(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias,
                        std::optional<c10::string_view> activation) {
  const at::Tensor* bp = bias_ptr(bias);
  check_gemm_inputs("_tune_key", bp, a, b, a.dim() == 3);
  const GemmCall call = make_gemm(bp, a, b, parse_activation("_tune_key", activation));
  return tune_key(call.problem);
}

}  // namespace

TORCH_LIBRARY(tilelab, m) {
  m.def("tiled_mm(Tensor a, Tensor b, *, str? variant=None, int? tile=None) -> Tensor");
  // B x M x K @ B x K x N; a stride-0 (broadcast) batch is read in place.
  m.def("tiled_bmm(Tensor a, Tensor b, *, str? variant=None, int? tile=None) -> Tensor");
  // a @ b + bias, bias broadcast to (M, N) like torch.addmm, added in the epilogue.
  m.def("tiled_addmm(Tensor bias, Tensor a, Tensor b, *, str? variant=None, int? tile=None) -> Tensor");
  // act(F.linear(x, weight, bias)): weight (N, K), x (..., K); the bias in the epilogue,
  // the activation ('relu', 'gelu', 'gelu_tanh', 'silu') there too where the kernel
  // applies it, else right after the product (README: "Where the activation is applied").
  m.def("tiled_linear(Tensor x, Tensor weight, Tensor? bias=None, *, str? activation=None, str? variant=None, "
        "int? tile=None) -> Tensor");
  // (act(y), y) for y = F.linear(x, weight, bias): tiled_linear's training path (autograd.cpp), which saves y
  // for the activation's backward; on CUDA one kernel stores both where it can.
  m.def("_tiled_linear_pre(Tensor x, Tensor weight, Tensor? bias, *, str activation, str? variant=None, "
        "int? tile=None) -> (Tensor, Tensor)");
  // act(x @ w_gate.t()) * (x @ w_up.t()), both weights (N, K): a gated MLP's first half (csrc/gated.h).
  m.def("tiled_gated_linear(Tensor x, Tensor w_gate, Tensor w_up, *, str? activation=\"silu\") -> Tensor");
  // Which kernel tiled_mm (2-D inputs) or tiled_bmm (3-D) would run, and why (JSON); with a bias and/or an
  // activation (2-D only), tiled_addmm's or tiled_linear's: the epilogue is part of the problem the rules see.
  m.def("_explain(Tensor a, Tensor b, *, Tensor? bias=None, str? activation=None, str? variant=None, "
        "int? tile=None) -> str");
  // The tune cache's key of a product (tilelab_torch.tune); any device.
  m.def("_tune_key(Tensor a, Tensor b, Tensor? bias=None, str? activation=None) -> str", &tune_key_op);
  // The config table (JSON); no tensors, so one implementation for all backends.
  m.def("_kernel_table() -> str", &kernel_table_json);
}

}  // namespace tilelab
