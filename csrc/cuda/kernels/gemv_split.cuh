#pragma once
// Kernel family `gemv_split`: few rows (kRows a block) against a large B, B
// streamed once at memory speed. A block covers kRows rows by kWarps warps of
// columns and one slice of K (the scheduler's split-K: blocks of the same
// columns on other slices, their fp32 sums added by split_reduce.cu in a fixed
// order), so a product of a few thousand columns still puts every SM to work.
// Where gemv (a warp per output column) reloads x's 16 bytes for every row and
// every column, here each x load serves 4 columns and each B load kRows rows.
//
// kNMajor = false: x @ W^T with W (N x K) row-major, both operands
//   k-contiguous (decoding). A warp covers 16 columns, its lanes 4 column
//   groups x 8 along K: per step a lane loads 16 bytes of each of its 4 W rows
//   (8 lanes: 128 contiguous bytes of a row) and 16 bytes of each row of x at
//   the same k (the same 128 bytes for the 4 groups), then adds 4 x kE
//   products a row. At the end the 8 lanes of a group add their sums
//   (butterfly shuffles) and share the stores.
// kNMajor = true: x @ B with B (K x N) row-major (B n-contiguous). A lane holds
//   4 adjacent columns and walks K: per 4 values of k, 4 loads of B's rows (a
//   warp reads 512 contiguous bytes of a row in fp32, 256 in half) and one
//   load of x's 4 values per row, the same address for the whole warp.
//
// x's loads are served by L1 (a block's warps read the same k at about the same
// time); B's bypass it (ld.global.nc.L1::no_allocate): with B allocated in L1 the
// x lines were evicted and 16 x 14336 x 4096 fp32 took 0.251 ms, against 0.152
// (H100, per call under CUDA graphs). Loading the next step of B before this
// step's multiply-adds (a register double buffer) was slower on every product
// tried (0.263 there): it spilled under the 128 registers that keep two blocks
// an SM. With x cold in L2 every step's loads of x missed in every block of a
// slice together, each waiting behind B's stream for DRAM: M = 16 took ~0.1 ms
// more. A block therefore asks L2 for its rows of x up front (one bulk prefetch
// a row, sm_90): H100, fp32 x @ W.t(), do_bench (L2 flushed before each call),
// 16x14336x4096 0.187 -> 0.133 ms, 8x4096x14336 0.188 -> 0.142, 16x4096x4096
// 0.082 -> 0.063 (cuBLAS 0.140, 0.148, 0.062), x @ B 8x8192x8192 0.153 -> 0.131;
// with x in L2 (under CUDA graphs) none slower by more than 1.5%. The rows'
// loop carried a branch per row (r < rows) that kept each row's loads of x one
// L1 round trip ahead of its multiply-adds; with more than half a block of rows
// the launcher runs the kernel without it (kRepeat: a short block repeats its
// last row and drops those sums): 16 x 14336 x 4096 0.112 ms.
//
// kRows is 16 (two blocks an SM, under 128 registers a thread) or 32 (gemv_split_m32, fp32: 128 sums a lane, one
// block an SM), which streams W once for 17 to 32 rows where 16-row blocks stream it twice.
//
// The launcher gives both kernels aligned rows (16 bytes) and A k-contiguous
// (copying where a view is not); K needs no alignment (a scalar tail). fp32
// stays IEEE fp32 (no TF32); half precision accumulates in fp32.
#include <cstdint>
#include <type_traits>

#include "epilogue.cuh"
#include "scheduler.cuh"

namespace tilelab {
namespace gemv_split {

constexpr int kCols = 4;  // columns a lane holds

// kN values of T at p (kN * sizeof(T) bytes, aligned to that), as floats. kStream: read once (B), so
// not kept in L1 (ld.global.nc.L1::no_allocate), which then holds x for every warp that reads it.
template <int kN, bool kStream = false, typename T>
__device__ __forceinline__ void load_vec(const T* p, float (&v)[kN]) {
  static_assert(kN * sizeof(T) == 16 || kN * sizeof(T) == 8, "16- or 8-byte loads");
  if constexpr (kN * sizeof(T) == 16) {
    uint4 raw;
    if constexpr (kStream)
      asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(raw.x), "=r"(raw.y), "=r"(raw.z), "=r"(raw.w)
                   : "l"(p));
    else
      raw = __ldg(reinterpret_cast<const uint4*>(p));
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < kN; ++i) v[i] = static_cast<float>(e[i]);
  } else {
    uint2 raw;
    if constexpr (kStream)
      asm("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];" : "=r"(raw.x), "=r"(raw.y) : "l"(p));
    else
      raw = __ldg(reinterpret_cast<const uint2*>(p));
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < kN; ++i) v[i] = static_cast<float>(e[i]);
  }
}

// Columns a block covers.
template <int kWarps, bool kNMajor>
constexpr int block_cols() {
  return kNMajor ? kWarps * 32 * kCols : kWarps * 16;
}

// acc[r][c] += sum over u < kU, j < kN of x[r][k0 + u * x_step + j] * b(u, j, c), for the first `rows`
// rows of x (rows ld_x apart): per row and u, kN values of x in one load (kN == 1: one element).
// kRepeat: every one of the kRows rows is computed, those past `rows` on a copy of the last row (their sums
// are never stored), so no row sits behind a branch and the compiler can keep several rows' loads of x in
// flight; otherwise rows past `rows` are skipped.
template <int kU, int kN, bool kRepeat, int kRows, int kCols, typename T, typename BValue>
__device__ __forceinline__ void madd_rows(float (&acc)[kRows][kCols], int rows, const T* x, int64_t ld_x, int k0,
                                          int x_step, BValue b) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (kRepeat || r < rows) {
      const T* xr = x + (kRepeat ? min(r, rows - 1) : r) * ld_x;
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        float xv[kN];
        if constexpr (kN == 1)
          xv[0] = static_cast<float>(xr[k0 + u * x_step]);
        else
          load_vec<kN>(xr + k0 + u * x_step, xv);
#pragma unroll
        for (int c = 0; c < kCols; ++c)
#pragma unroll
          for (int j = 0; j < kN; ++j) acc[r][c] = fmaf(xv[j], b(u, j, c), acc[r][c]);
      }
    }
  }
}

// Stores the sums of the block's first `rows` rows (from row m0) in columns n0.., those inside N for which
// mine(r, c) holds (the lane that stores them).
template <int kRows, int kCols, typename T, typename Mine>
__device__ __forceinline__ void store_rows(const GemmArgs<T>& p, const WorkTile& w, int m0, int rows, int n0,
                                           const float (&acc)[kRows][kCols], Mine mine) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    if (r < rows) {
      const auto out = output_row(p, w.batch, m0 + r, w.split);
#pragma unroll
      for (int c = 0; c < kCols; ++c)
        if (mine(r, c) && n0 + c < p.N) out.store(n0 + c, acc[r][c]);
    }
  }
}

// Asks L2 for `bytes` (rounded down to 16) from p, in one instruction (sm_90's bulk copy unit); nothing where p is
// not 16-byte aligned (a batch stride that is not) or before sm_90.
__device__ __forceinline__ void prefetch_l2_bulk(const void* p, int64_t bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const uint32_t n = static_cast<uint32_t>(bytes < (int64_t{1} << 30) ? bytes : int64_t{1} << 30) & ~15u;
  if (n > 0 && reinterpret_cast<uintptr_t>(p) % 16 == 0)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(p), "r"(n) : "memory");
#endif
}

}  // namespace gemv_split

// kMinBlocks: the blocks an SM must hold (gemv_split_blocks_per_sm in table.h), which caps the registers.
template <typename T, int kRows, int kWarps, int kBk, bool kNMajor, bool kRepeat, int kMinBlocks>
__global__ void __launch_bounds__(kWarps * 32, kMinBlocks) gemv_split_kernel(GemmArgs<T> p) {
  static_assert(!std::is_same_v<T, double>, "gemv_split: fp32 and half precision (fp32 sums)");
  using gemv_split::kCols;
  using gemv_split::load_vec;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const WorkTile w = LinearScheduler::first((p.K + kBk - 1) / kBk, p.splits, p.batch);
  narrow_k(p, w, kBk);  // this block's slice of K (all of it without split-K)
  const int m0 = w.tm * kRows;
  const int rows = min(kRows, p.M - m0);
  const T* a = p.a + w.batch * p.sa_b + static_cast<int64_t>(m0) * p.sa_m;
  const T* b = p.b + w.batch * p.sb_b;
  // Every block of this slice reads the same rows of x at about the same k: where x is not in L2 (a cold cache,
  // or evicted), each step's misses wait behind B's stream in the DRAM queues. Ask L2 for the block's x up front.
  if (warp == 0 && lane < rows) gemv_split::prefetch_l2_bulk(a + lane * p.sa_m, static_cast<int64_t>(p.K) * sizeof(T));
  float acc[kRows][kCols];
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < kCols; ++c) acc[r][c] = 0.f;

  if constexpr (!kNMajor) {
    constexpr int kE = 16 / sizeof(T);  // elements per 16-byte load
    constexpr int kLanesK = 8, kStep = kLanesK * kE;
    // fp32: 2 steps of W's loads in flight a lane (4 with 32 rows, in 255 registers, was slower: H100, 32x14336x4096
    // 0.205 ms vs 0.181); half: 8 values a load already (registers).
    constexpr int kUnroll = sizeof(T) == 4 ? 2 : 1;
    const int kl = lane % kLanesK, group = lane / kLanesK;
    const int n0 = w.tn * gemv_split::block_cols<kWarps, false>() + warp * 16 + group * kCols;
    // W's rows of this lane's columns (a column past N reads row N - 1; its sums are not stored).
    const T* wrow[kCols];
#pragma unroll
    for (int c = 0; c < kCols; ++c) wrow[c] = b + static_cast<int64_t>(min(n0 + c, p.N - 1)) * p.sb_n;
    const int k_vec = p.K / kE * kE;
    auto step = [&](int k0, auto unroll) {
      constexpr int kU = decltype(unroll)::value;
      float wv[kU][kCols][kE];
#pragma unroll
      for (int u = 0; u < kU; ++u)
#pragma unroll
        for (int c = 0; c < kCols; ++c) load_vec<kE, true>(wrow[c] + k0 + u * kStep, wv[u][c]);
      gemv_split::madd_rows<kU, kE, kRepeat>(acc, rows, a, p.sa_m, k0, kStep,
                                    [&](int u, int i, int c) { return wv[u][c][i]; });
    };
    int k = kl * kE;
    for (; k + (kUnroll - 1) * kStep + kE <= k_vec; k += kUnroll * kStep) step(k, std::integral_constant<int, kUnroll>{});
    for (; k + kE <= k_vec; k += kStep) step(k, std::integral_constant<int, 1>{});
    for (k = k_vec + kl; k < p.K; k += kLanesK) {  // the K tail (K not a multiple of kE), one element a lane
      float wk[kCols];
#pragma unroll
      for (int c = 0; c < kCols; ++c) wk[c] = static_cast<float>(wrow[c][k]);
      gemv_split::madd_rows<1, 1, kRepeat>(acc, rows, a, p.sa_m, k, 0, [&](int, int, int c) { return wk[c]; });
    }
    // The 8 lanes of a group hold partial sums of the same outputs: add them (every lane gets the total),
    // then lane kl stores the outputs i = r * kCols + c with i % 8 == kl.
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int c = 0; c < kCols; ++c)
#pragma unroll
        for (int off = 1; off < kLanesK; off *= 2) acc[r][c] += __shfl_xor_sync(0xffffffffu, acc[r][c], off);
    gemv_split::store_rows(p, w, m0, rows, n0, acc, [&](int r, int c) { return (r * kCols + c) % kLanesK == kl; });
  } else {
    constexpr int kXv = kCols;  // x's values per load (16 bytes fp32, 8 half)
    constexpr int kUnroll = 2;
    const int n0 = w.tn * gemv_split::block_cols<kWarps, true>() + warp * 32 * kCols + lane * kCols;
    const bool whole = n0 + kCols <= p.N;  // all 4 columns inside: one 16/8-byte load a row
    const T* bcol = b + min(n0, p.N - 1);
    auto load_b = [&](int k, float (&v)[kCols]) {
      const T* q = bcol + static_cast<int64_t>(k) * p.sb_k;
      if (whole) {
        load_vec<kCols, true>(q, v);
      } else {
#pragma unroll
        for (int c = 0; c < kCols; ++c) v[c] = n0 + c < p.N ? static_cast<float>(q[c]) : 0.f;
      }
    };
    const int k_vec = p.K / kXv * kXv;
    auto chunk = [&](int k0, auto unroll) {
      constexpr int kU = decltype(unroll)::value;
      float bv[kU][kXv][kCols];
#pragma unroll
      for (int u = 0; u < kU; ++u)
#pragma unroll
        for (int j = 0; j < kXv; ++j) load_b(k0 + u * kXv + j, bv[u][j]);
      gemv_split::madd_rows<kU, kXv, kRepeat>(acc, rows, a, p.sa_m, k0, kXv,
                                     [&](int u, int j, int c) { return bv[u][j][c]; });
    };
    int k = 0;
    for (; k + kUnroll * kXv <= k_vec; k += kUnroll * kXv) chunk(k, std::integral_constant<int, kUnroll>{});
    for (; k + kXv <= k_vec; k += kXv) chunk(k, std::integral_constant<int, 1>{});
    for (; k < p.K; ++k) {  // the K tail (K not a multiple of 4)
      float bk[kCols];
      load_b(k, bk);
      gemv_split::madd_rows<1, 1, kRepeat>(acc, rows, a, p.sa_m, k, 0, [&](int, int, int c) { return bk[c]; });
    }
    gemv_split::store_rows(p, w, m0, rows, n0, acc, [](int, int) { return true; });
  }
}

}  // namespace tilelab
