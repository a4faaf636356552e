// Instantiates the blocked family: each table row x {kVecA, kVecB}, fp32 only.
#include <c10/cuda/CUDAException.h>

#include "kernels/blocked.cuh"
#include "launch.h"

namespace tilelab {
namespace {

// What the table row does not spell out, derived from it: every thread holds
// an 8 x TN register tile (TN = 8 for the 256-thread 128x128 tile, 4 for the
// 128-thread 64x64 one), the pipeline is 3 stages deep.
constexpr int kBlockedTM = 8;
constexpr int kBlockedStages = 3;
constexpr int blocked_tn(const KernelConfig& c) { return c.bm * c.bn / (c.threads * kBlockedTM); }

// 16-byte copies need the unit stride along m (A) / n (B), a 16-byte aligned
// base and leading (and batch) strides that are multiples of 4 floats.
bool vec_ok(const void* ptr, int64_t s_unit, int64_t s_lead, int64_t s_batch, int batch) {
  return s_unit == 1 && s_lead % 4 == 0 && (batch == 1 || s_batch % 4 == 0) &&
         (reinterpret_cast<uintptr_t>(ptr) & 15) == 0;
}

}  // namespace

void launch_blocked(int config_index, const GemmProblem& p, cudaStream_t stream) {
  TORCH_CHECK(p.dtype == at::kFloat, "tilelab: the blocked kernels are fp32 only");
  const bool found = visit_family<Family::Blocked>(config_index, [&](auto row) {
    constexpr KernelConfig c = kConfigs[decltype(row)::value];
    constexpr int TN = blocked_tn(c);
    using S = BlockedShape<c.bm, c.bn, c.bk, kBlockedTM, TN, c.pad, kBlockedStages>;
    static_assert(S::kThreads == c.threads, "blocked: the row's thread count must match its warp tiling");
    static_assert(c.pad == 4, "blocked: kPad = 4 (16-byte rows, conflict-free transposed stores)");
    const dim3 grid = grid_for(p, c.bm, c.bn), block(c.threads);
    const bool va = vec_ok(p.a, p.sa_m, p.sa_k, p.sa_b, p.batch);
    const bool vb = vec_ok(p.b, p.sb_n, p.sb_k, p.sb_b, p.batch);
    const auto args = GemmArgs<float>::from(p);
    auto go = [&](auto kernel) {
      if constexpr (S::kSmemBytes > 48 * 1024) {
        C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(S::kSmemBytes)));
      }
      kernel<<<grid, block, S::kSmemBytes, stream>>>(args);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    };
    constexpr int BM = c.bm, BN = c.bn, BK = c.bk, P = c.pad, ST = kBlockedStages, TM = kBlockedTM;
    if (va && vb) go(blocked_kernel<BM, BN, BK, TM, TN, P, ST, true, true>);
    else if (va) go(blocked_kernel<BM, BN, BK, TM, TN, P, ST, true, false>);
    else if (vb) go(blocked_kernel<BM, BN, BK, TM, TN, P, ST, false, true>);
    else go(blocked_kernel<BM, BN, BK, TM, TN, P, ST, false, false>);
  });
  TORCH_CHECK(found, "tilelab: config ", kConfigs[config_index].name, " is not a blocked kernel");
}

}  // namespace tilelab
