#pragma once
// Kernel 1, the baseline: one thread per output element, both operands read
// straight from global memory. Every element of A is read N times and every
// element of B M times, so its arithmetic intensity is about 2 FLOP per 8
// bytes of fp32 (0.25 FLOP/B) and it is bound by memory traffic (mostly L1/L2
// hits). The block is T x T threads, T a run-time value: the tile sweep
// launches it with the same block shape as the tiled kernel it is compared to.
// A product of fewer than T rows gets the same number of threads as rows x
// columns, rows the least power of two >= M (launch_naive): a T x T block
// would leave most of its threads idle (M = 2, T = 16: 7 of every 8).
#include "epilogue.cuh"

namespace tilelab {

// Thread (tx, ty) of block (bx, by) computes C[bx*rows + ty, by*cols + tx]
// (rows x cols = blockDim.y x blockDim.x): tx runs along n so a warp reads
// consecutive B elements and writes consecutive C elements (coalesced for
// row-major B).
template <typename T>
__global__ void naive_kernel(GemmArgs<T> p) {
  using Acc = acc_t<T>;
  const int m = blockIdx.x * blockDim.y + threadIdx.y;
  const int n = blockIdx.y * blockDim.x + threadIdx.x;
  const int bz = blockIdx.z;
  if (m >= p.M || n >= p.N) return;
  const T* a = p.a + bz * p.sa_b + static_cast<int64_t>(m) * p.sa_m;
  const T* b = p.b + bz * p.sb_b + static_cast<int64_t>(n) * p.sb_n;
  Acc acc = 0;
  for (int k = 0; k < p.K; ++k) {
    acc += static_cast<Acc>(a[k * p.sa_k]) * static_cast<Acc>(b[k * p.sb_k]);
  }
  store_output(p, bz, m, n, acc);
}

}  // namespace tilelab
