// The ops on CUDA tensors: each is the one host path (host.cpp) with its name,
// its bias (or none) and its operand rank.
#include <torch/library.h>

#include "host.h"

namespace tilelab {
namespace {

using Variant = std::optional<c10::string_view>;
using Tile = std::optional<int64_t>;

at::Tensor tiled_mm_cuda(const at::Tensor& a, const at::Tensor& b, Variant variant, Tile tile) {
  return gemm_cuda("tiled_mm", nullptr, a, b, false, variant, tile);
}

at::Tensor tiled_addmm_cuda(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b, Variant variant,
                            Tile tile) {
  return gemm_cuda("tiled_addmm", &bias, a, b, false, variant, tile);
}

at::Tensor tiled_bmm_cuda(const at::Tensor& a, const at::Tensor& b, Variant variant, Tile tile) {
  return gemm_cuda("tiled_bmm", nullptr, a, b, true, variant, tile);
}

}  // namespace

TORCH_LIBRARY_IMPL(tilelab, CUDA, m) {
  m.impl("tiled_mm", &tiled_mm_cuda);
  m.impl("tiled_addmm", &tiled_addmm_cuda);
  m.impl("tiled_bmm", &tiled_bmm_cuda);
  m.impl("_explain", &explain_cuda);
}

}  // namespace tilelab
