#pragma once
// tiled_gated_linear(x, w_gate, w_up, activation) = act(x @ w_gate.t()) * (x @ w_up.t()): the gated MLP's
// first half (Llama's down_proj input, act = silu: SwiGLU; gelu / gelu_tanh: GeGLU), validated once here for
// every backend. On CUDA it runs as one kernel where it can (host.cpp: gated_plan): both products in one
// wgmma per k-step, act(gate) * up in fp32 and rounded once. Elsewhere, and wherever a gradient is recorded,
// it is composed of tiled_linear calls: act(x @ w_gate.t()) and x @ w_up.t() rounded to the dtype, then
// their product (rounded again) -- what the model computed before swap().
#include <ATen/ATen.h>

#include <optional>

#include "gemm.h"
#include "op_handles.h"

namespace tilelab {

// x (..., K), both weights (N, K) of one shape; one dtype and device; the activation by name (None: x @ w_gate.t()
// itself, the bilinear GLU).
inline Activation check_gated_inputs(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up,
                                     std::optional<c10::string_view> activation) {
  const Activation act = parse_activation("tiled_gated_linear", activation);
  TORCH_CHECK(w_gate.dim() == 2 && w_up.dim() == 2 && w_gate.sizes() == w_up.sizes(),
              "tilelab::tiled_gated_linear: w_gate and w_up must be 2-D (out_features, in_features) of one shape, "
              "got ", w_gate.sizes(), " and ", w_up.sizes());
  TORCH_CHECK(w_gate.scalar_type() == w_up.scalar_type() && w_gate.device() == w_up.device(),
              "tilelab::tiled_gated_linear: w_gate and w_up must have one dtype and device, got ",
              dtype_str(w_gate.scalar_type()), " on ", w_gate.device(), " and ", dtype_str(w_up.scalar_type()),
              " on ", w_up.device());
  TORCH_CHECK(w_up.layout() == c10::kStrided,
              "tilelab::tiled_gated_linear: only dense (strided) tensors are supported");
  check_linear_inputs(x, w_gate, nullptr);  // x against w_gate: F.linear's rules and messages
  return act;
}

// The composed form: two tiled_linear calls (below autograd, or recorded above it) and their product.
inline at::Tensor gated_composite(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up,
                                  std::optional<c10::string_view> activation) {
  const at::Tensor gate = op_linear().call(x, w_gate, std::nullopt, activation, std::nullopt, std::nullopt);
  const at::Tensor up = op_linear().call(x, w_up, std::nullopt, std::nullopt, std::nullopt, std::nullopt);
  return gate * up;
}

}  // namespace tilelab
