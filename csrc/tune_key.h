#pragma once
// The identity of a problem for the tune cache (tilelab_torch.tune): what the
// chooser's pick may depend on. One definition for C++ (the cache lookup in
// cuda/chooser.cpp) and Python (torch.ops.tilelab._tune_key, ops.cpp).
#include <string>

#include "gemm.h"

namespace tilelab {

inline std::string tune_key(const GemmProblem& p) {
  std::string k = dtype_str(p.dtype) + " " + std::to_string(p.batch) + "x" + std::to_string(p.M) + "x" +
                  std::to_string(p.N) + "x" + std::to_string(p.K);
  k += p.a.k_contiguous ? " a=row" : " a=col";
  k += p.b.k_contiguous ? " b=col" : " b=row";
  if (p.bias != nullptr) k += " bias";
  if (p.act != Activation::None) k += std::string(" act=") + activation_name(p.act);
  if (p.allow_tf32 && p.dtype == c10::ScalarType::Float) k += " tf32";
  return k;
}

}  // namespace tilelab
