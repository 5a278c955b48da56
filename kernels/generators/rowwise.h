// Row-wise kernels over [rows, cols] (the last axis): reductions (sum, mean, max, min, var),
// softmax, log_softmax, layer_norm and rms_norm. Each row's values come from an elementwise
// prologue over the inputs (so softmax(x * scale + mask) or sum(x * x) is one kernel).
#pragma once

#include "isa/program.h"
#include "kernels/generators/row_spec.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

// Kernel arguments: the prologue inputs, then weight and bias if present, the output, then
// stream_scalars() (kernels/codegen/operand.h).
// Reductions over rows of at most kMaxNarrowRowCols columns run as transposed blocks
// (rowwise_narrow.cc) when make_rowwise is given a spec of narrow_row_program_cols columns.
isa::Program make_rowwise(const RowwiseSpec& spec, const sim::ChipConfig& chip);

inline constexpr int64_t kMaxNarrowRowCols = 64;

// Whether the narrow row kernel computes `spec` (sum, mean, max, min over Full or Scalar inputs)
// at its columns, and the columns (32 or 64) its program for rows of `cols` is generated for.
bool narrow_rows_serve(const RowwiseSpec& spec);
int64_t narrow_row_program_cols(int64_t cols);
isa::Program make_narrow_row_reduction(const RowwiseSpec& spec, const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
