// Instantiates the tensorcore family: each table row x operand layouts (A row/col,
// B row/col) x dtype (half + bfloat16 for the half rows, float for the TF32 rows).
// The copy width per operand (16/8/4-byte cp.async or the element path) is a
// run-time argument, not an instantiation, to keep the compile short.
#include <c10/cuda/CUDAException.h>

#include "kernels/tensorcore.cuh"
#include "launch.h"

namespace tilelab {
namespace {

constexpr int kTcStages = 4;  // cp.async ring depth (see the table's summaries)

// The widest cp.async (16, 8, 4 bytes) whose alignment every row start of the
// operand meets, or 0: rows only 2-byte aligned (half with an odd leading
// dimension or an odd element offset) take the element path.
int copy_width(const void* ptr, int64_t ld, int64_t batch_stride, int batch, size_t elem) {
  const auto addr = reinterpret_cast<uintptr_t>(ptr);
  for (int v : {16, 8, 4}) {
    if (addr % v == 0 && (ld * static_cast<int64_t>(elem)) % v == 0 &&
        (batch == 1 || (batch_stride * static_cast<int64_t>(elem)) % v == 0))
      return v;
  }
  return 0;
}

template <typename T, int BM, int BN, int BK, int WMs, int WNs, bool kAK, bool kBK>
void launch_one(const GemmProblem& p, cudaStream_t stream, dim3 grid) {
  constexpr int smem = tc::smem_bytes<T, BM, BN, BK, kTcStages, kAK, kBK>();
  auto kernel = tensorcore_kernel<T, BM, BN, BK, WMs, WNs, kTcStages, kAK, kBK>;
  // Above 48 KiB of dynamic shared memory needs an explicit opt-in (per device;
  // cheap enough to repeat on every launch).
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const auto args = GemmArgs<T>::from(p);
  const int va = copy_width(p.a, kAK ? p.sa_m : p.sa_k, p.sa_b, p.batch, sizeof(T));
  const int vb = copy_width(p.b, kBK ? p.sb_n : p.sb_k, p.sb_b, p.batch, sizeof(T));
  kernel<<<grid, WMs * WNs * 32, smem, stream>>>(args, va, vb);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T, int BM, int BN, int BK, int WMs, int WNs>
void launch_layouts(const GemmProblem& p, cudaStream_t stream, dim3 grid) {
  // as_operand() hands over row-major (unit column stride) or column-major views.
  const bool a_k = p.sa_k == 1, b_k = p.sb_k == 1 && p.sb_n != 1;
  if (a_k && b_k) launch_one<T, BM, BN, BK, WMs, WNs, true, true>(p, stream, grid);
  else if (a_k) launch_one<T, BM, BN, BK, WMs, WNs, true, false>(p, stream, grid);
  else if (b_k) launch_one<T, BM, BN, BK, WMs, WNs, false, true>(p, stream, grid);
  else launch_one<T, BM, BN, BK, WMs, WNs, false, false>(p, stream, grid);
}

}  // namespace

void launch_tensorcore(int config_index, const GemmProblem& p, cudaStream_t stream) {
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
