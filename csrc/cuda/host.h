#pragma once
// Host-side helpers shared by the CUDA ops (tiled_mm.cu, batched.cu); defined
// in tiled_mm.cu, next to the family switch.
#include <c10/core/ScalarType.h>
#include <c10/util/string_view.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <optional>

#include "../checks.h"
#include "configs.h"
#include "gemm_args.h"

namespace tilelab {

// Cached properties of CUDA device `index` (what the chooser and the override
// validation look at).
const DeviceInfo& device_info(int index);

// The chooser's view of an M x N x K product with these operand layouts. TF32
// is allowed exactly when torch.mm would allow it (allowTF32CuBLAS).
Problem make_problem(int64_t M, int64_t N, int64_t K, c10::ScalarType dtype, bool a_row_major,
                     bool b_row_major);

// select_kernel on CUDA device `device`: the user's override validated against
// the table, or the chooser's pick.
Choice choose_for(const Problem& pr, int device, std::optional<c10::string_view> variant,
                  std::optional<int64_t> tile);

// The kernel arguments of one 2-D product out = A @ B (out a fresh contiguous
// (M, N) tensor), no bias, batch 1; callers add a bias or batch strides.
GemmProblem gemm_problem(const Problem& pr, const Operand& a, const Operand& b, at::Tensor& out);

// Launch the kernel of table row `cfg` for problem `p` on the current CUDA
// stream of the current device (the family launchers check the launch).
void launch(const KernelConfig& cfg, const GemmProblem& p);

}  // namespace tilelab
