// The second pass of split-K (scheduler.cuh): C = act(sum over splits of the
// fp32 slabs + bias), the slabs added in a fixed order, so the result does not
// depend on which block finished first (no atomics): the same inputs give
// bitwise the same output every call. The order is split order 0, 1, ... or,
// where few outputs meet many slices, `lanes` threads (a power of two up to a
// warp) per output each add a contiguous run of slices in split order and a
// fixed butterfly of shuffles adds their sums (reduce_lanes). The bias, the
// activation and the rounding to the output dtype go through the common
// epilogue (OutputRow), once.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>

#include <atomic>

#include "aligned_copy.h"
#include "kernels/epilogue.cuh"
#include "kernels/scheduler.cuh"
#include "launch.h"
#include "split_reduce.h"

namespace tilelab {
namespace {

constexpr int kReduceThreads = 256;

// `lanes` adjacent threads (a power of two dividing the warp) per kVec consecutive columns of one row (kVec = 4
// when N % 4 == 0: float4 loads of each slab); lane l adds the slices [l * per, (l + 1) * per) in order.
template <typename T, int kVec>
__global__ void __launch_bounds__(kReduceThreads) split_reduce_kernel(GemmArgs<T> p, const float* __restrict__ slabs,
                                                                      int splits, int lanes) {
  const int64_t groups_per_row = (p.N + kVec - 1) / kVec;
  const int64_t rows = static_cast<int64_t>(p.batch) * p.M;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * kReduceThreads + threadIdx.x;
  const int64_t i = t / lanes;
  const int lane = static_cast<int>(t % lanes);
  // Every lane of a warp takes part in the shuffles below: a thread past the outputs adds nothing.
  const bool valid = i < rows * groups_per_row;
  if (lanes == 1 && !valid) return;
  const int per = (splits + lanes - 1) / lanes;
  const int first = min(splits, lane * per), count = min(splits, first + per) - first;
  const int64_t row = valid ? i / groups_per_row : 0;
  const int n = valid ? static_cast<int>(i % groups_per_row) * kVec : 0;
  const int bz = static_cast<int>(row / p.M), m = static_cast<int>(row % p.M);
  const int64_t slab = rows * p.N;  // elements of one split's (batch, M, N) slab
  const float* src = slabs + first * slab + row * p.N + n;
  float acc[kVec] = {};
  // kBatch slabs' loads in flight before their adds, which stay in split order: with few outputs and many
  // slices (K-heavy products: 64 x 64 outputs over 114 slices) one load at a time left each thread a chain
  // of L2 round trips.
  constexpr int kBatch = 8;
  auto add = [&](int count) {
    float v[kBatch][kVec];
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      if (j < count) {
        if constexpr (kVec == 4) {
          const float4 q = *reinterpret_cast<const float4*>(src + j * slab);
          v[j][0] = q.x, v[j][1] = q.y, v[j][2] = q.z, v[j][3] = q.w;
        } else {
          v[j][0] = src[j * slab];
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j)
      if (j < count)
#pragma unroll
        for (int e = 0; e < kVec; ++e) acc[e] += v[j][e];
    src += count * slab;
  };
  if (valid) {
    int s = 0;
    for (; s + kBatch <= count; s += kBatch) add(kBatch);
    if (s < count) add(count - s);
  }
  // The lanes' sums: lane l takes lane l ^ 1's, then l ^ 2's, ... (the same adds in the same order every call).
  for (int off = 1; off < lanes; off <<= 1)
#pragma unroll
    for (int e = 0; e < kVec; ++e) acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], off);
  if (!valid || lane != 0) return;
  const OutputRow<T> out = output_row(p, bz, m);
#pragma unroll
  for (int j = 0; j < kVec; ++j)
    if (n + j < p.N) out.store(n + j, acc[j]);
}

// Threads per output group of the second pass: one, or where the outputs are too few to fill the GPU with
// threads (a K-heavy product's 64 x 64 outputs over a hundred slices), up to a warp, each adding at least
// kMinLaneSlices slices, so that a thread's chain of L2 round trips is a few batches, not one per 8 slices.
constexpr int kMinLaneSlices = 4;
int reduce_lanes(int64_t groups, int64_t splits) {
  const int64_t threads = static_cast<int64_t>(at::cuda::getCurrentDeviceProperties()->multiProcessorCount) * 1024;
  int lanes = 1;
  while (lanes < 32 && groups * lanes * 2 <= threads && (splits + 2 * lanes - 1) / (2 * lanes) >= kMinLaneSlices)
    lanes *= 2;
  return lanes;
}

template <typename T>
void launch_reduce(const GemmProblem& p, const float* slabs, int splits, cudaStream_t stream) {
  GemmProblem q = p;
  q.partial = nullptr;
  q.splits = 1;
  const GemmArgs<T> args = device_args<T>(q);
  const bool vec = p.N % 4 == 0;  // slabs are contiguous (batch, M, N) fp32: 16-byte rows when N % 4 == 0
  const int64_t groups = p.batch * p.M * ((p.N + (vec ? 3 : 0)) / (vec ? 4 : 1));
  const int lanes = reduce_lanes(groups, splits);
  const dim3 grid(static_cast<unsigned>((groups * lanes + kReduceThreads - 1) / kReduceThreads));
  if (vec) split_reduce_kernel<T, 4><<<grid, kReduceThreads, 0, stream>>>(args, slabs, splits, lanes);
  else split_reduce_kernel<T, 1><<<grid, kReduceThreads, 0, stream>>>(args, slabs, splits, lanes);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

// Which way adds the slices. The second pass is a launch plus the slices' kernel writing s fp32 slabs of the whole
// output and the pass reading them: ~2 us + 8 s M N bytes at ~6 TB/s (H200, bf16, dY^T X 768x12608x768 in 3 slices
// of 128x128 tiles: the pass 4.3 us of 31.2). The kernel's way costs a memset of the tiles' counters (~0.8 us) and,
// per slice past the first, a chain of latencies (the slice's stores, its fence, the count, slice 0's poll: ~1 us)
// plus slice 0's block reading the tile at ~100 B/ns. The latency was first put at ~3 us, which kept every 64- and
// 128-row tile on the second pass (or on a cluster, below); each way forced on every split pick of the suites and
// the models (H200, bf16/fp16/TF32, kernel durations over a CUDA graph, W cold) put it nearer 1 us: with it the
// kernel's way took 30 products, all faster (1304.0 -> 1242.7 us in all), e.g. (us, in the kernel / before) dY^T X
// 768x4096x768 in 3 slices of 128x128 15.62 / 17.23 (second pass), 768x12608x768 30.44 / 33.30, dY @ W 32x14336x4096
// in 2 of 64x64 32.87 / 35.63 (cluster), TF32 x @ W.t() 128x4096x4096 in 2 of 64x128 24.61 / 27.15 (second pass). At
// 0.4 us it also took products where it measured slower: 128x64 tiles in 4 slices (x @ W.t() 128x5632x2048 13.47 /
// 12.79) and 128x128 in 3 over a long K (dY @ W 128x32000x4096 79.97 / 76.95). Earlier, H200 2304x12608x768 in 2
// slices of 128x256 69.1 / 75.1 us, 768x12608x768 in 7 slices of 128x256 35.4 / 31.3.
constexpr double kSecondPassNs = 2000, kSecondPassBytesPerNs = 6000, kHandOverZeroNs = 800,
                 kHandOverSliceNs = 1000, kHandOverBytesPerNs = 100;
// A 64x64 half tile's 16 KB of sums hand over faster: forced through global memory, its slices cost ~0.25 us each
// (H200, bf16, us, in the kernel / through a cluster / by the second pass: x @ W.t() 128x2304x768 in 4 slices
// 7.22 / 7.56 / 7.73, 128x4096x1024 in 4 8.55 / 8.56 / 9.46, 128x3072x768 in 5 7.82 / 7.81 / 8.08; in 6 the
// second pass about level, dY @ W 64x2304x768 7.19 / - / 7.10), where ~1 us kept them off global memory. At 0.3
// us the 4-slice products went through global memory (picks_ab, 7 products: 57.3 -> 56.3 us, 3 faster by more
// than 2%, none slower; dY @ W 128x2304x768 7.53 -> 7.20, cuBLAS 5.80) and the estimate tied 128x3072x768's 5
// slices with the second pass; at 0.25 they go too.
//
// A third way, the 64-row tiles' slices added through a cluster of blocks (distributed shared memory: each 16-row
// warp's owner block read the others' copies of its sums; 0a6dfe3) measured level with global memory in 4 and 5
// slices and behind it in 2 (dY @ W 32x28672x4096 60.48 / 66.80 us, x @ W.t() 128x2048x2048 7.98 / 8.74), lost in
// 6-8 and with 128x64 tiles, and cost 16 kernel instantiations: removed.
constexpr double kSmallTileBytes = 16384, kHandOverSmallSliceNs = 250;

// The chooser's estimate of a second pass (est_ns, chooser.cpp, decides with it whether to split): a launch plus
// writing and reading s fp32 slabs of the output at ~3 TB/s; higher than kSecondPassNs and kSecondPassBytesPerNs above,
// which compare the kernel's way with the second pass by kernel durations alone.
constexpr double kReduceLaunchNs = 3000, kReduceBytesPerNs = 3000;

// set_split_reduce_override: 0 by cost, 1 in the kernel through global memory where it can, 2 the second pass.
std::atomic<int> g_reduce_override{0};

void set_split_reduce_override(const std::string& how) {
  TORCH_CHECK(how.empty() || how == "kernel" || how == "pass",
              "tilelab::_set_split_reduce: how must be 'kernel', 'pass' or None (by cost), got '", how, "'");
  g_reduce_override.store(how.empty() ? 0 : how == "kernel" ? 1 : 2);
}

bool split_reduce_forced() { return g_reduce_override.load(std::memory_order_relaxed) != 0; }

at::Tensor fp32_workspace(int64_t floats) {
  return at::empty({floats}, at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, at::cuda::current_device()));
}

double second_pass_est_ns(const GemmProblem& p, int64_t splits) {
  return kReduceLaunchNs + 2.0 * splits * p.batch * p.M * p.N * 4 / kReduceBytesPerNs;
}

namespace {
// Every slice a block of one wave (the hopper kernel's persistent grid holds all of its work tiles) and C through
// the TMA-store epilogue: the kernel can add the slices itself.
bool kernel_can_add(const KernelConfig& row, const GemmProblem& p, int64_t splits, int64_t sms) {
  return row.family == Family::Hopper &&
         PersistentGrouped<kGroupM>::count_of(p.M, p.N, row.bm, row.bn, splits, p.batch) <= sms &&
         hopper_fuses_activation(p);
}

// The kernel's way through global memory by the measured costs above (the hook aside), for tiles at least half
// full of rows: the hand-over moves whole tiles, the second pass only the output's rows, and with fewer rows the
// second pass measured ahead (H200, TF32 x @ W.t() in 2 slices of 64x128, kernel durations, W cold, us, in the
// kernel / by the second pass: 2 rows x 4096x4096 22.43 / 21.89, 16 rows 22.94 / 22.74, 16 rows x 4096x6144
// 31.62 / 31.19; H100, per call under CUDA graphs, 16 rows x 4096x4096 32.3 / 29.6; from 32 rows the kernel's:
// 32x4096x6144 31.02 / 32.25, 128x4096x4096 24.61 / 27.15).
double hand_over_ns(const KernelConfig& row, int64_t splits) {
  const double tile_bytes = 4.0 * row.bm * row.bn;
  const double slice_ns = tile_bytes <= kSmallTileBytes ? kHandOverSmallSliceNs : kHandOverSliceNs;
  return kHandOverZeroNs + (splits - 1.0) * (slice_ns + tile_bytes / kHandOverBytesPerNs);
}

bool global_cheaper(const KernelConfig& row, const GemmProblem& p, int64_t splits) {
  if (2 * p.M < row.bm) return false;
  const double second_pass = kSecondPassNs + 2.0 * splits * p.batch * p.M * p.N * 4 / kSecondPassBytesPerNs;
  return hand_over_ns(row, splits) < second_pass;
}

}  // namespace

SplitWay split_reduce_way(const KernelConfig& row, const GemmProblem& p, int64_t splits, int64_t sms) {
  const int forced = g_reduce_override.load(std::memory_order_relaxed);  // 0 by cost, 1 kernel, 2 pass
  if (forced == 2 || !kernel_can_add(row, p, splits, sms)) return SplitWay::Pass;
  return forced == 1 || global_cheaper(row, p, splits) ? SplitWay::Kernel : SplitWay::Pass;
}

double reduce_est_ns(const KernelConfig& row, const GemmProblem& p, int64_t splits, int64_t sms) {
  return split_reduce_way(row, p, splits, sms) == SplitWay::Kernel ? hand_over_ns(row, splits)
                                                                   : second_pass_est_ns(p, splits);
}

void split_k_gemm(const KernelConfig& row, const GemmProblem& p, SplitWay way) {
  TORCH_CHECK(p.splits > 1 && p.dtype != at::kDouble, "tilelab: split-K needs splits > 1 and a float/half dtype");
  if (way == SplitWay::Kernel) {
    launch(row, p);  // the kernel adds the slices, then applies bias and activation once
    return;
  }
  const at::Tensor slabs = fp32_workspace(p.splits * p.batch * p.M * p.N);
  GemmProblem slices = p;  // raw sums: bias and activation wait for the reduction
  slices.partial = slabs.data_ptr<float>();
  slices.bias = nullptr;
  slices.act = Activation::None;
  launch(row, slices);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  switch (p.dtype) {
    case at::kFloat: launch_reduce<float>(p, slabs.data_ptr<float>(), p.splits, stream); break;
    case at::kHalf: launch_reduce<c10::Half>(p, slabs.data_ptr<float>(), p.splits, stream); break;
    case at::kBFloat16: launch_reduce<c10::BFloat16>(p, slabs.data_ptr<float>(), p.splits, stream); break;
    default: TORCH_CHECK(false, "tilelab: split-K: unsupported dtype ", dtype_str(p.dtype));
  }
}

}  // namespace tilelab
