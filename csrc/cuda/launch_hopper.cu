// The hopper family (wgmma + TMA, sm_90a): each half row x operand layouts (A
// and B each k- or m/n-contiguous) x {half, bfloat16}, each TF32 row x float
// (k-contiguous operands only), the TMA tensor maps the kernel reads its
// operands through, and what the family can run (hopper_cannot_run).
//
// A tensor map needs a 16-byte aligned base and row / batch strides that are
// multiples of 16 bytes. An operand that is not (an odd leading dimension such
// as K = 4095, a misaligned view) is first copied into a buffer whose rows are
// (aligned_copy.h), as for the tensorcore family. TF32 wgmma reads only
// k-contiguous operands: a column-major A or a row-major B is copied
// transposed (flip_contiguity in aligned_copy.h: one bandwidth-bound pass).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda.h>
#include <cudaTypedefs.h>

#include <sstream>
#include <type_traits>

#include "aligned_copy.h"
#include "kernels/hopper.cuh"
#include "launch.h"
#include "split_reduce.h"

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
// matrix serves every batch), read in boxes of 128 bytes (cont) x box_rows, swizzled
// by 128 bytes. Elements outside the tensor read as zero. box_cont > 0: boxes
// of box_cont elements, unswizzled (the narrow last box of a 160-wide tile's store).
CUtensorMap make_map(const void* ptr, c10::ScalarType dtype, int64_t cont, int64_t rows, int64_t batch, int64_t ld,
                     int64_t bstride, int box_rows, int box_cont = 0) {
  CUtensorMap map;
  const int64_t esz = static_cast<int64_t>(c10::elementSize(dtype));
  const CUtensorMapDataType type = dtype == at::kFloat      ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
                                   : dtype == at::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                            : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(cont), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(batch)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(ld * esz),
                                 static_cast<cuuint64_t>((batch > 1 ? bstride : rows * ld) * esz)};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(box_cont > 0 ? box_cont : 128 / esz),
                             static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  const CUresult r = encode_tiled()(
      &map, type, 3,
      const_cast<void*>(ptr), dims, strides, box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
      box_cont > 0 ? CU_TENSOR_MAP_SWIZZLE_NONE : CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TORCH_CHECK(r == CUDA_SUCCESS, "tilelab: cuTensorMapEncodeTiled failed (error ", static_cast<int>(r),
              ") for an operand of ", rows, " x ", cont, " elements, row stride ", ld, ", batch ", batch,
              " (stride ", bstride, ")");
  return map;
}

// The persistent grid: one block per SM, or one per work tile when there are fewer.
dim3 persistent_grid(const GemmProblem& p, int bm, int bn) {
  const int64_t count = PersistentGrouped<kGroupM>::count_of(p.M, p.N, bm, bn, p.splits, p.batch);
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  return dim3(static_cast<unsigned>(std::max<int64_t>(1, std::min(count, sms))));
}

// p0: the product as the kernel computes it (for a swap-AB row, the transposed one: swapped()); kStore: the
// epilogue (store_path of the caller's product).
// kAux: p0.aux receives the pre-activation as well (hopper_kernel's kAux).
template <typename T, int BM, int BN, int kStages, bool kPingPong, bool kSwap, bool kAK, bool kBK, hopper::Store kStore,
          bool kAux = false>
void launch_one(const GemmProblem& p0, cudaStream_t stream) {
  constexpr bool store_c = kStore != hopper::Store::Registers;
  constexpr int kRing = hopper::ring_stages<BM, BN, kStages, kBK>();  // kStages, or fewer for an n-contiguous B
  constexpr int smem = hopper::smem_bytes<BM, BN, kRing, kBK>();
  constexpr auto kernel = hopper_kernel<T, BM, BN, kRing, kAK, kBK, kPingPong, kSwap, kStore, false, kAux>;
  allow_smem<kernel>(smem);
  GemmProblem p = p0;
  align_operand_rows(p);
  const Operand &a = p.a, &b = p.b;
  const int64_t lda = kAK ? a.s_mn : a.s_k, ldb = kBK ? b.s_mn : b.s_k;
  // A broadcast batch (stride 0) is one matrix: the map has batch 1 and the kernel reads batch 0.
  const bool a_batch = p.batch > 1 && a.s_batch != 0, b_batch = p.batch > 1 && b.s_batch != 0;
  // Boxes: A k-contiguous 64 (k) x BM (m) (fewer rows where M is: hopper::a_box_rows), else 64 (m) x 64 (k);
  // B k-contiguous 64 (k) x BN (n), else 64 (n) x 64 (k); C 64 (n) x 16 (m), and a tile's last BN % 64 columns
  // through map_c_tail.
  constexpr int kTileK = hopper::tile_k<T>();
  const int64_t ba = a_batch ? p.batch : 1, bb = b_batch ? p.batch : 1;
  const CUtensorMap map_a =
      kAK ? make_map(a.data, p.dtype, p.K, p.M, ba, lda, a.s_batch, hopper::a_box_rows(BM, p.M))
          : make_map(a.data, p.dtype, p.M, p.K, ba, lda, a.s_batch, kTileK);
  const CUtensorMap map_b = kBK ? make_map(b.data, p.dtype, p.K, p.N, bb, ldb, b.s_batch, BN)
                                : make_map(b.data, p.dtype, p.N, p.K, bb, ldb, b.s_batch, kTileK);
  TORCH_CHECK((kStore == hopper::Store::TmaActivation) == (p.act != Activation::None),
              "tilelab: internal error: an activation for a hopper kernel without its code, or the reverse (the "
              "host applies it after the register epilogue and where hopper_fuses_activation says no)");
  // C's map: boxes of 64 (n) x 16 (m), 128-byte swizzled; swap-AB: C is p's transpose (N rows of M), stored
  // in unswizzled boxes of 16 columns (one warp's 16 rows of the transposed tile) x BN rows.
  const CUtensorMap map_c =
      !store_c ? map_b  // unused
      : kSwap  ? make_map(p.c, p.dtype, p.M, p.N, p.batch, p.sc_m, p.sc_b, BN, hopper::kStoreRows)
               : make_map(p.c, p.dtype, p.N, p.M, p.batch, p.sc_m, p.sc_b, hopper::kStoreRows);
  constexpr int kTailCols = hopper::store_tail_cols<T, BN>();
  const CUtensorMap map_c_tail =
      store_c && !kSwap && kTailCols > 0
          ? make_map(p.c, p.dtype, p.N, p.M, p.batch, p.sc_m, p.sc_b, hopper::kStoreRows, kTailCols)
          : map_c;  // unused
  TORCH_CHECK(!kAux || (store_c && p.aux != nullptr), "tilelab: internal error: a pre-activation output needs the "
                                                      "TMA-store epilogue");
  const CUtensorMap map_aux =
      kAux ? make_map(p.aux, p.dtype, p.N, p.M, p.batch, p.sc_m, p.sc_b, hopper::kStoreRows) : map_c;  // else unused
  const CUtensorMap map_aux_tail =
      kAux && kTailCols > 0 ? make_map(p.aux, p.dtype, p.N, p.M, p.batch, p.sc_m, p.sc_b, hopper::kStoreRows, kTailCols)
                            : map_c;  // unused
  // Split-K without slabs (split_k_gemm sends it only where the chooser's split_reduce_way said so): the kernel
  // adds the slices itself (hopper::SliceSums), in a slot of BM x BN floats per slice past the first and tile,
  // with a zeroed counter per tile (fp32_workspace: CUDA-graph capturable). Slice 0's block waits for the
  // others' sums, so every slice must be a block of the one persistent wave: never launched otherwise.
  hopper::SliceSums fix{nullptr, nullptr};
  at::Tensor fix_mem;
  if (p.splits > 1 && p.partial == nullptr) {
    TORCH_CHECK(store_c, "tilelab: internal error: a hopper split-K reduced in the kernel needs the TMA-store "
                         "epilogue");
    TORCH_CHECK(PersistentGrouped<kGroupM>::count_of(p.M, p.N, BM, BN, p.splits, p.batch) <=
                    at::cuda::getCurrentDeviceProperties()->multiProcessorCount,
                "tilelab: internal error: slices added in the kernel need every slice in one wave of blocks");
    const int64_t tiles = PersistentGrouped<kGroupM>::count_of(p.M, p.N, BM, BN, 1, p.batch);
    const int64_t floats = (p.splits - 1) * tiles * BM * BN;
    fix_mem = fp32_workspace(floats + tiles);
    fix.sums = fix_mem.data_ptr<float>();
    fix.ready = reinterpret_cast<unsigned*>(fix.sums + floats);
    C10_CUDA_CHECK(cudaMemsetAsync(fix.ready, 0, tiles * sizeof(unsigned), stream));
  }
  kernel<<<persistent_grid(p, BM, BN), hopper::threads<BM>(), smem, stream>>>(
      map_a, map_b, map_b /* map_b2: gated tiles only */, map_c, map_c_tail, map_aux, map_aux_tail,
      device_args<T>(p), a_batch ? 1 : 0, b_batch ? 1 : 0, fix);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The epilogue of p's kernel (hopper::Store): the TMA store where C allows it (hopper_tma_store), with the
// activation code where p has one (the host left it set only where hopper_fuses_activation), else from registers.
hopper::Store store_path(const GemmProblem& p) {
  if (!hopper_tma_store(p)) return hopper::Store::Registers;
  return p.act == Activation::None ? hopper::Store::Tma : hopper::Store::TmaActivation;
}

// Calls fn with path as a compile-time constant (std::integral_constant<hopper::Store, ...>), as with_layouts
// does for the operand layouts.
template <typename Fn>
void with_store(hopper::Store path, Fn&& fn) {
  using hopper::Store;
  if (path == Store::Tma) fn(std::integral_constant<Store, Store::Tma>{});
  else if (path == Store::TmaActivation) fn(std::integral_constant<Store, Store::TmaActivation>{});
  else fn(std::integral_constant<Store, Store::Registers>{});
}

// TF32 wgmma reads only k-contiguous operands: a column-major A / row-major B
// is copied transposed first.
template <int BM, int BN, int kStages>
void launch_tf32(const GemmProblem& p0, cudaStream_t stream) {
  GemmProblem p = p0;
  if (!p.a.k_contiguous) flip_contiguity(p, p.a, true);
  if (!p.b.k_contiguous) flip_contiguity(p, p.b, false);
  with_store(store_path(p), [&](auto st) {
    launch_one<float, BM, BN, kStages, false, false, true, true, decltype(st)::value>(p, stream);
  });
}

// The transposed product C^T = B^T A^T of p, as a swap-AB kernel reads it: the operands trade places (an
// Operand addresses (batch, mn, k) whatever its role), M and N too, and the bias's strides; C keeps its
// pointer and strides (the kernel stores C^T's element (m, n) at C[n][m]).
GemmProblem swapped(const GemmProblem& p) {
  GemmProblem q = p;
  std::swap(q.a, q.b);
  std::swap(q.M, q.N);
  std::swap(q.sbias_m, q.sbias_n);
  return q;
}

// Half rows: each layout with the TMA store and from registers; the activation kernels where the caller's A is
// k-contiguous (x's rows: F.linear's x @ W.t() and transformers' Conv1D x @ W; a swap-AB row's B, once the
// operands trade places), where tiled_linear fuses them (hopper_fuses_activation); the pre-activation store's in
// x @ W.t()'s layouts only (hopper_aux_ok).
template <typename T, int BM, int BN, int kStages, bool kPingPong, bool kSwap>
void launch_layouts(const GemmProblem& p, cudaStream_t stream) {
  using hopper::Store;
  const Store path = store_path(p);  // of the caller's product (a swap-AB row's q is its transpose)
  const auto run = [&](const GemmProblem& q) {
    with_layouts(q, [&](auto ak, auto bk) {
      constexpr bool kAK = decltype(ak)::value, kBK = decltype(bk)::value;
      with_store(path, [&](auto st) {
        constexpr Store kStore = decltype(st)::value;
        constexpr bool kAct = kStore == Store::TmaActivation;
        if constexpr (kAct && !((kSwap && kBK) || (!kSwap && kAK))) {  // the caller's A not k-contiguous
          TORCH_CHECK(false, "tilelab: internal error: no activation kernel for this layout");
        } else {
          if constexpr (kAct && !kSwap && kBK) {  // the pre-activation output (hopper_aux_ok)
            if (q.aux != nullptr) {
              return launch_one<T, BM, BN, kStages, kPingPong, kSwap, true, true, kStore, true>(q, stream);
            }
          }
          TORCH_CHECK(q.aux == nullptr, "tilelab: internal error: no pre-activation output for this row or layout");
          launch_one<T, BM, BN, kStages, kPingPong, kSwap, kAK, kBK, kStore>(q, stream);
        }
      });
    });
  };
  if constexpr (kSwap) run(swapped(p));
  else run(p);  // no copy of the problem for the other rows
}

// tiled_gated_linear's fused kernel on BM x BN / 2 tiles of C (hopper_kernel's kGated): x (M, K) and both
// weights (N, K) k-contiguous, C (M, N) contiguous, all rows 16-byte aligned (gated_plan checked).
template <typename T, int BM, int BN, int kStages>
void launch_gated_tiles(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up, const at::Tensor& out,
                        Activation act, cudaStream_t stream) {
  constexpr int smem = hopper::smem_bytes<BM, BN, kStages, true>();
  constexpr auto kernel = hopper_kernel<T, BM, BN, kStages, true, true, false, false, hopper::Store::TmaActivation,
                                        true>;
  allow_smem<kernel>(smem);
  GemmProblem p;
  p.M = x.size(0), p.K = x.size(1), p.N = w_gate.size(0);
  p.dtype = x.scalar_type();
  p.act = act;
  p.a.data = x.data_ptr(), p.a.s_mn = x.stride(0), p.a.s_k = 1, p.a.k_contiguous = true;
  p.b.data = w_gate.data_ptr(), p.b.s_mn = w_gate.stride(0), p.b.s_k = 1, p.b.k_contiguous = true;
  p.c = out.data_ptr(), p.sc_m = p.N, p.sc_b = p.M * p.N;
  const CUtensorMap map_a =
      make_map(x.data_ptr(), p.dtype, p.K, p.M, 1, x.stride(0), 0, hopper::a_box_rows(BM, p.M));
  const CUtensorMap map_b = make_map(w_gate.data_ptr(), p.dtype, p.K, p.N, 1, w_gate.stride(0), 0, BN / 2);
  const CUtensorMap map_b2 = make_map(w_up.data_ptr(), p.dtype, p.K, p.N, 1, w_up.stride(0), 0, BN / 2);
  const CUtensorMap map_c = make_map(p.c, p.dtype, p.N, p.M, 1, p.sc_m, p.sc_b, hopper::kStoreRows);
  kernel<<<persistent_grid(p, BM, BN / 2), hopper::threads<BM>(), smem, stream>>>(
      map_a, map_b, map_b2, map_c, map_c, map_c, map_c, device_args<T>(p), 0, 0, hopper::SliceSums{nullptr, nullptr});
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

void launch_hopper_gated(int bm, const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up,
                         const at::Tensor& out, Activation act) {
  TORCH_CHECK(kBuiltForSm90a, "tilelab: internal error: the gated kernel is not in this build");
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  // Stages: hopper_128x256x64's 4 x 48 KB (128 rows of x, 128 + 128 of the weights), and 8 x 24 KB for 64 rows
  // of x and 64 + 64 of the weights (hopper_m64_64x96x64's ring with a row-major B).
  const auto run = [&](auto t) {
    using T = decltype(t);
    if (bm == 128) launch_gated_tiles<T, 128, 256, 4>(x, w_gate, w_up, out, act, stream);
    else launch_gated_tiles<T, 64, 128, 8>(x, w_gate, w_up, out, act, stream);
  };
  if (x.scalar_type() == at::kHalf) run(c10::Half{});
  else run(c10::BFloat16{});
}

// The TMA-store epilogue (hopper.cuh): C's rows and batches 16-byte aligned, no per-element bias (a column
// bias is added in registers), no split-K slabs (stored from registers; slices that the kernel adds itself
// end in this epilogue).
bool hopper_tma_store(const GemmProblem& p) {
  return p.partial == nullptr && (p.bias == nullptr || p.sbias_m == 0) && c_rows_aligned16(p);
}

// ... which applies p.act in the kernels compiled with it (launch_layouts): in half precision where A is
// k-contiguous (x's rows, against either layout of B: F.linear's W.t() and a Conv1D's W; swap-AB rows exchange
// the operands), every layout in TF32 (copied k-contiguous first). Left to a pass of torch's, a Conv1D's GELU
// took 1.5 us a call of GPT-2's MLP at 128 tokens (H200, bf16, 12 a forward).
bool hopper_fuses_activation(const GemmProblem& p) {
  return hopper_tma_store(p) && (p.act == Activation::None || p.dtype == at::kFloat || p.a.k_contiguous);
}

bool hopper_aux_ok(const KernelConfig& row, const GemmProblem& p) {
  return row.family == Family::Hopper && !row.tf32 && !same_name(row.variant, "hopper_swap") &&
         (p.dtype == at::kHalf || p.dtype == at::kBFloat16) && p.splits == 1 && p.a.k_contiguous &&
         p.b.k_contiguous && hopper_fuses_activation(p);
}

std::string hopper_cannot_run(const KernelConfig& row, const GemmProblem&, const DeviceInfo& d) {
  std::ostringstream os;
  if (!kBuiltForSm90a) {
    os << row.name << " is not in this build: wgmma/TMA need the sm_90a target (rebuild with "
       << "TORCH_CUDA_ARCH_LIST=9.0a, or 9.0, which setup.py builds as 9.0a)";
  } else if (d.sm != 90) {
    os << row.name << " runs only on compute capability 9.0 (H100/H200: sm_90a code) but " << d.label() << " is "
       << d.sm / 10 << "." << d.sm % 10;
  }
  return os.str();
}

void launch_hopper(const KernelConfig& row, const GemmProblem& p) {
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  visit_family<Family::Hopper>(row, [&](auto r) {
    constexpr KernelConfig c = kConfigs[decltype(r)::value];
    // Swap-AB rows (variant hopper_swap) name their tile in C's terms, bm x bn; the kernel computes C^T in
    // tiles of bn x bm (kBM x kBN).
    constexpr bool kSwap = same_name(c.variant, "hopper_swap");
    constexpr int kBM = kSwap ? c.bn : c.bm, kBN = kSwap ? c.bm : c.bn;
    // (threads<kBM> admits 64, 128 or 192 rows; the kernel, 128 for swap-AB rows.)
    static_assert(c.threads == hopper::threads<kBM>(), "hopper rows: a producer warpgroup and one consumer "
                                                       "warpgroup per 64 rows of the tile");
    // warps_m: the MMA warps on one tile -- 4 a 64-row consumer warpgroup (cooperative: one or two of
    // them), or 4 on a 128-row tile (ping-pong: one warpgroup computes the whole tile, the other the next).
    constexpr bool kPingPong = !kSwap && c.bm == 128 && c.warps_m == 4;
    static_assert((c.warps_m == kBM / 16 || kPingPong) && c.warps_n == 1,
                  "hopper: a consumer warp of 16 rows per 16 rows of the tile, or 4 of 32 rows (ping-pong)");
    static_assert(!kPingPong || (!c.tf32 && c.bn == 128), "hopper: ping-pong rows are half precision, 128 x 128");
    static_assert(c.min_sm == 90 && c.pad == 0, "wgmma and TMA need sm_90(a); the swizzle replaces padding");
    if constexpr (c.tf32) {
      static_assert(c.dtypes == kF32 && c.bk == hopper::tile_k<float>(), "TF32 rows: fp32, 32 of K per stage");
      static_assert(!kSwap, "hopper: swap-AB rows are half precision");
      TORCH_CHECK(p.dtype == at::kFloat, "tilelab: ", c.name, " needs float32 inputs");
      static_assert(!kPingPong, "hopper: TF32 rows are cooperative");
      launch_tf32<c.bm, c.bn, c.stages>(p, stream);
      return;
    }
    static_assert(c.tf32 || (c.dtypes == (kF16 | kBF16) && c.bk == hopper::tile_k<c10::Half>()),
                  "half rows: float16/bfloat16, 64 of K per stage");
    if (p.dtype == at::kHalf)
      launch_layouts<c10::Half, kBM, kBN, c.stages, kPingPong, kSwap>(p, stream);
    else if (p.dtype == at::kBFloat16)
      launch_layouts<c10::BFloat16, kBM, kBN, c.stages, kPingPong, kSwap>(p, stream);
    else
      TORCH_CHECK(false, "tilelab: ", c.name, " needs float16 or bfloat16 inputs");
  });
}

}  // namespace tilelab
