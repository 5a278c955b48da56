// Materialises a strided view: dst (dense, row-major) = src viewed with (sizes, strides, offset).
// Pure DMA: 2-D strided gathers HBM -> VMEM, contiguous write-backs VMEM -> HBM. Transposes,
// permutes, slices, expands (stride 0) and every other torch view become dense this way.
#pragma once

#include <cstdint>
#include <vector>

#include "isa/program.h"
#include "kernels/dtype.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

struct StridedCopySpec {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // elements; 0 repeats (expand)
  int64_t offset = 0;            // elements from the start of the source buffer
  DType dtype = DType::F32;
};

// Kernel arguments: the source buffer, the dense destination.
isa::Program make_strided_copy(const StridedCopySpec& spec, const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
