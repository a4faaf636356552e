// The gemv_mma family (mma.sync, sm_80+ instructions; its rows sized for sm_90's shared memory): each
// table row x {bf16, fp16} x {up to 8 rows, more}.
//
// The kernel reads x k-contiguous and B in its row's layout (gemv_mma: k-contiguous, x @ W.t(); gemv_mma_rowb:
// n-contiguous, a W stored (K, N) like transformers' Conv1D), both with 16-byte aligned rows: an operand that
// is not (a column-major x, B in the other layout, a misaligned view, an odd leading dimension) is first copied
// (aligned_copy.h) -- correct, but the copy of W costs more than the product, so the chooser gives each row
// only the layout it reads in place.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>

#include "aligned_copy.h"
#include "kernels/gemv_mma.cuh"
#include "launch.h"

namespace tilelab {

namespace {

// One kernel on p: persistent, every block resident, each with the same number of tiles (the last with
// the rest). The shared-memory opt-in and the blocks an SM holds: once per device (launch.h,
// once_per_device).
template <typename T, int kWarps, int kU, int kStages, int kR, bool kTwo, bool kNMajor>
void launch_kernel(const GemmProblem& p, int64_t tiles, cudaStream_t stream) {
  constexpr auto kernel = gemv_mma_kernel<T, kWarps, kU, kStages, kR, kTwo, kNMajor>;
  constexpr int smem = gemv_mma::smem_bytes<kWarps, kU, kStages, kR, kTwo>();
  allow_smem<kernel>(smem);
  const int per_sm = once_per_device<kernel, DeviceFact::kBlocksPerSm>([&] {
    int n = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, kWarps * 32, smem));
    return std::max(n, 1);
  });
  const int64_t slots = static_cast<int64_t>(at::cuda::getCurrentDeviceProperties()->multiProcessorCount) * per_sm;
  const PersistentShares share = persistent_shares(tiles, slots);
  kernel<<<static_cast<unsigned>(share.blocks), kWarps * 32, smem, stream>>>(device_args<T>(p), share.per);
}

// The shared memory a block of row kRow takes: its ring and sums, the larger of its two variants.
template <int kRow>
constexpr int row_smem() {
  constexpr KernelConfig c = kConfigs[kRow];
  constexpr int kWarps = c.threads / 32, kU = c.bk / 32, kR = c.bn / 16;
  constexpr int kStagesTwo = gemv_mma::stages_two<c.stages, kR>();
  return std::max(gemv_mma::smem_bytes<kWarps, kU, c.stages, kR, false>(),
                  gemv_mma::smem_bytes<kWarps, kU, kStagesTwo, kR, true>());
}

}  // namespace

std::string gemv_mma_cannot_run(const KernelConfig& row, const GemmProblem&, const DeviceInfo& d) {
  if (d.max_smem_per_block == 0) return "";  // a described GPU: the row's min_sm stands for its shared memory
  int need = 0;
  visit_family<Family::GemvMma>(row, [&](auto r) { need = row_smem<decltype(r)::value>(); });
  if (need <= d.max_smem_per_block) return "";
  return std::string(row.name) + " needs " + std::to_string(need / 1024) + " KB of shared memory a block but " +
         d.label() + " (" + d.name + ") allows " + std::to_string(d.max_smem_per_block / 1024) + " KB";
}

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
    constexpr int kStagesTwo = gemv_mma::stages_two<c.stages, kR>();  // more than 8 rows
    constexpr bool kNMajor = same_name(c.variant, "gemv_mma_rowb");  // B n-contiguous (x @ B, B row-major)
    static_assert(kNMajor || same_name(c.variant, "gemv_mma"), "gemv_mma: a row reads B k- or n-contiguous");
    static_assert(row_smem<decltype(r)::value>() <= kSm90SmemBytes, "gemv_mma: the ring and the sums fit sm_90's 227 KB");
    static_assert(c.min_sm >= 90 || row_smem<decltype(r)::value>() <= kSm80SmemBytes,
                  "gemv_mma: a ring above sm_80's 163 KB a block needs min_sm 90");
    GemmProblem p = p0;
    if (!p.a.k_contiguous) flip_contiguity(p, p.a, true);
    if (p.b.k_contiguous == kNMajor) flip_contiguity(p, p.b, false);
    align_operand_rows(p);
    const int64_t tiles = (p.M + c.bm - 1) / c.bm * ((p.N + c.bn - 1) / c.bn) * p.batch;
    auto with_rows = [&](auto tag) {
      using T = decltype(tag);
      if (p.M > 8)
        launch_kernel<T, kWarps, kU, kStagesTwo, kR, true, kNMajor>(p, tiles, stream);
      else
        launch_kernel<T, kWarps, kU, c.stages, kR, false, kNMajor>(p, tiles, stream);
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
