// The ops on CUDA tensors: the one host path (host.cpp) under each op's name.
#include <torch/library.h>

#include "../gemm.h"
#include "chooser.h"
#include "host.h"

namespace tilelab {

TORCH_LIBRARY_IMPL(tilelab, CUDA, m) {
  using Ops = GemmOps<gemm_cuda>;
  m.impl("tiled_mm", &Ops::mm);
  m.impl("tiled_addmm", &Ops::addmm);
  m.impl("tiled_bmm", &Ops::bmm);
  m.impl("tiled_linear", &Ops::linear);
  m.impl("_explain", &explain_cuda);
}

namespace {
void set_split_k(std::optional<int64_t> splits) { set_split_k_override(splits.value_or(0)); }
}  // namespace

// Testing hook, CUDA builds only: force the split-K slice count (None: the estimate).
TORCH_LIBRARY_FRAGMENT(tilelab, m) { m.def("_set_split_k(int? splits) -> ()", &set_split_k); }

}  // namespace tilelab
