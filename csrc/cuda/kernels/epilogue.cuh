#pragma once
// The epilogue every family ends with: accumulators -> (+ bias) -> (activation)
// -> output dtype -> global memory, predicated at the M/N edges; or, for a
// split-K slice, the raw fp32 sums into its slab of the workspace. A kernel takes a row of
// the output (output_row: addressed once) and stores per accumulator layout:
//   store         one output (the textbook kernels, and every edge element);
//   store_pair    two adjacent columns (mma.sync and wgmma fragments: rows g
//                 and g + 8, columns 2t and 2t + 1), one 32-/64-bit store;
//   store_quad    four adjacent columns (the blocked SIMT tile), one float4.
// A vector store needs C rows aligned to the vector: vector_ok().
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "common.cuh"

namespace tilelab {

// Where an epilogue's values go and what it applies besides the bias.
// EpiTile<kPart>: the tile kernels, fixed at compile time (with_epilogue
// branches once per tile, so their unrolled store loops carry no per-element
// test): the output with no activation, or (kPart) a split-K slice's raw fp32
// sums into its slab. EpiAny reads both at run time and applies the
// activation: the textbook and gemv kernels and the split-K reduction, a few
// stores per thread.
template <bool P>
struct EpiTile {
  static constexpr bool kPart = P;
  static constexpr bool kAny = false;
};
struct EpiAny {
  static constexpr bool kPart = false;
  static constexpr bool kAny = true;
};

// Two floats rounded to a pair of half-precision T, as 32 bits (a vector store; the hopper kernels'
// staged outputs and preloaded bias, exact: its elements are T), and back.
template <typename T>
__device__ __forceinline__ uint32_t pack_pair(float x, float y) {
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    const __nv_bfloat162 v = __floats2bfloat162_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&v);
  } else {
    static_assert(std::is_same_v<T, c10::Half>, "pack_pair: bfloat16 or half");
    const __half2 v = __floats2half2_rn(x, y);
    return *reinterpret_cast<const uint32_t*>(&v);
  }
}
template <typename T>
__device__ __forceinline__ void unpack_pair(uint32_t u, float& x, float& y) {
  if constexpr (std::is_same_v<T, c10::BFloat16>) {
    const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&u));
    x = f.x, y = f.y;
  } else {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&u));
    x = f.x, y = f.y;
  }
}

// Two adjacent outputs as one 64-/32-bit store, rounded once to T (dst aligned to 2 elements).
template <typename T>
__device__ __forceinline__ void store_vec2(T* dst, float x, float y) {
  if constexpr (std::is_same_v<T, float>) {
    *reinterpret_cast<float2*>(dst) = make_float2(x, y);
  } else {
    static_assert(std::is_same_v<T, c10::BFloat16> || std::is_same_v<T, c10::Half>,
                  "store_vec2: float, bfloat16 or half");
    *reinterpret_cast<uint32_t*>(dst) = pack_pair<T>(x, y);
  }
}

// Row m of batch bz of C (and of the bias), addressed once per row: a store
// then costs one add. Every store goes through value(), the one place where
// the bias and the activation are applied.
template <typename T, typename E = EpiAny>
struct OutputRow {
  T* c;                     // &C[bz, m, 0]
  const T* bias;            // &bias[bz, m, 0], nullptr when there is no bias
  int64_t sbias_n;
  int N;
  Activation act;           // read only by EpiAny
  float* part;              // split-K: &slab[m, 0] of this split (EpiAny: nullptr when not split)

  __device__ __forceinline__ bool partial() const {
    if constexpr (E::kAny) return part != nullptr;
    else return E::kPart;
  }
  // The value stored for accumulator `acc` at column n: act(acc (+ bias)),
  // rounded once to T by the caller.
  template <typename Acc>
  __device__ __forceinline__ Acc value(int n, Acc acc) const {
    if (bias != nullptr) acc += static_cast<Acc>(bias[n * sbias_n]);
    return activated(acc);
  }
  template <typename Acc>
  __device__ __forceinline__ Acc activated(Acc acc) const {
    if constexpr (E::kAny) {
      if (act != Activation::None) acc = activate(act, acc);
    }
    return acc;
  }
  // One output, n < N.
  template <typename Acc>
  __device__ __forceinline__ void store(int n, Acc acc) const {
    if (partial()) part[n] = static_cast<float>(acc);
    else c[n] = static_cast<T>(value(n, acc));
  }
  // The same, with its bias loaded beforehand by the kernel (bias_at, below) into b: added where the row has a
  // bias, not read again.
  template <typename Acc>
  __device__ __forceinline__ void store_biased(int n, Acc acc, Acc b) const {
    if (partial()) part[n] = static_cast<float>(acc);
    else c[n] = static_cast<T>(activated(bias != nullptr ? acc + b : acc));
  }
  // Columns n and n + 1 (those < N); `vec`: vector_ok<2>(p), one 32-/64-bit store.
  __device__ __forceinline__ void store_pair(int n, float x, float y, bool vec) const {
    if (partial()) {  // slabs are M x N fp32: a pair is 8-byte aligned when N (and n) are even
      if (n + 1 < N && (N % 2) == 0) {
        *reinterpret_cast<float2*>(part + n) = make_float2(x, y);
      } else {
        if (n < N) part[n] = x;
        if (n + 1 < N) part[n + 1] = y;
      }
      return;
    }
    if (vec && n + 1 < N) {
      store_vec2(c + n, value(n, x), value(n + 1, y));
    } else {
      if (n < N) store(n, x);
      if (n + 1 < N) store(n + 1, y);
    }
  }
  // Columns n..n+3 of those in [n_lo, N) (fp32); `vec`: vector_ok<4>(p) and
  // N % 4 == 0, so a float4 never straddles N (nor n_lo, a multiple of 4 from
  // N by the caller).
  __device__ __forceinline__ void store_quad(int n, int n_lo, float v0, float v1, float v2, float v3,
                                             bool vec) const {
    if (vec && !partial()) {
      if (n < N && n >= n_lo)
        *reinterpret_cast<float4*>(c + n) = make_float4(value(n, v0), value(n + 1, v1), value(n + 2, v2), value(n + 3, v3));
    } else {
      if (n < N && n >= n_lo) store(n, v0);
      if (n + 1 < N && n + 1 >= n_lo) store(n + 1, v1);
      if (n + 2 < N && n + 2 >= n_lo) store(n + 2, v2);
      if (n + 3 < N && n + 3 >= n_lo) store(n + 3, v3);
    }
  }
};

// &C[bz, m, 0], and &slab[m, 0] of split `split` and batch bz (p.partial set).
template <typename T>
__device__ __forceinline__ T* c_row(const GemmArgs<T>& p, int bz, int m) {
  return p.c + bz * p.sc_b + static_cast<int64_t>(m) * p.sc_m;
}
template <typename T>
__device__ __forceinline__ float* slab_row(const GemmArgs<T>& p, int split, int bz, int m) {
  return p.partial + (static_cast<int64_t>(split) * p.batch + bz) * p.M * p.N + static_cast<int64_t>(m) * p.N;
}

// Row m (< M) of batch bz (of split `split`'s slab under split-K).
template <typename E = EpiAny, typename T>
__device__ __forceinline__ OutputRow<T, E> output_row(const GemmArgs<T>& p, int bz, int m, int split = 0) {
  return OutputRow<T, E>{c_row(p, bz, m),
                      p.bias == nullptr ? nullptr : p.bias + bz * p.sbias_b + static_cast<int64_t>(m) * p.sbias_m,
                      p.sbias_n, p.N, p.act, p.partial == nullptr ? nullptr : slab_row(p, split, bz, m)};
}

// Calls f(EpiTile<...>{}) for p's epilogue kind in a tile kernel: one uniform
// branch per tile between the direct store and a split-K slice's raw sums.
// The tile kernels' register epilogues take no activation (p.act is None: the
// host applies it after them, gemm_cuda in host.cpp; the hopper kernels apply
// it in their TMA-store path instead): compiled into every store of their
// unrolled epilogues -- as a run-time switch, or as one copy per activation --
// it made them 2-3x slower or their translation units too slow to build.
template <typename T, typename F>
__device__ __forceinline__ void with_epilogue(const GemmArgs<T>& p, F&& f) {
  if (p.partial != nullptr) f(EpiTile<true>{});
  else f(EpiTile<false>{});
}

// The bias of output (m, n) of batch bz (0 without one; m < M, n < N), for a kernel that loads its outputs'
// biases before its stores (OutputRow::store_biased): loaded with each store, each load waits for the store
// before it (C and the bias may alias, for all the compiler knows), one memory round trip an output
// (the gemv kernels: ViT-B/16's head 8x768x1000 + bias 3.55 -> 3.25 us on gemv_mma, H200).
template <typename Acc = float, typename T>
__device__ __forceinline__ Acc bias_at(const GemmArgs<T>& p, int bz, int m, int n) {
  return p.bias == nullptr ? Acc(0)
                           : static_cast<Acc>(p.bias[bz * p.sbias_b + static_cast<int64_t>(m) * p.sbias_m +
                                                     static_cast<int64_t>(n) * p.sbias_n]);
}

// One output element of batch bz; the caller guarantees m < M and n < N.
template <typename T, typename Acc>
__device__ __forceinline__ void store_output(const GemmArgs<T>& p, int bz, int m, int n, Acc acc) {
  output_row(p, bz, m).store(n, acc);
}

// A bias that is the same for every row (stride 0 along m: addmm's and
// F.linear's (N,) bias): a kernel loads it once per column it holds and adds
// it to the accumulators of all its rows (then stores with the bias cleared),
// instead of loading it once per output. column_bias() is a uniform branch.
template <typename T>
__device__ __forceinline__ bool column_bias(const GemmArgs<T>& p) {
  return p.bias != nullptr && p.sbias_m == 0;
}
// Where the column bias of column n (< N) of batch bz is (a kernel that copies it, blocked.cuh).
template <typename T>
__device__ __forceinline__ const T* column_bias_ptr(const GemmArgs<T>& p, int bz, int n) {
  return p.bias + bz * p.sbias_b + n * p.sbias_n;
}
// The column bias at column n of batch bz (0 past N).
template <typename T>
__device__ __forceinline__ float column_bias_at(const GemmArgs<T>& p, int bz, int n) {
  return n < p.N ? static_cast<float>(*column_bias_ptr(p, bz, n)) : 0.0f;
}

// Whether kVec adjacent outputs may go out as one store: every row (and batch)
// of C starts on a multiple of kVec elements. (The bias is added per element
// before the store, so it does not stop a vector store.)
template <int kVec, typename T>
__device__ __forceinline__ bool vector_ok(const GemmArgs<T>& p) {
  return p.sc_m % kVec == 0 && p.sc_b % kVec == 0 &&
         reinterpret_cast<uintptr_t>(p.c) % (kVec * sizeof(T)) == 0;
}

}  // namespace tilelab
