// The padded family: each table row (tile, kPad) x {even, predicated} x dtype.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "kernels/padded.cuh"
#include "launch.h"

namespace tilelab {

std::string padded_cannot_run(const KernelConfig&, const GemmProblem&, const DeviceInfo&) { return ""; }

void launch_padded(const KernelConfig& row, const GemmProblem& p) {
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  visit_family<Family::Padded>(row, [&](auto r) {
    constexpr KernelConfig c = kConfigs[decltype(r)::value];
    static_assert(c.bm == c.bn && c.bn == c.bk && c.bm == c.tile && c.bm * c.bn == c.threads && c.stages == 1,
                  "padded: square T x T x T tiles, one thread per output, one stage");
    const dim3 grid = grid_for(p, c.bm, c.bn), block(c.bn, c.bm);
    const bool even = is_even(p, c.bm, c.bn, c.bk);
    TILELAB_DISPATCH_FLOATS(p.dtype, "tilelab_padded", [&] {
      const auto args = device_args<scalar_t>(p);
      if (even)
        padded_kernel<scalar_t, c.tile, c.pad, true><<<grid, block, 0, stream>>>(args);
      else
        padded_kernel<scalar_t, c.tile, c.pad, false><<<grid, block, 0, stream>>>(args);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
}

}  // namespace tilelab
