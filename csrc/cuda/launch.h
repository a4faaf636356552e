#pragma once
// Host-side glue between the config table and the family translation units.
//
// Each launch_<family>.cu instantiates the kernels of exactly the table rows
// of its family (visit_family below walks kConfigs at compile time), so the
// table is the list of compiled configs and nothing else is.
#include <ATen/ATen.h>
#include <cuda_runtime.h>

#include <type_traits>
#include <utility>

#include "configs.h"
#include "gemm_args.h"

namespace tilelab {

// Each launcher runs its kernels on at::cuda::getCurrentCUDAStream() of the
// current device (the callers, tiled_mm.cu and batched.cu, hold a CUDAGuard
// for the operands' device), so streams, CUDA graphs and
// torch.compile(mode="reduce-overhead") see every launch.
void launch_naive(int config_index, const GemmProblem& p);
void launch_tiled(int config_index, const GemmProblem& p);
void launch_padded(int config_index, const GemmProblem& p);
void launch_blocked(int config_index, const GemmProblem& p);
void launch_tensorcore(int config_index, const GemmProblem& p);
void launch_hopper(int config_index, const GemmProblem& p);

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

// Calls fn(std::integral_constant<int, I>) for the row I == index if that row
// belongs to family F; only rows of F are instantiated. Returns false if the
// row is not of family F.
template <Family F, typename Fn>
bool visit_family(int index, Fn&& fn) {
  return detail::visit_family<F>(index, fn, std::make_integer_sequence<int, kNumConfigs>{});
}

// Calls fn(std::bool_constant<kAK>{}, std::bool_constant<kBK>{}) for the
// problem's operand layouts (as_operand() hands over row-major or column-major
// views): kAK, A is k-contiguous (row-major); kBK, B is k-contiguous
// (column-major). For the families that instantiate one kernel per layout.
template <typename Fn>
void with_layouts(const GemmProblem& p, Fn&& fn) {
  const bool a_k = p.sa_k == 1, b_k = p.sb_k == 1 && p.sb_n != 1;
  if (a_k && b_k) fn(std::true_type{}, std::true_type{});
  else if (a_k) fn(std::true_type{}, std::false_type{});
  else if (b_k) fn(std::false_type{}, std::true_type{});
  else fn(std::false_type{}, std::false_type{});
}

// One block per bm x bn tile of C (m along x, which allows 2^31-1 tiles), n
// tiles along y and the batch along z (each at most 65535 in CUDA).
inline dim3 grid_for(const GemmProblem& p, int bm, int bn) {
  const int64_t gx = (static_cast<int64_t>(p.M) + bm - 1) / bm;
  const int64_t gy = (static_cast<int64_t>(p.N) + bn - 1) / bn;
  TORCH_CHECK(gy <= 65535, "tilelab: N=", p.N, " needs ", gy, " column tiles of ", bn,
              " but CUDA allows 65535 grid rows; use a config with a wider tile");
  TORCH_CHECK(p.batch <= 65535, "tilelab: batch=", p.batch, " exceeds CUDA's 65535 grid layers");
  return dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy), static_cast<unsigned>(p.batch));
}

// M, N and K all multiples of t: the unpredicated fast path applies.
inline bool is_even(const GemmProblem& p, int tm, int tn, int tk) {
  return p.M % tm == 0 && p.N % tn == 0 && p.K % tk == 0;
}

}  // namespace tilelab

// Every family supports the four float dtypes torch.mm does.
#define TILELAB_DISPATCH_FLOATS(dtype, name, ...) \
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, dtype, name, __VA_ARGS__)
