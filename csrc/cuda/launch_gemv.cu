// The gemv family: each table row x dtype x {16-byte, any-stride} loads.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include "aligned_copy.h"
#include "kernels/gemv.cuh"
#include "launch.h"

namespace tilelab {

std::string gemv_cannot_run(const KernelConfig&, const GemmProblem&, const DeviceInfo&) { return ""; }

void launch_gemv(const KernelConfig& row, const GemmProblem& p0) {
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  GemmProblem p = p0;
  visit_family<Family::Gemv>(row, [&](auto r) {
    constexpr KernelConfig c = kConfigs[decltype(r)::value];
    static_assert(c.warps_m == 1 && c.bn == c.warps_n && c.threads == 32 * c.warps_n,
                  "gemv: a warp per output column, bn columns per block");
    // 16-byte loads need both operands contiguous along K with 16-byte aligned rows. A single row or
    // column (a dot product's) is contiguous along K whichever layout its strides name, and only its base
    // (and batch stride) must be aligned.
    const size_t esz = c10::elementSize(p.dtype);
    auto along_k = [&](const Operand& o, int64_t rows) {
      if (rows == 1) return o.s_k == 1 && rows_aligned16(o.data, 0, o.s_batch, p.batch, esz);
      return o.k_contiguous && rows_aligned16(o, p);
    };
    bool vec = along_k(p.a, p.M) && along_k(p.b, p.N);
    // x in rows that are not 16-byte aligned against a large W whose rows are (x_copied_for_w, gemm.h): x is
    // copied into aligned rows (at most 16 of them, small beside W) so that W streams 16 bytes a load again. A
    // tiny product stays one launch reading both in place.
    if (!vec && along_k(p.b, p.N) && x_copied_for_w(p)) {
      align_operand(p, p.a, true);
      vec = along_k(p.a, p.M);
    }
    // Fewer columns than a block's warps, in a batch: a flat grid of (matrix, column) pairs (gemv.cuh).
    dim3 grid = grid_for(p, c.bm, c.bn);
    if (p.N < c.warps_n && p.batch > 1)
      grid = dim3(grid.x, static_cast<unsigned>((p.batch * p.N + c.warps_n - 1) / c.warps_n), 1);
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
