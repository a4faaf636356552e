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
#include "../gemm_args.h"

namespace tilelab {

struct WorkTile {
  int tm, tn;            // tile coordinates: rows tm * BM.., columns tn * BN..
  int batch;             // which matrix of the batch
  int split;             // which slice of K (0 without split-K)
  int k_begin, k_end;    // the k-tiles [k_begin, k_end) of this work
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
  int64_t per_layer, count;

  __device__ __forceinline__ PersistentGrouped(int M, int N, int bm, int bn, int k_tiles_, int splits_, int batch_,
                                               bool last_split_first_ = false)
      : tiles_m((M + bm - 1) / bm), tiles_n((N + bn - 1) / bn), k_tiles(k_tiles_), splits(splits_), batch(batch_),
        last_split_first(last_split_first_) {
    per_layer = static_cast<int64_t>(tiles_m) * tiles_n;
    count = per_layer * splits * batch;
  }
  // The length of the list, on the host (to size the grid): the constructor's `count`.
  static int64_t count_of(int64_t M, int64_t N, int bm, int bn, int64_t splits, int64_t batch) {
    return ((M + bm - 1) / bm) * ((N + bn - 1) / bn) * splits * batch;
  }
  // Work tile i of the list (i < count).
  __device__ __forceinline__ WorkTile at(int64_t i) const {
    WorkTile w;
    const int layer = static_cast<int>(i / per_layer);
    grouped_tile<kGroupM>(i - static_cast<int64_t>(layer) * per_layer, tiles_m, tiles_n, w.tm, w.tn);
    w.batch = layer % batch;
    w.split = last_split_first ? splits - 1 - layer / batch : layer / batch;
    w.k_begin = splits == 1 ? 0 : split_k_begin(k_tiles, splits, w.split);
    w.k_end = splits == 1 ? k_tiles : split_k_begin(k_tiles, splits, w.split + 1);
    return w;
  }
};

constexpr int kGroupM = 8;  // tile rows per group of the tensor-core families' grouped order
using GroupedScheduler = DataParallel<GroupedOrder<kGroupM>>;
using LinearScheduler = DataParallel<LinearOrder>;

}  // namespace tilelab
