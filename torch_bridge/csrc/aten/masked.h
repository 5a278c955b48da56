// x[mask] for a boolean mask over x's leading dims, on the chip (see masked.cc).
#pragma once

#include <ATen/ATen.h>

#include <optional>

#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {

// The rows of self the mask selects ([count, self's other dims]); nullopt when the mask is not a
// device bool mask over self's leading dims within the compaction limit, or self's dtype has no
// kernels (the caller falls back).
std::optional<at::Tensor> masked_rows(const at::Tensor& self, const at::Tensor& mask);

}  // namespace vtpu::bridge
