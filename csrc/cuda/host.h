#pragma once
// The CUDA side of the one host path (host.cpp): the ops in ops_cuda.cpp are
// thin wrappers around gemm_cuda().
#include <ATen/ATen.h>
#include <c10/util/string_view.h>

#include <optional>
#include <string>
#include <tuple>

#include "../activation.h"

namespace tilelab {

// out = act(a @ b (+ bias)): validate (op names the op in errors), choose the row
// (or validate the user's override, also when there is nothing to compute),
// launch on the current stream of the operands' device. `batched`: 3-D
// operands (tiled_bmm), else 2-D; bias may be null.
at::Tensor gemm_cuda(const char* op, const at::Tensor* bias, const at::Tensor& a, const at::Tensor& b,
                     bool batched, Activation act, std::optional<c10::string_view> variant,
                     std::optional<int64_t> tile);

// What gemm_cuda would run for a, b (2-D: tiled_mm; 3-D: tiled_bmm; with a bias and/or an activation:
// tiled_addmm's or tiled_linear's problem), and why, as JSON (tilelab_torch.explain).
std::string explain_cuda(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& bias,
                         std::optional<c10::string_view> activation, std::optional<c10::string_view> variant,
                         std::optional<int64_t> tile);

// The same for a described device (compute capability sm, num_sms SMs, mem_gbps of DRAM bandwidth, unset: an
// H200's) on CPU tensors: the dispatcher's rules without a GPU (tests/test_dispatch.py). What gemm_cuda would
// run there.
std::string explain_described(const at::Tensor& a, const at::Tensor& b, int64_t sm, int64_t num_sms,
                              const std::optional<at::Tensor>& bias, std::optional<c10::string_view> activation,
                              std::optional<c10::string_view> variant, std::optional<int64_t> tile,
                              std::optional<double> mem_gbps);

// _tiled_linear_pre on CUDA tensors: (act(y), y) for y = F.linear(x, weight, bias), both stored by the hopper
// kernel's epilogue where the chosen row can (hopper_aux_ok), else y from gemm_cuda and torch's activation.
std::tuple<at::Tensor, at::Tensor> linear_pre_cuda(const at::Tensor& x, const at::Tensor& weight,
                                                   const std::optional<at::Tensor>& bias,
                                                   c10::string_view activation, std::optional<c10::string_view> variant,
                                                   std::optional<int64_t> tile);

// tiled_gated_linear on CUDA tensors: the fused hopper kernel where gated_plan allows it, else the composed form
// (gated.h).
at::Tensor gated_linear_cuda(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up,
                             std::optional<c10::string_view> activation);

// Which of the two tiled_gated_linear runs for these operands, and why, as JSON: on their CUDA device, or for
// CPU tensors on a described GPU (sm, num_sms; both unset: the CPU's composed form).
std::string explain_gated(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up,
                          std::optional<c10::string_view> activation, std::optional<int64_t> sm,
                          std::optional<int64_t> num_sms);

// t (2-D, on the current CUDA device, unit stride along its rows) copied into rows padded to 16 bytes, as a view
// of their first t.size(1) columns: what every launcher reads in place (aligned_copy.h's pad_rows, the copy
// they would each make). For a gradient two products read (autograd.cpp). In aligned_copy.cu.
at::Tensor padded_rows(const at::Tensor& t);

}  // namespace tilelab
