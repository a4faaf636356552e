// The throughput ceiling of warp-level mma.sync on this GPU: how many TFLOP/s
// the instruction itself can deliver when nothing else runs (no memory, no
// shared memory, no address math). It bounds what the `tensorcore` family
// (mma.sync + ldmatrix + cp.async) can reach; cuBLAS on Hopper uses wgmma,
// which this does not measure.
//
// Every warp keeps kAcc independent accumulators (so the pipe never waits on
// its own result) and issues kAcc mma per loop iteration on register operands.
// Grid: blocks_per_sm x SMs blocks of warps_per_block warps; swept below from
// the tensorcore kernels' occupancy (8 warps/SM) up to 32 warps/SM.
//
// Standalone (no torch, no extension). Build and run from the repository root,
// with -arch set to the GPU's compute capability (sm_90: H100/H200; sm_80: A100):
//   nvcc -O3 -arch=sm_90 -o /tmp/mma_ceiling benchmarks/tools/mma_ceiling.cu && /tmp/mma_ceiling
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#define CHECK(x)                                                                          \
  do {                                                                                    \
    cudaError_t e = (x);                                                                  \
    if (e != cudaSuccess) {                                                               \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e), __FILE__, __LINE__); \
      return 1;                                                                           \
    }                                                                                     \
  } while (0)

constexpr int kAcc = 16;

enum Kind { kBF16 = 0, kF16 = 1, kTF32 = 2 };

template <int kKind>
__device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  if constexpr (kKind == kBF16) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else if constexpr (kKind == kF16) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

template <int kKind>
__global__ void mma_loop(int iters, float* out, uint32_t seed) {
  uint32_t a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = (seed * (threadIdx.x + 1) * (i + 3)) & 0x3c003c00u;  // small finite values
  for (int i = 0; i < 2; ++i) b[i] = (seed * (threadIdx.x + 7) * (i + 5)) & 0x3c003c00u;
  float acc[kAcc][4] = {};
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int j = 0; j < kAcc; ++j) mma<kKind>(acc[j], a, b);
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < kAcc; ++j) s += acc[j][0] + acc[j][1] + acc[j][2] + acc[j][3];
  if (s == 12345.678f) out[0] = s;  // never true; keeps the MMAs alive
}

template <int kKind>
int run(const char* name, int sms, int blocks_per_sm, int warps_per_block, float* out) {
  const int iters = 8192;
  const int blocks = sms * blocks_per_sm, threads = 32 * warps_per_block;
  mma_loop<kKind><<<blocks, threads>>>(64, out, 1u);  // warm-up
  CHECK(cudaGetLastError());
  cudaEvent_t t0, t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  float best = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    CHECK(cudaEventRecord(t0));
    mma_loop<kKind><<<blocks, threads>>>(iters, out, 1u);
    CHECK(cudaEventRecord(t1));
    CHECK(cudaEventSynchronize(t1));
    float ms = 0.f;
    CHECK(cudaEventElapsedTime(&ms, t0, t1));
    best = ms < best ? ms : best;
  }
  const double flop_per_mma = kKind == kTF32 ? 2.0 * 16 * 8 * 8 : 2.0 * 16 * 8 * 16;
  const double flops = flop_per_mma * kAcc * iters * (double)blocks * warps_per_block;
  std::printf("%-5s  warps/SM %2d (%d x %d)  %8.3f ms  %7.1f TFLOP/s\n", name, blocks_per_sm * warps_per_block,
              blocks_per_sm, warps_per_block, best, flops / (best * 1e-3) / 1e12);
  return 0;
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  int clock_khz = 0;
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  std::printf("# %s, %d SMs, max SM clock %.0f MHz; mma.sync with %d independent accumulators per warp\n",
              prop.name, prop.multiProcessorCount, clock_khz / 1e3, kAcc);
  float* out = nullptr;
  CHECK(cudaMalloc(&out, sizeof(float)));
  const int sms = prop.multiProcessorCount;
  const int cfg[][2] = {{1, 4}, {1, 8}, {2, 8}, {4, 8}};  // blocks/SM x warps/block
  for (auto& c : cfg)
    if (run<kBF16>("bf16", sms, c[0], c[1], out)) return 1;
  for (auto& c : cfg)
    if (run<kF16>("fp16", sms, c[0], c[1], out)) return 1;
  for (auto& c : cfg)
    if (run<kTF32>("tf32", sms, c[0], c[1], out)) return 1;
  CHECK(cudaFree(out));
  return 0;
}
