#pragma once
// Split-K on the host: the slices into a workspace, then the reduction
// (split_reduce.cu). The chooser sets GemmProblem::splits, for the families
// whose kernels take a k-range from the scheduler (launch.h, family_splits_k).
#include <ATen/ATen.h>

#include <string>

#include "../gemm.h"
#include "table.h"

namespace tilelab {

// How p's slices of K on row are added:
//   Pass: a second pass over fp32 slabs of the whole output (split_reduce.cu);
//   Kernel: in the hopper kernel through global memory: where every slice is a block of one wave (slices x tiles
//     <= SMs) and C takes the TMA store (hopper_fuses_activation), the block of slice 0 reads the others' sums of
//     its tile (hopper::SliceSums), wherever that is cheaper than the second pass by the two ways' measured costs
//     and the tiles are at least half full of rows.
// The testing hook (set_split_reduce_override) aside. The chooser decides it once, with its reason
// (Choice::reduce), and split_k_gemm goes by that. (The chooser's est_ns decides whether to split at all by its own,
// older estimate of the second pass, second_pass_est_ns, the one its rules were measured with, and ranks split
// counts by the way that will add them, reduce_est_ns.)
enum class SplitWay { Pass, Kernel };
SplitWay split_reduce_way(const KernelConfig& row, const GemmProblem& p, int64_t splits, int64_t sms);

// The chooser's estimate of a second pass (est_ns decides with it whether to split, whichever way then adds the
// slices): a launch plus writing and reading s fp32 slabs of the output.
double second_pass_est_ns(const GemmProblem& p, int64_t splits);
// The cost est_ns counts for adding p's slices on row the way split_reduce_way adds them: the second pass's
// estimate, or the kernel's hand-over of each slice past the first.
double reduce_est_ns(const KernelConfig& row, const GemmProblem& p, int64_t splits, int64_t sms);

// A workspace of `floats` fp32 values on the current device, from PyTorch's caching allocator (no
// synchronisation, CUDA-graph capturable): the second pass's slabs, the in-kernel hand-over's slots.
at::Tensor fp32_workspace(int64_t floats);

// Testing hook (torch.ops.tilelab._set_split_reduce): "kernel" adds the slices in
// the kernel through global memory wherever it can (else by a second pass), "pass"
// always in the second pass, "" goes by cost (split_reduce_way).
void set_split_reduce_override(const std::string& how);
// Whether that hook forces either way (the chooser's cache stands aside then).
bool split_reduce_forced();

// Runs row's kernel on p.splits slices of K and adds them in order with p's
// bias and activation into p.c, the way the chooser decided (split_reduce_way):
// in the kernel, or into a fp32 workspace, then a second pass.
void split_k_gemm(const KernelConfig& row, const GemmProblem& p, SplitWay way);

}  // namespace tilelab
