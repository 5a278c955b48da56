// int64 tensors on a chip whose vector unit computes in 32 bits: their int32 word pairs (low,
// high) narrowed to int32 values, each checked on the chip (high word = the low word's sign, and
// |value| below a bound the consuming ops stay exact under). A value that fails traps, so int64
// math is either exact or an error, never a wrapped answer.
#pragma once

#include <cstdint>

#include "isa/program.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

// Kernel arguments: words ([n, 2] int32), out ([n] int32), then the count n and the largest
// magnitude allowed, the bound less one (scalars).
isa::Program make_int64_narrow(const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
