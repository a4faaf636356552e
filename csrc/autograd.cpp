// Autograd for the ops, in C++ (the Autograd dispatch key): a Python
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

#include "gated.h"
#include "gemm.h"
#include "op_handles.h"
#ifdef TILELAB_WITH_CUDA
#include "cuda/host.h"
#endif

namespace tilelab {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Variant = OptStr;
using Tile = OptInt;

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

// A column-major matrix (nn.Linear's weight.t(), as F.linear and tiled_linear
// read it): its gradient is computed transposed, so that it arrives in the
// operand's own layout, as torch.mm's backward does (mm_mat1_backward /
// mm_mat2_backward). Otherwise the gradient of a Linear weight reaches
// AccumulateGrad transposed, and it copies every one into the weight's layout
// (a strided copy of every weight, every training step).
bool column_major(const at::Tensor& t) {
  return t.dim() == 2 && t.stride(0) == 1 && t.stride(1) == t.size(0);
}

// Saves a if b may need a gradient and b if a may, and which of them is
// column-major. (requires_grad, not ctx->needs_input_grad: a forward that runs
// inside a backward with create_graph sees that backward's graph task, in which
// the new node is not.)
void save_operands(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
  ctx->save_for_backward({b.requires_grad() ? a : at::Tensor(), a.requires_grad() ? b : at::Tensor()});
  ctx->saved_data["a_cols"] = column_major(a);
  ctx->saved_data["b_cols"] = column_major(b);
}

// A half-precision 2-D gradient whose rows are not 16-byte aligned (GPT-2's logits: N = 50257) is read by
// both gradients' products over more than 16 rows, and each would copy it into aligned rows first
// (aligned_copy.h: the tile families' loads need them). Copied once here instead, into rows padded to 16
// bytes (a view of the first N columns), which both products read in place: one pass over it saved (bf16
// 4096 x 50257: 0.4 GB read and written). With the launchers' copy kernel (padded_rows), except where the
// copy is itself recorded (a double backward: grad requires grad).
at::Tensor rows_aligned_once(const at::Tensor& g) {
  if (!g.is_cuda() || g.dim() != 2 || g.stride(1) != 1 || g.size(0) <= 16 || g.size(1) <= 16 ||
      (g.scalar_type() != at::kHalf && g.scalar_type() != at::kBFloat16))
    return g;
  if (rows_aligned16(g.data_ptr(), g.stride(0), 0, 1, g.element_size())) return g;
#ifdef TILELAB_WITH_CUDA
  if (!(at::GradMode::is_enabled() && g.requires_grad())) return padded_rows(g);
#endif
  at::Tensor rows =
      at::empty({g.size(0), padded16(g.size(1), g.element_size())}, g.options()).narrow(1, 0, g.size(1));
  rows.copy_(g);
  return rows;
}

// The operands' gradients of out = a @ b (batched: per matrix): grad @ b^T and
// a^T @ grad, each computed transposed (b @ grad^T, grad^T @ a) where its
// operand is column-major (2-D only, as torch.mm; torch.bmm's backward keeps
// the plain order).
// `saved`: the node's saved variables, a and b first (save_operands' order), unpacked once by the caller.
std::pair<at::Tensor, at::Tensor> product_grads(AutogradContext* ctx, const variable_list& saved,
                                                const at::Tensor& grad_out, size_t a_index) {
  const at::Tensor &a = saved[0], &b = saved[1];
  const Override o(ctx);
  const bool batched = grad_out.dim() == 3;
  const at::Tensor grad =
      ctx->needs_input_grad(a_index) && ctx->needs_input_grad(a_index + 1) ? rows_aligned_once(grad_out) : grad_out;
  auto mm = [&](const at::Tensor& x, const at::Tensor& y) {
    return batched ? op_bmm().call(x, y, o.view(), o.tile) : op_mm().call(x, y, o.view(), o.tile);
  };
  at::Tensor grad_a, grad_b;
  if (ctx->needs_input_grad(a_index)) {
    grad_a = !batched && ctx->saved_data["a_cols"].toBool() ? mm(b, grad.t()).t() : mm(grad, b.transpose(-1, -2));
  }
  if (ctx->needs_input_grad(a_index + 1)) {
    grad_b = !batched && ctx->saved_data["b_cols"].toBool() ? mm(grad.t(), a).t() : mm(a.transpose(-1, -2), grad);
  }
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
    auto [grad_a, grad_b] = product_grads(ctx, ctx->get_saved_variables(), grads[0], 0);
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
    auto [grad_a, grad_b] = product_grads(ctx, ctx->get_saved_variables(), grad, 1);
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

// act'(y) * grad for the activation's backward, as torch's own ops; differentiable where a double backward
// records it (silu_backward has no derivative: its formula, s (1 + y (1 - s)), s = sigmoid(y), instead).
at::Tensor activation_backward(Activation act, const at::Tensor& grad, const at::Tensor& y) {
  switch (act) {
    case Activation::Relu: return at::threshold_backward(grad, y, 0);
    case Activation::Gelu: return at::gelu_backward(grad, y, "none");
    case Activation::GeluTanh: return at::gelu_backward(grad, y, "tanh");
    case Activation::Silu: {
      if (!at::GradMode::is_enabled()) return at::silu_backward(grad, y);
      const at::Tensor s = at::sigmoid(y);
      return grad * (s * (1 + y * (1 - s)));
    }
    default: return grad;
  }
}

// act(a @ b + bias) for tiled_linear's training path: _tiled_linear_pre returns act(y) and y = a @ b + bias (one
// kernel stores both where the CUDA backend can). The node has both as outputs, as F.act(F.linear(...)) records y
// as the linear's output: y is saved (as an output) for the activation's backward in place of the activation's
// own input, the operands as AddmmFunction saves them (a only if b may need a gradient, b only if a may), and
// backward is AddmmFunction's with act'(y) * grad. The activation's pass over the output (read y, write act(y))
// is gone. In a double backward (create_graph) the saved y is this node's output, so the gradient that reaches
// y through act'(y) comes back here as grads[1] and goes on to a, b and the bias: nothing is recomputed.
struct LinearActFunction : public torch::autograd::Function<LinearActFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b,
                               const std::optional<at::Tensor>& bias, c10::string_view activation, Variant variant,
                               Tile tile) {
    at::AutoDispatchBelowADInplaceOrView below;
    auto [out, pre] = op_linear_pre().call(a, b.t(), bias, activation, variant, tile);
    // y's gradient is undefined except in a double backward: no zeros materialized for it every step.
    ctx->set_materialize_grads(false);
    ctx->save_for_backward({b.requires_grad() ? a : at::Tensor(), a.requires_grad() ? b : at::Tensor(), pre});
    ctx->saved_data["a_cols"] = column_major(a);
    ctx->saved_data["b_cols"] = column_major(b);
    ctx->saved_data["act"] = static_cast<int64_t>(parse_activation("tiled_linear", activation));
    if (bias) ctx->saved_data["bias_sizes"] = bias->sizes().vec();
    save_override(ctx, variant, tile);
    return {out, pre};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();  // a, b (as save_operands saves them), y
    const at::Tensor& pre = saved[2];
    at::Tensor grad;  // the gradient of y = a @ b + bias
    if (grads[0].defined())
      grad = activation_backward(static_cast<Activation>(ctx->saved_data["act"].toInt()), grads[0], pre);
    if (grads[1].defined()) grad = grad.defined() ? grad + grads[1] : grads[1];
    if (!grad.defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    at::Tensor grad_bias;
    if (ctx->saved_data.count("bias_sizes") != 0 && ctx->needs_input_grad(2))
      grad_bias = grad.sum_to_size(ctx->saved_data["bias_sizes"].toIntVector());
    auto [grad_a, grad_b] = product_grads(ctx, saved, grad, 0);
    return {grad_a, grad_b, grad_bias, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// tiled_linear: without a gradient to record, the fused kernel (bias and
// activation in the epilogue). With one and an activation, LinearActFunction:
// the product and its pre-activation from one kernel where it can (what
// F.act(F.linear(...)) records, without the activation's pass); without an
// activation, tiled_addmm (or tiled_mm) on x's rows and weight.t().
at::Tensor linear_autograd(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                           Variant activation, Variant variant, Tile tile) {
  const bool has_bias = bias_ptr(bias) != nullptr;
  if (!records({&x, &weight}) && !(has_bias && records({&*bias}))) {
    at::AutoDispatchBelowADInplaceOrView below;
    return op_linear().call(x, weight, bias, activation, variant, tile);
  }
  // Validate first (the same messages as the kernels), so a bad call fails before any work.
  const Activation act = parse_activation("tiled_linear", activation);
  check_linear_inputs(x, weight, has_bias ? &*bias : nullptr);
  const at::Tensor x2 = linear_rows(x);
  if (act != Activation::None) {
    return linear_output(LinearActFunction::apply(x2, weight.t(), has_bias ? bias : std::nullopt, *activation,
                                                  variant, tile)[0],
                         x, weight.size(0));
  }
  const at::Tensor y = has_bias ? addmm_autograd(*bias, x2, weight.t(), variant, tile)
                                : mm_autograd(x2, weight.t(), variant, tile);
  return linear_output(y, x, weight.size(0));
}

// tiled_gated_linear: without a gradient to record, the backend's kernel (on CUDA one fused kernel where it
// can). With one, the composed form of recorded ops (gated.h): two tiled_linear calls, each saving what its
// own backward needs, and their product -- exactly what the unfused MLP records, so training pays nothing
// for the op and gains nothing from it.
at::Tensor gated_autograd(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up, Variant activation) {
  if (!records({&x, &w_gate, &w_up})) {
    at::AutoDispatchBelowADInplaceOrView below;
    return op_gated().call(x, w_gate, w_up, activation);
  }
  check_gated_inputs(x, w_gate, w_up, activation);
  return linear_autograd(x, w_gate, std::nullopt, activation, std::nullopt, std::nullopt) *
         linear_autograd(x, w_up, std::nullopt, std::nullopt, std::nullopt, std::nullopt);
}

}  // namespace

TORCH_LIBRARY_IMPL(tilelab, Autograd, m) {
  m.impl("tiled_mm", &mm_autograd);
  m.impl("tiled_bmm", &bmm_autograd);
  m.impl("tiled_addmm", &addmm_autograd);
  m.impl("tiled_linear", &linear_autograd);
  m.impl("tiled_gated_linear", &gated_autograd);
}

}  // namespace tilelab
