// The CUDA host path: validate once, build the one problem, choose, launch.
#include "host.h"

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <array>
#include <limits>
#include <mutex>
#include <sstream>

#include "../gated.h"
#include "../gemm.h"
#include "chooser.h"
#include "launch.h"
#include "split_reduce.h"

namespace tilelab {
namespace {

// Cached properties of CUDA device `index`, queried once (std::call_once: after that, one atomic load a call).
constexpr int kMaxDevices = 64;
const DeviceInfo& device_info(int index) {
  TORCH_CHECK(index >= 0 && index < kMaxDevices, "tilelab: CUDA device index ", index, " out of range (at most ",
              kMaxDevices, " devices)");
  static std::array<DeviceInfo, kMaxDevices> infos;
  static std::array<std::once_flag, kMaxDevices> queried;
  std::call_once(queried[index], [index] {
    const cudaDeviceProp* prop = at::cuda::getDeviceProperties(index);
    DeviceInfo& d = infos[index];
    d.index = index;
    d.name = prop->name;
    d.sm = prop->major * 10 + prop->minor;
    d.num_sms = prop->multiProcessorCount;
    d.max_threads_per_block = prop->maxThreadsPerBlock;
    d.max_smem_per_block = static_cast<int>(prop->sharedMemPerBlockOptin);
    int clock_khz = 0, bus_bits = 0;
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, index) == cudaSuccess &&
        cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, index) == cudaSuccess) {
      d.mem_bytes_per_ns = 2.0 * clock_khz * 1e3 * (bus_bits / 8) / 1e9;  // double data rate
    } else {
      (void)cudaGetLastError();  // unknown: the chooser assumes an H200's
    }
  });
  return infos[index];
}

// A GPU described by the caller (the explain functions on CPU tensors): compute capability sm (major*10 + minor),
// num_sms SMs, mem_gbps of DRAM bandwidth (unset: the chooser assumes an H200's); `op` names the caller in errors.
DeviceInfo described_device(const char* op, int64_t sm, int64_t num_sms, std::optional<double> mem_gbps) {
  TORCH_CHECK(sm >= 10 && sm < 1000 && num_sms >= 1 && num_sms <= 100000, "tilelab::", op,
              ": sm is major*10 + minor (e.g. 90) and num_sms >= 1, got sm=", sm, ", num_sms=", num_sms);
  TORCH_CHECK(!mem_gbps || (*mem_gbps > 0 && *mem_gbps < 1e6), "tilelab::", op,
              ": mem_gbps is the DRAM bandwidth in GB/s (e.g. 3352), got ", *mem_gbps);
  DeviceInfo d;
  d.index = -1;
  d.name = "compute capability " + std::to_string(sm / 10) + "." + std::to_string(sm % 10) + ", " +
           std::to_string(num_sms) + " SMs";
  d.sm = static_cast<int>(sm);
  d.num_sms = static_cast<int>(num_sms);
  d.mem_bytes_per_ns = mem_gbps.value_or(0.0);  // GB/s = B/ns
  return d;
}

Choice choose_for(const GemmProblem& p, const DeviceInfo& d, std::optional<c10::string_view> variant,
                  std::optional<int64_t> tile) {
  return select_kernel(p, d, view_of(variant), tile);
}

// CUDA's limit on gridDim.z: larger batches run in chunks of this many.
constexpr int64_t kMaxGridZ = 65535;

std::string json_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    if (ch == '"' || ch == '\\') o += '\\';
    o += ch;
  }
  return o;
}

const char* layout_name(const Operand& o, bool is_a) {
  // A k-contiguous A is row-major, a k-contiguous B column-major.
  return o.k_contiguous == is_a ? "row-major" : "col-major";
}

}  // namespace

namespace {
// Runs call's product on the chosen row into call.out: split-K, batches past the grid's 65535 layers in
// chunks, and the activation after the tile families' register epilogues.
void run_gemm(GemmCall& call, const Choice& choice) {
  if (finish_without_product(call)) return;
  GemmProblem p = call.problem;
  p.splits = choice.splits;
  // The tile families' register epilogues take no activation: they store
  // act-free, then one pass applies it (launch.h, applies_activation).
  const bool act_after = p.act != Activation::None && !applies_activation(choice.cfg->family, p);
  if (act_after) p.act = Activation::None;
  const int64_t B = p.batch, esize = static_cast<int64_t>(c10::elementSize(p.dtype));
  const auto* a0 = static_cast<const char*>(p.a.data);
  const auto* b0 = static_cast<const char*>(p.b.data);
  auto* c0 = static_cast<char*>(p.c);
  for (int64_t z0 = 0; z0 < B; z0 += kMaxGridZ) {
    p.batch = std::min(kMaxGridZ, B - z0);
    p.a.data = a0 + z0 * p.a.s_batch * esize;
    p.b.data = b0 + z0 * p.b.s_batch * esize;
    p.c = c0 + z0 * p.sc_b * esize;
    if (p.splits > 1) split_k_gemm(*choice.cfg, p, choice.reduce);
    else launch(*choice.cfg, p);
  }
  if (act_after) torch_activation(call.out, call.problem.act, /*in_place=*/true);
}
}  // namespace

at::Tensor gemm_cuda(const char* op, const at::Tensor* bias, const at::Tensor& a, const at::Tensor& b,
                     bool batched, Activation act, std::optional<c10::string_view> variant,
                     std::optional<int64_t> tile) {
  check_gemm_inputs(op, bias, a, b, batched);
  const c10::cuda::CUDAGuard guard(a.device());
  GemmCall call = make_gemm(bias, a, b, act);
  run_gemm(call, choose_for(call.problem, device_info(a.get_device()), variant, tile));
  return call.out;
}

std::tuple<at::Tensor, at::Tensor> linear_pre_cuda(const at::Tensor& x, const at::Tensor& weight,
                                                   const std::optional<at::Tensor>& bias,
                                                   c10::string_view activation, std::optional<c10::string_view> variant,
                                                   std::optional<int64_t> tile) {
  const Activation act = parse_activation("_tiled_linear_pre", activation);
  const at::Tensor* b = bias_ptr(bias);
  check_linear_inputs(x, weight, b);
  const at::Tensor x2 = linear_rows(x);
  check_gemm_inputs("tiled_linear", b, x2, weight.t(), false);
  const c10::cuda::CUDAGuard guard(x.device());
  GemmCall call = make_gemm(b, x2, weight.t(), act);
  const DeviceInfo& dev = device_info(x.get_device());
  const Choice choice = choose_for(call.problem, dev, variant, tile);
  GemmProblem p = call.problem;
  p.splits = choice.splits;
  const bool empty = p.batch == 0 || p.M == 0 || p.N == 0 || p.K == 0;
  const int64_t N = weight.size(0);
  if (act == Activation::None || empty || !hopper_aux_ok(*choice.cfg, p)) {
    // y as tiled_linear without an activation computes it (its own choice of row), then torch's activation into
    // a new tensor (GemmOps::linear_pre's composition, on the call already made and checked).
    call.problem.act = Activation::None;
    run_gemm(call, choose_for(call.problem, dev, variant, tile));
    return {linear_output(torch_activation(call.out, act, /*in_place=*/false), x, N), linear_output(call.out, x, N)};
  }
  const at::Tensor pre = at::empty_like(call.out);
  p.aux = pre.data_ptr();
  launch(*choice.cfg, p);  // one slice of K (hopper_aux_ok), a batch of one
  return {linear_output(call.out, x, N), linear_output(pre, x, N)};
}

namespace {
// The dimensions a problem's bias varies along (after broadcasting to (M, N)): "n" (F.linear's, one value a
// column), "m", "mn", "scalar"; null without one.
std::string bias_json(const GemmProblem& p) {
  if (p.bias == nullptr) return "null";
  const bool m = p.sbias_m != 0, n = p.sbias_n != 0;
  return m && n ? "\"mn\"" : m ? "\"m\"" : n ? "\"n\"" : "\"scalar\"";
}

// The choice for p on d as explain()'s JSON; `device` names it ("cuda:0").
std::string explain_json(const GemmProblem& p, const Choice& choice, const DeviceInfo& d, const std::string& device) {
  const KernelConfig& c = *choice.cfg;
  std::ostringstream os;
  os << "{\"kernel\": \"" << c.name << "\", \"variant\": \"" << c.variant << "\", \"tile\": " << c.tile
     << ", \"device\": \"" << device << "\", \"device_name\": \"" << json_escape(d.name) << "\", \"sm\": " << d.sm
     << ", \"num_sms\": " << d.num_sms << ", \"mem_gbps\": " << d.mem_bytes_per_ns << ", \"batch\": " << p.batch
     << ", \"M\": " << p.M << ", \"N\": " << p.N << ", \"K\": " << p.K
     << ", \"dtype\": \"" << dtype_str(p.dtype) << "\", \"a_layout\": \"" << layout_name(p.a, true)
     << "\", \"b_layout\": \"" << layout_name(p.b, false) << "\", \"bias\": "
     << bias_json(p) << ", \"activation\": "
     << (p.act == Activation::None ? std::string("null") : "\"" + std::string(activation_name(p.act)) + "\"")
     << ", \"split_k\": " << choice.splits
     << ", \"split_reduce\": "
     << (choice.splits <= 1 ? "null" : choice.reduce == SplitWay::Kernel ? "\"kernel\"" : "\"pass\"")
     << ", \"reason\": \"" << json_escape(choice.reason)
     << "\"}";
  return os.str();
}
}  // namespace

std::string explain_cuda(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias,
                         std::optional<c10::string_view> activation, std::optional<c10::string_view> variant,
                         std::optional<int64_t> tile) {
  const Activation act = check_explain_inputs("explain", bias_ptr(bias), activation, a, b);
  const c10::cuda::CUDAGuard guard(a.device());
  const GemmCall call = make_gemm(bias_ptr(bias), a, b, act);
  const DeviceInfo& d = device_info(a.get_device());
  return explain_json(call.problem, choose_for(call.problem, d, variant, tile), d, d.label());
}

std::string explain_described(const at::Tensor& a, const at::Tensor& b, int64_t sm, int64_t num_sms,
                              const std::optional<at::Tensor>& bias, std::optional<c10::string_view> activation,
                              std::optional<c10::string_view> variant, std::optional<int64_t> tile,
                              std::optional<double> mem_gbps) {
  const Activation act = check_explain_inputs("_explain_described", bias_ptr(bias), activation, a, b);
  TORCH_CHECK(a.device().is_cpu() && b.device().is_cpu(),
              "tilelab::_explain_described: takes CPU tensors (their shapes, strides, dtype and alignment describe "
              "the problem); for a CUDA tensor use explain()");
  const DeviceInfo d = described_device("_explain_described", sm, num_sms, mem_gbps);
  const GemmCall call = make_gemm(bias_ptr(bias), a, b, act);
  return explain_json(call.problem, choose_for(call.problem, d, variant, tile), d, "described");
}

// ---------------------------------------------------------------- tiled_gated_linear (gated.h)
namespace {
// The fused kernel's tile rows for x2 (M, K) and the weights (N, K) on d (64 or 128; 0: composed), and why.
struct GatedPlan {
  int bm = 0;
  std::string why;
};

// k-contiguous rows of their own (no broadcast row, stride 0), 16-byte aligned: what a TMA map reads in place.
bool rows16(const at::Tensor& t) {
  return t.stride(1) == 1 && (t.size(0) == 1 || t.stride(0) >= t.size(1)) &&
         rows_aligned16(t.data_ptr(), t.stride(0), 0, 1, t.element_size());
}

GatedPlan gated_plan(const at::Tensor& x2, const at::Tensor& w_gate, const at::Tensor& w_up, const DeviceInfo& d) {
  const int64_t M = x2.size(0), K = x2.size(1), N = w_gate.size(0);
  const auto composed = [](std::string why) { return GatedPlan{0, "composed (two tiled_linear calls): " + why}; };
  if (!kBuiltForSm90a) return composed("the fused kernel needs the sm_90a target (TORCH_CUDA_ARCH_LIST=9.0)");
  if (d.sm != 90) return composed("the fused kernel (wgmma + TMA) runs only on compute capability 9.0");
  if (x2.scalar_type() != at::kHalf && x2.scalar_type() != at::kBFloat16)
    return composed("the fused kernel is float16/bfloat16 only");
  if (M == 0 || N == 0 || K == 0) return composed("nothing to multiply");
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  if (M > kMax || N > kMax || K > kMax) return composed("a size of 2^31 or more");
  if (!rows16(x2) || !rows16(w_gate) || !rows16(w_up))
    return composed("x's rows and the weights' must be k-contiguous, their own (not broadcast) and 16-byte aligned "
                    "(row-major, K a multiple of 8)");
  if (N % 8 != 0) return composed("N must be a multiple of 8 (the output's rows 16-byte aligned for the TMA store)");
  const int64_t tiles128 = ((M + 127) / 128) * ((N + 127) / 128);
  if (tiles128 >= d.num_sms)
    return GatedPlan{128, "hopper gated tiles of 128 x 128 outputs (a stage: 128 rows of x, 128 of each weight), " +
                              std::to_string(tiles128) + " tiles for " + std::to_string(d.num_sms) +
                              " SMs: act(gate) * up in the epilogue, one rounding"};
  const int64_t tiles64 = ((M + 63) / 64) * ((N + 63) / 64);
  return GatedPlan{64, "hopper gated tiles of 64 x 64 outputs (a stage: 64 rows of x, 64 of each weight), " +
                           std::to_string(tiles64) + " tiles: fewer 128 x 128 tiles (" + std::to_string(tiles128) +
                           ") than SMs (" + std::to_string(d.num_sms) + "); act(gate) * up in the epilogue, one "
                           "rounding"};
}

std::string gated_json(const GatedPlan& plan, const at::Tensor& x2, const at::Tensor& w_gate,
                       const std::string& device) {
  std::ostringstream os;
  os << "{\"kernel\": \""
     << (plan.bm == 128 ? "hopper_gated_128x128x64" : plan.bm == 64 ? "hopper_gated_64x64x64" : "composed")
     << "\", \"device\": \"" << device << "\", \"M\": " << x2.size(0) << ", \"N\": " << w_gate.size(0)
     << ", \"K\": " << x2.size(1) << ", \"dtype\": \"" << dtype_str(x2.scalar_type()) << "\", \"reason\": \""
     << json_escape(plan.why) << "\"}";
  return os.str();
}
}  // namespace

at::Tensor gated_linear_cuda(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up,
                             std::optional<c10::string_view> activation) {
  const Activation act = check_gated_inputs(x, w_gate, w_up, activation);
  const c10::cuda::CUDAGuard guard(x.device());
  const at::Tensor x2 = linear_rows(x);
  const GatedPlan plan = gated_plan(x2, w_gate, w_up, device_info(x.get_device()));
  if (plan.bm == 0) return gated_composite(x, w_gate, w_up, activation);
  at::Tensor out = at::empty({x2.size(0), w_gate.size(0)}, x.options());
  launch_hopper_gated(plan.bm, x2, w_gate, w_up, out, act);
  return linear_output(out, x, w_gate.size(0));
}

std::string explain_gated(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up,
                          std::optional<c10::string_view> activation, std::optional<int64_t> sm,
                          std::optional<int64_t> num_sms) {
  check_gated_inputs(x, w_gate, w_up, activation);
  const at::Tensor x2 = linear_rows(x);
  if (x.device().is_cuda()) {
    TORCH_CHECK(!sm && !num_sms, "tilelab::_explain_gated: sm and num_sms describe a GPU for CPU tensors; a CUDA "
                                 "tensor's device is its own");
    const c10::cuda::CUDAGuard guard(x.device());
    const DeviceInfo& d = device_info(x.get_device());
    return gated_json(gated_plan(x2, w_gate, w_up, d), x2, w_gate, d.label());
  }
  if (!sm && !num_sms) return gated_json(GatedPlan{0, "CPU tensors: two tiled_linear calls (the CPU kernel) and "
                                                        "their product"}, x2, w_gate, "cpu");
  TORCH_CHECK(sm && num_sms, "tilelab::_explain_gated: give both sm (major*10 + minor, e.g. 90) and num_sms (>= 1) "
                             "to describe a GPU");
  const DeviceInfo d = described_device("_explain_gated", *sm, *num_sms, std::nullopt);
  return gated_json(gated_plan(x2, w_gate, w_up, d), x2, w_gate, "described");
}

}  // namespace tilelab
