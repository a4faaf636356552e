// Instantiates the blocked family: each table row x 3 copy modes of A x 3 of B, fp32 only.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <type_traits>

#include "aligned_copy.h"
#include "kernels/blocked.cuh"
#include "launch.h"

namespace tilelab {
namespace {

// What the table row does not spell out, derived from it: every thread holds
// an 8 x TN register tile (TN = 16 for the 256-thread 128x256 tile, 8 for the
// 128-thread 64x128 one, 4 for the 128-thread 64x64 one); the pipeline is 4
// stages deep at BK = 8 and 3 at BK = 16 (32-48 k of copies in flight); a
// tile's copies are spread over its first 2 k-steps. Measured on an H200 with
// the standalone sweep (benchmarks/tuning/blocked_variants/, results in
// blocked/run6/): 128x256, 4096^3: BK=8/4 stages/2 copy steps 2.814 ms,
// BK=8/5/2 2.816, BK=16/3/2 2.906, BK=16/4/2 2.951, BK=8/4/1 3.020.
constexpr int kBlockedTM = 8;
constexpr int kBlockedCopySteps = 2;
constexpr int blocked_stages(const KernelConfig& c) { return c.bk <= 8 ? 4 : 3; }
constexpr int blocked_tn(const KernelConfig& c) { return c.bm * c.bn / (c.threads * kBlockedTM); }

// The copy mode of one operand (see blocked.cuh). 16-byte copies need the
// unit stride along m (A) / n (B), a 16-byte aligned base and leading (and
// batch) strides that are multiples of 4 floats.
int copy_mode(const void* ptr, int64_t s_c, int64_t s_k, int64_t s_batch, int batch) {
  using namespace blocked_detail;
  if (s_c == 1 && s_k % 4 == 0 && (batch == 1 || s_batch % 4 == 0) &&
      (reinterpret_cast<uintptr_t>(ptr) & 15) == 0)
    return kCopyVec16;
  return s_k == 1 && s_c != 1 ? kCopyKFast : kCopyCFast;
}

// An operand that is unit-stride along m (A) / n (B) but whose rows are not
// 16-byte aligned (row-major B with N % 4 != 0, such as 4095^3; a view like
// x[1:, 1:]) would take the 4-byte copy path, which costs ~25% at 4095^3
// (H200: 3.943 ms against 3.112 ms at 4096^3, run 3 of
// benchmarks/results/h200-2026-11-21/blocked/). Above this size it is first
// copied into a buffer with aligned rows (aligned_copy.h) and takes the float4
// path: 4095^3 3.191 ms, 4097^3 3.913 (was 4.880) on the same H200 (run 4).
// Break-even estimate: the copy costs a launch (~3 us) plus
// 2 x 4 x K x N bytes at ~3 TB/s, the saving ~25% of 2MNK / 44 TFLOP/s; for
// squares they cross near n = 800, hence M*N*K*batch >= 2^29 (~812^3).
constexpr int64_t kAlignedCopyMinMNK = int64_t{1} << 29;

// Calls fn(std::integral_constant<int, mode>) for the run-time mode.
template <typename Fn>
void with_mode(int mode, Fn&& fn) {
  using namespace blocked_detail;
  switch (mode) {
    case kCopyVec16: fn(std::integral_constant<int, kCopyVec16>{}); break;
    case kCopyKFast: fn(std::integral_constant<int, kCopyKFast>{}); break;
    default: fn(std::integral_constant<int, kCopyCFast>{}); break;
  }
}

}  // namespace

void launch_blocked(int config_index, const GemmProblem& p) {
  // PyTorch's current stream of the device the caller's CUDAGuard selected.
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  TORCH_CHECK(p.dtype == at::kFloat, "tilelab: the blocked kernels are fp32 only");
  const bool found = visit_family<Family::Blocked>(config_index, [&](auto row) {
    constexpr KernelConfig c = kConfigs[decltype(row)::value];
    constexpr int TN = blocked_tn(c);
    using S = BlockedShape<c.bm, c.bn, c.bk, kBlockedTM, TN, c.pad, blocked_stages(c)>;
    static_assert(S::kThreads == c.threads, "blocked: the row's thread count must match its warp tiling");
    static_assert(c.pad == 4, "blocked: kPad = 4 (16-byte rows, conflict-free transposed stores)");
    const dim3 grid = grid_for(p, c.bm, c.bn), block(c.threads);
    GemmProblem q = p;
    at::Tensor a_copy, b_copy;  // alive until the launch is enqueued
    const bool big = static_cast<int64_t>(p.M) * p.N * p.K * p.batch >= kAlignedCopyMinMNK;
    if (big && q.sa_m == 1 && !rows_aligned16(q.a, q.sa_k, q.sa_b, q.batch, sizeof(float))) {
      a_copy = aligned_copy(q.a, q.dtype, q.batch, q.K, q.M, q.sa_k, q.sa_b);  // stored [k][m]
      q.a = a_copy.data_ptr();
    }
    if (big && q.sb_n == 1 && !rows_aligned16(q.b, q.sb_k, q.sb_b, q.batch, sizeof(float))) {
      b_copy = aligned_copy(q.b, q.dtype, q.batch, q.K, q.N, q.sb_k, q.sb_b);  // stored [k][n]
      q.b = b_copy.data_ptr();
    }
    const int mode_a = copy_mode(q.a, q.sa_m, q.sa_k, q.sa_b, q.batch);
    const int mode_b = copy_mode(q.b, q.sb_n, q.sb_k, q.sb_b, q.batch);
    const auto args = GemmArgs<float>::from(q);
    auto go = [&](auto kernel) {
      if constexpr (S::kSmemBytes > 48 * 1024) {
        C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(S::kSmemBytes)));
      }
      kernel<<<grid, block, S::kSmemBytes, stream>>>(args);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    };
    constexpr int BM = c.bm, BN = c.bn, BK = c.bk, P = c.pad, ST = blocked_stages(c), TM = kBlockedTM;
    constexpr int CS = kBlockedCopySteps;
    // 3 x 3 instantiations per row: the copy code of each operand is fixed
    // at compile time, so the main loop carries only the path it runs.
    with_mode(mode_a, [&](auto ma) {
      with_mode(mode_b, [&](auto mb) {
        go(blocked_kernel<BM, BN, BK, TM, TN, P, ST, CS, decltype(ma)::value, decltype(mb)::value>);
      });
    });
  });
  TORCH_CHECK(found, "tilelab: config ", kConfigs[config_index].name, " is not a blocked kernel");
}

}  // namespace tilelab
