#pragma once
// Kernel family `hopper`: warpgroup MMA (wgmma) fed by the tensor memory
// accelerator (TMA), bf16/fp16 with fp32 accumulation, and fp32 inputs on TF32
// tensor cores (only by consent, like the tensorcore_tf32 rows). sm_90a only: the body
// is compiled only for that target (__CUDA_ARCH_FEAT_SM90_ALL, i.e.
// TORCH_CUDA_ARCH_LIST=9.0a); elsewhere the kernel is an empty stub the
// chooser never picks (launch_hopper.cu: hopper_cannot_run).
//
// Why a second tensor-core family: mma.sync tops out at ~648 TFLOP/s on an H200
// (benchmarks/tools/mma_ceiling.cu), and a full mma.sync GEMM spends shared
// memory bandwidth on ldmatrix for every fragment. wgmma reads both operands
// straight from (swizzled) shared memory, a whole 64 x BN x 16 product per
// instruction and warpgroup, asynchronously; TMA copies a whole tile with one
// instruction from one thread, zero-fills what lies outside the tensor and
// signals an mbarrier when the bytes have landed.
//
// A block (384 threads = 3 warpgroups) computes a 128 x BN tile of C:
//   warpgroup 0, the producer: one thread walks K in steps of 128 bytes (BK = 64
//     half or 32 fp32 elements), waits for a free stage of the kStages-deep shared-memory ring (its `empty` mbarrier),
//     and issues the TMA copies of the A and B tiles into it (`full` mbarrier,
//     completed by the copies' byte count). It gives its registers away
//     (setmaxnreg.dec) so the consumers can have more.
//   warpgroups 1 and 2, the consumers: each owns 64 rows of the tile, keeps its
//     64 x BN accumulators in registers (BN/2 floats a thread), waits for a full
//     stage, issues 4 wgmma on it (32 bytes of K each: k16 half, k8 TF32), and
//     releases the previous stage
//     once its own wgmma group on that stage has completed (one group stays in
//     flight, so the tensor cores never wait on the release).
//
// Shared memory: every tile is stored in the 128-byte swizzle of the TMA
// (CU_TENSOR_MAP_SWIZZLE_128B), which is also the layout wgmma reads without
// bank conflicts. A box is 128 bytes wide along its contiguous dimension (64
// half elements; the half layouts below):
// (k-contiguous is the PTX manual's "K-major", m/n-contiguous its "M/N-major")
//   A row-major (k-contiguous):      one box of 128 (m) x 64 (k);
//   A column-major (m-contiguous):   two boxes of 64 (k) x 64 (m);
//   B column-major (k-contiguous):   one box of BN (n) x 64 (k);
//   B row-major (n-contiguous):      BN/64 boxes of 64 (k) x 64 (n).
// A consumer's 64 rows of A start 8 KB into the stage in both A layouts. The
// wgmma descriptors (make_desc) say where each k16 slice starts (32 bytes
// further along a k-contiguous row, 16 rows = 2 KB further in an m/n-contiguous box),
// the stride between 8-row groups (SBO = 1024 bytes) and, for m/n-contiguous
// operands, between 64-element boxes (LBO = 8 KB).
//
// TF32: wgmma reads tf32 operands only k-contiguous, so the launcher hands over
// row-major A and column-major B (a transposed copy of an operand that is not);
// boxes are 32 (k) fp32 elements wide. wgmma uses the top 19 bits of each fp32
// value (the low mantissa bits are ignored, not rounded).
//
// Boundary safety: any M, N, K >= 1. The TMA zero-fills every element of a box
// outside the tensor (the K tail contributes exact zeros; rows and columns past
// M/N are computed and not stored; split-K slices are whole k-tiles, the last
// one ending in the tail). TMA needs a 16-byte aligned base and
// 16-byte multiples for the row and batch strides: the launcher copies an
// operand that is not (aligned_copy.h). Stores are predicated per element; the
// epilogue adds the optional bias and honours the batch (blockIdx.z).
#include <cuda.h>  // CUtensorMap
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "common.cuh"
#include "epilogue.cuh"
#include "scheduler.cuh"

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TILELAB_HOPPER_DEVICE 1
#endif

namespace tilelab {
namespace hopper {

constexpr int kTileM = 128;       // rows of C per block: two consumer warpgroups of 64
// K per stage: one 128-byte swizzle row (64 half / 32 fp32 elements); also a
// box's extent along its contiguous dimension.
template <typename T>
constexpr int tile_k() {
  return 128 / static_cast<int>(sizeof(T));
}
constexpr int kBoxBytes = 64 * 128;  // a 64 (rows) x 128-byte box
constexpr int kThreads = 384;     // producer + 2 consumer warpgroups
constexpr int kConsumerWarps = 8;
constexpr int kProducerRegs = 40, kConsumerRegs = 232;  // 40*128 + 232*256 <= 64K registers

template <int BN>
constexpr int stage_bytes() {
  return (kTileM + BN) * 128;
}
// Dynamic shared memory: the ring of kStages stages (the table row's stages:
// 4 x 48 KB for 128x256, 6 x 32 KB for 128x128), 1 KB of slack to align it to
// 1024 bytes (the swizzle atom), and the mbarriers.
template <int BN, int kStages>
constexpr int smem_bytes() {
  return kStages * stage_bytes<BN>() + 1024 + 2 * 8 * kStages;
}
constexpr int kMaxSmemBytes = 227 * 1024;  // dynamic shared memory a block may have on sm_90

#ifdef TILELAB_HOPPER_DEVICE
// ---- mbarriers
__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Waits until the phase with the given parity has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\n"
        "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// ---- TMA: one box of a 3-D tensor map (contiguous dim, rows, batch) into shared memory
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                         int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// ---- wgmma
// Shared-memory matrix descriptor, 128-byte swizzle: start address, leading
// byte offset (m/n-contiguous: between 64-element boxes; k-contiguous: unused, 1),
// stride byte offset (between 8-row groups), all in 16-byte units.
__device__ __forceinline__ uint64_t make_desc(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(lbo >> 4) << 16) |
         (static_cast<uint64_t>(sbo >> 4) << 32) | (1ull << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Keeps the compiler from moving accumulator reads/writes across the
// asynchronous wgmma (the registers are in use until wgmma_wait).
template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The accumulator operand lists: "%0,...,%63" and "%0,...,%127".
#define TILELAB_WG_REGS64                                                 \
  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"                \
  "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,"      \
  "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"      \
  "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
#define TILELAB_WG_REGS128                                                             \
  TILELAB_WG_REGS64 ","                                                                \
  "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"                   \
  "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,"                   \
  "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,"       \
  "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
#define TILELAB_F8(d, i) \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define TILELAB_F64(d, i)                                                                                  \
  TILELAB_F8(d, i), TILELAB_F8(d, i + 8), TILELAB_F8(d, i + 16), TILELAB_F8(d, i + 24), TILELAB_F8(d, i + 32), \
      TILELAB_F8(d, i + 40), TILELAB_F8(d, i + 48), TILELAB_F8(d, i + 56)
// One wgmma.mma_async m64nBNk16, D += A * B, fp32 accumulators; kTransA/kTransB:
// the operand is m/n-contiguous in shared memory.
#define TILELAB_WGMMA(N, TY, REGS, DA, DB, SC, TA, TB, ...)                                        \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #SC ", 0;\n"                                   \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TY "." TY " {" REGS "}, %" #DA ", %" #DB \
               ", p, 1, 1, %" #TA ", %" #TB ";\n}\n"                                              \
               : __VA_ARGS__                                                                      \
               : "l"(desc_a), "l"(desc_b), "r"(1), "n"(kTransA), "n"(kTransB))

// TF32 (k-contiguous operands only: no transpose immediates).
#define TILELAB_WGMMA_TF32(N, REGS, DA, DB, SC, ...)                                                  \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #SC ", 0;\n"                                      \
               "wgmma.mma_async.sync.aligned.m64n" #N "k8.f32.tf32.tf32 {" REGS "}, %" #DA ", %" #DB \
               ", p, 1, 1;\n}\n"                                                                    \
               : __VA_ARGS__                                                                         \
               : "l"(desc_a), "l"(desc_b), "r"(1))

template <typename T, int BN, int kTransA, int kTransB>
__device__ __forceinline__ void wgmma(float (&d)[BN / 2], uint64_t desc_a, uint64_t desc_b) {
  constexpr bool kBf16 = std::is_same_v<T, c10::BFloat16>;
  if constexpr (std::is_same_v<T, float>) {
    static_assert(kTransA == 0 && kTransB == 0, "hopper: TF32 operands are k-contiguous");
    if constexpr (BN == 256)
      TILELAB_WGMMA_TF32(256, TILELAB_WG_REGS128, 128, 129, 130, TILELAB_F64(d, 0), TILELAB_F64(d, 64));
    else
      TILELAB_WGMMA_TF32(128, TILELAB_WG_REGS64, 64, 65, 66, TILELAB_F64(d, 0));
  } else if constexpr (BN == 256) {
    if constexpr (kBf16)
      TILELAB_WGMMA(256, "bf16", TILELAB_WG_REGS128, 128, 129, 130, 131, 132, TILELAB_F64(d, 0), TILELAB_F64(d, 64));
    else
      TILELAB_WGMMA(256, "f16", TILELAB_WG_REGS128, 128, 129, 130, 131, 132, TILELAB_F64(d, 0), TILELAB_F64(d, 64));
  } else {
    static_assert(BN == 128, "hopper: BN is 128 or 256");
    if constexpr (kBf16)
      TILELAB_WGMMA(128, "bf16", TILELAB_WG_REGS64, 64, 65, 66, 67, 68, TILELAB_F64(d, 0));
    else
      TILELAB_WGMMA(128, "f16", TILELAB_WG_REGS64, 64, 65, 66, 67, 68, TILELAB_F64(d, 0));
  }
}
#undef TILELAB_WGMMA
#undef TILELAB_WGMMA_TF32
#undef TILELAB_F64
#undef TILELAB_F8
#undef TILELAB_WG_REGS128
#undef TILELAB_WG_REGS64

#endif  // TILELAB_HOPPER_DEVICE

}  // namespace hopper

// kAK: A is k-contiguous (row-major); kBK: B is k-contiguous (column-major).
// map_a / map_b: 3-D TMA maps (contiguous dim, rows, batch) built by the host
// with 64-element boxes and the 128-byte swizzle; a_batch / b_batch: 1 if the
// operand has a batch dimension, 0 if one matrix serves every batch.
template <typename T, int BN, int kStages, bool kAK, bool kBK>
__global__ void __launch_bounds__(hopper::kThreads, 1)
    hopper_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                  GemmArgs<T> p, int a_batch, int b_batch) {
#ifdef TILELAB_HOPPER_DEVICE
  using namespace hopper;
  static_assert(smem_bytes<BN, kStages>() <= kMaxSmemBytes, "hopper: the ring must fit in shared memory");
  using Sched = GroupedScheduler;
  static_assert(!Sched::kPersistent, "hopper: one tile per block");  // (split-K: part of K per block)
  constexpr int kStageBytes = stage_bytes<BN>();
  constexpr int kABytes = kTileM * 128;
  constexpr int kTileK = tile_k<T>();  // also a box's extent along its contiguous dimension
  static_assert(sizeof(T) == 2 || (std::is_same_v<T, float> && kAK && kBK),
                "hopper: 16-bit inputs, or k-contiguous fp32 (TF32)");

  extern __shared__ __align__(1024) unsigned char hp_smem[];
  // The swizzle pattern repeats every 1024 bytes: align the ring to it.
  const uint32_t raw = smem_u32(hp_smem);
  const uint32_t ring = (raw + 1023) & ~1023u;
  const uint32_t bars = ring + kStages * kStageBytes;  // full[s] at bars + 8s, empty[s] at bars + 8(kStages + s)
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (kStages + s); };

  const int tid = threadIdx.x, wg = tid / 128;
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full(s), 1);                 // the producer's expect_tx arrival (+ the bytes)
      mbar_init(empty(s), kConsumerWarps);   // one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  // The k-tiles [k_begin, k_end) of this tile: slot i of the ring holds k-tile k_begin + i.
  const WorkTile w = Sched::first((p.K + kTileK - 1) / kTileK, p.splits, p.batch);
  const int m0 = w.tm * kTileM, n0 = w.tn * BN, bz = w.batch;
  const int ktiles = w.k_end - w.k_begin;

  if (wg == 0) {
    // ---------------- producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    if (tid == 0) {
      const int za = a_batch ? bz : 0, zb = b_batch ? bz : 0;
      for (int kt = 0; kt < ktiles; ++kt) {
        const int s = kt % kStages;
        if (kt >= kStages) mbar_wait(empty(s), ((kt / kStages) + 1) & 1);
        const uint32_t sa = ring + s * kStageBytes, sb = sa + kABytes;
        mbar_expect_tx(full(s), kStageBytes);
        const int k0 = (w.k_begin + kt) * kTileK;
        if constexpr (kAK) {
          tma_load(sa, &map_a, full(s), k0, m0, za);
        } else {
#pragma unroll
          for (int j = 0; j < kTileM / kTileK; ++j) tma_load(sa + j * kBoxBytes, &map_a, full(s), m0 + j * kTileK, k0, za);
        }
        if constexpr (kBK) {
          tma_load(sb, &map_b, full(s), k0, n0, zb);
        } else {
#pragma unroll
          for (int j = 0; j < BN / kTileK; ++j) tma_load(sb + j * kBoxBytes, &map_b, full(s), n0 + j * kTileK, k0, zb);
        }
      }
    }
  } else {
    // ---------------- consumers
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
    const int c = wg - 1;  // which 64 rows of the tile
    const int warp = (tid / 32) % 4, lane = tid % 32;
    float d[BN / 2];
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) d[i] = 0.0f;

    // Per k16 slice: k-contiguous operands advance 32 bytes along the swizzled row,
    // m/n-contiguous ones 16 rows of 128 bytes.
    constexpr uint32_t kStepA = kAK ? 32 : 16 * 128, kStepB = kBK ? 32 : 16 * 128;
    constexpr uint32_t kLboA = kAK ? 16 : kBoxBytes, kLboB = kBK ? 16 : kBoxBytes;
    for (int kt = 0; kt < ktiles; ++kt) {
      const int s = kt % kStages;
      mbar_wait(full(s), (kt / kStages) & 1);
      const uint32_t sa = ring + s * kStageBytes + c * (kABytes / 2), sb = ring + s * kStageBytes + kABytes;
      fence_regs(d);
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk) {  // 4 x 32 bytes of K
        wgmma<T, BN, kAK ? 0 : 1, kBK ? 0 : 1>(d, make_desc(sa + kk * kStepA, kLboA, 1024),
                                                make_desc(sb + kk * kStepB, kLboB, 1024));
      }
      wgmma_commit();
      // Keep this tile's group in flight; the previous one is done, so its stage is free.
      wgmma_wait<1>();
      fence_regs(d);
      if (kt > 0 && lane == 0) mbar_arrive(empty((kt - 1) % kStages));
    }
    wgmma_wait<0>();
    fence_regs(d);

    // Epilogue. Thread layout of a 64 x BN wgmma accumulator: warp w owns rows
    // 16w..16w+15; lane (g = lane/4, t = lane%4) holds, for every 8-column
    // group j, (g, 8j+2t), (g, 8j+2t+1), (g+8, 8j+2t), (g+8, 8j+2t+1).
    const int g = lane / 4, t = lane % 4;
    const int mrow = m0 + c * 64 + warp * 16 + g;
    const bool vec = vector_ok<2>(p);
    GemmArgs<T> out = p;
    if (column_bias(p)) {  // columns 8j+2t, 8j+2t+1 of both rows
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        const int n = n0 + 8 * j + 2 * t;
        const float b0 = column_bias_at(p, bz, n), b1 = column_bias_at(p, bz, n + 1);
        d[4 * j] += b0, d[4 * j + 1] += b1, d[4 * j + 2] += b0, d[4 * j + 3] += b1;
      }
      out.bias = nullptr;
    }
    with_epilogue(p, [&](auto epi) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int m = mrow + 8 * h;
        if (m >= p.M) continue;
        const auto row = output_row<decltype(epi)>(out, bz, m, w.split);
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) row.store_pair(n0 + 8 * j + 2 * t, d[4 * j + 2 * h], d[4 * j + 2 * h + 1], vec);
      }
    });
  }
#else
  // Not compiled for sm_90a: the chooser never launches this (launch_hopper.cu: hopper_cannot_run).
  __trap();
#endif
}

}  // namespace tilelab
