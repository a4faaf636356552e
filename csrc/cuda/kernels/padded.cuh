#pragma once
// Kernel 3: the tiled kernel with the A tile stored transposed (k-major) in
// shared memory and every shared row padded by kPad elements.
//
// Why transposed: the inner loop then reads A as As[k][m] and B as Bs[k][n],
// both walking a row, which is the layout the register-blocked kernels need
// (a thread reads a run of m values at one k). Why padded: a row-major A is
// loaded with consecutive threads on consecutive k, so the transposed store
// As[k][m] sends a warp down a column. With rows of 32 words every element of
// that column sits in the same bank (a 32-way conflict for T = 32); one extra
// element per row (kPad = 1) shifts each row by one bank and the column
// spreads over all 32. The kPad = 0 twin (variant padded_nopad) is kept so the
// benchmark can show the conflict count and its cost.
#include "epilogue.cuh"

namespace tilelab {

template <typename T, int kT, int kPad, bool kEven>
__global__ void __launch_bounds__(kT * kT) padded_kernel(GemmArgs<T> p) {
  using Acc = acc_t<T>;
  static_assert(kT * kT <= 1024, "one thread per output: a tile cannot exceed 1024 threads");
  static_assert(kPad >= 0, "padding is a count of extra elements per row");
  __shared__ T As[kT][kT + kPad];  // As[k][m]: k-major (transposed)
  __shared__ T Bs[kT][kT + kPad];  // Bs[k][n]

  const int tx = threadIdx.x, ty = threadIdx.y;
  const int m0 = blockIdx.x * kT, n0 = blockIdx.y * kT, bz = blockIdx.z;
  const T* A = p.a + bz * p.sa_b;
  const T* B = p.b + bz * p.sb_b;
  // Coalesced global loads, as in the tiled kernel.
  const bool a_k_contig = p.sa_k == 1;
  const bool b_n_contig = p.sb_n == 1;
  const int am = a_k_contig ? ty : tx, ak = a_k_contig ? tx : ty;
  const int bk = b_n_contig ? ty : tx, bn = b_n_contig ? tx : ty;

  Acc acc = 0;
  for (int k0 = 0; k0 < p.K; k0 += kT) {
    T av = static_cast<T>(0.0f), bv = static_cast<T>(0.0f);
    if (kEven || (m0 + am < p.M && k0 + ak < p.K))
      av = A[static_cast<int64_t>(m0 + am) * p.sa_m + static_cast<int64_t>(k0 + ak) * p.sa_k];
    if (kEven || (k0 + bk < p.K && n0 + bn < p.N))
      bv = B[static_cast<int64_t>(k0 + bk) * p.sb_k + static_cast<int64_t>(n0 + bn) * p.sb_n];
    As[ak][am] = av;  // row-major A: a warp writes down a column -> needs kPad
    Bs[bk][bn] = bv;  // column-major B: likewise
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kT; ++k) acc += static_cast<Acc>(As[k][ty]) * static_cast<Acc>(Bs[k][tx]);
    __syncthreads();
  }
  if (kEven || (m0 + ty < p.M && n0 + tx < p.N)) store_output(p, bz, m0 + ty, n0 + tx, acc);
}

}  // namespace tilelab
