// The CPU kernel: what tiled_mm runs on a machine without a GPU.
//
// Cache-tiled: C is cut into kMC x kNC tiles that at::parallel_for spreads
// over the threads; for each tile, K is walked in kKC slices. Each slice of A
// (kMC x kKC) and of B (kKC x kNC) is first packed into a contiguous buffer in
// the accumulator type, which makes every operand layout (row-major,
// column-major, any strides) and every dtype look the same to the inner loop
// and keeps the working set in L2. The inner loop runs along n over unit
// stride, so the compiler vectorises it. Half types accumulate in fp32, fp32
// in fp32, fp64 in fp64, like torch.mm.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "../checks.h"

namespace tilelab {
namespace {

constexpr int64_t kMC = 64;   // rows of C per task
constexpr int64_t kNC = 256;  // columns of C per task
constexpr int64_t kKC = 256;  // depth of one packed slice

template <typename T> struct CpuAcc { using type = float; };
template <> struct CpuAcc<double> { using type = double; };

// acc[i][j] += sum_k ap[i][k] * bp[k][j] over one packed slice. The body
// keeps a kMR x kNR block of C in registers while it streams k, so each
// loaded B vector feeds kMR multiply-adds (the row-at-a-time loop reloaded
// and stored C for every k). Ragged edges take the plain loop.
constexpr int64_t kMR = 4, kNR = 16;

template <typename Acc>
void micro_tiles(const Acc* __restrict__ ap, const Acc* __restrict__ bp, Acc* __restrict__ acc,
                 int64_t mb, int64_t nb, int64_t kb) {
  const int64_t mfull = mb - mb % kMR, nfull = nb - nb % kNR;
  for (int64_t i = 0; i < mfull; i += kMR) {
    for (int64_t j = 0; j < nfull; j += kNR) {
      Acc c[kMR][kNR];
      for (int64_t r = 0; r < kMR; ++r)
        for (int64_t x = 0; x < kNR; ++x) c[r][x] = acc[(i + r) * kNC + j + x];
      for (int64_t k = 0; k < kb; ++k) {
        const Acc* __restrict__ bk = bp + k * kNC + j;
        for (int64_t r = 0; r < kMR; ++r) {
          const Acc a = ap[(i + r) * kKC + k];
          for (int64_t x = 0; x < kNR; ++x) c[r][x] += a * bk[x];
        }
      }
      for (int64_t r = 0; r < kMR; ++r)
        for (int64_t x = 0; x < kNR; ++x) acc[(i + r) * kNC + j + x] = c[r][x];
    }
  }
  // Ragged edges: the rows below mfull (all columns) and the columns right of nfull.
  auto plain = [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t k = 0; k < kb; ++k) {
        const Acc a = ap[i * kKC + k];
        for (int64_t j = j0; j < j1; ++j) acc[i * kNC + j] += a * bp[k * kNC + j];
      }
  };
  plain(0, mfull, nfull, nb);
  plain(mfull, mb, 0, nb);
}

template <typename T>
void cpu_mm(const T* a, int64_t sam, int64_t sak, const T* b, int64_t sbk, int64_t sbn, T* c,
            int64_t M, int64_t N, int64_t K) {
  using Acc = typename CpuAcc<T>::type;
  const int64_t mt = (M + kMC - 1) / kMC, nt = (N + kNC - 1) / kNC;
  at::parallel_for(0, mt * nt, 1, [&](int64_t begin, int64_t end) {
    std::vector<Acc> acc(kMC * kNC), ap(kMC * kKC), bp(kKC * kNC);
    for (int64_t t = begin; t < end; ++t) {
      const int64_t m0 = (t / nt) * kMC, n0 = (t % nt) * kNC;
      const int64_t mb = std::min(kMC, M - m0), nb = std::min(kNC, N - n0);
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t k0 = 0; k0 < K; k0 += kKC) {
        const int64_t kb = std::min(kKC, K - k0);
        for (int64_t i = 0; i < mb; ++i)
          for (int64_t k = 0; k < kb; ++k)
            ap[i * kKC + k] = static_cast<Acc>(a[(m0 + i) * sam + (k0 + k) * sak]);
        for (int64_t k = 0; k < kb; ++k)
          for (int64_t j = 0; j < nb; ++j)
            bp[k * kNC + j] = static_cast<Acc>(b[(k0 + k) * sbk + (n0 + j) * sbn]);
        micro_tiles(ap.data(), bp.data(), acc.data(), mb, nb, kb);
      }
      for (int64_t i = 0; i < mb; ++i)
        for (int64_t j = 0; j < nb; ++j) c[(m0 + i) * N + n0 + j] = static_cast<T>(acc[i * kNC + j]);
    }
  });
}

void check_cpu_override(std::optional<c10::string_view> variant, std::optional<int64_t> tile) {
  const bool ok_variant = !variant.has_value() || *variant == "cpu" || *variant == "auto";
  TORCH_CHECK(ok_variant, "tilelab: variant='", std::string(variant->data(), variant->size()),
              "' is a CUDA kernel; CPU tensors run the 'cpu' kernel (pass variant=None or 'cpu', "
              "or move the tensors to a CUDA device)");
  TORCH_CHECK(!tile.has_value(), "tilelab: tile=", tile.value_or(0),
              " applies to CUDA kernels; the CPU kernel's tiling is fixed (", kMC, "x", kNC, "x",
              kKC, ")");
}

at::Tensor tiled_mm_cpu(const at::Tensor& a, const at::Tensor& b,
                        std::optional<c10::string_view> variant, std::optional<int64_t> tile) {
  check_mm_inputs(a, b, "tiled_mm");
  check_cpu_override(variant, tile);
  const int64_t M = a.size(0), N = b.size(1), K = a.size(1);
  at::Tensor out = at::empty({M, N}, a.options());
  if (M == 0 || N == 0) return out;
  if (K == 0) return out.zero_();
  const Operand A = as_operand(a), B = as_operand(b);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "tilelab_cpu_mm", [&] {
    cpu_mm<scalar_t>(A.t.const_data_ptr<scalar_t>(), A.s_row, A.s_col, B.t.const_data_ptr<scalar_t>(),
                     B.s_row, B.s_col, out.mutable_data_ptr<scalar_t>(), M, N, K);
  });
  return out;
}

std::string explain_cpu(const at::Tensor& a, const at::Tensor& b,
                        std::optional<c10::string_view> variant, std::optional<int64_t> tile) {
  check_mm_inputs(a, b, "explain");
  check_cpu_override(variant, tile);
  std::ostringstream os;
  os << "{\"kernel\": \"cpu\", \"variant\": \"cpu\", \"tile\": null, \"device\": \"cpu\", "
     << "\"device_name\": \"cpu\", \"M\": " << a.size(0) << ", \"N\": " << b.size(1)
     << ", \"K\": " << a.size(1) << ", \"dtype\": \"" << dtype_str(a.scalar_type())
     << "\", \"reason\": \"CPU tensors run the cache-tiled CPU kernel (" << kMC << "x" << kNC
     << " tiles of C over " << at::get_num_threads() << " threads, K in slices of " << kKC
     << ")\"}";
  return os.str();
}

}  // namespace

TORCH_LIBRARY_IMPL(tilelab, CPU, m) {
  m.impl("tiled_mm", &tiled_mm_cpu);
  m.impl("_explain", &explain_cpu);
}

}  // namespace tilelab
