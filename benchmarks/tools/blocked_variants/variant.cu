// One blocked_kernel instantiation (row-major A: k-fast 4-byte copies, row-major
// B: 16-byte copies), built once per -D set by run.sh so ptxas runs in parallel.
//   V_NAME, V_BM, V_BN, V_BK, V_ST (stages), V_CS (k-steps the copies spread over),
//   V_THREADS (the 8 x TN thread tile follows: TN = BM*BN / (V_THREADS*8))
// With V_OLD the kernel comes from the blocked.cuh of another git revision, which
// run.sh --old REV extracts into <build dir>/old/ (on the include path), renamed into
// its own namespace so both link into one program. That revision's blocked_kernel
// must have the same template parameters as the current one.
#include <cuda_runtime.h>
#include <cstdio>

#include "variants.h"
#ifdef V_OLD
#define tilelab tilelab_old
#include "old/csrc/cuda/kernels/blocked.cuh"
#undef tilelab
namespace ns = tilelab_old;
#else
#include "../../../csrc/cuda/kernels/blocked.cuh"
namespace ns = tilelab;
#endif

namespace {
constexpr int TM = 8, TN = V_BM * V_BN / (V_THREADS * TM);
using S = ns::BlockedShape<V_BM, V_BN, V_BK, TM, TN, 4, V_ST>;
static_assert(S::kThreads == V_THREADS, "variant: the thread count must match the warp tiling");
// Template parameters: BM, BN, BK, TM, TN, kPad, kStages, kCopySteps, kModeA, kModeB
// (csrc/cuda/kernels/blocked.cuh); copy mode 1: 4-byte copies along k (row-major A),
// mode 0: 16-byte copies (row-major B with 16-byte aligned rows: N a multiple of 4).
constexpr auto kKernel = ns::blocked_kernel<V_BM, V_BN, V_BK, TM, TN, 4, V_ST, V_CS, 1, 0>;

void launch(const float* a, const float* b, float* c, int M, int N, int K) {
  ns::GemmArgs<float> p{};
  p.a = a; p.b = b; p.c = c; p.bias = nullptr;
  p.M = M; p.N = N; p.K = K;
  p.sa_m = K; p.sa_k = 1; p.sa_b = 0;
  p.sb_k = N; p.sb_n = 1; p.sb_b = 0;
  p.sc_m = N; p.sc_b = 0;
  p.act = ns::Activation::None;
  p.batch = 1; p.splits = 1; p.partial = nullptr;  // one matrix, K unsplit (0 would run no work)
  static bool once = [] {
    cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(S::kSmemBytes));
    return true;
  }();
  (void)once;
  dim3 grid((M + V_BM - 1) / V_BM, (N + V_BN - 1) / V_BN, 1);
  kKernel<<<grid, S::kThreads, S::kSmemBytes>>>(p);
}
Register reg(V_NAME, launch);
}  // namespace
