#pragma once
// Kernel 4, the fast fp32 SIMT kernel: register blocking + warp tiling +
// a cp.async multi-stage shared-memory pipeline, IEEE fp32 FMAs (no TF32).
//
// Work split:
//   - a block computes a BM x BN tile of C, the one its scheduler hands out
//     (scheduler.cuh: m tile, n tile, batch);
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
#include <type_traits>
#include <utility>

#include "async_copy.cuh"
#include "common.cuh"
#include "epilogue.cuh"
#include "scheduler.cuh"

namespace tilelab {
namespace blocked_detail {

// f(std::integral_constant<int, i>{}) for i = 0 .. N-1, unrolled at compile time.
template <typename F, int... I>
__device__ __forceinline__ void static_for_impl(F&& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, typename F>
__device__ __forceinline__ void static_for(F&& f) {
  static_for_impl(f, std::make_integer_sequence<int, N>{});
}

// How an operand tile is copied (chosen on the host per call, a template
// parameter so the main loop holds only the copy code it runs):
//   kCopyVec16: unit stride along m (A) / n (B), 16-byte aligned base and
//               leading/batch strides: 16-byte cp.async;
//   kCopyKContig: unit stride along k (row-major A, column-major B): 4-byte
//               cp.async, lanes walking k, stored transposed;
//   kCopyMNContig: anything else (unit stride along m/n but misaligned, or
//               neither): 4-byte cp.async, lanes walking m/n.
// (A single scalar mode choosing k-fast/c-fast at run time was tried: both
// copy paths then sit in the main loop, and the 128-register 8x8 config
// spilled 24 bytes; hence three instantiated modes.)
constexpr int kCopyVec16 = 0, kCopyKContig = 1, kCopyMNContig = 2;

// Copies of the kRows (k) x kCols (m or n) tile starting at (k0, c0) of an
// operand whose element (k, c) sits at g[k * s_k + c * s_c], into smem[k][c]
// (row stride kLd).
//
// Every thread issues kIters copies (float4s for kCopyVec16, floats
// otherwise). Copy `it` of a thread handles row r0 + drow(it), column
// c0 + dcol(it): (r0, c0) depend on the thread only and (drow, dcol) on the
// compile-time `it` only, so the per-thread part is computed once and every
// copy lands at a constant offset from it in shared memory.
//   kCopyVec16: a row's kCols/4 float4s go to consecutive threads;
//   kCopyKContig: (s_k == 1) a warp covers 8 consecutive k (32-byte runs in
//     global memory) of 4 consecutive m/n; with kLd = kCols + 4 its 32 stores
//     hit 32 banks. A thread copies the same column for every 8-row k-chunk
//     of the tile (the next copy is 32 bytes further in global memory), then
//     moves kWarps * 4 columns on;
//   kCopyMNContig: element tid + it * kThreads of the row-major tile, lanes
//     walking m/n.
// Two ways to issue a range [kFrom, kTo) of them (the main loop spreads a
// tile's copies over several k-steps):
//   copy<>()     the general path: each copy tests its row against K and its
//                column against C and zero-fills what is out of range
//                (cp.async's src-size), reading nothing there;
//   copy_in<>()  tiles whose k rows are all inside the operand and whose
//                columns are too (kCopyKContig, kCopyMNContig: the kernel shifts
//                edge blocks so that they are, see kShifts) or are tested once
//                per thread (kCopyVec16: a thread's column is the same for all
//                its copies, so its byte count is fixed per block): no tests
//                per copy, the source a fixed offset from a per-thread pointer
//                (`origin`, advanced one tile per k-tile by the caller).
//                Without it the copy address math was ~200 of the 332
//                non-FFMA instructions per k-tile of the 128x256 main loop
//                (SASS, sm_90).
template <int kRows, int kCols, int kLd, int kThreads, int kMode>
struct TileCopy {
  static_assert(kThreads % 32 == 0, "blocked: whole warps copy");
  static_assert(kMode >= kCopyVec16 && kMode <= kCopyMNContig, "blocked: copy mode");
  static constexpr int kWidth = kMode == kCopyVec16 ? 4 : 1;  // floats per copy
  static constexpr int kIters = kRows * kCols / (kWidth * kThreads);
  static_assert(kIters * kWidth * kThreads == kRows * kCols, "blocked: every thread copies the same amount");
  static constexpr int kWarps = kThreads / 32, kKChunks = kRows / 8;
  static constexpr int kVecsPerRow = kCols / 4;

  static __device__ __forceinline__ int row0(int tid) {
    if constexpr (kMode == kCopyVec16) return tid / kVecsPerRow;
    else if constexpr (kMode == kCopyKContig) return tid % 8;
    else return kThreads >= kCols ? tid / kCols : 0;
  }
  static __device__ __forceinline__ int col0(int tid) {
    if constexpr (kMode == kCopyVec16) return (tid % kVecsPerRow) * 4;
    else if constexpr (kMode == kCopyKContig) return (tid / 32) * 4 + (tid / 8) % 4;
    else return kThreads >= kCols ? tid % kCols : tid;
  }
  static constexpr int drow(int it) {
    if constexpr (kMode == kCopyVec16) return it * (kThreads / kVecsPerRow);
    else if constexpr (kMode == kCopyKContig) return (it % kKChunks) * 8;
    else return kThreads >= kCols ? it * (kThreads / kCols) : it / (kCols / kThreads);
  }
  static constexpr int dcol(int it) {
    if constexpr (kMode == kCopyVec16) return 0;
    else if constexpr (kMode == kCopyKContig) return (it / kKChunks) * kWarps * 4;
    else return kThreads >= kCols ? 0 : (it % (kCols / kThreads)) * kThreads;
  }
  static_assert(kMode != kCopyVec16 || kThreads % kVecsPerRow == 0, "blocked: float4 copies keep their column");
  static_assert(kMode != kCopyKContig || (kRows % 8 == 0 && kCols % (kWarps * 4) == 0),
                "blocked: the k-fast copy walks 8 k x 4 m chunks");
  static_assert(kMode != kCopyMNContig || kThreads % kCols == 0 || kCols % kThreads == 0, "blocked: simple row walk");

  // Where this thread's copy 0 of the tile at (k0, c0) reads, for copy_in<>.
  // A float4 column past the operand's edge (kCopyVec16) reads column 0 of its
  // row instead (a valid address; column_bytes() is 0 there, so nothing is read).
  static __device__ __forceinline__ const float* origin(const float* g, int64_t s_k, int64_t s_c, int k0, int c0,
                                                        int C, int tid) {
    int c = c0 + col0(tid);
    if constexpr (kMode == kCopyVec16) c = c < C ? c : 0;
    return g + static_cast<int64_t>(k0 + row0(tid)) * s_k + static_cast<int64_t>(c) * s_c;
  }
  // Bytes each copy_in copy of this thread reads: kCopyVec16 clips its float4
  // at the operand's edge; the other modes need whole columns (see kShifts).
  static __device__ __forceinline__ int column_bytes(int c0, int C, int tid) {
    if constexpr (kMode == kCopyVec16) return 4 * min(max(C - (c0 + col0(tid)), 0), 4);
    else return 4;
  }
  // Whether the kernel must shift an edge block back onto the operand (so that
  // every column of its tile exists) before copy_in may copy it.
  static constexpr bool kShifts = kMode != kCopyVec16;

  // The source offset of copy `it` from the origin: one run-time stride at
  // most (s_c == 1 for kCopyVec16, s_k == 1 for kCopyKContig).
  template <int it>
  static __device__ __forceinline__ int64_t offset(int64_t s_k, int64_t s_c) {
    if constexpr (kMode == kCopyVec16) return static_cast<int64_t>(drow(it)) * s_k;
    else if constexpr (kMode == kCopyKContig) return drow(it) + static_cast<int64_t>(dcol(it)) * s_c;
    else return static_cast<int64_t>(drow(it)) * s_k + static_cast<int64_t>(dcol(it)) * s_c;
  }
  // smem_thread: this thread's copy-0 destination as a shared-window address;
  // copy `it` lands at a constant offset from it.
  template <int it>
  static __device__ __forceinline__ void cp(uint32_t smem_thread, const float* src, int bytes) {
    const uint32_t dst = smem_thread + static_cast<uint32_t>(sizeof(float) * (drow(it) * kLd + dcol(it)));
    if constexpr (kWidth == 4) async_copy::cp16_u32(dst, src, bytes);
    else async_copy::cp4_u32(dst, src, bytes);
  }

  // kClip: read `bytes` (column_bytes()) per copy rather than whole copies;
  // only a kCopyVec16 tile that reaches past the operand's edge needs it. (A
  // run-time size makes every copy the zero-filling form of cp.async, which
  // cost 7% at 4096^3 on an H200, where no tile needs it.)
  template <int kFrom, int kTo, bool kClip>
  static __device__ __forceinline__ void copy_in(float* smem, const float* origin, int64_t s_k, int64_t s_c,
                                                 int bytes, int tid) {
    const uint32_t st = smem_u32(smem + row0(tid) * kLd + col0(tid));
    static_for<kTo - kFrom>([&](auto i) {
      constexpr int it = kFrom + decltype(i)::value;
      cp<it>(st, origin + offset<it>(s_k, s_c), kClip && kMode == kCopyVec16 ? bytes : 4 * kWidth);
    });
  }

  template <int kFrom, int kTo>
  static __device__ __forceinline__ void copy(float* smem, const float* __restrict__ g, int64_t s_k, int64_t s_c,
                                              int k0, int c0, int K, int C, int tid) {
    const int r = k0 + row0(tid), c = c0 + col0(tid);
    const uint32_t st = smem_u32(smem + row0(tid) * kLd + col0(tid));
    static_for<kTo - kFrom>([&](auto i) {
      constexpr int it = kFrom + decltype(i)::value;
      const int gr = r + drow(it), gc = c + dcol(it);
      const int valid = gr < K ? min(max(C - gc, 0), kWidth) : 0;
      const float* src = valid > 0 ? g + static_cast<int64_t>(gr) * s_k + static_cast<int64_t>(gc) * s_c : g;
      cp<it>(st, src, 4 * valid);
    });
  }
};

}  // namespace blocked_detail

template <int BM, int BN, int BK, int TM, int TN, int kPad, int kStages>
struct BlockedShape {
  static constexpr int kWM = 4 * TM, kWN = 8 * TN;  // warp tile: 4 x 8 lanes
  static constexpr int kWarpsM = BM / kWM, kWarpsN = BN / kWN;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  // At least two blocks per SM, so one block's barrier stall is covered by
  // the other's FMAs: 256-thread blocks with 8x8 accumulators (<= 128
  // registers a thread) and 128-thread blocks (<= 255 registers, any tile up
  // to 8x16). The 128-thread 8x8 tile (blocked_64x128x8) is held to three (<= 170 registers): at two, ptxas
  // took 190 and its products of 384 tiles ran 20% slower (H200, 4096x768x3072: 0.543 ms vs 0.407 at three).
  // The 256-thread 8x16 tile gets the full register file (one block per SM).
  static constexpr int kMinBlocks = kThreads <= 128 && TM * TN == 64                      ? 3
                                    : (kThreads >= 256 && TM * TN <= 64) || kThreads <= 128 ? 2
                                                                                            : 1;
  // Whether a bias broadcast along rows (F.linear's and addmm's (N,)) is copied into shared memory with the first
  // tile, or loaded from global memory by the epilogue. Staged, blocked_64x128x8 runs faster *with or without a
  // bias*: the kernel's code differs, so ptxas allocates its registers differently. The one difference found in
  // the main loop's SASS (cuobjdump; the same instructions otherwise): 28-33% of its FMAs read two operands that
  // are not in the reuse cache from the same register bank (reg % 2), against 75% (blocked_k16_64x64x16 went
  // from 61% to 28% and ran as before). H200, benchmarks/tools/blocked_variants, no bias, against the epilogue's
  // loads: 4096^3 3.056 -> 2.843 ms (cuBLAS 2.81), 4096x5632x2048 2.109 -> 1.961, 12608x768x3072 1.292 -> 1.202
  // (M,N,K); the small grids lost ~4% (1024x768x3072 0.162 -> 0.168). The 8-warp 128x256 block keeps the loads:
  // staged, its products without a bias ran 1-4% slower and those with one gained nothing (x @ W.t()
  // 12608x768x3072: 1.208 / 1.269 ms without / with a bias, 1.257 / 1.273 staged).
  static constexpr bool kStageBias = kThreads <= 128;
  static constexpr int kLdA = BM + kPad, kLdB = BN + kPad;
  static constexpr int kStageFloats = BK * (kLdA + kLdB);
  // The pipeline's stages, then (kStageBias) the block's BN column biases.
  static constexpr size_t kSmemBytes = sizeof(float) * (kStageFloats * kStages + (kStageBias ? BN : 0));
  static_assert(TM % 4 == 0 && TN % 4 == 0, "blocked: thread tiles are built from 4x4 float4 blocks");
  static_assert(BM % kWM == 0 && BN % kWN == 0, "blocked: the block tile is a whole number of warp tiles");
  static_assert(kPad % 4 == 0, "blocked: kPad must keep shared rows 16-byte aligned for float4 reads");
  static_assert(kStages >= 2, "blocked: a pipeline needs at least two stages");
};

// The main loop (the structure of CUTLASS's multistage SIMT mainloop):
//   - fragments are double-buffered in registers: the shared loads of k-step
//     k+1 are issued before the FMAs of step k;
//   - the wait for the next stage and the block barrier sit *before the last
//     k-step* of a tile, so the first fragments of the next tile are loaded
//     while the FMAs of that last step run. (The first version put the barrier
//     at the top of the tile and then waited for the tile's first shared loads
//     with nothing to issue: ncu counted 0.12 short-scoreboard stalls per
//     issued instruction on an H200.)
//   - the cp.async copies of the tile kStages-1 ahead are spread over the
//     first kCopySteps k-steps, between the FMAs, rather than issued in a burst
//     after the barrier (a burst delays the first shared loads);
//   - tiles whose BK rows of k all exist are copied by TileCopy::copy_in (no
//     per-copy tests; edge blocks shifted back onto the operands where needed),
//     in a loop of their own; the rest (the K tail, the tiles past the end that
//     keep the wait count uniform, operands narrower than one tile) by the
//     predicated TileCopy::copy.
template <int BM, int BN, int BK, int TM, int TN, int kPad, int kStages, int kCopySteps, int kModeA, int kModeB>
__global__ void __launch_bounds__(BlockedShape<BM, BN, BK, TM, TN, kPad, kStages>::kThreads,
                      BlockedShape<BM, BN, BK, TM, TN, kPad, kStages>::kMinBlocks)
    blocked_kernel(GemmArgs<float> p) {
  using S = BlockedShape<BM, BN, BK, TM, TN, kPad, kStages>;
  using namespace blocked_detail;
  using CopyA = TileCopy<BK, BM, S::kLdA, S::kThreads, kModeA>;
  using CopyB = TileCopy<BK, BN, S::kLdB, S::kThreads, kModeB>;
  static_assert(kCopySteps >= 1 && kCopySteps < BK, "blocked: copies spread over 1..BK-1 k-steps");
  constexpr int kNA = CopyA::kIters, kCopies = CopyA::kIters + CopyB::kIters;
  extern __shared__ __align__(16) float smem[];

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int ly = lane / 8, lx = lane % 8;  // lane position in the warp's 4 x 8 grid
  const int wm0 = (warp / S::kWarpsN) * S::kWM, wn0 = (warp % S::kWarpsN) * S::kWN;
  // This block's outputs start at (m_lo, n_lo). An edge block of an operand
  // copied by columns (CopyX::kShifts) works on the last whole tile instead,
  // (m0, n0) <= (m_lo, n_lo), when the operand holds one: its copies then stay
  // inside the operand and take copy_in, and the epilogue stores only its own
  // outputs (m >= m_lo, n >= n_lo). The rows it computes twice cost nothing
  // extra: the zero-filled rows of an unshifted edge tile cost the same FMAs.
  using Sched = LinearScheduler;
  static_assert(!Sched::kPersistent, "blocked: one tile per block");
  const WorkTile w = Sched::first((p.K + BK - 1) / BK, p.splits, p.batch);
  narrow_k(p, w, BK);  // split-K: this block's k-tiles only
  const int m_lo = w.tm * BM, n_lo = w.tn * BN, bz = w.batch;
  const int m0 = CopyA::kShifts && p.M >= BM ? min(m_lo, p.M - BM) : m_lo;
  const int n0 = CopyB::kShifts && p.N >= BN ? min(n_lo, p.N - BN) : n_lo;
  const float* A = p.a + bz * p.sa_b;
  const float* B = p.b + bz * p.sb_b;

  auto stage_a = [&](int s) { return smem + s * S::kStageFloats; };
  auto stage_b = [&](int s) { return smem + s * S::kStageFloats + BK * S::kLdA; };
  // Copies number kFrom..kTo-1 of a tile (A's first, then B's), predicated.
  auto load_part = [&](auto from, auto to, int kt, int s) {
    constexpr int kFrom = decltype(from)::value, kTo = decltype(to)::value;
    const int k0 = kt * BK;
    CopyA::template copy<(kFrom < kNA ? kFrom : kNA), (kTo < kNA ? kTo : kNA)>(stage_a(s), A, p.sa_k, p.sa_m, k0, m0,
                                                                              p.K, p.M, tid);
    CopyB::template copy<(kFrom > kNA ? kFrom - kNA : 0), (kTo > kNA ? kTo - kNA : 0)>(stage_b(s), B, p.sb_k, p.sb_n,
                                                                                      k0, n0, p.K, p.N, tid);
  };
  // The same for a tile whose k rows all exist, from the thread's origins.
  const int bytes_a = CopyA::column_bytes(m0, p.M, tid), bytes_b = CopyB::column_bytes(n0, p.N, tid);
  auto load_part_in = [&](auto from, auto to, auto clip, const float* oa, const float* ob, int s) {
    constexpr int kFrom = decltype(from)::value, kTo = decltype(to)::value;
    constexpr bool kClip = decltype(clip)::value;
    CopyA::template copy_in<(kFrom < kNA ? kFrom : kNA), (kTo < kNA ? kTo : kNA), kClip>(stage_a(s), oa, p.sa_k,
                                                                                        p.sa_m, bytes_a, tid);
    CopyB::template copy_in<(kFrom > kNA ? kFrom - kNA : 0), (kTo > kNA ? kTo - kNA : 0), kClip>(
        stage_b(s), ob, p.sb_k, p.sb_n, bytes_b, tid);
  };

  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;

  const int ktiles = w.k_end - w.k_begin;
  // The column bias goes into shared memory with the first tile (S::kStageBias; 0 past N).
  float* bias_s = smem + kStages * S::kStageFloats;
  const bool col_bias = column_bias(p);
  if (S::kStageBias && col_bias) {
#pragma unroll
    for (int i = 0; i < (BN + S::kThreads - 1) / S::kThreads; ++i) {
      const int c = tid + i * S::kThreads, n = n0 + c;
      if (BN % S::kThreads == 0 || c < BN)
        async_copy::cp4_u32(smem_u32(bias_s + c), n < p.N ? column_bias_ptr(p, bz, n) : p.bias, n < p.N ? 4 : 0);
    }
  }

  // Prologue: kStages-1 tiles in flight (the first with a staged bias). One commit per tile, also for tiles
  // past the end (zero-filled, never read), so wait<kStages-2> always means
  // "the oldest tile not yet read has landed".
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    load_part(std::integral_constant<int, 0>{}, std::integral_constant<int, kCopies>{}, s, s);
    async_copy::commit();
  }
  async_copy::wait<kStages - 2>();
  __syncthreads();

  float a[2][TM], b[2][TN];
  const float* frag_a = smem + wm0 + ly * 4;
  const float* frag_b = smem + BK * S::kLdA + wn0 + lx * 4;
  auto frag = [&](int s, int k, float* fa, float* fb) {
    const float* as = frag_a + s * S::kStageFloats + k * S::kLdA;
    const float* bs = frag_b + s * S::kStageFloats + k * S::kLdB;
#pragma unroll
    for (int i = 0; i < TM / 4; ++i)
      *reinterpret_cast<float4*>(&fa[4 * i]) = *reinterpret_cast<const float4*>(as + i * 16);
#pragma unroll
    for (int j = 0; j < TN / 4; ++j)
      *reinterpret_cast<float4*>(&fb[4 * j]) = *reinterpret_cast<const float4*>(bs + j * 32);
  };
  int read_stage = 0, write_stage = kStages - 1;
  frag(read_stage, 0, a[0], b[0]);

  // One k-tile: BK k-steps of FMAs; its copies go to the tile kStages-1 ahead
  // through `copy_part(from, to)`.
  auto tile = [&](auto&& copy_part) {
    static_for<BK>([&](auto kc) {
      constexpr int k = decltype(kc)::value;
      if constexpr (k == BK - 1) {
        // Tile kt+1 has landed and is visible to all; everyone has read its
        // last fragments of tile kt, so the copies issued from the next
        // tile's first steps may overwrite tile kt's stage.
        async_copy::wait<kStages - 2>();
        __syncthreads();
        read_stage = next_stage<kStages>(read_stage);
      }
      // Fragments of step k+1: the next tile's first step when k == BK-1
      // (after the last tile, of a stage nobody uses: harmless).
      frag(read_stage, (k + 1) % BK, a[(k + 1) % 2], b[(k + 1) % 2]);
      if constexpr (k < kCopySteps) {
        copy_part(std::integral_constant<int, k * kCopies / kCopySteps>{},
                  std::integral_constant<int, (k + 1) * kCopies / kCopySteps>{});
        if constexpr (k == kCopySteps - 1) {
          async_copy::commit();
          write_stage = next_stage<kStages>(write_stage);
        }
      }
      // Serpentine order (CUTLASS's thread-level SIMT MMA does the same): odd rows walk the columns backwards,
      // so each row's first FMA reads the b value the previous row's last one read, and ptxas marks more
      // operands for the reuse cache. H200, 4096^3 fp32, A and B row-major, against the row-by-row order:
      // 128x256 2.90 -> 2.72 ms (cuBLAS 2.70), 64x64 3.44 -> 3.37, 64x128 and 32x128 within 2% (64x128 on
      // M,N,K 4096,768,3072: 0.73 -> 0.95 of cuBLAS; benchmarks/tools/blocked_variants --old).
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int jj = 0; jj < TN; ++jj) {
          const int j = i % 2 == 0 ? jj : TN - 1 - jj;
          acc[i][j] = fmaf(a[k % 2][i], b[k % 2][j], acc[i][j]);
        }
    });
  };

  // Tiles kt < kt_in prefetch a tile (kt + kStages - 1) that copy_in can copy.
  const bool block_in = (!CopyA::kShifts || m0 + BM <= p.M) && (!CopyB::kShifts || n0 + BN <= p.N);
  const int kt_in = block_in ? max(0, p.K / BK - (kStages - 1)) : 0;
  int kt = 0;
  auto run_in = [&](auto clip) {
    const float* oa = CopyA::origin(A, p.sa_k, p.sa_m, (kStages - 1) * BK, m0, p.M, tid);
    const float* ob = CopyB::origin(B, p.sb_k, p.sb_n, (kStages - 1) * BK, n0, p.N, tid);
    const int64_t step_a = BK * p.sa_k, step_b = BK * p.sb_k;
    for (; kt < kt_in; ++kt) {
      tile([&](auto from, auto to) { load_part_in(from, to, clip, oa, ob, write_stage); });
      oa += step_a;
      ob += step_b;
    }
  };
  if (kt_in > 0) {
    // Whole copies unless a 16-byte-copied operand's tile reaches past its edge.
    if constexpr (CopyA::kShifts && CopyB::kShifts) {
      run_in(std::false_type{});
    } else {
      if (m0 + BM <= p.M && n0 + BN <= p.N) run_in(std::false_type{});
      else run_in(std::true_type{});
    }
  }
  for (; kt < ktiles; ++kt) tile([&](auto from, auto to) { load_part(from, to, kt + kStages - 1, write_stage); });
  async_copy::wait<0>();  // no copy may still target shared memory when the block exits

  // Epilogue: 4 consecutive n per (row, 4x4 block), as one float4 where
  // vector_ok (uniform branch). vec implies N % 4 == 0, so a shift
  // n_lo - n0 = n_lo - (N - BN) is a multiple of 4 and no float4 straddles n_lo.
  const bool vec = p.N % 4 == 0 && vector_ok<4>(p);
  GemmArgs<float> out = p;
  if (col_bias) {  // columns n0 + wn0 + 32j + 4lx + jj of every row
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int c = wn0 + (j / 4) * 32 + lx * 4 + j % 4;
      const float bj = S::kStageBias ? bias_s[c] : column_bias_at(p, bz, n0 + c);
#pragma unroll
      for (int i = 0; i < TM; ++i) acc[i][j] += bj;
    }
    out.bias = nullptr;
  }
  with_epilogue(p, [&](auto epi) {
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int m = m0 + wm0 + (i / 4) * 16 + ly * 4 + i % 4;
      if (m >= p.M || m < m_lo) continue;
      const auto row = output_row<decltype(epi)>(out, bz, m, w.split);
#pragma unroll
      for (int j = 0; j < TN / 4; ++j)
        row.store_quad(n0 + wn0 + j * 32 + lx * 4, n_lo, acc[i][4 * j], acc[i][4 * j + 1], acc[i][4 * j + 2],
                       acc[i][4 * j + 3], vec);
    }
  });
}

}  // namespace tilelab
