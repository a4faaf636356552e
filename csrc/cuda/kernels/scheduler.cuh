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
//   const PersistentGrouped<kGroupM> s(M, N, bm, bn, k_tiles, splits, batch, hand_over, sk_tiles, gridDim.x);
//   for (auto u = s.begin(blockIdx.x); s.valid(u); s.next(u)) { const WorkTile w = s.at(u); ... }
//
// with the same split-K ranges and reduction. With `hand_over` the slices are
// added in the kernel (the hopper kernel's SliceSums): the list runs the
// slices from the last to the first (split 0's tiles at its end), split 0's
// block waits for the others' sums, so every slice it waits on has a block
// that started no later than its own.
//
// Stream-K (sk_tiles > 0, one slice): the list's last sk_tiles tiles are not
// dealt out whole. Their k-steps, sk_tiles x k_tiles in tile order, are cut
// into one contiguous range per block (block b: [b I / G, (b + 1) I / G)), so
// every SM gets the same work where whole tiles would leave some idle in the
// last wave (96 tiles on 132 SMs: 27% of the time). A tile cut between blocks
// is finished by the block that holds its first k-step (its last segment);
// each other block holding part of it (that part is the block's first
// segment, computed first) leaves its sums in a slot of its own and counts
// them in, and the finishing block adds them in block order: the same inputs
// give bitwise the same output every call. Nobody waits on a block that is
// itself waiting: the parts waited for are first segments (CUTLASS's
// stream-K scheduler decomposes the same way).
#include "../gemm_args.h"

namespace tilelab {

// How a work tile takes part in a hand-over of sums inside the kernel (hopper SliceSums).
enum class HandOver : int {
  kNone,    // it stores its own output (or a split-K slab for a second pass)
  kGive,    // it stores its raw sums in slot `slot` and counts itself in
  kCollect  // after its own k-tiles it waits for and adds `peers` slots, slot, slot + slot_step, ..., in order
};

struct WorkTile {
  int tm, tn;            // tile coordinates: rows tm * BM.., columns tn * BN..
  int batch;             // which matrix of the batch
  int split;             // which slice of K (0 without split-K)
  int k_begin, k_end;    // the k-tiles [k_begin, k_end) of this work
  HandOver hand_over = HandOver::kNone;
  int peers = 0;
  int64_t slot = 0, slot_step = 0;
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

// Stream-K (PersistentGrouped): how many of `tiles` tiles a grid of `grid` blocks shares by k-steps. Fewer
// tiles than two waves: all of them (each block gets tiles / grid of a tile, or 1 to 2 tiles' worth); else the
// last partial wave and one whole wave before it (CUTLASS's data-parallel + stream-K), so each block's stream-K
// share is 1 to 2 tiles, not a sliver of one; 0 where whole waves fill every block.
__host__ __device__ __forceinline__ int64_t stream_k_tiles(int64_t tiles, int64_t grid) {
  if (tiles < 2 * grid) return tiles;
  return tiles % grid == 0 ? 0 : tiles % grid + grid;
}

// Persistent: a grid of at most one block per SM; block b computes the work
// tiles b, b + gridDim.x, b + 2 gridDim.x, ... of one linear list that covers
// every (split, batch) layer in turn (layer = split * batch + batch index, as
// the data-parallel z), each layer's tiles in the grouped order. A batch of
// small matrices (attention's B x (512 x 512)) thus fills every SM, not one
// tile per block and layer, and a block's next tile is loaded while it
// finishes the last. With stream-K the list's last sk_tiles tiles follow as
// each block's range of their k-steps (above). Made once per kernel from the
// problem (a few integer divisions per tile); `count` is the length of the
// list, which the host also computes (count_of) to size the grid.
template <int kGroupM>
struct PersistentGrouped {
  static constexpr bool kPersistent = true;
  int tiles_m, tiles_n, k_tiles, splits, batch, grid;
  bool hand_over;
  int64_t per_layer, count;
  int64_t dp_count;  // the whole work tiles of the list (all of it without stream-K)
  int64_t sk_iters;  // stream-K: the k-steps the blocks share (the last count - dp_count tiles' k_tiles each)

  // A block's place in its work: the list index i while it takes whole tiles, then its stream-K k-steps
  // [pos, end).
  struct Cursor {
    int64_t i, pos, end;
    int block;
  };

  __device__ __forceinline__ PersistentGrouped(int M, int N, int bm, int bn, int k_tiles_, int splits_, int batch_,
                                               bool hand_over_, int64_t sk_tiles, int grid_)
      : tiles_m((M + bm - 1) / bm), tiles_n((N + bn - 1) / bn), k_tiles(k_tiles_), splits(splits_), batch(batch_),
        grid(grid_), hand_over(hand_over_) {
    per_layer = static_cast<int64_t>(tiles_m) * tiles_n;
    count = per_layer * splits * batch;
    dp_count = count - sk_tiles;
    sk_iters = sk_tiles * k_tiles;
  }
  // The length of the list, on the host (to size the grid): the constructor's `count`.
  static int64_t count_of(int64_t M, int64_t N, int bm, int bn, int64_t splits, int64_t batch) {
    return ((M + bm - 1) / bm) * ((N + bn - 1) / bn) * splits * batch;
  }

  __device__ __forceinline__ Cursor begin(int block) const {
    Cursor u{block, 0, 0, block};
    if (u.i >= dp_count) to_stream_k(u);
    return u;
  }
  __device__ __forceinline__ bool valid(const Cursor& u) const { return u.i < dp_count || u.pos < u.end; }
  __device__ __forceinline__ void next(Cursor& u) const {
    if (u.i < dp_count) {
      u.i += grid;
      if (u.i >= dp_count) to_stream_k(u);
    } else {
      u.pos = (u.pos / k_tiles + 1) * k_tiles;  // the next tile's first k-step
    }
  }

  // The work at u.
  __device__ __forceinline__ WorkTile at(const Cursor& u) const {
    if (u.i < dp_count) return at(u.i);
    const int64_t t = u.pos / k_tiles, first = t * k_tiles;  // the stream-K tile and its first k-step
    WorkTile w = at(dp_count + t);
    w.k_begin = static_cast<int>(u.pos - first);
    w.k_end = static_cast<int>(min(static_cast<int64_t>(k_tiles), u.end - first));
    if (w.k_begin > 0) {
      w.hand_over = HandOver::kGive, w.slot = u.block;
    } else {
      w.peers = owner(first + k_tiles - 1) - u.block;
      if (w.peers > 0) w.hand_over = HandOver::kCollect, w.slot = u.block + 1, w.slot_step = 1;
    }
    return w;
  }

  // Work tile i of the list (i < count): a whole tile, or one slice of it.
  __device__ __forceinline__ WorkTile at(int64_t i) const {
    WorkTile w;
    const int layer = static_cast<int>(i / per_layer);
    const int64_t in_layer = i - static_cast<int64_t>(layer) * per_layer;
    grouped_tile<kGroupM>(in_layer, tiles_m, tiles_n, w.tm, w.tn);
    w.batch = layer % batch;
    w.split = hand_over ? splits - 1 - layer / batch : layer / batch;
    w.k_begin = splits == 1 ? 0 : split_k_begin(k_tiles, splits, w.split);
    w.k_end = splits == 1 ? k_tiles : split_k_begin(k_tiles, splits, w.split + 1);
    if (hand_over && splits > 1) {
      // Slot (split - 1) x tiles + tile for each slice past the first; slice 0 adds them in slice order.
      const int64_t tiles = per_layer * batch, tile = static_cast<int64_t>(w.batch) * per_layer + in_layer;
      if (w.split > 0) {
        w.hand_over = HandOver::kGive, w.slot = (w.split - 1) * tiles + tile;
      } else {
        w.hand_over = HandOver::kCollect, w.peers = splits - 1, w.slot = tile, w.slot_step = tiles;
      }
    }
    return w;
  }

 private:
  __device__ __forceinline__ void to_stream_k(Cursor& u) const {
    u.i = dp_count;
    u.pos = sk_iters * u.block / grid;
    u.end = sk_iters * (u.block + 1) / grid;
  }
  // The block whose stream-K range holds k-step x: the last b with b I / G <= x.
  __device__ __forceinline__ int owner(int64_t x) const {
    return static_cast<int>(((x + 1) * grid - 1) / sk_iters);
  }
};

constexpr int kGroupM = 8;  // tile rows per group of the tensor-core families' grouped order
using GroupedScheduler = DataParallel<GroupedOrder<kGroupM>>;
using LinearScheduler = DataParallel<LinearOrder>;

}  // namespace tilelab
