#pragma once
// Split-K on the host: the slices into a workspace, then the reduction
// (split_reduce.cu). The chooser sets GemmProblem::splits; only families whose
// kernels read their k-range from the scheduler (family_splits_k) take it.
#include "../gemm.h"
#include "table.h"

namespace tilelab {

// Whether the family's kernels compute a split's k-tiles (scheduler.cuh).
constexpr bool family_splits_k(Family f) {
  return f == Family::Hopper || f == Family::TensorCore || f == Family::Blocked;
}

// Runs row's kernel on p.splits slices of K into a fp32 workspace, then adds
// them in order with p's bias and activation into p.c.
void split_k_gemm(const KernelConfig& row, const GemmProblem& p);

}  // namespace tilelab
