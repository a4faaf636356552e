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
// A block (384 threads = 3 warpgroups, one per SM: the grid is persistent)
// walks its 128 x BN tiles of C (hopper_kernel below says in which order; the
// hopper_m64 rows' blocks are 256 threads, one consumer warpgroup on 64 x BN tiles, the
// hopper_m192 rows' 512, three on 192 x BN tiles):
//   warpgroup 0, the producer: one thread walks the K of every tile in steps of
//     128 bytes (BK = 64 half or 32 fp32 elements), waits for a free stage of the
//     kStages-deep shared-memory ring (its `empty` mbarrier), and issues the TMA
//     copies of the A and B tiles into it (`full` mbarrier, completed by the
//     copies' byte count); it runs on into the next tile while the consumers
//     finish the last. It gives its registers away (setmaxnreg.dec) so the
//     consumers can have more.
//   warpgroups 1 and 2, the consumers, each up to 128 accumulators a thread: waits for
//     a full stage, issues its wgmma on it (32 bytes of K each: k16 half, k8
//     TF32), and releases the previous stage once its own wgmma group on that
//     stage has completed (one group stays in flight, so the tensor cores never
//     wait on the release). Cooperative rows: each owns 64 rows of every tile
//     (m64nBN, BN = 64, 96, 128, 160, 192 or 256). Ping-pong rows: each owns whole 128 x 128 tiles
//     (two m64n128 per k16), the two alternating, so one stores while the other
//     multiplies.
//
// Shared memory: every tile is stored in the 128-byte swizzle of the TMA
// (CU_TENSOR_MAP_SWIZZLE_128B), which is also the layout wgmma reads without
// bank conflicts. A box is 128 bytes wide along its contiguous dimension (64
// half elements; the half layouts below):
// (k-contiguous is the PTX manual's "K-major", m/n-contiguous its "M/N-major")
//   A row-major (k-contiguous):      one box of BM (m) x 64 (k);
//   A column-major (m-contiguous):   BM / 64 boxes of 64 (k) x 64 (m);
//   B column-major (k-contiguous):   one box of BN (n) x 64 (k);
//   B row-major (n-contiguous):      BN/64 boxes of 64 (k) x 64 (n), rounded up (a 160-wide tile
//                                    reads 3 and leaves the last one's extra 32 columns unused).
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
// operand that is not (aligned_copy.h). The TMA store clips its boxes at M and
// N; an output it cannot write (an unaligned C, a per-element bias, a split-K
// slab) is stored from registers, predicated per element.
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

// Rows of C per tile, BM: 128 (two consumer warpgroups, 64 rows each or whole tiles in turn), 64 (one
// consumer warpgroup: the hopper_m64 rows, twice the tiles of a product too small to fill the SMs) or 192
// (three, 64 rows each: the hopper_m192 row, whose 192 x 192 tiles fill whole waves where 128-row ones do not).
template <int BM>
constexpr int consumer_groups() {
  static_assert(BM == 64 || BM == 128 || BM == 192, "hopper: tiles of 64, 128 or 192 rows");
  return BM / 64;
}
// K per stage: one 128-byte swizzle row (64 half / 32 fp32 elements); also a
// box's extent along its contiguous dimension.
template <typename T>
constexpr int tile_k() {
  return 128 / static_cast<int>(sizeof(T));
}
constexpr int kBoxBytes = 64 * 128;  // a 64 (rows) x 128-byte box
// The columns of a tile's last TMA-store box when BN is not a whole number of 128-byte boxes (128x160
// half tiles: 32), else 0: that box is stored unswizzled through a map of its own (launch_hopper.cu).
template <typename T, int BN>
constexpr int store_tail_cols() {
  return BN % tile_k<T>();
}
// Threads a block: the producer warpgroup and the consumers (384 for 128-row tiles, 256 for 64-row ones, 512
// for 192-row ones).
template <int BM>
constexpr int threads() {
  return 128 * (1 + consumer_groups<BM>());
}
// setmaxnreg: the producer gives registers away, the consumers take what fits in 64K a block, in multiples
// of 8, at most 232 (40*128 + 232*256; 152 each for three consumer warpgroups).
constexpr int kProducerRegs = 40;
template <int BM>
constexpr int consumer_regs() {
  const int fits = (65536 - 128 * kProducerRegs) / (128 * consumer_groups<BM>()) / 8 * 8;
  return fits < 232 ? fits : 232;
}

// A k-contiguous A's TMA box: BM rows, or, where the whole product has fewer (a batch of decoded tokens),
// its rows rounded up to 8. The TMA zero-fills a box's rows past the tensor's end, and slowly: a box mostly
// past M held back the stream of W (H200, bf16 x @ W.t(), W cold, unsplit, us a call with a BM-row box ->
// this one: hopper_m64_64x64x64 16x4096x14336 44.9 -> 32.6, 16x4096x4096 17.1 -> 12.8; hopper_128x128x64
// 16x4096x14336 48.0 -> 32.1, 64x4096x14336 43.2 -> 32.4). A stage's rows past the box keep stale bytes,
// which reach only rows of C past M, and no store writes those.
__host__ __device__ constexpr int a_box_rows(int bm, int64_t m) {
  return m >= bm ? bm : static_cast<int>((m + 7) / 8 * 8);
}

// A stage holds A's BM rows and B's: one box of BN rows where B is k-contiguous (BN * 128 bytes, whole
// 1024-byte swizzle atoms), else BN rounded up to whole 64-column boxes (an n-contiguous B of a 160-wide tile
// is read as 3 boxes of 64 columns, the last one half unused).
constexpr int stage_bytes_of(int bm, int bn, bool bk) { return (bm + (bk ? bn : (bn + 63) / 64 * 64)) * 128; }
// The epilogue's staging buffers: two per consumer warp (one where two do not fit beside the ring: the
// 192 x 192 row's 4 x 48 KB), each one TMA-store box of 16 rows x 128 bytes (64 half / 32 fp32 columns),
// 128-byte swizzled.
constexpr int kStoreRows = 16;
constexpr int kStoreBoxBytes = kStoreRows * 128;
// 32 KB for 8 consumer warps (128-row tiles) with 2 buffers, 16 KB for 4.
constexpr int store_bytes_of(int bm, int bufs) { return bm / 64 * 4 * bufs * kStoreBoxBytes; }
// Dynamic shared memory: the ring of kStages stages, the store buffers, 1 KB of slack to align both to 1024
// bytes (the swizzle atom), and the mbarriers (two a stage).
constexpr int kMaxSmemBytes = kSm90SmemBytes;  // dynamic shared memory a block may have on sm_90
constexpr int smem_bytes_of(int bm, int bn, bool bk, int stages, int bufs) {
  return stages * stage_bytes_of(bm, bn, bk) + store_bytes_of(bm, bufs) + 1024 + 2 * 8 * stages;
}
// A row's staging buffers, as its table stages with a k-contiguous B leave room for.
template <int BM, int BN, int kStages>
constexpr int store_bufs() {
  return smem_bytes_of(BM, BN, true, kStages, 2) <= kMaxSmemBytes ? 2 : 1;
}
// The ring's depth: the table row's stages (4 x 48 KB for 128x256 and 192x192, 4 x 40 KB for 128x192, 4 x 36 KB
// for 128x160, 6 x 32 KB for 128x128, 6 x 28 KB for 128x96, 6 x 25 KB for the swap-AB row's 128 x 72, 8 x 24 KB
// for 128x64, 12 x 16 KB for 64x64, 10 x 20 KB for 64x96), sized for a k-contiguous B (x @ W.t()'s layout);
// fewer where an n-contiguous B's whole 64-column boxes make a stage larger and they do not fit (64x96: 8 x 24
// KB). Deeper rings paid only on 64x96 (H200, bf16, kernel time with cold operands, 8 -> 10 stages: x @ W.t()
// 128x2048x5632 11.65 -> 11.38 us, 256x2048x5632 16.45 -> 16.06, 128x4096x14336 47.5 -> 46.2); the swap-AB row at 7
// stages, 128x96 at 7 and 128x160 at 5 moved by -5% to +4% on ViT-B/16's products, about nothing.
constexpr int ring_stages_of(int bm, int bn, bool bk, int stages, int bufs) {
  return stages <= 1 || smem_bytes_of(bm, bn, bk, stages, bufs) <= kMaxSmemBytes
             ? stages
             : ring_stages_of(bm, bn, bk, stages - 1, bufs);
}
template <int BM, int BN, int kStages, bool kBK>
constexpr int ring_stages() {
  return ring_stages_of(BM, BN, kBK, kStages, store_bufs<BM, BN, kStages>());
}
template <int BM, int BN, int kStages, bool kBK>
constexpr int smem_bytes() {
  return smem_bytes_of(BM, BN, kBK, kStages, store_bufs<BM, BN, kStages>());
}

// Split-K reduced in the kernel (split_reduce_way's Kernel, split_reduce.cu: where every slice is a block of one
// wave, C takes the TMA store and the hand-over costs less than a second pass): the blocks of slices 1.. store
// their raw fp32 sums in `sums` (a slot of BM x BN floats per slice past the first, batch and tile, in the
// accumulators' own thread order: each float4 written by the thread that reads it back) and add their
// consumer warps into ready[batch x tile] (zeroed by the host); the block of slice 0 waits until every other
// slice's warps have, adds their sums to its own in slice order (the same inputs give bitwise the same output
// every call) and runs the epilogue: bias, activation and the store, once.
// `ready` nullptr: no slices, or slabs that a second pass reduces (GemmArgs::partial).
struct SliceSums {
  float* sums;
  unsigned* ready;
};

#ifdef TILELAB_HOPPER_DEVICE
// ---- the in-kernel split-K hand-over (SliceSums): a release by one lane after its warp's stores (the warp's
// __syncwarp orders them before it), an acquire by every lane before its loads.
__device__ __forceinline__ void arrive_release(unsigned* counter) {
  asm volatile("fence.acq_rel.gpu;\nred.relaxed.gpu.global.add.u32 [%0], 1;\n" ::"l"(counter) : "memory");
}
__device__ __forceinline__ unsigned load_acquire(const unsigned* counter) {
  unsigned v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(counter) : "memory");
  return v;
}

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

// ---- TMA store: one box of shared memory into a 3-D tensor map (contiguous dim, rows, batch);
// elements outside the tensor are not written. Bulk groups: wait_read<N> returns once all but the
// N most recent groups of this thread have read their shared memory (the buffer may be reused).
__device__ __forceinline__ void tma_store(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(src), "r"(c0), "r"(c1), "r"(c2)
               : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
// Asks for a tensor map (a __grid_constant__ kernel parameter) to be brought into the TMA unit's descriptor cache
// now, so that its first copy does not wait for the fetch.
__device__ __forceinline__ void prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
// Shared-memory writes by the threads (generic proxy) made visible to the TMA (async proxy).
__device__ __forceinline__ void fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

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

// The accumulator operand lists: "%0,...,%31" up to "%0,...,%127".
#define TILELAB_WG_REGS32                                                 \
  "%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,"                \
  "%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31"
#define TILELAB_WG_REGS64                                                 \
  TILELAB_WG_REGS32 ","                                                   \
  "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,"      \
  "%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63"
#define TILELAB_WG_REGS96                                                              \
  TILELAB_WG_REGS64 ","                                                                \
  "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,"                   \
  "%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95"
#define TILELAB_WG_REGS128                                                             \
  TILELAB_WG_REGS96 ","                                                                \
  "%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,"       \
  "%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127"
#define TILELAB_WG_REGS48 \
  TILELAB_WG_REGS32 ","   \
  "%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47"
#define TILELAB_WG_REGS36 \
  TILELAB_WG_REGS32 ",%32,%33,%34,%35"
#define TILELAB_WG_REGS80 \
  TILELAB_WG_REGS64 ","   \
  "%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79"
#define TILELAB_F8(d, i) \
  "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define TILELAB_F32(d, i) TILELAB_F8(d, i), TILELAB_F8(d, i + 8), TILELAB_F8(d, i + 16), TILELAB_F8(d, i + 24)
#define TILELAB_F64(d, i) TILELAB_F32(d, i), TILELAB_F32(d, i + 32)
#define TILELAB_F16(d, i) TILELAB_F8(d, i), TILELAB_F8(d, i + 8)
#define TILELAB_F4(d, i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
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
    static_assert(BN == 128 || BN == 192 || BN == 256, "hopper: TF32 rows are 128, 192 or 256 wide");
    if constexpr (BN == 256)
      TILELAB_WGMMA_TF32(256, TILELAB_WG_REGS128, 128, 129, 130, TILELAB_F64(d, 0), TILELAB_F64(d, 64));
    else if constexpr (BN == 192)
      TILELAB_WGMMA_TF32(192, TILELAB_WG_REGS96, 96, 97, 98, TILELAB_F64(d, 0), TILELAB_F32(d, 64));
    else
      TILELAB_WGMMA_TF32(128, TILELAB_WG_REGS64, 64, 65, 66, TILELAB_F64(d, 0));
  } else if constexpr (BN == 256) {
    if constexpr (kBf16)
      TILELAB_WGMMA(256, "bf16", TILELAB_WG_REGS128, 128, 129, 130, 131, 132, TILELAB_F64(d, 0), TILELAB_F64(d, 64));
    else
      TILELAB_WGMMA(256, "f16", TILELAB_WG_REGS128, 128, 129, 130, 131, 132, TILELAB_F64(d, 0), TILELAB_F64(d, 64));
  } else if constexpr (BN == 192) {
    if constexpr (kBf16)
      TILELAB_WGMMA(192, "bf16", TILELAB_WG_REGS96, 96, 97, 98, 99, 100, TILELAB_F64(d, 0), TILELAB_F32(d, 64));
    else
      TILELAB_WGMMA(192, "f16", TILELAB_WG_REGS96, 96, 97, 98, 99, 100, TILELAB_F64(d, 0), TILELAB_F32(d, 64));
  } else if constexpr (BN == 160) {
    if constexpr (kBf16)
      TILELAB_WGMMA(160, "bf16", TILELAB_WG_REGS80, 80, 81, 82, 83, 84, TILELAB_F64(d, 0), TILELAB_F16(d, 64));
    else
      TILELAB_WGMMA(160, "f16", TILELAB_WG_REGS80, 80, 81, 82, 83, 84, TILELAB_F64(d, 0), TILELAB_F16(d, 64));
  } else if constexpr (BN == 128) {
    if constexpr (kBf16)
      TILELAB_WGMMA(128, "bf16", TILELAB_WG_REGS64, 64, 65, 66, 67, 68, TILELAB_F64(d, 0));
    else
      TILELAB_WGMMA(128, "f16", TILELAB_WG_REGS64, 64, 65, 66, 67, 68, TILELAB_F64(d, 0));
  } else if constexpr (BN == 96) {
    if constexpr (kBf16)
      TILELAB_WGMMA(96, "bf16", TILELAB_WG_REGS48, 48, 49, 50, 51, 52, TILELAB_F32(d, 0), TILELAB_F16(d, 32));
    else
      TILELAB_WGMMA(96, "f16", TILELAB_WG_REGS48, 48, 49, 50, 51, 52, TILELAB_F32(d, 0), TILELAB_F16(d, 32));
  } else if constexpr (BN == 72) {
    if constexpr (kBf16)
      TILELAB_WGMMA(72, "bf16", TILELAB_WG_REGS36, 36, 37, 38, 39, 40, TILELAB_F32(d, 0), TILELAB_F4(d, 32));
    else
      TILELAB_WGMMA(72, "f16", TILELAB_WG_REGS36, 36, 37, 38, 39, 40, TILELAB_F32(d, 0), TILELAB_F4(d, 32));
  } else {
    static_assert(BN == 64, "hopper: BN is 64, 72, 96, 128, 160, 192 (half precision) or 256");
    if constexpr (kBf16)
      TILELAB_WGMMA(64, "bf16", TILELAB_WG_REGS32, 32, 33, 34, 35, 36, TILELAB_F32(d, 0));
    else
      TILELAB_WGMMA(64, "f16", TILELAB_WG_REGS32, 32, 33, 34, 35, 36, TILELAB_F32(d, 0));
  }
}
#undef TILELAB_WGMMA
#undef TILELAB_WGMMA_TF32
#undef TILELAB_F64
#undef TILELAB_F32
#undef TILELAB_F16
#undef TILELAB_F4
#undef TILELAB_F8
#undef TILELAB_WG_REGS128
#undef TILELAB_WG_REGS96
#undef TILELAB_WG_REGS64
#undef TILELAB_WG_REGS32
#undef TILELAB_WG_REGS80
#undef TILELAB_WG_REGS48
#undef TILELAB_WG_REGS36

#endif  // TILELAB_HOPPER_DEVICE

// act(x) in the epilogue of a half-precision output, cheap enough to leave the tensor cores little idle time:
// the SFU's exponential (ex2.approx) and reciprocal (rcp.approx, or __fdividef) and a few FMAs, a few fp32 ulp
// from the exact function, far below one rounding to bf16/fp16. activate()'s IEEE division, expf and tanhf kept
// the tensor cores idle ~5 us a 128x256 tile (H200, bf16 4096x2048x5632 with SiLU: 0.196 ms against 0.155
// without an activation); erff ~2x the fast tanh GELU's cost (12608x768x3072: 0.141 ms against 0.098
// without). ReLU is activate()'s; fp32 outputs (the TF32 rows) keep activate() throughout.
//   silu       x / (1 + exp(-x))
//   gelu_tanh  x / (1 + exp(-2u)), u the tanh argument (x * sigmoid(2u): the same function)
//   gelu       x * Phi(x), Phi(x) = 1 - q for x >= 0 and q for x < 0, q = erfc(|x| / sqrt 2) / 2 written as
//              t * 2^(P(t) - x^2 log2(e) / 2), t = 1 / (1 + 0.35 |x| / sqrt 2), P a degree-6 polynomial fitted
//              to erfc's relative error (<= 2.3e-7 for |x| / sqrt 2 <= 4.5; beyond, q < 1e-10). Computed from
//              the tail, q has a small relative error where Phi is small (erf's 1 + erf(x) cancels there).
// Where the exponential overflows the result is the limit (0, or x), never NaN.
#ifdef TILELAB_HOPPER_DEVICE
__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float rcp_approx(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#endif
template <Activation kAct>
__device__ __forceinline__ float activate_fast(float x) {
#ifdef TILELAB_HOPPER_DEVICE
  if constexpr (kAct == Activation::Silu) {
    return __fdividef(x, 1.0f + __expf(-x));
  } else if constexpr (kAct == Activation::GeluTanh) {
    const float u = 0.79788456080286535588f * (x + 0.044715f * x * x * x);
    return __fdividef(x, 1.0f + __expf(-2.0f * u));
  } else if constexpr (kAct == Activation::Gelu) {
    const float t = rcp_approx(fmaf(fabsf(x), 0.24748736619949341f, 1.0f));
    // P(t) in log2 units, minus 1 for the halving (benchmarks/tools/fit_gelu.py prints them and their error).
    float p = 0.5489960312843323f;
    p = fmaf(p, t, -2.1902811527252197f);
    p = fmaf(p, t, 2.896294355392456f);
    p = fmaf(p, t, -1.5653661489486694f);
    p = fmaf(p, t, 1.338144302368164f);
    p = fmaf(p, t, 1.3005949258804321f);
    p = fmaf(p, t, -3.3283820152282715f);
    const float q = t * ex2_approx(fmaf(x * x, -0.72134752044448170368f, p));
    return x * (x >= 0.0f ? 1.0f - q : q);
  } else {
    return activate(kAct, x);
  }
#else
  return activate(kAct, x);
#endif
}

// Calls f(std::integral_constant<Activation, a>{}) for the run-time activation a: one uniform branch a tile, into
// code compiled for that activation (a run-time switch per element made the kernel 2.3x slower, README).
template <typename F>
__device__ __forceinline__ void with_activation(Activation act, F&& f) {
  using A = Activation;
  switch (act) {
    case A::Relu: f(std::integral_constant<A, A::Relu>{}); break;
    case A::Gelu: f(std::integral_constant<A, A::Gelu>{}); break;
    case A::GeluTanh: f(std::integral_constant<A, A::GeluTanh>{}); break;
    case A::Silu: f(std::integral_constant<A, A::Silu>{}); break;
    default: f(std::integral_constant<A, A::None>{}); break;
  }
}

// act(x) for every accumulator, one unrolled loop per activation.
template <bool kFast, int R>
__device__ __forceinline__ void activate_all(Activation act, float (&d)[R]) {
  with_activation(act, [&](auto a) {
    constexpr Activation kAct = decltype(a)::value;
    if constexpr (kAct != Activation::None) {
#pragma unroll
      for (int i = 0; i < R; ++i) d[i] = kFast ? activate_fast<kAct>(d[i]) : activate(kAct, d[i]);
    }
  });
}

// The gated epilogue (kGated): accumulator columns [0, BN / 2) of a tile hold x @ w_gate^T and [BN / 2, BN)
// x @ w_up^T for the same BN / 2 output columns (the producer loads BN / 2 rows of each weight into one B
// stage). A thread holds columns 8q + 2t, 8q + 2t + 1 of both row halves in d[4q..4q + 3], so group q's gate
// and group q + BN / 16's up are its own registers: act(gate) * up into the first half, no shuffle.
template <int R>
__device__ __forceinline__ void gate_all(Activation act, float (&d)[R]) {
  with_activation(act, [&](auto a) {
#pragma unroll
    for (int i = 0; i < R / 2; ++i) d[i] = activate_fast<decltype(a)::value>(d[i]) * d[i + R / 2];
  });
}

// The named barriers of the ping-pong order (0 is __syncthreads'): consumer
// warpgroup c may start a tile's MMAs once barrier kOrderBar + c completes, i.e.
// once the other warpgroup has finished the MMAs of its previous tile.
constexpr int kOrderBar = 1;
#ifdef TILELAB_HOPPER_DEVICE
__device__ __forceinline__ void bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// A consumer warp's first epilogue box: warp `warp` of consumer warpgroup `c`, `bufs` boxes each.
__device__ __forceinline__ uint32_t warp_boxes(uint32_t staging, int c, int warp, int bufs) {
  return staging + ((c * 4 + warp) * bufs) * kStoreBoxBytes;
}
// Where in its row g of a 128-byte-swizzled box of kSize-byte elements lane (g, t) puts its first pair, columns
// 2t and 2t + 1 (the row's 16-byte chunk ch at (ch ^ g % 8) * 16: the TMA's 128-byte swizzle). Row g starts at
// g * 128, row g + 8 at (g + 8) * 128; group qq's columns are an XOR with qq * 8 * kSize.
template <int kSize>
__device__ __forceinline__ uint32_t swizzled_pair(int g, int t) {
  return ((((2 * t * kSize) >> 4) ^ g) << 4) | ((2 * t * kSize) & 15);
}
// Two adjacent outputs into an epilogue box at shared address `at`, as T: fp32 8 bytes, half one 32-bit word.
template <typename T>
__device__ __forceinline__ void stage_pair(uint32_t at, float x, float y) {
  if constexpr (std::is_same_v<T, float>) {
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(at), "f"(x), "f"(y) : "memory");
  } else {
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(pack_pair<T>(x, y)) : "memory");
  }
}
#endif

// The epilogue a hopper_kernel instantiation carries: the host picks one per product (launch_layouts in
// launch_hopper.cu), so each kernel holds the code of one store path only.
//   Tma: the TMA-store epilogue, no activation code;
//   TmaActivation: the same with the activations (and the gated and pre-activation stores);
//   Registers: no TMA store (C's rows not 16-byte aligned, a per-element bias, split-K slabs), no activation:
//     unaligned C through shared memory a row at a time, the others from registers.
// One kernel with every path ran them from a run-time flag: 131 KB of SASS for 128 x 160 against 35 KB with the
// TMA store only, and the code a plain x @ W.t() ran sat at both ends of it (the main loop's wgmma at 0x40f0, the
// store at 0x11950). Behind a model's other kernels that cost it 9% (H200, ViT-B/16's fc1 1576 x 768 x 3072 + bias
// between a layer norm, SDPA, a GELU and another product: 16.30 -> 17.79 us against 16.02 -> 16.33 with the TMA
// store only).
enum class Store { Tma, TmaActivation, Registers };

}  // namespace hopper

// kAK: A is k-contiguous (row-major); kBK: B is k-contiguous (column-major).
// kStore: the one store path the kernel carries (hopper::Store above).
// map_a / map_b: 3-D TMA maps (contiguous dim, rows, batch) built by the host
// with 64-element boxes and the 128-byte swizzle; a_batch / b_batch: 1 if the
// operand has a batch dimension, 0 if one matrix serves every batch.
//
// Persistent (PersistentGrouped): the grid has at most one block per SM and a
// block walks its tiles of the whole (split, batch, m, n) list. The producer
// runs ahead across tile boundaries (its ring position `it` counts k-tiles
// over all the block's tiles), so the next tile's stages load while the
// consumers finish the last tile's MMAs and store it: no pipeline fill per tile.
// kPingPong selects how the two consumer warpgroups share the work:
//   cooperative (false): both work on every tile, 64 rows each (BN / 2
//     accumulators a thread: 128 for the 128 x 256 rows);
//   ping-pong (true): each computes whole 128 x BN tiles (two m64 wgmma per
//     k16 slice), the two alternating over the block's tiles; their MMAs take
//     turns (named barriers kOrderBar + c), so one's epilogue runs under the
//     other's MMAs.
//
// Epilogue: the column bias (loaded before the tile's MMAs; TF32: a share a lane) is
// added to the accumulators; then, in the TMA-store kernels (kStore Tma or TmaActivation: the host made a map
// of C, whose rows and batches are 16-byte aligned, no per-element bias, no slabs for a second pass), the
// activation p.act is applied in fp32 (TmaActivation) and each warp converts its rows to T in
// two shared-memory boxes of 16 x 128 bytes, alternately (one, reused, for the
// 192-row tiles: store_bufs), and the TMA writes
// them (clipped at M and N, asynchronously: the warp goes on to its next tile
// while the writes drain). The Registers kernels write C's unaligned rows from the same boxes, a row an
// instruction, and a per-element bias or a split-K slab from registers.
//
// Split-K (p.splits > 1): into slabs that split_reduce.cu adds (p.partial), or,
// with `fix` set, reduced here: the block of slice 0 adds the other slices'
// sums before its epilogue (SliceSums).
//
// kSwap (swap-AB, the hopper_swap rows): the launcher hands over the transposed product, C^T = B^T A^T
// (p's A is the caller's B, p's M the caller's N, p's bias strides swapped), so the tile's BN columns run
// along the caller's rows: wgmma's N, which steps by 8, sizes the tile along M (72 rows: 1576 tokens in 22
// tiles), where its M steps by 64. The tile is stored transposed: C^T(m, n) is C[n][m] at c + n * sc_m + m
// (a split-K slice's slab likewise, rows of p.M). Through the TMA, each warp turns its 16 x BN accumulators
// into a BN x 16 box of C (32-byte rows, unswizzled), pairing adjacent C columns across lanes with a shuffle.
//
// kGated (tiled_gated_linear: C = act(A @ B) * (A @ B2), both B k-contiguous weights of the same shape): a tile
// is BM x BN / 2 of C. Its B stage holds BN / 2 rows of B (map_b) and, after them, the same BN / 2 rows of B2
// (map_b2; both maps' boxes are BN / 2 rows), so one BN-wide wgmma computes both products for those columns;
// the epilogue multiplies them (gate_all) and stores the BN / 2 columns through the TMA. Cooperative 128-row
// or 64-row tiles, half precision, no bias, no split-K, Store::TmaActivation (the host checks: gated_plan, host.cpp).
//
// kAux (tiled_linear's training path: linear_pre_cuda in host.cpp, hopper_aux_ok in launch_hopper.cu): the
// TMA-store epilogue stores each tile twice, first the value before the activation (bias added) through
// map_aux (a tile's narrow last box through map_aux_tail), which autograd saves for the activation's backward,
// then act(value) through map_c: the activation's own pass over the output (read it, write act of it) is gone.
template <typename T, int BM, int BN, int kStages, bool kAK, bool kBK, bool kPingPong, bool kSwap, hopper::Store kStore,
          bool kGated = false, bool kAux = false>
__global__ void __launch_bounds__(hopper::threads<BM>(), 1)
    hopper_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                  const __grid_constant__ CUtensorMap map_b2, const __grid_constant__ CUtensorMap map_c,
                  const __grid_constant__ CUtensorMap map_c_tail, const __grid_constant__ CUtensorMap map_aux,
                  const __grid_constant__ CUtensorMap map_aux_tail, GemmArgs<T> p, int a_batch, int b_batch,
                  hopper::SliceSums fix) {
#ifdef TILELAB_HOPPER_DEVICE
  using namespace hopper;
  static_assert(smem_bytes<BM, BN, kStages, kBK>() <= kMaxSmemBytes, "hopper: the ring must fit in shared memory");
  static_assert(!kPingPong || (BN <= 128 && BM == 128),
                "hopper: a ping-pong warpgroup holds a whole 128-row tile (BN / 2 * 2 floats)");
  constexpr int kStageBytes = stage_bytes_of(BM, BN, kBK);
  constexpr int kABytes = BM * 128;
  constexpr int kConsumerWarps = 4 * consumer_groups<BM>();
  constexpr int kBufs = store_bufs<BM, BN, kStages>();  // staging buffers a consumer warp
  constexpr int kTileK = tile_k<T>();  // also a box's extent along its contiguous dimension
  static_assert(BN % 8 == 0 && (BN % 64 == 0 || sizeof(T) == 2), "hopper: BN a multiple of 8; of 64 for TF32");
  static_assert(!kSwap || (sizeof(T) == 2 && BM == 128 && !kPingPong && BN * 32 <= kBufs * kStoreBoxBytes),
                "hopper: swap-AB rows are half precision, cooperative 128-row tiles, a BN x 16 box a warp");
  // B's boxes: one of BN rows (k-contiguous), or BN / 64 rounded up of 64 columns (n-contiguous; the TMA
  // fills the whole box, so the stage's expected bytes count whole boxes).
  constexpr int kBBoxes = (BN + kTileK - 1) / kTileK;
  // The bytes a stage's boxes bring (A's box may be shorter than BM rows: a_box_rows).
  const uint32_t tx_bytes =
      (kAK ? a_box_rows(BM, p.M) * 128 : kABytes) + (kBK ? BN * 128 : kBBoxes * kBoxBytes);
  constexpr int kHalves = kPingPong ? 2 : 1;  // m64 halves of the tile one consumer warpgroup computes
  static_assert(!kGated || (sizeof(T) == 2 && kAK && kBK && !kPingPong && !kSwap && BN % 16 == 0),
                "hopper: gated tiles are half precision, k-contiguous, cooperative, BN / 2 a multiple of 8");
  constexpr int kOutN = kGated ? BN / 2 : BN;  // columns of C a tile holds
  static_assert(!kAux || (!kGated && !kSwap), "hopper: the pre-activation store is for ordinary tiles");
  constexpr bool kStoreC = kStore != Store::Registers;         // C through the TMA
  constexpr bool kActivate = kStore == Store::TmaActivation;  // the activation code compiled in
  static_assert(kActivate || (!kGated && !kAux), "hopper: the gated and pre-activation stores activate");
  static_assert(sizeof(T) == 2 || (std::is_same_v<T, float> && kAK && kBK),
                "hopper: 16-bit inputs, or k-contiguous fp32 (TF32)");

  extern __shared__ __align__(1024) unsigned char hp_smem[];
  // The swizzle pattern repeats every 1024 bytes: align the ring to it.
  const uint32_t raw = smem_u32(hp_smem);
  const uint32_t ring = (raw + 1023) & ~1023u;
  const uint32_t staging = ring + kStages * kStageBytes;  // the epilogue's boxes (1024-byte aligned)
  const uint32_t bars = staging + store_bytes_of(BM, kBufs);  // full[s] at bars + 8s, empty[s] at bars + 8(kStages + s)
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (kStages + s); };
  // A stage is released by every consumer warp that read it: both warpgroups'
  // (cooperative) or the one warpgroup's whose tile it holds (ping-pong).
  constexpr int kReleases = kPingPong ? kConsumerWarps / 2 : kConsumerWarps;

  // The warpgroup index through a shuffle: the compiler then knows it is the same across a warp, and keeps what
  // derives from it (the wgmma descriptors) in uniform registers.
  const int tid = threadIdx.x, wg = __shfl_sync(0xffffffffu, tid / 128, 0);
  if (tid == 0) {
    // The tensor maps this kernel uses, fetched while the barriers are set up (H200, bf16, the 42 products of
    // GPT-2 1 x 128, the Llama-style 1 x 128 and ViT-B/16 batch 8, kernel durations over a CUDA graph, W cold:
    // 0.7% less time, geometric mean; 128-token products 1-3%, e.g. 0.10 us of GPT-2's 768x128x768 dW's 3.19).
    prefetch_map(&map_a);
    prefetch_map(&map_b);
    if constexpr (kGated) prefetch_map(&map_b2);
    if constexpr (kStoreC) {
      prefetch_map(&map_c);
      if constexpr (!kSwap && store_tail_cols<T, kOutN>() > 0) prefetch_map(&map_c_tail);
      if constexpr (kAux) prefetch_map(&map_aux);
    }
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full(s), 1);            // the producer's expect_tx arrival (+ the bytes)
      mbar_init(empty(s), kReleases);   // one arrival per consumer warp
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  // In-kernel split-K: the slices from the last to the first, so slice 0's block, which waits, comes last.
  const PersistentGrouped<kGroupM> sched(p.M, p.N, BM, kOutN, (p.K + kTileK - 1) / kTileK, p.splits, p.batch,
                                         fix.ready != nullptr);

  if (wg == 0) {
    // ---------------- producer: every tile of the block, in order; `it` is the ring position.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    if (tid == 0) {
      int it = 0;
      for (int64_t i = blockIdx.x; i < sched.count; i += gridDim.x) {
        const WorkTile w = sched.at(i);
        const int m0 = w.tm * BM, n0 = w.tn * kOutN;
        const int za = a_batch ? w.batch : 0, zb = b_batch ? w.batch : 0;
        for (int kt = w.k_begin; kt < w.k_end; ++kt, ++it) {
          const int s = it % kStages;
          if (it >= kStages) mbar_wait(empty(s), ((it / kStages) + 1) & 1);
          const uint32_t sa = ring + s * kStageBytes, sb = sa + kABytes;
          mbar_expect_tx(full(s), tx_bytes);
          const int k0 = kt * kTileK;
          if constexpr (kAK) {
            tma_load(sa, &map_a, full(s), k0, m0, za);
          } else {
#pragma unroll
            for (int j = 0; j < BM / kTileK; ++j)
              tma_load(sa + j * kBoxBytes, &map_a, full(s), m0 + j * kTileK, k0, za);
          }
          if constexpr (kGated) {  // BN / 2 rows of each weight, the same columns of C
            tma_load(sb, &map_b, full(s), k0, n0, zb);
            tma_load(sb + kOutN * 128, &map_b2, full(s), k0, n0, zb);
          } else if constexpr (kBK) {
            tma_load(sb, &map_b, full(s), k0, n0, zb);
          } else {
#pragma unroll
            for (int j = 0; j < kBBoxes; ++j)
              tma_load(sb + j * kBoxBytes, &map_b, full(s), n0 + j * kTileK, k0, zb);
          }
        }
      }
    }
  } else {
    // ---------------- consumers
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(consumer_regs<BM>()));
    const int c = wg - 1;  // cooperative: which 64 rows of every tile; ping-pong: which tiles (every other)
    const int warp = (tid / 32) % 4, lane = tid % 32;
    const int g = lane / 4, t = lane % 4;
    const bool vec = vector_ok<2>(p);
    // Per k16 slice: k-contiguous operands advance 32 bytes along the swizzled row,
    // m/n-contiguous ones 16 rows of 128 bytes.
    constexpr uint32_t kStepA = kAK ? 32 : 16 * 128, kStepB = kBK ? 32 : 16 * 128;
    constexpr uint32_t kLboA = kAK ? 16 : kBoxBytes, kLboB = kBK ? 16 : kBoxBytes;
    float d[kHalves][BN / 2];

    int it = 0;   // the ring position of this tile's first k-tile
    int j = 0;    // the block's tile count so far
    int box = 0;  // the warp's staging buffer for its next TMA-store box (two alternate; one: always 0)
    for (int64_t i = blockIdx.x; i < sched.count; i += gridDim.x, ++j) {
      const WorkTile w = sched.at(i);
      const int ktiles = w.k_end - w.k_begin;
      if (kPingPong && (j % 2) != c) {  // the other warpgroup's tile: only its ring slots
        it += ktiles;
        continue;
      }
      // The tile's column bias is loaded now and arrives during the MMAs (loaded after them it costs a memory
      // round trip a tile: ~10% of a K = 768 half tile, 2.3 us of a TF32 128x256 one). Half precision: the
      // thread's own columns, packed in pairs (exact: its elements are T), BN / 8 registers. TF32: a warp's lanes
      // share it, BN / 32 floats a lane (the thread's own columns would take BN / 4 registers): lane (g, t) holds
      // columns 8q + 2t and 8q + 2t + 1 of the groups q = g + 8r, and the epilogue fetches the others' by shuffles.
      constexpr bool kPreloadBias = sizeof(T) == 2;
      constexpr int kBiasShare = kPreloadBias ? 1 : BN / 32;
      uint32_t bias_pairs[kPreloadBias ? BN / 8 : 1];
      float bias_share[kBiasShare];
      if constexpr (!kPreloadBias) {
        if (column_bias(p)) {
#pragma unroll
          for (int r = 0; r < BN / 64; ++r) {
            const int n = w.tn * BN + 8 * (g + 8 * r) + 2 * t;
            bias_share[2 * r] = column_bias_at(p, w.batch, n);
            bias_share[2 * r + 1] = column_bias_at(p, w.batch, n + 1);
          }
        }
      }
      if constexpr (kPreloadBias) {
        if (column_bias(p)) {
          const int n0 = w.tn * BN;
          const T* brow = p.bias + w.batch * p.sbias_b + n0 + 2 * t;
          if (p.sbias_n == 1 && n0 + BN <= p.N && reinterpret_cast<uintptr_t>(brow) % 4 == 0) {
            // A contiguous, aligned bias of an interior tile: one 32-bit load per pair, nothing waits on
            // it before the epilogue.
#pragma unroll
            for (int q = 0; q < BN / 8; ++q) bias_pairs[q] = __ldg(reinterpret_cast<const unsigned int*>(brow + 8 * q));
          } else {
#pragma unroll
            for (int q = 0; q < BN / 8; ++q) {
              const int n = n0 + 8 * q + 2 * t;
              bias_pairs[q] = pack_pair<T>(column_bias_at(p, w.batch, n), column_bias_at(p, w.batch, n + 1));
            }
          }
        }
      }
      if (kPingPong && j > 0) bar_sync(kOrderBar + c, 256);  // the other warpgroup's MMAs are done

#pragma unroll
      for (int h = 0; h < kHalves; ++h)
#pragma unroll
        for (int q = 0; q < BN / 2; ++q) d[h][q] = 0.0f;

      for (int kt = 0; kt < ktiles; ++kt, ++it) {
        const int s = it % kStages;
        mbar_wait(full(s), (it / kStages) & 1);
        const uint32_t stage = ring + s * kStageBytes;
        // The stage's descriptors, once: a k16 slice's is the same plus its offset in 16-byte units (the start
        // address field cannot carry: the ring lies below 256 KB).
        const uint64_t desc_b = make_desc(stage + kABytes, kLboB, 1024);
        // The m64 half h (ping-pong) or c (cooperative) of A starts h or c times 8 KB into the stage, in both A
        // layouts.
        const uint64_t desc_a = make_desc(stage + (kPingPong ? 0 : c) * kBoxBytes, kLboA, 1024);
#pragma unroll
        for (int h = 0; h < kHalves; ++h) fence_regs(d[h]);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk) {  // 4 x 32 bytes of K
#pragma unroll
          for (int h = 0; h < kHalves; ++h)
            wgmma<T, BN, kAK ? 0 : 1, kBK ? 0 : 1>(d[h], desc_a + ((h * kBoxBytes + kk * kStepA) >> 4),
                                                    desc_b + ((kk * kStepB) >> 4));
        }
        wgmma_commit();
        // Keep this k-tile's group in flight; the previous one is done, so its stage is free.
        wgmma_wait<1>();
#pragma unroll
        for (int h = 0; h < kHalves; ++h) fence_regs(d[h]);
        if (kt > 0 && lane == 0) mbar_arrive(empty((it - 1) % kStages));
      }
      wgmma_wait<0>();
#pragma unroll
      for (int h = 0; h < kHalves; ++h) fence_regs(d[h]);
      if (ktiles > 0 && lane == 0) mbar_arrive(empty((it - 1) % kStages));  // the tile's last stage
      // Ping-pong: the other warpgroup may start its next tile's MMAs (if the block has one for it).
      if (kPingPong && i + gridDim.x < sched.count) bar_arrive(kOrderBar + (1 - c), 256);

      if (kStoreC && fix.ready != nullptr) {
        // In-kernel split-K (SliceSums): a tile's consumer threads (both warpgroups cooperative, one ping-pong),
        // each float4 of a slot at (h, q4) x threads + the thread's index, so a warp's stores and loads are
        // 512 contiguous bytes.
        constexpr int kTileThreads = kPingPong ? 128 : kConsumerWarps * 32;
        constexpr int kQuads = BN / 8;  // float4s of one m64 half's accumulators
        const int ti = (kPingPong ? 0 : c * 128) + tid % 128;
        const int64_t tile = static_cast<int64_t>(w.batch) * sched.per_layer +
                             static_cast<int64_t>(w.tm) * sched.tiles_n + w.tn;
        const auto slot = [&](int split) {
          return reinterpret_cast<float4*>(fix.sums) +
                 (static_cast<int64_t>(split - 1) * sched.batch * sched.per_layer + tile) * (BM * BN / 4) + ti;
        };
        if (w.split > 0) {
          float4* dst = slot(w.split);
#pragma unroll
          for (int h = 0; h < kHalves; ++h)
#pragma unroll
            for (int q4 = 0; q4 < kQuads; ++q4)
              __stcg(dst + (h * kQuads + q4) * kTileThreads,
                     make_float4(d[h][4 * q4], d[h][4 * q4 + 1], d[h][4 * q4 + 2], d[h][4 * q4 + 3]));
          __syncwarp();
          if (lane == 0) arrive_release(fix.ready + tile);
          continue;
        }
        // Every lane polls, until the whole warp has seen the count (a warp-uniform loop: a loop of one lane
        // here cost the main loop its uniform registers, 4-14% of the kernel's time).
        const unsigned want = static_cast<unsigned>(p.splits - 1) * (kTileThreads / 32);
        while (__any_sync(0xffffffffu, load_acquire(fix.ready + tile) < want)) {
        }
        for (int s = 1; s < p.splits; ++s) {
          const float4* src = slot(s);
#pragma unroll
          for (int h = 0; h < kHalves; ++h)
#pragma unroll
            for (int q4 = 0; q4 < kQuads; ++q4) {
              const float4 v = __ldcg(src + (h * kQuads + q4) * kTileThreads);
              d[h][4 * q4] += v.x, d[h][4 * q4 + 1] += v.y, d[h][4 * q4 + 2] += v.z, d[h][4 * q4 + 3] += v.w;
            }
        }
      }

      // Epilogue. Thread layout of a 64 x BN wgmma accumulator: warp w owns rows
      // 16w..16w+15; lane (g = lane/4, t = lane%4) holds, for every 8-column
      // group q, (g, 8q+2t), (g, 8q+2t+1), (g+8, 8q+2t), (g+8, 8q+2t+1).
      const int m0 = w.tm * BM, n0 = w.tn * kOutN, bz = w.batch;
      GemmArgs<T> out = p;
      if (column_bias(p)) {  // columns 8q+2t, 8q+2t+1 of both rows
#pragma unroll
        for (int q = 0; q < BN / 8; ++q) {
          float b0, b1;
          if constexpr (kPreloadBias) {
            unpack_pair<T>(bias_pairs[q], b0, b1);
          } else {  // group q's pair from lane (q % 8, t), its share r = q / 8
            b0 = __shfl_sync(0xffffffffu, bias_share[2 * (q / 8)], (q % 8) * 4 + t);
            b1 = __shfl_sync(0xffffffffu, bias_share[2 * (q / 8) + 1], (q % 8) * 4 + t);
          }
#pragma unroll
          for (int h = 0; h < kHalves; ++h)
            d[h][4 * q] += b0, d[h][4 * q + 1] += b1, d[h][4 * q + 2] += b0, d[h][4 * q + 3] += b1;
        }
        out.bias = nullptr;
      }
      if constexpr (kSwap) {
        // This warp's 16 rows of C^T are 16 adjacent columns of C.
        const int mrow = m0 + c * 64 + warp * 16;
        if constexpr (kStoreC) {
          // The host picks a TMA-store kernel only where a bias left in out.bias runs along C's columns (F.linear's):
          // along these rows, two values a thread.
          float rb[2] = {0.0f, 0.0f};
          if (out.bias != nullptr) {
#pragma unroll
            for (int r = 0; r < 2; ++r) {
              const int m = mrow + g + 8 * r;
              if (m < p.M) rb[r] = static_cast<float>(out.bias[bz * p.sbias_b + static_cast<int64_t>(m) * p.sbias_m]);
            }
          }
#pragma unroll
          for (int q = 0; q < BN / 8; ++q)
            d[0][4 * q] += rb[0], d[0][4 * q + 1] += rb[0], d[0][4 * q + 2] += rb[1], d[0][4 * q + 3] += rb[1];
          if constexpr (kActivate) activate_all<true>(p.act, d[0]);
          // The warp's box: BN rows (C's rows n0..) of 16 columns (C's columns mrow..), 32 bytes a row, in
          // this warp's two staging buffers (4 KB), free once its last store has read them.
          const uint32_t buf = warp_boxes(staging, c, warp, kBufs);
          if (lane == 0) bulk_wait_read<0>();
          __syncwarp();
          // Lane (g, t) holds C^T(g + 8r, n) and C^T(g + 8r, n + 1), n = 8q + 2t: C[n][g + 8r] and
          // C[n + 1][g + 8r]. Lanes g and g ^ 1 (lane ^ 4) trade one each, so the even lane stores C[n][g, g + 1]
          // and the odd one C[n + 1][g - 1, g] as one 32-bit word each.
          const bool odd = (g & 1) != 0;
#pragma unroll
          for (int q = 0; q < BN / 8; ++q)
#pragma unroll
            for (int r = 0; r < 2; ++r) {
              const float x = d[0][4 * q + 2 * r], y = d[0][4 * q + 2 * r + 1];
              const float other = __shfl_xor_sync(0xffffffffu, odd ? x : y, 4);
              const int row = 8 * q + 2 * t + (odd ? 1 : 0), col = (g & ~1) + 8 * r;
              const uint32_t word = odd ? pack_pair<T>(other, y) : pack_pair<T>(x, other);
              asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(buf + row * 32 + col * 2), "r"(word) : "memory");
            }
          fence_async_smem();
          __syncwarp();
          if (lane == 0) {
            tma_store(&map_c, buf, mrow, n0, bz);
            bulk_commit();
          }
          continue;  // (the register path below is unreachable in this kernel, so not compiled into it)
        }
        // From registers: C[n][m] (row n of C: c_row; of the slab, rows of p.M), each element tested against
        // the edges.
        float* const slab = p.partial != nullptr ? slab_row(p, w.split, bz, 0) : nullptr;
#pragma unroll
        for (int q = 0; q < BN / 8; ++q)
#pragma unroll
          for (int r = 0; r < 2; ++r)
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              const int m = mrow + g + 8 * r, n = n0 + 8 * q + 2 * t + e;
              if (m >= p.M || n >= p.N) continue;
              float v = d[0][4 * q + 2 * r + e];
              if (slab != nullptr) {
                slab[static_cast<int64_t>(n) * p.M + m] = v;
              } else {
                if (out.bias != nullptr)
                  v += static_cast<float>(out.bias[bz * p.sbias_b + static_cast<int64_t>(m) * p.sbias_m +
                                                   static_cast<int64_t>(n) * p.sbias_n]);
                c_row(p, bz, n)[m] = static_cast<T>(v);
              }
            }
        continue;
      }
      if constexpr (kStoreC) {
#pragma unroll 1
        for (int pass = kAux ? 1 : 0; pass >= 0; --pass) {  // kAux: pass 1 stores the pre-activation
          // The activation (TmaActivation: the host picks it only with p.act set): one uniform branch per tile,
          // an unrolled loop per activation. Gated: act(gate) * up into the first kOutN columns.
          if (pass == 0) {
            if constexpr (kGated) {
              gate_all(p.act, d[0]);
            } else if constexpr (kActivate) {
#pragma unroll
              for (int h = 0; h < kHalves; ++h) activate_all<sizeof(T) == 2>(p.act, d[h]);
            }
          }
          // Each warp: its 16 rows of each m64 half, in boxes of 16 rows x kBoxCols columns; element (r, col)
          // of a box at byte r * 128 + ((chunk ^ r % 8) * 16 + within), chunk/within = (col * size) / % 16:
          // the TMA's 128-byte swizzle, which also spreads a fragment's 8 rows over all 32 banks. This
          // thread's rows g and g + 8 (r % 8 = g) and columns 8 qq + 2t: the offset of qq = 0 (tb), and qq's
          // column is an XOR of the address with qq * 8 * size (a multiple of 16, no carry into the row).
          // A tile whose width is not a whole number of boxes (160 = 2 x 64 + 32) ends in a
          // narrower box, written unswizzled (rows of kTailCols elements) and stored through map_c_tail, whose
          // box is that narrow: a full box would overwrite the next tile's first columns.
          constexpr int kSize = static_cast<int>(sizeof(T));
          constexpr int kBoxCols = kTileK;  // a box is 128 bytes wide
          constexpr int kBoxes = (kOutN + kBoxCols - 1) / kBoxCols, kTailCols = store_tail_cols<T, kOutN>();
          const uint32_t tb = swizzled_pair<kSize>(g, t);
          const uint32_t boxes = warp_boxes(staging, c, warp, kBufs);  // this warp's buffers
          const uint32_t box0 = boxes + g * 128 + tb;
          // An even number of boxes a tile: every tile starts on buffer 0 (known at compile time); an odd
          // number (128 x 192 and 128 x 160 half tiles: 3) carries the alternation from tile to tile. One
          // buffer: always buffer 0, reused once the previous box's store has read it.
          if constexpr ((kHalves * kBoxes) % 2 == 0 || kBufs == 1) box = 0;
          // (A warp whose 16 rows all lie past M stores its boxes too, the TMA clipping them: skipping them
          // slowed unsplit 64x64 tiles by 10-20%, H200, bf16 64x4096x4096 12.8 -> 14.9 us.)
#pragma unroll
          for (int h = 0; h < kHalves; ++h) {
            const int mrow0 = m0 + (kPingPong ? h : c) * 64 + warp * 16;
#pragma unroll
            for (int cb = 0; cb < kBoxes; ++cb, box ^= (kBufs - 1)) {
              const bool tail = kTailCols != 0 && cb == kBoxes - 1;  // known at compile time (unrolled)
              const uint32_t buf = box0 + box * kStoreBoxBytes;  // + this thread's row g and column 2t
              // The store issued kBufs boxes ago (from this buffer) has read it.
              if (lane == 0) bulk_wait_read<kBufs - 1>();
              __syncwarp();
#pragma unroll
              for (int qq = 0; qq < kBoxCols / 8; ++qq) {
                if (tail && qq * 8 >= kTailCols) break;
                const int q = cb * (kBoxCols / 8) + qq;
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                  const uint32_t at =
                      tail ? boxes + box * kStoreBoxBytes + ((g + 8 * r) * kTailCols + 8 * qq + 2 * t) * kSize
                           : (buf + r * 8 * 128) ^ static_cast<uint32_t>(qq * 8 * kSize);
                  stage_pair<T>(at, d[h][4 * q + 2 * r], d[h][4 * q + 2 * r + 1]);
                }
              }
              fence_async_smem();
              __syncwarp();
              if (lane == 0) {  // (lane 0: g = t = 0, buf is the box itself)
                const CUtensorMap* dst = pass ? (tail ? &map_aux_tail : &map_aux) : (tail ? &map_c_tail : &map_c);
                tma_store(dst, buf, n0 + cb * kBoxCols, mrow0, bz);
                bulk_commit();
              }
            }
          }
        }
        continue;  // (as above: no register path in this kernel)
      }
      // A split-K slice's interior tile (every row < M, every column < N): its raw fp32 sums into the slab
      // without a test, one base address per row and the columns as immediate offsets (the general path
      // below tests and addresses every pair).
      const bool interior = m0 + BM <= p.M && n0 + BN <= p.N;
      if (interior && p.partial != nullptr && p.N % 2 == 0) {
#pragma unroll
        for (int h = 0; h < kHalves; ++h)
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int m = m0 + (kPingPong ? h : c) * 64 + warp * 16 + g + 8 * r;
            float* prow = slab_row(p, w.split, bz, m) + n0 + 2 * t;
#pragma unroll
            for (int q = 0; q < BN / 8; ++q) store_vec2(prow + 8 * q, d[h][4 * q + 2 * r], d[h][4 * q + 2 * r + 1]);
          }
        continue;
      }
      // Rows of C that are not 16-byte aligned (N = 50257, 4095; no slab, no per-element bias left), which the TMA
      // cannot write: each warp stages its 16 x 128-byte boxes in shared memory as the TMA path does, then writes
      // them a row at a time, 4 bytes a lane, 128 contiguous bytes an instruction (two 2-byte halves where a half
      // row starts on an odd element). The stores from registers below write 8 rows an instruction, a few bytes
      // of each, and took longer than the tile's MMAs over a short K (H200, bf16 4096x768x50257: 1.42 ms against
      // 0.63 for zero-padding N to a multiple of 8, then cuBLAS).
      if (p.partial == nullptr && out.bias == nullptr) {
        constexpr int kSize = static_cast<int>(sizeof(T));
        constexpr int kBoxCols = kTileK;  // a box row is 128 bytes
        constexpr int kBoxes = (BN + kBoxCols - 1) / kBoxCols;
        const uint32_t boxes = warp_boxes(staging, c, warp, kBufs);  // this warp's first buffer
        const uint32_t wr = boxes + g * 128 + swizzled_pair<kSize>(g, t);  // this thread's rows g and g + 8
#pragma unroll
        for (int h = 0; h < kHalves; ++h) {
          const int mrow0 = m0 + (kPingPong ? h : c) * 64 + warp * 16;
#pragma unroll
          for (int cb = 0; cb < kBoxes; ++cb) {
            const int col0 = n0 + cb * kBoxCols;
            const int rows = min(kStoreRows, p.M - mrow0);
            const int cols = min(min(kBoxCols, BN - cb * kBoxCols), p.N - col0);
            if (rows <= 0 || cols <= 0) continue;  // the same across the warp
#pragma unroll
            for (int qq = 0; qq < kBoxCols / 8; ++qq) {
              const int q = cb * (kBoxCols / 8) + qq;
              if (q >= BN / 8) break;
#pragma unroll
              for (int r = 0; r < 2; ++r) {
                stage_pair<T>((wr + r * 8 * 128) ^ static_cast<uint32_t>(qq * 8 * kSize), d[h][4 * q + 2 * r],
                              d[h][4 * q + 2 * r + 1]);
              }
            }
            __syncwarp();
            // Lane l: bytes 4l..4l+3 of each row, the 16-byte chunk l / 4 swizzled by the row. (Not unrolled in the
            // 192-row tiles, whose 128 registers a thread leave no room: unrolled 4 times, their Registers kernels
            // spilled 34 bytes; now 10, and no other kernel spills for this path.)
            const int e = kSize == 4 ? lane : 2 * lane;  // its first column in the box
            const uint32_t rd = boxes + ((4 * lane) & 15);
            const int64_t ld = p.sc_m;
            T* dst = c_row(p, bz, mrow0) + col0;
            constexpr int kRowUnroll = BM == 192 ? 1 : 4;
#pragma unroll kRowUnroll
            for (int rr = 0; rr < rows; ++rr, dst += ld) {
              uint32_t v;
              asm volatile("ld.shared.b32 %0, [%1];\n"
                           : "=r"(v)
                           : "r"(rd + rr * 128 + (((lane >> 2) ^ (rr & 7)) << 4)));
              if constexpr (kSize == 4) {
                if (e < cols) *reinterpret_cast<uint32_t*>(dst + e) = v;
              } else if ((reinterpret_cast<uintptr_t>(dst) & 3) == 0) {  // the same across the warp
                if (e + 1 < cols) {
                  *reinterpret_cast<uint32_t*>(dst + e) = v;
                } else if (e < cols) {
                  *reinterpret_cast<uint16_t*>(dst + e) = static_cast<uint16_t>(v & 0xffffu);
                }
              } else {
                if (e < cols) *reinterpret_cast<uint16_t*>(dst + e) = static_cast<uint16_t>(v & 0xffffu);
                if (e + 1 < cols) *reinterpret_cast<uint16_t*>(dst + e + 1) = static_cast<uint16_t>(v >> 16);
              }
            }
            __syncwarp();  // every lane has read the box before the next one overwrites it
          }
        }
        continue;
      }
      with_epilogue(p, [&](auto epi) {
#pragma unroll
        for (int h = 0; h < kHalves; ++h) {
          const int mrow = m0 + (kPingPong ? h : c) * 64 + warp * 16 + g;
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            const int m = mrow + 8 * r;
            if (m >= p.M) continue;
            const auto row = output_row<decltype(epi)>(out, bz, m, w.split);
#pragma unroll
            for (int q = 0; q < BN / 8; ++q)
              row.store_pair(n0 + 8 * q + 2 * t, d[h][4 * q + 2 * r], d[h][4 * q + 2 * r + 1], vec);
          }
        }
      });
    }
    if (kStoreC && lane == 0) bulk_wait_all();  // the block's last writes have landed
  }
#else
  // Not compiled for sm_90a: the chooser never launches this (launch_hopper.cu: hopper_cannot_run).
  __trap();
#endif
}

}  // namespace tilelab
