// Flat indices on the chip: element i of the output is i, as f32 (exact below 2^24) or i32. What
// arange, triangular masks, argmax and pooling's positions are built from; start and step are
// elementwise ops that fuse into the consumers.
#pragma once

#include "isa/program.h"
#include "kernels/codegen/dtype.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

// Kernel arguments: the output, then the element count (a scalar).
isa::Program make_iota(DType out, const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
