// The tiled family: each table row x {even, predicated} x dtype.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "kernels/tiled.cuh"
#include "launch.h"

namespace tilelab {

std::string tiled_cannot_run(const KernelConfig&, const GemmProblem&, const DeviceInfo&) { return ""; }

void launch_tiled(const KernelConfig& row, const GemmProblem& p) {
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  visit_family<Family::Tiled>(row, [&](auto r) {
    constexpr KernelConfig c = kConfigs[decltype(r)::value];
    static_assert(c.bm == c.bn && c.bn == c.bk && c.bm == c.tile && c.bm * c.bn == c.threads,
                  "tiled: square T x T x T tiles, one thread per output");
    static_assert(c.pad == 0 && c.stages == 1, "tiled: one unpadded stage; padding is the padded family");
    const dim3 grid = grid_for(p, c.bm, c.bn), block(c.bn, c.bm);
    const bool even = is_even(p, c.bm, c.bn, c.bk);
    TILELAB_DISPATCH_FLOATS(p.dtype, "tilelab_tiled", [&] {
      const auto args = device_args<scalar_t>(p);
      if (even)
        tiled_kernel<scalar_t, c.tile, true><<<grid, block, 0, stream>>>(args);
      else
        tiled_kernel<scalar_t, c.tile, false><<<grid, block, 0, stream>>>(args);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
}

}  // namespace tilelab
