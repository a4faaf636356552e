#pragma once
// The tile scheduler: which output tile, which batch and which part of K a
// block works on (CUTLASS 3's third part beside the mainloop and the
// epilogue). A kernel asks for its work as
//
//   for (WorkTile w = Sched::first(args); w.valid; w = Sched::next(w, args)) { ... }
//
// or, while it serves one tile per block, just `Sched::first(args)`. A kernel
// that reads only the whole of K static_asserts !Sched::kSplitsK.
// DataParallel is today's scheduler: one tile per block, the whole of K, the
// batch as a coordinate (blockIdx.z), in linear or grouped order. A
// persistent scheduler (a grid of one block per SM walking the tiles) returns
// more than one WorkTile from next(); a split-K or stream-K one gives each
// block a part of K (k_begin, k_end in k-tiles) and a fix-up pass reduces the
// partial sums.
namespace tilelab {

struct WorkTile {
  int tm, tn;            // tile coordinates: rows tm * BM.., columns tn * BN..
  int batch;             // which matrix of the batch
  int k_begin, k_end;    // the k-tiles [k_begin, k_end) of this work
  bool valid;
};

// Grouped rasterization of the (gridDim.x M tiles x gridDim.y N tiles) grid:
// consecutive block ids walk a group of kGroupM tile rows column by column, so
// the blocks resident at one time share A and B panels in L2.
template <int kGroupM>
struct GroupedOrder {
  static __device__ __forceinline__ void tile(int& tm, int& tn) {
    const int gm = gridDim.x, gn = gridDim.y;
    const int pid = blockIdx.x + blockIdx.y * gm;
    const int per_group = kGroupM * gn;
    const int first_m = (pid / per_group) * kGroupM;
    const int rows = min(gm - first_m, kGroupM);
    tm = first_m + (pid % per_group) % rows;
    tn = (pid % per_group) / rows;
  }
};

// Block (x, y) computes tile (x, y).
struct LinearOrder {
  static __device__ __forceinline__ void tile(int& tm, int& tn) {
    tm = blockIdx.x;
    tn = blockIdx.y;
  }
};

// One tile per block: grid (M tiles, N tiles, batch) from grid_for() in launch.h.
template <typename Order>
struct DataParallel {
  static constexpr bool kSplitsK = false;  // every WorkTile covers all of K
  static constexpr bool kPersistent = false;
  // k_tiles: how many k-tiles the whole K holds.
  static __device__ __forceinline__ WorkTile first(int k_tiles) {
    WorkTile w;
    Order::tile(w.tm, w.tn);
    w.batch = blockIdx.z;
    w.k_begin = 0;
    w.k_end = k_tiles;
    w.valid = true;
    return w;
  }
  static __device__ __forceinline__ WorkTile next(WorkTile w, int) {
    w.valid = false;
    return w;
  }
};

constexpr int kGroupM = 8;  // tile rows per group of the tensor-core families' grouped order
using GroupedScheduler = DataParallel<GroupedOrder<kGroupM>>;
using LinearScheduler = DataParallel<LinearOrder>;

}  // namespace tilelab
