#pragma once
// The CPU kernel: what tiled_mm, tiled_bmm and tiled_addmm run on CPU
// tensors (ops_cpu.cpp), on the same GemmProblem as the CUDA kernels.
//
// Cache-tiled: C is cut into kMC x kNC tiles that at::parallel_for spreads
// over the threads; for each tile, K is walked in kKC slices. Each slice of A
// (kMC x kKC) and of B (kKC x kNC) is first packed into a contiguous buffer in
// the accumulator type, which makes every operand layout (row-major,
// column-major, any strides) and every dtype look the same to the inner loop
// and keeps the working set in L2. The inner loop (micro_tiles) keeps a
// 4x16 block of C in registers and runs along n over unit stride, so the
// compiler vectorises it. Half types accumulate in fp32, fp32
// in fp32, fp64 in fp64, like torch.mm.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "../gemm.h"

namespace tilelab {
namespace cpu {

constexpr int64_t kMC = 64;   // rows of C per task
constexpr int64_t kNC = 256;  // columns of C per task
constexpr int64_t kKC = 256;  // depth of one packed slice

template <typename T> struct CpuAcc { using type = float; };
template <> struct CpuAcc<double> { using type = double; };

// acc[i][j] += sum_k ap[i][k] * bp[k][j] over one packed slice. The body
// keeps a kMR x kNR block of C in registers while it streams k, so each
// loaded B vector feeds kMR multiply-adds (a row-at-a-time loop reloads and
// stores its row of C for every k). Ragged edges take the plain loop.
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
  // Ragged edges: the columns right of nfull (full row blocks), then the rows below mfull.
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

// C = act(A @ B (+ bias)) of problem p (../gemm.h): any operand strides, batch
// strides (0 = broadcast) and bias strides. The bias and the activation are
// applied in the accumulator type before the one rounding to T, like the CUDA
// epilogue.
template <typename T>
void cpu_mm(const GemmProblem& p) {
  using Acc = typename CpuAcc<T>::type;
  const int64_t M = p.M, N = p.N, K = p.K;
  const T* a = static_cast<const T*>(p.a.data);
  const T* b = static_cast<const T*>(p.b.data);
  T* c = static_cast<T*>(p.c);
  const T* bias = static_cast<const T*>(p.bias);
  const int64_t sam = p.a.s_mn, sak = p.a.s_k, sbk = p.b.s_k, sbn = p.b.s_mn;
  const int64_t mt = (M + kMC - 1) / kMC, nt = (N + kNC - 1) / kNC;
  // Tasks are (batch, tile of C) pairs, so many small matrices also spread over the threads.
  at::parallel_for(0, p.batch * mt * nt, 1, [&](int64_t begin, int64_t end) {
    std::vector<Acc> acc(kMC * kNC), ap(kMC * kKC), bp(kKC * kNC);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t z = task / (mt * nt), t = task % (mt * nt);
      const T* a_z = a + z * p.a.s_batch;
      const T* b_z = b + z * p.b.s_batch;
      T* c_z = c + z * p.sc_b;
      const int64_t m0 = (t / nt) * kMC, n0 = (t % nt) * kNC;
      const int64_t mb = std::min(kMC, M - m0), nb = std::min(kNC, N - n0);
      std::fill(acc.begin(), acc.end(), Acc(0));
      for (int64_t k0 = 0; k0 < K; k0 += kKC) {
        const int64_t kb = std::min(kKC, K - k0);
        for (int64_t i = 0; i < mb; ++i)
          for (int64_t k = 0; k < kb; ++k)
            ap[i * kKC + k] = static_cast<Acc>(a_z[(m0 + i) * sam + (k0 + k) * sak]);
        for (int64_t k = 0; k < kb; ++k)
          for (int64_t j = 0; j < nb; ++j)
            bp[k * kNC + j] = static_cast<Acc>(b_z[(k0 + k) * sbk + (n0 + j) * sbn]);
        micro_tiles(ap.data(), bp.data(), acc.data(), mb, nb, kb);
      }
      for (int64_t i = 0; i < mb; ++i)
        for (int64_t j = 0; j < nb; ++j) {
          Acc v = acc[i * kNC + j];
          if (bias != nullptr)
            v += static_cast<Acc>(bias[z * p.sbias_b + (m0 + i) * p.sbias_m + (n0 + j) * p.sbias_n]);
          if (p.act != Activation::None) v = activate(p.act, v);
          c_z[(m0 + i) * p.sc_m + n0 + j] = static_cast<T>(v);
        }
    }
  });
}

inline void check_cpu_override(std::optional<c10::string_view> variant, std::optional<int64_t> tile) {
  const bool ok_variant = !variant.has_value() || *variant == "cpu" || *variant == "auto";
  TORCH_CHECK(ok_variant, "tilelab: variant='", std::string(variant->data(), variant->size()),
              "' is a CUDA kernel; CPU tensors run the 'cpu' kernel (pass variant=None or 'cpu', "
              "or move the tensors to a CUDA device)");
  TORCH_CHECK(!tile.has_value(), "tilelab: tile=", tile.value_or(0),
              " applies to CUDA kernels; the CPU kernel's tiling is fixed (", kMC, "x", kNC, "x",
              kKC, ")");
}

}  // namespace cpu
}  // namespace tilelab
