// The chooser: an ordered list of rules over the table's rows, each with the
// measurement that justifies it (one sentence: the figures and the GPU; the
// evidence tables are in benchmarks/results/h200/README.md). A rule whose row
// cannot run the problem here (dtype, threads, compute capability, build)
// falls through to the next; the list ends in an error, never a silent
// fallback. Rows are named at compile time (row_index): a renamed row does not
// compile.
#include "chooser.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <iomanip>
#include <mutex>
#include <sstream>
#include <unordered_map>
#include <utility>
#include <vector>

#include "../tune_key.h"
#include "split_reduce.h"

namespace tilelab {
namespace {

constexpr int kHopper256 = row_index("hopper_128x256x64"), kHopper128 = row_index("hopper_128x128x64");
constexpr int kHopper192 = row_index("hopper_128x192x64"), kHopper160 = row_index("hopper_128x160x64"),
              kHopper64 = row_index("hopper_128x64x64"),
              kHopper96 = row_index("hopper_128x96x64"), kHopperSwap = row_index("hopper_swap_72x128x64");
constexpr int kHopperPingPong = row_index("hopper_pingpong_128x128x64"), kHopperM64 = row_index("hopper_m64_64x64x64"),
              kHopperM64x96 = row_index("hopper_m64_64x96x64"), kHopperM192 = row_index("hopper_m192_192x192x64");
constexpr int kHopperTf32_256 = row_index("hopper_tf32_128x256x32"),
              kHopperTf32_128 = row_index("hopper_tf32_128x128x32"),
              kHopperTf32M64 = row_index("hopper_tf32_m64_64x128x32"),
              kHopperTf32M192 = row_index("hopper_tf32_m192_192x192x32");
static_assert(kConfigs[kHopperTf32M192].bm == kConfigs[kHopperM192].bm &&
                  kConfigs[kHopperTf32M192].bn == kConfigs[kHopperM192].bn,
              "the 192x192 wave rule counts both rows' tiles once");
constexpr int kTc256 = row_index("tensorcore_128x256x64"), kTc128 = row_index("tensorcore_128x128x32"),
              kTc64 = row_index("tensorcore_64x64x32");
constexpr int kTcTf32_256 = row_index("tensorcore_tf32_128x256x32"),
              kTcTf32_128 = row_index("tensorcore_tf32_128x128x16"), kTcTf32_64 = row_index("tensorcore_tf32_64x64x16");
constexpr int kGemv = row_index("gemv_16x8"), kGemvMma = row_index("gemv_mma_16x32x64"),
              kGemvMmaRowB = row_index("gemv_mma_rowb_16x32x64"),
              kGemvSplit = row_index("gemv_split_16x128x256"), kGemvSplitM32 = row_index("gemv_split_m32_32x128x256"),
              kGemvSplitRowB = row_index("gemv_split_rowb_16x1024x64"),
              kNaive16 = row_index("naive_16x16");
constexpr int kBlockedM32 = row_index("blocked_m32_32x128x16"), kBlocked64 = row_index("blocked_64x128x8"),
              kBlockedK16 = row_index("blocked_k16_64x64x16");
constexpr int kTiled32 = row_index("tiled_32x32x32"), kTiled16 = row_index("tiled_16x16x16"),
              kTiled8 = row_index("tiled_8x8x8");


// The bm x bn tiles of the whole problem: every matrix of a batch is in the grid.
int64_t tiles(const GemmProblem& p, int bm, int bn) {
  return ((p.M + bm - 1) / bm) * ((p.N + bn - 1) / bn) * p.batch;
}
// The same for row c's tiles, or table row `row`'s (a rule comparing rows counts their own tiles).
int64_t tiles(const GemmProblem& p, const KernelConfig& c) { return tiles(p, c.bm, c.bn); }
int64_t tiles(const GemmProblem& p, int row) { return tiles(p, kConfigs[row]); }

// Row c's k-tiles of p: the steps of its K loop.
int64_t k_tiles(const KernelConfig& c, const GemmProblem& p) { return (p.K + c.bk - 1) / c.bk; }

// Whether hopper row c reads only its own BN columns of B a stage: always with a k-contiguous B (one box of
// BN rows); a row-major B is read in whole 64-column boxes, so a BN that is not a multiple of 64 (96) loads
// a stage as large as the next multiple's (128), which est_ns does not count.
bool reads_only_its_b(const KernelConfig& c, const GemmProblem& p) {
  return c.bn % 64 == 0 || p.b.k_contiguous;
}

// ---- split-K: the estimated time of a row on `s` slices of K. A block's time
// is a fixed cost (pipeline fill and drain, epilogue) plus, per element of K,
// the slower of its operand bytes (a block's measured pace: ~100 B/ns, unless
// kRowPaces says otherwise) and its MMAs (per-SM rates of the H200: wgmma 7500
// flop/ns half, 3750 TF32; mma.sync 4900 / 2450; the blocked rows' fp32 FMAs
// their kRowPaces rate). A half-precision hopper block keeps that pace on its
// whole tile height even where the product has fewer rows (H200, x @ W.t() on
// hopper_m64_64x64x64 unsplit, W cold: 16, 32 and 64 x 14336x4096 38.3, 38.4 and
// 38.5 us), so its A bytes count bm rows. All SMs together read each operand
// byte from HBM once (the tiles that share a panel find it in L2), which bounds
// the whole product: where it does, more slices only add reduction. In half
// precision that bound is the larger operand's bytes (the smaller, a model's
// activations, comes from L2) after the fixed cost a block pays anyway. (H200,
// per call under CUDA graphs, W cold: without the fixed cost two slices looked
// cheaper than one wherever the bound took over, 64x4096x4096 in 2 slices 14.4
// us vs 12.9 unsplit; counting both operands took bf16 64x65536x64 from 114
// slices, 8.3-8.4 us, to 49, 8.4-8.7.) Half precision at the device's peak
// bandwidth (from its memory clock and bus width: an H100's 3.35 TB/s, an H200's
// 4.9; a described GPU without one: 4.8); the 4-byte rows, both operands, at 4.8
// on every device: the TF32 tiles' blocks run well below the pace assumed here
// (H100, x @ W.t() 16x14336x4096 in 2 slices: 119 us against 43 estimated a
// block), so their slices are set by that pace, not by the bandwidth, and with
// the H100's figure they lost 10-30%. A split adds the reduction: a launch plus writing and
// reading s fp32 slabs of the output at ~3 TB/s, or, where the hopper kernel adds the slices
// itself (split_reduce_way), their hand-over (Adding, estimated_splits). Estimates, not
// measurements: they only have to rank 1 against s slices where one wave leaves
// SMs idle (and, for fp32, the blocked rows).
constexpr double kBlockFixedNs = 2000, kSmBytesPerNs = 100, kHbmBytesPerNs = 4800;
constexpr int64_t kMaxSlabBytes = int64_t{256} << 20;  // workspace cap

// The blocked rows' fp32 FMAs, 317 flop/ns an SM at relative rate 100 (outputs x k per SM per unit time; 64x64
// tiles at 4096^3 in 3.280 ms): H200, 4096^3, each row running whole rounds of tiles, 128x256 2.811 ms for 4
// tiles an SM (117), 64x128 2.927 ms for 16 (112), measured with the FMAs row by row. The serpentine order
// (blocked.cuh) then sped 128x256 up by 6.6% at 4096^3 (H200, in one process with the others): 125. (64x64 gained
// 2.2% there, yet raising its rate to match moved 64-row products from 64x128 onto it that it ran 8-11% slower,
// x @ W.t() 64x1024x4096 22.4 -> 24.6 us: it keeps 100.) 64x128 with its bias staged in shared memory and three
// blocks an SM (blocked.cuh: ptxas's registers) ran 7% faster (4096^3 3.056 -> 2.843 ms, H200, in one process with
// the old build): 120. (Of the 40 products that rate moved onto it from 128x256 and 64x64, timed each way on an
// H200: 25.83 -> 25.31 ms in all, 18 faster by more than 2%, 7 slower: dW 4096x128x1024 32.2 -> 36.4 us, ViT-B's
// dW 3072x12608x768 1240 -> 1265 in 3 slices instead of 7 of 128x256; at 118 or 116 the sum was 25.35 and 25.62.)
constexpr double kBlockedFlopPerNs = 317;
// A TF32 mma.sync block's pace (fp32 operands through a 4-stage ring of 8 or 16 KB stages): H100, x @ B
// 16x4096x4096 on tensorcore_tf32_64x64x16 unsplit, 1.3 MB a block in 67.8 us; at 100 B/ns the estimate left these
// rows unsplit or under-split. With it (H100, per call under CUDA graphs, us, new / old split count / cuBLAS):
// x @ B 16x4096x4096 41.2 (2) / 67.8 (1) / 29.7; 128x768x768 7.9 (5) / 15.2 (1) / 6.8; 64x65536x64 20.1 (128) /
// 25.2 (68) / 17.3; 128x131072x128 63.8 (131) / 72.9 (68) / 56.2; x @ W.t() 8x768x1000 6.1 (8) / 14.1 (1) / 5.4;
// dY @ W 128x50257x768 111.8 (22) / 121.0 (19) / 100.5.
constexpr double kTf32MmaSyncBytesPerNs = 20;
// ... and an SM holds up to 4 of the 64x64 ones (128 threads, 4 stages of 10 KB), which together move ~27 B/ns:
// H100, x @ B 16x4096x4096 on tensorcore_tf32_64x64x16 in s slices, per call under CUDA graphs, W cold, us (the
// estimate's figure in brackets): s2 (1 block an SM) 41.5 [38.0], s4 (2) 32.0 [30.0], s8 (4) 31.6 [30.7], s16 (8,
// two rounds) 33.9 [34.1]; 16x4096x14336 unsplit (224 blocks, 2 an SM) 100.9 [99.1]. (The larger TF32 blocks:
// their residency and pace together are not measured.)
constexpr double kTf32MmaSyncSmBytesPerNs = 27;
constexpr int64_t kTf32MmaSyncBlocksPerSm = 4;

// What est_ns takes for a row in place of its family's defaults (its MMA rate, kSmBytesPerNs a block, one block
// an SM), each figure measured (above). A row not listed has the defaults: a new row adds its line here once its
// pace is measured. The blocked rows' order is the fp32 rule's order of candidates.
struct RowPace {
  int row;
  double flop_per_ns;            // a block's multiply-adds x 2 (0: the family's rate)
  double bytes_per_ns;           // a block's operand bytes, alone on its SM (0: kSmBytesPerNs)
  int64_t together;              // blocks an SM runs at once (blocks_per_sm says where)
  double together_bytes_per_ns;  // those blocks' operand bytes together
  int64_t resident;              // blocks an SM holds at once (the split search's bound on blocks an SM)
  double fixed_ns = 0;           // a block's cost besides its k-steps (0: kBlockFixedNs)
  double lone_share = 1;         // the share of flop_per_ns a block reaches alone on its SM
  double unaligned_store_ns = 0;  // a block's extra cost storing C unsplit into rows not 16-byte aligned
};
// blocked_64x128x8 holds three blocks an SM (blocked.cuh holds it to 170 registers for 128 threads), which share
// the SM's pace: an SM's blocks take as long one after another as they do together, and a split count is ranked
// by the most blocks an SM gets. (H200, fp32, kernel durations over a CUDA graph, W cold, us, K in s slices:
// x @ W.t() 4096x3072x768, 384 tiles of 64x128, 410.5 unsplit against 429.9 in 2; 4096x768x768 107.2 against
// 127.1; dW 2304x12608x768, 216 tiles, 903.6 in 3 (5 blocks an SM) against 952.4 in 4 (7); dW 3072x12608x768,
// 288 tiles, 1194.1 in 5 (11 an SM) against 1263.5 in 3 (7, each longer). Before 8536545 it took up to 199
// registers and an SM held two: three an SM took two rounds of two, H100 4096x3072x768 0.578 ms unsplit.)
// blocked_k16_64x64x16 shares its SM's rate as est_ns assumes (4096x768x768, 768 tiles, 5.8 an SM: 0.131 ms,
// estimated 0.131), blocked_wide_128x256x8 (217-255 registers for 256 threads) runs one block an SM, and costs
// ~10 us a block besides its k-steps, which nothing on its SM overlaps (cause not measured; H200, kernel
// durations over a CUDA graph: dW 2304x1x768, 54 blocks of one k-tile, 11.5 us, 5.7 on 64x128; dW 768x128x3072,
// 72 blocks of 16 k-tiles, 31.7 us where its FMAs at the 4096^3 pace take 21.2, 23.3 on 64x128; dW 100003x16x3,
// 782 blocks of 2 k-tiles, 6 an SM, 71.2 us). At kBlockFixedNs it took products of short K from 64x128. Storing
// C unsplit into rows that are not 16-byte aligned (one element a store, epilogue.cuh's vector_ok) a block took
// ~10 us more again, its epilogue alone on the SM (unaligned_store_ns; H200, fp32, kernel durations over a CUDA
// graph, W cold: GPT-2's lm_head x @ W 4096x768x50257, 48 rounds of 128x256, 7041 us, 146.7 a round where 137
// was estimated; 6676 on 64x128, whose three blocks an SM overlap one's stores; cuBLAS 6489).
// A blocked block of 4 warps alone on its SM (no more blocks than SMs) issues its FMAs at this share (lone_share)
// of the pace two reach together: its warps leave the SM's issue slots idle (blocked_64x128x8;
// blocked_k16_64x64x16 alike, whose lone blocks the estimate otherwise ranked above 64x128's pairs: x @ W.t()
// 64x4096x4096 79.9 us in 2 slices of 64x64 against 64.7 in 4 of 64x128). H200, fp32 x @ W.t(), W cold, kernel
// durations over a CUDA graph, us, K in s slices, 1 block an SM / 2 an SM (the same k-steps an SM):
// 64x14336x4096 204.3 (s4) / 186.2 (s8), 128x14336x4096 398.0 (s2) / 355.2 (s4), 128x4096x4096 120.6 (s2) /
// 116.3 (s4): ~300 flop/ns a lone block against 317-340 a pair, fixed costs and the reduction taken out.
constexpr double kLoneBlockShare = 0.88;
// Where the output is at most two tiles high (decode batches, 128-token products) every block streams its own
// weight panel, read by no more than one other block, from DRAM, and a lone block waits on it longer: against the
// 380 flop/ns est_ns gives blocked_64x128x8's pairs, its lone blocks measured 0.71 of it in x @ W.t() and 0.82 in
// dY @ W (H200, fp32, kernel durations over a CUDA graph, W cold, us, 1 block an SM / 2: x @ W.t() 128x2048x2048
// 38.6 in 4 slices / 34.7 in 8, 128x5632x2048 87.4 / 77.1; dY @ W 128x2048x2048 34.5 / 31.7), and at 0.88 the
// estimate kept such products on one block an SM. At 0.75 the chooser moves 34 fp32 products of the suites and
// models (most to twice the slices), 913.0 -> 832.9 us in all, 32 faster by more than 2%, none slower: x @ W.t()
// 128x2048x2048 38.80 -> 34.94 (cuBLAS 34.59), 128x768x3072 28.44 on 64x64 unsplit -> 23.69 on 64x128 in 5
// slices (20.99), 128x1024x4096 40.84 -> 35.73 (33.43). On taller outputs (panels shared by more row tiles, read
// from L2) it was wrong: 1000^3 unsplit 56.68 against 61.21 in 2 slices, 1023^3 65.73 against 70.91.
constexpr double kLoneStreamShare = 0.75;
// Short-K weight gradients (dY^T X over 16-128 rows) are where blocked_k16_64x64x16 beats 64x128 and est_ns does
// not see it: H200, fp32, kernel durations over a CUDA graph, W cold, us, 64x128 / k16 / cuBLAS: 2048x128x2048
// 36.4 / 32.1 / 26.8 (est_ns 30.1 / 42.5: it charges each of k16's 8 blocks an SM its 2 us fixed cost in turn,
// though an SM holds four of them, 123 registers for 128 threads), 768x128x768 11.7 / 9.6 / 8.7, 1024x64x4096
// 22.9 / 20.7 / 17.0; while over large outputs of small K k16's 64-column stores (~1.8 TB/s against ~2.6) lose:
// 14336x4x4096 92.5 / 129.8. Two re-fits, each measured on every fp32 product it moved and not kept: a fixed cost
// once a round of the blocks an SM holds (6 us for 64x128, 3 us for k16) moved 221 products, 115 slower (10.52 ->
// 12.26 ms in all: small-K products of large outputs); k16 alone at 0.75 us a block with its stores bounded at
// 1.5 TB/s moved 107, the split decode and 128-token products to half the slices of k16 and slower (x @ W.t()
// 128x2048x2048 64x128 in 8 slices 35.0 -> k16 in 4 39.9; 3235 -> 3262 us on the 80 measured). What a block of
// either row costs besides its k-steps depends on how many an SM holds and what they store; a model of it is
// still to be written. Until then the fp32 rule sends the short-K products where k16 measured faster to it
// before asking est_ns (choose_row, "K <= 128 and M >= 64").
constexpr RowPace kRowPaces[] = {
    {row_index("blocked_wide_128x256x8"), kBlockedFlopPerNs * 125 / 100, 0, 1, 0, 1, 10000, 1, 10000},
    {kBlocked64, kBlockedFlopPerNs * 120 / 100, 0, 1, 0, 3, 0, kLoneBlockShare},
    {kBlockedK16, kBlockedFlopPerNs, 0, 1, 0, 1, 0, kLoneBlockShare},
    {kTcTf32_256, 0, kTf32MmaSyncBytesPerNs, 1, 0, 1},
    {kTcTf32_128, 0, kTf32MmaSyncBytesPerNs, 1, 0, 1},
    {kTcTf32_64, 0, kTf32MmaSyncBytesPerNs, kTf32MmaSyncBlocksPerSm, kTf32MmaSyncSmBytesPerNs, 1},
};

// Rows whose split count fills the SMs with a measured number of blocks each (at most: floor(blocks_per_sm x
// SMs / tiles) slices, at least one), not est_ns's ranking, which has no model of two blocks an SM running
// faster together than one alone. blocked_m32_32x128x16 (128 threads, two an SM): H200, fp32, kernel durations
// over a CUDA graph, W cold, us, 2 blocks an SM / the best of 1, 2, 3, 4, 6, 8 slices: x @ W.t() 32x4096x4096
// 45.4 in 8 / 45.4 (46.8 in 4), 32x4096x14336 147.3 in 2 / 147.3 (156.7 unsplit, 169.9 in 8), 32x14336x4096
// 133.3 in 8 / 133.3; x @ B 32x4096x4096 34.8 in 8 / 34.8; 48x4096x4096 76.2 in 4 / 76.2; the most it missed
// by: x @ B 48x4096x14336 223.0 unsplit / 191.0 in 4.
struct FillRow {
  int row;
  int64_t blocks_per_sm;
};
constexpr FillRow kFillRows[] = {{kBlockedM32, 2}};

// Row c's entry in one of the per-row tables above (kRowPaces, kFillRows), or nullptr.
template <typename Entry, size_t N>
const Entry* entry_of(const Entry (&table)[N], const KernelConfig& c) {
  for (const Entry& r : table)
    if (&kConfigs[r.row] == &c) return &r;
  return nullptr;
}
const RowPace* row_pace(const KernelConfig& c) { return entry_of(kRowPaces, c); }
const FillRow* fill_row(const KernelConfig& c) { return entry_of(kFillRows, c); }

double mma_flop_per_ns(const KernelConfig& c, c10::ScalarType dtype) {
  const RowPace* r = row_pace(c);
  if (r != nullptr && r->flop_per_ns > 0) return r->flop_per_ns;
  if (c.family == Family::Blocked) return kBlockedFlopPerNs;
  const double rate = c.family == Family::Hopper ? 7500 : 4900;
  return dtype == c10::ScalarType::Float ? rate / 2 : rate;
}

// The blocks of row c an SM runs at once, as est_ns counts them: its kRowPaces `together` where the output has
// at least an eighth of a wave of its tiles, one otherwise. (Fewer tiles: more slices lost, the reduction of many
// slabs of a small output costing more than est_ns counts; H100, tensorcore_tf32_64x64x16 per call under CUDA
// graphs: 64x65536x64 in 256 slices 0.0241 ms vs 0.0208 in 128, x @ W.t() 8x768x1000 in 16 0.0065 vs 0.0062 in 8.)
int64_t blocks_per_sm(const KernelConfig& c, const GemmProblem& p, const DeviceInfo& d) {
  const RowPace* r = row_pace(c);
  return r != nullptr && r->together > 1 && 8 * tiles(p, c) >= d.num_sms ? r->together : 1;
}

// How est_ns counts the adding of s > 1 slices: always as the second pass (second_pass_est_ns, which decides
// whether to split at all), or the way split_reduce_way will add them (reduce_est_ns, which ranks split counts).
enum class Adding { Pass, ByWay };

double est_ns(const KernelConfig& c, const GemmProblem& p, const DeviceInfo& d, int64_t s,
              Adding adding = Adding::Pass) {
  const int64_t bk = c.bk, kt = k_tiles(c, p), per = (kt + s - 1) / s;
  const int64_t blocks = tiles(p, c) * s;
  // An SM's blocks, run `together` at a time in `rounds` (in units of one block's time).
  const int64_t per_sm = (blocks + d.num_sms - 1) / d.num_sms;
  const RowPace* measured = row_pace(c);
  const int64_t together = std::min(per_sm, blocks_per_sm(c, p, d));
  const double rounds = static_cast<double>((per_sm + together - 1) / together);
  const double esize = static_cast<double>(c10::elementSize(p.dtype));
  const double k_span = static_cast<double>(per * bk);
  const bool half = esize == 2;
  const int64_t rows_a = c.family == Family::Hopper && half ? c.bm : std::min<int64_t>(c.bm, p.M);
  const double bytes = k_span * (rows_a + std::min<int64_t>(c.bn, p.N)) * esize;
  const double flops = 2.0 * c.bm * c.bn * k_span;
  const double pace = measured == nullptr || measured->bytes_per_ns == 0 ? kSmBytesPerNs
                      : together == 1                                    ? measured->bytes_per_ns
                                                                         : measured->together_bytes_per_ns;
  // A row slowed alone (lone_share < 1) is slowed more where each weight panel is read by at most two blocks.
  const bool streams = (p.M + c.bm - 1) / c.bm <= 2;
  const double lone_share = measured == nullptr || per_sm > 1 ? 1.0
                            : streams && measured->lone_share < 1 ? kLoneStreamShare
                                                                  : measured->lone_share;
  const double mma_rate = mma_flop_per_ns(c, p.dtype) * lone_share;
  const double fixed_ns = measured == nullptr || measured->fixed_ns == 0 ? kBlockFixedNs : measured->fixed_ns;
  const double store_ns =
      measured != nullptr && s == 1 && !c_rows_aligned16(p) ? measured->unaligned_store_ns : 0.0;
  const double block_ns = fixed_ns + store_ns + together * std::max(bytes / pace, flops / mma_rate);
  const double hbm = half && d.mem_bytes_per_ns > 0 ? d.mem_bytes_per_ns : kHbmBytesPerNs;
  const double operand_bytes = static_cast<double>(half ? std::max(p.M, p.N) : p.M + p.N) * p.K * p.batch * esize;
  const double hbm_ns = (half ? kBlockFixedNs : 0.0) + operand_bytes / hbm;
  const double reduce_ns = s == 1                   ? 0.0
                           : adding == Adding::ByWay ? reduce_est_ns(c, p, s, d.num_sms)
                                                     : second_pass_est_ns(p, s);
  return std::max(rounds * block_ns, hbm_ns) + reduce_ns;
}

// The split count with the least estimated time for row c on p, among those of at most kSplitRounds rounds of
// blocks (blocks_per_sm or `resident` an SM; at most `cap` slices; 1 when even one slice fills them). Several
// rounds win where one leaves SMs idle and a slice count fills them evenly: H100, per call under CUDA graphs,
// W cold, ms, one round / four: fp32 x @ W.t() 4096x3072x768 0.578 (64x128, 1 slice) / 0.470 (128x256, 4;
// cuBLAS 0.419); dY @ W 4096x50257x768 9.08 / 6.57 (6.05); TF32 dW 3072x12608x768 0.641 (tensorcore 128x256,
// 1) / 0.418 (7; 0.280); 768x12608x768 0.145 (128x128, 3) / 0.113 (7; 0.092).
constexpr int64_t kSplitRounds = 4;
int64_t estimated_splits(const KernelConfig& c, const GemmProblem& p, const DeviceInfo& d, int64_t cap) {
  const RowPace* r = row_pace(c);
  const int64_t per_sm = std::max(blocks_per_sm(c, p, d), r == nullptr ? int64_t{1} : r->resident);
  cap = std::min<int64_t>(cap, kSplitRounds * d.num_sms * per_sm / std::max<int64_t>(tiles(p, c), 1));
  // est_ns sees s through its slices' length, per = ceil(kt / s), and for one length grows with s (more
  // blocks, more reduction): only the fewest slices of each length can win, so the search steps from length
  // to length (~2 sqrt(kt) of them; every s took ~80 us a call on fp32 64x65536x64, 4096 k-tiles of 16).
  const int64_t kt = k_tiles(c, p);
  int64_t best = 1;
  double best_ns = 0;
  for (int64_t s = 2; s <= cap;) {
    const double ns = est_ns(c, p, d, s, Adding::ByWay);
    if (best == 1 || ns < best_ns) best = s, best_ns = ns;
    const int64_t per = (kt + s - 1) / s;
    if (per <= 1) break;
    s = (kt + per - 2) / (per - 1);  // the fewest slices shorter than per: ceil(kt / (per - 1))
  }
  // Whether to split at all goes by the second pass's estimate, the kernel's way too: its hand-over is measured per
  // slice, while the blocks of a split do not run as much faster as est_ns counts (H200, bf16, kernel durations
  // over a CUDA graph, W cold, us, unsplit / 2 slices added in the kernel: x @ W.t() 128x2048x2048 on 64x64 7.22 /
  // 8.08, 128x768x2304 on 64x128 TF32 7.35 / 8.58, dY @ W 128x2048x5632 9.21 on 128x64 / 13.27 on 128x128), where
  // the slice counts after it go by the way that adds them (x @ W.t() 128x14336x4096 in 3 slices of 128x128 by the
  // second pass 40.20 -> 2 of 128x64 in the kernel 36.42, 128x5632x2048 in 4 of 128x64 by the second pass 12.75 ->
  // 2 of 64x64 in the kernel 12.21; 32x4096x1024 in 6 of 64x64 by the second pass 8.66 -> 4 in the kernel 8.16).
  return best > 1 && est_ns(c, p, d, best) < est_ns(c, p, d, 1) ? best : 1;
}

// The most slices of K for row c on p: one k-tile each, the grid's 65535 layers, the workspace cap.
int64_t split_cap(const KernelConfig& c, const GemmProblem& p) {
  const int64_t kt = k_tiles(c, p);
  const int64_t slab = p.batch * p.M * p.N * 4;
  return std::min<int64_t>({kt, 65535 / std::max<int64_t>(p.batch, 1), kMaxSlabBytes / std::max<int64_t>(slab, 1)});
}

// Row c on p at its best split count: the count, its estimated time with the slices added the way they will be,
// and with them added by the second pass (what a split must beat unsplit by: estimated_splits).
struct RowEstimate {
  int64_t splits;
  double ns, pass_ns;
};
RowEstimate best_estimate(const KernelConfig& c, const GemmProblem& p, const DeviceInfo& d) {
  const int64_t s = estimated_splits(c, p, d, split_cap(c, p));
  return {s, est_ns(c, p, d, s, Adding::ByWay), est_ns(c, p, d, s)};
}

// The least estimated time of row c on p, over its split counts.
double best_est_ns(const KernelConfig& c, const GemmProblem& p, const DeviceInfo& d) {
  return best_estimate(c, p, d).ns;
}

std::atomic<int64_t> g_split_override{0};

// gemv_split's slices: enough blocks for two on every SM (their loads in flight are what streams B at memory
// speed), each slice at least bk of K (as gemv_split_blocks counts them; slices of 2 * bk were slower: H100,
// fp32 under CUDA graphs, gemv_split_rowb 8x768x3072 0.029 ms in 12 slices vs 0.049 in 6, 4x4096x1024 0.023
// in 64 vs 0.035 in 32).
// A row an SM holds one block of (32 rows) takes the most slices that still make one round (32x14336x4096: 4
// slices, 128 blocks; 5 would be 160 blocks in two rounds).
int64_t gemv_split_count(const KernelConfig& c, const GemmProblem& p, const DeviceInfo& d, int64_t cap) {
  const int64_t blocks = std::max<int64_t>(tiles(p, c), 1);
  const int64_t per_sm = gemv_split_blocks_per_sm(c);
  // Blocks that already fill 90% of a round stay whole (fp32, 16x768x32000's 250 blocks against 264 places: 58.0
  // us unsplit, 76.0 in 2 slices; 16x4096x32000 203 against 238, cuBLAS 56.2 and 269; H200, W cold, under CUDA
  // graphs).
  if (per_sm > 1 && 10 * blocks >= 9 * per_sm * d.num_sms) return 1;
  // Enough slices for two blocks on every SM, unless that overfills the round by more than a tenth: then the most
  // that fit in it (H200, fp32 x @ W.t(), kernel durations over a CUDA graph, W cold, us: 8x4096x14336, 112 tiles,
  // 3 slices 126.5 -> 2 slices 98.0, 16 rows 136.2 -> 111.4; 8x8192x8192, 64 tiles, 5 slices 133.1 -> 4 99.6;
  // 8x4096x28672, 224 tiles, 2 slices 194.2 -> unsplit 180.6; while 4096x6144's 48 tiles kept 6 slices, 288
  // blocks: 16 rows 54.9 against 64.4 in 4, 8 rows 47.1 against 54.2).
  const int64_t places = per_sm * d.num_sms;
  int64_t want = per_sm == 1 ? d.num_sms / blocks : (places + blocks - 1) / blocks;
  if (per_sm > 1 && 10 * want * blocks > 11 * places) want = std::max<int64_t>(1, places / blocks);
  return std::max<int64_t>(1, std::min({want, cap, p.K / c.bk}));
}

// The most blocks a gemv_split row can run p in: column tiles x slices of bk. Its lanes wait on DRAM every step
// of their share of K, which only many blocks an SM hide: with few blocks each runs at a fraction of the SM's
// pace (H100, fp32 x @ W.t(), under CUDA graphs: 16x3072x768, 6 tiles of 12 slices, 0.029 ms, blocked_64x128x8
// 0.018, cuBLAS 0.020). The rules ask for two blocks an SM for x @ W.t() (32x4096x1024's 256 blocks: 0.030 ms
// vs 0.027 on blocked_64x128x8) and one for gemv_split_rowb (4x4096x4096's 256: 0.036 vs 0.067).
int64_t gemv_split_blocks(const KernelConfig& c, const GemmProblem& p) {
  return tiles(p, c) * std::max<int64_t>(p.K / c.bk, 1);
}

// The split count for row c on p: the override, or the least estimated time
// among the counts of at most kSplitRounds rounds of blocks; `why` gets the sentence, `way` how the slices are
// added.
int plan_splits(const KernelConfig& c, const GemmProblem& p, const DeviceInfo& d, std::string& why, SplitWay& way) {
  if (!family_splits_k(c.family) || p.dtype == c10::ScalarType::Double) return 1;
  const bool gemv = c.family == Family::GemvSplit;  // its own count (gemv_split_count), not est_ns's
  const int64_t kt = k_tiles(c, p);
  const int64_t cap = split_cap(c, p);
  int64_t best = 1;
  const int64_t forced = g_split_override.load();
  const FillRow* fill = fill_row(c);
  if (forced > 0) {
    best = std::min<int64_t>(forced, std::max<int64_t>(cap, 1));
  } else if (fill != nullptr) {
    best = std::max<int64_t>(1, std::min<int64_t>(cap, fill->blocks_per_sm * d.num_sms /
                                                           std::max<int64_t>(tiles(p, c), 1)));
  } else {
    best = gemv ? gemv_split_count(c, p, d, cap) : estimated_splits(c, p, d, cap);
  }
  if (best <= 1) return 1;
  // Slices of ceil(kt / best) k-tiles: as many as that takes, so none is empty.
  const int64_t per = (kt + best - 1) / best;
  best = (kt + per - 1) / per;
  if (best <= 1) return 1;
  way = split_reduce_way(c, p, best, d.num_sms);
  std::ostringstream os;
  os << "; split-K: K in " << best << " slices of " << per * c.bk << ", "
     << (way == SplitWay::Kernel ? "added in the kernel" : "reduced by a second pass")
     << " in a fixed order (";
  if (forced > 0)
    os << "forced by _set_split_k";
  else if (gemv)
    os << best * tiles(p, c) << " blocks, " << gemv_split_blocks_per_sm(c)
       << " an SM: their loads in flight stream B at memory speed";
  else if (fill != nullptr)
    os << best * tiles(p, c) << " blocks, at most " << fill->blocks_per_sm << " an SM";
  else {
    const int64_t per_sm = blocks_per_sm(c, p, d), t = tiles(p, c);
    os << "estimated " << static_cast<int64_t>(est_ns(c, p, d, best, Adding::ByWay) / 1000) << " us vs "
       << static_cast<int64_t>(est_ns(c, p, d, 1) / 1000) << " us unsplit: "
       << (per_sm > 1     ? "up to " + std::to_string(per_sm) + " blocks an SM"
           : t < d.num_sms ? std::string("fewer tiles than SMs")
                           : std::to_string(t) + " tiles leave SMs of their last round idle");
  }
  os << ")";
  why = os.str();
  return static_cast<int>(best);
}

Choice with_splits(Choice ch, const GemmProblem& p, const DeviceInfo& d) {
  std::string why;
  ch.reduce = SplitWay::Pass;
  ch.splits = plan_splits(*ch.cfg, p, d, why, ch.reduce);
  ch.reason += why;
  return ch;
}

// ---- the tune cache: key -> the tuned row and its reason (both made once, in set_tuned).
std::mutex g_tuned_mu;
std::unordered_map<std::string, Choice> g_tuned;
std::atomic<int64_t> g_tuned_size{0};  // read without the lock: an empty cache costs one load per call

// The tuned row for p, if the cache has one that runs here.
std::optional<Choice> tuned_choice(const GemmProblem& p, const DeviceInfo& d) {
  if (g_tuned_size.load(std::memory_order_relaxed) == 0) return std::nullopt;
  const std::string key = tune_key(p);
  Choice t;
  {
    std::lock_guard<std::mutex> lock(g_tuned_mu);
    const auto it = g_tuned.find(key);
    if (it == g_tuned.end()) return std::nullopt;
    t = it->second;
  }
  if (!cannot_run(*t.cfg, p, d).empty()) return std::nullopt;
  return t;
}

// ---- the choice cache: choose()'s result (row, split count, where the slices are added, reason) per problem,
// so a model's repeated products skip the rules, the split search and the reason's strings: a few us a call on
// the sub-wave products of small batches (the rules ran on every call before). ChoiceKey holds everything
// choose() reads: the device, the sizes and dtype, the operands' layouts and alignment, C's alignment, TF32
// consent, and what split_reduce_way asks of the epilogue (bias and its broadcast, the activation). A rule
// that reads more of the problem adds it here (test_dispatch.py compares cached picks with fresh ones). Not
// used while a testing hook forces the split count or the reduction.
struct ChoiceKey {
  int64_t M, N, K, batch;
  int index, sm, num_sms;  // the device (index -1: a described GPU, known by these and its bandwidth)
  double mem;
  int dtype, act;
  unsigned flags;
  bool operator==(const ChoiceKey& o) const {
    return M == o.M && N == o.N && K == o.K && batch == o.batch && index == o.index && sm == o.sm &&
           num_sms == o.num_sms && mem == o.mem && dtype == o.dtype && act == o.act && flags == o.flags;
  }
};

struct ChoiceKeyHash {
  size_t operator()(const ChoiceKey& k) const {
    size_t h = 0;
    for (const int64_t v : {k.M, k.N, k.K, k.batch, int64_t{k.index}, int64_t{k.sm}, int64_t{k.num_sms},
                            static_cast<int64_t>(k.mem), int64_t{k.dtype}, int64_t{k.act}, int64_t{k.flags}})
      h = (h ^ std::hash<int64_t>{}(v)) * 0x100000001b3ULL;
    return h;
  }
};

ChoiceKey choice_key(const GemmProblem& p, const DeviceInfo& d) {
  const unsigned flags = (p.a.k_contiguous ? 1u : 0u) | (p.b.k_contiguous ? 2u : 0u) |
                         (rows_aligned16(p.a, p) && rows_aligned16(p.b, p) ? 4u : 0u) |
                         (c_rows_aligned16(p) ? 8u : 0u) | (p.allow_tf32 ? 16u : 0u) |
                         (p.bias != nullptr ? 32u : 0u) | (p.sbias_m == 0 ? 64u : 0u) |
                         (p.partial != nullptr ? 128u : 0u);
  return ChoiceKey{p.M, p.N, p.K, p.batch, d.index, d.sm, d.num_sms, d.mem_bytes_per_ns,
                   static_cast<int>(p.dtype), static_cast<int>(p.act), flags};
}

// At most this many problems (a model runs tens); a full cache starts over.
constexpr size_t kMaxChoices = 4096;
std::mutex g_choices_mu;
std::unordered_map<ChoiceKey, Choice, ChoiceKeyHash> g_choices;
std::atomic<bool> g_choices_on{true};

Choice cached_choose(const GemmProblem& p, const DeviceInfo& d) {
  if (!g_choices_on.load(std::memory_order_relaxed) || g_split_override.load(std::memory_order_relaxed) != 0 ||
      split_reduce_forced())
    return choose(p, d);
  const ChoiceKey key = choice_key(p, d);
  {
    std::lock_guard<std::mutex> lock(g_choices_mu);
    const auto it = g_choices.find(key);
    if (it != g_choices.end()) return it->second;
  }
  Choice ch = choose(p, d);
  std::lock_guard<std::mutex> lock(g_choices_mu);
  if (g_choices.size() >= kMaxChoices) g_choices.clear();
  g_choices.emplace(key, ch);
  return ch;
}

}  // namespace

int64_t set_choice_cache(bool enabled) {
  std::lock_guard<std::mutex> lock(g_choices_mu);
  const auto held = static_cast<int64_t>(g_choices.size());
  g_choices.clear();
  g_choices_on.store(enabled);
  return held;
}

void set_tuned(const std::string& key, TunedEntry entry) {
  const KernelConfig* c = find_config(entry.kernel);
  TORCH_CHECK(c != nullptr, "tilelab::_tune_set: no config named '", entry.kernel,
              "' in this build (tilelab_torch.kernels() lists them)");
  std::ostringstream why;
  why << std::setprecision(4) << "tuned: " << entry.kernel << " measured " << entry.ms << " ms vs " << entry.rule_ms
      << " ms for the rules' pick (" << entry.rule_kernel << ")";
  std::lock_guard<std::mutex> lock(g_tuned_mu);
  g_tuned[key] = Choice{c, why.str()};
  g_tuned_size.store(static_cast<int64_t>(g_tuned.size()));
}

void clear_tuned() {
  std::lock_guard<std::mutex> lock(g_tuned_mu);
  g_tuned.clear();
  g_tuned_size.store(0);
}

int64_t tuned_size() { return g_tuned_size.load(); }

void set_split_k_override(int64_t splits) {
  TORCH_CHECK(splits >= 0, "tilelab::_set_split_k: splits must be >= 1 (or None, or 0, to restore the estimate), got ",
              splits);
  g_split_override.store(splits);
}

std::string cannot_run(const KernelConfig& c, const GemmProblem& p, const DeviceInfo& d) {
  std::ostringstream os;
  if (!(c.dtypes & dtype_bit(p.dtype))) {
    os << c.name << " does not support " << dtype_str(p.dtype);
  } else if (c.threads > d.max_threads_per_block) {
    os << c.name << " needs " << c.threads << " threads per block but " << d.label() << " (" << d.name
       << ") allows at most " << d.max_threads_per_block;
  } else if (d.sm < c.min_sm) {
    os << c.name << " needs compute capability " << c.min_sm / 10 << "." << c.min_sm % 10 << " but " << d.label()
       << " is " << d.sm / 10 << "." << d.sm % 10;
  } else if (c.tf32 && !p.allow_tf32) {
    os << c.name << " computes in TF32 (10-bit mantissa), which fp32 inputs may only use when "
       << "TF32 is allowed: call torch.set_float32_matmul_precision(\"high\") (or \"medium\") "
       << "first; the current precision is \"highest\" (IEEE fp32)";
  } else {
    return family_cannot_run(c, p, d);
  }
  return os.str();
}

namespace {
Choice choose_row(const GemmProblem& p, const DeviceInfo& d) {
  auto pick = [&](int row, std::string why) -> Choice {
    const KernelConfig& c = kConfigs[row];
    if (cannot_run(c, p, d).empty()) return Choice{&c, std::move(why)};
    return Choice{};
  };
  Choice ch;
  const int64_t sms = d.num_sms;
  const bool half = is_half(p.dtype);
  const bool tf32 = p.dtype == c10::ScalarType::Float && p.allow_tf32;
  const int64_t tiles256 = tiles(p, kHopper256), tiles128 = tiles(p, kHopper128);
  // A 256-wide tiling must not cover more than 25% more of C than a 128-wide one.
  const bool n_fits_256 = 4 * ((p.N + 255) / 256 * 256) <= 5 * ((p.N + 127) / 128 * 128);
  // Every row of both operands 16-byte aligned: what the vector loads, cp.async and TMA read in place.
  const bool aligned = rows_aligned16(p.a, p) && rows_aligned16(p.b, p);

  // --- tiny products (at most 2^16 multiply-adds a matrix, K <= 256) whose rows are not 16-byte aligned
  // (K = 5 half rows are 10 bytes): launch-bound, and the tile rows would copy the operands first. The gemv
  // row reads any strides in place: one launch, no copies, no workspace, at most 8 scalar K steps a lane.
  // (With aligned rows the tile rows are faster: bf16 16x16x16 2.6 us vs 6.0; fp64 keeps tiled_16x16x16.)
  if ((half || p.dtype == c10::ScalarType::Float) && p.M * p.N * p.K <= 65536 && p.K <= 256 && !aligned) {
    ch = pick(kGemv, "a tiny product (M*N*K <= 2^16, K <= 256) with rows not 16-byte aligned: one launch of the "
                     "gemv row, operands read in place (H200, per call under CUDA graphs: bf16 5x5x5 2.7 us vs 4.6 "
                     "for tensorcore_64x64x32, which copies them first; fp32 3.4 vs 5.0 for blocked_k16_64x64x16)");
    if (ch.cfg) return ch;
  }

  // --- at most 16 rows over a K of at most 8 (a few multiply-adds an output): writing C and reading the
  // operands once is the work. One thread per output reads them in place (the naive row); a warp per output
  // column (gemv) idles most lanes on so short a K, and the tile rows copy rows that are not 16-byte aligned
  // and pad K to a whole stage. (Grid: at most 65535 column tiles of 16.)
  if ((half || p.dtype == c10::ScalarType::Float) && p.M <= 16 && p.K <= 8 &&
      (p.N + kConfigs[kNaive16].bn - 1) / kConfigs[kNaive16].bn <= 65535) {
    ch = pick(kNaive16, "at most 16 rows and K <= 8: one thread per output, operands read in place (H200, per call "
                        "under CUDA graphs, F.linear's layout: fp32 2x3x100003 0.0080 ms vs 0.116 for gemv_16x8, "
                        "16x8x65536 0.0095 vs 0.132; bf16 2x3x100003 0.0061 vs 0.026 for hopper_128x256x64, "
                        "16x8x65536 0.0096 vs 0.041 for gemv_mma_16x32x64)");
    if (ch.cfg) return ch;
  }

  // --- few rows with k-contiguous operands (decoding: x @ W.t()): W streamed
  // once. Half precision on the tensor cores (gemv_mma) while both operands'
  // rows are 16-byte aligned (else the launcher would copy W); IEEE fp32 on
  // gemv_split from 2 to 32 rows (aligned rows; from 8 where N >= 2K, whose many
  // columns keep a warp per column busy enough; above 16 rows on blocks of 32 rows
  // where they make a round of the SMs on long slices of K, else on blocks of 16
  // that read the same W slice one after the other, the second from L2) where
  // its blocks fill the SMs, else on the gemv row, a warp per output column (up
  // to 16 rows; where gemv_split's rows could not fill the SMs, up to 8, or 16
  // where K <= 1024), and above that the tile rows. Under TF32 on sm_90 the TF32 wgmma row takes 2 rows and
  // more of a large weight (tf32_decode_tiles); otherwise the IEEE rows keep up to 4 rows where N < 2K, up to 2
  // on gemv where N >= 2K.
  // The measurements in the reasons: per call under CUDA graphs, W cold in L2 and x hot (as a model's
  // activation is).
  const bool k_cont = p.a.k_contiguous && p.b.k_contiguous;  // x @ W.t(); the hopper rules below read it too
  const bool fp32 = p.dtype == c10::ScalarType::Float;
  // TF32, 2 to 64 rows of x @ W.t() (one row too where K <= 1024) into 2048 columns or more over a weight of at
  // least 2^23 elements, where the 64x128 TF32 wgmma row runs: the IEEE gemv rows below keep the other single
  // rows, and the tensor-core rules' 64-row TF32 rule
  // takes the rest (tf32_m64_why). Since A's TMA box holds only the product's rows (hopper::a_box_rows), those
  // tiles stream W faster than the IEEE gemv rows, which kept 1 to 4 rows when their rule was written. One row and
  // smaller weights stay with gemv, which was as fast or faster there. H200, W cold, kernel durations over a CUDA
  // graph, us, the previous pick -> the tiles (cuBLAS): 4x4096x4096 27.8 (gemv_split) -> 21.9 (20.5), 4x8192x8192
  // 95.8 -> 66.2 (73.9), 2x768x50257 71.2 (gemv_16x8) -> 39.1 (58.3), 16x768x50257 49.7 (hopper_tf32_128x256x32)
  // -> 40.8 (62.0); 17 products, 16 faster, one tie (2x14336x4096 60.6 -> 60.6). With one row and small weights
  // they lost (1x4096x6144 26.3 on gemv_16x8 -> 29.2, 1x4096x28672 111.7 -> 117.7, 2x1024x4096 8.5 -> 9.5; won at
  // 1x14336x4096 62.9 -> 60.5 and 1x768x50257 43.2 -> 38.8). One row over K <= 1024 (a language model's head) goes
  // to the tiles since the IEEE rows gave it to gemv_split (rows_ab: 1x768x50257 43.42 there, 38.76 on the
  // tiles, cuBLAS 38.19); 1x14336x4096 has since tied on gemv_split (59.78 against 59.78) and stays.
  const bool tf32_decode_tiles = tf32 && k_cont && aligned && p.batch == 1 && (p.M >= 2 || p.K <= 1024) &&
                                 p.M <= 64 && p.N >= 2048 && p.K * p.N >= (int64_t{1} << 23) &&
                                 cannot_run(kConfigs[kHopperTf32M64], p, d).empty();
  if (half && k_cont && p.M <= 16 && aligned) {
    // gemv_mma's persistent blocks take equal shares of whole 16 x 32 tiles (one block an SM: its ring). Where
    // there are more tiles than SMs and those shares leave a tenth of the SMs idle (4096x14336's 448 tiles: 4 a
    // block on 112 SMs), wgmma tiles stream W faster, now that A's box holds only the product's rows
    // (hopper::a_box_rows; before it, 128x128 took 0.049 ms at 1x4096x14336): 128x128 where a wave of them
    // covers 5/6 to all of the SMs unsplit, else 64x64 where they are fewer than the SMs (unsplit there). H200,
    // bf16, W cold, kernel durations over a CUDA graph, us a call, 1 / 16 rows, the tiles against gemv_mma and
    // cuBLAS: 4096x14336 on 128x128 31.7 / 32.1 against 33.4 / 36.1 and 30.3 / 30.5; 4096x6144 on 64x64 15.7 /
    // 15.9 against 16.6 / 18.6 and 15.1 / 15.8; 2048x5632 8.4 / 8.3 against 8.7 / 11.0 and 8.0 / 7.9. Outside
    // those: 128x128 in slices lost (4096x6144 18.8 / 19.5), and so did two rounds of 64x64 (4096x11008, 172
    // tiles: 29.9 against 26.0 / 29.0); 4096x11008's 86 tiles of 128x128, 65% of a wave, tied with gemv_mma
    // up to 8 rows (26.4 against 26.0-26.4) and won at 16 (26.8 against 29.0), which this rule leaves to it.
    const int64_t gm_tiles = tiles(p, kGemvMma);
    const bool gm_idles = gm_tiles > sms && 10 * persistent_shares(gm_tiles, sms).blocks < 9 * sms;
    if (gm_idles && 6 * tiles128 >= 5 * sms && tiles128 <= sms) {
      ch = pick(kHopper128, "sm_90, half precision, M <= 16 of x @ W.t() whose " + std::to_string(gm_tiles) +
                                " gemv_mma tiles, in equal shares of whole tiles, leave a tenth of the SMs idle, and a "
                                "wave of 128x128 tiles covers 5/6 to all of them: wgmma tiles unsplit (H200, bf16, W "
                                "cold, per call under CUDA graphs: 1x4096x14336 0.0317 ms vs 0.0334 for "
                                "gemv_mma_16x32x64, 16x4096x14336 0.0321 vs 0.0361; cuBLAS 0.0303, 0.0305)");
      if (ch.cfg) return ch;
    }
    // Where gemv_mma's blocks take two tiles or more (more tiles than SMs), 64-row wgmma tiles that make one wave
    // stream W faster even when the shares keep the SMs busy: 64x64, else 64x96 (H200, bf16, W cold, kernel
    // durations over a CUDA graph, us, 1 / 4 / 16 rows: 8192x8192, 256 gemv_mma tiles on 128 blocks, 36.41 /
    // 36.78 / 38.68 against 34.57 / 34.87 / 34.68 on 64x64; 4096x11008, 344 on 115, 26.20 / 26.21 / 28.58 against
    // 24.18 / 24.37 / 24.80 on 64x96; cuBLAS 33.4-33.6, 24.2-24.6). The same holds with F.linear's bias and a GELU
    // fused (picks_ab.py, one row of 8 weights + bias, + bias + GELU: the tiles of this and the next rules faster
    // on 15 of 16, the exception 4096x28672 + bias + GELU on ping-pong, 65.31 against 62.32; 1x8192x8192 + bias +
    // GELU 35.33 against 37.54, cuBLAS 35.64). One tile a block (4096x4096, 14336x4096) stays on gemv_mma, which
    // was the fastest row there (11.61 against 12.61 on 64x64; 32.32 against 33.37).
    for (const int row : {kHopperM64, kHopperM64x96}) {
      if (gm_tiles <= sms || tiles(p, row) > sms) continue;
      ch = pick(row, "sm_90, half precision, M <= 16 of x @ W.t() whose " + std::to_string(gm_tiles) +
                         " gemv_mma tiles are more than the SMs" +
                         (gm_idles ? ", in equal shares leaving a tenth of the SMs idle" : "") + ": 64-row wgmma "
                         "tiles no more than the SMs (64x64, else 64x96) at their split count (H200, bf16, W cold, "
                         "per call under CUDA graphs, unsplit: 1x4096x6144 0.0157 ms on 64x64 vs 0.0166 for "
                         "gemv_mma_16x32x64, 16x4096x6144 0.0159 vs 0.0186, 16x2048x5632 0.0083 vs 0.0110, "
                         "16x8192x8192 0.0347 vs 0.0387, 16x4096x11008 0.0248 on 64x96 vs 0.0286; cuBLAS 0.0151, "
                         "0.0158, 0.0079, 0.0334, 0.0244)");
      if (ch.cfg) return ch;
    }
    // Many columns (language-model heads: 32000 and 50257), at least 1.5 waves of 128x128 tiles: gemv_mma's
    // blocks run 8 to 12 tiles each, each ending in a sum over the block's warps, and every wgmma row streamed W
    // faster (H200, bf16, W cold, kernel durations over a CUDA graph: 16 products, 1 and 16 rows, K 768 to 4096,
    // N 32000 and 50257; gemv_mma 1.19x the fastest row's time, geometric mean, up to 1.64x). Ping-pong 128x128
    // unsplit was within 6% of the fastest row on all 16 (1.02x, geometric mean; on an H100, bf16, the same 16:
    // ping-pong 1.03x, at most 1.05x, gemv_mma 1.11x, at most 1.26x). The tiles' lead over gemv_mma
    // shrank with K (5-6% at 4096), so a longer K (8192x28672), unmeasured, stays with gemv_mma.
    if (p.batch == 1 && p.K <= 4096 && 2 * tiles128 >= 3 * sms) {
      ch = pick(kHopperPingPong, "sm_90, half precision, M <= 16 of x @ W.t(), K <= 4096, over at least 1.5 waves "
                                 "of 128x128 tiles: ping-pong wgmma tiles stream W faster than gemv_mma's many "
                                 "tiles a block "
                                 "(H200, bf16, W cold, per call under CUDA graphs: 1x768x50257 0.0220 ms vs 0.0269 for "
                                 "gemv_mma_16x32x64, 16x768x50257 0.0244 vs 0.0370, 1x4096x32000 0.0662 vs 0.0698, "
                                 "16x2048x32000 0.0352 vs 0.0395; cuBLAS 0.0294, 0.1022, 0.0629, 0.0348)");
      if (ch.cfg) return ch;
    }
    ch = pick(kGemvMma, "half precision, M <= 16 with k-contiguous, 16-byte aligned operands (x @ W.t()): swap-AB "
                        "mma.sync streams W once (H200, bf16, per call under CUDA graphs, W cold: 1x4096x4096 0.0115 "
                        "ms vs 0.0126 for hopper_m64_64x64x64 and 0.0142 for hopper_128x128x64, 16x4096x4096 0.0126 "
                        "vs 0.0127 and 0.0147; cuBLAS 0.0124, 0.0124)");
    if (ch.cfg) return ch;
  }
  const int64_t gemv_rows = tf32_decode_tiles ? 0 : p.allow_tf32 ? 2 : 16,
                split_rows = tf32_decode_tiles ? 0 : p.allow_tf32 ? 4 : 32;
  const int64_t split_from = p.N >= 2 * p.K ? 8 : 2;  // under TF32 (at most 4 rows): none where N >= 2K
  // x in rows that are not 16-byte aligned against a large W whose rows are (x_copied_for_w): the gemv_split and
  // gemv launchers copy x into aligned rows (at most 32 of them, small beside W) and stream W 16 bytes a load
  // (H200, fp32, kernel time per call over a CUDA graph, x sliced: 16x4096x4096 on gemv_16x8 ~400 us reading x
  // in place, 100 copying it; 4x4096x4096 238 and 33; cuBLAS 48.0, 28.4).
  const bool split_rows_ok =
      k_cont && fp32 && (aligned || x_copied_for_w(p)) && p.M >= split_from && p.M <= split_rows;
  const KernelConfig& split16 = kConfigs[kGemvSplit];
  const bool split_fills = gemv_split_blocks(split16, p) >= gemv_split_blocks_per_sm(split16) * d.num_sms;
  // IEEE fp32, 25 to 48 rows (17 to 48 for x @ B, B row-major) over K and N of at least 4096: blocked tiles one
  // warp high (32 rows), two blocks an SM (kFillRows). At 17 to 24 rows of x @ W.t() gemv_split_* stay: a partial
  // 32-row tile takes the copy path with per-element tests, and there the two were even (H200: 24x4096x14336
  // 193.2 us vs 196.4, 24x14336x4096 170.6 vs 170.9).
  if (fp32 && !p.allow_tf32 && p.batch == 1 && p.M > 16 && p.M <= 48 && (p.M > 24 || !p.b.k_contiguous) &&
      p.N >= 4096 && p.K >= 4096) {
    ch = pick(kBlockedM32, "fp32, 17 to 48 rows (from 25 for x @ W.t()) over K and N >= 4096: 32-row register-blocked "
                           "tiles, two blocks an SM (H200, kernel durations over a CUDA graph, W cold, us: x @ W.t() "
                           "32x4096x14336 147.3 vs 208.2 for gemv_split_16x128x256, 32x14336x4096 133.3 vs 179.5 for "
                           "gemv_split_m32_32x128x256, 48x4096x14336 267.5 vs 310.7 for blocked_64x128x8; x @ B "
                           "17x4096x4096 39.8 vs 67.8, 32x4096x14336 117.0 vs 216.7 for blocked_64x128x8; cuBLAS "
                           "192.4, 135.9, 192.6, 39.1, 184.6)");
    if (ch.cfg) return ch;
  }
  // 17 to 32 rows (IEEE fp32) where 32-row blocks make a round of at least 90% of the SMs (one block an SM) on
  // slices of K of at least 2048: they stream W once where two 16-row blocks stream it twice; a short slice or a
  // round short of SMs lost.
  const KernelConfig& m32 = kConfigs[kGemvSplitM32];
  const auto m32_round = [&] {
    const int64_t slices = gemv_split_count(m32, p, d, split_cap(m32, p));
    return 10 * tiles(p, m32) * slices >= 9 * d.num_sms && p.K / slices >= 2048;
  };
  if (split_rows_ok && p.M > 16 && m32_round()) {
    ch = pick(kGemvSplitM32, "fp32, 17 to 32 rows with k-contiguous, 16-byte aligned operands (x @ W.t()), a round of "
                             "one block an SM on slices of K of at least 2048: 32 rows a block stream W once where two "
                             "16-row blocks stream it twice (H100, kernel durations over a CUDA graph, and with L2 "
                             "flushed: 32x14336x4096 0.181 / 0.229 ms vs 0.242 / 0.271 for gemv_split_16x128x256, "
                             "cuBLAS 0.139 / 0.150; 17x14336x4096 0.161 / 0.187 vs 0.202 / 0.238; slices of 1024 "
                             "lost, 32x4096x4096 0.078 vs 0.062, and 112 blocks did with L2 flushed, 32x4096x14336 "
                             "0.196 / 0.251 vs 0.208 / 0.236)");
    if (ch.cfg) return ch;
  }
  if (split_rows_ok && split_fills) {
    ch = pick(kGemvSplit, std::string(p.allow_tf32 ? "fp32 under TF32, 2 to 4 rows (N < 2K)"
                                                   : "fp32, 2 to 32 rows (from 8 where N >= 2K)") +
                              " with k-contiguous, 16-byte aligned operands (x @ W.t()), enough columns and K for two "
                              "blocks an SM: each x load serves 4 columns, each W load every row, K split over blocks "
                              "(H100: 8x14336x4096 0.102 ms vs 0.265 for gemv_16x8 and 0.164 for cuBLAS, 8x4096x14336 "
                              "0.132 vs 0.159 and 0.137, 16x14336x4096 0.112 vs 0.131 for cuBLAS, 32x4096x14336 0.207 "
                              "vs 0.308 for blocked_64x128x8 and 0.193 for cuBLAS; under TF32 2x14336x4096 0.085 vs "
                              "0.097 for hopper_tf32_128x128x32, 4x14336x4096 0.089 vs 0.105; H200: 4x14336x4096 "
                              "0.071 vs 0.101)");
    if (ch.cfg) return ch;
  }
  // Where gemv_split's blocks would leave SMs idle (a short K or few columns): a warp per column up to 8 rows, or
  // 16 where K <= 1024 (a warp's rows x K is its serial work); the tile rows above (H100: 16x3072x768 0.018 ms on
  // blocked_64x128x8 vs 0.029 here, 16x4096x1024 0.026 vs 0.038).
  // Fewer rows than the rule above splits (one; up to 7 where N >= 2K; TF32's tiles aside) over K <= 1024 where
  // gemv_split's blocks, unsplit, give every SM one: each of its warps holds 16 columns, a warp of gemv one, and
  // gemv's warps, a short K each, did not keep W streaming (H200, W cold, under CUDA graphs, us: 1x768x32000 26.8
  // vs 45.9 on gemv_16x8, 1x768x50257 43.3 vs 69.5, 1x1024x32000 34.6 vs 39.7, 1x1024x50257 55.1 vs 58.6; cuBLAS
  // 26.0, 38.2, 33.2, 49.7; even from K = 2048). Two and four rows alike (kernel durations over a CUDA graph,
  // W cold, us: 2x768x50257 46.8 vs 70.9 on gemv_16x8, 4x768x50257 56.8 vs 76.1; cuBLAS 43.4, 57.4).
  if (k_cont && fp32 && aligned && !tf32_decode_tiles && p.M < split_from && p.K <= 1024 && p.batch == 1 &&
      tiles(p, kGemvSplit) >= sms) {
    ch = pick(kGemvSplit, "fp32, fewer rows than gemv_split's split rule takes, over K <= 1024 (x @ W.t()), with "
                          "enough columns for a gemv_split block an SM: a warp holds 16 columns where gemv's holds "
                          "one (H200, W cold, per call under CUDA graphs: 1x768x32000 0.0268 ms vs 0.0459 for "
                          "gemv_16x8, 1x1024x50257 0.0551 vs 0.0586, 2x768x50257 0.0468 vs 0.0709; cuBLAS 0.0260, "
                          "0.0497, 0.0434)");
    if (ch.cfg) return ch;
  }
  const bool gemv_for_split = p.M <= 8 || (p.M <= 16 && p.K <= 1024);
  const bool gemv_takes = k_cont && fp32 && (split_rows_ok ? gemv_for_split : p.M <= gemv_rows);
  // Of what the gemv rule below takes, a long K into few columns (a reduction: 1x65536x64): gemv's blocks of 8
  // columns, fewer than the SMs, walk all of K, a warp a column; gemv_split's slices of K give every SM a block at
  // least, though not the two the rule above asks for. H200, kernel durations over a CUDA graph, W cold, us,
  // gemv_16x8 -> gemv_split_16x128x256 in its slice count (cuBLAS): fp32 1x65536x64 84.6 -> 11.9 (11.1),
  // 1x131072x128 166.8 -> 23.3 (23.5), 1x32768x256 44.5 -> 14.5 (15.2), 8x65536x64 276.5 -> 21.0 (28.0); the 16
  // products of 1 to 8 rows of the listings, fp32 and TF32, 1866.5 -> 271.1 us in all, every one faster (under
  // TF32 the tensor-core rows keep 8 rows: 8x65536x64 14.4 there against 21.1 here). Where gemv_split would not
  // give every SM a block, gemv stays (fp32 1x4096x1024 8.7 against 10.8 in 16 slices, 1x3072x768 6.5 against
  // 9.7). A K of 8192 or more and at least twice N, whose warps each walk it alone, is split too: fp32
  // 1x14336x4096 63.8 -> 60.1 in 8 slices, TF32 63.6 -> 60.6 (cuBLAS 56.3, 56.1); where N >= K gemv stays
  // (1x8192x8192 65.5 against 68.4 in 4 slices, 1x4096x14336 59.2 against 61.9 in 2).
  const bool long_k = tiles(p, kGemv) < sms || (p.K >= 8192 && p.K >= 2 * p.N);
  if (gemv_takes && aligned && p.batch == 1 && long_k && gemv_split_blocks(split16, p) >= sms) {
    ch = pick(kGemvSplit, "fp32, few rows of x @ W.t() over a long K (into fewer gemv blocks than SMs, or K >= "
                          "8192 and >= 2N): K split over gemv_split blocks, at least one an SM (H200, W cold, per call "
                          "under CUDA graphs: 1x65536x64 0.0119 ms vs 0.0846 for gemv_16x8, 1x14336x4096 0.0601 vs "
                          "0.0638; cuBLAS 0.0111, 0.0563)");
    if (ch.cfg) return ch;
  }
  if (gemv_takes) {
    ch = pick(kGemv, !split_rows_ok
                         ? "fp32, M <= 16 with k-contiguous operands (x @ W.t()): a warp per output column streams W "
                           "once (H200: 1x4096x4096 0.031 ms vs 0.187 for blocked_k16_64x64x16, 16x14336x4096 0.330 "
                           "vs 0.693; under TF32 up to 2 rows, H100: 1x14336x4096 0.086 vs 0.101 for "
                           "hopper_tf32_128x128x32, 2x4096x14336 0.085 vs 0.097)"
                         : "fp32, at most 8 rows (16 where K <= 1024) with k-contiguous operands (x @ W.t()), too "
                           "few columns and K for two gemv_split blocks an SM: a warp per output column (H100: "
                           "8x768x3072 0.011 ms vs 0.036 on gemv_split and 0.011 for cuBLAS, 16x768x3072 0.015 vs "
                           "0.047 and 0.015, 4x4096x1024 0.014 vs 0.021 and 0.020)");
    if (ch.cfg) return ch;
  }
  // x @ B with B row-major (n-contiguous), A k-contiguous: a lane holds 4 adjacent columns of B's rows. With
  // fewer blocks than SMs (gemv_split_blocks), more than one row goes to the tile rows (H100, under CUDA graphs,
  // 4 and 8 rows over 768x3072, 3072x768, 1000x768, 4096x1024: blocked_64x128x8 0.009-0.022 ms vs 0.020-0.044
  // here, cuBLAS 0.007-0.015; under TF32 tensorcore_tf32_64x64x16 0.010-0.014 vs 0.021-0.032, cuBLAS 0.009-0.012);
  // one row stays (1x4096x1024 0.016 vs 0.021, 1x768x3072 0.014 vs 0.016; 1x1000x768 0.019 vs 0.009 is the loss).
  if (fp32 && p.a.k_contiguous && !p.b.k_contiguous && aligned && p.M <= 8 &&
      (p.M == 1 || gemv_split_blocks(kConfigs[kGemvSplitRowB], p) >= d.num_sms)) {
    ch = pick(kGemvSplitRowB, std::string(p.allow_tf32 ? "fp32 under TF32" : "fp32") + ", at most 8" +
                                  " rows (more than one where its blocks give every SM one), B row-major (x @ B): a "
                                  "warp streams 512 contiguous bytes of each row of B, "
                                  "K split over blocks (H100: 1x8192x8192 0.094 ms vs 0.296 for blocked_k16_64x64x16, "
                                  "0.092 for cuBLAS; 4x4096x4096 0.040 vs 0.078 and 0.065; under TF32 4x8192x8192 "
                                  "0.105 vs 0.141 for tensorcore_tf32_64x64x16, 8x14336x4096 0.112 vs 0.225, "
                                  "8x4096x14336 0.113 vs 0.124 for tensorcore_tf32_128x128x16; at 16 rows that one "
                                  "lost, 0.137 vs 0.123)");
    if (ch.cfg) return ch;
  }

  // x @ B with B row-major in half precision, at most 16 rows (decoding through transformers' Conv1D, a
  // classifier head's dY @ W): where gemv_mma_rowb's 32-column tiles make one wave of 3/4 to all of the SMs over
  // K <= 8192, each block streams one tile's whole K; otherwise (more tiles: whole tiles a block leave a quarter
  // of the SMs idle; fewer: K is not split; a longer K) the 64x64 wgmma row split over K where N >= 768 (the
  // 128x128 row's 128-row tile is mostly empty rows; below 2048 columns the tile rules' mma.sync 64x64 tiles,
  // mostly unsplit, took up to twice as long). Over a longer K one block a tile streams B slower than 64x64 tiles
  // in 2 slices (H200, bf16, dY @ W, kernel durations over a CUDA graph, W cold, us, 1 / 16 rows: 14336x4096 37.00
  // / 40.84 against 35.22 / 34.87, 28672x4096 71.32 / 75.32 against 61.90 / 63.32, 32000x4096 79.07 / 82.76
  // against 68.37 / 69.34; cuBLAS 30.0-31.2, 56.3-57.5, 62.1-63.4), while over 4096 and 6144 it stays ahead of
  // them (12.50 against 14.38, 17.50 against 18.86 at one row).
  const KernelConfig& m64 = kConfigs[kHopperM64];
  const auto m64_k_ok = [&] { return p.K <= 2048 || estimated_splits(m64, p, d, split_cap(m64, p)) > 1; };
  if (half && p.a.k_contiguous && !p.b.k_contiguous && aligned && p.M <= 16) {
    const int64_t t32 = tiles(p, kGemvMmaRowB);
    if (4 * t32 >= 3 * sms && t32 <= sms && (p.K <= 8192 || !cannot_run(m64, p, d).empty())) {
      ch = pick(kGemvMmaRowB, "half precision, at most 16 rows, B row-major (x @ B), one wave of 32-column tiles "
                              "over K <= 8192 (or no wgmma): swap-AB mma.sync streams B once (H100, bf16, per call "
                              "under CUDA graphs, B cold in L2: 1x4096x4096 0.0151 ms vs 0.0182 for "
                              "hopper_128x128x64 and 0.0141 for cuBLAS, 16x4096x4096 0.0153 vs 0.0185 and 0.0163; "
                              "H200, kernel durations: 1x4096x4096 0.0125 vs 0.0144 for hopper_m64_64x64x64 in 2 "
                              "slices and 0.0121 for cuBLAS)");
      if (ch.cfg) return ch;
    }
    // Where the 64x64 tiles run a second round less than half full and 128x128 tiles make one wave, ping-pong
    // 128x128 tiles take it (H200, bf16, x @ B 4096x11008, 172 tiles of 64x64 on 132 SMs, kernel durations over a
    // CUDA graph, B cold, 1 / 16 rows: 24.91 / 25.10 us against 31.28 (2 slices) / 29.27 on 64x64, cuBLAS 25.47 /
    // 25.95); past half (4096x14336's 224 tiles) they tied (31.67 / 31.70 against 31.79 / 31.79 unsplit).
    const int64_t t64 = tiles(p, kHopperM64);
    if (t64 > sms && 2 * (t64 - sms) < sms && tiles128 <= sms) {
      ch = pick(kHopperPingPong, "sm_90, half precision, at most 16 rows, B row-major (x @ B), whose " +
                                     std::to_string(t64) + " tiles of 64x64 would run a second round less than "
                                     "half full: ping-pong 128x128 tiles, one wave (H200, bf16, kernel durations "
                                     "over a CUDA graph, B cold: 1x4096x11008 0.0249 ms vs 0.0313 for "
                                     "hopper_m64_64x64x64, 16x4096x11008 0.0251 vs 0.0293; cuBLAS 0.0255, 0.0260)");
      if (ch.cfg) return ch;
    }
    if (p.N >= 2048 || (p.N >= 768 && m64_k_ok())) {
      ch = pick(kHopperM64, "sm_90, half precision, at most 16 rows, B row-major (x @ B), N >= 768 (below 2048: K "
                            "<= 2048 or split): 64x64 tiles "
                            "split over K (H100, bf16, per call under CUDA graphs, B cold in L2: 1x8192x8192 0.049 "
                            "ms vs 0.056 for hopper_128x128x64 and 0.054 for gemv_mma_rowb_16x32x64, 4x4096x14336 "
                            "0.046 vs 0.047 and 0.051, 1x768x2304 0.0045 vs 0.0068 and 0.0047; cuBLAS 0.047, 0.046, "
                            "0.0037; kernel durations over a CUDA graph, 1 to 16 rows: 8x1000x768 0.0048 vs 0.0082 "
                            "for tensorcore_64x64x32, 16x2048x1024 0.0075 vs 0.0165, 1x768x768 0.0041 vs 0.0066, "
                            "16x768x1536 0.0047 vs 0.0070 for hopper_128x128x64, 16x4096x1024 0.0084 vs 0.0090; "
                            "cuBLAS 0.0036, 0.0054, 0.0031, 0.0037, 0.0073)");
      if (ch.cfg) return ch;
    }
  }

  // --- half precision, and fp32 under TF32: tensor cores. wgmma + TMA first
  // (sm_90 in an sm_90a build). TF32 wgmma reads only k-contiguous operands:
  // the hopper TF32 rows take a problem while the transposed copy of the
  // others (8 bytes per element at ~3 TB/s) stays small next to the product
  // (~250 TFLOP/s): elements copied x 1000 <= M*N*K; or up to 4 times that copy
  // (x 250: a copied B from 250 rows) where K is under 8 times M and N, since the
  // TF32 mma.sync rows run those at well under the wgmma rows' rate (H100, TF32,
  // kernel durations, the copy included: dY^T X 2304x4096x768 0.084 ms vs 0.139 on
  // tensorcore_tf32_128x128x16, 768x4096x768 0.045 vs 0.062; x @ B with B row-major
  // 256x4096x4096 0.088 vs 0.104, 768x768x3072 0.029 vs 0.043; attention scores with
  // B row-major 96x512x64x512 0.055 vs 0.071). K-heavy ones keep mma.sync, whose
  // 128x128 rule below measured the copy slower. An operand whose rows are not 16-byte aligned costs nothing
  // extra: the mma.sync rows copy it too, into aligned rows (H200, TF32, kernel durations, B cold: x @ B with B
  // row-major 768 x 50257, GPT-2's head at 128 tokens, 160.6 us on hopper_tf32_128x256x32 against 200.6 on
  // tensorcore_tf32_128x256x32, cuBLAS 102.9; the weight gradient of a 3-column output over 100003 rows,
  // dY^T X 100003 x M x 3, M = 2 to 128: all 7 faster, 16 rows 22.0 us on hopper_tf32_m192_192x192x32 against
  // 29.4, 128 rows 57.5 against 75.4).
  const auto copied_for_wgmma = [&](const Operand& o, double elems) {
    return o.k_contiguous || !rows_aligned16(o, p) ? 0.0 : elems;
  };
  const double copied = copied_for_wgmma(p.a, static_cast<double>(p.M) * p.K) +
                        copied_for_wgmma(p.b, static_cast<double>(p.K) * p.N);
  const double mnk = static_cast<double>(p.M) * p.N * p.K;
  const bool tf32_hopper = tf32 && (copied * 1000.0 <= mnk ||
                                    (copied * 250.0 <= mnk && p.K < 8 * std::max(p.M, p.N)));
  if (half || tf32_hopper) {
    const int64_t ksteps = (p.K + 63) / 64;
    // The 64-row TF32 row (one consumer warpgroup, 64x128 tiles), each at its best split count, over N >= 2048:
    // - the decode batches the gemv rules leave (tf32_decode_tiles, above);
    // - up to 64 rows on up to two waves of its tiles: half the MMAs of a 128-row tile that would compute zero rows
    //   (the reason below gives the H100's figures);
    // - 97 to 128 rows of x @ W.t() whose tiles (two high, nearly full) are at most one per SM: twice the SMs of
    //   128x128 tiles on the product. H200, W cold, kernel durations over a CUDA graph, us, 128 rows, 64-row tiles
    //   at their best split count against 128x128 at the rules' (cuBLAS): 2048x5632 17.2 against 24.8 (18.7),
    //   4096x4096 26.2 against 28.8 (24.0), 14336x4096 67.9 against 70.7 (73.7). More tiles (4096x14336: 224) and
    //   fewer rows (65: a second tile of one row, 28.8 against 25.5 at 4096x4096) kept 128x128 faster. The rule's
    //   picks, 100 and 128 rows of the suites' weights: 14 products, 13 faster, one tie (100x14336x4096 69.6 ->
    //   70.0); 128x768x3072 11.8 -> 7.4 (7.2), 128x4096x6144 38.6 -> 31.2 (32.7).
    const auto tf32_m64_why = [&]() -> const char* {
      if (!tf32_hopper || p.N < 2048) return nullptr;
      const int64_t t = tiles(p, kHopperTf32M64);
      if (tf32_decode_tiles)
        return "sm_90, TF32, 2 to 64 rows of x @ W.t() (1 where K <= 1024) into N >= 2048, K x N >= 2^23: 64x128 "
               "TF32 wgmma tiles stream "
               "W faster than the IEEE gemv rows (H200, W cold, per call under CUDA graphs: 4x4096x4096 0.0219 ms vs "
               "0.0278 for gemv_split_16x128x256, 2x768x50257 0.0391 vs 0.0712 for gemv_16x8, 16x768x50257 0.0408 "
               "vs 0.0497 for hopper_tf32_128x256x32; cuBLAS 0.0205, 0.0583, 0.0620)";
      if (p.M <= 64 && t <= 2 * sms)
        return "sm_90, TF32, at most 64 rows, N >= 2048: 64x128 tiles on one consumer warpgroup (H100, x @ W.t() per "
               "call under CUDA graphs, W cold in L2: 8x14336x4096 0.086 ms vs 0.102 for hopper_tf32_128x128x32, "
               "16x4096x14336 0.084 vs 0.095, 64x4096x4096 0.033 vs 0.034; cuBLAS 0.086, 0.086, 0.028)";
      if (k_cont && p.batch == 1 && p.M > 96 && p.M <= 128 && t <= sms)
        return "sm_90, TF32, 97 to 128 rows of x @ W.t() in at most one 64x128 tile an SM: twice the SMs of 128x128 "
               "tiles (H200, W cold, per call under CUDA graphs: 128x2048x5632 0.0172 ms vs 0.0248 for "
               "hopper_tf32_128x128x32, 128x4096x4096 0.0262 vs 0.0288; cuBLAS 0.0187, 0.0240)";
      return nullptr;
    };
    if (const char* why = tf32_m64_why()) {
      ch = pick(kHopperTf32M64, why);
      if (ch.cfg) return ch;
    }
    // 17 to 64 rows (decoding a batch): one 64-row tile high, so a 128-row tile would compute half or more of
    // zero rows and cover half as many SMs. Up to two waves of 64x64 tiles (measured up to 224 tiles).
    if (half && p.M > 16 && p.M <= 64 && tiles(p, kHopperM64) <= 2 * sms) {
      ch = pick(kHopperM64, "sm_90, 17 to 64 rows: 64x64 tiles, one tile high, on up to two waves (H200, bf16, per "
                            "call under CUDA graphs: 64x4096x14336 0.035 ms vs 0.043 for hopper_128x128x64 and 0.040 "
                            "for hopper_m64_64x96x64, 64x14336x4096 0.036 vs 0.048, 32x4096x4096 0.013 vs 0.016)");
      if (ch.cfg) return ch;
    }
    // x @ W.t() over a short K into rows that are not 16-byte aligned (N = 50257: GPT-2's lm_head): the hopper
    // kernels write such rows through shared memory a row at a time, without the TMA store's asynchrony, and
    // ping-pong runs one warpgroup's stores under the other's MMAs (bf16, 768 x 50257, kernel durations, W cold:
    // H100 256 rows 46.4 us vs 51.9 for hopper_128x256x64, 1024 154.9 vs 167.9, 4096 608 vs 621, 64 33.6 vs 33.9
    // for hopper_swap_72x128x64, which this rule picked from 17 to 512 rows when those rows were stored from
    // registers; H200 1024 151.9 vs 157.0, 128 29.8 vs 37.9 for the swap-AB row). An n-contiguous B (x @ B)
    // and longer K keep the rules below (4095^3: hopper_128x256x64 267 us vs 277 for ping-pong), as do more than
    // 1024 rows, where the product alone was a tie (4096 rows: H200 602 us vs 610) and ping-pong lost with the
    // bias or GELU of tiled_linear (H200, ab.py: 0.733 ms vs 0.67-0.69, GELU 0.979 vs 0.937).
    if (half && k_cont && p.M > 16 && p.M <= 1024 && ksteps <= 16 && !c_rows_aligned16(p)) {
      ch = pick(kHopperPingPong, "sm_90, up to 1024 rows of x @ W.t() over at most 16 k-steps of 64 into rows that "
                                 "are not 16-byte aligned: ping-pong, one warpgroup's stores under the other's MMAs "
                                 "(bf16, kernel durations: 1024x768x50257 H100 0.155 ms vs 0.168 for "
                                 "hopper_128x256x64, H200 0.152 vs 0.157; 256 rows on an H100 0.046 vs 0.052)");
      if (ch.cfg) return ch;
    }
    // The last wave: an SM's work is its rounds of tiles times the columns a tile computes, for the
    // 128-row tilings 128, 192 and 256 wide. Where 192 needs at most 90% of the others' (N = 768:
    // 1 round of 192 against 2 of 128 or 1 of 256 at M = 4096), its fuller last wave wins.
    // (hopper_128x160x64 is a candidate only for x @ W.t() below: on 3072 x 768 weight gradients it beats 128x192
    // on an H200 and loses to it on an H100, which this rule cannot tell apart; tune() picks it per GPU.)
    const auto rounds = [&](int bm, int bn) { return (tiles(p, bm, bn) + sms - 1) / sms; };  // of tiles on the SMs
    const auto work = [&](int bn) { return rounds(128, bn) * std::min<int64_t>(bn, p.N); };
    const int64_t w128 = work(128), w192 = work(192), w256 = work(256);
    // Several waves of 128x128 tiles over a short K (8 to 32 k-steps) into more than 2048 columns: ping-pong,
    // one warpgroup's epilogue under the other's MMAs, where each 192x192 or 128x256 block runs few k-steps and
    // then its epilogue with nothing under it. Either layout of B; C's rows 16-byte aligned (unaligned rows go a
    // row at a time, and GPT-2's 4096 x 50257 lm_head lost with bias or GELU, above). (H200, bf16, kernel
    // durations over a CUDA graph, W cold, us: x @ W.t() 12608x768x3072 81.7 against 85.3 for
    // hopper_m192_192x192x64, 12608x768x2304 63.5 against 65.2, 4096x768x3072 27.8 against 30.1 for
    // hopper_128x256x64, 4096x2048x5632 124.0 against 125.0, 4096x2048x32000 690.9 against 698.6; dY @ W
    // 12608x768x3072 82.2 against 86.8; cuBLAS 82.9, 63.6, 29.9, 123.7, 685.9, 85.3. Into 2048 columns a tie
    // (4096x2048x2048 46.1 against 45.7 for 128x256), over 64 k-steps or into 768 columns the rules below win:
    // dY @ W 4096x5632x2048 124.6 against 117.2, 12608x3072x768 85.3 against 76.3.)
    if (half && ksteps >= 8 && ksteps <= 32 && p.N > 2048 && tiles128 >= 4 * sms && c_rows_aligned16(p)) {
      ch = pick(kHopperPingPong,
                "sm_90, at least 4 waves of 128x128 tiles over 8 to 32 k-steps of 64 into more than 2048 columns: "
                "ping-pong runs one warpgroup's epilogue under the other's MMAs (H200, bf16, kernel durations, W "
                "cold: 12608x768x3072 0.0817 ms vs 0.0853 for hopper_m192_192x192x64, 4096x768x3072 0.0278 vs "
                "0.0301 for hopper_128x256x64; cuBLAS 0.0829, 0.0299)");
      if (ch.cfg) return ch;
    }
    // 192 x 192 tiles (three consumer warpgroups), with a wave of them, where they need no more outputs an SM than
    // the 128-row tilings 192 and 256 wide. Fewer, larger tiles an SM carry fewer epilogues and
    // L2 bytes per output: by kernel durations (CUPTI) the row is as fast or faster at equal outputs an SM
    // (ViT-B/16 at batch 64: 12608 x 2304, x 3072 and x 768 outputs, 6, 8 and 2 rounds), and faster with fewer
    // (4096 x 5632: 660 tiles in 5 rounds against 704 of 128x256 in 6). Where it needs more (4096^3: 484 tiles in
    // 4 rounds, 147456 outputs an SM against 131072) the 128-row rules below keep the product. TF32 (its 192x192
    // row's tile is the same: the static_assert above) compares with its own tilings, 128x128 and 128x256 (no
    // TF32 128x192): as fast at even outputs an SM (12608 x 2304 and x 3072 outputs), slower with more (4096^3:
    // 0.436 ms against 0.396, H100, mm).
    const KernelConfig& m192 = kConfigs[half ? kHopperM192 : kHopperTf32M192];
    const int64_t t192 = tiles(p, m192), r192 = (t192 + sms - 1) / sms;
    // Rows an SM computes, not stores: a 192-row tile over M = 128 computes 64 rows of zeros (H100, bf16, kernel
    // durations: 128x768x50256 0.0363 ms on it against 0.0344 for hopper_pingpong_128x128x64).
    const int64_t o192 = r192 * m192.bm * std::min<int64_t>(m192.bn, p.N);
    const int64_t o128 = (half ? std::min(w192, w256) : std::min(w128, w256)) * 128;
    if (t192 >= sms && o192 <= o128) {
      std::ostringstream why;
      why << "sm_90, " << (half ? "" : "TF32, ") << "192x192 tiles in " << r192 << " round(s) on " << sms
          << " SMs, " << o192 << " outputs an SM, against " << o128
          << (half ? " with 128-row tiles 192 or 256 wide (H100, bf16, kernel durations: x @ W.t() + bias "
                     "12608x768x2304 0.0691 ms vs 0.0711 for hopper_128x256x64, 12608x3072x768 0.0800 vs 0.0818 for "
                     "hopper_128x192x64, 12608x768x384 0.0140 vs 0.0167 for hopper_pingpong_128x128x64; ViT-B/16 "
                     "batch 64 forward under CUDA graphs 1.07x cuBLAS against 1.02x on the 128-row tiles)"
                   : " with 128x128 or 128x256 tiles (H100, TF32, kernel durations: x @ W.t() + bias 4096x768x2304 "
                     "0.0465 ms vs 0.0592 for hopper_tf32_128x256x32, 12608x3072x768 0.154 vs 0.195; cuBLAS 0.0442, "
                     "0.155)");
      ch = pick(half ? kHopperM192 : kHopperTf32M192, why.str());
      if (ch.cfg) return ch;
    }
    // Two slices of K make a wave of whole 192x192 tiles (at least 90% of the SMs, where the 128-row tilings
    // leave a quarter idle), each slice at least 64 k-steps: the kernel adds the slices (split_reduce_way), a
    // hand-over of ~3 us (the weight gradients of ViT-B/16's MLP, 3072 x 768 over 12608 tokens). Where two
    // slices leave SMs idle or K is short the rules below keep the product (H200, bf16, dY^T X, kernel
    // durations: 2304x12608x768 in 96 blocks 0.0768 ms against 0.0712 on 128x128 tiles; GPT-2's 3072x4096x768
    // 0.0368 against 0.0323 on 128x192). TF32 from half that K (64 k-steps of 64): its MMAs take twice as long,
    // the hand-over the same.
    if (ksteps >= (half ? 128 : 64) && p.M % m192.bm == 0 && p.N % m192.bn == 0 && 2 * t192 <= sms &&
        20 * t192 >= 9 * sms && estimated_splits(m192, p, d, split_cap(m192, p)) == 2) {
      std::ostringstream why;
      why << "sm_90, " << t192 << " 192x192 tiles in 2 slices of K on " << sms << " SMs, " << ksteps
          << " k-steps of 64: a wave of blocks where 128-row tiles leave SMs idle ("
          << (half ? "H200, bf16, dY^T X, kernel durations: 3072x12608x768 0.0807 ms vs 0.0890 for hopper_128x192x64, "
                     "768x12608x3072 0.0799 vs 0.0882; cuBLAS 0.0815, 0.0850)"
                   : "H100, TF32, dY^T X with dY^T copied transposed, kernel durations: 3072x4096x768 0.109 ms vs "
                     "0.126 for hopper_tf32_128x256x32, 768x4096x3072 0.108 vs 0.125, 3072x12608x768 0.303 vs 0.338 "
                     "in 5 slices; cuBLAS 0.104, 0.104, 0.275)");
      ch = pick(half ? kHopperM192 : kHopperTf32M192, why.str());
      if (ch.cfg) return ch;
    }
    // 128x160 tiles for x @ W.t() (both operands k-contiguous) over a short K into at least 2048 columns, where
    // their rounds need at most 90% of the columns an SM of every other 128-row tiling: ViT-B/16's fc1 at batch
    // 8, 1576 x 3072 outputs, 260 tiles in 2 rounds (320 columns an SM against 384 for 128x128 and 128x192, 512
    // for 128x256); 1024x768x2304 + bias 0.0096 ms vs 0.0104 for hopper_128x192x64 (H100). Not into 768 columns,
    // where it lost to 128x192 by 2-5% in one round of each (3136x768x768 + bias 0.0109 vs 0.0103,
    // 3136x3072x768 0.0266 vs 0.0261), nor for other layouts: on weight gradients the H100 and H200 order
    // 128x160 and 128x192 differently (the note above).
    const int64_t w160 = work(160);
    if (half && k_cont && ksteps <= 48 && p.N >= 2048 && tiles128 >= sms &&
        10 * w160 <= 9 * std::min({w128, w192, w256})) {
      std::ostringstream why;
      why << "sm_90, x @ W.t() over " << ksteps << " k-steps of 64: " << w160 / std::min<int64_t>(160, p.N)
          << " round(s) of 128x160 tiles on " << sms << " SMs, " << w160 << " columns an SM, against " << w128
          << ", " << w192 << " and " << w256 << " for 128x128, 128x192 and 128x256 (H100, bf16, kernel durations, W "
          << "cold in L2: 1576x768x3072 + bias + GELU 0.0208 ms vs 0.0237 for hopper_pingpong_128x128x64 and 0.0223 "
             "for hopper_128x192x64, without GELU 0.0172 vs 0.0175 and 0.0179; cuBLAS 0.0210 and 0.0142)";
      ch = pick(kHopper160, why.str());
      if (ch.cfg) return ch;
    }
    if (half && 10 * w192 <= 9 * std::min(w128, w256)) {
      std::ostringstream why;
      why << "sm_90, the fullest last wave: " << w192 / std::min<int64_t>(192, p.N) << " round(s) of 128x192 tiles on "
          << sms << " SMs, " << w192 << " columns an SM, against " << w128 << " for 128x128 and " << w256
          << " for 128x256 (H200, bf16 4096x3072x768: 0.031 ms vs 0.039 for hopper_pingpong_128x128x64 and 0.037 "
             "for hopper_128x256x64; 12608x3072x768 0.090 vs 0.101 and 0.109)";
      ch = pick(kHopper192, why.str());
      if (ch.cfg) return ch;
    }
    // At most one wave of 128x256 tiles over a short K (up to 16 k-steps) where 128x128 tiles fill a wave: each
    // 128x256 block runs its few k-steps and then its whole epilogue, with nothing to hide it under; ping-pong's
    // warpgroups take a 128x128 tile each, the first one's epilogue under the second one's MMAs. Measured on both
    // layouts a model's training runs on such shapes (ViT-B/16's qkv at batch 8, the weight gradients of 128
    // tokens through 2048 x 2048 weights), the same way on both GPUs.
    if (half && ksteps <= 16 && tiles256 <= sms && tiles128 >= sms && w128 <= w256) {
      ch = pick(kHopperPingPong, "sm_90, at most one wave of 128x256 tiles over at most 16 k-steps of 64, a wave of "
                                 "128x128: ping-pong runs one warpgroup's epilogue under the other's MMAs (kernel "
                                 "durations over a CUDA graph, W cold in L2, H200 / H100: x @ W.t() 1576x768x2304 "
                                 "0.0114 / 0.0115 ms vs 0.0119 / 0.0119 for hopper_128x256x64, dY^T X 2048x128x2048 "
                                 "0.0054 / 0.0057 vs 0.0059 / 0.0062; cuBLAS 0.0104 / 0.0105, 0.0052 / 0.0058)");
      if (ch.cfg) return ch;
    }
    // 128-wide tiles need at most 80% of the columns an SM computes with 128x256 ones, or, for x @ W.t() over
    // K <= 1024, no more where 128x256 tiles make under 3 waves, the last less than half full: that wave mostly
    // idle (1576 rows x N = 3072: 156 tiles, 1.18 waves; 3136 x 768 x 3072: 300 tiles, 2.27 waves, 640 columns
    // an SM on 128x128 against 768, 0.0279 ms vs 0.0321 + bias, H100). (Over K = 2048 the H100 kept 128x256 ahead,
    // 1576x2048x6144 0.0675 ms vs 0.0691; on the H200 ping-pong took it by 10%, the several-waves rule above.)
    const int64_t tail256 = tiles256 % sms;
    const bool w128_wins = 5 * w128 <= 4 * w256 || (k_cont && ksteps <= 16 && w128 <= w256 && tiles256 < 3 * sms &&
                                                    tail256 != 0 && 2 * tail256 < sms);
    if (half && ksteps >= 8 && ksteps <= 48 && tiles128 >= sms && (!n_fits_256 || w128_wins)) {
      std::ostringstream why;
      why << "sm_90, K of 8 to 48 steps of 64, a wave of 128x128 tiles, and "
          << (n_fits_256 ? "128x256 tiles would leave their last wave mostly idle (" : "an N that 128x256 tiles "
                                                                                     "would cover with more than "
                                                                                     "25% waste (")
          << w128 << " columns an SM with 128x128 vs " << w256
          << " with 128x256): ping-pong runs one warpgroup's epilogue under the other's MMAs (H200, bf16: "
             "1576x768x3072 0.020 ms vs 0.024 for hopper_128x256x64; H100, kernel durations, W cold in L2: "
             "3136x768x3072 + bias 0.0279 ms vs 0.0321, with GELU 0.0357 vs 0.0422, 3300x768x3072 + bias 0.0273 vs "
             "0.0323; where 128x256 fits with full waves it is as fast or faster: 4096x2048x2048 0.050 ms vs 0.053, "
             "8192x1024x4096 0.109 vs 0.114)";
      ch = pick(kHopperPingPong, why.str());
      if (ch.cfg) return ch;
    }
    // The narrow rows for products that leave SMs idle: a block moves through its k-steps at a pace of
    // 80-100 B/ns of its operands (H200, per-call timings; ~75 by ncu with cold weights), a pace its bytes
    // do not set (a 128x96 block loading half its stage gained under 4%), so smaller tiles put more SMs on
    // the product, and split-K more again at the cost of a reduction; est_ns ranks them, each at its best
    // split count. 64x96 only where it reads only its own columns of B (reads_only_its_b: x @ W.t()).
    // A split row goes ahead of an unsplit one only where it is ahead with its slices added by the second pass,
    // as within a row (estimated_splits; H200, bf16, W cold, us: x @ W.t() 128x4096x4096 13.53 on 64x64 unsplit
    // against 15.37 on 128x64 in 2 slices added in the kernel, 128x4096x6144 16.83 on 64x96 against 20.84 on
    // 128x128 in 2).
    struct Narrow {
      int row;
      RowEstimate est;
    };
    const auto least = [&](std::initializer_list<int> rows) {
      std::vector<Narrow> c;
      for (int r : rows) {
        const KernelConfig& k = kConfigs[r];
        if (!reads_only_its_b(k, p)) continue;
        c.push_back({r, best_estimate(k, p, d)});
      }
      std::stable_sort(c.begin(), c.end(), [](const Narrow& x, const Narrow& y) { return x.est.ns < y.est.ns; });
      const auto whole = std::find_if(c.begin(), c.end(), [](const Narrow& x) { return x.est.splits == 1; });
      const bool unsplit_first = c[0].est.splits > 1 && whole != c.end() && whole->est.ns < c[0].est.pass_ns;
      if (unsplit_first) std::rotate(c.begin(), whole, whole + 1);
      std::ostringstream os;
      os << std::fixed << std::setprecision(1) << c[0].est.ns / 1000 << " us against";
      for (size_t i = 1; i < c.size(); ++i) {
        os << (i > 1 ? "," : "") << " " << c[i].est.ns / 1000;
        if (unsplit_first && c[i].est.splits > 1 && c[i].est.ns < c[0].est.ns)
          os << " (" << c[i].est.pass_ns / 1000 << " by a second pass)";
        os << " for " << kConfigs[c[i].row].name;
      }
      return std::make_pair(c[0].row, os.str());
    };
    // Fewer tiles than SMs even 128x64: the least estimated time among the narrow rows and 128x128 decides;
    // 128x128 falls through to the rules below (K-heavy weight gradients such as 768x12608x768: 128x128 in 3
    // slices, 0.031 ms vs 0.052 for 128x64 unsplit). The narrow rows need M and N multiples of 64 (models'
    // widths: on ragged edges 128x64 lost, 1000^3: 0.0117 ms against 0.0102-0.0108, cause not established),
    // and 128x64 at least 128 rows (a 64-wide stage of fewer rows carries too few bytes to keep an SM
    // streaming: bf16 32x4096x4096 0.030 ms unsplit against 0.024 for 128x128).
    // (64 rows took the 17-to-64-rows rule above: at M = 64 a wave of 128x64 tiles is one of 64x64.)
    if (half && p.M >= 128 && p.M % 64 == 0 && p.N % 64 == 0 && tiles(p, kHopper64) <= sms) {
      const auto [row, est] = least({kHopperM64x96, kHopperM64, kHopper64, kHopper128});
      if (row != kHopper128) {
        ch = pick(row, "sm_90, fewer 128x64 tiles than SMs, M and N multiples of 64: the least estimated time, " + est +
                           " (each at its best split count; a split row against an unsplit one by a second "
                           "pass): more SMs on the product, each block at its own pace "
                           "(H200, bf16, per call under CUDA graphs: 128x2048x2048 0.0075 ms with 64x64 vs "
                           "0.0086 with 128x64 and 0.0096 with 128x128; x @ W.t() 128x2048x5632 0.0081 with 64x96 vs "
                           "0.0098 with 128x64, 0.0139 with 64x64 and 0.0136 with 128x128)");
        if (ch.cfg) return ch;
      }
    }
    // Fewer 128x128 tiles than SMs, and a wave of swap-AB tiles, 72 rows x 128 columns (wgmma's N on the rows,
    // stepping by 8: 1576 tokens are 22 tiles of 72): all SMs on the product at 25 KB a k-step (cuBLAS's tile
    // there). A k-contiguous A (x, dY), which becomes the swapped product's k-contiguous B: its 72 rows are
    // one box. Where 128x128 tiles fill a wave the wave rules below win (1576x768x2304: 0.0164 ms against 0.0130
    // for hopper_128x256x64). At least 1024 rows: below, it lost where it was measured (1000^3 0.0127 ms against
    // 0.0107 for 128x128, cause not established; 640x4096x1024 0.0209 against 0.0182 for hopper_128x64x64).
    const int64_t tiles_swap = tiles(p, kHopperSwap);
    if (half && p.a.k_contiguous && p.M >= 1024 && tiles128 < sms && tiles_swap <= sms &&
        tiles_swap > tiles(p, kHopper96)) {
      ch = pick(kHopperSwap, "sm_90, fewer 128x128 tiles than SMs and a wave of 72x128 swap-AB tiles (" +
                                 std::to_string(tiles_swap) + " against " + std::to_string(tiles128) +
                                 "): more SMs at fewer bytes a k-step (H100, bf16, per call under CUDA graphs: dY @ W "
                                 "1576x3072x768 0.0166 ms vs 0.0190 for hopper_128x128x64, 1576x768x640 0.0066 vs "
                                 "0.0073; x @ W.t() + bias 1200x2048x768 0.0118 vs 0.0141, 1576x3072x768 0.0163 vs "
                                 "0.0169 for hopper_128x96x64)");
      if (ch.cfg) return ch;
    }
    // Between the narrow rows' range and a wave of 128x128 tiles, x @ W.t() over whole 96-wide column tiles: 128x96
    // tiles put up to a third more SMs on the product at 28 KB a k-step against 32 (ViT-B/16 at batch 8, 1576
    // tokens through fc2 and proj: 104 tiles of 128x96 against 78 of 128x128). Not for a row-major B
    // (reads_only_its_b; H200, dy @ W 1576x3072x768: 0.0178 to 0.0205 ms in two builds, against 0.0187 on
    // 128x128: no steady gain).
    if (half && reads_only_its_b(kConfigs[kHopper96], p) && p.N % 96 == 0 && tiles(p, kHopper64) > sms &&
        tiles128 < sms && tiles(p, kHopper96) <= sms) {
      ch = pick(kHopper96, "sm_90, fewer 128x128 tiles than SMs, a wave of 128x96 and a k-contiguous B (x @ W.t()): "
                           "more SMs stream the operands at fewer bytes a k-step (H200, bf16, per call under CUDA "
                           "graphs: 1576x3072x768 0.0163 ms vs 0.0189 for hopper_128x128x64, 1576x768x768 0.0065 vs "
                           "0.0073)");
      if (ch.cfg) return ch;
    }
    if (2 * tiles256 >= sms && n_fits_256) {
      ch = pick(half ? kHopper256 : kHopperTf32_256,
                "sm_90, >= half a wave of 128x256 tiles: wgmma + TMA (H200: bf16 4096^3 0.204 ms vs 0.237 for "
                "hopper_128x128x64 and 0.351 for tensorcore_128x256x64; TF32 0.506 vs 0.563 and 0.894)");
      if (ch.cfg) return ch;
    }
    // Three quarters to one wave of 128x128 tiles over a long K (at least 24 k-steps) with an m-contiguous A (a
    // weight gradient's transposed activations: 768 x 2304 outputs over a model's tokens): ping-pong, which works
    // a block's one tile on one warpgroup, ran them faster than the cooperative 128x128 row (cause not measured;
    // H200, bf16, kernel durations over a CUDA graph, W cold, us: dY^T X 2304x12608x768 65.2 against 69.0,
    // 2304x4096x768 23.0 against 24.4, 2304x1576x768 11.3 against 11.6, X^T dY 768x4096x2304 23.2 against 24.4;
    // cuBLAS 63.1, 22.2, 10.6, 22.7). Not x @ W.t() (128x4096x14336, 112 tiles: 34.2 against 34.1).
    if (half && !p.a.k_contiguous && 4 * tiles128 >= 3 * sms && tiles128 <= sms && ksteps >= 24) {
      ch = pick(kHopperPingPong, "sm_90, 3/4 to one wave of 128x128 tiles over at least 24 k-steps of 64, A "
                                 "m-contiguous (a weight gradient): ping-pong (H200, bf16, kernel durations, W cold: "
                                 "dY^T X 2304x12608x768 0.0652 ms vs 0.0690 for hopper_128x128x64, 2304x4096x768 "
                                 "0.0230 vs 0.0244; cuBLAS 0.0631, 0.0222)");
      if (ch.cfg) return ch;
    }
    if (16 * tiles128 >= sms) {
      ch = pick(half ? kHopper128 : kHopperTf32_128,
                "sm_90, fewer than half a wave of 128x256 tiles but >= 1/16 of a wave of 128x128: wgmma + TMA with "
                "128x128 tiles (H200: bf16 1024^3 0.014 ms vs 0.018 for tensorcore_64x64x32, 8x4096x4096 0.028 vs "
                "0.043; TF32 1024^3 0.027 vs 0.032)");
      if (ch.cfg) return ch;
    }
    if (tiles128 * ksteps >= 4 * sms && std::min(p.M, p.N) >= 64) {
      ch = pick(half ? kHopper128 : kHopperTf32_128,
                "sm_90, few 128x128 tiles over a long K (at least 4 steps of 64 an SM): wgmma + TMA, K split over the "
                "SMs (H200, bf16 256x32768x256: 0.025 ms vs 0.049 for tensorcore_64x64x32, 128x131072x128 0.036 vs "
                "0.058; H100, TF32 x @ W.t() per call under CUDA graphs: 256x32768x256 0.035 vs 0.047 for "
                "tensorcore_tf32_128x128x16, 128x131072x128 0.057 vs 0.078, 64x65536x64 0.023 vs 0.026 for "
                "tensorcore_tf32_64x64x16)");
      if (ch.cfg) return ch;
    }
  }
  // mma.sync (sm_80+): fewer tiles than that, other GPUs, and TF32 with a large transposed copy.
  if (half || tf32) {
    // TF32 with at most 32 rows (x @ B with B row-major, decoding a batch through a Conv1D; the gemv rules took
    // up to 8): a 128-row tile would compute three quarters or more of zero rows. 64x64 tiles at their best split
    // count, several blocks an SM (est_ns).
    if (tf32 && p.M <= 32) {
      ch = pick(kTcTf32_64, "TF32 on mma.sync, at most 32 rows: 64x64 tiles (a 128-row tile would compute 3/4 or "
                            "more zero rows), at their best split count with up to 4 blocks an SM (H100, x @ B, per "
                            "call under CUDA graphs, B cold in L2: 16x4096x4096 in 4 slices 0.032 ms vs 0.042 in 2; "
                            "16x4096x14336 unsplit 0.101 vs 0.127 for tensorcore_tf32_128x128x16; cuBLAS 0.030, "
                            "0.088)");
      if (ch.cfg) return ch;
    }
    if (2 * tiles256 >= sms && n_fits_256) {
      ch = pick(half ? kTc256 : kTcTf32_256,
                "tensor cores, >= half a wave of 128x256 tiles: 25% fewer L2 bytes per MMA than 128x128 and 128 "
                "bytes of K per stage (H200: bf16 4096^3 0.387 vs 0.428 ms, TF32 0.903 vs 1.017 ms)");
      if (ch.cfg) return ch;
    }
    // TF32 over a K at least 8 times M and N (K-heavy, few tiles) that the hopper rule left (its
    // transposed copy too large): split-K fills the SMs whatever the tile, so the larger tile's fewer
    // bytes a multiply-add win.
    if (tf32 && std::min(p.M, p.N) >= 128 && p.K >= 8 * std::max(p.M, p.N)) {
      ch = pick(kTcTf32_128, "TF32, K at least 8 times M and N: 128x128 tiles with K split over the SMs read half the "
                             "bytes a multiply-add of 64x64 ones (H100, B row-major, per call under CUDA graphs: "
                             "256x32768x256 0.045 ms vs 0.078 for tensorcore_tf32_64x64x16 and 0.059 for "
                             "hopper_tf32_128x128x32, which copies B transposed; 128x131072x128 0.074 vs 0.099 and "
                             "0.108)");
      if (ch.cfg) return ch;
    }
    if (4 * tiles128 >= 3 * sms) {
      ch = pick(half ? kTc128 : kTcTf32_128,
                "tensor cores, at least 3/4 of a 128x128 tile per SM: 64x64 warp tiles, 2 blocks/SM (H200: bf16 "
                "2304x768x1024 0.025 vs 0.028 ms, TF32 4096^3 0.963 vs 1.555 ms against 64x64 blocks)");
      if (ch.cfg) return ch;
    }
    ch = pick(half ? kTc64 : kTcTf32_64,
              "tensor cores, fewer 128x128 tiles than 3/4 of the SMs: 64x64 tiles fill more SMs (H200: bf16 1000^3 "
              "0.020 vs 0.026 ms, TF32 0.040 vs 0.056 ms against 128x128)");
    if (ch.cfg) return ch;
  }

  // --- fp32 (IEEE): the blocked row with the least estimated time (est_ns at its best split count,
  // a block's FMAs at its row's measured rate). With whole waves of tiles this is rounds of tiles x
  // tile size / rate, which on an H200 picks the fastest row on each of 512^3 .. 4096^3 and
  // 128x4096x4096. With fewer tiles than SMs it ranks the rows on K's slices, reduction included:
  // 64x128 tiles in s slices do the same padded work as 64x64 tiles in 2s at 12% more a cycle (H100,
  // per call under CUDA graphs: x @ W.t() 32x14336x4096 0.270 ms vs 0.320 for blocked_k16_64x64x16,
  // 128x14336x4096 0.397 vs 0.507, K-heavy 256x32768x256 0.111 vs 0.137), unless padding eats it
  // (N = 64: 64x65536x64 0.029 on 64x64 vs 0.039 on 64x128).
  if (p.dtype == c10::ScalarType::Float) {
    // A short K (at most 128: weight gradients over 128 tokens, dY^T X) where blocked_64x128x8's tiles are no more
    // than the SMs (each block alone on its SM) or three to four an SM (three run at once, the fourth alone after
    // them): blocked_k16_64x64x16's half-size blocks, four an SM, share the SMs better, and est_ns, which charges
    // each block its fixed cost in turn, does not see it (its re-fits lost elsewhere: kRowPaces' comment). H200,
    // fp32, kernel durations over a CUDA graph, W cold, us, 64x128 / k16 (cuBLAS): 72 tiles 768x128x768 11.7 / 9.6
    // (8.7), 768x16x768 5.7 / 3.9 (3.3); 512 tiles 2048x128x2048 36.4 / 32.1 (26.8), 1024x64x4096 22.9 / 20.7
    // (17.0), 4096x16x1024 12.0 / 10.6 (9.8); the 24 products of the suites and models it moves, 394.2 -> 345.5 us
    // in all, none slower. Where 64x128's blocks make whole rounds of three, or the output is large, it stays (216
    // and 288 tiles: 0.93-1.08; 1024: 1.01-1.53), and so it does below k16's k-step where the stores bind (512
    // tiles, K <= 8: 1.02-1.27) and for outputs less than a tile high (dY @ W of 2 to 32 rows into 65536 columns
    // over K = 64: 19.2-23.2 against 22.6-25.6). Batches are not measured: they keep the estimate.
    const int64_t t64 = tiles(p, kBlocked64);
    if (p.K <= 128 && p.M >= 64 && p.batch == 1 && (t64 <= sms || (3 * sms < t64 && t64 <= 4 * sms && p.K >= 16))) {
      ch = pick(kBlockedK16, "fp32, K <= 128 and M >= 64 where blocked_64x128x8's " + std::to_string(t64) +
                                 " tiles are " + (t64 <= sms ? "no more than the SMs" : "three to four an SM") +
                                 ": half-size 64x64 blocks, four an SM, share the SMs better (H200: weight gradient "
                                 "2048x128x2048 0.0321 ms vs 0.0364, 768x128x768 0.0096 vs 0.0117; cuBLAS 0.0268, "
                                 "0.0087)");
      if (ch.cfg) return ch;
    }
    const KernelConfig* best = nullptr;
    double best_ns = 0;
    for (const RowPace& r : kRowPaces) {
      const KernelConfig& c = kConfigs[r.row];
      if (c.family != Family::Blocked || !cannot_run(c, p, d).empty()) continue;
      const double ns = best_est_ns(c, p, d);
      if (best == nullptr || ns < best_ns) best = &c, best_ns = ns;
    }
    if (best != nullptr) {
      std::ostringstream why;
      why << "fp32: the least estimated time of the blocked rows, " << std::fixed << std::setprecision(1)
          << best_ns / 1000 << " us on " << best->bm << "x" << best->bn
          << " tiles (each row at its best split count and its rate measured on an H200 at 4096^3)";
      return Choice{best, why.str()};
    }
  }

  // --- the textbook kernels, every dtype (fp64; fp32 before sm_80).
  if (p.M % 32 == 0 && p.N % 32 == 0 && tiles(p, kTiled32) >= sms) {
    ch = pick(kTiled32,
              "M and N multiples of 32 with at least one 32x32 tile per SM: the 32x32 tile halves global traffic "
              "against 16x16 (H200: 16.4 vs 16.9 ms at 4096^3 fp32)");
    if (ch.cfg) return ch;
  }
  ch = pick(kTiled16,
            "a ragged 32x32 grid or fewer 32x32 tiles than SMs: 16x16 tiles waste less at the edges and fill more "
            "SMs (H200: 0.053 vs 0.065 ms at 333x777x555 fp32)");
  if (ch.cfg) return ch;
  ch = pick(kTiled8, "last resort: the smallest tiled config fits any device");
  if (ch.cfg) return ch;
  TORCH_CHECK(false, "tilelab: no kernel for ", dtype_str(p.dtype), " ", p.M, "x", p.N, "x", p.K, " on ",
              d.label(), " (", d.name, ", sm_", d.sm, ")");
}
}  // namespace

Choice choose(const GemmProblem& p, const DeviceInfo& d) { return with_splits(choose_row(p, d), p, d); }

namespace {

std::string valid_variants() {
  std::string out;
  std::string_view last;
  for (const auto& c : kConfigs) {
    if (last == c.variant) continue;
    if (!out.empty()) out += ", ";
    out += "'" + std::string(c.variant) + "'";
    last = c.variant;
  }
  return out;
}

std::string valid_tiles(std::string_view variant) {
  std::string out;
  for (const auto& c : kConfigs) {
    if (variant != c.variant) continue;
    if (!out.empty()) out += ", ";
    out += std::to_string(c.tile);
  }
  return out;
}

}  // namespace

Choice select_kernel(const GemmProblem& p, const DeviceInfo& d, std::optional<std::string_view> variant,
                     std::optional<int64_t> tile) {
  if (!variant.has_value() || *variant == "auto") {
    TORCH_CHECK(!tile.has_value(), "tilelab: tile=", tile.value_or(0), " needs a variant; pass variant= too (one of ",
                valid_variants(), ")");
    if (std::optional<Choice> t = tuned_choice(p, d)) return with_splits(*t, p, d);
    return cached_choose(p, d);
  }
  const std::string v(*variant);
  // A full config name ("tiled_16x16x16") selects that row directly.
  const KernelConfig* c = find_config(v);
  if (c != nullptr) {
    TORCH_CHECK(!tile.has_value() || *tile == c->tile, "tilelab: variant='", v, "' is a config name with tile ",
                c->tile, "; tile=", tile.value_or(0), " contradicts it");
  } else {
    bool known = false;
    for (const auto& row : kConfigs) known = known || v == row.variant;
    TORCH_CHECK(known, "tilelab: unknown variant '", v, "'; valid variants: ", valid_variants(),
                " (or a config name from tilelab_torch.kernels())");
    if (!tile.has_value()) {
      // The variant without a tile: the largest of its tiles that runs here.
      std::string why_not;  // the reason of the variant's last row, if none runs
      for (const auto& row : kConfigs) {
        if (v != row.variant) continue;
        const std::string r = cannot_run(row, p, d);
        if (r.empty() && (c == nullptr || row.tile > c->tile)) c = &row;
        if (!r.empty()) why_not = r;
      }
      TORCH_CHECK(c != nullptr, "tilelab: no config of variant '", v, "' runs ", dtype_str(p.dtype), " on ",
                  d.label(), " (", d.name, "): ", why_not);
      return with_splits(Choice{c, "user override: variant='" + v + "', largest tile that runs here"}, p, d);
    }
    for (const auto& row : kConfigs)
      if (v == row.variant && row.tile == *tile) c = &row;
    if (c == nullptr) {
      const int64_t t = *tile;
      if (t > 0 && t * t > d.max_threads_per_block) {
        TORCH_CHECK(false, "tilelab: tile=", t, " needs ", t, "x", t, " = ", t * t,
                    " threads per block (one thread per output of the tile) but ", d.label(), " (", d.name,
                    ") allows at most ", d.max_threads_per_block, "; valid tiles for variant '", v,
                    "': ", valid_tiles(v));
      }
      TORCH_CHECK(false, "tilelab: tile=", t, " is not a valid tile for variant '", v, "'; valid tiles: ",
                  valid_tiles(v));
    }
  }
  const std::string why = cannot_run(*c, p, d);
  TORCH_CHECK(why.empty(), "tilelab: ", why);
  return with_splits(Choice{c, std::string("user override: ") + c->name}, p, d);
}

}  // namespace tilelab
