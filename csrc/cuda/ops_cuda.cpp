// The ops on CUDA tensors: the one host path (host.cpp) under each op's name.
#include <torch/library.h>

#include "../gemm.h"
#include "chooser.h"
#include "host.h"
#include "split_reduce.h"

namespace tilelab {

TORCH_LIBRARY_IMPL(tilelab, CUDA, m) {
  using Ops = GemmOps<gemm_cuda>;
  m.impl("tiled_mm", &Ops::mm);
  m.impl("tiled_addmm", &Ops::addmm);
  m.impl("tiled_bmm", &Ops::bmm);
  m.impl("tiled_linear", &Ops::linear);
  m.impl("_tiled_linear_pre", &linear_pre_cuda);
  m.impl("tiled_gated_linear", &gated_linear_cuda);
  m.impl("_explain", &explain_cuda);
}

namespace {
void set_split_k(std::optional<int64_t> splits) { set_split_k_override(splits.value_or(0)); }
void set_split_reduce(std::optional<c10::string_view> how) {
  set_split_reduce_override(how ? std::string(*how) : std::string());
}
void tune_set(c10::string_view key, c10::string_view kernel, double ms, c10::string_view rule_kernel,
              double rule_ms) {
  set_tuned(std::string(key), TunedEntry{std::string(kernel), ms, std::string(rule_kernel), rule_ms});
}
}  // namespace

// CUDA builds only. Testing hooks: force the split-K slice count (None: the
// estimate) and where the slices are added ("kernel", "pass"; None: by cost); clear the cache of picks and
// turn it on or off;
// the dispatcher's choice for a described GPU, on CPU tensors
// (tilelab_torch.explain_described), and tiled_gated_linear's (explain_gated,
// any device). The tune cache (tilelab_torch.tune / load_tuned): set an entry,
// clear them all, count them.
TORCH_LIBRARY_FRAGMENT(tilelab, m) {
  m.def("_set_split_k(int? splits) -> ()", &set_split_k);
  m.def("_set_split_reduce(str? how) -> ()", &set_split_reduce);
  m.def("_set_choice_cache(bool enabled) -> int", &set_choice_cache);
  m.def("_explain_described(Tensor a, Tensor b, int sm, int num_sms, *, Tensor? bias=None, str? activation=None, "
        "str? variant=None, int? tile=None, float? mem_gbps=None) -> str",
        &explain_described);
  m.def("_explain_gated(Tensor x, Tensor w_gate, Tensor w_up, *, str? activation=\"silu\", int? sm=None, "
        "int? num_sms=None) -> str",
        &explain_gated);
  m.def("_tune_set(str key, str kernel, float ms, str rule_kernel, float rule_ms) -> ()", &tune_set);
  m.def("_tune_clear() -> ()", &clear_tuned);
  m.def("_tune_size() -> int", &tuned_size);
}

}  // namespace tilelab
