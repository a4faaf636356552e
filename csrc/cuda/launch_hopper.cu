// Instantiates the hopper family (wgmma + TMA, sm_90a): each table row x
// operand layouts (A row/col, B row/col) x {half, bfloat16}, and builds the
// TMA tensor maps the kernel reads its operands through.
//
// A tensor map needs a 16-byte aligned base and row / batch strides that are
// multiples of 16 bytes. An operand that is not (an odd leading dimension such
// as K = 4095, a misaligned view) is first copied into a buffer whose rows are
// (aligned_copy.h), as for the tensorcore family.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <cuda.h>
#include <cudaTypedefs.h>

#include "aligned_copy.h"
#include "kernels/hopper.cuh"
#include "launch.h"

namespace tilelab {
namespace {

// cuTensorMapEncodeTiled is a driver API function; the runtime hands out its
// address, so the extension does not link libcuda itself.
PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    C10_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q));
    TORCH_CHECK(q == cudaDriverEntryPointSuccess && f != nullptr,
                "tilelab: the CUDA driver does not provide cuTensorMapEncodeTiled (TMA); the hopper kernels "
                "need a CUDA 12+ driver");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// A 3-D map over an operand stored as [batch][rows][cont] (unit stride along
// cont, `ld` elements between rows, `bstride` between batches; batch 1 when one
// matrix serves every batch), read in boxes of 64 (cont) x box_rows, swizzled
// by 128 bytes. Elements outside the tensor read as zero.
CUtensorMap make_map(const void* ptr, c10::ScalarType dtype, int64_t cont, int64_t rows, int64_t batch, int64_t ld,
                     int64_t bstride, int box_rows) {
  CUtensorMap map;
  const int64_t esz = 2;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(cont), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(ld * esz),
                                 static_cast<cuuint64_t>((batch > 1 ? bstride : rows * ld) * esz)};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(hopper::kBox), static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r = encode_tiled()(
      &map, dtype == at::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 3,
      const_cast<void*>(ptr), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TORCH_CHECK(r == CUDA_SUCCESS, "tilelab: cuTensorMapEncodeTiled failed (error ", static_cast<int>(r),
              ") for an operand of ", rows, " x ", cont, " elements, row stride ", ld, ", batch ", batch,
              " (stride ", bstride, ")");
  return map;
}

template <typename T, int BN, bool kAK, bool kBK>
void launch_one(const GemmProblem& p0, cudaStream_t stream, dim3 grid) {
  constexpr int smem = hopper::smem_bytes<BN>();
  auto kernel = hopper_kernel<T, BN, kAK, kBK>;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  GemmProblem p = p0;
  at::Tensor a_copy, b_copy;  // alive until the launch is enqueued
  int64_t& lda = kAK ? p.sa_m : p.sa_k;
  int64_t& ldb = kBK ? p.sb_n : p.sb_k;
  // A broadcast batch (stride 0) is one matrix: the map has batch 1 and the kernel reads batch 0.
  const bool a_batch = p.batch > 1 && p.sa_b != 0, b_batch = p.batch > 1 && p.sb_b != 0;
  if (!rows_aligned16(p.a, lda, a_batch ? p.sa_b : 0, a_batch ? p.batch : 1, sizeof(T))) {
    a_copy = aligned_copy(p.a, p.dtype, a_batch ? p.batch : 1, kAK ? p.M : p.K, kAK ? p.K : p.M, lda, p.sa_b);
    p.a = a_copy.data_ptr();
  }
  if (!rows_aligned16(p.b, ldb, b_batch ? p.sb_b : 0, b_batch ? p.batch : 1, sizeof(T))) {
    b_copy = aligned_copy(p.b, p.dtype, b_batch ? p.batch : 1, kBK ? p.N : p.K, kBK ? p.K : p.N, ldb, p.sb_b);
    p.b = b_copy.data_ptr();
  }
  // Boxes: A K-major 64 (k) x 128 (m), else 64 (m) x 64 (k); B K-major 64 (k) x BN (n), else 64 (n) x 64 (k).
  const CUtensorMap map_a = kAK ? make_map(p.a, p.dtype, p.K, p.M, a_batch ? p.batch : 1, lda, p.sa_b, hopper::kTileM)
                                : make_map(p.a, p.dtype, p.M, p.K, a_batch ? p.batch : 1, lda, p.sa_b, hopper::kTileK);
  const CUtensorMap map_b = kBK ? make_map(p.b, p.dtype, p.K, p.N, b_batch ? p.batch : 1, ldb, p.sb_b, BN)
                                : make_map(p.b, p.dtype, p.N, p.K, b_batch ? p.batch : 1, ldb, p.sb_b, hopper::kTileK);
  kernel<<<grid, hopper::kThreads, smem, stream>>>(map_a, map_b, GemmArgs<T>::from(p), a_batch ? 1 : 0,
                                                   b_batch ? 1 : 0);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T, int BN>
void launch_layouts(const GemmProblem& p, cudaStream_t stream, dim3 grid) {
  // as_operand() hands over row-major (unit column stride) or column-major views.
  const bool a_k = p.sa_k == 1, b_k = p.sb_k == 1 && p.sb_n != 1;
  if (a_k && b_k) launch_one<T, BN, true, true>(p, stream, grid);
  else if (a_k) launch_one<T, BN, true, false>(p, stream, grid);
  else if (b_k) launch_one<T, BN, false, true>(p, stream, grid);
  else launch_one<T, BN, false, false>(p, stream, grid);
}

}  // namespace

void launch_hopper(int config_index, const GemmProblem& p) {
  // PyTorch's current stream of the device the caller's CUDAGuard selected.
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  const bool found = visit_family<Family::Hopper>(config_index, [&](auto row) {
    constexpr KernelConfig c = kConfigs[decltype(row)::value];
    static_assert(c.bm == hopper::kTileM && c.bk == hopper::kTileK && c.threads == hopper::kThreads,
                  "hopper rows: 128 x BN x 64 tiles, 3 warpgroups");
    static_assert(c.dtypes == (kF16 | kBF16), "hopper rows take float16/bfloat16");
    static_assert(c.min_sm == 90, "wgmma and TMA need sm_90(a)");
    const dim3 grid = grid_for(p, c.bm, c.bn);
    if (p.dtype == at::kHalf)
      launch_layouts<c10::Half, c.bn>(p, stream, grid);
    else if (p.dtype == at::kBFloat16)
      launch_layouts<c10::BFloat16, c.bn>(p, stream, grid);
    else
      TORCH_CHECK(false, "tilelab: ", c.name, " needs float16 or bfloat16 inputs");
  });
  TORCH_CHECK(found, "tilelab: config ", kConfigs[config_index].name, " is not a hopper kernel");
}

}  // namespace tilelab
