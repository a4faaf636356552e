// The gemv_mma family (mma.sync, sm_80+): each table row x {bf16, fp16}.
//
// The kernel reads both operands k-contiguous with 16-byte aligned rows: an
// operand that is not (a column-major x, a W stored (K, N) like transformers'
// Conv1D, a misaligned view, an odd leading dimension) is first copied
// (aligned_copy.h) -- correct, but the copy of W costs more than the product,
// so the chooser gives this family k-contiguous operands only.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>

#include "aligned_copy.h"
#include "kernels/gemv_mma.cuh"
#include "launch.h"

namespace tilelab {

namespace {

// Blocks of `kernel` (with `smem` bytes) resident per SM on the current device, asked once per device.
template <typename Kernel>
int resident_blocks(Kernel kernel, int threads, int smem) {
  static int cached[64] = {};
  const int dev = c10::cuda::current_device();
  if (dev < 64 && cached[dev] > 0) return cached[dev];
  int n = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, threads, smem));
  n = std::max(n, 1);
  if (dev < 64) cached[dev] = n;
  return n;
}

}  // namespace

std::string gemv_mma_cannot_run(const KernelConfig&, const GemmProblem&, const DeviceInfo&) { return ""; }

void launch_gemv_mma(const KernelConfig& row, const GemmProblem& p0) {
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  visit_family<Family::GemvMma>(row, [&](auto r) {
    constexpr KernelConfig c = kConfigs[decltype(r)::value];
    static_assert(c.bm == 16 && c.bn % 16 == 0 && c.warps_m == 1 && c.warps_n == 1,
                  "gemv_mma: tiles of 16 x rows by bn (groups of 16 W rows) columns, the warps splitting K");
    static_assert(c.bk % 32 == 0 && c.threads % 32 == 0 && c.stages >= 2,
                  "gemv_mma: bk is the K a lane quad streams per round (32 per 16-byte piece), through >= 2 stages");
    static_assert(c.dtypes == (kF16 | kBF16) && c.min_sm >= 80, "gemv_mma: mma.sync bf16/fp16 needs sm_80");
    constexpr int kWarps = c.threads / 32, kU = c.bk / 32, kR = c.bn / 16;
    // More than 8 rows: a fourth piece per chunk, in the same ring bytes (fewer stages).
    constexpr int kStagesTwo =
        std::max(2, c.stages * gemv_mma::pieces<kR, false>() / gemv_mma::pieces<kR, true>());
    static_assert(gemv_mma::smem_bytes<kWarps, kU, c.stages, kR, false>() <= 227 * 1024 &&
                      gemv_mma::smem_bytes<kWarps, kU, kStagesTwo, kR, true>() <= 227 * 1024,
                  "gemv_mma: the ring and the sums fit an SM's 227 KB");
    GemmProblem p = p0;
    if (!p.a.k_contiguous) flip_contiguity(p, p.a, true);
    if (!p.b.k_contiguous) flip_contiguity(p, p.b, false);
    align_operand_rows(p);
    const int64_t tiles = (p.M + c.bm - 1) / c.bm * ((p.N + c.bn - 1) / c.bn) * p.batch;
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    auto run = [&](auto kernel, int smem, auto tag) {
      using T = decltype(tag);
      allow_smem(kernel, smem);
      // Persistent: every block resident, each with the same number of tiles (the last with the rest).
      const int64_t slots = static_cast<int64_t>(sms) * resident_blocks(kernel, c.threads, smem);
      const int64_t per = (tiles + slots - 1) / slots;
      const int64_t grid = (tiles + per - 1) / per;
      kernel<<<static_cast<unsigned>(grid), c.threads, smem, stream>>>(device_args<T>(p), per);
    };
    auto with_rows = [&](auto tag) {
      using T = decltype(tag);
      if (p.M > 8)
        run(gemv_mma_kernel<T, kWarps, kU, kStagesTwo, kR, true>,
            gemv_mma::smem_bytes<kWarps, kU, kStagesTwo, kR, true>(), tag);
      else
        run(gemv_mma_kernel<T, kWarps, kU, c.stages, kR, false>,
            gemv_mma::smem_bytes<kWarps, kU, c.stages, kR, false>(), tag);
    };
    if (p.dtype == at::kHalf)
      with_rows(c10::Half{});
    else if (p.dtype == at::kBFloat16)
      with_rows(c10::BFloat16{});
    else
      TORCH_CHECK(false, "tilelab: ", c.name, " needs float16 or bfloat16 inputs");
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  });
}

}  // namespace tilelab
