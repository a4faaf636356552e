#pragma once
// Host-side helpers shared by the CUDA ops (tiled_mm.cu, batched.cu); defined
// in tiled_mm.cu, next to the family switch.
#include <cuda_runtime.h>

#include "configs.h"
#include "gemm_args.h"

namespace tilelab {

// Cached properties of CUDA device `index` (what the chooser and the override
// validation look at).
const DeviceInfo& device_info(int index);

// Launch the kernel of table row `cfg` for problem `p` on `stream` (the
// family launchers check the launch).
void launch(const KernelConfig& cfg, const GemmProblem& p, cudaStream_t stream);

}  // namespace tilelab
