#pragma once
// Kernel 4, the fast fp32 SIMT kernel: register blocking + warp tiling +
// a cp.async multi-stage shared-memory pipeline, IEEE fp32 FMAs (no TF32).
//
// Work split:
//   - a block computes a BM x BN tile of C (blockIdx.x: m tile, blockIdx.y: n
//     tile, blockIdx.z: batch);
//   - a warp computes a WM x WN sub-tile, WM = 4*TM, WN = 8*TN: its 32 lanes
//     form a 4 (m) x 8 (n) grid;
//   - a thread accumulates TM x TN outputs in registers, as (TM/4) x (TN/4)
//     blocks of 4x4 spaced 16 rows / 32 columns apart. Because of that spacing
//     each 4-wide fragment a thread reads is one float4 shared load, lanes of
//     the same lane-row read the same A float4 (broadcast) and the 8 lane-columns
//     read 8 consecutive B float4s (one 128-byte wavefront): no bank conflicts.
//
// Shared memory, per pipeline stage: As[BK][BM + kPad] (A stored k-major, i.e.
// transposed) and Bs[BK][BN + kPad]. kPad = 4 keeps every row 16-byte aligned
// (float4 reads) and shifts consecutive rows by 4 banks, so the transposed
// 4-byte stores of a k-contiguous operand (a warp covers 8 k x 4 m) land on 32
// distinct banks.
//
// Loads: cp.async global->shared, kStages deep: while the FMAs run on stage s,
// the copies of the next kStages-1 k-tiles are in flight. An operand whose
// unit-stride dimension is m (A) / n (B) and whose pointer and leading
// dimension are 16-byte aligned (decided on the host: kCopyVec16) is copied
// 16 bytes at a time; any other operand 4 bytes at a time, lanes walking its
// unit-stride dimension so the global reads coalesce. Out-of-range elements
// are zero-filled by cp.async's src-size operand (a zero adds nothing to the
// dot product), so any M, N, K >= 1 works; stores are predicated.
#include <cstdint>

#include "async_copy.cuh"
#include "common.cuh"

namespace tilelab {
namespace blocked_detail {

// How an operand tile is copied (chosen on the host per call, a template
// parameter so the main loop holds only the copy code it runs):
//   kCopyVec16: unit stride along m (A) / n (B), 16-byte aligned base and
//               leading/batch strides: 16-byte cp.async;
//   kCopyKFast: unit stride along k (row-major A, column-major B): 4-byte
//               cp.async, lanes walking k, stored transposed;
//   kCopyCFast: anything else (unit stride along m/n but misaligned, or
//               neither): 4-byte cp.async, lanes walking m/n.
// (A single scalar mode choosing k-fast/c-fast at run time was tried: both
// copy paths then sit in the main loop, and the 128-register 8x8 config
// spilled 24 bytes; hence three instantiated modes.)
constexpr int kCopyVec16 = 0, kCopyKFast = 1, kCopyCFast = 2;

// Stage the kRows (k) x kCols (m or n) tile starting at (k0, c0) of an operand
// whose element (k, c) sits at g[k * s_k + c * s_c], into smem[k][c] (row
// stride kLd).
//
// Every thread copies kIters elements (or float4s); iteration `it` handles
// element e = tid + it * kThreads. The (row, column) of e is written out in
// terms of tid and the compile-time `it`, so that after unrolling the
// per-thread part is loop-invariant (hoisted out of the k loop by the
// compiler) and each copy costs one address add and one bounds test: the
// first version looped from tid with run-time trip counts and spent ~150
// integer instructions per k-tile on index math (SASS of run 2).
template <int kRows, int kCols, int kLd, int kThreads, int kMode>
__device__ __forceinline__ void load_tile(float* smem, const float* __restrict__ g, int64_t s_k,
                                          int64_t s_c, int k0, int c0, int K, int C, int tid) {
  static_assert(kThreads % 32 == 0, "blocked: whole warps copy");
  static_assert(kMode >= kCopyVec16 && kMode <= kCopyCFast, "blocked: copy mode");
  if constexpr (kMode == kCopyVec16) {
    // s_c == 1 and 16-byte alignment guaranteed by the host.
    constexpr int kVecsPerRow = kCols / 4;
    constexpr int kIters = kRows * kVecsPerRow / kThreads;
    static_assert(kIters * kThreads == kRows * kVecsPerRow, "blocked: every thread copies the same number of float4s");
    static_assert(kThreads % kVecsPerRow == 0, "blocked: a thread keeps its float4 column across iterations");
    const int c = (tid % kVecsPerRow) * 4, r0 = tid / kVecsPerRow;
    const int gc = c0 + c;
    const int cvalid = min(max(C - gc, 0), 4);
    const float* src0 = g + static_cast<int64_t>(k0 + r0) * s_k + gc;
#pragma unroll
    for (int it = 0; it < kIters; ++it) {
      const int r = r0 + it * (kThreads / kVecsPerRow);
      const int valid = k0 + r < K ? cvalid : 0;
      const float* src = valid > 0 ? src0 + static_cast<int64_t>(it * (kThreads / kVecsPerRow)) * s_k : g;
      async_copy::cp16(smem + r * kLd + c, src, valid * 4);
    }
  } else {
    constexpr int kElems = kRows * kCols;
    constexpr int kIters = kElems / kThreads;
    static_assert(kIters * kThreads == kElems, "blocked: every thread copies the same number of floats");
    static_assert(kRows % 8 == 0 && kCols % 4 == 0, "blocked: the k-fast copy walks 8 k x 4 m chunks");
    if constexpr (kMode == kCopyKFast) {
      // Warp chunk ch = e / 32 covers 8 consecutive k (32-byte runs in global
      // memory) of 4 consecutive m/n: with kLd = kCols + 4 its 32 stores hit
      // 32 banks. Chunks are numbered k-chunk fastest; since the warp count is
      // a multiple of the k-chunks per tile, a thread's k row is fixed and
      // its column advances by a constant per iteration.
      constexpr int kKChunks = kRows / 8, kWarps = kThreads / 32;
      static_assert(kWarps % kKChunks == 0, "blocked: a thread keeps its k row across iterations");
      constexpr int kColStep = kWarps / kKChunks * 4;
      const int w = tid / 32;
      const int r = (w % kKChunks) * 8 + tid % 8;
      const int c = (w / kKChunks) * 4 + (tid / 8) % 4;
      const bool k_ok = k0 + r < K;
      const float* src0 = g + static_cast<int64_t>(k0 + r) * s_k + static_cast<int64_t>(c0 + c) * s_c;
      const int64_t step = static_cast<int64_t>(kColStep) * s_c;
#pragma unroll
      for (int it = 0; it < kIters; ++it) {
        const bool ok = k_ok && c0 + c + it * kColStep < C;
        async_copy::cp4(smem + r * kLd + c + it * kColStep, ok ? src0 + it * step : g, ok ? 4 : 0);
      }
    } else {
      static_assert(kThreads % kCols == 0 || kCols % kThreads == 0, "blocked: simple row walk");
#pragma unroll
      for (int it = 0; it < kIters; ++it) {
        const int e = tid + it * kThreads;
        const int r = e / kCols, c = e % kCols;
        const int gk = k0 + r, gc = c0 + c;
        const bool ok = gk < K && gc < C;
        const float* src = ok ? g + static_cast<int64_t>(gk) * s_k + static_cast<int64_t>(gc) * s_c : g;
        async_copy::cp4(smem + r * kLd + c, src, ok ? 4 : 0);
      }
    }
  }
}

}  // namespace blocked_detail

template <int BM, int BN, int BK, int TM, int TN, int kPad, int kStages>
struct BlockedShape {
  static constexpr int kWM = 4 * TM, kWN = 8 * TN;  // warp tile: 4 x 8 lanes
  static constexpr int kWarpsM = BM / kWM, kWarpsN = BN / kWN;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  // Two blocks per SM, so one block's barrier stall is covered by the
  // other's FMAs: 256-thread blocks with 8x8 accumulators (<= 128 registers a
  // thread) and 128-thread blocks (<= 255 registers, any tile up to 8x16).
  // The 256-thread 8x16 tile gets the full register file (one block per SM).
  static constexpr int kMinBlocks = (kThreads >= 256 && TM * TN <= 64) || (kThreads <= 128) ? 2 : 1;
  static constexpr int kLdA = BM + kPad, kLdB = BN + kPad;
  static constexpr int kStageFloats = BK * (kLdA + kLdB);
  static constexpr size_t kSmemBytes = sizeof(float) * kStageFloats * kStages;
  static_assert(TM % 4 == 0 && TN % 4 == 0, "blocked: thread tiles are built from 4x4 float4 blocks");
  static_assert(BM % kWM == 0 && BN % kWN == 0, "blocked: the block tile is a whole number of warp tiles");
  static_assert(kPad % 4 == 0, "blocked: kPad must keep shared rows 16-byte aligned for float4 reads");
  static_assert(kStages >= 2, "blocked: a pipeline needs at least two stages");
};

template <int BM, int BN, int BK, int TM, int TN, int kPad, int kStages, int kModeA, int kModeB>
__global__ void __launch_bounds__(BlockedShape<BM, BN, BK, TM, TN, kPad, kStages>::kThreads,
                      BlockedShape<BM, BN, BK, TM, TN, kPad, kStages>::kMinBlocks)
    blocked_kernel(GemmArgs<float> p) {
  using S = BlockedShape<BM, BN, BK, TM, TN, kPad, kStages>;
  using namespace blocked_detail;
  extern __shared__ __align__(16) float smem[];

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int ly = lane / 8, lx = lane % 8;  // lane position in the warp's 4 x 8 grid
  const int wm0 = (warp / S::kWarpsN) * S::kWM, wn0 = (warp % S::kWarpsN) * S::kWN;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN, bz = blockIdx.z;
  const float* A = p.a + bz * p.sa_b;
  const float* B = p.b + bz * p.sb_b;

  auto stage_a = [&](int s) { return smem + s * S::kStageFloats; };
  auto stage_b = [&](int s) { return smem + s * S::kStageFloats + BK * S::kLdA; };
  auto load = [&](int kt, int s) {
    const int k0 = kt * BK;
    load_tile<BK, BM, S::kLdA, S::kThreads, kModeA>(stage_a(s), A, p.sa_k, p.sa_m, k0, m0, p.K, p.M, tid);
    load_tile<BK, BN, S::kLdB, S::kThreads, kModeB>(stage_b(s), B, p.sb_k, p.sb_n, k0, n0, p.K, p.N, tid);
  };

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  const int ktiles = (p.K + BK - 1) / BK;
  // Prologue: kStages-1 tiles in flight. One commit per slot, empty or not,
  // so wait_group<kStages-2> below always means "tile kt has landed".
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) load(s, s);
    async_copy::commit();
  }

  for (int kt = 0; kt < ktiles; ++kt) {
    async_copy::wait<kStages - 2>();
    // Tile kt is visible to all, and everyone has finished reading tile kt-1,
    // whose stage the prefetch below overwrites.
    __syncthreads();
    if (kt + kStages - 1 < ktiles) load(kt + kStages - 1, (kt + kStages - 1) % kStages);
    async_copy::commit();

    const float* as = stage_a(kt % kStages) + wm0 + ly * 4;
    const float* bs = stage_b(kt % kStages) + wn0 + lx * 4;
    // Fragments double-buffered in registers: the shared loads of step k+1
    // are issued before the FMAs of step k, so their latency hides behind
    // TM*TN independent FMAs even with only 2 warps per scheduler.
    float a[2][TM], b[2][TN];
    auto frag = [&](int k, float* fa, float* fb) {
#pragma unroll
      for (int i = 0; i < TM / 4; ++i)
        *reinterpret_cast<float4*>(&fa[4 * i]) = *reinterpret_cast<const float4*>(as + k * S::kLdA + i * 16);
#pragma unroll
      for (int j = 0; j < TN / 4; ++j)
        *reinterpret_cast<float4*>(&fb[4 * j]) = *reinterpret_cast<const float4*>(bs + k * S::kLdB + j * 32);
    };
    frag(0, a[0], b[0]);
#pragma unroll
    for (int k = 0; k < BK; ++k) {
      if (k + 1 < BK) frag(k + 1, a[(k + 1) % 2], b[(k + 1) % 2]);
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[k % 2][i], b[k % 2][j], acc[i][j]);
    }
  }
  async_copy::wait<0>();  // no copy may still target shared memory when the block exits

  // Epilogue: 4 consecutive n per (row, 4x4 block). float4 stores when no bias
  // and C's rows/batches are 16-byte aligned (uniform branch), else
  // store_output per element (adds the bias, honours batch strides).
  const bool vec_c = p.bias == nullptr && p.N % 4 == 0 && p.sc_m % 4 == 0 && p.sc_b % 4 == 0 &&
                     (reinterpret_cast<uintptr_t>(p.c) & 15) == 0;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = m0 + wm0 + (i / 4) * 16 + ly * 4 + i % 4;
    if (m >= p.M) continue;
#pragma unroll
    for (int j = 0; j < TN / 4; ++j) {
      const int n = n0 + wn0 + j * 32 + lx * 4;
      if (vec_c) {
        if (n < p.N) {
          float4 v = make_float4(acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2], acc[i][4 * j + 3]);
          *reinterpret_cast<float4*>(p.c + bz * p.sc_b + static_cast<int64_t>(m) * p.sc_m + n) = v;
        }
      } else {
#pragma unroll
        for (int jj = 0; jj < 4; ++jj)
          if (n + jj < p.N) store_output(p, bz, m, n + jj, acc[i][4 * j + jj]);
      }
    }
  }
}

}  // namespace tilelab
