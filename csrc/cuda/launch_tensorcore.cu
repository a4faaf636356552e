// The tensorcore family (mma.sync, sm_80+): each table row x operand layouts
// (A and B each k- or m/n-contiguous) x dtype (half + bfloat16 for the half
// rows, float for the TF32 rows).
//
// The kernel reads operands only through 16-byte cp.async, so every row start
// must be 16-byte aligned: an operand that is not (half with an odd leading
// dimension such as K = 4095, fp32 with one not a multiple of 4, a misaligned
// view) is first copied into aligned rows (aligned_copy.h).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "aligned_copy.h"
#include "kernels/tensorcore.cuh"
#include "launch.h"

namespace tilelab {
namespace {

template <typename T, int kRow, bool kAK, bool kBK>
void launch_one(const GemmProblem& p0, cudaStream_t stream) {
  constexpr KernelConfig c = kConfigs[kRow];
  constexpr int kWarpsM = c.warps_m, kWarpsN = c.warps_n;
  constexpr int smem = tc::smem_bytes<T, c.bm, c.bn, c.bk, c.stages, c.pad, kAK, kBK>();
  constexpr auto kernel = tensorcore_kernel<T, c.bm, c.bn, c.bk, kWarpsM, kWarpsN, c.stages, c.pad, kAK, kBK>;
  allow_smem<kernel>(smem);
  GemmProblem p = p0;
  align_operand_rows(p);
  kernel<<<grid_for(p, c.bm, c.bn), c.threads, smem, stream>>>(device_args<T>(p));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T, int kRow>
void launch_layouts(const GemmProblem& p, cudaStream_t stream) {
  with_layouts(p, [&](auto ak, auto bk) { launch_one<T, kRow, decltype(ak)::value, decltype(bk)::value>(p, stream); });
}

}  // namespace

std::string tensorcore_cannot_run(const KernelConfig&, const GemmProblem&, const DeviceInfo&) { return ""; }

void launch_tensorcore(const KernelConfig& row, const GemmProblem& p) {
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  visit_family<Family::TensorCore>(row, [&](auto r) {
    constexpr int kRow = decltype(r)::value;
    constexpr KernelConfig c = kConfigs[kRow];
    static_assert(c.warps_m == 2 && c.threads == 32 * c.warps_m * c.warps_n, "tensorcore: a 2 x N warp grid");
    static_assert(c.bm % (16 * c.warps_m) == 0 && c.bn % (16 * c.warps_n) == 0, "whole warp tiles");
    static_assert(c.min_sm >= 80, "mma.sync bf16/tf32, cp.async and ldmatrix need sm_80");
    if constexpr (c.tf32) {
      static_assert(c.dtypes == kF32, "TF32 rows take fp32 inputs only");
      TORCH_CHECK(p.dtype == at::kFloat, "tilelab: ", c.name, " needs float32 inputs");
      launch_layouts<float, kRow>(p, stream);
    } else {
      static_assert(c.dtypes == (kF16 | kBF16), "half rows take float16/bfloat16");
      if (p.dtype == at::kHalf)
        launch_layouts<c10::Half, kRow>(p, stream);
      else if (p.dtype == at::kBFloat16)
        launch_layouts<c10::BFloat16, kRow>(p, stream);
      else
        TORCH_CHECK(false, "tilelab: ", c.name, " needs float16 or bfloat16 inputs");
    }
  });
}

}  // namespace tilelab
