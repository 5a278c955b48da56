// The strided copy of a transposed view (x.t(), k.transpose(-1, -2), a permute that swaps the two
// innermost dims): dst[o, p, q] = src[offset + outer(o) + q * pitch + p]. Moved in 128x128 tiles:
// each tile arrives by one 2-D DMA of source rows, is turned over in the cross-lane unit (vtrans)
// and leaves by one 2-D DMA, instead of one DMA per single-element column as the general strided
// copy would need. make_strided_copy picks this kernel when a view has that shape.
#pragma once

#include <cstdint>
#include <vector>

#include "isa/program.h"
#include "kernels/dtype.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

struct TransposeSpec {
  std::vector<int64_t> outer_sizes, outer_strides;  // batch dims (any strides, elements)
  int64_t p = 1, q = 1;  // dst is [outer..., p, q]; source element (q, p) sits at q * pitch + p
  int64_t pitch = 1;     // elements between consecutive source rows (>= 1)
  int64_t offset = 0;    // elements from the start of the source buffer
  DType dtype = DType::F32;
};

// Kernel arguments: the source buffer, the dense destination.
isa::Program make_transpose(const TransposeSpec& spec, const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
