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
isa::Program make_rowwise(const RowwiseSpec& spec, const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
