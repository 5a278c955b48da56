// Materialises a strided view: dst (dense, row-major) = src viewed with (sizes, strides, offset).
// Pure DMA: 2-D strided gathers HBM -> VMEM, contiguous write-backs VMEM -> HBM. Transposes,
// permutes, slices, expands (stride 0) and every other torch view become dense this way.
//
// Sizes, strides and the offset are launch scalars: a program depends only on the view's
// structure (its kind, the number of outer dims, the dtype), so one program copies the head split
// of every sequence length and every q/k/v slice of a fused projection.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "isa/program.h"
#include "kernels/codegen/dtype.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

struct StridedCopySpec {
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;  // elements; 0 repeats (expand)
  int64_t offset = 0;            // elements from the start of the source buffer
  DType dtype = DType::F32;
};

enum class CopyKind : uint8_t {
  Rows,       // the innermost dim is contiguous: each DMA moves rows of it
  Elements,   // it is not: each DMA moves single elements
  Transpose,  // the two innermost dims are swapped: 128x128 tiles through vtrans (kernels/generators/transpose.h)
};

// What a copy program is generated for; copies with equal shapes share a program.
struct CopyShape {
  CopyKind kind = CopyKind::Rows;
  int outer_rank = 0;            // dims decoded per gather (Transpose: batch dims)
  DType dtype = DType::F32;
  uint64_t staging_bytes = 0;    // Rows / Elements: VMEM per staging buffer
  std::string signature() const;
};

struct CopyPlan {
  CopyShape shape;
  std::vector<int32_t> scalars;  // the launch's scalar arguments, after src and dst
};

// Validates the view and decides how it is copied. Throws KernelError for views no kernel copies.
CopyPlan plan_strided_copy(const StridedCopySpec& spec, const sim::ChipConfig& chip);

// Kernel arguments: the source buffer, the dense destination, then CopyPlan::scalars.
isa::Program make_strided_copy(const CopyShape& shape, const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
