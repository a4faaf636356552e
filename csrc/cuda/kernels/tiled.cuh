#pragma once
// Kernel 2, the textbook shared-memory tiled kernel: a T x T block computes a
// T x T tile of C, one output per thread. Each step stages a T x T tile of A
// and of B in shared memory (one element per thread), synchronises, runs T
// multiply-adds out of shared memory and synchronises again before the next
// tiles overwrite the buffers. Every global element is now read M/T (N/T)
// times instead of M (N): arithmetic intensity ~T/4 FLOP/B for fp32.
//
// Boundary safety: with kEven (M, N, K all multiples of T, checked by the
// host) loads and stores are unconditional; otherwise out-of-range loads are
// zero-filled (a zero contributes nothing to the dot product) and stores are
// predicated. One body, two instantiations, chosen at run time.
#include "epilogue.cuh"

namespace tilelab {

// Which element a thread stages: the fastest thread index (tx) walks the
// operand's unit-stride dimension, so each warp's global loads coalesce for
// both row-major and column-major operands. The branch is uniform across the
// grid (it depends only on the strides).
template <typename T, int kT, bool kEven>
__global__ void __launch_bounds__(kT * kT) tiled_kernel(GemmArgs<T> p) {
  using Acc = acc_t<T>;
  static_assert(kT * kT <= 1024, "one thread per output: a tile cannot exceed 1024 threads");
  __shared__ T As[kT][kT];  // As[m][k]
  __shared__ T Bs[kT][kT];  // Bs[k][n]

  const int tx = threadIdx.x, ty = threadIdx.y;
  const int m0 = blockIdx.x * kT, n0 = blockIdx.y * kT, bz = blockIdx.z;
  const T* A = p.a + bz * p.sa_b;
  const T* B = p.b + bz * p.sb_b;
  const bool a_k_contig = p.sa_k == 1;  // row-major A: consecutive threads take consecutive k
  const bool b_n_contig = p.sb_n == 1;  // row-major B: consecutive threads take consecutive n
  const int am = a_k_contig ? ty : tx, ak = a_k_contig ? tx : ty;
  const int bk = b_n_contig ? ty : tx, bn = b_n_contig ? tx : ty;

  Acc acc = 0;
  for (int k0 = 0; k0 < p.K; k0 += kT) {
    T av = static_cast<T>(0.0f), bv = static_cast<T>(0.0f);
    if (kEven || (m0 + am < p.M && k0 + ak < p.K))
      av = A[static_cast<int64_t>(m0 + am) * p.sa_m + static_cast<int64_t>(k0 + ak) * p.sa_k];
    if (kEven || (k0 + bk < p.K && n0 + bn < p.N))
      bv = B[static_cast<int64_t>(k0 + bk) * p.sb_k + static_cast<int64_t>(n0 + bn) * p.sb_n];
    As[am][ak] = av;
    Bs[bk][bn] = bv;
    __syncthreads();  // the tiles are complete before anyone reads them
#pragma unroll
    for (int k = 0; k < kT; ++k) acc += static_cast<Acc>(As[ty][k]) * static_cast<Acc>(Bs[k][tx]);
    __syncthreads();  // everyone is done reading before the next step overwrites them
  }
  if (kEven || (m0 + ty < p.M && n0 + tx < p.N)) store_output(p, bz, m0 + ty, n0 + tx, acc);
}

}  // namespace tilelab
