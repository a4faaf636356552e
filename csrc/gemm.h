#pragma once
// The one host path every op takes, on every backend:
//   tiled_mm    = tiled_addmm without a bias
//   tiled_addmm = one product with a bias broadcast to (M, N)
//   tiled_bmm   = the same with a batch (tiled_mm is tiled_bmm with one batch)
// check_gemm_inputs() validates (each rule once, the op's name a parameter);
// make_gemm() builds the one GemmProblem the chooser, the CUDA launchers and
// the CPU kernel all read. Host-only C++, shared by CPU and CUDA.
#include <ATen/ATen.h>

#include <c10/util/string_view.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <tuple>
#include <vector>

#include "activation.h"
#include "dtypes.h"

namespace tilelab {

// One operand of C = A @ B as the kernels read it: element (z, mn, k) at
// data[z * s_batch + mn * s_mn + k * s_k], where mn is m for A and n for B.
// The layout is named once, here: k-contiguous (s_k == 1: a row-major A, a
// column-major B such as W.t()) or m/n-contiguous (s_mn == 1). Any other
// strides were copied into a contiguous tensor first. s_batch is 0 when one
// matrix serves every batch (a broadcast, e.g. x.expand(B, -1, -1)).
struct Operand {
  at::Tensor keep;  // the tensor `data` points into (a contiguous copy where one was needed)
  const void* data = nullptr;
  int64_t s_mn = 0, s_k = 0, s_batch = 0;
  bool k_contiguous = false;
};

// C[z, m, n] = act(sum_k A[z, m, k] * B[z, k, n] (+ bias[m, n])), C a fresh
// contiguous tensor. Sizes are checked below 2^31.
struct GemmProblem {
  int64_t M = 0, N = 0, K = 0, batch = 1;
  c10::ScalarType dtype = c10::ScalarType::Float;
  Operand a, b;
  void* c = nullptr;
  int64_t sc_m = 0, sc_b = 0;           // C is unit-stride along n
  const void* bias = nullptr;           // optional, read through its strides (0 = broadcast)
  int64_t sbias_m = 0, sbias_n = 0, sbias_b = 0;
  Activation act = Activation::None;    // applied after the bias (tiled_linear)
  // fp32 inputs may run on TF32 tensor cores: torch.get_float32_matmul_precision()
  // is "high" or "medium", exactly when torch.mm would use TF32.
  bool allow_tf32 = false;
  // Split-K (CUDA): the kernel computes `splits` slices of K, each into its own
  // fp32 (batch, M, N) slab of `partial`, without bias or activation; a second
  // pass (split_reduce.cu) adds the slabs in a fixed order, then the bias and
  // the activation. 1: no split, C is written directly.
  int splits = 1;
  float* partial = nullptr;
  // The hopper rows' TMA-store epilogue (hopper_aux_ok) can also store the value before the activation into
  // `aux` (laid out like C): what autograd saves for the activation's backward (tiled_linear's training path).
  void* aux = nullptr;
};

// Every row start (and every batch start) of an operand is 16-byte aligned: what 16-byte loads,
// cp.async and TMA read without a copy (aligned_copy.h makes one where they are not).
inline bool rows_aligned16(const void* ptr, int64_t ld, int64_t batch_stride, int64_t batch, size_t elem) {
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && (ld * static_cast<int64_t>(elem)) % 16 == 0 &&
         (batch == 1 || (batch_stride * static_cast<int64_t>(elem)) % 16 == 0);
}
// The row stride, in elements, of `cont` elements padded to a multiple of 16 bytes (aligned_copy.h's copies).
inline int64_t padded16(int64_t cont, size_t elem) {
  const int64_t vec = 16 / static_cast<int64_t>(elem);
  return (cont + vec - 1) / vec * vec;
}
// The same for operand o of p, along its contiguous dimension.
inline bool rows_aligned16(const Operand& o, const GemmProblem& p) {
  return rows_aligned16(o.data, o.k_contiguous ? o.s_mn : o.s_k, o.s_batch, p.batch, c10::elementSize(p.dtype));
}
// x @ W.t() (both k-contiguous) whose x rows are not 16-byte aligned (a view sliced along K) against a large W
// (K >= 1024, N * K >= 2^22) whose rows are: the few-row launchers (gemv, gemv_split) copy x into aligned rows, so
// that W streams 16 bytes a load, and the chooser's rules for them treat the problem as aligned.
inline bool x_copied_for_w(const GemmProblem& p) {
  return p.a.k_contiguous && p.b.k_contiguous && !rows_aligned16(p.a, p) && rows_aligned16(p.b, p) &&
         p.K >= 1024 && p.N * p.K >= (int64_t{1} << 22);
}
// The same for the output C of p (a TMA store's requirement; an output not yet allocated has a null,
// aligned base).
inline bool c_rows_aligned16(const GemmProblem& p) {
  return rows_aligned16(p.c, p.sc_m, p.sc_b, p.batch, c10::elementSize(p.dtype));
}

// ---------------------------------------------------------------- validation
// `batched`: 3-D operands (tiled_bmm), else 2-D. `bias` may be null.
inline void check_gemm_inputs(const char* op, const at::Tensor* bias, const at::Tensor& a, const at::Tensor& b,
                              bool batched) {
  const int64_t d = batched ? 3 : 2, ka = d - 1, kb = d - 2;  // the K dims of a and b
  TORCH_CHECK(a.dim() == d && b.dim() == d, "tilelab::", op, ": expected ", d, "-D tensors, got a of shape ",
              a.sizes(), " and b of shape ", b.sizes());
  if (batched) {
    TORCH_CHECK(a.size(0) == b.size(0), "tilelab::", op, ": batch sizes differ: a is ", a.sizes(), " and b is ",
                b.sizes(), " (expand a size-1 batch explicitly, e.g. b.expand(", a.size(0),
                ", -1, -1): a stride-0 batch is read in place)");
  }
  TORCH_CHECK(a.size(ka) == b.size(kb), "tilelab::", op, ": inner dimensions differ: a is ", a.sizes(), " and b is ",
              b.sizes(), " (a.size(", ka, ")=", a.size(ka), " must equal b.size(", kb, ")=", b.size(kb), ")");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "tilelab::", op, ": a and b must have the same dtype, got ",
              dtype_str(a.scalar_type()), " and ", dtype_str(b.scalar_type()));
  TORCH_CHECK(is_supported_dtype(a.scalar_type()), "tilelab::", op, ": unsupported dtype ",
              dtype_str(a.scalar_type()), "; supported: ", kSupportedDtypes);
  TORCH_CHECK(a.device() == b.device(), "tilelab::", op, ": a is on ", a.device(), " and b is on ", b.device(),
              "; both operands must be on the same device");
  TORCH_CHECK(a.layout() == c10::kStrided && b.layout() == c10::kStrided, "tilelab::", op,
              ": only dense (strided) tensors are supported");
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  bool fits = a.size(ka - 1) <= kMax && a.size(ka) <= kMax && b.size(kb + 1) <= kMax;
  if (batched) fits = fits && a.size(0) <= kMax;
  TORCH_CHECK(fits, "tilelab::", op, ": each of ", batched ? "batch, " : "", "M, N, K must be below 2^31, got a ",
              a.sizes(), " and b ", b.sizes());
  if (bias == nullptr) return;
  // torch.addmm's rule: the bias broadcasts to (M, N).
  const int64_t M = a.size(ka - 1), N = b.size(kb + 1);
  bool ok = bias->dim() <= 2;
  if (ok && bias->dim() >= 1) ok = bias->size(-1) == N || bias->size(-1) == 1;
  if (ok && bias->dim() == 2) ok = bias->size(0) == M || bias->size(0) == 1;
  TORCH_CHECK(ok, "tilelab::", op, ": bias of shape ", bias->sizes(), " does not broadcast to the output's shape [",
              M, ", ", N, "]");
  TORCH_CHECK(bias->scalar_type() == a.scalar_type(), "tilelab::", op, ": bias must have the dtype of a and b (",
              dtype_str(a.scalar_type()), "), got ", dtype_str(bias->scalar_type()));
  TORCH_CHECK(bias->device() == a.device(), "tilelab::", op, ": bias is on ", bias->device(), " and a is on ",
              a.device(), "; all operands must be on the same device");
  TORCH_CHECK(bias->layout() == c10::kStrided, "tilelab::", op, ": only dense (strided) tensors are supported");
}

// F.linear's rules for tiled_linear(x, weight, bias): x (..., K), weight (N, K),
// bias (N,) or a scalar; dtype and device rules as for the products.
inline void check_linear_inputs(const at::Tensor& x, const at::Tensor& weight, const at::Tensor* bias) {
  TORCH_CHECK(weight.dim() == 2, "tilelab::tiled_linear: weight must be 2-D (out_features, in_features), got shape ",
              weight.sizes());
  TORCH_CHECK(x.dim() >= 1, "tilelab::tiled_linear: x must have at least 1 dimension (..., in_features), got a scalar");
  TORCH_CHECK(x.size(-1) == weight.size(1), "tilelab::tiled_linear: x has ", x.size(-1),
              " features (last dimension of shape ", x.sizes(), ") but weight of shape ", weight.sizes(), " expects ",
              weight.size(1));
  TORCH_CHECK(x.scalar_type() == weight.scalar_type(), "tilelab::tiled_linear: x and weight must have the same dtype, got ",
              dtype_str(x.scalar_type()), " and ", dtype_str(weight.scalar_type()));
  TORCH_CHECK(x.device() == weight.device(), "tilelab::tiled_linear: x is on ", x.device(), " and weight is on ",
              weight.device(), "; both must be on the same device");
  if (bias != nullptr) {
    const bool ok = bias->dim() == 0 || (bias->dim() == 1 && (bias->size(0) == weight.size(0) || bias->size(0) == 1));
    TORCH_CHECK(ok, "tilelab::tiled_linear: bias must have shape (", weight.size(0), ",) (out_features), got ",
                bias->sizes());
  }
}

// An optional string argument of an op (c10::string_view) as a std::string_view.
inline std::optional<std::string_view> view_of(std::optional<c10::string_view> s) {
  if (!s.has_value()) return std::nullopt;
  return std::string_view(s->data(), s->size());
}

// An op's `Tensor? bias` as a pointer: nullptr when absent (None or undefined).
inline const at::Tensor* bias_ptr(const std::optional<at::Tensor>& bias) {
  return bias.has_value() && bias->defined() ? &*bias : nullptr;
}

// The activation named by the op's `activation` argument, or an error naming the valid ones.
inline Activation parse_activation(const char* op, std::optional<c10::string_view> name) {
  const std::optional<std::string_view> n = view_of(name);
  const std::optional<Activation> a = activation_from_name(n);
  TORCH_CHECK(a.has_value(), "tilelab::", op, ": unknown activation '", std::string(*n), "'; valid: ", kActivationNames);
  return *a;
}

// explain()'s inputs: a, b as the products take them, and optionally the epilogue of tiled_addmm / tiled_linear
// (a bias broadcast to (M, N) as torch.addmm's, an activation), which is part of the problem the chooser sees.
// Both describe 2-D products only (tiled_bmm takes neither). Returns the activation.
inline Activation check_explain_inputs(const char* op, const at::Tensor* bias,
                                       std::optional<c10::string_view> activation, const at::Tensor& a,
                                       const at::Tensor& b) {
  const Activation act = parse_activation(op, activation);
  const bool batched = a.dim() == 3;
  TORCH_CHECK(!batched || (bias == nullptr && act == Activation::None), "tilelab::", op,
              ": a bias or an activation describes a 2-D product (tiled_addmm, tiled_linear); tiled_bmm takes neither");
  check_gemm_inputs(op, bias, a, b, batched);
  return act;
}

// ------------------------------------------------------------------ problem
// x viewed as (batch, rows, cols): A is (batch, M, K), B (batch, K, N).
inline Operand make_operand(const at::Tensor& x, bool is_a) {
  // A dimension of size 1 is never stepped along, so its stride is free: pick
  // the value that makes the matrix look row-major.
  int64_t s_batch = x.size(0) == 1 ? 0 : x.stride(0);
  int64_t s_row = x.size(1) == 1 ? x.size(2) : x.stride(1);
  int64_t s_col = x.size(2) == 1 ? 1 : x.stride(2);
  at::Tensor keep = x;
  if (s_col != 1 && s_row != 1) {  // neither layout: one contiguous copy
    keep = x.contiguous();
    s_row = keep.size(2);
    s_col = 1;
    s_batch = keep.size(0) == 1 ? 0 : keep.size(1) * keep.size(2);
  }
  const bool row_major = s_col == 1;
  Operand o;
  o.keep = keep;
  o.data = keep.data_ptr();
  o.s_batch = s_batch;
  if (is_a) {  // rows are m, columns k
    o.s_mn = s_row, o.s_k = s_col, o.k_contiguous = row_major;
  } else {     // rows are k, columns n
    o.s_k = s_row, o.s_mn = s_col, o.k_contiguous = !row_major;
  }
  return o;
}

struct GemmCall {
  GemmProblem problem;
  at::Tensor out;
  at::Tensor bias;  // the bias as an (M, N) view (broadcast dims have stride 0)
};

// The problem of validated inputs (check_gemm_inputs) and its fresh output.
inline GemmCall make_gemm(const at::Tensor* bias, const at::Tensor& a, const at::Tensor& b,
                          Activation act = Activation::None) {
  const bool batched = a.dim() == 3;
  const at::Tensor a3 = batched ? a : a.unsqueeze(0), b3 = batched ? b : b.unsqueeze(0);
  GemmCall call;
  GemmProblem& p = call.problem;
  p.batch = a3.size(0);
  p.M = a3.size(1);
  p.K = a3.size(2);
  p.N = b3.size(2);
  p.dtype = a.scalar_type();
  p.allow_tf32 = at::globalContext().allowTF32CuBLAS();
  p.act = act;
  call.out = batched ? at::empty({p.batch, p.M, p.N}, a.options()) : at::empty({p.M, p.N}, a.options());
  if (p.batch == 0 || p.M == 0 || p.N == 0) return call;  // nothing to read: leave the operands empty
  p.a = make_operand(a3, true);
  p.b = make_operand(b3, false);
  p.c = call.out.data_ptr();
  p.sc_m = p.N;
  p.sc_b = p.M * p.N;
  if (bias != nullptr) {
    call.bias = bias->expand({p.M, p.N});
    p.bias = call.bias.data_ptr();
    // A dimension of size 1 is never stepped along: stride 0, so that one row (or column) counts as the
    // broadcast it is. expand() keeps a size-1 dimension's own stride ((N,) to (1, N) is (N, 1), not (0, 1)),
    // which sent a single row's F.linear bias down the per-element path: no TMA store, the activation in a
    // pass of its own (H200, bf16, hopper_m64_64x64x64 1x2048x5632 + bias 11.5 us against 8.6 bare).
    p.sbias_m = p.M == 1 ? 0 : call.bias.stride(0);
    p.sbias_n = p.N == 1 ? 0 : call.bias.stride(1);
  }
  return call;
}

// act(y) with torch's own kernels: in place (one pass over y), or as a new
// tensor (what autograd records: the activation saves its input).
inline at::Tensor torch_activation(const at::Tensor& y, Activation act, bool in_place) {
  at::Tensor t = y;
  switch (act) {
    case Activation::Relu: return in_place ? at::relu_(t) : at::relu(y);
    case Activation::Gelu: return in_place ? at::gelu_(t) : at::gelu(y);
    case Activation::GeluTanh: return in_place ? at::gelu_(t, "tanh") : at::gelu(y, "tanh");
    case Activation::Silu: return in_place ? at::silu_(t) : at::silu(y);
    default: return y;
  }
}

// tiled_linear's x (..., K) as (rows, K), and the (rows, N) result as (..., N).
inline at::Tensor linear_rows(const at::Tensor& x) { return x.dim() == 2 ? x : x.reshape({-1, x.size(-1)}); }
inline at::Tensor linear_output(const at::Tensor& y, const at::Tensor& x, int64_t N) {
  if (x.dim() == 2) return y;
  std::vector<int64_t> sizes(x.sizes().begin(), x.sizes().end() - 1);
  sizes.push_back(N);
  return y.view(sizes);
}

// Finishes a problem with nothing to multiply (an empty output, or K = 0: the
// output is the bias, or zeros); returns false if there is a product to run.
inline bool finish_without_product(GemmCall& call) {
  const GemmProblem& p = call.problem;
  if (p.batch == 0 || p.M == 0 || p.N == 0) return true;
  if (p.K != 0) return false;
  if (call.bias.defined()) call.out.copy_(call.bias);
  else call.out.zero_();
  torch_activation(call.out, p.act, /*in_place=*/true);  // act(0 + bias), as torch computes it
  return true;
}

// The four ops as entry points of one backend's host path `Gemm`
// (gemm_cpu, gemm_cuda): what TORCH_LIBRARY_IMPL registers.
using Variant = std::optional<c10::string_view>;
using Tile = std::optional<int64_t>;
template <at::Tensor (*Gemm)(const char*, const at::Tensor*, const at::Tensor&, const at::Tensor&, bool, Activation,
                             Variant, Tile)>
struct GemmOps {
  static at::Tensor mm(const at::Tensor& a, const at::Tensor& b, Variant variant, Tile tile) {
    return Gemm("tiled_mm", nullptr, a, b, false, Activation::None, variant, tile);
  }
  static at::Tensor addmm(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b, Variant variant,
                          Tile tile) {
    return Gemm("tiled_addmm", &bias, a, b, false, Activation::None, variant, tile);
  }
  static at::Tensor bmm(const at::Tensor& a, const at::Tensor& b, Variant variant, Tile tile) {
    return Gemm("tiled_bmm", nullptr, a, b, true, Activation::None, variant, tile);
  }
  // act(x @ weight.t() + bias) over x's rows: weight.t() is a column-major
  // view the kernels read in place; x (..., K) is viewed as (rows, K).
  static at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                           std::optional<c10::string_view> activation, Variant variant, Tile tile) {
    const Activation act = parse_activation("tiled_linear", activation);
    const at::Tensor* b = bias_ptr(bias);
    check_linear_inputs(x, weight, b);
    return linear_output(Gemm("tiled_linear", b, linear_rows(x), weight.t(), false, act, variant, tile), x,
                         weight.size(0));
  }
  // _tiled_linear_pre: (act(y), y) for y = F.linear(x, weight, bias), what tiled_linear's training path records
  // (autograd.cpp). Here composed: the product, then torch's activation into a new tensor; the CUDA backend
  // stores both from one kernel where it can (host.cpp: linear_pre_cuda).
  static std::tuple<at::Tensor, at::Tensor> linear_pre(const at::Tensor& x, const at::Tensor& weight,
                                                       const std::optional<at::Tensor>& bias,
                                                       c10::string_view activation, Variant variant, Tile tile) {
    const at::Tensor pre = linear(x, weight, bias, std::nullopt, variant, tile);
    return {torch_activation(pre, parse_activation("_tiled_linear_pre", activation), /*in_place=*/false), pre};
  }
};

}  // namespace tilelab
