// Times every registered variant against cublasSgemm (default math: IEEE fp32,
// no TF32) in interleaved rounds, after checking each against cuBLAS's result
// with the output poisoned (NaN) first: one off by more than 1e-4 of the largest
// output is reported and the program exits 1. Usage: variants M,N,K [M,N,K ...]
// VARIANTS_CHECK_ONLY=1: the check alone, one launch of each variant (for ncu).
// Built and run by run.sh (see its usage).
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "variants.h"

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1); } } while (0)

__global__ void fill(float* x, size_t n, unsigned seed) {
  for (size_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    unsigned h = unsigned(i) * 2654435761u ^ seed;
    h ^= h >> 13; h *= 0x5bd1e995u; h ^= h >> 15;
    x[i] = (h & 0xffffff) / float(0x1000000) * 2.f - 1.f;
  }
}

static cublasHandle_t handle;
static void cublas_launch(const float* a, const float* b, float* c, int M, int N, int K) {
  const float one = 1.f, zero = 0.f;
  // Row-major C = A B is column-major C^T = B^T A^T.
  cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, N, M, K, &one, b, N, a, K, &zero, c, N);
}

int main(int argc, char** argv) {
  cublasCreate(&handle);
  cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);
  std::vector<Variant> vs = registry();
  std::sort(vs.begin(), vs.end(), [](const Variant& x, const Variant& y) { return x.name < y.name; });
  vs.insert(vs.begin(), Variant{"cublas", cublas_launch});
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  printf("# %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  // fp32 sums of K products in another order than cuBLAS's differ by ~K * 2^-24 of the largest output.
  const double kTolerance = 1e-4;
  bool failed = false;
  for (int ai = 1; ai < argc; ++ai) {
    int M, N, K;
    if (sscanf(argv[ai], "%d,%d,%d", &M, &N, &K) != 3 || M < 1 || N < 1 || K < 1) {
      printf("bad shape %s: expected M,N,K\n", argv[ai]);
      return 2;
    }
    if (N % 4 != 0) {  // the variants copy row-major B with 16-byte copies (variant.cu)
      printf("bad shape %s: N must be a multiple of 4\n", argv[ai]);
      return 2;
    }
    float *a, *b, *c, *ref;
    CK(cudaMalloc(&a, sizeof(float) * M * K)); CK(cudaMalloc(&b, sizeof(float) * K * N));
    CK(cudaMalloc(&c, sizeof(float) * M * N)); CK(cudaMalloc(&ref, sizeof(float) * M * N));
    fill<<<1024, 256>>>(a, size_t(M) * K, 1); fill<<<1024, 256>>>(b, size_t(K) * N, 2);
    cublas_launch(a, b, ref, M, N, K);
    CK(cudaDeviceSynchronize());
    std::vector<float> hr(size_t(M) * N), hc(size_t(M) * N);
    CK(cudaMemcpy(hr.data(), ref, sizeof(float) * M * N, cudaMemcpyDeviceToHost));
    double refmax = 0; for (float v : hr) refmax = std::max(refmax, double(std::fabs(v)));
    std::vector<double> err(vs.size(), 0);
    for (size_t v = 1; v < vs.size(); ++v) {
      CK(cudaMemset(c, 0xff, sizeof(float) * M * N));  // NaN
      vs[v].fn(a, b, c, M, N, K);
      CK(cudaGetLastError()); CK(cudaDeviceSynchronize());
      CK(cudaMemcpy(hc.data(), c, sizeof(float) * M * N, cudaMemcpyDeviceToHost));
      double e = 0;
      for (size_t i = 0; i < hc.size(); ++i) {
        double d = std::fabs(double(hc[i]) - hr[i]);
        if (!(d <= 1e30)) { e = INFINITY; break; }
        e = std::max(e, d);
      }
      err[v] = e / refmax;
      if (!(err[v] <= kTolerance)) {
        printf("%s: %dx%dx%d rel_err %.1e against cuBLAS (tolerance %.0e)\n", vs[v].name.c_str(), M, N, K, err[v],
               kTolerance);
        failed = true;
      }
    }
    if (getenv("VARIANTS_CHECK_ONLY")) {  // one launch per variant (for ncu), no timing
      for (size_t v = 1; v < vs.size(); ++v) printf("%-28s rel_err %.1e\n", vs[v].name.c_str(), err[v]);
      continue;
    }
    const double flop = 2.0 * M * N * K;
    const int reps = std::max(1, int(2e11 / flop)), rounds = 12;
    std::vector<std::vector<float>> t(vs.size());
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (size_t v = 0; v < vs.size(); ++v) for (int w = 0; w < 3; ++w) vs[v].fn(a, b, c, M, N, K);
    for (int r = 0; r < rounds; ++r)
      for (size_t v = 0; v < vs.size(); ++v) {
        cudaEventRecord(e0);
        for (int i = 0; i < reps; ++i) vs[v].fn(a, b, c, M, N, K);
        cudaEventRecord(e1); cudaEventSynchronize(e1);
        float ms; cudaEventElapsedTime(&ms, e0, e1); t[v].push_back(ms / reps);
      }
    CK(cudaGetLastError());
    std::vector<double> med(vs.size());
    for (size_t v = 0; v < vs.size(); ++v) { auto x = t[v]; std::sort(x.begin(), x.end()); med[v] = x[x.size() / 2]; }
    printf("\n%dx%dx%d (%d launches x %d rounds, median)\n%-28s %9s %8s %7s %9s\n", M, N, K, reps, rounds,
           "variant", "ms", "TFLOP/s", "ratio", "rel_err");
    for (size_t v = 0; v < vs.size(); ++v)
      printf("%-28s %9.4f %8.2f %7.3f %9.1e\n", vs[v].name.c_str(), med[v], flop / med[v] / 1e9, med[0] / med[v], err[v]);
    cudaFree(a); cudaFree(b); cudaFree(c); cudaFree(ref);
  }
  if (failed) printf("FAILED: a variant's output differs from cuBLAS's (above)\n");
  return failed ? 1 : 0;
}
