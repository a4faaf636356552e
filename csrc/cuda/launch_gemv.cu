// The gemv family: each table row x dtype x {16-byte, any-stride} loads.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "aligned_copy.h"
#include "kernels/gemv.cuh"
#include "launch.h"

namespace tilelab {

std::string gemv_cannot_run(const KernelConfig&, const GemmProblem&, const DeviceInfo&) { return ""; }

void launch_gemv(const KernelConfig& row, const GemmProblem& p) {
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  visit_family<Family::Gemv>(row, [&](auto r) {
    constexpr KernelConfig c = kConfigs[decltype(r)::value];
    static_assert(c.warps_m == 1 && c.bn == c.warps_n && c.threads == 32 * c.warps_n,
                  "gemv: a warp per output column, bn columns per block");
    // 16-byte loads need both operands k-contiguous with 16-byte aligned rows.
    const bool vec = p.a.k_contiguous && p.b.k_contiguous && rows_aligned16(p.a, p) && rows_aligned16(p.b, p);
    const dim3 grid = grid_for(p, c.bm, c.bn);
    TILELAB_DISPATCH_FLOATS(p.dtype, "tilelab_gemv", [&] {
      const auto args = device_args<scalar_t>(p);
      if (vec)
        gemv_kernel<scalar_t, c.bm, c.warps_n, true><<<grid, c.threads, 0, stream>>>(args);
      else
        gemv_kernel<scalar_t, c.bm, c.warps_n, false><<<grid, c.threads, 0, stream>>>(args);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
}

}  // namespace tilelab
