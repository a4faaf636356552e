// Autograd for the three ops, in C++ (the Autograd dispatch key): a Python
// rule (torch.library.register_autograd) runs Python on every call, which cost
// ~30 us per call with an input that requires grad, against torch.mm's ~5.
//
// Each op is a torch::autograd::Function whose forward redispatches below
// autograd (to autocast's result, then the CPU/CUDA kernel or the fake one
// under torch.compile) and saves only what the other operand's gradient needs;
// backward calls the ops again on transposed views (column-major: read in
// place, no copies), with autograd on, so double backward works as for torch.mm.
// The forced kernel (variant, tile) of the forward also runs the backward.
//
// The trade-off: an Autograd-key kernel is C++, so it cannot be part of a
// wheel built against the LibTorch stable ABI (which has no autograd API); that
// wheel would register this rule from Python instead.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <initializer_list>
#include <optional>
#include <string>

namespace tilelab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Variant = std::optional<c10::string_view>;
using Tile = std::optional<int64_t>;
using Product = at::Tensor(const at::Tensor&, const at::Tensor&, Variant, Tile);
using Addmm = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, Variant, Tile);

const c10::TypedOperatorHandle<Product>& op_mm() {
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("tilelab::tiled_mm", "").typed<Product>();
  return op;
}
const c10::TypedOperatorHandle<Product>& op_bmm() {
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("tilelab::tiled_bmm", "").typed<Product>();
  return op;
}
const c10::TypedOperatorHandle<Addmm>& op_addmm() {
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("tilelab::tiled_addmm", "").typed<Addmm>();
  return op;
}

// The override travels from forward to backward in the context.
void save_override(AutogradContext* ctx, Variant variant, Tile tile) {
  ctx->saved_data["variant"] = variant.has_value() ? c10::IValue(std::string(*variant)) : c10::IValue();
  ctx->saved_data["tile"] = tile.has_value() ? c10::IValue(*tile) : c10::IValue();
}

struct Override {
  std::optional<std::string> variant;
  Tile tile;
  explicit Override(AutogradContext* ctx) {
    const c10::IValue& v = ctx->saved_data["variant"];
    if (!v.isNone()) variant = v.toStringRef();
    const c10::IValue& t = ctx->saved_data["tile"];
    if (!t.isNone()) tile = t.toInt();
  }
  Variant view() const { return variant.has_value() ? Variant(c10::string_view(*variant)) : Variant(); }
};

// Saves a if b may need a gradient and b if a may. (requires_grad, not
// ctx->needs_input_grad: a forward that runs inside a backward with
// create_graph sees that backward's graph task, in which the new node is not.)
void save_operands(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
  ctx->save_for_backward({b.requires_grad() ? a : at::Tensor(), a.requires_grad() ? b : at::Tensor()});
}

// The operands' gradients of out = a @ b (batched: per matrix): grad @ b^T and a^T @ grad.
std::pair<at::Tensor, at::Tensor> product_grads(AutogradContext* ctx, const at::Tensor& grad, size_t a_index) {
  const auto saved = ctx->get_saved_variables();
  const at::Tensor &a = saved[0], &b = saved[1];
  const Override o(ctx);
  const bool batched = grad.dim() == 3;
  auto mm = [&](const at::Tensor& x, const at::Tensor& y) {
    return batched ? op_bmm().call(x, y, o.view(), o.tile) : op_mm().call(x, y, o.view(), o.tile);
  };
  at::Tensor grad_a, grad_b;
  if (ctx->needs_input_grad(a_index)) grad_a = mm(grad, b.transpose(-1, -2));
  if (ctx->needs_input_grad(a_index + 1)) grad_b = mm(a.transpose(-1, -2), grad);
  return {grad_a, grad_b};
}

template <bool kBatched>
struct ProductFunction : public torch::autograd::Function<ProductFunction<kBatched>> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b, Variant variant,
                            Tile tile) {
    at::AutoDispatchBelowADInplaceOrView below;
    save_operands(ctx, a, b);
    save_override(ctx, variant, tile);
    return (kBatched ? op_bmm() : op_mm()).call(a, b, variant, tile);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto [grad_a, grad_b] = product_grads(ctx, grads[0], 0);
    return {grad_a, grad_b, at::Tensor(), at::Tensor()};
  }
};

struct AddmmFunction : public torch::autograd::Function<AddmmFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b,
                            Variant variant, Tile tile) {
    at::AutoDispatchBelowADInplaceOrView below;
    save_operands(ctx, a, b);
    save_override(ctx, variant, tile);
    ctx->saved_data["bias_sizes"] = bias.sizes().vec();
    return op_addmm().call(bias, a, b, variant, tile);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor& grad = grads[0];
    at::Tensor grad_bias;
    // The bias was broadcast to (M, N): its gradient sums over the broadcast dimensions.
    if (ctx->needs_input_grad(0)) grad_bias = grad.sum_to_size(ctx->saved_data["bias_sizes"].toIntVector());
    auto [grad_a, grad_b] = product_grads(ctx, grad, 1);
    return {grad_bias, grad_a, grad_b, at::Tensor(), at::Tensor()};
  }
};

// Without a gradient to record (grad mode off, or no input requiring grad) the
// call goes straight below autograd: inference pays no autograd node.
bool records(std::initializer_list<const at::Tensor*> xs) {
  if (!at::GradMode::is_enabled()) return false;
  for (const at::Tensor* x : xs)
    if (x->requires_grad()) return true;
  return false;
}

at::Tensor mm_autograd(const at::Tensor& a, const at::Tensor& b, Variant variant, Tile tile) {
  if (records({&a, &b})) return ProductFunction<false>::apply(a, b, variant, tile);
  at::AutoDispatchBelowADInplaceOrView below;
  return op_mm().call(a, b, variant, tile);
}
at::Tensor bmm_autograd(const at::Tensor& a, const at::Tensor& b, Variant variant, Tile tile) {
  if (records({&a, &b})) return ProductFunction<true>::apply(a, b, variant, tile);
  at::AutoDispatchBelowADInplaceOrView below;
  return op_bmm().call(a, b, variant, tile);
}
at::Tensor addmm_autograd(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b, Variant variant,
                          Tile tile) {
  if (records({&bias, &a, &b})) return AddmmFunction::apply(bias, a, b, variant, tile);
  at::AutoDispatchBelowADInplaceOrView below;
  return op_addmm().call(bias, a, b, variant, tile);
}

}  // namespace

TORCH_LIBRARY_IMPL(tilelab, Autograd, m) {
  m.impl("tiled_mm", &mm_autograd);
  m.impl("tiled_bmm", &bmm_autograd);
  m.impl("tiled_addmm", &addmm_autograd);
}

}  // namespace tilelab
