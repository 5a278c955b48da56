// Reductions over the leading axis: out[c] = reduce over r of x[r, c] (torch's sum / mean / amax /
// amin over dim 0, a bias's gradient summed over tokens). Column strips stream through VMEM in
// double-buffered row blocks; each strip's partial results stay in vregs (8 rows per vreg, one
// per sublane) until its last block, then one cross-sublane reduction finishes them. No
// transpose first, as a row kernel over permuted data would need.
#pragma once

#include <cstdint>
#include <vector>

#include "isa/program.h"
#include "kernels/codegen/dtype.h"
#include "kernels/generators/rowwise.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

struct ColumnReduceSpec {
  RowOp op = RowOp::Sum;  // Sum, Mean, Max or Min
  DType in_dtype = DType::F32, out_dtype = DType::F32;  // f32 or bf16 (accumulation is f32)
  int64_t cols = 1;       // sizes its strips (up to 1024 columns wide); any column count runs
};

// The launch scalars: rows and columns (each at least 1).
std::vector<int32_t> column_reduce_scalars(const ColumnReduceSpec& spec, int64_t rows, int64_t cols);

// Kernel arguments: x ([rows, cols], row-major), out ([cols]), then column_reduce_scalars().
isa::Program make_column_reduce(const ColumnReduceSpec& spec, const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
