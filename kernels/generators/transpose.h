// The strided copy of a transposed view (x.t(), k.transpose(-1, -2), a permute that swaps the two
// innermost dims): dst[o, p, q] = src[offset + outer(o) + q * pitch + p]. Moved in 128x128 tiles:
// each strip of tiles arrives by one 2-D DMA of source rows, each tile is turned over in the
// cross-lane unit (vtrans) and the strip leaves by one 2-D DMA, instead of one DMA per
// single-element column as the general strided copy would need. plan_strided_copy picks this
// kernel when a view has that shape.
#pragma once

#include <cstdint>
#include <vector>

#include "isa/program.h"
#include "kernels/codegen/dtype.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

struct TransposeSpec {
  std::vector<int64_t> outer_sizes, outer_strides;  // batch dims (any strides, elements)
  int64_t p = 1, q = 1;  // dst is [outer..., p, q]; source element (q, p) sits at q * pitch + p
  int64_t pitch = 1;     // elements between consecutive source rows (>= 1)
  int64_t offset = 0;    // elements from the start of the source buffer
  DType dtype = DType::F32;
};

// The launch scalars of a transpose: offset, p, q, pitch, the outer sizes, the outer strides.
// Throws KernelError for empty or oversized views and values that do not fit 32 bits.
std::vector<int32_t> transpose_scalars(const TransposeSpec& spec);

// Kernel arguments: the source buffer, the dense destination, then transpose_scalars(). One
// program serves every transpose of `outer_rank` batch dims and this dtype.
isa::Program make_transpose(DType dtype, int outer_rank, const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
