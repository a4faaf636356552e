#pragma once
// The activations an epilogue may apply after the bias (tiled_linear's
// `activation=`), one definition for the CPU kernel and the CUDA epilogue:
// computed in the accumulator type on (accumulator + bias), before the one
// rounding to the output dtype. Each is the function torch computes:
//   relu       torch.relu (NaN stays NaN)
//   gelu       F.gelu, 0.5 x (1 + erf(x / sqrt 2))
//   gelu_tanh  F.gelu(approximate="tanh"), 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//              (transformers' gelu_new / gelu_pytorch_tanh)
//   silu       F.silu, x / (1 + exp(-x))
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#ifdef __CUDACC__
#define TILELAB_HD __host__ __device__ __forceinline__
#else
#define TILELAB_HD inline
#endif

namespace tilelab {

enum class Activation : int32_t { None = 0, Relu, Gelu, GeluTanh, Silu };

inline constexpr const char* kActivationNames = "'relu', 'gelu', 'gelu_tanh', 'silu' (or None)";

// The activation called `name` (None: no activation); nullopt for an unknown name.
inline std::optional<Activation> activation_from_name(std::optional<std::string_view> name) {
  if (!name.has_value()) return Activation::None;
  if (*name == "relu") return Activation::Relu;
  if (*name == "gelu") return Activation::Gelu;
  if (*name == "gelu_tanh") return Activation::GeluTanh;
  if (*name == "silu") return Activation::Silu;
  return std::nullopt;
}

inline const char* activation_name(Activation a) {
  switch (a) {
    case Activation::Relu: return "relu";
    case Activation::Gelu: return "gelu";
    case Activation::GeluTanh: return "gelu_tanh";
    case Activation::Silu: return "silu";
    default: return "none";
  }
}

template <typename Acc>
TILELAB_HD Acc activate(Activation a, Acc x) {
  using std::erf;
  using std::exp;
  using std::tanh;
  switch (a) {
    case Activation::Relu: return x < Acc(0) ? Acc(0) : x;
    case Activation::Gelu: return Acc(0.5) * x * (Acc(1) + erf(x * Acc(0.70710678118654752440)));
    case Activation::GeluTanh:
      return Acc(0.5) * x * (Acc(1) + tanh(Acc(0.79788456080286535588) * (x + Acc(0.044715) * x * x * x)));
    case Activation::Silu: return x / (Acc(1) + exp(-x));
    default: return x;
  }
}

}  // namespace tilelab
