#pragma once
// Kernel family `tensorcore`: warp-level mma.sync on the tensor cores (sm_80+).
//
//   bf16/fp16: mma.sync m16n8k16, fp32 accumulation, fragments read with ldmatrix.
//   fp32:      mma.sync m16n8k8 TF32 (only when the caller allowed TF32; the
//              table row carries tf32=true and the chooser refuses it otherwise),
//              fragments read with scalar shared loads and rounded with cvt.rna.
//
// A block computes a BM x BN tile of C with a 2 x (warps/2) grid of warps, each
// warp a WM x WN sub-tile held in registers (fp32). K is walked in BK steps
// through a kStages-deep ring of shared-memory tiles filled with cp.async, so
// the loads of tile kt+kStages-1 fly while tile kt is multiplied.
//
// Layouts: each operand tile is stored in shared memory in the orientation of
// its global layout (cp.async copies contiguous bytes, it cannot transpose):
//   A row-major (k contiguous): As[m][k];  A column-major: As[k][m]
//   B row-major (n contiguous): Bs[k][n];  B column-major: Bs[n][k]
// ldmatrix reads the k-contiguous tiles as they are and ldmatrix.trans the
// others, so both layouts run at the same speed. Rows are padded (16 bytes for
// half, 16/32 bytes for fp32) so that the 8 row addresses of an ldmatrix phase
// (and the scalar TF32 fragment loads) hit distinct banks.
//
// Boundary safety without a slow path: any M, N, K >= 1 and any leading dimension.
//   - The host picks per operand the widest cp.async (16, 8 or 4 bytes) that its
//     pointer, leading stride and batch stride allow; partial chunks at the
//     M/N/K edges copy only their valid bytes and zero-fill the rest (the K
//     tail contributes exact zeros).
//   - A half-precision operand whose rows are only 2-byte aligned (odd leading
//     dimension, e.g. K = 4095) cannot use cp.async at all; its tile is loaded
//     with predicated, coalesced element loads into registers at the top of a
//     step and stored to shared memory after that step's MMAs, so the global
//     latency still hides behind a full k-step of math.
//   - Stores are predicated per element; the epilogue adds the optional bias
//     and honours the batch (blockIdx.z and the *_b strides).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "async_copy.cuh"
#include "common.cuh"

namespace tilelab {
namespace tc {

template <typename T>
constexpr bool kIsHalf = sizeof(T) == 2;

// One operand tile of shape (MN x BK) as stored in shared memory. kKMajor:
// stored [MN][BK + pad] (k contiguous), else [BK][MN + pad] (m or n contiguous).
template <typename T, bool kKMajor, int MN, int BK>
struct TileLayout {
  // Half: 16 bytes keeps ldmatrix rows 16-byte aligned and spreads 8 rows over
  // 8 distinct 16-byte bank groups. fp32: 4 floats for k-major rows (BK=16:
  // row stride 20 words, the 8x4 scalar fragment reads hit 32 banks), 8 floats
  // for mn-major rows (stride = 8 mod 32 words: t*8 + g is conflict-free).
  static constexpr int kPad = kIsHalf<T> ? 8 : (kKMajor ? 4 : 8);
  static constexpr int kRows = kKMajor ? MN : BK;
  static constexpr int kCont = kKMajor ? BK : MN;  // contiguous extent (elements)
  static constexpr int kLd = kCont + kPad;
  static constexpr int kElems = kRows * kLd;
  static_assert((kLd * sizeof(T)) % 16 == 0, "rows must stay 16-byte aligned for cp.async/ldmatrix");
  __device__ static __forceinline__ int off(int mn, int k) { return kKMajor ? mn * kLd + k : k * kLd + mn; }
};

// Copies one tile (kRows x kCont of the stored orientation) from global memory.
// Global element (r, c) of the tile is g[(row0 + r) * ld + cont0 + c], valid
// when row0 + r < rlim and cont0 + c < clim; invalid elements become zero.
template <typename T, typename L, int kThreads>
struct TileLoader {
  static constexpr int kVec = 16 / sizeof(T);  // elements per 16-byte chunk
  static constexpr int kChunksPerRow = L::kCont / kVec;
  static constexpr int kChunks = L::kRows * kChunksPerRow;
  static_assert(L::kCont % kVec == 0, "tile rows are whole 16-byte chunks");
  static_assert(kChunks % kThreads == 0, "every thread copies the same number of chunks");
  // Element path (half only): 32-bit words of two elements each.
  static constexpr int kPairsPerRow = L::kCont / 2;
  static constexpr int kWords = kIsHalf<T> ? L::kRows * kPairsPerRow / kThreads : 1;
  static_assert(!kIsHalf<T> || (L::kRows * kPairsPerRow) % kThreads == 0, "even split of pairs");

  // cp.async with `vbytes` (16, 8 or 4) per instruction; the host guarantees
  // that every row start (and the base) is vbytes-aligned.
  __device__ static __forceinline__ void async(T* s, const T* g, int64_t ld, int row0, int cont0,
                                               int rlim, int clim, int vbytes, int tid) {
#pragma unroll
    for (int i = 0; i < kChunks / kThreads; ++i) {
      const int chunk = tid + i * kThreads;
      const int r = chunk / kChunksPerRow, c = (chunk % kChunksPerRow) * kVec;
      const int gr = row0 + r, gc = cont0 + c;
      int valid = gr < rlim ? clim - gc : 0;
      valid = valid < 0 ? 0 : (valid > kVec ? kVec : valid);
      T* dst = s + r * L::kLd + c;
      const T* src = g + static_cast<int64_t>(gr) * ld + gc;
      if (vbytes == 16) {
        async_copy::cp16(dst, valid > 0 ? src : g, valid * static_cast<int>(sizeof(T)));
      } else if (vbytes == 8) {
        constexpr int e = 8 / sizeof(T);
#pragma unroll
        for (int q = 0; q < kVec / e; ++q) {
          int v = valid - q * e;
          v = v < 0 ? 0 : (v > e ? e : v);
          async_copy::cp8(dst + q * e, v > 0 ? src + q * e : g, v * static_cast<int>(sizeof(T)));
        }
      } else {
        constexpr int e = 4 / sizeof(T);
#pragma unroll
        for (int q = 0; q < kVec / e; ++q) {
          int v = valid - q * e;
          v = v < 0 ? 0 : (v > e ? e : v);
          async_copy::cp4(dst + q * e, v > 0 ? src + q * e : g, v * static_cast<int>(sizeof(T)));
        }
      }
    }
  }

  // Element path, half precision with 2-byte-aligned rows: consecutive threads
  // take consecutive pairs of a row, so a warp reads 128 contiguous bytes.
  __device__ static __forceinline__ void load_regs(uint32_t (&w)[kWords], const T* g, int64_t ld,
                                                   int row0, int cont0, int rlim, int clim, int tid) {
    if constexpr (kIsHalf<T>) {
      const unsigned short* gs = reinterpret_cast<const unsigned short*>(g);
#pragma unroll
      for (int i = 0; i < kWords; ++i) {
        const int pair = tid + i * kThreads;
        const int r = pair / kPairsPerRow, c = (pair % kPairsPerRow) * 2;
        const int gr = row0 + r, gc = cont0 + c;
        const int64_t base = static_cast<int64_t>(gr) * ld + gc;
        uint32_t lo = 0, hi = 0;
        if (gr < rlim && gc < clim) lo = __ldg(gs + base);
        if (gr < rlim && gc + 1 < clim) hi = __ldg(gs + base + 1);
        w[i] = lo | (hi << 16);
      }
    }
  }
  __device__ static __forceinline__ void store_regs(const uint32_t (&w)[kWords], T* s, int tid) {
    if constexpr (kIsHalf<T>) {
#pragma unroll
      for (int i = 0; i < kWords; ++i) {
        const int pair = tid + i * kThreads;
        const int r = pair / kPairsPerRow, c = (pair % kPairsPerRow) * 2;
        *reinterpret_cast<uint32_t*>(s + r * L::kLd + c) = w[i];
      }
    }
  }
};

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(async_copy::smem_addr(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(async_copy::smem_addr(p)));
}

template <typename T>
__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

__device__ __forceinline__ void mma1688_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// fp32 -> tf32, round to nearest (ties away), like cuBLAS' TF32 mode.
__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

// Bytes of dynamic shared memory a configuration needs.
template <typename T, int BM, int BN, int BK, int kStages, bool kAK, bool kBK>
constexpr int smem_bytes() {
  return kStages * (TileLayout<T, kAK, BM, BK>::kElems + TileLayout<T, kBK, BN, BK>::kElems) *
         static_cast<int>(sizeof(T));
}

}  // namespace tc

// kAK: A is k-contiguous (row-major); kBK: B is k-contiguous (column-major).
// va / vb: cp.async width in bytes for A / B (16, 8, 4), or 0 for the element
// path; chosen per call by the host from the operands' alignment.
template <typename T, int BM, int BN, int BK, int kWarpsM, int kWarpsN, int kStages, bool kAK, bool kBK>
__global__ void __launch_bounds__(kWarpsM * kWarpsN * 32)
    tensorcore_kernel(GemmArgs<T> p, int va, int vb) {
  constexpr int kThreads = kWarpsM * kWarpsN * 32;
  constexpr int WM = BM / kWarpsM, WN = BN / kWarpsN;
  constexpr bool kHalf = tc::kIsHalf<T>;
  constexpr int kK = kHalf ? 16 : 8;  // k of one mma
  constexpr int MI = WM / 16, NI = WN / 8;
  static_assert(kHalf || std::is_same_v<T, float>, "tensorcore: half, bfloat16 or float (TF32)");
  static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile: whole m16 fragments, pairs of n8 fragments");
  static_assert(BK % kK == 0 && kStages >= 2, "BK is whole mma steps; at least double buffering");
  using LA = tc::TileLayout<T, kAK, BM, BK>;
  using LB = tc::TileLayout<T, kBK, BN, BK>;
  using LdA = tc::TileLoader<T, LA, kThreads>;
  using LdB = tc::TileLoader<T, LB, kThreads>;

  extern __shared__ __align__(16) unsigned char tc_smem[];
  T* sA = reinterpret_cast<T*>(tc_smem);
  T* sB = sA + kStages * LA::kElems;

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int wm0 = (warp % kWarpsM) * WM, wn0 = (warp / kWarpsM) * WN;
  const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN, bz = blockIdx.z;
  const T* A = p.a + bz * p.sa_b;
  const T* B = p.b + bz * p.sb_b;
  const int M = p.M, N = p.N, K = p.K;
  // Where each operand's tile starts and ends, in the stored orientation.
  const int64_t lda = kAK ? p.sa_m : p.sa_k;
  const int64_t ldb = kBK ? p.sb_n : p.sb_k;
  const int a_rlim = kAK ? M : K, a_clim = kAK ? K : M;
  const int b_rlim = kBK ? N : K, b_clim = kBK ? K : N;
  auto a_origin = [&](int k0, int& r0, int& c0) { r0 = kAK ? m0 : k0; c0 = kAK ? k0 : m0; };
  auto b_origin = [&](int k0, int& r0, int& c0) { r0 = kBK ? n0 : k0; c0 = kBK ? k0 : n0; };

  uint32_t wa[LdA::kWords], wb[LdB::kWords];  // element-path staging (half, unaligned rows)
  auto issue = [&](int kt) {  // start loading k-tile kt into its stage
    const int st = kt % kStages;
    int r0, c0;
    a_origin(kt * BK, r0, c0);
    if (va) LdA::async(sA + st * LA::kElems, A, lda, r0, c0, a_rlim, a_clim, va, tid);
    else LdA::load_regs(wa, A, lda, r0, c0, a_rlim, a_clim, tid);
    b_origin(kt * BK, r0, c0);
    if (vb) LdB::async(sB + st * LB::kElems, B, ldb, r0, c0, b_rlim, b_clim, vb, tid);
    else LdB::load_regs(wb, B, ldb, r0, c0, b_rlim, b_clim, tid);
  };
  auto finish = [&](int kt) {  // element path: registers -> shared
    const int st = kt % kStages;
    if (!va) LdA::store_regs(wa, sA + st * LA::kElems, tid);
    if (!vb) LdB::store_regs(wb, sB + st * LB::kElems, tid);
  };

  float acc[MI][NI][4];
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.f;

  const int ktiles = (K + BK - 1) / BK;
  // Prologue: the first kStages-1 tiles. One commit per tile, even when empty,
  // so that "group kt" is always the kt-th commit.
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ktiles) {
      issue(s);
      finish(s);
    }
    async_copy::commit();
  }

  const int g = lane / 4, t = lane % 4;
  for (int kt = 0; kt < ktiles; ++kt) {
    async_copy::wait<kStages - 2>();
    __syncthreads();  // tile kt is in shared memory for everyone; stage (kt-1) is free
    const int next = kt + kStages - 1;
    const bool has_next = next < ktiles;
    if (has_next) issue(next);
    async_copy::commit();

    const T* a_s = sA + (kt % kStages) * LA::kElems;
    const T* b_s = sB + (kt % kStages) * LB::kElems;
#pragma unroll
    for (int kk = 0; kk < BK; kk += kK) {
      uint32_t af[MI][4], bf[NI][2];
      if constexpr (kHalf) {
#pragma unroll
        for (int i = 0; i < MI; ++i) {
          const int mb = wm0 + i * 16;
          if constexpr (kAK) {  // As[m][k]: matrices (m0-7,k0-7) (m8-15,k0-7) (m0-7,k8-15) (m8-15,k8-15)
            tc::ldmatrix_x4(af[i], a_s + LA::off(mb + lane % 16, kk + (lane / 16) * 8));
          } else {  // As[k][m], transposed on load; same four matrices
            const int j = lane / 8;
            tc::ldmatrix_x4_trans(af[i], a_s + LA::off(mb + (j % 2) * 8, kk + (j / 2) * 8 + lane % 8));
          }
        }
#pragma unroll
        for (int j = 0; j < NI; j += 2) {
          const int nb = wn0 + j * 8, q = lane / 8;
          uint32_t r[4];
          if constexpr (kBK) {  // Bs[n][k]: (n0-7,k0-7) (n0-7,k8-15) (n8-15,k0-7) (n8-15,k8-15)
            tc::ldmatrix_x4(r, b_s + LB::off(nb + (q / 2) * 8 + lane % 8, kk + (q % 2) * 8));
          } else {  // Bs[k][n], transposed on load; same four matrices
            tc::ldmatrix_x4_trans(r, b_s + LB::off(nb + (q / 2) * 8, kk + (q % 2) * 8 + lane % 8));
          }
          bf[j][0] = r[0];
          bf[j][1] = r[1];
          bf[j + 1][0] = r[2];
          bf[j + 1][1] = r[3];
        }
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
          for (int j = 0; j < NI; ++j) tc::mma16816<T>(acc[i][j], af[i], bf[j][0], bf[j][1]);
      } else {
        // m16n8k8 TF32 fragments: a0 (g,t) a1 (g+8,t) a2 (g,t+4) a3 (g+8,t+4);
        // b0 (k=t, n=g) b1 (k=t+4, n=g).
        const float* af32 = reinterpret_cast<const float*>(a_s);
        const float* bf32 = reinterpret_cast<const float*>(b_s);
#pragma unroll
        for (int i = 0; i < MI; ++i) {
          const int m = wm0 + i * 16 + g;
          af[i][0] = tc::to_tf32(af32[LA::off(m, kk + t)]);
          af[i][1] = tc::to_tf32(af32[LA::off(m + 8, kk + t)]);
          af[i][2] = tc::to_tf32(af32[LA::off(m, kk + t + 4)]);
          af[i][3] = tc::to_tf32(af32[LA::off(m + 8, kk + t + 4)]);
        }
#pragma unroll
        for (int j = 0; j < NI; ++j) {
          const int n = wn0 + j * 8 + g;
          bf[j][0] = tc::to_tf32(bf32[LB::off(n, kk + t)]);
          bf[j][1] = tc::to_tf32(bf32[LB::off(n, kk + t + 4)]);
        }
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
          for (int j = 0; j < NI; ++j) tc::mma1688_tf32(acc[i][j], af[i], bf[j][0], bf[j][1]);
      }
    }
    if (has_next) finish(next);  // stage `next` was freed by this step's barrier
  }
  async_copy::wait<0>();  // no copy may still target shared memory when the block exits

  // Epilogue. Fragment (i, j) holds C rows g and g+8, columns 2t and 2t+1.
  // Without bias and with 2-element-aligned rows, a pair goes out as one store.
  const bool pair_ok = p.bias == nullptr && p.sc_m % 2 == 0 && p.sc_b % 2 == 0 &&
                       reinterpret_cast<uintptr_t>(p.c) % (2 * sizeof(T)) == 0;
#pragma unroll
  for (int i = 0; i < MI; ++i)
#pragma unroll
    for (int j = 0; j < NI; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = m0 + wm0 + i * 16 + g + h * 8;
        const int n = n0 + wn0 + j * 8 + 2 * t;
        if (m >= M) continue;
        const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
        if (pair_ok && n + 1 < N) {
          T* dst = p.c + bz * p.sc_b + static_cast<int64_t>(m) * p.sc_m + n;
          if constexpr (kHalf) {
            const T lo = static_cast<T>(v0), hi = static_cast<T>(v1);
            const uint32_t packed = static_cast<uint32_t>(lo.x) | (static_cast<uint32_t>(hi.x) << 16);
            *reinterpret_cast<uint32_t*>(dst) = packed;
          } else {
            *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
          }
        } else {
          if (n < N) store_output(p, bz, m, n, v0);
          if (n + 1 < N) store_output(p, bz, m, n + 1, v1);
        }
      }
}

}  // namespace tilelab
