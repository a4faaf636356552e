#pragma once
// Kernel family `gemv`: products with few rows (decoding a language model: x
// (M x K, M <= 16) @ W^T with W (N x K) row-major), where the time is the
// weights streamed once from memory. A warp computes one output column n for
// up to kRows rows: its lanes walk K together, each lane loading 16 bytes of
// B's column n (contiguous along k: W's row) and the matching 16 bytes of each
// row of A, accumulating in fp32 (fp64 for doubles); a warp shuffle reduction
// then gives the kRows dot products, lane r storing row r through the epilogue
// (bias, activation, conversion). Blocks cover (N / warps) x (M / kRows) x batch.
//
// kVec: A and B k-contiguous with 16-byte aligned rows (the host checks), so
// every load is 16 bytes, four steps of K issued together (the K tail a scalar
// loop); otherwise any strides, one element per load. IEEE FMAs: fp32 stays
// fp32 (no TF32).
#include <cstdint>
#include <type_traits>

#include "epilogue.cuh"
#include "scheduler.cuh"

namespace tilelab {
namespace gemv_detail {

// 16 bytes of T as accumulator-type values.
template <typename T, typename Acc>
struct Vec16 {
  static constexpr int kN = 16 / sizeof(T);
  Acc v[kN];
  __device__ __forceinline__ void load(const T* p) {
    const uint4 raw = __ldg(reinterpret_cast<const uint4*>(p));
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < kN; ++i) v[i] = static_cast<Acc>(e[i]);
  }
};

}  // namespace gemv_detail

template <typename T, int kRows, int kWarps, bool kVec>
__global__ void __launch_bounds__(kWarps * 32) gemv_kernel(GemmArgs<T> p) {
  using Acc = acc_t<T>;
  using V = gemv_detail::Vec16<T, Acc>;
  constexpr int kE = V::kN;  // elements per 16-byte load
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  WorkTile w = LinearScheduler::first(1);
  int n = w.tn * kWarps + warp;  // this warp's output column
  if (gridDim.z == 1 && p.batch > 1) {
    // The launcher's flat grid (fewer columns than warps): a block's warps take consecutive (matrix, column)
    // pairs, so a batch of dot products keeps every warp busy.
    w.batch = n / p.N;
    n %= p.N;
    if (w.batch >= p.batch) return;
  }
  const int m0 = w.tm * kRows;  // its first row
  if (n >= p.N) return;
  const int rows = min(kRows, p.M - m0);
  const T* b = p.b + w.batch * p.sb_b + static_cast<int64_t>(n) * p.sb_n;
  const T* a = p.a + w.batch * p.sa_b + static_cast<int64_t>(m0) * p.sa_m;

  Acc acc[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) acc[r] = 0;
  // Lane r stores row m0 + r at the end; its bias is loaded now, its latency hidden under the K walk.
  static_assert(kRows <= 32, "gemv: a lane stores each row");
  const Acc my_bias = lane < rows ? bias_at<Acc>(p, w.batch, m0 + lane, n) : Acc(0);

  int k = 0;
  if constexpr (kVec) {
    // Lanes take consecutive 16-byte chunks: a warp reads 512 contiguous bytes of W's row per
    // step, kUnroll independent steps at a time so that many loads are in flight per lane.
    constexpr int kStep = 32 * kE, kUnroll = 4;
    const int k_vec = p.K / kE * kE;
    auto step = [&](const V (&bv)[kUnroll], int k0, auto unroll) {
      constexpr int kU = decltype(unroll)::value;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r < rows) {
          V av[kU];
#pragma unroll
          for (int u = 0; u < kU; ++u) av[u].load(a + static_cast<int64_t>(r) * p.sa_m + k0 + u * kStep);
#pragma unroll
          for (int u = 0; u < kU; ++u)
#pragma unroll
            for (int i = 0; i < kE; ++i) acc[r] += av[u].v[i] * bv[u].v[i];
        }
      }
    };
    for (k = lane * kE; k + (kUnroll - 1) * kStep + kE <= k_vec; k += kUnroll * kStep) {
      V bv[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) bv[u].load(b + k + u * kStep);
      step(bv, k, std::integral_constant<int, kUnroll>{});
    }
    for (; k + kE <= k_vec; k += kStep) {
      V bv[kUnroll];
      bv[0].load(b + k);
      step(bv, k, std::integral_constant<int, 1>{});
    }
    k = k_vec + lane;  // the K tail, one element per lane
  } else {
    k = lane;
  }
  // One element a lane (any strides; the K tail of the 16-byte path). Every row's load is made, a row past
  // `rows` reading the last row again (its sums are never stored): with a branch a row, each row's load
  // issued only after the row before had its multiply-add, one memory round trip a row, which a tiny
  // product spends most of its time on.
  for (; k < p.K; k += 32) {
    const Acc bk = static_cast<Acc>(b[static_cast<int64_t>(k) * p.sb_k]);
    const T* ak = a + static_cast<int64_t>(k) * p.sa_k;
#pragma unroll
    for (int r = 0; r < kRows; ++r)
      acc[r] += static_cast<Acc>(ak[static_cast<int64_t>(r < rows ? r : rows - 1) * p.sa_m]) * bk;
  }

  // Reduce each row's 32 partial sums into lane 0, which hands row r's sum to lane r; the lanes then store
  // their rows together, through the epilogue with the bias added here (it applies the activation, read at run
  // time). Lane 0 storing the rows one after another, each bias load waiting behind the store before (C and the
  // bias may alias, for all the compiler knows), made a tiny product wait a memory round trip a row.
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) acc[r] += __shfl_down_sync(0xffffffffu, acc[r], off);
  }
  Acc mine = 0;
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const Acc v = __shfl_sync(0xffffffffu, acc[r], 0);
    if (lane == r) mine = v;
  }
  if (lane < rows) output_row(p, w.batch, m0 + lane).store_biased(n, mine, my_bias);
}

}  // namespace tilelab
