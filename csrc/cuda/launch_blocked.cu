// The blocked family (fp32 SIMT): each table row x 3 copy modes of A x 3 of B.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <type_traits>

#include "aligned_copy.h"
#include "kernels/blocked.cuh"
#include "launch.h"

namespace tilelab {
namespace {

// A tile's copies are spread over its first 2 k-steps (H200, 128x256 at
// 4096^3: 2.814 ms, 3.020 ms with all copies in the first step).
constexpr int kBlockedCopySteps = 2;

// The copy mode of one operand (see blocked.cuh). 16-byte copies need the
// operand m/n-contiguous, a 16-byte aligned base and leading (and batch)
// strides that are multiples of 4 floats.
int copy_mode(const Operand& o, int64_t batch) {
  using namespace blocked_detail;
  if (!o.k_contiguous && rows_aligned16(o.data, o.s_k, o.s_batch, batch, sizeof(float))) return kCopyVec16;
  return o.k_contiguous ? kCopyKContig : kCopyMNContig;
}

// An m/n-contiguous operand whose rows are not 16-byte aligned (a row-major B
// with N % 4 != 0 such as 4095^3, a view like x[1:, 1:]) would take the 4-byte
// copy path, ~25% slower (H200: 3.943 ms at 4095^3 against 3.112 ms at 4096^3).
// Above this size it is first copied into aligned rows (aligned_copy.h) and
// takes the float4 path (4095^3: 3.191 ms). Break-even: the copy costs a
// launch (~3 us) plus 2 x 4 x K x N bytes at ~3 TB/s, the saving ~25% of
// 2MNK / 44 TFLOP/s; for squares they cross near n = 800, hence M*N*K*batch
// >= 2^29 (~812^3).
constexpr int64_t kAlignedCopyMinMNK = int64_t{1} << 29;

// The same size rule moves a k-contiguous B (nn.Linear's weight W, read as
// W.t()) into n-contiguous rows first, for the float4 path of a row-major B: the
// copy is one pass over K x N floats (H200, F.linear's layout at 12288x3072x768:
// 1.537 ms with 4-byte copies of W.t(), 1.267 ms with the copy; a row-major B 1.238),
// but only from kFlipMinRows rows: the copy reads and writes all of W whatever M is,
// while the 4-byte path costs ~15-20% of a product that shrinks with M (H100, fp32
// x @ W.t() per call under CUDA graphs, without the copy: 32x14336x4096 0.320 ms,
// 128x14336x4096 0.507, against 0.273 and 0.447 with a row-major B; the copy of
// that W alone moves 470 MB, ~0.16 ms at 3 TB/s; by the arithmetic above, 8KN bytes
// against ~20% of 2MNK / 44 TFLOP/s, they cross near M = 290).
constexpr int64_t kFlipMinRows = 256;

// Calls fn(std::integral_constant<int, mode>) for the run-time mode.
template <typename Fn>
void with_mode(int mode, Fn&& fn) {
  using namespace blocked_detail;
  switch (mode) {
    case kCopyVec16: fn(std::integral_constant<int, kCopyVec16>{}); break;
    case kCopyKContig: fn(std::integral_constant<int, kCopyKContig>{}); break;
    default: fn(std::integral_constant<int, kCopyMNContig>{}); break;
  }
}

}  // namespace

std::string blocked_cannot_run(const KernelConfig&, const GemmProblem&, const DeviceInfo&) { return ""; }

void launch_blocked(const KernelConfig& row, const GemmProblem& p0) {
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  TORCH_CHECK(p0.dtype == at::kFloat, "tilelab: the blocked kernels are fp32 only");
  visit_family<Family::Blocked>(row, [&](auto r) {
    constexpr KernelConfig c = kConfigs[decltype(r)::value];
    // A warp computes 32 x (bn / warps_n) on a 4 x 8 lane grid: 8 x TN per thread.
    constexpr int TM = 8, TN = c.bn / (8 * c.warps_n);
    static_assert(c.bm == 4 * TM * c.warps_m, "blocked: 8 rows of outputs per thread");
    using S = BlockedShape<c.bm, c.bn, c.bk, TM, TN, c.pad, c.stages>;
    static_assert(S::kThreads == c.threads, "blocked: the row's thread count must match its warp grid");
    static_assert(c.pad == 4, "blocked: kPad = 4 (16-byte rows, conflict-free transposed stores)");
    GemmProblem p = p0;
    if (p.M * p.N * p.K * p.batch >= kAlignedCopyMinMNK) {
      if (!p.b.k_contiguous) align_operand(p, p.b, false);
      else if (p.M >= kFlipMinRows) flip_contiguity(p, p.b, false);  // W.t() of F.linear (above)
      if (!p.a.k_contiguous) align_operand(p, p.a, true);
    }
    const auto args = device_args<float>(p);
    const dim3 grid = grid_for(p, c.bm, c.bn), block(c.threads);
    // 3 x 3 instantiations per row: the copy code of each operand is fixed
    // at compile time, so the main loop carries only the path it runs.
    with_mode(copy_mode(p.a, p.batch), [&](auto ma) {
      with_mode(copy_mode(p.b, p.batch), [&](auto mb) {
        constexpr auto kernel = blocked_kernel<c.bm, c.bn, c.bk, TM, TN, c.pad, c.stages, kBlockedCopySteps,
                                               decltype(ma)::value, decltype(mb)::value>;
        allow_smem<kernel>(static_cast<int>(S::kSmemBytes));
        kernel<<<grid, block, S::kSmemBytes, stream>>>(args);
        C10_CUDA_KERNEL_LAUNCH_CHECK();
      });
    });
  });
}

}  // namespace tilelab
