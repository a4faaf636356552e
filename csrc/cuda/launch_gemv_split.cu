// The gemv_split family: each table row x {fp32, fp16, bf16}. A row reads B in
// one layout (its bn says which: 16 columns a warp for a k-contiguous B, 128 for
// an n-contiguous one), A k-contiguous and both with 16-byte aligned rows; an
// operand that is not (a view, an odd leading dimension, the other layout) is
// copied first (aligned_copy.h): correct, but the chooser gives each row only
// the layout it reads in place.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <algorithm>

#include "aligned_copy.h"
#include "kernels/gemv_split.cuh"
#include "launch.h"

namespace tilelab {

std::string gemv_split_cannot_run(const KernelConfig&, const GemmProblem&, const DeviceInfo&) { return ""; }

void launch_gemv_split(const KernelConfig& row, const GemmProblem& p0) {
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  visit_family<Family::GemvSplit>(row, [&](auto r) {
    constexpr KernelConfig c = kConfigs[decltype(r)::value];
    constexpr int kWarps = c.warps_n;
    constexpr bool kNMajor = c.bn == gemv_split::block_cols<kWarps, true>();
    static_assert(c.warps_m == 1 && c.threads == 32 * kWarps && c.stages == 0,
                  "gemv_split: warps side by side along N, no shared memory");
    static_assert(kNMajor || c.bn == gemv_split::block_cols<kWarps, false>(),
                  "gemv_split: bn is 16 columns a warp (k-contiguous B) or 128 (n-contiguous B)");
    static_assert(c.bk % 8 == 0, "gemv_split: a split's first k keeps 16-byte loads aligned");
    static_assert((c.dtypes & kF64) == 0, "gemv_split: fp32 and half precision");
    GemmProblem p = p0;
    if (!p.a.k_contiguous) flip_contiguity(p, p.a, true);
    if (p.b.k_contiguous == kNMajor) flip_contiguity(p, p.b, false);
    align_operand_rows(p);
    const dim3 grid = grid_for(p, c.bm, c.bn);
    // More than half a block of rows: every row computed, with no branch per row (kRepeat in gemv_split.cuh).
    // H100, fp32 x @ W.t() per call under CUDA graphs: 16 rows 0.112 ms vs 0.151 skipping rows (16x14336x4096),
    // 0.152 vs 0.210 (16x4096x14336), 0.047 vs 0.058 (16x4096x4096); at 8 rows skipping was 2-6% faster.
    const bool repeat = std::min<int64_t>(p.M, c.bm) > c.bm / 2;
    constexpr int kMinBlocks = gemv_split_blocks_per_sm(c);
    auto go = [&](auto tag) {
      using T = decltype(tag);
      if (repeat)
        gemv_split_kernel<T, c.bm, kWarps, c.bk, kNMajor, true, kMinBlocks>
            <<<grid, c.threads, 0, stream>>>(device_args<T>(p));
      else
        gemv_split_kernel<T, c.bm, kWarps, c.bk, kNMajor, false, kMinBlocks>
            <<<grid, c.threads, 0, stream>>>(device_args<T>(p));
    };
    // Only the row's dtypes are instantiated (the dispatcher validates the dtype against them first).
    constexpr bool kHalfRow = (c.dtypes & (kF16 | kBF16)) != 0;
    if (p.dtype == at::kFloat) go(float{});
    else if constexpr (kHalfRow) {
      if (p.dtype == at::kHalf) go(c10::Half{});
      else if (p.dtype == at::kBFloat16) go(c10::BFloat16{});
      else TORCH_CHECK(false, "tilelab: ", c.name, " needs float32, float16 or bfloat16 inputs");
    } else {
      TORCH_CHECK(false, "tilelab: ", c.name, " needs float32 inputs");
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace tilelab
