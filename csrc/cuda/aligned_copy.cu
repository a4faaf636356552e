// padded_rows (host.h): aligned_copy.h's row copy as a function of the host path, for autograd.cpp.
#include "aligned_copy.h"
#include "host.h"

namespace tilelab {

at::Tensor padded_rows(const at::Tensor& t) {
  TORCH_CHECK(t.is_cuda() && t.dim() == 2 && t.stride(1) == 1, "tilelab: internal error: padded_rows takes a 2-D "
              "CUDA tensor with unit stride along its rows");
  const int64_t ld_pad = padded16(t.size(1), t.element_size());
  at::Tensor rows = at::empty({t.size(0), ld_pad}, t.options());
  if (t.numel() > 0) pad_rows(t.data_ptr(), t.scalar_type(), 1, t.size(0), t.size(1), t.stride(0), 0,
                              rows.data_ptr(), ld_pad);
  return rows.narrow(1, 0, t.size(1));
}

}  // namespace tilelab
