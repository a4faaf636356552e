// The ops on CUDA tensors: the one host path (host.cpp) under each op's name.
#include <torch/library.h>

#include "../gemm.h"
#include "host.h"

namespace tilelab {

TORCH_LIBRARY_IMPL(tilelab, CUDA, m) {
  using Ops = GemmOps<gemm_cuda>;
  m.impl("tiled_mm", &Ops::mm);
  m.impl("tiled_addmm", &Ops::addmm);
  m.impl("tiled_bmm", &Ops::bmm);
  m.impl("_explain", &explain_cuda);
}

}  // namespace tilelab
