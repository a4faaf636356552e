// The naive family: one kernel per dtype; the table's tiles only change the
// (run-time) block shape.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "kernels/naive.cuh"
#include "launch.h"

namespace tilelab {

std::string naive_cannot_run(const KernelConfig&, const GemmProblem&, const DeviceInfo&) { return ""; }

void launch_naive(const KernelConfig& row, const GemmProblem& p) {
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  visit_family<Family::Naive>(row, [&](auto r) {
    constexpr KernelConfig c = kConfigs[decltype(r)::value];
    static_assert(c.bm == c.bn && c.bm * c.bn == c.threads && c.stages == 0 && c.pad == 0,
                  "naive: a T x T block, one thread per output, no shared memory");
    // Fewer rows than the tile's: as many threads, in fewer rows (the least power of two >= M) of more columns.
    int rows = c.bm;
    while (rows > 1 && rows / 2 >= p.M) rows /= 2;
    const int cols = c.bm * c.bn / rows;
    TILELAB_DISPATCH_FLOATS(p.dtype, "tilelab_naive", [&] {
      naive_kernel<scalar_t><<<grid_for(p, rows, cols), dim3(cols, rows), 0, stream>>>(device_args<scalar_t>(p));
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    });
  });
}

}  // namespace tilelab
