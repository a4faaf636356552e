#pragma once
// Host-side glue between the table, the problem and the family translation
// units (launch_<family>.cu). Each family defines, in its own file:
//
//   void launch_<family>(const KernelConfig& row, const GemmProblem& p);
//     runs row's kernel on p, on at::cuda::getCurrentCUDAStream() of the
//     current device (the caller holds a CUDAGuard for the operands' device),
//     so streams, CUDA graphs and torch.compile(mode="reduce-overhead") see
//     every launch;
//   std::string <family>_cannot_run(const KernelConfig& row, const GemmProblem& p, const DeviceInfo& d);
//     why the family cannot run p on d beyond what the table's columns say
//     (dtype, threads, compute capability, TF32 consent: checked by the
//     chooser for every row), or "" if it can: the family's own limits
//     (architecture, build target, alignment, layouts).
//
// Both lists below come from TILELAB_FAMILIES (families.h).
#include <ATen/ATen.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "../gemm.h"
#include "gemm_args.h"
#include "table.h"

namespace tilelab {

// What the chooser and the capability checks know about a CUDA device.
struct DeviceInfo {
  int index = 0;  // -1: a described GPU (explain_described), not a device of this machine
  std::string name;
  int sm = 0;  // major*10 + minor
  int num_sms = 1;
  int max_threads_per_block = 1024;
  int max_smem_per_block = 0;  // bytes a block may opt into; 0: unknown (a described GPU)
  double mem_bytes_per_ns = 0;  // peak DRAM bandwidth (2 x memory clock x bus width); 0: unknown

  // How messages name it: "cuda:0", or "the described GPU".
  std::string label() const { return index >= 0 ? "cuda:" + std::to_string(index) : "the described GPU"; }
};

#define TILELAB_FAMILY_DECL(E, n, c)                               \
  void launch_##n(const KernelConfig& row, const GemmProblem& p); \
  std::string n##_cannot_run(const KernelConfig& row, const GemmProblem& p, const DeviceInfo& d);
TILELAB_FAMILIES(TILELAB_FAMILY_DECL)
#undef TILELAB_FAMILY_DECL

// Whether row's kernel (launch_hopper.cu) can store p's pre-activation into p.aux beside act(.) in C: a half
// hopper row (not swap-AB), one slice of K, x @ W.t()'s layouts (both operands k-contiguous) and the TMA-store
// epilogue (hopper_fuses_activation).
bool hopper_aux_ok(const KernelConfig& row, const GemmProblem& p);

// tiled_gated_linear's fused kernel (launch_hopper.cu): out (M, N) = act(x @ w_gate^T) * (x @ w_up^T) on tiles of
// bm (128 or 64) x bm outputs, operands as host.cpp's gated_plan checked them, on the current stream.
void launch_hopper_gated(int bm, const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up,
                         const at::Tensor& out, Activation act);

// The tile families: their epilogue is with_epilogue's (kernels/epilogue.cuh)
// and their kernels take a k-range from the scheduler. So they split K
// (split_reduce.h; the chooser plans it) and take no activation in their
// register epilogue (gemm_cuda applies it after them in one pass, unless
// hopper_fuses_activation); the others apply it in their epilogue.
constexpr bool family_tile_epilogue(Family f) {
  return f == Family::Hopper || f == Family::TensorCore || f == Family::Blocked;
}

// The families whose kernels take a k-range from the scheduler, so the chooser
// may split K (split_reduce.h): the tile families, and gemv_split, which applies
// bias and activation in its own epilogue (with split-K, in the reduction).
constexpr bool family_splits_k(Family f) { return family_tile_epilogue(f) || f == Family::GemvSplit; }

// Whether the hopper kernels write p's output through their TMA-store
// epilogue (C's rows and batches 16-byte aligned, no per-element bias, no
// split-K slabs: one slice of K, or slices the kernel adds itself).
bool hopper_tma_store(const GemmProblem& p);

// Whether they do and also apply p.act there, if p has one (launch_hopper.cu):
// the activation kernels are compiled in half precision for a k-contiguous A
// (x @ W.t() and x @ W; any layout in TF32); elsewhere gemm_cuda applies it
// after them.
bool hopper_fuses_activation(const GemmProblem& p);

// Whether family f's kernel (with split-K, its reduction) applies p.act: every
// family but the tile families' register epilogues; else gemm_cuda applies it
// after the product, in one pass.
inline bool applies_activation(Family f, const GemmProblem& p) {
  return !family_tile_epilogue(f) || p.splits > 1 || (f == Family::Hopper && hopper_fuses_activation(p));
}

// Runs row's kernel on p (the family switch).
inline void launch(const KernelConfig& row, const GemmProblem& p) {
#define TILELAB_FAMILY_LAUNCH(E, n, c) \
  if (row.family == Family::E) return launch_##n(row, p);
  TILELAB_FAMILIES(TILELAB_FAMILY_LAUNCH)
#undef TILELAB_FAMILY_LAUNCH
  TORCH_CHECK(false, "tilelab: no launcher for the family of ", row.name);
}

// The family's own reason it cannot run p on d, or "".
inline std::string family_cannot_run(const KernelConfig& row, const GemmProblem& p, const DeviceInfo& d) {
#define TILELAB_FAMILY_CHECK(E, n, c) \
  if (row.family == Family::E) return n##_cannot_run(row, p, d);
  TILELAB_FAMILIES(TILELAB_FAMILY_CHECK)
#undef TILELAB_FAMILY_CHECK
  return std::string("no family for ") + row.name;
}

// The problem as kernel arguments (host Arguments -> device Params, here only).
template <typename T>
GemmArgs<T> device_args(const GemmProblem& p) {
  return GemmArgs<T>{static_cast<const T*>(p.a.data), static_cast<const T*>(p.b.data), static_cast<T*>(p.c),
                     static_cast<const T*>(p.bias), static_cast<int>(p.M), static_cast<int>(p.N),
                     static_cast<int>(p.K), p.a.s_mn, p.a.s_k, p.a.s_batch, p.b.s_k, p.b.s_mn, p.b.s_batch,
                     p.sc_m, p.sc_b, p.sbias_m, p.sbias_n, p.sbias_b, p.act, static_cast<int>(p.batch),
                     p.splits, p.partial};
}

namespace detail {
template <Family F, int I, typename Fn>
bool call_if_family(Fn& fn) {
  if constexpr (kConfigs[I].family == F) {
    fn(std::integral_constant<int, I>{});
    return true;
  } else {
    return false;
  }
}
template <Family F, typename Fn, int... I>
bool visit_family(int index, Fn& fn, std::integer_sequence<int, I...>) {
  return ((index == I && call_if_family<F, I>(fn)) || ...);
}
}  // namespace detail

// Calls fn(std::integral_constant<int, I>) for row I == &row - kConfigs if that
// row belongs to family F; only rows of F are instantiated. A family's launcher
// starts with it, so the table is the list of compiled configs.
template <Family F, typename Fn>
void visit_family(const KernelConfig& row, Fn&& fn) {
  const bool found =
      detail::visit_family<F>(static_cast<int>(&row - kConfigs), fn, std::make_integer_sequence<int, kNumConfigs>{});
  TORCH_CHECK(found, "tilelab: config ", row.name, " is not a ", family_name(F), " kernel");
}

// Calls fn(std::bool_constant<A k-contiguous>{}, std::bool_constant<B k-contiguous>{})
// for the families that instantiate one kernel per operand layout.
template <typename Fn>
void with_layouts(const GemmProblem& p, Fn&& fn) {
  const bool a_k = p.a.k_contiguous, b_k = p.b.k_contiguous;
  if (a_k && b_k) fn(std::true_type{}, std::true_type{});
  else if (a_k) fn(std::true_type{}, std::false_type{});
  else if (b_k) fn(std::false_type{}, std::true_type{});
  else fn(std::false_type{}, std::false_type{});
}

// The data-parallel grid: one block per bm x bn tile of C (m along x, which
// allows 2^31-1 tiles), n tiles along y and the batch (times the K splits)
// along z (each at most 65535 in CUDA; the host path launches larger batches
// in chunks, and the chooser splits K only while batch x splits fits).
inline dim3 grid_for(const GemmProblem& p, int bm, int bn) {
  const int64_t gx = (p.M + bm - 1) / bm;
  const int64_t gy = (p.N + bn - 1) / bn;
  const int64_t gz = p.batch * p.splits;
  TORCH_CHECK(gy <= 65535, "tilelab: N=", p.N, " needs ", gy, " column tiles of ", bn,
              " but CUDA allows 65535 grid rows; use a config with a wider tile");
  TORCH_CHECK(gz <= 65535, "tilelab: batch=", p.batch, " x ", p.splits, " K splits exceeds CUDA's 65535 grid layers");
  return dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(gz));
}

// M, N and K all multiples of t: the unpredicated fast path applies.
inline bool is_even(const GemmProblem& p, int tm, int tn, int tk) {
  return p.M % tm == 0 && p.N % tn == 0 && p.K % tk == 0;
}

// A persistent grid's equal shares of whole tiles: `tiles` over `slots` resident blocks, `per` tiles a block
// (the last block the rest), `blocks` blocks. gemv_mma's launcher sizes its grid with it, and the chooser's
// decode rule asks it where gemv_mma's shares leave SMs idle.
struct PersistentShares {
  int64_t per, blocks;
};
inline PersistentShares persistent_shares(int64_t tiles, int64_t slots) {
  const int64_t per = (tiles + slots - 1) / slots;
  return {per, (tiles + per - 1) / per};
}

// What a launcher asks the driver about its kernel once per device, not on every call (a driver call
// per launch would add to the host cost of every product).
enum class DeviceFact { kSmemOptIn, kBlocksPerSm };

// The value `make` returns (positive) for kKernel's fact kFact on the current device: computed on the
// first call on that device, then read back (devices past the first 64 compute it on every call).
template <auto kKernel, DeviceFact kFact, typename Make>
int once_per_device(Make&& make) {
  static std::array<std::atomic<int>, 64> known{};  // 0: not computed yet
  const int dev = c10::cuda::current_device();
  const bool cached = dev >= 0 && dev < static_cast<int>(known.size());
  if (cached) {
    const int v = known[dev].load(std::memory_order_acquire);
    if (v != 0) return v;
  }
  const int v = make();
  if (cached) known[dev].store(v, std::memory_order_release);
  return v;
}

// Opts kKernel into more than 48 KB of dynamic shared memory (the attribute is the kernel's on each
// device), once per device.
template <auto kKernel>
void allow_smem(int bytes) {
  if (bytes <= 48 * 1024) return;
  once_per_device<kKernel, DeviceFact::kSmemOptIn>([&] {
    C10_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    return 1;
  });
}

}  // namespace tilelab

// Every family supports the four float dtypes torch.mm does.
#define TILELAB_DISPATCH_FLOATS(dtype, name, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, name, __VA_ARGS__)
