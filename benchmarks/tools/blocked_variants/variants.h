#pragma once
// A registry of fp32 GEMM launchers for the standalone variant sweep
// (row-major A, row-major B, row-major C; see run.sh).
#include <string>
#include <vector>

using LaunchFn = void (*)(const float* a, const float* b, float* c, int M, int N, int K);
struct Variant {
  std::string name;
  LaunchFn fn;
};
inline std::vector<Variant>& registry() {
  static std::vector<Variant> v;
  return v;
}
struct Register {
  Register(const char* name, LaunchFn fn) { registry().push_back({name, fn}); }
};
