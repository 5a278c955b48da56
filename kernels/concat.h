// torch.cat of dense tensors along one dim: each input is a [outer, width_i] block of the
// [outer, total] output (width = its extent along the dim times the trailing elements), moved by
// DMA: a dense gather into VMEM, a strided write-back into its columns of the output.
#pragma once

#include <cstdint>
#include <vector>

#include "isa/program.h"
#include "kernels/dtype.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

struct ConcatSpec {
  int64_t outer = 1;            // product of the dims before the cat dim
  std::vector<int64_t> widths;  // per input: its cat-dim extent times the trailing dims' product
  DType dtype = DType::F32;
};

// Kernel arguments: the inputs in order, then the output.
isa::Program make_concat(const ConcatSpec& spec, const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
