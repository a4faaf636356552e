#pragma once
// Kernel family `tensorcore`: warp-level mma.sync on the tensor cores (sm_80+).
//
//   bf16/fp16: mma.sync m16n8k16, fp32 accumulation, fragments read with ldmatrix.
//   fp32:      mma.sync m16n8k8 TF32 (only when the caller allowed TF32; the
//              table row carries tf32=true and the chooser refuses it otherwise),
//              rounded with cvt.rna; k-contiguous tiles are read with ldmatrix
//              (a b16 8x8 matrix is an 8x4 fp32 matrix, exactly the TF32
//              fragment), m/n-contiguous ones with conflict-free 32-bit loads.
//
// A block computes a BM x BN tile of C with a 2 x (warps/2) grid of warps; each
// warp owns a WM x WN sub-tile in fp32 registers (64x64 in the big configs:
// per k16 step 4 A and 4 B ldmatrix.x4 feed 32 MMAs, each A fragment reused
// across 8 n-fragments and each B fragment across 4 m-fragments). K is walked
// in BK steps through a kStages-deep ring of shared-memory stages filled with
// 16-byte cp.async.cg, so tiles kt+1..kt+kStages-1 are in flight while tile kt
// is multiplied; one __syncthreads per k-tile.
//
// Register double buffering: the fragments of k-step kk+1 are loaded with
// ldmatrix while the MMAs of kk issue; the last k-step of a tile waits for the
// next tile and loads its first fragments, so the tensor cores never wait on a
// fresh ldmatrix at a tile boundary.
//
// Addresses: every thread computes its shared-memory byte offsets (32-bit) and
// its global pointers once before the k loop; in the loop a fragment address
// is base + stage offset + a compile-time immediate, a global pointer advances
// by one add per tile.
//
// Layouts: each operand tile is stored in shared memory in the orientation of
// its global layout (cp.async copies contiguous bytes, it cannot transpose):
//   A row-major (k contiguous): As[m][k];  A column-major: As[k][m]
//   B row-major (n contiguous): Bs[k][n];  B column-major: Bs[n][k]
// Half tiles that are not k-contiguous are read with ldmatrix.trans. Rows are
// padded by 16 bytes (half; fp32 k-contiguous too) or 32 bytes (fp32 m/n-contiguous) so
// the 8 row addresses of an ldmatrix phase, the 16-byte cp.async stores and the
// scalar TF32 loads all hit distinct banks.
//
// Boundary safety: any M, N, K >= 1. The kernel needs every operand row start
// 16-byte aligned (the host copies an operand that is not into a padded buffer
// first, see launch_tensorcore.cu). Chunks that cross the M/N/K edges copy only
// their valid bytes and zero-fill the rest (the K tail contributes exact zeros).
// Stores are predicated per element; the epilogue adds the optional bias and
// honours the batch (blockIdx.z and the *_b strides).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "async_copy.cuh"
#include "common.cuh"
#include "epilogue.cuh"
#include "scheduler.cuh"

namespace tilelab {
namespace tc {

template <typename T>
constexpr bool kIsHalf = sizeof(T) == 2;

// One operand tile of shape (MN x BK) as stored in shared memory. kKContig:
// stored [MN][BK + pad] (k contiguous), else [BK][MN + pad] (m or n contiguous).
// kRowPad is the table row's pad, in elements:
//   half: 8 (16 bytes) keeps rows 16-byte aligned and spreads the 8 rows of an
//     ldmatrix phase over 8 distinct 16-byte bank groups (row stride = 4 mod 32
//     words for [*][BK=32+8] and [*][128+8]);
//   fp32 k-contiguous: 4 (row stride 20 words, the same argument for ldmatrix);
//   fp32 m/n-contiguous: twice the row's pad, 8 floats (stride = 8 mod 32
//     words: the scalar fragment reads t*stride + g hit 32 banks).
template <typename T, bool kKContig, int MN, int BK, int kRowPad>
struct TileLayout {
  static constexpr int kPad = (kIsHalf<T> || kKContig) ? kRowPad : 2 * kRowPad;
  static constexpr int kRows = kKContig ? MN : BK;
  static constexpr int kCont = kKContig ? BK : MN;  // contiguous extent (elements)
  static constexpr int kLd = kCont + kPad;
  static constexpr int kElems = kRows * kLd;
  static constexpr int kBytes = kElems * static_cast<int>(sizeof(T));
  static_assert((kLd * sizeof(T)) % 16 == 0, "rows must stay 16-byte aligned for cp.async/ldmatrix");
  // Byte offset of element (mn, k) inside the tile.
  static constexpr int off(int mn, int k) {
    return (kKContig ? mn * kLd + k : k * kLd + mn) * static_cast<int>(sizeof(T));
  }
};

// Copies one operand tile per k-tile with 16-byte cp.async. Thread tid owns the
// chunks (r0 + i * kRowStep, c) of the stored tile, i < kPer: its column c is
// the same for all of them, so one global pointer and one zero-fill size per
// tile cover every chunk. Global element (r, c) of the tile at k-tile kt is
// g[(row0 + r) * ld + cont0 + c]; elements outside M/N/K read as zero.
template <typename T, typename L, bool kKContig, int kThreads, int BK>
struct TileLoader {
  static constexpr int kVec = 16 / sizeof(T);  // elements per chunk
  static constexpr int kChunksPerRow = L::kCont / kVec;
  static constexpr int kChunks = L::kRows * kChunksPerRow;
  static constexpr int kPer = kChunks / kThreads;
  static constexpr int kRowStep = kThreads / kChunksPerRow;
  static_assert(L::kCont % kVec == 0, "tile rows are whole 16-byte chunks");
  static_assert(kThreads % kChunksPerRow == 0 && kChunks % kThreads == 0,
                "every thread copies the same column of kPer rows");

  const T* gp;      // global address of the thread's first chunk at the current k-tile
  int64_t row_step; // elements between the thread's chunks (kRowStep rows)
  int64_t k_step;   // elements the tile origin moves per k-tile
  uint32_t s_off;   // byte offset of the thread's first chunk in a stage
  int c, r;         // the thread's column (elements) and first row in the stored tile
  int fixed_ok;     // bit i: chunk i's m/n coordinate is inside M/N (k-contiguous) ...
  int cbytes;       // ... or its valid bytes along m/n (m/n-contiguous)

  // mn0: first m (A) or n (B) of the block; mn_lim: M or N.
  __device__ __forceinline__ void init(const T* g, int64_t ld, int mn0, int mn_lim, int tid, uint32_t tile_base) {
    c = (tid % kChunksPerRow) * kVec;
    r = tid / kChunksPerRow;
    s_off = tile_base + r * L::kLd * sizeof(T) + c * sizeof(T);
    row_step = kRowStep * ld;
    if constexpr (kKContig) {  // rows are m/n, columns k
      gp = g + static_cast<int64_t>(mn0 + r) * ld + c;
      k_step = BK;
      fixed_ok = 0;
#pragma unroll
      for (int i = 0; i < kPer; ++i) fixed_ok |= (mn0 + r + i * kRowStep < mn_lim) << i;
      cbytes = 0;
    } else {  // rows are k, columns m/n
      gp = g + static_cast<int64_t>(r) * ld + mn0 + c;
      k_step = BK * ld;
      int v = mn_lim - (mn0 + c);
      v = v < 0 ? 0 : (v > kVec ? kVec : v);
      cbytes = v * sizeof(T);
      fixed_ok = 0;
    }
  }

  // Issues the copies of k-tile kt (origin k0) into the stage at byte offset st.
  __device__ __forceinline__ void issue(const T* g, int k0, int K, uint32_t st) const {
    const T* src = gp;
    if constexpr (kKContig) {
      int v = K - (k0 + c);
      v = v < 0 ? 0 : (v > kVec ? kVec : v);
      const int bytes = v * static_cast<int>(sizeof(T));
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int b = ((fixed_ok >> i) & 1) ? bytes : 0;
        async_copy::cp16_u32(st + s_off + i * kRowStep * L::kLd * sizeof(T), b ? src : g, b);
        src += row_step;
      }
    } else {
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int b = (k0 + r + i * kRowStep < K) ? cbytes : 0;
        async_copy::cp16_u32(st + s_off + i * kRowStep * L::kLd * sizeof(T), b ? src : g, b);
        src += row_step;
      }
    }
  }
  __device__ __forceinline__ void advance() { gp += k_step; }
};

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ uint32_t lds32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

__device__ __forceinline__ void mma1688_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// fp32 bits -> tf32, round to nearest (ties away), like cuBLAS' TF32 mode.
__device__ __forceinline__ uint32_t to_tf32(uint32_t bits) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(__uint_as_float(bits)));
  return r;
}

// Bytes of dynamic shared memory a configuration needs.
template <typename T, int BM, int BN, int BK, int kStages, int kPad, bool kAK, bool kBK>
constexpr int smem_bytes() {
  return kStages * (TileLayout<T, kAK, BM, BK, kPad>::kBytes + TileLayout<T, kBK, BN, BK, kPad>::kBytes);
}

// Blocks of this many threads that share an SM: 2 for 4-warp blocks (the
// 128x128 stages take ~76 KB, two fit in 228 KB; registers capped at 255).
template <int kThreads>
constexpr int min_blocks() {
  return kThreads <= 128 ? 2 : 1;
}

}  // namespace tc

// kAK / kBK: A / B is k-contiguous (a row-major A, a column-major B).
// The host guarantees that every operand row start is 16-byte aligned.
template <typename T, int BM, int BN, int BK, int kWarpsM, int kWarpsN, int kStages, int kPad, bool kAK, bool kBK>
__global__ void __launch_bounds__(kWarpsM * kWarpsN * 32, tc::min_blocks<kWarpsM * kWarpsN * 32>())
    tensorcore_kernel(GemmArgs<T> p) {
  constexpr int kThreads = kWarpsM * kWarpsN * 32;
  constexpr int WM = BM / kWarpsM, WN = BN / kWarpsN;
  constexpr bool kHalf = tc::kIsHalf<T>;
  constexpr int kK = kHalf ? 16 : 8;    // k of one mma
  constexpr int kC = 16 / sizeof(T);    // elements in 16 bytes: k extent of one 8x8 b16 matrix
  constexpr int kKK = BK / kK;          // mma k-steps per k-tile
  constexpr int MI = WM / 16, NI = WN / 8;
  static_assert(kHalf || std::is_same_v<T, float>, "tensorcore: half, bfloat16 or float (TF32)");
  static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile: whole m16 fragments, pairs of n8 fragments");
  static_assert(BK % kK == 0 && kKK % 2 == 0, "an even number of mma k-steps per tile (two fragment buffers)");
  static_assert(kStages >= 3, "the ring keeps kStages-1 tiles in flight and one being read");
  using LA = tc::TileLayout<T, kAK, BM, BK, kPad>;
  using LB = tc::TileLayout<T, kBK, BN, BK, kPad>;
  using Sched = GroupedScheduler;
  static_assert(!Sched::kPersistent, "tensorcore: one tile per block");
  constexpr int kStageBytes = LA::kBytes + LB::kBytes;

  extern __shared__ __align__(16) unsigned char tc_smem[];
  const uint32_t smem = smem_u32(tc_smem);  // stage s: [A tile][B tile] at s * kStageBytes

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm0 = (warp % kWarpsM) * WM, wn0 = (warp / kWarpsM) * WN;

  const WorkTile w = Sched::first((p.K + BK - 1) / BK, p.splits, p.batch);
  narrow_k(p, w, BK);  // split-K: this block's k-tiles only
  const int M = p.M, N = p.N, K = p.K;
  const int m0 = w.tm * BM, n0 = w.tn * BN, bz = w.batch;
  const T* A = p.a + bz * p.sa_b;
  const T* B = p.b + bz * p.sb_b;

  tc::TileLoader<T, LA, kAK, kThreads, BK> lda;
  tc::TileLoader<T, LB, kBK, kThreads, BK> ldb;
  lda.init(A, kAK ? p.sa_m : p.sa_k, m0, M, tid, 0);
  ldb.init(B, kBK ? p.sb_n : p.sb_k, n0, N, tid, LA::kBytes);

  // Per-thread fragment offsets inside a stage (k-step 0, fragment 0); the
  // k-step and the fragment index add compile-time immediates.
  uint32_t a_frag, b_frag;
  const int g = lane / 4, t = lane % 4, q = lane / 8;
  if constexpr (kAK) {  // As[m][k]: matrices (m0-7,k0) (m8-15,k0) (m0-7,k0+kC) (m8-15,k0+kC)
    a_frag = LA::off(wm0 + lane % 16, (lane / 16) * kC);
  } else if constexpr (kHalf) {  // As[k][m], ldmatrix.trans; same four matrices
    a_frag = LA::off(wm0 + (q % 2) * 8, (q / 2) * 8 + lane % 8);
  } else {  // fp32 As[k][m], scalar: a0 = (m g, k t)
    a_frag = LA::off(wm0 + g, t);
  }
  if constexpr (kBK) {  // Bs[n][k]: (n0-7,k0) (n0-7,k0+kC) (n8-15,k0) (n8-15,k0+kC)
    b_frag = LA::kBytes + LB::off(wn0 + (q / 2) * 8 + lane % 8, (q % 2) * kC);
  } else if constexpr (kHalf) {  // Bs[k][n], ldmatrix.trans; same four matrices
    b_frag = LA::kBytes + LB::off(wn0 + (q / 2) * 8, (q % 2) * 8 + lane % 8);
  } else {  // fp32 Bs[k][n], scalar: b0 = (k t, n g)
    b_frag = LA::kBytes + LB::off(wn0 + g, t);
  }
  a_frag += smem;
  b_frag += smem;

  uint32_t af[2][MI][4], bf[2][NI][2];
  // Loads the fragments of mma k-step kk of the stage at byte offset st into buffer buf.
  auto load_frags = [&](int buf, uint32_t st, int kk) {
#pragma unroll
    for (int i = 0; i < MI; ++i) {
      const uint32_t a = a_frag + st + LA::off(i * 16, kk);
      if constexpr (kAK) {
        tc::ldmatrix_x4(af[buf][i], a);
      } else if constexpr (kHalf) {
        tc::ldmatrix_x4_trans(af[buf][i], a);
      } else {  // a0 (g,t) a1 (g+8,t) a2 (g,t+4) a3 (g+8,t+4)
        af[buf][i][0] = tc::lds32(a);
        af[buf][i][1] = tc::lds32(a + LA::off(8, 0));
        af[buf][i][2] = tc::lds32(a + LA::off(0, 4));
        af[buf][i][3] = tc::lds32(a + LA::off(8, 4));
      }
      if constexpr (!kHalf) {
#pragma unroll
        for (int r = 0; r < 4; ++r) af[buf][i][r] = tc::to_tf32(af[buf][i][r]);
      }
    }
#pragma unroll
    for (int j = 0; j < NI; j += 2) {
      const uint32_t b = b_frag + st + LB::off(j * 8, kk);
      if constexpr (kBK || kHalf) {
        uint32_t r[4];
        if constexpr (kBK) tc::ldmatrix_x4(r, b);
        else tc::ldmatrix_x4_trans(r, b);
        bf[buf][j][0] = r[0];
        bf[buf][j][1] = r[1];
        bf[buf][j + 1][0] = r[2];
        bf[buf][j + 1][1] = r[3];
      } else {  // b0 (k t, n g), b1 (k t+4, n g)
        bf[buf][j][0] = tc::lds32(b);
        bf[buf][j][1] = tc::lds32(b + LB::off(0, 4));
        bf[buf][j + 1][0] = tc::lds32(b + LB::off(8, 0));
        bf[buf][j + 1][1] = tc::lds32(b + LB::off(8, 4));
      }
      if constexpr (!kHalf) {
        bf[buf][j][0] = tc::to_tf32(bf[buf][j][0]);
        bf[buf][j][1] = tc::to_tf32(bf[buf][j][1]);
        bf[buf][j + 1][0] = tc::to_tf32(bf[buf][j + 1][0]);
        bf[buf][j + 1][1] = tc::to_tf32(bf[buf][j + 1][1]);
      }
    }
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;

  const int ktiles = w.k_end - w.k_begin;
  // Prologue: tiles 0..kStages-2 into stages 0..kStages-2. One commit per
  // tile, even when empty, so that "group kt" is always the kt-th commit.
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) {
      lda.issue(A, s * BK, K, smem + s * kStageBytes);
      ldb.issue(B, s * BK, K, smem + s * kStageBytes);
      lda.advance();
      ldb.advance();
    }
    async_copy::commit();
  }
  async_copy::wait<kStages - 2>();
  __syncthreads();  // tile 0 is in shared memory
  uint32_t rd = 0;                              // byte offset of the stage being read
  uint32_t wr = (kStages - 1) * kStageBytes;    // byte offset of the stage being written
  load_frags(0, rd, 0);

  for (int kt = 0; kt < ktiles; ++kt) {
    // Stage `wr` held tile kt-1: every warp finished reading it before the
    // barrier at the end of the previous iteration.
    const int next = kt + kStages - 1;
    if (next < ktiles) {
      lda.issue(A, next * BK, K, smem + wr);
      ldb.issue(B, next * BK, K, smem + wr);
      lda.advance();
      ldb.advance();
    }
    async_copy::commit();
    wr = next_stage<kStages, kStageBytes>(wr);

#pragma unroll
    for (int kk = 0; kk < kKK; ++kk) {
      if (kk == kKK - 1) {
        // Tile kt+1 has landed for everyone, and every warp has loaded its last
        // fragments of tile kt (stage rd is free for the next issue).
        async_copy::wait<kStages - 2>();
        __syncthreads();
        rd = next_stage<kStages, kStageBytes>(rd);
      }
      // Fragments for the next k-step (of this tile, or the first of tile kt+1;
      // past the last tile this reads a stale stage that is never used).
      load_frags((kk + 1) % 2, rd, ((kk + 1) % kKK) * kK);
#pragma unroll
      for (int i = 0; i < MI; ++i)
#pragma unroll
        for (int j = 0; j < NI; ++j) {
          // Serpentine over n so consecutive MMAs share a fragment register.
          const int jj = (i % 2) ? NI - 1 - j : j;
          if constexpr (kHalf) mma16816<T>(acc[i][jj], af[kk % 2][i], bf[kk % 2][jj][0], bf[kk % 2][jj][1]);
          else tc::mma1688_tf32(acc[i][jj], af[kk % 2][i], bf[kk % 2][jj][0], bf[kk % 2][jj][1]);
        }
    }
  }
  async_copy::wait<0>();  // no copy may still target shared memory when the block exits

  // Epilogue. Fragment (i, j) holds C rows g and g+8, columns 2t and 2t+1.
  const bool vec = vector_ok<2>(p);
  GemmArgs<T> out = p;
  if (column_bias(p)) {  // columns 8j+2t, 8j+2t+1 of every row
#pragma unroll
    for (int j = 0; j < NI; ++j) {
      const int n = n0 + wn0 + j * 8 + 2 * t;
      const float b0 = column_bias_at(p, bz, n), b1 = column_bias_at(p, bz, n + 1);
#pragma unroll
      for (int i = 0; i < MI; ++i) acc[i][j][0] += b0, acc[i][j][1] += b1, acc[i][j][2] += b0, acc[i][j][3] += b1;
    }
    out.bias = nullptr;
  }
  with_epilogue(p, [&](auto epi) {
#pragma unroll
    for (int i = 0; i < MI; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = m0 + wm0 + i * 16 + g + h * 8;
        if (m >= M) continue;
        const auto row = output_row<decltype(epi)>(out, bz, m, w.split);
#pragma unroll
        for (int j = 0; j < NI; ++j)
          row.store_pair(n0 + wn0 + j * 8 + 2 * t, acc[i][j][2 * h], acc[i][j][2 * h + 1], vec);
      }
  });
}

}  // namespace tilelab
