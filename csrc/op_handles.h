#pragma once
// Typed handles of the ops, for the C++ that calls them again through the
// dispatcher (autograd.cpp below autograd, autocast.cpp below autocast): their
// C++ signatures, written once beside the schemas' order of arguments (ops.cpp).
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/string_view.h>

#include <optional>
#include <tuple>

namespace tilelab {

using OptStr = std::optional<c10::string_view>;
using OptInt = std::optional<int64_t>;
using ProductOp = at::Tensor(const at::Tensor&, const at::Tensor&, OptStr, OptInt);  // tiled_mm, tiled_bmm
using AddmmOp = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, OptStr, OptInt);
using LinearOp = at::Tensor(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&, OptStr, OptStr,
                            OptInt);

using GatedOp = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, OptStr);  // tiled_gated_linear
using LinearPreOp = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                       const std::optional<at::Tensor>&, c10::string_view, OptStr,
                                                       OptInt);  // _tiled_linear_pre

template <typename Sig>
c10::TypedOperatorHandle<Sig> find_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Sig>();
}

// Looked up once (the first call), then shared by every translation unit.
inline const c10::TypedOperatorHandle<ProductOp>& op_mm() {
  static const auto op = find_op<ProductOp>("tilelab::tiled_mm");
  return op;
}
inline const c10::TypedOperatorHandle<ProductOp>& op_bmm() {
  static const auto op = find_op<ProductOp>("tilelab::tiled_bmm");
  return op;
}
inline const c10::TypedOperatorHandle<AddmmOp>& op_addmm() {
  static const auto op = find_op<AddmmOp>("tilelab::tiled_addmm");
  return op;
}
inline const c10::TypedOperatorHandle<LinearOp>& op_linear() {
  static const auto op = find_op<LinearOp>("tilelab::tiled_linear");
  return op;
}

inline const c10::TypedOperatorHandle<LinearPreOp>& op_linear_pre() {
  static const auto op = find_op<LinearPreOp>("tilelab::_tiled_linear_pre");
  return op;
}
inline const c10::TypedOperatorHandle<GatedOp>& op_gated() {
  static const auto op = find_op<GatedOp>("tilelab::tiled_gated_linear");
  return op;
}

}  // namespace tilelab
