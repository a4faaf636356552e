#pragma once
// Split-K on the host: the slices into a workspace, then the reduction
// (split_reduce.cu). The chooser sets GemmProblem::splits, for the families
// whose kernels take a k-range from the scheduler (launch.h, family_splits_k).
#include "../gemm.h"
#include "table.h"

namespace tilelab {

// Runs row's kernel on p.splits slices of K into a fp32 workspace, then adds
// them in order with p's bias and activation into p.c.
void split_k_gemm(const KernelConfig& row, const GemmProblem& p);

}  // namespace tilelab
