// Instantiates the naive family: one kernel per dtype; the table's tiles only
// change the (run-time) block shape.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "kernels/naive.cuh"
#include "launch.h"

namespace tilelab {

void launch_naive(int config_index, const GemmProblem& p) {
  // PyTorch's current stream of the device the caller's CUDAGuard selected.
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  const bool found = visit_family<Family::Naive>(config_index, [&](auto row) {
    constexpr KernelConfig c = kConfigs[decltype(row)::value];
    static_assert(c.bm == c.bn && c.bm * c.bn == c.threads, "naive: a T x T block, one thread per output");
    TILELAB_DISPATCH_FLOATS(p.dtype, "tilelab_naive", [&] {
      naive_kernel<scalar_t><<<grid_for(p, c.bm, c.bn), dim3(c.bn, c.bm), 0, stream>>>(
          GemmArgs<scalar_t>::from(p));
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
  TORCH_CHECK(found, "tilelab: config ", kConfigs[config_index].name, " is not a naive kernel");
}

}  // namespace tilelab
