// A CPU 0-dim tensor (a wrapped Python number, or a scalar tensor torch lets stand beside device
// tensors) passed where a tensor goes: recorded as a constant, never moved to the chip. Layout
// decisions and op recording both ask it.
#pragma once

#include <ATen/ATen.h>

namespace vtpu::bridge {

inline bool is_cpu_scalar(const at::Tensor& t) { return t.is_cpu() && t.dim() == 0; }

}  // namespace vtpu::bridge
