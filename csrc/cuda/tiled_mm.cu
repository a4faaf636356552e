// Host side of the CUDA implementation: validate, choose, launch.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <mutex>
#include <sstream>
#include <vector>

#include "../checks.h"
#include "configs.h"
#include "host.h"
#include "launch.h"

namespace tilelab {

const DeviceInfo& device_info(int index) {
  static std::mutex mu;
  static std::vector<std::unique_ptr<DeviceInfo>> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() <= static_cast<size_t>(index)) cache.resize(index + 1);
  if (!cache[index]) {
    const cudaDeviceProp* prop = at::cuda::getDeviceProperties(index);
    auto d = std::make_unique<DeviceInfo>();
    d->index = index;
    d->name = prop->name;
    d->sm = prop->major * 10 + prop->minor;
    d->num_sms = prop->multiProcessorCount;
    d->max_threads_per_block = prop->maxThreadsPerBlock;
    cache[index] = std::move(d);
  }
  return *cache[index];
}

void launch(const KernelConfig& cfg, const GemmProblem& p) {
  const int index = static_cast<int>(&cfg - kConfigs);
  switch (cfg.family) {
    case Family::Naive: return launch_naive(index, p);
    case Family::Tiled: return launch_tiled(index, p);
    case Family::Padded: return launch_padded(index, p);
    case Family::Blocked: return launch_blocked(index, p);
    case Family::TensorCore: return launch_tensorcore(index, p);
    case Family::Hopper: return launch_hopper(index, p);
  }
  TORCH_CHECK(false, "tilelab: no launcher for family of ", cfg.name);
}

Problem make_problem(int64_t M, int64_t N, int64_t K, c10::ScalarType dtype, bool a_row_major,
                     bool b_row_major) {
  Problem pr;
  pr.M = M;
  pr.N = N;
  pr.K = K;
  pr.dtype = dtype;
  pr.a_row_major = a_row_major;
  pr.b_row_major = b_row_major;
  pr.allow_tf32 = at::globalContext().allowTF32CuBLAS();
  return pr;
}

Choice choose_for(const Problem& pr, int device, std::optional<c10::string_view> variant,
                  std::optional<int64_t> tile) {
  std::optional<std::string_view> v;
  if (variant.has_value()) v = std::string_view(variant->data(), variant->size());
  return select_kernel(pr, device_info(device), v, tile);
}

GemmProblem gemm_problem(const Problem& pr, const Operand& a, const Operand& b, at::Tensor& out) {
  GemmProblem p;
  p.dtype = pr.dtype;
  p.a = a.t.data_ptr();
  p.b = b.t.data_ptr();
  p.c = out.data_ptr();
  p.M = static_cast<int>(pr.M);
  p.N = static_cast<int>(pr.N);
  p.K = static_cast<int>(pr.K);
  p.sa_m = a.s_row;
  p.sa_k = a.s_col;
  p.sb_k = b.s_row;
  p.sb_n = b.s_col;
  p.sc_m = pr.N;
  return p;
}

namespace {

struct Prepared {
  Operand a, b;
  Problem problem;
  Choice choice;
};

// The caller has checked the inputs (check_mm_inputs) and holds a device guard.
Prepared prepare(const at::Tensor& a, const at::Tensor& b, std::optional<c10::string_view> variant,
                 std::optional<int64_t> tile) {
  Prepared r{as_operand(a), as_operand(b), {}, {}};
  r.problem = make_problem(a.size(0), b.size(1), a.size(1), a.scalar_type(), r.a.row_major,
                           r.b.row_major);
  r.choice = choose_for(r.problem, a.get_device(), variant, tile);
  return r;
}

at::Tensor tiled_mm_cuda(const at::Tensor& a, const at::Tensor& b,
                         std::optional<c10::string_view> variant, std::optional<int64_t> tile) {
  check_mm_inputs(a, b, "tiled_mm");
  const c10::cuda::CUDAGuard guard(a.device());
  Prepared r = prepare(a, b, variant, tile);
  const Problem& pr = r.problem;
  at::Tensor out = at::empty({pr.M, pr.N}, a.options());
  if (pr.M == 0 || pr.N == 0) return out;
  if (pr.K == 0) return out.zero_();

  const GemmProblem p = gemm_problem(pr, r.a, r.b, out);
  launch(*r.choice.cfg, p);
  return out;
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    o += ch;
  }
  return o;
}

std::string explain_cuda(const at::Tensor& a, const at::Tensor& b,
                         std::optional<c10::string_view> variant, std::optional<int64_t> tile) {
  check_mm_inputs(a, b, "explain");
  const c10::cuda::CUDAGuard guard(a.device());
  Prepared r = prepare(a, b, variant, tile);
  const DeviceInfo& d = device_info(a.get_device());
  const KernelConfig& c = *r.choice.cfg;
  std::ostringstream os;
  os << "{\"kernel\": \"" << c.name << "\", \"variant\": \"" << c.variant << "\", \"tile\": " << c.tile
     << ", \"device\": \"cuda:" << d.index << "\", \"device_name\": \"" << json_escape(d.name)
     << "\", \"sm\": " << d.sm << ", \"num_sms\": " << d.num_sms << ", \"M\": " << r.problem.M
     << ", \"N\": " << r.problem.N << ", \"K\": " << r.problem.K << ", \"dtype\": \""
     << dtype_str(r.problem.dtype) << "\", \"a_layout\": \""
     << (r.a.row_major ? "row-major" : "col-major") << "\", \"b_layout\": \""
     << (r.b.row_major ? "row-major" : "col-major") << "\", \"reason\": \""
     << json_escape(r.choice.reason) << "\"}";
  return os.str();
}

}  // namespace

TORCH_LIBRARY_IMPL(tilelab, CUDA, m) {
  m.impl("tiled_mm", &tiled_mm_cuda);
  m.impl("_explain", &explain_cuda);
}

}  // namespace tilelab
