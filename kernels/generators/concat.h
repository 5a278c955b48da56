// torch.cat of dense tensors along one dim: each input is a [outer, width_i] block of the
// [outer, total] output (width = its extent along the dim times the trailing elements), moved by
// DMA: a dense gather into VMEM, a strided write-back into its columns of the output. The outer
// count and the widths are launch scalars: one program per dtype and number of inputs (a KV cache
// growing by a token, or a cat along the sequence, reuses it at every length).
#pragma once

#include <cstdint>
#include <vector>

#include "isa/program.h"
#include "kernels/codegen/dtype.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

struct ConcatSpec {
  int64_t outer = 1;            // product of the dims before the cat dim
  std::vector<int64_t> widths;  // per input: its cat-dim extent times the trailing dims' product
  DType dtype = DType::F32;
};

// The launch scalars: outer, then each input's width. Throws KernelError for outputs too large
// for one launch.
std::vector<int32_t> concat_scalars(const ConcatSpec& spec);

// Kernel arguments: `inputs` input buffers in order, the output, then concat_scalars().
isa::Program make_concat(DType dtype, int inputs, const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
