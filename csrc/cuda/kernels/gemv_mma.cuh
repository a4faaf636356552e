#pragma once
// Kernel family `gemv_mma`: half-precision products with few rows (decoding a
// language model: x (M x K, M <= 16) @ W^T with W (N x K) row-major) on the
// tensor cores, where the time is W streamed once from memory.
//
// Swap-AB: W is mma.sync's A operand (16 of its rows, the output columns n)
// and x its B operand (8 of its rows on mma's n axis, the output rows m), so a
// product of one to sixteen rows wastes no tensor-core rows on padding, and
// W's 16-byte pieces become fragments as they are (no ldmatrix, no shuffles):
//
//   lane (g, t) = (lane / 4, lane % 4) copies the 8 elements k0 + 8t .. k0 + 8t + 7
//   of W's rows n0 + g and n0 + g + 8 and of x's row m0 + g (and m0 + 8 + g).
//
// m16n8k16 wants lane (g, t) to hold k = 2t, 2t+1, 2t+8, 2t+9 of its rows of
// A and of its column of B. Since a product sums over k, any one relabeling of
// k applied to both operands gives the same sum: the 8 elements are used as
// those four k of one MMA (elements 0-3) and of a second (4-7), so a
// 32-element chunk of K is two MMAs fed from three 16-byte pieces per lane.
//
// A block computes tiles of 16 kR columns x 16 rows of C (kR groups of 16 W
// rows share each piece of x); its kWarps warps split K (warp w takes chunks
// w*kU .. w*kU + kU - 1 of a tile, then the next kWarps*kU), each lane
// streaming its own pieces through a kStages-deep cp.async ring in shared
// memory, laid out [warp][stage][u][piece][lane] so that a lane reads back
// only what it copied (no barrier in the mainloop; the 16-byte reads are
// conflict-free) and kStages - 1 rounds of kU chunks are in flight per warp at
// all times.
//
// Persistent: block b computes tiles b*per .. b*per + per - 1 of the list
// (row tiles of a column group adjacent, so W comes from memory once and from
// L2 for the others; then column groups; then the batch), per = the fewest
// tiles a block can take with every block resident at once, so that no block
// has more than another (a wave of whole tiles). The ring runs on across the
// block's tiles: the next tile's pieces are in flight while a tile's sums are
// added up. After a tile's last round the warps' partial sums are added in
// shared memory in warp order (the same inputs give bitwise the same output)
// and stored through the epilogue (bias, activation, one rounding).
//
// kTwo: more than 8 rows in the product, a second MMA column block (x's rows
// m0 + 8 ..) and one more piece per chunk.
//
// kNMajor: x @ B with B (K x N) row-major, n-contiguous (transformers' Conv1D
// stores its weight so). A 16-byte run of a B row holds 8 columns at one k,
// while an MMA register wants two k of one column, so the pieces are taken
// apart in registers instead: lane (g, t) copies 8 bytes (4 columns
// n0 + 4g .. n0 + 4g + 3) of each of B's rows k0 + 8t .. k0 + 8t + 7, two rows
// to a 16-byte slot of the same ring, and a byte permute (prmt) pairs rows
// k, k + 1 of one column into a register. Each of those columns is one MMA
// row: 16 W-row group r's rows g, g + 8 are columns n0 + 4g + 2r and + 1, so
// a tile is still 16 kR columns (the 8 lanes of a t read 64 contiguous bytes
// of a row), and x's pieces and K's relabeling are as above.
//
// Both operands with 16-byte aligned rows, x k-contiguous and B in the row's
// layout (the launcher copies an operand that is not); a K that is not a
// multiple of 8 ends in one partial 16-byte piece per row of x (and W), which
// cp.async zero-fills past the row's end; an n-contiguous B's rows past K and
// columns past N are zero-filled the same way.
#include <cstdint>
#include <type_traits>

#include "async_copy.cuh"
#include "common.cuh"
#include "epilogue.cuh"

namespace tilelab {
namespace gemv_mma {

__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}

// The ring's pieces per chunk: rows g and g + 8 of each of the kR W row groups, and x's row g (and 8 + g).
template <int kR, bool kTwo>
constexpr int pieces() {
  return 2 * kR + (kTwo ? 2 : 1);
}
// Above 8 rows a chunk has one more piece: the same ring bytes hold fewer stages.
template <int kStages, int kR>
constexpr int stages_two() {
  constexpr int s = kStages * pieces<kR, false>() / pieces<kR, true>();
  return s > 2 ? s : 2;
}
// Shared memory of a block: the ring (16 bytes per lane per piece), then the warps' sums.
template <int kWarps, int kU, int kStages, int kR, bool kTwo>
constexpr int ring_bytes() {
  return kWarps * kStages * kU * pieces<kR, kTwo>() * 32 * 16;
}
template <int kWarps, int kU, int kStages, int kR, bool kTwo>
constexpr int smem_bytes() {
  return ring_bytes<kWarps, kU, kStages, kR, kTwo>() + kWarps * kR * 2 * 4 * 32 * 4;
}

}  // namespace gemv_mma

template <typename T, int kWarps, int kU, int kStages, int kR, bool kTwo, bool kNMajor>
__global__ void __launch_bounds__(kWarps * 32) gemv_mma_kernel(GemmArgs<T> p, int64_t per) {
  static_assert(std::is_same_v<T, c10::BFloat16> || std::is_same_v<T, c10::Half>, "gemv_mma: bf16 or fp16");
  static_assert(kStages >= 2, "a ring of at least two stages");
  static_assert(!kNMajor || kR == 2, "gemv_mma: an n-contiguous B's 8-byte pieces are 4 columns, 2 per W-row group");
  constexpr int kChunk = 32;  // K elements of one 16-byte piece per lane of a quad
  constexpr int kW = 2 * kR;  // W pieces per chunk
  constexpr int kPieces = gemv_mma::pieces<kR, kTwo>();
  extern __shared__ __align__(16) unsigned char gemv_smem[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  const int K = p.K;
  const int m_tiles = (p.M + 15) / 16, n_tiles = (p.N + 16 * kR - 1) / (16 * kR);
  const int64_t tiles = static_cast<int64_t>(m_tiles) * n_tiles * p.batch;
  const int64_t tile0 = blockIdx.x * per;
  const int mine = static_cast<int>(min(per, tiles - tile0));  // >= 1: the launcher's grid
  const int chunks = (K + kChunk - 1) / kChunk, stride = kWarps * kU;
  const int rpt = (chunks + stride - 1) / stride;  // rounds per tile, the same for every warp
  const int total = mine * rpt;

  // Tile `id` as (batch, first column, first row).
  auto locate = [&](int64_t id, int& bz, int& n0, int& m0) {
    m0 = static_cast<int>(id % m_tiles) * 16;
    const int64_t rest = id / m_tiles;
    n0 = static_cast<int>(rest % n_tiles) * 16 * kR;
    bz = static_cast<int>(rest / n_tiles);
  };

  // The issuing side: this lane's rows of the tile being loaded, and the number of their K
  // elements it may read (0: a row past M or N).
  const T* src[kPieces];
  int len[kPieces];
  // (kNMajor: src[0] is column n0 + 4g of B's first row, len[0] the bytes of those 4 columns inside N.)
  auto set_tile = [&](int64_t id) {
    int bz, n0, m0;
    locate(id, bz, n0, m0);
    const int rows = min(16, p.M - m0);
    if constexpr (kNMajor) {
      const int n = n0 + 4 * g;
      len[0] = min(max(p.N - n, 0), 4) * static_cast<int>(sizeof(T));
      src[0] = p.b + bz * p.sb_b + (len[0] > 0 ? n : 0);
    } else {
#pragma unroll
      for (int q = 0; q < kW; ++q) {
        const int n = n0 + 16 * (q / 2) + 8 * (q % 2) + g;
        len[q] = n < p.N ? K : 0;
        src[q] = p.b + bz * p.sb_b + static_cast<int64_t>(len[q] > 0 ? n : 0) * p.sb_n + 8 * t;
      }
    }
#pragma unroll
    for (int q = kW; q < kPieces; ++q) {
      const int m = 8 * (q - kW) + g;
      len[q] = m < rows ? K : 0;
      src[q] = p.a + bz * p.sa_b + static_cast<int64_t>(len[q] > 0 ? m0 + m : 0) * p.sa_m + 8 * t;
    }
  };

  // This lane's slot of piece `q` of chunk `u` in stage `s`.
  const uint32_t ring = smem_u32(gemv_smem) + (warp * kStages * kU * kPieces * 32 + lane) * 16;
  auto slot = [&](int s, int u, int q) { return ring + ((s * kU + u) * kPieces + q) * 32 * 16; };

  // The next round to copy (j: in this block's whole list; r: in its tile), into stage s. Past the
  // last, an empty group is committed: the count stays uniform.
  int issue_j = 0, issue_r = 0;
  auto issue = [&](int s) {
    if (issue_j < total) {
      if (issue_r == 0) set_tile(tile0 + issue_j / rpt);
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int k = (warp * kU + issue_r * stride + u) * kChunk;  // this lane's piece starts at k + 8t
        if constexpr (kNMajor) {  // B's rows k + 8t + 2q and + 1 into the two halves of slot q
#pragma unroll
          for (int q = 0; q < kW; ++q)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int kr = k + 8 * t + 2 * q + h;
              const int bytes = kr < K ? len[0] : 0;
              async_copy::cp8_u32(slot(s, u, q) + 8 * h, bytes > 0 ? static_cast<const void*>(src[0] + kr * p.sb_k)
                                                                   : src[0], bytes);
            }
        }
#pragma unroll
        for (int q = kNMajor ? kW : 0; q < kPieces; ++q) {
          const int valid = min(max(len[q] - k - 8 * t, 0), 8);
          async_copy::cp16_u32(slot(s, u, q), valid > 0 ? static_cast<const void*>(src[q] + k) : src[q],
                               valid * static_cast<int>(sizeof(T)));
        }
      }
      ++issue_j;
      issue_r = issue_r + 1 == rpt ? 0 : issue_r + 1;
    }
    async_copy::commit();
  };

  float* sums = reinterpret_cast<float*>(gemv_smem + gemv_mma::ring_bytes<kWarps, kU, kStages, kR, kTwo>());
  // [warp][W row group][block of 8 x rows][register][lane]
  auto part = [&](int w, int r, int half, int j, int l) -> float& {
    return sums[(((w * kR + r) * 2 + half) * 4 + j) * 32 + l];
  };

  float d[kR][2][4];
#pragma unroll
  for (int r = 0; r < kR; ++r)
#pragma unroll
    for (int j = 0; j < 4; ++j) d[r][0][j] = d[r][1][j] = 0.f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(s);
  int stage = 0, round = 0;
  for (int j = 0; j < total; ++j) {
    async_copy::wait<kStages - 2>();  // round j has landed (this lane's own copies)
    uint4 v[kU][kPieces];
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int q = 0; q < kPieces; ++q) v[u][q] = gemv_mma::lds128(slot(stage, u, q));
    // The stage read last round is free again: round j + kStages - 1 goes there.
    issue(stage == 0 ? kStages - 1 : stage - 1);
    stage = next_stage<kStages>(stage);
#pragma unroll
    for (int u = 0; u < kU; ++u) {
#pragma unroll
      for (int r = 0; r < kR; ++r) {
        uint32_t lo[4], hi[4];
        if constexpr (kNMajor) {
          // Slot q: rows 2q (words x, y) and 2q + 1 (z, w) of the lane's 4 columns, word r = columns 2r, 2r + 1.
          // lo takes rows 0-3, hi rows 4-7: a register pairs rows j, j + 1 of column 2r (prmt 0x5410, the low
          // halves) or 2r + 1 (0x7632, the high halves).
          auto regs = [&](uint32_t (&a)[4], const uint4& s01, const uint4& s23) {
            const uint32_t r0 = r == 0 ? s01.x : s01.y, r1 = r == 0 ? s01.z : s01.w;
            const uint32_t r2 = r == 0 ? s23.x : s23.y, r3 = r == 0 ? s23.z : s23.w;
            a[0] = __byte_perm(r0, r1, 0x5410), a[1] = __byte_perm(r0, r1, 0x7632);
            a[2] = __byte_perm(r2, r3, 0x5410), a[3] = __byte_perm(r2, r3, 0x7632);
          };
          regs(lo, v[u][0], v[u][1]);
          regs(hi, v[u][2], v[u][3]);
        } else {
          const uint4 &w0 = v[u][2 * r], &w1 = v[u][2 * r + 1];
          // elements 0-3 of the group's rows g, g + 8 (lo) and 4-7 (hi)
          lo[0] = w0.x, lo[1] = w1.x, lo[2] = w0.y, lo[3] = w1.y;
          hi[0] = w0.z, hi[1] = w1.z, hi[2] = w0.w, hi[3] = w1.w;
        }
        mma16816<T>(d[r][0], lo, v[u][kW].x, v[u][kW].y);
        mma16816<T>(d[r][0], hi, v[u][kW].z, v[u][kW].w);
        if constexpr (kTwo) {
          mma16816<T>(d[r][1], lo, v[u][kW + 1].x, v[u][kW + 1].y);
          mma16816<T>(d[r][1], hi, v[u][kW + 1].z, v[u][kW + 1].w);
        }
      }
    }
    if (++round < rpt) continue;

    // The tile's last round: its sums, added over the warps in warp order, through the epilogue.
    round = 0;
    int bz, n0, m0;
    locate(tile0 + j / rpt, bz, n0, m0);
#pragma unroll
    for (int r = 0; r < kR; ++r)
#pragma unroll
      for (int half = 0; half < (kTwo ? 2 : 1); ++half)
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          part(warp, r, half, q, lane) = d[r][half][q];
          d[r][half][q] = 0.f;
        }
    __syncthreads();
    // A thread's outputs i = threadIdx.x + it * kWarps * 32 (register q of lane l: C[m][n] for n = 16 r + l / 4
    // (+ 8 for q >= 2) (kNMajor: n = 4 (l / 4) + 2 r (+ 1)), m = 2 (l % 4) + q % 2 (+ 8 for half 1)). Their bias
    // is loaded first, all at once (bias_at).
    constexpr int kOuts = kR * (kTwo ? 2 : 1) * 4 * 32, kPer = kOuts / (kWarps * 32);
    static_assert(kOuts % (kWarps * 32) == 0, "gemv_mma: a block's threads share a tile's outputs evenly");
    struct Out {
      int l, q, half, r;  // lane l's register q of m16 half `half` and column group r
    };
    const auto out_of = [&](int it) {
      const int i = threadIdx.x + it * kWarps * 32;
      return Out{i % 32, (i / 32) % 4, (i / 128) % (kTwo ? 2 : 1), i / (kTwo ? 256 : 128)};
    };
    int om[kPer], on[kPer];
    float ob[kPer];
#pragma unroll
    for (int it = 0; it < kPer; ++it) {
      const Out o = out_of(it);
      on[it] = n0 + (kNMajor ? 4 * (o.l / 4) + 2 * o.r + (o.q >= 2 ? 1 : 0) : 16 * o.r + o.l / 4 + (o.q >= 2 ? 8 : 0));
      om[it] = m0 + 2 * (o.l % 4) + o.q % 2 + 8 * o.half;
      ob[it] = om[it] < p.M && on[it] < p.N ? bias_at(p, bz, om[it], on[it]) : 0.f;
    }
#pragma unroll
    for (int it = 0; it < kPer; ++it) {
      const Out o = out_of(it);
      if (om[it] >= p.M || on[it] >= p.N) continue;
      float sum = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += part(w, o.r, o.half, o.q, o.l);
      output_row(p, bz, om[it]).store_biased(on[it], sum, ob[it]);
    }
    __syncthreads();  // the sums are read: the next tile may write them
  }
  async_copy::wait<0>();
}

}  // namespace tilelab
