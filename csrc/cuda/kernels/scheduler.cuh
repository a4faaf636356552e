#pragma once
// The tile scheduler: which output tile, which batch and which part of K a
// block works on (CUTLASS 3's third part beside the mainloop and the
// epilogue). Two of them:
//
// DataParallel (blocked, tensorcore): one tile per block,
//
//   const WorkTile w = Sched::first(k_tiles, splits, batch);
//
// the batch as a coordinate (blockIdx.z), in linear or grouped order, and
// optionally split-K: with `splits` > 1 the grid's z holds splits x batch
// blocks per tile and each computes a contiguous range of k-tiles (k_begin,
// k_end), its partial sums reduced by a second pass (split_reduce.cu) in a
// fixed order -- the same inputs give bitwise the same output. A kernel that
// walks K from zero narrows its arguments to its range with narrow_k().
//
// PersistentGrouped (hopper): a grid of at most one block per SM, each walking
// its share of one list of every (split, batch, tile),
//
//   const PersistentGrouped<kGroupM> s(M, N, bm, bn, k_tiles, splits, batch);
//   for (int64_t i = blockIdx.x; i < s.count; i += gridDim.x) { const WorkTile w = s.at(i); ... }
//
// with the same split-K ranges and reduction. With `last_split_first` the
// list runs the slices from the last to the first (split 0's tiles at its
// end): the hopper kernel's in-kernel reduction, where split 0's block waits
// for the others' sums, so every slice it waits on has a block that started
// no later than its own.
//
// Stream-K (PersistentGrouped with `sk_blocks` > 0, the grid's size; one slice
// of K): the k-tiles of every tile, tile after tile in the list's order, are
// one run of tiles x k_tiles iterations, cut into sk_blocks contiguous ranges
// that differ by at most one iteration; block b walks the pieces of tiles its
// range covers (at most a tile's end, whole tiles, a tile's start, in that
// order). A tile cut between blocks is finished by the block holding its
// first k-tile (`others` > 0: the next `others` blocks hold the rest), which
// adds their sums (each block's first piece, published before it goes on) in
// block order: the same inputs on the same GPU give bitwise the same output.
// The piece it waits for is always its helpers' first, so no block waits on
// one that waits in turn (every block of the grid resident, as split-K's).
#include "../gemm_args.h"

namespace tilelab {

struct WorkTile {
  int tm, tn;            // tile coordinates: rows tm * BM.., columns tn * BN..
  int batch;             // which matrix of the batch
  int split;             // which slice of K (0 without split-K)
  int k_begin, k_end;    // the k-tiles [k_begin, k_end) of this work (stream-K: empty for a block's unused entry)
  int others = 0;        // stream-K: the blocks after this one holding the rest of a tile it finishes (> 0), or
                         // -1 for a piece whose sums another block finishes; 0 otherwise (a whole tile)
};

// Grouped rasterization of a tiles_m x tiles_n grid of tiles: consecutive ids
// walk a group of kGroupM tile rows column by column, so the tiles in flight
// at one time share A and B panels in L2. Tile `id` (Index: int for a grid's
// block id, int64_t for a persistent list) is (tm, tn).
template <int kGroupM, typename Index>
__device__ __forceinline__ void grouped_tile(Index id, int tiles_m, int tiles_n, int& tm, int& tn) {
  const Index per_group = static_cast<Index>(kGroupM) * tiles_n;
  const int first_m = static_cast<int>(id / per_group) * kGroupM;
  const int rows = min(tiles_m - first_m, kGroupM);
  const int in_group = static_cast<int>(id - (id / per_group) * per_group);
  tm = first_m + in_group % rows;
  tn = in_group / rows;
}

// The (gridDim.x M tiles x gridDim.y N tiles) grid in the grouped order.
template <int kGroupM>
struct GroupedOrder {
  static __device__ __forceinline__ void tile(int& tm, int& tn) {
    const int gm = gridDim.x, gn = gridDim.y;
    grouped_tile<kGroupM>(static_cast<int>(blockIdx.x + blockIdx.y * gm), gm, gn, tm, tn);
  }
};

// Block (x, y) computes tile (x, y).
struct LinearOrder {
  static __device__ __forceinline__ void tile(int& tm, int& tn) {
    tm = blockIdx.x;
    tn = blockIdx.y;
  }
};

// The k-tiles of split s when k_tiles are cut into `splits` ranges of
// ceil(k_tiles / splits) (the host picks splits so that none is empty).
__host__ __device__ __forceinline__ int split_k_begin(int k_tiles, int splits, int s) {
  const int per = (k_tiles + splits - 1) / splits;
  return min(k_tiles, s * per);
}

// One tile per block: grid (M tiles, N tiles, batch x splits) from grid_for() in launch.h.
template <typename Order>
struct DataParallel {
  static constexpr bool kPersistent = false;
  // k_tiles: how many k-tiles the whole K holds; splits, batch: GemmArgs' (z = split * batch + batch index).
  static __device__ __forceinline__ WorkTile first(int k_tiles, int splits = 1, int batch = 1) {
    WorkTile w;
    Order::tile(w.tm, w.tn);
    if (splits == 1) {
      w.batch = blockIdx.z, w.split = 0, w.k_begin = 0, w.k_end = k_tiles;
      return w;
    }
    w.batch = blockIdx.z % batch;
    w.split = blockIdx.z / batch;
    w.k_begin = split_k_begin(k_tiles, splits, w.split);
    w.k_end = split_k_begin(k_tiles, splits, w.split + 1);
    return w;
  }
};

// For a kernel that walks K from 0 to p.K: moves A and B to the first k-tile
// of w (bk elements each) and cuts K to its range, so the kernel's own edge
// handling covers the last split's tail.
template <typename T>
__device__ __forceinline__ void narrow_k(GemmArgs<T>& p, const WorkTile& w, int bk) {
  if (p.splits == 1) return;
  const int k0 = w.k_begin * bk;
  p.a += k0 * p.sa_k;
  p.b += k0 * p.sb_k;
  p.K = min(p.K - k0, (w.k_end - w.k_begin) * bk);
}

// Persistent: a grid of at most one block per SM; block b computes the work
// tiles b, b + gridDim.x, b + 2 gridDim.x, ... of one linear list that covers
// every (split, batch) layer in turn (layer = split * batch + batch index, as
// the data-parallel z), each layer's tiles in the grouped order. A batch of
// small matrices (attention's B x (512 x 512)) thus fills every SM, not one
// tile per block and layer, and a block's next tile is loaded while it
// finishes the last. Made once per kernel from the problem (a few integer
// divisions per tile); `count` is the length of the list, which the host
// also computes (count_of) to size the grid.
template <int kGroupM>
struct PersistentGrouped {
  static constexpr bool kPersistent = true;
  int tiles_m, tiles_n, k_tiles, splits, batch;
  bool last_split_first;
  int sk_blocks;        // stream-K: the grid (0: the tile list)
  int64_t sk_q, sk_r;   // stream-K: a block's iterations are sk_q, plus one for the first sk_r blocks
  int64_t per_layer, count;

  __device__ __forceinline__ PersistentGrouped(int M, int N, int bm, int bn, int k_tiles_, int splits_, int batch_,
                                               bool last_split_first_ = false, int sk_blocks_ = 0)
      : tiles_m((M + bm - 1) / bm), tiles_n((N + bn - 1) / bn), k_tiles(k_tiles_), splits(splits_), batch(batch_),
        last_split_first(last_split_first_), sk_blocks(sk_blocks_) {
    per_layer = static_cast<int64_t>(tiles_m) * tiles_n;
    count = per_layer * splits * batch;
    sk_q = sk_r = 0;
    if (sk_blocks > 0) {
      // Each block's entries: the tiles a range of sk_q + 1 iterations can touch (unused ones are empty).
      const int64_t iters = count * k_tiles;
      sk_q = iters / sk_blocks, sk_r = iters % sk_blocks;
      count = static_cast<int64_t>(sk_blocks) * ((sk_q + k_tiles) / k_tiles + 1);
    }
  }
  // The length of the list, on the host (to size the grid): the constructor's `count` without stream-K.
  static int64_t count_of(int64_t M, int64_t N, int bm, int bn, int64_t splits, int64_t batch) {
    return ((M + bm - 1) / bm) * ((N + bn - 1) / bn) * splits * batch;
  }
  // Stream-K: the first iteration of block b's range, and the block whose range holds iteration x.
  __device__ __forceinline__ int64_t sk_start(int64_t b) const { return b * sk_q + min(b, sk_r); }
  __device__ __forceinline__ int64_t sk_block_of(int64_t x) const {
    return x < sk_r * (sk_q + 1) ? x / (sk_q + 1) : sk_r + (x - sk_r * (sk_q + 1)) / sk_q;
  }
  // Work tile i of the list (i < count): with stream-K, entry i / sk_blocks of block i % sk_blocks.
  __device__ __forceinline__ WorkTile at(int64_t i) const {
    WorkTile w;
    int64_t t = i;  // the tile's place in the list
    if (sk_blocks > 0) {
      const int64_t b = i % sk_blocks, start = sk_start(b), end = sk_start(b + 1);
      t = start / k_tiles + i / sk_blocks;
      const int64_t lo = max(start, t * k_tiles), hi = min(end, (t + 1) * k_tiles);
      if (lo >= hi) {  // past the block's range
        w.tm = w.tn = w.batch = w.split = w.k_begin = w.k_end = 0;
        return w;
      }
      w.k_begin = static_cast<int>(lo - t * k_tiles), w.k_end = static_cast<int>(hi - t * k_tiles);
      if (w.k_begin > 0) w.others = -1;
      else if (w.k_end < k_tiles) w.others = static_cast<int>(sk_block_of((t + 1) * k_tiles - 1) - b);
    }
    const int layer = static_cast<int>(t / per_layer);
    grouped_tile<kGroupM>(t - static_cast<int64_t>(layer) * per_layer, tiles_m, tiles_n, w.tm, w.tn);
    w.batch = layer % batch;
    w.split = last_split_first ? splits - 1 - layer / batch : layer / batch;
    if (sk_blocks > 0) return w;
    w.k_begin = splits == 1 ? 0 : split_k_begin(k_tiles, splits, w.split);
    w.k_end = splits == 1 ? k_tiles : split_k_begin(k_tiles, splits, w.split + 1);
    return w;
  }
};

constexpr int kGroupM = 8;  // tile rows per group of the tensor-core families' grouped order
using GroupedScheduler = DataParallel<GroupedOrder<kGroupM>>;
using LinearScheduler = DataParallel<LinearOrder>;

}  // namespace tilelab
