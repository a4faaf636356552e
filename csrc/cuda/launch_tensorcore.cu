// Instantiates the tensorcore family: each table row x operand layouts (A row/col,
// B row/col) x dtype (half + bfloat16 for the half rows, float for the TF32 rows).
//
// The kernel only reads operands through 16-byte cp.async, so every row start
// of an operand must be 16-byte aligned. An operand that is not (half with an
// odd leading dimension such as K = 4095, fp32 with a leading dimension not a
// multiple of 4, a misaligned view) is first copied into a buffer whose rows
// are (aligned_copy.h: one bandwidth-bound pass, ~2 x 32 MB for a 4095^2 bf16
// operand, tens of microseconds against a ~0.5 ms GEMM).
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>

#include "aligned_copy.h"
#include "kernels/tensorcore.cuh"
#include "launch.h"

namespace tilelab {
namespace {

constexpr int kTcStages = 4;  // cp.async ring depth (see the table's summaries)

template <typename T, int BM, int BN, int BK, int WMs, int WNs, bool kAK, bool kBK>
void launch_one(const GemmProblem& p0, cudaStream_t stream, dim3 grid) {
  constexpr int smem = tc::smem_bytes<T, BM, BN, BK, kTcStages, kAK, kBK>();
  auto kernel = tensorcore_kernel<T, BM, BN, BK, WMs, WNs, kTcStages, kAK, kBK>;
  // Above 48 KiB of dynamic shared memory needs an explicit opt-in (per device;
  // cheap enough to repeat on every launch).
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  GemmProblem p = p0;
  at::Tensor a_copy, b_copy;  // alive until the launch is enqueued
  align_operand_rows(p, kAK, kBK, a_copy, b_copy);
  kernel<<<grid, WMs * WNs * 32, smem, stream>>>(GemmArgs<T>::from(p));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T, int BM, int BN, int BK, int WMs, int WNs>
void launch_layouts(const GemmProblem& p, cudaStream_t stream, dim3 grid) {
  with_layouts(p, [&](auto ak, auto bk) {
    launch_one<T, BM, BN, BK, WMs, WNs, decltype(ak)::value, decltype(bk)::value>(p, stream, grid);
  });
}

}  // namespace

void launch_tensorcore(int config_index, const GemmProblem& p) {
  // PyTorch's current stream of the device the caller's CUDAGuard selected.
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  const bool found = visit_family<Family::TensorCore>(config_index, [&](auto row) {
    constexpr KernelConfig c = kConfigs[decltype(row)::value];
    constexpr int kWarps = c.threads / 32, kWarpsM = 2, kWarpsN = kWarps / kWarpsM;
    static_assert(c.threads % 64 == 0, "tensorcore: a 2 x (warps/2) warp grid");
    static_assert(c.bm % (16 * kWarpsM) == 0 && c.bn % (16 * kWarpsN) == 0, "whole warp tiles");
    static_assert(c.min_sm >= 80, "mma.sync bf16/tf32, cp.async and ldmatrix need sm_80");
    const dim3 grid = grid_for(p, c.bm, c.bn);
    if constexpr (c.tf32) {
      static_assert(c.dtypes == kF32, "TF32 rows take fp32 inputs only");
      TORCH_CHECK(p.dtype == at::kFloat, "tilelab: ", c.name, " needs float32 inputs");
      launch_layouts<float, c.bm, c.bn, c.bk, kWarpsM, kWarpsN>(p, stream, grid);
    } else {
      static_assert(c.dtypes == (kF16 | kBF16), "half rows take float16/bfloat16");
      if (p.dtype == at::kHalf)
        launch_layouts<c10::Half, c.bm, c.bn, c.bk, kWarpsM, kWarpsN>(p, stream, grid);
      else if (p.dtype == at::kBFloat16)
        launch_layouts<c10::BFloat16, c.bm, c.bn, c.bk, kWarpsM, kWarpsN>(p, stream, grid);
      else
        TORCH_CHECK(false, "tilelab: ", c.name, " needs float16 or bfloat16 inputs");
    }
  });
  TORCH_CHECK(found, "tilelab: config ", kConfigs[config_index].name, " is not a tensorcore kernel");
}

}  // namespace tilelab
