// Autocast rules for the matmul ops, the same as torch.mm's ("lower precision
// fp" policy): under torch.autocast every floating input on the autocast
// device (except float64) is cast to the autocast dtype (at::autocast's cast
// cache included), then the op runs with autocast excluded.
#include <ATen/ATen.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "gemm.h"
#include "op_handles.h"

namespace tilelab {
namespace {

using Opt = OptStr;

template <c10::DeviceType D>
at::Tensor cast(const at::Tensor& t) {
  return at::autocast::cached_cast(at::autocast::get_lower_precision_fp_from_device_type(D), t, D);
}

template <c10::DeviceType D>
c10::impl::ExcludeDispatchKeyGuard no_autocast() {
  return c10::impl::ExcludeDispatchKeyGuard(at::autocast::get_autocast_dispatch_key_from_device_type(D));
}

template <c10::DeviceType D>
at::Tensor mm_autocast(const at::Tensor& a, const at::Tensor& b, Opt variant, OptInt tile) {
  const auto guard = no_autocast<D>();
  return op_mm().call(cast<D>(a), cast<D>(b), variant, tile);
}

template <c10::DeviceType D>
at::Tensor bmm_autocast(const at::Tensor& a, const at::Tensor& b, Opt variant, OptInt tile) {
  const auto guard = no_autocast<D>();
  return op_bmm().call(cast<D>(a), cast<D>(b), variant, tile);
}

template <c10::DeviceType D>
at::Tensor addmm_autocast(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b, Opt variant,
                          OptInt tile) {
  const auto guard = no_autocast<D>();
  return op_addmm().call(cast<D>(bias), cast<D>(a), cast<D>(b), variant, tile);
}

template <c10::DeviceType D>
at::Tensor linear_autocast(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                           Opt activation, Opt variant, OptInt tile) {
  const auto guard = no_autocast<D>();
  std::optional<at::Tensor> b;
  if (const at::Tensor* bp = bias_ptr(bias)) b = cast<D>(*bp);
  return op_linear().call(cast<D>(x), cast<D>(weight), b, activation, variant, tile);
}

template <c10::DeviceType D>
at::Tensor gated_autocast(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up, Opt activation) {
  const auto guard = no_autocast<D>();
  return op_gated().call(cast<D>(x), cast<D>(w_gate), cast<D>(w_up), activation);
}

}  // namespace

TORCH_LIBRARY_IMPL(tilelab, AutocastCUDA, m) {
  m.impl("tiled_mm", &mm_autocast<c10::DeviceType::CUDA>);
  m.impl("tiled_bmm", &bmm_autocast<c10::DeviceType::CUDA>);
  m.impl("tiled_addmm", &addmm_autocast<c10::DeviceType::CUDA>);
  m.impl("tiled_linear", &linear_autocast<c10::DeviceType::CUDA>);
  m.impl("tiled_gated_linear", &gated_autocast<c10::DeviceType::CUDA>);
}

TORCH_LIBRARY_IMPL(tilelab, AutocastCPU, m) {
  m.impl("tiled_mm", &mm_autocast<c10::DeviceType::CPU>);
  m.impl("tiled_bmm", &bmm_autocast<c10::DeviceType::CPU>);
  m.impl("tiled_addmm", &addmm_autocast<c10::DeviceType::CPU>);
  m.impl("tiled_linear", &linear_autocast<c10::DeviceType::CPU>);
  m.impl("tiled_gated_linear", &gated_autocast<c10::DeviceType::CPU>);
}

}  // namespace tilelab
