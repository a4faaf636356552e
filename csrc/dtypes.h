#pragma once
// The dtypes tilelab computes in, and how they are named in messages. Neutral:
// the CPU kernel, the CUDA host code and the config table all include it.
#include <c10/core/ScalarType.h>

#include <string>

namespace tilelab {

// Dtypes a table row supports, as a bit mask.
enum DtypeBits : unsigned {
  kF32 = 1u << 0,
  kF64 = 1u << 1,
  kF16 = 1u << 2,
  kBF16 = 1u << 3,
  kAllFloat = kF32 | kF64 | kF16 | kBF16,
};

inline unsigned dtype_bit(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return kF32;
    case c10::ScalarType::Double: return kF64;
    case c10::ScalarType::Half: return kF16;
    case c10::ScalarType::BFloat16: return kBF16;
    default: return 0;
  }
}

inline bool is_supported_dtype(c10::ScalarType t) { return dtype_bit(t) != 0; }

inline bool is_half(c10::ScalarType t) {
  return t == c10::ScalarType::Half || t == c10::ScalarType::BFloat16;
}

// torch's spelling ("torch.float32"), as in Python error messages.
inline std::string dtype_str(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return "torch.float32";
    case c10::ScalarType::Double: return "torch.float64";
    case c10::ScalarType::Half: return "torch.float16";
    case c10::ScalarType::BFloat16: return "torch.bfloat16";
    default: return std::string("torch.") + c10::toString(t);
  }
}

inline constexpr const char* kSupportedDtypes = "torch.float32, torch.float64, torch.float16, torch.bfloat16";

}  // namespace tilelab
