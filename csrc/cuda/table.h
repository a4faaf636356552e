#pragma once
// The one table of CUDA kernel configs. Every column is something a kernel or
// its launcher reads (static_asserts in launch_<family>.cu tie them together),
// so the table is the list of compiled configs and nothing else is:
//   - each launch_<family>.cu instantiates exactly the rows of its family;
//   - the chooser (chooser.cpp) names rows at compile time (row_index);
//   - tilelab_torch.kernels() lists it (ops.cpp), which parametrizes the tests
//     and the benchmarks.
// Adding a config is a row here (and, for a new tile shape, nothing else if
// the family's static_asserts accept it). Which row runs a problem is the
// chooser's business (chooser.cpp), what a family can run its own
// (launch_<family>.cu): neither lives here, so changing a rule rebuilds one file.
//
// Host-only C++ (no CUDA): the CPU-only build includes it too.
#include <string_view>

#include "../dtypes.h"
#include "families.h"

namespace tilelab {

struct KernelConfig {
  const char* name;     // unique, {family}_{BM}x{BN}x{BK}: the same string in kernels(), test ids, benchmarks
  const char* variant;  // what a user passes as variant=
  Family family;
  int tile;             // what a user passes as tile=
  int bm, bn, bk;       // block tile: bm x bn outputs, bk of K per pipeline stage
  int warps_m, warps_n; // the grid of MMA/FMA warps over the block tile (0 x 0: one thread per output)
  int threads;          // threads per block (MMA warps, plus a producer warpgroup for hopper)
  int stages;           // shared-memory pipeline depth (1: load, sync, compute; 0: no shared memory)
  int pad;              // kPad: extra elements per shared row of a k-contiguous tile (m/n-contiguous fp32
                        // tensorcore tiles use twice it)
  unsigned dtypes;      // DtypeBits
  int min_sm;           // lowest compute capability (major*10 + minor)
  bool tf32;            // fp32 inputs on TF32 tensor cores: only when torch allows TF32 for matmuls
  const char* summary;
};

// clang-format off
inline constexpr KernelConfig kConfigs[] = {
  // name                        variant            family              T   bm   bn  bk  wm wn  thr st pad dtypes        sm  tf32
  {"naive_8x8",                  "naive",           Family::Naive,       8,   8,   8,  0,  0, 0,   64, 0, 0, kAllFloat,     0, false, "one thread per output, operands straight from global memory"},
  {"naive_16x16",                "naive",           Family::Naive,      16,  16,  16,  0,  0, 0,  256, 0, 0, kAllFloat,     0, false, "one thread per output, operands straight from global memory"},
  {"naive_32x32",                "naive",           Family::Naive,      32,  32,  32,  0,  0, 0, 1024, 0, 0, kAllFloat,     0, false, "one thread per output, operands straight from global memory"},
  {"tiled_8x8x8",                "tiled",           Family::Tiled,       8,   8,   8,  8,  0, 0,   64, 1, 0, kAllFloat,     0, false, "TxT shared-memory tiles, one output per thread, boundary-safe"},
  {"tiled_16x16x16",             "tiled",           Family::Tiled,      16,  16,  16, 16,  0, 0,  256, 1, 0, kAllFloat,     0, false, "TxT shared-memory tiles, one output per thread, boundary-safe"},
  {"tiled_32x32x32",             "tiled",           Family::Tiled,      32,  32,  32, 32,  0, 0, 1024, 1, 0, kAllFloat,     0, false, "TxT shared-memory tiles, one output per thread, boundary-safe"},
  {"padded_16x16x16",            "padded",          Family::Padded,     16,  16,  16, 16,  0, 0,  256, 1, 1, kAllFloat,     0, false, "tiled, A tile stored k-major, rows padded by kPad=1 against bank conflicts"},
  {"padded_32x32x32",            "padded",          Family::Padded,     32,  32,  32, 32,  0, 0, 1024, 1, 1, kAllFloat,     0, false, "tiled, A tile stored k-major, rows padded by kPad=1 against bank conflicts"},
  {"padded_nopad_16x16x16",      "padded_nopad",    Family::Padded,     16,  16,  16, 16,  0, 0,  256, 1, 0, kAllFloat,     0, false, "the padded kernel with kPad=0: the bank-conflict baseline"},
  {"padded_nopad_32x32x32",      "padded_nopad",    Family::Padded,     32,  32,  32, 32,  0, 0, 1024, 1, 0, kAllFloat,     0, false, "the padded kernel with kPad=0: the bank-conflict baseline"},
  // blocked: a warp computes 32 x (bn / warps_n): 8 x TN outputs per thread on a 4 x 8 lane grid.
  {"blocked_k16_64x64x16",       "blocked_k16",     Family::Blocked,    64,  64,  64, 16,  2, 2,  128, 3, 4, kF32,         80, false, "register-blocked 8x4 per thread, warp-tiled, BK=16, float4 + 3-stage cp.async, A k-major kPad=4"},
  // one warp high: decoding 17 to 48 rows (chooser.cpp), which 64-row tiles compute up to 47 zero rows for.
  {"blocked_m32_32x128x16",      "blocked_m32",     Family::Blocked,   128,  32, 128, 16,  1, 4,  128, 4, 4, kF32,         80, false, "register-blocked 8x4 per thread, 32x128 block tile (one warp high), BK=16, 4-stage cp.async"},
  {"blocked_64x128x8",           "blocked",         Family::Blocked,   128,  64, 128,  8,  2, 2,  128, 4, 4, kF32,         80, false, "register-blocked 8x8 per thread, 64x128 block tile, BK=8, 4-stage cp.async"},
  {"blocked_wide_128x256x8",     "blocked_wide",    Family::Blocked,   256, 128, 256,  8,  4, 2,  256, 4, 4, kF32,         80, false, "register-blocked 8x16 per thread, 128x256 block tile, BK=8, 4-stage cp.async"},
  // tensorcore: mma.sync; bk is 64 bytes of K per stage (128 for the 128x256 rows).
  {"tensorcore_128x128x32",      "tensorcore",      Family::TensorCore,128, 128, 128, 32,  2, 2,  128, 4, 8, kF16 | kBF16, 80, false, "mma.sync m16n8k16 (fp32 acc), 4-stage cp.async + ldmatrix, 4 warps of 64x64, 2 blocks/SM"},
  {"tensorcore_128x256x64",      "tensorcore",      Family::TensorCore,256, 128, 256, 64,  2, 4,  256, 4, 8, kF16 | kBF16, 80, false, "mma.sync m16n8k16 (fp32 acc), BK=64, 4-stage cp.async + ldmatrix, 8 warps of 64x64"},
  {"tensorcore_64x64x32",        "tensorcore",      Family::TensorCore, 64,  64,  64, 32,  2, 2,  128, 4, 8, kF16 | kBF16, 80, false, "mma.sync m16n8k16 (fp32 acc), 4-stage cp.async + ldmatrix, 4 warps of 32x32"},
  {"tensorcore_tf32_128x128x16", "tensorcore_tf32", Family::TensorCore,128, 128, 128, 16,  2, 2,  128, 4, 4, kF32,         80, true,  "TF32 mma.sync m16n8k8 (needs precision 'high'), 4-stage cp.async, 4 warps of 64x64"},
  {"tensorcore_tf32_128x256x32", "tensorcore_tf32", Family::TensorCore,256, 128, 256, 32,  2, 4,  256, 4, 4, kF32,         80, true,  "TF32 mma.sync m16n8k8 (needs precision 'high'), BK=32, 4-stage cp.async, 8 warps of 64x64"},
  {"tensorcore_tf32_64x64x16",   "tensorcore_tf32", Family::TensorCore, 64,  64,  64, 16,  2, 2,  128, 4, 4, kF32,         80, true,  "TF32 mma.sync m16n8k8 (needs precision 'high'), 4-stage cp.async, 4 warps of 32x32"},
  // hopper: wgmma + TMA, 128-byte swizzled stages (pad 0: the swizzle keeps them conflict-free), persistent
  // (a block per SM walks the tiles); 8 MMA warps (two consumer warpgroups of 64 rows) plus a producer warpgroup.
  {"hopper_128x256x64",          "hopper",          Family::Hopper,    256, 128, 256, 64,  8, 1,  384, 4, 0, kF16 | kBF16, 90, false, "wgmma m64n256k16 (fp32 acc) + TMA, 128B swizzle, 4-stage mbarrier ring, producer + 2 consumer warpgroups"},
  {"hopper_128x192x64",          "hopper",          Family::Hopper,    192, 128, 192, 64,  8, 1,  384, 4, 0, kF16 | kBF16, 90, false, "wgmma m64n192k16 (fp32 acc) + TMA, 128B swizzle, 4-stage mbarrier ring, producer + 2 consumer warpgroups"},
  {"hopper_128x128x64",          "hopper",          Family::Hopper,    128, 128, 128, 64,  8, 1,  384, 6, 0, kF16 | kBF16, 90, false, "wgmma m64n128k16 (fp32 acc) + TMA, 128B swizzle, 6-stage mbarrier ring, producer + 2 consumer warpgroups"},
  // 96 wide: a sub-wave product of 128-row tiles on more SMs at fewer bytes a k-step (ViT-B/16 at batch 8:
  // 1576 x 768 outputs are 78 tiles of 128x128, 104 of 128x96; 28 KB a stage against 32).
  {"hopper_128x96x64",           "hopper",          Family::Hopper,     96, 128,  96, 64,  8, 1,  384, 6, 0, kF16 | kBF16, 90, false, "wgmma m64n96k16 (fp32 acc) + TMA, 128B swizzle, 6-stage mbarrier ring, producer + 2 consumer warpgroups"},
  // 64 wide: products of fewer tiles than SMs (128 tokens through a 2048 -> 5632 projection: 44 tiles of 128x128),
  // where a block's pace bounds the time (chooser.cpp, the narrow rows): twice the SMs on the product.
  {"hopper_128x64x64",           "hopper",          Family::Hopper,     64, 128,  64, 64,  8, 1,  384, 8, 0, kF16 | kBF16, 90, false, "wgmma m64n64k16 (fp32 acc) + TMA, 128B swizzle, 8-stage mbarrier ring, producer + 2 consumer warpgroups"},
  // 64 x 64 (warps 4 x 1, 256 threads: one consumer warpgroup): twice the tiles of 128x64 where even those leave
  // most SMs idle (128 tokens through a 2048 x 2048 projection: 32 tiles of 128x64, 64 of 64x64).
  {"hopper_m64_64x64x64",        "hopper_m64",      Family::Hopper,     64,  64,  64, 64,  4, 1,  256, 12, 0, kF16 | kBF16, 90, false, "wgmma m64n64k16 (fp32 acc) + TMA, 128B swizzle, 12-stage mbarrier ring, producer + 1 consumer warpgroup"},
  // 64 x 96: fewer bytes a stage than 128x64 at nearly as many tiles (128 tokens through a 2048 -> 5632
  // projection: 118 tiles against 88). A row-major B is read in whole 64-column boxes (128 columns a stage).
  {"hopper_m64_64x96x64",        "hopper_m64",      Family::Hopper,     96,  64,  96, 64,  4, 1,  256, 10, 0, kF16 | kBF16, 90, false, "wgmma m64n96k16 (fp32 acc) + TMA, 128B swizzle, 10-stage mbarrier ring (8 for a row-major B), producer + 1 consumer warpgroup"},
  // 160 wide: a fuller last wave where 192 leaves SMs idle (DeepGEMM's unaligned BLOCK_N): a 3072 x 768 weight
  // gradient is 120 tiles of 128x160 on 132 SMs against 96 of 128x192. A tile's last box is 32 columns wide
  // (stored through its own map). No rule picks it (variant= or tune() do): bf16 3072 x 768 over K = 12608,
  // 0.095 ms vs 0.099 for 128x192 on an H200, 0.119 vs 0.099 on an H100. A 112-wide row was slower than
  // 128x128 everywhere it was tried, even with 126 tiles against 108 (H200, 2304 x 768: 0.081 ms vs 0.076).
  {"hopper_128x160x64",          "hopper",          Family::Hopper,    160, 128, 160, 64,  8, 1,  384, 4, 0, kF16 | kBF16, 90, false, "wgmma m64n160k16 (fp32 acc) + TMA, 128B swizzle, 4-stage mbarrier ring, producer + 2 consumer warpgroups"},
  // 192 x 192 (warps 12 x 1, 512 threads: three consumer warpgroups of 64 rows): fewer, larger tiles an SM, at 96
  // flops a byte of a stage against 85 for 128x256, and whole waves where 128-row tiles leave a last wave partly
  // idle (4096 x 5632 outputs: 660 tiles, 5 waves on 132 SMs, against 704 of 128x256, 5.3 waves). Its 4 stages
  // of 48 KB leave room for one staging box a consumer warp (128-row tiles have two). 512 threads launch with 128
  // registers each; the consumer branch takes 152 (setmaxnreg, which ptxas allocates to) for its 96
  // accumulators; 8-10 bytes spill (a value kept from before the branch to the epilogue).
  {"hopper_m192_192x192x64",     "hopper_m192",     Family::Hopper,    192, 192, 192, 64, 12, 1,  512, 4, 0, kF16 | kBF16, 90, false, "wgmma m64n192k16 (fp32 acc) + TMA, 128B swizzle, 4-stage mbarrier ring, producer + 3 consumer warpgroups"},
  // ping-pong (warps 4 x 1): each consumer warpgroup computes whole 128x128 tiles, the two taking turns on the
  // tensor cores, so one's epilogue runs under the other's MMAs.
  {"hopper_pingpong_128x128x64", "hopper_pingpong", Family::Hopper,    128, 128, 128, 64,  4, 1,  384, 6, 0, kF16 | kBF16, 90, false, "wgmma 2 x m64n128k16 per warpgroup + TMA, 6-stage ring, ping-pong: two consumer warpgroups alternate tiles"},
  // swap-AB (variant hopper_swap): the kernel computes C^T = B^T A^T, so a tile is named in C's terms, bm x bn =
  // 72 rows x 128 columns, and computed as 128 x 72 (wgmma m64n72k16, two consumer warpgroups); its 72 rows step by
  // wgmma's N (8), not its M (64). cuBLAS's tile for sub-wave token counts: 1576 tokens x 768 outputs are 132 tiles
  // (22 x 6), one wave on 132 SMs, against 78 of 128x128 and 104 of 128x96.
  {"hopper_swap_72x128x64",      "hopper_swap",     Family::Hopper,     72,  72, 128, 64,  8, 1,  384, 6, 0, kF16 | kBF16, 90, false, "swap-AB: wgmma m64n72k16 on C^T (fp32 acc) + TMA, 6-stage ring, 2 consumer warpgroups, C stored transposed through 72 x 16 boxes"},
  {"hopper_tf32_128x256x32",     "hopper_tf32",     Family::Hopper,    256, 128, 256, 32,  8, 1,  384, 4, 0, kF32,         90, true,  "TF32 wgmma m64n256k8 (needs precision 'high') + TMA, 4-stage ring, k-contiguous operands (others copied transposed)"},
  {"hopper_tf32_128x128x32",     "hopper_tf32",     Family::Hopper,    128, 128, 128, 32,  8, 1,  384, 6, 0, kF32,         90, true,  "TF32 wgmma m64n128k8 (needs precision 'high') + TMA, 6-stage ring, k-contiguous operands (others copied transposed)"},
  // TF32 on 192 x 192 tiles (the hopper_m192 row's three consumer warpgroups and its 4 x 48 KB stages, 32 of K
  // a stage): whole waves where 128-row tiles leave a last wave partly idle (GPT-2's c_attn at 4096 tokens,
  // 4096 x 2304 outputs: 264 tiles, 2 waves on 132 SMs, against 288 of 128x256, 2.2).
  {"hopper_tf32_m192_192x192x32","hopper_tf32_m192",Family::Hopper,    192, 192, 192, 32, 12, 1,  512, 4, 0, kF32,         90, true,  "TF32 wgmma m64n192k8 (needs precision 'high') + TMA, 4-stage ring, 3 consumer warpgroups, k-contiguous operands (others copied transposed)"},
  // TF32 on 64-row tiles (one consumer warpgroup): decoding batches of up to 64 rows, which a 128-row tile
  // computes half or more of zero rows for.
  {"hopper_tf32_m64_64x128x32",  "hopper_tf32_m64", Family::Hopper,    128,  64, 128, 32,  4, 1,  256, 8, 0, kF32,         90, true,  "TF32 wgmma m64n128k8 on one consumer warpgroup (needs precision 'high') + TMA, 8-stage ring, k-contiguous operands"},
  // gemv: few rows (decoding); a warp per output column, 16-byte loads along K, bm rows per block.
  {"gemv_16x8",                  "gemv",            Family::Gemv,       16,  16,   8,  0,  1, 8,  256, 0, 0, kAllFloat,     0, false, "a warp per output column of up to 16 rows: 16-byte loads along K (k-contiguous operands), warp-shuffle reduction"},
  // gemv_mma: few rows in half precision on the tensor cores, swap-AB (W's rows on mma.sync's M, x's rows on its
  // N): persistent blocks of 16 x bn tiles (bn / 16 groups of 16 W rows sharing x's pieces), threads / 32 warps
  // splitting K, each lane streaming bk of K a round through a `stages`-deep cp.async ring of its own (fewer stages
  // in the same bytes above 8 rows). On an H200 a 16-row tile, 1 to 3 K chunks a round and 4 to 16 stages all stream
  // 117 MB of W at 3.3-3.6 TB/s; 32 rows halve x's L2 reads at 16 rows (16x4096x14336: 0.037 ms vs 0.045).
  // Compute capability 9.0: the ring is sized for its 227 KB of shared memory a block (213 KB above 8 rows).
  // gemv_mma_rowb reads an n-contiguous B (x @ B, B row-major: transformers' Conv1D) in 8-byte runs of 4 columns.
  {"gemv_mma_16x32x64",          "gemv_mma",        Family::GemvMma,    32,  16,  32,  64,  1, 1,  256, 4, 0, kF16 | kBF16, 90, false, "mma.sync m16n8k16 swap-AB (W rows on M, x rows on N), persistent: 16-byte pieces straight into fragments, 8 warps split K, 4-stage per-lane cp.async ring"},
  {"gemv_mma_rowb_16x32x64",     "gemv_mma_rowb",   Family::GemvMma,    32,  16,  32,  64,  1, 1,  256, 4, 0, kF16 | kBF16, 90, false, "gemv_mma for x @ B with B row-major: 8-byte runs of 4 columns x 8 rows of B a lane, paired into fragments by byte permutes"},
  // gemv_split: few rows against a large B streamed once, K split over blocks when the columns leave SMs idle
  // (split_reduce.cu adds the slices in a fixed order); bk is the split granularity. Each reads B in one layout:
  // 16 columns a warp of a k-contiguous B (x @ W.t()), 128 of an n-contiguous one (x @ B, B row-major).
  {"gemv_split_16x128x256",      "gemv_split",      Family::GemvSplit,  128, 16, 128, 256,  1, 8,  256, 0, 0, kF32 | kF16 | kBF16, 0, false, "x @ W.t(): a lane holds 4 columns x 16 rows, 8 lanes a 128-byte run of W's rows, x's loads shared by 4 columns; K split over blocks"},
  // gemv_split_m32: 32 rows a block, fp32 only (half precision runs those rows on the tensor cores): W streamed once
  // for 17 to 32 rows, where two 16-row blocks stream it twice; 128 sums a lane, so one block an SM.
  {"gemv_split_m32_32x128x256",  "gemv_split_m32",  Family::GemvSplit,  128, 32, 128, 256,  1, 8,  256, 0, 0, kF32,         0, false, "gemv_split with 32 rows a block (4 columns x 32 rows a lane, one block an SM): W streamed once up to 32 rows; K split over blocks"},
  {"gemv_split_rowb_16x1024x64", "gemv_split_rowb", Family::GemvSplit, 1024, 16, 1024, 64,  1, 8,  256, 0, 0, kF32 | kF16 | kBF16, 0, false, "x @ B with B row-major: a lane holds 4 adjacent columns x 16 rows, a warp reads 512 contiguous bytes of a row of B; K split over blocks"},
};
// clang-format on
inline constexpr int kNumConfigs = sizeof(kConfigs) / sizeof(kConfigs[0]);

// The blocks of a gemv_split row an SM holds: two of 16 rows (64 sums a lane, under 128 registers a thread), one
// of 32 (128 sums a lane). The kernel's launch bounds and the chooser's split counts both read it.
constexpr int gemv_split_blocks_per_sm(const KernelConfig& c) { return c.bm > 16 ? 1 : 2; }

constexpr bool same_name(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

// The index of the row called `name`. Used in constant expressions
// (`constexpr int kRow = row_index("...")`), an unknown name does not compile.
constexpr int row_index(const char* name) {
  for (int i = 0; i < kNumConfigs; ++i)
    if (same_name(kConfigs[i].name, name)) return i;
  throw "tilelab: no table row of that name";
}

// Run-time lookup (a user's variant= string): nullptr if there is no such row.
inline const KernelConfig* find_config(std::string_view name) {
  for (const auto& c : kConfigs)
    if (name == c.name) return &c;
  return nullptr;
}

}  // namespace tilelab
