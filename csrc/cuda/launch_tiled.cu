// Instantiates the tiled family: each table row x {even, predicated} x dtype.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "kernels/tiled.cuh"
#include "launch.h"

namespace tilelab {

void launch_tiled(int config_index, const GemmProblem& p) {
  // PyTorch's current stream of the device the caller's CUDAGuard selected.
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  const bool found = visit_family<Family::Tiled>(config_index, [&](auto row) {
    constexpr KernelConfig c = kConfigs[decltype(row)::value];
    static_assert(c.bm == c.bn && c.bn == c.bk && c.bm * c.bn == c.threads,
                  "tiled: square T x T x T tiles, one thread per output");
    static_assert(c.pad == 0, "tiled: no padding; that is the padded family");
    const dim3 grid = grid_for(p, c.bm, c.bn), block(c.bn, c.bm);
    const bool even = is_even(p, c.bm, c.bn, c.bk);
    TILELAB_DISPATCH_FLOATS(p.dtype, "tilelab_tiled", [&] {
      const auto args = GemmArgs<scalar_t>::from(p);
      if (even)
        tiled_kernel<scalar_t, c.tile, true><<<grid, block, 0, stream>>>(args);
      else
        tiled_kernel<scalar_t, c.tile, false><<<grid, block, 0, stream>>>(args);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  TORCH_CHECK(found, "tilelab: config ", kConfigs[config_index].name, " is not a tiled kernel");
}

}  // namespace tilelab
